//! Reads: one row (optionally locked for the write that follows), many rows in the caller's
//! order, and the quarantine view over the partial index of open claims.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;

use notice_ledger::ledger::{LedgerRow, QuarantineView, RowReader};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

use crate::rows::read_row;
use crate::sql::{COLUMNS, QUARANTINE_QUERY, SELECT_ONE};
use crate::PostgresLedger;

impl PostgresLedger {
    pub(crate) async fn select_row(
        &self,
        client: &impl GenericClient,
        key: &NoticeKey,
        lock: bool,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        let sql = if lock { format!("{SELECT_ONE} FOR UPDATE") } else { SELECT_ONE.to_owned() };
        let stmt = client.prepare_cached(&sql).await.map_err(|e| self.pg("read", e))?;
        let row = client.query_opt(&stmt, &[&key.as_str()]).await.map_err(|e| self.pg("read", e))?;
        row.as_ref().map(read_row).transpose()
    }
}

#[async_trait]
impl RowReader for PostgresLedger {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        let client = self.client().await?;
        self.select_row(&client, key, false).await
    }
    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let wanted: Vec<&str> = keys.iter().map(NoticeKey::as_str).collect();
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(&format!("SELECT {COLUMNS} FROM notices WHERE notice_key = ANY($1)"))
            .await
            .map_err(|e| self.pg("read many", e))?;
        let rows = client.query(&stmt, &[&wanted]).await.map_err(|e| self.pg("read many", e))?;
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for row in &rows {
            let row = read_row(row)?;
            found.insert(row.key.clone(), row);
        }
        // Answer in the caller's order, each key once, like the other adapters.
        Ok(keys.iter().filter_map(|k| found.remove(k)).collect())
    }
}

#[async_trait]
impl QuarantineView for PostgresLedger {
    async fn count_open_claims(
        &self,
        claimed_before: DateTime<Utc>,
    ) -> Result<(usize, Option<DateTime<Utc>>), LedgerError> {
        PostgresLedger::count_open_claims(self, claimed_before).await
    }
    async fn open_claims(
        &self,
        claimed_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<LedgerRow>, LedgerError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let stmt = client.prepare_cached(QUARANTINE_QUERY).await.map_err(|e| self.pg("open claims", e))?;
        let rows =
            client.query(&stmt, &[&claimed_before, &limit]).await.map_err(|e| self.pg("open claims", e))?;
        rows.iter().map(read_row).collect()
    }
}
