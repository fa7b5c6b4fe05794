//! The key check kept in the ledger database's `ledger_meta` table, beside the rows it guards.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::error::SqlState;

use notice_ledger::keycheck::{stored_name, KeyCheck, KeyCheckStore};
use notice_ledger::LedgerError;

use crate::sql::{INSERT_KEY_CHECK, SELECT_KEY_CHECK};
use crate::PostgresLedger;

/// The key check kept in this ledger database's `ledger_meta` table (created by the same
/// migration as `notices`, i.e. `noticectl ledger init`; shares the ledger's connection pool).
#[derive(Clone, Debug)]
pub struct PostgresKeyCheck {
    ledger: PostgresLedger,
}

impl PostgresLedger {
    /// The key check kept next to this ledger's `notices` table.
    pub fn key_checks(&self) -> PostgresKeyCheck {
        PostgresKeyCheck { ledger: self.clone() }
    }
}

impl PostgresKeyCheck {
    fn pg(&self, op: &str, e: tokio_postgres::Error) -> LedgerError {
        if e.as_db_error().is_some_and(|db| *db.code() == SqlState::UNDEFINED_TABLE) {
            return LedgerError::unavailable(format!(
                "PostgreSQL key check {op} on {}: table `ledger_meta` does not exist — run \
                 `noticectl ledger init --postgres URL` (it is idempotent)",
                self.ledger.target
            ));
        }
        self.ledger.pg(&format!("key check {op}"), e)
    }

    async fn held(&self, client: &impl GenericClient, version: u32) -> Result<Option<KeyCheck>, LedgerError> {
        let name = stored_name(version);
        let row = client.query_opt(SELECT_KEY_CHECK, &[&name]).await.map_err(|e| self.pg("read", e))?;
        row.map(|r| r.try_get::<_, String>(0).map_err(|e| self.pg("read", e)))
            .transpose()?
            .map(|stored| KeyCheck::parse(&stored))
            .transpose()
    }
}

#[async_trait]
impl KeyCheckStore for PostgresKeyCheck {
    async fn key_check_of(&self, version: u32) -> Result<Option<KeyCheck>, LedgerError> {
        let client = self.ledger.client().await?;
        self.held(&client, version).await
    }

    /// `INSERT … ON CONFLICT (name) DO NOTHING`, then the row: a racing first writer's insert
    /// makes ours wait for its commit and do nothing, so both read the first check.
    async fn record_key_check(&self, check: &KeyCheck) -> Result<KeyCheck, LedgerError> {
        let client = self.ledger.client().await?;
        let name = stored_name(check.version_number());
        client
            .execute(INSERT_KEY_CHECK, &[&name, &check.to_stored()])
            .await
            .map_err(|e| self.pg("write", e))?;
        self.held(&client, check.version_number())
            .await?
            .ok_or_else(|| LedgerError::Corrupt("the key check vanished after it was recorded".into()))
    }
}
