//! Rotating the key secret on the default send path (rate gate on, SQLite ledger file, recording
//! mailers): senders on both sides of the switch share one ledger, and every notice goes out
//! once — a job sent under v1 and replayed after the switch, a job deferred before the switch and
//! delivered after it, two senders on different versions racing on one notice (both orders, many
//! times, single and batch paths), withdraws either side of the switch, and a sender that meets
//! an alias it cannot follow.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use notice_ledger::keyring::KeyRing;
use notice_ledger::ledger::{RowReader, RowState};
use notice_ledger::links::ManageLinks;
use notice_ledger::rate::{BucketGate, BucketStore, RateLimits};
use notice_ledger::{DeliverContext, NoticeSecret, NoticeSender, Outcome, WindowPolicy};
use notice_sqlite::SqliteLedger;
use notice_testkit::faults::RecordingMailer;
use notice_texts::Renderer;

const V1: &str = "the-first-key-secret-of-this-ledger";
const V2: &str = "the-second-key-secret-of-this-ledger";

fn before_switch() -> KeyRing {
    KeyRing::from_stored(V1).unwrap()
}

fn after_switch() -> KeyRing {
    KeyRing::from_stored(&format!(r#"{{"current":"v2","versions":{{"v1":"{V1}","v2":"{V2}"}}}}"#)).unwrap()
}

fn job(sub: &str) -> String {
    serde_json::json!({"subscription_id": sub, "period_start": "2026-10-01", "kind": "renewal_notice_t72",
        "email": format!("{sub}@example.com"), "charge_at": "2026-10-04T09:00:00Z"})
    .to_string()
}

fn withdraw(sub: &str) -> String {
    serde_json::json!({"action": "withdraw", "subscription_id": sub, "period_start": "2026-10-01",
        "kind": "renewal_notice_t72"})
    .to_string()
}

fn open() -> DateTime<Utc> {
    "2026-10-02T00:00:00Z".parse().unwrap()
}

struct Sender {
    sender: Arc<NoticeSender>,
    mailer: Arc<RecordingMailer>,
}

struct World {
    _dir: tempfile::TempDir,
    ledger: Arc<SqliteLedger>,
    old: Sender,
    new: Sender,
}

fn sender(ledger: &Arc<SqliteLedger>, buckets: &Arc<dyn BucketStore>, keys: KeyRing) -> Sender {
    let mailer = Arc::new(RecordingMailer::default());
    let links = ManageLinks::new("https://billing.example.com/manage", NoticeSecret::new("links").unwrap());
    let sender = NoticeSender::new(
        ledger.clone(),
        mailer.clone(),
        Arc::new(Renderer::builtin(links)),
        WindowPolicy::default(),
        keys,
    )
    .with_rate_gate(Some(Arc::new(BucketGate::new(buckets.clone(), RateLimits::builtin()))));
    Sender { sender: Arc::new(sender), mailer }
}

/// One ledger; a sender still on v1 alone and one that has learned v2 (current).
fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteLedger::open(dir.path().join("ledger.db")).unwrap();
    let buckets: Arc<dyn BucketStore> = Arc::new(sqlite.buckets());
    let ledger = Arc::new(sqlite);
    let old = sender(&ledger, &buckets, before_switch());
    let new = sender(&ledger, &buckets, after_switch());
    World { _dir: dir, ledger, old, new }
}

impl World {
    fn sends(&self) -> usize {
        self.old.mailer.sent().len() + self.new.mailer.sent().len()
    }
}

async fn deliver(s: &Sender, body: &str, at: DateTime<Utc>) -> (Option<notice_ledger::NoticeKey>, Outcome) {
    let d = s.sender.deliver(body, DeliverContext::at(at)).await;
    (d.key, d.outcome)
}

#[tokio::test]
async fn a_job_sent_under_v1_and_replayed_after_the_switch_is_suppressed() {
    let w = world();
    let (old_key, first) = deliver(&w.old, &job("sub_1"), open()).await;
    assert!(matches!(first, Outcome::Sent { .. }), "{first:?}");
    let old_key = old_key.unwrap();
    assert_eq!(old_key.version(), 1);
    let (key, replay) = deliver(&w.new, &job("sub_1"), open() + Duration::minutes(10)).await;
    assert!(matches!(replay, Outcome::Suppressed { state: RowState::Sent }), "{replay:?}");
    assert_eq!(key, Some(old_key.clone()), "the notice lives under its v1 key");
    assert_eq!(w.sends(), 1);
    let new_key = w.new.sender.key(
        &notice_ledger::Job::from_value(&serde_json::from_str(&job("sub_1")).unwrap(), &notice_texts::Icu)
            .unwrap(),
    );
    assert_eq!(new_key.version(), 2);
    assert_eq!(w.ledger.get(&new_key).await.unwrap(), None, "nothing written under v2");
}

#[tokio::test]
async fn a_job_deferred_before_the_switch_is_sent_once_after_it_under_v2() {
    let w = world();
    let early = open() - Duration::days(1);
    let (_, deferred) = deliver(&w.old, &job("sub_2"), early).await;
    assert!(matches!(deferred, Outcome::Deferred { .. }), "{deferred:?}");
    let (key, sent) = deliver(&w.new, &job("sub_2"), open()).await;
    assert!(matches!(sent, Outcome::Sent { .. }), "{sent:?}");
    let key = key.unwrap();
    assert_eq!(key.version(), 2, "a notice the ledger never saw is keyed under the current version");
    let mail = &w.new.mailer.sent()[0];
    assert!(format!("{mail:?}").contains(key.as_str()), "the SES tag carries the v2 key");
    // A copy still on the v1 sender meets the alias: it is neither sent nor acked.
    let (alias_key, held) = deliver(&w.old, &job("sub_2"), open() + Duration::minutes(1)).await;
    assert!(matches!(held, Outcome::InFlight { .. }), "{held:?}");
    assert_eq!(alias_key.map(|k| k.version()), Some(1));
    assert_eq!(w.sends(), 1);
    // The same copy after its sender learned v2: suppressed.
    let (_, again) = deliver(&w.new, &job("sub_2"), open() + Duration::minutes(2)).await;
    assert!(matches!(again, Outcome::Suppressed { state: RowState::Sent }), "{again:?}");
    assert_eq!(w.sends(), 1);
}

#[tokio::test]
async fn two_senders_on_different_versions_racing_send_once_in_both_orders() {
    for i in 0..40 {
        let w = world();
        let sub = format!("sub_race_{i}");
        let body = job(&sub);
        let (first, second) = if i % 2 == 0 { (&w.old, &w.new) } else { (&w.new, &w.old) };
        let (a, b) = tokio::join!(deliver(first, &body, open()), deliver(second, &body, open()));
        let sent = [&a.1, &b.1].iter().filter(|o| matches!(o, Outcome::Sent { .. })).count();
        assert_eq!(sent, 1, "round {i}: {a:?} / {b:?}");
        assert_eq!(w.sends(), 1, "round {i}");
    }
}

#[tokio::test]
async fn racing_batches_on_different_versions_send_once() {
    for i in 0..12 {
        let w = world();
        let bodies: Vec<String> = (0..4).map(|n| job(&format!("sub_batch_{i}_{n}"))).collect();
        let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
        let run = |s: &'static str, sender: Arc<NoticeSender>, refs: Vec<String>| async move {
            let r: Vec<&str> = refs.iter().map(String::as_str).collect();
            let prefetched = sender.prefetch(&r, open()).await;
            let mut outcomes = Vec::new();
            for body in &r {
                let ctx = DeliverContext::at(open()).with_prefetched(prefetched.as_ref());
                outcomes.push((s, sender.deliver(*body, ctx).await.outcome));
            }
            outcomes
        };
        let owned: Vec<String> = refs.iter().map(|s| s.to_string()).collect();
        let (a, b) = tokio::join!(
            run("v1", w.old.sender.clone(), owned.clone()),
            run("v2", w.new.sender.clone(), owned)
        );
        assert_eq!(w.sends(), 4, "round {i}: {a:?} / {b:?}");
    }
}

