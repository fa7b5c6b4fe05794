//! A lean SigV4-signed HTTP client for the sender's three hot AWS calls (DynamoDB `PutItem` and
//! `UpdateItem`, SES v2 `SendEmail`), and its few cold ones (the notice configuration's SSM
//! pointer and S3 object, read at cold start and every few minutes).
//!
//! Why: per notice the AWS SDK's per-call machinery (orchestrator, config bag, interceptors, retry
//! bookkeeping, its HTTP layers) cost several times the notice path itself (BENCHMARKS.md, "Side
//! by side with Powertools"). This client does only what those calls need: take credentials from
//! the SDK configuration's provider (cached until shortly before they expire), sign with
//! `aws-sigv4` (the hot `POST`s through [`sigv4`], which keeps each day's signing key), and send
//! on one hyper connection pool. It has no retries: a caller that may retry
//! (DynamoDB) decides per answer; a caller that must not (SES `SendEmail`) simply calls once.
//!
//! Left out on purpose, compared with the SDK: clock-skew correction, the user-agent metadata,
//! the recursion-detection and invocation-id headers, HTTP/2, proxies, stalled-stream protection
//! (callers bound every call with a timeout instead).

use std::borrow::Cow;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningInstructions,
    SigningSettings, UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, Method, StatusCode, Uri};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tracing::{debug, warn};

mod sigv4;

/// Credentials are refreshed this long before they expire, so a signature never outlives them
/// (the SDK's identity cache uses the same margin).
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(10);
/// Idle connections are kept this long (the SDK's default); Lambda freezes the process between
/// invocations, and a connection the server closed meanwhile is replaced on its next checkout.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
const AGENT: &str = concat!("notice-ledger/", env!("CARGO_PKG_VERSION"), " lean-aws-http");

type HyperClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Why a call got no HTTP response. [`CallError::nothing_sent`] tells the callers that must
/// know whether the request may have reached AWS (SES: one attempt per claim).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("no AWS credentials: {0}")]
    Credentials(String),
    #[error("the request could not be built or signed: {0}")]
    Build(String),
    #[error("no complete response within {0:?}")]
    Timeout(Duration),
    #[error("could not connect: {0}")]
    Connect(String),
    #[error("transport failed: {0}")]
    Transport(String),
}

impl CallError {
    /// True when the request certainly never left this process.
    pub fn nothing_sent(&self) -> bool {
        matches!(self, Self::Credentials(_) | Self::Build(_))
    }
}

/// Why a `GET` brought back no usable response: no response at all, or one longer than the
/// caller's bound (not read past the bound).
#[derive(Debug, thiserror::Error)]
pub enum GetError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("the response body is larger than {limit} bytes (HTTP {status})")]
    TooLarge { status: StatusCode, limit: usize },
}

/// How a service expects requests to be signed. The JSON services take the defaults; S3 differs
/// in three ways, and a request signed the default way is refused by it: the payload hash goes
/// in an `x-amz-content-sha256` header (which S3 requires), and the path is signed as sent —
/// neither normalised (`a/../b` is a legal key) nor encoded a second time.
fn signing_settings(signing_name: &str) -> SigningSettings {
    let mut settings = SigningSettings::default();
    if signing_name == "s3" {
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        settings.percent_encoding_mode = PercentEncodingMode::Single;
    }
    settings
}

/// An endpoint that cannot be used for signed calls.
#[derive(Debug, thiserror::Error)]
#[error("unusable AWS endpoint {endpoint:?}: {reason}")]
pub struct EndpointError {
    pub endpoint: String,
    pub reason: String,
}

/// One operation's address: the full URI (resolved endpoint + path), the signing region and the
/// signing name. Parsed once, at start-up.
#[derive(Clone, Debug)]
pub struct Target {
    uri: Uri,
    uri_text: String,
    region: String,
    signing_name: &'static str,
    /// Set when `POST`s to this target can take the SigV4 fast path ([`sigv4`]).
    shape: Option<sigv4::Shape>,
}

