//! The one executor of queue actions, against a scripted message and parker that fail on demand:
//! an ack only when the job is done or held elsewhere, every failure keeps the message, hides are
//! clamped to what is left of the receipt's 12 hours, and a withdraw unparks.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use notice_ledger::mailer::NotAccepted;
use notice_ledger::metrics::Metrics;
use notice_ledger::park::{ParkError, ParkRefusal, ParkRequest, Parked, Parker};
use notice_ledger::queue::{
    hide_limit, Disposition, Executor, QueueError, QueuedMessage, MAX_VISIBILITY, RECEIPT_MARGIN,
};
use notice_ledger::{
    Delivery, Fault, InvalidJob, Job, NoticeKey, NoticeSecret, Outcome, QueueAction, QueuePolicy, Receive,
};

const BODY: &str = r#"{"subscription_id":"s","period_start":"2026-10-01","kind":"k",
    "email":"a@example.com","charge_at":"2026-10-31T09:00:00Z"}"#;

fn now() -> DateTime<Utc> {
    "2026-10-01T00:00:00Z".parse().unwrap()
}

fn key() -> NoticeKey {
    Job::parse(BODY, &notice_texts::Icu).unwrap().key(&NoticeSecret::new("executor-test").unwrap())
}

/// A message that records every call and fails the ones it is told to.
#[derive(Default)]
struct Message {
    calls: Mutex<Vec<String>>,
    fail_hide: bool,
    fail_requeue: bool,
    fail_dead_letter: bool,
    no_queue: bool,
    received_ago: Duration,
}

