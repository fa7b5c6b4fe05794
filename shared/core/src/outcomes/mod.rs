//! Outcomes back to the business: each notice's outcome as one event with a documented,
//! versioned schema ([`OutcomeEvent`], docs/outcomes.md), published through a port
//! ([`OutcomePublisher`]; the EventBridge adapter is `notice_eventbridge`).
//!
//! What is published, decided in one place ([`published_as`]): `sent`, `missed`, `withdrawn`,
//! `withdraw_too_late` and `rejected` from the sender; `bounced` and `complained` from the
//! reconciler (the SES event it applied, with the row it applied it to); any of them again from
//! the ledger's rows (`noticectl outcomes republish`, [`OutcomeEvent::from_row`]).
//!
//! What can go wrong, and why it is still safe:
//! - the publish fails or times out: the send path has already committed and the queue's
//!   decision does not wait on it ([`publish_bounded`]: one retry of only the failed entries,
//!   inside a short budget); the failure is counted (`OutcomePublishFailed`) and logged with the
//!   notice key. The ledger stays the source of truth: the event can be re-published from it.
//! - the worker dies after the commit, before the publish: the event is lost the same way, and
//!   the redelivery is suppressed as a duplicate (no event): republish from the ledger.
//! - an event goes out twice (a retried entry that had landed, a republish, a repeated
//!   withdraw): delivery is at least once; consumers dedupe on `notice_key` + `outcome`.
//! - events arrive out of order (a `bounced` before its `sent`): order is not guaranteed; `at`
//!   says when each happened.
//!
//! Never raw personal data: no e-mail address, no template data — the identity the producer
//! already holds, the key, times, reasons and ids.

mod build;

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use build::{evidence_published, hours_before, published_as};

/// The schema's version, carried in every event (`schema_version`). Adding an optional field
/// keeps it; removing or renaming one, or changing a meaning, bumps it.
pub const SCHEMA_VERSION: u32 = 1;
/// The EventBridge `source` of every outcome event.
pub const SOURCE: &str = "notice-ledger";
/// The EventBridge `detail-type` of every outcome event.
pub const DETAIL_TYPE: &str = "Notice Outcome";
/// How long a publish may take, retry included, before its events count as not published: short,
/// so a slow bus never holds a batch's answer (and its messages) back.
pub const PUBLISH_BUDGET: Duration = Duration::from_secs(2);

/// What became of a notice, as the business hears it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// The provider accepted the message, and the ledger committed it.
    Sent,
    /// The send window closed before it could be sent: never sent.
    Missed,
    /// Withdrawn before anything claimed it: never sent.
    Withdrawn,
    /// A withdraw came after the notice was claimed or sent: it went out, or may have.
    WithdrawTooLate,
    /// The provider refused the message permanently: never sent.
    Rejected,
    /// Sent, then bounced (the SES `Bounce` event).
    Bounced,
    /// Sent, then the recipient complained (the SES `Complaint` event).
    Complained,
}

impl OutcomeKind {
    pub const ALL: [OutcomeKind; 7] = [
        OutcomeKind::Sent,
        OutcomeKind::Missed,
        OutcomeKind::Withdrawn,
        OutcomeKind::WithdrawTooLate,
        OutcomeKind::Rejected,
        OutcomeKind::Bounced,
        OutcomeKind::Complained,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Sent => "sent",
            OutcomeKind::Missed => "missed",
            OutcomeKind::Withdrawn => "withdrawn",
            OutcomeKind::WithdrawTooLate => "withdraw_too_late",
            OutcomeKind::Rejected => "rejected",
            OutcomeKind::Bounced => "bounced",
            OutcomeKind::Complained => "complained",
        }
    }
}

impl std::fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who published an event: the live paths, or a re-publication from the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PublishedBy {
    Sender,
    Reconciler,
    /// `noticectl outcomes republish`: rebuilt from a ledger row.
    Ledger,
}

