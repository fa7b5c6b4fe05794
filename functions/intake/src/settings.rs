//! The intake's settings, read once at cold start: a missing or invalid one stops the start.
//!
//! | variable | meaning |
//! |---|---|
//! | `NOTICE_INTAKE_KIND` | the notice kind of every renewal notice, for a configuration whose policy has no `obligations` (then required, and refused unless the policy lists it, as the sender would refuse the jobs); refused beside `obligations`, which choose each contract's kinds |
//! | `NOTICE_INTAKE_BILLING_TIME_ZONE` | required: the IANA zone the billing system keeps its days in; a period's opening instant is read as a date there (`period_start`) |
//! | `NOTICE_INTAKE_SIGNING_SECRET_ARN` | the Secrets Manager secret holding the endpoint signing secret (`whsec_…`); or `NOTICE_INTAKE_SIGNING_SECRET`, the value itself (local runs) |
//! | `NOTICE_INTAKE_TOLERANCE_SECS` | how old a signature may be (default 300, Stripe's own; 0 checks no age) |
//! | `NOTICE_QUEUE_URL` | required: the jobs queue |
//! | `NOTICE_KEY_SECRET_ARN` / `NOTICE_KEY_SECRET` | the key secret (the ledger's rows are read by key), verified against the ledger's key check |
//! | `NOTICE_LEDGER_URL` / `NOTICE_TABLE` | the ledger, as every entry point names it |
//! | `NOTICE_CONFIG` | the notice configuration: its policy's obligations (or list of kinds) decide the kinds |
//! | `NOTICE_STRIPE_API_KEY_ARN` | the Secrets Manager secret holding a restricted Stripe API key (read-only Customers and Subscriptions), read once at start; or `NOTICE_STRIPE_API_KEY`, the key itself (local runs). Required when an obligation rule is `on: price_change` (the start is refused without it: a price change's customer facts come from Stripe, never from a default); unused otherwise |
//! | `NOTICE_STRIPE_API_BASE` | Stripe's API base URL (default `https://api.stripe.com`; tests point it at a stand-in) |

use std::sync::Arc;

use notice_ledger::intake::{IntakePlanner, Kinds};
use notice_ledger::keycheck::{check_ring, KeyCheckError, KeyCheckOutcome};
use notice_ledger::locale::TimeZone;
use notice_ledger::{ConfigError, Kind};
use notice_setup::aws::SdkConfig;
use notice_setup::ledger_url::{self, LedgerUrl};
use notice_setup::notices::ConfigSpec;
use notice_setup::{config, secret};
use notice_stripe::{ApiKey, SigningSecrets, StripeApi, StripeMapping, DEFAULT_TOLERANCE_SECS};
use notice_texts::notices::NoticeConfig;
use tracing::info;

use crate::aws::SecretsManagerSource;
use crate::{IntakeApp, KeyGate, SecretSource, Secrets};

pub const KIND_VAR: &str = notice_ledger::intake::STATED_KIND_VAR;
pub const ZONE_VAR: &str = "NOTICE_INTAKE_BILLING_TIME_ZONE";
pub const SIGNING_SECRET_VAR: &str = "NOTICE_INTAKE_SIGNING_SECRET";
pub const SIGNING_SECRET_ARN_VAR: &str = "NOTICE_INTAKE_SIGNING_SECRET_ARN";
pub const TOLERANCE_VAR: &str = "NOTICE_INTAKE_TOLERANCE_SECS";
pub const QUEUE_VAR: &str = "NOTICE_QUEUE_URL";
pub const STRIPE_API_KEY_VAR: &str = "NOTICE_STRIPE_API_KEY";
pub const STRIPE_API_KEY_ARN_VAR: &str = "NOTICE_STRIPE_API_KEY_ARN";
pub const STRIPE_API_BASE_VAR: &str = "NOTICE_STRIPE_API_BASE";

/// `NOTICE_INTAKE_KIND` if set, checked as a kind; whether it may or must be set comes with the
/// configuration ([`kinds`]).
pub fn kind_from_env() -> Result<Option<Kind>, ConfigError> {
    config::optional(KIND_VAR)
        .map(|kind| {
            Kind::parse(kind.trim()).map_err(|e| ConfigError::Invalid { name: KIND_VAR, reason: e.reason })
        })
        .transpose()
}

