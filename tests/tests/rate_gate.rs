//! The shared per-domain token bucket, kept in DynamoDB (moto): several sender instances draining
//! a backlog to one domain never exceed `burst + rate · t` in any span `t`, every notice goes out
//! once, duplicates with an empty bucket are suppressed without spending a token, and replayed
//! notices are reported under their `replay_batch` in the sender's EMF records.

use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Duration, Utc};
use notice_dynamodb::ledger::DynamoLedger;
use notice_dynamodb::DynamoBuckets;
use notice_e2e::sender_app::{self, app_with, batch, batch_from, failed_ids, settings};
use notice_e2e::{start_moto, Moto};
use notice_ledger::ledger::{RowReader, RowState};
use notice_ledger::links::ManageLinks;
use notice_ledger::mailer::{Mailer, OutgoingMail, SendResult};
use notice_ledger::rate::{BucketGate, RateLimits};
use notice_ledger::DeliverContext;
use notice_ledger::{Job, NoticeSecret, NoticeSender, Outcome, WindowPolicy};
use notice_setup::aws;
use notice_texts::Renderer;
use serde_json::json;

const TABLE: &str = "notices";
const SECRET: &str = "rate-secret";
const PER_SECOND: f64 = 2.0;
const BURST: usize = 3;

/// Accepts everything and notes the (simulated) microsecond each message went out.
struct ClockedMailer {
    clock: Arc<AtomicI64>,
    sent: Mutex<Vec<(String, String, i64)>>,
}

#[async_trait]
impl Mailer for ClockedMailer {
    async fn send(&self, mail: &OutgoingMail) -> SendResult {
        let at = self.clock.load(Ordering::SeqCst);
        let mut sent = self.sent.lock().unwrap();
        sent.push((mail.key.as_str().to_owned(), mail.to.clone(), at));
        SendResult::Accepted { message_id: format!("m-{}", sent.len()) }
    }
}

fn limits() -> RateLimits {
    RateLimits::parse(&format!(
        r#"{{"default":{{"per_second":1000,"burst":1000}},"domains":{{"slow.example":{{"per_second":{PER_SECOND},"burst":{BURST}}}}}}}"#
    ))
    .unwrap()
    .unwrap()
}

/// One sender instance: its own DynamoDB client, ledger handle and gate (own remembered state).
async fn sender(moto: &Moto, mailer: Arc<dyn Mailer>) -> NoticeSender {
    let sdk = moto.sdk_config().await;
    let secret = NoticeSecret::new(SECRET).unwrap();
    NoticeSender::new(
        Arc::new(DynamoLedger::new(aws::dynamodb_client(&sdk), TABLE)),
        mailer,
        Arc::new(Renderer::builtin(ManageLinks::new("https://b.example/m", secret.derive_subkey("l")))),
        WindowPolicy::default(),
        secret,
    )
    .with_rate_gate(Some(Arc::new(BucketGate::new(
        Arc::new(DynamoBuckets::new(aws::dynamodb_client(&sdk), TABLE)),
        limits(),
    ))))
}

fn body(email: &str, charge_at: DateTime<Utc>) -> String {
    json!({"subscription_id": email.replace(['@', '.'], "_"), "period_start": "2026-12-01",
        "kind": "renewal_notice_t72", "email": email, "charge_at": charge_at.to_rfc3339()})
    .to_string()
}

/// The span between two send instants with the most sends relative to `burst + rate · span`:
/// (sends, span in s, bound).
fn worst_span(times_us: &[i64]) -> (usize, f64, f64) {
    let mut times = times_us.to_vec();
    times.sort_unstable();
    let mut worst: Option<(f64, usize, f64, f64)> = None;
    for i in 0..times.len() {
        for j in i..times.len() {
            let n = j - i + 1;
            let span = (times[j] - times[i]) as f64 / 1e6;
            let bound = BURST as f64 + PER_SECOND * span;
            let excess = n as f64 - bound;
            if worst.is_none_or(|(e, ..)| excess > e) {
                worst = Some((excess, n, span, bound));
            }
        }
    }
    worst.map_or((0, 0.0, BURST as f64), |(_, n, span, bound)| (n, span, bound))
}

