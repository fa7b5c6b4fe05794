//! One settings struct per binary, read from the environment once at start-up: a binary fails
//! before its first message when a setting is missing or invalid.

#[cfg(any(feature = "texts", all(feature = "eventbridge", feature = "dynamodb")))]
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "texts")]
use notice_ledger::keyring::KeyRing;
use notice_ledger::{ConfigError, SendBudget};
#[cfg(feature = "texts")]
use notice_texts::{NoticeConfig, Renderer};

#[cfg(feature = "texts")]
use crate::assemble::{GateClock, SendConfig};
use crate::config;
#[cfg(feature = "texts")]
use crate::ledger_url::{self, LedgerUrl};
#[cfg(feature = "texts")]
use crate::notices::{self, ConfigSpec};
#[cfg(feature = "texts")]
use crate::secret;

/// EventBridge Scheduler parking (`NOTICE_SCHEDULE_GROUP`, `NOTICE_SCHEDULER_ROLE_ARN`).
#[derive(Clone, Debug)]
pub struct ParkingSettings {
    pub group: String,
    /// The role Scheduler assumes to put the job back on the queue.
    pub role_arn: String,
    /// `NOTICE_SCHEDULE_DEAD_LETTER_ARN`: where Scheduler puts a job it could not deliver.
    pub dead_letter_arn: Option<String>,
}

impl ParkingSettings {
    /// Both variables or neither: one without the other is a half-configured deployment.
    pub fn from_env() -> Result<Option<Self>, ConfigError> {
        let group = config::optional("NOTICE_SCHEDULE_GROUP");
        let role_arn = config::optional("NOTICE_SCHEDULER_ROLE_ARN");
        match (group, role_arn) {
            (Some(group), Some(role_arn)) => Ok(Some(Self {
                group,
                role_arn,
                dead_letter_arn: config::optional("NOTICE_SCHEDULE_DEAD_LETTER_ARN"),
            })),
            (None, None) => Ok(None),
            (Some(_), None) => Err(ConfigError::Missing("NOTICE_SCHEDULER_ROLE_ARN")),
            (None, Some(_)) => Err(ConfigError::Missing("NOTICE_SCHEDULE_GROUP")),
        }
    }
}

/// Variable naming the EventBridge bus each notice's outcome event goes to (sender, reconciler).
pub const OUTCOME_BUS_VAR: &str = "NOTICE_OUTCOME_BUS";

/// Outcome events (`NOTICE_OUTCOME_BUS`): optional — unset, nothing is published and the ledger
/// alone records outcomes (the start-up log says so).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutcomeSettings {
    /// The bus: a name or an ARN, as `PutEvents` takes either.
    pub bus: String,
}

impl OutcomeSettings {
    /// `None` when the variable is unset or blank.
    pub fn from_env() -> Option<Self> {
        config::optional(OUTCOME_BUS_VAR).map(|bus| Self { bus: bus.trim().to_owned() })
    }
}

/// Configuration of the sender, read once at start-up (feature `texts`: it holds the renderer).
#[cfg(feature = "texts")]
pub struct SenderSettings {
    /// The ledger, decided once: `NOTICE_LEDGER_URL` (`dynamodb:TABLE`, `postgres://…`,
    /// `sqlite:PATH`), else the DynamoDB table in `NOTICE_TABLE`. Its store keeps the rate buckets.
    pub ledger: LedgerUrl,
    /// What the sender itself is configured with ([`crate::assemble`]): secret, mode, windows
    /// policy, renderer, send timeout, `NOTICE_CLAIM_LIFETIME_SECS` (default 60, twice the
    /// template's 30 s function timeout), `NOTICE_RATE_LIMITS` (the built-in default when unset,
    /// `None` when switched off), `NOTICE_PARK_SPREAD_SECS`.
    pub send: SendConfig,
    pub from: String,
    pub configuration_set: Option<String>,
    pub retention_days: u32,
    pub concurrency: usize,
    pub queue_url: Option<String>,
    pub dead_letter_queue_url: Option<String>,
    /// Parking for long waits; `None` only where no job waits longer than the queue keeps it.
    pub parking: Option<ParkingSettings>,
    /// Where the notice configuration came from (`NOTICE_CONFIG`): a published one is looked up
    /// again every `config_refresh`.
    pub config_spec: ConfigSpec,
    pub config_refresh: Duration,
    /// The published version's `s3://…` location, when one was loaded.
    pub config_location: Option<String>,
}

