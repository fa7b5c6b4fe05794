//! Putting messages on a queue: the one place a message body becomes a `SendMessage` or a
//! `SendMessageBatch` entry, so every producer of this project — the intake, `noticectl enqueue`,
//! `replay` and `smoke`, a requeue and a dead-letter — writes the same attributes the same way. What
//! to send and when is the caller's; the sender only carries it out.

use async_trait::async_trait;
use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{BuildError, DisplayErrorContext, SdkError};
use aws_sdk_sqs::operation::send_message::SendMessageError;
use aws_sdk_sqs::operation::send_message_batch::SendMessageBatchError;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use notice_awshttp::fault::sdk_fault;
use notice_ledger::intake::{EnqueueError, JobQueue};
use notice_ledger::queue::QueueError;
use notice_ledger::Fault;
use serde_json::Value;

/// The message attribute an operator replay carries (`noticectl replay`): logged and counted on
/// its own, never part of a key.
pub const REPLAY_BATCH_ATTRIBUTE: &str = "replay_batch";
/// The attribute a dead-lettered message carries its reason in.
pub const NOTICE_ERROR_ATTRIBUTE: &str = "notice_error";
/// The attribute a dead-lettered message carries its original message id in.
pub const SOURCE_MESSAGE_ID_ATTRIBUTE: &str = "source_message_id";

/// Most entries SQS takes in one `SendMessageBatch`.
pub const MAX_BATCH: usize = 10;

/// A send that did not happen. The SDK's error is kept whole (Display and source forward to it),
/// so a caller can still tell an unreachable endpoint from denied access.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error(transparent)]
    Send(#[from] SdkError<SendMessageError, HttpResponse>),
    #[error(transparent)]
    Batch(#[from] SdkError<SendMessageBatchError, HttpResponse>),
    #[error("message attribute: {0}")]
    Attribute(#[from] BuildError),
}

impl SendError {
    /// Why the send failed, read from the SDK's typed error (an attribute that could not be built
    /// never left this process: [`Fault::Other`]).
    pub fn fault(&self) -> Fault {
        match self {
            Self::Send(e) => sdk_fault(e, "sqs:SendMessage"),
            // SendMessageBatch is authorised as sqs:SendMessage.
            Self::Batch(e) => sdk_fault(e, "sqs:SendMessage"),
            Self::Attribute(_) => Fault::Other,
        }
    }

    /// The queue service, as an operator knows it.
    pub fn service(&self) -> &'static str {
        crate::SERVICE
    }

    /// This failure as the core's queue error; `what` names the call for people.
    pub fn queue_error(&self, what: &str) -> QueueError {
        QueueError::new(crate::SERVICE, self.fault(), format!("{what}: {}", DisplayErrorContext(self)))
    }
}

/// One string message attribute.
pub(crate) fn string_attribute(data_type: &str, value: &str) -> Result<MessageAttributeValue, BuildError> {
    MessageAttributeValue::builder().data_type(data_type).string_value(value).build()
}

/// One message to send: its body, its string attributes, and how long SQS hides it first.
#[derive(Clone, Copy, Debug, Default)]
pub struct Message<'a> {
    pub body: &'a str,
    /// An operator replay's batch id, carried as [`REPLAY_BATCH_ATTRIBUTE`] (never part of a key).
    pub replay_batch: Option<&'a str>,
    /// Further string attributes: `(name, data type, value)`.
    pub attributes: &'a [(&'a str, &'a str, &'a str)],
    /// `DelaySeconds` (0–900; the caller bounds it).
    pub delay_seconds: Option<i32>,
}

impl<'a> Message<'a> {
    /// A plain message: the body, nothing else.
    pub fn body(body: &'a str) -> Self {
        Self { body, ..Self::default() }
    }

    fn attribute_values(&self) -> Result<Vec<(String, MessageAttributeValue)>, BuildError> {
        let replay = self.replay_batch.map(|batch| (REPLAY_BATCH_ATTRIBUTE, "String", batch));
        replay
            .into_iter()
            .chain(self.attributes.iter().copied())
            .map(|(name, data_type, value)| Ok((name.to_owned(), string_attribute(data_type, value)?)))
            .collect()
    }
}

/// A queue to send to: a client and the queue's URL.
#[derive(Clone, Debug)]
pub struct Producer {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
}

impl Producer {
    pub fn new(sqs: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        Self { sqs, queue_url: queue_url.into() }
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    /// Sends one message; answers the message id SQS gave it.
    pub async fn send(&self, message: Message<'_>) -> Result<String, SendError> {
        let mut request = self
            .sqs
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(message.body)
            .set_delay_seconds(message.delay_seconds);
        for (name, value) in message.attribute_values()? {
            request = request.message_attributes(name, value);
        }
        let out = request.send().await?;
        Ok(out.message_id().unwrap_or_default().to_owned())
    }

    /// Sends up to [`MAX_BATCH`] messages in one call, each entry named by the caller's number;
    /// answers the entries SQS did not take, by that number, with its reason. A failure of the call
    /// as a whole is the error.
    pub async fn send_batch(
        &self,
        messages: &[(usize, Message<'_>)],
    ) -> Result<Vec<(usize, String)>, SendError> {
        let mut request = self.sqs.send_message_batch().queue_url(&self.queue_url);
        for (id, message) in messages {
            let mut entry = SendMessageBatchRequestEntry::builder()
                .id(id.to_string())
                .message_body(message.body)
                .set_delay_seconds(message.delay_seconds);
            for (name, value) in message.attribute_values()? {
                entry = entry.message_attributes(name, value);
            }
            request = request.entries(entry.build()?);
        }
        let out = request.send().await?;
        Ok(out
            .failed()
            .iter()
            .filter_map(|f| {
                f.id().parse::<usize>().ok().map(|i| (i, f.message().unwrap_or(f.code()).to_owned()))
            })
            .collect())
    }
}

/// The intake's jobs queue. The SDK's standard retries stay on: a message sent twice is a copy the
/// ledger suppresses, a message not sent is a lost notice.
#[async_trait]
impl JobQueue for Producer {
    async fn enqueue(&self, body: &Value) -> Result<(), EnqueueError> {
        self.send(Message::body(&body.to_string()))
            .await
            .map(drop)
            .map_err(|e| EnqueueError::new(crate::SERVICE, e.fault(), DisplayErrorContext(&e).to_string()))
    }
}
