//! Stripe's API, read-only: the customer records a price change's notice needs
//! ([`StripeApi`], the core's [`CustomerSource`]), and the subscription records an anniversary
//! reminder needs (the core's [`SubscriptionSource`]: when the subscription began, which no
//! upcoming-invoice event states).
//!
//! One `GET {base}/v1/customers/{id}` and one
//! `GET {base}/v1/subscriptions/{id}?expand[]=latest_invoice` per price change (is the event stale,
//! which amount is in force), one `GET {base}/v1/subscriptions/{id}` per renewal an anniversary rule
//! speaks for, with a restricted key (read-only Customers and Subscriptions, and Invoices where
//! price changes are announced), `Stripe-Version` pinned to [`API_VERSION`], a bounded connect
//! and a bounded whole request ([`TIMEOUT`]), no retry here: the webhook is the retry — a failed
//! lookup answers Stripe 500, and Stripe delivers the event again.
//!
//! | Stripe's answer | [`LookupError`] | the intake answers |
//! |---|---|---|
//! | 200, a customer | — | plans the notice |
//! | 200 `deleted: true`, 404 | `NotFound` | 200 `refused` (naming `customer`) |
//! | no connection | `Failed`, `Unreachable` | 500: Stripe retries |
//! | no complete answer within [`TIMEOUT`] | `Failed`, `TimedOut` | 500 |
//! | 429 | `Failed`, `Throttled` | 500 |
//! | 401 / 403 | `Failed`, `BadCredentials` / `Denied` (a misconfiguration: logged as such) | 500 |
//! | 5xx, anything else | `Failed`, `Other` | 500 |
//!
//! The key is never logged: [`ApiKey`]'s `Debug` shows its kind only, and no error carries it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::DateTime;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use notice_ledger::intake::{
    Amount, Customer, CustomerSource, LookupError, Subscription, SubscriptionSource,
};
use notice_ledger::Fault;
use serde_json::Value;

/// The API version every request pins: the customer object's fields read here (`email`,
/// `preferred_locales`, `address`, `deleted`) are the same in every version since; pinning keeps
/// the account's default version (which an operator may upgrade) from changing the shape.
pub const API_VERSION: &str = "2025-03-31.basil";
/// Stripe's own API.
pub const DEFAULT_BASE: &str = "https://api.stripe.com";
/// The bound on one whole request (connect, send, answer, body): well inside Stripe's 10 s
/// webhook timeout, so the intake answers 500 itself rather than being cut off.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Largest object read: a customer is about 1–2 KiB, a subscription with its latest invoice
/// expanded (up to ten lines inline) some 10–30 KiB.
const MAX_BODY_BYTES: usize = 256 * 1024;
const SERVICE: &str = "Stripe API";

/// A Stripe API key: a restricted key (`rk_…`) or, refused nowhere but discouraged, a secret key
/// (`sk_…`). Its `Debug` and `Display` never show it.
#[derive(Clone)]
pub struct ApiKey(Arc<str>);

/// Why a key or a base URL is not usable (start-up errors; neither value is ever in the text).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApiSetupError {
    #[error("is empty")]
    EmptyKey,
    #[error("is not a Stripe API key (expected `rk_…` or `sk_…`)")]
    NotAKey,
    #[error("`{0}` is not an http(s) URL")]
    BadBase(String),
    #[error("TLS configuration: {0}")]
    Tls(String),
}

impl ApiKey {
    pub fn parse(value: &str) -> Result<Self, ApiSetupError> {
        let value = value.trim();
        if value.is_empty() {
            return Err(ApiSetupError::EmptyKey);
        }
        let shaped = (value.starts_with("rk_") || value.starts_with("sk_"))
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !shaped {
            return Err(ApiSetupError::NotAKey);
        }
        Ok(Self(value.into()))
    }

    /// `restricted` or `secret`, for the start-up line.
    pub fn kind(&self) -> &'static str {
        if self.0.starts_with("rk_") {
            "restricted"
        } else {
            "secret"
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey({}, redacted)", self.kind())
    }
}

type HyperClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Stripe's API as the intake reads it: customers by id.
#[derive(Clone)]
pub struct StripeApi {
    client: HyperClient,
    base: String,
    key: ApiKey,
    timeout: Duration,
}

