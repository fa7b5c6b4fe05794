//! The intake's CloudWatch metrics: one EMF document per invocation (docs/metrics.md).

use serde_json::{json, Value};

/// What one invocation did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Send jobs enqueued.
    pub jobs: u64,
    /// Withdraws enqueued.
    pub withdraws: u64,
    /// Signed events that became nothing (unmapped, or nothing left to do).
    pub ignored: u64,
    /// Requests that can never succeed: a signed event without a field the job needs, a body
    /// that is not JSON, not a POST, too large.
    pub refused: u64,
    /// Missing, malformed, unmatched or expired signatures (alarmed: a misconfigured secret, or
    /// someone knocking).
    pub signature_rejected: u64,
    /// The ledger, its key check or the queue failed (alarmed; the billing system retries).
    pub failed: u64,
}

impl Tally {
    pub fn to_emf(&self, function: &str, now_ms: i64) -> Value {
        notice_ledger::metrics::emf_document(
            function,
            now_ms,
            [
                ("IntakeJobsEnqueued", "Count", json!(self.jobs)),
                ("IntakeWithdrawsEnqueued", "Count", json!(self.withdraws)),
                ("IntakeIgnored", "Count", json!(self.ignored)),
                ("IntakeRefused", "Count", json!(self.refused)),
                ("IntakeSignatureRejected", "Count", json!(self.signature_rejected)),
                ("IntakeFailed", "Count", json!(self.failed)),
            ],
        )
    }
}
