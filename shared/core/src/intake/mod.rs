//! Billing webhooks → queue messages: the provider-neutral half of the intake.
//!
//! A billing system states facts — "this subscription renews on this date for this amount",
//! "this subscription ends with its period" — and delivers them as webhooks: at least once,
//! retried for days, in any order. The intake turns each verified event into at most a few queue
//! messages (send jobs and withdraws) that obey the producer contract (docs/job.md): identity and
//! content come from the facts, never from the event, so every redelivery builds the same body.
//!
//! Three steps, each one place:
//!
//! 1. **Mapping** ([`BillingMapping`], a port): the adapter of one billing system (`notice_stripe`
//!    for Stripe) reads its own event shapes and answers one [`BillingFact`] — or a [`Refused`]
//!    naming the field it could not read. No billing system's JSON shape is known below this line.
//! 2. **Planning** ([`IntakePlanner::plan`]): the policy's obligations decide which kinds the
//!    fact's contract owes (`policy/obligations.rs`; a deployment without obligations states one
//!    kind); each kind, the fact and the billing system's time zone make an identity; the ledger's
//!    own rows for that identity decide the revision ([`revision`]). The answer is a list of
//!    [`IntakeDecision`]s.
//! 3. **Enqueueing** ([`JobQueue`], a port): each send or withdraw goes on the jobs queue, where
//!    the sender treats it like any producer's message. The intake never writes the ledger.
//!
//! # What can go wrong, and why it is still safe
//!
//! - *The webhook is delivered again* (a retry, a replay from the dashboard): the same facts build
//!   the same body and the same key; the ledger suppresses every copy after the first.
//! - *The intake dies after enqueueing, before answering*: the billing system retries, the retry
//!   enqueues the same body again — harmless, as above. Answering before enqueueing would lose
//!   the notice, so the answer always comes last.
//! - *A cancellation arrives before the renewal event it cancels*: its withdraw leaves a
//!   tombstone at the notice's key; the renewal event, planned later, finds that tombstone and
//!   mints nothing (a withdrawn period stays withdrawn). Arriving after: the withdraw and the job
//!   meet at the sender, and the ledger's one conditional write lets exactly one of them win.
//! - *Two different amounts for one period arrive before either is claimed* (for a price change or
//!   a trial's conversion: before the tombstone the first plan sent landed, seconds): both plans
//!   see the same rows, so both choose the same revision with different content. The sender
//!   claims the first and answers the second `payload_conflict` (dead-lettered,
//!   `PayloadConflicts` alarmed): the customer never gets two notices, and the operator sees the
//!   conflict. A third event with either amount, planned after the claim, finds it and reuses or
//!   bumps as the rule says.
//! - *The ledger cannot be read*: nothing is enqueued and the webhook is answered with an error,
//!   so the billing system retries it later.
//! - *An anniversary reminder is planned ahead* (the event of the charge before plans it: the
//!   anniversary charge's own event comes too late for its window; for a weekly or daily term,
//!   every renewal's event within the window's opening plus one term before it, each the same
//!   body under the same key, so the ledger sends it once), *then the subscription is
//!   cancelled*: the cancellation withdraws the anniversary kind for the periods after the
//!   cancelled one that an event could have planned it for (the same grid), so the parked
//!   reminder meets its tombstone at the sender. A cancellation whose term cannot be known is
//!   refused (naming `term`) rather than leave the reminder standing.
//! - *The subscription's start cannot be read* (Stripe unreachable): nothing is enqueued and the
//!   webhook is answered with an error, as for the ledger; an unknown subscription is refused.
//!   Without a subscription source the rule that needs the start refuses, naming it: an
//!   anniversary is never counted from a guessed start.
//! - *A free trial's conversion is planned ahead* from the subscription's own event, parked until
//!   its window opens, and planned again — the same body — by every later event of that trial and
//!   by the upcoming invoice at its end; a moved end or a cancellation withdraws it. A changed
//!   amount during the trial is minted one revision past the parked notice, which is withdrawn
//!   ([`revision::announcement`]); an event delivered after a later change plans nothing
//!   (`plan/trial.rs` states each case).
//! - *The price changes after an anniversary reminder was planned*: the reminder keeps the amount
//!   in force when it was planned; the change is announced by its own notice where a rule owes one.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::Fault;
use crate::job::{Job, Withdrawal};
use crate::policy::{Occasion, Term};

