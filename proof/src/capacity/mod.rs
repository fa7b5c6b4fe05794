//! `notice-proof capacity`: a seeded discrete-event model of the deployed pipeline at a volume no
//! emulator can reach — the real core against modelled AWS services with their published limits
//! (docs/capacity.md says what is modelled, with sources, and what is not).
//!
//! * **Real code.** Each Lambda execution environment is a real [`notice_ledger::NoticeSender`]
//!   with the rate gate on (the default), its own remembered bucket state, and the window policy;
//!   an invocation runs the sender Lambda's sequence: the batch's prefetch (one read, one token
//!   take per domain and shard and one for the account), each record's delivery, the queue
//!   policy's action, a park through the `Parker` port. The rows and buckets are the core's
//!   in-memory adapters, so every conditional write is decided by the project's rules.
//! * **Modelled services** (`services.rs`, `queue.rs`): DynamoDB (latency; write units per item
//!   and per index shard; table throughput that grows to twice the previous peak up to its
//!   quota; a call over a limit is throttled and, the lean client not retrying, comes back as
//!   the ledger being unavailable), SQS (visibility, receive counts, the in-flight cap, the
//!   redrive policy, duplicate deliveries), Lambda's SQS scaling (5 batches, +300 a minute, up to
//!   `MaximumConcurrency`), SES (`MaxSendRate`, latency), EventBridge Scheduler (live schedules,
//!   CreateSchedule rate, invocation throttle).
//! * **Virtual time** (`clock.rs`): every await on a service suspends its invocation until the
//!   simulated clock reaches the answer; nothing sleeps, and one seed gives one report.
//!
//! Files, each importing only from the ones before it: clock, meter, world, producer → services,
//! queue → args → run → report.

use std::process::ExitCode;

mod args;
mod clock;
mod meter;
mod producer;
mod queue;
mod report;
mod run;
mod services;
#[cfg(test)]
mod tests;
mod world;

pub(crate) use args::CapacityArgs;
use args::Params;
use report::Report;
use run::Run;

/// Runs the model once.
async fn simulate(p: Params) -> Result<Report, String> {
    let run = tokio::task::unconstrained(Run::new(p)?.run()).await?;
    Ok(Report::of(&run).await)
}

pub(crate) async fn run(args: CapacityArgs) -> Result<ExitCode, String> {
    let p = Params::from_args(&args)?;
    let watched = !args.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    run::PROGRESS.store(watched, std::sync::atomic::Ordering::Relaxed);
    let started = std::time::Instant::now();
    let report = simulate(p).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{}", report.table(started.elapsed()));
    }
    Ok(ExitCode::SUCCESS)
}
