//! `notice-reconciler`: closes quarantined claims with the provider's own evidence.
//!
//! Input is either an SQS event whose bodies are SES notifications (SNS envelopes, or raw events
//! with raw message delivery) — the default wiring in `template.yaml` — or a single EventBridge
//! event (`source: aws.ses`). An SQS batch's tagged events are applied to the ledger in one call,
//! [`notice_ledger::ledger::EvidenceLedger::apply_evidence_batch`] (on DynamoDB: one batch read,
//! and a write only for a row the events change); a malformed body fails only its own record.
//!
//! Outcomes: a `Bounce` or `Complaint` applied to a notice's row is published as a `bounced` or
//! `complained` event ([`OutcomeSink`], `NOTICE_OUTCOME_BUS`), built from the evidence and the
//! row the ledger answered when it applied it (no second read), the batch's events in one bounded publish after every record is
//! applied — as the sender does: a failure is counted (`OutcomePublishFailed`) and logged with the
//! notice key, and never fails a record (the ledger has the status; republish from it).

use std::sync::{Arc, LazyLock};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use chrono::Utc;
use lambda_runtime::LambdaEvent;
use notice_ledger::ledger::{Applied, EvidenceEffect, EvidenceLedger, LedgerRow, ProviderEvidence};
use notice_ledger::metrics::emf_document;
use notice_ledger::outcomes::{
    evidence_published, publish_logged, OutcomeEvent, OutcomePublisher, PUBLISH_BUDGET,
};
use notice_ledger::{ConfigError, LedgerError};
use notice_ses::events::{self, SesNotification};
use notice_setup::aws;
use notice_setup::ledger_url::ledger_from_env;
use serde_json::{json, Value};
use tracing::{error, info, warn};

/// Counts for one invocation, published as one EMF document.
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct Tally {
    pub resolved: u64,
    pub learned: u64,
    pub updated: u64,
    pub duplicates: u64,
    /// `Send` events for withdrawn keys: the notice went out after all.
    pub sent_after_withdraw: u64,
    /// Other events for withdrawn keys: the row stays withdrawn.
    pub kept_withdrawn: u64,
    pub untagged: u64,
    pub validation: u64,
    pub malformed: u64,
    pub ledger_errors: u64,
    /// Outcome events (`bounced`, `complained`) put on the bus, and those that could not be.
    pub outcomes_published: u64,
    pub outcome_publish_failed: u64,
}

/// The EMF `Function` dimension: the deployed function's own name (`AWS_LAMBDA_FUNCTION_NAME`), so
/// two stacks in one account never share metrics or alarms. Read once, at start-up
/// ([`ReconcilerApp::from_env`]) or at the first published document.
static FUNCTION_NAME: LazyLock<String> =
    LazyLock::new(|| notice_setup::config::function_name("notice-reconciler"));

pub struct ReconcilerApp {
    pub ledger: Arc<dyn EvidenceLedger>,
}

impl ReconcilerApp {
    pub async fn from_env() -> Result<Self, ConfigError> {
        Ok(Self::from_env_with_outcomes().await?.0)
    }

    /// [`ReconcilerApp::from_env`], with the outcome events' sink when `NOTICE_OUTCOME_BUS`
    /// names a bus (the start-up log says which).
    pub async fn from_env_with_outcomes() -> Result<(Self, Option<OutcomeSink>), ConfigError> {
        LazyLock::force(&FUNCTION_NAME);
        let sdk = aws::load_sdk_config().await;
        let ledger = ledger_from_env(&sdk).await?;
        let publisher = notice_setup::settings::outcome_publisher(
            &sdk,
            notice_setup::settings::OutcomeSettings::from_env().as_ref(),
        )?;
        let sink = publisher.map(|publisher| OutcomeSink { publisher });
        Ok((Self { ledger }, sink))
    }
}

/// Where the reconciler's outcome events go. Each is built from the evidence and the row the
/// ledger answered when it applied it (a bounce names only the key; the event carries the
/// notice's identity from its row): no second read.
#[derive(Clone)]
pub struct OutcomeSink {
    pub publisher: Arc<dyn OutcomePublisher>,
}

/// A bounce or complaint applied to a notice's row: an outcome to publish.
#[derive(Debug)]
struct Outcome {
    evidence: ProviderEvidence,
    /// The row as the evidence left it.
    row: LedgerRow,
}

/// What happened to one notification.
#[derive(Debug)]
enum Handled {
    /// Applied; with the outcome when it is a bounce or complaint on the notice's own message.
    Effect(EvidenceEffect, Option<Box<Outcome>>),
    Untagged,
    Validation,
    Malformed(String),
    LedgerError(String),
}

