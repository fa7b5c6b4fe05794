//! Withdraws on the default send path (rate gate on, SQLite ledger file, recording mailer): a
//! tombstone before the job, after it, twice, against a claim in flight, against a missed notice,
//! racing the job — and with the ledger down.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use notice_ledger::ledger::{ClaimLedger, ClaimOutcome, ClaimRequest, RowReader, RowState};
use notice_ledger::links::ManageLinks;
use notice_ledger::mailer::NotAccepted;
use notice_ledger::rate::{BucketGate, BucketStore, RateLimits};
use notice_ledger::DeliverContext;
use notice_ledger::{
    Job, NoticeSecret, NoticeSender, Outcome, QueueAction, QueuePolicy, Receive, SendBudget, WindowPolicy,
};
use notice_sqlite::SqliteLedger;
use notice_testkit::faults::{FaultyLedger, FaultyMailer, LedgerFault, MailFault, RecordingMailer};
use notice_texts::Renderer;

const SECRET: &str = "withdraw-path-secret";

fn job(sub: &str) -> String {
    serde_json::json!({"subscription_id": sub, "period_start": "2026-10-01", "kind": "renewal_notice_t72",
        "email": format!("{sub}@example.com"), "charge_at": "2026-10-04T09:00:00Z"})
    .to_string()
}

fn withdraw(sub: &str) -> String {
    serde_json::json!({"action": "withdraw", "subscription_id": sub, "period_start": "2026-10-01",
        "kind": "renewal_notice_t72", "reason": "subscription cancelled"})
    .to_string()
}

fn now() -> DateTime<Utc> {
    "2026-10-02T00:00:00Z".parse().unwrap()
}

struct World {
    _dir: tempfile::TempDir,
    ledger: Arc<FaultyLedger<SqliteLedger>>,
    buckets: Arc<dyn BucketStore>,
    mailer: Arc<FaultyMailer<RecordingMailer>>,
    sender: Arc<NoticeSender>,
}

/// The sender as shipped: the built-in rate limits, so every job reads the ledger before a token.
fn world(script: Vec<MailFault>) -> World {
    world_with_claim_lifetime(script, SendBudget::default().claim_lifetime)
}

fn world_with_claim_lifetime(script: Vec<MailFault>, claim_lifetime: Duration) -> World {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteLedger::open(dir.path().join("ledger.db")).unwrap();
    let buckets: Arc<dyn BucketStore> = Arc::new(sqlite.buckets());
    let ledger = Arc::new(FaultyLedger::new(sqlite, None));
    let mailer = Arc::new(FaultyMailer::new(RecordingMailer::default(), script));
    let sender = NoticeSender::new(
        ledger.clone(),
        mailer.clone(),
        Arc::new(Renderer::builtin(ManageLinks::new(
            "https://billing.example.com/manage",
            NoticeSecret::new("links").unwrap(),
        ))),
        WindowPolicy::default(),
        NoticeSecret::new(SECRET).unwrap(),
    )
    .with_budget(SendBudget {
        send_timeout: Duration::from_millis(500),
        min_time_left: Duration::from_secs(1),
        claim_lifetime,
    })
    .with_rate_gate(Some(Arc::new(BucketGate::new(buckets.clone(), RateLimits::builtin()))));
    World { _dir: dir, ledger, buckets, mailer, sender: Arc::new(sender) }
}

impl World {
    async fn deliver(&self, body: &str, at: DateTime<Utc>) -> Outcome {
        self.sender.deliver(body, DeliverContext::at(at)).await.outcome
    }

    async fn state(&self, sub: &str) -> Option<RowState> {
        let key = Job::parse(&job(sub), &notice_texts::Icu).unwrap().key(&NoticeSecret::new(SECRET).unwrap());
        self.ledger.inner().get(&key).await.unwrap().map(|r| r.state)
    }

    fn sent(&self) -> usize {
        self.mailer.inner().sent().len()
    }
}

fn queue_action(outcome: &Outcome) -> QueueAction {
    QueuePolicy::parking().action(outcome, &Receive { key: None, count: 1, now: now(), jitter: 0.0 })
}

