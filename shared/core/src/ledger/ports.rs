//! The ledger's ports, one per need: reading rows, the quarantine view, the sender's claim →
//! commit, the reconciler's evidence, the operator's actions — and [`Ledger`], all of them at once.
//! A file of its own so the contract every adapter signs reads on its own, without the row types.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::evidence::{positions_by_key, Applied, ProviderEvidence};
use super::row::{Claim, ClaimOutcome, ClaimRequest, LedgerRow, WithdrawRequest};
use crate::error::LedgerError;
use crate::identity::NoticeKey;

/// Reading rows: every port below needs it, none of them can write through it.
#[async_trait]
pub trait RowReader: Send + Sync {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError>;

    /// Rows for many keys (missing keys are simply absent from the answer).
    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        let mut rows = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(row) = self.get(key).await? {
                rows.push(row);
            }
        }
        Ok(rows)
    }
}

/// The read-only quarantine view (reporter, `noticectl quarantine list`).
#[async_trait]
pub trait QuarantineView: RowReader {
    /// Open claims claimed before `claimed_before`, oldest first, at most `limit`: the quarantine view.
    async fn open_claims(
        &self,
        claimed_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<LedgerRow>, LedgerError>;

    /// How many open claims were claimed before `claimed_before`, and when the oldest was: the
    /// reporter's numbers. The default reads every such claim; indexed adapters count instead.
    async fn count_open_claims(
        &self,
        claimed_before: DateTime<Utc>,
    ) -> Result<(usize, Option<DateTime<Utc>>), LedgerError> {
        let open = self.open_claims(claimed_before, usize::MAX).await?;
        Ok((open.len(), open.iter().filter_map(|r| r.claimed_at).min()))
    }
}

/// The sender's port: claim → commit. Every write out of `claimed` is guarded by the claim token.
#[async_trait]
pub trait ClaimLedger: RowReader {
    /// Claims `req.key` if it has no row or a `released` row; otherwise returns the row.
    /// A row carrying `req.token` in state `claimed` is this attempt's own claim.
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError>;

