//! `notice-sender`: the SQS-triggered Lambda that runs claim → send → commit for each reminder job.
//!
//! This file only adapts: SQS records in, [`notice_ledger::NoticeSender`] per record, and the
//! outcome's [`Disposition`] back out as an `SqsBatchResponse` (plus visibility changes for
//! deferrals and backoff). Acked: sent, suppressed, quarantined, rejected, missed. Not acked:
//! deferred (visible again when the window opens, at most 12 h ahead), released and ledger errors
//! (backoff with jitter), and input that can never succeed — which goes to the dead-letter queue
//! straight away when `NOTICE_DEAD_LETTER_QUEUE_URL` is set, else through the redrive policy.
//! Rate-limited jobs (no token for their domain) come back when a token is due, and back off like
//! a retry when limited again, so a deep backlog to one domain does not spend the queue's receives.
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
use notice_ledger::park::{parked_conflicts, ParkRequest, Parked, Parker};
use notice_ledger::rate::{BucketGate, BucketStore, RateGate};
use notice_ledger::retry::{self, Deferral};
use notice_ledger::{ConfigError, Disposition, Job, NoticeKey, NoticeSender, Outcome, SendBudget};
use notice_scheduler::SchedulerParker;
use notice_ses::mailer::{SesClient, SesMailer};
use notice_setup::aws;
use notice_setup::ledger_url::LedgerUrl;
pub use notice_setup::settings::{ParkingSettings, SenderSettings};
use rand::Rng;
use serde_json::Value;
use tracing::{error, info, warn, Instrument};

pub use notice_ledger::retry::MAX_VISIBILITY;

/// Everything the handler needs, built once per cold start.
pub struct SenderApp {
    pub sender: Arc<NoticeSender>,
    pub sqs: aws_sdk_sqs::Client,
    /// Source queue URL for visibility changes; derived from the record's ARN when unset.
    pub queue_url: Option<String>,
    pub dead_letter_queue_url: Option<String>,
    /// Records processed at once within one invocation.
    pub concurrency: usize,
    /// Where jobs whose window opens more than 12 h from now wait (`None`: they hop on the queue,
    /// which loses any job that must wait longer than the queue keeps it).
    pub parker: Option<Arc<dyn Parker>>,
}

impl SenderApp {
    /// Settings and clients from the environment (the Lambda's cold start).
    pub async fn from_env() -> Result<Self, ConfigError> {
        let sdk = aws::load_sdk_config().await;
        let settings = SenderSettings::load(&sdk).await?;
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
            warn!("NOTICE_SCHEDULE_GROUP is not set: jobs enqueued more than about 9 days ahead will be lost on the queue");
        }
        let app =
            Self::with_ledger(settings, opened.ledger, opened.buckets, sesv2, aws_sdk_sqs::Client::new(&sdk));
        Ok(app.with_parker(parker))
    }

    /// Parks far-future jobs with `parker` (see [`retry::deferral`]).
    pub fn with_parker(mut self, parker: Option<Arc<dyn Parker>>) -> Self {
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
        let sender = NoticeSender {
            ledger,
            mailer: Arc::new(mailer),
            renderer: Arc::new(settings.renderer),
            policy: settings.policy,
            secret: settings.secret,
            mode: settings.mode,
            budget: SendBudget {
                send_timeout: settings.send_timeout,
                min_time_left: settings.send_timeout * 2,
                claim_lifetime: settings.claim_lifetime,
            },
            metrics: Arc::new(Metrics::default()),
            rate_gate,
        };
        Self {
            sender: Arc::new(sender),
            sqs,
            queue_url: settings.queue_url,
            dead_letter_queue_url: settings.dead_letter_queue_url,
            concurrency: settings.concurrency,
            parker: None,
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
    let failures: Vec<String> = futures::stream::iter(event.payload.records)
        .map(|record| process_record(app, record, deadline, &batches))
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
            None => Arc::clone(&app.sender.metrics),
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
        let delivery = app.sender.deliver_body_counted(body, Utc::now(), deadline, &metrics).await;
        let span = tracing::Span::current();
        if let Some(key) = &delivery.key {
            span.record("notice_key", key.as_str());
        }
        span.record("outcome", delivery.outcome.label());
        info!(outcome = delivery.outcome.label(), "processed");
        match delivery.outcome.disposition() {
            Disposition::Ack => None,
            Disposition::RetryAt(until) => match retry::deferral(until, Utc::now()) {
                Deferral::Park { at } if matches!(delivery.outcome, Outcome::Deferred { .. }) => {
                    let key = delivery.key.as_ref();
                    let parked = Parking { key, replay_batch: replay_batch.as_deref(), at, receive_count };
                    park(app, &record, body, parked, &metrics).await
                }
                Deferral::Park { .. } => {
                    change_visibility(app, &record, MAX_VISIBILITY).await;
                    Some(message_id)
                }
                Deferral::Hide(wait) => {
                    let wait = match delivery.outcome {
                        Outcome::RateLimited { .. } => rate_limited_wait(wait, receive_count),
                        _ => wait,
                    };
                    change_visibility(app, &record, wait).await;
                    Some(message_id)
                }
            },
            Disposition::Retry => {
                change_visibility(app, &record, backoff(receive_count)).await;
                Some(message_id)
            }
            Disposition::DeadLetter => dead_letter(app, &record, &reason(&delivery.outcome)).await,
        }
    }
    .instrument(span)
    .await
}

