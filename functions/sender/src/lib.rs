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

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use chrono::{DateTime, Utc};
use lambda_runtime::LambdaEvent;
use notice_dynamodb::ledger::DynamoLedger;
use notice_dynamodb::rate::DynamoBuckets;
use notice_ledger::keycheck::{check_ring, KeyCheck, KeyCheckError, KeyCheckOutcome, KeyCheckStore};
use notice_ledger::ledger::Ledger;
use notice_ledger::metrics::Metrics;
use notice_ledger::outcomes::{publish_logged, OutcomeEvent, OutcomePublisher, PUBLISH_BUDGET};
use notice_ledger::park::Parker;
use notice_ledger::queue::Disposition;
use notice_ledger::rate::BucketStore;
use notice_ledger::worker::{Record, Worker};
use notice_ledger::{ConfigError, NoticeSender, QueuePolicy};
use notice_scheduler::SchedulerParker;
use notice_ses::mailer::{SesClient, SesMailer};
use notice_setup::assemble::{self, Assembled, SenderPorts};
use notice_setup::aws;
use notice_setup::ledger_url::LedgerUrl;
use notice_setup::notices::{ConfigSpec, ConfigWatch};
pub use notice_setup::settings::{OutcomeSettings, ParkingSettings, SenderSettings};
use notice_sqs::{Attribute, ReceivedMessage, REPLAY_BATCH_ATTRIBUTE};
use rand::Rng;
use serde_json::Value;
use tracing::{info, warn};

mod metrics;

use metrics::{emf_documents, ReplayBatches};

/// Everything the handler needs, built once per cold start ([`notice_setup::assemble`]).
pub struct SenderApp {
    sender: Arc<NoticeSender>,
    sqs: aws_sdk_sqs::Client,
    /// Source queue URL for visibility changes; derived from the record's ARN when unset.
    queue_url: Option<String>,
    dead_letter_queue_url: Option<String>,
    /// Records processed at once within one invocation.
    concurrency: usize,
    /// Where jobs that must wait longer than 15 minutes wait (`None`: they hide on the queue,
    /// every one counted in flight).
    parker: Option<Arc<dyn Parker>>,
    /// The one outcome → queue action table, with this deployment's parking and spread; parking
    /// exactly when `parker` is set.
    queue_policy: QueuePolicy,
    /// Parks refused in this invocation, by reason (`ParkingRefused`, dimension `Reason`).
    refusals: Mutex<BTreeMap<&'static str, u64>>,
    /// The EMF `Function` dimension: the deployed function's own name, so two stacks in one
    /// account never share metrics or alarms.
    function_name: String,
    /// The published notice configuration's pointer, looked up again between batches
    /// (`None`: built-in texts, a directory, or one pinned version).
    config_watch: Option<tokio::sync::Mutex<ConfigWatch>>,
    /// Where each notice's outcome event goes (`None`: `NOTICE_OUTCOME_BUS` unset, none is
    /// published).
    outcomes: Option<Arc<dyn OutcomePublisher>>,
}

impl SenderApp {
    /// Settings and clients from the environment (the Lambda's cold start).
    pub async fn from_env() -> Result<Self, ConfigError> {
        let sdk = aws::load_sdk_config().await;
        let mut settings = SenderSettings::load(&sdk).await?;
        {
            let config = settings.send.renderer.config();
            info!(
                config = %config.manifest().name,
                version = %config.version(),
                source = %settings.config_location.clone().unwrap_or_else(|| settings.config_spec.describe()),
                builtin = config.is_builtin(),
                "notice configuration loaded and checked"
            );
        }
        if let Some(limits) = settings.send.rate_limits.take() {
            settings.send.rate_limits = Some(limits.with_account_rate(account_rate(&sdk).await));
        }
        let opened = settings.ledger.open_with_buckets(Some(&sdk), settings.retention_days).await?;
        let key = verify_key_secret(opened.key_checks.as_ref(), &settings.send.secret).await?;
        info!(key_secret = %key, key_versions = %settings.send.secret.describe(), ledger = %settings.ledger.describe(), "key secret verified against the ledger's key check");
        let sesv2 = aws::sesv2_client(&sdk, settings.send.send_timeout);
        let parker = settings.parking.clone().map(|p| {
            let parker = SchedulerParker::new(aws_sdk_scheduler::Client::new(&sdk), p.group, p.role_arn)
                .with_dead_letter(p.dead_letter_arn);
            Arc::new(parker) as Arc<dyn Parker>
        });
        if parker.is_none() {
            warn!("NOTICE_SCHEDULE_GROUP is not set: waits over 15 minutes hide on the queue (up to 12 h a hop), every one of them counted in flight against SQS's ~120 000");
        }
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let watch = match (&settings.config_spec, &settings.config_location) {
            (spec @ ConfigSpec::Parameter(_), Some(location)) => {
                let location = location.parse().map_err(|e: notice_configstore::LocationError| {
                    ConfigError::Invalid { name: "NOTICE_CONFIG", reason: e.to_string() }
                })?;
                Some(ConfigWatch::new(&sdk, spec.clone(), location, settings.config_refresh)?)
            }
            _ => None,
        };
        let outcomes = notice_setup::settings::outcome_publisher(&sdk, OutcomeSettings::from_env().as_ref())?;
        let app = Self::with_ledger(settings, opened.ledger, opened.buckets, sesv2, sqs)
            .with_parker(parker)
            .with_outcomes(outcomes);
        Ok(app.with_config_watch(watch))
    }

    /// Looks the published configuration's pointer up again between batches through `watch`.
    pub fn with_config_watch(mut self, watch: Option<ConfigWatch>) -> Self {
        self.config_watch = watch.map(tokio::sync::Mutex::new);
        self
    }

