//! `noticectl send FILE`: the whole send path on the embedded default (SQLite ledger, file outbox).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use notice_ledger::clock::{Clock, PinnedClock, SystemClock};
use notice_ledger::keyring::KeyRing;
use notice_ledger::ledger::ClaimLedger;
use notice_ledger::mailer::outbox::FileOutbox;
use notice_ledger::rate::RateLimits;
use notice_ledger::{
    DeliverContext, Mode, NoticeSecret, NoticeSender, Outcome, QueueAction, QueuePolicy, WindowPolicy,
};
use notice_setup::assemble::{assemble, GateClock, SendConfig, SenderPorts};
use notice_setup::config;
use notice_texts::Renderer;

use crate::exit::Exit;
use crate::input::{read_items, InputItem};
use crate::ledger_target::{LedgerArg, LedgerTarget};
use crate::local::StateDir;
use crate::notices_arg::ConfigArg;

/// One local send's limit (writing to the file outbox); the claim lifetime is checked against it.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(clap::Args, Debug)]
pub(crate) struct SendArgs {
    /// JSON Lines of job bodies, or a Lambda SQS event JSON.
    file: PathBuf,
    #[command(flatten)]
    ledger: LedgerArg,
    /// From address written into the outbox messages.
    #[arg(long, env = "NOTICE_FROM", default_value = "Billing <billing@example.com>")]
    from: String,
    /// Jobs in flight at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    concurrency: u16,
    /// Pretend it is this instant — YYYY-MM-DD (midnight UTC), YYYY-MM-DDTHH:MM (UTC) or RFC 3339 —
    /// for the send windows and every time the run writes to the ledger: rehearsals and demos.
    #[arg(long, value_parser = crate::clock::parse_now)]
    now: Option<DateTime<Utc>>,
    #[command(flatten)]
    config: ConfigArg,
    /// `enforce` (default) or `shadow`.
    #[arg(long, env = "NOTICE_MODE", default_value = "enforce")]
    mode: Mode,
}

pub(crate) async fn run(state_dir: PathBuf, args: SendArgs) -> anyhow::Result<ExitCode> {
    notice_ledger::address::parse_sender(&args.from).map_err(|e| anyhow!("--from (NOTICE_FROM) {e}"))?;
    let items = read_items(&args.file)?;
    // Everything that can refuse the run is judged before the state directory is made, so a
    // refused `send` leaves no directory, secret or empty ledger behind: the configuration (loaded
    // and checked once here; its manage links are made below, with the real secret), the rate
    // limits, the claim lifetime and the ledger's address.
    let notices = args
        .config
        .texts(&KeyRing::from(NoticeSecret::new("noticectl send: links made after the secret")?))?;
    config::rate_limits_from_env()?;
    notice_setup::settings::claim_lifetime_from_env(SEND_TIMEOUT)?;
    notice_setup::secret::source_from_env()?;
    let target = args.ledger.target(&state_dir)?;
    let state = StateDir::open(&state_dir)?;
    let secret = state.secret().await?;
    let (sender, texts, limits) = local_sender(&args, &state, (secret, notices), &target).await?;
    let now = sender.now();
    eprintln!(
        "noticectl: {} job(s) from {} · ledger {} · outbox {} · texts {} · mode {} · rate {}",
        items.len(),
        args.file.display(),
        target.describe(),
        state.outbox_dir().display(),
        texts,
        if args.mode == Mode::Shadow { "shadow" } else { "enforce" },
        limits.as_ref().map_or("off".to_owned(), |l| l.describe())
    );
    let tally = deliver_all(items, &sender, now, args.concurrency).await;
    Ok(summarize(tally))
}

