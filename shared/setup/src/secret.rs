//! The notice key secret, one way for every entry point.
//!
//! It comes from `NOTICE_KEY_SECRET` (the value) or `NOTICE_KEY_SECRET_ARN` (an AWS Secrets
//! Manager secret, read once at start-up). A variable that is present but empty or blank is an
//! error, never "unset": a failed secret fetch in a deploy script often leaves exactly that, and
//! falling back to another secret would derive keys the deployment never derives — every notice
//! would look new and be sent again. A value under 16 bytes is refused too
//! ([`notice_ledger::identity::MIN_SECRET_BYTES`]).
//!
//! The value is a key ring ([`notice_ledger::keyring`]): a plain value is version 1 alone (every
//! deployment before rotation); a JSON object holds versions, the current one and the retired
//! ones, as `noticectl key rotate` writes it.

use notice_ledger::keyring::KeyRing;
#[cfg(feature = "secretsmanager")]
use notice_ledger::DependencyError;
use notice_ledger::{ConfigError, NoticeSecret};

/// The secret's value.
pub const SECRET_VAR: &str = "NOTICE_KEY_SECRET";
/// A Secrets Manager secret (ARN or name) holding the value as its `SecretString`.
pub const SECRET_ARN_VAR: &str = "NOTICE_KEY_SECRET_ARN";
/// How a missing secret is named in errors: either variable will do.
pub const EITHER_VAR: &str = "NOTICE_KEY_SECRET (or NOTICE_KEY_SECRET_ARN)";

/// Where the secret comes from, as the environment says.
#[derive(Debug)]
pub enum SecretSource {
    Value(KeyRing),
    SecretsManager(String),
}

/// `None` when neither variable is present; a present variable is always checked.
pub fn source_from_env() -> Result<Option<SecretSource>, ConfigError> {
    let value = std::env::var_os(SECRET_VAR);
    let arn = std::env::var_os(SECRET_ARN_VAR);
    match (value, arn) {
        (Some(_), Some(_)) => Err(ConfigError::Invalid {
            name: SECRET_VAR,
            reason: format!("set only one of {SECRET_VAR} and {SECRET_ARN_VAR}"),
        }),
        (Some(value), None) => {
            let value = value
                .into_string()
                .map_err(|_| ConfigError::Invalid { name: SECRET_VAR, reason: "is not UTF-8".into() })?;
            Ok(Some(SecretSource::Value(ring(SECRET_VAR, &value)?)))
        }
        (None, Some(arn)) => {
            let arn = arn.into_string().unwrap_or_default();
            if arn.trim().is_empty() {
                return Err(ConfigError::Invalid {
                    name: SECRET_ARN_VAR,
                    reason: "is empty or blank".into(),
                });
            }
            Ok(Some(SecretSource::SecretsManager(arn.trim().to_owned())))
        }
        (None, None) => Ok(None),
    }
}

/// A configured secret value, checked (blank or short values are refused by `name`).
pub fn checked(name: &'static str, value: impl Into<Vec<u8>>) -> Result<NoticeSecret, ConfigError> {
    NoticeSecret::configured(value).map_err(|e| ConfigError::Invalid { name, reason: e.to_string() })
}

/// A stored secret value as a key ring, checked (blank or short values, a malformed ring, are
/// refused by `name`, never quoting a value).
pub fn ring(name: &'static str, value: &str) -> Result<KeyRing, ConfigError> {
    KeyRing::from_stored(value).map_err(|e| ConfigError::Invalid { name, reason: e.to_string() })
}

/// The secret from `NOTICE_KEY_SECRET` only (no network): for entry points and tests that never
/// read a secret store. With only `NOTICE_KEY_SECRET_ARN` set it says to use [`resolve`].
pub fn from_env() -> Result<KeyRing, ConfigError> {
    match source_from_env()? {
        Some(SecretSource::Value(secret)) => Ok(secret),
        Some(SecretSource::SecretsManager(_)) => Err(ConfigError::Invalid {
            name: SECRET_ARN_VAR,
            reason: "is only read by entry points built with Secrets Manager support".into(),
        }),
        None => Err(ConfigError::Missing(EITHER_VAR)),
    }
}

/// The secret from either variable, fetching from Secrets Manager when the ARN is given; `None`
/// when neither is set (the caller decides whether that is an error).
#[cfg(feature = "secretsmanager")]
pub async fn resolve(sdk: &aws_config::SdkConfig) -> Result<Option<KeyRing>, ConfigError> {
    match source_from_env()? {
        Some(SecretSource::Value(secret)) => Ok(Some(secret)),
        Some(SecretSource::SecretsManager(id)) => fetch(sdk, &id).await.map(Some),
        None => Ok(None),
    }
}

