//! Reading a parker's answer: whether the message may be acked, must be requeued or kept. One
//! reading, so the sender Lambda, `noticectl` and the capacity model cannot drift apart on when a
//! parked message may leave the queue.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{QueueAction, QueuePolicy, Receive};
use crate::job::Job;
use crate::locale::Cldr;
use crate::park::{parked_conflicts, ParkError, ParkRequest, Parked, Parker};

/// What the queue does once a park was asked for: the one reading of a [`Parker`]'s answer.
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
    cldr: &dyn Cldr,
) -> Settled {
    match parker.park(request).await {
        Ok(Parked::Scheduled) => Settled::Parked,
        Ok(Parked::AlreadyParked { body, at }) => {
            if Job::parse(request.body, cldr).is_ok_and(|job| parked_conflicts(&job, body.as_deref(), cldr)) {
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
    use async_trait::async_trait;

    use super::*;
    use crate::identity::NoticeKey;
    use crate::locale::SimpleTags;
    use crate::park::ParkRefusal;

    const BODY: &str = r#"{"subscription_id":"s","period_start":"2026-10-01","kind":"k",
        "email":"a@example.com","charge_at":"2026-10-31T09:00:00Z"}"#;

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
        let key = Job::parse(BODY, &SimpleTags).unwrap().key(&secret);
        let request = ParkRequest { key: &key, at: now(), body: BODY, queue_arn: "arn", replay_batch: None };
        let receive = Receive { key: Some(&key), count, now: now(), jitter };
        settle(&Scripted(answer), &QueuePolicy::parking(), &request, &receive, &SimpleTags).await
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
            || Err(ParkError::refused(ParkRefusal::Quota, "live schedules")),
            || Err(ParkError::refused(ParkRefusal::Throttled, "CreateSchedule/s")),
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
