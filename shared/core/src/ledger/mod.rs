//! The ledger port: a durable record of which notice keys are claimed, sent or decided.
//!
//! Every write is conditional. A claim is the only door to a send, and it is only opened for a key
//! with no row or a row an operator (or the provider's refusal) explicitly released. Commit and
//! release are conditional on the claim token, so a slow worker whose claim was released and
//! re-minted by someone else cannot overwrite the new owner.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rand::RngCore;

use crate::error::LedgerError;
use crate::identity::NoticeKey;
use crate::job::{Job, Withdrawal};

pub mod memory;
pub mod rules;

/// Where a row is in its life. Only `Released` (and no row) can be claimed (or withdrawn).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowState {
    /// Claimed and not yet committed: in flight, or — when old — quarantined.
    Claimed,
    /// The provider accepted the message.
    Sent,
    /// The provider refused this message permanently; never retried.
    Rejected,
    /// The window closed before it could be sent; never sent.
    Missed,
    /// Claim given up (provider said "not accepted", or an audited operator release): may be claimed again.
    Released,
    /// Withdrawn by its producer (or an operator) before anything claimed it: a tombstone every
    /// later copy of the job is suppressed by; never sent.
    Withdrawn,
}

impl RowState {
    pub const ALL: [RowState; 6] = [
        RowState::Claimed,
        RowState::Sent,
        RowState::Rejected,
        RowState::Missed,
        RowState::Released,
        RowState::Withdrawn,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RowState::Claimed => "claimed",
            RowState::Sent => "sent",
            RowState::Rejected => "rejected",
            RowState::Missed => "missed",
            RowState::Released => "released",
            RowState::Withdrawn => "withdrawn",
        }
    }
}

impl fmt::Display for RowState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RowState {
    type Err = LedgerError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_stored(&RowState::ALL, RowState::as_str, s, "state")
    }
}

/// Reads a stored enum value back by its name; an unknown name means a corrupt row.
fn parse_stored<T: Copy>(
    all: &[T],
    name: fn(T) -> &'static str,
    s: &str,
    what: &str,
) -> Result<T, LedgerError> {
    all.iter()
        .copied()
        .find(|v| name(*v) == s)
        .ok_or_else(|| LedgerError::Corrupt(format!("unknown {what} {s:?}")))
}

/// Who wrote the row's current state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The claim → send → commit path.
    Worker,
    /// `noticectl backfill`: delivered before enforcement began.
    Backfill,
    /// Learned from the provider's event stream (e.g. a table restored from an older backup).
    ProviderEvents,
    /// An explicit, audited operator action.
    Operator,
}

impl Origin {
    pub const ALL: [Origin; 4] = [Origin::Worker, Origin::Backfill, Origin::ProviderEvents, Origin::Operator];

    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Worker => "worker",
            Origin::Backfill => "backfill",
            Origin::ProviderEvents => "provider_events",
            Origin::Operator => "operator",
        }
    }
}

impl FromStr for Origin {
    type Err = LedgerError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_stored(&Origin::ALL, Origin::as_str, s, "origin")
    }
}

/// A random claim token: proof that a claim is this attempt's own.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClaimToken(String);

impl ClaimToken {
    pub fn random() -> Self {
        let mut bytes = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut bytes);
        Self(hex::encode(bytes))
    }
    /// Re-reads a token stored on a row.
    pub fn from_stored(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One ledger row, as every adapter stores it.
#[derive(Clone, Debug, PartialEq)]
pub struct LedgerRow {
    pub key: NoticeKey,
    pub state: RowState,
    pub origin: Origin,
    pub claim_token: Option<ClaimToken>,
    pub subscription_id: String,
    pub period_start: String,
    pub kind: String,
    pub revision: u64,
    /// Digest of the content inputs of the job that claimed it (absent on backfilled rows).
    pub content_digest: Option<String>,
    pub claimed_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    /// The provider's message id of the send.
    pub message_id: Option<String>,
    /// Why the row is rejected, missed or released; who released or resolved it.
    pub detail: Option<String>,
    /// Furthest delivery status the provider reported (never moves backwards).
    pub delivery_status: Option<DeliveryStatus>,
    /// Further provider message ids seen for this key: each one is a duplicate that really went out.
    pub duplicate_message_ids: Vec<String>,
    /// The charge the notice announced, written with the claim or the missed record: the evidence
    /// of how long before the charge it went out. Absent on rows written before it was stored,
    /// on backfilled rows without it and on rows learned from provider events.
    pub charge_at: Option<DateTime<Utc>>,
    /// The customer's jurisdiction the window was judged in (absent: none given, or not stored).
    pub jurisdiction: Option<String>,
}

/// What a worker asks to claim.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRequest {
    pub key: NoticeKey,
    pub token: ClaimToken,
    pub subscription_id: String,
    pub period_start: String,
    pub kind: String,
    pub revision: u64,
    pub content_digest: String,
    pub at: DateTime<Utc>,
    /// The job's charge time and jurisdiction, stored on the row as evidence.
    pub charge_at: Option<DateTime<Utc>>,
    pub jurisdiction: Option<String>,
}

