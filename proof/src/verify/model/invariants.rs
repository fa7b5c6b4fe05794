//! The invariants, checked on every state (and the one checked on every transition: no key moves
//! backwards).

use notice_ledger::ledger::RowState;

use super::rules::Model;
use super::state::{bit, broken, Invariant, Msg, Role, State, Violation, WITHDRAWN};
use super::trace::list;
use crate::verify::error::VerifyError;
use crate::verify::world::MAX_SENDS;

impl Model {
    /// No message of `notice` is on the queue or in a worker, and none can be enqueued but a replay.
    pub(super) fn settled(&self, s: &State, notice: u8) -> bool {
        self.quiet(s, notice)
            && self
                .slots
                .iter()
                .zip(&s.queue)
                .all(|(info, q)| info.notice != notice || info.role == Role::Replay || *q != Msg::Pending)
    }

    /// No message of `notice` is visible, in flight, parked, hidden, or in a worker.
    fn quiet(&self, s: &State, notice: u8) -> bool {
        let on_queue = self.slots.iter().zip(&s.queue).any(|(info, q)| {
            info.notice == notice
                && matches!(
                    q,
                    Msg::Visible
                        | Msg::Returned
                        | Msg::InFlight(_)
                        | Msg::Orphan
                        | Msg::Parked(_)
                        | Msg::HiddenLong
                )
        });
        let of_notice = |slot: u8| self.slots.get(usize::from(slot)).is_some_and(|i| i.notice == notice);
        let in_worker = s
            .workers
            .iter()
            .flatten()
            .any(|j| of_notice(j.slot) || j.batch.and_then(|b| b.next).is_some_and(of_notice));
        !on_queue && !in_worker
    }

    /// The key a message of `notice` naming `key` ends on, and its row: while the secret rotates,
    /// wherever the notice lives ([`Model::home`]); otherwise the message's own key (a mutant may
    /// give each delivery a key of its own).
    fn ends_on(
        &self,
        s: &State,
        notice: u8,
        key: u8,
    ) -> Result<(u8, Option<super::state::Row>), VerifyError> {
        if self.bounds.rotation {
            self.home(s, notice)
        } else {
            Ok((key, s.rows[usize::from(key)]))
        }
    }

    // ── invariants on states ──

    pub(in crate::verify) fn check(&self, s: &State) -> Result<Option<Violation>, VerifyError> {
        for notice in 0..self.bounds.notices {
            let ids: Vec<u8> = (0..MAX_SENDS as u8)
                .filter(|m| s.sends[usize::from(*m)].is_some_and(|x| x.notice == notice))
                .collect();
            let accepted = ids.len();
            let released = usize::from(s.released[usize::from(notice)]);
            let name = self.notice_name(notice);
            if accepted > 1 + released {
                return Ok(broken(
                    Invariant::OneAcceptance,
                    format!("notice {name}: {accepted} messages accepted ({}) after {released} operator release(s)", list(&ids)),
                ));
            }
            let all_seen = ids.iter().all(|m| s.sends[usize::from(*m)].is_some_and(|x| x.seen));
            let detected = ids.iter().filter(|m| s.detected & bit(**m) != 0).count();
            if accepted > 1 && all_seen && detected + 1 < accepted {
                return Ok(broken(
                    Invariant::DuplicatesDetected,
                    format!("notice {name}: {accepted} messages accepted ({}), every one's events applied, {detected} duplicate(s) detected", list(&ids)),
                ));
            }
            if s.withdraw_answers & WITHDRAWN != 0 && notice == 0 && accepted > released {
                return Ok(broken(
                    Invariant::WithdrawnNotSent,
                    format!("notice {name}: a withdraw was answered withdrawn, and {accepted} message(s) accepted ({}) after {released} operator release(s)", list(&ids)),
                ));
            }
            let mut sent_tombstone = false;
            if s.withdraw_answers & WITHDRAWN != 0 {
                for info in self.slots.iter().filter(|i| i.notice == notice && i.role == Role::Withdraw) {
                    let (_, row) = self.ends_on(s, info.notice, info.key)?;
                    sent_tombstone |= row.is_some_and(|r| r.state == RowState::Sent);
                }
            }
            if sent_tombstone && !s.paged {
                return Ok(broken(
                    Invariant::SentAfterWithdrawPaged,
                    format!("notice {name}: answered withdrawn, its row is now sent, and SentAfterWithdraw was never counted"),
                ));
            }
            if self.quiet(s, notice) {
                if let Some(v) = self.ended(s, notice)? {
                    return Ok(Some(v));
                }
            }
        }
        Ok(None)
    }

    /// Every message of a quiet notice ended sent, rejected, missed or quarantined on the reporter's view.
    fn ended(&self, s: &State, notice: u8) -> Result<Option<Violation>, VerifyError> {
        for (i, info) in self.slots.iter().enumerate() {
            if info.notice != notice || s.queue[i] != Msg::Gone {
                continue;
            }
            if info.role == Role::Withdraw {
                if s.withdraw_answers == 0 {
                    let detail = format!("{} was acked and never answered", self.slot_role(i as u8));
                    return Ok(broken(Invariant::WithdrawAnswered, detail));
                }
                continue;
            }
            let (key, row) = self.ends_on(s, info.notice, info.key)?;
            let fine = match row.map(|r| r.state) {
                Some(RowState::Sent | RowState::Rejected | RowState::Missed | RowState::Withdrawn) => true,
                Some(RowState::Claimed) => row.map_or(Ok(false), |r| self.on_quarantine_view(key, r))?,
                None => s.retired & bit(key) != 0,
                // An alias is never where a notice lives (`home` passes over it).
                Some(RowState::Released | RowState::Alias) => false,
            };
            if !fine {
                let what = row.map_or("no ledger row".to_owned(), |r| format!("its row {}", r.state));
                let detail =
                    format!("{} was acked and nothing will bring it back: {what}", self.slot_role(i as u8));
                return Ok(broken(Invariant::NoSilentEnd, detail));
            }
        }
        Ok(None)
    }
}

/// A transition that moves a row backwards: a decided row reopened or changed, an open claim taken
/// over by another token or deleted. Deleting a decided row is retention, allowed only to the TTL.
pub(super) fn backwards(before: &State, after: &State, ttl: bool, model: &Model) -> Option<Violation> {
    for (key, (b, a)) in before.rows.iter().zip(&after.rows).enumerate() {
        let (Some(b), a) = (b, a) else { continue };
        let ok = match a {
            None => ttl && b.state != RowState::Claimed,
            Some(a) => match b.state {
                RowState::Sent => a.state == RowState::Sent && a.message == b.message,
                RowState::Rejected | RowState::Missed | RowState::Withdrawn => {
                    a.state == b.state || a.state == RowState::Sent
                }
                RowState::Claimed => a.state != RowState::Claimed || a.token == b.token,
                RowState::Released => true,
                // A key-rotation marker never moves (and nothing but the TTL deletes it).
                RowState::Alias => a.state == RowState::Alias,
            },
        };
        if !ok {
            let to = a.map_or("no row".to_owned(), |a| match (a.state, a.token) {
                (RowState::Claimed, Some(t)) => format!("claimed t{t}"),
                (state, _) => state.to_string(),
            });
            let from = match (b.state, b.token) {
                (RowState::Claimed, Some(t)) => format!("claimed t{t}"),
                (state, _) => state.to_string(),
            };
            return broken(
                Invariant::NeverBackwards,
                format!("{} moved {from} → {to}", model.key_name(key as u8)),
            );
        }
    }
    None
}
