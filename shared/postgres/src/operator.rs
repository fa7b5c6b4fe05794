//! The operator's path: resolving an open claim by hand (release, or record it as sent), backfill
//! of whole rows, and the key and update-time scans, at an operator's pace.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;

use notice_ledger::ledger::{
    release_detail, resolve_detail, ClaimToken, LedgerRow, OperatorLedger, Origin, RowState,
};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

use crate::rows::{read_row, to_micros};
use crate::sql::{COLUMNS, INSERT_ROW, OPERATOR};
use crate::PostgresLedger;

impl PostgresLedger {
    /// An operator transition: any open claim → `to`, origin `operator`. Anything else conflicts.
    async fn operator_transition(
        &self,
        key: &NoticeKey,
        to: RowState,
        at: DateTime<Utc>,
        message_id: Option<&str>,
        detail: String,
    ) -> Result<(), LedgerError> {
        let at = to_micros(at);
        let client = self.client().await?;
        let stmt = client.prepare_cached(OPERATOR).await.map_err(|e| self.pg("operator update", e))?;
        let changed = client
            .execute(
                &stmt,
                &[&to.as_str(), &at, &message_id, &detail, &key.as_str(), &Origin::Operator.as_str()],
            )
            .await
            .map_err(|e| self.pg("operator update", e))?;
        if changed == 1 {
            return Ok(());
        }
        match self.select_row(&client, key, false).await? {
            Some(row) => {
                Err(LedgerError::Conflict(format!("{} is {}, not an open claim", key.prefix(), row.state)))
            }
            None => Err(LedgerError::Conflict(format!("{} has no ledger row", key.prefix()))),
        }
    }

    /// `INSERT … ON CONFLICT DO NOTHING` of a whole row; whether it wrote.
    pub(crate) async fn insert_row(
        &self,
        client: &impl GenericClient,
        row: &LedgerRow,
    ) -> Result<bool, LedgerError> {
        let revision = row.revision.to_string();
        let claimed_at = row.claimed_at.map(to_micros);
        let updated_at = to_micros(row.updated_at);
        let charge_at = row.charge_at.map(to_micros);
        let stmt = client.prepare_cached(INSERT_ROW).await.map_err(|e| self.pg("insert", e))?;
        let rendered = row.rendered.as_ref();
        let params: [&(dyn ToSql + Sync); 21] = [
            &row.key.as_str(),
            &row.state.as_str(),
            &row.origin.as_str(),
            &row.claim_token.as_ref().map(ClaimToken::as_str),
            &row.subscription_id,
            &row.period_start,
            &row.kind,
            &revision,
            &row.content_digest,
            &claimed_at,
            &updated_at,
            &row.message_id,
            &row.detail,
            &row.delivery_status.map(|d| d.as_str()),
            &row.duplicate_message_ids,
            &charge_at,
            &row.jurisdiction,
            &rendered.map(|r| r.config_version.as_str()),
            &rendered.map(|r| r.template.as_str()),
            &rendered.map(|r| r.rendered_digest.as_str()),
            &row.obligation,
        ];
        let n = client.execute(&stmt, &params).await.map_err(|e| self.pg("insert", e))?;
        Ok(n == 1)
    }
}

#[async_trait]
impl OperatorLedger for PostgresLedger {
    async fn operator_release(
        &self,
        key: &NoticeKey,
        who: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        let at = to_micros(at);
        self.operator_transition(key, RowState::Released, at, None, release_detail(who, reason, at)).await
    }
    async fn operator_resolve_sent(
        &self,
        key: &NoticeKey,
        message_id: &str,
        who: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        let at = to_micros(at);
        self.operator_transition(key, RowState::Sent, at, Some(message_id), resolve_detail(who, at)).await
    }
    async fn backfill(&self, row: &LedgerRow) -> Result<bool, LedgerError> {
        let client = self.client().await?;
        self.insert_row(&client, row).await
    }

    async fn keys_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<NoticeKey>, LedgerError> {
        let (from, to) = (prefix.to_owned(), notice_ledger::ledger::prefix_end(prefix));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT notice_key FROM notices WHERE notice_key >= $1 AND notice_key < $2 ORDER BY notice_key LIMIT $3",
                &[&from, &to, &limit],
            )
            .await
            .map_err(|e| self.pg("read keys by prefix", e))?;
        rows.iter()
            .map(|r| {
                let k: String = r.get(0);
                NoticeKey::parse(&k).map_err(|e| LedgerError::Corrupt(format!("notice_key {k:?}: {e}")))
            })
            .collect()
    }

    /// Rows by key after the cursor, filtered on `updated_at` (no index on it: a read of the
    /// table's rows, at an operator's pace).
    async fn rows_updated_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<notice_ledger::ledger::RowPage, LedgerError> {
        let after = cursor.unwrap_or("").to_owned();
        // One row more than asked: whether another page follows.
        let ask = i64::try_from(limit).unwrap_or(i64::MAX - 1).saturating_add(1);
        let client = self.client().await?;
        let found = client
            .query(
                format!(
                    "SELECT {COLUMNS} FROM notices WHERE updated_at >= $1 AND updated_at < $2 \
                     AND notice_key > $3 ORDER BY notice_key LIMIT $4"
                )
                .as_str(),
                &[&since, &until, &after, &ask],
            )
            .await
            .map_err(|e| self.pg("read rows by update time", e))?;
        let mut rows = found.iter().map(read_row).collect::<Result<Vec<_>, _>>()?;
        let next = (rows.len() > limit).then(|| {
            rows.truncate(limit);
            rows.last().map(|r| r.key.as_str().to_owned())
        });
        Ok(notice_ledger::ledger::RowPage { rows, next: next.flatten() })
    }
}
