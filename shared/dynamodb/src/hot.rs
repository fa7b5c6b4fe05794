//! The ledger table's calls without the SDK's per-call machinery: the JSON body DynamoDB's
//! protocol (`awsJson1_0`) defines, signed and sent by [`notice_awshttp`]. Every write the ledger
//! table takes goes through here — the claim and every transition (`PutItem`, `UpdateItem`), the
//! claim with its aliases during a key rotation (`TransactWriteItems`), the token takes (the rate
//! buckets' conditional `UpdateItem`s), the key check, operator transitions and backfill — and so
//! do the reads on a send path: the batch's dedupe read (`BatchGetItem`) and single consistent
//! reads (`GetItem`). Queries and scans (the quarantine view, the operator's key and time scans)
//! stay on the SDK client: operator pace, never on a send path.
//!
//! Retries follow the SDK's standard policy, simplified: up to `max_attempts` attempts (the SDK
//! configuration's, 3 by default) for throttling codes, HTTP 5xx and answers that never came
//! (connect failures, transport errors, the per-attempt timeout), with full-jitter exponential
//! backoff from `initial_backoff` (1 s by default) capped at 20 s. No retry quota (token bucket).
//! A retried write whose first attempt landed comes back as a failed condition with the item it
//! wrote, which the ledger recognises as its own (see `ledger`); a retried transaction carries
//! the first attempt's `ClientRequestToken`, so DynamoDB answers it as already applied.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use futures::FutureExt;
use http::header::HeaderName;
use notice_awshttp::fault::{call_fault, code_fault};
use notice_awshttp::{error_code, AwsHttp, CallError, EndpointError, Response, Target};
use rand::Rng;
use serde::Serialize;
use serde_json::Value;
use tracing::debug;

use notice_ledger::Fault;

use crate::item::Item;

mod wire;

use wire::*;

const CONTENT_TYPE: &str = "application/x-amz-json-1.0";
const PUT_ITEM: &str = "DynamoDB_20120810.PutItem";
const UPDATE_ITEM: &str = "DynamoDB_20120810.UpdateItem";
const BATCH_GET_ITEM: &str = "DynamoDB_20120810.BatchGetItem";
const GET_ITEM: &str = "DynamoDB_20120810.GetItem";
const TRANSACT_WRITE_ITEMS: &str = "DynamoDB_20120810.TransactWriteItems";
const MAX_BACKOFF: Duration = Duration::from_secs(20);
/// Bounds one attempt, connect to last byte. The SDK client has no operation timeout for
/// DynamoDB, only stalled-stream protection (a response with no progress for 5 s fails); a hard
/// bound per attempt replaces it. DynamoDB writes answer in milliseconds.
pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Error codes the SDK's standard retry policy treats as throttling or transient.
const RETRYABLE_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
    "RequestTimeout",
    "RequestTimeoutException",
    "InternalServerError",
    "InternalError",
];

/// The lean DynamoDB client: one endpoint, the retry policy.
#[derive(Clone, Debug)]
pub struct HotWrites {
    http: AwsHttp,
    /// The endpoint, or why none could be resolved ([`HotWrites::unusable`]): every call then
    /// fails with that reason, as each of the SDK client's calls would.
    target: Result<Target, String>,
    max_attempts: u32,
    initial_backoff: Duration,
    attempt_timeout: Duration,
}

/// How a hot write failed.
#[derive(Debug)]
pub(crate) enum HotFailure {
    /// `ConditionalCheckFailedException`, with the item when DynamoDB returned it.
    Condition(Option<Item>),
    /// Anything else, after the retries: why, as the answer's error code or the transport said,
    /// and the text naming the cause.
    Other(Fault, String),
}

/// One `Put` of a `TransactWriteItems`: the item, written only if `condition` holds.
#[derive(Debug)]
pub(crate) struct TransactPut<'a> {
    pub(crate) item: Item,
    pub(crate) condition: &'a str,
    pub(crate) names: &'a HashMap<String, String>,
    pub(crate) values: &'a Item,
}

/// Why one action of a cancelled transaction did not apply (`CancellationReasons`, in the order
/// of the request's actions): `code` `"None"` for an action that would have applied,
/// `"ConditionalCheckFailed"` with the item it was checked against (`ALL_OLD`), or another cause.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CancellationReason {
    pub(crate) code: Option<String>,
    pub(crate) item: Option<Item>,
}

