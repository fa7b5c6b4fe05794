//! The intake's AWS adapter for the endpoint signing secret (Secrets Manager `GetSecretValue`); the
//! jobs queue is the project's one SQS producer (`notice_sqs::Producer`).

use async_trait::async_trait;
use notice_stripe::SigningSecrets;

use crate::{SecretError, SecretSource};

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
    async fn read(&self) -> Result<SigningSecrets, SecretError> {
        let out = notice_setup::secret::get_value(&self.client, &self.secret_id).await?;
        let text = out.secret_string().unwrap_or_default();
        SigningSecrets::parse(text).map_err(|e| SecretError::Invalid(format!("{}: {e}", self.secret_id)))
    }
}
