//! `noticectl quarantine`: look at claims that never got their commit, and close them — by
//! evidence (`resolve --sent`) or by an explicit, audited release that allows a resend.
//!
//! A release refuses while the SES event queue still holds events or its dead-letter queue is not
//! empty (unless `--force`): an event waiting there may be the proof the claim was sent, and
//! releasing it would send the notice a second time.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Context};
use chrono::Utc;
use notice_ledger::ledger::{Ledger, LedgerRow, RowState};
use notice_ledger::NoticeKey;

use crate::exit::{Exit, SafetyStop};
use crate::key_arg::KeyArg;
use crate::ledger_target::{LedgerArg, LedgerTarget};
use crate::operator::OperatorArg;
use crate::terminal::ask;

#[derive(clap::Args, Debug)]
pub(crate) struct QuarantineArgs {
    #[command(flatten)]
    ledger: LedgerArg,
    #[command(subcommand)]
    command: QuarantineCommand,
}

#[derive(clap::Subcommand, Debug)]
enum QuarantineCommand {
    /// List open claims older than a cut-off (default NOTICE_STALE_AFTER_SECS, 15 min).
    List {
        /// Age, e.g. 900s, 15m, 2h, 1d.
        #[arg(long, value_parser = parse_age)]
        older_than: Option<Duration>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// One JSON object per claim instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Record that a quarantined claim was in fact sent (message id from the provider's logs).
    Resolve {
        /// The notice key as printed, or a unique prefix of at least 12 hex characters with or
        /// without its `vN-` (among open claims).
        #[arg(value_parser = KeyArg::parse)]
        key: KeyArg,
        /// The claim was sent (the only resolution this command records).
        #[arg(long, required = true)]
        sent: bool,
        #[arg(long)]
        message_id: String,
        #[command(flatten)]
        operator: OperatorArg,
    },
    /// Release a claim so the notice may be sent again. Only for claims you have established were
    /// never sent: the next redelivery or replay WILL send.
    Release {
        /// The notice key as printed, or a unique prefix of at least 12 hex characters with or
        /// without its `vN-` (among open claims).
        #[arg(value_parser = KeyArg::parse)]
        key: KeyArg,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        operator: OperatorArg,
        /// Skip the confirmation prompt.
        #[arg(long)]
        yes: bool,
        /// Show what would be released, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// The SES event queue the reconciler reads (stack output SesEventsQueueUrl): the release
        /// waits until it is drained.
        #[arg(long, env = "NOTICE_EVENTS_QUEUE_URL")]
        events_queue_url: Option<String>,
        /// Its dead-letter queue (stack output SesEventsDLQUrl): the release waits until it is empty.
        #[arg(long, env = "NOTICE_EVENTS_DLQ_URL")]
        events_dlq_url: Option<String>,
        /// Release even though SES events are still queued, dead-lettered, or cannot be checked.
        #[arg(long)]
        force: bool,
    },
}

/// `900`, `900s`, `15m`, `2h`, `1d`.
fn parse_age(value: &str) -> Result<Duration, String> {
    let value = value.trim();
    let (digits, unit) = value.split_at(value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len()));
    let n: u64 = digits.parse().map_err(|_| format!("{value:?}: want a number with s, m, h or d"))?;
    let per_unit: u64 = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{value:?}: unknown unit {unit:?} (use s, m, h or d)")),
    };
    // Longer than any claim could have waited (and than chrono can subtract from now).
    const MAX_SECS: u64 = 100 * 365 * 86_400;
    match n.checked_mul(per_unit) {
        Some(secs) if secs <= MAX_SECS => Ok(Duration::from_secs(secs)),
        _ => Err(format!("{value:?}: at most 100 years")),
    }
}

pub(crate) async fn run(state_dir: PathBuf, args: QuarantineArgs) -> anyhow::Result<ExitCode> {
    // Who is acting is known before the ledger is opened: a refused action leaves nothing behind.
    let who = match &args.command {
        QuarantineCommand::Resolve { operator, .. } | QuarantineCommand::Release { operator, .. } => {
            Some(operator.who()?)
        }
        _ => None,
    };
    let who = who.unwrap_or_default();
    let target = args.ledger.target(&state_dir)?;
    let ledger = target.open().await?.ledger;
    match args.command {
        QuarantineCommand::List { older_than, limit, json } => {
            list(ledger.as_ref(), &target, older_than, limit, json).await
        }
        QuarantineCommand::Resolve { key, sent: _, message_id, operator: _ } => {
            let key = open_claim(ledger.as_ref(), &key, &target.describe()).await?;
            ledger
                .operator_resolve_sent(&key, &message_id, &who, Utc::now())
                .await
                .context("not resolved")?;
            println!("resolved {key} as sent (message {message_id}) by {who}");
            Ok(Exit::Ok.into())
        }
        QuarantineCommand::Release {
            key,
            reason,
            operator: _,
            yes,
            dry_run,
            events_queue_url,
            events_dlq_url,
            force,
        } => {
            let key = releasable(ledger.as_ref(), &target, &key, &reason).await?;
            let queues = EventQueues { queue: events_queue_url, dlq: events_dlq_url };
            queues.check_drained(&key, target.is_local(), force).await?;
            if dry_run {
                println!("dry run: would release {key}; nothing changed");
                return Ok(Exit::Ok.into());
            }
            if !yes && !confirm(&key)? {
                println!("not released");
                return Ok(Exit::SafetyStop.into());
            }
            ledger.operator_release(&key, &who, &reason, Utc::now()).await.context("not released")?;
            println!("released {key} by {who}: {reason}\nThe next delivery of this notice will send it.");
            Ok(Exit::Ok.into())
        }
    }
}

