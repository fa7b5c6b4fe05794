//! `notice-sender`: the SQS-triggered Lambda that runs claim → send → commit for each reminder job.
//!
//! This file only adapts: SQS records in, [`notice_ledger::NoticeSender`] per record, and the
//! outcome's [`Disposition`] back out as an `SqsBatchResponse` (plus visibility changes for
//! deferrals and backoff). Acked: sent, suppressed, quarantined, rejected, missed. Not acked:
//! deferred (visible again when the window opens, at most 12 h ahead), released and ledger errors
//! (backoff with jitter), and input that can never succeed — which goes to the dead-letter queue
//! straight away when `NOTICE_DEAD_LETTER_QUEUE_URL` is set, else through the redrive policy.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use aws_sdk_sqs::types::MessageAttributeValue;
use chrono::Utc;
use futures::StreamExt;
use lambda_runtime::LambdaEvent;
use notice_ledger::ledger::dynamodb::DynamoLedger;
use notice_ledger::ledger::{select, Ledger};
use notice_ledger::mailer::ses::SesMailer;
use notice_ledger::metrics::Metrics;
use notice_ledger::rate::dynamodb::DynamoRateGate;
use notice_ledger::rate::{RateGate, RateLimits};
use notice_ledger::{
    aws, config, ConfigError, Disposition, NoticeSecret, NoticeSender, Outcome, SendBudget, WindowPolicy,
};
use rand::Rng;
use tracing::{error, info, warn, Instrument};

/// SQS cannot hide a message for longer than 12 hours.
pub const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600);
/// Backoff for retried messages: base × 2^(receive count − 1), capped, with full jitter on the upper half.
const BACKOFF_BASE: Duration = Duration::from_secs(30);
const BACKOFF_CAP: Duration = Duration::from_secs(15 * 60);

/// Everything the handler needs, built once per cold start.
pub struct SenderApp {
    pub sender: Arc<NoticeSender>,
    pub sqs: aws_sdk_sqs::Client,
    /// Source queue URL for visibility changes; derived from the record's ARN when unset.
    pub queue_url: Option<String>,
    pub dead_letter_queue_url: Option<String>,
    /// Records processed at once within one invocation.
    pub concurrency: usize,
}

/// Configuration of the sender, read once at start-up.
pub struct SenderSettings {
    /// DynamoDB ledger table (also holds the rate gate's counters).
    pub table: String,
    /// `NOTICE_LEDGER_URL`: a `postgres://` URL puts the ledger in PostgreSQL instead.
    pub ledger_url: Option<String>,
    pub secret: NoticeSecret,
    pub from: String,
    pub configuration_set: Option<String>,
    pub mode: notice_ledger::Mode,
    pub policy: WindowPolicy,
    pub renderer: notice_ledger::render::Renderer,
    pub send_timeout: Duration,
    pub retention_days: u32,
    pub concurrency: usize,
    pub queue_url: Option<String>,
    pub dead_letter_queue_url: Option<String>,
    /// Shared per-domain send rate (`NOTICE_RATE_LIMITS`), kept in the ledger table.
    pub rate_limits: Option<RateLimits>,
}

impl SenderSettings {
    /// Reads the environment and fails — before the first message — when a required setting is
    /// missing or invalid.
    pub fn from_env() -> Result<Self, ConfigError> {
        let secret = NoticeSecret::from_env("NOTICE_KEY_SECRET")?;
        let renderer = config::renderer_from_env(&secret)?;
        let ledger_url = config::optional(select::LEDGER_URL_VAR);
        // The table is required unless the ledger lives in PostgreSQL (the rate gate needs it then).
        let table = match &ledger_url {
            Some(_) => config::optional(select::TABLE_VAR).unwrap_or_default(),
            None => config::required(select::TABLE_VAR)?,
        };
        let rate_limits = RateLimits::from_env()?;
        if rate_limits.is_some() && table.is_empty() {
            return Err(ConfigError::Missing(select::TABLE_VAR));
        }
        Ok(Self {
            table,
            ledger_url,
            secret,
            from: config::required("NOTICE_FROM")?,
            configuration_set: config::optional("NOTICE_CONFIGURATION_SET"),
            mode: config::mode_from_env()?,
            policy: WindowPolicy::from_env()?,
            renderer,
            send_timeout: config::secs_from_env("NOTICE_SEND_TIMEOUT_SECS", 8)?,
            retention_days: select::retention_days_from_env()?,
            concurrency: config::secs_from_env("NOTICE_RECORD_CONCURRENCY", 10)?.as_secs().clamp(1, 100)
                as usize,
            queue_url: config::optional("NOTICE_QUEUE_URL"),
            dead_letter_queue_url: config::optional("NOTICE_DEAD_LETTER_QUEUE_URL"),
            rate_limits,
        })
    }
}

