//! `noticectl`: the operator and local-run tool for notice-ledger.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod input;
mod ledger_cmd;
mod ledger_target;
mod local;
mod parked;
mod quarantine;
mod queue;
mod replay;
mod send;
mod simulate;

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
    Key(KeyArgs),
    /// Show one notice's ledger row.
    Show(ShowArgs),
    /// Count a backlog against the ledger (--dry-run), then enqueue only what is new.
    Replay(replay::ReplayArgs),
    /// Record notices delivered before enforcement as sent (never overwrites).
    Backfill(replay::BackfillArgs),
    /// Validate one job and put it on the reminder queue (or park it when its window is far off).
    Enqueue(parked::EnqueueArgs),
    /// List or cancel jobs parked in EventBridge Scheduler until their window opens.
    Parked(parked::ParkedArgs),
    /// Chaos-simulate the dedupe strategies on the same seeded traces and print what customers got.
    Simulate(simulate::SimulateArgs),
    /// Prepare a ledger: `ledger init --postgres URL` creates the PostgreSQL schema.
    Ledger(ledger_cmd::LedgerArgs),
}

#[derive(clap::Args, Debug)]
struct KeyArgs {
    #[arg(long)]
    subscription_id: String,
    #[arg(long)]
    period_start: String,
    #[arg(long)]
    kind: String,
    #[arg(long, default_value_t = 0)]
    revision: u64,
}

#[derive(clap::Args, Debug)]
struct ShowArgs {
    /// The notice key (64 hex characters).
    key: String,
    /// sqlite:PATH (default: <state-dir>/ledger.db) or dynamodb:TABLE.
    #[arg(long, env = "NOTICE_LEDGER_URL", hide_env_values = true)]
    ledger: Option<String>,
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
        Command::Quarantine(args) => quarantine::run(cli.state_dir, args).await,
        Command::Key(args) => key(cli.state_dir, args),
        Command::Simulate(args) => simulate::run(args).await,
        Command::Show(args) => show(cli.state_dir, args).await,
        Command::Replay(args) => replay::replay(cli.state_dir, args).await,
        Command::Backfill(args) => replay::backfill(cli.state_dir, args).await,
        Command::Enqueue(args) => parked::enqueue(args).await,
        Command::Parked(args) => parked::run(args).await,
        Command::Ledger(args) => ledger_cmd::run(args).await,
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("noticectl: {message}");
            ExitCode::from(2)
        }
    }
}

fn key(state_dir: PathBuf, args: KeyArgs) -> Result<ExitCode, String> {
    let secret = local::StateDir::open(&state_dir).and_then(|s| s.secret()).map_err(|e| e.to_string())?;
    let identity =
        notice_ledger::Identity::new(&args.subscription_id, &args.period_start, &args.kind, args.revision)
            .map_err(|e| e.to_string())?;
    println!("{}", identity.derive_key(&secret));
    Ok(ExitCode::SUCCESS)
}

async fn show(state_dir: PathBuf, args: ShowArgs) -> Result<ExitCode, String> {
    let key = notice_ledger::NoticeKey::parse(&args.key).map_err(|e| e.to_string())?;
    let target = ledger_target::LedgerTarget::resolve(args.ledger.as_deref(), &state_dir)?;
    let ledger = target.open().await?.ledger;
    match ledger.get(&key).await.map_err(|e| e.to_string())? {
        None => {
            println!("{key}: no ledger row in {}", target.describe());
            Ok(ExitCode::from(1))
        }
        Some(row) => {
            let doc = serde_json::json!({
                "notice_key": row.key.as_str(), "state": row.state.as_str(), "origin": row.origin.as_str(),
                "subscription_id": row.subscription_id, "period_start": row.period_start, "kind": row.kind,
                "revision": row.revision, "claimed_at": row.claimed_at.map(|t| t.to_rfc3339()),
                "updated_at": row.updated_at.to_rfc3339(), "message_id": row.message_id, "detail": row.detail,
                "delivery_status": row.delivery_status.map(|d| d.as_str()),
                "duplicate_message_ids": row.duplicate_message_ids,
            });
            println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
            Ok(ExitCode::SUCCESS)
        }
    }
}
