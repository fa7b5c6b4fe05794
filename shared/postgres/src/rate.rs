//! The per-domain rate buckets in PostgreSQL: one row per recipient domain in `rate_buckets`
//! (created by the same migration as `notices`, i.e. `noticectl ledger init`), holding the GCRA
//! state `tat_us`. Each admission is one conditional statement on the value it was computed from
//! — `INSERT … ON CONFLICT DO NOTHING` for a new bucket, `UPDATE … WHERE tat_us = $old` otherwise —
//! so senders in any language sharing the database share the bucket.

use async_trait::async_trait;
use tokio_postgres::error::SqlState;

use notice_ledger::rate::{BucketState, BucketStore, Swap};
use notice_ledger::LedgerError;

use crate::rows::error_chain;
use crate::PostgresLedger;

const SELECT: &str = "SELECT tat_us FROM rate_buckets WHERE domain = $1";
const INSERT: &str = "INSERT INTO rate_buckets (domain, tat_us, updated_at) VALUES ($1, $2, now()) \
                      ON CONFLICT (domain) DO NOTHING";
const UPDATE: &str =
    "UPDATE rate_buckets SET tat_us = $2, updated_at = now() WHERE domain = $1 AND tat_us = $3";

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
    fn pg(&self, op: &str, e: tokio_postgres::Error) -> LedgerError {
        if e.as_db_error().is_some_and(|db| *db.code() == SqlState::UNDEFINED_TABLE) {
            return LedgerError::Unavailable(format!(
                "PostgreSQL rate bucket {op} on {}: table `rate_buckets` does not exist — run \
                 `noticectl ledger init --postgres URL` (it is idempotent)",
                self.ledger.target
            ));
        }
        LedgerError::Unavailable(format!(
            "PostgreSQL rate bucket {op} on {}: {}",
            self.ledger.target,
            error_chain(&e)
        ))
    }

    async fn current(
        &self,
        client: &deadpool_postgres::Client,
        domain: &str,
    ) -> Result<Option<BucketState>, LedgerError> {
        let row = client.query_opt(SELECT, &[&domain]).await.map_err(|e| self.pg("read", e))?;
        row.map(|r| r.try_get::<_, i64>(0).map(|tat_us| BucketState { tat_us }))
            .transpose()
            .map_err(|e| self.pg("read", e))
    }
}

#[async_trait]
impl BucketStore for PostgresBuckets {
    async fn load(&self, domain: &str) -> Result<Option<BucketState>, LedgerError> {
        let client = self.ledger.client().await?;
        self.current(&client, domain).await
    }

    async fn swap(
        &self,
        domain: &str,
        expected: Option<BucketState>,
        new: BucketState,
    ) -> Result<Swap, LedgerError> {
        let client = self.ledger.client().await?;
        let written = match expected {
            None => client.execute(INSERT, &[&domain, &new.tat_us]).await,
            Some(old) => client.execute(UPDATE, &[&domain, &new.tat_us, &old.tat_us]).await,
        }
        .map_err(|e| self.pg("write", e))?;
        if written == 1 {
            return Ok(Swap::Done);
        }
        Ok(Swap::Conflict(self.current(&client, domain).await?))
    }
}