#[tokio::test]
async fn a_withdraw_before_its_job_suppresses_every_copy_and_spends_no_token() {
    let w = world(vec![]);
    let outcome = w.deliver(&withdraw("early"), now()).await;
    assert_eq!(outcome, Outcome::Withdrawn { already: false });
    assert_eq!(queue_action(&outcome), QueueAction::Delete);
    assert_eq!(w.state("early").await, Some(RowState::Withdrawn));
    // The job, its redelivery, a replay next week, a parked copy waking up: all suppressed.
    for at in [now(), now() + chrono::Duration::hours(1), now() + chrono::Duration::hours(20)] {
        let copy = w.deliver(&job("early"), at).await;
        assert_eq!(copy, Outcome::Suppressed { state: RowState::Withdrawn });
        assert_eq!(queue_action(&copy), QueueAction::Delete);
    }
    // And in a batch: the batch read sees the tombstone; no token is taken for it.
    let body = job("early");
    let prefetched = w.sender.prefetch(&[body.as_str()], now()).await.expect("a batch read");
    assert_eq!(prefetched.planned_tokens(), 0, "no token for a withdrawn key");
    assert_eq!(w.sent(), 0);
    assert_eq!(w.buckets.load("example.com").await.unwrap(), None, "no bucket write at all");
    let m = w.sender.metrics().drain();
    assert_eq!((m.withdrawn, m.withdraw_too_late, m.claims_minted, m.sent), (1, 0, 0, 0));
}

#[tokio::test]
async fn two_withdraws_leave_one_tombstone_and_both_are_acked() {
    let w = world(vec![]);
    assert_eq!(w.deliver(&withdraw("twice"), now()).await, Outcome::Withdrawn { already: false });
    let key = Job::parse(&job("twice"), &notice_texts::Icu).unwrap().key(&NoticeSecret::new(SECRET).unwrap());
    let first = w.ledger.inner().get(&key).await.unwrap();
    let second = w.deliver(&withdraw("twice"), now() + chrono::Duration::minutes(5)).await;
    assert_eq!(second, Outcome::Withdrawn { already: true });
    assert_eq!(queue_action(&second), QueueAction::Delete);
    assert_eq!(w.ledger.inner().get(&key).await.unwrap(), first, "the first tombstone stands");
    assert_eq!(w.sender.metrics().drain().withdrawn, 1, "one tombstone counted");
}

#[tokio::test]
async fn a_withdraw_after_the_send_is_too_late_and_the_row_stays_sent() {
    let w = world(vec![]);
    assert!(matches!(w.deliver(&job("gone"), now()).await, Outcome::Sent { .. }));
    let outcome = w.deliver(&withdraw("gone"), now()).await;
    let Outcome::WithdrawTooLate { state, at } = outcome else { panic!("{outcome:?}") };
    assert_eq!(state, RowState::Sent);
    assert!(at <= Utc::now(), "the time it was sent");
    assert_eq!(queue_action(&outcome), QueueAction::Delete, "acked: the producer is told, not retried");
    assert_eq!(w.state("gone").await, Some(RowState::Sent));
    assert_eq!(w.sent(), 1);
    assert_eq!(w.sender.metrics().drain().withdraw_too_late, 1);
}

#[tokio::test]
async fn a_withdraw_meeting_a_claim_in_flight_waits_and_wins_if_the_claim_is_released() {
    let w = world(vec![]);
    let parsed = Job::parse(&job("racing"), &notice_texts::Icu).unwrap();
    let req = ClaimRequest::for_job(&parsed, parsed.key(&NoticeSecret::new(SECRET).unwrap()), now());
    let ClaimOutcome::Minted(claim) = w.ledger.inner().claim(&req).await.unwrap() else { panic!("minted") };

    let held = w.deliver(&withdraw("racing"), now()).await;
    let Outcome::InFlight { until, .. } = held else { panic!("{held:?}") };
    assert!(
        matches!(queue_action(&held), QueueAction::Hide(_)),
        "not answered while the claimer may release"
    );
    // The claimer's send was throttled: it releases; the withdraw, back later, wins.
    w.ledger.inner().release(&claim, "throttled", now()).await.unwrap();
    assert_eq!(w.deliver(&withdraw("racing"), until).await, Outcome::Withdrawn { already: false });
    // The claimer's own retry now finds the tombstone.
    assert_eq!(w.deliver(&job("racing"), until).await, Outcome::Suppressed { state: RowState::Withdrawn });
    assert_eq!(w.sent(), 0);

    // A claim older than the claim lifetime is quarantined: it may have gone, so too late.
    let stale = Job::parse(&job("stale"), &notice_texts::Icu).unwrap();
    let req = ClaimRequest::for_job(&stale, stale.key(&NoticeSecret::new(SECRET).unwrap()), now());
    assert!(matches!(w.ledger.inner().claim(&req).await.unwrap(), ClaimOutcome::Minted(_)));
    let late = w.deliver(&withdraw("stale"), now() + chrono::Duration::minutes(5)).await;
    assert!(matches!(late, Outcome::WithdrawTooLate { state: RowState::Claimed, .. }), "{late:?}");
}

