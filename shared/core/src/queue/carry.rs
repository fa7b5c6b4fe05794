//! Carrying out a queue action: the one place that turns a job's outcome into calls on its message
//! — hide, requeue as a new delayed message, park, unpark, dead-letter — and decides whether the
//! queue may then drop the message (ack) or must keep it. [`QueuePolicy`] decides *what*; this
//! carries it out through the [`QueuedMessage`] port. The sender Lambda implements the port with
//! SQS (`shared/sqs`), the capacity model with its modelled queue: both run these rules.
//!
//! What can go wrong, and why it is still safe:
//! - **An ack is only ever given when the job is somewhere else or done**: deleted because the
//!   ledger holds the result, a live schedule holds it (parked), SQS took its new message
//!   (requeued), or the dead-letter queue took it. Every failure of those keeps the message.
//! - **A hide that fails** is not fatal: the message comes back after the queue's own visibility
//!   timeout, earlier than asked — never lost.
//! - **A hide longer than SQS accepts** would be refused outright (SQS counts its 12-hour limit
//!   from the receive, not from the call), so every hide is clamped to what is left of the
//!   receipt's 12 hours, less [`RECEIPT_MARGIN`]; a job that must wait longer comes back and hides
//!   again.
//! - **A requeue that fails** keeps the message hidden for the requeue's delay instead; a crash
//!   between a requeue and the ack leaves two copies, which the ledger (or the next park) folds
//!   into one.
//! - **A park** is read by [`settle`] alone: refused → requeued (and the refusal reported), a
//!   schedule by the key that may have fired, or nowhere to send the job back to → kept with the
//!   policy's back-off.
//! - **An unpark** after a withdraw is only tidiness: a parked job that still fires is suppressed
//!   by the tombstone, so its failure is a warning.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tracing::{error, info, warn};

use super::settle::{settle, Settled};
use super::{QueueAction, QueuePolicy, Receive, MAX_VISIBILITY};
use crate::deliver::{Delivery, Outcome};
use crate::error::Fault;
use crate::locale::Cldr;
use crate::metrics::Metrics;
use crate::park::{ParkRefusal, ParkRequest, Parker};

/// Kept off the end of a receipt's 12 hours when clamping a hide: the receive itself happened up to
/// a batching window (at most 5 minutes) before the adapter saw the message.
pub const RECEIPT_MARGIN: Duration = Duration::from_secs(5 * 60);

/// A queue call that did not happen (or may not have): the queue service (`SQS`), why — the kind
/// its adapter read from the typed error, never from the words — and the message for people.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct QueueError {
    pub service: &'static str,
    pub fault: Fault,
    pub detail: String,
}

impl QueueError {
    pub fn new(service: &'static str, fault: Fault, detail: impl Into<String>) -> Self {
        Self { service, fault, detail: detail.into() }
    }
}

/// One received message, as its queue adapter can act on it.
#[async_trait]
pub trait QueuedMessage: Send + Sync {
    /// The job's own body, unchanged.
    fn body(&self) -> &str;
    /// The queue the message came from, where a parked job goes back to (`None`: unknown).
    fn queue_arn(&self) -> Option<&str>;
    /// The `replay_batch` attribute it carried, kept on a parked job. Never `Some("")`: an
    /// adapter answers an empty attribute as none, so that every reader (the dedupe rule, the
    /// span, the replay's metrics) can trust `Some` to mean "an operator's replay".
    fn replay_batch(&self) -> Option<&str>;
    /// When this receipt was taken (the queue's visibility limits count from it).
    fn received_at(&self) -> DateTime<Utc>;
    /// Hides it for `wait` (already within what the queue accepts).
    async fn hide(&self, wait: Duration) -> Result<(), QueueError>;
    /// Sends its body and attributes again as a new message delayed `delay` (at most 15 minutes).
    async fn requeue(&self, delay: Duration) -> Result<(), QueueError>;
    /// Moves it to the dead-letter queue with `reason`. An error keeps it on the queue, where the
    /// redrive policy moves it in the end.
    async fn dead_letter(&self, reason: &str) -> Result<(), QueueError>;
}

