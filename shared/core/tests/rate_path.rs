//! Dedupe decides before the rate: the ledger is read first, a duplicate is suppressed even when
//! its domain's bucket is empty and spends no token, and a job that finds no token claims nothing
//! and is claimed when a token is due. Over a real SQLite ledger and SQLite buckets.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use notice_ledger::ledger::{ClaimLedger, ClaimOutcome, ClaimRequest, RowReader, RowState};
use notice_ledger::links::ManageLinks;
use notice_ledger::metrics::Metrics;
use notice_ledger::rate::{BucketGate, BucketStore, RateLimits};
use notice_ledger::DeliverContext;
use notice_ledger::{
    Job, Mode, NoticeSecret, NoticeSender, Outcome, QueueAction, QueuePolicy, Receive, SendBudget,
    WindowPolicy,
};
use notice_sqlite::SqliteLedger;
use notice_testkit::faults::{FaultyLedger, LedgerFault, RecordingMailer};
use notice_texts::Renderer;

const SECRET: &str = "rate-path-secret";

fn job(sub: &str, domain: &str) -> String {
    serde_json::json!({"subscription_id": sub, "period_start": "2026-10-01", "kind": "renewal_notice_t72",
        "email": format!("{sub}@{domain}"), "charge_at": "2026-10-04T09:00:00Z"})
    .to_string()
}

fn now() -> DateTime<Utc> {
    "2026-10-02T00:00:00Z".parse().unwrap()
}

struct World {
    _dir: tempfile::TempDir,
    ledger: Arc<FaultyLedger<SqliteLedger>>,
    buckets: Arc<dyn BucketStore>,
    mailer: Arc<RecordingMailer>,
    sender: NoticeSender,
}

/// One token per 100 s for `slow.example`, burst 1; other domains are not limited.
fn world(mode: Mode) -> World {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteLedger::open(dir.path().join("ledger.db")).unwrap();
    let buckets: Arc<dyn BucketStore> = Arc::new(sqlite.buckets());
    let ledger = Arc::new(FaultyLedger::new(sqlite, None));
    let limits =
        RateLimits::parse(r#"{"domains":{"slow.example":{"per_second":0.01,"burst":1}}}"#).unwrap().unwrap();
    let mailer = Arc::new(RecordingMailer::default());
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
    .with_mode(mode)
    .with_budget(SendBudget {
        send_timeout: Duration::from_millis(500),
        min_time_left: Duration::from_secs(1),
        ..SendBudget::default()
    })
    .with_rate_gate(Some(Arc::new(BucketGate::new(buckets.clone(), limits))));
    World { _dir: dir, ledger, buckets, mailer, sender }
}

impl World {
    async fn deliver(&self, body: &str, at: DateTime<Utc>) -> Outcome {
        self.sender.deliver(body, DeliverContext::at(at)).await.outcome
    }

    async fn state(&self, body: &str) -> Option<RowState> {
        let key = Job::parse(body, &notice_texts::Icu).unwrap().key(&NoticeSecret::new(SECRET).unwrap());
        self.ledger.inner().get(&key).await.unwrap().map(|r| r.state)
    }
}

#[tokio::test]
async fn duplicates_with_an_empty_bucket_are_suppressed_and_spend_no_token() {
    let w = world(Mode::Enforce);
    let a = job("sub_a", "slow.example");
    assert!(matches!(w.deliver(&a, now()).await, Outcome::Sent { .. }), "the one token");
    let spent = w.buckets.load("slow.example").await.unwrap();
    assert!(spent.is_some());

    // The bucket is empty now; every copy of the sent notice is still suppressed and acked.
    for _ in 0..5 {
        let outcome = w.deliver(&a, now()).await;
        assert_eq!(outcome, Outcome::Suppressed { state: RowState::Sent });
        assert_eq!(queue_action(&outcome, now()), QueueAction::Delete);
    }
    // An in-flight claim (another worker's) holds its duplicates too, without a token.
    let b = job("sub_b", "slow.example");
    let parsed = Job::parse(&b, &notice_texts::Icu).unwrap();
    let theirs = ClaimRequest::for_job(&parsed, parsed.key(&NoticeSecret::new(SECRET).unwrap()), now());
    assert!(matches!(w.ledger.inner().claim(&theirs).await.unwrap(), ClaimOutcome::Minted(_)));
    assert!(matches!(w.deliver(&b, now()).await, Outcome::InFlight { .. }));

    assert_eq!(w.buckets.load("slow.example").await.unwrap(), spent, "no token spent on duplicates");
    assert_eq!(w.mailer.sent().len(), 1);
    let m = w.sender.metrics().drain();
    assert_eq!((m.claims_minted, m.duplicates_suppressed, m.rate_limited), (1, 6, 0));
}

#[tokio::test]
async fn a_job_without_a_token_claims_nothing_and_is_claimed_when_one_is_due() {
    let w = world(Mode::Enforce);
    assert!(matches!(w.deliver(&job("sub_a", "slow.example"), now()).await, Outcome::Sent { .. }));
    let c = job("sub_c", "slow.example");
    let Outcome::RateLimited { until } = w.deliver(&c, now()).await else { panic!("expected rate_limited") };
    // The next token is due 100 s later; the jitter spreads over the refill (here capped at 60 s).
    assert!(until >= now() + chrono::Duration::seconds(100), "{until}");
    assert!(until <= now() + chrono::Duration::seconds(160), "{until}");
    assert_eq!(w.state(&c).await, None, "no claim written, so none to hand back");
    assert_eq!(w.mailer.sent().len(), 1);

    // Other domains are not held up by slow.example's bucket.
    assert!(matches!(w.deliver(&job("sub_d", "fast.example"), now()).await, Outcome::Sent { .. }));

    // When the token is due the same job claims and sends.
    assert!(matches!(w.deliver(&c, until).await, Outcome::Sent { .. }));
    assert_eq!(w.state(&c).await, Some(RowState::Sent));
    let m = w.sender.metrics().drain();
    assert_eq!((m.claims_minted, m.sent, m.rate_limited, m.released), (3, 3, 1, 0));
}

#[tokio::test]
async fn a_ledger_that_cannot_be_read_spends_no_token() {
    let w = world(Mode::Enforce);
    let e = job("sub_e", "slow.example");
    w.ledger.set_fault(Some(LedgerFault::Down));
    assert!(matches!(w.deliver(&e, now()).await, Outcome::LedgerUnavailable(_)));
    w.ledger.set_fault(None);
    assert_eq!(w.buckets.load("slow.example").await.unwrap(), None, "no token taken");
    assert!(matches!(w.deliver(&e, now()).await, Outcome::Sent { .. }));
}

#[tokio::test]
async fn shadow_mode_paces_sends_too() {
    let w = world(Mode::Shadow);
    let a = job("sub_a", "slow.example");
    assert!(matches!(w.deliver(&a, now()).await, Outcome::Sent { .. }));
    // A would-be duplicate in shadow is still sent, so it needs a token like any send.
    let second = w.deliver(&a, now()).await;
    assert!(matches!(second, Outcome::RateLimited { .. }), "{second:?}");
    assert_eq!(w.mailer.sent().len(), 1);
}

/// A first receive at `now` (no jitter), as the sender sees it.
fn first_receive(now: DateTime<Utc>) -> Receive<'static> {
    Receive { key: None, count: 1, now, jitter: 0.0 }
}

