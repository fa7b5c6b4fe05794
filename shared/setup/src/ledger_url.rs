//! Which ledger an entry point uses: one grammar for `NOTICE_LEDGER_URL` (and `noticectl
//! --ledger`), read the same way by every Lambda and the CLI, with the retention applied on every
//! path that opens a DynamoDB ledger.
//!
//! `dynamodb:TABLE`, `postgres://…` (or `postgresql://…`, feature `postgres`) and `sqlite:PATH`
//! (feature `sqlite`). A Lambda without `NOTICE_LEDGER_URL` uses the DynamoDB table in
//! `NOTICE_TABLE`, as the contract specifies.

use std::path::PathBuf;
use std::sync::Arc;

use notice_dynamodb::{DynamoBuckets, DynamoKeyCheck, DynamoLedger};
use notice_ledger::keycheck::KeyCheckStore;
use notice_ledger::ledger::Ledger;
use notice_ledger::rate::BucketStore;
use notice_ledger::{ConfigError, WindowPolicy};

use crate::config;

/// Variable naming the ledger in the one grammar below.
pub const LEDGER_URL_VAR: &str = "NOTICE_LEDGER_URL";
/// Variable naming the DynamoDB ledger table.
pub const TABLE_VAR: &str = "NOTICE_TABLE";
/// Variable for how long DynamoDB rows outlive their last write (days, default 400, at least 30).
pub const RETENTION_VAR: &str = "NOTICE_RETENTION_DAYS";
/// Shortest DynamoDB retention accepted.
pub const MIN_RETENTION_DAYS: u32 = 30;

/// A ledger named in the one grammar.
#[derive(Clone, PartialEq, Eq)]
pub enum LedgerUrl {
    Sqlite(PathBuf),
    DynamoDb(String),
    /// The full URL (it may carry a password: shown only through [`LedgerUrl::describe`]).
    Postgres(String),
}

impl std::fmt::Debug for LedgerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl LedgerUrl {
    /// Parses `dynamodb:TABLE`, `postgres://…`/`postgresql://…` or `sqlite:PATH`. The error never
    /// echoes the value: a mistyped database URL may still carry a password.
    pub fn parse(value: &str) -> Result<Self, ConfigError> {
        let invalid = |reason: &str| ConfigError::Invalid { name: LEDGER_URL_VAR, reason: reason.to_owned() };
        if let Some(path) = value.strip_prefix("sqlite:") {
            return if path.is_empty() {
                Err(invalid("sqlite: needs a path"))
            } else {
                Ok(Self::Sqlite(path.into()))
            };
        }
        if let Some(table) = value.strip_prefix("dynamodb:") {
            return if table.trim().is_empty() {
                Err(invalid("dynamodb: needs a table name"))
            } else {
                Ok(Self::DynamoDb(table.into()))
            };
        }
        if value.starts_with("postgres://") || value.starts_with("postgresql://") {
            return Ok(Self::Postgres(value.to_owned()));
        }
        Err(invalid("unknown ledger: use dynamodb:TABLE, postgres://USER@HOST/DB or sqlite:PATH"))
    }

    /// For messages and logs: a PostgreSQL URL without its password.
    pub fn describe(&self) -> String {
        match self {
            Self::Sqlite(p) => format!("sqlite:{}", p.display()),
            Self::DynamoDb(t) => format!("dynamodb:{t}"),
            Self::Postgres(url) => redacted(url),
        }
    }

    /// Opens the ledger. A DynamoDB ledger keeps decided rows `retention_days` (at least 30)
    /// and uses `sdk`, or the standard AWS environment when `None`; a PostgreSQL ledger is
    /// connected and checked here, so a bad URL stops the start-up instead of every message.
    pub async fn open(
        &self,
        sdk: Option<&aws_config::SdkConfig>,
        retention_days: u32,
    ) -> Result<Arc<dyn Ledger>, ConfigError> {
        Ok(self.open_with_buckets(sdk, retention_days).await?.ledger)
    }

