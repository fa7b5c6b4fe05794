//! The quarantine loop end to end: the sender meets an SES that answers 500 and leaves claims;
//! the reporter lists them; the reconciler receives SES events (via SNS→SQS and EventBridge) for
//! some — redelivered, duplicated, out of order, untagged, malformed — and the reporter lists the rest.

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use chrono::Utc;
use lambda_runtime::{Context, LambdaEvent};
use notice_dynamodb::ledger::DynamoLedger;
use notice_e2e::ses_events::{sns, sqs_event};
use notice_e2e::{start_moto, start_ses_stub, StubReply};
use notice_ledger::ledger::RowReader;
use notice_ledger::ledger::{DeliveryStatus, Origin, RowState};
use notice_ledger::links::ManageLinks;
use notice_ledger::{Job, Mode, NoticeKey, NoticeSecret, WindowPolicy};
use notice_reconciler::ReconcilerApp;
use notice_reporter::ReporterApp;
use notice_sender::{SenderApp, SenderSettings};
use notice_ses::events::SNS_VALIDATION_TEXT;
use notice_setup::assemble::{GateClock, SendConfig};
use notice_setup::aws;
use notice_setup::ledger_url::LedgerUrl;
use notice_texts::Renderer;
use serde_json::{json, Value};

const TABLE: &str = "notices";
const SECRET: &str = "loop-secret";

fn job(sub: &str) -> Value {
    json!({"subscription_id": sub, "period_start": "2026-12-01", "kind": "renewal_notice_t72",
        "email": format!("{sub}@example.com"), "charge_at": (Utc::now() + chrono::Duration::hours(48)).to_rfc3339()})
}

fn key(sub: &str) -> NoticeKey {
    Job::from_value(&job(sub), &notice_texts::Icu).unwrap().key(&NoticeSecret::new(SECRET).unwrap())
}

fn ses_event(event_type: &str, key: Option<&NoticeKey>, message_id: &str) -> Value {
    let mut tags = json!({"ses:configuration-set": ["notice-events"], "kind": ["renewal_notice_t72"]});
    if let Some(k) = key {
        tags["notice_key"] = json!([k.as_str()]);
    }
    let mut event = json!({"eventType": event_type, "mail": {"timestamp": Utc::now().to_rfc3339(),
        "messageId": message_id, "source": "billing@example.com", "destination": ["x@example.com"], "tags": tags}});
    let detail_field = match event_type {
        "Send" => "send",
        "Delivery" => "delivery",
        "Bounce" => "bounce",
        _ => "other",
    };
    event[detail_field] = json!({});
    event
}

