//! `send --now`: the claim port with every write's time pinned. The sender takes its claim, missed
//! and withdraw times from the `now` it is given, but stamps its commits (sent, rejected, released)
//! with the wall clock; this wrapper replaces those with the pinned instant, so a rehearsal's rows
//! carry one time only. Reads and the other writes pass through unchanged.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use notice_ledger::ledger::{
    Claim, ClaimLedger, ClaimOutcome, ClaimRequest, LedgerRow, RowReader, WithdrawRequest,
};
use notice_ledger::{LedgerError, NoticeKey};

pub(crate) struct PinnedLedger {
    inner: Arc<dyn ClaimLedger>,
    now: DateTime<Utc>,
}

impl PinnedLedger {
    pub(crate) fn new(inner: Arc<dyn ClaimLedger>, now: DateTime<Utc>) -> Self {
        Self { inner, now }
    }
}

#[async_trait]
impl RowReader for PinnedLedger {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        self.inner.get(key).await
    }

    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        self.inner.get_many(keys).await
    }
}

#[async_trait]
impl ClaimLedger for PinnedLedger {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        self.inner.claim(req).await
    }

    async fn commit_sent(
        &self,
        claim: &Claim,
        message_id: &str,
        _at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.inner.commit_sent(claim, message_id, self.now).await
    }

    async fn commit_rejected(
        &self,
        claim: &Claim,
        reason: &str,
        _at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.inner.commit_rejected(claim, reason, self.now).await
    }

    async fn release(&self, claim: &Claim, reason: &str, _at: DateTime<Utc>) -> Result<(), LedgerError> {
        self.inner.release(claim, reason, self.now).await
    }

    async fn record_missed(
        &self,
        req: &ClaimRequest,
        reason: &str,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        self.inner.record_missed(req, reason).await
    }

    async fn withdraw(&self, req: &WithdrawRequest) -> Result<Option<LedgerRow>, LedgerError> {
        self.inner.withdraw(req).await
    }
}
