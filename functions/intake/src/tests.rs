//! The intake against in-memory ports: every answer, what is enqueued and what is counted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use aws_lambda_events::event::lambda_function_urls::LambdaFunctionUrlRequest;
use base64::Engine as _;
use notice_ledger::intake::{EnqueueError, IntakePlanner, JobQueue};
use notice_ledger::keycheck::{KeyCheck, KeyCheckStore, MemoryKeyCheck};
use notice_ledger::keyring::KeyRing;
use notice_ledger::ledger::{LedgerRow, RowReader};
use notice_ledger::locale::TimeZone;
use notice_ledger::{Fault, Kind, LedgerError, NoticeKey, NoticeSecret};
use notice_stripe::{sign, SigningSecrets, StripeMapping};
use notice_testkit::MemoryLedger;
use serde_json::{json, Value};

use super::*;

const SECRET: &str = "whsec_intake_test_0123456789abcdef";
const KEY_SECRET: &str = "intake-key-secret-0123456789";
const NOW: i64 = 1_790_000_000;

#[derive(Default)]
struct MemQueue {
    bodies: Mutex<Vec<Value>>,
    fail: bool,
}

#[async_trait]
impl JobQueue for MemQueue {
    async fn enqueue(&self, body: &Value) -> Result<(), EnqueueError> {
        if self.fail {
            return Err(EnqueueError::new("SQS", Fault::Other, "AWS.SimpleQueueService.NonExistentQueue"));
        }
        self.bodies.lock().unwrap().push(body.clone());
        Ok(())
    }
}

struct Unreachable;

#[async_trait]
impl RowReader for Unreachable {
    async fn get(&self, _key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        Err(LedgerError::unavailable("timeout"))
    }
}

fn planner() -> IntakePlanner {
    IntakePlanner::new(
        Kind::parse("renewal_notice_t72").unwrap(),
        TimeZone::parse("UTC").unwrap(),
        KeyRing::from(NoticeSecret::new(KEY_SECRET).unwrap()),
        std::sync::Arc::new(notice_texts::Icu),
    )
}

struct Parts {
    ledger: Arc<dyn RowReader>,
    queue: Arc<MemQueue>,
    checks: Arc<dyn KeyCheckStore>,
    secrets: Secrets,
}

impl Default for Parts {
    fn default() -> Self {
        Self {
            ledger: Arc::new(MemoryLedger::new()),
            queue: Arc::new(MemQueue::default()),
            checks: Arc::new(MemoryKeyCheck::default()),
            secrets: Secrets::new(SigningSecrets::parse(SECRET).unwrap(), None),
        }
    }
}

fn app(parts: Parts) -> (IntakeApp, Arc<MemQueue>) {
    let queue = Arc::clone(&parts.queue);
    let app = IntakeApp {
        secrets: parts.secrets,
        tolerance_secs: 300,
        mapping: Arc::new(StripeMapping),
        planner: planner(),
        ledger: parts.ledger,
        key_gate: KeyGate::new(parts.checks, false),
        queue: parts.queue,
        function_name: "intake-test".into(),
    };
    (app, queue)
}

fn upcoming(email: Option<&str>) -> Value {
    json!({
        "id": "evt_1", "object": "event", "type": "invoice.upcoming",
        "data": {"object": {
            "object": "invoice", "subscription": "sub_8812", "customer_email": email,
            "collection_method": "charge_automatically",
            "amount_due": 2900, "currency": "usd", "next_payment_attempt": 1_790_816_400_i64,
            "period_end": 1_790_812_800_i64, "lines": {"data": []}
        }}
    })
}

fn signed(body: &Value) -> Request {
    let body = body.to_string().into_bytes();
    Request { method: "POST".into(), signature: Some(sign(SECRET, NOW - 5, &body)), body }
}

async fn run(app: &IntakeApp, request: &Request) -> (Answer, Tally) {
    let mut tally = Tally::default();
    let answer = receive(app, request, NOW, &mut tally).await;
    (answer, tally)
}

