//! `notice-intake`: the billing webhook endpoint (Stripe first), behind a Lambda Function URL.
//!
//! One request: bounded body → `Stripe-Signature` verified over the raw bytes
//! ([`notice_stripe::signature`]) → the event mapped to a billing fact
//! ([`notice_stripe::StripeMapping`]) → the fact planned against the ledger's own rows
//! ([`notice_ledger::intake::IntakePlanner`]: which revision, or a withdraw) → each message
//! enqueued on the jobs queue → only then the answer. It never writes the ledger and never sends
//! mail: the sender does both, from the queue, under its usual guarantees.
//!
//! | answer | when | counted |
//! |---|---|---|
//! | 200 `enqueued` | every message is on the queue | `IntakeJobsEnqueued`, `IntakeWithdrawsEnqueued` |
//! | 200 `ignored` | an event the intake does not map, or nothing left to do | `IntakeIgnored` |
//! | 200 `refused` | a signed event that cannot make a valid message (the field is named): a retry could never succeed, so Stripe is told to stop; logged as an error and alarmed | `IntakeRefused` |
//! | 400 | no, malformed, unmatched or expired signature; a body that is not JSON | `IntakeSignatureRejected` (alarmed), `IntakeRefused` |
//! | 405, 413 | not a POST; a body over [`MAX_BODY_BYTES`] | `IntakeRefused` |
//! | 500 | the ledger, its key check, the queue or the customer lookup (Stripe's API, for a price change) failed: Stripe retries (for up to three days) | `IntakeFailed` (alarmed) |
//!
//! A crash after enqueueing and before answering is a retry, which enqueues the same bodies
//! again: the ledger suppresses the copies (docs/intake.md).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use notice_ledger::intake::{
    BillingFact, BillingMapping, IntakeDecision, IntakePlanner, JobQueue, LookupError, PlanError,
};
use notice_ledger::keycheck::{check_ring, KeyCheckError, KeyCheckOutcome, KeyCheckStore};
use notice_ledger::ledger::RowReader;
use notice_ledger::{ConfigError, DependencyError, Fault};
use notice_stripe::{SignatureError, SigningSecrets};
use serde_json::{json, Value};
use tokio::sync::RwLock;
use tracing::{error, info, warn, Instrument};

pub mod aws;
pub mod http;
mod metrics;
pub mod settings;

pub use metrics::Tally;

#[cfg(test)]
mod tests;

/// Largest body accepted. Stripe's events are a few KiB (an invoice with many lines tens of
/// KiB); anything near this is not one of them, and reading it is work an attacker chose.
pub const MAX_BODY_BYTES: usize = 256 * 1024;
/// Shortest time between two reads of the signing secret after a signature did not match: a
/// rolled secret is picked up within a minute, and a flood of forged requests costs one read a
/// minute, not one each.
pub const SECRET_REFRESH_AFTER: Duration = Duration::from_secs(60);

/// Why the endpoint signing secret could not be read: its store failed (which one and why, as the
/// adapter read it from the typed error), or it holds no usable value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(transparent)]
    Unreadable(#[from] DependencyError),
    /// The value is not one or two signing secrets; the text names the secret, never its value.
    #[error("{0}")]
    Invalid(String),
}

impl SecretError {
    /// This failure as the setting `name`'s start-up error.
    pub fn for_setting(self, name: &'static str) -> ConfigError {
        match self {
            Self::Unreadable(error) => ConfigError::Dependency { name, error },
            Self::Invalid(reason) => ConfigError::Invalid { name, reason },
        }
    }
}

/// Where the endpoint signing secret is read from again after a rotation (Secrets Manager).
#[async_trait::async_trait]
pub trait SecretSource: Send + Sync {
    async fn read(&self) -> Result<SigningSecrets, SecretError>;
}

/// The signing secrets in force, and how to read them again.
pub struct Secrets {
    current: RwLock<(SigningSecrets, Instant)>,
    source: Option<Arc<dyn SecretSource>>,
    refresh_after: Duration,
}

impl Secrets {
    pub fn new(secrets: SigningSecrets, source: Option<Arc<dyn SecretSource>>) -> Self {
        Self { current: RwLock::new((secrets, Instant::now())), source, refresh_after: SECRET_REFRESH_AFTER }
    }

    /// The same, reading the secret again at most once per `every` (tests use zero).
    pub fn refreshing_after(mut self, every: Duration) -> Self {
        self.refresh_after = every;
        self
    }

    /// How many secrets are in force (never their values).
    pub async fn count(&self) -> usize {
        self.current.read().await.0.len()
    }

