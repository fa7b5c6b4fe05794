//! A worker takes a message: alone, or on the batch path in a batch with another; while the key
//! secret rotates, as a worker holding either version.

use crate::verify::error::VerifyError;
use crate::verify::model::rules::Model;
use crate::verify::model::state::{Batch, Job, Label, Msg, Role, State, Succ};
use crate::verify::world::{Answers, MAX_BATCH};

impl Model {
    /// Worker `w` receives message `i` — alone, or in a batch with `next`, which runs after it.
    pub(super) fn receive(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        i: usize,
        next: Option<usize>,
    ) -> Result<(), VerifyError> {
        // A worker holds one version of the key secret: the message's own sender, or while the
        // secret rotates either version — a fleet mid-switch, in any mix, for the whole run.
        let variants: &[u8] = if self.bounds.rotation { &[0, 1] } else { &[self.slots[i].variant] };
        for &variant in variants {
            self.receive_as(out, s, w, i, next, variant)?;
        }
        Ok(())
    }

    /// [`Model::receive`] by a worker running sender `variant`.
    fn receive_as(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        i: usize,
        next: Option<usize>,
        variant: u8,
    ) -> Result<(), VerifyError> {
        let mut n = s.clone();
        n.queue[i] = Msg::InFlight(w as u8);
        let again = s.queue[i] == Msg::Returned;
        let batch = if usize::from(self.bounds.batch) >= MAX_BATCH {
            let mate = match next {
                Some(j) => {
                    n.queue[j] = Msg::InFlight(w as u8);
                    Some(self.body_code(j as u8)?)
                }
                None => None,
            };
            let mate_again = next.is_some_and(|j| s.queue[j] == Msg::Returned);
            let next = next.map(|j| j as u8);
            Some(Batch { next, mate, mate_again, answers: Answers::default(), read: 0, decided: 0 })
        } else {
            None
        };
        let job = Job {
            slot: i as u8,
            variant,
            now: s.phase,
            token: None,
            answers: Answers::default(),
            again,
            acked: false,
            read_decided: None,
            batch,
        };
        n.workers[w] = Some(job);
        let label = Label::Receive {
            worker: w as u8,
            slot: i as u8,
            next: next.map(|j| j as u8),
            now: s.phase,
            variant,
        };
        self.push(out, s, label, n, None, false);
        Ok(())
    }

    /// What a message received before becomes when it is visible again: [`Msg::Returned`] on the
    /// batch path, where the worker reads a redelivery's row first and leaves a first delivery to
    /// its claim; without it a record always reads its own row, so the two are one state (and the
    /// worlds without batches keep their counts).
    pub(super) fn visible_again(&self) -> Msg {
        if usize::from(self.bounds.batch) >= MAX_BATCH {
            Msg::Returned
        } else {
            Msg::Visible
        }
    }

    /// The body message `slot` carries, as [`Batch::mate`] names it.
    fn body_code(&self, slot: u8) -> Result<u8, VerifyError> {
        let info = self.slot(slot)?;
        Ok(Batch::body_code(info.notice, info.role == Role::Withdraw))
    }

    /// What worker runs after `job` ends: its batch's next record, with the batch's prefetch
    /// (`None`: the worker is idle).
    pub(super) fn next_record(&self, job: Job) -> Result<Option<Job>, VerifyError> {
        let Some(batch) = job.batch else { return Ok(None) };
        let Some(next) = batch.next else { return Ok(None) };
        // The next record was this one's mate: it takes the mate's receive, and this one becomes its mate.
        let again = batch.mate_again;
        let batch =
            Batch { next: None, mate: Some(self.body_code(job.slot)?), mate_again: job.again, ..batch };
        Ok(Some(Job {
            slot: next,
            variant: job.variant,
            now: job.now,
            token: None,
            answers: Answers::default(),
            again,
            acked: false,
            read_decided: None,
            batch: Some(batch),
        }))
    }
}
