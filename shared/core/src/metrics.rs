//! Metric hooks. The core counts; adapters publish (the Lambdas as one CloudWatch EMF document per
//! invocation, `noticectl` as its summary).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde_json::{json, Map, Value};

/// CloudWatch namespace for every metric this project emits.
pub const NAMESPACE: &str = "NoticeLedger";

macro_rules! counters {
    ($($field:ident => $name:literal),* $(,)?) => {
        /// Counters the send path increments.
        #[derive(Default, Debug)]
        pub struct Metrics {
            $(pub $field: AtomicU64,)*
            claim_to_commit_ms: Mutex<Vec<f64>>,
            unlisted_jurisdictions: Mutex<BTreeMap<String, u64>>,
        }

        /// A drained copy of [`Metrics`].
        #[derive(Default, Debug, Clone, PartialEq)]
        pub struct MetricsSnapshot {
            $(pub $field: u64,)*
            pub claim_to_commit_ms: Vec<f64>,
            /// `UnlistedJurisdiction`, by jurisdiction.
            pub unlisted_jurisdictions: BTreeMap<String, u64>,
        }

        impl Metrics {
            /// Reads and zeroes every counter.
            pub fn drain(&self) -> MetricsSnapshot {
                MetricsSnapshot {
                    $($field: self.$field.swap(0, Ordering::Relaxed),)*
                    claim_to_commit_ms: std::mem::take(&mut *self.latencies()),
                    unlisted_jurisdictions: std::mem::take(&mut *self.unlisted()),
                }
            }
        }

        impl MetricsSnapshot {
            /// (CloudWatch name, value) for every counter.
            pub fn counters(&self) -> Vec<(&'static str, u64)> {
                vec![$(($name, self.$field),)*]
            }
        }
    };
}

counters! {
    claims_minted => "ClaimsMinted",
    duplicates_suppressed => "DuplicatesSuppressed",
    quarantined => "QuarantinedClaims",
    sent => "NoticesSent",
    deferred => "NoticesDeferred",
    parked => "ParkedJobs",
    requeued => "RequeuedJobs",
    rate_limited => "RateLimited",
    rate_limited_by_account => "RateLimitedByAccount",
    token_write_conflicts => "TokenWriteConflicts",
    mx_rollup_fallbacks => "MxRollupFallbacks",
    missed_window => "MissedWindow",
    released => "ClaimsReleased",
    rejected => "NoticesRejected",
    payload_conflicts => "PayloadConflicts",
    invalid_jobs => "InvalidJobs",
    ledger_errors => "LedgerErrors",
    shadow_would_suppress => "ShadowWouldSuppress",
    configuration_errors => "ProviderConfigurationErrors",
    withdrawn => "NoticesWithdrawn",
    withdraw_too_late => "WithdrawTooLate",
    unknown_kind => "UnknownKind",
    missing_content => "MissingRequiredContent",
    config_refresh_failed => "ConfigRefreshFailed",
    render_failed => "RenderFailed",
    outcomes_published => "OutcomesPublished",
    outcome_publish_failed => "OutcomePublishFailed",
}