/// `name` from the environment (for larger measurement runs), else `default`.
fn knob(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Senders and jobs: 3 and 12 by default; `RATE_GATE_SENDERS` / `RATE_GATE_JOBS` for a larger
/// measurement (README, *Done when*).
#[tokio::test]
async fn many_senders_never_exceed_a_domains_bucket_and_send_everything_once() {
    let senders_n = knob("RATE_GATE_SENDERS", 3);
    let slow_n = knob("RATE_GATE_JOBS", 12).max(BURST + 1);
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;

    let t0: DateTime<Utc> = "2026-12-02T12:00:00Z".parse().unwrap();
    let clock = Arc::new(AtomicI64::new(t0.timestamp_micros()));
    let mailer = Arc::new(ClockedMailer { clock: clock.clone(), sent: Mutex::new(Vec::new()) });
    let mut senders = Vec::new();
    for _ in 0..senders_n {
        senders.push(sender(&moto, mailer.clone()).await);
    }

    let charge_at = t0 + Duration::hours(48);
    let mut pending: Vec<String> = (0..slow_n)
        .map(|i| format!("c{i}@slow.example"))
        .chain((0..4).map(|i| format!("c{i}@fast.example")))
        .map(|email| body(&email, charge_at))
        .collect();
    let total = pending.len();

    // Every round, every sender tries every pending job at once (a replay plus its duplicates).
    let (mut rate_limited, mut suppressed) = (0, 0);
    for round in 0..(slow_n as i64 + 20) {
        if pending.is_empty() {
            break;
        }
        let now = t0 + Duration::milliseconds(round * 500);
        clock.store(now.timestamp_micros(), Ordering::SeqCst);
        let attempts = pending
            .iter()
            .flat_map(|body| senders.iter().map(move |s| s.deliver(body, DeliverContext::at(now))));
        let results = futures::future::join_all(attempts).await;
        let mut done = HashSet::new();
        for (i, d) in results.iter().enumerate() {
            match &d.outcome {
                Outcome::Sent { .. } => {
                    done.insert(i / senders_n);
                }
                // Copies that met a claim still in flight come back with the next round.
                Outcome::Suppressed { .. } => suppressed += 1,
                Outcome::InFlight { until, .. } => {
                    assert!(*until > now);
                    suppressed += 1;
                }
                Outcome::RateLimited { until } => {
                    assert!(*until > now);
                    rate_limited += 1;
                }
                other => panic!("unexpected outcome {other:?}"),
            }
        }
        pending =
            pending.into_iter().enumerate().filter(|(i, _)| !done.contains(i)).map(|(_, b)| b).collect();
    }
    assert!(pending.is_empty(), "{} job(s) never went out", pending.len());
    assert!(rate_limited > 0 && suppressed > 0, "the bucket deferred work and the ledger refused copies");

    let sent = mailer.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), total, "every notice exactly once");
    assert_eq!(sent.iter().map(|(k, _, _)| k).collect::<HashSet<_>>().len(), total);
    let slow: Vec<i64> =
        sent.iter().filter(|(_, to, _)| to.ends_with("@slow.example")).map(|s| s.2).collect();
    assert_eq!(slow.len(), slow_n);
    let (n, span, bound) = worst_span(&slow);
    let drained = (slow.iter().max().unwrap() - slow.iter().min().unwrap()) as f64 / 1e6;
    eprintln!(
        "measured: {senders_n} senders, {slow_n} sends to slow.example ({PER_SECOND}/s burst {BURST}) over {drained} s; \
         tightest span: {n} sends in {span} s (bound {bound}); {rate_limited} deferrals, {suppressed} duplicates suppressed"
    );
    assert!(n as f64 <= bound + 1e-9, "{n} sends in {span} s exceed burst + rate·t = {bound}");
    // …and the bucket is used, not starved: the backlog drains at the domain's rate. A sender
    // that lost a take to the others holds off the bucket for at most its refill time
    // ((burst − 1) intervals: rate/gate.rs, *Hold-off*), so the last sends may come that late.
    let ideal = (slow_n - BURST) as f64 / PER_SECOND;
    let hold_off = (BURST - 1) as f64 / PER_SECOND;
    assert!(
        drained <= ideal + 1.0 + hold_off,
        "drained in {drained} s, the bucket allows {ideal} s (+ 1 s of rounds, + {hold_off} s of hold-off)"
    );
}