#[cfg(feature = "texts")]
impl SenderSettings {
    /// Reads the environment and fails — before the first message — when a required setting is
    /// missing or invalid.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_env_with_secret(secret::from_env()?)
    }

    /// [`SenderSettings::from_env`], reading the secret from Secrets Manager when
    /// `NOTICE_KEY_SECRET_ARN` names it (once, at cold start).
    #[cfg(feature = "secretsmanager")]
    pub async fn load(sdk: &aws_config::SdkConfig) -> Result<Self, ConfigError> {
        let secret = secret::resolve(sdk).await?.ok_or(ConfigError::Missing(secret::EITHER_VAR))?;
        let spec = ConfigSpec::from_env()?;
        let config = match &spec {
            ConfigSpec::Builtin | ConfigSpec::Dir(_) => notices::load_local(&spec)?,
            #[cfg(feature = "configstore")]
            ConfigSpec::Parameter(_) | ConfigSpec::Object(_) => {
                let (config, location) = notices::load_published(sdk, &spec).await?;
                let mut settings = Self::from_parts(secret, spec, config)?;
                settings.config_location = Some(location.to_string());
                return Ok(settings);
            }
            #[cfg(not(feature = "configstore"))]
            ConfigSpec::Parameter(_) | ConfigSpec::Object(_) => notices::load_local(&spec)?,
        };
        Self::from_parts(secret, spec, config)
    }

    /// Every other setting from the environment, with the secret already resolved; the notice
    /// configuration must be the built-in one or a directory.
    pub fn from_env_with_secret(secret: impl Into<KeyRing>) -> Result<Self, ConfigError> {
        let spec = ConfigSpec::from_env()?;
        let config = notices::load_local(&spec)?;
        Self::from_parts(secret.into(), spec, config)
    }

    fn from_parts(secret: KeyRing, spec: ConfigSpec, config: NoticeConfig) -> Result<Self, ConfigError> {
        let policy = config.policy().clone();
        let renderer = Renderer::new(Arc::new(config), config::links_from_env(&secret)?);
        // The table is required unless NOTICE_LEDGER_URL names the ledger.
        let ledger = LedgerUrl::from_env()?;
        let retention_days = ledger_url::retention_days_from_env()?;
        if matches!(ledger, LedgerUrl::DynamoDb(_)) {
            ledger_url::check_retention(retention_days, &policy)?;
        }
        let send_timeout = config::secs_from_env("NOTICE_SEND_TIMEOUT_SECS", 8)?;
        let send = SendConfig {
            secret,
            mode: config::mode_from_env()?,
            policy,
            renderer: Arc::new(renderer),
            send_timeout,
            claim_lifetime: claim_lifetime_from_env(send_timeout)?,
            rate_limits: config::rate_limits_from_env()?,
            park_spread: config::park_spread_from_env()?,
            gate_clock: GateClock::Wall,
            redirect_all_mail_to: config::redirect_from_env()?,
        };
        Ok(Self {
            ledger,
            send,
            from: sender_from_env()?,
            configuration_set: config::optional("NOTICE_CONFIGURATION_SET"),
            retention_days,
            concurrency: config::secs_from_env("NOTICE_RECORD_CONCURRENCY", 10)?.as_secs().clamp(1, 100)
                as usize,
            queue_url: config::optional("NOTICE_QUEUE_URL"),
            dead_letter_queue_url: config::optional("NOTICE_DEAD_LETTER_QUEUE_URL"),
            parking: ParkingSettings::from_env()?,
            config_spec: spec,
            config_refresh: notices::refresh_from_env()?,
            config_location: None,
        })
    }
}

/// `NOTICE_CLAIM_LIFETIME_SECS`: longer than a send (a claim outlives its send), and not past
/// `NOTICE_STALE_AFTER_SECS` (a live sender's claim must not look quarantined).
pub fn claim_lifetime_from_env(send_timeout: Duration) -> Result<Duration, ConfigError> {
    const NAME: &str = "NOTICE_CLAIM_LIFETIME_SECS";
    let lifetime = config::secs_from_env(NAME, SendBudget::default().claim_lifetime.as_secs())?;
    let stale_after = config::stale_after_from_env()?;
    if lifetime <= send_timeout {
        let reason = format!(
            "{} s must exceed NOTICE_SEND_TIMEOUT_SECS ({} s): a claim outlives its send",
            lifetime.as_secs(),
            send_timeout.as_secs()
        );
        return Err(ConfigError::Invalid { name: NAME, reason });
    }
    if lifetime > stale_after {
        let reason = format!(
            "{} s must not exceed NOTICE_STALE_AFTER_SECS ({} s): a live sender's claim would look quarantined",
            lifetime.as_secs(),
            stale_after.as_secs()
        );
        return Err(ConfigError::Invalid { name: NAME, reason });
    }
    Ok(lifetime)
}

/// `NOTICE_FROM`: an address, optionally with a display name, checked like a recipient so a
/// line break or a second address cannot ride along into every message.
pub fn sender_from_env() -> Result<String, ConfigError> {
    let from = config::required("NOTICE_FROM")?;
    notice_ledger::address::parse_sender(&from)
        .map_err(|e| ConfigError::Invalid { name: "NOTICE_FROM", reason: e.to_string() })?;
    Ok(from.trim().to_owned())
}

/// The outcome events' publisher of a Lambda that publishes them (the sender, the reconciler):
/// EventBridge when `NOTICE_OUTCOME_BUS` names a bus, else none — said once in the start-up log
/// either way, so a deployment that expected events can tell from its first lines. A bus that
/// cannot be addressed (no region) refuses the start: events would silently never go out.
#[cfg(all(feature = "eventbridge", feature = "dynamodb"))]
pub fn outcome_publisher(
    sdk: &crate::aws::SdkConfig,
    settings: Option<&OutcomeSettings>,
) -> Result<Option<Arc<dyn notice_ledger::outcomes::OutcomePublisher>>, ConfigError> {
    let Some(settings) = settings else {
        tracing::info!("NOTICE_OUTCOME_BUS is not set: no outcome events are published (the ledger still records every outcome; `noticectl outcomes republish` can publish a range later)");
        return Ok(None);
    };
    let publisher = crate::aws::eventbridge_publisher(sdk, &settings.bus)
        .map_err(|e| ConfigError::Invalid { name: OUTCOME_BUS_VAR, reason: e.to_string() })?;
    tracing::info!(bus = %settings.bus, "outcome events are published to this EventBridge bus");
    Ok(Some(Arc::new(publisher)))
}