impl SenderApp {
    /// Settings and clients from the environment (the Lambda's cold start).
    pub async fn from_env() -> Result<Self, ConfigError> {
        let settings = SenderSettings::from_env()?;
        let sdk = aws::load_sdk_config().await;
        let ledger = select::ledger_for(
            &sdk,
            settings.ledger_url.as_deref(),
            Some(&settings.table),
            settings.retention_days,
        )
        .await?;
        let sesv2 = aws::sesv2_client(&sdk, settings.send_timeout);
        Ok(Self::with_ledger(
            settings,
            ledger,
            aws::dynamodb_client(&sdk),
            sesv2,
            aws_sdk_sqs::Client::new(&sdk),
        ))
    }

    /// Assembles the sender over real clients. The SES client must be built by
    /// [`aws::sesv2_client`]: one attempt per send, never an SDK retry.
    pub fn new(
        settings: SenderSettings,
        dynamodb: aws_sdk_dynamodb::Client,
        sesv2: aws_sdk_sesv2::Client,
        sqs: aws_sdk_sqs::Client,
    ) -> Self {
        let ledger = DynamoLedger::new(dynamodb.clone(), settings.table.clone())
            .with_retention(settings.retention_days);
        Self::with_ledger(settings, Arc::new(ledger), dynamodb, sesv2, sqs)
    }

    /// [`SenderApp::new`] over any ledger (the rate gate, when configured, stays in DynamoDB).
    pub fn with_ledger(
        settings: SenderSettings,
        ledger: Arc<dyn Ledger>,
        dynamodb: aws_sdk_dynamodb::Client,
        sesv2: aws_sdk_sesv2::Client,
        sqs: aws_sdk_sqs::Client,
    ) -> Self {
        let rate_gate = settings.rate_limits.map(|limits| {
            Arc::new(DynamoRateGate::new(dynamodb, settings.table.clone(), limits)) as Arc<dyn RateGate>
        });
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
        }
    }
}

/// The Lambda handler: one batch in, the ids of the records SQS must not delete out.
pub async fn handle(
    app: &SenderApp,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, lambda_runtime::Error> {
    let deadline = deadline_instant(event.context.deadline);
    let failures: Vec<String> = futures::stream::iter(event.payload.records)
        .map(|record| process_record(app, record, deadline))
        .buffer_unordered(app.concurrency)
        .filter_map(|failed| async move { failed })
        .collect()
        .await;
    publish_metrics(app);
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failures
        .into_iter()
        .map(|id| {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = id;
            failure
        })
        .collect();
    Ok(response)
}

/// Processes one record; returns its message id when SQS must keep it.
async fn process_record(app: &SenderApp, record: SqsMessage, deadline: Option<Instant>) -> Option<String> {
    let message_id = record.message_id.clone().unwrap_or_default();
    let replay_batch = record.message_attributes.get("replay_batch").and_then(|a| a.string_value.clone());
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
        let delivery = app.sender.deliver_body(body, Utc::now(), deadline).await;
        let span = tracing::Span::current();
        if let Some(key) = &delivery.key {
            span.record("notice_key", key.as_str());
        }
        span.record("outcome", delivery.outcome.label());
        info!(outcome = delivery.outcome.label(), "processed");
        match delivery.outcome.disposition() {
            Disposition::Ack => None,
            Disposition::RetryAt(until) => {
                let wait = (until - Utc::now()).to_std().unwrap_or(Duration::ZERO).min(MAX_VISIBILITY);
                change_visibility(app, &record, wait).await;
                Some(message_id)
            }
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

/// Exponential backoff with jitter over the upper half, so retries of one burst spread out.
pub fn backoff(receive_count: u32) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1u32 << receive_count.saturating_sub(1).min(10)).min(BACKOFF_CAP);
    let secs = exp.as_secs().max(1);
    Duration::from_secs(rand::thread_rng().gen_range(secs / 2..=secs))
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
    app.queue_url.clone().or_else(|| record.event_source_arn.as_deref().and_then(queue_url_from_arn))
}

/// `arn:aws:sqs:REGION:ACCOUNT:NAME` → `https://sqs.REGION.amazonaws.com/ACCOUNT/NAME`.
pub fn queue_url_from_arn(arn: &str) -> Option<String> {
    let parts: Vec<&str> = arn.split(':').collect();
    match parts.as_slice() {
        ["arn", _partition, "sqs", region, account, name] => {
            Some(format!("https://sqs.{region}.amazonaws.com/{account}/{name}"))
        }
        _ => None,
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

/// One EMF document per invocation, on stdout where CloudWatch picks it up.
fn publish_metrics(app: &SenderApp) {
    let snapshot = app.sender.metrics.drain();
    println!("{}", snapshot.to_emf("notice-sender", Utc::now().timestamp_millis()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        for _ in 0..50 {
            let first = backoff(1);
            assert!(first >= Duration::from_secs(15) && first <= Duration::from_secs(30));
            assert!(backoff(30) <= BACKOFF_CAP);
            assert!(backoff(30) >= BACKOFF_CAP / 2);
        }
    }

    #[test]
    fn queue_url_from_event_source_arn() {
        assert_eq!(
            queue_url_from_arn("arn:aws:sqs:eu-west-1:123456789012:reminders").as_deref(),
            Some("https://sqs.eu-west-1.amazonaws.com/123456789012/reminders")
        );
        assert_eq!(queue_url_from_arn("not-an-arn"), None);
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