    /// `claimed` (own token) → `sent` with the provider's message id.
    async fn commit_sent(
        &self,
        claim: &Claim,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError>;

    /// `claimed` (own token) → `rejected`: the provider refused this message permanently.
    async fn commit_rejected(
        &self,
        claim: &Claim,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError>;

    /// `claimed` (own token) → `released`: the provider said it did not accept the message, so a
    /// retry may claim and send.
    async fn release(&self, claim: &Claim, reason: &str, at: DateTime<Utc>) -> Result<(), LedgerError>;

    /// Puts the open claim `claim` names on the quarantine view (what the reporter and
    /// `noticectl quarantine list` read), if the row is still `claimed` under `claim.token`; `Ok`
    /// when it is there already or has moved on (nothing left to watch). Called by whoever learns
    /// that a claim may stay open — its own sender after an unknown outcome, a later delivery that
    /// finds it held — before that message is acked; never on the claim → commit path, so a
    /// notice sent and committed writes no index entry ([`LedgerRow::on_quarantine_view`]).
    async fn put_on_quarantine_view(&self, claim: &Claim) -> Result<(), LedgerError>;

    /// Writes a `missed` row unless the key already has a row other than `released`, which is
    /// returned instead.
    async fn record_missed(&self, req: &ClaimRequest, reason: &str)
        -> Result<Option<LedgerRow>, LedgerError>;

    /// Writes the `withdrawn` tombstone ([`WithdrawRequest::to_row`]) in one conditional write,
    /// under the claim rule: no row, or a `released` one. Any other row is returned instead — a
    /// `withdrawn` one means already withdrawn; see [`rules::withdraw_answer`](super::rules::withdraw_answer).
    async fn withdraw(&self, req: &WithdrawRequest) -> Result<Option<LedgerRow>, LedgerError>;
}

/// The reconciler's port: provider evidence only.
#[async_trait]
pub trait EvidenceLedger: Send + Sync {
    /// Applies provider evidence (reconciler). Idempotent; tolerant of any event order; never moves
    /// a row backwards. `claimed`/`released`/`missed`/`rejected` → `sent` with the message id (the
    /// evidence says it went out); no row → a `sent` row with origin `provider_events` (identity
    /// fields empty: events do not carry them); same message id → delivery status advanced; a
    /// different message id on a row that has one → recorded once in `duplicate_message_ids`, the
    /// first id kept. See [`apply_to_row`](super::apply_to_row). Answers what it did and the row
    /// as it stands after it ([`Applied`]), so nobody reads the row again to learn it.
    async fn apply_evidence(&self, evidence: &ProviderEvidence) -> Result<Applied, LedgerError>;

    /// Applies a batch of evidence (one SQS batch of provider events): an answer per item, in the
    /// batch's order; events for the same key in the batch's order, each on the row as the ones
    /// before it left it; different keys independently. The default is [`apply_evidence`] per
    /// item — one key's events in turn, the keys concurrently; an adapter that can read many rows
    /// at once (DynamoDB's `BatchGetItem`) reads the batch's rows in one request instead.
    ///
    /// [`apply_evidence`]: EvidenceLedger::apply_evidence
    async fn apply_evidence_batch(&self, evidence: &[ProviderEvidence]) -> Vec<Result<Applied, LedgerError>> {
        let groups = positions_by_key(evidence);
        let per_key = futures::future::join_all(groups.iter().map(|positions| async move {
            let mut answers = Vec::with_capacity(positions.len());
            for &i in positions {
                answers.push(self.apply_evidence(&evidence[i]).await);
            }
            answers
        }))
        .await;
        in_batch_order(evidence.len(), &groups, per_key)
    }
}

/// Per-key answers ([`positions_by_key`]'s groups) put back in the batch's order. An item no
/// group answered (an adapter that answered a key short) is an error of its own, never a shifted
/// answer nor a panic: its SQS record is retried.
pub fn in_batch_order(
    len: usize,
    groups: &[Vec<usize>],
    per_key: Vec<Vec<Result<Applied, LedgerError>>>,
) -> Vec<Result<Applied, LedgerError>> {
    let mut slots: Vec<Option<Result<Applied, LedgerError>>> =
        std::iter::repeat_with(|| None).take(len).collect();
    for (positions, answers) in groups.iter().zip(per_key) {
        for (&i, answer) in positions.iter().zip(answers) {
            if let Some(slot) = slots.get_mut(i) {
                *slot = Some(answer);
            }
        }
    }
    slots
        .into_iter()
        .map(|s| {
            s.unwrap_or_else(|| Err(LedgerError::unavailable("the ledger gave no answer for this event")))
        })
        .collect()
}

/// Operator actions (`noticectl`): explicit, audited resolutions of open claims, and backfill.
#[async_trait]
pub trait OperatorLedger: QuarantineView {
    /// Operator: `claimed` → `released` with who/why/when in `detail`, origin `operator`.
    /// Any other state (or no row) is a `Conflict`: release is only for open claims.
    async fn operator_release(
        &self,
        key: &NoticeKey,
        who: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError>;

    /// Operator: `claimed` → `sent` with the provider message id the operator found; origin
    /// `operator`, who/when in `detail`. Any other state is a `Conflict`.
    async fn operator_resolve_sent(
        &self,
        key: &NoticeKey,
        message_id: &str,
        who: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError>;

    /// Backfill: writes `row` (normally state `sent`, origin `backfill`) only if the key has no row.
    /// Returns whether it wrote; never overwrites.
    async fn backfill(&self, row: &LedgerRow) -> Result<bool, LedgerError>;

    /// Operator: up to `limit` keys that start with `prefix` (lower-case hex, as every output line
    /// shows a key's first 12 characters), in key order — so `noticectl show` can take a prefix
    /// and say when it is ambiguous. SQL ledgers answer from the key's index; DynamoDB can only
    /// scan the table for it (read capacity in proportion to the table: fine at an operator's pace,
    /// never on a hot path).
    async fn keys_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<NoticeKey>, LedgerError>;

    /// Operator: one page of the rows last written in `[since, until)` (`updated_at`), at most
    /// `limit`, starting after `cursor` (`None`: the first page; then each page's
    /// [`RowPage::next`]) — so `noticectl outcomes republish` can re-publish the outcome events
    /// of a time range from the source of truth. Pages follow the adapter's own order (SQL and
    /// memory: by key); the cursor means nothing to any other adapter. SQL ledgers filter on
    /// `updated_at` (a table read at an operator's pace); DynamoDB can only `Scan` the table with
    /// a filter — read capacity in proportion to the whole table, and a page may hold fewer than
    /// `limit` rows (even none) while `next` is still set. Never on a send path.
    async fn rows_updated_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<RowPage, LedgerError>;
}

/// One page of [`OperatorLedger::rows_updated_between`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowPage {
    pub rows: Vec<LedgerRow>,
    /// Where the next page starts (opaque, the adapter's own); `None`: this was the last page.
    pub next: Option<String>,
}

/// The exclusive upper end of the key range that starts with `prefix` (lower-case hex keys sort
/// below `g`), for SQL range scans.
pub fn prefix_end(prefix: &str) -> String {
    format!("{prefix}g")
}

/// Every port at once: what an adapter implements and what `notice_setup` hands out. Entry points
/// keep only the narrow port they use (`Arc<dyn Ledger>` upcasts to any of them), so the
/// read-only reporter holds a handle that cannot write.
pub trait Ledger: ClaimLedger + QuarantineView + EvidenceLedger + OperatorLedger {}

impl<T: ClaimLedger + QuarantineView + EvidenceLedger + OperatorLedger + ?Sized> Ledger for T {}
