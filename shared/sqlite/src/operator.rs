//! The operator's path: resolving an open claim by hand (release, or record it as sent), backfill
//! of rows from elsewhere, and the key and update-time scans, at an operator's pace.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, TransactionBehavior};

use notice_ledger::ledger::{release_detail, resolve_detail, LedgerRow, OperatorLedger, Origin};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

use crate::rows::{read_row, select_row, write_row, COLUMNS};
use crate::{sql, SqliteLedger};

/// Updates an open claim with `set`; any other state is a conflict.
fn update_open_claim(
    conn: &Connection,
    key: &NoticeKey,
    set: &str,
    values: &[&dyn rusqlite::ToSql],
) -> Result<(), LedgerError> {
    let mut params: Vec<&dyn rusqlite::ToSql> = values.to_vec();
    let key_str = key.as_str();
    params.push(&key_str);
    let n = params.len();
    let changed = conn
        .execute(
            &format!("UPDATE notices SET {set} WHERE notice_key = ?{n} AND state = 'claimed'"),
            params.as_slice(),
        )
        .map_err(sql)?;
    if changed == 1 {
        return Ok(());
    }
    match select_row(conn, key.as_str())? {
        Some(row) => {
            Err(LedgerError::Conflict(format!("{} is {}, not an open claim", key.prefix(), row.state)))
        }
        None => Err(LedgerError::Conflict(format!("{} has no ledger row", key.prefix()))),
    }
}

#[async_trait]
impl OperatorLedger for SqliteLedger {
    async fn operator_release(
        &self,
        key: &NoticeKey,
        who: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        let key = key.clone();
        let detail = release_detail(who, reason, at);
        self.with(move |conn| {
            update_open_claim(
                conn,
                &key,
                "state = 'released', origin = ?1, detail = ?2, updated_at_ms = ?3",
                &[&Origin::Operator.as_str(), &detail, &at.timestamp_millis()],
            )
        })
        .await
    }
    async fn operator_resolve_sent(
        &self,
        key: &NoticeKey,
        message_id: &str,
        who: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        let key = key.clone();
        let message_id = message_id.to_owned();
        let detail = resolve_detail(who, at);
        self.with(move |conn| {
            update_open_claim(
                conn,
                &key,
                "state = 'sent', origin = ?1, message_id = ?2, detail = ?3, updated_at_ms = ?4",
                &[&Origin::Operator.as_str(), &message_id, &detail, &at.timestamp_millis()],
            )
        })
        .await
    }
    async fn backfill(&self, row: &LedgerRow) -> Result<bool, LedgerError> {
        let row = row.clone();
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            let wrote = if select_row(&tx, row.key.as_str())?.is_some() {
                false
            } else {
                write_row(&tx, &row)?;
                true
            };
            tx.commit().map_err(sql)?;
            Ok(wrote)
        })
        .await
    }

    async fn keys_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<NoticeKey>, LedgerError> {
        let (from, to) = (prefix.to_owned(), notice_ledger::ledger::prefix_end(prefix));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(move |conn| {
            let mut stmt = conn
                .prepare("SELECT notice_key FROM notices WHERE notice_key >= ?1 AND notice_key < ?2 ORDER BY notice_key LIMIT ?3")
                .map_err(sql)?;
            let keys = stmt.query_map(params![from, to, limit], |r| r.get::<_, String>(0)).map_err(sql)?;
            keys.map(|k| {
                let k = k.map_err(sql)?;
                NoticeKey::parse(&k).map_err(|e| LedgerError::Corrupt(format!("notice_key {k:?}: {e}")))
            })
            .collect()
        })
        .await
    }

    /// Rows by key after the cursor, filtered on `updated_at_ms` (no index on it: a table read,
    /// at an operator's pace).
    async fn rows_updated_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<notice_ledger::ledger::RowPage, LedgerError> {
        let (since, until) = (since.timestamp_millis(), until.timestamp_millis());
        let after = cursor.unwrap_or("").to_owned();
        // One row more than asked: whether another page follows.
        let ask = i64::try_from(limit).unwrap_or(i64::MAX - 1).saturating_add(1);
        let mut rows: Vec<LedgerRow> = self
            .with(move |conn| {
                let mut stmt = conn
                    .prepare(&format!(
                        "SELECT {COLUMNS} FROM notices WHERE updated_at_ms >= ?1 AND updated_at_ms < ?2
                         AND notice_key > ?3 ORDER BY notice_key LIMIT ?4"
                    ))
                    .map_err(sql)?;
                let rows = stmt.query_map(params![since, until, after, ask], read_row).map_err(sql)?;
                rows.map(|r| r.map_err(sql)?).collect()
            })
            .await?;
        let next = (rows.len() > limit).then(|| {
            rows.truncate(limit);
            rows.last().map(|r| r.key.as_str().to_owned())
        });
        Ok(notice_ledger::ledger::RowPage { rows, next: next.flatten() })
    }
}