#[tokio::test]
async fn a_withdraw_for_a_missed_notice_is_not_needed_and_the_ledger_down_is_retried() {
    let w = world(vec![]);
    let after_close = "2026-10-03T12:00:00Z".parse().unwrap();
    assert!(matches!(w.deliver(&job("late"), after_close).await, Outcome::Missed { .. }));
    let outcome = w.deliver(&withdraw("late"), after_close).await;
    assert_eq!(outcome, Outcome::WithdrawNotNeeded { state: RowState::Missed });
    assert_eq!(queue_action(&outcome), QueueAction::Delete);
    assert_eq!(w.state("late").await, Some(RowState::Missed));

    w.ledger.set_fault(Some(LedgerFault::Down));
    let down = w.deliver(&withdraw("down"), now()).await;
    assert!(matches!(down, Outcome::LedgerUnavailable(_)), "{down:?}");
    assert!(matches!(queue_action(&down), QueueAction::Backoff(_)), "never acked unanswered");
    w.ledger.set_fault(None);
    assert_eq!(w.state("down").await, None, "nothing written");
    assert_eq!(w.deliver(&withdraw("down"), now()).await, Outcome::Withdrawn { already: false });
}

/// A withdraw racing its job on two senders over one ledger, many times: each notice is either
/// sent once (and its withdraw answered too late) or withdrawn and never sent — never both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdraw_racing_its_job_is_either_too_late_or_wins_never_both() {
    let w = world((0..64).map(|i| MailFault::Slow(Duration::from_millis(i % 4))).collect());
    let (mut sent, mut withdrawn) = (0, 0);
    for i in 0..32 {
        let sub = format!("race_{i}");
        let (a, b) = (Arc::clone(&w.sender), Arc::clone(&w.sender));
        let (job_body, withdraw_body) = (job(&sub), withdraw(&sub));
        let delay = Duration::from_micros((i % 8) * 300);
        let send = tokio::spawn(async move { a.deliver(&job_body, DeliverContext::at(now())).await.outcome });
        let pull = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            b.deliver(&withdraw_body, DeliverContext::at(now())).await.outcome
        });
        let (send, mut pull) = (send.await.unwrap(), pull.await.unwrap());
        if let Outcome::InFlight { until, .. } = pull {
            pull = w.deliver(&withdraw(&sub), until).await; // back once the claimer is done
        }
        match (&send, &pull) {
            (Outcome::Sent { .. }, Outcome::WithdrawTooLate { state: RowState::Sent, .. }) => sent += 1,
            (Outcome::Suppressed { state: RowState::Withdrawn }, Outcome::Withdrawn { already: false }) => {
                withdrawn += 1
            }
            other => panic!("{sub}: {other:?}"),
        }
    }
    assert_eq!(w.sent(), sent, "one message per notice answered too late, none for the withdrawn");
    assert_eq!(sent + withdrawn, 32);
}

#[tokio::test]
async fn a_withdraw_after_a_not_accepted_send_wins_over_the_retry() {
    let w = world(vec![MailFault::NotAccepted(NotAccepted::Throttled)]);
    assert!(matches!(w.deliver(&job("throttled"), now()).await, Outcome::Released { .. }));
    assert_eq!(w.deliver(&withdraw("throttled"), now()).await, Outcome::Withdrawn { already: false });
    assert_eq!(w.deliver(&job("throttled"), now()).await, Outcome::Suppressed { state: RowState::Withdrawn });
    assert_eq!(w.sent(), 0);
}

/// A withdraw never parks: parked jobs are named by the notice key, so a withdraw parked while its
/// notice's job is parked would be taken for "already parked" and acked unanswered. Its wait on a
/// young claim is at most a hide, however long the claim lifetime.
#[tokio::test]
async fn a_withdraw_waiting_on_a_long_lived_claim_hides_and_never_parks() {
    let w = world_with_claim_lifetime(vec![], Duration::from_secs(30 * 60));
    let parsed = Job::parse(&job("slow_claim"), &notice_texts::Icu).unwrap();
    let req = ClaimRequest::for_job(&parsed, parsed.key(&NoticeSecret::new(SECRET).unwrap()), now());
    assert!(matches!(w.ledger.inner().claim(&req).await.unwrap(), ClaimOutcome::Minted(_)));
    let held = w.deliver(&withdraw("slow_claim"), now()).await;
    // The claim's whole lifetime, and one second: the queue policy, not the sender, caps the wait.
    assert_eq!(
        held,
        Outcome::InFlight { until: now() + chrono::Duration::seconds(30 * 60 + 1), withdraw: true }
    );
    assert_eq!(queue_action(&held), QueueAction::Hide(Duration::from_secs(15 * 60)), "hidden, not parked");
    // The job's own copy waits for the whole lifetime (and parks, as any long wait).
    let copy = w.deliver(&job("slow_claim"), now()).await;
    assert!(matches!(queue_action(&copy), QueueAction::Park { .. }), "{copy:?}");
}