impl ClaimRequest {
    pub fn for_job(job: &Job, key: NoticeKey, at: DateTime<Utc>) -> Self {
        Self {
            key,
            token: ClaimToken::random(),
            subscription_id: job.identity.subscription_id().to_owned(),
            period_start: job.identity.period_start().format("%Y-%m-%d").to_string(),
            kind: job.identity.kind().as_str().to_owned(),
            revision: job.identity.revision(),
            content_digest: job.content_digest(),
            at,
            charge_at: Some(job.charge_at),
            jurisdiction: job.jurisdiction.clone(),
        }
    }

    /// The row a successful claim (or recorded miss) writes.
    pub fn to_row(&self, state: RowState, detail: Option<String>) -> LedgerRow {
        LedgerRow {
            key: self.key.clone(),
            state,
            origin: Origin::Worker,
            claim_token: Some(self.token.clone()),
            subscription_id: self.subscription_id.clone(),
            period_start: self.period_start.clone(),
            kind: self.kind.clone(),
            revision: self.revision,
            content_digest: Some(self.content_digest.clone()),
            claimed_at: (state == RowState::Claimed).then_some(self.at),
            updated_at: self.at,
            message_id: None,
            detail,
            delivery_status: None,
            duplicate_message_ids: Vec::new(),
            charge_at: self.charge_at,
            jurisdiction: self.jurisdiction.clone(),
        }
    }
}

/// What a withdraw asks to write: a `withdrawn` tombstone for the key.
#[derive(Clone, Debug, PartialEq)]
pub struct WithdrawRequest {
    pub key: NoticeKey,
    pub subscription_id: String,
    pub period_start: String,
    pub kind: String,
    pub revision: u64,
    /// `worker` for a withdraw message off the queue, `operator` for `noticectl withdraw`.
    pub origin: Origin,
    /// Who withdrew it, when and why ([`withdraw_detail`]).
    pub detail: String,
    pub at: DateTime<Utc>,
}

impl WithdrawRequest {
    pub fn new(
        withdrawal: &Withdrawal,
        key: NoticeKey,
        origin: Origin,
        who: &str,
        at: DateTime<Utc>,
    ) -> Self {
        let identity = &withdrawal.identity;
        Self {
            key,
            subscription_id: identity.subscription_id().to_owned(),
            period_start: identity.period_start().format("%Y-%m-%d").to_string(),
            kind: identity.kind().as_str().to_owned(),
            revision: identity.revision(),
            origin,
            detail: withdraw_detail(who, withdrawal.reason.as_deref(), at),
            at,
        }
    }

    /// The tombstone: no claim token (nothing can commit it) and no content digest (any content
    /// of the notice is withdrawn, so a later job is suppressed, never a payload conflict).
    pub fn to_row(&self) -> LedgerRow {
        LedgerRow {
            key: self.key.clone(),
            state: RowState::Withdrawn,
            origin: self.origin,
            claim_token: None,
            subscription_id: self.subscription_id.clone(),
            period_start: self.period_start.clone(),
            kind: self.kind.clone(),
            revision: self.revision,
            content_digest: None,
            claimed_at: None,
            updated_at: self.at,
            message_id: None,
            detail: Some(self.detail.clone()),
            delivery_status: None,
            duplicate_message_ids: Vec::new(),
            // A withdraw names the notice, not its charge: nothing to keep as evidence.
            charge_at: None,
            jurisdiction: None,
        }
    }
}

/// A claim this attempt owns. Only a ledger makes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub key: NoticeKey,
    pub token: ClaimToken,
    pub claimed_at: DateTime<Utc>,
}

/// The answer to a claim.
// `Held` carries the whole row on purpose (the sender judges it); an outcome lives only for one
// call, so its size on the stack does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimOutcome {
    /// This attempt owns the key (freshly, or recognised by its own token after a retried write).
    Minted(Claim),
    /// Someone already holds or decided the key.
    Held(LedgerRow),
}

