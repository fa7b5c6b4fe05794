//! `notice-sender`: the SQS-triggered Lambda that runs claim → send → commit for each reminder job.
//!
//! This file only adapts: SQS records in, [`notice_ledger::NoticeSender`] per record, and the
//! queue action the core's [`QueuePolicy`] picks for the outcome back out — an
//! `SqsBatchResponse`, visibility changes (waits of at most 15 minutes), a park in EventBridge
//! Scheduler (longer waits), or the dead-letter queue (straight away when
//! `NOTICE_DEAD_LETTER_QUEUE_URL` is set, else through the redrive policy). The table itself is
//! in `notice_ledger::queue`; nothing here decides.
//!
//! Metrics: one EMF document per invocation, plus one per replay batch seen in it (the notices that
//! carried a `replay_batch` attribute, with that value as a property) — see [`publish_metrics`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use aws_sdk_sqs::types::MessageAttributeValue;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use lambda_runtime::LambdaEvent;
use notice_dynamodb::ledger::DynamoLedger;
use notice_dynamodb::rate::DynamoBuckets;
use notice_ledger::ledger::Ledger;
use notice_ledger::metrics::Metrics;
use notice_ledger::park::{settle, ParkError, ParkRefusal, ParkRequest, Parker, Settled};
use notice_ledger::queue::MAX_VISIBILITY;
use notice_ledger::rate::{BucketGate, BucketStore, RateGate};
use notice_ledger::{
    ConfigError, NoticeSender, Outcome, Prefetched, QueueAction, QueuePolicy, Receive, SendBudget,
};
use notice_scheduler::SchedulerParker;
use notice_ses::mailer::{SesClient, SesMailer};
use notice_setup::aws;
use notice_setup::ledger_url::LedgerUrl;
pub use notice_setup::settings::{ParkingSettings, SenderSettings};
use rand::Rng;
use serde_json::Value;
use tracing::{error, info, warn, Instrument};

/// Everything the handler needs, built once per cold start.
pub struct SenderApp {
    pub sender: Arc<NoticeSender>,
    pub sqs: aws_sdk_sqs::Client,
    /// Source queue URL for visibility changes; derived from the record's ARN when unset.
    pub queue_url: Option<String>,
    pub dead_letter_queue_url: Option<String>,
    /// Records processed at once within one invocation.
    pub concurrency: usize,
    /// Where jobs that must wait longer than 15 minutes wait (`None`: they hop on the queue,
    /// which loses any job that must wait longer than the queue keeps it).
    pub parker: Option<Arc<dyn Parker>>,
    /// The one outcome → queue action table, with this deployment's parking and spread.
    pub queue_policy: QueuePolicy,
    /// Parks refused in this invocation, by reason (`ParkingRefused`, dimension `Reason`).
    refusals: Mutex<BTreeMap<&'static str, u64>>,
    /// The EMF `Function` dimension: the deployed function's own name, so two stacks in one
    /// account never share metrics or alarms.
    pub function_name: String,
}

impl SenderApp {
    /// Settings and clients from the environment (the Lambda's cold start).
    pub async fn from_env() -> Result<Self, ConfigError> {
        let sdk = aws::load_sdk_config().await;
        let mut settings = SenderSettings::load(&sdk).await?;
        if let Some(limits) = settings.rate_limits.take() {
            settings.rate_limits = Some(limits.with_account_rate(account_rate(&sdk).await));
        }
        // Parsed once, in the settings; without NOTICE_LEDGER_URL the ledger is NOTICE_TABLE.
        let url = settings.ledger_url.clone().unwrap_or_else(|| LedgerUrl::DynamoDb(settings.table.clone()));
        let opened = url.open_with_buckets(Some(&sdk), settings.retention_days).await?;
        let sesv2 = aws::sesv2_client(&sdk, settings.send_timeout);
        let parker = settings.parking.clone().map(|p| {
            let parker = SchedulerParker::new(aws_sdk_scheduler::Client::new(&sdk), p.group, p.role_arn)
                .with_dead_letter(p.dead_letter_arn);
            Arc::new(parker) as Arc<dyn Parker>
        });
        if parker.is_none() {
            warn!("NOTICE_SCHEDULE_GROUP is not set: waits over 15 minutes hide on the queue (up to 12 h a hop), every one of them counted in flight against SQS's ~120 000");
        }
        let app =
            Self::with_ledger(settings, opened.ledger, opened.buckets, sesv2, aws_sdk_sqs::Client::new(&sdk));
        Ok(app.with_parker(parker))
    }

