//! `noticectl replay` and `noticectl backfill`: bulk work on the ledger, with a dry run first.
//!
//! Replay derives every key of a backlog, looks them up (DynamoDB `BatchGetItem`, 100 keys a call,
//! or the SQLite file), says how many are new — plainly, when the backlog was already delivered —
//! and only then, after confirmation, enqueues the new ones. The ledger would refuse the rest
//! anyway; not enqueueing them keeps the replay cheap and its counts honest.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use chrono::Utc;
use indicatif::{ProgressBar, ProgressStyle};
use notice_ledger::ledger::{Ledger, LedgerRow, Origin, RowState};
use notice_ledger::{Job, NoticeKey};

use crate::input::read_items;
use crate::ledger_target::LedgerTarget;
use crate::local::StateDir;
use crate::queue::{self, Outgoing};

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// JSON Lines of jobs, a Lambda SQS event, or JSON Lines of dumped SQS events.
    #[arg(long = "from")]
    pub from: PathBuf,
    /// sqlite:PATH (default: <state-dir>/ledger.db) or dynamodb:TABLE.
    #[arg(long, env = "NOTICE_LEDGER_URL", hide_env_values = true)]
    pub ledger: Option<String>,
    /// Only count: look every key up and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Reminder queue to enqueue the new jobs to.
    #[arg(long, env = "NOTICE_QUEUE_URL")]
    pub queue_url: Option<String>,
    /// Value of the `replay_batch` message attribute (default: replay-<UTC time>).
    #[arg(long)]
    pub batch_id: Option<String>,
    /// Messages per second to enqueue.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=3000))]
    pub rate: u32,
    /// Skip the confirmation prompt.
    #[arg(long)]
    pub yes: bool,
}

#[derive(clap::Args, Debug)]
pub struct BackfillArgs {
    /// Jobs for notices already delivered (or in flight) before enforcement began.
    #[arg(long = "from")]
    pub from: PathBuf,
    #[arg(long, env = "NOTICE_LEDGER_URL", hide_env_values = true)]
    pub ledger: Option<String>,
    /// Only count what would be written.
    #[arg(long)]
    pub dry_run: bool,
}

/// What a file of jobs amounts to against the ledger.
#[derive(Debug, Default)]
pub struct Census {
    pub jobs: usize,
    pub invalid: Vec<(String, String)>,
    pub repeated_in_file: usize,
    pub in_ledger: BTreeMap<RowState, usize>,
    /// Distinct valid jobs the ledger has no row for (or only a released one): these would send.
    pub new: Vec<(String, Job, NoticeKey)>,
    /// How many of `new` have a released row (a replay sends them; a backfill leaves them).
    pub released_in_new: usize,
}

impl Census {
    fn summary(&self) -> String {
        let states: Vec<String> = self.in_ledger.iter().map(|(s, n)| format!("{s} {n}")).collect();
        format!(
            "{} job(s) · {} invalid · {} repeated in file · in ledger: {} · new: {}",
            self.jobs,
            self.invalid.len(),
            self.repeated_in_file,
            if states.is_empty() { "none".into() } else { states.join(", ") },
            self.new.len()
        )
    }

    /// The plain-language verdict an operator reads at 02:00.
    pub fn verdict(&self) -> String {
        let valid = self.jobs - self.invalid.len();
        let new = self.new.len();
        if new == 0 {
            format!(
                "0 new of {valid}: stop — this backlog was already delivered (or decided); nothing to replay"
            )
        } else if new * 20 < valid {
            format!("{new} new of {valid}: stop — almost all of this backlog was already delivered; replay only if you expected exactly these {new}")
        } else {
            format!("{new} new of {valid} would be enqueued")
        }
    }
}

fn progress(len: usize, what: &str) -> ProgressBar {
    let bar =
        if std::io::stderr().is_terminal() { ProgressBar::new(len as u64) } else { ProgressBar::hidden() };
    if let Ok(style) =
        ProgressStyle::with_template(&format!("{what} {{bar:40}} {{pos}}/{{len}} ({{eta}} left)"))
    {
        bar.set_style(style);
    }
    bar
}