mod plan;
pub mod revision;
#[cfg(test)]
mod tests;

pub use plan::{IntakePlanner, Kinds, PlanError, MAX_REVISIONS, STATED_KIND_VAR};

/// One verified billing event, read by the adapter of its billing system.
#[derive(Clone, Debug, PartialEq)]
pub enum BillingFact {
    /// A charge is coming: the terms the customer must be told about.
    Renewal(Renewal),
    /// The subscription ends with its current period (or has ended): the notice for the renewal
    /// that will not happen must not go out.
    Cancellation(Cancellation),
    /// The subscription's price changes from its next renewal: one notice per announced new
    /// amount. The customer's address, language and jurisdiction are not in such an event; the
    /// planner reads them through a [`CustomerSource`].
    PriceChange(PriceChange),
    /// A subscription in a free trial (or one whose trial's end moved): the notice of its first
    /// charge, at the trial's end, is planned ahead from the subscription's own event, and the
    /// notice planned for an end the trial no longer has is withdrawn. The customer's address,
    /// language and jurisdiction are read through a [`CustomerSource`], as for a price change.
    TrialConversion(TrialConversion),
    /// An event the intake does not turn into a notice (answered, counted, never an error).
    Unhandled { event_type: String, reason: String },
}

/// The terms of a coming renewal charge, as the billing system states them.
#[derive(Clone, Debug, PartialEq)]
pub struct Renewal {
    /// A renewal of a term, or the first charge after a trial: the obligations tell them apart.
    pub occasion: Occasion,
    pub subscription_id: String,
    /// The instant the billing period that the charge pays for opens; the planner reads it as a
    /// date in the billing system's own time zone (`period_start`, docs/job.md).
    pub period_start_at: DateTime<Utc>,
    /// When the card is charged.
    pub charge_at: DateTime<Utc>,
    /// The amount in ISO 4217 minor units, and its upper-case currency code.
    pub amount_minor: i64,
    pub currency: String,
    pub email: String,
    /// The customer's preferred language, as the billing system has it (checked by the planner;
    /// a tag that is not BCP 47 is left out rather than blocking the notice).
    pub locale: Option<String>,
    /// The customer's country and, where the billing system has one, subdivision code
    /// (`US-CA`); left out when it is not an ISO 3166 code.
    pub jurisdiction: Option<String>,
    pub plan_name: Option<String>,
    /// The term between two charges (Stripe: the price's `recurring.interval` and
    /// `interval_count`), when the event states it.
    pub term: Option<Term>,
    /// A trial conversion's trial length in days, when the event states it.
    pub trial_days: Option<u32>,
    /// When the subscription began, when the event states it (anniversaries count from it).
    pub started_at: Option<DateTime<Utc>>,
}

/// A subscription that ends with its period: the renewal that opens `period_start_at` is off.
#[derive(Clone, Debug, PartialEq)]
pub struct Cancellation {
    pub subscription_id: String,
    pub period_start_at: DateTime<Utc>,
    /// For the tombstone's audit trail (one line).
    pub reason: String,
    /// The term between charges, when the event states it: an anniversary reminder is planned
    /// ahead (see [`IntakePlanner`]), so a cancellation also withdraws the ones for the renewals
    /// after `period_start_at` it could have been planned for — one term later, or for a weekly
    /// or daily term each crossing renewal up to the window's opening plus one term on.
    pub term: Option<Term>,
    /// When the subscription began, when the event states it: the renewal after is found on the
    /// subscription's own grid (anchored on the 31st), as the planner found it.
    pub started_at: Option<DateTime<Utc>>,
}

/// What the billing system's subscription record states that an event may not: when the
/// subscription began (anniversaries count from it), its term, and — for a price change, whose
/// events may arrive late and out of order — its price now and the amount in force.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subscription {
    pub started_at: Option<DateTime<Utc>>,
    pub term: Option<Term>,
    /// The amount per period its next renewal charges, as the subscription stands now (Stripe:
    /// Σ `unit_amount` × `quantity` of its items). A price-change event whose new amount differs
    /// was overtaken by a later change, whose own event plans the notice.
    pub price: Option<Amount>,
    /// The amount per period the customer pays in the current period, billed when it opened
    /// (Stripe: the latest invoice's subscription lines for the current period). A change back to
    /// it before anything was told owes no notice. `None`: not readable (a change back is then
    /// announced like any change — the customer is told an amount that is true).
    pub in_force: Option<Amount>,
    /// The trial, when the subscription is in one (Stripe: `status: trialing`): read the way the
    /// subscription's own event is read, so an upcoming invoice at the trial's end plans the very
    /// notice that event planned. `Err`: trialing, but a fact the notice needs cannot be read
    /// (the field named). `None`: not in a trial.
    pub trial: Option<Result<Trial, Refused>>,
}

