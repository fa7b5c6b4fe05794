//! `noticectl replay`: re-enqueue a backlog, but only the jobs the ledger has not decided.
//!
//! The census says how many are new — plainly, when the backlog was already delivered — and only
//! then, after confirmation, are the new ones enqueued. The ledger would refuse the rest anyway;
//! not enqueueing them keeps the replay cheap and its counts honest.
//!
//! A "stop" verdict (nothing new, or fewer new jobs than `--stop-below` percent of the backlog)
//! refuses to enqueue unless `--force`: the few unknown keys of a delivered backlog are more
//! often a wrong file, secret or ledger than notices owed. `--yes` only skips the prompt. Exit
//! code 3 ([`Exit::SafetyStop`]) says the stop rule refused (a dry run exits as the real run
//! would), or the confirmation was refused.

use crate::exit::Exit;
use crate::ledger_target::LedgerArg;
use std::path::PathBuf;
use std::process::ExitCode;

use std::time::Duration;

use anyhow::Context;
use chrono::Utc;
use notice_ledger::rate::RateLimits;

use super::census::census;
use super::limits;
use crate::pace;
use crate::queue::{self, Outgoing};
use crate::terminal::{confirm, progress};

#[derive(clap::Args, Debug)]
pub(crate) struct ReplayArgs {
    /// JSON Lines of jobs, a Lambda SQS event, or JSON Lines of dumped SQS events.
    #[arg(long = "from")]
    from: PathBuf,
    #[command(flatten)]
    ledger: LedgerArg,
    #[command(flatten)]
    config: crate::notices_arg::ConfigArg,
    /// Only count: look every key up and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Reminder queue to enqueue the new jobs to.
    #[arg(long, env = "NOTICE_QUEUE_URL")]
    queue_url: Option<String>,
    /// Value of the `replay_batch` message attribute (default: replay-<UTC time>).
    #[arg(long)]
    batch_id: Option<String>,
    /// Messages per second to enqueue, at most (every lane together).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=3000))]
    rate: u32,
    /// How the jobs are paced: `providers` enqueues each receiving provider's (or named domain's)
    /// jobs at the rate its sender bucket admits, and all of them at the account's, as
    /// NOTICE_RATE_LIMITS and SES's MaxSendRate set them — a replay faster than that is not sent
    /// sooner, its extra jobs wait on the queue and drain slower; `overall`: `--rate` alone.
    #[arg(long, value_enum, default_value_t = Pace::Providers)]
    pace: Pace,
    /// The share of each bucket's rate the replay takes, in percent: below 100 leaves the rest
    /// to the notices the senders are sending meanwhile (a bucket is shared by everything).
    #[arg(long, value_name = "PERCENT", default_value_t = 100.0, value_parser = share)]
    share: f64,
    /// SES's MaxSendRate the senders size their buckets from (default: read with SES GetAccount,
    /// as a sender reads it at cold start).
    #[arg(long, value_name = "PER_SECOND")]
    max_send_rate: Option<f64>,
    /// Skip the confirmation prompt (it does not override a "stop" verdict: that takes --force).
    #[arg(long)]
    yes: bool,
    /// Enqueue the new jobs even when the census verdict is "stop".
    #[arg(long)]
    force: bool,
    /// The verdict is "stop" when fewer than this percentage of the valid jobs are new.
    #[arg(long, value_name = "PERCENT", default_value_t = 5.0, value_parser = percent)]
    stop_below: f64,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pace {
    Providers,
    Overall,
}

/// How long SES GetAccount may take before the replay paces without the account's rate.
const GET_ACCOUNT_BOUND: Duration = Duration::from_secs(5);

/// The limits the senders run under, for pacing: NOTICE_RATE_LIMITS (read as a sender reads it;
/// invalid stops the replay) with the account sized from `max_send_rate`, or SES GetAccount.
/// `None`: limits are off. Without an account rate the built-in provider limits are their
/// fallback (10/s), as in a sender that could not read it — said on the terminal.
async fn pacing_limits(max_send_rate: Option<f64>) -> anyhow::Result<Option<RateLimits>> {
    let Some(limits) = notice_setup::config::rate_limits_from_env().context("pacing by provider")? else {
        return Ok(None);
    };
    let rate = match max_send_rate {
        Some(rate) => Some(rate),
        None => {
            let cfg = notice_setup::aws::load_sdk_config().await;
            match tokio::time::timeout(GET_ACCOUNT_BOUND, notice_setup::aws::ses_max_send_rate(&cfg)).await {
                Ok(Ok(rate)) => Some(rate),
                Ok(Err(e)) => {
                    // The SDK's error is pages long; -v shows it.
                    tracing::debug!(error = %e, "SES GetAccount");
                    eprintln!(
                        "warning: SES GetAccount failed (-v shows why); pacing without the account's rate (pass --max-send-rate)"
                    );
                    None
                }
                Err(_) => {
                    eprintln!(
                        "warning: SES GetAccount gave no answer within {GET_ACCOUNT_BOUND:?}; pacing without the account's rate (pass --max-send-rate)"
                    );
                    None
                }
            }
        }
    };
    Ok(Some(limits.with_account_rate(rate)))
}

/// The plan on the terminal: each lane's rate and jobs, and how long it takes.
fn describe(plan: &pace::Plan, share: f64) -> String {
    let at = if share < 100.0 { format!("{}% of ", limits::num(share)) } else { String::new() };
    let mut lines =
        vec![format!("pacing at {at}the senders' buckets, about {} in all:", pace::human(plan.total))];
    if let Some(rate) = plan.account_per_second {
        lines.push(format!("  account: {}/s", limits::num(rate)));
    }
    // A lane without a bucket of its own goes at the account's rate, or at --rate when there is none.
    let unbucketed = if plan.account_per_second.is_some() { "the account's and --rate's" } else { "--rate" };
    for lane in &plan.lanes {
        let rate = lane.per_second.map_or(unbucketed.to_owned(), |r| format!("{}/s", limits::num(r)));
        lines.push(format!(
            "  {}: {} job(s) at {rate}, the last at {}",
            lane.name,
            lane.jobs,
            pace::human(lane.last)
        ));
    }
    lines.join("\n")
}

/// ` and N withdraw(s)` when there are any.
fn withdraws_text(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" and {n} withdraw(s)")
    }
}

