//! Symmetry reduction: interchangeable workers and interchangeable duplicate messages are kept in
//! one canonical order, so the search visits each state once whatever their names.

use super::rules::Model;
use super::state::{Batch, Job, Msg, State};
use crate::verify::world::{MAX_SLOTS, MAX_WORKERS};

impl Model {
    /// Duplicates of one notice are interchangeable: sort each group by what happens to it (its
    /// queue state and the jobs holding it), and renumber the jobs. Returns where each message went.
    pub(super) fn canonical_messages(&self, s: &mut State) -> [u8; MAX_SLOTS] {
        let mut moved: [u8; MAX_SLOTS] = std::array::from_fn(|i| i as u8);
        for group in &self.twins {
            let signature = |i: usize| {
                let kind = match s.queue[i] {
                    Msg::Pending => 0usize,
                    Msg::Visible => 1,
                    Msg::Returned => 6,
                    Msg::InFlight(_) => 2,
                    Msg::Orphan => 3,
                    Msg::Gone => 4,
                    Msg::DeadLetter => 5,
                    // Parked under its schedule's key: two schedules are not interchangeable.
                    Msg::Parked(key) => 8 + usize::from(key),
                    Msg::HiddenLong => 7,
                };
                // The jobs holding it: running it, or holding it as their batch's next record.
                let holds = |j: &Job| {
                    usize::from(j.slot) == i
                        || j.batch.and_then(|b| b.next).is_some_and(|n| usize::from(n) == i)
                };
                let mut jobs = s.workers.map(|j| {
                    j.filter(holds).map(|j| {
                        let runs = usize::from(j.slot) == i;
                        let batch = j.batch.map(|b| Batch { next: b.next.map(|_| 0), ..b });
                        (runs, Job { slot: 0, batch, ..j })
                    })
                });
                jobs.sort();
                (kind, jobs)
            };
            let mut order = group.clone();
            order.sort_by_key(|&i| signature(i));
            if order == *group {
                continue;
            }
            let old = s.queue;
            for (&to, &from) in group.iter().zip(&order) {
                s.queue[to] = old[from];
                moved[from] = to as u8;
            }
            for job in s.workers.iter_mut().flatten() {
                job.slot = moved[usize::from(job.slot)];
                if let Some(next) = job.batch.as_mut().and_then(|b| b.next.as_mut()) {
                    *next = moved[usize::from(*next)];
                }
            }
        }
        moved
    }
}

/// Workers are interchangeable: sort them, and renumber the messages they hold. Returns where each
/// worker went (for traces, which keep calling a worker by one name).
pub(super) fn canonical(s: &mut State, workers: usize) -> [u8; MAX_WORKERS] {
    let mut renumber = [0, 1, 2];
    let mut all: [usize; MAX_WORKERS] = std::array::from_fn(|i| i);
    let order = &mut all[..workers.min(MAX_WORKERS)];
    order.sort_by_key(|&i| s.workers[i]);
    if order.iter().enumerate().all(|(new, old)| new == *old) {
        return renumber;
    }
    let old = s.workers;
    for (new, &i) in order.iter().enumerate() {
        s.workers[new] = old[i];
        renumber[i] = new as u8;
    }
    for q in s.queue.iter_mut() {
        if let Msg::InFlight(w) = q {
            *q = Msg::InFlight(renumber[usize::from(*w)]);
        }
    }
    renumber
}