#[tokio::test]
async fn withdraws_on_either_side_of_the_switch_hold_off_the_other() {
    let w = world();
    // Withdrawn under v1 before the switch: a v2 sender finds the tombstone under v1.
    let (_, withdrawn) = deliver(&w.old, &withdraw("sub_w1"), open()).await;
    assert!(matches!(withdrawn, Outcome::Withdrawn { already: false }), "{withdrawn:?}");
    let (_, job_after) = deliver(&w.new, &job("sub_w1"), open()).await;
    assert!(matches!(job_after, Outcome::Suppressed { state: RowState::Withdrawn }), "{job_after:?}");
    // Withdrawn under v2: its alias holds a v1 sender's copy off (not sent, not acked).
    let (key, withdrawn) = deliver(&w.new, &withdraw("sub_w2"), open()).await;
    assert!(matches!(withdrawn, Outcome::Withdrawn { already: false }), "{withdrawn:?}");
    assert_eq!(key.map(|k| k.version()), Some(2));
    let (_, job_old) = deliver(&w.old, &job("sub_w2"), open()).await;
    assert!(matches!(job_old, Outcome::InFlight { .. }), "{job_old:?}");
    let (_, withdraw_old) = deliver(&w.old, &withdraw("sub_w2"), open()).await;
    assert!(matches!(withdraw_old, Outcome::InFlight { withdraw: true, .. }), "{withdraw_old:?}");
    assert_eq!(w.sends(), 0);
}