    /// Verifies with the secrets in force; on no match, reads the secret again (at most once per
    /// [`SECRET_REFRESH_AFTER`]) and verifies once more if it changed.
    async fn verify(
        &self,
        header: Option<&str>,
        body: &[u8],
        tolerance: u64,
        now: i64,
    ) -> Result<(), SignatureError> {
        let first = {
            let current = self.current.read().await;
            notice_stripe::verify(header, body, &current.0, tolerance, now)
        };
        let (Err(SignatureError::NoMatch), Some(source)) = (&first, &self.source) else { return first };
        {
            let current = self.current.read().await;
            if current.1.elapsed() < self.refresh_after {
                return first;
            }
        }
        let mut current = self.current.write().await;
        if current.1.elapsed() < self.refresh_after {
            // Another request refreshed it meanwhile.
            return notice_stripe::verify(header, body, &current.0, tolerance, now);
        }
        current.1 = Instant::now();
        match source.read().await {
            Ok(fresh) => {
                info!(
                    secrets = fresh.len(),
                    "endpoint signing secret read again after a signature did not match"
                );
                current.0 = fresh;
                notice_stripe::verify(header, body, &current.0, tolerance, now)
            }
            Err(e) => {
                warn!(error = %e, "could not read the endpoint signing secret again; keeping the one in force");
                first
            }
        }
    }
}

/// The ledger's key check, verified before the first read that decides anything: a secret that
/// is not the ledger's would find no rows and mint revision 0 for every corrected notice.
pub struct KeyGate {
    store: Arc<dyn KeyCheckStore>,
    verified: AtomicBool,
}

impl KeyGate {
    /// `verified`: the check already passed at start-up.
    pub fn new(store: Arc<dyn KeyCheckStore>, verified: bool) -> Self {
        Self { store, verified: AtomicBool::new(verified) }
    }