    /// Switches to a newly published configuration version when the pointer moved (at most once
    /// per `NOTICE_CONFIG_REFRESH_SECS`). A version that cannot be loaded or fails its check
    /// leaves the current one in force: logged and counted (`ConfigRefreshFailed`, paging).
    pub async fn refresh_config(&self) {
        let Some(watch) = &self.config_watch else { return };
        let mut watch = watch.lock().await;
        match watch.poll().await {
            Ok(None) => {}
            Ok(Some((config, location))) => {
                let current = self.sender.notices();
                let (name, version) = (config.manifest().name.clone(), config.version().to_string());
                let policy = config.policy().clone();
                let renderer = Arc::new(current.renderer.with_config(Arc::new(config)));
                self.sender.switch(renderer, policy);
                info!(config = %name, version = %version, location = %location, "notice configuration switched: every notice from now on uses this version");
            }
            Err(e) => {
                notice_ledger::metrics::Metrics::incr(&self.sender.metrics().config_refresh_failed);
                tracing::error!(error = %e, current = %watch.current(), "could not load the newly published notice configuration: the current version stays in force");
            }
        }
    }

    /// Parks waits longer than 15 minutes with `parker` (see [`notice_ledger::queue`]).
    pub fn with_parker(mut self, parker: Option<Arc<dyn Parker>>) -> Self {
        self.queue_policy = assemble::queue_policy(parker.as_ref(), self.queue_policy.park_spread);
        self.parker = parker;
        self
    }

    /// Publishes each notice's outcome event through `publisher` (`None`: none is published).
    pub fn with_outcomes(mut self, publisher: Option<Arc<dyn OutcomePublisher>>) -> Self {
        self.outcomes = publisher;
        self
    }

    /// Acts on the queue through `sqs` (tests reach a failing SQS this way).
    pub fn with_sqs(mut self, sqs: aws_sdk_sqs::Client) -> Self {
        self.sqs = sqs;
        self
    }

    /// The sender inside (its key derivation and metrics, for tests and tools).
    pub fn sender(&self) -> &NoticeSender {
        &self.sender
    }

    /// Assembles the sender over a DynamoDB ledger table (`settings.ledger` = `dynamodb:TABLE`)
    /// and real clients. The SES client must be built by [`aws::sesv2_client`]: one attempt per
    /// send, never an SDK retry.
    pub fn new(
        settings: SenderSettings,
        dynamodb: notice_dynamodb::DynamoClient,
        sesv2: SesClient,
        sqs: aws_sdk_sqs::Client,
    ) -> Result<Self, ConfigError> {
        let LedgerUrl::DynamoDb(table) = &settings.ledger else {
            return Err(ConfigError::Invalid {
                name: "NOTICE_LEDGER_URL",
                reason: format!("{} is not a DynamoDB table", settings.ledger.describe()),
            });
        };
        let ledger =
            DynamoLedger::new(dynamodb.clone(), table.clone()).with_retention(settings.retention_days);
        let buckets = DynamoBuckets::new(dynamodb, table.clone());
        Ok(Self::with_ledger(settings, Arc::new(ledger), Arc::new(buckets), sesv2, sqs))
    }

    /// [`SenderApp::new`] over any ledger, with the rate buckets kept in the same store
    /// ([`notice_setup::ledger_url::LedgerUrl::open_with_buckets`]), so every sender on one ledger
    /// shares one bucket per domain. No parker until [`SenderApp::with_parker`].
    pub fn with_ledger(
        settings: SenderSettings,
        ledger: Arc<dyn Ledger>,
        buckets: Arc<dyn BucketStore>,
        sesv2: SesClient,
        sqs: aws_sdk_sqs::Client,
    ) -> Self {
        let mailer = SesMailer::new(sesv2, settings.from, settings.configuration_set);
        let ports = SenderPorts { ledger, buckets, mailer: Arc::new(mailer), parker: None };
        let Assembled { sender, queue_policy, parker } = assemble::assemble(settings.send, ports);
        Self {
            sender: Arc::new(sender),
            sqs,
            queue_url: settings.queue_url,
            dead_letter_queue_url: settings.dead_letter_queue_url,
            concurrency: settings.concurrency,
            parker,
            queue_policy,
            refusals: Mutex::default(),
            function_name: notice_setup::config::function_name("notice-sender"),
            config_watch: None,
            outcomes: None,
        }
    }
}

/// The sender's secret checked against the ledger's key check before its first message (recorded
/// on a ledger that has none: the first start). Another secret refuses the start — every key it
/// derived would name no notice, and every notice would be claimed and sent again — naming the
/// two identifiers, never the secret.
pub async fn verify_key_secret(
    store: &dyn KeyCheckStore,
    secret: &notice_ledger::keyring::KeyRing,
) -> Result<KeyCheck, ConfigError> {
    match check_ring(store, secret, true).await {
        Ok(outcome) => {
            if let KeyCheckOutcome::Recorded(k) = &outcome {
                info!(key_secret = %k, "the ledger had no key check: this secret's was recorded");
            }
            Ok(outcome.ours().clone())
        }
        Err(e @ KeyCheckError::Mismatch { .. }) => {
            Err(ConfigError::Invalid { name: "NOTICE_KEY_SECRET", reason: e.to_string() })
        }
        Err(KeyCheckError::Ledger(e)) => {
            Err(ConfigError::Unavailable { what: "the ledger's key check", reason: e.to_string() })
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
            let metrics = replays.metrics_for(app.sender.metrics(), replay_batch(&record).as_deref());
            (received(app, record, received_at), count, metrics)
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

fn replay_batch(record: &SqsMessage) -> Option<String> {
    record.message_attributes.get(REPLAY_BATCH_ATTRIBUTE).and_then(|a| a.string_value.clone())
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
