//! `notice-proof verify`: an exhaustive model check of every interleaving of the protocol, over a
//! bounded world, with the project's real rules.
//!
//! Tests and the seeded simulation sample orders of events; this enumerates all of them up to the
//! bounds. The worker is the real [`NoticeSender`](notice_ledger::NoticeSender) run one port call
//! at a time ([`sender`], over the scripted [`ports`]); ledger writes go through the real
//! transition rule ([`rules::permits`](notice_ledger::ledger::rules::permits)) and the real claim rows
//! (`ClaimRequest::to_row`); provider events through the reconciler's evidence rules
//! (`apply_to_row`, `learned_row`); the TTL through [`rules::expires`](notice_ledger::ledger::rules::expires);
//! the reporter's view is the memory ledger's `open_claims`. The world and its transitions are in
//! [`model`], the search in [`search`]; [`mutants`] are deliberate bugs the search must catch, so a
//! clean result means something.

use std::process::ExitCode;

// Layers, each file importing only from earlier ones: inputs (error, args, world) → model (ports,
// wrappers, sender, mutants, model/) → run (search) → report. This file runs them.
mod args;
mod error;
mod model;
mod mutants;
mod ports;
mod report;
mod search;
mod sender;
#[cfg(test)]
mod tests;
mod world;
mod wrappers;

use args::Bounds;
pub(crate) use args::VerifyArgs;
use error::VerifyError;
use model::Model;
use mutants::{Mutant, Rules};
use report::{MutantReport, Report};

/// Checks the real rules, then each mutant, over `bounds`.
fn verify(bounds: Bounds, mutants: &[Mutant]) -> Result<Report, VerifyError> {
    let real = search::explore(&mut Model::new(bounds, Rules::real())?)?;
    let mut caught = Vec::with_capacity(mutants.len());
    for &mutant in mutants.iter().filter(|m| m.runs_in(&bounds)) {
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
