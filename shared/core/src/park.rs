//! The parking port: take a job that must wait longer than the queue should hide it (more than
//! 15 minutes: a window opening later, a token due later) off the queue, and put its own body back
//! on the queue at its time.
//!
//! A queue keeps a message 14 days at most (and dead-letters it after `maxReceiveCount` receives),
//! so a job enqueued weeks ahead cannot wait there. Parking is not a ledger step: it writes no row
//! and sends nothing, so the job arrives in its window as an ordinary producer message and every
//! copy of it is still caught by the ledger. [`crate::queue`] decides when to park, and why each
//! crash around a park is safe.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::identity::NoticeKey;
use crate::job::Job;
use crate::queue::{QueueAction, QueuePolicy, Receive};

/// One job to park.
#[derive(Clone, Copy, Debug)]
pub struct ParkRequest<'a> {
    /// Names the parked job: one parking per notice, however often the job is delivered.
    pub key: &'a NoticeKey,
    /// When the job goes back on the queue ([`crate::queue::QueuePolicy::park_time`]).
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

/// A park that may not have happened: the message must stay on the queue.
#[derive(Debug, thiserror::Error)]
#[error("parking refused ({}): {detail}", reason.as_str())]
pub struct ParkError {
    pub reason: ParkRefusal,
    pub detail: String,
}

