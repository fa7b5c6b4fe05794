//! The send path's failure stories, told with fault-injecting adapters around a real SQLite file
//! and a real file outbox.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use notice_ledger::ledger::QuarantineView;
use notice_ledger::ledger::RowReader;
use notice_ledger::ledger::{ClaimLedger, ClaimOutcome, ClaimRequest, Ledger, RowState};
use notice_ledger::links::ManageLinks;
use notice_ledger::mailer::outbox::FileOutbox;
use notice_ledger::mailer::{Mailer, NotAccepted, OutgoingMail, SendResult};
use notice_ledger::DeliverContext;
use notice_ledger::{
    Job, Mode, NoticeSecret, NoticeSender, Outcome, QueueAction, QueuePolicy, Receive, SendBudget,
    WindowPolicy,
};
use notice_sqlite::SqliteLedger;
use notice_testkit::faults::{FaultyLedger, FaultyMailer, LedgerFault, MailFault, RecordingMailer};
use notice_texts::Renderer;

const JOB: &str = r#"{"subscription_id":"sub_8812","period_start":"2026-10-01","kind":"renewal_notice_t72",
  "email":"ada@example.com","charge_at":"2026-10-04T09:00:00Z","template_data":{"plan_name":"Coffee Box"}}"#;

fn now() -> DateTime<Utc> {
    "2026-10-02T00:00:00Z".parse().unwrap()
}

struct World {
    _dir: tempfile::TempDir,
    ledger: Arc<FaultyLedger<SqliteLedger>>,
    mailer: Arc<FaultyMailer<FileOutbox>>,
    sender: NoticeSender,
}

impl World {
    fn new(script: Vec<MailFault>) -> Self {
        Self::with(script, None, Mode::Enforce)
    }

    fn with(script: Vec<MailFault>, fault: Option<LedgerFault>, mode: Mode) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ledger =
            Arc::new(FaultyLedger::new(SqliteLedger::open(dir.path().join("ledger.db")).unwrap(), fault));
        let outbox = FileOutbox::new(dir.path().join("outbox"), "billing@example.com").unwrap();
        let mailer = Arc::new(FaultyMailer::new(outbox, script));
        let sender = sender_over(ledger.clone(), mailer.clone(), mode);
        Self { _dir: dir, ledger, mailer, sender }
    }

    async fn deliver(&self, body: &str) -> Outcome {
        self.deliver_at(body, now()).await
    }

    async fn deliver_at(&self, body: &str, at: DateTime<Utc>) -> Outcome {
        self.sender.deliver(body, DeliverContext::at(at)).await.outcome
    }

    /// A redelivery while the claim may still be in flight is not acked: it comes back just after
    /// the claim turns stale, and is then acked with the claim left on the quarantine view.
    async fn redelivery_waits_then_finds_the_claim_quarantined(&self) {
        let held = self.deliver(JOB).await;
        let until = now() + chrono::Duration::seconds(61);
        assert_eq!(held, Outcome::InFlight { until, withdraw: false });
        assert_eq!(queue_action(&held, now()), QueueAction::Hide(std::time::Duration::from_secs(61)));
        let later = self.deliver_at(JOB, until).await;
        assert_eq!(later, Outcome::Suppressed { state: RowState::Claimed });
        assert_eq!(queue_action(&later, now()), QueueAction::Delete);
    }

    /// Runs a delivery that never finishes (a hung adapter) and drops it: the worker died there.
    async fn deliver_and_crash(&self, body: &str) {
        let run = self.sender.deliver(body, DeliverContext::at(now()));
        assert!(
            tokio::time::timeout(Duration::from_millis(300), run).await.is_err(),
            "expected the worker to hang"
        );
    }

    fn outbox_len(&self) -> usize {
        self.mailer.inner().messages().unwrap().len()
    }

    async fn state(&self) -> Option<RowState> {
        let key = self.sender.key(&Job::parse(JOB, &notice_texts::Icu).unwrap());
        self.ledger.inner().get(&key).await.unwrap().map(|r| r.state)
    }
}

