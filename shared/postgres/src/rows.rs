//! Rows ↔ ledger rows, and error text.

use chrono::{DateTime, Timelike, Utc};
use notice_ledger::ledger::{ClaimToken, LedgerRow, RenderedNotice, RowState};
use notice_ledger::{LedgerError, NoticeKey};
use tokio_postgres::Row;

pub(crate) fn read_row(row: &Row) -> Result<LedgerRow, LedgerError> {
    fn col<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, idx: usize) -> Result<T, LedgerError> {
        row.try_get(idx).map_err(|e| {
            let name = row.columns().get(idx).map_or("?", |c| c.name());
            LedgerError::Corrupt(format!("column `{name}`: {}", error_chain(&e)))
        })
    }
    let key: String = col(row, 0)?;
    let state: String = col(row, 1)?;
    let origin: String = col(row, 2)?;
    let revision: String = col(row, 7)?;
    let delivery_status: Option<String> = col(row, 13)?;
    Ok(LedgerRow {
        key: NoticeKey::parse(&key).map_err(|e| LedgerError::Corrupt(format!("column `notice_key`: {e}")))?,
        state: state.parse()?,
        origin: origin.parse()?,
        claim_token: col::<Option<String>>(row, 3)?.map(ClaimToken::from_stored),
        subscription_id: col(row, 4)?,
        period_start: col(row, 5)?,
        kind: col(row, 6)?,
        revision: revision
            .parse()
            .map_err(|_| LedgerError::Corrupt(format!("column `revision`: {revision:?} is not a u64")))?,
        content_digest: col(row, 8)?,
        claimed_at: col(row, 9)?,
        // The partial index `notices_open_claims` lists every open claim.
        on_quarantine_view: state == RowState::Claimed.as_str(),
        updated_at: col(row, 10)?,
        message_id: col(row, 11)?,
        detail: col(row, 12)?,
        delivery_status: delivery_status.as_deref().map(str::parse).transpose()?,
        duplicate_message_ids: col(row, 14)?,
        charge_at: col(row, 15)?,
        jurisdiction: col(row, 16)?,
        rendered: RenderedNotice::from_stored(col(row, 17)?, col(row, 18)?, col(row, 19)?)?,
        obligation: col(row, 20)?,
    })
}

/// `at` at the microsecond precision `timestamptz` stores.
pub(crate) fn to_micros(at: DateTime<Utc>) -> DateTime<Utc> {
    at.with_nanosecond(at.nanosecond() / 1_000 * 1_000).unwrap_or(at)
}

/// An error and its sources on one line (tokio-postgres puts the useful part in the source).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let part = inner.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_kept_to_the_microsecond() {
        let at = DateTime::parse_from_rfc3339("2026-10-01T09:00:00.123456789Z").expect("time").to_utc();
        assert_eq!(to_micros(at).to_rfc3339(), "2026-10-01T09:00:00.123456+00:00");
    }
}
