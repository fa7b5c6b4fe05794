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

use anyhow::Context;
use chrono::Utc;

use super::census::census;
use crate::queue::{self, Outgoing};
use crate::terminal::{confirm, progress};

#[derive(clap::Args, Debug)]
pub(crate) struct ReplayArgs {
    /// JSON Lines of jobs, a Lambda SQS event, or JSON Lines of dumped SQS events.
    #[arg(long = "from")]
    from: PathBuf,
    #[command(flatten)]
    ledger: LedgerArg,
    /// Only count: look every key up and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Reminder queue to enqueue the new jobs to.
    #[arg(long, env = "NOTICE_QUEUE_URL")]
    queue_url: Option<String>,
    /// Value of the `replay_batch` message attribute (default: replay-<UTC time>).
    #[arg(long)]
    batch_id: Option<String>,
    /// Messages per second to enqueue.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=3000))]
    rate: u32,
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

/// ` and N withdraw(s)` when there are any.
fn withdraws_text(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" and {n} withdraw(s)")
    }
}

fn percent(value: &str) -> Result<f64, String> {
    match value.trim().trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err(format!("{value:?}: want a percentage from 0 to 100")),
    }
}

pub(crate) async fn run(state_dir: PathBuf, args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let (census, target, _) = census(&state_dir, &args.from, &args.ledger).await?;
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
    let sends = census
        .new
        .iter()
        .map(|(origin, job, _)| Outgoing { origin: origin.clone(), body: job.to_value().to_string() });
    let jobs: Vec<Outgoing> = withdraws.chain(sends).collect();
    let sqs = queue::client().await;
    let bar = progress(jobs.len(), "enqueueing");
    // A failure of SQS itself (unreachable, no credentials, denied) stops the replay here, as one
    // line naming how many were enqueued before it (exit 2).
    let report = queue::enqueue(&sqs, &queue_url, &jobs, Some(&batch_id), args.rate, &bar).await;
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
