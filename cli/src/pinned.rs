//! `send --now`: the claim port with every write's time pinned. The sender takes its claim, missed
//! and withdraw times from the `now` it is given, but stamps its commits (sent, rejected, released)
//! with the wall clock; this wrapper replaces those with the pinned instant, so a rehearsal's rows
//! carry one time only. Reads and the other writes pass through unchanged.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use notice_ledger::ledger::{
    Claim, ClaimLedger, ClaimOutcome, ClaimRequest, LedgerRow, RowReader, WithdrawRequest,
};
use notice_ledger::{LedgerError, NoticeKey};

/// What an `#[async_trait]` method returns (the ports are declared with `async_trait`).
type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, LedgerError>> + Send + 'a>>;

pub(crate) struct PinnedLedger {
    inner: Arc<dyn ClaimLedger>,
    now: DateTime<Utc>,
}

impl PinnedLedger {
    pub(crate) fn new(inner: Arc<dyn ClaimLedger>, now: DateTime<Utc>) -> Self {
        Self { inner, now }
    }
}

impl RowReader for PinnedLedger {
    fn get<'life0, 'life1, 'async_trait>(
        &'life0 self,
        key: &'life1 NoticeKey,
    ) -> Boxed<'async_trait, Option<LedgerRow>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.inner.get(key).await })
    }

    fn get_many<'life0, 'life1, 'async_trait>(
        &'life0 self,
        keys: &'life1 [NoticeKey],
    ) -> Boxed<'async_trait, Vec<LedgerRow>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.inner.get_many(keys).await })
    }
}

impl ClaimLedger for PinnedLedger {
    fn claim<'life0, 'life1, 'async_trait>(
        &'life0 self,
        req: &'life1 ClaimRequest,
    ) -> Boxed<'async_trait, ClaimOutcome>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.inner.claim(req).await })
    }

    fn commit_sent<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        claim: &'life1 Claim,
        message_id: &'life2 str,
        _at: DateTime<Utc>,
    ) -> Boxed<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.inner.commit_sent(claim, message_id, self.now).await })
    }

    fn commit_rejected<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        claim: &'life1 Claim,
        reason: &'life2 str,
        _at: DateTime<Utc>,
    ) -> Boxed<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.inner.commit_rejected(claim, reason, self.now).await })
    }

    fn release<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        claim: &'life1 Claim,
        reason: &'life2 str,
        _at: DateTime<Utc>,
    ) -> Boxed<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.inner.release(claim, reason, self.now).await })
    }

    fn record_missed<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        req: &'life1 ClaimRequest,
        reason: &'life2 str,
    ) -> Boxed<'async_trait, Option<LedgerRow>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.inner.record_missed(req, reason).await })
    }

    fn withdraw<'life0, 'life1, 'async_trait>(
        &'life0 self,
        req: &'life1 WithdrawRequest,
    ) -> Boxed<'async_trait, Option<LedgerRow>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.inner.withdraw(req).await })
    }
}
