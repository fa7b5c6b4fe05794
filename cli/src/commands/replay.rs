//! `noticectl replay`: re-enqueue a backlog, but only the jobs the ledger has not decided.
//!
//! The census says how many are new — plainly, when the backlog was already delivered — and only
//! then, after confirmation, are the new ones enqueued. The ledger would refuse the rest anyway;
//! not enqueueing them keeps the replay cheap and its counts honest.

use std::path::PathBuf;
use std::process::ExitCode;

use chrono::Utc;

use super::census::census;
use crate::queue::{self, Outgoing};
use crate::terminal::{confirm, progress};

#[derive(clap::Args, Debug)]
pub(crate) struct ReplayArgs {
    /// JSON Lines of jobs, a Lambda SQS event, or JSON Lines of dumped SQS events.
    #[arg(long = "from")]
    from: PathBuf,
    /// sqlite:PATH (default: <state-dir>/ledger.db) or dynamodb:TABLE.
    #[arg(long, env = "NOTICE_LEDGER_URL", hide_env_values = true)]
    ledger: Option<String>,
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
    /// Skip the confirmation prompt.
    #[arg(long)]
    yes: bool,
}

pub(crate) async fn run(state_dir: PathBuf, args: ReplayArgs) -> Result<ExitCode, String> {
    let (census, target, _) = census(&state_dir, &args.from, &args.ledger).await?;
    census.print_summary(&target);
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