impl Target {
    /// `endpoint` as the SDK's endpoint resolver gave it (scheme, host, optional port and path).
    pub fn new(
        endpoint: &str,
        path: &str,
        region: impl Into<String>,
        signing_name: &'static str,
    ) -> Result<Self, EndpointError> {
        let uri_text = format!("{}{path}", endpoint.trim_end_matches('/'));
        let fail = |reason: String| EndpointError { endpoint: endpoint.to_owned(), reason };
        let uri: Uri = uri_text.parse().map_err(|e: http::uri::InvalidUri| fail(e.to_string()))?;
        // Signing needs the host; hyper needs the scheme.
        if uri.host().is_none_or(str::is_empty) {
            return Err(fail("no host".into()));
        }
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(fail("scheme is not http or https".into()));
        }
        let shape = sigv4::Shape::of(&uri, signing_name);
        Ok(Self { uri, uri_text, region: region.into(), signing_name, shape })
    }

    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    pub fn region(&self) -> &str {
        &self.region
    }
}

/// A complete HTTP response, body read.
#[derive(Debug)]
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// Signed calls over one connection pool; cheap to clone (all clones share the pool and the
/// credentials cache).
#[derive(Clone, Debug)]
pub struct AwsHttp {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Built on the first call, like the SDK's connector: loading the root certificates is
    /// file I/O that the cold start should not pay.
    client: OnceLock<Result<HyperClient, String>>,
    connect_timeout: Duration,
    credentials: Option<SharedCredentialsProvider>,
    cached: Mutex<Option<Identity>>,
    keys: sigv4::Keys,
}

