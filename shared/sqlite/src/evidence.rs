//! Provider evidence (deliveries, bounces, complaints): a read-modify-write of the row inside one
//! `BEGIN IMMEDIATE` transaction, so no concurrent writer can slip between the read and the write.

use async_trait::async_trait;
use rusqlite::TransactionBehavior;

use notice_ledger::ledger::{apply_to_row, learned_row, EvidenceEffect, EvidenceLedger, ProviderEvidence};
use notice_ledger::LedgerError;

use crate::rows::{select_row, write_row};
use crate::{sql, SqliteLedger};

#[async_trait]
impl EvidenceLedger for SqliteLedger {
    async fn apply_evidence(&self, ev: &ProviderEvidence) -> Result<EvidenceEffect, LedgerError> {
        let ev = ev.clone();
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            let (row, effect) = match select_row(&tx, ev.key.as_str())? {
                None => (learned_row(&ev), EvidenceEffect::Learned),
                Some(mut row) => {
                    let effect = apply_to_row(&mut row, &ev);
                    (row, effect)
                }
            };
            write_row(&tx, &row)?;
            tx.commit().map_err(sql)?;
            Ok(effect)
        })
        .await
    }
}
