//! `noticectl replay`: re-enqueue a backlog, but only the jobs the ledger has not decided.
//!
//! The census says how many are new — plainly, when the backlog was already delivered — and only
//! then, after confirmation, are the new ones enqueued. The ledger would refuse the rest anyway;
//! not enqueueing them keeps the replay cheap and its counts honest.
//!
//! A "stop" verdict (nothing new, or fewer new jobs than `--stop-below` percent of the backlog)
//! refuses to enqueue unless `--force`: the few unknown keys of a delivered backlog are more
//! often a wrong file, secret or ledger than notices owed. `--yes` only skips the prompt. Exit
//! code [`EXIT_STOPPED`] says the stop rule refused.

use crate::ledger_target::LedgerArg;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use chrono::Utc;

use super::census::census;
use crate::queue::{self, Outgoing};
use crate::terminal::{confirm, progress};

/// Exit code of a replay the census verdict stopped (nothing enqueued); 1 is "declined at the
/// prompt or some jobs not enqueued", 2 "could not run".
pub(crate) const EXIT_STOPPED: u8 = 3;

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
    let nothing = census.new.is_empty() && census.withdraws.is_empty();
    if args.dry_run || nothing {
        if args.dry_run {
            println!("dry run: nothing enqueued");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if verdict.stop && !args.force {
        println!(
            "refusing to enqueue: the verdict is stop (pass --force to enqueue these {} job(s){} anyway)",
            census.new.len(),
            withdraws_text(census.withdraws.len())
        );
        return Ok(ExitCode::from(EXIT_STOPPED));
    }
    if verdict.stop {
        println!("--force: enqueueing despite the stop verdict");
    }
    let queue_url = args.queue_url.context("--queue-url (or NOTICE_QUEUE_URL) is required to enqueue")?;
    let batch_id = args.batch_id.unwrap_or_else(|| format!("replay-{}", Utc::now().format("%Y%m%dT%H%M%SZ")));
    if !args.yes
        && !confirm(&format!(
            "Enqueue {} job(s){} to {queue_url} as replay batch {batch_id}?",
            census.new.len(),
            withdraws_text(census.withdraws.len())
        ))?
    {
        println!("nothing enqueued");
        return Ok(ExitCode::from(1));
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
    let report = queue::enqueue(&sqs, &queue_url, &jobs, Some(&batch_id), args.rate, &bar).await;
    bar.finish_and_clear();
    println!("enqueued {} of {} as replay batch {batch_id}", report.sent, jobs.len());
    for (origin, error) in &report.failed {
        println!("  NOT enqueued {origin}: {error}");
    }
    Ok(if report.failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
