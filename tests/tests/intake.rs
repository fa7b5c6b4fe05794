//! The Stripe intake end to end on the emulator: Stripe's own event fixtures (tests/fixtures/stripe),
//! signed as Stripe signs them, through the Function URL handler, whose messages land on moto's
//! SQS queue and are delivered by the real sender against moto's DynamoDB and SES.
//!
//! The stories the intake exists for: the same `invoice.upcoming` delivered three times, before
//! and after a cancellation, in either order — one notice or one withdraw, never both sent; and a
//! price change before and after the first notice — one corrected notice per distinct amount, a
//! redelivered change mints none; a Stripe price change (`customer.subscription.updated`) with the
//! customer read from a stand-in of Stripe's API, sent once, and answered 500 while the API is
//! down; Colorado's anniversary reminder planned a renewal ahead, parked in EventBridge Scheduler,
//! and withdrawn by a cancellation; a weekly plan's reminder planned by every week's event in its
//! lead, sent once inside its window, parked when further ahead, and withdrawn by a cancellation;
//! a Californian's 60-day trial planned from `customer.subscription.created`, parked when its
//! window is weeks ahead, and sent once inside it however often the event and the upcoming
//! invoice at the trial's end arrive.

use std::sync::Arc;

use aws_lambda_events::event::lambda_function_urls::LambdaFunctionUrlRequest;
use chrono::{DateTime, Duration, Utc};
use lambda_runtime::{Context, LambdaEvent};
use notice_dynamodb::{DynamoKeyCheck, DynamoLedger};
use notice_e2e::sender_app::{self, Env, SECRET, TABLE};
use notice_intake::aws::SecretsManagerSource;
use notice_intake::{IntakeApp, KeyGate, SecretSource, Secrets};
use notice_ledger::intake::{IntakePlanner, Kinds};
use notice_ledger::keycheck::{KeyCheck, KeyCheckStore};
use notice_ledger::keyring::KeyRing;
use notice_ledger::ledger::{RowReader, RowState};
use notice_ledger::locale::TimeZone;
use notice_ledger::{Identity, Kind, NoticeSecret};
use notice_sender::SenderApp;
use notice_setup::aws;
use notice_stripe::StripeMapping;
use serde_json::{json, Value};

const WHSEC: &str = "whsec_e2e_endpoint_secret_0123456789";
const KIND: &str = "renewal_notice_t72";

