//! A typo never picks the legal window: the real sender over a real SQLite ledger, its buckets and
//! a recording mailer, under the example policy (docs/windows/us-ca-arl.json). A misspelled kind, a
//! notice without the content California requires and a withdraw of an unknown kind are invalid
//! input — nothing read, claimed, sent or spent — and dead-lettered; a lower-case jurisdiction gets
//! exactly its upper-case code's window; a jurisdiction the policy does not name is counted.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use notice_ledger::ledger::{RowReader, RowState};
use notice_ledger::links::ManageLinks;
use notice_ledger::rate::{BucketGate, RateLimits};
use notice_ledger::DeliverContext;
use notice_ledger::{
    Job, NoticeSecret, NoticeSender, Outcome, QueueAction, QueuePolicy, Receive, WindowPolicy,
};
use notice_sqlite::SqliteLedger;
use notice_testkit::faults::{FaultyLedger, RecordingMailer};
use notice_texts::Renderer;

const SECRET: &str = "policy-path-secret";
const EXAMPLE: &str = include_str!("../../../docs/windows/us-ca-arl.json");

fn charge() -> DateTime<Utc> {
    "2026-12-31T09:00:00Z".parse().unwrap()
}

fn days_before(d: i64) -> DateTime<Utc> {
    charge() - Duration::days(d)
}

/// An annual renewal notice in `jurisdiction`, carrying what California requires.
fn notice(sub: &str, kind: &str, jurisdiction: Option<&str>) -> serde_json::Value {
    let mut v = serde_json::json!({"subscription_id": sub, "period_start": "2027-01-01", "kind": kind,
        "email": format!("{sub}@example.com"), "charge_at": charge().to_rfc3339(),
        "template_data": {"plan_name": "Coffee Box", "amount": {"minor": 29000, "currency": "USD"}}});
    if let Some(j) = jurisdiction {
        v["jurisdiction"] = j.into();
    }
    v
}

struct World {
    _dir: tempfile::TempDir,
    ledger: Arc<FaultyLedger<SqliteLedger>>,
    mailer: Arc<RecordingMailer>,
    sender: NoticeSender,
}

/// The example policy, with the default rate gate on (as deployed), over SQLite.
fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteLedger::open(dir.path().join("ledger.db")).unwrap();
    let buckets = Arc::new(sqlite.buckets());
    let ledger = Arc::new(FaultyLedger::new(sqlite, None));
    let mailer = Arc::new(RecordingMailer::default());
    let sender = NoticeSender::new(
        ledger.clone(),
        mailer.clone(),
        Arc::new(Renderer::builtin(ManageLinks::new(
            "https://billing.example.com/manage",
            NoticeSecret::new("links").unwrap(),
        ))),
        WindowPolicy::from_json(EXAMPLE).unwrap(),
        NoticeSecret::new(SECRET).unwrap(),
    )
    .with_rate_gate(Some(Arc::new(BucketGate::new(buckets, RateLimits::builtin()))));
    World { _dir: dir, ledger, mailer, sender }
}

impl World {
    async fn deliver(&self, body: &serde_json::Value, at: DateTime<Utc>) -> Outcome {
        self.sender.deliver(&body.to_string(), DeliverContext::at(at)).await.outcome
    }

    async fn row_state(&self, body: &serde_json::Value) -> Option<RowState> {
        let key = Job::from_value(body, &notice_texts::Icu).unwrap().key(&NoticeSecret::new(SECRET).unwrap());
        self.ledger.inner().get(&key).await.unwrap().map(|r| r.state)
    }
}

fn dead_lettered(outcome: &Outcome) -> bool {
    let receive = Receive { key: None, count: 1, now: Utc::now(), jitter: 0.0 };
    QueuePolicy::parking().action(outcome, &receive) == QueueAction::DeadLetter
}

#[tokio::test]
async fn a_misspelled_kind_two_days_before_the_charge_is_refused_not_sent_under_the_default_window() {
    let w = world();
    let typo = notice("sub_typo", "annual_renewl", Some("US-CA"));
    let outcome = w.deliver(&typo, days_before(2)).await;
    let Outcome::Invalid(e) = &outcome else { panic!("refused as invalid, got {outcome:?}") };
    assert_eq!(e.field, "kind");
    assert!(
        e.reason.starts_with(
            r#"names an unknown kind "annual_renewl" (did you mean "annual_renewal"?); the policy knows: "#
        ),
        "{e}"
    );
    assert!(dead_lettered(&outcome), "invalid input goes to the dead-letter queue");
    assert_eq!(w.ledger.calls(), 0, "nothing read, claimed or recorded");
    assert_eq!(w.mailer.sent().len(), 0);
    let m = w.sender.metrics().drain();
    assert_eq!((m.invalid_jobs, m.unknown_kind, m.missing_content), (1, 1, 0));

    // The kind meant: too late in California (its window closed 15 days before), recorded.
    let meant = notice("sub_typo", "annual_renewal", Some("US-CA"));
    assert_eq!(w.deliver(&meant, days_before(2)).await, Outcome::Missed { closed_at: days_before(15) });
    assert_eq!(w.mailer.sent().len(), 0);
}

