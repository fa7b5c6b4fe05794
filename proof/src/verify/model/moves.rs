//! The transitions: every way the world can move on from a state.
//!
//! This file holds the world's own moves (the clock, the queue) and the shape of one worker's
//! turn; the files under `moves/` hold what each part of that turn can do: `receive` (a worker
//! takes a message, alone or in a batch), `calls` (the sender's next port call, answered every way
//! it can be), `batch` (a batch's one read and one token take), `answers` (what the ledger and the
//! provider can answer) and `finish` (the sender's outcome acted on by the queue).

mod answers;
mod batch;
mod calls;
mod finish;
mod receive;

use super::invariants::backwards;
use super::rules::Model;
use super::state::{Batch, Label, Msg, Role, State, Succ, Violation};
use super::symmetry::canonical;
use crate::verify::error::VerifyError;
use crate::verify::sender::BatchCtx;
use crate::verify::world::{Phase, Step, MAX_BATCH};

impl Model {
    // ── successors ──

    pub(in crate::verify) fn successors(
        &mut self,
        s: &State,
        out: &mut Vec<Succ>,
    ) -> Result<(), VerifyError> {
        out.clear();
        self.arrivals(out, s);
        self.queue_moves(out, s)?;
        for w in 0..usize::from(self.bounds.workers) {
            self.worker_moves(out, s, w)?;
        }
        self.events(out, s)?;
        self.operator(out, s)?;
        self.ttl(out, s)?;
        Ok(())
    }

    /// What comes from outside the workers: the clock moving on, a further message of a notice,
    /// the producer's withdraw.
    fn arrivals(&self, out: &mut Vec<Succ>, s: &State) {
        let n_slots = self.slots.len();
        if let Some(phase) = s.phase.next() {
            let mut n = s.clone();
            n.phase = phase;
            self.push(out, s, Label::Tick(phase), n, None, false);
        }
        // Further messages of a notice are interchangeable: only the first pending one is enqueued.
        for notice in 0..self.bounds.notices {
            let next = (0..n_slots).find(|&i| {
                let info = self.slots[i];
                info.notice == notice && info.role == Role::Extra && s.queue[i] == Msg::Pending
            });
            if let Some(i) = next {
                let mut n = s.clone();
                n.queue[i] = Msg::Visible;
                self.push(out, s, Label::Enqueue { slot: i as u8 }, n, None, false);
            }
        }
        // The producer's withdraw, whenever it comes.
        for i in 0..n_slots {
            if self.slots[i].role == Role::Withdraw && s.queue[i] == Msg::Pending {
                let mut n = s.clone();
                n.queue[i] = Msg::Visible;
                self.push(out, s, Label::Enqueue { slot: i as u8 }, n, None, false);
            }
        }
    }

