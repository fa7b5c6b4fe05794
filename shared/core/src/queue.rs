//! What the queue does with a message once its job has an outcome — the one decision table, for
//! the sender Lambda, `noticectl`, the simulation and the model check alike.
//!
//! ```text
//! outcome                                   queue action
//! sent, suppressed, missed, quarantined,    delete: the ledger holds the result
//!   rejected, shadow_sent
//! deferred (window not open)                wait until the opening (+ spread, inside the window)
//! rate_limited (no token)                   wait until the token is due; limited again: at least
//!                                           the backoff of the previous receive
//! in_flight (held by a young claim)         wait until its claimer is surely done
//! released, ledger_unavailable,             back off: 30 s × 2^(receives − 1), ≤ 15 min, jitter
//!   no_time_left
//! invalid, payload_conflict, render_failed  dead-letter: cannot succeed as it is
//! ```
//!
//! From the [`REQUEUE_AFTER_RECEIVES`]th receive on, a wait (hide or back off) is spent as a
//! **new message** delayed by it (at most 15 minutes), so waiting never reaches the redrive
//! policy's `maxReceiveCount`: only a job that cannot succeed, or a worker that dies on it every
//! time, is dead-lettered.
//!
//! A wait of at most [`MAX_HIDE`] is spent hidden on the queue; a longer one **parks** (a one-time
//! schedule named by the notice key brings the job's own body back at its time). So the queue's
//! in-flight count — capped at ~120 000 per standard queue, past which receives come back empty
//! and every domain stalls — stays within about 15 minutes of traffic, whatever the backlog.
//! Without parking (no Scheduler configured) a long wait hides for as long as the queue allows
//! ([`MAX_VISIBILITY`]); a job that must wait past the queue's retention is then lost, which the
//! sender warns about at start-up.
//!
//! What can go wrong, and why it is still safe: parking writes nothing to the ledger and sends
//! nothing, so a crash before, during or after it leaves at worst a message that is redelivered
//! and parked again (the schedule's name is the notice key: the second park finds the first) or a
//! schedule plus a redelivered message — both end on the normal path, where the ledger catches
//! every copy. A park Scheduler refuses (a full schedule quota, throttling, Scheduler down) puts
//! the job back on the queue as a new message delayed by up to 15 minutes, and only then acks the
//! refused one ([`QueuePolicy::park_refused`]): a quota can stay full for hours, and backing off
//! on the one message would spend its receives until the redrive policy dead-letters a job that
//! could still be sent. A crash between the new message and the ack leaves two copies, which the
//! next park (or the ledger) folds into one. A park whose result is uncertain in another way (a
//! schedule by the key that is firing now, nowhere to send the job back to) keeps the message
//! with a backoff ([`QueuePolicy::park_failed`]): never an ack without a park or a new message.
//! A schedule that fires early only meets a short hide; the spread never moves a wake-up past
//! the window's close ([`QueuePolicy::park_time`]).

use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

use crate::deliver::Outcome;
use crate::identity::NoticeKey;

mod carry;
mod settle;

pub use carry::{
    dead_letter, hide_limit, Carried, Disposition, Executor, QueueError, QueuedMessage, RECEIPT_MARGIN,
};

/// Longest wait spent hidden on the queue; longer waits park.
pub const MAX_HIDE: Duration = Duration::from_secs(15 * 60);
/// SQS cannot hide a message for longer than 12 hours (the most a wait can hide without parking).
pub const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600);
/// First retry waits about this long; each further receive doubles it.
pub const BACKOFF_BASE: Duration = Duration::from_secs(30);
/// Longest backoff between retries (never more than [`MAX_HIDE`]: a backoff always hides).
pub const BACKOFF_CAP: Duration = MAX_HIDE;
/// A spread wake-up lands at least this long before the window closes, leaving room for a hop
/// or a backoff inside the window.
pub const SPREAD_MARGIN: Duration = MAX_HIDE;
/// From this receive on, a wait is spent as a new message ([`QueueAction::Requeue`]) instead of on
/// this one. SQS counts every receive against the redrive policy's `maxReceiveCount` (template:
/// 20), and a job that is only waiting — for a token behind a backlog deeper than the rate, a
/// ledger down for hours — must never walk into the dead-letter queue for it. Half the
/// template's count, so any redrive above it leaves room for real failures to be counted.
pub const REQUEUE_AFTER_RECEIVES: u32 = 10;

