//! `notice-proof`: the proof tools of notice-ledger, beside the product and not in it.
//!
//! * `simulate` ([`simulate`]) — a seeded chaos simulation that runs the dedupe strategies, the
//!   real core among them, over the same at-least-once traces and counts what customers got.
//! * `verify` ([`verify`]) — an exhaustive model check of every interleaving of claim → send →
//!   commit over a bounded world, with the project's real rules, and mutants it must catch.
//! * `capacity` ([`capacity`]) — a seeded model of the deployed pipeline at millions of notices an
//!   hour: the real core against AWS's published limits, in virtual time.
//!
//! They link the test doubles (`notice_testkit`: the memory ledger, the fault-injecting ledger,
//! the in-process rate buckets); the operator tool (`noticectl`) and the Lambdas do not.
//!
//! Inside each tool the files are layered, each importing only from the layers before it:
//! inputs (arguments, trace, world) → model (queue, services, strategies) → run (event loop,
//! search) → report.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod capacity;
/// The README's and docs/'s `notice-proof` commands, parsed with [`Cli`] (issue 50).
#[cfg(test)]
mod docs_check;
mod simulate;
mod verify;

#[derive(Parser, Debug)]
#[command(
    name = "notice-proof",
    version,
    about = "notice-ledger's proof tools: the seeded chaos simulation, the exhaustive model check and the capacity model"
)]
struct Cli {
    /// Log the send path as JSON on stderr (RUST_LOG overrides the level).
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Chaos-simulate the dedupe strategies on the same seeded traces and print what customers got.
    Simulate(simulate::SimulateArgs),
    /// Model-check every interleaving of claim → send → commit over a bounded world, with the real rules.
    ///
    /// Without a world flag, the default run: four named worlds one after the other — deliveries
    /// (the defaults below), withdraw (`--withdraws 1 --releases 0`), withdraw-release
    /// (`--workers 1 --withdraws 1`) and batch (`--batch 2 --deliveries 1
    /// --in-flight-redelivery false`). With any world flag, the one world the flags describe.
    Verify(verify::VerifyArgs),
    /// Model the deployed pipeline at a volume: the real core against AWS's published limits, in virtual time.
    Capacity(capacity::CapacityArgs),
}

fn init_tracing(verbose: bool) {
    let default = if verbose { "info" } else { "off" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt().json().with_writer(std::io::stderr).with_env_filter(filter).init();
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let result = match cli.command {
        Command::Simulate(args) => simulate::run(args).await,
        Command::Verify(args) => verify::run(args).await,
        Command::Capacity(args) => capacity::run(args).await,
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("notice-proof: {message}");
            notice_setup::exit::Exit::Unusable.into()
        }
    }
}