impl ParkError {
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self { reason: ParkRefusal::Unavailable, detail: detail.into() }
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
pub fn parked_conflicts(job: &Job, parked_body: Option<&str>) -> bool {
    match parked_body.map(Job::parse) {
        Some(Ok(parked)) => parked.content_digest() != job.content_digest(),
        _ => false,
    }
}

/// What the queue does once a park was asked for: the one reading of a [`Parker`]'s answer, so
/// the sender Lambda and the capacity model cannot drift apart on when a message may be acked.
#[derive(Debug)]
pub enum Settled {
    /// A new schedule holds the job: ack the message.
    Parked,
    /// A schedule by the key holds this same job and fires later, bringing it back: ack.
    AlreadyParked { fires: DateTime<Utc> },
    /// The key is parked with different content: dead-letter (the producer must bump `revision`).
    Conflict,
    /// Scheduler refused: send the job's body again as a new message delayed `delay`, and ack
    /// this one only once that send succeeded ([`QueuePolicy::park_refused`]).
    Requeue { delay: Duration, error: ParkError },
    /// Uncertain — a schedule by the key whose time has come may be what delivered this very
    /// message (it deletes itself only afterwards), one whose time cannot be read may be gone:
    /// acking could leave the job nowhere, so keep the message with `action`.
    Keep { why: &'static str, action: QueueAction },
}

/// Parks `request` and reads the answer (see [`Settled`]).
pub async fn settle(
    parker: &dyn Parker,
    policy: &QueuePolicy,
    request: &ParkRequest<'_>,
    receive: &Receive<'_>,
) -> Settled {
    match parker.park(request).await {
        Ok(Parked::Scheduled) => Settled::Parked,
        Ok(Parked::AlreadyParked { body, at }) => {
            if Job::parse(request.body).is_ok_and(|job| parked_conflicts(&job, body.as_deref())) {
                return Settled::Conflict;
            }
            let why = match at {
                Some(fires) if fires > receive.now => return Settled::AlreadyParked { fires },
                Some(_) => "a schedule by this key is firing or has fired",
                None => "a schedule by this key exists but its time cannot be read",
            };
            Settled::Keep { why, action: policy.park_failed(receive) }
        }
        Err(error) => Settled::Requeue { delay: policy.park_refused(receive), error },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{"subscription_id":"s","period_start":"2026-10-01","kind":"k",
        "email":"a@example.com","charge_at":"2026-10-31T09:00:00Z"}"#;

    #[test]
    fn same_content_is_no_conflict_changed_content_is() {
        let job = Job::parse(BODY).unwrap();
        assert!(!parked_conflicts(&job, Some(BODY)));
        assert!(!parked_conflicts(&job, None));
        assert!(!parked_conflicts(&job, Some("not json")));
        let changed = BODY.replace("a@example.com", "b@example.com");
        assert!(parked_conflicts(&job, Some(&changed)));
    }

    /// A parker that gives one scripted answer.
    struct Scripted(fn() -> Result<Parked, ParkError>);

    #[async_trait]
    impl Parker for Scripted {
        async fn park(&self, _: &ParkRequest<'_>) -> Result<Parked, ParkError> {
            (self.0)()
        }
        async fn unpark(&self, _: &NoticeKey) -> Result<bool, ParkError> {
            Ok(false)
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-10-01T00:00:00Z").unwrap().with_timezone(&Utc)
    }

    async fn settled(answer: fn() -> Result<Parked, ParkError>, jitter: f64) -> Settled {
        settled_on(answer, jitter, 19).await
    }

    async fn settled_on(answer: fn() -> Result<Parked, ParkError>, jitter: f64, count: u32) -> Settled {
        let secret = crate::identity::NoticeSecret::new("park-settle-test-secret").unwrap();
        let key = Job::parse(BODY).unwrap().key(&secret);
        let request = ParkRequest { key: &key, at: now(), body: BODY, queue_arn: "arn", replay_batch: None };
        let receive = Receive { key: Some(&key), count, now: now(), jitter };
        settle(&Scripted(answer), &QueuePolicy::parking(), &request, &receive).await
    }

    #[tokio::test]
    async fn only_a_live_schedule_holding_this_job_acks_the_message() {
        assert!(matches!(settled(|| Ok(Parked::Scheduled), 0.5).await, Settled::Parked));
        let later = || {
            Ok(Parked::AlreadyParked {
                body: Some(BODY.into()),
                at: Some(now() + chrono::TimeDelta::hours(1)),
            })
        };
        assert!(matches!(settled(later, 0.5).await, Settled::AlreadyParked { .. }));
        let unreadable_body =
            || Ok(Parked::AlreadyParked { body: None, at: Some(now() + chrono::TimeDelta::hours(1)) });
        assert!(matches!(settled(unreadable_body, 0.5).await, Settled::AlreadyParked { .. }));
        let changed = || {
            let body = BODY.replace("a@example.com", "b@example.com");
            Ok(Parked::AlreadyParked { body: Some(body), at: Some(now() + chrono::TimeDelta::hours(1)) })
        };
        assert!(matches!(settled(changed, 0.5).await, Settled::Conflict));
        let firing = || Ok(Parked::AlreadyParked { body: Some(BODY.into()), at: Some(now()) });
        let no_time = || Ok(Parked::AlreadyParked { body: Some(BODY.into()), at: None });
        for uncertain in [firing, no_time] {
            match settled_on(uncertain, 0.5, 3).await {
                Settled::Keep { action: QueueAction::Backoff(_), .. } => {}
                other => panic!("an uncertain schedule keeps the message: {other:?}"),
            }
            match settled_on(uncertain, 0.5, 19).await {
                Settled::Keep { action: QueueAction::Requeue(_), .. } => {}
                other => panic!("from the tenth receive on, it waits as a new message: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_refusal_of_any_kind_requeues_within_sqs_delay_limit_however_many_receives() {
        let refusals: [fn() -> Result<Parked, ParkError>; 3] = [
            || Err(ParkError { reason: ParkRefusal::Quota, detail: "live schedules".into() }),
            || Err(ParkError { reason: ParkRefusal::Throttled, detail: "CreateSchedule/s".into() }),
            || Err(ParkError::unavailable("down")),
        ];
        for refusal in refusals {
            let mut delays = Vec::new();
            for jitter in [0.0, 0.5, 1.0] {
                match settled(refusal, jitter).await {
                    Settled::Requeue { delay, .. } => delays.push(delay.as_secs()),
                    other => panic!("a refused park requeues: {other:?}"),
                }
            }
            assert_eq!(delays, [450, 675, 900], "spread over the upper half of 15 minutes, never more");
        }
    }
}
