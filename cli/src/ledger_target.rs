//! Which ledger a command works on: `--ledger` (or `NOTICE_LEDGER_URL`) in the one grammar every
//! entry point shares ([`LedgerUrl`]: `sqlite:PATH`, `dynamodb:TABLE`, `postgres://…`), defaulting
//! to the state directory's SQLite `ledger.db`. DynamoDB is reached through the standard AWS
//! environment (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL…) and keeps decided rows for
//! `NOTICE_RETENTION_DAYS`, exactly as the Lambdas do.

use notice_ledger::keycheck::{check_ring, KeyCheck, KeyCheckError, KeyCheckOutcome};
use notice_ledger::keyring::KeyRing;
use notice_setup::ledger_url::{retention_days_from_env, LedgerUrl, Opened};

/// The key secret is not the one the ledger's keys were made with: a configuration error (exit 2).
#[derive(Debug, thiserror::Error)]
#[error(
    "the key secret ({ours}) is not the one {ledger}'s notice keys were made with ({stored}): every key \
     it derives would name no notice, so nothing was read or written — use the deployment's secret \
     (NOTICE_KEY_SECRET_ARN, or NOTICE_KEY_SECRET)"
)]
pub struct SecretMismatch {
    pub ledger: String,
    pub ours: KeyCheck,
    pub stored: KeyCheck,
}

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

    /// [`LedgerTarget::open`], then the key secret checked against the ledger's key check before
    /// anything is read or written: a secret the ledger's keys were not made with is refused (its
    /// keys would name no notice, and every answer would be wrong). With `record` (a local
    /// `send`), a ledger without a check gets this secret's; without, such a ledger (one from
    /// before key checks, not yet opened by a sender) is used with a warning that names it.
    /// Returns the ledger and the secret's check (its identifier for the output).
    pub async fn open_checked(&self, secret: &KeyRing, record: bool) -> anyhow::Result<(Opened, KeyCheck)> {
        let opened = self.open().await?;
        let outcome = check_ring(opened.key_checks.as_ref(), secret, record).await;
        match &outcome {
            Ok(KeyCheckOutcome::Unchecked(ours)) => eprintln!(
                "noticectl: {} holds no key check yet (written before key checks): the key secret ({ours}) \
                 cannot be verified — the sender records the deployment's at its next start",
                self.describe()
            ),
            Ok(_) => {}
            Err(_) => {}
        }
        match outcome {
            Ok(outcome) => Ok((opened, outcome.ours().clone())),
            Err(KeyCheckError::Mismatch { ours, stored }) => {
                Err(SecretMismatch { ledger: self.describe(), ours, stored }.into())
            }
            Err(KeyCheckError::Ledger(e)) => Err(e.into()),
        }
    }

    /// Whether this is the local SQLite file (no provider events feed it).
    pub fn is_local(&self) -> bool {
        matches!(self.0, LedgerUrl::Sqlite(_))
    }
}
