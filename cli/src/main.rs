//! `noticectl`: the operator and local-run tool for notice-ledger. The proof tools (the chaos
//! simulation and the model check) are a separate binary, `notice-proof` (`proof/`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod clock;
mod commands;
/// The README's and docs/'s `noticectl` commands, parsed with [`Cli`] (issue 50).
#[cfg(test)]
mod docs_check;
mod exit;
mod failure;
mod input;
mod key_arg;
mod ledger_target;
mod local;
mod notices_arg;
mod operator;
mod pace;
mod queue;
mod terminal;

use commands::{
    backfill, capacity, config, enqueue, evidence, key, ledger, parked, quarantine, replay, send, show,
    validate, windows, withdraw,
};

#[derive(Parser, Debug)]
#[command(
    name = "noticectl",
    version,
    about = "Send renewal reminders exactly once — locally, and operate the deployed ledger"
)]
struct Cli {
    /// Local state: ledger.db, outbox/, secret.
    #[arg(long, global = true, env = "NOTICE_STATE_DIR", default_value = ".notices")]
    state_dir: PathBuf,
    /// Log the send path as JSON on stderr (RUST_LOG overrides the level).
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run jobs through claim → send → commit on the local ledger and outbox.
    Send(send::SendArgs),
    /// Inspect and resolve claims that never got their commit.
    Quarantine(quarantine::QuarantineArgs),
    /// Print the notice key of one notice (uses NOTICE_KEY_SECRET or the local secret).
    Key(key::KeyArgs),
    /// Show one notice's ledger row.
    Show(show::ShowArgs),
    /// Show what the ledger proves about one subscription's notices for a period: when each went out, how long before the charge, its window, its delivery.
    Evidence(evidence::EvidenceArgs),
    /// Count a backlog against the ledger (--dry-run), then enqueue only what is new.
    Replay(replay::ReplayArgs),
    /// Record notices already DELIVERED before enforcement as sent (never in-flight ones; never overwrites).
    ///
    /// Delivered only: never backfill jobs that are still queued, in flight or scheduled — a
    /// backfilled row says "sent", so those notices would never be sent at all. For a backlog
    /// whose fate is unknown, use `replay` (it enqueues only what the ledger has not seen).
    Backfill(backfill::BackfillArgs),
    /// Withdraw notices that must not go out (one, or --from a file); exit 1 when one is already sent or claimed (too late).
    ///
    /// A withdrawn tombstone suppresses every copy of the notice still queued, parked or replayed.
    /// Reads each key first and prints what would happen (would withdraw / already withdrawn /
    /// too late / not needed); --dry-run stops there; the write asks for confirmation unless --yes.
    Withdraw(withdraw::WithdrawArgs),
    /// Validate one job and put it on the reminder queue (or park it when its window is far off).
    Enqueue(enqueue::EnqueueArgs),
    /// List or cancel jobs parked in EventBridge Scheduler until their window opens.
    Parked(parked::ParkedArgs),
    /// Print the AWS quotas a volume needs (live schedules, request rates, SQS in-flight, SES rate): a table, no AWS calls.
    Capacity(capacity::CapacityArgs),
    /// Print the send-rate limits a configuration gives (account, other domains, listed domains and their shards): no AWS calls.
    Limits(commands::limits::LimitsArgs),
    /// Prepare a ledger: `ledger init --postgres URL` creates the PostgreSQL schema.
    Ledger(ledger::LedgerArgs),
    /// Check every job and withdraw in a file against the schema, the windows policy and the templates, and print the window each job gets: no ledger, no outbox, no AWS calls; exit 1 when a line is invalid.
    Validate(validate::ValidateArgs),
    /// Check, preview and publish a notice configuration (texts per kind and locale, windows policy, manifest): docs/notices.md.
    Config(config::ConfigArgs),
    /// Print the effective send window of every kind in every jurisdiction of a policy, and where each bound comes from: no AWS calls.
    Windows(windows::WindowsArgs),
    /// Plan billing events as the intake Lambda does (`intake stripe FILE --config DIR`): the jobs and withdraws it would enqueue, as JSON lines on stdout, against this ledger's rows; no AWS calls; exit 1 when an event is refused.
    Intake(commands::intake::IntakeArgs),
    /// Print what a contract owes under a configuration's obligations (`--jurisdiction US-CA --interval year`): each notice kind, its window, what it must state and the rule it came from; no AWS calls; exit 1 when the intake would refuse such a contract.
    Obligations(commands::obligations::ObligationsArgs),
    /// Prove a deployed stack works end to end: jobs to SES's mailbox simulator (each twice), a withdraw and a replay, then every ledger row and the metrics checked; exit 1 when a check fails.
    Smoke(commands::smoke::SmokeArgs),
    /// Verify a manage link (`link verify URL`): exit 0 valid, 1 does not verify under this secret, 2 malformed.
    Link(commands::link::LinkArgs),
    /// Re-publish the outcome events of the ledger rows written in a time range (`outcomes republish --since … --until … --bus …`; --dry-run counts by outcome).
    Outcomes(commands::outcomes::OutcomesArgs),
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
        Command::Send(args) => send::run(cli.state_dir, args).await,
        Command::Config(args) => config::run(args).await,
        Command::Quarantine(args) => quarantine::run(cli.state_dir, args).await,
        Command::Key(args) => key::run(cli.state_dir, args).await,
        Command::Show(args) => show::run(cli.state_dir, args).await,
        Command::Evidence(args) => evidence::run(cli.state_dir, args).await,
        Command::Replay(args) => replay::run(cli.state_dir, args).await,
        Command::Backfill(args) => backfill::run(cli.state_dir, args).await,
        Command::Withdraw(args) => withdraw::run(cli.state_dir, args).await,
        Command::Enqueue(args) => enqueue::run(args).await,
        Command::Parked(args) => parked::run(args).await,
        Command::Capacity(args) => capacity::run(args),
        Command::Limits(args) => commands::limits::run(args),
        Command::Ledger(args) => ledger::run(args).await,
        Command::Windows(args) => windows::run(args),
        Command::Intake(args) => commands::intake::run(cli.state_dir, args).await,
        Command::Obligations(args) => commands::obligations::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Smoke(args) => commands::smoke::run(cli.state_dir, args).await,
        Command::Link(args) => commands::link::run(cli.state_dir, args).await,
        Command::Outcomes(args) => commands::outcomes::run(cli.state_dir, args).await,
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // One line: a safety stop as it is (3), a dependency failure with its cause and next
            // step, anything else with its context chain (2). The debug form only with -v.
            let (line, exit) = failure::report(&e);
            eprintln!("{line}");
            if cli.verbose {
                eprint!("{}", failure::debug_chain(&e));
            }
            exit.into()
        }
    }
}