impl Metrics {
    pub fn incr(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn observe_claim_to_commit(&self, ms: f64) {
        self.latencies().push(ms);
    }

    fn latencies(&self) -> std::sync::MutexGuard<'_, Vec<f64>> {
        self.claim_to_commit_ms.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A notice from a (valid) jurisdiction the windows policy does not name: it got its kind's
    /// window. Counted by jurisdiction, so an operator sees which laws the policy does not cover.
    pub fn count_unlisted_jurisdiction(&self, jurisdiction: &str) {
        *self.unlisted().entry(jurisdiction.to_owned()).or_default() += 1;
    }

    fn unlisted(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u64>> {
        self.unlisted_jurisdictions.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The MX rollup counts into the sender's counters: the core is the one that counts.
impl crate::rate::RollupCounters for Metrics {
    fn mx_rollup_fallback(&self) {
        Self::incr(&self.mx_rollup_fallbacks);
    }
}

impl MetricsSnapshot {
    /// One CloudWatch Embedded Metric Format document. `ClaimToCommitMs` carries every sample
    /// (EMF arrays), so the p99 alarm sees the real distribution.
    ///
    /// A counter with nothing to count in this invocation is left out, except [`ALWAYS_EMITTED`]:
    /// every name in the document is paid for again as log bytes on every invocation (27 zeros and
    /// their definitions were about 1.5 KB a batch, more than the batch's own log lines), and a
    /// missing point is what CloudWatch sums as nothing. Every alarm in template.yaml treats
    /// missing data as not breaching, and a statistic over a period with no point is no point, not
    /// a zero that could hide a breach.
    pub fn to_emf(&self, function: &str, timestamp_ms: i64) -> Value {
        emf_document(
            function,
            timestamp_ms,
            self.counters()
                .into_iter()
                .filter(|(n, v)| *v > 0 || *n == ALWAYS_EMITTED)
                .map(|(n, v)| (n, "Count", json!(v)))
                .chain(
                    (!self.claim_to_commit_ms.is_empty())
                        .then(|| ("ClaimToCommitMs", "Milliseconds", json!(self.claim_to_commit_ms))),
                ),
        )
    }
}

/// The one counter every invocation's document carries, zero or not: the function's pulse, so a
/// dashboard shows an invocation that sent nothing as a zero rather than as a gap.
pub const ALWAYS_EMITTED: &str = "NoticesSent";

/// Name of the EMF property that ties a record to an operator replay (`noticectl replay`): a
/// property, not a dimension, so batches cost no extra metrics and stay queryable in Logs Insights.
pub const REPLAY_BATCH_PROPERTY: &str = "replay_batch";

impl MetricsSnapshot {
    /// [`MetricsSnapshot::to_emf`] for the notices of one replay batch: the same metrics (they
    /// add up with the invocation's other records under the `Function` dimension) plus the
    /// `replay_batch` property.
    pub fn to_emf_for_batch(&self, function: &str, timestamp_ms: i64, replay_batch: &str) -> Value {
        let mut doc = self.to_emf(function, timestamp_ms);
        if let Value::Object(map) = &mut doc {
            map.insert(REPLAY_BATCH_PROPERTY.into(), json!(replay_batch));
        }
        doc
    }
}

/// `ParkingRefused` for one reason (`quota`, `throttled`, `unavailable`): counted under
/// `Function` (what the alarm reads; the reasons' documents add up there) and under
/// `Function` + `Reason` (what the dashboard splits by).
pub fn parking_refused_emf(function: &str, timestamp_ms: i64, reason: &str, count: u64) -> Value {
    split_emf(function, timestamp_ms, "ParkingRefused", ("Reason", reason), count)
}

/// One count of `metric` under `Function` and under `Function` + the given dimension.
fn split_emf(
    function: &str,
    timestamp_ms: i64,
    metric: &str,
    (dimension, value): (&str, &str),
    count: u64,
) -> Value {
    let mut doc = emf_document(function, timestamp_ms, [(metric, "Count", json!(count))]);
    if let Value::Object(map) = &mut doc {
        map.insert(dimension.into(), json!(value));
        map["_aws"]["CloudWatchMetrics"][0]["Dimensions"] = json!([["Function"], ["Function", dimension]]);
    }
    doc
}

/// `UnlistedJurisdiction` for one jurisdiction: under `Function` (the total an alarm or a widget
/// reads) and `Function` + `Jurisdiction` (which laws the policy does not cover). ISO 3166 codes
/// only (validated on the job), so the dimension's values stay bounded.
pub fn unlisted_jurisdiction_emf(function: &str, timestamp_ms: i64, jurisdiction: &str, count: u64) -> Value {
    split_emf(function, timestamp_ms, "UnlistedJurisdiction", ("Jurisdiction", jurisdiction), count)
}

impl MetricsSnapshot {
    /// One `UnlistedJurisdiction` document per jurisdiction counted.
    pub fn unlisted_jurisdiction_emf(&self, function: &str, timestamp_ms: i64) -> Vec<Value> {
        self.unlisted_jurisdictions
            .iter()
            .map(|(j, n)| unlisted_jurisdiction_emf(function, timestamp_ms, j, *n))
            .collect()
    }
}

/// Builds an EMF document with one dimension, `Function`.
pub fn emf_document<'a>(
    function: &str,
    timestamp_ms: i64,
    metrics: impl IntoIterator<Item = (&'a str, &'a str, Value)>,
) -> Value {
    let mut doc = Map::new();
    let mut definitions = Vec::new();
    for (name, unit, value) in metrics {
        definitions.push(json!({"Name": name, "Unit": unit}));
        doc.insert(name.to_owned(), value);
    }
    doc.insert("Function".into(), json!(function));
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [["Function"]],
                "Metrics": definitions,
            }]
        }),
    );
    Value::Object(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_resets_and_emf_lists_what_counted() {
        let m = Metrics::default();
        Metrics::incr(&m.claims_minted);
        Metrics::incr(&m.claims_minted);
        m.observe_claim_to_commit(12.5);
        let snap = m.drain();
        assert_eq!(snap.claims_minted, 2);
        assert_eq!(m.drain().claims_minted, 0);
        let emf = snap.to_emf("notice-sender", 1);
        assert_eq!(emf["ClaimsMinted"], 2);
        assert_eq!(emf["ClaimToCommitMs"], json!([12.5]));
        let defs = emf["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array().unwrap();
        let names: Vec<&str> = defs.iter().filter_map(|d| d["Name"].as_str()).collect();
        // Only what counted, and the pulse; a zero counter is neither defined nor valued.
        assert_eq!(names, ["ClaimsMinted", "NoticesSent", "ClaimToCommitMs"]);
        assert_eq!(emf["NoticesSent"], 0);
        assert!(emf.get("DuplicatesSuppressed").is_none());
        let idle = MetricsSnapshot::default().to_emf("notice-sender", 1);
        assert_eq!(
            idle["_aws"]["CloudWatchMetrics"][0]["Metrics"],
            json!([{"Name": "NoticesSent", "Unit": "Count"}])
        );
        assert_eq!(emf["_aws"]["CloudWatchMetrics"][0]["Namespace"], NAMESPACE);
        assert!(emf.get(REPLAY_BATCH_PROPERTY).is_none());
        let batch = snap.to_emf_for_batch("notice-sender", 1, "b-42");
        assert_eq!(batch[REPLAY_BATCH_PROPERTY], "b-42");
        assert_eq!(batch["ClaimsMinted"], 2);
        assert_eq!(batch["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Function"]]));
    }

    #[test]
    fn the_mx_rollup_counts_its_fallbacks_into_the_sender_s_counters() {
        let m = Metrics::default();
        crate::rate::RollupCounters::mx_rollup_fallback(&m);
        assert_eq!(m.drain().mx_rollup_fallbacks, 1);
    }

    #[test]
    fn parking_refusals_count_under_the_function_and_by_reason() {
        let doc = parking_refused_emf("prod-sender", 7, "quota", 3);
        assert_eq!(doc["ParkingRefused"], 3);
        assert_eq!(doc["Reason"], "quota");
        assert_eq!(doc["Function"], "prod-sender");
        let cw = &doc["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(cw["Dimensions"], json!([["Function"], ["Function", "Reason"]]));
        assert_eq!(cw["Metrics"], json!([{"Name": "ParkingRefused", "Unit": "Count"}]));
    }
}
