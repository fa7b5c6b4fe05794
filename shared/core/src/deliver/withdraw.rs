//! A withdraw: the other door of a notice's key. One conditional write of a `withdrawn` tombstone
//! where a claim could be written; what stands there instead decides the answer (see the module
//! above for why claim and tombstone exclude each other).

use chrono::{DateTime, Utc};
use tracing::{error, info, warn};

use super::{NoticeSender, Outcome, Placement, ALIAS_WAIT};
use crate::job::Withdrawal;
use crate::ledger::rules::{withdraw_answer, WithdrawAnswer};
use crate::ledger::{ClaimLedger, Origin, RowState, WithdrawRequest};
use crate::metrics::Metrics;

impl NoticeSender {
    /// The tombstone's one conditional write under `placed`, or why there is none.
    pub(super) async fn withdraw_key(
        &self,
        withdrawal: &Withdrawal,
        placed: &Placement,
        now: DateTime<Utc>,
        m: &Metrics,
    ) -> Outcome {
        let req = WithdrawRequest::new(withdrawal, placed.key.clone(), Origin::Worker, "producer", now)
            .with_aliases(placed.aliases.clone());
        let held = match self.ledger.withdraw(&req).await {
            Ok(None) => {
                Metrics::incr(&m.withdrawn);
                info!("withdrawn: tombstone written; no copy of this notice will be sent");
                return Outcome::Withdrawn { already: false };
            }
            Ok(Some(row)) => row,
            Err(e) => {
                Metrics::incr(&m.ledger_errors);
                error!(error = %e, "withdraw failed: retried");
                return Outcome::LedgerUnavailable(e.to_string());
            }
        };
        match withdraw_answer(Some(&held)) {
            WithdrawAnswer::AlreadyWithdrawn => {
                info!("already withdrawn");
                Outcome::Withdrawn { already: true }
            }
            WithdrawAnswer::NeverSent => {
                info!(state = %held.state, "nothing to withdraw: the notice was never sent and never will be");
                Outcome::WithdrawNotNeeded { state: held.state }
            }
            WithdrawAnswer::Elsewhere => {
                let until = now + ALIAS_WAIT;
                info!(until = %until, "the notice lives under a newer secret version's key this sender does not hold yet: back after its key refresh");
                Outcome::InFlight { until, withdraw: true }
            }
            WithdrawAnswer::TooLate => {
                if let Err(outcome) = self.watch(&held, m).await {
                    return outcome;
                }
                if let Some(until) = self.in_flight_until(&held, now) {
                    // The queue policy hides a withdraw's wait and never parks it (see `queue.rs`).
                    info!(until = %until, "withdraw meets a claim that may still be in flight: back when its sender is done");
                    return Outcome::InFlight { until, withdraw: true };
                }
                Metrics::incr(&m.withdraw_too_late);
                warn!(state = %held.state, since = %held.updated_at, "withdraw too late: the notice went out or may have");
                Outcome::WithdrawTooLate { state: held.state, at: held.updated_at }
            }
            // The ledger refused a write its own rule permits: a ledger fault, retried.
            // Only the alias can refuse a withdraw over a released row (see `placed_stale`).
            WithdrawAnswer::Withdraw if held.state == RowState::Released => self.placed_stale(now, true),
            WithdrawAnswer::Withdraw => {
                Metrics::incr(&m.ledger_errors);
                error!(state = %held.state, "ledger refused a withdraw its row permits");
                Outcome::LedgerUnavailable(format!("ledger refused a withdraw over a {} row", held.state))
            }
        }
    }
}