impl fmt::Debug for StripeApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StripeApi").field("base", &self.base).field("key", &self.key).finish()
    }
}

impl StripeApi {
    /// A client for `base` (`https://api.stripe.com`, or a local stand-in in tests), bounded by
    /// [`TIMEOUT`].
    pub fn new(base: &str, key: ApiKey) -> Result<Self, ApiSetupError> {
        let base = base.trim().trim_end_matches('/').to_owned();
        if !(base.starts_with("https://") || base.starts_with("http://"))
            || base.parse::<http::Uri>().is_err()
        {
            return Err(ApiSetupError::BadBase(base));
        }
        Ok(Self { client: build_client(TIMEOUT)?, base, key, timeout: TIMEOUT })
    }

    /// The same with another bound on each request (tests use a short one).
    pub fn with_timeout(mut self, timeout: Duration) -> Result<Self, ApiSetupError> {
        self.client = build_client(timeout)?;
        self.timeout = timeout;
        Ok(self)
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn key_kind(&self) -> &'static str {
        self.key.kind()
    }

    /// `GET {base}{path}`: the JSON object, or the fault Stripe's answer (or its absence) means.
    /// `action`: what a 403 means the restricted key lacks (`read customers`).
    async fn get(&self, path: &str, id: &str, action: &str) -> Result<Value, LookupError> {
        let failed = |fault: Fault, detail: String| LookupError::Failed { service: SERVICE, fault, detail };
        let request = http::Request::get(format!("{}{path}", self.base))
            .header(http::header::AUTHORIZATION, format!("Bearer {}", self.key.0))
            .header("Stripe-Version", API_VERSION)
            .header(http::header::ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())
            .map_err(|e| failed(Fault::Other, format!("request: {e}")))?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| {
                let fault = if e.is_connect() { Fault::Unreachable("no connection") } else { Fault::Other };
                failed(fault, format!("GET {path}: {e}"))
            })?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_BODY_BYTES)
                .collect()
                .await
                .map_err(|e| failed(Fault::Other, format!("GET {path}: reading the answer: {e}")))?
                .to_bytes();
            Ok::<_, LookupError>((status, body))
        };
        let (status, body) = tokio::time::timeout(self.timeout, exchange).await.map_err(|_| {
            failed(Fault::TimedOut, format!("GET {path}: no complete answer within {:?}", self.timeout))
        })??;
        let message = || {
            serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_default()
        };
        match status.as_u16() {
            200 => serde_json::from_slice(&body)
                .map_err(|e| failed(Fault::Other, format!("GET {path}: the answer is not JSON: {e}"))),
            404 => Err(LookupError::NotFound {
                id: id.to_owned(),
                reason: format!("Stripe has no such object ({})", message()),
            }),
            401 => Err(failed(
                Fault::BadCredentials,
                format!("GET {path}: 401, the API key is not accepted: {}", message()),
            )),
            403 => Err(failed(
                Fault::Denied { action: Some(action.to_owned()) },
                format!("GET {path}: 403, the restricted key lacks read access: {}", message()),
            )),
            429 => Err(failed(Fault::Throttled, format!("GET {path}: 429, rate limited"))),
            code => Err(failed(Fault::Other, format!("GET {path}: Stripe answered {code}: {}", message()))),
        }
    }
}

#[async_trait]
impl CustomerSource for StripeApi {
    async fn customer(&self, id: &str) -> Result<Customer, LookupError> {
        // An id is a path segment: anything but Stripe's own id alphabet is not one of its ids.
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(LookupError::NotFound {
                id: id.to_owned(),
                reason: "is not a Stripe customer id".into(),
            });
        }
        let object = self.get(&format!("/v1/customers/{id}"), id, "read customers").await?;
        if object.get("deleted").and_then(Value::as_bool) == Some(true) {
            return Err(LookupError::NotFound {
                id: id.to_owned(),
                reason: "the customer is deleted".into(),
            });
        }
        Ok(customer(&object))
    }
}

#[async_trait]
impl SubscriptionSource for StripeApi {
    async fn subscription(&self, id: &str) -> Result<Subscription, LookupError> {
        let path = format!("/v1/subscriptions/{}", subscription_id(id)?);
        Ok(subscription(&self.get(&path, id, "read subscriptions").await?))
    }