    /// Parks waits longer than 15 minutes with `parker` (see [`notice_ledger::queue`]).
    pub fn with_parker(mut self, parker: Option<Arc<dyn Parker>>) -> Self {
        self.queue_policy.parking = parker.is_some();
        self.parker = parker;
        self
    }

    /// Assembles the sender over real clients. The SES client must be built by
    /// [`aws::sesv2_client`]: one attempt per send, never an SDK retry.
    pub fn new(
        settings: SenderSettings,
        dynamodb: notice_dynamodb::DynamoClient,
        sesv2: SesClient,
        sqs: aws_sdk_sqs::Client,
    ) -> Self {
        let ledger = DynamoLedger::new(dynamodb.clone(), settings.table.clone())
            .with_retention(settings.retention_days);
        let buckets = DynamoBuckets::new(dynamodb, settings.table.clone());
        Self::with_ledger(settings, Arc::new(ledger), Arc::new(buckets), sesv2, sqs)
    }

    /// [`SenderApp::new`] over any ledger, with the rate buckets kept in the same store
    /// ([`notice_setup::ledger_url::LedgerUrl::open_with_buckets`]), so every sender on one ledger
    /// shares one bucket per domain.
    pub fn with_ledger(
        settings: SenderSettings,
        ledger: Arc<dyn Ledger>,
        buckets: Arc<dyn BucketStore>,
        sesv2: SesClient,
        sqs: aws_sdk_sqs::Client,
    ) -> Self {
        match &settings.rate_limits {
            Some(limits) => info!(limits = %limits.describe(), "per-domain send rate"),
            None => warn!("NOTICE_RATE_LIMITS is off: sends to one domain are not paced"),
        }
        let rate_gate = settings
            .rate_limits
            .map(|limits| Arc::new(BucketGate::new(buckets, limits).on_wall_clock()) as Arc<dyn RateGate>);
        let mailer = SesMailer::new(sesv2, settings.from, settings.configuration_set);
        let sender = NoticeSender::new(
            ledger,
            Arc::new(mailer),
            Arc::new(settings.renderer),
            settings.policy,
            settings.secret,
        )
        .with_mode(settings.mode)
        .with_budget(SendBudget {
            send_timeout: settings.send_timeout,
            min_time_left: settings.send_timeout * 2,
            claim_lifetime: settings.claim_lifetime,
        })
        .with_rate_gate(rate_gate);
        Self {
            sender: Arc::new(sender),
            sqs,
            queue_url: settings.queue_url,
            dead_letter_queue_url: settings.dead_letter_queue_url,
            concurrency: settings.concurrency,
            parker: None,
            queue_policy: QueuePolicy { parking: false, park_spread: settings.park_spread },
            refusals: Mutex::default(),
            function_name: notice_setup::config::function_name("notice-sender"),
        }
    }
}

/// SES's `MaxSendRate`, for the account bucket: a failure (no `ses:GetAccount`, SES down) starts
/// the sender without an account limit, with a warning — never a refusal to start.
async fn account_rate(sdk: &aws::SdkConfig) -> Option<f64> {
    match aws::ses_max_send_rate(sdk).await {
        Ok(rate) => {
            info!(max_send_rate = rate, "SES account rate read: the account bucket takes 90 % of it");
            Some(rate)
        }
        Err(e) => {
            warn!(error = %e, "could not read SES's MaxSendRate: no account-wide limit (set NOTICE_RATE_LIMITS.account to have one)");
            None
        }
    }
}

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
    let deadline = deadline_instant(event.context.deadline);
    let batches = ReplayBatches::default();
    // One dedupe read for the whole batch instead of one per record.
    let bodies: Vec<&str> = event.payload.records.iter().filter_map(|r| r.body.as_deref()).collect();
    let prefetched = app.sender.prefetch(&bodies, Utc::now()).await;
    let prefetched = prefetched.as_ref();
    let failures: Vec<String> = futures::stream::iter(event.payload.records)
        .map(|record| process_record(app, record, deadline, &batches, prefetched))
        .buffer_unordered(app.concurrency)
        .filter_map(|failed| async move { failed })
        .collect()
        .await;
    let metrics = emf_documents(app, batches, Utc::now().timestamp_millis());
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

/// Counters of this invocation's replayed notices, one set per `replay_batch` value.
#[derive(Default)]
struct ReplayBatches(Mutex<BTreeMap<String, Arc<Metrics>>>);

