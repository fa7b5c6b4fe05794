//! Which ledger a command works on: `--ledger` (or `NOTICE_LEDGER_URL`) in the one grammar every
//! entry point shares ([`LedgerUrl`]: `sqlite:PATH`, `dynamodb:TABLE`, `postgres://…`), defaulting
//! to the state directory's SQLite `ledger.db`. DynamoDB is reached through the standard AWS
//! environment (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL…) and keeps decided rows for
//! `NOTICE_RETENTION_DAYS`, exactly as the Lambdas do.

use notice_setup::ledger_url::{retention_days_from_env, LedgerUrl, Opened};

/// `--ledger`, declared once for every subcommand that works on a ledger.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LedgerArg {
    /// The ledger: sqlite:PATH (default: <state-dir>/ledger.db), dynamodb:TABLE or
    /// postgres://USER@HOST/DB (the one grammar of NOTICE_LEDGER_URL).
    #[arg(long = "ledger", env = "NOTICE_LEDGER_URL", global = true, hide_env_values = true)]
    pub url: Option<String>,
}

impl LedgerArg {
    /// The ledger this names, or the state directory's SQLite file.
    pub fn target(&self, state_dir: &std::path::Path) -> anyhow::Result<LedgerTarget> {
        LedgerTarget::resolve(self.url.as_deref(), state_dir)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerTarget(LedgerUrl);

impl LedgerTarget {
    /// `--ledger` when given, else the state directory's SQLite ledger.
    pub fn resolve(arg: Option<&str>, state_dir: &std::path::Path) -> anyhow::Result<Self> {
        match arg {
            Some(value) => Ok(Self(LedgerUrl::parse(value)?)),
            None => Ok(Self(LedgerUrl::Sqlite(crate::local::ledger_path(state_dir)))),
        }
    }

    pub fn describe(&self) -> String {
        self.0.describe()
    }

    pub async fn open(&self) -> anyhow::Result<Opened> {
        let retention_days = match self.0 {
            LedgerUrl::DynamoDb(_) => retention_days_from_env()?,
            _ => 0,
        };
        Ok(self.0.open_with_buckets(None, retention_days).await?)
    }

    /// Whether this is the local SQLite file (no provider events feed it).
    pub fn is_local(&self) -> bool {
        matches!(self.0, LedgerUrl::Sqlite(_))
    }
}
