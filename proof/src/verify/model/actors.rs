//! The world's other actors: the reconciler applying provider events, the operator releasing an
//! open claim (and replaying the notice), and the ledger's TTL.

use notice_ledger::ledger::rules::Verdict;
use notice_ledger::ledger::{Origin, RowState};

use super::rules::{Model, Probe};
use super::state::{bit, Label, Msg, Role, State, Succ};
use crate::verify::error::VerifyError;
use crate::verify::world::EVENTS;

impl Model {
    /// The reconciler applying one provider event, through the real evidence rules.
    pub(super) fn events(&self, out: &mut Vec<Succ>, s: &State) -> Result<(), VerifyError> {
        for (m, sent) in s.sends.iter().enumerate() {
            let Some(sent) = sent else { continue };
            // After the retention period every event that will ever come has come.
            if s.retired & bit(sent.key) != 0 {
                continue;
            }
            let m = m as u8;
            for e in 0..EVENTS.len() as u8 {
                let applied = self.apply_event(sent.key, s.rows[usize::from(sent.key)], m, e)?;
                let mut n = s.clone();
                n.rows[usize::from(sent.key)] = Some(applied.row);
                if let Some(x) = n.sends[usize::from(m)].as_mut() {
                    x.seen = true;
                }
                if let Some(d) = applied.duplicate {
                    n.detected |= bit(d);
                }
                n.paged |= applied.effect == "SentAfterWithdraw";
                let name = applied.effect;
                // Only these moved: comparing them is cheaper than comparing the states.
                let k = usize::from(sent.key);
                let changed = n.rows[k] != s.rows[k]
                    || n.sends[usize::from(m)] != s.sends[usize::from(m)]
                    || n.detected != s.detected
                    || n.paged != s.paged;
                if changed {
                    self.push(out, s, Label::Event { message: m, event: e, effect: name }, n, None, false);
                }
            }
        }
        Ok(())
    }

    /// An operator's audited release of an open claim, and the replay that follows it.
    pub(super) fn operator(&self, out: &mut Vec<Succ>, s: &State) -> Result<(), VerifyError> {
        let used: u8 = s.released.iter().sum();
        if used >= self.bounds.releases {
            return Ok(());
        }
        for key in 0..self.key_notice.len() as u8 {
            let Some(mut row) = s.rows[usize::from(key)] else { continue };
            if self.verdict(key, Some(row), Probe::Operator)? != Verdict::Apply {
                continue;
            }
            let notice = self.notice_of_key(key)?;
            let mut n = s.clone();
            row.state = RowState::Released;
            row.origin = Origin::ALL.iter().position(|o| *o == Origin::Operator).unwrap_or(0) as u8;
            n.rows[usize::from(key)] = Some(row);
            n.released[usize::from(notice)] += 1;
            let replay = (0..self.slots.len()).find(|&i| {
                self.slots[i].notice == notice
                    && self.slots[i].role == Role::Replay
                    && s.queue[i] == Msg::Pending
            });
            if let Some(i) = replay {
                n.queue[i] = Msg::Visible;
            }
            self.push(
                out,
                s,
                Label::OperatorRelease { key, replay: replay.map(|i| i as u8) },
                n,
                None,
                false,
            );
        }
        Ok(())
    }

    /// The ledger's TTL, once a notice is settled (no message of it can come back: in the real
    /// system the retention period is a year, the queue's 14 days).
    pub(super) fn ttl(&self, out: &mut Vec<Succ>, s: &State) -> Result<(), VerifyError> {
        for key in 0..self.key_notice.len() as u8 {
            let Some(row) = s.rows[usize::from(key)] else { continue };
            if !self.rules.expires(row.state) || !self.settled(s, self.notice_of_key(key)?) {
                continue;
            }
            let mut n = s.clone();
            n.rows[usize::from(key)] = None;
            if matches!(
                row.state,
                RowState::Sent | RowState::Rejected | RowState::Missed | RowState::Withdrawn
            ) {
                n.retired |= bit(key);
            }
            self.push(out, s, Label::Ttl { key, state: row.state }, n, None, true);
        }
        Ok(())
    }
}
