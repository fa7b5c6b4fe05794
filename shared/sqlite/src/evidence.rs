//! Provider evidence (deliveries, bounces, complaints): a read-modify-write of the row inside one
//! `BEGIN IMMEDIATE` transaction, so no concurrent writer can slip between the read and the write.

use async_trait::async_trait;
use rusqlite::TransactionBehavior;

use notice_ledger::ledger::{apply_to_current, Applied, EvidenceLedger, ProviderEvidence};
use notice_ledger::LedgerError;

use crate::rows::{select_row, write_row};
use crate::{sql, SqliteLedger};

#[async_trait]
impl EvidenceLedger for SqliteLedger {
    async fn apply_evidence(&self, ev: &ProviderEvidence) -> Result<Applied, LedgerError> {
        // At the precision rows are stored at (milliseconds), so the row answered is the row stored.
        let at = crate::rows::ts(ev.at.timestamp_millis())?;
        let ev = ProviderEvidence { at, ..ev.clone() };
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            let mut current = select_row(&tx, ev.key.as_str())?;
            let applied = apply_to_current(&mut current, &ev);
            write_row(&tx, &applied.row)?;
            tx.commit().map_err(sql)?;
            Ok(applied)
        })
        .await
    }
}