/// `NOTICE_INTAKE_BILLING_TIME_ZONE`: required, never the host's zone (docs/job.md, "Time zones").
pub fn zone_from_env() -> Result<TimeZone, ConfigError> {
    let zone = config::required(ZONE_VAR)?;
    TimeZone::parse(zone.trim()).map_err(|reason| ConfigError::Invalid { name: ZONE_VAR, reason })
}

/// The kinds under the configuration in force: its policy's obligations, or the stated kind, which
/// must be one the policy sends (strict policies list their kinds).
pub fn kinds(stated: Option<Kind>, config: &NoticeConfig) -> Result<Kinds, ConfigError> {
    Kinds::from_policy(config.policy(), stated)
}

/// The notice configuration `NOTICE_CONFIG` names: built-in, a directory, or published.
async fn notice_config(sdk: &SdkConfig) -> Result<NoticeConfig, ConfigError> {
    let spec = ConfigSpec::from_env()?;
    match &spec {
        ConfigSpec::Builtin | ConfigSpec::Dir(_) => notice_setup::notices::load_local(&spec),
        ConfigSpec::Parameter(_) | ConfigSpec::Object(_) => {
            notice_setup::notices::load_published(sdk, &spec).await.map(|(config, _)| config)
        }
    }
}

/// The signing secrets: the value, or the secret it lives in (read now, and again after a
/// signature does not match once a minute has passed).
async fn signing_secrets(sdk: &SdkConfig) -> Result<Secrets, ConfigError> {
    let value = config::optional(SIGNING_SECRET_VAR);
    let arn = config::optional(SIGNING_SECRET_ARN_VAR);
    let invalid = |name, reason: String| ConfigError::Invalid { name, reason };
    match (value, arn) {
        (Some(_), Some(_)) => Err(invalid(
            SIGNING_SECRET_VAR,
            format!("set only one of {SIGNING_SECRET_VAR} and {SIGNING_SECRET_ARN_VAR}"),
        )),
        (Some(value), None) => {
            let secrets =
                SigningSecrets::parse(&value).map_err(|e| invalid(SIGNING_SECRET_VAR, e.to_string()))?;
            Ok(Secrets::new(secrets, None))
        }
        (None, Some(arn)) => {
            let source = SecretsManagerSource::new(aws_sdk_secretsmanager::Client::new(sdk), arn);
            let secrets = source.read().await.map_err(|e| e.for_setting(SIGNING_SECRET_ARN_VAR))?;
            Ok(Secrets::new(secrets, Some(Arc::new(source))))
        }
        (None, None) => {
            Err(ConfigError::Missing("NOTICE_INTAKE_SIGNING_SECRET_ARN (or NOTICE_INTAKE_SIGNING_SECRET)"))
        }
    }
}

/// Stripe's API client for a price change's customer facts, when a key is configured: the value
/// (`NOTICE_STRIPE_API_KEY`) or the secret it lives in (`NOTICE_STRIPE_API_KEY_ARN`, read once).
/// `needed`: the obligations announce price changes — then a missing key stops the start.
async fn stripe_api(sdk: &SdkConfig, needed: bool) -> Result<Option<StripeApi>, ConfigError> {
    let value = config::optional(STRIPE_API_KEY_VAR);
    let arn = config::optional(STRIPE_API_KEY_ARN_VAR);
    let invalid = |name, reason: String| ConfigError::Invalid { name, reason };
    let key = match (value, arn) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                STRIPE_API_KEY_VAR,
                format!("set only one of {STRIPE_API_KEY_VAR} and {STRIPE_API_KEY_ARN_VAR}"),
            ))
        }
        (Some(value), None) => {
            ApiKey::parse(&value).map_err(|e| invalid(STRIPE_API_KEY_VAR, e.to_string()))?
        }
        (None, Some(arn)) => {
            let client = aws_sdk_secretsmanager::Client::new(sdk);
            let out = secret::get_value(&client, &arn)
                .await
                .map_err(|error| ConfigError::Dependency { name: STRIPE_API_KEY_ARN_VAR, error })?;
            let text = out.secret_string().unwrap_or_default();
            ApiKey::parse(text).map_err(|e| invalid(STRIPE_API_KEY_ARN_VAR, format!("{arn}: {e}")))?
        }
        (None, None) if needed => return Err(ConfigError::Missing(
            "NOTICE_STRIPE_API_KEY_ARN (or NOTICE_STRIPE_API_KEY): the obligations owe price-change notices, \
                 trial-conversion notices or anniversary reminders, whose customer e-mail, locale and address, \
                 or the subscription's trial or start, are read from Stripe's API",
        )),
        (None, None) => return Ok(None),
    };
    let base =
        config::optional(STRIPE_API_BASE_VAR).unwrap_or_else(|| notice_stripe::api::DEFAULT_BASE.to_owned());
    StripeApi::new(&base, key).map(Some).map_err(|e| invalid(STRIPE_API_BASE_VAR, e.to_string()))
}