async fn bucket_tat(moto: &Moto, domain: &str) -> Option<String> {
    let item = moto
        .dynamodb()
        .await
        .get_item()
        .table_name(TABLE)
        .key("notice_key", AttributeValue::S(format!("rate#{domain}")))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    item.item().and_then(|i| i.get("tat_us")).and_then(|v| v.as_n().ok()).cloned()
}

#[tokio::test]
async fn duplicates_with_an_empty_bucket_are_suppressed_and_spend_no_token() {
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    let clock = Arc::new(AtomicI64::new(0));
    let mailer = Arc::new(ClockedMailer { clock, sent: Mutex::new(Vec::new()) });
    let s = sender(&moto, mailer.clone()).await;
    let now: DateTime<Utc> = "2026-12-02T12:00:00Z".parse().unwrap();
    let charge_at = now + Duration::hours(48);

    let jobs: Vec<String> = (0..BURST).map(|i| body(&format!("d{i}@slow.example"), charge_at)).collect();
    for job in &jobs {
        assert!(matches!(s.deliver(job, DeliverContext::at(now)).await.outcome, Outcome::Sent { .. }));
    }
    let drained = bucket_tat(&moto, "slow.example").await;
    assert!(drained.is_some());
    // The bucket is empty: a fresh notice waits, every copy of a sent one is suppressed and acked.
    let late = body("late@slow.example", charge_at);
    assert!(matches!(s.deliver(&late, DeliverContext::at(now)).await.outcome, Outcome::RateLimited { .. }));
    for job in &jobs {
        let outcome = s.deliver(job, DeliverContext::at(now)).await.outcome;
        assert_eq!(outcome, Outcome::Suppressed { state: RowState::Sent });
    }
    assert_eq!(bucket_tat(&moto, "slow.example").await, drained, "duplicates took no token");
    let key = Job::parse(&late, &notice_texts::Icu).unwrap().key(&NoticeSecret::new(SECRET).unwrap());
    let row =
        DynamoLedger::new(aws::dynamodb_client(&moto.sdk_config().await), TABLE).get(&key).await.unwrap();
    assert!(row.is_none(), "the limited job claimed nothing: {row:?}");
    assert_eq!(mailer.sent.lock().unwrap().len(), BURST);
    let m = s.metrics().drain();
    assert_eq!((m.claims_minted, m.duplicates_suppressed, m.rate_limited), (BURST as u64, BURST as u64, 1));
}