/// What the provider reported about a message (SES event types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeliveryStatus {
    /// SES accepted the message (`Send`).
    Accepted,
    /// Delivery is being retried by SES (`DeliveryDelay`).
    Delayed,
    /// The recipient's server accepted it (`Delivery`).
    Delivered,
    /// Opened or clicked (`Open`, `Click`, `Subscription`).
    Engaged,
    /// Not delivered: SES rejected it (`Reject`) or could not render it (`Rendering Failure`).
    NotDelivered,
    /// Bounced (`Bounce`).
    Bounced,
    /// The recipient complained (`Complaint`).
    Complained,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 7] = [
        DeliveryStatus::Accepted,
        DeliveryStatus::Delayed,
        DeliveryStatus::Delivered,
        DeliveryStatus::Engaged,
        DeliveryStatus::NotDelivered,
        DeliveryStatus::Bounced,
        DeliveryStatus::Complained,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Accepted => "accepted",
            DeliveryStatus::Delayed => "delayed",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Engaged => "engaged",
            DeliveryStatus::NotDelivered => "not_delivered",
            DeliveryStatus::Bounced => "bounced",
            DeliveryStatus::Complained => "complained",
        }
    }

    /// Statuses only move forward: a late `Send` or `DeliveryDelay` never hides a `Delivery`.
    /// The order is the declaration order.
    pub fn advance(current: Option<DeliveryStatus>, new: DeliveryStatus) -> DeliveryStatus {
        current.map_or(new, |c| c.max(new))
    }
}

impl FromStr for DeliveryStatus {
    type Err = LedgerError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_stored(&DeliveryStatus::ALL, DeliveryStatus::as_str, s, "delivery status")
    }
}

/// Evidence from the provider's event stream that a message for `key` went out (or was refused
/// after acceptance).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderEvidence {
    pub key: NoticeKey,
    pub message_id: String,
    pub status: DeliveryStatus,
    pub at: DateTime<Utc>,
}

/// Duplicate message ids a row keeps. Each one is a real second send (and is counted in
/// `DuplicateSendsDetected` as it is seen); a few prove it, and a forged or flooded event stream
/// cannot grow a row towards DynamoDB's 400 KB item limit.
pub const MAX_DUPLICATE_IDS: usize = 5;
/// Longest provider message id accepted from an event (SES ids are about 60 characters).
pub const MAX_MESSAGE_ID_LEN: usize = 256;
/// How far past its receive time an event's own timestamp may lie. Clocks differ a little; an event
/// dated further ahead is clamped, so it cannot push `updated_at` (and the row's expiry) out.
pub const EVENT_CLOCK_SKEW_SECS: i64 = 300;

impl ProviderEvidence {
    /// Evidence as the ledger may store it: the message id checked (printable ASCII, bounded) and
    /// the event time clamped to `received_at` plus [`EVENT_CLOCK_SKEW_SECS`].
    pub fn bounded(
        key: NoticeKey,
        message_id: &str,
        status: DeliveryStatus,
        at: DateTime<Utc>,
        received_at: DateTime<Utc>,
    ) -> Result<Self, String> {
        if message_id.is_empty() || message_id.len() > MAX_MESSAGE_ID_LEN {
            return Err(format!(
                "message id must be 1 to {MAX_MESSAGE_ID_LEN} bytes, got {}",
                message_id.len()
            ));
        }
        if !message_id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("message id must be printable ASCII without spaces".into());
        }
        let latest = received_at + chrono::Duration::seconds(EVENT_CLOCK_SKEW_SECS);
        Ok(Self { key, message_id: message_id.to_owned(), status, at: at.min(latest) })
    }
}

/// What applying provider evidence did to the row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvidenceEffect {
    /// A `claimed` (or `released`) row became `sent`: a quarantined claim closed by evidence.
    Resolved,
    /// No row existed: a `sent` row learned from provider events was created.
    Learned,
    /// The row already knew this message; its delivery status moved forward (or stayed).
    Updated,
    /// A second, different message id for the key: a duplicate really went out.
    DuplicateSend { first: String, second: String },
    /// A `Send` event for a `withdrawn` key: the notice went out after all (its job was claimed and
    /// sent before the tombstone, by a path the ledger did not see — a restored table, a second
    /// sender on another ledger). The row becomes `sent`; `SentAfterWithdraw` counts it.
    SentAfterWithdraw,
    /// Any other event for a `withdrawn` key: nothing changes — only a `Send` event proves the
    /// notice went out, and one follows for every message SES accepted.
    KeptWithdrawn,
}

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

    /// Writes a `missed` row unless the key already has a row other than `released`, which is
    /// returned instead.
    async fn record_missed(&self, req: &ClaimRequest, reason: &str)
        -> Result<Option<LedgerRow>, LedgerError>;

    /// Writes the `withdrawn` tombstone ([`WithdrawRequest::to_row`]) in one conditional write,
    /// under the claim rule: no row, or a `released` one. Any other row is returned instead — a
    /// `withdrawn` one means already withdrawn; see [`rules::withdraw_answer`].
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
    /// first id kept. See [`apply_to_row`].
    async fn apply_evidence(&self, evidence: &ProviderEvidence) -> Result<EvidenceEffect, LedgerError>;
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
}

