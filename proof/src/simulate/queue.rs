//! The state of one run — the queue, the workers, what customers received, what was counted —
//! and the moves of the queue and the workers themselves: SQS-like messages (visibility,
//! receipts, retention, redrive) and the instances that take them. What a worker does with a
//! message it receives is `run.rs`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet, VecDeque};

use notice_ledger::{NoticeSecret, QueuePolicy};
use serde::Serialize;

use super::args::Params;
use super::durable::{Durable, WorkFuture};
use super::ports::JobPorts;
use super::strategies::Strategy;
use super::time::Ms;
use super::trace::{Fate, Trace};

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

/// One receive being worked on; `future` holds the durable strategies' suspended worker, `ports`
/// its message and schedules.
pub(super) struct JobRun {
    pub(super) msg: usize,
    pub(super) receipt: u32,
    pub(super) notice: usize,
    pub(super) instance: usize,
    pub(super) fate: Fate,
    pub(super) future: Option<WorkFuture>,
    pub(super) ports: Option<JobPorts>,
}

/// What happened on the way, per run: the causes behind a row's outcome.
#[derive(Default, Debug, Clone, Serialize)]
pub(super) struct Counters {
    /// Messages handed to a worker (deferrals included).
    pub(super) receives: u64,
    /// Receives of a message whose earlier receive was still being worked on (visibility expired).
    pub(super) redelivered_while_in_flight: u64,
    /// Spurious second deliveries by the broker.
    pub(super) ghost_deliveries: u64,
    /// Instance crashes (the redeploy not included).
    pub(super) crashes: u64,
    /// In-flight jobs lost to crashes and the redeploy.
    pub(super) jobs_killed: u64,
    pub(super) jobs_killed_by_redeploy: u64,
    /// Enqueues the broker dropped as duplicates of a recent dedup id.
    pub(super) broker_dropped_enqueues: u64,
    /// Jobs acked because a cache said the notice was sent or claimed.
    pub(super) suppressed_by_cache: u64,
    /// Deletes and visibility changes ignored because the message had been received again since.
    pub(super) stale_receipts: u64,
    /// Jobs whose disposition was "dead-letter" (bad input).
    pub(super) dead_lettered: u64,
    /// Messages the redrive policy moved to the dead-letter queue after `--max-receive-count`
    /// receives. Nothing redrives them in the simulation.
    pub(super) dead_lettered_by_receive_count: u64,
    /// Messages the queue dropped at `--retention` before they were received again.
    pub(super) expired_by_retention: u64,
    /// One-time schedules created by parking jobs.
    pub(super) parked: u64,
    /// Parks that found the notice's schedule already there (conflict: acked, nothing created).
    pub(super) park_conflicts: u64,
    /// Schedules that fired and put their job back on the queue.
    pub(super) unparked: u64,
    /// Jobs sent back as new delayed messages (waits from the tenth receive on).
    pub(super) requeued: u64,
}

/// The state of one run: the queue, the workers, what customers received. Built here, driven by
/// `run.rs`, read by `report.rs`.
pub(super) struct Run<'t> {
    pub(super) p: &'t Params,
    pub(super) trace: &'t Trace,
    pub(super) strategy: Strategy,
    /// The shipped queue policy: parking for the parking strategy, hops of up to 12 h otherwise.
    pub(super) queue: QueuePolicy,
    /// Names a baseline's parked job (baselines derive no notice key of their own).
    pub(super) park_names: NoticeSecret,
    pub(super) now: Ms,
    seq: u64,
    heap: BinaryHeap<Reverse<(Ms, u64, Ev)>>,
    pub(super) messages: Vec<Message>,
    pub(super) ready: VecDeque<Ready>,
    pub(super) instances: Vec<Instance>,
    pub(super) next_instance: usize,
    pub(super) jobs: BTreeMap<usize, JobRun>,
    pub(super) next_job: usize,
    pub(super) in_flight: HashMap<usize, u32>,
    /// Broker dedup: notice → when its dedup id was last accepted.
    pub(super) dedup_ids: HashMap<usize, Ms>,
    /// Shared cache: notice → expiry.
    pub(super) shared: HashMap<usize, Ms>,
    /// Parking: notices with a pending one-time schedule (named by the notice key).
    /// by notice, with the time each fires.
    pub(super) schedules: HashMap<usize, Ms>,
    pub(super) deliveries: Vec<u32>,
    pub(super) missed: Vec<bool>,
    pub(super) outside_window: u64,
    pub(super) sends: u64,
    pub(super) outcomes: BTreeMap<String, u64>,
    pub(super) c: Counters,
    pub(super) durable: Option<Durable>,
}

impl<'t> Run<'t> {
    pub(super) fn new(p: &'t Params, trace: &'t Trace, strategy: Strategy) -> Result<Self, String> {
        let durable = if strategy.durable() { Some(Durable::new(p, trace)?) } else { None };
        let n = trace.notices.len();
        let park_names =
            NoticeSecret::new("simulation: names of parked baseline jobs").map_err(|e| e.to_string())?;
        Ok(Self {
            p,
            trace,
            strategy,
            queue: QueuePolicy { parking: strategy.parks(), ..QueuePolicy::default() },
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            messages: Vec::new(),
            ready: VecDeque::new(),
            instances: (0..p.instances)
                .map(|_| Instance { jobs: BTreeSet::new(), sent: HashSet::new() })
                .collect(),
            next_instance: 0,
            jobs: BTreeMap::new(),
            next_job: 0,
            in_flight: HashMap::new(),
            dedup_ids: HashMap::new(),
            shared: HashMap::new(),
            schedules: HashMap::new(),
            park_names,
            deliveries: vec![0; n],
            missed: vec![false; n],
            outside_window: 0,
            sends: 0,
            outcomes: BTreeMap::new(),
            c: Counters::default(),
            durable,
        })
    }

    pub(super) fn schedule(&mut self, at: Ms, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    /// The earliest scheduled event (in scheduling order among events at the same instant).
    pub(super) fn next_event(&mut self) -> Option<(Ms, Ev)> {
        self.heap.pop().map(|Reverse((at, _, ev))| (at, ev))
    }

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
        let msg = self.new_message(chaos, notice);
        self.ready.push_back(Ready::Visible { msg, gen: 0 });
    }

    /// A new message (receive count 0, its own retention from now), not yet visible.
    fn new_message(&mut self, chaos: usize, notice: usize) -> usize {
        let msg = self.messages.len();
        let expires_at = self.now.saturating_add(self.p.retention_ms);
        self.messages.push(Message { chaos, notice, expires_at, receives: 0, gen: 0, deleted: false });
        msg
    }

    /// A requeue: the job's body goes back as a new message — receive count 0, its own retention
    /// and chaos — visible after `delay` (the executor then acks the old one).
    pub(super) fn requeue(&mut self, msg: usize, delay: Ms) {
        let notice = self.messages[msg].notice;
        self.c.requeued += 1;
        let chaos = self.trace.enqueues.len() + (1 << 40) + self.c.requeued as usize;
        let new = self.new_message(chaos, notice);
        self.schedule(self.now + delay, Ev::Visible { msg: new, gen: 0 });
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