/// Entry point for both shapes. SQS → `SqsBatchResponse`; EventBridge → a small JSON summary, or an
/// error so Lambda's async retry (and the function's failure destination) keeps the event.
pub async fn handle(app: &ReconcilerApp, event: LambdaEvent<Value>) -> Result<Value, lambda_runtime::Error> {
    handle_with_outcomes(app, None, event).await
}

/// [`handle`], publishing `bounced` and `complained` outcome events through `outcomes`.
pub async fn handle_with_outcomes(
    app: &ReconcilerApp,
    outcomes: Option<&OutcomeSink>,
    event: LambdaEvent<Value>,
) -> Result<Value, lambda_runtime::Error> {
    let payload = event.payload;
    if payload.get("Records").is_some() {
        let sqs: SqsEvent = serde_json::from_value(payload)?;
        let (response, tally) = handle_sqs_with_outcomes(app, outcomes, sqs).await;
        publish(&tally);
        return Ok(serde_json::to_value(response)?);
    }
    let mut tally = Tally::default();
    let handled = match events::parse_value(&payload).map(evidence_of) {
        Ok(Ok(evidence)) => {
            tracing::Span::current().record("notice_key", evidence.key.as_str());
            let applied = app.ledger.apply_evidence(&evidence).await;
            handled_as(evidence, applied)
        }
        Ok(Err(skipped)) => skipped,
        Err(e) => Handled::Malformed(e.to_string()),
    };
    count(&mut tally, &handled);
    publish_outcomes(outcomes, std::slice::from_ref(&handled), &mut tally).await;
    publish(&tally);
    match handled {
        Handled::Malformed(e) | Handled::LedgerError(e) => Err(e.into()),
        other => Ok(json!({"result": format!("{other:?}")})),
    }
}

/// Processes an SQS batch; failed records are retried and then dead-lettered by the queue.
pub async fn handle_sqs(app: &ReconcilerApp, event: SqsEvent) -> (SqsBatchResponse, Tally) {
    handle_sqs_with_outcomes(app, None, event).await
}

/// [`handle_sqs`], then the batch's `bounced` and `complained` events in one bounded publish
/// through `outcomes` (after every record is applied; the answer does not depend on it).
///
/// Each body is parsed on its own (a malformed one fails only its record); the batch's evidence is
/// applied in one call ([`EvidenceLedger::apply_evidence_batch`]: on DynamoDB one batch read, and
/// a write only where a row changes), events for the same key in the batch's order.
pub async fn handle_sqs_with_outcomes(
    app: &ReconcilerApp,
    outcomes: Option<&OutcomeSink>,
    event: SqsEvent,
) -> (SqsBatchResponse, Tally) {
    let mut records: Vec<(String, tracing::Span, Option<Handled>)> = Vec::with_capacity(event.records.len());
    let mut evidence = Vec::new();
    let mut applying = Vec::new();
    for record in event.records {
        let message_id = record.message_id.clone().unwrap_or_default();
        let span =
            tracing::info_span!("ses_event", message_id = %message_id, notice_key = tracing::field::Empty);
        let parsed =
            span.in_scope(|| events::parse_body(record.body.as_deref().unwrap_or("")).map(evidence_of));
        let handled = match parsed {
            Ok(Ok(ev)) => {
                span.record("notice_key", ev.key.as_str());
                applying.push(records.len());
                evidence.push(ev);
                None
            }
            Ok(Err(skipped)) => Some(skipped),
            Err(e) => Some(Handled::Malformed(e.to_string())),
        };
        records.push((message_id, span, handled));
    }
    let answers = app.ledger.apply_evidence_batch(&evidence).await;
    for ((i, ev), applied) in applying.into_iter().zip(evidence).zip(answers) {
        let (_, span, handled) = &mut records[i];
        *handled = Some(span.in_scope(|| handled_as(ev, applied)));
    }
    let mut tally = Tally::default();
    let mut response = SqsBatchResponse::default();
    let mut handled = Vec::with_capacity(records.len());
    for (message_id, span, h) in records {
        let h = h.unwrap_or_else(|| Handled::LedgerError("no answer from the ledger".into()));
        span.in_scope(|| count(&mut tally, &h));
        if matches!(h, Handled::Malformed(_) | Handled::LedgerError(_)) {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = message_id;
            response.batch_item_failures.push(failure);
        }
        handled.push(h);
    }
    publish_outcomes(outcomes, &handled, &mut tally).await;
    (response, tally)
}

/// The outcome events of what was applied: each bounce or complaint with the row the ledger
/// answered for it (a row without an identity — learned from provider events — has no event),
/// published in one bounded call. Failures are counted and logged with the key, never returned.
async fn publish_outcomes(outcomes: Option<&OutcomeSink>, handled: &[Handled], tally: &mut Tally) {
    let Some(sink) = outcomes else { return };
    let mut events = Vec::new();
    for h in handled {
        let Handled::Effect(_, Some(outcome)) = h else { continue };
        match OutcomeEvent::for_evidence(&outcome.row, &outcome.evidence) {
            Some(event) => events.push(event),
            None => {
                info!(notice_key = %outcome.evidence.key.as_str(), "no outcome event: the row has no identity (learned from provider events)")
            }
        }
    }
    if events.is_empty() {
        return;
    }
    let report = publish_logged(sink.publisher.as_ref(), events, PUBLISH_BUDGET).await;
    tally.outcomes_published += report.published as u64;
    tally.outcome_publish_failed += report.failed.len() as u64;
}