    /// [`LedgerUrl::open`], with the per-domain rate buckets kept in the same store (the
    /// DynamoDB table, the PostgreSQL database, the SQLite file): whichever ledger a sender uses,
    /// its rate is shared with every other sender on that ledger.
    pub async fn open_with_buckets(
        &self,
        sdk: Option<&aws_config::SdkConfig>,
        retention_days: u32,
    ) -> Result<Opened, ConfigError> {
        match self {
            Self::DynamoDb(table) => {
                if retention_days < MIN_RETENTION_DAYS {
                    return Err(retention_too_short());
                }
                let loaded;
                let sdk = match sdk {
                    Some(sdk) => sdk,
                    None => {
                        loaded = crate::aws::load_sdk_config().await;
                        &loaded
                    }
                };
                let client = crate::aws::dynamodb_client(sdk);
                Ok(Opened {
                    ledger: Arc::new(
                        DynamoLedger::new(client.clone(), table.clone()).with_retention(retention_days),
                    ),
                    buckets: Arc::new(DynamoBuckets::new(client.clone(), table.clone())),
                    key_checks: Arc::new(DynamoKeyCheck::new(client, table.clone())),
                })
            }
            Self::Postgres(url) => postgres_from_url(url).await,
            Self::Sqlite(path) => sqlite_at(path),
        }
    }
}

/// An open ledger, and the rate buckets and key check its store keeps beside its rows.
pub struct Opened {
    pub ledger: Arc<dyn Ledger>,
    pub buckets: Arc<dyn BucketStore>,
    pub key_checks: Arc<dyn KeyCheckStore>,
}

/// The ledger the environment names: `NOTICE_LEDGER_URL` in the one grammar, else the DynamoDB
/// table in `NOTICE_TABLE`; DynamoDB rows kept `NOTICE_RETENTION_DAYS`.
pub async fn ledger_from_env(sdk: &aws_config::SdkConfig) -> Result<Arc<dyn Ledger>, ConfigError> {
    LedgerUrl::from_env()?.open(Some(sdk), retention_days_from_env()?).await
}

impl LedgerUrl {
    /// The ledger the environment names — the one place every Lambda decides it: a non-blank
    /// `NOTICE_LEDGER_URL` in the one grammar, else the DynamoDB table in `NOTICE_TABLE` (then
    /// required).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_settings(
            config::optional(LEDGER_URL_VAR).as_deref(),
            config::optional(TABLE_VAR).as_deref(),
        )
    }

    /// [`LedgerUrl::from_env`] with the settings already read (blank counts as unset).
    pub fn from_settings(ledger_url: Option<&str>, table: Option<&str>) -> Result<Self, ConfigError> {
        match ledger_url.filter(|u| !u.trim().is_empty()) {
            Some(url) => Self::parse(url),
            None => {
                let table = table.filter(|t| !t.trim().is_empty()).ok_or(ConfigError::Missing(TABLE_VAR))?;
                Ok(Self::DynamoDb(table.to_owned()))
            }
        }
    }
}

/// [`ledger_from_env`] with the settings already read: a non-empty `ledger_url` wins; otherwise
/// the DynamoDB `table`, whose decided rows outlive their last write by `retention_days`.
pub async fn ledger_for(
    sdk: &aws_config::SdkConfig,
    ledger_url: Option<&str>,
    table: Option<&str>,
    retention_days: u32,
) -> Result<Arc<dyn Ledger>, ConfigError> {
    LedgerUrl::from_settings(ledger_url, table)?.open(Some(sdk), retention_days).await
}

/// `NOTICE_RETENTION_DAYS` (default 400): rows must outlive every redelivery and replay, so less
/// than 30 is refused.
pub fn retention_days_from_env() -> Result<u32, ConfigError> {
    let days = config::secs_from_env(RETENTION_VAR, 400)?.as_secs();
    u32::try_from(days).ok().filter(|d| *d >= MIN_RETENTION_DAYS).ok_or_else(retention_too_short)
}

/// Days a decided row must outlive its last write: a job may be parked for weeks and still be
/// delivered again once its window opens, so the row that refuses it must outlast the longest
/// window opening plus the 30 days producers may enqueue ahead.
pub fn min_retention_days(policy: &WindowPolicy) -> u32 {
    policy.longest_opening_hours().div_ceil(24) + MIN_RETENTION_DAYS
}

/// Refuses a retention shorter than [`min_retention_days`] for this policy, at start-up.
pub fn check_retention(retention_days: u32, policy: &WindowPolicy) -> Result<(), ConfigError> {
    let min = min_retention_days(policy);
    if retention_days < min {
        return Err(ConfigError::Invalid {
            name: RETENTION_VAR,
            reason: format!(
                "{retention_days} days is shorter than the longest window opening plus 30 days ({min}): a row \
                 could expire while a parked or replayed copy of its job is still on its way"
            ),
        });
    }
    Ok(())
}