#[tokio::test]
async fn a_signed_renewal_is_enqueued_then_answered() {
    let (app, queue) = app(Parts::default());
    let (answer, tally) = run(&app, &signed(&upcoming(Some("ada@example.com")))).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.body["result"], "enqueued");
    assert_eq!(answer.body["messages"][0]["action"], "send");
    assert_eq!(answer.body["messages"][0]["revision"], 0);
    assert_eq!(tally, Tally { jobs: 1, ..Tally::default() });
    let bodies = queue.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["subscription_id"], "sub_8812");
    assert_eq!(bodies[0]["period_start"], "2026-10-01");
    assert_eq!(bodies[0]["template_data"]["amount"], json!({"minor": 2900, "currency": "USD"}));
    let key = notice_ledger::Job::from_value(&bodies[0], &notice_texts::Icu)
        .unwrap()
        .key(&NoticeSecret::new(KEY_SECRET).unwrap());
    assert_eq!(answer.body["messages"][0]["notice_key"], key.prefix());
}

#[tokio::test]
async fn a_bad_signature_is_400_counted_and_enqueues_nothing() {
    let (app, queue) = app(Parts::default());
    let good = signed(&upcoming(Some("ada@example.com")));
    let mut missing = good.clone();
    missing.signature = None;
    let mut tampered = good.clone();
    tampered.body = upcoming(Some("mallory@example.com")).to_string().into_bytes();
    let mut expired = good.clone();
    expired.signature = Some(sign(SECRET, NOW - 301, &good.body));
    let mut malformed = good.clone();
    malformed.signature = Some("v1=abc".into());
    for request in [missing, tampered, expired, malformed] {
        let (answer, tally) = run(&app, &request).await;
        assert_eq!(answer.status, 400, "{}", answer.body);
        assert_eq!(tally, Tally { signature_rejected: 1, ..Tally::default() });
    }
    assert!(queue.bodies.lock().unwrap().is_empty());
}

