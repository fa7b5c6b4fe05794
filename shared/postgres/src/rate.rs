//! The per-domain rate buckets in PostgreSQL: one row per recipient domain in `rate_buckets`
//! (created by the same migration as `notices`, i.e. `noticectl ledger init`), holding the GCRA
//! state `tat_us`. A take is one conditional statement the database checks as it applies it —
//! `UPDATE … SET tat_us = tat_us + $add WHERE $now <= tat_us AND tat_us <= $max` for a busy
//! bucket, `INSERT … ON CONFLICT DO UPDATE … WHERE tat_us < $now` for an idle or new one — so
//! concurrent senders (in any language sharing the database) queue on the row's lock instead of
//! failing each other.

use async_trait::async_trait;
use tokio_postgres::error::SqlState;

use notice_ledger::rate::{Applied, BucketError, BucketState, BucketStore};
use notice_ledger::LedgerError;

use crate::rows::error_chain;
use crate::PostgresLedger;

const SELECT: &str = "SELECT tat_us FROM rate_buckets WHERE domain = $1";
const ADD: &str = "UPDATE rate_buckets SET tat_us = tat_us + $2, updated_at = now() \
                   WHERE domain = $1 AND tat_us >= $3 AND tat_us <= $4 RETURNING tat_us";
const RESET: &str = "INSERT INTO rate_buckets (domain, tat_us, updated_at) VALUES ($1, $2, now()) \
                     ON CONFLICT (domain) DO UPDATE SET tat_us = EXCLUDED.tat_us, updated_at = now() \
                     WHERE rate_buckets.tat_us < $3 RETURNING tat_us";

/// The buckets of one ledger database (shares the ledger's connection pool).
#[derive(Clone, Debug)]
pub struct PostgresBuckets {
    ledger: PostgresLedger,
}

impl PostgresLedger {
    /// The rate buckets kept next to this ledger's `notices` table.
    pub fn buckets(&self) -> PostgresBuckets {
        PostgresBuckets { ledger: self.clone() }
    }
}

impl PostgresBuckets {
    fn pg(&self, op: &str, e: tokio_postgres::Error) -> BucketError {
        if e.as_db_error().is_some_and(|db| *db.code() == SqlState::UNDEFINED_TABLE) {
            return LedgerError::unavailable(format!(
                "PostgreSQL rate bucket {op} on {}: table `rate_buckets` does not exist — run \
                 `noticectl ledger init --postgres URL` (it is idempotent)",
                self.ledger.target
            ))
            .into();
        }
        LedgerError::unavailable(format!(
            "PostgreSQL rate bucket {op} on {}: {}",
            self.ledger.target,
            error_chain(&e)
        ))
        .into()
    }

    async fn current(
        &self,
        client: &deadpool_postgres::Client,
        domain: &str,
    ) -> Result<Option<BucketState>, BucketError> {
        let row = client.query_opt(SELECT, &[&domain]).await.map_err(|e| self.pg("read", e))?;
        row.map(|r| r.try_get::<_, i64>(0).map(|tat_us| BucketState { tat_us }))
            .transpose()
            .map_err(|e| self.pg("read", e))
    }
}

#[async_trait]
impl BucketStore for PostgresBuckets {
    async fn load(&self, domain: &str) -> Result<Option<BucketState>, BucketError> {
        let client = self.ledger.client().await?;
        self.current(&client, domain).await
    }

    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, BucketError> {
        let client = self.ledger.client().await?;
        let row = client
            .query_opt(ADD, &[&bucket, &add_us, &now_us, &max_us])
            .await
            .map_err(|e| self.pg("write", e))?;
        self.applied(&client, bucket, row).await
    }

    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, BucketError> {
        let client = self.ledger.client().await?;
        let row =
            client.query_opt(RESET, &[&bucket, &tat_us, &now_us]).await.map_err(|e| self.pg("write", e))?;
        self.applied(&client, bucket, row).await
    }
}

impl PostgresBuckets {
    /// The written TAT, or — when the condition refused the write — what the bucket holds.
    async fn applied(
        &self,
        client: &deadpool_postgres::Client,
        bucket: &str,
        row: Option<tokio_postgres::Row>,
    ) -> Result<Applied, BucketError> {
        match row {
            Some(row) => {
                let tat_us: i64 = row.try_get(0).map_err(|e| self.pg("write", e))?;
                Ok(Applied::Done(BucketState { tat_us }))
            }
            None => Ok(Applied::Refused(self.current(client, bucket).await?)),
        }
    }
}