/// One notice's outcome: the `detail` of an EventBridge event (`source` [`SOURCE`],
/// `detail-type` [`DETAIL_TYPE`]). Schema version [`SCHEMA_VERSION`]; optional fields are left
/// out when unknown. docs/outcomes.md has an example of each outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutcomeEvent {
    pub schema_version: u32,
    /// The notice key (hex HMAC of the identity): the ledger row's key.
    pub notice_key: String,
    pub subscription_id: String,
    /// `YYYY-MM-DD`.
    pub period_start: String,
    pub kind: String,
    pub revision: u64,
    pub outcome: OutcomeKind,
    /// When it happened: the commit (`sent`, `rejected`), the record (`missed`), the withdraw's
    /// answer, the provider's event (`bounced`, `complained`); from a ledger row, the row's times.
    pub at: DateTime<Utc>,
    /// The charge the notice announced, when known (not for withdraws).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charge_at: Option<DateTime<Utc>>,
    /// `charge_at - at` in hours (two decimals): how long before the charge it went out (or was
    /// recorded missed). Negative when `at` is after the charge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours_before_charge: Option<f64>,
    /// Why: the window's close, the provider's refusal, the withdraw's reason, the row's detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The provider's message id, where a message went out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The notice configuration version the notice was judged and rendered under, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<String>,
    /// The jurisdiction the window was judged in, where the job named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jurisdiction: Option<String>,
    /// The obligation rule that owed the notice (`US-CA/ca-annual-term`: scope and rule name), where
    /// the job named one (a planner's jobs do; a withdraw names none): the business can count
    /// outcomes per legal rule without reading the ledger — the same value the row and
    /// `noticectl evidence` show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obligation: Option<String>,
    pub published_by: PublishedBy,
}

impl OutcomeEvent {
    /// The event as the JSON text of an EventBridge `Detail`.
    pub fn to_detail(&self) -> String {
        // A struct of strings, numbers and timestamps always serialises.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// Why one event was not published.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    /// The bus answered, refusing this entry (its code, e.g. `ThrottlingException`,
    /// `InternalFailure`, `AccessDeniedException`).
    #[error("refused ({code}): {message}")]
    Refused { code: String, message: String },
    /// No usable answer (network, timeout, an error for the whole call).
    #[error("unavailable: {0}")]
    Unavailable(String),
}

/// The port: puts a batch of outcome events on the business's bus.
#[async_trait]
pub trait OutcomePublisher: Send + Sync {
    /// Puts `events`; one result per event, in order (an adapter splits the batch into as many
    /// calls as its bus takes). A missing result counts as a failure.
    async fn publish(&self, events: &[OutcomeEvent]) -> Vec<Result<(), PublishError>>;
}

/// [`publish_bounded`], then every event not published logged with its notice key: the one line
/// both Lambdas write for it (the ledger has the outcome; `noticectl outcomes republish` puts it on
/// the bus later). The caller counts the report; nothing else happens.
pub async fn publish_logged(
    publisher: &dyn OutcomePublisher,
    events: Vec<OutcomeEvent>,
    budget: Duration,
) -> PublishReport {
    let report = publish_bounded(publisher, events, budget).await;
    for (event, error) in &report.failed {
        tracing::error!(
            notice_key = %event.notice_key,
            outcome = event.outcome.as_str(),
            error = %error,
            "outcome event not published: the ledger has it; republish with `noticectl outcomes republish`"
        );
    }
    report
}

/// What [`publish_bounded`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PublishReport {
    pub published: usize,
    /// The events not published, with the last error of each.
    pub failed: Vec<(OutcomeEvent, PublishError)>,
}

/// Publishes `events` within `budget`: one call, then one retry of only the entries that failed;
/// whatever is not confirmed when the budget runs out counts as failed. Never errors and never
/// takes longer than `budget` (plus a scheduler tick): the caller counts and logs the failures
/// and goes on — publishing never blocks or fails the send path.
pub async fn publish_bounded(
    publisher: &dyn OutcomePublisher,
    events: Vec<OutcomeEvent>,
    budget: Duration,
) -> PublishReport {
    let deadline = tokio::time::Instant::now() + budget;
    let mut report = PublishReport::default();
    let mut pending = events;
    for attempt in 0..2 {
        if pending.is_empty() {
            break;
        }
        let answer = match tokio::time::timeout_at(deadline, publisher.publish(&pending)).await {
            Ok(answer) => answer,
            Err(_) => {
                let error = PublishError::Unavailable(format!("no answer within {} ms", budget.as_millis()));
                report.failed.extend(pending.into_iter().map(|e| (e, error.clone())));
                return report;
            }
        };
        let mut answers = answer.into_iter();
        let mut failed = Vec::new();
        for event in pending {
            match answers.next() {
                Some(Ok(())) => report.published += 1,
                Some(Err(e)) => failed.push((event, e)),
                None => failed.push((event, PublishError::Unavailable("no result for this entry".into()))),
            }
        }
        if attempt == 1 {
            report.failed = failed;
            break;
        }
        pending = failed.into_iter().map(|(e, _)| e).collect();
    }
    report
}