fn sender_over(ledger: Arc<dyn Ledger>, mailer: Arc<dyn Mailer>, mode: Mode) -> NoticeSender {
    NoticeSender::new(
        ledger,
        mailer,
        Arc::new(Renderer::builtin(ManageLinks::new(
            "https://billing.example.com/manage",
            NoticeSecret::new("links").unwrap(),
        ))),
        WindowPolicy::default(),
        NoticeSecret::new("test-secret").unwrap(),
    )
    .with_mode(mode)
    .with_budget(SendBudget {
        send_timeout: Duration::from_millis(500),
        min_time_left: Duration::from_secs(2),
        ..SendBudget::default()
    })
}

fn with_field(field: &str, value: serde_json::Value) -> String {
    let mut v: serde_json::Value = serde_json::from_str(JOB).unwrap();
    v[field] = value;
    v.to_string()
}

#[tokio::test]
async fn worker_dies_after_claim_before_send_then_redelivery_sends_nothing_and_claim_is_quarantined() {
    let w = World::new(vec![MailFault::HangBeforeSend]);
    w.deliver_and_crash(JOB).await;
    assert_eq!(w.outbox_len(), 0);
    w.redelivery_waits_then_finds_the_claim_quarantined().await;
    assert_eq!(w.outbox_len(), 0);
    assert_eq!(w.mailer.attempts(), 1);
    let open = w.ledger.inner().open_claims(now() + chrono::Duration::minutes(15), 10).await.unwrap();
    assert_eq!(open.len(), 1, "the stale claim is visible in the quarantine view");
}

#[tokio::test]
async fn worker_dies_after_send_before_commit_then_redelivery_is_suppressed() {
    let w = World::new(vec![MailFault::HangAfterSend]);
    w.deliver_and_crash(JOB).await;
    assert_eq!(w.outbox_len(), 1);
    w.redelivery_waits_then_finds_the_claim_quarantined().await;
    assert_eq!(w.outbox_len(), 1, "exactly one message went out");
    assert_eq!(w.state().await, Some(RowState::Claimed), "outcome unknown to the worker: quarantined");
}

#[tokio::test]
async fn worker_dies_after_claim_is_written_but_before_it_hears_back() {
    let w = World::with(vec![], Some(LedgerFault::HangAfterClaim), Mode::Enforce);
    w.deliver_and_crash(JOB).await;
    w.ledger.set_fault(None);
    w.redelivery_waits_then_finds_the_claim_quarantined().await;
    assert_eq!(w.outbox_len(), 0);
    assert_eq!(w.mailer.attempts(), 0);
}

#[tokio::test]
async fn ack_lost_after_commit_then_redelivery_is_suppressed() {
    let w = World::new(vec![]);
    let first = w.deliver(JOB).await;
    assert!(matches!(first, Outcome::Sent { .. }), "{first:?}");
    assert_eq!(queue_action(&first, now()), QueueAction::Delete);
    // The ack never reached the queue: the same message comes back.
    assert_eq!(w.deliver(JOB).await, Outcome::Suppressed { state: RowState::Sent });
    assert_eq!(w.outbox_len(), 1);
    let m = w.sender.metrics().drain();
    assert_eq!((m.claims_minted, m.sent, m.duplicates_suppressed), (1, 1, 1));
    assert_eq!(m.claim_to_commit_ms.len(), 1);
}

#[tokio::test]
async fn claim_write_failing_sends_nothing_and_retries() {
    let w = World::with(vec![], Some(LedgerFault::ClaimFails), Mode::Enforce);
    let outcome = w.deliver(JOB).await;
    assert!(matches!(outcome, Outcome::LedgerUnavailable(_)), "{outcome:?}");
    assert!(matches!(queue_action(&outcome, now()), QueueAction::Backoff(_)));
    assert_eq!(w.outbox_len(), 0);
    assert_eq!(w.state().await, None);
    w.ledger.set_fault(None);
    assert!(matches!(w.deliver(JOB).await, Outcome::Sent { .. }));
    assert_eq!(w.outbox_len(), 1);
}