/// Every port at once: what an adapter implements and what `notice_setup` hands out. Entry points
/// keep only the narrow port they use (`Arc<dyn Ledger>` upcasts to any of them), so the
/// read-only reporter holds a handle that cannot write.
pub trait Ledger: ClaimLedger + QuarantineView + EvidenceLedger + OperatorLedger {}

impl<T: ClaimLedger + QuarantineView + EvidenceLedger + OperatorLedger + ?Sized> Ledger for T {}

// ── Rules every adapter shares ──

/// The audit text an operator release leaves on the row.
pub fn release_detail(who: &str, reason: &str, at: DateTime<Utc>) -> String {
    format!(
        "released by {} at {}: {}",
        bounded_text(who, 64),
        at.to_rfc3339(),
        bounded_text(reason, MAX_REASON_CHARS)
    )
}

/// The audit text a withdraw leaves on its tombstone.
pub fn withdraw_detail(who: &str, reason: Option<&str>, at: DateTime<Utc>) -> String {
    let mut detail = format!("withdrawn by {} at {}", bounded_text(who, 64), at.to_rfc3339());
    if let Some(reason) = reason.filter(|r| !r.trim().is_empty()) {
        detail.push_str(": ");
        detail.push_str(&bounded_text(reason, MAX_REASON_CHARS));
    }
    detail
}

/// The audit text an operator resolution leaves on the row.
pub fn resolve_detail(who: &str, at: DateTime<Utc>) -> String {
    format!("resolved as sent by {} at {}", bounded_text(who, 64), at.to_rfc3339())
}

/// Longest reason stored on a row (operator reasons, provider refusals).
pub const MAX_REASON_CHARS: usize = 500;

/// `text` on one line, without control characters, at most `max` characters: what a row stores of
/// free text it was handed.
pub fn bounded_text(text: &str, max: usize) -> String {
    let clean: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let mut out: String = clean.trim().chars().take(max).collect();
    if clean.trim().chars().count() > max {
        out.push('…');
    }
    out
}

/// A `sent` row for a key the ledger had never seen (e.g. restored from an older backup).
pub fn learned_row(ev: &ProviderEvidence) -> LedgerRow {
    LedgerRow {
        key: ev.key.clone(),
        state: RowState::Sent,
        origin: Origin::ProviderEvents,
        claim_token: None,
        subscription_id: String::new(),
        period_start: String::new(),
        kind: String::new(),
        revision: 0,
        content_digest: None,
        claimed_at: None,
        updated_at: ev.at,
        message_id: Some(ev.message_id.clone()),
        detail: Some("learned from provider events".into()),
        delivery_status: Some(ev.status),
        duplicate_message_ids: Vec::new(),
        charge_at: None,
        jurisdiction: None,
    }
}

/// Applies evidence to an existing row in place: the one definition of the evidence rules,
/// shared by every adapter that can read-modify-write.
pub fn apply_to_row(row: &mut LedgerRow, ev: &ProviderEvidence) -> EvidenceEffect {
    if row.state == RowState::Withdrawn {
        if ev.status != DeliveryStatus::Accepted {
            return EvidenceEffect::KeptWithdrawn;
        }
        row.state = RowState::Sent;
        row.message_id = Some(ev.message_id.clone());
        row.delivery_status = Some(ev.status);
        row.updated_at = row.updated_at.max(ev.at);
        let was = row.detail.take().unwrap_or_default();
        row.detail = Some(bounded_text(&format!("sent after it was {was}"), MAX_REASON_CHARS));
        return EvidenceEffect::SentAfterWithdraw;
    }
    let effect = match row.message_id.as_deref() {
        Some(first) if first != ev.message_id => {
            let first = first.to_owned();
            if row.duplicate_message_ids.len() < MAX_DUPLICATE_IDS
                && !row.duplicate_message_ids.contains(&ev.message_id)
            {
                row.duplicate_message_ids.push(ev.message_id.clone());
            }
            return EvidenceEffect::DuplicateSend { first, second: ev.message_id.clone() };
        }
        Some(_) if row.state == RowState::Sent => EvidenceEffect::Updated,
        _ => {
            row.message_id = Some(ev.message_id.clone());
            if row.state == RowState::Sent {
                EvidenceEffect::Updated
            } else {
                row.state = RowState::Sent;
                EvidenceEffect::Resolved
            }
        }
    };
    row.delivery_status = Some(DeliveryStatus::advance(row.delivery_status, ev.status));
    row.updated_at = row.updated_at.max(ev.at);
    effect
}

/// Lets tests keep a handle on an adapter they also hand to the sender.
mod shared;

#[cfg(test)]
mod tests;
