//! `noticectl smoke --stack NAME`: proves a deployed stack works end to end before real jobs
//! arrive. Its jobs go to SES's mailbox simulator (success, bounce, complaint), each enqueued
//! twice, plus a withdraw before its notice's job and an operator replay of a sent one; it waits
//! for the sender and the reconciler, then checks each ledger row and the stack's metrics.
//!
//! It touches only its own identities (`smoke-<time>-…`, a kind and window from the stack's own
//! configuration) and never a customer address, so it is safe on a production stack too; it asks
//! before enqueueing, because its rows stay in the ledger for the retention period.

mod plan;
mod stack;
mod verdict;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use aws_sdk_sqs::types::QueueAttributeName;
use chrono::Utc;
use indicatif::ProgressBar;
use notice_ledger::ledger::{LedgerRow, RowReader};
use notice_ledger::{Job, NoticeKey};
use notice_setup::notices::ConfigSpec;
use serde_json::{json, Value};

use self::plan::{Expect, Plan, COPIES};
use self::stack::{Metrics, StackOutputs};
use self::verdict::{judge, Verdict};
use crate::exit::Exit;
use crate::ledger_target::LedgerTarget;
use crate::terminal::confirm;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Exit codes (docs/operations.md):
  0  every check passed
  1  a check failed or timed out (each is listed with what it saw)
  2  the stack, its secret, its configuration or a service could not be read: nothing enqueued
  3  the confirmation was declined, or refused (no terminal and no --yes): nothing enqueued")]
pub(crate) struct SmokeArgs {
    /// The deployed stack: its outputs name the queue, the ledger table, the key secret, the
    /// notice configuration and the functions.
    #[arg(long)]
    stack: String,
    /// The kind the jobs use (default: the stack's notice configuration's first kind).
    #[arg(long)]
    kind: Option<String>,
    /// Give up after this many seconds: SES's events and CloudWatch's metrics each take a minute
    /// or more to arrive.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Seconds between two looks at the ledger and the metrics.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
    poll: u64,
    /// Read the stack, its secret and its configuration and print the plan; enqueue nothing.
    #[arg(long)]
    dry_run: bool,
    /// Skip the confirmation prompt.
    #[arg(long)]
    yes: bool,
    /// One JSON document with every check.
    #[arg(long)]
    json: bool,
}

/// Everything the run works with, read from the stack before anything is enqueued.
struct Stack {
    outputs: StackOutputs,
    target: LedgerTarget,
    reader: std::sync::Arc<dyn notice_ledger::ledger::Ledger>,
    secret: notice_ledger::keyring::KeyRing,
    secret_id: String,
    config_version: String,
    sdk: aws_config::SdkConfig,
}