/// What the queue does with the message once the action is carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Delete it: the job is done or held elsewhere.
    Ack,
    /// Keep it (a batch item failure): it comes back when its hide ends.
    Keep,
}

/// What carrying out did: the action, the disposition, and a park refusal to report by reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Carried {
    pub action: QueueAction,
    pub disposition: Disposition,
    pub refused: Option<ParkRefusal>,
}

/// Everything carrying out needs besides the message: the deployment's policy, its parker, the
/// counters the queue work increments (`ParkedJobs`, `RequeuedJobs`, `PayloadConflicts`), and the
/// checks a job is parsed with (a parked body is compared with the message's by content).
pub struct Executor<'a> {
    pub policy: &'a QueuePolicy,
    pub parker: Option<&'a dyn Parker>,
    pub metrics: &'a Metrics,
    pub cldr: &'a dyn Cldr,
}

impl Executor<'_> {
    /// Decides the queue action for `delivery` on this receive and carries it out on `message`.
    pub async fn carry_out(
        &self,
        message: &dyn QueuedMessage,
        delivery: &Delivery,
        receive: &Receive<'_>,
    ) -> Carried {
        let action = self.policy.action(&delivery.outcome, receive);
        if let (Outcome::Withdrawn { .. }, Some(key), Some(parker)) =
            (&delivery.outcome, &delivery.key, self.parker)
        {
            // Tidiness only: a parked job that still fires meets the tombstone.
            match parker.unpark(key).await {
                Ok(true) => info!("withdrawn notice's parked job deleted"),
                Ok(false) => {}
                Err(e) => {
                    warn!(error = %e, "could not delete the withdrawn notice's parked job: it will be suppressed when it fires")
                }
            }
        }
        let (disposition, refused) = match action {
            QueueAction::Delete => (Disposition::Ack, None),
            QueueAction::DeadLetter => {
                (dead_letter(message, &delivery.outcome.dead_letter_reason()).await, None)
            }
            QueueAction::Hide(_) | QueueAction::Backoff(_) | QueueAction::Requeue(_) => {
                (self.wait(message, action, receive.now).await, None)
            }
            QueueAction::Park { at } => self.park(message, delivery, at, receive).await,
        };
        Carried { action, disposition, refused }
    }

    /// A wait spent on the queue: hidden on this message, or — a requeue — as a new delayed
    /// message, hidden here instead when that send fails.
    async fn wait(
        &self,
        message: &dyn QueuedMessage,
        action: QueueAction,
        now: DateTime<Utc>,
    ) -> Disposition {
        match action {
            QueueAction::Hide(wait) | QueueAction::Backoff(wait) => hide(message, wait, now).await,
            QueueAction::Requeue(delay) => match message.requeue(delay).await {
                Ok(()) => {
                    Metrics::incr(&self.metrics.requeued);
                    info!(delay_secs = delay.as_secs(), "waits as a new message");
                    Disposition::Ack
                }
                Err(e) => {
                    warn!(error = %e, "requeue failed; the message stays on the queue");
                    hide(message, delay, now).await
                }
            },
            // Never asked for: only waits come here.
            QueueAction::Delete | QueueAction::Park { .. } | QueueAction::DeadLetter => Disposition::Keep,
        }
    }

    /// Takes the job off the queue into a schedule that brings its own body back at `at`: acked
    /// only when a live schedule holds it, or — when the parker refuses — once the body is back
    /// on the queue as a new delayed message. Anything uncertain keeps the message.
    async fn park(
        &self,
        message: &dyn QueuedMessage,
        delivery: &Delivery,
        at: DateTime<Utc>,
        receive: &Receive<'_>,
    ) -> (Disposition, Option<ParkRefusal>) {
        let keep = |why: &str| {
            warn!(until = %at, "{why}: the message stays on the queue");
            self.policy.park_failed(receive)
        };
        let (parker, key, queue_arn) = match (self.parker, delivery.key.as_ref(), message.queue_arn()) {
            // The policy parks only with a parker; without one, hide as long as the queue allows.
            (None, _, _) => return (hide(message, MAX_VISIBILITY, receive.now).await, None),
            (_, None, _) => {
                return (
                    self.wait(message, keep("cannot park a job without a notice key"), receive.now).await,
                    None,
                )
            }
            (_, _, None) => {
                let action = keep("cannot park: the message names no queue to send the job back to");
                return (self.wait(message, action, receive.now).await, None);
            }
            (Some(parker), Some(key), Some(arn)) => (parker, key, arn),
        };
        let request =
            ParkRequest { key, at, body: message.body(), queue_arn, replay_batch: message.replay_batch() };
        match settle(parker, self.policy, &request, receive, self.cldr).await {
            Settled::Parked => {
                Metrics::incr(&self.metrics.parked);
                info!(until = %at, "parked");
                (Disposition::Ack, None)
            }
            Settled::AlreadyParked { fires } => {
                info!(until = %at, parked_until = %fires, "already parked");
                (Disposition::Ack, None)
            }
            Settled::Conflict => {
                Metrics::incr(&self.metrics.payload_conflicts);
                let why =
                    "payload conflict: this notice is already parked with different content (bump revision)";
                (dead_letter(message, why).await, None)
            }
            Settled::Keep { why, action } => {
                warn!(until = %at, "{why}: the message stays on the queue");
                (self.wait(message, action, receive.now).await, None)
            }
            Settled::Requeue { delay, error } => {
                error!(
                    reason = error.reason.as_str(), error = %error,
                    "parking refused{}: the job goes back on the queue and tries again",
                    match error.reason {
                        ParkRefusal::Quota => " by a quota of the parker (EventBridge Scheduler: live schedules per Region, or CreateSchedule requests/s): raise it (docs/deploy.md, Capacity)",
                        ParkRefusal::Throttled => " by throttling (the parker's request-rate quota)",
                        ParkRefusal::Unavailable => ": the parker is unavailable",
                    }
                );
                let refused = Some(error.reason);
                match message.requeue(delay).await {
                    Ok(()) => {
                        Metrics::incr(&self.metrics.requeued);
                        info!(until = %at, delay_secs = delay.as_secs(), "park refused: the job waits as a new message");
                        (Disposition::Ack, refused)
                    }
                    Err(e) => {
                        warn!(error = %e, "requeue after a refused park failed; the message stays on the queue");
                        (self.wait(message, self.policy.park_failed(receive), receive.now).await, refused)
                    }
                }
            }
        }
    }
}