impl ReplayBatches {
    /// The counters a record counts into: its replay batch's, or the sender's own.
    fn metrics_for(&self, app: &SenderApp, replay_batch: Option<&str>) -> Arc<Metrics> {
        match replay_batch.filter(|b| !b.is_empty()) {
            None => Arc::clone(app.sender.metrics()),
            Some(batch) => {
                let mut batches = self.0.lock().unwrap_or_else(|p| p.into_inner());
                Arc::clone(batches.entry(batch.to_owned()).or_default())
            }
        }
    }
}

/// Processes one record; returns its message id when SQS must keep it.
async fn process_record(
    app: &SenderApp,
    record: SqsMessage,
    deadline: Option<Instant>,
    batches: &ReplayBatches,
    prefetched: Option<&Prefetched>,
) -> Option<String> {
    let message_id = record.message_id.clone().unwrap_or_default();
    let replay_batch = replay_batch(&record);
    let metrics = batches.metrics_for(app, replay_batch.as_deref());
    let receive_count: u32 =
        record.attributes.get("ApproximateReceiveCount").and_then(|c| c.parse().ok()).unwrap_or(1);
    let span = tracing::info_span!(
        "notice",
        message_id = %message_id,
        receive_count,
        replay_batch = replay_batch.as_deref().unwrap_or(""),
        notice_key = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    async move {
        let Some(body) = record.body.as_deref() else {
            warn!("record has no body");
            return dead_letter(app, &record, "record has no body").await;
        };
        let delivery =
            app.sender.deliver_body_prefetched(body, Utc::now(), deadline, &metrics, prefetched).await;
        let span = tracing::Span::current();
        if let Some(key) = &delivery.key {
            span.record("notice_key", key.as_str());
        }
        span.record("outcome", delivery.outcome.label());
        let receive = Receive {
            key: delivery.key.as_ref(),
            count: receive_count,
            now: Utc::now(),
            jitter: rand::thread_rng().gen(),
        };
        let action = app.queue_policy.action(&delivery.outcome, &receive);
        info!(outcome = delivery.outcome.label(), queue = action.label(), "processed");
        if let (Outcome::Withdrawn { .. }, Some(key)) = (&delivery.outcome, &delivery.key) {
            unpark(app, key).await;
        }
        match action {
            QueueAction::Delete => None,
            QueueAction::Hide(_) | QueueAction::Backoff(_) | QueueAction::Requeue(_) => {
                wait_on_queue(app, &record, body, action, &metrics).await
            }
            QueueAction::Park { at } => {
                let parked = Parking { replay_batch: replay_batch.as_deref(), at, receive };
                park(app, &record, body, parked, &metrics).await
            }
            QueueAction::DeadLetter => dead_letter(app, &record, &reason(&delivery.outcome)).await,
        }
    }
    .instrument(span)
    .await
}

/// What [`park`] needs to know about the job besides its body.
struct Parking<'a> {
    replay_batch: Option<&'a str>,
    at: DateTime<Utc>,
    receive: Receive<'a>,
}

/// Takes a job off the queue into a one-time schedule that brings its own body back at `at`; acks
/// only when a live schedule holds it, or — when Scheduler refuses — once the body is back on the
/// queue as a new delayed message (a refusal can last hours and must not spend this message's
/// receives). Writes no ledger row and sends nothing. Anything uncertain (nowhere to send the job
/// back to, a schedule by its name that may have fired) keeps the message with the policy's backoff.
async fn park(
    app: &SenderApp,
    record: &SqsMessage,
    body: &str,
    parking: Parking<'_>,
    metrics: &Metrics,
) -> Option<String> {
    let Parking { replay_batch, at, receive } = parking;
    let message_id = record.message_id.clone().unwrap_or_default();
    let keep = |why: &str| {
        warn!(until = %at, "{why}: the message stays on the queue");
        app.queue_policy.park_failed(&receive)
    };
    let retry = match (&app.parker, receive.key, record.event_source_arn.as_deref()) {
        (None, _, _) => {
            // The policy parks only when a parker is configured; hide as long as the queue allows.
            change_visibility(app, record, MAX_VISIBILITY).await;
            return Some(message_id);
        }
        (_, None, _) => keep("cannot park a job without a notice key"),
        (_, _, None) => keep("cannot park: the record has no eventSourceARN to send the job back to"),
        (Some(parker), Some(key), Some(queue_arn)) => {
            let request = ParkRequest { key, at, body, queue_arn, replay_batch };
            match settle(parker.as_ref(), &app.queue_policy, &request, &receive).await {
                Settled::Parked => {
                    Metrics::incr(&metrics.parked);
                    info!(until = %at, "parked");
                    return None;
                }
                Settled::AlreadyParked { fires } => {
                    info!(until = %at, parked_until = %fires, "already parked");
                    return None;
                }
                Settled::Conflict => {
                    Metrics::incr(&metrics.payload_conflicts);
                    let why = "payload conflict: this notice is already parked with different content (bump revision)";
                    return dead_letter(app, record, why).await;
                }
                Settled::Keep { why, action } => {
                    warn!(until = %at, "{why}: the message stays on the queue");
                    action
                }
                Settled::Requeue { delay, error } => {
                    refused(app, &error);
                    if requeue(app, record, body, delay, metrics).await {
                        info!(until = %at, delay_secs = delay.as_secs(), "park refused: the job waits as a new message");
                        return None;
                    }
                    app.queue_policy.park_failed(&receive)
                }
            }
        }
    };
    wait_on_queue(app, record, body, retry, metrics).await
}