#[tokio::test]
async fn what_can_never_succeed_is_answered_without_a_retry_or_refused_at_the_door() {
    let (app, queue) = app(Parts::default());
    // A signed event without the customer's e-mail: 200 (a retry cannot help), named, counted.
    let (answer, tally) = run(&app, &signed(&upcoming(None))).await;
    assert_eq!((answer.status, answer.body["result"].as_str()), (200, Some("refused")));
    assert_eq!(answer.body["field"], "customer_email");
    assert_eq!(tally, Tally { refused: 1, ..Tally::default() });
    // Signed but not JSON.
    let body = b"not json".to_vec();
    let request = Request { method: "POST".into(), signature: Some(sign(SECRET, NOW, &body)), body };
    assert_eq!(run(&app, &request).await.0.status, 400);
    // Not a POST; too large (refused before the signature is even computed).
    let mut get = signed(&upcoming(Some("ada@example.com")));
    get.method = "GET".into();
    assert_eq!(run(&app, &get).await.0.status, 405);
    let mut large = signed(&upcoming(Some("ada@example.com")));
    large.body = vec![b' '; MAX_BODY_BYTES + 1];
    let (answer, tally) = run(&app, &large).await;
    assert_eq!((answer.status, tally.refused, tally.signature_rejected), (413, 1, 0));
    // An event the intake does not map: 200, ignored.
    let (answer, tally) =
        run(&app, &signed(&json!({"id": "evt_2", "type": "charge.succeeded", "data": {"object": {}}}))).await;
    assert_eq!((answer.status, answer.body["result"].as_str()), (200, Some("ignored")));
    assert_eq!(tally, Tally { ignored: 1, ..Tally::default() });
    assert!(queue.bodies.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_failing_ledger_queue_or_key_check_is_500_so_the_billing_system_retries() {
    let request = signed(&upcoming(Some("ada@example.com")));
    let (unreadable, queue) = app(Parts { ledger: Arc::new(Unreachable), ..Parts::default() });
    let (answer, tally) = run(&unreadable, &request).await;
    assert_eq!((answer.status, tally), (500, Tally { failed: 1, ..Tally::default() }));
    assert!(queue.bodies.lock().unwrap().is_empty());

    let (no_queue, _) =
        app(Parts { queue: Arc::new(MemQueue { fail: true, ..MemQueue::default() }), ..Parts::default() });
    let (answer, tally) = run(&no_queue, &request).await;
    assert_eq!((answer.status, tally), (500, Tally { failed: 1, ..Tally::default() }));

    // A ledger keyed with another secret: nothing is read, nothing enqueued.
    let checks = Arc::new(MemoryKeyCheck::default());
    checks
        .record_key_check(&KeyCheck::of(&NoticeSecret::new("another-ledger-secret-0123").unwrap()))
        .await
        .unwrap();
    let (mismatch, queue) = app(Parts { checks, ..Parts::default() });
    let (answer, tally) = run(&mismatch, &request).await;
    assert_eq!((answer.status, tally.failed), (500, 1));
    assert!(queue.bodies.lock().unwrap().is_empty());
    // The right secret's check: verified, and the request goes through.
    let checks = Arc::new(MemoryKeyCheck::default());
    checks.record_key_check(&KeyCheck::of(&NoticeSecret::new(KEY_SECRET).unwrap())).await.unwrap();
    let (verified, _) = app(Parts { checks, ..Parts::default() });
    assert_eq!(run(&verified, &request).await.0.status, 200);
}

struct Rolled(Mutex<u32>);

#[async_trait]
impl SecretSource for Rolled {
    async fn read(&self) -> Result<SigningSecrets, SecretError> {
        *self.0.lock().unwrap() += 1;
        Ok(SigningSecrets::parse(SECRET).unwrap())
    }
}

#[tokio::test]
async fn a_rolled_secret_is_read_again_after_a_mismatch_and_not_on_every_forgery() {
    let source = Arc::new(Rolled(Mutex::new(0)));
    let old = SigningSecrets::parse("whsec_the_old_secret_0123456789").unwrap();
    let secrets = Secrets::new(old.clone(), Some(source.clone())).refreshing_after(Duration::ZERO);
    let (app, _) = app(Parts { secrets, ..Parts::default() });
    assert_eq!(run(&app, &signed(&upcoming(Some("ada@example.com")))).await.0.status, 200);
    assert_eq!(*source.0.lock().unwrap(), 1);

    // Within the refresh interval, a mismatch reads nothing.
    let slow = Secrets::new(old, Some(source.clone()));
    let (app, _) = self::app(Parts { secrets: slow, ..Parts::default() });
    assert_eq!(run(&app, &signed(&upcoming(Some("ada@example.com")))).await.0.status, 400);
    assert_eq!(*source.0.lock().unwrap(), 1);
}

#[tokio::test]
async fn the_function_url_event_is_read_as_sent_and_answered_as_json() {
    let body = upcoming(Some("ada@example.com")).to_string();
    let signature = sign(SECRET, NOW, body.as_bytes());
    let event = |encoded: bool| -> LambdaFunctionUrlRequest {
        let payload =
            if encoded { base64::engine::general_purpose::STANDARD.encode(&body) } else { body.clone() };
        serde_json::from_value(json!({
            "version": "2.0", "rawPath": "/", "rawQueryString": "",
            "headers": {"content-type": "application/json", "Stripe-Signature": signature},
            "requestContext": {"http": {"method": "POST", "path": "/"}, "timeEpoch": 0},
            "body": payload, "isBase64Encoded": encoded
        }))
        .unwrap()
    };
    for encoded in [false, true] {
        let request = http::request(&event(encoded)).unwrap();
        assert_eq!(request.body, body.as_bytes(), "encoded: {encoded}");
        assert_eq!(request.signature.as_deref(), Some(signature.as_str()));
        assert_eq!(request.method, "POST");
    }
    let mut bad = event(true);
    bad.body = Some("***".into());
    assert_eq!(http::request(&bad).unwrap_err().status, 400);
    let mut huge = event(true);
    huge.body = Some("A".repeat(MAX_BODY_BYTES * 2));
    assert_eq!(http::request(&huge).unwrap_err().status, 413);

    let response = http::response(&Answer { status: 200, body: json!({"result": "ignored"}) });
    assert_eq!(response.status_code, 200);
    assert_eq!(response.headers["content-type"], "application/json");
    assert_eq!(response.body.as_deref(), Some(r#"{"result":"ignored"}"#));
}

#[test]
fn one_emf_document_names_every_counter() {
    let doc = Tally { jobs: 2, signature_rejected: 1, ..Tally::default() }.to_emf("notice-ledger-intake", 5);
    assert_eq!(doc["Function"], "notice-ledger-intake");
    assert_eq!(
        (doc["IntakeJobsEnqueued"].as_u64(), doc["IntakeSignatureRejected"].as_u64()),
        (Some(2), Some(1))
    );
    let names: Vec<&str> = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["Name"].as_str())
        .collect();
    for name in ["IntakeWithdrawsEnqueued", "IntakeIgnored", "IntakeRefused", "IntakeFailed"] {
        assert!(names.contains(&name), "{names:?}");
    }
}

#[test]
fn the_kind_must_be_one_the_policy_in_force_sends() {
    use notice_texts::notices::NoticeConfig;
    let strict = NoticeConfig::builtin(Some(
        r#"{"kinds":{"renewal_notice_t72":{"opens_hours_before":72,"closes_hours_before":24},
            "annual_renewal":{"opens_hours_before":1080,"closes_hours_before":360}}}"#,
    ))
    .unwrap_or_else(|p| panic!("{p:?}"));
    assert!(settings::kinds(Some(Kind::parse("annual_renewal").unwrap()), &strict).is_ok());
    let e =
        settings::kinds(Some(Kind::parse("renewal_notice_t27").unwrap()), &strict).unwrap_err().to_string();
    assert!(e.contains("NOTICE_INTAKE_KIND") && e.contains("renewal_notice_t72"), "{e}");
    // The built-in default policy sends any kind, and without obligations one must be stated.
    let default = NoticeConfig::builtin(None).unwrap_or_else(|p| panic!("{p:?}"));
    assert!(settings::kinds(Some(Kind::parse("anything_goes").unwrap()), &default).is_ok());
    let e = settings::kinds(None, &default).unwrap_err().to_string();
    assert!(e.contains("NOTICE_INTAKE_KIND"), "{e}");
}

/// The signing secret's store unreachable: the read fails with the store's name and the kind the
/// SDK's typed error gave, and the start-up error keeps it whole.
#[tokio::test]
async fn an_unreachable_secret_store_is_a_typed_failure() {
    use aws_sdk_secretsmanager::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_secretsmanager::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("t", "t", None, None, "t"))
        .endpoint_url("http://127.0.0.1:1")
        .retry_config(aws_sdk_secretsmanager::config::retry::RetryConfig::disabled())
        .build();
    let source = aws::SecretsManagerSource::new(aws_sdk_secretsmanager::Client::from_conf(config), "signing");
    let err = source.read().await.unwrap_err();
    let SecretError::Unreadable(ref unreadable) = err else { panic!("{err:?}") };
    assert_eq!(unreadable.service, "Secrets Manager");
    assert_eq!(unreadable.fault, Fault::Unreachable("connection refused"), "{err}");
    let config_error = err.for_setting(settings::SIGNING_SECRET_ARN_VAR);
    assert!(config_error.dependency().is_some(), "{config_error}");
}