#[tokio::test]
async fn quarantine_is_closed_by_evidence_and_the_rest_stays_reported() {
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    let sdk = moto.sdk_config().await;
    let ledger = DynamoLedger::new(aws::dynamodb_client(&sdk), TABLE);

    // 1. The sender meets an SES that answers 500 to everything: four claims, outcome unknown.
    let stub = start_ses_stub(vec![StubReply::Status500]).await;
    let secret = NoticeSecret::new(SECRET).unwrap();
    let settings = SenderSettings {
        ledger: LedgerUrl::DynamoDb(TABLE.into()),
        send: SendConfig {
            renderer: Arc::new(Renderer::builtin(ManageLinks::new(
                "https://b.example/m",
                secret.derive_subkey("l"),
            ))),
            secret: secret.into(),
            mode: Mode::Enforce,
            policy: WindowPolicy::default(),
            send_timeout: Duration::from_secs(3),
            claim_lifetime: Duration::from_secs(60),
            rate_limits: None,
            park_spread: Duration::ZERO,
            gate_clock: GateClock::Wall,
            redirect_all_mail_to: None,
        },
        from: "billing@example.com".into(),
        configuration_set: Some("notice-events".into()),
        retention_days: 400,
        concurrency: 4,
        queue_url: None,
        dead_letter_queue_url: None,
        parking: None,
        config_spec: notice_setup::notices::ConfigSpec::Builtin,
        config_refresh: Duration::from_secs(300),
        config_location: None,
    };
    let ses_sdk = sdk.to_builder().endpoint_url(stub.endpoint()).build();
    let sender = SenderApp::new(
        settings,
        aws::dynamodb_client(&sdk),
        aws::sesv2_client(&ses_sdk, Duration::from_secs(3)),
        moto.sqs().await,
    )
    .expect("a DynamoDB ledger");
    let subs = ["sub_q1", "sub_q2", "sub_q3", "sub_q4"];
    let bodies: Vec<String> = subs.iter().map(|s| job(s).to_string()).collect();
    let resp = notice_sender::handle(&sender, LambdaEvent::new(sqs_event(&bodies), Context::default()))
        .await
        .unwrap();
    assert!(resp.batch_item_failures.is_empty(), "quarantined claims are acked");
    assert_eq!(stub.requests(), 4);

    // 2. The reporter lists all four (the stale cut-off is zero here; it is 15 min by default).
    let reporter = ReporterApp {
        ledger: Arc::new(DynamoLedger::new(aws::dynamodb_client(&sdk), TABLE)),
        stale_after: Duration::ZERO,
    };
    let later = Utc::now() + chrono::Duration::seconds(1);
    let report = notice_reporter::report(&reporter, later).await.unwrap();
    assert_eq!(report.quarantined, 4, "{report:?}");
    assert_eq!(report.claims.len(), 4);
    assert!(report.oldest_age_secs.is_some());
    assert!(report
        .claims
        .iter()
        .all(|c| c.kind == "renewal_notice_t72" && c.subscription_id.starts_with("sub_q")));

    // 3. SES events arrive: for q1 via SNS→SQS (redelivered, out of order: Delivery before Send),
    //    for q2 via EventBridge; plus the validation text, an untagged event and a malformed body.
    let reconciler = ReconcilerApp { ledger: Arc::new(DynamoLedger::new(aws::dynamodb_client(&sdk), TABLE)) };
    let (k1, k2, k3) = (key("sub_q1"), key("sub_q2"), key("sub_q3"));
    let delivery_q1 = sns(&ses_event("Delivery", Some(&k1), "ses-id-1").to_string());
    let send_q1 = sns(&ses_event("Send", Some(&k1), "ses-id-1").to_string());
    let batch = vec![
        delivery_q1.clone(),
        send_q1.clone(),
        send_q1.clone(),
        sns(SNS_VALIDATION_TEXT),
        sns(&ses_event("Delivery", None, "someone-elses-mail").to_string()),
        "{\"Type\": \"Notification\", \"Message\": 42}".to_owned(),
        ses_event("Send", Some(&k3), "ses-id-3").to_string(), // raw message delivery shape
    ];
    let out = notice_reconciler::handle(
        &reconciler,
        LambdaEvent::new(serde_json::to_value(sqs_event(&batch)).unwrap(), Context::default()),
    )
    .await
    .unwrap();
    let failures: Vec<&str> = out["batchItemFailures"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["itemIdentifier"].as_str())
        .collect();
    assert_eq!(failures, ["ses-msg-5"], "only the malformed body fails (→ DLQ): {out}");

    let mut detail = ses_event("Send", Some(&k2), "ses-id-2");
    detail.as_object_mut().unwrap().remove("eventType");
    let eventbridge = json!({"version": "0", "id": "e-1", "detail-type": "Email Sent", "source": "aws.ses",
        "account": "123456789012", "time": Utc::now().to_rfc3339(), "region": "us-east-1", "resources": [], "detail": detail});
    notice_reconciler::handle(&reconciler, LambdaEvent::new(eventbridge, Context::default())).await.unwrap();

    let row1 = ledger.get(&k1).await.unwrap().unwrap();
    assert_eq!(row1.state, RowState::Sent);
    assert_eq!(row1.message_id.as_deref(), Some("ses-id-1"));
    assert_eq!(
        row1.delivery_status,
        Some(DeliveryStatus::Delivered),
        "a late Send never moves Delivered back"
    );
    assert_eq!(ledger.get(&k2).await.unwrap().unwrap().state, RowState::Sent);
    assert_eq!(ledger.get(&k3).await.unwrap().unwrap().state, RowState::Sent);

    // 4. The reporter now lists only the claim no evidence came for.
    let report = notice_reporter::report(&reporter, Utc::now() + chrono::Duration::seconds(1)).await.unwrap();
    assert_eq!(report.quarantined, 1, "{report:?}");
    assert_eq!(report.claims[0].notice_key, key("sub_q4").as_str());

    // 5. A second, different message id for q1: a duplicate really went out.
    let dup = sqs_event(&[sns(&ses_event("Send", Some(&k1), "ses-id-1-again").to_string())]);
    notice_reconciler::handle(
        &reconciler,
        LambdaEvent::new(serde_json::to_value(dup).unwrap(), Context::default()),
    )
    .await
    .unwrap();
    let row1 = ledger.get(&k1).await.unwrap().unwrap();
    assert_eq!(row1.message_id.as_deref(), Some("ses-id-1"), "the first id is kept");
    assert_eq!(row1.duplicate_message_ids, ["ses-id-1-again"]);

    // 6. Evidence for a key with no row (a restored table): learned, so it cannot go out again.
    let unknown = key("sub_restored");
    let learned = sqs_event(&[sns(&ses_event("Send", Some(&unknown), "ses-id-r").to_string())]);
    notice_reconciler::handle(
        &reconciler,
        LambdaEvent::new(serde_json::to_value(learned).unwrap(), Context::default()),
    )
    .await
    .unwrap();
    let row = ledger.get(&unknown).await.unwrap().unwrap();
    assert_eq!((row.state, row.origin), (RowState::Sent, Origin::ProviderEvents));
}