impl Message {
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn call(&self, c: String, fail: bool) -> Result<(), QueueError> {
        self.calls.lock().unwrap().push(c);
        if fail {
            Err(QueueError::new(
                "scripted queue",
                Fault::Unreachable("connection refused"),
                "scripted failure",
            ))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl QueuedMessage for Message {
    fn body(&self) -> &str {
        BODY
    }
    fn queue_arn(&self) -> Option<&str> {
        (!self.no_queue).then_some("arn:aws:sqs:us-east-1:123456789012:reminders")
    }
    fn replay_batch(&self) -> Option<&str> {
        None
    }
    fn received_at(&self) -> DateTime<Utc> {
        now() - TimeDelta::from_std(self.received_ago).unwrap()
    }
    async fn hide(&self, wait: Duration) -> Result<(), QueueError> {
        self.call(format!("hide {}", wait.as_secs()), self.fail_hide)
    }
    async fn requeue(&self, delay: Duration) -> Result<(), QueueError> {
        self.call(format!("requeue {}", delay.as_secs()), self.fail_requeue)
    }
    async fn dead_letter(&self, reason: &str) -> Result<(), QueueError> {
        self.call(format!("dead-letter {reason}"), self.fail_dead_letter)
    }
}

/// A parker with one scripted answer, recording unparks.
struct Scripted {
    answer: fn() -> Result<Parked, ParkError>,
    unparked: Mutex<Vec<String>>,
}

impl Scripted {
    fn new(answer: fn() -> Result<Parked, ParkError>) -> Self {
        Self { answer, unparked: Mutex::default() }
    }
}

#[async_trait]
impl Parker for Scripted {
    async fn park(&self, _: &ParkRequest<'_>) -> Result<Parked, ParkError> {
        (self.answer)()
    }
    async fn unpark(&self, key: &NoticeKey) -> Result<bool, ParkError> {
        self.unparked.lock().unwrap().push(key.as_str().to_owned());
        Ok(true)
    }
}

async fn carry(
    message: &Message,
    parker: Option<&Scripted>,
    outcome: Outcome,
    count: u32,
) -> (notice_ledger::queue::Carried, Metrics) {
    let metrics = Metrics::default();
    let policy = QueuePolicy { parking: parker.is_some(), park_spread: Duration::ZERO };
    let executor = Executor {
        policy: &policy,
        parker: parker.map(|p| p as &dyn Parker),
        metrics: &metrics,
        cldr: &notice_texts::Icu,
    };
    let key = key();
    let delivery = Delivery { key: Some(key.clone()), outcome };
    let receive = Receive { key: Some(&key), count, now: now(), jitter: 0.5 };
    let carried = executor.carry_out(message, &delivery, &receive).await;
    (carried, metrics)
}

fn deferred(days: i64) -> Outcome {
    Outcome::Deferred { until: now() + TimeDelta::days(days), closes_at: now() + TimeDelta::days(days + 2) }
}

#[tokio::test]
async fn a_decided_job_is_acked_without_a_call() {
    let m = Message::default();
    let (c, _) = carry(&m, None, Outcome::Sent { message_id: "m".into() }, 1).await;
    assert_eq!((c.action, c.disposition), (QueueAction::Delete, Disposition::Ack));
    assert!(m.calls().is_empty());
}

#[tokio::test]
async fn a_short_wait_hides_and_keeps_even_when_the_hide_fails() {
    for fail_hide in [false, true] {
        let m = Message { fail_hide, ..Message::default() };
        let until = now() + TimeDelta::minutes(5);
        let (c, _) = carry(&m, None, Outcome::InFlight { until, withdraw: false }, 1).await;
        assert_eq!(c.disposition, Disposition::Keep, "the message comes back either way");
        assert_eq!(m.calls(), ["hide 300"]);
    }
}

#[tokio::test]
async fn without_a_parker_a_long_wait_hides_for_what_is_left_of_the_receipts_twelve_hours() {
    let m = Message { received_ago: Duration::from_secs(3600), ..Message::default() };
    let (c, _) = carry(&m, None, deferred(5), 1).await;
    assert_eq!(c.disposition, Disposition::Keep);
    let limit = MAX_VISIBILITY - RECEIPT_MARGIN - Duration::from_secs(3600);
    assert_eq!(m.calls(), [format!("hide {}", limit.as_secs())], "never the 43 200 s SQS refuses");
    assert_eq!(hide_limit(now(), now()), MAX_VISIBILITY - RECEIPT_MARGIN);
    assert_eq!(hide_limit(now() - TimeDelta::hours(13), now()), Duration::ZERO);
}

#[tokio::test]
async fn a_requeue_acks_only_once_the_new_message_exists() {
    let late_receive = 12;
    let backoff = Outcome::LedgerUnavailable("down".into());
    let m = Message::default();
    let (c, metrics) = carry(&m, None, backoff.clone(), late_receive).await;
    assert!(matches!(c.action, QueueAction::Requeue(_)), "{c:?}");
    assert_eq!(c.disposition, Disposition::Ack);
    assert_eq!(metrics.drain().requeued, 1);

    let m = Message { fail_requeue: true, ..Message::default() };
    let (c, metrics) = carry(&m, None, backoff, late_receive).await;
    assert_eq!(c.disposition, Disposition::Keep, "no new message: this one stays");
    let calls = m.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[0].starts_with("requeue ") && calls[1].starts_with("hide "), "{calls:?}");
    assert_eq!(calls[0][8..], calls[1][5..], "hidden for the requeue's own delay");
    assert_eq!(metrics.drain().requeued, 0);
}

#[tokio::test]
async fn a_job_that_cannot_succeed_is_dead_lettered_with_its_reason_or_kept_for_the_redrive() {
    let invalid = Outcome::Invalid(InvalidJob::new("kind", "names an unknown kind \"x\""));
    let m = Message::default();
    let (c, _) = carry(&m, None, invalid.clone(), 1).await;
    assert_eq!(c.disposition, Disposition::Ack);
    assert_eq!(m.calls(), ["dead-letter invalid job: field `kind` names an unknown kind \"x\""]);
    let m = Message { fail_dead_letter: true, ..Message::default() };
    let (c, _) = carry(&m, None, invalid, 1).await;
    assert_eq!(c.disposition, Disposition::Keep, "the redrive policy moves it in the end");
}

#[tokio::test]
async fn a_park_acks_only_when_a_schedule_holds_the_job() {
    let parker = Scripted::new(|| Ok(Parked::Scheduled));
    let m = Message::default();
    let (c, metrics) = carry(&m, Some(&parker), deferred(5), 1).await;
    assert_eq!((c.disposition, c.refused), (Disposition::Ack, None));
    assert!(m.calls().is_empty());
    assert_eq!(metrics.drain().parked, 1);

    // Nowhere to send the job back to: kept, with the policy's back-off.
    let m = Message { no_queue: true, ..Message::default() };
    let (c, _) = carry(&m, Some(&parker), deferred(5), 1).await;
    assert_eq!(c.disposition, Disposition::Keep);
    assert_eq!(m.calls().len(), 1);
    assert!(m.calls()[0].starts_with("hide "));

    // Parked already with other content: a payload conflict, dead-lettered.
    let other = || {
        let body = BODY.replace("a@example.com", "b@example.com");
        Ok(Parked::AlreadyParked { body: Some(body), at: Some(now() + TimeDelta::days(5)) })
    };
    let parker = Scripted::new(other);
    let m = Message::default();
    let (c, metrics) = carry(&m, Some(&parker), deferred(5), 1).await;
    assert_eq!(c.disposition, Disposition::Ack);
    assert!(m.calls()[0].starts_with("dead-letter payload conflict"), "{:?}", m.calls());
    assert_eq!(metrics.drain().payload_conflicts, 1);
}

#[tokio::test]
async fn a_refused_park_requeues_reports_its_reason_and_keeps_the_message_when_that_fails() {
    let parker = Scripted::new(|| Err(ParkError::refused(ParkRefusal::Quota, "full")));
    let m = Message::default();
    let (c, metrics) = carry(&m, Some(&parker), deferred(5), 1).await;
    assert_eq!((c.disposition, c.refused), (Disposition::Ack, Some(ParkRefusal::Quota)));
    assert_eq!(m.calls(), ["requeue 675"], "delayed 7.5 to 15 minutes by the jitter");
    assert_eq!(metrics.drain().requeued, 1);

    let m = Message { fail_requeue: true, ..Message::default() };
    let (c, _) = carry(&m, Some(&parker), deferred(5), 1).await;
    assert_eq!((c.disposition, c.refused), (Disposition::Keep, Some(ParkRefusal::Quota)));
    let calls = m.calls();
    assert_eq!(calls[0], "requeue 675");
    assert!(calls[1].starts_with("hide "), "backed off on this message: {calls:?}");
}

#[tokio::test]
async fn a_withdraw_unparks_its_notice_and_never_parks_its_own_wait() {
    let parker = Scripted::new(|| Ok(Parked::Scheduled));
    let m = Message::default();
    let (c, _) = carry(&m, Some(&parker), Outcome::Withdrawn { already: false }, 1).await;
    assert_eq!(c.disposition, Disposition::Ack);
    assert_eq!(*parker.unparked.lock().unwrap(), [key().as_str().to_owned()]);

    let long = Outcome::InFlight { until: now() + TimeDelta::hours(2), withdraw: true };
    let m = Message::default();
    let (c, metrics) = carry(&m, Some(&parker), long, 1).await;
    assert_eq!((c.action, c.disposition), (QueueAction::Hide(Duration::from_secs(900)), Disposition::Keep));
    assert_eq!(metrics.drain().parked, 0, "hidden 15 minutes, not parked");
    let released = Outcome::Released { class: NotAccepted::Throttled, reason: "slow down".into() };
    let (c, _) = carry(&Message::default(), Some(&parker), released, 1).await;
    assert!(matches!(c.action, QueueAction::Backoff(_)));
}