/// The service the secret store is, as an operator knows it: named in every typed failure.
pub const SECRETS_MANAGER: &str = "Secrets Manager";

/// A Secrets Manager call's failure, its fault read from the SDK's typed error; `what` says what
/// was being done for people (`cannot read ARN`), never a value.
#[cfg(feature = "secretsmanager")]
pub fn secrets_manager_error<E, R>(
    op: &str,
    what: &str,
    err: &aws_sdk_secretsmanager::error::SdkError<E, R>,
) -> DependencyError
where
    E: aws_sdk_secretsmanager::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    let fault = notice_awshttp::fault::sdk_fault(err, &format!("secretsmanager:{op}"));
    DependencyError::new(
        SECRETS_MANAGER,
        fault,
        format!("{what}: {}", aws_sdk_secretsmanager::error::DisplayErrorContext(err)),
    )
}

/// One `GetSecretValue` of `secret_id`: the one read of a secret every entry point shares (the key
/// secret here, the intake's signing secret).
#[cfg(feature = "secretsmanager")]
pub async fn get_value(
    client: &aws_sdk_secretsmanager::Client,
    secret_id: &str,
) -> Result<aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueOutput, DependencyError> {
    client
        .get_secret_value()
        .secret_id(secret_id)
        .send()
        .await
        .map_err(|e| secrets_manager_error("GetSecretValue", &format!("cannot read {secret_id}"), &e))
}

/// Reads the secret's current value once. The error names the variable and the AWS error, never
/// the value.
#[cfg(feature = "secretsmanager")]
pub async fn fetch(sdk: &aws_config::SdkConfig, secret_id: &str) -> Result<KeyRing, ConfigError> {
    let client = aws_sdk_secretsmanager::Client::new(sdk);
    let out = get_value(&client, secret_id)
        .await
        .map_err(|error| ConfigError::Dependency { name: SECRET_ARN_VAR, error })?;
    let text = match (out.secret_string(), out.secret_binary()) {
        (Some(text), _) => text.to_owned(),
        (None, Some(blob)) => {
            String::from_utf8(blob.as_ref().to_vec()).map_err(|_| ConfigError::Invalid {
                name: SECRET_ARN_VAR,
                reason: format!("{secret_id} holds a binary value that is not UTF-8"),
            })?
        }
        (None, None) => String::new(),
    };
    ring(SECRET_ARN_VAR, &text)
}

/// Writes `ring` as the secret's new current value (`noticectl key rotate` / `retire`): one
/// `PutSecretValue`, so Secrets Manager keeps the previous value as `AWSPREVIOUS`. The error names
/// the secret and the AWS error, never a value.
#[cfg(feature = "secretsmanager")]
pub async fn store(sdk: &aws_config::SdkConfig, secret_id: &str, ring: &KeyRing) -> Result<(), ConfigError> {
    let client = aws_sdk_secretsmanager::Client::new(sdk);
    client.put_secret_value().secret_id(secret_id).secret_string(ring.to_stored()).send().await.map_err(
        |e| ConfigError::Dependency {
            name: SECRET_ARN_VAR,
            error: secrets_manager_error("PutSecretValue", &format!("cannot write {secret_id}"), &e),
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Secrets Manager that cannot be reached fails the read with its kind and service, kept
    /// whole inside the setting's error (what `noticectl` words its line from).
    #[cfg(feature = "secretsmanager")]
    #[tokio::test]
    async fn an_unreachable_secret_store_is_typed() {
        use aws_sdk_secretsmanager::config::{Credentials, Region, SharedCredentialsProvider};
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new("t", "t", None, None, "t")))
            .endpoint_url("http://127.0.0.1:1")
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .build();
        match fetch(&sdk, "arn:aws:secretsmanager:us-east-1:1:secret:s").await {
            Err(ConfigError::Dependency { name, error }) => {
                assert_eq!(name, SECRET_ARN_VAR);
                assert_eq!(error.service, SECRETS_MANAGER);
                assert_eq!(error.fault, notice_ledger::Fault::Unreachable("connection refused"), "{error}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn configured_values_are_checked() {
        assert!(checked(SECRET_VAR, "0123456789abcdef").is_ok());
        for (value, words) in [("", "empty"), ("  \t ", "blank"), ("short-secret", "12 bytes")] {
            let err = checked(SECRET_VAR, value).unwrap_err().to_string();
            assert!(err.contains(SECRET_VAR) && err.contains(words), "{value:?}: {err}");
        }
    }
}