/// `quarantine list`: the open claims older than `older_than` (default the stale-after age), the
/// oldest `limit` of them one line (or JSON object) each, then how many there are in all.
async fn list(
    ledger: &dyn Ledger,
    target: &LedgerTarget,
    older_than: Option<Duration>,
    limit: usize,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let age = match older_than {
        Some(age) => age,
        None => notice_setup::config::stale_after_from_env()?,
    };
    let now = Utc::now();
    let cut = now - chrono::Duration::from_std(age)?;
    let rows = ledger.open_claims(cut, limit).await?;
    for row in &rows {
        let age_s = row.claimed_at.map(|t| (now - t).num_seconds()).unwrap_or(0);
        if json {
            println!(
                "{}",
                serde_json::json!({"notice_key": row.key.as_str(), "subscription_id": row.subscription_id,
                    "period_start": row.period_start, "kind": row.kind, "revision": row.revision,
                    "claimed_at": row.claimed_at.map(|t| t.to_rfc3339()), "age_seconds": age_s})
            );
        } else {
            println!(
                "{}  {:<20} {:<10} {:<22} rev {:<3} claimed {} ({})",
                row.key,
                row.subscription_id,
                row.period_start,
                row.kind,
                row.revision,
                row.claimed_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
                human_age(age_s)
            );
        }
    }
    let (total, oldest) = ledger.count_open_claims(cut).await?;
    let shown = if total > rows.len() {
        format!(" (showing the oldest {}; raise --limit)", rows.len())
    } else {
        String::new()
    };
    let oldest =
        oldest.map(|t| format!(", oldest {} old", human_age((now - t).num_seconds()))).unwrap_or_default();
    eprintln!(
        "{total} quarantined claim(s) older than {}{oldest}{shown} in {}",
        human_age(age.as_secs() as i64),
        target.describe()
    );
    Ok(Exit::Ok.into())
}

/// The open claim `arg` names, when a release of it may go ahead: a reason given, and the row
/// still an open claim (described for the operator).
async fn releasable(
    ledger: &dyn Ledger,
    target: &LedgerTarget,
    arg: &KeyArg,
    reason: &str,
) -> anyhow::Result<NoticeKey> {
    let key = open_claim(ledger, arg, &target.describe()).await?;
    if reason.trim().is_empty() {
        anyhow::bail!("--reason must say why (it is recorded on the row)");
    }
    let row = ledger.get(&key).await?.with_context(|| format!("{key} has no ledger row"))?;
    if row.state != RowState::Claimed {
        anyhow::bail!(
            "refusing: {key} is {}, not an open claim — only open claims can be released",
            row.state
        );
    }
    describe(&row);
    Ok(key)
}

/// The key `arg` names: given whole, as it is; a prefix, among the open claims (the only rows
/// `resolve` and `release` act on), however recent.
async fn open_claim(ledger: &dyn Ledger, arg: &KeyArg, ledger_name: &str) -> anyhow::Result<NoticeKey> {
    if let Some(key) = arg.full() {
        return Ok(key.clone());
    }
    // Claims a `send --now` rehearsal stamped in the future count too.
    let every = Utc::now() + chrono::Duration::days(100 * 366);
    let claims = ledger.open_claims(every, usize::MAX).await?;
    arg.resolve(claims.iter().map(|row| row.key.as_str()), &format!("open claim in {ledger_name}"))
}

/// The SES event queue and its DLQ, as far as the operator named them.
struct EventQueues {
    queue: Option<String>,
    dlq: Option<String>,
}

