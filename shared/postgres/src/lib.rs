//! PostgreSQL ledger: the seed design's own store, shared with workers written in other languages.
//!
//! One row per notice key in table `notices` (schema: [`MIGRATION`]). The claim is the seed
//! design's statement — `INSERT … ON CONFLICT (notice_key) DO UPDATE … WHERE notices.state =
//! 'released' RETURNING claim_token` — committed before anything is sent. When it returns nothing,
//! someone holds the key; the conflicting row stays locked by our statement until the transaction
//! ends, so the `SELECT` that follows reads exactly the row that refused us. Every transition out
//! of `claimed` is an `UPDATE … WHERE state = 'claimed' AND claim_token = $token`, so a slow worker
//! whose claim was released and re-minted cannot overwrite the new owner.
//!
//! Storage choices:
//! - timestamps are `timestamptz` (microseconds): operators can query them directly
//!   (`now() - claimed_at > interval '15 minutes'`). Times are truncated to microseconds before
//!   they are written, so a row read back compares equal to what was meant.
//! - `revision` is `numeric(20,0)`: PostgreSQL has no unsigned 64-bit integer, and every `u64`
//!   revision (up to 18446744073709551615) is a valid notice revision.
//! - the quarantine view reads a partial index over open claims (`WHERE state = 'claimed'`).
//!
//! Connections come from a small pool; TLS (rustls, always verifying the server certificate) is
//! used when the URL asks for it with `sslmode=require` (or `verify-ca`/`verify-full`).

/// The service this adapter is, as an operator knows it: named in every typed failure.
pub const SERVICE: &str = "PostgreSQL";

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;
use tracing::debug;

use notice_ledger::{Fault, LedgerError};

mod claim;
mod connect;
mod evidence;
mod keycheck;
mod operator;
pub mod rate;
mod reads;
mod rows;
mod sql;

pub use keycheck::PostgresKeyCheck;
pub use rate::PostgresBuckets;

pub use connect::{is_postgres_url, redacted};
pub use sql::{MIGRATION, QUARANTINE_QUERY};

use connect::{describe, tls_connector, ConnectOptions};
use rows::error_chain;
use sql::MIGRATION_LOCK;

/// Connections per ledger handle: enough for a sender's concurrent jobs, small enough that many
/// Lambda instances do not exhaust the server's `max_connections`.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// Longest wait for a connection (new or pooled) before the operation reports the ledger unavailable.
const POOL_TIMEOUT: Duration = Duration::from_secs(10);

/// Applied when the URL sets no `connect_timeout`: an unreachable server must fail, not hang a send.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The PostgreSQL ledger: a pool of connections to one database.
#[derive(Clone)]
pub struct PostgresLedger {
    pool: Pool,
    /// `postgres://user@host:port/db` — for messages; never carries the password.
    target: String,
}

impl std::fmt::Debug for PostgresLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresLedger").field("target", &self.target).finish_non_exhaustive()
    }
}

impl PostgresLedger {
    /// Connects to the database at `url` (`postgres://` or `postgresql://`, libpq style) with a
    /// pool of [`DEFAULT_POOL_SIZE`] connections, and checks that the server answers.
    ///
    /// TLS: `sslmode=require`, `verify-ca` or `verify-full` connect over TLS and verify the server
    /// certificate against the system roots plus `sslrootcert=PATH` (a PEM bundle, e.g. the RDS CA
    /// bundle) — stricter than libpq's `require`, on purpose: a ledger reachable through a forged
    /// certificate can be made to approve duplicate sends. Any other `sslmode` (or none) is plain.
    ///
    /// Does not create the schema: run [`PostgresLedger::migrate`] (`noticectl ledger init`) once.
    pub async fn connect(url: &str) -> Result<Self, LedgerError> {
        Self::connect_with_pool_size(url, DEFAULT_POOL_SIZE).await
    }

