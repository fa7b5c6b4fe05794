//! AWS SDK configuration shared by every adapter: the one place clients are built.
//!
//! Endpoints, region and credentials come from the standard SDK sources (`AWS_REGION`,
//! `AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL_SESV2`, profiles, …) and are
//! never overridden here: that is how the emulator and real AWS are reached with the same binary.

#[cfg(any(feature = "dynamodb", feature = "ses", feature = "configstore", feature = "eventbridge"))]
use std::time::Duration;

#[cfg(feature = "dynamodb")]
use aws_config::retry::RetryConfig;
use aws_config::BehaviorVersion;
pub use aws_config::SdkConfig;
#[cfg(any(feature = "dynamodb", feature = "ses", feature = "configstore", feature = "eventbridge"))]
use notice_awshttp::AwsHttp;

#[cfg(any(feature = "dynamodb", feature = "ses", feature = "configstore", feature = "eventbridge"))]
/// Longest a connection attempt of the lean client (SES, and the ledger's hot writes) may take.
/// Short: connecting sends nothing, and a stuck connect would otherwise eat the whole send
/// budget. (The SDK's DynamoDB client defaults to 3.1 s.)
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Loads the SDK configuration from the environment (region, credentials, endpoint overrides).
pub async fn load_sdk_config() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest()).load().await
}

#[cfg(feature = "dynamodb")]
/// The ledger's DynamoDB clients, from one configuration: the lean client, the one path for every
/// write (claims, transitions, token takes, the key check, operator writes) and the send path's
/// reads, and the SDK client for the operator-pace queries and scans. Retries stay on for both:
/// every ledger write is conditional, so a retried write either applies once or fails its
/// condition, and the ledger recognises its own retried writes.
pub fn dynamodb_client(cfg: &SdkConfig) -> notice_dynamodb::DynamoClient {
    let retry = cfg.retry_config().cloned().unwrap_or_else(RetryConfig::standard);
    let conf = aws_sdk_dynamodb::config::Builder::from(cfg).retry_config(retry.clone()).build();
    let http = AwsHttp::new(cfg.credentials_provider(), CONNECT_TIMEOUT);
    let lean = notice_dynamodb::hot::HotWrites::new(
        http.clone(),
        cfg.region().map(|r| r.as_ref()),
        cfg.use_fips().unwrap_or(false),
        cfg.use_dual_stack().unwrap_or(false),
        endpoint_override(cfg, "DynamoDB").as_deref(),
    )
    .unwrap_or_else(|e| {
        // Every ledger call reports it; the SDK client would report the same on its first call.
        tracing::warn!(error = %e, "no usable DynamoDB endpoint; every ledger call will fail");
        notice_dynamodb::hot::HotWrites::unusable(http, &e)
    })
    .with_retries(retry.max_attempts(), retry.initial_backoff());
    notice_dynamodb::DynamoClient::new(aws_sdk_dynamodb::Client::from_conf(conf), lean)
}

#[cfg(feature = "ses")]
/// The SES v2 client for `SendEmail`: one HTTP attempt per call, bounded by `timeout` as a
/// whole (connect within 3 s, or `timeout` if shorter).
///
/// A retried `SendEmail` can put a second copy in the recipient's inbox before our code sees
/// anything: one attempt per claim; an unanswered attempt is reported as unknown, never repeated.
pub fn sesv2_client(cfg: &SdkConfig, timeout: Duration) -> notice_ses::mailer::SesClient {
    notice_ses::mailer::SesClient::new(
        AwsHttp::new(cfg.credentials_provider(), CONNECT_TIMEOUT.min(timeout)),
        cfg.region().map(|r| r.as_ref()),
        cfg.use_fips().unwrap_or(false),
        cfg.use_dual_stack().unwrap_or(false),
        endpoint_override(cfg, "SESv2").as_deref(),
        timeout,
    )
}

/// SES's `MaxSendRate` for this account and Region (sends per second), from `GetAccount` — read
/// once at cold start to size the account bucket (IAM `ses:GetAccount`).
#[cfg(feature = "ses")]
pub async fn ses_max_send_rate(cfg: &SdkConfig) -> Result<f64, String> {
    let out = aws_sdk_sesv2::Client::new(cfg)
        .get_account()
        .send()
        .await
        .map_err(|e| format!("SES GetAccount: {}", aws_sdk_sesv2::error::DisplayErrorContext(&e)))?;
    let rate = out.send_quota().map(|q| q.max_send_rate()).ok_or("SES GetAccount returned no SendQuota")?;
    if rate.is_finite() && rate > 0.0 {
        Ok(rate)
    } else {
        Err(format!("SES GetAccount returned MaxSendRate {rate}"))
    }
}

#[cfg(feature = "configstore")]
/// The reader of the published notice configuration (SSM pointer, S3 object), over the lean
/// client: the SDK's S3 and SSM crates would add megabytes to the sender for two GETs.
pub fn config_store(
    cfg: &SdkConfig,
) -> Result<notice_configstore::ConfigStore, notice_awshttp::EndpointError> {
    notice_configstore::ConfigStore::new(
        AwsHttp::new(cfg.credentials_provider(), CONNECT_TIMEOUT),
        cfg.region().map(|r| r.as_ref()),
        cfg.use_fips().unwrap_or(false),
        cfg.use_dual_stack().unwrap_or(false),
        endpoint_override(cfg, "S3").as_deref(),
        endpoint_override(cfg, "SSM").as_deref(),
        notice_configstore::DEFAULT_TIMEOUT,
    )
}