/// A wait spent on the queue: hidden on this message, or — a requeue — as a new delayed message,
/// hidden here instead when that send fails. Returns the message id when SQS must keep it.
async fn wait_on_queue(
    app: &SenderApp,
    record: &SqsMessage,
    body: &str,
    action: QueueAction,
    metrics: &Metrics,
) -> Option<String> {
    match action {
        QueueAction::Hide(wait) | QueueAction::Backoff(wait) => change_visibility(app, record, wait).await,
        QueueAction::Requeue(delay) => {
            if requeue(app, record, body, delay, metrics).await {
                info!(delay_secs = delay.as_secs(), "waits as a new message");
                return None;
            }
            change_visibility(app, record, delay).await;
        }
        QueueAction::Delete | QueueAction::Park { .. } | QueueAction::DeadLetter => {}
    }
    Some(record.message_id.clone().unwrap_or_default())
}

/// Sends the job's body, with the record's message attributes (`replay_batch`), to the queue it
/// came from as a new message hidden for `delay` (at most SQS's 15 minutes). `true` when SQS took
/// it; the caller acks the old message only then.
async fn requeue(
    app: &SenderApp,
    record: &SqsMessage,
    body: &str,
    delay: Duration,
    metrics: &Metrics,
) -> bool {
    let Some(queue_url) = queue_url(app, record) else {
        warn!("cannot requeue: no queue URL");
        return false;
    };
    let mut send = app
        .sqs
        .send_message()
        .queue_url(queue_url)
        .message_body(body)
        .delay_seconds(i32::try_from(delay.as_secs()).unwrap_or(900).min(900));
    // The producer's attributes are strings (`replay_batch`); a binary one is not carried over.
    for (name, attribute) in &record.message_attributes {
        let Some(text) = attribute.string_value.as_deref() else {
            warn!(attribute = %name, "a binary message attribute is not carried over");
            continue;
        };
        let value = MessageAttributeValue::builder()
            .data_type(attribute.data_type.clone().unwrap_or_else(|| "String".into()))
            .string_value(text)
            .build();
        match value {
            Ok(value) => send = send.message_attributes(name, value),
            Err(e) => warn!(attribute = %name, error = %e, "message attribute not carried over"),
        }
    }
    match send.send().await {
        Ok(_) => {
            Metrics::incr(&metrics.requeued);
            true
        }
        Err(e) => {
            warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "requeue failed; the message stays on the queue");
            false
        }
    }
}

/// A withdrawn notice's parked job, if there is one, is deleted: it would only come back to be
/// suppressed by the tombstone — which is also why a failure here is a warning, never a retry.
async fn unpark(app: &SenderApp, key: &notice_ledger::NoticeKey) {
    let Some(parker) = &app.parker else { return };
    match parker.unpark(key).await {
        Ok(true) => info!("withdrawn notice's parked job deleted"),
        Ok(false) => {}
        Err(e) => {
            warn!(error = %e, "could not delete the withdrawn notice's parked job: it will be suppressed when it fires")
        }
    }
}

/// A refused park: counted by reason and logged as an error naming the quota to raise.
fn refused(app: &SenderApp, e: &ParkError) {
    let mut refusals = app.refusals.lock().unwrap_or_else(|p| p.into_inner());
    *refusals.entry(e.reason.as_str()).or_default() += 1;
    match e.reason {
        ParkRefusal::Quota => error!(
            reason = e.reason.as_str(), error = %e,
            "parking refused by an EventBridge Scheduler quota (live schedules per Region, or CreateSchedule requests/s): raise it (docs/deploy.md, Capacity); the job goes back on the queue and tries again"
        ),
        ParkRefusal::Throttled => error!(
            reason = e.reason.as_str(), error = %e,
            "parking throttled by EventBridge Scheduler (CreateSchedule requests/s quota); the job goes back on the queue and tries again"
        ),
        ParkRefusal::Unavailable => error!(
            reason = e.reason.as_str(), error = %e,
            "parking failed: EventBridge Scheduler unavailable; the job goes back on the queue and tries again"
        ),
    }
}