/// Customers as Stripe's API would answer: `cus_ada` in California, `cus_gone` deleted, any
/// other id unreachable.
struct StripeCustomers;

#[async_trait]
impl notice_ledger::intake::CustomerSource for StripeCustomers {
    async fn customer(&self, id: &str) -> Result<notice_ledger::intake::Customer, LookupError> {
        match id {
            "cus_ada" => Ok(notice_ledger::intake::Customer {
                email: Some("ada@example.com".into()),
                locale: Some("en-US".into()),
                jurisdiction: Some("US-CA".into()),
            }),
            "cus_gone" => {
                Err(LookupError::NotFound { id: id.into(), reason: "the customer is deleted".into() })
            }
            _ => Err(LookupError::Failed {
                service: "Stripe API",
                fault: Fault::TimedOut,
                detail: "no complete answer within 5s".into(),
            }),
        }
    }
}

const PRICED: &str = r#"{
  "kinds": {
    "renewal_notice_t72": { "opens_hours_before": 72, "closes_hours_before": 24 },
    "price_change": { "opens_hours_before": 720, "closes_hours_before": 168 }
  },
  "obligations": {
    "default": [ { "rule": "reminder", "on": "renewal", "kind": "renewal_notice_t72" } ],
    "jurisdictions": { "US-CA": [ { "rule": "ca-price-change", "on": "price_change", "kind": "price_change" } ] }
  }
}"#;