#[tokio::test]
async fn ledger_down_sends_nothing_and_acks_nothing() {
    let w = World::with(vec![], Some(LedgerFault::Down), Mode::Enforce);
    let outcome = w.deliver(JOB).await;
    assert!(matches!(queue_action(&outcome, now()), QueueAction::Backoff(_)));
    assert_eq!(w.mailer.attempts(), 0);
}

#[tokio::test]
async fn provider_not_accepted_releases_and_the_next_attempt_sends_once() {
    let w = World::new(vec![MailFault::NotAccepted(NotAccepted::Throttled)]);
    let first = w.deliver(JOB).await;
    assert!(matches!(first, Outcome::Released { class: NotAccepted::Throttled, .. }), "{first:?}");
    assert!(matches!(queue_action(&first, now()), QueueAction::Backoff(_)));
    assert_eq!(w.state().await, Some(RowState::Released));
    assert_eq!(w.outbox_len(), 0);
    assert!(matches!(w.deliver(JOB).await, Outcome::Sent { .. }));
    assert_eq!(w.deliver(JOB).await, Outcome::Suppressed { state: RowState::Sent });
    assert_eq!(w.outbox_len(), 1);
    assert_eq!(w.mailer.attempts(), 2);
}

#[tokio::test]
async fn provider_outcome_unknown_quarantines_and_redelivery_sends_nothing() {
    let w = World::new(vec![MailFault::SendThenUnknown]);
    let first = w.deliver(JOB).await;
    assert!(matches!(first, Outcome::Quarantined { .. }), "{first:?}");
    assert_eq!(queue_action(&first, now()), QueueAction::Delete);
    w.redelivery_waits_then_finds_the_claim_quarantined().await;
    assert_eq!(w.mailer.attempts(), 1, "one attempt per claim");
    assert_eq!(w.outbox_len(), 1);
    assert_eq!(w.sender.metrics().drain().quarantined, 1);
}

#[tokio::test]
async fn slow_send_past_the_timeout_is_unknown_not_retried() {
    let w = World::new(vec![MailFault::Slow(Duration::from_secs(5))]);
    let outcome = w.deliver(JOB).await;
    assert!(matches!(outcome, Outcome::Quarantined { .. }), "{outcome:?}");
    assert_eq!(w.state().await, Some(RowState::Claimed));
}

#[tokio::test]
async fn provider_rejection_is_recorded_and_not_retried() {
    let w = World::new(vec![MailFault::Rejected]);
    assert!(matches!(w.deliver(JOB).await, Outcome::Rejected { .. }));
    assert_eq!(w.state().await, Some(RowState::Rejected));
    assert_eq!(w.deliver(JOB).await, Outcome::Suppressed { state: RowState::Rejected });
    assert_eq!(w.mailer.attempts(), 1);
}

#[tokio::test]
async fn commit_failing_after_send_leaves_the_claim_for_the_reconciler() {
    let w = World::with(vec![], Some(LedgerFault::CommitFails), Mode::Enforce);
    let outcome = w.deliver(JOB).await;
    let Outcome::Quarantined { message_id: Some(_), .. } = outcome else { panic!("{outcome:?}") };
    w.ledger.set_fault(None);
    w.redelivery_waits_then_finds_the_claim_quarantined().await;
    assert_eq!(w.outbox_len(), 1);
}