/// What the queue adapter does with the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueAction {
    /// Delete it: the ledger holds the result.
    Delete,
    /// Hide it for this long (a short wait: a window or a token due soon, a claim in flight).
    Hide(Duration),
    /// Hide it for this long after a transient failure.
    Backoff(Duration),
    /// Take it off the queue; a one-time schedule named by the notice key puts the body back at
    /// `at`. Deleted only once the schedule exists.
    Park { at: DateTime<Utc> },
    /// Send the job's body again as a new message delayed this long (at most 15 minutes), and
    /// delete this one once SQS took it (kept, hidden this long, if the send fails). A new
    /// message starts its receive count anew; a crash between the two leaves two copies, which the
    /// ledger (or the next park) folds into one.
    Requeue(Duration),
    /// Fail it to the dead-letter queue: it cannot succeed as it is.
    DeadLetter,
}

impl QueueAction {
    /// Whether the message leaves the queue for good (deleted or dead-lettered) — parking aside.
    pub fn is_final(&self) -> bool {
        matches!(self, QueueAction::Delete | QueueAction::DeadLetter)
    }

    /// Short name for logs and the model check's traces.
    pub fn label(&self) -> &'static str {
        match self {
            QueueAction::Delete => "delete",
            QueueAction::Hide(_) => "hide",
            QueueAction::Backoff(_) => "back off",
            QueueAction::Park { .. } => "park",
            QueueAction::Requeue(_) => "requeue",
            QueueAction::DeadLetter => "dead-letter",
        }
    }
}

/// One receive of a message, as the policy needs to know it.
#[derive(Clone, Copy, Debug)]
pub struct Receive<'a> {
    /// The job's notice key, when it was valid (it picks the park spread's offset).
    pub key: Option<&'a NoticeKey>,
    /// SQS `ApproximateReceiveCount` (1 on the first receive).
    pub count: u32,
    pub now: DateTime<Utc>,
    /// In `[0, 1]`: spreads backoffs so the retries of one burst do not come back together.
    pub jitter: f64,
}

/// How a deployment waits: whether long waits can park, and how wake-ups are spread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueuePolicy {
    /// A parker is configured (EventBridge Scheduler).
    pub parking: bool,
    /// `NOTICE_PARK_SPREAD_SECS`: wake-ups of notices whose windows open together are spread over
    /// this span (the key picks the offset), so a fixed billing day does not wake a whole cohort
    /// in one second.
    pub park_spread: Duration,
}

impl QueuePolicy {
    /// Parks long waits, no spread.
    pub fn parking() -> Self {
        Self { parking: true, park_spread: Duration::ZERO }
    }

    /// The queue action for `outcome` on this receive. Exhaustive: every outcome has one.
    pub fn action(&self, outcome: &Outcome, receive: &Receive<'_>) -> QueueAction {
        requeue_late(self.wait_action(outcome, receive), receive)
    }

    /// The queue action for `outcome` of a job worked once at `now` outside the queue's
    /// receives — what `noticectl send` and `enqueue` ask of a job they run or judge themselves:
    /// the action of its first receive, unspread (it is never carried out, only read: whether the
    /// job would wait, park, back off or be dead-lettered).
    pub fn action_once(&self, outcome: &Outcome, now: DateTime<Utc>) -> QueueAction {
        self.action(outcome, &Receive { key: None, count: 1, now, jitter: 0.0 })
    }

    /// [`QueuePolicy::action`] before [`REQUEUE_AFTER_RECEIVES`] applies.
    fn wait_action(&self, outcome: &Outcome, receive: &Receive<'_>) -> QueueAction {
        match outcome {
            Outcome::Sent { .. }
            | Outcome::Suppressed { .. }
            | Outcome::Missed { .. }
            | Outcome::Quarantined { .. }
            | Outcome::Rejected { .. }
            | Outcome::ShadowSent { .. }
            | Outcome::Withdrawn { .. }
            | Outcome::WithdrawTooLate { .. }
            | Outcome::WithdrawNotNeeded { .. } => QueueAction::Delete,
            Outcome::Deferred { until, closes_at } => {
                self.wait(until_now(*until, receive.now), *until, Some(*closes_at), receive)
            }
            Outcome::RateLimited { until } => {
                // Limited again on a later receive: back off like a retry — never sooner than the
                // token — so a backlog far deeper than the burst drains at the domain's pace
                // instead of hopping through the queue's receives in minutes.
                let due = until_now(*until, receive.now);
                let wait = if receive.count >= 2 {
                    due.max(backoff(receive.count - 1, receive.jitter))
                } else {
                    due
                };
                let at = receive.now + TimeDelta::from_std(wait).unwrap_or(TimeDelta::MAX);
                self.wait(wait, at, None, receive)
            }
            // A withdraw's wait is never parked: parked jobs are named by the notice key, and a
            // withdraw parked there would find its own notice's parked job ("already parked") and
            // be acked unanswered. It hides for at most 15 minutes and waits again while the claim
            // may still be in flight.
            Outcome::InFlight { until, withdraw: true } => {
                QueueAction::Hide(until_now(*until, receive.now).min(MAX_HIDE))
            }
            Outcome::InFlight { until, withdraw: false } => {
                self.wait(until_now(*until, receive.now), *until, None, receive)
            }
            Outcome::Released { .. } | Outcome::LedgerUnavailable(_) | Outcome::NoTimeLeft => {
                QueueAction::Backoff(backoff(receive.count, receive.jitter))
            }
            Outcome::Invalid(_) | Outcome::PayloadConflict { .. } | Outcome::RenderFailed(_) => {
                QueueAction::DeadLetter
            }
        }
    }