pub(crate) async fn run(state_dir: std::path::PathBuf, args: SmokeArgs) -> anyhow::Result<ExitCode> {
    let (stack, config) = read_stack(&state_dir, &args.stack).await?;
    let started = Utc::now();
    let redirect = stack.outputs.redirect.as_deref();
    let plan = Plan::new(&plan::run_name(started), started, &config, args.kind.as_deref(), redirect)?;
    let messages = 1 + plan.probes.len() * COPIES + 1;
    let out = Out { json: args.json };
    out.line(&format!(
        "smoke test of stack {} · ledger {} · key secret {} · notice configuration {}",
        stack.outputs.stack,
        stack.target.describe(),
        stack.secret_id,
        stack.config_version
    ));
    out.line(&format!(
        "  run {} · kind {} · charge {} (window {} h → {} h before it) · {messages} messages: a withdraw, \
         {} jobs × {COPIES} to {}, then a replay",
        plan.run,
        plan.kind,
        plan.charge_at.format("%Y-%m-%dT%H:%MZ"),
        plan.window.opens_hours_before,
        plan.window.closes_hours_before,
        plan.probes.len(),
        plan::SIMULATOR,
    ));
    if let Some(to) = &plan.redirect {
        out.line(&format!(
            "  the stack redirects every notice to {to} (RedirectAllMailTo): one sent probe expects that \
             address's answer ({}), and the bounce and complaint probes are left out",
            plan.sent().next().map_or("-", |p| p.expect.name())
        ));
    }
    if args.dry_run {
        out.line("dry run: nothing enqueued");
        return Ok(Exit::Ok.into());
    }
    if !args.yes
        && !confirm(&format!(
            "Enqueue {messages} messages on {}'s queue (mail only to SES's mailbox simulator; the rows stay \
             in its ledger under {})?",
            stack.outputs.stack, plan.run
        ))?
    {
        eprintln!("noticectl: not confirmed; nothing enqueued");
        return Ok(Exit::SafetyStop.into());
    }

    let checks = Run::new(&stack, &plan, &args).go().await?;
    let failed = checks.iter().filter(|(_, v)| !matches!(v, Verdict::Pass(_))).count();
    let seconds = (Utc::now() - started).num_seconds();
    if args.json {
        let doc = json!({
            "stack": stack.outputs.stack, "run": plan.run, "kind": plan.kind,
            "config_version": stack.config_version, "key_secret": stack.secret_id,
            "checks": checks.iter().map(|(name, v)| json!({"check": name, "verdict": v.label(), "detail": v.text()})).collect::<Vec<_>>(),
            "passed": failed == 0, "seconds": seconds,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        for (name, v) in &checks {
            println!("{}  {name:<11} {}", v.label(), v.text());
        }
        let verdict =
            if failed == 0 { "PASS".to_owned() } else { format!("FAIL ({failed} of {})", checks.len()) };
        println!("verdict: {verdict} · {} checks in {seconds} s", checks.len());
    }
    Ok(Exit::attention_if(failed > 0).into())
}

/// Reads the stack's outputs, its key secret (checked against the ledger's key check), its ledger
/// and the notice configuration its sender is pointed at: every failure here is exit 2 with
/// nothing enqueued.
async fn read_stack(
    state_dir: &std::path::Path,
    name: &str,
) -> anyhow::Result<(Stack, notice_texts::notices::NoticeConfig)> {
    let sdk = notice_setup::aws::load_sdk_config().await;
    let outputs = stack::outputs(&sdk, name).await?;
    let secret = notice_setup::secret::fetch(&sdk, &outputs.key_secret_arn)
        .await
        .with_context(|| format!("cannot read stack {name}'s key secret"))?;
    let target = LedgerTarget::resolve(Some(&format!("dynamodb:{}", outputs.table)), state_dir)?;
    let (opened, check) = target.open_checked(&secret, false).await?;
    let (config, location) =
        notice_setup::notices::load_published(&sdk, &ConfigSpec::Parameter(outputs.config_parameter.clone()))
            .await
            .with_context(|| format!("cannot load stack {name}'s notice configuration"))?;
    let config_version = format!("{} ({location})", config.version().short());
    let stack = Stack {
        outputs,
        target,
        reader: opened.ledger,
        secret,
        secret_id: check.identifier(),
        config_version,
        sdk,
    };
    Ok((stack, config))
}

/// Prints the run's progress lines (stdout, or stderr under `--json` so the document stays whole).
struct Out {
    json: bool,
}

impl Out {
    fn line(&self, text: &str) {
        if self.json {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }
}

/// One smoke run against the stack.
struct Run<'a> {
    stack: &'a Stack,
    plan: &'a Plan,
    sqs: aws_sdk_sqs::Client,
    deadline: Instant,
    timeout: u64,
    poll: Duration,
    spinner: ProgressBar,
    started: Instant,
}

impl<'a> Run<'a> {
    fn new(stack: &'a Stack, plan: &'a Plan, args: &SmokeArgs) -> Self {
        let spinner =
            if std::io::stderr().is_terminal() { ProgressBar::new_spinner() } else { ProgressBar::hidden() };
        Self {
            stack,
            plan,
            sqs: aws_sdk_sqs::Client::new(&stack.sdk),
            deadline: Instant::now() + Duration::from_secs(args.timeout),
            timeout: args.timeout,
            poll: Duration::from_secs(args.poll),
            spinner,
            started: Instant::now(),
        }
    }

    /// The run, step by step; returns every check's verdict, in a fixed order.
    async fn go(&self) -> anyhow::Result<Vec<(String, Verdict)>> {
        // 1. The withdraw first, and its tombstone awaited, so the job that follows meets it.
        let withdrawn = self.plan.probe(Expect::Withdrawn).context("the plan has a withdrawn probe")?;
        self.enqueue(&withdrawn.withdraw(&self.plan.run), None).await?;
        let tombstone = self.wait_for(&[Expect::Withdrawn], "the withdraw's tombstone").await?;
        if let Some((_, v @ Verdict::Fail(_))) = tombstone.first() {
            // Nothing else is enqueued: a stack that does not stop a withdrawn notice must not
            // be sent the notice to find out.
            self.spinner.finish_and_clear();
            return Ok(vec![(Expect::Withdrawn.name().to_owned(), v.clone())]);
        }
        // 2. Every job twice.
        for probe in &self.plan.probes {
            for _ in 0..COPIES {
                self.enqueue(&probe.job, None).await?;
            }
        }
        // 3. The operator's replay of a sent notice, once it is sent.
        let replayed = self.plan.sent().next().context("the plan has a sent probe")?;
        let first = self.wait_sent(replayed).await?;
        if first.is_some() {
            self.enqueue(&replayed.job, Some(&self.plan.run)).await?;
        }
        // 4. Every probe to its end, the replay's copy consumed, the metrics in.
        let all: Vec<Expect> = self.plan.probes.iter().map(|p| p.expect).collect();
        let mut checks = self.wait_for(&all, "the sender and the reconciler").await?;
        checks.push(("replay".to_owned(), self.replay_verdict(replayed, first.as_ref()).await?));
        checks.push(("metrics".to_owned(), self.metrics_verdict().await?));
        self.spinner.finish_and_clear();
        Ok(checks)
    }

    fn key(&self, job: &Value) -> anyhow::Result<NoticeKey> {
        let job = Job::from_value(job, &notice_texts::Icu)
            .map_err(|e| anyhow::anyhow!("the smoke job is invalid: {e}"))?;
        Ok(self.stack.secret.key(&job.identity))
    }

    async fn row(&self, job: &Value) -> anyhow::Result<Option<LedgerRow>> {
        let key = self.key(job)?;
        Ok(self.stack.reader.get(&key).await?)
    }

    async fn enqueue(&self, body: &Value, replay_batch: Option<&str>) -> anyhow::Result<()> {
        let queue = notice_sqs::Producer::new(self.sqs.clone(), &self.stack.outputs.queue_url);
        let body = body.to_string();
        queue.send(notice_sqs::Message { replay_batch, ..notice_sqs::Message::body(&body) }).await.map_err(
            |e| {
                anyhow::Error::new(e).context(format!(
                    "SQS SendMessage to {} (the smoke run stopped)",
                    self.stack.outputs.queue_url
                ))
            },
        )?;
        Ok(())
    }

    /// Looks at the probes' rows until each is settled or the deadline passes.
    async fn wait_for(&self, expects: &[Expect], what: &str) -> anyhow::Result<Vec<(String, Verdict)>> {
        loop {
            let mut verdicts = Vec::with_capacity(expects.len());
            for &expect in expects {
                let probe = self.plan.probe(expect).context("the plan has every probe")?;
                verdicts
                    .push((expect.name().to_owned(), judge(expect, self.row(&probe.job).await?.as_ref())));
            }
            let waiting: Vec<String> = verdicts
                .iter()
                .filter(|(_, v)| !v.is_settled())
                .map(|(name, v)| format!("{name}: {}", v.text()))
                .collect();
            if waiting.is_empty() {
                return Ok(verdicts);
            }
            if Instant::now() >= self.deadline {
                return Ok(verdicts.into_iter().map(|(n, v)| (n, v.timed_out(self.timeout))).collect());
            }
            self.tick(&format!("waiting for {what}: {}", waiting.join(" · ")));
            tokio::time::sleep(self.poll).await;
        }
    }

    /// The probe's row once it is sent (or settled otherwise, or the deadline passed).
    async fn wait_sent(&self, probe: &plan::Probe) -> anyhow::Result<Option<LedgerRow>> {
        loop {
            let row = self.row(&probe.job).await?;
            match &row {
                Some(r) if r.state == notice_ledger::ledger::RowState::Sent => return Ok(row),
                Some(r) if r.state != notice_ledger::ledger::RowState::Claimed => return Ok(None),
                _ if Instant::now() >= self.deadline => return Ok(None),
                _ => {}
            }
            self.tick("waiting for the first send");
            tokio::time::sleep(self.poll).await;
        }
    }

    /// The replayed copy was refused: the queue took it (drained), and the row kept its one
    /// message id.
    async fn replay_verdict(
        &self,
        probe: &plan::Probe,
        first: Option<&LedgerRow>,
    ) -> anyhow::Result<Verdict> {
        let Some(first) = first else {
            return Ok(Verdict::Fail("not replayed: its notice was never sent".into()));
        };
        loop {
            let left = self.queue_depth().await?;
            let row = self.row(&probe.job).await?;
            let Some(row) = row else { return Ok(Verdict::Fail("its row is gone".into())) };
            if row.message_id != first.message_id || !row.duplicate_message_ids.is_empty() {
                return Ok(Verdict::Fail(format!(
                    "the replay was sent again: {:?} then {:?} {:?}",
                    first.message_id, row.message_id, row.duplicate_message_ids
                )));
            }
            if left == 0 {
                return Ok(Verdict::Pass(format!(
                    "refused: the queue drained and the row kept its one message ({})",
                    row.message_id.as_deref().unwrap_or("?")
                )));
            }
            if Instant::now() >= self.deadline {
                return Ok(Verdict::Fail(format!(
                    "timed out after {} s: the queue still holds {left} message(s), so the replay's copy may not \
                     have been taken yet (run the smoke test on a quiet stack)",
                    self.timeout
                )));
            }
            self.tick(&format!("waiting for the queue to drain ({left} left)"));
            tokio::time::sleep(self.poll).await;
        }
    }

    /// Messages on the queue, visible, in flight or delayed.
    async fn queue_depth(&self) -> anyhow::Result<u64> {
        let names = [
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
            QueueAttributeName::ApproximateNumberOfMessagesDelayed,
        ];
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.stack.outputs.queue_url)
            .set_attribute_names(Some(names.to_vec()))
            .send()
            .await
            .map_err(|e| {
                anyhow::Error::new(notice_sqs::queue_error("GetQueueAttributes", &e))
                    .context("cannot read the queue's depth (SQS GetQueueAttributes)")
            })?;
        let attributes = out.attributes();
        Ok(names
            .iter()
            .filter_map(|n| attributes.and_then(|a| a.get(n)).and_then(|v| v.parse::<u64>().ok()))
            .sum())
    }

    /// The metrics the run must show: the sends it made, and no duplicate send or content conflict
    /// (CloudWatch takes EMF documents a minute or more after the invocation).
    async fn metrics_verdict(&self) -> anyhow::Result<Verdict> {
        let metrics = Metrics::new(&self.stack.sdk, self.run_start())?;
        let sent_expected = self.plan.sent().count() as f64;
        let sender = &self.stack.outputs.sender_function;
        let reconciler = &self.stack.outputs.reconciler_function;
        loop {
            let sent = metrics.sum(sender, "NoticesSent").await?;
            let suppressed = metrics.sum(sender, "DuplicatesSuppressed").await?;
            let conflicts = metrics.sum(sender, "PayloadConflicts").await?;
            let duplicates = metrics.sum(reconciler, "DuplicateSendsDetected").await?;
            let seen = format!(
                "NoticesSent {sent} · DuplicatesSuppressed {suppressed} · PayloadConflicts {conflicts} · \
                 DuplicateSendsDetected {duplicates}"
            );
            if duplicates > 0.0 || conflicts > 0.0 {
                return Ok(Verdict::Fail(format!(
                    "{seen}: the stack counted a duplicate send or a conflict"
                )));
            }
            if sent >= sent_expected {
                return Ok(Verdict::Pass(seen));
            }
            if Instant::now() >= self.deadline {
                return Ok(Verdict::Fail(format!(
                    "timed out after {} s: {seen} (the run sent {sent_expected}; are the functions' metrics reaching \
                     CloudWatch?)",
                    self.timeout
                )));
            }
            self.tick(&format!("waiting for the metrics: {seen}"));
            tokio::time::sleep(self.poll).await;
        }
    }

    fn run_start(&self) -> chrono::DateTime<Utc> {
        Utc::now() - chrono::Duration::from_std(self.started.elapsed()).unwrap_or_default()
    }

    fn tick(&self, message: &str) {
        self.spinner.set_message(format!("[{} s] {message}", self.started.elapsed().as_secs()));
        self.spinner.tick();
    }
}