/// The sender of a local run — this ledger, the file outbox, the configuration's texts and
/// policy, the rate limits from the environment — with the name and version of its texts and
/// those limits, for the banner. `notices` is the configuration already loaded and checked; its
/// manage links are made here, from `secret`.
async fn local_sender(
    args: &SendArgs,
    state: &StateDir,
    (secret, notices): (KeyRing, (Arc<Renderer>, WindowPolicy)),
    target: &LedgerTarget,
) -> anyhow::Result<(Arc<NoticeSender>, String, Option<RateLimits>)> {
    // A local run is a sender: a ledger without a key check gets this secret's.
    let (opened, _) = target.open_checked(&secret, true).await?;
    let limits = config::rate_limits_from_env()?;
    let ledger: Arc<dyn ClaimLedger> = opened.ledger;
    let outbox = FileOutbox::new(state.outbox_dir(), &args.from)
        .with_context(|| state.outbox_dir().display().to_string())?;
    let (renderer, policy) = notices;
    let renderer = Arc::new(Renderer::new(renderer.config().clone(), config::links_from_env(&secret)?));
    let texts = format!("{} {}", renderer.config().manifest().name, renderer.config().version().short());
    let config = SendConfig {
        renderer,
        secret,
        mode: args.mode,
        policy,
        send_timeout: SEND_TIMEOUT,
        claim_lifetime: notice_setup::settings::claim_lifetime_from_env(SEND_TIMEOUT)?,
        // The ledger's own buckets (the SQLite file locally), shared with every process on it; on
        // the real clock: --now pins the send windows and the rows, never the shared buckets.
        rate_limits: limits.clone(),
        park_spread: Duration::ZERO,
        gate_clock: GateClock::Wall,
        redirect_all_mail_to: config::redirect_from_env()?,
    };
    // No parker: a local run answers an early job `deferred` and leaves it to the next run.
    let ports = SenderPorts { ledger, buckets: opened.buckets, mailer: Arc::new(outbox), parker: None };
    // With --now the sender's clock is pinned: every row this run writes carries that time, its
    // commits included.
    let clock: Arc<dyn Clock> = match args.now {
        Some(now) => Arc::new(PinnedClock(now)),
        None => Arc::new(SystemClock),
    };
    let sender = Arc::new(assemble(config, ports).sender.with_clock(clock));
    Ok((sender, texts, limits))
}

/// Every job of the file delivered, up to `concurrency` at once, each line printed in input
/// order as its outcome is counted.
async fn deliver_all(
    items: Vec<InputItem>,
    sender: &Arc<NoticeSender>,
    now: DateTime<Utc>,
    concurrency: u16,
) -> Tally {
    // `buffered` keeps input order in the output while up to N jobs run at once.
    let mut results = futures::stream::iter(items)
        .map(|item| {
            let sender = Arc::clone(sender);
            async move {
                let delivery = match item.job() {
                    // An unreadable line never reaches the sender: it is reported, not lost.
                    Err(e) if item.unreadable.is_some() => {
                        notice_ledger::Delivery { key: None, outcome: Outcome::Invalid(e) }
                    }
                    _ => sender.deliver(&item.body, DeliverContext::at(now)).await,
                };
                (item, delivery)
            }
        })
        .buffered(usize::from(concurrency));

    // Results print in input order. A job held by a claim that may still be running — often this
    // run's own copy of the notice — is delivered again once every job here has finished, when the
    // ledger can say more; the lines after it wait for it, so the order holds.
    let mut tally = Tally::default();
    let mut waiting: Vec<(InputItem, notice_ledger::Delivery)> = Vec::new();
    while let Some((item, delivery)) = results.next().await {
        if waiting.is_empty() && !matches!(delivery.outcome, Outcome::InFlight { .. }) {
            tally.report(&item, &delivery);
        } else {
            waiting.push((item, delivery));
        }
    }
    for (item, delivery) in waiting {
        let delivery = match delivery.outcome {
            Outcome::InFlight { .. } => sender.deliver(&item.body, DeliverContext::at(now)).await,
            _ => delivery,
        };
        tally.report(&item, &delivery);
    }
    tally
}

/// The end of the output: what needs attention, the summary line, and the exit code.
fn summarize(tally: Tally) -> ExitCode {
    let Tally { counts, attention } = tally;
    let total: usize = counts.values().sum();
    let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
    // What needs attention is listed last, just above the summary line.
    if !attention.is_empty() {
        println!("needs attention ({}):", attention.len());
        for line in &attention {
            println!("  {line}");
        }
    }
    println!("{total} job(s): {}", if parts.is_empty() { "nothing to do".into() } else { parts.join(", ") });
    if attention.is_empty() {
        return Exit::Ok.into();
    }
    eprintln!(
        "noticectl: {} job(s) need attention (invalid, missed, quarantined, too late, rate-limited, \
         conflicts or ledger errors): listed at the end of the output",
        attention.len()
    );
    // Held by another process's claim that may still be running: neither sent nor decided.
    if let Some(held) = counts.get("in_flight") {
        eprintln!(
            "noticectl: {held} job(s) held by another process's claim still in flight — neither sent nor \
             decided here; run them again after the claim lifetime (NOTICE_CLAIM_LIFETIME_SECS)"
        );
    }
    Exit::Attention.into()
}

