//! How one job can end, and the time budget of its one send attempt.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::InvalidJob;
use crate::identity::NoticeKey;
use crate::ledger::RowState;
use crate::mailer::NotAccepted;

/// `enforce` blocks duplicates; `shadow` writes claims and counts would-be suppressions but never
/// blocks a send (for rolling out in front of an existing sender).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Enforce,
    Shadow,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "enforce" => Ok(Mode::Enforce),
            "shadow" => Ok(Mode::Shadow),
            other => Err(format!("must be `enforce` or `shadow`, not {other:?}")),
        }
    }
}

/// How one job ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Claimed, accepted by the provider, committed.
    Sent { message_id: String },
    /// Already sent, decided (rejected, missed), or held by a claim whose sender is gone (it stays
    /// open: quarantined, on the reporter's view once older than `NOTICE_STALE_AFTER_SECS`):
    /// nothing sent.
    Suppressed { state: RowState },
    /// Held by another delivery's claim whose sender may still be running (younger than
    /// [`SendBudget::claim_lifetime`]): nothing sent; back at `until`, when that sender has
    /// finished or died — never acked while it may still release the claim.
    /// `withdraw`: the delivery held is a withdraw, whose wait the queue only ever hides.
    InFlight { until: DateTime<Utc>, withdraw: bool },
    /// Window not open yet: not claimed, not sent; it opens at `until` and closes at `closes_at`
    /// (a park's spread stays inside it).
    Deferred { until: DateTime<Utc>, closes_at: DateTime<Utc> },
    /// The recipient domain's shared send rate is used up: nothing claimed, nothing sent; back at
    /// `until` (when a token is due, plus jitter).
    RateLimited { until: DateTime<Utc> },
    /// Window closed: recorded, never sent.
    Missed { closed_at: DateTime<Utc> },
    /// The provider said it did not accept the message; our claim was released so a retry may send.
    Released { class: NotAccepted, reason: String },
    /// Outcome unknown (or sent but not committed): the claim stays and is never auto-released.
    Quarantined { reason: String, message_id: Option<String> },
    /// The provider refused this message permanently: recorded, not retried.
    Rejected { reason: String },
    /// Same key, different content: the producer changed a notice without bumping `revision`.
    PayloadConflict { state: RowState },
    /// Shadow mode: sent without blocking; `would_suppress` is what enforce mode would have done.
    ShadowSent { message_id: Option<String>, would_suppress: Option<RowState> },
    /// Bad input.
    Invalid(InvalidJob),
    /// A template could not be rendered: nothing claimed.
    RenderFailed(String),
    /// The ledger could not be read or written, and nothing was sent (before the send, or a
    /// release after "not accepted" that failed — it may have landed): retried.
    LedgerUnavailable(String),
    /// Too little invocation time left to start a send safely: nothing claimed.
    NoTimeLeft,
    /// A withdraw: the tombstone is written (`already`: it was there), so no copy of the job —
    /// queued, parked or replayed — is ever sent.
    Withdrawn { already: bool },
    /// A withdraw for a notice that is claimed or sent (since `at`): it went out or may have; the
    /// producer must decide what follows (`WithdrawTooLate`).
    WithdrawTooLate { state: RowState, at: DateTime<Utc> },
    /// A withdraw for a notice that was never sent and never will be (`missed`, `rejected`).
    WithdrawNotNeeded { state: RowState },
}

impl Outcome {
    /// Short name for logs and terminal output.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Sent { .. } => "sent",
            Outcome::Suppressed { .. } => "suppressed",
            Outcome::InFlight { .. } => "in_flight",
            Outcome::Deferred { .. } => "deferred",
            Outcome::RateLimited { .. } => "rate_limited",
            Outcome::Missed { .. } => "missed",
            Outcome::Released { .. } => "released",
            Outcome::Quarantined { .. } => "quarantined",
            Outcome::Rejected { .. } => "rejected",
            Outcome::PayloadConflict { .. } => "payload_conflict",
            Outcome::ShadowSent { .. } => "shadow_sent",
            Outcome::Invalid(_) => "invalid",
            Outcome::RenderFailed(_) => "render_failed",
            Outcome::LedgerUnavailable(_) => "ledger_unavailable",
            Outcome::NoTimeLeft => "no_time_left",
            Outcome::Withdrawn { .. } => "withdrawn",
            Outcome::WithdrawTooLate { .. } => "withdraw_too_late",
            Outcome::WithdrawNotNeeded { .. } => "withdraw_not_needed",
        }
    }
}

/// One job's result, with its key when the job was valid.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    pub key: Option<NoticeKey>,
    pub outcome: Outcome,
}

/// Time limits for the one send attempt.
#[derive(Clone, Copy, Debug)]
pub struct SendBudget {
    /// Longest a send may take before its outcome counts as unknown.
    pub send_timeout: Duration,
    /// No claim is made unless at least this much time is left before the deadline.
    pub min_time_left: Duration,
    /// The longest a live sender holds a claim (its invocation timeout, with margin): a younger
    /// claim may still be in flight, and its claimer may still release it.
    pub claim_lifetime: Duration,
}

impl Default for SendBudget {
    fn default() -> Self {
        Self {
            send_timeout: Duration::from_secs(10),
            min_time_left: Duration::from_secs(15),
            claim_lifetime: Duration::from_secs(60),
        }
    }
}
