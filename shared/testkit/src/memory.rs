//! In-memory ledger: the same conditions as the durable adapters, for tests and simulations. Every
//! write asks the core's rule table ([`notice_ledger::ledger::rules::permits`]), as the durable
//! adapters encode it in their conditional writes.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use notice_ledger::error::LedgerError;
use notice_ledger::identity::NoticeKey;
use notice_ledger::ledger::rules::{permits, Verdict, Write};
use notice_ledger::ledger::{
    apply_to_current, release_detail, resolve_detail, Applied, Claim, ClaimLedger, ClaimOutcome,
    ClaimRequest, EvidenceLedger, LedgerRow, OperatorLedger, Origin, ProviderEvidence, QuarantineView,
    RowPage, RowReader, RowState, WithdrawRequest,
};

#[derive(Default)]
pub struct MemoryLedger {
    rows: Mutex<HashMap<NoticeKey, LedgerRow>>,
}

impl MemoryLedger {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every row, for assertions.
    pub fn rows(&self) -> Vec<LedgerRow> {
        self.lock().values().cloned().collect()
    }

    /// Puts a row as is (fixtures: backfilled or restored rows).
    pub fn insert(&self, row: LedgerRow) {
        self.lock().insert(row.key.clone(), row);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NoticeKey, LedgerRow>> {
        // A poisoned lock only means another test thread panicked; the map itself is consistent.
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn transition(
        &self,
        claim: &Claim,
        to: RowState,
        at: DateTime<Utc>,
        apply: impl FnOnce(&mut LedgerRow),
    ) -> Result<(), LedgerError> {
        let mut rows = self.lock();
        let verdict = permits(rows.get(&claim.key), Write::Commit { token: &claim.token });
        match rows.get_mut(&claim.key) {
            Some(row) if verdict == Verdict::Apply => {
                row.state = to;
                row.updated_at = at;
                apply(row);
                Ok(())
            }
            Some(row) => Err(LedgerError::not_held(claim.key.prefix(), Some(row.state.as_str()))),
            None => Err(LedgerError::not_held(claim.key.prefix(), Some("no row"))),
        }
    }
}

/// The first alias among `aliases` that a row refuses ([`Write::Alias`]): the notice already lives
/// under that older key, and the first write under the current key must not happen.
fn alias_refused(rows: &HashMap<NoticeKey, LedgerRow>, aliases: &[NoticeKey]) -> Option<LedgerRow> {
    aliases
        .iter()
        .filter_map(|k| rows.get(k))
        .find(|row| permits(Some(row), Write::Alias) == Verdict::Refuse)
        .cloned()
}

/// Puts the aliases of `row` (its first write under the current secret version).
fn put_aliases(rows: &mut HashMap<NoticeKey, LedgerRow>, aliases: &[NoticeKey], row: &LedgerRow) {
    for key in aliases {
        rows.insert(key.clone(), LedgerRow::alias_at(key, row));
    }
}

#[async_trait]
impl RowReader for MemoryLedger {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        Ok(self.lock().get(key).cloned())
    }
}

#[async_trait]
impl QuarantineView for MemoryLedger {
    async fn open_claims(
        &self,
        claimed_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<LedgerRow>, LedgerError> {
        let mut open: Vec<LedgerRow> = self
            .lock()
            .values()
            .filter(|r| {
                r.state == RowState::Claimed
                    && r.on_quarantine_view
                    && r.claimed_at.is_some_and(|t| t < claimed_before)
            })
            .cloned()
            .collect();
        open.sort_by_key(|r| r.claimed_at);
        open.truncate(limit);
        Ok(open)
    }
}

#[async_trait]
impl ClaimLedger for MemoryLedger {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        let mut rows = self.lock();
        let existing = rows.get(&req.key);
        match (permits(existing, Write::Claim { token: &req.token }), existing) {
            (Verdict::AlreadyOwn, Some(row)) => {
                return Ok(ClaimOutcome::Minted(Claim {
                    key: req.key.clone(),
                    token: req.token.clone(),
                    claimed_at: row.claimed_at.unwrap_or(req.at),
                }));
            }
            (Verdict::Refuse, Some(row)) => return Ok(ClaimOutcome::Held(row.clone())),
            _ => {}
        }
        if let Some(held) = alias_refused(&rows, &req.aliases) {
            return Ok(ClaimOutcome::Held(held));
        }
        let row = req.to_row(RowState::Claimed, None);
        put_aliases(&mut rows, &req.aliases, &row);
        rows.insert(req.key.clone(), row);
        Ok(ClaimOutcome::Minted(Claim { key: req.key.clone(), token: req.token.clone(), claimed_at: req.at }))
    }
    async fn commit_sent(
        &self,
        claim: &Claim,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.transition(claim, RowState::Sent, at, |row| {
            row.message_id = Some(message_id.to_owned());
        })
    }
    async fn commit_rejected(
        &self,
        claim: &Claim,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.transition(claim, RowState::Rejected, at, |row| row.detail = Some(reason.to_owned()))
    }
    async fn release(&self, claim: &Claim, reason: &str, at: DateTime<Utc>) -> Result<(), LedgerError> {
        self.transition(claim, RowState::Released, at, |row| row.detail = Some(reason.to_owned()))
    }
    async fn put_on_quarantine_view(&self, claim: &Claim) -> Result<(), LedgerError> {
        if let Some(row) = self.lock().get_mut(&claim.key) {
            if row.state == RowState::Claimed && row.claim_token.as_ref() == Some(&claim.token) {
                row.on_quarantine_view = true;
            }
        }
        Ok(())
    }
    async fn record_missed(
        &self,
        req: &ClaimRequest,
        reason: &str,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        let mut rows = self.lock();
        // A missed window is recorded under the claim rule (no row, or a released one); any
        // other row, even this worker's own claim, is returned as the holder.
        if let Some(row) = rows.get(&req.key) {
            if permits(Some(row), Write::Claim { token: &req.token }) != Verdict::Apply {
                return Ok(Some(row.clone()));
            }
        }
        if let Some(held) = alias_refused(&rows, &req.aliases) {
            return Ok(Some(held));
        }
        let row = req.to_row(RowState::Missed, Some(reason.to_owned()));
        put_aliases(&mut rows, &req.aliases, &row);
        rows.insert(req.key.clone(), row);
        Ok(None)
    }
    async fn withdraw(&self, req: &WithdrawRequest) -> Result<Option<LedgerRow>, LedgerError> {
        let mut rows = self.lock();
        if let Some(row) = rows.get(&req.key) {
            if permits(Some(row), Write::Withdraw) != Verdict::Apply {
                return Ok(Some(row.clone()));
            }
        }
        if let Some(held) = alias_refused(&rows, &req.aliases) {
            return Ok(Some(held));
        }
        let row = req.to_row();
        put_aliases(&mut rows, &req.aliases, &row);
        rows.insert(req.key.clone(), row);
        Ok(None)
    }
}

#[async_trait]
impl EvidenceLedger for MemoryLedger {
    async fn apply_evidence(&self, ev: &ProviderEvidence) -> Result<Applied, LedgerError> {
        let mut rows = self.lock();
        let mut current = rows.remove(&ev.key);
        let applied = apply_to_current(&mut current, ev);
        rows.insert(ev.key.clone(), applied.row.clone());
        Ok(applied)
    }
}

#[async_trait]
impl OperatorLedger for MemoryLedger {
    async fn operator_release(
        &self,
        key: &NoticeKey,
        who: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        let mut rows = self.lock();
        let row = open_claim(&mut rows, key)?;
        row.state = RowState::Released;
        row.origin = Origin::Operator;
        row.detail = Some(release_detail(who, reason, at));
        row.updated_at = at;
        Ok(())
    }
    async fn operator_resolve_sent(
        &self,
        key: &NoticeKey,
        message_id: &str,
        who: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        let mut rows = self.lock();
        let row = open_claim(&mut rows, key)?;
        row.state = RowState::Sent;
        row.origin = Origin::Operator;
        row.message_id = Some(message_id.to_owned());
        row.detail = Some(resolve_detail(who, at));
        row.updated_at = at;
        Ok(())
    }
    async fn backfill(&self, row: &LedgerRow) -> Result<bool, LedgerError> {
        let mut rows = self.lock();
        if permits(rows.get(&row.key), Write::Backfill) != Verdict::Apply {
            return Ok(false);
        }
        rows.insert(row.key.clone(), row.clone());
        Ok(true)
    }