fn fixture(name: &str) -> Value {
    let path = notice_e2e::workspace_root().join("tests/fixtures/stripe").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn set(value: &mut Value, pointer: &str, new: Value) {
    *value.pointer_mut(pointer).unwrap_or_else(|| panic!("the fixture has {pointer}")) = new;
}

/// `event.json`'s envelope around `object` (README: what the tests set).
fn event(id: &str, event_type: &str, object: Value) -> Value {
    let mut e = fixture("event.json");
    e["id"] = json!(id);
    e["type"] = json!(event_type);
    e["data"]["object"] = object;
    e
}

/// The renewal ahead: the charge 48 h from now (inside the default 72 h – 24 h window), the new
/// period opening an hour before it.
struct Renewal {
    sub: String,
    charge_at: DateTime<Utc>,
    period_start_at: DateTime<Utc>,
}

impl Renewal {
    fn new(sub: &str) -> Self {
        Self::in_hours(sub, 48)
    }

    /// The charge `hours` from now.
    fn in_hours(sub: &str, hours: i64) -> Self {
        let charge_at = Utc::now() + Duration::hours(hours);
        Self { sub: sub.into(), charge_at, period_start_at: charge_at - Duration::hours(1) }
    }

    fn period_start(&self) -> String {
        self.period_start_at.format("%Y-%m-%d").to_string()
    }

    fn email(&self) -> String {
        format!("{}@example.com", self.sub)
    }

    /// Stripe's invoice fixture (2025 shape) as this renewal's `invoice.upcoming`.
    fn upcoming(&self, amount_due: i64) -> Value {
        let mut inv = fixture("invoice.json");
        set(&mut inv, "/parent/subscription_details/subscription", json!(self.sub));
        set(&mut inv, "/customer_email", json!(self.email()));
        set(&mut inv, "/next_payment_attempt", json!(self.charge_at.timestamp()));
        set(&mut inv, "/amount_due", json!(amount_due));
        set(&mut inv, "/lines/data/0/parent/type", json!("subscription_item_details"));
        set(&mut inv, "/lines/data/0/parent/subscription_item_details/proration", json!(false));
        set(
            &mut inv,
            "/lines/data/0/period",
            json!({"start": self.period_start_at.timestamp(), "end": self.period_start_at.timestamp() + 2_678_400}),
        );
        event("evt_upcoming", "invoice.upcoming", inv)
    }

    /// The 2024-shape invoice fixture as the same renewal (an account on an older API version).
    fn upcoming_2024(&self, amount_due: i64) -> Value {
        let mut inv = fixture("invoice.2024-06.json");
        set(&mut inv, "/subscription", json!(self.sub));
        set(&mut inv, "/customer_email", json!(self.email()));
        set(&mut inv, "/next_payment_attempt", json!(self.charge_at.timestamp()));
        set(&mut inv, "/amount_due", json!(amount_due));
        set(&mut inv, "/lines/data/0/type", json!("subscription"));
        set(
            &mut inv,
            "/lines/data/0/period",
            json!({"start": self.period_start_at.timestamp(), "end": self.period_start_at.timestamp() + 2_678_400}),
        );
        event("evt_upcoming_2024", "invoice.upcoming", inv)
    }

    /// Stripe's subscription fixture (2025 shape) cancelled at the end of the current period.
    fn cancel_at_period_end(&self) -> Value {
        let mut sub = fixture("subscription.json");
        set(&mut sub, "/id", json!(self.sub));
        set(&mut sub, "/cancel_at_period_end", json!(true));
        set(&mut sub, "/items/data/0/current_period_end", json!(self.period_start_at.timestamp()));
        event("evt_cancel", "customer.subscription.updated", sub)
    }

    fn identity(&self, revision: u64) -> Identity {
        self.identity_of(KIND, revision)
    }

    fn identity_of(&self, kind: &str, revision: u64) -> Identity {
        Identity::new(&self.sub, &self.period_start(), kind, revision).unwrap()
    }
}

struct Stack {
    env: Env,
    intake: IntakeApp,
    sender: SenderApp,
}

async fn stack() -> Stack {
    stack_with(Kinds::Stated(Kind::parse(KIND).unwrap()), None).await
}

/// The US example configuration (examples/notices-us): its obligations choose the intake's kinds,
/// its texts and windows are the sender's.
fn us_example() -> notice_texts::notices::NoticeConfig {
    let dir = notice_e2e::workspace_root().join("examples/notices-us");
    notice_setup::notices::load_local(&notice_setup::notices::ConfigSpec::Dir(dir))
        .expect("the US example loads")
}

/// The stack with the intake's kinds, and the sender under `config` (the built-in texts without).
async fn stack_with(kinds: Kinds, config: Option<notice_texts::notices::NoticeConfig>) -> Stack {
    let env = sender_app::env().await;
    let sdk = env.moto.sdk_config().await;
    // The endpoint secret lives in Secrets Manager, read as the deployed intake reads it.
    let created = aws_sdk_secretsmanager::Client::new(&sdk)
        .create_secret()
        .name("stripe-webhook")
        .secret_string(WHSEC)
        .send()
        .await
        .expect("CreateSecret");
    let source = SecretsManagerSource::new(
        aws_sdk_secretsmanager::Client::new(&sdk),
        created.arn().expect("the secret's ARN"),
    );
    let secrets = source.read().await.expect("the endpoint secret reads back");
    let dynamodb = aws::dynamodb_client(&sdk);
    let intake = IntakeApp {
        secrets: Secrets::new(secrets, Some(Arc::new(source))),
        tolerance_secs: 300,
        mapping: Arc::new(StripeMapping),
        planner: IntakePlanner::with_kinds(
            kinds,
            TimeZone::parse("UTC").unwrap(),
            KeyRing::from(NoticeSecret::new(SECRET).unwrap()),
            std::sync::Arc::new(notice_texts::Icu),
        ),
        ledger: Arc::new(DynamoLedger::new(dynamodb.clone(), TABLE)),
        key_gate: KeyGate::new(Arc::new(DynamoKeyCheck::new(dynamodb, TABLE)), false),
        queue: Arc::new(notice_sqs::Producer::new(env.moto.sqs().await, env.queue_url.clone())),
        function_name: "notice-e2e-intake".into(),
    };
    let mut settings = sender_app::settings(&env, true);
    if let Some(config) = config {
        settings.send.policy = config.policy().clone();
        let links = notice_ledger::links::ManageLinks::new(
            "https://billing.example.com/manage",
            NoticeSecret::new(SECRET).unwrap().derive_subkey("l"),
        );
        settings.send.renderer = Arc::new(notice_texts::Renderer::new(Arc::new(config), links));
    }
    let sender = sender_app::app_with(&env, settings, None).await;
    Stack { env, intake, sender }
}

/// One webhook delivery through the Function URL handler, signed as Stripe signs it now.
async fn deliver(stack: &Stack, event: &Value) -> (i64, Value) {
    let body = event.to_string();
    let signature = notice_stripe::sign(WHSEC, Utc::now().timestamp(), body.as_bytes());
    let request: LambdaFunctionUrlRequest = serde_json::from_value(json!({
        "version": "2.0", "rawPath": "/", "rawQueryString": "",
        "headers": {"content-type": "application/json; charset=utf-8", "stripe-signature": signature,
                    "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
        "requestContext": {"http": {"method": "POST", "path": "/", "sourceIp": "54.187.174.169"}, "timeEpoch": 0},
        "body": body, "isBase64Encoded": false
    }))
    .unwrap();
    let response = notice_intake::http::handle(&stack.intake, LambdaEvent::new(request, Context::default()))
        .await
        .expect("the handler answers");
    let answer: Value = serde_json::from_str(response.body.as_deref().unwrap_or("null")).unwrap();
    (response.status_code, answer)
}

async fn deliver_ok(stack: &Stack, event: &Value) -> Value {
    let (status, answer) = deliver(stack, event).await;
    assert_eq!(status, 200, "{answer}");
    answer
}

/// Everything on the reminder queue, handed to the real sender one message per invocation (in a
/// batch, a copy that meets its twin's fresh claim is `in_flight` and hidden for the claim
/// lifetime — correct, and a minute the test need not wait).
async fn drain(stack: &Stack) {
    let sqs = stack.env.moto.sqs().await;
    loop {
        let out = sqs
            .receive_message()
            .queue_url(&stack.env.queue_url)
            .max_number_of_messages(1)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        if out.messages().is_empty() {
            return;
        }
        let records: Vec<Value> = out.messages().iter().map(sender_app::record).collect();
        let batch = serde_json::from_value(json!({ "Records": records })).unwrap();
        let response = sender_app::invoke(&stack.sender, batch).await;
        assert!(response.batch_item_failures.is_empty(), "{:?}", sender_app::failed_ids(&response));
    }
}

/// Notices moto's SES accepted for this renewal's customer.
async fn mails_to(stack: &Stack, renewal: &Renewal) -> Vec<Value> {
    let email = renewal.email();
    stack.env.moto.sent_messages().await.into_iter().filter(|m| m.to_string().contains(&email)).collect()
}

async fn state(stack: &Stack, renewal: &Renewal, revision: u64) -> Option<RowState> {
    let key = renewal.identity(revision).derive_key(&NoticeSecret::new(SECRET).unwrap());
    sender_app::state(&stack.env, &key).await
}

async fn digest(stack: &Stack, renewal: &Renewal, revision: u64) -> Option<String> {
    let key = renewal.identity(revision).derive_key(&NoticeSecret::new(SECRET).unwrap());
    sender_app::ledger(&stack.env).await.get(&key).await.unwrap().and_then(|r| r.content_digest)
}

fn revisions(answer: &Value) -> Vec<(String, u64)> {
    answer["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| (m["action"].as_str().unwrap().to_owned(), m["revision"].as_u64().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

fn send(revision: u64) -> (String, u64) {
    ("send".into(), revision)
}

fn withdraw(revision: u64) -> (String, u64) {
    ("withdraw".into(), revision)
}

#[tokio::test]
async fn three_deliveries_and_a_cancellation_in_either_order_send_one_notice_or_one_withdraw() {
    let stack = stack().await;

    // Upcoming twice, the cancellation, the sender, the upcoming a third time: the withdraw and
    // the job meet at the sender, and exactly one of them wins.
    let a = Renewal::new("sub_a_upcoming_first");
    assert_eq!(revisions(&deliver_ok(&stack, &a.upcoming(2900)).await), [send(0)]);
    assert_eq!(revisions(&deliver_ok(&stack, &a.upcoming(2900)).await), [send(0)]);
    assert_eq!(revisions(&deliver_ok(&stack, &a.cancel_at_period_end()).await), [withdraw(0)]);
    drain(&stack).await;
    let third = deliver_ok(&stack, &a.upcoming(2900)).await;
    drain(&stack).await;
    let mails = mails_to(&stack, &a).await.len();
    match state(&stack, &a, 0).await {
        Some(RowState::Sent) => {
            assert_eq!(mails, 1, "the job won: one notice");
            assert_eq!(revisions(&third), [send(0)], "the third delivery is the same notice, suppressed");
        }
        Some(RowState::Withdrawn) => {
            assert_eq!(mails, 0, "the withdraw won: no notice");
            assert_eq!(third["result"], "ignored", "{third}");
        }
        other => panic!("revision 0 is {other:?}"),
    }
    assert_eq!(state(&stack, &a, 1).await, None, "never a second notice");

    // The cancellation first (Stripe delivers in any order): its tombstone waits, and three
    // upcoming-invoice deliveries after it mint nothing.
    let b = Renewal::new("sub_b_cancel_first");
    assert_eq!(revisions(&deliver_ok(&stack, &b.cancel_at_period_end()).await), [withdraw(0)]);
    drain(&stack).await;
    for _ in 0..3 {
        let answer = deliver_ok(&stack, &b.upcoming(2900)).await;
        assert_eq!(answer["result"], "ignored", "{answer}");
    }
    drain(&stack).await;
    assert!(mails_to(&stack, &b).await.is_empty());
    assert_eq!(state(&stack, &b, 0).await, Some(RowState::Withdrawn));
    assert_eq!(state(&stack, &b, 1).await, None);

    // The notice went out first; the cancellation after it guards only what might still be
    // queued (revision 1); the later deliveries are the sent notice, suppressed.
    let c = Renewal::new("sub_c_sent_then_cancelled");
    deliver_ok(&stack, &c.upcoming(2900)).await;
    drain(&stack).await;
    assert_eq!(revisions(&deliver_ok(&stack, &c.cancel_at_period_end()).await), [withdraw(1)]);
    assert_eq!(revisions(&deliver_ok(&stack, &c.upcoming(2900)).await), [send(0)]);
    assert_eq!(revisions(&deliver_ok(&stack, &c.upcoming_2024(2900)).await), [send(0)], "either API shape");
    drain(&stack).await;
    assert_eq!(mails_to(&stack, &c).await.len(), 1);
    assert_eq!(state(&stack, &c, 0).await, Some(RowState::Sent));
    assert_eq!(state(&stack, &c, 1).await, Some(RowState::Withdrawn));
    assert!(sender_app::dead_letter_reasons(&stack.env).await.is_empty());
}

#[tokio::test]
async fn a_price_change_after_the_first_notice_is_one_corrected_notice_and_redeliveries_mint_none() {
    let stack = stack().await;
    // The ledger's key check is recorded (a sender has started): the intake verifies it.
    DynamoKeyCheck::new(aws::dynamodb_client(&stack.env.moto.sdk_config().await), TABLE)
        .record_key_check(&KeyCheck::of(&NoticeSecret::new(SECRET).unwrap()))
        .await
        .unwrap();
    let r = Renewal::new("sub_price_after");
    assert_eq!(revisions(&deliver_ok(&stack, &r.upcoming(2900)).await), [send(0)]);
    drain(&stack).await;
    assert_eq!(mails_to(&stack, &r).await.len(), 1);

    // The new price: revision 1, once, however often it is delivered.
    assert_eq!(revisions(&deliver_ok(&stack, &r.upcoming(3900)).await), [send(1)]);
    drain(&stack).await;
    assert_eq!(revisions(&deliver_ok(&stack, &r.upcoming(3900)).await), [send(1)]);
    // The old price, delivered late: the notice it already is.
    assert_eq!(revisions(&deliver_ok(&stack, &r.upcoming(2900)).await), [send(0)]);
    drain(&stack).await;
    let mails = mails_to(&stack, &r).await;
    assert_eq!(mails.len(), 2, "one notice per distinct amount: {mails:?}");
    assert_eq!(
        (state(&stack, &r, 0).await, state(&stack, &r, 1).await),
        (Some(RowState::Sent), Some(RowState::Sent))
    );
    assert_ne!(digest(&stack, &r, 0).await, digest(&stack, &r, 1).await);
    assert_eq!(state(&stack, &r, 2).await, None);
    assert!(sender_app::dead_letter_reasons(&stack.env).await.is_empty());
}

#[tokio::test]
async fn a_price_change_before_the_first_notice_is_claimed_is_the_documented_race_never_two_notices() {
    let stack = stack().await;
    let r = Renewal::new("sub_price_before");
    // Both amounts planned before the sender ran: both are revision 0, with different content.
    assert_eq!(revisions(&deliver_ok(&stack, &r.upcoming(2900)).await), [send(0)]);
    assert_eq!(revisions(&deliver_ok(&stack, &r.upcoming(3900)).await), [send(0)]);
    drain(&stack).await;
    assert_eq!(mails_to(&stack, &r).await.len(), 1, "the first claimed goes out, alone");
    let reasons = sender_app::dead_letter_reasons(&stack.env).await;
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains("payload conflict"), "{reasons:?}");

    // Redelivered after the claim, each amount follows the rule: the one that went out is
    // suppressed, the other becomes revision 1 — one notice per distinct amount, in the end.
    let sent = digest(&stack, &r, 0).await;
    let first = deliver_ok(&stack, &r.upcoming(2900)).await;
    let second = deliver_ok(&stack, &r.upcoming(3900)).await;
    let mut got = [revisions(&first), revisions(&second)].concat();
    got.sort();
    assert_eq!(got, [send(0), send(1)], "{first} {second}");
    drain(&stack).await;
    assert_eq!(mails_to(&stack, &r).await.len(), 2);
    assert_eq!(digest(&stack, &r, 0).await, sent, "revision 0 keeps the terms it announced");
    assert_eq!(state(&stack, &r, 1).await, Some(RowState::Sent));
}

#[tokio::test]
async fn a_forged_or_stale_request_enqueues_nothing() {
    let stack = stack().await;
    let r = Renewal::new("sub_forged");
    let body = r.upcoming(2900).to_string();
    let forged =
        notice_stripe::sign("whsec_not_the_endpoints_secret_0123", Utc::now().timestamp(), body.as_bytes());
    let stale = notice_stripe::sign(WHSEC, Utc::now().timestamp() - 301, body.as_bytes());
    for signature in [Some(forged), Some(stale), None] {
        let mut headers = serde_json::Map::new();
        if let Some(s) = signature {
            headers.insert("stripe-signature".into(), json!(s));
        }
        let request: LambdaFunctionUrlRequest = serde_json::from_value(json!({
            "headers": headers, "requestContext": {"http": {"method": "POST"}, "timeEpoch": 0},
            "body": body, "isBase64Encoded": false
        }))
        .unwrap();
        let response =
            notice_intake::http::handle(&stack.intake, LambdaEvent::new(request, Context::default()))
                .await
                .unwrap();
        assert_eq!(response.status_code, 400, "{:?}", response.body);
    }
    let out =
        stack.env.moto.sqs().await.receive_message().queue_url(&stack.env.queue_url).send().await.unwrap();
    assert!(out.messages().is_empty(), "nothing was enqueued");
    // The genuine one goes through.
    assert_eq!(revisions(&deliver_ok(&stack, &r.upcoming(2900)).await), [send(0)]);
}

/// The cold start as deployed: every setting from the environment, both secrets from Secrets
/// Manager, the kind checked against the policy in force. The only test here that reads the
/// process environment (the others build their clients from the emulator's address directly).
#[tokio::test]
async fn the_intake_starts_from_its_environment_and_refuses_a_kind_the_policy_does_not_list() {
    let env = sender_app::env().await;
    let sm = aws_sdk_secretsmanager::Client::new(&env.moto.sdk_config().await);
    let mut arns = Vec::new();
    for (name, value) in [("notice-key", SECRET), ("stripe-webhook", WHSEC)] {
        let out = sm.create_secret().name(name).secret_string(value).send().await.expect("CreateSecret");
        arns.push(out.arn().expect("an ARN").to_owned());
    }
    let strict = r#"{"kinds":{"renewal_notice_t72":{"opens_hours_before":72,"closes_hours_before":24}}}"#;
    let mut vars = env.moto.env_vars();
    vars.extend(
        [
            ("NOTICE_TABLE", TABLE),
            ("NOTICE_QUEUE_URL", env.queue_url.as_str()),
            ("NOTICE_KEY_SECRET_ARN", arns[0].as_str()),
            ("NOTICE_INTAKE_SIGNING_SECRET_ARN", arns[1].as_str()),
            ("NOTICE_INTAKE_KIND", KIND),
            ("NOTICE_INTAKE_BILLING_TIME_ZONE", "UTC"),
            ("NOTICE_WINDOWS", strict),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    );
    for (k, v) in &vars {
        std::env::set_var(k, v);
    }
    let intake = notice_intake::settings::from_env().await.expect("the intake starts");
    let sender = sender_app::app_with(&env, sender_app::settings(&env, true), None).await;
    let stack = Stack { env, intake, sender };
    let r = Renewal::new("sub_from_env");
    assert_eq!(revisions(&deliver_ok(&stack, &r.upcoming(2900)).await), [send(0)]);
    drain(&stack).await;
    assert_eq!(mails_to(&stack, &r).await.len(), 1);

    std::env::set_var("NOTICE_INTAKE_KIND", "renewal_notice_t27");
    let e = notice_intake::settings::from_env().await.err().expect("an unlisted kind is refused").to_string();
    assert!(e.contains("NOTICE_INTAKE_KIND") && e.contains("renewal_notice_t72"), "{e}");
    std::env::remove_var("NOTICE_INTAKE_KIND");
    let e = notice_intake::settings::from_env().await.err().expect("no kind, no start").to_string();
    assert!(e.contains("NOTICE_INTAKE_KIND"), "{e}");
    std::env::set_var("NOTICE_INTAKE_KIND", KIND);
    std::env::set_var("NOTICE_INTAKE_BILLING_TIME_ZONE", "+02:00");
    let e = notice_intake::settings::from_env().await.err().expect("an offset is no zone").to_string();
    assert!(e.contains("NOTICE_INTAKE_BILLING_TIME_ZONE"), "{e}");
    for (k, _) in &vars {
        std::env::remove_var(k);
    }
}

/// The US example's obligations through the intake and the sender on the emulator: an annual
/// Californian is owed the 15–45-day annual notice (and gets it, once, however often Stripe
/// delivers), a monthly one the 72 h reminder, and a contract a rule cannot place is refused with
/// the missing fact named, nothing enqueued.
#[tokio::test]
async fn the_us_example_owes_each_contract_its_own_notice() {
    let config = us_example();
    let kinds = Kinds::from_policy(config.policy(), None).expect("the example has obligations");
    let stack = stack_with(kinds, Some(config)).await;
    let in_state = |event: &mut Value, state: &str| {
        set(event, "/data/object/customer_address/country", json!("US"));
        set(event, "/data/object/customer_address/state", json!(state));
    };

    // Annual, charged in 30 days: inside California's 15–45 days.
    let annual = Renewal::in_hours("sub_ca_annual", 30 * 24);
    let mut upcoming = annual.upcoming(29900);
    let year = annual.period_start_at.checked_add_months(chrono::Months::new(12)).unwrap();
    set(&mut upcoming, "/data/object/lines/data/0/period/end", json!(year.timestamp()));
    in_state(&mut upcoming, "CA");
    for _ in 0..3 {
        assert_eq!(revisions(&deliver_ok(&stack, &upcoming).await), [send(0)]);
    }
    // Monthly, charged in 48 h: the merchant's reminder.
    let monthly = Renewal::new("sub_ca_monthly");
    let mut monthly_upcoming = monthly.upcoming(2900);
    in_state(&mut monthly_upcoming, "CA");
    assert_eq!(revisions(&deliver_ok(&stack, &monthly_upcoming).await), [send(0)]);
    drain(&stack).await;

    let secret = NoticeSecret::new(SECRET).unwrap();
    let row = |r: &Renewal, kind: &str| {
        let key = r.identity_of(kind, 0).derive_key(&secret);
        let env = &stack.env;
        async move { sender_app::state(env, &key).await }
    };
    assert_eq!(row(&annual, "annual_renewal").await, Some(RowState::Sent));
    assert_eq!(row(&annual, KIND).await, None, "no 72 h reminder for an annual Californian");
    assert_eq!(row(&monthly, KIND).await, Some(RowState::Sent));
    assert_eq!(row(&monthly, "annual_renewal").await, None);
    let annual_mails = mails_to(&stack, &annual).await;
    assert_eq!(annual_mails.len(), 1, "three deliveries, one notice");
    assert!(
        annual_mails[0].to_string().contains("renews automatically for another term"),
        "{}",
        annual_mails[0]
    );
    assert_eq!(mails_to(&stack, &monthly).await.len(), 1);

    // Colorado's anniversary rule needs the subscription's start, which an upcoming invoice does
    // not state: refused, naming it, and nothing enqueued.
    let colorado = Renewal::new("sub_co_monthly");
    let mut co_upcoming = colorado.upcoming(2900);
    in_state(&mut co_upcoming, "CO");
    let answer = deliver_ok(&stack, &co_upcoming).await;
    assert_eq!(answer["result"], "refused", "{answer}");
    assert_eq!(answer["field"], "obligations", "{answer}");
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(error.contains("co-anniversary") && error.contains("the subscription's start"), "{error}");
    drain(&stack).await;
    assert!(mails_to(&stack, &colorado).await.is_empty());
}

/// Stripe's API as the stand-in serves it: the customer object, and the subscription object
/// (whose price and latest invoice a test moves on as Stripe would).
struct StripeObjects {
    customer: Value,
    /// The subscription records, each served for its own `id` (an unknown id: 404).
    subscriptions: std::sync::Mutex<Vec<Value>>,
    /// Whether a plain `GET /v1/subscriptions/{id}` (no expansion: what a trial is read by) is
    /// answered too; else only the price-change path's expanded read is.
    plain: bool,
}

impl StripeObjects {
    fn new(customer: Value, subscription: Value, plain: bool) -> Self {
        Self { customer, subscriptions: std::sync::Mutex::new(vec![subscription]), plain }
    }

    /// Serves `record` for its `id` from now on: a change made on Stripe's side.
    fn set(&self, record: Value) {
        let mut all = self.subscriptions.lock().unwrap();
        all.retain(|r| r["id"] != record["id"]);
        all.push(record);
    }

    fn subscription(&self, id: &str) -> Option<String> {
        let all = self.subscriptions.lock().unwrap();
        all.iter().find(|r| r["id"] == id).map(Value::to_string)
    }
}

/// A stand-in for Stripe's API on 127.0.0.1:0: `GET /v1/customers/{id}` answers the customer
/// object and `GET /v1/subscriptions/{id}` (with `expand[]=latest_invoice`) the subscription
/// object (a plain one too where `plain`), while `up` is set, and 500 otherwise; every request is
/// counted.
async fn stripe_api(
    objects: Arc<StripeObjects>,
) -> (String, Arc<std::sync::atomic::AtomicBool>, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let up = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (is_up, count) = (up.clone(), served.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            count.fetch_add(1, Ordering::SeqCst);
            let head = String::from_utf8_lossy(&head).into_owned();
            let object = if head.starts_with("GET /v1/customers/") {
                Some(objects.customer.to_string())
            } else if let Some(path) = head
                .strip_prefix("GET /v1/subscriptions/")
                .filter(|_| objects.plain || head.contains("expand%5B%5D=latest_invoice"))
            {
                objects.subscription(path.split(['?', ' ']).next().unwrap_or_default())
            } else {
                None
            };
            let (status, body) = match (is_up.load(Ordering::SeqCst), object) {
                (true, Some(object)) => (200, object),
                (true, None) => (404, r#"{"error":{"message":"No such object"}}"#.to_owned()),
                (false, _) => (500, r#"{"error":{"message":"down"}}"#.to_owned()),
            };
            let answer = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(answer.as_bytes()).await;
        }
    });
    (base, up, served)
}

/// A Californian customer: Stripe's customer fixture (`customer.json`) with its `id`, and the
/// fields the intake reads set — `email`, `preferred_locales` (empty in the fixture) and
/// `address` (all `null` there).
fn californian(id: &str, email: &str) -> Value {
    let mut customer = fixture("customer.json");
    set(&mut customer, "/id", json!(id));
    set(&mut customer, "/email", json!(email));
    set(&mut customer, "/preferred_locales", json!(["en-US"]));
    set(
        &mut customer,
        "/address",
        json!({"city": "Sacramento", "country": "US", "line1": "1 Capitol Mall", "line2": null,
               "postal_code": "95814", "state": "CA"}),
    );
    customer
}

/// Stripe's subscription fixture (2025 shape) for `renewal`'s customer `customer`, now at
/// `amount` a month, its current period ending when `renewal`'s opens; its latest invoice
/// (Stripe's invoice fixture, expanded) billed that period at `billed`.
fn subscription_at(renewal: &Renewal, customer: &str, amount: i64, billed: i64) -> Value {
    let applies = renewal.period_start_at.timestamp();
    let mut sub = fixture("subscription.json");
    set(&mut sub, "/id", json!(renewal.sub));
    set(&mut sub, "/customer", json!(customer));
    set(&mut sub, "/cancel_at_period_end", json!(false));
    set(&mut sub, "/cancel_at", Value::Null);
    set(&mut sub, "/items/data/0/current_period_end", json!(applies));
    set(&mut sub, "/items/data/0/price/unit_amount", json!(amount));
    let mut invoice = fixture("invoice.json");
    set(&mut invoice, "/lines/data/0/amount", json!(billed));
    set(&mut invoice, "/lines/data/0/period", json!({"start": applies - 30 * 86_400, "end": applies}));
    set(&mut invoice, "/lines/data/0/parent/type", json!("subscription_item_details"));
    set(&mut invoice, "/lines/data/0/parent/subscription_item_details/proration", json!(false));
    set(&mut sub, "/latest_invoice", invoice);
    sub
}

/// `customer.subscription.updated` for a price going from `from` to `to` (the subscription as
/// it was right after that change, `previous_attributes` its items before).
fn price_changed(renewal: &Renewal, customer: &str, id: &str, from: i64, to: i64) -> Value {
    let mut sub = subscription_at(renewal, customer, to, from);
    set(&mut sub, "/latest_invoice", json!("in_1Pgc6tB7WZ01zgkWu9fdqL6I"));
    let mut old_item = sub["items"]["data"][0].clone();
    old_item["price"]["unit_amount"] = json!(from);
    let mut changed = event(id, "customer.subscription.updated", sub);
    changed["data"]["previous_attributes"] = json!({"items": {"data": [old_item]}});
    changed
}

/// The intake's planner under the US example, reading customers and subscriptions from `api`.
fn planner_reading(kinds: Kinds, base: &str) -> IntakePlanner {
    let key = notice_stripe::ApiKey::parse("rk_test_51Restricted0Key0For0Tests").unwrap();
    let api = Arc::new(notice_stripe::StripeApi::new(base, key).unwrap());
    IntakePlanner::with_kinds(
        kinds,
        TimeZone::parse("UTC").unwrap(),
        KeyRing::from(NoticeSecret::new(SECRET).unwrap()),
        std::sync::Arc::new(notice_texts::Icu),
    )
    .with_customers(api.clone())
    .with_subscriptions(api)
}

/// Issue 49, item 3 on the emulator (the intake Lambda's handler, moto's SQS, DynamoDB and SES, the
/// real sender): a Californian's price going from 29.00 to 39.00 in 20 days is one `price_change`
/// notice, its e-mail and address read from Stripe's API (a local stand-in), sent once however
/// often Stripe delivers the event; with Stripe's API down the webhook is answered 500 and nothing
/// is enqueued, so Stripe delivers it again.
#[tokio::test]
async fn a_price_change_through_the_intake_reads_the_customer_from_stripe_and_is_sent_once() {
    let config = us_example();
    let kinds = Kinds::from_policy(config.policy(), None).expect("the example has obligations");
    let mut stack = stack_with(kinds.clone(), Some(config)).await;
    // The new price applies at the period's end, 20 days from now: inside 7-30 days.
    let renewal = Renewal::in_hours("sub_price_ca", 20 * 24);
    let objects = Arc::new(StripeObjects::new(
        californian("cus_price_ca", "sub_price_ca@example.com"),
        subscription_at(&renewal, "cus_price_ca", 3900, 2900),
        false,
    ));
    let (base, up, served) = stripe_api(objects).await;
    stack.intake.planner = planner_reading(kinds, &base);
    let changed = price_changed(&renewal, "cus_price_ca", "evt_price", 2900, 3900);

    // Stripe's API down: 500, nothing enqueued.
    up.store(false, std::sync::atomic::Ordering::SeqCst);
    let (status, answer) = deliver(&stack, &changed).await;
    assert_eq!(status, 500, "{answer}");
    drain(&stack).await;
    assert!(mails_to(&stack, &renewal).await.is_empty(), "nothing was enqueued");

    // Up again: Stripe's retry, and two more deliveries, are one notice.
    up.store(true, std::sync::atomic::Ordering::SeqCst);
    let first = deliver_ok(&stack, &changed).await;
    // The revision a pending notice would sit at is guarded; the new amount is one past it.
    assert_eq!(revisions(&first), [withdraw(0), send(1)], "{first}");
    for _ in 0..2 {
        assert_eq!(deliver_ok(&stack, &changed).await["messages"], first["messages"], "the same bodies");
    }
    drain(&stack).await;
    let mails = mails_to(&stack, &renewal).await;
    assert_eq!(mails.len(), 1, "three deliveries, one notice: {mails:?}");
    assert!(mails[0].to_string().contains("39.00"), "the new amount: {}", mails[0]);
    // Down: one request (the subscription), refused 500; then each delivery reads both records.
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 7, "read from Stripe, not guessed");

    let key = renewal.identity_of("price_change", 1).derive_key(&NoticeSecret::new(SECRET).unwrap());
    let row = sender_app::ledger(&stack.env).await.get(&key).await.unwrap().expect("the notice's row");
    assert_eq!(row.state, RowState::Sent);
    assert_eq!(row.obligation.as_deref(), Some("US-CA/ca-price-change"));
}

/// Issue 49, item 3, a change back on the emulator: 29.00 → 39.00 and back to 29.00 (what the
/// current period was billed at, read from the subscription's latest invoice) before anything was
/// sent is withdrawn and never announced — the two events delivered seconds apart, each twice, in
/// order and reordered. The new price applies in 40 days, so the real sender parks the notice for
/// 39.00 (its window opens 30 days before) and its row is the change back's tombstone.
#[tokio::test]
async fn a_change_back_through_the_intake_only_withdraws_in_either_order() {
    let (mut stack, kinds) = us_stack_parking().await;
    let in_order = Renewal::in_hours("sub_back_ca", 40 * 24);
    let reordered = Renewal::in_hours("sub_back_late", 40 * 24);
    // Stripe's record as it stands once both changes were made: back at 29.00, billed 29.00.
    let objects = Arc::new(StripeObjects::new(
        californian("cus_back_ca", "sub_back_ca@example.com"),
        subscription_at(&in_order, "cus_back_ca", 3900, 2900),
        false,
    ));
    let (base, _, _) = stripe_api(objects.clone()).await;
    stack.intake.planner = planner_reading(kinds, &base);

    // In order: the change to 39.00 is planned while Stripe's record says 39.00 ...
    let up = price_changed(&in_order, "cus_back_ca", "evt_up", 2900, 3900);
    let first = deliver_ok(&stack, &up).await;
    assert_eq!(revisions(&first), [withdraw(0), send(1)], "{first}");
    // ... then the change back, seconds later (the sender has not run): withdrawn where 39.00
    // will sit, nothing announced; delivered again, the same messages.
    objects.set(subscription_at(&in_order, "cus_back_ca", 2900, 2900));
    let down = price_changed(&in_order, "cus_back_ca", "evt_down", 3900, 2900);
    let undo = deliver_ok(&stack, &down).await;
    assert_eq!(revisions(&undo), [withdraw(0), withdraw(1)], "{undo}");
    assert_eq!(deliver_ok(&stack, &down).await["messages"], undo["messages"]);
    // The first change delivered again: overtaken (the record is at 29.00), nothing enqueued.
    let late = deliver_ok(&stack, &up).await;
    assert_eq!(late["result"], "ignored", "{late}");
    drain(&stack).await;
    let customer = Renewal::new("sub_back_ca"); // whose e-mail address the customer object holds
    assert!(mails_to(&stack, &customer).await.is_empty(), "nothing announced");
    assert_eq!(
        price_state(&stack, &in_order, 1).await,
        Some(RowState::Withdrawn),
        "39.00 meets its tombstone"
    );
    // Once the tombstones landed, the change back delivered again withdraws nothing more.
    let again = deliver_ok(&stack, &down).await;
    assert_eq!(again["result"], "ignored", "{again}");

    // Reordered: the change back arrives first, the change to 39.00 after it (Stripe's record is
    // at 29.00 for both): withdrawn, then ignored — nothing announced.
    objects.set(subscription_at(&reordered, "cus_back_ca", 2900, 2900));
    let down = price_changed(&reordered, "cus_back_ca", "evt_down_2", 3900, 2900);
    let up = price_changed(&reordered, "cus_back_ca", "evt_up_2", 2900, 3900);
    assert_eq!(revisions(&deliver_ok(&stack, &down).await), [withdraw(0), withdraw(1)]);
    for _ in 0..2 {
        assert_eq!(deliver_ok(&stack, &up).await["result"], "ignored");
    }
    drain(&stack).await;
    assert!(mails_to(&stack, &customer).await.is_empty(), "nothing announced");
    assert_eq!(price_state(&stack, &reordered, 1).await, Some(RowState::Withdrawn));
    assert_eq!(price_state(&stack, &reordered, 2).await, None, "no revision spent past the change back");
}

/// The schedule group the sender parks early jobs in.
const PARKED: &str = "notice-parked";

/// A stack under the US example whose real sender parks early jobs in EventBridge Scheduler
/// (group [`PARKED`]), and the example's obligations.
async fn us_stack_parking() -> (Stack, Kinds) {
    const ROLE: &str = "arn:aws:iam::123456789012:role/notice-scheduler-to-queue";
    let config = us_example();
    let kinds = Kinds::from_policy(config.policy(), None).expect("the example has obligations");
    let mut stack = stack_with(kinds.clone(), Some(config)).await;
    stack.env.moto.create_schedule_group(PARKED).await;
    let parker = notice_scheduler::SchedulerParker::new(stack.env.moto.scheduler().await, PARKED, ROLE);
    stack.sender = stack.sender.with_parker(Some(Arc::new(parker)));
    (stack, kinds)
}

async fn price_state(stack: &Stack, renewal: &Renewal, revision: u64) -> Option<RowState> {
    let key = renewal.identity_of("price_change", revision).derive_key(&NoticeSecret::new(SECRET).unwrap());
    sender_app::state(&stack.env, &key).await
}

/// A subscription record whose start is `started` (what Stripe's `GET /v1/subscriptions/{id}`
/// states as `start_date`), billed every `interval` (`month`, `week`, `day`).
struct StartedAt(DateTime<Utc>, &'static str);

#[async_trait::async_trait]
impl notice_ledger::intake::SubscriptionSource for StartedAt {
    async fn subscription(
        &self,
        id: &str,
    ) -> Result<notice_ledger::intake::Subscription, notice_ledger::intake::LookupError> {
        Ok(notice_stripe::api::subscription(&json!({
            "id": id, "object": "subscription", "start_date": self.0.timestamp(),
            "items": {"data": [{"price": {"recurring": {"interval": self.1, "interval_count": 1}}}]}
        })))
    }
}

/// Issue 49, item 4 on the emulator: a monthly Coloradan charged in 20 days, whose next renewal
/// crosses the subscription's first anniversary. The upcoming invoice (its start read from the
/// subscription record) plans the 72 h reminder and, a renewal ahead, the anniversary reminder;
/// the real sender parks both in EventBridge Scheduler (their windows open in about 17 and 10
/// days), named by their keys, and sends nothing yet. A cancellation then withdraws both: the
/// reminder of the cancelled period and the one planned for the period after it.
#[tokio::test]
async fn a_colorado_anniversary_reminder_is_parked_a_renewal_ahead_and_a_cancellation_withdraws_it() {
    let (mut stack, kinds) = us_stack_parking().await;

    let renewal = Renewal::in_hours("sub_co_anniversary", 20 * 24);
    let started = renewal.period_start_at.checked_sub_months(chrono::Months::new(11)).unwrap();
    let next_period = started.checked_add_months(chrono::Months::new(12)).unwrap();
    stack.intake.planner = IntakePlanner::with_kinds(
        kinds,
        TimeZone::parse("UTC").unwrap(),
        KeyRing::from(NoticeSecret::new(SECRET).unwrap()),
        std::sync::Arc::new(notice_texts::Icu),
    )
    .with_subscriptions(Arc::new(StartedAt(started, "month")));
    let mut upcoming = renewal.upcoming(2900);
    set(&mut upcoming, "/data/object/customer_address/country", json!("US"));
    set(&mut upcoming, "/data/object/customer_address/state", json!("CO"));
    for _ in 0..2 {
        assert_eq!(revisions(&deliver_ok(&stack, &upcoming).await), [send(0), send(0)]);
    }
    drain(&stack).await;

    let secret = NoticeSecret::new(SECRET).unwrap();
    let anniversary =
        Identity::new(&renewal.sub, &next_period.format("%Y-%m-%d").to_string(), "anniversary_reminder", 0)
            .unwrap()
            .derive_key(&secret);
    let reminder = renewal.identity(0).derive_key(&secret);
    let scheduler = stack.env.moto.scheduler().await;
    let listed = scheduler.list_schedules().group_name(PARKED).send().await.unwrap();
    let mut names: Vec<String> =
        listed.schedules().iter().filter_map(|s| s.name().map(str::to_owned)).collect();
    names.sort();
    let mut expected = vec![anniversary.as_str().to_owned(), reminder.as_str().to_owned()];
    expected.sort();
    assert_eq!(names, expected, "both parked once, named by their keys, whatever the redeliveries");
    assert!(mails_to(&stack, &renewal).await.is_empty(), "nothing sent before the windows open");
    assert_eq!(sender_app::state(&stack.env, &anniversary).await, None, "parked, not claimed");

    // The customer cancels: the reminder of the period and the anniversary reminder planned ahead
    // are withdrawn; the parked copies meet tombstones when they fire.
    let answer = deliver_ok(&stack, &renewal.cancel_at_period_end()).await;
    assert!(revisions(&answer).iter().all(|(action, _)| action == "withdraw"), "{answer}");
    drain(&stack).await;
    assert_eq!(sender_app::state(&stack.env, &anniversary).await, Some(RowState::Withdrawn));
    assert_eq!(sender_app::state(&stack.env, &reminder).await, Some(RowState::Withdrawn));
}

/// `renewal`'s `invoice.upcoming` for a weekly Coloradan: the line's period one week (the term the
/// intake reads from it), the address in Colorado.
fn weekly_upcoming(renewal: &Renewal) -> Value {
    colorado_upcoming(renewal, 7)
}

/// The same for a plan of `days` days.
fn colorado_upcoming(renewal: &Renewal, days: i64) -> Value {
    let mut upcoming = renewal.upcoming(2900);
    let start = renewal.period_start_at.timestamp();
    set(
        &mut upcoming,
        "/data/object/lines/data/0/period",
        json!({"start": start, "end": start + days * 86_400}),
    );
    set(&mut upcoming, "/data/object/customer_address/country", json!("US"));
    set(&mut upcoming, "/data/object/customer_address/state", json!("CO"));
    upcoming
}

/// The renewal `weeks` before `renewal`, of the same subscription.
fn weeks_before(renewal: &Renewal, weeks: i64) -> Renewal {
    Renewal {
        sub: renewal.sub.clone(),
        charge_at: renewal.charge_at - Duration::weeks(weeks),
        period_start_at: renewal.period_start_at - Duration::weeks(weeks),
    }
}

/// Issue 49, item 4 for a weekly plan on the emulator. One Coloradan's renewal that crosses the
/// first anniversary is charged in 30 days: the events of the three weekly renewals before it
/// (charged in 9, 16 and 23 days), each delivered twice, all plan its reminder; its window (25–40
/// days) is open, so the first copy is sent and every other is suppressed — one notice. Another's
/// crossing renewal is 100 days away: the event 63 days before it owes nothing yet, the one 42
/// days before plans the reminder, which the real sender parks (its window opens in 60 days); a
/// cancellation then withdraws it, the period named as the planner named it.
#[tokio::test]
async fn a_weekly_plans_anniversary_reminder_is_planned_by_every_week_in_its_lead_and_sent_once() {
    let (mut stack, kinds) = us_stack_parking().await;
    let secret = NoticeSecret::new(SECRET).unwrap();
    let crossing = Renewal::in_hours("sub_co_weekly", 30 * 24);
    // 53 weeks before the crossing period: the 12-month anniversary falls in the week before it.
    let started = crossing.period_start_at - Duration::weeks(53);
    let later = Renewal::in_hours("sub_co_weekly_later", 100 * 24);
    let later_started = later.period_start_at - Duration::weeks(53);
    let stated = std::collections::HashMap::from([
        (crossing.sub.clone(), started),
        (later.sub.clone(), later_started),
    ]);
    stack.intake.planner = IntakePlanner::with_kinds(
        kinds,
        TimeZone::parse("UTC").unwrap(),
        KeyRing::from(NoticeSecret::new(SECRET).unwrap()),
        std::sync::Arc::new(notice_texts::Icu),
    )
    .with_subscriptions(Arc::new(Records(stated, "week")));

    for weeks in [3, 2, 1] {
        let upcoming = weekly_upcoming(&weeks_before(&crossing, weeks));
        for _ in 0..2 {
            assert_eq!(revisions(&deliver_ok(&stack, &upcoming).await), [send(0), send(0)], "{weeks}");
        }
    }
    drain(&stack).await;
    let reminder = crossing.identity_of("anniversary_reminder", 0).derive_key(&secret);
    assert_eq!(sender_app::state(&stack.env, &reminder).await, Some(RowState::Sent));
    // The weekly reminders (charged in 9 days or more) are parked; the anniversary one went out.
    let mails = mails_to(&stack, &crossing).await;
    assert_eq!(mails.len(), 1, "six plans, one notice: {mails:?}");

    // Further ahead: 63 days before the crossing renewal, past its lead — nothing owed yet.
    let far = deliver_ok(&stack, &weekly_upcoming(&weeks_before(&later, 9))).await;
    assert_eq!(revisions(&far), [send(0)], "{far}");
    let answer = deliver_ok(&stack, &weekly_upcoming(&weeks_before(&later, 6))).await;
    assert_eq!(revisions(&answer), [send(0), send(0)], "{answer}");
    drain(&stack).await;
    let parked = later.identity_of("anniversary_reminder", 0).derive_key(&secret);
    let scheduler = stack.env.moto.scheduler().await;
    let listed = scheduler.list_schedules().group_name(PARKED).send().await.unwrap();
    assert!(listed.schedules().iter().any(|s| s.name() == Some(parked.as_str())), "parked by its key");
    assert_eq!(sender_app::state(&stack.env, &parked).await, None, "parked, not claimed");

    // The customer cancels with the period after (5 weeks before the crossing renewal).
    let cancelled = weeks_before(&later, 5);
    let mut cancel = cancelled.cancel_at_period_end();
    set(&mut cancel, "/data/object/start_date", json!(later_started.timestamp()));
    set(&mut cancel, "/data/object/items/data/0/price/recurring/interval", json!("week"));
    set(&mut cancel, "/data/object/items/data/0/plan/interval", json!("week"));
    let answer = deliver_ok(&stack, &cancel).await;
    assert!(revisions(&answer).iter().all(|(action, _)| action == "withdraw"), "{answer}");
    drain(&stack).await;
    assert_eq!(sender_app::state(&stack.env, &parked).await, Some(RowState::Withdrawn));
}

/// Subscription records by id (their `start_date`), all billed every `interval`, as Stripe's API
/// states them.
struct Records(std::collections::HashMap<String, DateTime<Utc>>, &'static str);

#[async_trait::async_trait]
impl notice_ledger::intake::SubscriptionSource for Records {
    async fn subscription(
        &self,
        id: &str,
    ) -> Result<notice_ledger::intake::Subscription, notice_ledger::intake::LookupError> {
        let started = self.0.get(id).copied().unwrap_or_default();
        notice_ledger::intake::SubscriptionSource::subscription(&StartedAt(started, self.1), id).await
    }
}

/// The same for a daily plan on the emulator: the renewal on the first anniversary, charged in
/// about 38 days, is planned by the events of the days 20, 10 and 5 before it (each delivered
/// twice), inside its window: one notice.
#[tokio::test]
async fn a_daily_plans_anniversary_reminder_is_planned_by_every_day_in_its_lead_and_sent_once() {
    let (mut stack, kinds) = us_stack_parking().await;
    let secret = NoticeSecret::new(SECRET).unwrap();
    let started = Utc::now() + Duration::days(38) - Duration::days(365);
    // The anniversary falls on the daily grid: that renewal is the one that crosses it.
    let anniversary = started.checked_add_months(chrono::Months::new(12)).unwrap();
    let crossing = Renewal {
        sub: "sub_co_daily".into(),
        charge_at: anniversary + Duration::hours(1),
        period_start_at: anniversary,
    };
    let stated = std::collections::HashMap::from([(crossing.sub.clone(), started)]);
    stack.intake.planner = IntakePlanner::with_kinds(
        kinds,
        TimeZone::parse("UTC").unwrap(),
        KeyRing::from(NoticeSecret::new(SECRET).unwrap()),
        std::sync::Arc::new(notice_texts::Icu),
    )
    .with_subscriptions(Arc::new(Records(stated, "day")));
    for days in [20, 10, 5] {
        let before = Renewal {
            sub: crossing.sub.clone(),
            charge_at: crossing.charge_at - Duration::days(days),
            period_start_at: crossing.period_start_at - Duration::days(days),
        };
        let upcoming = colorado_upcoming(&before, 1);
        for _ in 0..2 {
            assert_eq!(revisions(&deliver_ok(&stack, &upcoming).await), [send(0), send(0)], "{days}");
        }
    }
    drain(&stack).await;
    let reminder = crossing.identity_of("anniversary_reminder", 0).derive_key(&secret);
    assert_eq!(sender_app::state(&stack.env, &reminder).await, Some(RowState::Sent));
    let mails = mails_to(&stack, &crossing).await;
    assert_eq!(mails.len(), 1, "six plans, one notice: {mails:?}");
}

/// The trial sample (events/stripe/subscription-created-trial.json: Stripe's subscription fixture,
/// trialing, an annual price of 299.00) for `sub` of customer `customer`, its trial ending at `end`
/// after 60 days.
fn trialing(sub: &str, customer: &str, end: DateTime<Utc>) -> Value {
    let path = notice_e2e::workspace_root().join("events/stripe/subscription-created-trial.json");
    let sample: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut object = sample["data"]["object"].clone();
    let start = (end - Duration::days(60)).timestamp();
    for (pointer, value) in [
        ("/id", json!(sub)),
        ("/customer", json!(customer)),
        ("/start_date", json!(start)),
        ("/created", json!(start)),
        ("/trial_start", json!(start)),
        ("/trial_end", json!(end.timestamp())),
        ("/billing_cycle_anchor", json!(end.timestamp())),
        ("/items/data/0/current_period_start", json!(start)),
        ("/items/data/0/current_period_end", json!(end.timestamp())),
    ] {
        set(&mut object, pointer, value);
    }
    object
}

/// Issue 49, trials, on the emulator: two Californians on 60-day free trials of an annual plan,
/// each planned from `customer.subscription.created` (the customer read from Stripe's API, a
/// stand-in) as California's trial-conversion notice, due 3 to 21 days before the trial ends. The
/// trial ending in 60 days is parked in EventBridge Scheduler, named by its key, and nothing is
/// sent. The one ending in 10 days is inside its window: its event delivered twice, a later
/// `customer.subscription.updated` and the upcoming invoice at the trial's end (whose subscription
/// is read: trialing, so it is the same conversion, not an annual renewal) all plan the same body
/// — one notice. A cancellation of the parked trial withdraws it.
#[tokio::test]
async fn a_trial_is_planned_from_its_subscription_parked_far_ahead_and_sent_once_inside_its_window() {
    let (mut stack, kinds) = us_stack_parking().await;
    // The near trial ends where its upcoming invoice's period opens.
    let near = Renewal::in_hours("sub_trial_near", 10 * 24);
    let far = Renewal::in_hours("sub_trial_far", 60 * 24);
    let objects = Arc::new(StripeObjects::new(
        californian("cus_trial_ca", &near.email()),
        trialing(&near.sub, "cus_trial_ca", near.period_start_at),
        true,
    ));
    objects.set(trialing(&far.sub, "cus_trial_ca", far.period_start_at));
    let (base, _, served) = stripe_api(objects.clone()).await;
    stack.intake.planner = planner_reading(kinds, &base);
    let secret = NoticeSecret::new(SECRET).unwrap();

    // Each trial's notice is minted one past its first revision without a row, which is
    // withdrawn: a later amount is minted past it in turn, never where it is parked.
    let far_created = event(
        "evt_trial_far",
        "customer.subscription.created",
        trialing(&far.sub, "cus_trial_ca", far.period_start_at),
    );
    for _ in 0..2 {
        assert_eq!(revisions(&deliver_ok(&stack, &far_created).await), [withdraw(0), send(1)]);
    }
    let near_object = trialing(&near.sub, "cus_trial_ca", near.period_start_at);
    let near_created = event("evt_trial_near", "customer.subscription.created", near_object.clone());
    let first = deliver_ok(&stack, &near_created).await;
    assert_eq!(revisions(&first), [withdraw(0), send(1)], "{first}");
    assert_eq!(deliver_ok(&stack, &near_created).await["messages"], first["messages"]);
    let mut updated = event("evt_trial_near_updated", "customer.subscription.updated", near_object);
    updated["data"]["previous_attributes"] = json!({"metadata": {}});
    assert_eq!(deliver_ok(&stack, &updated).await["messages"], first["messages"], "the same body");
    let mut upcoming = near.upcoming(32_000);
    set(&mut upcoming, "/data/object/customer_address/country", json!("US"));
    set(&mut upcoming, "/data/object/customer_address/state", json!("CA"));
    let from_invoice = deliver_ok(&stack, &upcoming).await;
    assert_eq!(
        from_invoice["messages"], first["messages"],
        "the invoice plans the trial's notice: {from_invoice}"
    );
    drain(&stack).await;

    let mails = mails_to(&stack, &near).await;
    assert_eq!(mails.len(), 1, "five deliveries, one notice: {mails:?}");
    assert!(mails[0].to_string().contains("299.00"), "the annual price: {}", mails[0]);
    let near_key = near.identity_of("trial_conversion", 1).derive_key(&secret);
    let row = sender_app::ledger(&stack.env).await.get(&near_key).await.unwrap().expect("the notice's row");
    assert_eq!(row.state, RowState::Sent);
    assert_eq!(row.obligation.as_deref(), Some("US-CA/ca-long-trial"));

    // The far trial: parked (its window opens in 39 days), not claimed, nothing sent.
    let far_key = far.identity_of("trial_conversion", 1).derive_key(&secret);
    let scheduler = stack.env.moto.scheduler().await;
    let listed = scheduler.list_schedules().group_name(PARKED).send().await.unwrap();
    let names: Vec<&str> = listed.schedules().iter().filter_map(|s| s.name()).collect();
    assert_eq!(names, [far_key.as_str()], "parked once, named by its key");
    assert_eq!(sender_app::state(&stack.env, &far_key).await, None, "parked, not claimed");
    // Each created or updated event read the subscription (is it still this trial?) and the
    // customer; the invoice read the subscription and the customer.
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 12, "read from Stripe, not guessed");

    // The far trial's price raised to 399.00 while its notice is parked: the parked 299.00 is
    // withdrawn at its very key (its schedule taken down), and 399.00 is parked one revision past
    // it.
    let mut raised = trialing(&far.sub, "cus_trial_ca", far.period_start_at);
    set(&mut raised, "/items/data/0/price/unit_amount", json!(39_900));
    set(&mut raised, "/items/data/0/price/unit_amount_decimal", json!("39900"));
    set(&mut raised, "/items/data/0/plan/amount", json!(39_900));
    objects.set(raised.clone());
    let mut raise = event("evt_trial_far_raised", "customer.subscription.updated", raised.clone());
    raise["data"]["previous_attributes"] = json!({"items": {}});
    let answer = deliver_ok(&stack, &raise).await;
    assert_eq!(revisions(&answer), [withdraw(1), send(2)], "{answer}");
    drain(&stack).await;
    assert_eq!(
        sender_app::state(&stack.env, &far_key).await,
        Some(RowState::Withdrawn),
        "299.00 meets its tombstone"
    );
    let raised_key = far.identity_of("trial_conversion", 2).derive_key(&secret);
    let listed = scheduler.list_schedules().group_name(PARKED).send().await.unwrap();
    let names: Vec<&str> = listed.schedules().iter().filter_map(|s| s.name()).collect();
    assert_eq!(names, [raised_key.as_str()], "the withdraw took 299.00's schedule down; 399.00 is parked");
    let parked = scheduler.get_schedule().group_name(PARKED).name(raised_key.as_str()).send().await.unwrap();
    let body = parked.target().and_then(|t| t.input()).unwrap_or_default();
    assert!(body.contains(r#""minor":39900"#), "the parked job announces 399.00: {body}");
    // The created event delivered late: the trial no longer converts at 299.00, nothing planned.
    let late = deliver_ok(&stack, &far_created).await;
    assert!(revisions(&late).is_empty(), "{late}");

    // Cancelled during the trial: the period it ends is withdrawn, where the parked notice will land.
    let mut cancelled = raised;
    set(&mut cancelled, "/cancel_at_period_end", json!(true));
    let answer =
        deliver_ok(&stack, &event("evt_trial_cancel", "customer.subscription.updated", cancelled)).await;
    assert!(revisions(&answer).iter().all(|(action, _)| action == "withdraw"), "{answer}");
    drain(&stack).await;
    assert_eq!(sender_app::state(&stack.env, &raised_key).await, Some(RowState::Withdrawn));
}