/// How a `TransactWriteItems` failed.
#[derive(Debug)]
pub(crate) enum TransactFailure {
    /// `TransactionCanceledException`: nothing was written; a reason per action, and DynamoDB's
    /// message.
    Cancelled { reasons: Vec<CancellationReason>, message: String },
    /// Anything else, after the retries: why, and the text naming the cause.
    Other(Fault, String),
}

impl HotWrites {
    /// Resolves the endpoint the way the SDK client does: the SDK's own endpoint rules over
    /// `region`, FIPS, dual-stack and the endpoint override (`AWS_ENDPOINT_URL_DYNAMODB` or
    /// `AWS_ENDPOINT_URL`). Account-ID-based endpoints are not used (the regional one serves the
    /// same table).
    pub fn new(
        http: AwsHttp,
        region: Option<&str>,
        use_fips: bool,
        use_dual_stack: bool,
        endpoint_override: Option<&str>,
    ) -> Result<Self, EndpointError> {
        let target = resolve(region, use_fips, use_dual_stack, endpoint_override)?;
        Ok(Self::with_target(http, Ok(target)))
    }

    /// A client whose endpoint could not be resolved: every call fails with `error`. The one
    /// write path stays the one write path even then; the SDK client built from the same
    /// configuration fails the same way on its first call.
    pub fn unusable(http: AwsHttp, error: &EndpointError) -> Self {
        Self::with_target(http, Err(error.to_string()))
    }

    fn with_target(http: AwsHttp, target: Result<Target, String>) -> Self {
        Self {
            http,
            target,
            max_attempts: 3,
            initial_backoff: Duration::from_secs(1),
            attempt_timeout: DEFAULT_ATTEMPT_TIMEOUT,
        }
    }

    /// The retry policy (the SDK configuration's `RetryConfig`): at least one attempt.
    pub fn with_retries(mut self, max_attempts: u32, initial_backoff: Duration) -> Self {
        self.max_attempts = max_attempts.max(1);
        self.initial_backoff = initial_backoff;
        self
    }