#[tokio::test]
async fn a_duplicate_held_by_a_claim_in_flight_waits_and_sends_once_the_claimer_releases() {
    // Another delivery of the same job claimed and is still sending (a duplicate receive).
    let w = World::new(vec![]);
    let job = Job::parse(JOB, &notice_texts::Icu).unwrap();
    let req = ClaimRequest::for_job(&job, w.sender.key(&job), now());
    let ClaimOutcome::Minted(claim) = w.ledger.inner().claim(&req).await.unwrap() else {
        panic!("not minted")
    };
    let held = w.deliver(JOB).await;
    let Outcome::InFlight { until, .. } = held else { panic!("{held:?}") };
    assert!(
        matches!(queue_action(&held, now()), QueueAction::Hide(_)),
        "not acked while the claimer may release"
    );
    // The claimer's send was throttled: it releases, and its own retry may be lost (stale receipt).
    w.ledger.inner().release(&claim, "throttled", now()).await.unwrap();
    assert!(matches!(w.deliver_at(JOB, until).await, Outcome::Sent { .. }));
    assert_eq!(w.outbox_len(), 1);
}

#[tokio::test]
async fn a_release_that_landed_but_answered_an_error_is_retried_and_then_sent() {
    let w = World::with(
        vec![MailFault::NotAccepted(NotAccepted::Throttled)],
        Some(LedgerFault::ReleaseAnswerLost),
        Mode::Enforce,
    );
    let first = w.deliver(JOB).await;
    assert!(matches!(first, Outcome::LedgerUnavailable(_)), "{first:?}");
    assert!(
        matches!(queue_action(&first, now()), QueueAction::Backoff(_)),
        "not acked: the release may have landed"
    );
    assert_eq!(w.state().await, Some(RowState::Released));
    w.ledger.set_fault(None);
    assert!(matches!(w.deliver(JOB).await, Outcome::Sent { .. }));
    assert_eq!(w.outbox_len(), 1);
}

#[tokio::test]
async fn a_release_that_failed_is_retried_and_the_claim_ends_on_the_quarantine_view() {
    let w = World::with(
        vec![MailFault::NotAccepted(NotAccepted::Throttled)],
        Some(LedgerFault::CommitFails),
        Mode::Enforce,
    );
    let first = w.deliver(JOB).await;
    assert!(matches!(queue_action(&first, now()), QueueAction::Backoff(_)), "{first:?}");
    w.ledger.set_fault(None);
    w.redelivery_waits_then_finds_the_claim_quarantined().await;
    assert_eq!(w.outbox_len(), 0);
}

#[tokio::test]
async fn many_workers_on_one_job_send_once() {
    let w = World::new(vec![MailFault::Slow(Duration::from_millis(50))]);
    let runs = (0..16).map(|_| w.deliver(JOB));
    let outcomes = futures::future::join_all(runs).await;
    let sent = outcomes.iter().filter(|o| matches!(o, Outcome::Sent { .. })).count();
    assert_eq!(sent, 1, "{outcomes:?}");
    let waiting = outcomes.iter().filter(|o| matches!(o, Outcome::InFlight { .. })).count();
    assert!(waiting > 0, "duplicates during the send wait for it: {outcomes:?}");
    assert!(outcomes
        .iter()
        .all(|o| matches!(o, Outcome::Sent { .. } | Outcome::Suppressed { .. } | Outcome::InFlight { .. })));
    assert_eq!(w.outbox_len(), 1);
}

#[tokio::test]
async fn revision_bump_is_a_distinct_notice() {
    let w = World::new(vec![]);
    assert!(matches!(w.deliver(JOB).await, Outcome::Sent { .. }));
    let corrected = with_field("revision", 1.into());
    let corrected = {
        let mut v: serde_json::Value = serde_json::from_str(&corrected).unwrap();
        v["template_data"]["plan_name"] = "Coffee Box (corrected)".into();
        v.to_string()
    };
    assert!(matches!(w.deliver(&corrected).await, Outcome::Sent { .. }));
    assert_eq!(w.outbox_len(), 2);
}