/// A rate-limited job waits until its token is due; limited again (a later receive), it backs off
/// like a retry — never sooner than the token — so a backlog far deeper than the domain's burst
/// drains at the domain's pace instead of hopping through the queue's 20 receives in minutes.
fn rate_limited_wait(until_due: Duration, receive_count: u32) -> Duration {
    if receive_count < 2 {
        return until_due;
    }
    until_due.max(backoff(receive_count - 1))
}

/// What [`park`] needs to know about the job besides its body.
struct Parking<'a> {
    key: Option<&'a NoticeKey>,
    replay_batch: Option<&'a str>,
    at: DateTime<Utc>,
    receive_count: u32,
}

/// Takes a far-future job off the queue into a one-time schedule that brings its own body back at
/// `at`; acks only when the schedule exists. Writes no ledger row and sends nothing.
async fn park(
    app: &SenderApp,
    record: &SqsMessage,
    body: &str,
    parking: Parking<'_>,
    metrics: &Metrics,
) -> Option<String> {
    let Parking { key, replay_batch, at, receive_count } = parking;
    let message_id = record.message_id.clone().unwrap_or_default();
    let (Some(parker), Some(key)) = (&app.parker, key) else {
        warn!(until = %at, "no parking configured: hiding the job for 12 h (the queue may drop it before its window)");
        change_visibility(app, record, MAX_VISIBILITY).await;
        return Some(message_id);
    };
    let Some(queue_arn) = record.event_source_arn.as_deref() else {
        error!("cannot park: the record has no eventSourceARN to send the job back to");
        change_visibility(app, record, backoff(receive_count)).await;
        return Some(message_id);
    };
    let request = ParkRequest { key, at, body, queue_arn, replay_batch };
    match parker.park(&request).await {
        Ok(Parked::Scheduled) => {
            Metrics::incr(&metrics.parked);
            info!(until = %at, "parked until the window opens");
            None
        }
        Ok(Parked::AlreadyParked { body: parked }) => {
            let conflict = Job::parse(body).is_ok_and(|job| parked_conflicts(&job, parked.as_deref()));
            if conflict {
                Metrics::incr(&metrics.payload_conflicts);
                let why =
                    "payload conflict: this notice is already parked with different content (bump revision)";
                return dead_letter(app, record, why).await;
            }
            info!(until = %at, "already parked");
            None
        }
        Err(e) => {
            error!(error = %e, "parking failed: the message stays on the queue");
            change_visibility(app, record, backoff(receive_count)).await;
            Some(message_id)
        }
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

/// The shared backoff rule ([`retry::backoff`]) with this process's randomness as the jitter.
pub fn backoff(receive_count: u32) -> Duration {
    retry::backoff(receive_count, rand::thread_rng().gen())
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
/// `replay_batch` as a property. Every document has the same `Function` dimension, so the metrics
/// (and their alarms) add up exactly as before; a batch's own numbers are found in Logs Insights
/// by the property (README, *Operating*).
fn emf_documents(app: &SenderApp, batches: ReplayBatches, now_ms: i64) -> Vec<Value> {
    let mut documents = vec![app.sender.metrics.drain().to_emf("notice-sender", now_ms)];
    let batches = batches.0.into_inner().unwrap_or_else(|p| p.into_inner());
    for (batch, metrics) in batches {
        documents.push(metrics.drain().to_emf_for_batch("notice-sender", now_ms, &batch));
    }
    documents
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limited_job_waits_for_its_token_then_backs_off_when_limited_again() {
        let due = Duration::from_secs(2);
        assert_eq!(rate_limited_wait(due, 1), due, "first receive: back when the token is due");
        for _ in 0..20 {
            let again = rate_limited_wait(due, 2);
            assert!(again >= Duration::from_secs(15) && again <= Duration::from_secs(30), "{again:?}");
            assert!(rate_limited_wait(due, 12) >= retry::BACKOFF_CAP / 2);
        }
        let far = Duration::from_secs(3600);
        assert_eq!(rate_limited_wait(far, 5), far, "never before the token is due");
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        for _ in 0..50 {
            let first = backoff(1);
            assert!(first >= Duration::from_secs(15) && first <= Duration::from_secs(30));
            assert!(backoff(30) <= retry::BACKOFF_CAP);
            assert!(backoff(30) >= retry::BACKOFF_CAP / 2);
        }
    }

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
