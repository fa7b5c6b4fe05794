//! The sender's cold start: settings and clients from the environment, the key secret checked
//! against the ledger, the one sender assembled ([`notice_setup::assemble`]) — everything
//! [`crate::handle`] needs, built once. Nothing here runs per message.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use notice_dynamodb::ledger::DynamoLedger;
use notice_dynamodb::rate::DynamoBuckets;
use notice_ledger::keycheck::{check_ring, KeyCheck, KeyCheckError, KeyCheckOutcome, KeyCheckStore};
use notice_ledger::ledger::Ledger;
use notice_ledger::outcomes::OutcomePublisher;
use notice_ledger::park::Parker;
use notice_ledger::rate::BucketStore;
use notice_ledger::{ConfigError, NoticeSender, QueuePolicy};
use notice_scheduler::SchedulerParker;
use notice_ses::mailer::{SesClient, SesMailer};
use notice_setup::assemble::{self, Assembled, SenderPorts};
use notice_setup::aws;
use notice_setup::ledger_url::LedgerUrl;
use notice_setup::notices::{ConfigSpec, ConfigWatch};
use notice_setup::settings::{OutcomeSettings, SenderSettings};
use notice_texts::Renderer;
use tracing::{info, warn};

/// Everything the handler needs, built once per cold start ([`notice_setup::assemble`]).
pub struct SenderApp {
    pub(crate) sender: Arc<NoticeSender>,
    pub(crate) sqs: aws_sdk_sqs::Client,
    /// Source queue URL for visibility changes; derived from the record's ARN when unset.
    pub(crate) queue_url: Option<String>,
    pub(crate) dead_letter_queue_url: Option<String>,
    /// Records processed at once within one invocation.
    pub(crate) concurrency: usize,
    /// Where jobs that must wait longer than 15 minutes wait (`None`: they hide on the queue,
    /// every one counted in flight).
    pub(crate) parker: Option<Arc<dyn Parker>>,
    /// The one outcome → queue action table, with this deployment's parking and spread; parking
    /// exactly when `parker` is set.
    pub(crate) queue_policy: QueuePolicy,
    /// Parks refused in this invocation, by reason (`ParkingRefused`, dimension `Reason`).
    pub(crate) refusals: Mutex<BTreeMap<&'static str, u64>>,
    /// The EMF `Function` dimension: the deployed function's own name, so two stacks in one
    /// account never share metrics or alarms.
    pub(crate) function_name: String,
    /// The published notice configuration's pointer, looked up again between batches
    /// (`None`: built-in texts, a directory, or one pinned version).
    pub(crate) config_watch: Option<tokio::sync::Mutex<ConfigWatch>>,
    /// Where each notice's outcome event goes (`None`: `NOTICE_OUTCOME_BUS` unset, none is
    /// published).
    pub(crate) outcomes: Option<Arc<dyn OutcomePublisher>>,
    /// The texts the sender started with: a newly published version is rendered with their
    /// manage links.
    pub(crate) renderer: Arc<Renderer>,
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
                let (name, version) = (config.manifest().name.clone(), config.version().to_string());
                let policy = config.policy().clone();
                let renderer = Arc::new(self.renderer.with_config(Arc::new(config)));
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
        let renderer = Arc::clone(&settings.send.renderer);
        let Assembled { sender, queue_policy, parker } = assemble::assemble(settings.send, ports);
        Self {
            // SQS gives back every message the handler does not finish: claims go on the
            // quarantine view only when one may stay open.
            sender: Arc::new(sender.redelivered_by_queue()),
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
            renderer,
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