/// The evidence a notification carries, or how it was skipped.
fn evidence_of(notification: SesNotification) -> Result<ProviderEvidence, Handled> {
    match notification {
        SesNotification::Validation => {
            info!("SNS topic validation message skipped");
            Err(Handled::Validation)
        }
        SesNotification::Untagged { event_type } => {
            info!(event_type, "event without a notice_key tag skipped");
            Err(Handled::Untagged)
        }
        SesNotification::Evidence(ev) => Ok(ev),
    }
}

/// What the ledger's answer for `evidence` means, logged (inside the record's span).
fn handled_as(evidence: ProviderEvidence, applied: Result<Applied, LedgerError>) -> Handled {
    match applied {
        Ok(Applied { effect, row }) => {
            // Which evidence is one of the notice's outcomes is the core's rule.
            let outcome = evidence_published(&effect, evidence.status);
            match &effect {
                EvidenceEffect::DuplicateSend { first, second } => error!(
                    first_message_id = %first,
                    second_message_id = %second,
                    "duplicate send detected: a second message really went out for this notice key"
                ),
                EvidenceEffect::Learned => {
                    warn!(message_id = %evidence.message_id, "send evidence for a key with no ledger row: recorded as sent")
                }
                EvidenceEffect::Resolved => {
                    info!(message_id = %evidence.message_id, "claim resolved as sent by provider evidence")
                }
                EvidenceEffect::Updated => {
                    info!(status = evidence.status.as_str(), "delivery status recorded")
                }
                EvidenceEffect::SentAfterWithdraw => error!(
                    message_id = %evidence.message_id,
                    "a withdrawn notice went out after all: recorded as sent (SentAfterWithdraw)"
                ),
                EvidenceEffect::KeptWithdrawn => warn!(
                    status = evidence.status.as_str(),
                    "event for a withdrawn notice without its Send: the row stays withdrawn until a Send proves it went out"
                ),
            }
            Handled::Effect(effect, outcome.then(|| Box::new(Outcome { evidence, row })))
        }
        Err(e) => {
            error!(error = %e, "could not apply provider evidence");
            Handled::LedgerError(e.to_string())
        }
    }
}

fn count(tally: &mut Tally, handled: &Handled) {
    match handled {
        Handled::Effect(EvidenceEffect::Resolved, _) => tally.resolved += 1,
        Handled::Effect(EvidenceEffect::Learned, _) => tally.learned += 1,
        Handled::Effect(EvidenceEffect::Updated, _) => tally.updated += 1,
        Handled::Effect(EvidenceEffect::DuplicateSend { .. }, _) => tally.duplicates += 1,
        Handled::Effect(EvidenceEffect::SentAfterWithdraw, _) => tally.sent_after_withdraw += 1,
        Handled::Effect(EvidenceEffect::KeptWithdrawn, _) => tally.kept_withdrawn += 1,
        Handled::Untagged => tally.untagged += 1,
        Handled::Validation => tally.validation += 1,
        Handled::Malformed(e) => {
            warn!(error = %e, "malformed notification");
            tally.malformed += 1
        }
        Handled::LedgerError(_) => tally.ledger_errors += 1,
    }
}

fn publish(t: &Tally) {
    let metrics = [
        ("ClaimsResolvedByEvidence", t.resolved),
        ("SendsLearnedFromEvents", t.learned),
        ("DeliveryStatusUpdates", t.updated),
        ("DuplicateSendsDetected", t.duplicates),
        ("SentAfterWithdraw", t.sent_after_withdraw),
        ("EventsForWithdrawnNotices", t.kept_withdrawn),
        ("UntaggedEvents", t.untagged),
        ("MalformedEvents", t.malformed),
        ("LedgerErrors", t.ledger_errors),
        ("OutcomesPublished", t.outcomes_published),
        ("OutcomePublishFailed", t.outcome_publish_failed),
    ];
    let doc = emf_document(
        &FUNCTION_NAME,
        Utc::now().timestamp_millis(),
        // As the sender's: a counter that counted nothing is left out (its name and definition
        // would be log bytes on every invocation), except the pulse, `DeliveryStatusUpdates`.
        metrics
            .iter()
            .filter(|(n, v)| *v > 0 || *n == "DeliveryStatusUpdates")
            .map(|(n, v)| (*n, "Count", json!(v))),
    );
    println!("{doc}");
}
