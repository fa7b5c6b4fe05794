//! The intake's AWS adapters: the jobs queue (SQS `SendMessage`) and the endpoint signing secret
//! (Secrets Manager `GetSecretValue`).

use async_trait::async_trait;
use notice_ledger::intake::{EnqueueError, JobQueue};
use notice_stripe::SigningSecrets;
use serde_json::Value;

use crate::SecretSource;

/// The jobs queue the sender reads (`NOTICE_QUEUE_URL`). The SDK's standard retries stay on: a
/// message sent twice is a copy the ledger suppresses, a message not sent is a lost notice.
pub struct SqsQueue {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl SqsQueue {
    pub fn new(client: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        Self { client, queue_url: queue_url.into() }
    }
}

#[async_trait]
impl JobQueue for SqsQueue {
    async fn enqueue(&self, body: &Value) -> Result<(), EnqueueError> {
        self.client
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body.to_string())
            .send()
            .await
            .map(|_| ())
            .map_err(|e| EnqueueError(aws_sdk_sqs::error::DisplayErrorContext(&e).to_string()))
    }
}

/// The endpoint signing secret in Secrets Manager (`NOTICE_INTAKE_SIGNING_SECRET_ARN`): its
/// `SecretString` holds one `whsec_…` value, or two separated by a space or a newline while a
/// rotation is in progress.
pub struct SecretsManagerSource {
    client: aws_sdk_secretsmanager::Client,
    secret_id: String,
}

impl SecretsManagerSource {
    pub fn new(client: aws_sdk_secretsmanager::Client, secret_id: impl Into<String>) -> Self {
        Self { client, secret_id: secret_id.into() }
    }
}

#[async_trait]
impl SecretSource for SecretsManagerSource {
    async fn read(&self) -> Result<SigningSecrets, String> {
        let out = self.client.get_secret_value().secret_id(&self.secret_id).send().await.map_err(|e| {
            format!(
                "cannot read {}: {}",
                self.secret_id,
                aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
            )
        })?;
        let text = out.secret_string().unwrap_or_default();
        SigningSecrets::parse(text).map_err(|e| format!("{}: {e}", self.secret_id))
    }
}