fn retention_too_short() -> ConfigError {
    ConfigError::Invalid {
        name: RETENTION_VAR,
        reason: format!(
            "must be {MIN_RETENTION_DAYS} or more: rows must outlive every redelivery and replay"
        ),
    }
}

#[cfg(feature = "postgres")]
async fn postgres_from_url(url: &str) -> Result<Opened, ConfigError> {
    use notice_postgres::PostgresLedger;
    let ledger = PostgresLedger::connect(url)
        .await
        .map_err(|error| ConfigError::Ledger { name: LEDGER_URL_VAR, error })?;
    tracing::info!(target = ledger.target(), "ledger: PostgreSQL");
    Ok(Opened {
        buckets: Arc::new(ledger.buckets()),
        key_checks: Arc::new(ledger.key_checks()),
        ledger: Arc::new(ledger),
    })
}

#[cfg(not(feature = "postgres"))]
async fn postgres_from_url(_url: &str) -> Result<Opened, ConfigError> {
    Err(not_built("PostgreSQL", "postgres"))
}

#[cfg(feature = "postgres")]
fn redacted(url: &str) -> String {
    notice_postgres::redacted(url)
}

/// Without the PostgreSQL adapter there is nothing to redact with: show only the scheme.
#[cfg(not(feature = "postgres"))]
fn redacted(url: &str) -> String {
    format!("{}://…", url.split("://").next().unwrap_or("postgres"))
}

#[cfg(feature = "sqlite")]
fn sqlite_at(path: &std::path::Path) -> Result<Opened, ConfigError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| ConfigError::Invalid {
            name: LEDGER_URL_VAR,
            reason: format!("{}: {e}", parent.display()),
        })?;
    }
    let invalid = |error| ConfigError::Ledger { name: LEDGER_URL_VAR, error };
    let ledger = notice_sqlite::SqliteLedger::open(path).map_err(invalid)?;
    let buckets = ledger.buckets();
    Ok(Opened {
        key_checks: Arc::new(ledger.key_checks()),
        ledger: Arc::new(ledger),
        buckets: Arc::new(buckets),
    })
}

#[cfg(not(feature = "sqlite"))]
fn sqlite_at(_path: &std::path::Path) -> Result<Opened, ConfigError> {
    Err(not_built("SQLite", "sqlite"))
}

#[allow(dead_code)]
fn not_built(what: &str, feature: &str) -> ConfigError {
    ConfigError::Invalid {
        name: LEDGER_URL_VAR,
        reason: format!("this build has no {what} ledger (cargo feature `{feature}` of notice_setup)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_grammar_and_no_password_in_any_message() {
        assert_eq!(LedgerUrl::parse("dynamodb:notices").unwrap(), LedgerUrl::DynamoDb("notices".into()));
        assert_eq!(
            LedgerUrl::parse("sqlite:.notices/ledger.db").unwrap(),
            LedgerUrl::Sqlite(".notices/ledger.db".into())
        );
        for url in
            ["postgres://ada:hunter2@db:5432/notices", "postgresql://ada:hunter2@db/notices?sslmode=require"]
        {
            let parsed = LedgerUrl::parse(url).unwrap();
            assert_eq!(parsed, LedgerUrl::Postgres(url.to_owned()));
            assert!(!parsed.describe().contains("hunter2") && !format!("{parsed:?}").contains("hunter2"));
        }
        for bad in ["mysql://ada:hunter2@db/x", "dynamodb:", "sqlite:", "notices"] {
            let err = LedgerUrl::parse(bad).unwrap_err().to_string();
            assert!(err.contains(LEDGER_URL_VAR) && !err.contains("hunter2"), "{bad}: {err}");
        }
    }

    #[test]
    fn retention_must_cover_the_longest_opening_plus_thirty_days() {
        let default = WindowPolicy::default(); // opens 72 h = 3 days before the charge
        assert_eq!(min_retention_days(&default), 33);
        assert!(check_retention(33, &default).is_ok());
        let err = check_retention(32, &default).unwrap_err().to_string();
        assert!(err.contains("NOTICE_RETENTION_DAYS") && err.contains("(33)"), "{err}");
        let annual = WindowPolicy::from_json(
            r#"{"kinds":{"annual_t30d":{"opens_hours_before":721,"closes_hours_before":168}}}"#,
        )
        .unwrap();
        assert_eq!(min_retention_days(&annual), 31 + 30);
        assert!(check_retention(60, &annual).is_err());
    }
}
