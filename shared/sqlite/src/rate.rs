//! The per-domain rate buckets in the SQLite ledger file (local runs of `noticectl send`): one row
//! per bucket in `rate_buckets`, written only by the two conditional writes of
//! [`BucketStore`], each one statement inside `BEGIN IMMEDIATE` (SQLite applies one writer at a
//! time), so several local processes on one file share one bucket.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, TransactionBehavior};

use notice_ledger::rate::{Applied, BucketError, BucketState, BucketStore};
use notice_ledger::LedgerError;

use crate::{sql, SqliteLedger};

pub(crate) const SCHEMA: &str = "
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
    /// The rate buckets kept in this ledger's file (its table is created when the file is opened).
    pub fn buckets(&self) -> SqliteBuckets {
        SqliteBuckets { ledger: self.clone() }
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
    async fn load(&self, domain: &str) -> Result<Option<BucketState>, BucketError> {
        let domain = domain.to_owned();
        Ok(self.ledger.with(move |conn| current(conn, &domain)).await?)
    }

    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, BucketError> {
        const ADD: &str = "UPDATE rate_buckets SET tat_us = tat_us + ?2, updated_at_ms = ?5
                           WHERE domain = ?1 AND tat_us >= ?3 AND tat_us <= ?4 RETURNING tat_us";
        self.write(bucket, ADD, [add_us, now_us, max_us]).await
    }

    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, BucketError> {
        const RESET: &str = "INSERT INTO rate_buckets (domain, tat_us, updated_at_ms) VALUES (?1, ?2, ?4)
                             ON CONFLICT (domain) DO UPDATE SET tat_us = excluded.tat_us,
                                                                updated_at_ms = excluded.updated_at_ms
                             WHERE rate_buckets.tat_us < ?3
                             RETURNING tat_us";
        self.write(bucket, RESET, [tat_us, now_us]).await
    }
}

impl SqliteBuckets {
    /// One conditional statement `RETURNING tat_us` inside `BEGIN IMMEDIATE`, its parameters the
    /// bucket (`?1`), `numbers` (`?2`…) and the write time in ms (last): the written TAT, or — when
    /// its condition refused the write — what the bucket holds.
    async fn write<const N: usize>(
        &self,
        bucket: &str,
        statement: &'static str,
        numbers: [i64; N],
    ) -> Result<Applied, BucketError> {
        use rusqlite::types::Value;
        let bucket = bucket.to_owned();
        let applied = self
            .ledger
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
                let values = std::iter::once(Value::Text(bucket.clone()))
                    .chain(numbers.into_iter().map(Value::Integer))
                    .chain([Value::Integer(chrono::Utc::now().timestamp_millis())]);
                let written: Option<i64> = tx
                    .query_row(statement, rusqlite::params_from_iter(values), |r| r.get(0))
                    .optional()
                    .map_err(sql)?;
                let applied = match written {
                    Some(tat_us) => Applied::Done(BucketState { tat_us }),
                    None => Applied::Refused(current(&tx, &bucket)?),
                };
                tx.commit().map_err(sql)?;
                Ok(applied)
            })
            .await?;
        Ok(applied)
    }
}
