//! The ports through `Arc`: a shared ledger handle is a ledger (the sender, the reconciler and
//! the tests hand one adapter to many tasks).

use crate::error::LedgerError;
use crate::identity::NoticeKey;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::*;

#[async_trait]
impl<T: RowReader + ?Sized> RowReader for std::sync::Arc<T> {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        (**self).get(key).await
    }
    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        (**self).get_many(keys).await
    }
}

#[async_trait]
impl<T: QuarantineView + ?Sized> QuarantineView for std::sync::Arc<T> {
    async fn open_claims(
        &self,
        claimed_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<LedgerRow>, LedgerError> {
        (**self).open_claims(claimed_before, limit).await
    }
    async fn count_open_claims(
        &self,
        claimed_before: DateTime<Utc>,
    ) -> Result<(usize, Option<DateTime<Utc>>), LedgerError> {
        (**self).count_open_claims(claimed_before).await
    }
}

#[async_trait]
impl<T: ClaimLedger + ?Sized> ClaimLedger for std::sync::Arc<T> {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        (**self).claim(req).await
    }
    async fn commit_sent(
        &self,
        claim: &Claim,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        (**self).commit_sent(claim, message_id, at).await
    }
    async fn commit_rejected(
        &self,
        claim: &Claim,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        (**self).commit_rejected(claim, reason, at).await
    }
    async fn release(&self, claim: &Claim, reason: &str, at: DateTime<Utc>) -> Result<(), LedgerError> {
        (**self).release(claim, reason, at).await
    }
    async fn put_on_quarantine_view(&self, claim: &Claim) -> Result<(), LedgerError> {
        (**self).put_on_quarantine_view(claim).await
    }
    async fn record_missed(
        &self,
        req: &ClaimRequest,
        reason: &str,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        (**self).record_missed(req, reason).await
    }
    async fn withdraw(&self, req: &WithdrawRequest) -> Result<Option<LedgerRow>, LedgerError> {
        (**self).withdraw(req).await
    }
}

#[async_trait]
impl<T: EvidenceLedger + ?Sized> EvidenceLedger for std::sync::Arc<T> {
    async fn apply_evidence(&self, evidence: &ProviderEvidence) -> Result<Applied, LedgerError> {
        (**self).apply_evidence(evidence).await
    }
    async fn apply_evidence_batch(&self, evidence: &[ProviderEvidence]) -> Vec<Result<Applied, LedgerError>> {
        (**self).apply_evidence_batch(evidence).await
    }
}

#[async_trait]
impl<T: OperatorLedger + ?Sized> OperatorLedger for std::sync::Arc<T> {
    async fn operator_release(
        &self,
        key: &NoticeKey,
        who: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        (**self).operator_release(key, who, reason, at).await
    }
    async fn operator_resolve_sent(
        &self,
        key: &NoticeKey,
        message_id: &str,
        who: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        (**self).operator_resolve_sent(key, message_id, who, at).await
    }
    async fn backfill(&self, row: &LedgerRow) -> Result<bool, LedgerError> {
        (**self).backfill(row).await
    }

    async fn keys_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<NoticeKey>, LedgerError> {
        (**self).keys_with_prefix(prefix, limit).await
    }

    async fn rows_updated_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<super::RowPage, LedgerError> {
        (**self).rows_updated_between(since, until, cursor, limit).await
    }
}