impl EventQueues {
    /// Prints that nothing is waiting on the queues, or refuses the release of `key` — a safety
    /// stop while events are pending, an error when the queues are not given or unreadable —
    /// unless `force`.
    async fn check_drained(&self, key: &NoticeKey, local_ledger: bool, force: bool) -> anyhow::Result<()> {
        match self.pending(local_ledger).await {
            Ok(status) => println!("{status}"),
            Err(why) if force => println!("--force: releasing although {why:#}"),
            // Events pending: a safety stop (3). Queues not given or unreadable: 2.
            Err(why) if why.is::<SafetyStop>() => {
                return Err(SafetyStop(format!(
                    "refusing to release {key}: {why:#} — an event there may prove the notice was sent. \
                     Let the reconciler drain the queue (and redrive or inspect the DLQ), then retry; \
                     --force overrides"
                ))
                .into())
            }
            Err(why) => {
                return Err(why.context(format!(
                    "refusing to release {key} (--force overrides; an event on the SES queues may prove the notice was sent)"
                )))
            }
        }
        Ok(())
    }

    /// `Ok(summary)` when nothing is waiting; `Err(why)` when events are queued, dead-lettered or
    /// cannot be counted. A local SQLite ledger has no event stream, so nothing to wait for there
    /// unless queues are named.
    async fn pending(&self, local_ledger: bool) -> anyhow::Result<String> {
        if self.queue.is_none() && self.dlq.is_none() {
            if local_ledger {
                return Ok("no SES event queues given (local ledger): not checked".into());
            }
            anyhow::bail!(
                "the SES event queues cannot be checked: pass --events-queue-url and \
                 --events-dlq-url (or NOTICE_EVENTS_QUEUE_URL / NOTICE_EVENTS_DLQ_URL)"
            );
        }
        let (Some(queue), Some(dlq)) = (&self.queue, &self.dlq) else {
            anyhow::bail!(
                "both the SES event queue and its DLQ must be checked: pass both \
                 --events-queue-url and --events-dlq-url"
            );
        };
        let sqs = crate::queue::client().await;
        let events = queue_depth(&sqs, queue).await?;
        let dead = queue_depth(&sqs, dlq).await?;
        if events.total() > 0 {
            return Err(SafetyStop(format!("the SES event queue still holds {events}")).into());
        }
        if dead.total() > 0 {
            return Err(SafetyStop(format!("the SES event dead-letter queue holds {dead}")).into());
        }
        Ok("SES event queue and its DLQ are empty".into())
    }
}

/// Messages on a queue: waiting, being processed (in flight), and delayed.
struct Depth {
    visible: u64,
    in_flight: u64,
    delayed: u64,
}

impl Depth {
    fn total(&self) -> u64 {
        self.visible + self.in_flight + self.delayed
    }
}

impl std::fmt::Display for Depth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} waiting, {} in flight, {} delayed message(s)",
            self.visible, self.in_flight, self.delayed
        )
    }
}

async fn queue_depth(sqs: &aws_sdk_sqs::Client, url: &str) -> anyhow::Result<Depth> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .attribute_names(A::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .map_err(|e| {
            anyhow::Error::new(notice_sqs::queue_error("GetQueueAttributes", &e))
                .context(format!("cannot read {url} (SQS GetQueueAttributes)"))
        })?;
    let attrs = out.attributes();
    let count = |name: A| -> anyhow::Result<u64> {
        match attrs.and_then(|a| a.get(&name)) {
            None => Err(anyhow!("{url}: SQS did not report {}", name.as_str())),
            Some(v) => v.parse().map_err(|_| anyhow!("{url}: {} is {v:?}, not a count", name.as_str())),
        }
    };
    Ok(Depth {
        visible: count(A::ApproximateNumberOfMessages)?,
        in_flight: count(A::ApproximateNumberOfMessagesNotVisible)?,
        delayed: count(A::ApproximateNumberOfMessagesDelayed)?,
    })
}

fn describe(row: &LedgerRow) {
    println!(
        "claim {}\n  subscription {}  period {}  kind {}  revision {}\n  claimed at {}",
        row.key,
        row.subscription_id,
        row.period_start,
        row.kind,
        row.revision,
        row.claimed_at.map(|t| t.to_rfc3339()).unwrap_or_default()
    );
}

/// A release allows a resend, so the operator types the verb itself rather than `yes`.
fn confirm(key: &NoticeKey) -> anyhow::Result<bool> {
    ask(
        &format!("Release {}? The notice may then be sent again. Type 'release' to confirm: ", key.prefix()),
        "release",
        "refusing to release without confirmation",
    )
}

fn human_age(secs: i64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse() {
        assert_eq!(parse_age("900").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_age("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_age("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_age("1d").unwrap(), Duration::from_secs(86_400));
        assert!(parse_age("15 minutes").is_err());
        assert!(parse_age("m").is_err());
        assert!(parse_age("99999999999999999d").is_err(), "an overflowing age is an error, not a panic");
        assert!(parse_age("36600d").is_err());
    }
}