fn replay_batch(record: &SqsMessage) -> Option<String> {
    record.message_attributes.get("replay_batch").and_then(|a| a.string_value.clone())
}

fn reason(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Invalid(e) => e.to_string(),
        Outcome::RenderFailed(e) => format!("render failed: {e}"),
        Outcome::PayloadConflict { state } => {
            format!("payload conflict: key already {state} with different content (bump revision)")
        }
        other => other.label().to_owned(),
    }
}

async fn change_visibility(app: &SenderApp, record: &SqsMessage, wait: Duration) {
    let (Some(queue_url), Some(receipt)) = (queue_url(app, record), record.receipt_handle.as_deref()) else {
        warn!("cannot change visibility: no queue URL or receipt handle; the queue's own timeout applies");
        return;
    };
    let secs = i32::try_from(wait.as_secs()).unwrap_or(i32::MAX).min(MAX_VISIBILITY.as_secs() as i32);
    let result = app
        .sqs
        .change_message_visibility()
        .queue_url(queue_url)
        .receipt_handle(receipt)
        .visibility_timeout(secs)
        .send()
        .await;
    if let Err(e) = result {
        // Not fatal: the message still comes back after the queue's visibility timeout.
        warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "ChangeMessageVisibility failed");
    }
}

/// Sends the record to the dead-letter queue with the reason and acks it; without a configured
/// queue (or when that send fails) reports it as a batch failure so the redrive policy moves it.
async fn dead_letter(app: &SenderApp, record: &SqsMessage, why: &str) -> Option<String> {
    let message_id = record.message_id.clone().unwrap_or_default();
    let Some(dlq) = app.dead_letter_queue_url.as_deref() else {
        error!(reason = why, "message cannot succeed; failing it so the redrive policy dead-letters it");
        return Some(message_id);
    };
    let attr = |v: &str| MessageAttributeValue::builder().data_type("String").string_value(v).build();
    let (Ok(reason_attr), Ok(source_attr)) = (attr(why), attr(&message_id)) else {
        return Some(message_id);
    };
    let sent = app
        .sqs
        .send_message()
        .queue_url(dlq)
        .message_body(record.body.clone().unwrap_or_default())
        .message_attributes("notice_error", reason_attr)
        .message_attributes("source_message_id", source_attr)
        .send()
        .await;
    match sent {
        Ok(_) => {
            error!(reason = why, "message dead-lettered");
            None
        }
        Err(e) => {
            error!(reason = why, error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "dead-letter send failed; failing the record instead");
            Some(message_id)
        }
    }
}

fn queue_url(app: &SenderApp, record: &SqsMessage) -> Option<String> {
    app.queue_url
        .clone()
        .or_else(|| record.event_source_arn.as_deref().and_then(notice_scheduler::queue_url_from_arn))
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

/// One EMF document per invocation (printed on stdout, where CloudWatch picks it up), plus one per
/// replay batch seen in the invocation, counting only that batch's notices and carrying
/// `replay_batch` as a property. Every document has the same `Function` dimension (the deployed
/// function's name), so a batch's notices count in the function's metrics and alarms; a batch's
/// own numbers are found in Logs Insights by the property (docs/metrics.md).
fn emf_documents(app: &SenderApp, batches: ReplayBatches, now_ms: i64) -> Vec<Value> {
    let function = app.function_name.as_str();
    let snapshot = app.sender.metrics().drain();
    let mut documents = vec![snapshot.to_emf(function, now_ms)];
    documents.extend(snapshot.unlisted_jurisdiction_emf(function, now_ms));
    let batches = batches.0.into_inner().unwrap_or_else(|p| p.into_inner());
    for (batch, metrics) in batches {
        let snapshot = metrics.drain();
        documents.push(snapshot.to_emf_for_batch(function, now_ms, &batch));
        documents.extend(snapshot.unlisted_jurisdiction_emf(function, now_ms));
    }
    let refusals = std::mem::take(&mut *app.refusals.lock().unwrap_or_else(|p| p.into_inner()));
    for (reason, count) in refusals {
        documents.push(notice_ledger::metrics::parking_refused_emf(function, now_ms, reason, count));
    }
    documents
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
