//! The shared per-domain send rate, kept in DynamoDB (moto): two sender instances draining a
//! backlog to one domain never exceed the limit in any window, and every notice goes out once.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use notice_dynamodb::ledger::DynamoLedger;
use notice_dynamodb::rate::DynamoRateGate;
use notice_e2e::start_moto;
use notice_ledger::links::ManageLinks;
use notice_ledger::mailer::{Mailer, OutgoingMail, SendResult};
use notice_ledger::metrics::Metrics;
use notice_ledger::rate::RateLimits;
use notice_ledger::render::Renderer;
use notice_ledger::{Mode, NoticeSecret, NoticeSender, Outcome, SendBudget, WindowPolicy};
use notice_setup::aws;
use serde_json::json;

const TABLE: &str = "notices";
const INTERVAL: i64 = 10;
const LIMIT: usize = 3;

/// Accepts everything and notes the (simulated) second each message went out.
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

#[tokio::test]
async fn two_senders_never_exceed_a_domains_limit_and_send_everything_once() {
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    let sdk = moto.sdk_config().await;
    let limits = RateLimits::from_json(&format!(
        r#"{{"interval_secs":{INTERVAL},"default_per_interval":1000,"domains":{{"slow.example":{LIMIT}}}}}"#
    ))
    .unwrap();

    let t0: DateTime<Utc> = "2026-12-02T12:00:00Z".parse().unwrap();
    let clock = Arc::new(AtomicI64::new(t0.timestamp()));
    let mailer = Arc::new(ClockedMailer { clock: clock.clone(), sent: Mutex::new(Vec::new()) });
    let secret = NoticeSecret::new("rate-secret").unwrap();
    let sender = |_: usize| NoticeSender {
        ledger: Arc::new(DynamoLedger::new(aws::dynamodb_client(&sdk), TABLE)),
        mailer: mailer.clone(),
        renderer: Arc::new(Renderer::new(ManageLinks::new("https://b.example/m", secret.derive_subkey("l")))),
        policy: WindowPolicy::default(),
        secret: secret.clone(),
        mode: Mode::Enforce,
        budget: SendBudget::default(),
        metrics: Arc::new(Metrics::default()),
        rate_gate: Some(Arc::new(DynamoRateGate::new(aws::dynamodb_client(&sdk), TABLE, limits.clone()))),
    };
    let senders = [sender(0), sender(1)];

    let charge_at = (t0 + Duration::hours(48)).to_rfc3339();
    let mut pending: Vec<String> = (0..12)
        .map(|i| format!("sub_{i}@slow.example"))
        .chain((0..4).map(|i| format!("sub_{i}@fast.example")))
        .map(|email| {
            json!({"subscription_id": email.replace('@', "_"), "period_start": "2026-12-01", "kind": "renewal_notice_t72",
                "email": email, "charge_at": charge_at})
            .to_string()
        })
        .collect();
    let total = pending.len();

    let mut rate_limited = 0;
    // Four rounds per window; both senders try every pending job each round.
    for round in 0..40 {
        if pending.is_empty() {
            break;
        }
        let now = t0 + Duration::milliseconds(round * INTERVAL * 1000 / 4);
        clock.store(now.timestamp(), Ordering::SeqCst);
        let attempts =
            pending.iter().flat_map(|body| senders.iter().map(move |s| s.deliver_body(body, now, None)));
        let results = futures::future::join_all(attempts).await;
        let mut done = HashSet::new();
        for (i, d) in results.iter().enumerate() {
            match &d.outcome {
                Outcome::Sent { .. } | Outcome::Suppressed { .. } => {
                    done.insert(i / senders.len());
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
    assert!(rate_limited > 0, "the gate deferred work");

    let sent = mailer.sent.lock().unwrap().clone();
    assert_eq!(sent.len(), total, "every notice exactly once");
    assert_eq!(sent.iter().map(|(k, _, _)| k).collect::<HashSet<_>>().len(), total);
    let mut per_window: BTreeMap<i64, usize> = BTreeMap::new();
    for (_, to, at) in &sent {
        if to.ends_with("@slow.example") {
            *per_window.entry(at.div_euclid(INTERVAL)).or_default() += 1;
        }
    }
    let scan = moto.dynamodb().await.scan().table_name(TABLE).send().await.unwrap();
    let counters: Vec<String> = scan
        .items()
        .iter()
        .filter(|i| i["notice_key"].as_s().unwrap().starts_with("rate#"))
        .map(|i| format!("{:?}={:?}", i["notice_key"], i.get("admitted")))
        .collect();
    assert!(
        per_window.values().all(|n| *n <= LIMIT),
        "sends per window: {per_window:?} counters {counters:?}"
    );
    assert_eq!(per_window.values().sum::<usize>(), 12);
    assert!(per_window.len() >= 4, "12 sends at 3 per window need at least 4 windows: {per_window:?}");
}
