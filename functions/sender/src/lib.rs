//! `notice-sender`: the SQS-triggered Lambda that runs claim → send → commit for each reminder job.
//!
//! This file only adapts: SQS records in, as the SQS adapter holds them
//! ([`notice_sqs::ReceivedMessage`]), to the core's one worker ([`notice_ledger::worker`]), which
//! admits each body once, makes the batch's one ledger read and token take, delivers each record
//! and carries out the queue action the core's [`QueuePolicy`] picks — hidden (waits of at most 15
//! minutes), requeued, parked in EventBridge Scheduler (longer waits), or dead-lettered (straight
//! away when `NOTICE_DEAD_LETTER_QUEUE_URL` is set, else through the redrive policy) — and the
//! results out: an `SqsBatchResponse`, metrics, outcome events. Nothing here decides, and nothing
//! here carries a decision out beyond the SQS calls themselves. The capacity model runs the same
//! worker.
//!
//! Outcomes: each record that reached an outcome the business hears about (the core's
//! [`notice_ledger::outcomes::published_as`]) becomes an event; after every record is committed
//! and carried out, and before the batch's answer is returned, the batch's events go to the bus in
//! one `PutEvents` call (`NOTICE_OUTCOME_BUS`; [`publish_outcomes`]). A failure there is counted
//! (`OutcomePublishFailed`) and logged with the notice key, never more: no record's answer waits
//! on it or changes with it.
//!
//! Metrics: one EMF document per invocation, plus one per replay batch seen in it (the notices that
//! carried a `replay_batch` attribute, with that value as a property) — see [`emf_documents`].

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use chrono::{DateTime, Utc};
use lambda_runtime::LambdaEvent;
use notice_ledger::metrics::Metrics;
use notice_ledger::outcomes::{publish_logged, OutcomeEvent, PUBLISH_BUDGET};
use notice_ledger::queue::{Disposition, QueuedMessage};
use notice_ledger::worker::{Record, Worker};
pub use notice_setup::settings::{OutcomeSettings, ParkingSettings, SenderSettings};
use notice_sqs::{Attribute, ReceivedMessage};
use rand::Rng;
use serde_json::Value;
use tracing::warn;

mod app;
mod metrics;

pub use app::{verify_key_secret, SenderApp};
use metrics::{emf_documents, ReplayBatches};