/// What the shipped queue policy (parking configured) does with `outcome` on a first receive.
fn queue_action(outcome: &Outcome, now: DateTime<Utc>) -> QueueAction {
    QueuePolicy::parking().action(outcome, &first_receive(now))
}

#[tokio::test]
async fn a_batch_reads_its_rows_in_one_call_and_its_records_read_nothing_more() {
    let w = world(Mode::Enforce);
    let (sent, fresh) = (job("pre_sent", "fast.example"), job("pre_fresh", "fast.example"));
    assert!(matches!(w.deliver(&sent, now()).await, Outcome::Sent { .. }));
    let early = serde_json::json!({"subscription_id": "pre_early", "period_start": "2026-10-01",
        "kind": "renewal_notice_t72", "email": "e@fast.example", "charge_at": "2026-11-04T09:00:00Z"})
    .to_string();
    let bodies = [sent.as_str(), fresh.as_str(), fresh.as_str(), "not json", early.as_str()];

    let before = w.ledger.calls();
    let prefetched = w.sender.prefetch(&bodies, now()).await.expect("a batch read");
    assert_eq!(w.ledger.calls() - before, 1, "one ledger call for the whole batch");
    assert_eq!(
        prefetched.len(),
        2,
        "the two distinct keys in their window; invalid and early jobs read nothing"
    );

    let m = Metrics::default();
    let calls = w.ledger.calls();
    let dup = w
        .sender
        .deliver(&sent, DeliverContext::at(now()).counting_into(&m).with_prefetched(Some(&prefetched)))
        .await;
    assert_eq!(dup.outcome, Outcome::Suppressed { state: RowState::Sent });
    assert_eq!(w.ledger.calls(), calls, "a duplicate is decided from the batch read: no call");
    let new = w
        .sender
        .deliver(&fresh, DeliverContext::at(now()).counting_into(&m).with_prefetched(Some(&prefetched)))
        .await;
    assert!(matches!(new.outcome, Outcome::Sent { .. }), "{:?}", new.outcome);
    assert_eq!(w.ledger.calls(), calls + 2, "claim and commit only");
    // The copy read as free in the same batch meets the row at its conditional claim: nothing
    // sent twice (a token spent in vain, as for two workers that both read "free").
    let copy = w
        .sender
        .deliver(&fresh, DeliverContext::at(now()).counting_into(&m).with_prefetched(Some(&prefetched)))
        .await;
    assert_eq!(copy.outcome, Outcome::Suppressed { state: RowState::Sent });
    assert_eq!(w.mailer.sent().len(), 2);

    // The batch read fails: no prefetch, and each record reads (and reports) on its own.
    w.ledger.set_fault(Some(LedgerFault::Down));
    assert!(w.sender.prefetch(&bodies, now()).await.is_none());
    let down = w.sender.deliver(&fresh, DeliverContext::at(now()).counting_into(&m)).await;
    assert!(matches!(down.outcome, Outcome::LedgerUnavailable(_)), "{:?}", down.outcome);
}
