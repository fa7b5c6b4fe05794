//! The dedupe strategies under test, and the baselines' side of a job (the durable ones run the
//! real core: `durable.rs`).

use notice_ledger::ledger::RowState;
use notice_ledger::mailer::{NotAccepted, SendResult};
use notice_ledger::{Outcome, WindowDecision};

use super::args::{Params, SimLedger, Span};
use super::run::Run;
use super::trace::Crash;
use super::Ms;

/// One dedupe strategy under test. Both durable ones run the real core: `DurableLedger` waits for
/// a window on the queue in hops of at most 12 h, `DurableLedgerParking` parks longer waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Strategy {
    None,
    InProcessCache,
    BrokerDedup { window: Ms },
    SharedCache { ttl: Ms },
    DurableLedger,
    DurableLedgerParking,
}

impl Strategy {
    pub(super) fn name(self, ledger: SimLedger) -> String {
        match self {
            Strategy::None => "none".into(),
            Strategy::InProcessCache => "in-process cache".into(),
            Strategy::BrokerDedup { window } => format!("broker dedup id ({})", Span(window)),
            Strategy::SharedCache { ttl } => format!("shared cache claim (TTL {})", Span(ttl)),
            Strategy::DurableLedger => format!("durable ledger ({})", ledger.name()),
            Strategy::DurableLedgerParking => format!("durable ledger, parking ({})", ledger.name()),
        }
    }

    /// Whether long waits park (the shipped default) instead of hopping on the queue.
    pub(super) fn parks(self) -> bool {
        matches!(self, Strategy::DurableLedgerParking)
    }

    pub(super) fn durable(self) -> bool {
        matches!(self, Strategy::DurableLedger | Strategy::DurableLedgerParking)
    }

    /// Every strategy the parameters ask for, in table order.
    pub(super) fn all(p: &Params) -> Vec<Strategy> {
        let mut all = vec![
            Strategy::None,
            Strategy::InProcessCache,
            Strategy::BrokerDedup { window: p.dedup_window_ms },
        ];
        all.extend(p.ttls_ms.iter().map(|&ttl| Strategy::SharedCache { ttl }));
        all.extend([Strategy::DurableLedger, Strategy::DurableLedgerParking]);
        all
    }
}

// ── Baselines: the same window policy and queue policy, a different dedupe ──

/// A cache's "already sent": acked like the ledger's suppression.
const CACHED: Outcome = Outcome::Suppressed { state: RowState::Sent };

impl Run<'_> {
    pub(super) fn baseline_start(&mut self, id: usize) {
        let Some(job) = self.jobs.get(&id) else { return };
        let (notice, instance, fate) = (job.notice, job.instance, job.fate);
        match self.trace.policy.decide(&self.trace.notices[notice].job, self.trace.at(self.now)) {
            WindowDecision::Send { .. } => {}
            WindowDecision::Defer { until, closes_at } => {
                return self.finish(id, &Outcome::Deferred { until, closes_at }, None)
            }
            WindowDecision::Missed { closed_at } => {
                self.missed[notice] = true;
                return self.finish(id, &Outcome::Missed { closed_at }, None);
            }
        }
        match self.strategy {
            Strategy::InProcessCache if self.instances[instance].sent.contains(&notice) => {
                self.c.suppressed_by_cache += 1;
                return self.finish(id, &CACHED, None);
            }
            Strategy::SharedCache { ttl } => {
                if self.shared.get(&notice).is_some_and(|&expiry| expiry > self.now) {
                    self.c.suppressed_by_cache += 1;
                    return self.finish(id, &CACHED, None);
                }
                self.shared.insert(notice, self.now + ttl);
            }
            _ => {}
        }
        if fate.crash == Some(Crash::AfterClaimBeforeSend) {
            self.crash(instance);
            return;
        }
        self.issue_send(id);
    }

    /// The worker heard back: a cache remembers what was sent; a failed send releases its claim.
    pub(super) fn baseline_done(&mut self, id: usize, answer: SendResult) {
        let Some(job) = self.jobs.get(&id) else { return };
        let (instance, notice) = (job.instance, job.notice);
        if matches!(answer, SendResult::Accepted { .. }) {
            match self.strategy {
                Strategy::InProcessCache => {
                    self.instances[instance].sent.insert(notice);
                }
                Strategy::SharedCache { ttl } => {
                    self.shared.insert(notice, self.now + ttl);
                }
                _ => {}
            }
            self.finish(id, &Outcome::Sent { message_id: format!("sim-{id}") }, None);
        } else {
            if let Strategy::SharedCache { .. } = self.strategy {
                self.shared.remove(&notice); // release the claim so a retry may send
            }
            // A baseline cannot tell "not accepted" from "unknown": it releases and retries.
            let released = Outcome::Released { class: NotAccepted::Throttled, reason: format!("{answer:?}") };
            self.finish(id, &released, None);
        }
    }
}