    /// What each message on the queue can do: be received by an idle worker, become visible
    /// again (its visibility expired, its schedule fired), or be dropped before it comes back.
    fn queue_moves(&self, out: &mut Vec<Succ>, s: &State) -> Result<(), VerifyError> {
        let n_slots = self.slots.len();
        // Idle workers are interchangeable: the first one receives.
        let idle = (0..usize::from(self.bounds.workers)).find(|&w| s.workers[w].is_none());
        for i in 0..n_slots {
            match s.queue[i] {
                Msg::Visible | Msg::Returned => {
                    if let Some(w) = idle {
                        self.receive(out, s, w, i, None)?;
                        // With the batch path, the same receive may bring any other visible message
                        // along, the two records run in either order after the batch's prefetch.
                        if usize::from(self.bounds.batch) >= MAX_BATCH {
                            let visible = |q: Msg| matches!(q, Msg::Visible | Msg::Returned);
                            for j in (0..n_slots).filter(|&j| j != i && visible(s.queue[j])) {
                                // A mutant's per-delivery keys give each message its own sender:
                                // a batch is one sender's.
                                if self.slots[j].variant == self.slots[i].variant {
                                    self.receive(out, s, w, i, Some(j))?;
                                }
                            }
                        }
                    }
                }
                Msg::InFlight(_) if !self.bounds.in_flight_redelivery => {}
                Msg::InFlight(_) | Msg::Orphan => {
                    let mut n = s.clone();
                    n.queue[i] = self.visible_again();
                    self.push(out, s, Label::Expire { slot: i as u8 }, n, None, false);
                }
                // A schedule fires when the window may be open (a park's wake-up is never before
                // it); the model's coarse clock has nothing finer.
                Msg::Parked(_) | Msg::HiddenLong if s.phase != Phase::Early => {
                    let mut n = s.clone();
                    // A schedule sends a new message; a hidden one is the same message again.
                    n.queue[i] = if matches!(s.queue[i], Msg::Parked(_)) {
                        Msg::Visible
                    } else {
                        self.visible_again()
                    };
                    self.push(out, s, Label::Wake { slot: i as u8 }, n, None, false);
                }
                Msg::Parked(_) | Msg::HiddenLong => {}
                Msg::Pending | Msg::Gone | Msg::DeadLetter => {}
            }
            let drop = match s.queue[i] {
                Msg::Parked(_) if self.rules.park_expires() => Some("the schedule's TTL expired"),
                Msg::HiddenLong => Some("the queue's retention ran out while it was hidden"),
                _ => None,
            };
            if let Some(why) = drop {
                let mut n = s.clone();
                n.queue[i] = Msg::Gone;
                self.push(out, s, Label::Drop { slot: i as u8, why }, n, None, false);
            }
        }
        Ok(())
    }

    /// What worker `w`, if it has a job, can do: crash, or take the real sender's next step — a
    /// port call, or once the sender has finished, the queue action its outcome gives.
    fn worker_moves(&mut self, out: &mut Vec<Succ>, s: &State, w: usize) -> Result<(), VerifyError> {
        let Some(job) = s.workers[w] else { return Ok(()) };
        let info = self.slot(job.slot)?;
        let withdraw = info.role == Role::Withdraw;
        let batch = job.batch.map(|b| BatchCtx {
            mate: b.mate.map(Batch::body),
            mate_again: b.mate_again,
            answers: b.answers,
        });
        let step =
            self.core.step(job.variant, (info.notice, withdraw), job.again, job.now, job.answers, batch)?;
        // A crash between any two steps: the job is gone, its message (and its batch's record
        // still to run) comes back by visibility.
        let mut n = s.clone();
        n.workers[w] = None;
        for slot in std::iter::once(job.slot).chain(job.batch.and_then(|b| b.next)) {
            if n.queue[usize::from(slot)] == Msg::InFlight(w as u8) {
                n.queue[usize::from(slot)] = Msg::Orphan;
            }
        }
        self.push(out, s, Label::Crash { worker: w as u8, before: step.name() }, n, None, false);
        match step {
            Step::Done { outcome, queue, key } => {
                let queue = self.queue_action(job, outcome, queue);
                self.finish(out, s, w, job, (outcome, key), queue)
            }
            _ => {
                if self.rules.acks_before_commit() && step.is_post_send_write() && !job.acked {
                    self.early_ack(out, s, w, job);
                }
                self.call(out, s, w, job, info, step)
            }
        }
    }

    /// Canonical form (workers sorted), the backwards check, and the successor itself.
    pub(super) fn push(
        &self,
        out: &mut Vec<Succ>,
        before: &State,
        label: Label,
        mut next: State,
        broken: Option<Violation>,
        ttl: bool,
    ) {
        let broken = broken.or_else(|| backwards(before, &next, ttl, self));
        let moved = self.canonical_messages(&mut next);
        let renumbered = canonical(&mut next, usize::from(self.bounds.workers));
        out.push(Succ { label, next, broken, renumbered, moved });
    }
}
