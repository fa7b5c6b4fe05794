//! `noticectl ledger init --postgres URL`: creates the PostgreSQL ledger's schema.
//!
//! The schema is applied explicitly rather than on every connect: senders and Lambdas then need
//! only row privileges, and a typo'd URL never creates a stray ledger. SQLite creates its file on
//! open; the DynamoDB table comes from `template.yaml`.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use notice_postgres::{PostgresLedger, MIGRATION};

use crate::exit::Exit;

#[derive(Args, Debug)]
pub(crate) struct LedgerArgs {
    #[command(subcommand)]
    command: LedgerCommand,
}

#[derive(Subcommand, Debug)]
enum LedgerCommand {
    /// Create or upgrade the PostgreSQL ledger schema (tables `notices`, `rate_buckets` and `ledger_meta`, open-claims index). Idempotent: run it again after every upgrade.
    Init(InitArgs),
}

#[derive(Args)]
struct InitArgs {
    /// postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?sslmode=require[&sslrootcert=PATH]]
    #[arg(
        long,
        value_name = "URL",
        env = "NOTICE_LEDGER_URL",
        hide_env_values = true,
        required_unless_present = "print_sql"
    )]
    postgres: Option<String>,
    /// Print the schema SQL instead of applying it (for a DBA or a migration tool).
    #[arg(long)]
    print_sql: bool,
}

/// Never prints the URL itself: it may carry a password.
impl std::fmt::Debug for InitArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InitArgs")
            .field("postgres", &self.postgres.as_deref().map(notice_postgres::redacted))
            .field("print_sql", &self.print_sql)
            .finish()
    }
}

pub(crate) async fn run(args: LedgerArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        LedgerCommand::Init(init) => init_postgres(init).await,
    }
}

async fn init_postgres(args: InitArgs) -> anyhow::Result<ExitCode> {
    if args.print_sql {
        println!("{}", MIGRATION.trim());
        return Ok(Exit::Ok.into());
    }
    let Some(url) = args.postgres else {
        anyhow::bail!("ledger init needs --postgres URL (or NOTICE_LEDGER_URL)");
    };
    if !notice_postgres::is_postgres_url(&url) {
        anyhow::bail!("ledger init: --postgres takes a postgres:// or postgresql:// URL");
    }
    let ledger = PostgresLedger::connect(&url).await?;
    ledger.migrate().await?;
    println!(
        "ledger schema ready at {} (tables notices, rate_buckets and ledger_meta, index notices_open_claims); use --ledger with the same URL",
        ledger.target()
    );
    Ok(Exit::Ok.into())
}
