//! The ledger's rows and the requests that write them: a row's state, origin and claim token, the
//! provider's delivery status, and what a claim or a withdraw asks to write. A file of its own so
//! what a row *is* (what every adapter stores) reads apart from the ports that move it.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use rand::RngCore;

use super::detail::withdraw_detail;
use crate::error::LedgerError;
use crate::identity::NoticeKey;
use crate::job::{Job, Withdrawal};

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
    /// A marker at a notice's key under an older secret version, written with the notice's first
    /// row under the current version ([`crate::keyring`]): it makes a claim under the old key fail,
    /// so a notice is claimable under one key only while two versions are active. Never sent,
    /// never claimed, never moved.
    Alias,
}

impl RowState {
    pub const ALL: [RowState; 7] = [
        RowState::Claimed,
        RowState::Sent,
        RowState::Rejected,
        RowState::Missed,
        RowState::Released,
        RowState::Withdrawn,
        RowState::Alias,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RowState::Claimed => "claimed",
            RowState::Sent => "sent",
            RowState::Rejected => "rejected",
            RowState::Missed => "missed",
            RowState::Released => "released",
            RowState::Withdrawn => "withdrawn",
            RowState::Alias => "alias",
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

/// What produced the message a claim sends: the evidence, kept on the row, of which notice
/// configuration and template rendered it and of what was rendered — so an audit can say which
/// words a customer was sent without keeping the message itself. Stored as a whole or not at all:
/// an adapter reads a row with some but not all of the three as corrupt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedNotice {
    /// The content-addressed id of the notice configuration bundle that was loaded
    /// (`sha256:ab12…`, or `builtin:<hex>` for the configuration compiled in): names exactly
    /// which kinds, windows and templates were in force, across redeploys.
    pub config_version: String,
    /// The template actually used, as `<kind>/<locale>` (`annual_renewal/de`), or
    /// `<kind>/default` when the customer's locale had none and the default one was used.
    pub template: String,
    /// Hex SHA-256 of the rendered subject, text and HTML: the message itself is not stored,
    /// but a re-rendering (or a copy the customer shows) can be checked against it.
    pub rendered_digest: String,
}

impl RenderedNotice {
    /// The names every adapter stores the three under (columns, item attributes).
    pub const STORED_AS: [&'static str; 3] = ["config_version", "template", "rendered_digest"];

    /// Reads the three values back as a row stored them: all three make the evidence, none means a
    /// row written without it (or before it was stored), and anything in between is a corrupt row
    /// — evidence with a part missing could not prove what was sent.
    pub fn from_stored(
        config_version: Option<String>,
        template: Option<String>,
        rendered_digest: Option<String>,
    ) -> Result<Option<Self>, LedgerError> {
        match (config_version, template, rendered_digest) {
            (Some(config_version), Some(template), Some(rendered_digest)) => {
                Ok(Some(Self { config_version, template, rendered_digest }))
            }
            (None, None, None) => Ok(None),
            (c, t, d) => {
                let missing: Vec<&str> = [c.is_none(), t.is_none(), d.is_none()]
                    .iter()
                    .zip(Self::STORED_AS)
                    .filter_map(|(absent, name)| absent.then_some(name))
                    .collect();
                Err(LedgerError::Corrupt(format!(
                    "rendered-notice evidence is incomplete: {} missing (stored together or not at all)",
                    missing.join(", ")
                )))
            }
        }
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
    /// Whether the quarantine view lists this open claim. A claim is made off the view when its
    /// sender's queue redelivers (so the common claim → commit writes no index entry, and the
    /// reporter's index costs nothing per notice); whoever learns that it may stay open — its own
    /// sender after an unknown send, or a later delivery that finds it held — puts it on before its
    /// message is acked ([`crate::ledger::ClaimLedger::put_on_quarantine_view`]). Ledgers whose
    /// view is every open claim (SQLite, PostgreSQL: a partial index) read it as `true` on every
    /// open claim. Meaningless on any other state.
    pub on_quarantine_view: bool,
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
    /// Which configuration and template produced the message, and a digest of it, written with
    /// the claim (or the missed record) when the sender knew them. Absent on rows written before
    /// it was stored, on backfilled, withdrawn and learned rows.
    pub rendered: Option<RenderedNotice>,
    /// The obligation rule that owed the notice (`US-CA/ca-annual-term`), written with the claim
    /// or the missed record when the job named one ([`Job::obligation`]): evidence of why the
    /// customer was told. Absent for a producer's own jobs and on rows written before it was stored.
    pub obligation: Option<String>,
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
    /// What rendered the message this claim is for ([`ClaimRequest::with_rendered`]), stored on
    /// the row as evidence; `None` when the claim is made before (or without) rendering.
    pub rendered: Option<RenderedNotice>,
    /// The rule that owed the notice, from the job, stored on the row as evidence.
    pub obligation: Option<String>,
    /// The notice's keys under older active secret versions: the write succeeds only if it can
    /// also put an alias at each (no row there, or an alias), in the same atomic write. Empty
    /// outside a rotation: one conditional write, as always ([`crate::keyring`]).
    pub aliases: Vec<NoticeKey>,
    /// Whether the claim goes on the quarantine view as it is made
    /// ([`LedgerRow::on_quarantine_view`]): for hosts whose unfinished messages never come back
    /// (`noticectl send` reads files), since no later delivery would put it there.
    pub on_quarantine_view: bool,
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
            rendered: None,
            obligation: job.obligation.clone(),
            aliases: Vec::new(),
            on_quarantine_view: true,
        }
    }

