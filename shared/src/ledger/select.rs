//! Which ledger a Lambda uses, from its environment: one decision, made once at cold start.
//!
//! `NOTICE_LEDGER_URL=postgres://…` selects the PostgreSQL ledger (feature `postgres`); otherwise
//! the DynamoDB table named by `NOTICE_TABLE` is the ledger, as the contract specifies.

use std::sync::Arc;

use super::dynamodb::DynamoLedger;
use super::Ledger;
use crate::config;
use crate::error::ConfigError;
use crate::policy::WindowPolicy;

/// Variable naming a PostgreSQL ledger (`postgres://…` / `postgresql://…`).
pub const LEDGER_URL_VAR: &str = "NOTICE_LEDGER_URL";
/// Variable naming the DynamoDB ledger table.
pub const TABLE_VAR: &str = "NOTICE_TABLE";
/// Variable for how long DynamoDB rows outlive their last write (days, default 400, at least 30).
pub const RETENTION_VAR: &str = "NOTICE_RETENTION_DAYS";
/// Shortest DynamoDB retention accepted.
pub const MIN_RETENTION_DAYS: u32 = 30;

/// The ledger the environment names: PostgreSQL when `NOTICE_LEDGER_URL` is a `postgres://` URL,
/// else DynamoDB on `NOTICE_TABLE` (with `NOTICE_RETENTION_DAYS`). A PostgreSQL ledger is
/// connected (and the connection checked) here, so a bad URL or unreachable database stops the
/// cold start instead of failing every message. Error messages never contain the URL.
pub async fn ledger_from_env(sdk: &aws_config::SdkConfig) -> Result<Arc<dyn Ledger>, ConfigError> {
    match config::optional(LEDGER_URL_VAR) {
        Some(url) => ledger_for(sdk, Some(&url), None, 0).await,
        None => {
            let table = config::required(TABLE_VAR)?;
            ledger_for(sdk, None, Some(&table), retention_days_from_env()?).await
        }
    }
}

/// [`ledger_from_env`] with the settings already read: `ledger_url` (a `postgres://` URL) wins;
/// otherwise the DynamoDB `table`, whose rows outlive their last write by `retention_days`.
pub async fn ledger_for(
    sdk: &aws_config::SdkConfig,
    ledger_url: Option<&str>,
    table: Option<&str>,
    retention_days: u32,
) -> Result<Arc<dyn Ledger>, ConfigError> {
    if let Some(url) = ledger_url.filter(|u| !u.trim().is_empty()) {
        return postgres_from_url(url).await;
    }
    let table = table.filter(|t| !t.trim().is_empty()).ok_or(ConfigError::Missing(TABLE_VAR))?;
    if retention_days < MIN_RETENTION_DAYS {
        return Err(retention_too_short());
    }
    let ledger = DynamoLedger::new(crate::aws::dynamodb_client(sdk), table).with_retention(retention_days);
    Ok(Arc::new(ledger))
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
async fn postgres_from_url(url: &str) -> Result<Arc<dyn Ledger>, ConfigError> {
    use super::postgres::{is_postgres_url, PostgresLedger};
    if !is_postgres_url(url) {
        return Err(not_postgres());
    }
    let ledger = PostgresLedger::connect(url)
        .await
        .map_err(|e| ConfigError::Invalid { name: LEDGER_URL_VAR, reason: e.to_string() })?;
    tracing::info!(target = ledger.target(), "ledger: PostgreSQL");
    Ok(Arc::new(ledger))
}

#[cfg(not(feature = "postgres"))]
async fn postgres_from_url(url: &str) -> Result<Arc<dyn Ledger>, ConfigError> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(not_postgres());
    }
    Err(ConfigError::Invalid {
        name: LEDGER_URL_VAR,
        reason: "this build has no PostgreSQL ledger (cargo feature `postgres` of notice_ledger)".into(),
    })
}

fn not_postgres() -> ConfigError {
    ConfigError::Invalid {
        name: LEDGER_URL_VAR,
        reason: format!(
            "must be a postgres:// or postgresql:// URL; unset it to use the DynamoDB table in {TABLE_VAR}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
