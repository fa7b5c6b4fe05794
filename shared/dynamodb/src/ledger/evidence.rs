//! Provider evidence (deliveries, bounces, complaints): read, apply, and write back guarded by
//! what was read, again from the row DynamoDB returns when a concurrent writer changed it first.

use async_trait::async_trait;
use tracing::debug;

use notice_ledger::ledger::{
    apply_to_row, learned_row, ClaimToken, DeliveryStatus, EvidenceEffect, EvidenceLedger, LedgerRow,
    ProviderEvidence, RowReader,
};
use notice_ledger::LedgerError;

use super::{DynamoLedger, WriteFailure};
use crate::expr::Expr;
use crate::item::{attr, item_to_row, n, s, to_millis};

/// Read-modify-write rounds for provider evidence before reporting contention.
const EVIDENCE_ATTEMPTS: u32 = 5;

impl DynamoLedger {
    /// The guard for writing back a row read for evidence: the fields evidence reads and
    /// changes are still what was read.
    pub(super) fn unchanged_since_read(row: &LedgerRow) -> Expr {
        let mut e = Expr::new(String::new());
        let mut parts = vec![
            format!("{} = :r_state", e.name_of(attr::STATE)),
            format!("{} = :r_updated", e.name_of(attr::UPDATED_AT)),
        ];
        e.value(":r_state", s(row.state.as_str())).value(":r_updated", n(row.updated_at.timestamp_millis()));
        let optional: [(&str, Option<&str>); 3] = [
            (attr::MESSAGE_ID, row.message_id.as_deref()),
            (attr::CLAIM_TOKEN, row.claim_token.as_ref().map(ClaimToken::as_str)),
            (attr::DELIVERY_STATUS, row.delivery_status.map(DeliveryStatus::as_str)),
        ];
        for (i, (name, value)) in optional.into_iter().enumerate() {
            let placeholder = e.name_of(name);
            parts.push(match value {
                Some(v) => {
                    e.value(&format!(":r_opt{i}"), s(v));
                    format!("{placeholder} = :r_opt{i}")
                }
                None => format!("attribute_not_exists({placeholder})"),
            });
        }
        let dups = e.name_of(attr::DUPLICATES);
        e.value(":r_dups", n(row.duplicate_message_ids.len()));
        parts.push(if row.duplicate_message_ids.is_empty() {
            format!("(attribute_not_exists({dups}) OR size({dups}) = :r_dups)")
        } else {
            format!("size({dups}) = :r_dups")
        });
        e.text = parts.join(" AND ");
        e
    }
}

#[async_trait]
impl EvidenceLedger for DynamoLedger {
    async fn apply_evidence(&self, ev: &ProviderEvidence) -> Result<EvidenceEffect, LedgerError> {
        // Compare rows at the precision they are stored at, so re-applying an event is a no-op.
        let ev = &ProviderEvidence { at: to_millis(ev.at), ..ev.clone() };
        let mut current = self.get(&ev.key).await?;
        for attempt in 1..=EVIDENCE_ATTEMPTS {
            let (row, effect, guard) = match &current {
                None => {
                    let mut guard = Expr::new("attribute_not_exists(#notice_key)");
                    guard.name(attr::KEY);
                    (learned_row(ev), EvidenceEffect::Learned, guard)
                }
                Some(read) => {
                    let mut row = read.clone();
                    let effect = apply_to_row(&mut row, ev);
                    if row == *read {
                        return Ok(effect); // already known: nothing to write
                    }
                    (row, effect, Self::unchanged_since_read(read))
                }
            };
            match self.put_row(&row, guard).await {
                Ok(()) => return Ok(effect),
                Err(WriteFailure::Other(e)) => return Err(e),
                Err(WriteFailure::Condition(old)) => {
                    current = match old {
                        Some(item) => Some(item_to_row(&item)?),
                        None => self.get(&ev.key).await?,
                    };
                    // Our own write, replayed by an SDK retry (or the same event applied by a
                    // concurrent reconciler): the row already says what we meant to write.
                    if current.as_ref() == Some(&row) {
                        return Ok(effect);
                    }
                    debug!(key = ev.key.prefix(), attempt, "row changed while applying evidence; retrying");
                }
            }
        }
        Err(LedgerError::unavailable(format!(
            "{} kept changing while applying provider evidence ({EVIDENCE_ATTEMPTS} attempts)",
            ev.key.prefix()
        )))
    }
}