    /// Ok when the ledger's check matches the ring, or the ledger holds none yet (no sender has
    /// opened it: it has no rows to misread either). The error tells a secret that is not the
    /// ledger's ([`KeyCheckError::Mismatch`]) from a ledger that could not be read, with its fault.
    pub async fn ensure(&self, planner: &IntakePlanner) -> Result<(), KeyCheckError> {
        if self.verified.load(Ordering::Relaxed) {
            return Ok(());
        }
        match check_ring(self.store.as_ref(), planner.keys(), false).await? {
            KeyCheckOutcome::Verified(_) => {
                self.verified.store(true, Ordering::Relaxed);
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Everything a request needs, built once per cold start ([`settings::from_env`]).
pub struct IntakeApp {
    pub secrets: Secrets,
    /// Seconds a signature stays valid (`NOTICE_INTAKE_TOLERANCE_SECS`, Stripe's 300 by default).
    pub tolerance_secs: u64,
    pub mapping: Arc<dyn BillingMapping>,
    pub planner: IntakePlanner,
    pub ledger: Arc<dyn RowReader>,
    pub key_gate: KeyGate,
    pub queue: Arc<dyn JobQueue>,
    /// The EMF `Function` dimension: the deployed function's own name.
    pub function_name: String,
}

/// One webhook request, as the handler needs it (no Lambda types).
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    /// The `Stripe-Signature` header, if any.
    pub signature: Option<String>,
    /// The raw body, decoded from base64 when the Function URL encoded it.
    pub body: Vec<u8>,
}

/// The answer: a status and a small JSON body (Stripe shows it on the event's delivery page).
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    fn new(status: u16, body: Value) -> Self {
        Self { status, body }
    }
}

/// Handles one request at `now` (Unix seconds), counting into `tally`.
pub async fn receive(app: &IntakeApp, request: &Request, now: i64, tally: &mut Tally) -> Answer {
    if !request.method.eq_ignore_ascii_case("POST") {
        tally.refused += 1;
        return Answer::new(405, json!({"error": "webhooks are POSTed"}));
    }
    if request.body.len() > MAX_BODY_BYTES {
        tally.refused += 1;
        warn!(bytes = request.body.len(), "webhook body over the limit refused");
        return Answer::new(413, json!({"error": format!("the body is over {MAX_BODY_BYTES} bytes")}));
    }
    if let Err(e) =
        app.secrets.verify(request.signature.as_deref(), &request.body, app.tolerance_secs, now).await
    {
        tally.signature_rejected += 1;
        // Never the body: it is unauthenticated input.
        warn!(reason = e.label(), error = %e, "webhook signature refused; nothing enqueued");
        return Answer::new(400, json!({"error": e.to_string()}));
    }
    let event: Value = match serde_json::from_slice(&request.body) {
        Ok(v) => v,
        Err(e) => {
            tally.refused += 1;
            error!(error = %e, "a signed webhook body is not JSON");
            return Answer::new(400, json!({"error": "the body is not JSON"}));
        }
    };
    let source = app.mapping.source();
    let event_id = app.mapping.event_id(&event).unwrap_or("").to_owned();
    let event_type = app.mapping.event_type(&event).unwrap_or("").to_owned();
    let span = tracing::info_span!("webhook", source, event_id = %event_id, event_type = %event_type);
    decide(app, &event, &event_type, tally).instrument(span).await
}

/// A verified event: mapped, planned against the ledger, enqueued.
async fn decide(app: &IntakeApp, event: &Value, event_type: &str, tally: &mut Tally) -> Answer {
    let fact = match app.mapping.fact(event) {
        Ok(fact) => fact,
        Err(refused) => return refuse(tally, &refused.field, &refused.to_string()),
    };
    if !matches!(fact, BillingFact::Unhandled { .. }) {
        if let Err(e) = app.key_gate.ensure(&app.planner).await {
            tally.failed += 1;
            error!(error = %e, "key check failed: nothing decided, nothing enqueued; the billing system will retry");
            return Answer::new(
                500,
                json!({"error": "the ledger cannot be read with this deployment's key secret"}),
            );
        }
    }
    let decisions = match app.planner.plan(event_type, &fact, app.ledger.as_ref()).await {
        Ok(d) => d,
        Err(PlanError::Refused(refused)) => return refuse(tally, &refused.field, &refused.to_string()),
        Err(PlanError::Ledger(e)) => {
            tally.failed += 1;
            error!(error = %e, "ledger unreadable: nothing decided, nothing enqueued; the billing system will retry");
            return Answer::new(500, json!({"error": "the ledger is unavailable; retry later"}));
        }
        Err(PlanError::Lookup(e)) => {
            tally.failed += 1;
            // A refused key is a misconfiguration an operator must fix; a retry succeeds after.
            let misconfigured = matches!(
                &e,
                LookupError::NotConfigured(_)
                    | LookupError::Failed { fault: Fault::Denied { .. } | Fault::BadCredentials, .. }
            );
            error!(error = %e, misconfigured, "customer lookup failed: nothing decided, nothing enqueued; the billing system will retry");
            return Answer::new(
                500,
                json!({"error": "the billing system's customer records are unavailable; retry later"}),
            );
        }
    };
    enqueue(app, &decisions, tally).await
}

fn refuse(tally: &mut Tally, field: &str, message: &str) -> Answer {
    tally.refused += 1;
    error!(
        field,
        error = message,
        "webhook refused: it cannot make a valid message (nothing enqueued; see docs/intake.md)"
    );
    Answer::new(200, json!({"result": "refused", "field": field, "error": message}))
}

async fn enqueue(app: &IntakeApp, decisions: &[IntakeDecision], tally: &mut Tally) -> Answer {
    let mut enqueued = Vec::new();
    let mut ignored = Vec::new();
    for decision in decisions {
        let Some(body) = decision.message() else {
            if let IntakeDecision::Ignore { reason } = decision {
                ignored.push(reason.clone());
            }
            continue;
        };
        let identity = match decision {
            IntakeDecision::Send(job) => &job.identity,
            IntakeDecision::Withdraw(w) => &w.identity,
            IntakeDecision::Ignore { .. } => continue,
        };
        let key = app.planner.keys().key(identity);
        if let Err(e) = app.queue.enqueue(&body).await {
            tally.failed += 1;
            error!(error = %e, notice_key = %key, action = decision.action(), "enqueue failed; the billing system will retry (messages already enqueued are suppressed as copies)");
            return Answer::new(500, json!({"error": "the queue is unavailable; retry later"}));
        }
        match decision {
            IntakeDecision::Send(_) => tally.jobs += 1,
            _ => tally.withdraws += 1,
        }
        info!(
            notice_key = %key,
            action = decision.action(),
            subscription_id = identity.subscription_id(),
            period_start = %identity.period_start(),
            kind = %identity.kind(),
            revision = identity.revision(),
            "enqueued"
        );
        enqueued.push(json!({
            "action": decision.action(),
            "notice_key": key.prefix(),
            "period_start": identity.period_start().format("%Y-%m-%d").to_string(),
            "revision": identity.revision(),
        }));
    }
    if enqueued.is_empty() {
        tally.ignored += 1;
        info!(reason = ignored.join("; "), "webhook ignored");
        return Answer::new(200, json!({"result": "ignored", "reason": ignored.join("; ")}));
    }
    Answer::new(200, json!({"result": "enqueued", "messages": enqueued}))
}
