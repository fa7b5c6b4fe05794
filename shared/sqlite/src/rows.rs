//! Ledger rows ↔ table rows: the column list, reading and writing whole rows, the alias checks a
//! first write makes inside its transaction, and the single-row and open-claims reads.

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{params, Connection, OptionalExtension, Row};

use notice_ledger::ledger::rules::{permits, Verdict, Write};
use notice_ledger::ledger::{ClaimToken, LedgerRow, QuarantineView, RenderedNotice, RowReader, RowState};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

use crate::{sql, SqliteLedger};

pub(crate) const COLUMNS: &str =
    "notice_key, state, origin, claim_token, subscription_id, period_start, kind, revision, \
                       content_digest, claimed_at_ms, updated_at_ms, message_id, detail, delivery_status, duplicate_message_ids, \
                       charge_at_ms, jurisdiction, config_version, template, rendered_digest, obligation";

pub(crate) fn ts(ms: i64) -> Result<DateTime<Utc>, LedgerError> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .ok_or_else(|| LedgerError::Corrupt(format!("timestamp {ms} out of range")))
}

pub(crate) fn read_row(row: &Row<'_>) -> rusqlite::Result<Result<LedgerRow, LedgerError>> {
    let key: String = row.get(0)?;
    let state: String = row.get(1)?;
    let origin: String = row.get(2)?;
    let token: Option<String> = row.get(3)?;
    let revision: i64 = row.get(7)?;
    let claimed_at: Option<i64> = row.get(9)?;
    let updated_at: i64 = row.get(10)?;
    let delivery_status: Option<String> = row.get(13)?;
    let duplicates: String = row.get(14)?;
    let charge_at: Option<i64> = row.get(15)?;
    let build = || -> Result<LedgerRow, LedgerError> {
        Ok(LedgerRow {
            key: NoticeKey::parse(&key).map_err(|e| LedgerError::Corrupt(e.to_string()))?,
            state: state.parse()?,
            origin: origin.parse()?,
            claim_token: token.map(ClaimToken::from_stored),
            subscription_id: row.get(4).map_err(sql)?,
            period_start: row.get(5).map_err(sql)?,
            kind: row.get(6).map_err(sql)?,
            revision: u64::try_from(revision)
                .map_err(|_| LedgerError::Corrupt(format!("revision {revision}")))?,
            content_digest: row.get(8).map_err(sql)?,
            claimed_at: claimed_at.map(ts).transpose()?,
            // The partial index `notices_open_claims` lists every open claim.
            on_quarantine_view: state == RowState::Claimed.as_str(),
            updated_at: ts(updated_at)?,
            message_id: row.get(11).map_err(sql)?,
            detail: row.get(12).map_err(sql)?,
            delivery_status: delivery_status.as_deref().map(str::parse).transpose()?,
            duplicate_message_ids: serde_json::from_str(&duplicates)
                .map_err(|e| LedgerError::Corrupt(format!("duplicate_message_ids: {e}")))?,
            charge_at: charge_at.map(ts).transpose()?,
            jurisdiction: row.get(16).map_err(sql)?,
            rendered: RenderedNotice::from_stored(
                row.get(17).map_err(sql)?,
                row.get(18).map_err(sql)?,
                row.get(19).map_err(sql)?,
            )?,
            obligation: row.get(20).map_err(sql)?,
        })
    };
    Ok(build())
}

pub(crate) fn select_row(conn: &Connection, key: &str) -> Result<Option<LedgerRow>, LedgerError> {
    conn.query_row(&format!("SELECT {COLUMNS} FROM notices WHERE notice_key = ?1"), [key], read_row)
        .optional()
        .map_err(sql)?
        .transpose()
}

/// The first row at an alias key that refuses an alias ([`Write::Alias`]): the notice already
/// lives under that older secret version's key. Inside the write's transaction.
pub(crate) fn alias_refused(
    conn: &Connection,
    aliases: &[NoticeKey],
) -> Result<Option<LedgerRow>, LedgerError> {
    for key in aliases {
        if let Some(row) = select_row(conn, key.as_str())? {
            if permits(Some(&row), Write::Alias) == Verdict::Refuse {
                return Ok(Some(row));
            }
        }
    }
    Ok(None)
}

/// The aliases of `row` (a first write under the current secret version), in its transaction.
pub(crate) fn put_aliases(
    conn: &Connection,
    aliases: &[NoticeKey],
    row: &LedgerRow,
) -> Result<(), LedgerError> {
    aliases.iter().try_for_each(|key| write_row(conn, &LedgerRow::alias_at(key, row)))
}

/// Writes a whole row (insert or replace): only for read-modify-write inside a transaction.
pub(crate) fn write_row(conn: &Connection, row: &LedgerRow) -> Result<(), LedgerError> {
    conn.execute(
        &format!("INSERT OR REPLACE INTO notices ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"),
        params![
            row.key.as_str(),
            row.state.as_str(),
            row.origin.as_str(),
            row.claim_token.as_ref().map(ClaimToken::as_str),
            row.subscription_id,
            row.period_start,
            row.kind,
            i64::try_from(row.revision).map_err(|_| LedgerError::Corrupt("revision too large".into()))?,
            row.content_digest,
            row.claimed_at.map(|t| t.timestamp_millis()),
            row.updated_at.timestamp_millis(),
            row.message_id,
            row.detail,
            row.delivery_status.map(|d| d.as_str()),
            serde_json::to_string(&row.duplicate_message_ids).map_err(|e| LedgerError::Corrupt(e.to_string()))?,
            row.charge_at.map(|t| t.timestamp_millis()),
            row.jurisdiction,
            row.rendered.as_ref().map(|r| &r.config_version),
            row.rendered.as_ref().map(|r| &r.template),
            row.rendered.as_ref().map(|r| &r.rendered_digest),
            row.obligation,
        ],
    )
    .map_err(sql)?;
    Ok(())
}

#[async_trait]
impl RowReader for SqliteLedger {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        let key = key.as_str().to_owned();
        self.with(move |conn| select_row(conn, &key)).await
    }
    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        let keys: Vec<String> = keys.iter().map(|k| k.as_str().to_owned()).collect();
        self.with(move |conn| {
            let mut out = Vec::new();
            for key in &keys {
                if let Some(row) = select_row(conn, key)? {
                    out.push(row);
                }
            }
            Ok(out)
        })
        .await
    }
}

#[async_trait]
impl QuarantineView for SqliteLedger {
    async fn open_claims(
        &self,
        claimed_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<LedgerRow>, LedgerError> {
        let before = claimed_before.timestamp_millis();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(move |conn| {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT {COLUMNS} FROM notices WHERE state = 'claimed' AND claimed_at_ms < ?1
                     ORDER BY claimed_at_ms LIMIT ?2"
                ))
                .map_err(sql)?;
            let rows = stmt.query_map(params![before, limit], read_row).map_err(sql)?;
            rows.map(|r| r.map_err(sql)?).collect()
        })
        .await
    }
}