#[tokio::test]
async fn changed_content_without_revision_bump_is_a_payload_conflict() {
    let w = World::new(vec![]);
    assert!(matches!(w.deliver(JOB).await, Outcome::Sent { .. }));
    let changed = with_field("template_data", serde_json::json!({"plan_name": "Tea Box"}));
    let outcome = w.deliver(&changed).await;
    assert_eq!(outcome, Outcome::PayloadConflict { state: RowState::Sent });
    assert_eq!(queue_action(&outcome, now()), QueueAction::DeadLetter);
    assert_eq!(w.outbox_len(), 1);
    assert_eq!(w.sender.metrics().drain().payload_conflicts, 1);
}

#[tokio::test]
async fn shadow_mode_counts_would_be_suppressions_but_never_blocks() {
    let w = World::with(vec![], None, Mode::Shadow);
    assert!(matches!(w.deliver(JOB).await, Outcome::Sent { .. }));
    let second = w.deliver(JOB).await;
    assert!(
        matches!(second, Outcome::ShadowSent { would_suppress: Some(RowState::Sent), message_id: Some(_) }),
        "{second:?}"
    );
    assert_eq!(w.outbox_len(), 2);
    assert_eq!(w.sender.metrics().drain().shadow_would_suppress, 1);
    // Shadow mode never blocks a send, not even when the ledger is down.
    w.ledger.set_fault(Some(LedgerFault::Down));
    assert!(matches!(w.deliver(JOB).await, Outcome::ShadowSent { .. }));
    assert_eq!(w.outbox_len(), 3);
}

#[tokio::test]
async fn early_job_is_deferred_without_a_claim() {
    let w = World::new(vec![]);
    let early = with_field("charge_at", "2026-10-20T09:00:00Z".into());
    let outcome = w.deliver(&early).await;
    let until: DateTime<Utc> = "2026-10-17T09:00:00Z".parse().unwrap();
    let closes_at: DateTime<Utc> = "2026-10-19T09:00:00Z".parse().unwrap();
    assert_eq!(outcome, Outcome::Deferred { until, closes_at });
    assert_eq!(queue_action(&outcome, now()), QueuePolicy::parking().action(&outcome, &first_receive(now())));
    assert_eq!(
        queue_action(&outcome, now()),
        QueueAction::Park { at: until },
        "days away: parked at the opening"
    );
    assert_eq!(w.ledger.calls(), 0);
}

#[tokio::test]
async fn late_job_is_recorded_as_missed_and_never_sent() {
    let w = World::new(vec![]);
    let late = with_field("charge_at", "2026-10-02T12:00:00Z".into());
    let outcome = w.deliver(&late).await;
    assert!(matches!(outcome, Outcome::Missed { .. }), "{outcome:?}");
    assert_eq!(queue_action(&outcome, now()), QueueAction::Delete);
    assert_eq!(w.deliver(&late).await, Outcome::Suppressed { state: RowState::Missed });
    assert_eq!(w.mailer.attempts(), 0);
    assert_eq!(w.sender.metrics().drain().missed_window, 1);
}

