//! Provider evidence (deliveries, bounces, complaints): a read-lock-modify-write of the row in
//! one transaction, retried when a concurrent writer created the row first.

use async_trait::async_trait;
use tracing::debug;

use notice_ledger::ledger::{
    apply_to_row, learned_row, Applied, EvidenceEffect, EvidenceLedger, ProviderEvidence,
};
use notice_ledger::LedgerError;

use crate::rows::to_micros;
use crate::sql::UPDATE_EVIDENCE;
use crate::PostgresLedger;

/// Read-modify-write rounds for provider evidence before reporting contention.
const EVIDENCE_ATTEMPTS: u32 = 3;

impl PostgresLedger {
    /// One read-lock-modify-write round of provider evidence; `None` when a concurrent writer
    /// created the row first (the caller reads again).
    async fn evidence_round(&self, ev: &ProviderEvidence) -> Result<Option<Applied>, LedgerError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.pg("apply evidence", e))?;
        let applied = match self.select_row(&tx, &ev.key, true).await? {
            None => {
                let row = learned_row(ev);
                if !self.insert_row(&tx, &row).await? {
                    return Ok(None); // dropped transaction rolls back
                }
                Applied { effect: EvidenceEffect::Learned, row }
            }
            Some(read) => {
                let mut row = read.clone();
                let effect = apply_to_row(&mut row, ev);
                if row != read {
                    let stmt =
                        tx.prepare_cached(UPDATE_EVIDENCE).await.map_err(|e| self.pg("apply evidence", e))?;
                    tx.execute(
                        &stmt,
                        &[
                            &row.key.as_str(),
                            &row.state.as_str(),
                            &row.message_id,
                            &row.delivery_status.map(|d| d.as_str()),
                            &row.updated_at,
                            &row.duplicate_message_ids,
                            &row.detail,
                        ],
                    )
                    .await
                    .map_err(|e| self.pg("apply evidence", e))?;
                }
                Applied { effect, row }
            }
        };
        tx.commit().await.map_err(|e| self.pg("apply evidence", e))?;
        Ok(Some(applied))
    }
}

#[async_trait]
impl EvidenceLedger for PostgresLedger {
    async fn apply_evidence(&self, ev: &ProviderEvidence) -> Result<Applied, LedgerError> {
        // Compare rows at the precision they are stored at, so re-applying an event is a no-op.
        let ev = ProviderEvidence { at: to_micros(ev.at), ..ev.clone() };
        for attempt in 1..=EVIDENCE_ATTEMPTS {
            if let Some(applied) = self.evidence_round(&ev).await? {
                return Ok(applied);
            }
            debug!(
                key = ev.key.prefix(),
                attempt, "row created concurrently while applying evidence; retrying"
            );
        }
        Err(LedgerError::unavailable(format!(
            "{} kept changing while applying provider evidence ({EVIDENCE_ATTEMPTS} attempts)",
            ev.key.prefix()
        )))
    }
}
