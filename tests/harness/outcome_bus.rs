//! An outcome bus on the emulator that a test can read: an EventBridge bus with a rule sending
//! every `notice-ledger` event to an SQS queue (moto delivers `PutEvents` to SQS targets), made
//! through EventBridge's own JSON API — the suite has no EventBridge SDK client, and needs none.

use std::time::{Duration, Instant};

use http::header::HeaderName;
use notice_awshttp::{AwsHttp, Target};
use serde_json::{json, Value};

use crate::{Moto, REGION};

/// A bus and the queue its rule feeds.
pub struct ObservedBus {
    pub bus: String,
    pub queue_url: String,
}

async fn events_call(moto: &Moto, operation: &'static str, body: Value) -> Value {
    let sdk = moto.sdk_config().await;
    let http = AwsHttp::new(sdk.credentials_provider(), Duration::from_secs(3));
    let target = Target::new(moto.endpoint(), "/", REGION, "events").unwrap_or_else(|e| panic!("{e}"));
    let response = http
        .post(
            &target,
            "application/x-amz-json-1.1",
            &[(HeaderName::from_static("x-amz-target"), operation)],
            body.to_string().into_bytes(),
            Duration::from_secs(10),
        )
        .await
        .unwrap_or_else(|e| panic!("{operation}: {e}"));
    let text = String::from_utf8_lossy(&response.body).into_owned();
    assert!(response.status.is_success(), "{operation}: HTTP {}: {text}", response.status);
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

impl ObservedBus {
    /// Bus `name`, queue `<name>-observer`, and a rule matching `source: notice-ledger`.
    pub async fn create(moto: &Moto, name: &str) -> Self {
        events_call(moto, "AWSEvents.CreateEventBus", json!({"Name": name})).await;
        let queue_url = moto.create_queue(&format!("{name}-observer")).await;
        let arn = moto
            .sqs()
            .await
            .get_queue_attributes()
            .queue_url(&queue_url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await
            .unwrap_or_else(|e| panic!("queue arn: {e}"))
            .attributes()
            .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn).cloned())
            .unwrap_or_else(|| panic!("no queue arn"));
        let pattern = json!({"source": ["notice-ledger"], "detail-type": ["Notice Outcome"]}).to_string();
        events_call(
            moto,
            "AWSEvents.PutRule",
            json!({"Name": "observe", "EventBusName": name, "EventPattern": pattern}),
        )
        .await;
        events_call(
            moto,
            "AWSEvents.PutTargets",
            json!({"Rule": "observe", "EventBusName": name, "Targets": [{"Id": "observer", "Arn": arn}]}),
        )
        .await;
        Self { bus: name.to_owned(), queue_url }
    }

    /// The events that arrived (whole EventBridge envelopes), waiting up to 10 s for `at_least`.
    pub async fn events(&self, moto: &Moto, at_least: usize) -> Vec<Value> {
        let started = Instant::now();
        let mut seen = Vec::new();
        while seen.len() < at_least && started.elapsed() < Duration::from_secs(10) {
            let got = self.receive_once(moto).await;
            if got.is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            seen.extend(got);
        }
        seen
    }

    /// [`ObservedBus::events`], then one more look after a pause: exactly what arrived, so a test
    /// can tell "one event" from "one event and a duplicate".
    pub async fn all_events(&self, moto: &Moto, expected: usize) -> Vec<Value> {
        let mut seen = self.events(moto, expected).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        seen.extend(self.receive_once(moto).await);
        seen
    }

    /// One receive of up to ten messages, deleted as read.
    async fn receive_once(&self, moto: &Moto) -> Vec<Value> {
        let sqs = moto.sqs().await;
        let out = sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap_or_else(|e| panic!("receive: {e}"));
        let mut seen = Vec::new();
        for m in out.messages() {
            let body = m.body().unwrap_or_default();
            seen.push(serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}")));
            sqs.delete_message()
                .queue_url(&self.queue_url)
                .receipt_handle(m.receipt_handle().unwrap_or_default())
                .send()
                .await
                .unwrap_or_else(|e| panic!("delete: {e}"));
        }
        seen
    }
}
