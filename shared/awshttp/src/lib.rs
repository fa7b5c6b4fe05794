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

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http::{HeaderMap, StatusCode, Uri};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;

mod client;
pub mod fault;
mod signing;
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
    Connect(ConnectFailure),
    #[error("transport failed: {0}")]
    Transport(String),
}

impl CallError {
    /// True when the request certainly never left this process.
    pub fn nothing_sent(&self) -> bool {
        matches!(self, Self::Credentials(_) | Self::Build(_))
    }
}

/// Why no connection was made: the error's text, and the I/O error kind found in its sources
/// (refused, reset, no route, timed out), so a caller tells the causes apart by the kind, never
/// by the words.
#[derive(Debug)]
pub struct ConnectFailure {
    /// `None` when no I/O error lies underneath (a DNS failure, a TLS handshake).
    pub kind: Option<std::io::ErrorKind>,
    text: String,
}

impl ConnectFailure {
    /// A failure with what its I/O error said, if anything.
    pub fn new(kind: Option<std::io::ErrorKind>, text: impl Into<String>) -> Self {
        Self { kind, text: text.into() }
    }
}

impl std::fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<&str> for ConnectFailure {
    fn from(text: &str) -> Self {
        Self::new(None, text)
    }
}

impl From<String> for ConnectFailure {
    fn from(text: String) -> Self {
        Self::new(None, text)
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

/// The kind of the first I/O error among `err` and its sources.
fn io_kind(err: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut source = Some(err);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = cause.source();
    }
    None
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
mod tests;
