//! The sender Lambda over moto, as the end-to-end tests drive it: settings, real SDK clients, and
//! batches of real SQS records (received from the emulator's queue, so receipt handles are real).

use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use chrono::Utc;
use lambda_runtime::{Context, LambdaEvent};
use notice_dynamodb::ledger::DynamoLedger;
use notice_ledger::ledger::RowReader;
use notice_ledger::ledger::RowState;
use notice_ledger::links::ManageLinks;
use notice_ledger::{Job, Mode, NoticeKey, NoticeSecret, WindowPolicy};
use notice_sender::{handle, SenderApp, SenderSettings};
use notice_setup::assemble::{GateClock, SendConfig};
use notice_setup::aws;
use notice_setup::ledger_url::LedgerUrl;
use notice_texts::Renderer;
use serde_json::{json, Value};

use crate::{start_moto, Moto};

pub const TABLE: &str = "notices";
pub const FROM: &str = "billing@example.com";
pub const CONFIG_SET: &str = "notice-events";
pub const SECRET: &str = "e2e-secret-0123456789";

pub struct Env {
    pub moto: Moto,
    pub queue_url: String,
    pub dlq_url: String,
}

pub async fn env() -> Env {
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    moto.verify_email_identity(FROM).await;
    moto.create_configuration_set(CONFIG_SET).await;
    let queue_url = moto.create_queue("reminders").await;
    let dlq_url = moto.create_queue("reminders-dlq").await;
    moto.start_recording().await;
    Env { moto, queue_url, dlq_url }
}

