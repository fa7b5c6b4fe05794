//! The parking port: take a job that must wait longer than the queue should hide it (more than
//! 15 minutes: a window opening later, a token due later) off the queue, and put its own body back
//! on the queue at its time.
//!
//! A queue keeps a message 14 days at most (and dead-letters it after `maxReceiveCount` receives),
//! so a job enqueued weeks ahead cannot wait there. Parking is not a ledger step: it writes no row
//! and sends nothing, so the job arrives in its window as an ordinary producer message and every
//! copy of it is still caught by the ledger. The queue decides when to park, reads a parker's
//! answer, and says why each crash around a park is safe.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::Fault;
use crate::identity::NoticeKey;
use crate::job::Job;
use crate::locale::Cldr;

/// One job to park.
#[derive(Clone, Copy, Debug)]
pub struct ParkRequest<'a> {
    /// Names the parked job: one parking per notice, however often the job is delivered.
    pub key: &'a NoticeKey,
    /// When the job goes back on the queue (the queue policy's park time).
    pub at: DateTime<Utc>,
    /// The job's own body, unchanged.
    pub body: &'a str,
    /// The queue the job came from, and goes back to.
    pub queue_arn: &'a str,
    /// The replay batch the message carried, kept on the message that comes back.
    pub replay_batch: Option<&'a str>,
}

/// What a park did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parked {
    /// A new parking was made.
    Scheduled,
    /// The notice was already parked; `body` is the parked job's body and `at` its wake-up, when
    /// they could be read.
    AlreadyParked { body: Option<String>, at: Option<DateTime<Utc>> },
}

/// Why a park may not have happened — the message stays on the queue either way; the reason
/// tells an operator which quota to raise (`ParkingRefused` by `Reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParkRefusal {
    /// A service quota is used up (Scheduler's live schedules per Region, or its request rate
    /// quota): raise it (docs/deploy.md, *Capacity*).
    Quota,
    /// The request was throttled.
    Throttled,
    /// Anything else: unreachable, a server error, a request that could not be built.
    Unavailable,
}

impl ParkRefusal {
    /// The metric dimension value.
    pub fn as_str(self) -> &'static str {
        match self {
            ParkRefusal::Quota => "quota",
            ParkRefusal::Throttled => "throttled",
            ParkRefusal::Unavailable => "unavailable",
        }
    }
}

/// A park that may not have happened: the message must stay on the queue. `reason` is what the
/// queue policy and the `ParkingRefused` metric go by; `service` and `fault` say which parker and
/// why, as its adapter read them from the typed error (an operator's tool words its line by them).
#[derive(Debug, thiserror::Error)]
#[error("parking refused ({}): {detail}", reason.as_str())]
pub struct ParkError {
    pub reason: ParkRefusal,
    pub service: &'static str,
    pub fault: Fault,
    pub detail: String,
}

/// The service a park failure is put down to when the parker does not name one.
pub const UNNAMED_PARKER: &str = "parker";

impl ParkError {
    /// A refusal for `reason`, with the fault it implies (throttled, or not typed further).
    pub fn refused(reason: ParkRefusal, detail: impl Into<String>) -> Self {
        let fault = if reason == ParkRefusal::Throttled { Fault::Throttled } else { Fault::Other };
        Self { reason, service: UNNAMED_PARKER, fault, detail: detail.into() }
    }

    /// A parker that could not be used, for no reason typed further.
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::refused(ParkRefusal::Unavailable, detail)
    }

    /// The same failure put down to `service` for the typed reason `fault`.
    pub fn in_service(mut self, service: &'static str, fault: Fault) -> Self {
        self.service = service;
        self.fault = fault;
        self
    }
}

/// Where far-future jobs wait (EventBridge Scheduler in production).
#[async_trait]
pub trait Parker: Send + Sync {
    async fn park(&self, req: &ParkRequest<'_>) -> Result<Parked, ParkError>;

    /// Deletes the parking named by `key`, if any (the notice was withdrawn: its job need not come
    /// back). `Ok(false)`: there was none. Only tidiness — a parked job that still fires is
    /// suppressed by the ledger's tombstone.
    async fn unpark(&self, key: &NoticeKey) -> Result<bool, ParkError>;
}

/// Whether an existing parking holds this job or a different one under the same key — a producer
/// that changed a notice without bumping `revision`, which the ledger would call a payload
/// conflict once the window opens. An unreadable parked body counts as the same job: the ledger
/// still checks it when it arrives.
pub fn parked_conflicts(job: &Job, parked_body: Option<&str>, cldr: &dyn Cldr) -> bool {
    match parked_body.map(|body| Job::parse(body, cldr)) {
        Some(Ok(parked)) => parked.content_digest() != job.content_digest(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locale::SimpleTags;

    const BODY: &str = r#"{"subscription_id":"s","period_start":"2026-10-01","kind":"k",
        "email":"a@example.com","charge_at":"2026-10-31T09:00:00Z"}"#;

    #[test]
    fn same_content_is_no_conflict_changed_content_is() {
        let job = Job::parse(BODY, &SimpleTags).unwrap();
        assert!(!parked_conflicts(&job, Some(BODY), &SimpleTags));
        assert!(!parked_conflicts(&job, None, &SimpleTags));
        assert!(!parked_conflicts(&job, Some("not json"), &SimpleTags));
        let changed = BODY.replace("a@example.com", "b@example.com");
        assert!(parked_conflicts(&job, Some(&changed), &SimpleTags));
    }
}