/// The app from the environment (the Lambda's cold start).
pub async fn from_env() -> Result<IntakeApp, ConfigError> {
    let stated = kind_from_env()?;
    let zone = zone_from_env()?;
    let queue_url = config::required(QUEUE_VAR)?;
    let tolerance_secs = config::secs_from_env(TOLERANCE_VAR, DEFAULT_TOLERANCE_SECS)?.as_secs();
    let function_name = config::function_name("notice-intake");
    let sdk = notice_setup::aws::load_sdk_config().await;
    let keys = secret::resolve(&sdk).await?.ok_or(ConfigError::Missing(secret::EITHER_VAR))?;
    let notices = notice_config(&sdk).await?;
    let kinds = kinds(stated, &notices)?;
    let secrets = signing_secrets(&sdk).await?;
    let ledger = LedgerUrl::from_env()?;
    let opened = ledger.open_with_buckets(Some(&sdk), ledger_url::retention_days_from_env()?).await?;
    let mut planner = IntakePlanner::with_kinds(kinds, zone, keys, std::sync::Arc::new(notice_texts::Icu));
    let needs_api =
        planner.announces_price_changes() || planner.counts_anniversaries() || planner.tells_trials_apart();
    let stripe_api = stripe_api(&sdk, needs_api).await?;
    let customers = stripe_api.as_ref().map(|api| format!("{} ({} key)", api.base(), api.key_kind()));
    if let Some(api) = stripe_api {
        let api = Arc::new(api);
        planner = planner.with_customers(api.clone()).with_subscriptions(api);
    }
    let verified = match check_ring(opened.key_checks.as_ref(), planner.keys(), false).await {
        Ok(KeyCheckOutcome::Verified(k)) => {
            info!(key_secret = %k, "key secret verified against the ledger's key check");
            true
        }
        Ok(outcome) => {
            info!(key_secret = %outcome.ours(), "the ledger holds no key check yet (no sender has opened it): checked again before each ledger read until it does");
            false
        }
        Err(e @ KeyCheckError::Mismatch { .. }) => {
            return Err(ConfigError::Invalid { name: secret::SECRET_VAR, reason: e.to_string() })
        }
        Err(KeyCheckError::Ledger(e)) => {
            return Err(ConfigError::Unavailable { what: "the ledger's key check", reason: e.to_string() })
        }
    };
    info!(
        kinds = %planner.kinds().describe(),
        billing_time_zone = %planner.billing_zone(),
        config = %notices.manifest().name,
        config_version = %notices.version(),
        signing_secrets = secrets.count().await,
        tolerance_secs,
        ledger = %ledger.describe(),
        stripe_api = customers.as_deref().unwrap_or("not configured (no price-change, trial or anniversary rule)"),
        "intake ready"
    );
    Ok(IntakeApp {
        secrets,
        tolerance_secs,
        mapping: Arc::new(StripeMapping),
        planner,
        ledger: opened.ledger,
        key_gate: KeyGate::new(opened.key_checks, verified),
        // The jobs queue the sender reads (`NOTICE_QUEUE_URL`).
        queue: Arc::new(notice_sqs::Producer::new(aws_sdk_sqs::Client::new(&sdk), queue_url)),
        function_name,
    })
}
