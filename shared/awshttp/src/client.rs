//! The calls: credentials from the provider (cached until shortly before they expire), one
//! hyper connection pool with TLS, and a whole request and answer bounded by one timeout.

use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http::header::{HeaderName, CONTENT_LENGTH};
use http::Method;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tracing::{debug, warn};

use crate::{
    error_chain, io_kind, sigv4, AwsHttp, CallError, ConnectFailure, GetError, HyperClient, Inner, Response,
    Target, POOL_IDLE_TIMEOUT, REFRESH_BEFORE_EXPIRY,
};

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
    /// [`signing_settings`](crate::signing::signing_settings)), bounded as a whole by `timeout`.
    /// A body longer than `max_body` is refused without being held in memory: the object read at
    /// cold start must not be able to exhaust a small Lambda. Any HTTP status is a `Response`.
    /// Never retried here.
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
                    CallError::Connect(ConnectFailure::new(io_kind(&e), text))
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