    /// With its latest invoice expanded (`expand[]=latest_invoice`): the amount the current
    /// period was billed at, which a change back is told by — one request, and the only one that
    /// needs the key's read access to invoices.
    async fn priced_subscription(&self, id: &str) -> Result<Subscription, LookupError> {
        let path = format!("/v1/subscriptions/{}?expand%5B%5D=latest_invoice", subscription_id(id)?);
        Ok(subscription(&self.get(&path, id, "read subscriptions and invoices").await?))
    }
}

/// `id` when it is one of Stripe's ids: anything outside Stripe's id alphabet is never put in a
/// path (as for a customer).
fn subscription_id(id: &str) -> Result<&str, LookupError> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(LookupError::NotFound {
            id: id.to_owned(),
            reason: "is not a Stripe subscription id".into(),
        });
    }
    Ok(id)
}

/// A subscription's facts from Stripe's subscription object: `start_date` (when the subscription
/// began — a backdated one counts from there, not from `created`), its first item's term
/// (`price.recurring`, or `plan` before prices), its price now (Σ `unit_amount` × `quantity` of
/// `items.data`), the amount in force ([`in_force`]) and, while `status` is `trialing`, its trial
/// ([`crate::events::trial`]). Each is `None` when the object lacks
/// it: the rule that needs the start or the term then refuses, naming the fact; without the
/// prices a change back is announced like any change.
pub fn subscription(object: &Value) -> Subscription {
    let items = object.pointer("/items/data").and_then(Value::as_array).filter(|i| !i.is_empty());
    Subscription {
        started_at: object
            .get("start_date")
            .and_then(Value::as_i64)
            .and_then(|s| DateTime::from_timestamp(s, 0)),
        term: object.pointer("/items/data/0").and_then(crate::events::term),
        price: items
            .and_then(|items| crate::events::amount(items, None).ok())
            .map(|(minor, currency)| Amount { minor, currency }),
        in_force: in_force(object),
        // Read as the subscription's own event is read, so both plan the same notice.
        trial: crate::events::is_trialing(object).then(|| crate::events::trial("subscription", object)),
    }
}

/// The amount per period the current period was billed at: the subscription's `latest_invoice`
/// (expanded), Σ `amount` of its subscription lines (not prorations) whose `period.end` is the
/// subscription's current period end, in the invoice's currency. `None` when the invoice is not
/// expanded, lists more lines than it carries (`lines.has_more`), or has no such line (the
/// latest invoice is a proration invoice, or an older period's): the amount in force is then not
/// known, never guessed.
pub fn in_force(subscription: &Value) -> Option<Amount> {
    let invoice = subscription.get("latest_invoice").filter(|i| i.is_object())?;
    let end = crate::events::period_end(subscription)?;
    let lines = invoice.get("lines")?;
    if lines.get("has_more").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let mut total: Option<i64> = None;
    for line in lines.get("data")?.as_array()?.iter().filter(|l| crate::events::is_subscription_line(l)) {
        if line.pointer("/period/end").and_then(Value::as_i64) != Some(end) {
            continue;
        }
        total = Some(total.unwrap_or(0).checked_add(line.get("amount")?.as_i64()?)?);
    }
    let currency = invoice.get("currency").and_then(Value::as_str).filter(|c| !c.is_empty())?;
    Some(Amount { minor: total?, currency: currency.to_ascii_uppercase() })
}

/// The notice's facts from Stripe's customer object: `email`, the first of
/// `preferred_locales`, and the jurisdiction of `address` (country and state).
pub fn customer(object: &Value) -> Customer {
    let text =
        |v: Option<&Value>| v.and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(str::to_owned);
    Customer {
        email: text(object.get("email")),
        locale: text(object.pointer("/preferred_locales/0")),
        jurisdiction: crate::events::jurisdiction(object.get("address")),
    }
}

/// HTTP/1.1 over TLS (rustls with aws-lc-rs and the platform's roots, as the AWS client) or
/// plain HTTP (a local stand-in), with a bounded connect.
fn build_client(connect_timeout: Duration) -> Result<HyperClient, ApiSetupError> {
    let loaded = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(loaded.certs);
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ApiSetupError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new()).build(https))
}