#[tokio::test]
async fn jurisdiction_floor_makes_a_job_late() {
    let mut w = World::new(vec![]);
    w.sender = w
        .sender
        .with_policy(WindowPolicy::from_json(r#"{"jurisdiction_floors_hours":{"US-NY":60}}"#).unwrap());
    let mut ny: serde_json::Value =
        serde_json::from_str(&with_field("jurisdiction", "US-NY".into())).unwrap();
    ny["subscription_id"] = "sub_ny".into();
    // 57 h before the charge: inside the default window, past New York's 60 h floor.
    assert!(matches!(w.deliver(&ny.to_string()).await, Outcome::Missed { .. }));
    assert!(matches!(w.deliver(JOB).await, Outcome::Sent { .. }));
}

/// The example California policy (docs/windows/us-ca-arl.json): an annual notice there may go out
/// 45 to 15 days before the charge, although the kind's own window is 60 to 7 days.
#[tokio::test]
async fn a_california_annual_notice_is_deferred_at_50_days_sent_at_30_and_missed_at_10() {
    let mut w = World::new(vec![]);
    let policy = WindowPolicy::from_json(include_str!("../../../docs/windows/us-ca-arl.json")).unwrap();
    w.sender = w.sender.with_policy(policy);
    let charge: DateTime<Utc> = "2026-12-31T09:00:00Z".parse().unwrap();
    let days_before = |d: i64| charge - chrono::Duration::days(d);
    let notice = |sub: &str, jurisdiction: Option<&str>| {
        let mut v: serde_json::Value = serde_json::from_str(JOB).unwrap();
        v["subscription_id"] = sub.into();
        v["kind"] = "annual_renewal".into();
        v["charge_at"] = charge.to_rfc3339().into();
        // What California requires an annual notice to state (the policy's `requires`).
        v["template_data"]["amount"] = serde_json::json!({"minor": 29000, "currency": "USD"});
        if let Some(j) = jurisdiction {
            v["jurisdiction"] = j.into();
        }
        v.to_string()
    };
    let ca = notice("sub_ca", Some("US-CA"));

    let early = w.deliver_at(&ca, days_before(50)).await;
    assert_eq!(early, Outcome::Deferred { until: days_before(45), closes_at: days_before(15) });
    assert_eq!(w.ledger.calls(), 0, "deferred before any ledger work");
    assert!(
        matches!(w.deliver_at(&notice("sub_any", None), days_before(50)).await, Outcome::Sent { .. }),
        "without a jurisdiction the kind's own 60-day window is open"
    );

    assert!(matches!(w.deliver_at(&ca, days_before(30)).await, Outcome::Sent { .. }));

    let late = notice("sub_ca_late", Some("US-CA"));
    assert_eq!(w.deliver_at(&late, days_before(10)).await, Outcome::Missed { closed_at: days_before(15) });
    assert!(
        matches!(w.deliver_at(&notice("sub_any_late", None), days_before(10)).await, Outcome::Sent { .. }),
        "without a jurisdiction the kind's window closes only 7 days before"
    );
    assert_eq!(w.outbox_len(), 3, "the two unbounded notices and the one sent at 30 days");

    // The rows keep the evidence: the charge and the jurisdiction each was judged in.
    for (body, state) in [(&ca, RowState::Sent), (&late, RowState::Missed)] {
        let key = w.sender.key(&Job::parse(body, &notice_texts::Icu).unwrap());
        let row = w.ledger.inner().get(&key).await.unwrap().expect("a row");
        assert_eq!(
            (row.state, row.charge_at, row.jurisdiction.as_deref()),
            (state, Some(charge), Some("US-CA"))
        );
    }
}

/// US-NY in the example policy has only a floor (48 h): a monthly notice 40 h before its charge is
/// inside the default window, but too late in New York.
#[tokio::test]
async fn a_new_york_notice_follows_its_floor() {
    let mut w = World::new(vec![]);
    let policy = WindowPolicy::from_json(include_str!("../../../docs/windows/us-ca-arl.json")).unwrap();
    w.sender = w.sender.with_policy(policy);
    let forty_hours_before = now(); // JOB charges 2026-10-04T09:00Z; now() is 57 h before it
    let charge = forty_hours_before + chrono::Duration::hours(40);
    let job = |sub: &str, j: Option<&str>| {
        let mut v: serde_json::Value = serde_json::from_str(JOB).unwrap();
        v["subscription_id"] = sub.into();
        v["charge_at"] = charge.to_rfc3339().into();
        if let Some(j) = j {
            v["jurisdiction"] = j.into();
        }
        v.to_string()
    };
    assert_eq!(
        w.deliver(&job("sub_ny", Some("US-NY"))).await,
        Outcome::Missed { closed_at: charge - chrono::Duration::hours(48) }
    );
    assert!(matches!(w.deliver(&job("sub_ca", Some("US-CA"))).await, Outcome::Sent { .. }));
    assert!(matches!(w.deliver(&job("sub_none", None)).await, Outcome::Sent { .. }));
}

#[tokio::test]
async fn too_little_time_left_claims_nothing() {
    let w = World::new(vec![]);
    let deadline = Instant::now() + Duration::from_millis(500);
    let d = w.sender.deliver(JOB, DeliverContext::at(now()).with_deadline(Some(deadline))).await;
    assert_eq!(d.outcome, Outcome::NoTimeLeft);
    assert!(matches!(queue_action(&d.outcome, now()), QueueAction::Backoff(_)));
    assert_eq!(w.ledger.calls(), 0);
}

#[tokio::test]
async fn invalid_input_is_reported_with_its_field_and_dead_lettered() {
    let w = World::new(vec![]);
    let outcome = w.deliver(&with_field("period_start", "2026-02-30".into())).await;
    let Outcome::Invalid(err) = &outcome else { panic!("{outcome:?}") };
    assert_eq!(err.field, "period_start");
    assert_eq!(queue_action(&outcome, now()), QueueAction::DeadLetter);
    assert_eq!(w.ledger.calls(), 0);
}

/// Records how many ledger calls had happened when the send started.
struct ProbeMailer {
    ledger: Arc<FaultyLedger<SqliteLedger>>,
    calls_at_send: std::sync::Mutex<Vec<usize>>,
    inner: RecordingMailer,
}

#[async_trait]
impl Mailer for ProbeMailer {
    async fn send(&self, mail: &OutgoingMail) -> SendResult {
        self.calls_at_send.lock().unwrap().push(self.ledger.calls());
        self.inner.send(mail).await
    }
}

#[tokio::test]
async fn one_ledger_call_before_the_send_and_two_writes_per_notice() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Arc::new(FaultyLedger::new(SqliteLedger::open(dir.path().join("l.db")).unwrap(), None));
    let probe = Arc::new(ProbeMailer {
        ledger: ledger.clone(),
        calls_at_send: Default::default(),
        inner: RecordingMailer::default(),
    });
    let sender = sender_over(ledger.clone(), probe.clone(), Mode::Enforce);
    let outcome = sender.deliver(JOB, DeliverContext::at(now())).await.outcome;
    assert!(matches!(outcome, Outcome::Sent { .. }));
    assert_eq!(*probe.calls_at_send.lock().unwrap(), vec![1], "only the claim precedes the send");
    assert_eq!(ledger.calls(), 2);
    assert_eq!(ledger.writes(), 2, "claim + commit");
}

/// A first receive at `now` (no jitter), as the sender sees it.
fn first_receive(now: DateTime<Utc>) -> Receive<'static> {
    Receive { key: None, count: 1, now, jitter: 0.0 }
}

