//! Outcome events onto an EventBridge bus: [`EventBridgePublisher`] implements the core's
//! [`OutcomePublisher`] with `PutEvents` (AWS JSON 1.1, `X-Amz-Target: AWSEvents.PutEvents`,
//! signing name `events`) over the lean signed client (`notice_awshttp`) — the SDK's EventBridge
//! crate would add its orchestrator and models to the sender for one call a batch.
//!
//! One call carries at most [`MAX_ENTRIES`] events (EventBridge's limit); a larger batch is split.
//! Per-entry failures come back in the answer (`FailedEntryCount`, `Entries[i].ErrorCode`), in
//! the request's order; an error for the whole call (HTTP 4xx/5xx, no answer) fails every entry
//! of that call. Nothing is retried here: the core's `publish_bounded` retries the failed entries
//! once, within its budget.

use std::time::Duration;

use async_trait::async_trait;
use http::header::HeaderName;
use notice_awshttp::{AwsHttp, EndpointError, Target};
use notice_ledger::outcomes::{OutcomeEvent, OutcomePublisher, PublishError, DETAIL_TYPE, SOURCE};
use serde::Deserialize;
use serde_json::{json, Value};
use tracing::debug;

/// Entries one `PutEvents` call takes.
pub const MAX_ENTRIES: usize = 10;
/// One call's limit: short, because the caller's whole publish budget is a couple of seconds.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(1500);
const CONTENT_TYPE: &str = "application/x-amz-json-1.1";
const PUT_EVENTS: &str = "AWSEvents.PutEvents";

/// Puts outcome events on one bus.
#[derive(Clone, Debug)]
pub struct EventBridgePublisher {
    http: AwsHttp,
    target: Target,
    bus: String,
    timeout: Duration,
}

impl EventBridgePublisher {
    /// A publisher to `bus` (a name or an ARN, as `PutEvents` takes either) at `endpoint` (the
    /// override the SDK would use; else the region's `events` endpoint).
    pub fn new(
        http: AwsHttp,
        region: &str,
        endpoint: Option<&str>,
        bus: impl Into<String>,
    ) -> Result<Self, EndpointError> {
        let endpoint =
            endpoint.map_or_else(|| format!("https://events.{region}.amazonaws.com"), str::to_owned);
        let target = Target::new(&endpoint, "/", region, "events")?;
        Ok(Self { http, target, bus: bus.into(), timeout: CALL_TIMEOUT })
    }

    /// Each call bounded by `timeout` instead of [`CALL_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn bus(&self) -> &str {
        &self.bus
    }

    /// The request body of one call.
    pub fn request_body(&self, events: &[OutcomeEvent]) -> Value {
        let entries: Vec<Value> = events
            .iter()
            .map(|e| {
                json!({
                    "Source": SOURCE,
                    "DetailType": DETAIL_TYPE,
                    "Detail": e.to_detail(),
                    "EventBusName": self.bus,
                })
            })
            .collect();
        json!({ "Entries": entries })
    }

    /// One `PutEvents` call of at most [`MAX_ENTRIES`] events.
    async fn put(&self, events: &[OutcomeEvent]) -> Vec<Result<(), PublishError>> {
        let all = |e: PublishError| events.iter().map(|_| Err(e.clone())).collect();
        let body = match serde_json::to_vec(&self.request_body(events)) {
            Ok(body) => body,
            Err(e) => return all(PublishError::Unavailable(format!("request not built: {e}"))),
        };
        let target_header = HeaderName::from_static("x-amz-target");
        let response = match self
            .http
            .post(&self.target, CONTENT_TYPE, &[(target_header, PUT_EVENTS)], body, self.timeout)
            .await
        {
            Ok(response) => response,
            Err(e) => return all(PublishError::Unavailable(format!("EventBridge PutEvents: {e}"))),
        };
        if !response.status.is_success() {
            let parsed: Option<ErrorBody> = serde_json::from_slice(&response.body).ok();
            let body_type = parsed.as_ref().and_then(|b| b.kind.as_deref());
            let code = notice_awshttp::error_code(&response.headers, body_type).unwrap_or("").to_owned();
            let message = parsed.and_then(|b| b.message).unwrap_or_default();
            return all(PublishError::Refused {
                code: if code.is_empty() { format!("HTTP {}", response.status.as_u16()) } else { code },
                message,
            });
        }
        let answer: Answer = match serde_json::from_slice(&response.body) {
            Ok(answer) => answer,
            Err(e) => return all(PublishError::Unavailable(format!("unreadable PutEvents answer: {e}"))),
        };
        debug!(entries = events.len(), failed = answer.failed_entry_count, "PutEvents answered");
        let mut entries = answer.entries.into_iter();
        events
            .iter()
            .map(|_| match entries.next() {
                Some(Entry { error_code: Some(code), error_message, .. }) => {
                    Err(PublishError::Refused { code, message: error_message.unwrap_or_default() })
                }
                Some(Entry { event_id: Some(_), .. }) => Ok(()),
                // An entry with neither an id nor an error: not confirmed.
                Some(_) | None => {
                    Err(PublishError::Unavailable("PutEvents gave no result for this entry".into()))
                }
            })
            .collect()
    }
}

#[async_trait]
impl OutcomePublisher for EventBridgePublisher {
    async fn publish(&self, events: &[OutcomeEvent]) -> Vec<Result<(), PublishError>> {
        let mut results = Vec::with_capacity(events.len());
        for chunk in events.chunks(MAX_ENTRIES) {
            results.extend(self.put(chunk).await);
        }
        results
    }
}

/// `PutEvents`' answer.
#[derive(Deserialize)]
struct Answer {
    #[serde(rename = "FailedEntryCount", default)]
    failed_entry_count: u64,
    #[serde(rename = "Entries", default)]
    entries: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "EventId")]
    event_id: Option<String>,
    #[serde(rename = "ErrorCode")]
    error_code: Option<String>,
    #[serde(rename = "ErrorMessage")]
    error_message: Option<String>,
}

/// An AWS JSON error answer.
#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "__type")]
    kind: Option<String>,
    #[serde(alias = "Message")]
    message: Option<String>,
}

#[cfg(test)]
mod tests;