/// The Lambda handler: one batch in, the ids of the records SQS must not delete out.
pub async fn handle(
    app: &SenderApp,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, lambda_runtime::Error> {
    let (response, metrics) = handle_batch(app, event).await;
    for document in metrics {
        println!("{document}");
    }
    Ok(response)
}

/// [`handle`] without printing: the response and the EMF documents the invocation publishes
/// (see [`emf_documents`]).
pub async fn handle_batch(app: &SenderApp, event: LambdaEvent<SqsEvent>) -> (SqsBatchResponse, Vec<Value>) {
    app.refresh_config().await;
    let replays = ReplayBatches::default();
    let deadline = deadline_instant(event.context.deadline);
    // The receive happened no later than now: hides are clamped against it (and a margin).
    let received_at = app.sender.now();
    let messages: Vec<(ReceivedMessage, u32, Arc<Metrics>)> = event
        .payload
        .records
        .into_iter()
        .map(|record| {
            let count =
                record.attributes.get("ApproximateReceiveCount").and_then(|c| c.parse().ok()).unwrap_or(1);
            let message = received(app, record, received_at);
            let metrics = replays.metrics_for(app.sender.metrics(), message.replay_batch());
            (message, count, metrics)
        })
        .collect();
    let records: Vec<Record<'_>> = messages
        .iter()
        .map(|(message, receive_count, metrics)| Record {
            message,
            message_id: &message.message_id,
            receive_count: *receive_count,
            jitter: rand::thread_rng().gen(),
            metrics,
        })
        .collect();
    // The core's one worker: admission, the batch's read and tokens, deliveries, queue actions,
    // outcome events. This file only turns its results into the batch's answer.
    let worker = Worker {
        sender: app.sender.as_ref(),
        policy: &app.queue_policy,
        parker: app.parker.as_deref(),
        deadline,
        concurrency: app.concurrency,
        events: app.outcomes.is_some(),
    };
    let worked = worker.work(&records).await;
    let mut failures = Vec::new();
    let mut events = Vec::new();
    for (record, worked) in records.iter().zip(worked) {
        if let Some(reason) = worked.carried.refused {
            *app.refusals.lock().unwrap_or_else(|p| p.into_inner()).entry(reason.as_str()).or_default() += 1;
        }
        if worked.carried.disposition == Disposition::Keep {
            failures.push(record.message_id.to_owned());
        }
        events.extend(worked.event);
    }
    publish_outcomes(app, events, deadline).await;
    let refusals = std::mem::take(&mut *app.refusals.lock().unwrap_or_else(|p| p.into_inner()));
    let metrics = emf_documents(
        &app.function_name,
        app.sender.metrics(),
        refusals,
        replays,
        app.sender.now().timestamp_millis(),
    );
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failures
        .into_iter()
        .map(|id| {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = id;
            failure
        })
        .collect();
    (response, metrics)
}

/// Time kept back from the invocation's end when publishing: the answer must still be returned.
const PUBLISH_MARGIN: Duration = Duration::from_millis(500);

/// The batch's outcome events onto the bus in one bounded publish ([`publish_logged`]: one
/// call, one retry of the failed entries, at most [`PUBLISH_BUDGET`] and never past the
/// invocation's deadline less a margin). Every event not published is counted in
/// `OutcomePublishFailed` and logged with its notice key — the ledger has the outcome, and
/// `noticectl outcomes republish` puts it on the bus later. Nothing else happens: the records'
/// answers are already decided.
pub async fn publish_outcomes(app: &SenderApp, events: Vec<OutcomeEvent>, deadline: Option<Instant>) {
    let Some(publisher) = &app.outcomes else { return };
    if events.is_empty() {
        return;
    }
    let metrics = app.sender.metrics();
    let budget = match deadline {
        Some(deadline) => PUBLISH_BUDGET
            .min(deadline.saturating_duration_since(Instant::now()).saturating_sub(PUBLISH_MARGIN)),
        None => PUBLISH_BUDGET,
    };
    let report = publish_logged(publisher.as_ref(), events, budget).await;
    metrics.outcomes_published.fetch_add(report.published as u64, std::sync::atomic::Ordering::Relaxed);
    metrics
        .outcome_publish_failed
        .fetch_add(report.failed.len() as u64, std::sync::atomic::Ordering::Relaxed);
}

/// The record as the SQS adapter acts on it.
fn received(app: &SenderApp, record: SqsMessage, received_at: DateTime<Utc>) -> ReceivedMessage {
    let attributes = record
        .message_attributes
        .iter()
        .filter_map(|(name, a)| {
            let Some(value) = a.string_value.clone() else {
                warn!(attribute = %name, "a binary message attribute is not carried over");
                return None;
            };
            let data_type = a.data_type.clone().unwrap_or_else(|| "String".into());
            Some(Attribute { name: name.clone(), data_type, value })
        })
        .collect();
    ReceivedMessage {
        sqs: app.sqs.clone(),
        message_id: record.message_id.unwrap_or_default(),
        body: record.body.unwrap_or_default(),
        receipt_handle: record.receipt_handle,
        queue_arn: record.event_source_arn,
        queue_url: app.queue_url.clone(),
        dead_letter_queue_url: app.dead_letter_queue_url.clone(),
        attributes,
        received_at,
    }
}

/// Epoch milliseconds of 2001-09-09: any real deadline is later. Local emulators send other
/// things (`Context::default()` has 0; `cargo lambda watch` sends its 600 000 ms invoke timeout).
const PLAUSIBLE_DEADLINE_MS: u64 = 1_000_000_000_000;

/// The invocation deadline as an `Instant`; `None` when the runtime gave no real one (local
/// invokes), in which case only the send timeout bounds a send.
pub fn deadline_instant(deadline_ms: u64) -> Option<Instant> {
    if deadline_ms < PLAUSIBLE_DEADLINE_MS {
        return None;
    }
    let deadline = SystemTime::UNIX_EPOCH + Duration::from_millis(deadline_ms);
    let left = deadline.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO);
    Some(Instant::now() + left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_deadline_from_a_default_context_or_a_local_emulator() {
        assert!(deadline_instant(0).is_none());
        assert!(deadline_instant(600_000).is_none());
        let in_a_minute =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap() + Duration::from_secs(60);
        let left = deadline_instant(in_a_minute.as_millis() as u64).unwrap() - Instant::now();
        assert!(left > Duration::from_secs(55) && left <= Duration::from_secs(60));
        let past = deadline_instant(PLAUSIBLE_DEADLINE_MS + 1).unwrap();
        assert!(past <= Instant::now(), "a passed deadline leaves no time");
    }
}