    async fn keys_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<NoticeKey>, LedgerError> {
        let rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        let mut keys: Vec<NoticeKey> =
            rows.keys().filter(|k| k.as_str().starts_with(prefix)).cloned().collect();
        keys.sort();
        keys.truncate(limit);
        Ok(keys)
    }

    async fn rows_updated_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<RowPage, LedgerError> {
        let rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        let mut found: Vec<LedgerRow> = rows
            .values()
            .filter(|r| r.updated_at >= since && r.updated_at < until)
            .filter(|r| cursor.is_none_or(|c| r.key.as_str() > c))
            .cloned()
            .collect();
        found.sort_by(|a, b| a.key.cmp(&b.key));
        let more = found.len() > limit;
        found.truncate(limit);
        let next = if more { found.last().map(|r| r.key.as_str().to_owned()) } else { None };
        Ok(RowPage { rows: found, next })
    }
}

fn open_claim<'a>(
    rows: &'a mut HashMap<NoticeKey, LedgerRow>,
    key: &NoticeKey,
) -> Result<&'a mut LedgerRow, LedgerError> {
    let verdict = permits(rows.get(key), Write::Operator);
    match rows.get_mut(key) {
        Some(row) if verdict == Verdict::Apply => Ok(row),
        Some(row) => {
            Err(LedgerError::Conflict(format!("{} is {}, not an open claim", key.prefix(), row.state)))
        }
        None => Err(LedgerError::Conflict(format!("{} has no ledger row", key.prefix()))),
    }
}