fn share(value: &str) -> Result<f64, String> {
    match percent(value) {
        Ok(p) if p > 0.0 => Ok(p),
        _ => Err(format!("{value:?}: want a percentage above 0, at most 100")),
    }
}

fn percent(value: &str) -> Result<f64, String> {
    match value.trim().trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err(format!("{value:?}: want a percentage from 0 to 100")),
    }
}

pub(crate) async fn run(state_dir: PathBuf, args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let (census, target, _) = census(&state_dir, &args.from, &args.ledger, &args.config).await?;
    census.print_summary(&target);
    let verdict = census.verdict(args.stop_below);
    println!("{}", verdict.text);
    let jobs = census.new.len();
    let withdraws = withdraws_text(census.withdraws.len());
    // A dry run exits as the real run would: a stop is a stop, invalid lines need attention.
    if verdict.stop && !args.force {
        if args.dry_run {
            println!(
                "dry run: nothing enqueued; the real run would refuse: the verdict is stop (--force enqueues these {jobs} job(s){withdraws})"
            );
        } else {
            println!("refusing to enqueue: the verdict is stop (pass --force to enqueue these {jobs} job(s){withdraws} anyway)");
        }
        return Ok(Exit::SafetyStop.into());
    }
    if args.dry_run || (census.new.is_empty() && census.withdraws.is_empty()) {
        println!("{}", if args.dry_run { "dry run: nothing enqueued" } else { "nothing to enqueue" });
        return Ok(finish(&census.invalid, &[]).into());
    }
    if verdict.stop {
        println!("--force: enqueueing despite the stop verdict");
    }
    let queue_url = args.queue_url.context("--queue-url (or NOTICE_QUEUE_URL) is required to enqueue")?;
    let batch_id = args.batch_id.unwrap_or_else(|| format!("replay-{}", Utc::now().format("%Y%m%dT%H%M%SZ")));
    // Withdraws first (they take no token: `--rate` alone), then the sends as the plan orders them.
    let domains: Vec<String> = census.new.iter().map(|(_, job, _)| job.recipient_domain()).collect();
    let limits = match args.pace {
        Pace::Providers => pacing_limits(args.max_send_rate).await?,
        Pace::Overall => None,
    };
    let plan = pace::plan(limits.as_ref(), &domains, args.share / 100.0, f64::from(args.rate));
    if args.pace == Pace::Providers && !census.new.is_empty() {
        println!("{}", describe(&plan, args.share));
    }
    if !args.yes
        && !confirm(&format!("Enqueue {jobs} job(s){withdraws} to {queue_url} as replay batch {batch_id}?"))?
    {
        println!("nothing enqueued");
        return Ok(Exit::SafetyStop.into());
    }
    // Withdraws first: a tombstone written before a copy of its notice arrives suppresses it.
    let withdraws = census
        .withdraws
        .iter()
        .map(|(origin, w)| Outgoing { origin: origin.clone(), body: w.to_value().to_string() });
    let lead = census.withdraws.len();
    let mut order: Vec<usize> = (0..census.new.len()).collect();
    order.sort_by_key(|&i| plan.offsets[i]);
    let sends = order.iter().map(|&i| {
        let (origin, job, _) = &census.new[i];
        Outgoing { origin: origin.clone(), body: job.to_value().to_string() }
    });
    let jobs: Vec<Outgoing> = withdraws.chain(sends).collect();
    // The withdraws go at --rate (the enqueue's own pacing); each send at its planned instant
    // after the withdraws' time.
    let after = Duration::from_secs_f64(lead as f64 / f64::from(args.rate));
    let offsets: Vec<Duration> = std::iter::repeat_n(Duration::ZERO, lead)
        .chain(order.iter().map(|&i| after + plan.offsets[i]))
        .collect();
    let sqs = queue::client().await;
    let bar = progress(jobs.len(), "enqueueing");
    // A failure of SQS itself (unreachable, no credentials, denied) stops the replay here, as one
    // line naming how many were enqueued before it (exit 2).
    let report =
        queue::enqueue(&sqs, &queue_url, &jobs, Some(&batch_id), args.rate, Some(&offsets), &bar).await;
    bar.finish_and_clear();
    let report = report?;
    println!("enqueued {} of {} as replay batch {batch_id}", report.sent, jobs.len());
    Ok(finish(&census.invalid, &report.failed).into())
}

/// The end of a replay: what needs attention, listed last (invalid lines, messages SQS refused);
/// exit 1 when there is any, else 0.
fn finish(invalid: &[(String, String)], failed: &[(String, String)]) -> Exit {
    if !invalid.is_empty() {
        let lines: Vec<&str> = invalid.iter().map(|(origin, _)| origin.as_str()).collect();
        println!(
            "needs attention: {} invalid line(s), not enqueued (see above): {}",
            invalid.len(),
            lines.join(", ")
        );
    }
    if !failed.is_empty() {
        println!("needs attention: {} message(s) NOT enqueued (SQS refused them):", failed.len());
        for (origin, error) in failed {
            println!("  {origin}: {}", crate::terminal::escape(error));
        }
    }
    Exit::attention_if(!invalid.is_empty() || !failed.is_empty())
}