    /// The same request, with aliases at the notice's keys under older secret versions.
    pub fn with_aliases(mut self, aliases: Vec<NoticeKey>) -> Self {
        self.aliases = aliases;
        self
    }

    /// The same request, carrying what rendered its message.
    pub fn with_rendered(mut self, rendered: RenderedNotice) -> Self {
        self.rendered = Some(rendered);
        self
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
            on_quarantine_view: state == RowState::Claimed && self.on_quarantine_view,
            updated_at: self.at,
            message_id: None,
            detail,
            delivery_status: None,
            duplicate_message_ids: Vec::new(),
            charge_at: self.charge_at,
            jurisdiction: self.jurisdiction.clone(),
            rendered: self.rendered.clone(),
            obligation: self.obligation.clone(),
        }
    }
}

impl LedgerRow {
    /// The alias at `key` (a notice's key under an older secret version) for `row`, the notice's
    /// first row under the current version: the identity for evidence, nothing to claim or commit.
    pub fn alias_at(key: &NoticeKey, row: &LedgerRow) -> LedgerRow {
        LedgerRow {
            key: key.clone(),
            state: RowState::Alias,
            origin: row.origin,
            claim_token: None,
            subscription_id: row.subscription_id.clone(),
            period_start: row.period_start.clone(),
            kind: row.kind.clone(),
            revision: row.revision,
            content_digest: None,
            claimed_at: None,
            on_quarantine_view: false,
            updated_at: row.updated_at,
            message_id: None,
            detail: Some(format!("alias: the notice lives under secret version v{}", row.key.version())),
            delivery_status: None,
            duplicate_message_ids: Vec::new(),
            charge_at: row.charge_at,
            jurisdiction: row.jurisdiction.clone(),
            rendered: None,
            obligation: row.obligation.clone(),
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
    /// As [`ClaimRequest::aliases`]: the tombstone's aliases while a rotation is in progress.
    pub aliases: Vec<NoticeKey>,
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
            aliases: Vec::new(),
        }
    }

    /// The same request, with aliases at the notice's keys under older secret versions.
    pub fn with_aliases(mut self, aliases: Vec<NoticeKey>) -> Self {
        self.aliases = aliases;
        self
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
            on_quarantine_view: false,
            updated_at: self.at,
            message_id: None,
            detail: Some(self.detail.clone()),
            delivery_status: None,
            duplicate_message_ids: Vec::new(),
            // A withdraw names the notice, not its charge: nothing to keep as evidence.
            charge_at: None,
            jurisdiction: None,
            rendered: None,
            obligation: None,
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
