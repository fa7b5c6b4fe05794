//! The end of a job: the sender's outcome, acted on by the queue action it gives, and the
//! invariants that judge that end (no claim left behind, no silent end, no ack before the commit).

use notice_ledger::ledger::RowState;

use crate::verify::error::VerifyError;
use crate::verify::model::rules::Model;
use crate::verify::model::state::{
    broken, Invariant, Job, Label, Msg, State, Succ, Violation, NOT_NEEDED, TOO_LATE, WITHDRAWN,
};
use crate::verify::world::QueueAction;

impl Model {
    /// The queue action a finished job takes: the one `QueuePolicy::action` gave its outcome, as
    /// the mutants and the world's bounds change it.
    pub(super) fn queue_action(&self, job: Job, outcome: &'static str, queue: QueueAction) -> QueueAction {
        // A job holding a claim ends `ledger_unavailable` only when its release failed.
        let failed_release = outcome == "ledger_unavailable" && job.token.is_some();
        if (outcome == "in_flight" && self.rules.acks_held_in_flight())
            || (failed_release && self.rules.acks_failed_release())
        {
            QueueAction::Ack
        } else if queue == QueueAction::Park && !self.bounds.parking {
            // The world before parking was modelled: a park simply comes back.
            QueueAction::Retry
        } else if queue == QueueAction::Park && self.rules.hides_long_waits() {
            QueueAction::HideLong
        } else {
            queue
        }
    }

    /// Worker `w`'s sender has finished `job` with `outcome`: the queue acts on its message by
    /// `queue`, and the worker goes on with its batch's next record, if any.
    pub(super) fn finish(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        job: Job,
        (outcome, key): (&'static str, Option<u8>),
        queue: QueueAction,
    ) -> Result<(), VerifyError> {
        let slot = usize::from(job.slot);
        let current = s.queue[slot] == Msg::InFlight(w as u8);
        let mut n = s.clone();
        // The worker goes on with its batch's next record, if any, with the same prefetch.
        n.workers[w] = self.next_record(job)?;
        n.withdraw_answers |= match outcome {
            "withdrawn" => WITHDRAWN,
            "withdraw_too_late" => TOO_LATE,
            "withdraw_not_needed" => NOT_NEEDED,
            _ => 0,
        };
        let label = |effect| Label::Finish { worker: w as u8, slot: job.slot, outcome, queue, effect };
        if let Some(v) = self.left_claim(s, job)? {
            // The job's own claim outlives it although it got no token.
            self.push(out, s, label("its claim left behind"), n, Some(v), false);
            return Ok(());
        }
        match queue {
            QueueAction::Ack if job.acked => self.push(out, s, label("already deleted"), n, None, false),
            QueueAction::Ack if current => {
                n.queue[slot] = Msg::Gone;
                self.push(out, s, label("deleted"), n, None, false);
            }
            QueueAction::Ack => {
                let gone = matches!(s.queue[slot], Msg::Gone | Msg::DeadLetter);
                if self.bounds.stale_deletes && !gone {
                    let mut deleted = n.clone();
                    deleted.queue[slot] = Msg::Gone;
                    self.push(out, s, label("stale receipt, deleted anyway"), deleted, None, false);
                }
                self.push(out, s, label("stale receipt, not deleted"), n, None, false);
            }
            QueueAction::Retry if current => {
                n.queue[slot] = self.visible_again();
                self.push(out, s, label("visible again"), n, None, false);
            }
            QueueAction::Retry => self.push(out, s, label("stale receipt, ignored"), n, None, false),
            QueueAction::Park if current => {
                let effect = self.park(s, job, key, &mut n)?;
                self.push(out, s, label(effect), n, None, false);
            }
            QueueAction::HideLong if current => {
                n.queue[slot] = Msg::HiddenLong;
                self.push(out, s, label("hidden past the queue's bound"), n, None, false);
            }
            QueueAction::Park | QueueAction::HideLong => {
                self.push(out, s, label("stale receipt, ignored"), n, None, false)
            }
            QueueAction::DeadLetter => {
                if current {
                    n.queue[slot] = Msg::DeadLetter;
                }
                let v = broken(
                    Invariant::NoSilentEnd,
                    format!("{} was dead-lettered ({outcome})", self.slot_role(job.slot)),
                );
                self.push(out, s, label("dead-lettered"), n, v, false);
            }
        }
        Ok(())
    }

    /// Where a park puts the message (in `n`), and the effect in words. One schedule per key,
    /// named by the key the sender reported: a second park finds it ("already parked") and acks
    /// its copy only while that schedule has not fired.
    fn park(&self, s: &State, job: Job, key: Option<u8>, n: &mut State) -> Result<&'static str, VerifyError> {
        let slot = usize::from(job.slot);
        let key = key.unwrap_or(self.slot(job.slot)?.key);
        let scheduled = (0..self.slots.len()).any(|i| i != slot && s.queue[i] == Msg::Parked(key));
        if scheduled {
            n.queue[slot] = Msg::Gone;
            Ok("already parked: deleted")
        } else {
            n.queue[slot] = Msg::Parked(key);
            Ok("parked: off the queue until its schedule fires")
        }
    }

    /// A job that got no token (limited, or the take failed) and ends with its own claim still on
    /// the key.
    fn left_claim(&self, s: &State, job: Job) -> Result<Option<Violation>, VerifyError> {
        let (Some(t), true) = (job.token, job.answers.without_token()) else { return Ok(None) };
        // Tokens are unique: the key holding claim `t` is the job's (whichever version it was).
        let Some(key) = (0..s.rows.len())
            .find(|&k| s.rows[k].is_some_and(|r| r.state == RowState::Claimed && r.token == Some(t)))
        else {
            return Ok(None);
        };
        let key = key as u8;
        Ok(broken(
            Invariant::LimitedLeavesNoClaim,
            format!(
                "{} got no token and ends with its claim t{t} still on {}",
                self.slot_role(job.slot),
                self.key_name(key)
            ),
        ))
    }

    /// The ack-before-commit mutant: the message deleted while the job still has its send
    /// result to commit.
    pub(super) fn early_ack(&self, out: &mut Vec<Succ>, s: &State, w: usize, job: Job) {
        let slot = usize::from(job.slot);
        let mut n = s.clone();
        if n.queue[slot] == Msg::InFlight(w as u8) {
            n.queue[slot] = Msg::Gone;
        }
        if let Some(j) = n.workers[w].as_mut() {
            j.acked = true;
        }
        let v = broken(
            Invariant::AckAfterDurable,
            format!(
                "{} was acked while its job still had the commit of its send result to write",
                self.slot_role(job.slot)
            ),
        );
        self.push(out, s, Label::EarlyAck { worker: w as u8, slot: job.slot }, n, v, false);
    }
}