pub fn settings(env: &Env, dead_letter: bool) -> SenderSettings {
    let secret = NoticeSecret::new(SECRET).unwrap();
    SenderSettings {
        ledger: LedgerUrl::DynamoDb(TABLE.into()),
        send: SendConfig {
            renderer: Arc::new(Renderer::builtin(ManageLinks::new(
                "https://billing.example.com/manage",
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
        from: FROM.into(),
        configuration_set: Some(CONFIG_SET.into()),
        retention_days: 400,
        concurrency: 10,
        queue_url: Some(env.queue_url.clone()),
        dead_letter_queue_url: dead_letter.then(|| env.dlq_url.clone()),
        parking: None,
        config_spec: notice_setup::notices::ConfigSpec::Builtin,
        config_refresh: Duration::from_secs(300),
        config_location: None,
    }
}

pub async fn app(env: &Env) -> SenderApp {
    app_with(env, settings(env, false), None).await
}

/// The sender over moto; SES at `ses_endpoint` (a stub) when given.
pub async fn app_with(env: &Env, settings: SenderSettings, ses_endpoint: Option<String>) -> SenderApp {
    let sdk = env.moto.sdk_config().await;
    let ses_sdk = match ses_endpoint {
        Some(endpoint) => sdk.to_builder().endpoint_url(endpoint).build(),
        None => sdk.clone(),
    };
    let timeout = settings.send.send_timeout;
    SenderApp::new(
        settings,
        aws::dynamodb_client(&sdk),
        aws::sesv2_client(&ses_sdk, timeout),
        env.moto.sqs().await,
    )
    .expect("the harness's ledger is a DynamoDB table")
}

/// A job whose window is open now (charge in 48 h).
pub fn job(sub: &str, revision: u64) -> Value {
    job_charged(sub, revision, Utc::now() + chrono::Duration::hours(48))
}

pub fn job_charged(sub: &str, revision: u64, charge_at: chrono::DateTime<Utc>) -> Value {
    json!({"subscription_id": sub, "period_start": "2026-12-01", "kind": "renewal_notice_t72", "revision": revision,
        "email": format!("{sub}@example.com"), "charge_at": charge_at.to_rfc3339(),
        "template_data": {"plan_name": "Coffee Box", "amount": {"minor": 2900, "currency": "USD"}}})
}

pub fn key_of(body: &Value) -> NoticeKey {
    Job::from_value(body, &notice_texts::Icu).unwrap().key(&NoticeSecret::new(SECRET).unwrap())
}

/// Puts the bodies on the queue and receives them back, so records carry real receipt handles.
pub async fn batch(env: &Env, bodies: &[String]) -> SqsEvent {
    batch_from(env, bodies, None).await
}

/// [`batch`], every message carrying the `replay_batch` attribute when given.
pub async fn batch_from(env: &Env, bodies: &[String], replay_batch: Option<&str>) -> SqsEvent {
    let sqs = env.moto.sqs().await;
    for body in bodies {
        let attribute = replay_batch.map(|b| {
            aws_sdk_sqs::types::MessageAttributeValue::builder()
                .data_type("String")
                .string_value(b)
                .build()
                .unwrap()
        });
        sqs.send_message()
            .queue_url(&env.queue_url)
            .message_body(body)
            .set_message_attributes(attribute.map(|a| [("replay_batch".to_owned(), a)].into()))
            .send()
            .await
            .unwrap();
    }
    let mut records = Vec::new();
    while records.len() < bodies.len() {
        let out = sqs
            .receive_message()
            .queue_url(&env.queue_url)
            .max_number_of_messages(10)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        let messages = out.messages();
        assert!(!messages.is_empty(), "queue returned fewer messages than were sent");
        records.extend(messages.iter().map(record));
    }
    serde_json::from_value(json!({ "Records": records })).unwrap()
}

/// A received message as the event source mapping hands it to the function: its system
/// attributes and its own message attributes (`replay_batch`) as SQS returned them.
pub fn record(m: &aws_sdk_sqs::types::Message) -> Value {
    let attributes: serde_json::Map<String, Value> = m
        .attributes()
        .map(|a| a.iter().map(|(k, v)| (k.as_str().to_owned(), Value::String(v.clone()))).collect())
        .unwrap_or_default();
    let message_attributes: serde_json::Map<String, Value> = m
        .message_attributes()
        .map(|a| {
            a.iter()
                .map(|(k, v)| {
                    (k.clone(), json!({"stringValue": v.string_value(), "dataType": v.data_type()}))
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "messageId": m.message_id(), "receiptHandle": m.receipt_handle(), "body": m.body(),
        "attributes": attributes, "messageAttributes": message_attributes, "md5OfBody": m.md5_of_body(),
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:reminders",
        "awsRegion": "us-east-1"
    })
}

pub async fn invoke(app: &SenderApp, event: SqsEvent) -> SqsBatchResponse {
    handle(app, LambdaEvent::new(event, Context::default())).await.unwrap()
}

pub fn failed_ids(resp: &SqsBatchResponse) -> Vec<String> {
    resp.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect()
}

/// The records of `event` whose ids are in `ids`: what SQS hands out again after a retry.
pub fn only(event: &SqsEvent, ids: &[String]) -> SqsEvent {
    let mut again = event.clone();
    again.records.retain(|r| r.message_id.as_ref().is_some_and(|id| ids.contains(id)));
    again
}

pub fn ids(event: &SqsEvent) -> Vec<String> {
    event.records.iter().map(|r| r.message_id.clone().unwrap()).collect()
}

pub async fn ledger(env: &Env) -> DynamoLedger {
    DynamoLedger::new(notice_setup::aws::dynamodb_client(&env.moto.sdk_config().await), TABLE)
}

pub async fn state(env: &Env, key: &NoticeKey) -> Option<RowState> {
    ledger(env).await.get(key).await.unwrap().map(|r| r.state)
}

/// The `notice_error` reason of every message on the dead-letter queue.
pub async fn dead_letter_reasons(env: &Env) -> Vec<String> {
    let out = env
        .moto
        .sqs()
        .await
        .receive_message()
        .queue_url(&env.dlq_url)
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap();
    out.messages()
        .iter()
        .map(|m| {
            let reason =
                m.message_attributes().and_then(|a| a.get("notice_error")).and_then(|v| v.string_value());
            reason.unwrap_or_default().to_owned()
        })
        .collect()
}
