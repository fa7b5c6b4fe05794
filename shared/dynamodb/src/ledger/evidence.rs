//! Provider evidence (deliveries, bounces, complaints): read, apply, and write back guarded by
//! what was read, again from the row DynamoDB returns when a concurrent writer changed it first.
//!
//! A batch (one SQS batch of SES events) reads every row it names in one strongly consistent
//! `BatchGetItem`, applies each key's events in order to the row read, and writes a key back once
//! — one conditional `PutItem` of the row its last event left — only when that row differs from
//! what was read. So per batch: one read request; per key whose row changes, one write; a key
//! whose row already says everything the events say costs nothing more. A key with no row is
//! written under `attribute_not_exists` alone (the batch read said absent; the condition decides
//! if another writer got there first). What can go wrong, and why it is still right:
//! - another writer changes a row between the batch read and the write: the write's guard
//!   ([`DynamoLedger::unchanged_since_read`]) refuses it, DynamoDB returns the row as it is now,
//!   and that key's events are applied again one by one from it (the single-event loop below);
//! - the write's answer is lost and the lean client's retry finds its own write: the returned row
//!   is the one meant, so the answers stand;
//! - the batch read fails, or a write fails otherwise: every event it covers answers the error,
//!   and SQS redelivers them (applying evidence again is a no-op).

use std::collections::HashMap;

use async_trait::async_trait;
use tracing::debug;

use notice_ledger::ledger::{
    apply_in_order, apply_to_current, in_batch_order, positions_by_key, Applied, ClaimToken, DeliveryStatus,
    EvidenceLedger, LedgerRow, ProviderEvidence, RowReader,
};
use notice_ledger::{LedgerError, NoticeKey};

use super::{DynamoLedger, WriteFailure};
use crate::expr::Expr;
use crate::item::{attr, n, s, to_millis};

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

    /// The guard for writing back a row: unchanged since it was read, or still absent.
    fn as_read(read: Option<&LedgerRow>) -> Expr {
        match read {
            Some(read) => Self::unchanged_since_read(read),
            None => {
                let mut guard = Expr::new("attribute_not_exists(#notice_key)");
                guard.name(attr::KEY);
                guard
            }
        }
    }

    /// Applies `ev` from the row as it stands (`current`, `None`: no row), writing back guarded by
    /// it, and again from the row DynamoDB returns while a concurrent writer keeps changing it.
    async fn apply_from(
        &self,
        ev: &ProviderEvidence,
        mut current: Option<LedgerRow>,
    ) -> Result<Applied, LedgerError> {
        for attempt in 1..=EVIDENCE_ATTEMPTS {
            let read = current.clone();
            let applied = apply_to_current(&mut current, ev);
            if read.as_ref() == Some(&applied.row) {
                return Ok(applied); // already known: nothing to write
            }
            match self.put_row(&applied.row, Self::as_read(read.as_ref())).await {
                Ok(()) => return Ok(applied),
                Err(WriteFailure::Other(e)) => return Err(e),
                Err(WriteFailure::Condition(old)) => {
                    current = self.conflicting_row(&ev.key, old).await?;
                    // Our own write, replayed by a retry (or the same event applied by a
                    // concurrent reconciler): the row already says what we meant to write.
                    if current.as_ref() == Some(&applied.row) {
                        return Ok(applied);
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

    /// Applies a batch of evidence to its rows as read earlier (`read`: the rows found, by key; a
    /// key missing from it had no row): each key's events in order, one guarded write per key
    /// whose row changes, the keys concurrently. The second half of
    /// [`EvidenceLedger::apply_evidence_batch`], public so a test can let another writer in
    /// between the read and the writes.
    pub async fn apply_evidence_as_read(
        &self,
        evidence: &[ProviderEvidence],
        mut read: HashMap<NoticeKey, LedgerRow>,
    ) -> Vec<Result<Applied, LedgerError>> {
        // Compare rows at the precision they are stored at, so re-applying an event is a no-op.
        let evidence: Vec<ProviderEvidence> =
            evidence.iter().map(|ev| ProviderEvidence { at: to_millis(ev.at), ..ev.clone() }).collect();
        let groups = positions_by_key(&evidence);
        let per_key = futures::future::join_all(groups.iter().map(|positions| {
            let events: Vec<&ProviderEvidence> = positions.iter().map(|&i| &evidence[i]).collect();
            let row = read.remove(&events[0].key);
            self.apply_key(events, row)
        }))
        .await;
        in_batch_order(evidence.len(), &groups, per_key)
    }

    /// One key's events of a batch, in order, on the row read for it: one guarded write of the
    /// row the last one leaves (none when nothing changed); on a refused write, each event again
    /// from the row DynamoDB returned.
    async fn apply_key(
        &self,
        events: Vec<&ProviderEvidence>,
        read: Option<LedgerRow>,
    ) -> Vec<Result<Applied, LedgerError>> {
        let applied = apply_in_order(read.clone(), events.iter().copied());
        let Some(last) = applied.last().map(|a| a.row.clone()) else { return Vec::new() };
        if read.as_ref() == Some(&last) {
            return applied.into_iter().map(Ok).collect(); // already known: nothing to write
        }
        let key = &events[0].key;
        let mut current = match self.put_row(&last, Self::as_read(read.as_ref())).await {
            Ok(()) => return applied.into_iter().map(Ok).collect(),
            Err(WriteFailure::Other(e)) => return events.iter().map(|_| Err(e.clone())).collect(),
            Err(WriteFailure::Condition(old)) => match self.conflicting_row(key, old).await {
                // Our own write, replayed by a retry: the row says what the batch meant.
                Ok(now) if now.as_ref() == Some(&last) => return applied.into_iter().map(Ok).collect(),
                Ok(now) => Some(now),
                Err(e) => return events.iter().map(|_| Err(e.clone())).collect(),
            },
        };
        debug!(key = key.prefix(), "row changed between the batch read and its write; applying one by one");
        let mut answers = Vec::with_capacity(events.len());
        for ev in events {
            let answer = match current.take() {
                Some(now) => self.apply_from(ev, now).await,
                None => self.apply_evidence(ev).await, // after an error: read it again
            };
            current = answer.as_ref().ok().map(|a| Some(a.row.clone()));
            answers.push(answer);
        }
        answers
    }
}

#[async_trait]
impl EvidenceLedger for DynamoLedger {
    async fn apply_evidence(&self, ev: &ProviderEvidence) -> Result<Applied, LedgerError> {
        // Compare rows at the precision they are stored at, so re-applying an event is a no-op.
        let ev = &ProviderEvidence { at: to_millis(ev.at), ..ev.clone() };
        let current = self.get(&ev.key).await?;
        self.apply_from(ev, current).await
    }

    /// One strongly consistent `BatchGetItem` for every key of the batch (in chunks of 100,
    /// `UnprocessedKeys` retried), then [`DynamoLedger::apply_evidence_as_read`].
    async fn apply_evidence_batch(&self, evidence: &[ProviderEvidence]) -> Vec<Result<Applied, LedgerError>> {
        if evidence.is_empty() {
            return Vec::new();
        }
        let keys: Vec<NoticeKey> = evidence.iter().map(|ev| ev.key.clone()).collect();
        let read = match self.get_many(&keys).await {
            Ok(rows) => rows.into_iter().map(|row| (row.key.clone(), row)).collect(),
            Err(e) => return evidence.iter().map(|_| Err(e.clone())).collect(),
        };
        self.apply_evidence_as_read(evidence, read).await
    }
}