/// Hides the message for `wait`, clamped to what is left of its receipt's 12 hours (see the
/// module's header); always kept.
async fn hide(message: &dyn QueuedMessage, wait: Duration, now: DateTime<Utc>) -> Disposition {
    let wait = wait.min(hide_limit(message.received_at(), now));
    if let Err(e) = message.hide(wait).await {
        // Not fatal: the message still comes back after the queue's visibility timeout.
        warn!(error = %e, "hiding the message failed: it comes back after the queue's own visibility timeout");
    }
    Disposition::Keep
}

/// The longest hide a queue accepts now for a receipt taken at `received_at`.
pub fn hide_limit(received_at: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    let held = (now - received_at).to_std().unwrap_or(Duration::ZERO);
    MAX_VISIBILITY.saturating_sub(RECEIPT_MARGIN).saturating_sub(held)
}

/// Moves the message to the dead-letter queue with `why`; kept (for the redrive policy) when it
/// cannot.
pub async fn dead_letter(message: &dyn QueuedMessage, why: &str) -> Disposition {
    match message.dead_letter(why).await {
        Ok(()) => {
            error!(reason = why, "message dead-lettered");
            Disposition::Ack
        }
        Err(e) => {
            error!(reason = why, error = %e, "message cannot succeed and could not be dead-lettered here: failing it so the redrive policy moves it");
            Disposition::Keep
        }
    }
}

impl Outcome {
    /// Why a message with this outcome is dead-lettered (the `notice_error` attribute).
    pub fn dead_letter_reason(&self) -> String {
        match self {
            Outcome::Invalid(e) => e.to_string(),
            Outcome::RenderFailed(e) => format!("render failed: {e}"),
            Outcome::PayloadConflict { state } => {
                format!("payload conflict: key already {state} with different content (bump revision)")
            }
            other => other.label().to_owned(),
        }
    }
}