/// A subscription of `customer` whose price went from 29.00 to 39.00, from 1 Oct 2026.
fn price_changed(customer: &str) -> Value {
    let item = |amount: i64| {
        json!({"object": "subscription_item", "quantity": 1, "current_period_end": 1_790_812_800_i64,
               "price": {"unit_amount": amount, "currency": "usd", "recurring": {"interval": "month", "interval_count": 1}}})
    };
    json!({
        "id": "evt_2", "object": "event", "type": "customer.subscription.updated",
        "data": {
            "object": {"id": "sub_8812", "object": "subscription", "customer": customer,
                       "cancel_at_period_end": false, "cancel_at": null, "items": {"data": [item(3900)]}},
            "previous_attributes": {"items": {"data": [item(2900)]}}
        }
    })
}

fn priced_app(parts: Parts) -> (IntakeApp, Arc<MemQueue>) {
    let (mut app, queue) = app(parts);
    let policy = notice_ledger::WindowPolicy::from_json(PRICED).unwrap();
    app.planner = IntakePlanner::with_kinds(
        notice_ledger::intake::Kinds::from_policy(&policy, None).unwrap(),
        TimeZone::parse("UTC").unwrap(),
        KeyRing::from(NoticeSecret::new(KEY_SECRET).unwrap()),
        std::sync::Arc::new(notice_texts::Icu),
    )
    .with_customers(Arc::new(StripeCustomers));
    (app, queue)
}

#[tokio::test]
async fn a_price_change_is_enqueued_with_the_customers_facts_and_stripe_down_is_a_500() {
    let (app, queue) = priced_app(Parts::default());
    let (answer, tally) = run(&app, &signed(&price_changed("cus_ada"))).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!((tally.withdraws, tally.jobs), (1, 1));
    let bodies = queue.bodies.lock().unwrap().clone();
    assert_eq!(bodies[1]["kind"], "price_change");
    assert_eq!(bodies[1]["email"], "ada@example.com");
    assert_eq!(bodies[1]["template_data"]["amount"], json!({"minor": 3900, "currency": "USD"}));

    // Stripe's API unreachable: nothing enqueued, 500 so that Stripe retries.
    let (app, queue) = priced_app(Parts::default());
    let (answer, tally) = run(&app, &signed(&price_changed("cus_down"))).await;
    assert_eq!(answer.status, 500, "{}", answer.body);
    assert_eq!(tally.failed, 1);
    assert!(queue.bodies.lock().unwrap().is_empty());

    // A deleted customer: refused (200), naming the field.
    let (app, _) = priced_app(Parts::default());
    let (answer, tally) = run(&app, &signed(&price_changed("cus_gone"))).await;
    assert_eq!((answer.status, answer.body["field"].as_str()), (200, Some("customer")), "{}", answer.body);
    assert_eq!(tally.refused, 1);
}

/// Subscription records as Stripe's API would answer, read through `notice_stripe::api`'s own
/// reading of its subscription object: `sub_8812` began on 1 October 2025 (monthly); any other id
/// unreachable.
struct StripeSubscriptions;

