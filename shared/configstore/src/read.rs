//! The sender's read path: the pointer from SSM (`GetParameter`), the object from S3
//! (`GetObject`), both over the lean SigV4 client and each bounded by one timeout.
//!
//! Endpoints are built here rather than by the SDK's endpoint rules (which live in the S3 and SSM
//! SDK crates this path must not link): the standard AWS host names for the `aws` and `aws-cn`
//! partitions, FIPS and dual-stack included; any other place is reached with an endpoint
//! override. With an override (an emulator, a VPC endpoint) S3 is addressed path-style
//! (`{endpoint}/{bucket}/{key}`): such endpoints rarely resolve a per-bucket host name. On AWS it
//! is virtual-hosted (`https://{bucket}.s3.{region}.amazonaws.com/{key}`), except for bucket names
//! with dots, which the `*.s3…` TLS certificate cannot cover (the SDK makes the same exception).

use std::time::Duration;

use http::HeaderName;
use notice_awshttp::{error_code, AwsHttp, CallError, EndpointError, GetError, Response, Target};
use serde_json::Value;

use crate::{one_line, sha256_hex, ConfigLocation, StoreError, MAX_CONFIG_BYTES};

/// Bound of one read, connect to last byte: the pointer and the object are read at cold start,
/// where every second counts against the first invocation.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

const SSM_CONTENT_TYPE: &str = "application/x-amz-json-1.1";
const GET_PARAMETER: &str = "AmazonSSM.GetParameter";

/// Reads the pointer and the object it names. Cheap to clone (shares the connection pool).
#[derive(Clone, Debug)]
pub struct ConfigStore {
    http: AwsHttp,
    region: String,
    ssm: Target,
    s3: S3Endpoint,
    timeout: Duration,
}

/// How an object's URL is formed.
#[derive(Clone, Debug)]
enum S3Endpoint {
    /// `{endpoint}/{bucket}/{key}`.
    PathStyle { endpoint: String },
    /// `https://{bucket}.{host}/{key}`, or `https://{host}/{bucket}/{key}` for dotted buckets.
    Aws { host: String },
}