    pub fn with_attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = timeout;
        self
    }

    /// The resolved endpoint; `None` for an [`HotWrites::unusable`] client.
    pub fn endpoint(&self) -> Option<&http::Uri> {
        self.target.as_ref().ok().map(Target::uri)
    }

    /// Why the endpoint could not be resolved, for an [`HotWrites::unusable`] client.
    pub fn endpoint_error(&self) -> Option<&str> {
        self.target.as_ref().err().map(String::as_str)
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Conditional `PutItem` of `item`; on a failed condition DynamoDB returns the item it held.
    pub(crate) async fn put_item(
        &self,
        table: &str,
        item: &Item,
        condition: &str,
        names: &HashMap<String, String>,
        values: &Item,
    ) -> Result<(), HotFailure> {
        let body = PutItem {
            table_name: table,
            item: ItemJson(item),
            condition_expression: condition,
            expression_attribute_names: (!names.is_empty()).then_some(names),
            expression_attribute_values: (!values.is_empty()).then_some(ItemJson(values)),
            return_values_on_condition_check_failure: "ALL_OLD",
        };
        self.call(PUT_ITEM, &body).await.map(drop)
    }

    /// Conditional `UpdateItem` of the item at `key`; on a failed condition DynamoDB returns the
    /// item it held.
    pub(crate) async fn update_item(
        &self,
        table: &str,
        key: &Item,
        update: &str,
        condition: &str,
        names: &HashMap<String, String>,
        values: &Item,
    ) -> Result<(), HotFailure> {
        let body = UpdateItem::new(table, key, update, condition, names, values, None);
        self.call(UPDATE_ITEM, &body).await.map(drop)
    }

    /// [`HotWrites::update_item`] answering the attributes it wrote (`ReturnValues=UPDATED_NEW`).
    pub(crate) async fn update_item_returning(
        &self,
        table: &str,
        key: &Item,
        update: &str,
        condition: &str,
        names: &HashMap<String, String>,
        values: &Item,
    ) -> Result<Item, HotFailure> {
        let body = UpdateItem::new(table, key, update, condition, names, values, Some("UPDATED_NEW"));
        let answer = self.call(UPDATE_ITEM, &body).await?;
        let parsed: Value = serde_json::from_slice(&answer)
            .map_err(|e| HotFailure::Other(Fault::Other, format!("unreadable UpdateItem answer: {e}")))?;
        let attributes = parsed
            .get("Attributes")
            .ok_or_else(|| HotFailure::Other(Fault::Other, "UpdateItem answered no Attributes".into()))?;
        item_from_json(attributes)
            .map_err(|e| HotFailure::Other(Fault::Other, format!("unreadable UpdateItem attributes: {e}")))
    }

    /// One strongly consistent `BatchGetItem` round over `keys` (at most 100, distinct) of `table`:
    /// the items found, and the keys DynamoDB left unprocessed (the caller asks again for those).
    /// A read is idempotent, so the retry policy applies as to the writes.
    pub(crate) async fn batch_get_item(
        &self,
        table: &str,
        keys: &[Item],
    ) -> Result<(Vec<Item>, Vec<Item>), HotFailure> {
        let body = BatchGetItem {
            request_items: HashMap::from([(table, KeysJson { keys, consistent_read: true })]),
        };
        let answer = self.call(BATCH_GET_ITEM, &body).await?;
        batch_get_answer(&answer, table)
            .map_err(|e| HotFailure::Other(Fault::Other, format!("unreadable BatchGetItem answer: {e}")))
    }

    /// One strongly consistent `GetItem` of the item at `key`: `None` when there is none. A read
    /// is idempotent, so the retry policy applies as to the writes.
    pub(crate) async fn get_item(&self, table: &str, key: &Item) -> Result<Option<Item>, HotFailure> {
        let body = GetItem { table_name: table, key: ItemJson(key), consistent_read: true };
        let answer = self.call(GET_ITEM, &body).await?;
        get_answer(&answer)
            .map_err(|e| HotFailure::Other(Fault::Other, format!("unreadable GetItem answer: {e}")))
    }

    /// One `TransactWriteItems` of conditional puts, all or none. A cancelled transaction
    /// answers each action's reason, a failed condition with the item it was checked against.
    /// Its `ClientRequestToken` is drawn once, so an attempt retried after a lost answer is
    /// recognised by DynamoDB as the one that applied (for 10 minutes), as the SDK's is.
    pub(crate) async fn transact_put_items(
        &self,
        table: &str,
        puts: &[TransactPut<'_>],
    ) -> Result<(), TransactFailure> {
        let token: String = {
            let mut rng = rand::thread_rng();
            (0..32).map(|_| char::from(b"0123456789abcdef"[rng.gen_range(0..16)])).collect()
        };
        let body = TransactWriteItems {
            transact_items: puts
                .iter()
                .map(|put| TransactItem { put: TransactPutJson { table_name: table, put } })
                .collect(),
            client_request_token: &token,
        };
        match self.attempts(TRANSACT_WRITE_ITEMS, &body).await {
            Ok(_) => Ok(()),
            Err((failure, answer)) => Err(match cancellation(&answer) {
                Some(Ok((reasons, message))) => TransactFailure::Cancelled { reasons, message },
                Some(Err(e)) => TransactFailure::Other(
                    Fault::Other,
                    format!("unreadable TransactionCanceledException: {e}"),
                ),
                None => match failure {
                    HotFailure::Other(fault, text) => TransactFailure::Other(fault, text),
                    HotFailure::Condition(_) => TransactFailure::Other(
                        Fault::Other,
                        "a condition failure outside the transaction's reasons".into(),
                    ),
                },
            }),
        }
    }

    /// One operation with the retry policy; the answer's body when it applied.
    async fn call(&self, operation: &'static str, body: &impl Serialize) -> Result<bytes::Bytes, HotFailure> {
        self.attempts(operation, body).await.map_err(|(failure, _)| failure)
    }

    /// [`HotWrites::call`], with the last answer's body beside a failure (empty when no answer
    /// came): a cancelled transaction's reasons are in it.
    async fn attempts(
        &self,
        operation: &'static str,
        body: &impl Serialize,
    ) -> Result<bytes::Bytes, (HotFailure, bytes::Bytes)> {
        let no_answer = |text: String| (HotFailure::Other(Fault::Other, text), bytes::Bytes::new());
        let target = self.target.as_ref().map_err(|e| no_answer(e.clone()))?;
        let body = serde_json::to_vec(body).map_err(|e| no_answer(format!("request body: {e}")))?;
        let target_header = [(HeaderName::from_static("x-amz-target"), operation)];
        let mut attempt = 1;
        loop {
            let result = self
                .http
                .post(target, CONTENT_TYPE, &target_header, body.clone(), self.attempt_timeout)
                .await;
            let (verdict, answer) = match result {
                Ok(response) => (classify(&response), response.body),
                Err(e) => (
                    Verdict { retry: !e.nothing_sent(), throttled: false, failure: transport(&e) },
                    bytes::Bytes::new(),
                ),
            };
            let Some(failure) = verdict.failure else { return Ok(answer) };
            let failure = failure.with_action(operation);
            if !verdict.retry || attempt >= self.max_attempts {
                return Err((failure, answer));
            }
            let delay = self.backoff(attempt);
            debug!(operation, attempt, ?delay, throttled = verdict.throttled, "retrying DynamoDB call");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// Full jitter: uniform in [0, min(20 s, initial × 2^(attempt − 1))].
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self.initial_backoff.saturating_mul(1 << (attempt - 1).min(16)).min(MAX_BACKOFF);
        ceiling.mul_f64(rand::thread_rng().gen_range(0.0..=1.0))
    }
}

/// What an attempt established: `failure` none means the write applied.
#[derive(Debug)]
struct Verdict {
    retry: bool,
    throttled: bool,
    failure: Option<HotFailure>,
}

impl HotFailure {
    /// A denial names the operation refused (`dynamodb:PutItem`), known from the call itself.
    fn with_action(self, operation: &str) -> Self {
        match self {
            Self::Other(Fault::Denied { action: None }, text) => {
                let name = operation.rsplit('.').next().unwrap_or(operation);
                Self::Other(Fault::Denied { action: Some(format!("dynamodb:{name}")) }, text)
            }
            other => other,
        }
    }
}

/// A call without an answer, and why by its kind (the one reading every AWS adapter shares).
fn transport(e: &CallError) -> Option<HotFailure> {
    Some(HotFailure::Other(call_fault(e), e.to_string()))
}

/// The endpoint the SDK client would call, from the SDK's own endpoint rules.
fn resolve(
    region: Option<&str>,
    use_fips: bool,
    use_dual_stack: bool,
    endpoint_override: Option<&str>,
) -> Result<Target, EndpointError> {
    let fail = |reason: String| EndpointError {
        endpoint: endpoint_override.unwrap_or("<from region>").to_owned(),
        reason,
    };
    let region = region.ok_or_else(|| fail("no region configured".into()))?;
    let params = Params::builder()
        .region(region)
        .use_fips(use_fips)
        .use_dual_stack(use_dual_stack)
        .set_endpoint(endpoint_override.map(str::to_owned))
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let endpoint = DefaultResolver::new()
        .resolve_endpoint(&params)
        .now_or_never()
        .ok_or_else(|| fail("the endpoint resolver did not answer at once".into()))?
        .map_err(|e| fail(e.to_string()))?;
    Target::new(endpoint.url(), "/", region, "dynamodb")
}

/// An HTTP answer to a write. Pure, so every branch is unit-tested.
fn classify(response: &Response) -> Verdict {
    let status = response.status.as_u16();
    if response.status.is_success() {
        return Verdict { retry: false, throttled: false, failure: None };
    }
    let parsed: Option<Value> = serde_json::from_slice(&response.body).ok();
    let field = |name: &str| parsed.as_ref().and_then(|v| v.get(name)).and_then(Value::as_str);
    let code = error_code(&response.headers, field("__type").or_else(|| field("code")));
    let message = field("message").or_else(|| field("Message")).unwrap_or("");
    if code == Some("ConditionalCheckFailedException") {
        let item = parsed.as_ref().and_then(|v| v.get("Item")).map(item_from_json).transpose();
        return match item {
            Ok(item) => {
                Verdict { retry: false, throttled: false, failure: Some(HotFailure::Condition(item)) }
            }
            Err(e) => Verdict {
                retry: false,
                throttled: false,
                failure: Some(HotFailure::Other(
                    Fault::Other,
                    format!("unreadable ConditionalCheckFailedException item: {e}"),
                )),
            },
        };
    }
    let throttled =
        status == 429 || code.is_some_and(|c| RETRYABLE_CODES.contains(&c) && c != "RequestTimeout");
    let retry = throttled || status >= 500 || code.is_some_and(|c| RETRYABLE_CODES.contains(&c));
    let fault = code.map_or(Fault::Other, code_fault);
    let failure =
        HotFailure::Other(fault, format!("HTTP {status} {}: {message}", code.unwrap_or("(no error code)")));
    Verdict { retry, throttled, failure: Some(failure) }
}

#[cfg(test)]
mod tests;