/// What the shipped queue policy (parking configured) does with `outcome` on a first receive.
fn queue_action(outcome: &Outcome, now: DateTime<Utc>) -> QueueAction {
    QueuePolicy::parking().action(outcome, &first_receive(now))
}

/// The commit after a send is stamped by the sender's clock, not the wall clock: a rehearsal at a
/// pinned instant (`noticectl send --now`) leaves rows that carry that one time.
#[tokio::test]
async fn the_commit_is_stamped_by_the_senders_clock() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Arc::new(FaultyLedger::new(SqliteLedger::open(dir.path().join("l.db")).unwrap(), None));
    let pinned = now() + chrono::Duration::minutes(7);
    let sender = sender_over(ledger.clone(), Arc::new(RecordingMailer::default()), Mode::Enforce)
        .with_clock(Arc::new(notice_ledger::clock::PinnedClock(pinned)));
    assert_eq!(sender.now(), pinned);
    let delivery = sender.deliver(JOB, DeliverContext::at(now())).await;
    assert!(matches!(delivery.outcome, Outcome::Sent { .. }), "{:?}", delivery.outcome);
    let key = delivery.key.expect("a key");
    let row = ledger.inner().get(&key).await.unwrap().expect("a row");
    assert_eq!(row.state, RowState::Sent);
    assert_eq!(row.claimed_at, Some(now()), "the claim at the delivery's instant");
    assert_eq!(row.updated_at, pinned, "the commit at the sender's clock");
}
