//! `noticectl verify`: an exhaustive model check of every interleaving of the protocol, over a
//! bounded world, with the project's real rules.
//!
//! Tests and the seeded simulation sample orders of events; this enumerates all of them up to the
//! bounds. The worker is the real [`NoticeSender`](notice_ledger::NoticeSender) run one port call
//! at a time ([`world`]); ledger writes go through the real transition rule
//! ([`rules::permits`](notice_ledger::ledger::rules::permits)) and the real claim rows
//! (`ClaimRequest::to_row`); provider events through the reconciler's evidence rules
//! (`apply_to_row`, `learned_row`); the TTL through [`rules::expires`](notice_ledger::ledger::rules::expires);
//! the reporter's view is the memory ledger's `open_claims`. The world and its transitions are in
//! [`model`], the search in [`search`]; [`mutants`] are deliberate bugs the search must catch, so a
//! clean result means something.

use std::process::ExitCode;

mod model;
mod mutants;
mod report;
mod search;
#[cfg(test)]
mod tests;
mod world;

use model::Model;
pub(crate) use model::{Bounds, Faults};
use mutants::{Mutant, Rules};
use report::{MutantReport, Report};

/// Why a run could not give an answer (as opposed to finding a violation).
#[derive(Debug, thiserror::Error)]
pub(crate) enum VerifyError {
    #[error("could not build the world: {0}")]
    Setup(String),
    #[error("the sender did something the model does not cover: {0}")]
    Unexpected(String),
    #[error("outside the model's bounds: {0}")]
    Bound(String),
    #[error("a value the model did not hand out: {0}")]
    Corrupt(String),
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct VerifyArgs {
    /// Workers taking messages concurrently.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=3))]
    workers: u8,
    /// Messages of notice A: the original plus broker duplicates / re-enqueues, enqueued whenever.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=4))]
    deliveries: u8,
    /// Notices: 1 = A; 2 adds A' (A's revision bump); 3 adds B (another subscriber, same domain).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=3))]
    notices: u8,
    /// Operator releases of an open claim in a run, each followed by a replay (0 or 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
    releases: u8,
    /// How ledger calls may fail: `off`; `clean` (a failed write was not applied — the adapters
    /// recognise a write of their own retried after a lost response); `ambiguous` (a write may be
    /// applied and still answer an error).
    #[arg(long, value_enum, default_value = "ambiguous")]
    ledger_faults: Faults,
    /// A message may also come back while its worker still runs it (visibility expiring mid-job, a
    /// standard queue's duplicate receive). `false`: it comes back only after its worker died.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    in_flight_redelivery: bool,
    /// A delete with a stale receipt may still delete the message (SQS: "might not be deleted").
    #[arg(long)]
    stale_deletes: bool,
    /// Check the real rules only, not the mutants.
    #[arg(long)]
    no_mutants: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

impl VerifyArgs {
    fn bounds(&self) -> Bounds {
        Bounds {
            workers: self.workers,
            deliveries: self.deliveries,
            notices: self.notices,
            releases: self.releases,
            ledger_faults: self.ledger_faults,
            in_flight_redelivery: self.in_flight_redelivery,
            stale_deletes: self.stale_deletes,
        }
    }
}

/// Checks the real rules, then each mutant, over `bounds`.
pub(crate) fn verify(bounds: Bounds, mutants: &[Mutant]) -> Result<Report, VerifyError> {
    let real = search::explore(&mut Model::new(bounds, Rules::real())?)?;
    let mut caught = Vec::with_capacity(mutants.len());
    for &mutant in mutants {
        let run = search::explore(&mut Model::new(bounds, Rules::with(mutant))?)?;
        caught.push(MutantReport::new(mutant, run));
    }
    Ok(Report::new(bounds, real, caught))
}

pub(crate) async fn run(args: VerifyArgs) -> Result<ExitCode, String> {
    let mutants: &[Mutant] = if args.no_mutants { &[] } else { &Mutant::ALL };
    let bounds = args.bounds();
    // CPU-bound and synchronous: off the async runtime's workers.
    let report = tokio::task::spawn_blocking(move || verify(bounds, mutants))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{}", report.text());
    }
    Ok(if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