/// A free trial as the billing system states it: the first charge comes at its end, for the
/// amount per period of the subscription's items.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trial {
    pub subscription_id: String,
    /// The billing system's customer id: the customer's facts are looked up by it.
    pub customer_id: String,
    pub starts_at: DateTime<Utc>,
    /// When the trial converts: the first charge, and the start of the billing period it pays for.
    pub ends_at: DateTime<Utc>,
    /// The amount per period charged from the trial's end, in ISO 4217 minor units, and its
    /// upper-case currency code (Stripe: Σ `unit_amount` × `quantity` of the items).
    pub amount_minor: i64,
    pub currency: String,
    pub plan_name: Option<String>,
    pub term: Option<Term>,
    /// When the subscription began (anniversaries count from it), when stated.
    pub started_at: Option<DateTime<Utc>>,
}

impl Trial {
    /// The trial's length in whole days, a part day counted as a day (a rule `trial_days_over:
    /// 31` owes its notice for a trial of 31 days and an hour); `None` when it ends before it
    /// starts or is longer than any day count.
    pub fn days(&self) -> Option<u32> {
        let seconds = self.ends_at.signed_duration_since(self.starts_at).num_seconds();
        let seconds = u64::try_from(seconds).ok()?;
        u32::try_from(seconds.div_ceil(86_400)).ok()
    }
}

/// What a subscription's event states about its trial.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialConversion {
    pub subscription_id: String,
    /// The trial as it stands (its conversion's notice is planned); `None` when it is over — ended
    /// early, so no notice is owed ahead of the charge that ended it.
    pub trial: Option<Trial>,
    /// The end the trial had before this change (Stripe: `previous_attributes.trial_end`): that
    /// period will not open, so what was planned for it is withdrawn.
    pub previous_end: Option<DateTime<Utc>>,
}

/// An amount in ISO 4217 minor units and its upper-case currency code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Amount {
    pub minor: i64,
    pub currency: String,
}

/// The billing system's subscription records, read-only (Stripe: `GET /v1/subscriptions/{id}`,
/// `notice_stripe::api`): the port the planner reads a subscription's start through when an
/// anniversary rule needs it and the event does not state it — looked up, never guessed.
#[async_trait]
pub trait SubscriptionSource: Send + Sync {
    /// The record's start and term (what an anniversary needs).
    async fn subscription(&self, id: &str) -> Result<Subscription, LookupError>;

    /// The record with its price now and the amount in force too (what a price change needs;
    /// Stripe: the latest invoice expanded, which needs read access to invoices as well — asked
    /// only where a price change is planned). By default the plain record: a source that cannot
    /// tell the amount in force leaves it `None`, and a change back is announced.
    async fn priced_subscription(&self, id: &str) -> Result<Subscription, LookupError> {
        self.subscription(id).await
    }
}

/// A changed price, as the billing system states it: the new amount first applies at the renewal
/// that opens `period_start_at`.
#[derive(Clone, Debug, PartialEq)]
pub struct PriceChange {
    pub subscription_id: String,
    /// The billing system's customer id: the customer's facts are looked up by it, never guessed.
    pub customer_id: String,
    /// The instant the billing period in which the new price first applies opens; the planner
    /// reads it as a date in the billing system's time zone (`period_start`).
    pub period_start_at: DateTime<Utc>,
    /// When the new price first applies (the job's `charge_at`, CONTRACT: "for a price-change
    /// notice, when the new price first applies").
    pub charge_at: DateTime<Utc>,
    /// The amount per period before the change, in ISO 4217 minor units (for logs; it never
    /// enters the notice's content, so the same new amount reached from two different old ones
    /// is one notice). The adapter maps an event whose amount did not change to no fact.
    pub previous_minor: i64,
    /// The new amount per period, in minor units, and its upper-case currency code.
    pub amount_minor: i64,
    pub currency: String,
    pub plan_name: Option<String>,
    pub term: Option<Term>,
    /// The amount the customer pays in the current period, when the event states it (Stripe's
    /// does not: the planner then reads it from the subscription record, [`Subscription::in_force`]):
    /// a change back to it before anything was told withdraws the pending notice and announces
    /// nothing. Neither: a change back is announced like any change.
    pub in_force_minor: Option<i64>,
}