#[async_trait]
impl notice_ledger::intake::SubscriptionSource for StripeSubscriptions {
    async fn subscription(&self, id: &str) -> Result<notice_ledger::intake::Subscription, LookupError> {
        match id {
            "sub_8812" => Ok(notice_stripe::api::subscription(&json!({
                "id": "sub_8812", "object": "subscription", "start_date": 1_759_276_800_i64,
                "items": {"data": [{"price": {"recurring": {"interval": "month", "interval_count": 1}}}]}
            }))),
            _ => Err(LookupError::Failed {
                service: "Stripe API",
                fault: Fault::Unreachable("no connection"),
                detail: "connection refused".into(),
            }),
        }
    }
}

const ANNIVERSARY: &str = r#"{
  "kinds": {
    "renewal_notice_t72": { "opens_hours_before": 72, "closes_hours_before": 24 },
    "anniversary_reminder": { "opens_hours_before": 960, "closes_hours_before": 600 }
  },
  "obligations": {
    "default": [
      { "rule": "reminder", "on": "renewal", "kind": "renewal_notice_t72" },
      { "rule": "anniversary", "on": "renewal", "anniversary_months": 12, "kind": "anniversary_reminder" }
    ]
  }
}"#;

/// Colorado's 12-month reminder through the handler: the upcoming invoice of the charge on
/// 1 Sept 2026 (no start stated) has the start read from Stripe, and enqueues the reminder before
/// that charge and the anniversary reminder of 1 Oct 2026; Stripe unreachable answers 500 and
/// enqueues nothing, so that Stripe delivers the event again.
#[tokio::test]
async fn an_anniversary_reminder_is_enqueued_a_renewal_ahead_with_the_start_from_stripe() {
    let (mut app, queue) = app(Parts::default());
    let policy = notice_ledger::WindowPolicy::from_json(ANNIVERSARY).unwrap();
    app.planner = IntakePlanner::with_kinds(
        notice_ledger::intake::Kinds::from_policy(&policy, None).unwrap(),
        TimeZone::parse("UTC").unwrap(),
        KeyRing::from(NoticeSecret::new(KEY_SECRET).unwrap()),
        Arc::new(notice_texts::Icu),
    )
    .with_subscriptions(Arc::new(StripeSubscriptions));
    assert!(app.planner.counts_anniversaries());
    let mut september = upcoming(Some("ada@example.com"));
    // 1 Sept 2026 00:00 UTC opens the period; charged an hour later; a monthly line.
    september["data"]["object"]["period_end"] = json!(1_788_220_800_i64);
    september["data"]["object"]["next_payment_attempt"] = json!(1_788_224_400_i64);
    september["data"]["object"]["lines"] = json!({"data": [{"type": "subscription", "proration": false,
        "period": {"start": 1_788_220_800_i64, "end": 1_790_812_800_i64},
        "price": {"recurring": {"interval": "month", "interval_count": 1}}}]});
    let (answer, tally) = run(&app, &signed(&september)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(tally.jobs, 2, "{}", answer.body);
    let bodies = queue.bodies.lock().unwrap().clone();
    let kinds: Vec<(&str, &str)> =
        bodies.iter().map(|b| (b["kind"].as_str().unwrap(), b["period_start"].as_str().unwrap())).collect();
    assert_eq!(kinds, [("renewal_notice_t72", "2026-09-01"), ("anniversary_reminder", "2026-10-01")]);
    assert_eq!(bodies[1]["obligation"], "default/anniversary");

    let mut other = september.clone();
    other["data"]["object"]["subscription"] = json!("sub_elsewhere");
    let before = queue.bodies.lock().unwrap().len();
    let (answer, _) = run(&app, &signed(&other)).await;
    assert_eq!(answer.status, 500, "{}", answer.body);
    assert_eq!(queue.bodies.lock().unwrap().len(), before, "nothing enqueued when the start cannot be read");
}