async fn census(
    state_dir: &std::path::Path,
    from: &std::path::Path,
    ledger: &Option<String>,
) -> Result<(Census, LedgerTarget, Arc<dyn Ledger>), String> {
    let items = read_items(from).map_err(|e| e.to_string())?;
    let state = StateDir::open(state_dir).map_err(|e| e.to_string())?;
    let secret = state.secret().map_err(|e| e.to_string())?;
    let target = LedgerTarget::resolve(ledger.as_deref(), &state.root)?;
    let ledger = target.open().await?.ledger;

    let mut census = Census { jobs: items.len(), ..Census::default() };
    let mut seen = HashSet::new();
    let mut candidates = Vec::new();
    for item in items {
        match Job::parse(&item.body) {
            Err(e) => census.invalid.push((item.origin, e.to_string())),
            Ok(job) => {
                let key = job.key(&secret);
                if seen.insert(key.clone()) {
                    candidates.push((item.origin, job, key));
                } else {
                    census.repeated_in_file += 1;
                }
            }
        }
    }
    let bar = progress(candidates.len(), "looking up");
    let mut rows: BTreeMap<NoticeKey, LedgerRow> = BTreeMap::new();
    for chunk in candidates.chunks(100) {
        let keys: Vec<NoticeKey> = chunk.iter().map(|(_, _, k)| k.clone()).collect();
        for row in ledger.get_many(&keys).await.map_err(|e| format!("ledger lookup failed: {e}"))? {
            rows.insert(row.key.clone(), row);
        }
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    for (origin, job, key) in candidates {
        match rows.get(&key).map(|r| r.state) {
            None => census.new.push((origin, job, key)),
            Some(RowState::Released) => {
                census.released_in_new += 1;
                census.new.push((origin, job, key));
            }
            Some(state) => *census.in_ledger.entry(state).or_default() += 1,
        }
    }
    Ok((census, target, ledger))
}

pub async fn replay(state_dir: PathBuf, args: ReplayArgs) -> Result<ExitCode, String> {
    let (census, target, _) = census(&state_dir, &args.from, &args.ledger).await?;
    println!("{} (ledger {})", census.summary(), target.describe());
    for (origin, error) in &census.invalid {
        println!("  {origin}: {error}");
    }
    println!("{}", census.verdict());
    if args.dry_run || census.new.is_empty() {
        if args.dry_run {
            println!("dry run: nothing enqueued");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let queue_url = args.queue_url.ok_or("--queue-url (or NOTICE_QUEUE_URL) is required to enqueue")?;
    let batch_id = args.batch_id.unwrap_or_else(|| format!("replay-{}", Utc::now().format("%Y%m%dT%H%M%SZ")));
    if !args.yes
        && !confirm(&format!(
            "Enqueue {} job(s) to {queue_url} as replay batch {batch_id}?",
            census.new.len()
        ))?
    {
        println!("nothing enqueued");
        return Ok(ExitCode::from(1));
    }
    let jobs: Vec<Outgoing> = census
        .new
        .iter()
        .map(|(origin, job, _)| Outgoing { origin: origin.clone(), body: job.to_value().to_string() })
        .collect();
    let sqs = queue::client().await;
    let bar = progress(jobs.len(), "enqueueing");
    let report = queue::enqueue(&sqs, &queue_url, &jobs, Some(&batch_id), args.rate, &bar).await;
    bar.finish_and_clear();
    println!("enqueued {} of {} as replay batch {batch_id}", report.sent, jobs.len());
    for (origin, error) in &report.failed {
        println!("  NOT enqueued {origin}: {error}");
    }
    Ok(if report.failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

pub async fn backfill(state_dir: PathBuf, args: BackfillArgs) -> Result<ExitCode, String> {
    let (census, target, ledger) = census(&state_dir, &args.from, &args.ledger).await?;
    println!("{} (ledger {})", census.summary(), target.describe());
    for (origin, error) in &census.invalid {
        println!("  {origin}: {error}");
    }
    if args.dry_run {
        println!(
            "dry run: would backfill {} row(s); nothing written ({} released row(s) are left to a replay)",
            census.new.len() - census.released_in_new,
            census.released_in_new
        );
        return Ok(ExitCode::SUCCESS);
    }
    let now = Utc::now();
    let bar = progress(census.new.len(), "backfilling");
    let (mut written, mut existing) = (0usize, 0usize);
    for (_, job, key) in &census.new {
        let row = backfill_row(job, key, now);
        if ledger.backfill(&row).await.map_err(|e| format!("backfill stopped after {written} row(s): {e}"))? {
            written += 1;
        } else {
            existing += 1;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let already: usize = census.in_ledger.values().sum::<usize>() + existing;
    println!("backfilled {written} row(s) as sent; {already} already in the ledger (left as they were)");
    Ok(if census.invalid.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// A `sent` row for a notice delivered before enforcement began. It carries the content digest so
/// a later job with other content for the same key is flagged as a payload conflict.
pub fn backfill_row(job: &Job, key: &NoticeKey, now: chrono::DateTime<Utc>) -> LedgerRow {
    LedgerRow {
        key: key.clone(),
        state: RowState::Sent,
        origin: Origin::Backfill,
        claim_token: None,
        subscription_id: job.identity.subscription_id().to_owned(),
        period_start: job.identity.period_start().format("%Y-%m-%d").to_string(),
        kind: job.identity.kind().as_str().to_owned(),
        revision: job.identity.revision(),
        content_digest: Some(job.content_digest()),
        claimed_at: None,
        updated_at: now,
        message_id: None,
        detail: Some("backfilled: delivered before enforcement".into()),
        delivery_status: None,
        duplicate_message_ids: Vec::new(),
    }
}

pub fn confirm(question: &str) -> Result<bool, String> {
    if !std::io::stdin().is_terminal() {
        return Err("refusing without confirmation: stdin is not a terminal (pass --yes)".into());
    }
    print!("{question} Type 'yes' to continue: ");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).map_err(|e| e.to_string())?;
    Ok(answer.trim() == "yes")
}