impl ConfigStore {
    /// `region`, FIPS, dual-stack and the per-service endpoint overrides as the SDK configuration
    /// gives them (`AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL_SSM` or `AWS_ENDPOINT_URL`).
    /// Refuses at start-up what could never be reached, rather than at the first read.
    pub fn new(
        http: AwsHttp,
        region: Option<&str>,
        use_fips: bool,
        use_dual_stack: bool,
        s3_endpoint_override: Option<&str>,
        ssm_endpoint_override: Option<&str>,
        timeout: Duration,
    ) -> Result<Self, EndpointError> {
        let region = region.ok_or_else(|| EndpointError {
            endpoint: "<from region>".into(),
            reason: "no region configured".into(),
        })?;
        let (dns, dual_stack_dns) = if region.starts_with("cn-") {
            ("amazonaws.com.cn", "api.amazonwebservices.com.cn")
        } else {
            ("amazonaws.com", "api.aws")
        };
        let fips = if use_fips { "-fips" } else { "" };
        let ssm_endpoint = match ssm_endpoint_override {
            Some(endpoint) => endpoint.to_owned(),
            None if use_dual_stack => format!("https://ssm{fips}.{region}.{dual_stack_dns}"),
            None => format!("https://ssm{fips}.{region}.{dns}"),
        };
        let ssm = Target::new(&ssm_endpoint, "/", region, "ssm")?;
        let s3 = match s3_endpoint_override {
            Some(endpoint) => S3Endpoint::PathStyle { endpoint: endpoint.trim_end_matches('/').to_owned() },
            None => {
                let dual_stack = if use_dual_stack { ".dualstack" } else { "" };
                S3Endpoint::Aws { host: format!("s3{fips}{dual_stack}.{region}.{dns}") }
            }
        };
        let store = Self { http, region: region.to_owned(), ssm, s3, timeout };
        // Any valid location yields a valid URL iff the endpoint is usable: check one now.
        let probe = ConfigLocation::published("probe-bucket", &"0".repeat(64))
            .map_err(|e| EndpointError { endpoint: "s3".into(), reason: e.to_string() })?;
        store.object_target(&probe)?;
        Ok(store)
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The SSM endpoint (`GetParameter` is posted here).
    pub fn ssm_endpoint(&self) -> &http::Uri {
        self.ssm.uri()
    }

    /// The URL `fetch` reads `loc` from.
    pub fn object_url(&self, loc: &ConfigLocation) -> Result<String, EndpointError> {
        self.object_target(loc).map(|t| t.uri().to_string())
    }

    fn object_target(&self, loc: &ConfigLocation) -> Result<Target, EndpointError> {
        let (bucket, key) = (loc.bucket(), loc.key());
        match &self.s3 {
            S3Endpoint::PathStyle { endpoint } => {
                Target::new(endpoint, &format!("/{bucket}/{key}"), &*self.region, "s3")
            }
            S3Endpoint::Aws { host } if !bucket.contains('.') => {
                Target::new(&format!("https://{bucket}.{host}"), &format!("/{key}"), &*self.region, "s3")
            }
            S3Endpoint::Aws { host } => {
                Target::new(&format!("https://{host}"), &format!("/{bucket}/{key}"), &*self.region, "s3")
            }
        }
    }

    /// The location the SSM parameter `parameter` (name or ARN) points at.
    pub async fn read_pointer(&self, parameter: &str) -> Result<ConfigLocation, StoreError> {
        let what = || format!("SSM parameter {parameter}");
        let body = serde_json::json!({ "Name": parameter }).to_string().into_bytes();
        let target = [(HeaderName::from_static("x-amz-target"), GET_PARAMETER)];
        let response = self
            .http
            .post(&self.ssm, SSM_CONTENT_TYPE, &target, body, self.timeout)
            .await
            .map_err(|e| call_failed(what(), e))?;
        let json: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
        if !response.status.is_success() {
            let code =
                error_code(&response.headers, json.get("__type").and_then(Value::as_str)).unwrap_or("");
            let message = one_line(
                json.get("message").or_else(|| json.get("Message")).and_then(Value::as_str).unwrap_or(""),
            );
            return Err(match code {
                "ParameterNotFound" => StoreError::ParameterMissing { parameter: parameter.to_owned() },
                "AccessDeniedException" => {
                    StoreError::ParameterDenied { parameter: parameter.to_owned(), message }
                }
                _ => StoreError::Unexpected {
                    what: what(),
                    status: response.status.as_u16(),
                    code: code.to_owned(),
                    message,
                },
            });
        }
        let value = json.pointer("/Parameter/Value").and_then(Value::as_str).ok_or_else(|| {
            StoreError::Unexpected {
                what: what(),
                status: response.status.as_u16(),
                code: "NoValue".into(),
                message: "the answer has no Parameter.Value".into(),
            }
        })?;
        value.parse().map_err(|source| StoreError::BadPointer { parameter: parameter.to_owned(), source })
    }

    /// The bytes of `loc`, checked against the version its name carries (at most
    /// [`MAX_CONFIG_BYTES`]).
    pub async fn fetch(&self, loc: &ConfigLocation) -> Result<Vec<u8>, StoreError> {
        let target = self
            .object_target(loc)
            .map_err(|e| StoreError::NotConfigured { what: loc.to_string(), reason: e.to_string() })?;
        let response = match self.http.get(&target, MAX_CONFIG_BYTES, self.timeout).await {
            Ok(response) => response,
            Err(GetError::TooLarge { .. }) => {
                return Err(StoreError::TooLarge { location: loc.clone(), limit: MAX_CONFIG_BYTES })
            }
            Err(GetError::Call(e)) => return Err(call_failed(loc.to_string(), e)),
        };
        if !response.status.is_success() {
            return Err(s3_error(loc, &response));
        }
        let actual = sha256_hex(&response.body);
        if actual != loc.version_hex() {
            return Err(StoreError::DigestMismatch { location: loc.clone(), actual });
        }
        Ok(response.body.to_vec())
    }
}

/// No response: a local problem (credentials, request) or the service out of reach.
fn call_failed(what: String, e: CallError) -> StoreError {
    let reason = one_line(&e.to_string());
    if e.nothing_sent() {
        StoreError::NotConfigured { what, reason }
    } else {
        StoreError::Unreachable { what, reason }
    }
}

/// An S3 error answer (XML `<Error><Code>…</Code><Message>…</Message></Error>`; a `HEAD`-like
/// answer may have no body, then the status decides).
fn s3_error(loc: &ConfigLocation, response: &Response) -> StoreError {
    let text = String::from_utf8_lossy(&response.body);
    let element = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&format!("</{name}>"))? + start;
        Some(one_line(&text[start..end]))
    };
    let code = element("Code").unwrap_or_default();
    let message = element("Message").unwrap_or_default();
    match (response.status.as_u16(), code.as_str()) {
        (404, _) | (_, "NoSuchKey" | "NoSuchBucket") => {
            let code = if code.is_empty() { "HTTP 404".to_owned() } else { code };
            StoreError::ObjectMissing { location: loc.clone(), code }
        }
        (403, _) | (_, "AccessDenied") => StoreError::ObjectDenied { location: loc.clone(), message },
        (status, _) => StoreError::Unexpected { what: loc.to_string(), status, code, message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn store(region: &str, fips: bool, dual: bool, endpoint: Option<&str>) -> ConfigStore {
        let http = AwsHttp::new(None, Duration::from_secs(1));
        ConfigStore::new(http, Some(region), fips, dual, endpoint, endpoint, DEFAULT_TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn url(store: &ConfigStore, bucket: &str) -> String {
        let loc = ConfigLocation::published(bucket, HEX).unwrap_or_else(|e| panic!("{e}"));
        store.object_url(&loc).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn on_aws_objects_are_virtual_hosted_unless_the_bucket_has_dots() {
        let s = store("eu-west-1", false, false, None);
        assert_eq!(
            url(&s, "cfg"),
            format!("https://cfg.s3.eu-west-1.amazonaws.com/notice-config/{HEX}.json")
        );
        assert_eq!(
            url(&s, "my.cfg"),
            format!("https://s3.eu-west-1.amazonaws.com/my.cfg/notice-config/{HEX}.json")
        );
        assert_eq!(s.ssm_endpoint().to_string(), "https://ssm.eu-west-1.amazonaws.com/");
    }

    #[test]
    fn fips_dual_stack_and_china_hosts() {
        let s = store("us-east-1", true, true, None);
        assert!(url(&s, "cfg").starts_with("https://cfg.s3-fips.dualstack.us-east-1.amazonaws.com/"));
        assert_eq!(s.ssm_endpoint().to_string(), "https://ssm-fips.us-east-1.api.aws/");
        let s = store("cn-north-1", false, false, None);
        assert!(url(&s, "cfg").starts_with("https://cfg.s3.cn-north-1.amazonaws.com.cn/"));
        assert_eq!(s.ssm_endpoint().to_string(), "https://ssm.cn-north-1.amazonaws.com.cn/");
    }

    #[test]
    fn an_endpoint_override_is_path_style() {
        let s = store("us-east-1", false, false, Some("http://127.0.0.1:5000/"));
        assert_eq!(url(&s, "cfg"), format!("http://127.0.0.1:5000/cfg/notice-config/{HEX}.json"));
        assert_eq!(s.ssm_endpoint().to_string(), "http://127.0.0.1:5000/");
    }

    #[test]
    fn an_unusable_place_is_refused_at_start() {
        let http = AwsHttp::new(None, Duration::from_secs(1));
        assert!(ConfigStore::new(http.clone(), None, false, false, None, None, DEFAULT_TIMEOUT).is_err());
        let bad = Some("127.0.0.1:5000");
        assert!(ConfigStore::new(http, Some("us-east-1"), false, false, bad, None, DEFAULT_TIMEOUT).is_err());
    }

    #[test]
    fn s3_error_answers_are_told_apart() {
        let loc = ConfigLocation::published("cfg", HEX).unwrap_or_else(|e| panic!("{e}"));
        let answer = |status: u16, body: &'static str| Response {
            status: http::StatusCode::from_u16(status).unwrap_or_else(|e| panic!("{e}")),
            headers: http::HeaderMap::new(),
            body: body.as_bytes().to_vec().into(),
        };
        let missing =
            "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>";
        assert!(
            matches!(s3_error(&loc, &answer(404, missing)), StoreError::ObjectMissing { code, .. } if code == "NoSuchKey")
        );
        assert!(matches!(s3_error(&loc, &answer(404, "")), StoreError::ObjectMissing { .. }));
        let denied = "<Error><Code>AccessDenied</Code><Message>Access\n Denied</Message></Error>";
        assert!(
            matches!(s3_error(&loc, &answer(403, denied)), StoreError::ObjectDenied { message, .. } if message == "Access Denied")
        );
        assert!(matches!(s3_error(&loc, &answer(500, "")), StoreError::Unexpected { status: 500, .. }));
    }
}