impl AwsHttp {
    /// A client taking credentials from `credentials` (the SDK configuration's provider).
    /// `connect_timeout` bounds each TCP (and TLS) connection attempt.
    pub fn new(credentials: Option<SharedCredentialsProvider>, connect_timeout: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                client: OnceLock::new(),
                connect_timeout,
                credentials,
                cached: Mutex::new(None),
                keys: sigv4::Keys::default(),
            }),
        }
    }

    pub fn connect_timeout(&self) -> Duration {
        self.inner.connect_timeout
    }

    /// One signed `POST` of `body` to `target`, bounded as a whole (connect, send, read the
    /// whole response) by `timeout`. Any HTTP status is a `Response`; only a missing response
    /// is an error. Never retried here.
    pub async fn post(
        &self,
        target: &Target,
        content_type: &'static str,
        extra_headers: &[(HeaderName, &'static str)],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Response, CallError> {
        let identity = self.identity().await?;
        let now = SystemTime::now();
        let request =
            self.sign_with(&identity, now, target, Method::POST, Some(content_type), extra_headers, body)?;
        self.send(request, None, timeout).await.map_err(|e| match e {
            GetError::Call(e) => e,
            // Unreachable without a limit; reported as what it would be, a broken answer.
            GetError::TooLarge { limit, .. } => CallError::Transport(format!("body over {limit} bytes")),
        })
    }

    /// One signed `GET` of `target` (S3 `GetObject`: signed as S3 expects, see
    /// [`signing_settings`]), bounded as a whole by `timeout`. A body longer than `max_body` is
    /// refused without being held in memory: the object read at cold start must not be able to
    /// exhaust a small Lambda. Any HTTP status is a `Response`. Never retried here.
    pub async fn get(
        &self,
        target: &Target,
        max_body: usize,
        timeout: Duration,
    ) -> Result<Response, GetError> {
        let identity = self.identity().await?;
        let request =
            self.sign_with(&identity, SystemTime::now(), target, Method::GET, None, &[], Vec::new())?;
        self.send(request, Some(max_body), timeout).await
    }

    /// Sends `request` and reads the whole answer (at most `max_body` bytes when given).
    async fn send(
        &self,
        request: http::Request<Full<Bytes>>,
        max_body: Option<usize>,
        timeout: Duration,
    ) -> Result<Response, GetError> {
        let client = self.client()?;
        let call = async {
            let response = client.request(request).await.map_err(|e| {
                let text = error_chain(&e);
                if e.is_connect() {
                    CallError::Connect(text)
                } else {
                    CallError::Transport(text)
                }
            })?;
            let (parts, body) = response.into_parts();
            let body = match max_body {
                None => body.collect().await.map_err(|e| CallError::Transport(error_chain(&e)))?.to_bytes(),
                Some(limit) => {
                    let too_large = GetError::TooLarge { status: parts.status, limit };
                    let announced = parts
                        .headers
                        .get(CONTENT_LENGTH)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<u64>().ok());
                    if announced.is_some_and(|n| n > limit as u64) {
                        return Err(too_large);
                    }
                    match Limited::new(body, limit).collect().await {
                        Ok(collected) => collected.to_bytes(),
                        Err(e) if e.is::<LengthLimitError>() => return Err(too_large),
                        Err(e) => return Err(CallError::Transport(error_chain(e.as_ref())).into()),
                    }
                }
            };
            Ok(Response { status: parts.status, headers: parts.headers, body })
        };
        tokio::time::timeout(timeout, call).await.map_err(|_| CallError::Timeout(timeout))?
    }

    /// The request, signed by `identity` at `now`: on the fast path when the request has its
    /// shape ([`sigv4`]), by `aws_sigv4::http_request::sign` otherwise.
    #[allow(clippy::too_many_arguments)]
    fn sign_with(
        &self,
        identity: &Identity,
        now: SystemTime,
        target: &Target,
        method: Method,
        content_type: Option<&'static str>,
        extra_headers: &[(HeaderName, &'static str)],
        body: Vec<u8>,
    ) -> Result<http::Request<Full<Bytes>>, CallError> {
        let fast = match (&method, &target.shape, content_type, identity.data::<Credentials>()) {
            (&Method::POST, Some(shape), Some(content_type), Some(creds)) => self.inner.keys.sign_post(
                shape,
                creds,
                &target.region,
                target.signing_name,
                content_type,
                extra_headers,
                &body,
                now,
            ),
            _ => None,
        };
        let signature = match fast {
            Some(signed) => Signature::Fast(signed),
            None => Signature::General(general_signature(
                identity,
                now,
                target,
                &method,
                content_type,
                extra_headers,
                &body,
            )?),
        };
        let mut request = http::Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = method;
        *request.uri_mut() = target.uri.clone();
        let map = request.headers_mut();
        if let Some(content_type) = content_type {
            map.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        }
        for (name, value) in extra_headers {
            map.insert(name.clone(), HeaderValue::from_static(value));
        }
        map.insert(USER_AGENT, HeaderValue::from_static(AGENT));
        match signature {
            Signature::Fast(signed) => signed.apply(request.headers_mut()),
            Signature::General(instructions) => instructions.apply_to_request_http1x(&mut request),
        }
        Ok(request)
    }

    /// The cached identity, or a fresh one from the provider when none is cached or it is about
    /// to expire. Lambda's environment credentials never expire within the process.
    async fn identity(&self) -> Result<Identity, CallError> {
        let fresh = |identity: &Identity| {
            identity.expiration().is_none_or(|at| at > SystemTime::now() + REFRESH_BEFORE_EXPIRY)
        };
        if let Ok(cached) = self.inner.cached.lock() {
            if let Some(identity) = cached.as_ref().filter(|i| fresh(i)) {
                return Ok(identity.clone());
            }
        }
        let provider = self
            .inner
            .credentials
            .as_ref()
            .ok_or_else(|| CallError::Credentials("no credentials provider is configured".into()))?;
        // Concurrent first calls may each ask the provider; the last answer is kept, any is valid.
        let credentials =
            provider.provide_credentials().await.map_err(|e| CallError::Credentials(error_chain(&e)))?;
        debug!(expiry = ?credentials.expiry(), "loaded AWS credentials");
        let identity = Identity::from(credentials);
        if let Ok(mut cached) = self.inner.cached.lock() {
            *cached = Some(identity.clone());
        }
        Ok(identity)
    }

    fn client(&self) -> Result<&HyperClient, CallError> {
        self.inner
            .client
            .get_or_init(|| build_client(self.inner.connect_timeout))
            .as_ref()
            .map_err(|e| CallError::Build(e.clone()))
    }
}

/// The headers a request is signed with, by whichever path signed it.
enum Signature {
    Fast(sigv4::Signed),
    General(SigningInstructions),
}

/// The signature `aws_sigv4::http_request::sign` gives: every request outside the fast path's
/// shape (S3, `GET`s, anything unusual).
fn general_signature(
    identity: &Identity,
    now: SystemTime,
    target: &Target,
    method: &Method,
    content_type: Option<&'static str>,
    extra_headers: &[(HeaderName, &'static str)],
    body: &[u8],
) -> Result<SigningInstructions, CallError> {
    let mut headers = Vec::with_capacity(extra_headers.len() + 1);
    if let Some(content_type) = content_type {
        headers.push((CONTENT_TYPE.as_str(), content_type));
    }
    headers.extend(extra_headers.iter().map(|(name, value)| (name.as_str(), *value)));
    let params = v4::SigningParams::builder()
        .identity(identity)
        .region(&target.region)
        .name(target.signing_name)
        .time(now)
        .settings(signing_settings(target.signing_name))
        .build()
        .map_err(|e| CallError::Build(e.to_string()))?
        .into();
    let signable = SignableRequest::new(
        method.as_str(),
        Cow::Borrowed(target.uri_text.as_str()),
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| CallError::Build(e.to_string()))?;
    let (instructions, _signature) =
        sign(signable, &params).map_err(|e| CallError::Build(e.to_string()))?.into_parts();
    Ok(instructions)
}

/// The TLS settings, built once per process and shared by every pool: the root store is the
/// largest part (the SDK caches its copy the same way).
static TLS: LazyLock<Result<Arc<rustls::ClientConfig>, String>> = LazyLock::new(|| {
    let loaded = rustls_native_certs::load_native_certs();
    if !loaded.errors.is_empty() {
        warn!(errors = ?loaded.errors, "some root certificates could not be loaded");
    }
    let mut roots = rustls::RootCertStore::empty();
    let (valid, _invalid) = roots.add_parsable_certificates(loaded.certs);
    if valid == 0 {
        warn!("no root certificates found: HTTPS endpoints will fail");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(tls))
});

/// HTTP/1.1 over TLS (rustls with aws-lc-rs, the platform's root certificates, as the SDK's
/// default client) or plain HTTP (emulators), with TCP_NODELAY and a bounded connect.
fn build_client(connect_timeout: Duration) -> Result<HyperClient, String> {
    let tls = TLS.as_ref().map_err(Clone::clone)?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    // `enable_http1` offers ALPN `http/1.1` only.
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(rustls::ClientConfig::clone(tls))
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_timer(TokioTimer::new())
        .build(https))
}

/// The error and its causes on one line.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The error code of an AWS JSON error answer, from the `x-amzn-ErrorType` header or the body's
/// `__type` / `code`, without the namespace (`…#Code`) and the suffix (`Code:http://…`), as the
/// SDK's JSON protocols read it.
pub fn error_code<'a>(headers: &'a HeaderMap, body_type: Option<&'a str>) -> Option<&'a str> {
    let raw = headers.get("x-amzn-errortype").and_then(|v| v.to_str().ok()).or(body_type)?;
    let code = raw.split(':').next().unwrap_or(raw);
    let code = code.rsplit('#').next().unwrap_or(code).trim();
    (!code.is_empty()).then_some(code)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use aws_credential_types::Credentials;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    fn creds(token: Option<&str>) -> Option<SharedCredentialsProvider> {
        Some(SharedCredentialsProvider::new(Credentials::new(
            "AKIDEXAMPLE",
            "secret",
            token.map(str::to_owned),
            None,
            "test",
        )))
    }

    /// A server answering one request per connection with `reply`, handing back what it read.
    async fn one_shot(reply: &'static str) -> (SocketAddr, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap_or_else(|e| panic!("accept: {e}"));
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = socket.read(&mut buf).await.unwrap_or(0);
                seen.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&seen);
                if n == 0 || text.contains("\r\n\r\n") && text.ends_with("}") {
                    break;
                }
            }
            let _ = socket.write_all(reply.as_bytes()).await;
            String::from_utf8_lossy(&seen).into_owned()
        });
        (addr, task)
    }

    #[test]
    fn targets_need_a_host_and_an_http_scheme() {
        assert!(Target::new("https://dynamodb.us-east-1.amazonaws.com", "/", "us-east-1", "dynamodb").is_ok());
        let t = Target::new("http://127.0.0.1:5000/", "/v2/email/outbound-emails", "us-east-1", "ses")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.uri().to_string(), "http://127.0.0.1:5000/v2/email/outbound-emails");
        assert!(Target::new("127.0.0.1:5000", "/", "us-east-1", "ses").is_err());
        assert!(Target::new("ftp://host", "/", "us-east-1", "ses").is_err());
    }

    #[test]
    fn error_codes_as_the_sdk_reads_them() {
        let mut headers = HeaderMap::new();
        assert_eq!(
            error_code(&headers, Some("com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException")),
            Some("ConditionalCheckFailedException")
        );
        assert_eq!(error_code(&headers, None), None);
        headers.insert(
            "x-amzn-ErrorType",
            HeaderValue::from_static("MessageRejected:http://internal.amazon.com/"),
        );
        assert_eq!(error_code(&headers, Some("Other")), Some("MessageRejected"), "the header wins");
    }

    #[tokio::test]
    async fn signs_with_the_session_token_and_reads_the_whole_answer() {
        let (addr, server) = one_shot(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{\"a\":\"b\"}\r\n",
        )
        .await;
        let http = AwsHttp::new(creds(Some("TOKEN123")), Duration::from_secs(3));
        let target = Target::new(&format!("http://{addr}"), "/", "eu-west-1", "dynamodb")
            .unwrap_or_else(|e| panic!("{e}"));
        let xt = HeaderName::from_static("x-amz-target");
        let response = http
            .post(
                &target,
                "application/x-amz-json-1.0",
                &[(xt, "DynamoDB_20120810.PutItem")],
                b"{}".to_vec(),
                Duration::from_secs(5),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.status, StatusCode::BAD_REQUEST);
        assert_eq!(&response.body[..], b"{\"a\":\"b\"}\r\n");
        let seen = server.await.unwrap_or_else(|e| panic!("{e}")).to_ascii_lowercase();
        assert!(seen.starts_with("post / http/1.1"), "{seen}");
        assert!(seen.contains("x-amz-security-token: token123"), "{seen}");
        assert!(seen.contains("authorization: aws4-hmac-sha256 credential=akidexample/"), "{seen}");
        assert!(seen.contains("/eu-west-1/dynamodb/aws4_request"), "{seen}");
        assert!(seen.contains("x-amz-target: dynamodb_20120810.putitem"), "{seen}");
    }

    /// A server answering one bodiless request (a `GET`) with `reply`, handing back what it read.
    async fn one_get(reply: String) -> (SocketAddr, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap_or_else(|e| panic!("accept: {e}"));
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !String::from_utf8_lossy(&seen).contains("\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
            }
            let _ = socket.write_all(reply.as_bytes()).await;
            String::from_utf8_lossy(&seen).into_owned()
        });
        (addr, task)
    }

    #[tokio::test]
    async fn a_get_is_signed_as_s3_expects() {
        let (addr, server) =
            one_get("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".into()).await;
        let http = AwsHttp::new(creds(None), Duration::from_secs(3));
        let target =
            Target::new(&format!("http://{addr}"), "/bucket/notice-config/ab.json", "eu-west-1", "s3")
                .unwrap_or_else(|e| panic!("{e}"));
        let response = http.get(&target, 16, Duration::from_secs(5)).await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((response.status, &response.body[..]), (StatusCode::OK, &b"hello"[..]));
        let seen = server.await.unwrap_or_else(|e| panic!("{e}")).to_ascii_lowercase();
        assert!(seen.starts_with("get /bucket/notice-config/ab.json http/1.1"), "{seen}");
        // The SHA-256 of the empty payload, which S3 requires as a header.
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert!(seen.contains(&format!("x-amz-content-sha256: {empty}")), "{seen}");
        assert!(seen.contains("/eu-west-1/s3/aws4_request"), "{seen}");
        assert!(!seen.contains("content-type"), "{seen}");
    }

    #[tokio::test]
    async fn a_get_longer_than_its_bound_is_refused() {
        for announced in [true, false] {
            let reply = if announced {
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: 64\r\nConnection: close\r\n\r\n{}",
                    "x".repeat(64)
                )
            } else {
                format!("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{}", "x".repeat(64))
            };
            let (addr, _server) = one_get(reply).await;
            let http = AwsHttp::new(creds(None), Duration::from_secs(3));
            let target = Target::new(&format!("http://{addr}"), "/b/k", "us-east-1", "s3")
                .unwrap_or_else(|e| panic!("{e}"));
            let err = http.get(&target, 16, Duration::from_secs(5)).await.err();
            assert!(
                matches!(err, Some(GetError::TooLarge { limit: 16, status: StatusCode::OK })),
                "announced={announced}: {err:?}"
            );
        }
    }

    #[test]
    fn only_s3_is_signed_the_s3_way() {
        let s3 = signing_settings("s3");
        assert_eq!(s3.payload_checksum_kind, PayloadChecksumKind::XAmzSha256);
        assert_eq!(s3.percent_encoding_mode, PercentEncodingMode::Single);
        assert_eq!(s3.uri_path_normalization_mode, UriPathNormalizationMode::Disabled);
        let ssm = signing_settings("ssm");
        assert_eq!(ssm.payload_checksum_kind, PayloadChecksumKind::NoHeader);
        assert_eq!(ssm.percent_encoding_mode, PercentEncodingMode::Double);
    }

    #[tokio::test]
    async fn a_silent_server_is_a_timeout_and_maybe_sent() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
        let _hold = tokio::spawn(async move {
            let accepted = listener.accept().await;
            tokio::time::sleep(Duration::from_secs(5)).await;
            drop(accepted);
        });
        let http = AwsHttp::new(creds(None), Duration::from_secs(3));
        let target =
            Target::new(&format!("http://{addr}"), "/", "us-east-1", "ses").unwrap_or_else(|e| panic!("{e}"));
        let err = http
            .post(&target, "application/json", &[], b"{}".to_vec(), Duration::from_millis(200))
            .await
            .err()
            .unwrap_or_else(|| panic!("a silent server must not answer"));
        assert!(matches!(err, CallError::Timeout(_)), "{err:?}");
        assert!(!err.nothing_sent());
    }

    #[tokio::test]
    async fn no_listener_is_a_connect_error() {
        let http = AwsHttp::new(creds(None), Duration::from_secs(3));
        let target =
            Target::new("http://127.0.0.1:1", "/", "us-east-1", "ses").unwrap_or_else(|e| panic!("{e}"));
        let err = http
            .post(&target, "application/json", &[], b"{}".to_vec(), Duration::from_secs(3))
            .await
            .err()
            .unwrap_or_else(|| panic!("nothing listens on port 1"));
        assert!(matches!(err, CallError::Connect(_)), "{err:?}");
    }

    #[tokio::test]
    async fn without_credentials_nothing_is_sent() {
        let http = AwsHttp::new(None, Duration::from_secs(3));
        let target =
            Target::new("http://127.0.0.1:1", "/", "us-east-1", "ses").unwrap_or_else(|e| panic!("{e}"));
        let err = http
            .post(&target, "application/json", &[], b"{}".to_vec(), Duration::from_secs(3))
            .await
            .err()
            .unwrap_or_else(|| panic!("no credentials"));
        assert!(matches!(err, CallError::Credentials(_)) && err.nothing_sent(), "{err:?}");
    }
}