#[tokio::test]
async fn reconciler_counts_untagged_and_validation_without_failing() {
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    let sdk = moto.sdk_config().await;
    let reconciler = ReconcilerApp { ledger: Arc::new(DynamoLedger::new(aws::dynamodb_client(&sdk), TABLE)) };
    let (resp, tally) = notice_reconciler::handle_sqs(
        &reconciler,
        sqs_event(&[
            sns(SNS_VALIDATION_TEXT),
            sns(&ses_event("Bounce", None, "x").to_string()),
            "not json".into(),
        ]),
    )
    .await;
    assert_eq!(tally.validation, 1);
    assert_eq!(tally.untagged, 1);
    assert_eq!(tally.malformed, 1);
    assert_eq!(resp.batch_item_failures.len(), 1);
}

/// A forged or flooded event stream cannot grow one row without bound or push its expiry out:
/// hundreds of duplicate Send events for one key (distinct ids and repeats), a 200 KB message id
/// and an event dated centuries ahead.
#[tokio::test]
async fn flooded_events_leave_one_small_row_with_a_near_expiry() {
    use notice_ledger::ledger::MAX_DUPLICATE_IDS;
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    let sdk = moto.sdk_config().await;
    let ledger = Arc::new(DynamoLedger::new(aws::dynamodb_client(&sdk), TABLE).with_retention(40));
    let reconciler = ReconcilerApp { ledger: ledger.clone() };
    let k = key("sub_flood");

    // The first Send teaches the ledger the key; then 300 other ids, each sent three times.
    let mut bodies = vec![sns(&ses_event("Send", Some(&k), "0100-first").to_string())];
    for _ in 0..3 {
        for i in 0..300 {
            bodies.push(sns(&ses_event("Send", Some(&k), &format!("0100-forged-{i:04}")).to_string()));
        }
    }
    let mut future = ses_event("Delivery", Some(&k), "0100-first");
    future["mail"]["timestamp"] = json!("2999-01-01T00:00:00Z");
    bodies.push(sns(&future.to_string()));
    let huge = ses_event("Send", Some(&k), &"x".repeat(200 * 1024));
    bodies.push(sns(&huge.to_string()));

    let mut tally = notice_reconciler::Tally::default();
    let mut failures = 0;
    for chunk in bodies.chunks(10) {
        let (resp, t) = notice_reconciler::handle_sqs(&reconciler, sqs_event(chunk)).await;
        failures += resp.batch_item_failures.len();
        tally.duplicates += t.duplicates;
        tally.malformed += t.malformed;
        tally.learned += t.learned;
    }
    assert_eq!(tally.learned, 1);
    assert_eq!(tally.duplicates, 900, "every duplicate event is still counted");
    assert_eq!((tally.malformed, failures), (1, 1), "the 200 KB id is refused, not stored");

    let row = ledger.get(&k).await.unwrap().unwrap();
    assert_eq!(row.message_id.as_deref(), Some("0100-first"));
    assert_eq!(row.duplicate_message_ids.len(), MAX_DUPLICATE_IDS);
    assert!(row.updated_at <= Utc::now() + chrono::Duration::minutes(6), "{}", row.updated_at);

    let item = moto
        .dynamodb()
        .await
        .get_item()
        .table_name(TABLE)
        .key("notice_key", aws_sdk_dynamodb::types::AttributeValue::S(k.as_str().to_owned()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    let size: usize = item.iter().map(|(name, v)| name.len() + format!("{v:?}").len()).sum();
    assert!(size < 4096, "row is {size} bytes");
    let expires: i64 = match item.get("expires_at") {
        Some(aws_sdk_dynamodb::types::AttributeValue::N(n)) => n.parse().unwrap(),
        other => panic!("no expires_at: {other:?}"),
    };
    let retention = chrono::Duration::days(40);
    assert!(expires <= (Utc::now() + retention + chrono::Duration::minutes(6)).timestamp());
}

/// Events for a withdrawn notice: a Delivery before its Send (out of order) leaves the tombstone;
/// the Send records it as sent and counts `SentAfterWithdraw`; a redelivered Send is an update.
#[tokio::test]
async fn events_for_a_withdrawn_notice_move_it_only_on_a_send() {
    use notice_ledger::ledger::{ClaimLedger, WithdrawRequest};
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    let sdk = moto.sdk_config().await;
    let ledger = Arc::new(DynamoLedger::new(aws::dynamodb_client(&sdk), TABLE));
    let reconciler = ReconcilerApp { ledger: ledger.clone() };
    let withdrawal = notice_ledger::job::Withdrawal {
        identity: Job::from_value(&job("sub_withdrawn"), &notice_texts::Icu).unwrap().identity,
        reason: Some("cancelled".into()),
    };
    let k = key("sub_withdrawn");
    let req = WithdrawRequest::new(&withdrawal, k.clone(), Origin::Worker, "producer", Utc::now());
    assert_eq!(ledger.withdraw(&req).await.unwrap(), None);

    let delivery = sns(&ses_event("Delivery", Some(&k), "ses-w-1").to_string());
    let (resp, tally) = notice_reconciler::handle_sqs(&reconciler, sqs_event(&[delivery])).await;
    assert!(resp.batch_item_failures.is_empty());
    assert_eq!((tally.kept_withdrawn, tally.sent_after_withdraw), (1, 0));
    assert_eq!(ledger.get(&k).await.unwrap().map(|r| r.state), Some(RowState::Withdrawn));

    let send = sns(&ses_event("Send", Some(&k), "ses-w-1").to_string());
    let (_, tally) = notice_reconciler::handle_sqs(&reconciler, sqs_event(std::slice::from_ref(&send))).await;
    assert_eq!(tally.sent_after_withdraw, 1);
    let row = ledger.get(&k).await.unwrap().unwrap();
    assert_eq!((row.state, row.message_id.as_deref()), (RowState::Sent, Some("ses-w-1")));
    let (_, tally) = notice_reconciler::handle_sqs(&reconciler, sqs_event(&[send])).await;
    assert_eq!((tally.sent_after_withdraw, tally.updated), (0, 1), "counted once");
}

/// The local stack's SES events (`notice-local-stack` writes them for the walkthrough in
/// docs/deploy.md) are the events of the sends the emulator accepted: the reconciler resolves each
/// notice's row as delivered under SES's own message id, and detects no duplicate send.
#[tokio::test]
async fn the_local_stacks_ses_events_match_the_sends_it_made() {
    use notice_e2e::sender_app::{app, batch, env, invoke, job, key_of, ledger};
    let env = env().await;
    let sender = app(&env).await;
    let bodies: Vec<Value> = ["sub_local_1", "sub_local_2"].iter().map(|s| job(s, 0)).collect();
    let strings: Vec<String> = bodies.iter().map(Value::to_string).collect();
    let resp = invoke(&sender, batch(&env, &strings).await).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");

    let sent = env.moto.sent_messages().await;
    let events =
        notice_e2e::ses_events::ses_events_for_sends(&sent, &env.moto.recorded_send_email_requests().await);
    assert_eq!(
        events["Records"].as_array().map(Vec::len),
        Some(4),
        "a Send and a Delivery for each: {events:#}"
    );
    let event: SqsEvent = serde_json::from_value(events).unwrap();
    let reconciler = ReconcilerApp { ledger: Arc::new(ledger(&env).await) };
    let (resp, tally) = notice_reconciler::handle_sqs(&reconciler, event).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    assert_eq!((tally.duplicates, tally.untagged, tally.malformed), (0, 0, 0), "{tally:?}");
    for body in &bodies {
        let row = ledger(&env).await.get(&key_of(body)).await.unwrap().unwrap();
        assert_eq!(row.state, RowState::Sent);
        assert_eq!(row.delivery_status, Some(DeliveryStatus::Delivered), "{row:?}");
        assert!(sent.iter().any(|m| m["id"].as_str() == row.message_id.as_deref()), "SES's own id: {row:?}");
    }
}
