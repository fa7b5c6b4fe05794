//! The SQS adapter: a received message as the core's [`QueuedMessage`] port (hide with
//! `ChangeMessageVisibility`, requeue with `SendMessage` and `DelaySeconds`, dead-letter to the
//! configured queue with the reason), the message attributes the project uses, and a queue's URL
//! from its ARN, and ([`Producer`]) every send to a queue. What to do with a message is decided in
//! `notice_ledger::queue`; this only does it.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use chrono::{DateTime, Utc};
use notice_awshttp::fault::sdk_fault;
use notice_ledger::queue::{QueueError, QueuedMessage, MAX_HIDE, MAX_VISIBILITY};
use notice_ledger::Fault;

mod send;

pub use send::{
    Message, Producer, SendError, MAX_BATCH, NOTICE_ERROR_ATTRIBUTE, REPLAY_BATCH_ATTRIBUTE,
    SOURCE_MESSAGE_ID_ATTRIBUTE,
};

/// The service this adapter is, as an operator knows it: named in every typed failure.
pub const SERVICE: &str = "SQS";

/// An SQS call's failure as the core's [`QueueError`], its fault read from the SDK's typed error
/// (for a caller of the SDK outside this crate too, such as an operator's queue-depth read).
pub fn queue_error<E, R>(op: &str, err: &SdkError<E, R>) -> QueueError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    QueueError::new(
        SERVICE,
        sdk_fault(err, &format!("sqs:{op}")),
        format!("{op}: {}", DisplayErrorContext(err)),
    )
}

/// A queue call this message cannot make at all (no URL, no receipt): nothing was sent.
fn not_callable(detail: &str) -> QueueError {
    QueueError::new(SERVICE, Fault::Other, detail)
}

/// `arn:PARTITION:sqs:REGION:ACCOUNT:NAME` → the queue's URL.
pub fn queue_url_from_arn(arn: &str) -> Option<String> {
    let parts: Vec<&str> = arn.split(':').collect();
    match parts.as_slice() {
        ["arn", partition, "sqs", region, account, name] if !name.is_empty() => {
            let domain = if partition.starts_with("aws-cn") { "amazonaws.com.cn" } else { "amazonaws.com" };
            Some(format!("https://sqs.{region}.{domain}/{account}/{name}"))
        }
        _ => None,
    }
}

/// One string (or number) message attribute, as received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attribute {
    pub name: String,
    pub data_type: String,
    pub value: String,
}

/// A message received from an SQS queue, with what acting on it needs.
pub struct ReceivedMessage {
    pub sqs: aws_sdk_sqs::Client,
    pub message_id: String,
    pub body: String,
    pub receipt_handle: Option<String>,
    /// The queue it came from (a Lambda event source's `eventSourceARN`).
    pub queue_arn: Option<String>,
    /// The queue's URL; derived from `queue_arn` when `None`.
    pub queue_url: Option<String>,
    /// Where a message that cannot succeed goes directly; `None`: the redrive policy moves it.
    pub dead_letter_queue_url: Option<String>,
    /// Its string message attributes (binary ones are not carried over by a requeue).
    pub attributes: Vec<Attribute>,
    pub received_at: DateTime<Utc>,
}

impl ReceivedMessage {
    fn queue_url(&self) -> Option<String> {
        self.queue_url.clone().or_else(|| self.queue_arn.as_deref().and_then(queue_url_from_arn))
    }

    fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.iter().find(|a| a.name == name).map(|a| a.value.as_str())
    }

    /// The queue at `url`, through this message's client.
    fn producer(&self, url: impl Into<String>) -> Producer {
        Producer::new(self.sqs.clone(), url)
    }
}

#[async_trait]
impl QueuedMessage for ReceivedMessage {
    fn body(&self) -> &str {
        &self.body
    }

    fn queue_arn(&self) -> Option<&str> {
        self.queue_arn.as_deref()
    }

    fn replay_batch(&self) -> Option<&str> {
        self.attribute(REPLAY_BATCH_ATTRIBUTE).filter(|b| !b.is_empty())
    }

    fn received_at(&self) -> DateTime<Utc> {
        self.received_at
    }

    async fn hide(&self, wait: Duration) -> Result<(), QueueError> {
        let (Some(queue_url), Some(receipt)) = (self.queue_url(), self.receipt_handle.as_deref()) else {
            return Err(not_callable("no queue URL or receipt handle"));
        };
        let secs = i32::try_from(wait.min(MAX_VISIBILITY).as_secs()).unwrap_or(i32::MAX);
        self.sqs
            .change_message_visibility()
            .queue_url(queue_url)
            .receipt_handle(receipt)
            .visibility_timeout(secs)
            .send()
            .await
            .map(drop)
            .map_err(|e| queue_error("ChangeMessageVisibility", &e))
    }

    async fn requeue(&self, delay: Duration) -> Result<(), QueueError> {
        let Some(queue_url) = self.queue_url() else { return Err(not_callable("no queue URL")) };
        let secs = i32::try_from(delay.min(MAX_HIDE).as_secs()).unwrap_or(900);
        let attributes: Vec<(&str, &str, &str)> = self
            .attributes
            .iter()
            .map(|a| (a.name.as_str(), a.data_type.as_str(), a.value.as_str()))
            .collect();
        let message = Message {
            body: &self.body,
            attributes: &attributes,
            delay_seconds: Some(secs),
            ..Message::default()
        };
        self.producer(queue_url).send(message).await.map(drop).map_err(|e| e.queue_error("SendMessage"))
    }

    async fn dead_letter(&self, reason: &str) -> Result<(), QueueError> {
        let Some(dlq) = self.dead_letter_queue_url.as_deref() else {
            return Err(not_callable("no dead-letter queue URL configured"));
        };
        let attributes = [
            (NOTICE_ERROR_ATTRIBUTE, "String", reason),
            (SOURCE_MESSAGE_ID_ATTRIBUTE, "String", self.message_id.as_str()),
        ];
        self.producer(dlq)
            .send(Message { body: &self.body, attributes: &attributes, ..Message::default() })
            .await
            .map(drop)
            .map_err(|e| e.queue_error("SendMessage to the dead-letter queue"))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod arn_tests {
    use super::*;

    #[test]
    fn queue_url_from_event_source_arn() {
        assert_eq!(
            queue_url_from_arn("arn:aws:sqs:eu-west-1:123456789012:reminders").as_deref(),
            Some("https://sqs.eu-west-1.amazonaws.com/123456789012/reminders")
        );
        assert_eq!(
            queue_url_from_arn("arn:aws-cn:sqs:cn-north-1:123456789012:q").as_deref(),
            Some("https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q")
        );
        assert_eq!(queue_url_from_arn("not-an-arn"), None);
    }
}