#[tokio::test]
async fn a_lower_case_jurisdiction_gets_its_codes_window_and_is_recorded_in_upper_case() {
    let w = world();
    let late = notice("sub_lower_late", "annual_renewal", Some("us-ca"));
    assert_eq!(
        w.deliver(&late, days_before(10)).await,
        Outcome::Missed { closed_at: days_before(15) },
        "California's 15-day floor, not the kind's own 7 days"
    );
    let early = notice("sub_lower_early", "annual_renewal", Some("uS-cA"));
    assert!(matches!(w.deliver(&early, days_before(50)).await, Outcome::Deferred { .. }), "45-day ceiling");
    let sent = notice("sub_lower", "annual_renewal", Some("us-ca"));
    assert!(matches!(w.deliver(&sent, days_before(30)).await, Outcome::Sent { .. }));
    let key = Job::from_value(&sent, &notice_texts::Icu).unwrap().key(&NoticeSecret::new(SECRET).unwrap());
    let row = w.ledger.inner().get(&key).await.unwrap().unwrap();
    assert_eq!(row.jurisdiction.as_deref(), Some("US-CA"));
    assert!(w.sender.metrics().drain().unlisted_jurisdictions.is_empty(), "US-CA is named");

    let bad = notice("sub_bad_code", "annual_renewal", Some("US_CA"));
    let Outcome::Invalid(e) = w.deliver(&bad, days_before(30)).await else { panic!("not a code") };
    assert_eq!(e.field, "jurisdiction");
    assert!(e.reason.contains("\"US_CA\""), "{e}");
}

#[tokio::test]
async fn a_notice_without_the_content_its_law_requires_is_refused_before_the_claim() {
    let w = world();
    let mut no_amount = notice("sub_no_amount", "annual_renewal", Some("US-CA"));
    no_amount["template_data"].as_object_mut().unwrap().remove("amount");
    let outcome = w.deliver(&no_amount, days_before(30)).await;
    let Outcome::Invalid(e) = &outcome else { panic!("refused, got {outcome:?}") };
    assert_eq!(e.field, "template_data");
    assert_eq!(
        e.reason,
        r#"has no "amount" (missing or empty), which a notice of kind annual_renewal in US-CA must carry (`jurisdictions.US-CA.kinds.annual_renewal.requires`)"#
    );
    assert!(dead_lettered(&outcome));
    // The built-in "subscription" never stands in for a required plan name.
    let mut no_plan = notice("sub_no_plan", "annual_renewal", Some("US-CA"));
    no_plan["template_data"]["plan_name"] = "".into();
    let Outcome::Invalid(e) = w.deliver(&no_plan, days_before(30)).await else { panic!("refused") };
    assert!(e.reason.contains("\"plan_name\""), "{e}");
    assert_eq!(w.ledger.calls(), 0, "no row: nothing claimed");
    assert_eq!(w.mailer.sent().len(), 0);
    let m = w.sender.metrics().drain();
    assert_eq!((m.invalid_jobs, m.missing_content, m.unknown_kind), (2, 2, 0));

    // Outside California the kind requires nothing: the same job is sent.
    let mut elsewhere = no_amount.clone();
    elsewhere["jurisdiction"] = "US-TX".into();
    assert!(matches!(w.deliver(&elsewhere, days_before(30)).await, Outcome::Sent { .. }));
    assert_eq!(w.row_state(&elsewhere).await, Some(RowState::Sent));
}

#[tokio::test]
async fn a_withdraw_of_an_unknown_kind_is_refused_and_writes_no_tombstone() {
    let w = world();
    let body = serde_json::json!({"action": "withdraw", "subscription_id": "sub_w", "period_start": "2027-01-01",
        "kind": "anual_renewal", "reason": "cancelled"});
    let outcome = w.sender.deliver(&body.to_string(), DeliverContext::at(days_before(30))).await.outcome;
    let Outcome::Invalid(e) = &outcome else { panic!("refused, got {outcome:?}") };
    assert!(e.reason.contains("did you mean \"annual_renewal\""), "{e}");
    assert!(dead_lettered(&outcome));
    assert_eq!(w.ledger.calls(), 0, "no tombstone under a key no job will ever have");
    assert_eq!(w.sender.metrics().drain().unknown_kind, 1);
}

#[tokio::test]
async fn a_jurisdiction_the_policy_does_not_name_gets_the_kinds_window_and_is_counted() {
    let w = world();
    // In time order: the buckets run on the deliveries' clock.
    let ca = notice("sub_ca", "annual_renewal", Some("US-CA"));
    assert!(matches!(w.deliver(&ca, days_before(30)).await, Outcome::Sent { .. }));
    let none = notice("sub_none", "annual_renewal", None);
    assert!(matches!(w.deliver(&none, days_before(30)).await, Outcome::Sent { .. }));
    let de = notice("sub_de", "renewal_notice_t72", Some("DE-BY"));
    assert!(matches!(w.deliver(&de, days_before(30)).await, Outcome::Deferred { .. }));
    let fr = notice("sub_fr", "annual_renewal", Some("fr"));
    assert!(
        matches!(w.deliver(&fr, days_before(10)).await, Outcome::Sent { .. }),
        "the kind's own window (60 to 7 days)"
    );
    assert!(matches!(w.deliver(&de, days_before(2)).await, Outcome::Sent { .. }));
    let counted = w.sender.metrics().drain().unlisted_jurisdictions;
    let counted: Vec<(&str, u64)> = counted.iter().map(|(j, n)| (j.as_str(), *n)).collect();
    assert_eq!(counted, [("DE-BY", 1), ("FR", 1)], "counted when its window is used, not while it waits");
}

#[tokio::test]
async fn a_batch_spends_no_token_on_a_message_the_policy_refuses() {
    let w = world();
    let good = notice("sub_good", "annual_renewal", Some("US-CA")).to_string();
    let typo = notice("sub_typo", "annual_renewl", Some("US-CA")).to_string();
    let mut bare = notice("sub_bare", "annual_renewal", Some("US-CA"));
    bare["template_data"] = serde_json::json!({});
    let bare = bare.to_string();
    let prefetched = w.sender.prefetch(&[&good, &typo, &bare], days_before(30)).await.expect("a batch read");
    assert_eq!(
        (prefetched.len(), prefetched.planned_tokens()),
        (1, 1),
        "only the valid job is read and paced"
    );
}
