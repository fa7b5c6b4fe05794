//! The dedupe strategies under test: their names, and which of them run the real core (the
//! durable ones: `durable.rs`). How a baseline handles a job is in `run.rs`.

use super::args::{Params, SimLedger, Span};
use super::time::Ms;

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