/// What a notice needs to know about a customer, read from the billing system's own records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Customer {
    pub email: Option<String>,
    /// The first preferred language, as the billing system has it (checked by the planner).
    pub locale: Option<String>,
    /// ISO 3166 code from the customer's address (`US-CA`), when it has one.
    pub jurisdiction: Option<String>,
}

/// Why a customer's facts could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The billing system has no such customer (or it was deleted): a retry cannot help, so the
    /// event is refused, naming the field.
    #[error("customer {id}: {reason}")]
    NotFound { id: String, reason: String },
    /// The billing system could not be asked (unreachable, timed out, throttled, 5xx) or refused
    /// our key (denied: a misconfiguration): a retry of the webhook can succeed once it is fixed.
    #[error("{service}: {detail}")]
    Failed { service: &'static str, fault: Fault, detail: String },
    /// No customer source is configured for a fact that needs one.
    #[error("no customer lookup is configured: {0}")]
    NotConfigured(&'static str),
}

/// The billing system's customer records, read-only: the port the planner reads a price
/// change's customer facts through (Stripe: `GET /v1/customers/{id}`, `notice_stripe::api`).
#[async_trait]
pub trait CustomerSource: Send + Sync {
    async fn customer(&self, id: &str) -> Result<Customer, LookupError>;
}

/// An event the mapping cannot read: the field it needed and why. Never retried by the billing
/// system into success — the intake answers it, logs it and counts it (`IntakeRefused`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{event_type}: field `{field}` {reason}")]
pub struct Refused {
    pub event_type: String,
    pub field: String,
    pub reason: String,
}

impl Refused {
    pub fn new(event_type: &str, field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { event_type: event_type.to_owned(), field: field.into(), reason: reason.into() }
    }
}

/// The port of one billing system: a verified event (its JSON body, already authenticated) in,
/// one fact out. Implementations read only their own shapes and never touch the ledger or a queue.
pub trait BillingMapping: Send + Sync {
    /// The billing system's name, for logs and withdraw reasons (`stripe`).
    fn source(&self) -> &'static str;

    /// The event's id, for logs only (never part of a key: docs/job.md, mistake 3).
    fn event_id<'a>(&self, event: &'a Value) -> Option<&'a str>;

    /// The event's type, for logs and metrics.
    fn event_type<'a>(&self, event: &'a Value) -> Option<&'a str>;

    /// What the event states.
    fn fact(&self, event: &Value) -> Result<BillingFact, Refused>;
}

/// What the intake does with one fact.
#[derive(Clone, Debug, PartialEq)]
pub enum IntakeDecision {
    /// Enqueue this job.
    Send(Job),
    /// Enqueue this withdraw.
    Withdraw(Withdrawal),
    /// Enqueue nothing, for this reason.
    Ignore { reason: String },
}

impl IntakeDecision {
    /// The queue message body, if there is one.
    pub fn message(&self) -> Option<Value> {
        match self {
            Self::Send(job) => Some(job.to_value()),
            Self::Withdraw(w) => Some(w.to_value()),
            Self::Ignore { .. } => None,
        }
    }

    /// `send`, `withdraw` or `ignore`: for logs and answers.
    pub fn action(&self) -> &'static str {
        match self {
            Self::Send(_) => "send",
            Self::Withdraw(_) => "withdraw",
            Self::Ignore { .. } => "ignore",
        }
    }
}

/// Why a message could not be enqueued: the queue service (`SQS`), why — the kind its adapter
/// read from the typed error — and the queue's own words for people.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("could not enqueue: {detail}")]
pub struct EnqueueError {
    pub service: &'static str,
    pub fault: Fault,
    pub detail: String,
}

impl EnqueueError {
    pub fn new(service: &'static str, fault: Fault, detail: impl Into<String>) -> Self {
        Self { service, fault, detail: detail.into() }
    }
}

/// The jobs queue, as the intake writes to it: one message body at a time. The SQS adapter lives
/// with the intake Lambda; tests use an in-memory one.
#[async_trait]
pub trait JobQueue: Send + Sync {
    async fn enqueue(&self, body: &Value) -> Result<(), EnqueueError>;
}
