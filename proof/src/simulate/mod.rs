//! `notice-proof simulate`: a seeded chaos simulation that compares dedupe strategies on the same
//! traces — proof, not claims.
//!
//! # The model
//!
//! Discrete events in simulated milliseconds; nothing sleeps, so a week of traffic takes seconds.
//!
//! * **Notices.** `--notices` renewal reminders. Each charges at 09:00 UTC on one of `--charge-days`
//!   days starting on day 4, and its job is enqueued at a random instant of day 0 (days ahead of its
//!   window) or, with `--lead-days N`, at a random instant up to N days before its window opens, as
//!   producers do (simulated time before day 0 is negative). The window is the core's
//!   [`WindowPolicy`] (opens 72 h, closes 24 h before the charge), applied by every strategy, so
//!   every window of one charge day opens at the same instant: the queue sees a burst.
//! * **Queue.** At-least-once, SQS-like. A receive hides the message for `--visibility-timeout`; a
//!   message that is neither deleted nor re-hidden in time is delivered again — even while its
//!   first worker is still waiting on a slow send. What a worker does with a message is the sender's
//!   own table, [`notice_ledger::queue`]: waits of at most 15 minutes hide, longer ones park (or,
//!   for the hop-only strategies, hide up to 12 h at a time), failed jobs back off. A delete or visibility change with a stale receipt (the message was
//!   received again since) is ignored. With probability `--ghost-rate` a receive is followed, within
//!   10 s, by a spurious second delivery of the same message to another consumer.
//! * **Queue limits.** These lose long-lead jobs that only wait on the queue. The redrive policy
//!   moves a message received `--max-receive-count` times (20) to the dead-letter queue instead of
//!   delivering it again, and the queue drops a message `--retention` (14 d) after its first
//!   enqueue, from the dead-letter queue too. Nothing redrives the dead-letter queue here.
//! * **Workers.** `--instances` worker instances, each running up to `--concurrency` jobs. An
//!   instance that crashes loses every job it has in flight and its in-process cache, and restarts
//!   at once.
//! * **Chaos, per receive** (drawn from the seed, the message and the receive number, so it is the
//!   same for every strategy): a crash with probability `--crash-rate` at *each* step — before the
//!   claim, after the claim and before the send, after the send and before the commit, after the
//!   commit and before the ack; a send latency from a Pareto distribution (`--latency-median`,
//!   `--latency-alpha`, capped at `--latency-cap`); a provider answer that is "500 after accept"
//!   (`--unknown-rate`: the message went out but the worker cannot know) or "throttled"
//!   (`--throttle-rate`: nothing went out). A send slower than `--send-timeout` is abandoned by the
//!   worker as unknown, but the provider still accepts it when its latency is up.
//! * **Chaos, per trace:** the producer enqueues some jobs twice, up to 20 min apart
//!   (`--producer-dup-rate`); a redeploy at `--redeploy-at` kills every in-flight job and every
//!   cache at one instant (default: 3 s into the first window burst); at `--replay-at` an operator
//!   re-enqueues every job whose charge lies in [`--replay-from`, `--replay-to`) — by default jobs
//!   already delivered that morning, whose windows are still open.
//!
//! # The strategies
//!
//! * `none` — send whatever arrives.
//! * `in-process cache` — each instance remembers what it sent; lost on crash and redeploy.
//! * `broker dedup id` — the broker drops a re-enqueue of the same notice within `--dedup-window`
//!   and never delivers a message spuriously twice (FIFO-style); visibility expiry still redelivers.
//! * `shared cache claim (TTL)` — `SET key NX EX ttl` before the send, refreshed on success and
//!   deleted on failure; a held key means "someone has it" and the job is acked. One row per `--ttl`.
//! * `durable ledger` — **the real core**: the sender Lambda's own [`Worker`] (admission,
//!   delivery, the queue action carried out on the simulated message) over a [`NoticeSender`]
//!   with a `MemoryLedger` (or a SQLite file with `--ledger sqlite`), a clock on simulated time
//!   and a mailer adapter that hands each send to this simulation. The simulation polls the
//!   worker's future at the simulated `now` and, while the simulated send is in flight, keeps it
//!   suspended inside the mailer call; a crash drops the future exactly where the worker stopped. Like the baselines, it waits for a window on the
//!   queue, 12 h per hop.
//! * `durable ledger, parking` — the same, plus the sender's parking: a job that must wait longer
//!   than 15 minutes ([`QueuePolicy::action`] says `Park`) gets a
//!   one-time schedule named by its notice key, then is acked. At the opening (rounded up to the
//!   minute) the schedule puts the same body back on the queue as a new message — new enqueue
//!   time, receive count 0 — and deletes itself. A second park while the schedule exists
//!   conflicts: acked, nothing created. The schedule is created before the ack, so a crash between
//!   the two (the "after the commit" crash) brings the message back to park again and conflict.
//!
//! # What is counted
//!
//! *Duplicates*: copies a customer received beyond the first. *Lost*: notices never delivered,
//! not quarantined and not recorded as missed — among them those whose messages were all
//! dead-lettered or expired. *Quarantined*: notices whose ledger row is still an open claim at the
//! end — the outcome is unknown to the workers, and the claim is on the operators' quarantine view
//! (the reconciler closes the ones the provider reports as sent). *Sends/notice*: provider calls
//! per notice.
//!
//! [`WindowPolicy`]: notice_ledger::WindowPolicy
//! [`NoticeSender`]: notice_ledger::NoticeSender
//! [`Worker`]: notice_ledger::worker::Worker
//! [`QueuePolicy::action`]: notice_ledger::QueuePolicy::action

use std::process::ExitCode;

// Layers, each file importing only from earlier ones: inputs (time, args, trace) → model
// (strategies, ports, durable, queue) → run → report. This file runs them.
mod args;
mod durable;
mod ports;
mod queue;
mod report;
mod run;
mod strategies;
#[cfg(test)]
mod tests;
mod time;
mod trace;

use args::Params;
pub(crate) use args::SimulateArgs;
use queue::Run;
use report::{table, Report};
use strategies::Strategy;
use trace::Trace;

/// Runs the given strategies over one trace.
async fn simulate(p: &Params, strategies: &[Strategy]) -> Result<Report, String> {
    let trace = Trace::build(p)?;
    let mut rows = Vec::with_capacity(strategies.len());
    for &strategy in strategies {
        rows.push(Run::new(p, &trace, strategy)?.run().await?.report().await?);
    }
    Ok(Report { params: p.clone(), trace: trace.summary(p), rows })
}

pub(crate) async fn run(args: SimulateArgs) -> Result<ExitCode, String> {
    let p = Params::from_args(&args)?;
    let started = std::time::Instant::now();
    let report = simulate(&p, &Strategy::all(&p)).await?;
    if args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print!("{}", table(&report, started.elapsed()));
    }
    Ok(ExitCode::SUCCESS)
}