#[cfg(feature = "eventbridge")]
/// The outcome events' publisher to `bus` (`NOTICE_OUTCOME_BUS`), over the lean client: the
/// SDK's EventBridge crate would add megabytes to the sender for one `PutEvents` a batch. The
/// endpoint is `AWS_ENDPOINT_URL_EVENTBRIDGE` / `AWS_ENDPOINT_URL` when set, else the region's
/// `events` endpoint (the commercial partition's; FIPS and dual-stack are not asked for).
pub fn eventbridge_publisher(
    cfg: &SdkConfig,
    bus: &str,
) -> Result<notice_eventbridge::EventBridgePublisher, notice_awshttp::EndpointError> {
    let region =
        cfg.region().map(|r| r.as_ref().to_owned()).ok_or_else(|| notice_awshttp::EndpointError {
            endpoint: "<from region>".into(),
            reason: "no region configured (AWS_REGION)".into(),
        })?;
    notice_eventbridge::EventBridgePublisher::new(
        AwsHttp::new(cfg.credentials_provider(), CONNECT_TIMEOUT.min(notice_eventbridge::CALL_TIMEOUT)),
        &region,
        endpoint_override(cfg, "EventBridge").as_deref(),
        bus,
    )
}

#[cfg(any(feature = "dynamodb", feature = "ses", feature = "configstore", feature = "eventbridge"))]
/// CloudWatch in its AWS JSON 1.0 protocol, over the lean client: the operator's metric reads
/// (`noticectl smoke`). The SDK's CloudWatch crate speaks only Smithy RPC v2 CBOR, which the
/// emulator the suite runs on does not; CloudWatch answers all three of its protocols. The
/// endpoint is `AWS_ENDPOINT_URL_CLOUDWATCH` / `AWS_ENDPOINT_URL` when set, else the region's
/// `monitoring` endpoint (the commercial partition's; FIPS and dual-stack are not asked for).
pub fn cloudwatch(
    cfg: &SdkConfig,
) -> Result<(AwsHttp, notice_awshttp::Target), notice_awshttp::EndpointError> {
    let region =
        cfg.region().map(|r| r.as_ref().to_owned()).ok_or_else(|| notice_awshttp::EndpointError {
            endpoint: "<from region>".into(),
            reason: "no region configured (AWS_REGION)".into(),
        })?;
    let endpoint = endpoint_override(cfg, "CloudWatch")
        .unwrap_or_else(|| format!("https://monitoring.{region}.amazonaws.com"));
    let target = notice_awshttp::Target::new(&endpoint, "/", region, "monitoring")?;
    Ok((AwsHttp::new(cfg.credentials_provider(), CONNECT_TIMEOUT), target))
}

#[cfg(any(feature = "dynamodb", feature = "ses", feature = "configstore", feature = "eventbridge"))]
/// The endpoint override an SDK client for `service_id` would use (its generated
/// `From<&SdkConfig>`): one set in code wins; else `AWS_ENDPOINT_URL_<SERVICE>` (or the
/// profile's service section), else `AWS_ENDPOINT_URL`.
fn endpoint_override(cfg: &SdkConfig, service_id: &str) -> Option<String> {
    if cfg.get_origin("endpoint_url").is_client_config() {
        return cfg.endpoint_url().map(str::to_owned);
    }
    let key = aws_types::service_config::ServiceConfigKey::builder()
        .service_id(service_id)
        .env("AWS_ENDPOINT_URL")
        .profile("endpoint_url")
        .build()
        .ok();
    key.and_then(|key| cfg.service_config().and_then(|conf| conf.load_config(key)))
        .or_else(|| cfg.endpoint_url().map(str::to_owned))
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
    fn ses_client_is_bounded() {
        let client = sesv2_client(&offline_config(), Duration::from_secs(7));
        assert_eq!(client.timeout(), Duration::from_secs(7));
        assert_eq!(client.connect_timeout(), CONNECT_TIMEOUT);
        assert_eq!(
            client.endpoint().map(ToString::to_string).as_deref(),
            Some("https://email.us-east-1.amazonaws.com/v2/email/outbound-emails")
        );
    }

    #[cfg(feature = "ses")]
    #[test]
    fn short_send_budget_also_bounds_connect() {
        let client = sesv2_client(&offline_config(), Duration::from_secs(1));
        assert_eq!(client.connect_timeout(), Duration::from_secs(1));
    }

    #[cfg(feature = "ses")]
    #[test]
    fn endpoint_set_in_code_wins() {
        let cfg = offline_config().to_builder().endpoint_url("http://127.0.0.1:4566").build();
        let client = sesv2_client(&cfg, Duration::from_secs(7));
        assert_eq!(client.endpoint().and_then(|u| u.port_u16()), Some(4566));
    }

    #[cfg(feature = "dynamodb")]
    #[test]
    fn dynamodb_client_keeps_retries() {
        let client = dynamodb_client(&offline_config());
        let attempts = client.sdk().config().retry_config().map(RetryConfig::max_attempts);
        assert!(attempts.is_some_and(|n| n > 1), "{attempts:?}");
        let lean = client.lean();
        assert!(lean.max_attempts() > 1);
        assert_eq!(lean.endpoint().and_then(|u| u.host()), Some("dynamodb.us-east-1.amazonaws.com"));
        // Without a region there is no endpoint: still the lean client, every call failing.
        let nowhere = SdkConfig::builder().behavior_version(BehaviorVersion::latest()).build();
        let client = dynamodb_client(&nowhere);
        assert!(client.lean().endpoint().is_none());
        assert!(client.lean().endpoint_error().is_some_and(|e| e.contains("no region")));
    }
}
