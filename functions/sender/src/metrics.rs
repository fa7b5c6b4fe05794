//! The sender's CloudWatch metrics: the counters of one invocation, and of each replay batch in
//! it, as EMF documents (docs/metrics.md).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use notice_ledger::metrics::Metrics;
use serde_json::Value;

/// Counters of this invocation's replayed notices, one set per `replay_batch` value.
#[derive(Default)]
pub(crate) struct ReplayBatches(Mutex<BTreeMap<String, Arc<Metrics>>>);

impl ReplayBatches {
    /// The counters a record counts into: its replay batch's, or the sender's own (`own`).
    /// `replay_batch` as the queue adapter answers it (never empty).
    pub(crate) fn metrics_for(&self, own: &Arc<Metrics>, replay_batch: Option<&str>) -> Arc<Metrics> {
        match replay_batch {
            None => Arc::clone(own),
            Some(batch) => {
                let mut batches = self.0.lock().unwrap_or_else(|p| p.into_inner());
                Arc::clone(batches.entry(batch.to_owned()).or_default())
            }
        }
    }
}

/// One EMF document per invocation (printed on stdout, where CloudWatch picks it up), plus one per
/// replay batch seen in the invocation, counting only that batch's notices and carrying
/// `replay_batch` as a property. Every document has the same `Function` dimension (the deployed
/// function's name), so a batch's notices count in the function's metrics and alarms; a batch's
/// own numbers are found in Logs Insights by the property (docs/metrics.md). `refusals` counts the
/// invocation's refused parks by reason, one document each.
pub(crate) fn emf_documents(
    function: &str,
    own: &Metrics,
    refusals: BTreeMap<&'static str, u64>,
    batches: ReplayBatches,
    now_ms: i64,
) -> Vec<Value> {
    let snapshot = own.drain();
    let mut documents = vec![snapshot.to_emf(function, now_ms)];
    documents.extend(snapshot.unlisted_jurisdiction_emf(function, now_ms));
    let batches = batches.0.into_inner().unwrap_or_else(|p| p.into_inner());
    for (batch, metrics) in batches {
        let snapshot = metrics.drain();
        documents.push(snapshot.to_emf_for_batch(function, now_ms, &batch));
        documents.extend(snapshot.unlisted_jurisdiction_emf(function, now_ms));
    }
    for (reason, count) in refusals {
        documents.push(notice_ledger::metrics::parking_refused_emf(function, now_ms, reason, count));
    }
    documents
}
