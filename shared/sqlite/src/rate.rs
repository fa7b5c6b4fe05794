//! The per-domain rate buckets in the SQLite ledger file (local runs of `noticectl send`): one row
//! per domain in `rate_buckets`, written only by compare-and-set inside `BEGIN IMMEDIATE`, so
//! several local processes on one file share one bucket.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, TransactionBehavior};

use notice_ledger::rate::{BucketState, BucketStore, Swap};
use notice_ledger::LedgerError;

use crate::{sql, SqliteLedger};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS rate_buckets (
    domain        TEXT PRIMARY KEY,
    -- GCRA theoretical arrival time of the next send, microseconds since the epoch.
    tat_us        INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL
);
";

/// The buckets of one ledger file (shares the ledger's connection).
#[derive(Clone)]
pub struct SqliteBuckets {
    ledger: SqliteLedger,
}

impl SqliteLedger {
    /// The rate buckets kept in this ledger's file (the table is created if missing).
    pub fn buckets(&self) -> Result<SqliteBuckets, LedgerError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.execute_batch(SCHEMA).map_err(sql)?;
        Ok(SqliteBuckets { ledger: self.clone() })
    }
}

fn current(conn: &rusqlite::Connection, domain: &str) -> Result<Option<BucketState>, LedgerError> {
    conn.query_row("SELECT tat_us FROM rate_buckets WHERE domain = ?1", [domain], |r| r.get::<_, i64>(0))
        .optional()
        .map(|tat| tat.map(|tat_us| BucketState { tat_us }))
        .map_err(sql)
}

#[async_trait]
impl BucketStore for SqliteBuckets {
    async fn load(&self, domain: &str) -> Result<Option<BucketState>, LedgerError> {
        let domain = domain.to_owned();
        self.ledger.with(move |conn| current(conn, &domain)).await
    }

    async fn swap(
        &self,
        domain: &str,
        expected: Option<BucketState>,
        new: BucketState,
    ) -> Result<Swap, LedgerError> {
        let domain = domain.to_owned();
        self.ledger
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
                let found = current(&tx, &domain)?;
                if found != expected {
                    return Ok(Swap::Conflict(found));
                }
                let now_ms = chrono::Utc::now().timestamp_millis();
                tx.execute(
                    "INSERT INTO rate_buckets (domain, tat_us, updated_at_ms) VALUES (?1, ?2, ?3)
                     ON CONFLICT (domain) DO UPDATE SET tat_us = excluded.tat_us,
                                                        updated_at_ms = excluded.updated_at_ms",
                    params![domain, new.tat_us, now_ms],
                )
                .map_err(sql)?;
                tx.commit().map_err(sql)?;
                Ok(Swap::Done)
            })
            .await
    }
}
