//! AWS SDK configuration shared by every adapter: the one place clients are built.
//!
//! Endpoints, region and credentials come from the standard SDK sources (`AWS_REGION`,
//! `AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_SESV2`, profiles, …) and are
//! never overridden here: that is how the emulator and real AWS are reached with the same binary.

#[cfg(feature = "ses")]
use std::time::Duration;

#[cfg(any(feature = "dynamodb", feature = "ses"))]
use aws_config::retry::RetryConfig;
#[cfg(feature = "ses")]
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};

#[cfg(feature = "ses")]
/// Longest a connection attempt to SES may take. Short: connecting sends nothing, and a stuck
/// connect would otherwise eat the whole send budget.
const SES_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Loads the SDK configuration from the environment (region, credentials, endpoint overrides).
pub async fn load_sdk_config() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest()).load().await
}

#[cfg(feature = "dynamodb")]
/// The ledger's DynamoDB client. SDK retries stay on: every ledger write is conditional, so a
/// retried write either applies once or fails its condition, and the ledger recognises its own
/// retried writes.
pub fn dynamodb_client(cfg: &SdkConfig) -> aws_sdk_dynamodb::Client {
    let retry = cfg.retry_config().cloned().unwrap_or_else(RetryConfig::standard);
    let conf = aws_sdk_dynamodb::config::Builder::from(cfg).retry_config(retry).build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

#[cfg(feature = "ses")]
/// The SES v2 client for `SendEmail`: retries disabled and every attempt bounded by `timeout`.
///
/// The SDK's default policy silently retries 5xx responses and timeouts, and a retried
/// `SendEmail` can put a second copy in the recipient's inbox before our code sees anything.
/// One attempt per claim; an unanswered attempt is reported as unknown, never repeated.
pub fn sesv2_client(cfg: &SdkConfig, timeout: Duration) -> aws_sdk_sesv2::Client {
    let conf = aws_sdk_sesv2::config::Builder::from(cfg)
        .retry_config(RetryConfig::disabled())
        .timeout_config(ses_timeouts(timeout))
        .build();
    aws_sdk_sesv2::Client::from_conf(conf)
}

#[cfg(feature = "ses")]
fn ses_timeouts(timeout: Duration) -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(SES_CONNECT_TIMEOUT.min(timeout))
        .operation_timeout(timeout)
        .operation_attempt_timeout(timeout)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offline_config() -> SdkConfig {
        SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .build()
    }

    #[cfg(feature = "ses")]
    #[test]
    fn ses_client_never_retries_and_is_bounded() {
        let client = sesv2_client(&offline_config(), Duration::from_secs(7));
        let conf = client.config();
        assert_eq!(conf.retry_config().map(RetryConfig::max_attempts), Some(1));
        let timeouts = conf.timeout_config().cloned().unwrap_or_else(TimeoutConfig::disabled);
        assert_eq!(timeouts.operation_timeout(), Some(Duration::from_secs(7)));
        assert_eq!(timeouts.operation_attempt_timeout(), Some(Duration::from_secs(7)));
        assert_eq!(timeouts.connect_timeout(), Some(SES_CONNECT_TIMEOUT));
    }

    #[cfg(feature = "ses")]
    #[test]
    fn short_send_budget_also_bounds_connect() {
        let timeouts = ses_timeouts(Duration::from_secs(1));
        assert_eq!(timeouts.connect_timeout(), Some(Duration::from_secs(1)));
    }

    #[cfg(feature = "dynamodb")]
    #[test]
    fn dynamodb_client_keeps_retries() {
        let client = dynamodb_client(&offline_config());
        let attempts = client.config().retry_config().map(RetryConfig::max_attempts);
        assert!(attempts.is_some_and(|n| n > 1), "{attempts:?}");
    }
}
