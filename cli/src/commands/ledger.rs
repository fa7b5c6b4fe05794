//! `noticectl ledger init --postgres URL`: creates the PostgreSQL ledger's schema.
//!
//! The schema is applied explicitly rather than on every connect: senders and Lambdas then need
//! only row privileges, and a typo'd URL never creates a stray ledger. SQLite creates its file on
//! open; the DynamoDB table comes from `template.yaml`.
//!
//! With a key secret configured (`NOTICE_KEY_SECRET` / `NOTICE_KEY_SECRET_ARN`), init also records
//! its key check, so a fresh ledger is protected from the start (no window in which a command with
//! another secret is only warned); a ledger that already holds another secret's check is refused
//! (exit 2), naming both identifiers.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use notice_ledger::keycheck::{check_ring, KeyCheck, KeyCheckError, KeyCheckOutcome};
use notice_postgres::{PostgresLedger, MIGRATION};

use crate::exit::Exit;

#[derive(Args, Debug)]
pub(crate) struct LedgerArgs {
    #[command(subcommand)]
    command: LedgerCommand,
}

#[derive(Subcommand, Debug)]
enum LedgerCommand {
    /// Create or upgrade the PostgreSQL ledger schema (tables `notices`, `rate_buckets` and `ledger_meta`, open-claims index). Idempotent: run it again after every upgrade. With NOTICE_KEY_SECRET[_ARN] set, also records the key check (exit 2 if the ledger holds another secret's).
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
    // The secret is resolved before connecting: a blank or unreadable one stops before any change.
    let secret = configured_key_secret().await?;
    let ledger = PostgresLedger::connect(&url).await?;
    ledger.migrate().await?;
    println!(
        "ledger schema ready at {} (tables notices, rate_buckets and ledger_meta, index notices_open_claims); use --ledger with the same URL",
        ledger.target()
    );
    let Some(secret) = secret else {
        println!(
            "key check: none recorded here (no NOTICE_KEY_SECRET or NOTICE_KEY_SECRET_ARN set); the sender \
             records its secret's at its first start"
        );
        return Ok(Exit::Ok.into());
    };
    match check_ring(&ledger.key_checks(), &secret, true).await {
        Ok(KeyCheckOutcome::Recorded(ours)) => println!("key check: recorded key secret {ours}"),
        Ok(outcome) => println!("key check: the ledger's matches key secret {}", outcome.ours()),
        Err(KeyCheckError::Mismatch { ours, stored }) => {
            return Err(InitMismatch { ledger: ledger.target().to_owned(), ours, stored }.into())
        }
        Err(KeyCheckError::Ledger(e)) => return Err(e.into()),
    }
    Ok(Exit::Ok.into())
}

/// The deployment's key secret when one is configured (`NOTICE_KEY_SECRET`, or fetched from
/// `NOTICE_KEY_SECRET_ARN`); `None` when neither is set — `ledger init` never falls back to a
/// local random secret, whose check would lock the deployment's sender out of its own ledger.
async fn configured_key_secret() -> anyhow::Result<Option<notice_ledger::keyring::KeyRing>> {
    if notice_setup::secret::source_from_env()?.is_none() {
        return Ok(None);
    }
    let sdk = notice_setup::aws::load_sdk_config().await;
    Ok(notice_setup::secret::resolve(&sdk).await?)
}

/// `ledger init` with a key secret the ledger's key check refuses (exit 2). The schema was
/// brought up to date (it does not depend on the secret); the key check was left as it is.
#[derive(Debug, thiserror::Error)]
#[error(
    "ledger init: the key secret ({ours}) is not the one {ledger}'s notice keys were made with \
     ({stored}): the key check was left as it is (the schema is up to date) — configure the \
     deployment's secret (NOTICE_KEY_SECRET_ARN, or NOTICE_KEY_SECRET)"
)]
struct InitMismatch {
    ledger: String,
    ours: KeyCheck,
    stored: KeyCheck,
}
