//! The queue and the workers: SQS-like messages (visibility, receipts, retention, redrive) and
//! the instances that take them.

use std::collections::{BTreeSet, HashSet};

use super::durable::DeliveryFuture;
use super::run::Run;
use super::strategies::Strategy;
use super::trace::Fate;
use super::Ms;

/// What happens next in simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Ev {
    /// The trace's enqueue number `idx` happens.
    Enqueue { idx: usize },
    /// The message's visibility timer (generation `gen`) ran out.
    Visible { msg: usize, gen: u64 },
    /// The broker delivers the message a second time, spuriously.
    Ghost { msg: usize },
    /// The worker hears back from the provider (or gives up waiting).
    SendDone { job: usize },
    /// The provider accepted a copy: the customer will receive it.
    Accepted { notice: usize },
    /// Every worker dies at once.
    Redeploy,
    /// The notice's one-time schedule puts its job back on the queue and deletes itself.
    Unpark { notice: usize },
}

/// A message the consumers may take, oldest first: its visibility timer ran out, or the broker
/// delivers it a second time.
#[derive(Clone, Copy, Debug)]
pub(super) enum Ready {
    Visible { msg: usize, gen: u64 },
    Ghost { msg: usize },
}

/// One message on the queue.
pub(super) struct Message {
    /// Keys the per-receive chaos: the trace's enqueue index, or an index past the trace for a
    /// schedule's re-enqueue.
    pub(super) chaos: usize,
    pub(super) notice: usize,
    /// First enqueue plus retention: the queue (and its dead-letter queue) drops it then.
    expires_at: Ms,
    pub(super) receives: u32,
    pub(super) gen: u64,
    /// Off the queue: deleted, dead-lettered or expired.
    pub(super) deleted: bool,
}

/// A worker instance: its jobs in flight and its in-process cache, both lost when it dies.
pub(super) struct Instance {
    pub(super) jobs: BTreeSet<usize>,
    /// In-process cache: notices this instance sent since it started.
    pub(super) sent: HashSet<usize>,
}

/// One receive being worked on; `future` holds the durable strategies' suspended delivery.
pub(super) struct JobRun {
    pub(super) msg: usize,
    pub(super) receipt: u32,
    pub(super) notice: usize,
    pub(super) instance: usize,
    pub(super) fate: Fate,
    pub(super) future: Option<DeliveryFuture>,
}

impl Run<'_> {
    pub(super) fn enqueue(&mut self, idx: usize) {
        let (_, notice, _) = self.trace.enqueues[idx];
        if let Strategy::BrokerDedup { window } = self.strategy {
            if self.dedup_ids.get(&notice).is_some_and(|&first| self.now - first < window) {
                self.c.broker_dropped_enqueues += 1;
                return;
            }
            self.dedup_ids.insert(notice, self.now);
        }
        self.push_message(idx, notice);
    }

    pub(super) fn push_message(&mut self, chaos: usize, notice: usize) {
        let msg = self.messages.len();
        let expires_at = self.now.saturating_add(self.p.retention_ms);
        self.messages.push(Message { chaos, notice, expires_at, receives: 0, gen: 0, deleted: false });
        self.ready.push_back(Ready::Visible { msg, gen: 0 });
    }

    /// SQS's limits, applied when a message would be received: retention, then the redrive policy.
    /// Returns whether the message left the queue.
    pub(super) fn leaves_queue(&mut self, msg: usize) -> bool {
        let m = &mut self.messages[msg];
        if self.now >= m.expires_at {
            m.deleted = true;
            self.c.expired_by_retention += 1;
        } else if m.receives >= self.p.max_receive_count {
            m.deleted = true;
            self.c.dead_lettered_by_receive_count += 1;
        }
        m.deleted
    }

    pub(super) fn free_instance(&mut self) -> Option<usize> {
        let n = self.instances.len();
        (0..n)
            .map(|k| (self.next_instance + k) % n)
            .find(|&i| self.instances[i].jobs.len() < self.p.concurrency)
            .inspect(|&i| {
                self.next_instance = (i + 1) % n;
            })
    }

    pub(super) fn remove_job(&mut self, id: usize) -> Option<JobRun> {
        let job = self.jobs.remove(&id)?;
        self.instances[job.instance].jobs.remove(&id);
        if let Some(n) = self.in_flight.get_mut(&job.msg) {
            *n = n.saturating_sub(1);
        }
        Some(job)
    }

    /// The instance crashes (see [`Run::kill`]).
    pub(super) fn crash(&mut self, instance: usize) {
        self.c.crashes += 1;
        self.kill(instance);
    }

    /// The instance dies: every job it runs stops where it is, its cache is gone, and it restarts
    /// empty. Returns the jobs killed.
    pub(super) fn kill(&mut self, instance: usize) -> u64 {
        let ids: Vec<usize> = self.instances[instance].jobs.iter().copied().collect();
        for &id in &ids {
            self.remove_job(id);
        }
        self.instances[instance].sent.clear();
        self.c.jobs_killed += ids.len() as u64;
        ids.len() as u64
    }

    pub(super) fn delete(&mut self, msg: usize, receipt: u32) {
        let m = &mut self.messages[msg];
        if m.receives == receipt {
            m.deleted = true;
        } else {
            self.c.stale_receipts += 1;
        }
    }

    pub(super) fn change_visibility(&mut self, msg: usize, receipt: u32, wait: Ms) {
        let m = &mut self.messages[msg];
        if m.receives != receipt {
            self.c.stale_receipts += 1;
            return;
        }
        m.gen += 1;
        let gen = m.gen;
        self.schedule(self.now + wait, Ev::Visible { msg, gen });
    }
}