/// The SQLite ledger, with a sender still on v1 claiming and releasing the notice's v1 key (the
/// provider throttled it) between a v2 sender's placement read and its first write — the one
/// moment the placement can go stale.
struct ReleasedBetween {
    inner: Arc<SqliteLedger>,
    job: notice_ledger::Job,
    v1_key: notice_ledger::NoticeKey,
    done: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl RowReader for ReleasedBetween {
    async fn get(
        &self,
        key: &notice_ledger::NoticeKey,
    ) -> Result<Option<notice_ledger::ledger::LedgerRow>, notice_ledger::LedgerError> {
        self.inner.get(key).await
    }
    async fn get_many(
        &self,
        keys: &[notice_ledger::NoticeKey],
    ) -> Result<Vec<notice_ledger::ledger::LedgerRow>, notice_ledger::LedgerError> {
        self.inner.get_many(keys).await
    }
}

#[async_trait::async_trait]
impl notice_ledger::ledger::ClaimLedger for ReleasedBetween {
    async fn put_on_quarantine_view(
        &self,
        claim: &notice_ledger::ledger::Claim,
    ) -> Result<(), notice_ledger::LedgerError> {
        self.inner.put_on_quarantine_view(claim).await
    }
    async fn claim(
        &self,
        req: &notice_ledger::ledger::ClaimRequest,
    ) -> Result<notice_ledger::ledger::ClaimOutcome, notice_ledger::LedgerError> {
        use notice_ledger::ledger::{ClaimOutcome, ClaimRequest};
        if !req.aliases.is_empty() && !self.done.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let old = ClaimRequest::for_job(&self.job, self.v1_key.clone(), req.at);
            let ClaimOutcome::Minted(claim) = self.inner.claim(&old).await? else {
                panic!("the v1 sender's claim was refused");
            };
            self.inner.release(&claim, "throttled", req.at).await?;
        }
        self.inner.claim(req).await
    }
    async fn commit_sent(
        &self,
        claim: &notice_ledger::ledger::Claim,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), notice_ledger::LedgerError> {
        self.inner.commit_sent(claim, message_id, at).await
    }
    async fn commit_rejected(
        &self,
        claim: &notice_ledger::ledger::Claim,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), notice_ledger::LedgerError> {
        self.inner.commit_rejected(claim, reason, at).await
    }
    async fn release(
        &self,
        claim: &notice_ledger::ledger::Claim,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), notice_ledger::LedgerError> {
        self.inner.release(claim, reason, at).await
    }
    async fn record_missed(
        &self,
        req: &notice_ledger::ledger::ClaimRequest,
        reason: &str,
    ) -> Result<Option<notice_ledger::ledger::LedgerRow>, notice_ledger::LedgerError> {
        self.inner.record_missed(req, reason).await
    }
    async fn withdraw(
        &self,
        req: &notice_ledger::ledger::WithdrawRequest,
    ) -> Result<Option<notice_ledger::ledger::LedgerRow>, notice_ledger::LedgerError> {
        self.inner.withdraw(req).await
    }
}

/// Found by the model check's rotation world: a v2 sender placed the notice under its v2 key
/// (nothing under v1), then a v1 sender claimed the v1 key and released it. The v2 sender's claim
/// is refused for its alias with that released row — which must not be taken for "decided" (the
/// notice would never be sent): the delivery comes back at once, places the notice again (under
/// v1 now) and sends it.
#[tokio::test]
async fn a_placement_gone_stale_is_placed_again_never_suppressed() {
    let w = world();
    let job =
        notice_ledger::Job::from_value(&serde_json::from_str(&job("sub_5")).unwrap(), &notice_texts::Icu)
            .unwrap();
    let v1_key = w.old.sender.key(&job);
    let ledger = Arc::new(ReleasedBetween {
        inner: w.ledger.clone(),
        job: job.clone(),
        v1_key: v1_key.clone(),
        done: Default::default(),
    });
    let mailer = Arc::new(RecordingMailer::default());
    let links = ManageLinks::new("https://billing.example.com/manage", NoticeSecret::new("links").unwrap());
    let sender = NoticeSender::new(
        ledger,
        mailer.clone(),
        Arc::new(Renderer::builtin(links)),
        WindowPolicy::default(),
        after_switch(),
    );
    let first = sender.deliver(&job, DeliverContext::at(open())).await;
    let Outcome::InFlight { until, withdraw: false } = first.outcome else {
        panic!("a stale placement must come back, not {:?}", first.outcome);
    };
    assert!(until <= open() + Duration::seconds(5), "back at once: {until}");
    assert_eq!(mailer.sent().len(), 0);
    assert_eq!(w.ledger.get(&v1_key).await.unwrap().map(|r| r.state), Some(RowState::Released));
    let again = sender.deliver(&job, DeliverContext::at(open() + Duration::seconds(2))).await;
    assert!(matches!(again.outcome, Outcome::Sent { .. }), "{:?}", again.outcome);
    assert_eq!(again.key, Some(v1_key), "sent under the key the notice now lives at");
    assert_eq!(mailer.sent().len(), 1);
}