/// Through the sender Lambda: the replayed notices of an invocation get their own EMF record with
/// `replay_batch` as a property, and the counts of both records add up.
#[tokio::test]
async fn replayed_notices_are_counted_under_their_replay_batch_and_paced_by_the_bucket() {
    let env = sender_app::env().await;
    let mut s = settings(&env, false);
    s.send.rate_limits = RateLimits::parse(r#"{"default":{"per_second":0.01,"burst":2}}"#).unwrap();
    let app = app_with(&env, s, None).await;

    let replayed: Vec<String> =
        (0..4).map(|i| sender_app::job(&format!("sub_r{i}"), 0).to_string()).collect();
    let mut event = batch_from(&env, &replayed, Some("b-7")).await;
    let normal = batch(&env, &[sender_app::job("sub_n", 0).to_string()]).await;
    event.records.extend(normal.records);

    let (resp, docs) =
        notice_sender::handle_batch(&app, lambda_runtime::LambdaEvent::new(event, Default::default())).await;
    assert_eq!(failed_ids(&resp).len(), 3, "burst 2: three of five wait for a token: {docs:#?}");
    assert_eq!(docs.len(), 2, "{docs:#?}");
    let (main, replay) = (&docs[0], &docs[1]);
    assert!(main.get("replay_batch").is_none());
    assert_eq!(replay["replay_batch"], "b-7");
    assert_eq!(replay["Function"], "notice-sender");
    // A counter that counted nothing in a document is left out of it: read as zero.
    let count = |doc: &serde_json::Value, name: &str| doc.get(name).map_or(0, |v| v.as_u64().unwrap());
    let sum = |name: &str| count(main, name) + count(replay, name);
    assert_eq!((sum("NoticesSent"), sum("RateLimited"), sum("ClaimsMinted")), (2, 3, 2));
    let replay_seen = ["NoticesSent", "RateLimited"].iter().map(|n| count(replay, n)).sum::<u64>();
    assert_eq!(replay_seen, 4, "every replayed notice is counted in the batch's record");
}

/// Eight sender instances admitting at once to one domain under a generous limit: the bucket's
/// conditional increments queue in DynamoDB instead of failing each other, so contention defers
/// (almost) nothing — the read → compute → compare-and-set bucket deferred 48 % here.
#[tokio::test]
async fn eight_senders_on_one_domain_are_not_deferred_by_contention() {
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    let clock = Arc::new(AtomicI64::new(Utc::now().timestamp_micros()));
    let mailer = Arc::new(ClockedMailer { clock, sent: Mutex::new(Vec::new()) });
    let mut senders = Vec::new();
    for _ in 0..8 {
        senders.push(sender(&moto, mailer.clone()).await);
    }
    let now = Utc::now();
    let charge_at = now + Duration::hours(48);
    // fast.example: 1 000/s, burst 1 000 — only contention could defer.
    let jobs: Vec<Vec<String>> = (0..8)
        .map(|s| (0..10).map(|i| body(&format!("s{s}j{i}@fast.example"), charge_at)).collect())
        .collect();
    let attempts = senders
        .iter()
        .zip(&jobs)
        .flat_map(|(sender, bodies)| bodies.iter().map(move |b| sender.deliver(b, DeliverContext::at(now))));
    let results = futures::future::join_all(attempts).await;
    let deferred = results.iter().filter(|d| matches!(d.outcome, Outcome::RateLimited { .. })).count();
    let sent = results.iter().filter(|d| matches!(d.outcome, Outcome::Sent { .. })).count();
    eprintln!("measured: 8 senders × 10 jobs to one domain at once: {sent} sent, {deferred} deferred");
    assert!(
        deferred * 100 <= results.len(),
        "{deferred} of {} deferred by contention (> 1 %)",
        results.len()
    );
    assert_eq!(
        sent + deferred,
        results.len(),
        "{:?}",
        results.iter().map(|d| d.outcome.label()).collect::<Vec<_>>()
    );
    let keys: HashSet<String> = mailer.sent.lock().unwrap().iter().map(|(k, _, _)| k.clone()).collect();
    assert_eq!(keys.len(), mailer.sent.lock().unwrap().len(), "no notice sent twice");
}

/// The account bucket is sized from SES's own `MaxSendRate` at cold start; when SES cannot be
/// asked the sender runs without an account limit (and says so) rather than refusing to start.
#[tokio::test]
async fn the_account_rate_comes_from_ses_get_account_and_its_failure_means_no_account_limit() {
    let stub = notice_e2e::start_ses_stub(vec![notice_e2e::StubReply::Json(json!({
        "SendQuota": {"Max24HourSend": 50000.0, "MaxSendRate": 14.0, "SentLast24Hours": 3.0},
        "SendingEnabled": true
    }))])
    .await;
    let moto = start_moto().await;
    let sdk = moto.sdk_config().await;
    let asked = sdk.to_builder().endpoint_url(stub.endpoint()).build();
    let rate = aws::ses_max_send_rate(&asked).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rate, 14.0);
    assert_eq!(stub.requests(), 1);
    let limits = RateLimits::builtin().with_account_rate(Some(rate));
    let account = limits.account().unwrap();
    assert!((account.per_second - 12.6).abs() < 1e-9 && account.burst == 12, "90 % of 14/s: {account:?}");
    let domain = limits.limit_for("gmail.com").unwrap();
    assert!((domain.per_second - 6.3).abs() < 1e-9 && domain.burst == 31, "half, burst 5 s: {domain:?}");

    let down = sdk.to_builder().endpoint_url("http://127.0.0.1:1").build();
    assert!(aws::ses_max_send_rate(&down).await.is_err());
    let limits = RateLimits::builtin().with_account_rate(None);
    assert_eq!(limits.account(), None, "no rate read: no account limit");
    assert_eq!(limits.limit_for("gmail.com"), Some(notice_ledger::rate::Limit::DEFAULT));
}
