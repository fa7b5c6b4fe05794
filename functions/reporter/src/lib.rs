//! `notice-reporter`: the scheduled look at the quarantine. It reads the sparse open-claims index
//! (DynamoDB, where a claim is listed once it may stay open — before its message is acked; a
//! partial index over every open claim on PostgreSQL)
//! (cost grows with the quarantine, not the ledger — never a Scan), reports claims older than
//! `NOTICE_STALE_AFTER_SECS`, and emits `QuarantinedClaims` for the alarm. It never writes and
//! never releases: closing a claim takes evidence or an operator.

use std::sync::LazyLock;
use std::time::Duration;

use chrono::{DateTime, Utc};
use lambda_runtime::LambdaEvent;
use std::sync::Arc;

use notice_ledger::ledger::QuarantineView;
use notice_ledger::metrics::emf_document;
use notice_ledger::ConfigError;
use notice_setup::ledger_url::ledger_from_env;
use notice_setup::{aws, config};
use serde::Serialize;
use serde_json::{json, Value};

/// Longest list of claims in one report; the count is always complete.
pub const MAX_LISTED: usize = 50;

/// The EMF `Function` dimension: the deployed function's own name (`AWS_LAMBDA_FUNCTION_NAME`), so
/// two stacks in one account never share metrics or alarms. Read once, at start-up
/// ([`ReporterApp::from_env`]) or at the first published document.
static FUNCTION_NAME: LazyLock<String> = LazyLock::new(|| config::function_name("notice-reporter"));

pub struct ReporterApp {
    /// Read-only: the reporter cannot write to the ledger.
    pub ledger: Arc<dyn QuarantineView>,
    pub stale_after: Duration,
}

impl ReporterApp {
    pub async fn from_env() -> Result<Self, ConfigError> {
        let stale_after = config::stale_after_from_env()?;
        LazyLock::force(&FUNCTION_NAME);
        let sdk = aws::load_sdk_config().await;
        Ok(Self { ledger: ledger_from_env(&sdk).await?, stale_after })
    }
}

#[derive(Debug, Serialize, PartialEq)]
pub struct QuarantineReport {
    pub quarantined: usize,
    pub stale_after_secs: u64,
    pub oldest_age_secs: Option<i64>,
    pub claims: Vec<ListedClaim>,
    pub truncated: bool,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct ListedClaim {
    pub notice_key: String,
    pub subscription_id: String,
    pub period_start: String,
    pub kind: String,
    pub revision: u64,
    pub claimed_at: Option<DateTime<Utc>>,
    pub age_secs: Option<i64>,
}

/// Builds the report as of `now`.
pub async fn report(
    app: &ReporterApp,
    now: DateTime<Utc>,
) -> Result<QuarantineReport, lambda_runtime::Error> {
    let cut = now - chrono::Duration::from_std(app.stale_after)?;
    let (count, oldest) = app.ledger.count_open_claims(cut).await?;
    let rows = app.ledger.open_claims(cut, MAX_LISTED).await?;
    let claims: Vec<ListedClaim> = rows
        .into_iter()
        .map(|r| ListedClaim {
            notice_key: r.key.as_str().to_owned(),
            subscription_id: r.subscription_id,
            period_start: r.period_start,
            kind: r.kind,
            revision: r.revision,
            claimed_at: r.claimed_at,
            age_secs: r.claimed_at.map(|t| (now - t).num_seconds()),
        })
        .collect();
    Ok(QuarantineReport {
        quarantined: count,
        stale_after_secs: app.stale_after.as_secs(),
        oldest_age_secs: oldest.map(|t| (now - t).num_seconds()),
        truncated: count > claims.len(),
        claims,
    })
}

/// The scheduled handler: the event itself carries nothing we need.
pub async fn handle(app: &ReporterApp, _event: LambdaEvent<Value>) -> Result<Value, lambda_runtime::Error> {
    let now = Utc::now();
    let report = report(app, now).await?;
    let doc = emf_document(
        &FUNCTION_NAME,
        now.timestamp_millis(),
        [
            ("QuarantinedClaims", "Count", json!(report.quarantined)),
            ("OldestQuarantinedClaimAgeSecs", "Seconds", json!(report.oldest_age_secs.unwrap_or(0))),
        ],
    );
    println!("{doc}");
    if report.quarantined > 0 {
        tracing::error!(
            quarantined = report.quarantined,
            oldest_age_secs = report.oldest_age_secs,
            "quarantined claims need resolution (see docs/operations.md: quarantine runbook)"
        );
    }
    Ok(serde_json::to_value(&report)?)
}