    /// [`PostgresLedger::connect`] with `size` pooled connections (at least one).
    pub async fn connect_with_pool_size(url: &str, size: usize) -> Result<Self, LedgerError> {
        let options = ConnectOptions::parse(url)?;
        let mut config = tokio_postgres::Config::from_str(&options.url)
            .map_err(|e| LedgerError::unavailable(format!("invalid PostgreSQL URL: {}", error_chain(&e))))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("notice-ledger");
        }
        let target = describe(&config);
        let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = match &options.tls {
            None => {
                config.ssl_mode(SslMode::Disable);
                Manager::from_config(config, NoTls, manager_config)
            }
            Some(roots) => {
                config.ssl_mode(SslMode::Require);
                Manager::from_config(config, tls_connector(roots)?, manager_config)
            }
        };
        let pool = Pool::builder(manager)
            .max_size(size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_TIMEOUT))
            .create_timeout(Some(POOL_TIMEOUT))
            .recycle_timeout(Some(POOL_TIMEOUT))
            .build()
            .map_err(|e| LedgerError::unavailable(format!("PostgreSQL pool for {target}: {e}")))?;
        let ledger = Self { pool, target };
        // Fail at start-up, not on the first message, when the server is unreachable or refuses us.
        let client = ledger.client().await?;
        client.simple_query("SELECT 1").await.map_err(|e| ledger.pg("connection check", e))?;
        debug!(target = %ledger.target, tls = options.tls.is_some(), "PostgreSQL ledger connected");
        Ok(ledger)
    }

    /// Creates the schema ([`MIGRATION`]) if it is missing. Idempotent; concurrent runs wait for
    /// each other.
    pub async fn migrate(&self) -> Result<(), LedgerError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.pg("migrate", e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(|e| self.pg("migrate", e))?;
        tx.batch_execute(MIGRATION).await.map_err(|e| self.pg("migrate", e))?;
        tx.commit().await.map_err(|e| self.pg("migrate", e))
    }

    /// `postgres://user@host:port/db` of this ledger (no password), for logs and operator output.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Open claims claimed before `claimed_before`: how many, and when the oldest was claimed.
    /// One query over the partial index, cheap enough for a reporter on every tick.
    pub async fn count_open_claims(
        &self,
        claimed_before: DateTime<Utc>,
    ) -> Result<(usize, Option<DateTime<Utc>>), LedgerError> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(*), min(claimed_at) FROM notices WHERE state = 'claimed' AND claimed_at < $1",
                &[&claimed_before],
            )
            .await
            .map_err(|e| self.pg("count open claims", e))?;
        let count: i64 = row.try_get(0).map_err(|e| self.pg("count open claims", e))?;
        let oldest: Option<DateTime<Utc>> = row.try_get(1).map_err(|e| self.pg("count open claims", e))?;
        Ok((usize::try_from(count).unwrap_or(usize::MAX), oldest))
    }

    async fn client(&self) -> Result<deadpool_postgres::Client, LedgerError> {
        self.pool.get().await.map_err(|e| {
            let (fault, detail) = match &e {
                deadpool_postgres::PoolError::Backend(inner) => (fault_of(inner), error_chain(inner)),
                other => (Fault::Other, other.to_string()),
            };
            LedgerError::faulted(
                crate::SERVICE,
                fault,
                format!("PostgreSQL {}: cannot get a connection: {detail}", self.target),
            )
        })
    }

    fn pg(&self, op: &str, e: tokio_postgres::Error) -> LedgerError {
        if let Some(db) = e.as_db_error() {
            if *db.code() == SqlState::UNDEFINED_COLUMN {
                return LedgerError::unavailable(format!(
                    "PostgreSQL {op} on {}: {} — the schema predates this version: run \
                     `noticectl ledger init --postgres URL` again (it only adds the missing columns)",
                    self.target,
                    db.message()
                ));
            }
            if *db.code() == SqlState::UNDEFINED_TABLE {
                return LedgerError::unavailable(format!(
                    "PostgreSQL {op} on {}: table `notices` does not exist — run \
                     `noticectl ledger init --postgres URL` once",
                    self.target
                ));
            }
            return LedgerError::faulted(
                crate::SERVICE,
                fault_of(&e),
                format!(
                    "PostgreSQL {op} on {}: {} (SQLSTATE {})",
                    self.target,
                    db.message(),
                    db.code().code()
                ),
            );
        }
        LedgerError::faulted(
            crate::SERVICE,
            fault_of(&e),
            format!("PostgreSQL {op} on {}: {}", self.target, error_chain(&e)),
        )
    }
}

/// The fault a driver error names, from its typed parts: a refused password by its SQLSTATE, a
/// failed connection by the I/O error under it; anything else is [`Fault::Other`].
fn fault_of(e: &tokio_postgres::Error) -> Fault {
    match e.as_db_error() {
        Some(db) if *db.code() == SqlState::INVALID_PASSWORD => Fault::Denied { action: None },
        Some(_) => Fault::Other,
        None => Fault::unreachable_in(e).unwrap_or(Fault::Other),
    }
}

#[cfg(test)]
mod fault_tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_port_is_unreachable_by_its_io_error() {
        let Err(e) = PostgresLedger::connect("postgres://u@127.0.0.1:1/db").await else {
            panic!("nothing listens on port 1")
        };
        assert_eq!(e.fault(), Some(&Fault::Unreachable("connection refused")), "{e}");
    }
}