/// The run's outcomes so far; each job's line is printed as it is counted, and again at the end
/// when it needs attention.
#[derive(Default)]
struct Tally {
    counts: BTreeMap<&'static str, usize>,
    attention: Vec<String>,
}

impl Tally {
    fn report(&mut self, item: &InputItem, delivery: &notice_ledger::Delivery) {
        let prefix = delivery.key.as_ref().map_or("-", |k| k.prefix()).to_owned();
        let line = format!(
            "{:<16} {prefix:<12}  {:<18} {}",
            item.origin,
            delivery.outcome.label(),
            crate::terminal::escape(&detail(item, &delivery.outcome))
        );
        println!("{line}");
        *self.counts.entry(delivery.outcome.label()).or_default() += 1;
        if needs_attention(&delivery.outcome) {
            self.attention.push(line);
        }
    }
}

/// Outcomes that leave a notice not done, or done wrong: invalid, conflicting or unrenderable
/// input, ledger errors, a missed window, a quarantined or stale claim, a withdraw too late, a
/// rate limit or provider refusal left over, a claim still held. A deferred job (its window
/// opens later) is not: the next run sends it.
fn needs_attention(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Missed { .. }
        | Outcome::Quarantined { .. }
        | Outcome::WithdrawTooLate { .. }
        | Outcome::RateLimited { .. }
        | Outcome::Released { .. }
        | Outcome::Rejected { .. }
        | Outcome::InFlight { .. } => true,
        Outcome::Suppressed { state } => *state == notice_ledger::ledger::RowState::Claimed,
        // What the queue would do with it: dead-lettered (it cannot succeed as it is) or backing
        // off (a failure to retry) — the core's queue policy decides, as for the sender.
        other => matches!(
            QueuePolicy::parking().action_once(other, chrono::Utc::now()),
            QueueAction::DeadLetter | QueueAction::Backoff(_)
        ),
    }
}

fn detail(item: &InputItem, outcome: &Outcome) -> String {
    let text = match outcome {
        Outcome::Sent { message_id } => format!("message {message_id}"),
        Outcome::Suppressed { state } => match state {
            notice_ledger::ledger::RowState::Claimed => "claimed elsewhere and stale: quarantined".into(),
            other => format!("already {other}"),
        },
        Outcome::InFlight { until, .. } => {
            format!(
                "held by a claim still in flight here or elsewhere; send it again after {}",
                until.to_rfc3339()
            )
        }
        Outcome::Deferred { until, .. } => format!("window opens {}", until.to_rfc3339()),
        Outcome::RateLimited { until } => {
            format!("recipient domain over its send rate; back at {}", until.to_rfc3339())
        }
        Outcome::Missed { closed_at } => {
            format!("window closed {} — recorded, not sent", closed_at.to_rfc3339())
        }
        Outcome::Released { class, reason } => format!("provider did not accept ({class}): {reason}"),
        Outcome::Quarantined { reason, .. } => reason.clone(),
        Outcome::Rejected { reason } => reason.clone(),
        Outcome::PayloadConflict { state } => {
            format!("same notice key already {state} with different content: bump `revision` for a corrected notice")
        }
        Outcome::ShadowSent { would_suppress: Some(s), .. } => {
            format!("enforce mode would suppress (already {s})")
        }
        Outcome::ShadowSent { would_suppress: None, .. } => String::new(),
        Outcome::Invalid(e) => e.to_string(),
        Outcome::RenderFailed(e) | Outcome::LedgerUnavailable(e) => e.clone(),
        Outcome::NoTimeLeft => "no time left".into(),
        Outcome::Withdrawn { already: false } => {
            "tombstone written: no copy of this notice will be sent".into()
        }
        Outcome::Withdrawn { already: true } => "already withdrawn".into(),
        Outcome::WithdrawTooLate { state, at } => {
            format!("too late: the notice is {state} since {} — it went out or may have", at.to_rfc3339())
        }
        Outcome::WithdrawNotNeeded { state } => format!("nothing to withdraw: {state}, never sent"),
    };
    match item.attributes.get("replay_batch") {
        Some(batch) => format!("{text} [replay_batch {batch}]"),
        None => text,
    }
}