    /// A park whose result is uncertain (a schedule by the key is firing, nowhere to send the
    /// job back to): the message stays on the queue and backs off.
    pub fn park_failed(&self, receive: &Receive<'_>) -> QueueAction {
        requeue_late(QueueAction::Backoff(backoff(receive.count, receive.jitter)), receive)
    }

    /// A park Scheduler refused: how long the job's new message is delayed (SQS `DelaySeconds`,
    /// at most 15 minutes) before it tries to park again. Spread over the upper half of
    /// [`MAX_HIDE`] by the jitter, so the refusals of one burst do not come back together; a
    /// park is only ever asked for a wait longer than this, so the retry is never late.
    pub fn park_refused(&self, receive: &Receive<'_>) -> Duration {
        upper_half(MAX_HIDE, receive.jitter)
    }

    /// Waits `wait` (until `due`): hidden when short, parked when long.
    fn wait(
        &self,
        wait: Duration,
        due: DateTime<Utc>,
        closes_at: Option<DateTime<Utc>>,
        receive: &Receive<'_>,
    ) -> QueueAction {
        if wait <= MAX_HIDE {
            return QueueAction::Hide(wait);
        }
        if !self.parking {
            return QueueAction::Hide(wait.min(MAX_VISIBILITY));
        }
        QueueAction::Park { at: self.park_time(due, closes_at, receive.key) }
    }

    /// When a job due at `due` wakes: rounded up to the minute (Scheduler names whole seconds; a
    /// minute boundary at or after the due time never fires early), plus the key's offset within
    /// the spread. The offset is clamped so the wake stays [`SPREAD_MARGIN`] inside the window's
    /// close, and it depends only on the key and the window, so every redelivery of one notice
    /// parks at the same instant.
    pub fn park_time(
        &self,
        due: DateTime<Utc>,
        closes_at: Option<DateTime<Utc>>,
        key: Option<&NoticeKey>,
    ) -> DateTime<Utc> {
        let base = round_up_to_minute(due);
        let Some(key) = key else { return base };
        let mut room = self.park_spread.as_secs();
        if let Some(closes_at) = closes_at {
            let latest = closes_at - TimeDelta::from_std(SPREAD_MARGIN).unwrap_or(TimeDelta::zero());
            room = room.min((latest - base).num_seconds().max(0) as u64);
        }
        if room == 0 {
            return base;
        }
        let offset = key_offset(key) % room;
        base + TimeDelta::seconds(offset as i64)
    }
}

/// A wait on the [`REQUEUE_AFTER_RECEIVES`]th receive or later becomes a new message.
fn requeue_late(action: QueueAction, receive: &Receive<'_>) -> QueueAction {
    match action {
        QueueAction::Hide(wait) | QueueAction::Backoff(wait) if receive.count >= REQUEUE_AFTER_RECEIVES => {
            QueueAction::Requeue(wait.min(MAX_HIDE))
        }
        other => other,
    }
}

/// A stable number from the key: the key is an HMAC, so offsets are uniform.
fn key_offset(key: &NoticeKey) -> u64 {
    key.seed(0)
}

fn until_now(until: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (until - now).to_std().unwrap_or(Duration::ZERO)
}

fn round_up_to_minute(at: DateTime<Utc>) -> DateTime<Utc> {
    let minute = TimeDelta::minutes(1);
    match at.duration_trunc(minute) {
        Ok(floor) if floor == at => at,
        Ok(floor) => floor + minute,
        Err(_) => at,
    }
}

/// Backoff before receive `receive_count + 1`: `BACKOFF_BASE × 2^(receive_count − 1)`, capped at
/// [`BACKOFF_CAP`], and spread over its upper half by `jitter` in `[0, 1]` so the retries of one
/// burst do not come back together.
pub fn backoff(receive_count: u32, jitter: f64) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1u32 << receive_count.saturating_sub(1).min(10)).min(BACKOFF_CAP);
    upper_half(exp, jitter)
}

/// A point in the upper half of `span`, picked by `jitter` in `[0, 1]`: retries of one burst
/// spread out, yet none comes back sooner than half the span.
fn upper_half(span: Duration, jitter: f64) -> Duration {
    let half = span / 2;
    half + half.mul_f64(jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests;
