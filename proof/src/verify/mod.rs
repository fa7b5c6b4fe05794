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

// Layers, each file importing only from earlier ones: inputs (error, fast_hash, args, world) → model (ports,
// wrappers, sender, mutants, model/) → run (search) → report. This file runs them.
mod args;
mod error;
mod fast_hash;
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

/// One copy of the world per search thread: as many as the machine runs at once (the search's
/// result does not depend on how many).
fn models(bounds: Bounds, rules: Rules) -> Result<Vec<Model>, VerifyError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS));
    (0..threads).map(|_| Model::new(bounds, rules)).collect()
}

/// More threads than this gain little: merging a level into the visited set is one thread's work.
const MAX_THREADS: usize = 4;

/// Checks the real rules, then each mutant, over `bounds`.
fn verify(bounds: Bounds, mutants: &[Mutant]) -> Result<Report, VerifyError> {
    let real = search::explore(&mut models(bounds, Rules::real())?)?;
    let mut caught = Vec::with_capacity(mutants.len());
    for &mutant in mutants.iter().filter(|m| m.runs_in(&bounds)) {
        let run = search::explore(&mut models(bounds, Rules::with(mutant))?)?;
        caught.push(MutantReport::new(mutant, run));
    }
    Ok(Report::new(bounds, real, caught))
}

pub(crate) async fn run(args: VerifyArgs) -> Result<ExitCode, String> {
    let mutants: &[Mutant] = if args.no_mutants { &[] } else { &Mutant::ALL };
    let worlds = args.worlds();
    let watched = !args.json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    search::PROGRESS.store(watched, std::sync::atomic::Ordering::Relaxed);
    // CPU-bound and synchronous: off the async runtime's workers.
    let reports = tokio::task::spawn_blocking(move || {
        worlds
            .into_iter()
            .map(|(name, bounds)| verify(bounds, mutants).map(|r| r.named(name)))
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    let passed = reports.iter().all(Report::passed);
    match (args.json, reports.as_slice()) {
        (true, [one]) => println!("{}", serde_json::to_string_pretty(one).map_err(|e| e.to_string())?),
        (true, all) => {
            let run = serde_json::json!({ "worlds": all, "passed": passed });
            println!("{}", serde_json::to_string_pretty(&run).map_err(|e| e.to_string())?);
        }
        (false, [one]) => print!("{}", one.text()),
        (false, all) => {
            for report in all {
                println!("── world {} ──", report.world);
                print!("{}", report.text());
            }
            let states: usize = all.iter().map(|r| r.states).sum();
            let seconds: f64 = all.iter().map(|r| r.seconds).sum();
            let mutants: f64 = all.iter().map(Report::mutant_seconds).sum();
            println!(
                "default run: {} worlds, {} states, {seconds:.1} s for the real rules, {:.1} s with the mutants — {}",
                all.len(),
                notice_ledger::text::thousands(states as u64),
                seconds + mutants,
                if passed { "PASS" } else { "FAIL" }
            );
            // What each world costs, for the run's time budget (docs/proof.md).
            for r in all {
                println!(
                    "  {:<18} {:>12} states  {:>7.1} s real rules  {:>6.1} s {} mutants",
                    r.world,
                    notice_ledger::text::thousands(r.states as u64),
                    r.seconds,
                    r.mutant_seconds(),
                    r.mutants.len()
                );
            }
        }
    }
    Ok(if passed { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
