//! One run: one strategy over the trace, as a discrete-event loop in simulated time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet, VecDeque};

use notice_ledger::mailer::{NotAccepted, SendResult};
use notice_ledger::{NoticeKey, Outcome, QueueAction, QueuePolicy, Receive};

use super::args::Params;
use super::durable::Durable;
use super::queue::{Ev, Instance, JobRun, Message, Ready};
use super::report::{Counters, Row};
use super::strategies::Strategy;
use super::trace::{fate, Answer, Crash, Fate, Trace};
use super::{ms, Ms};

/// The state of one run: the queue, the workers, what customers received.
pub(super) struct Run<'t> {
    pub(super) p: &'t Params,
    pub(super) trace: &'t Trace,
    pub(super) strategy: Strategy,
    /// The shipped queue policy: parking for the parking strategy, hops of up to 12 h otherwise.
    queue: QueuePolicy,
    pub(super) now: Ms,
    seq: u64,
    heap: BinaryHeap<Reverse<(Ms, u64, Ev)>>,
    pub(super) messages: Vec<Message>,
    pub(super) ready: VecDeque<Ready>,
    pub(super) instances: Vec<Instance>,
    pub(super) next_instance: usize,
    pub(super) jobs: BTreeMap<usize, JobRun>,
    next_job: usize,
    pub(super) in_flight: HashMap<usize, u32>,
    /// Broker dedup: notice → when its dedup id was last accepted.
    pub(super) dedup_ids: HashMap<usize, Ms>,
    /// Shared cache: notice → expiry.
    pub(super) shared: HashMap<usize, Ms>,
    /// Parking: notices with a pending one-time schedule (named by the notice key).
    pub(super) schedules: HashSet<usize>,
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
            schedules: HashSet::new(),
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

    pub(super) async fn run(mut self) -> Result<Row, String> {
        for (idx, &(at, _, _)) in self.trace.enqueues.iter().enumerate() {
            self.schedule(at, Ev::Enqueue { idx });
        }
        if let Some(at) = self.p.redeploy_at_ms {
            self.schedule(at, Ev::Redeploy);
        }
        // Ample for any sensible parameters (the defaults need about 16 events per enqueue); a
        // visibility timeout far below the send latency makes messages bounce without end.
        let budget = 1_000 * self.trace.enqueues.len() as u64 + 1_000_000;
        let mut events = 0u64;
        while let Some(Reverse((at, _, ev))) = self.heap.pop() {
            if at > self.trace.horizon {
                break;
            }
            events += 1;
            if events > budget {
                return Err(format!(
                    "{}: more than {budget} events; the parameters keep messages bouncing (is the \
                     visibility timeout far below the send latency?)",
                    self.strategy.name(self.p.ledger)
                ));
            }
            self.now = at;
            self.handle(ev).await;
            self.dispatch().await;
        }
        self.report().await
    }

    async fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Enqueue { idx } => self.enqueue(idx),
            Ev::Visible { msg, gen } => {
                if self.messages.get(msg).is_some_and(|m| !m.deleted && m.gen == gen) {
                    self.ready.push_back(Ready::Visible { msg, gen });
                }
            }
            Ev::Ghost { msg } => {
                if self.messages.get(msg).is_some_and(|m| !m.deleted) {
                    self.ready.push_back(Ready::Ghost { msg });
                }
            }
            Ev::SendDone { job } => self.send_done(job).await,
            Ev::Accepted { notice } => {
                self.deliveries[notice] += 1;
                let n = &self.trace.notices[notice];
                if self.now < n.opens_at || self.now >= n.closes_at {
                    self.outside_window += 1;
                }
            }
            Ev::Redeploy => {
                for i in 0..self.instances.len() {
                    let killed = self.kill(i);
                    self.c.jobs_killed_by_redeploy += killed;
                }
            }
            Ev::Unpark { notice } => {
                self.schedules.remove(&notice);
                self.c.unparked += 1;
                // A new message: new enqueue time, receive count 0, its own chaos.
                let chaos = self.trace.enqueues.len() + self.c.unparked as usize;
                self.push_message(chaos, notice);
            }
        }
    }

    /// Free consumer slots take visible messages, oldest first.
    async fn dispatch(&mut self) {
        while let Some(entry) = self.ready.pop_front() {
            let (msg, ghost, current) = match entry {
                Ready::Visible { msg, gen } => (msg, false, self.messages[msg].gen == gen),
                Ready::Ghost { msg } => (msg, true, true),
            };
            if !current || self.messages[msg].deleted || self.leaves_queue(msg) {
                continue;
            }
            let Some(instance) = self.free_instance() else {
                self.ready.push_front(entry);
                return;
            };
            self.receive(instance, msg, ghost).await;
        }
    }

    /// A consumer slot on `instance` receives `msg`.
    async fn receive(&mut self, instance: usize, msg: usize, ghost: bool) {
        let (enqueue, notice, receipt, gen) = {
            let m = &mut self.messages[msg];
            m.receives += 1;
            m.gen += 1;
            (m.chaos, m.notice, m.receives, m.gen)
        };
        self.schedule(self.now + self.p.visibility_timeout_ms, Ev::Visible { msg, gen });
        self.c.receives += 1;
        if ghost {
            self.c.ghost_deliveries += 1;
        } else if self.in_flight.get(&msg).is_some_and(|&n| n > 0) {
            self.c.redelivered_while_in_flight += 1;
        }
        let fate = fate(self.p, enqueue, receipt);
        if let Some(after) = fate.ghost_after {
            // A FIFO-style broker does not hand one message to two consumers.
            if !matches!(self.strategy, Strategy::BrokerDedup { .. }) {
                self.schedule(self.now + after, Ev::Ghost { msg });
            }
        }
        if fate.crash == Some(Crash::BeforeClaim) {
            self.crash(instance);
            return;
        }
        let id = self.next_job;
        self.next_job += 1;
        self.instances[instance].jobs.insert(id);
        *self.in_flight.entry(msg).or_default() += 1;
        self.jobs.insert(id, JobRun { msg, receipt, notice, instance, fate, future: None });
        if self.strategy.durable() {
            self.durable_start(id).await;
        } else {
            self.baseline_start(id);
        }
    }

    /// The job is done with `outcome`; the worker does what the shipped queue policy says with
    /// its message, unless it dies first (a park's schedule is made before that crash point, so
    /// a crash before the ack leaves both the schedule and the message).
    pub(super) fn finish(&mut self, id: usize, outcome: &Outcome, key: Option<&NoticeKey>) {
        let Some(job) = self.jobs.get(&id) else { return };
        let receive =
            Receive { key, count: job.receipt, now: self.trace.at(self.now), jitter: job.fate.jitter };
        let action = self.queue.action(outcome, &receive);
        if let QueueAction::Park { at } = action {
            let notice = job.notice;
            self.park(notice, self.trace.ms(at));
        }
        let Some(job) = self.jobs.get(&id) else { return };
        if job.fate.crash == Some(Crash::AfterCommitBeforeAck) {
            let instance = job.instance;
            self.crash(instance);
            return;
        }
        let Some(job) = self.remove_job(id) else { return };
        match action {
            QueueAction::Delete | QueueAction::Park { .. } => self.delete(job.msg, job.receipt),
            QueueAction::Hide(wait) | QueueAction::Backoff(wait) => {
                self.change_visibility(job.msg, job.receipt, ms(wait))
            }
            QueueAction::DeadLetter => {
                self.c.dead_lettered += 1;
                self.delete(job.msg, job.receipt);
            }
        }
    }

    /// Parks the notice: a one-time schedule named by the notice key puts the same body back on
    /// the queue at `at`; a second park of a parked notice finds the first.
    fn park(&mut self, notice: usize, at: Ms) {
        if self.schedules.insert(notice) {
            self.c.parked += 1;
            self.schedule(at, Ev::Unpark { notice });
        } else {
            self.c.park_conflicts += 1;
        }
    }

    /// The provider gets the request now; the customer gets the copy (unless throttled) when its
    /// latency is up; the worker hears back then or gives up at the send timeout.
    pub(super) fn issue_send(&mut self, id: usize) {
        let Some(job) = self.jobs.get(&id) else { return };
        let (fate, notice) = (job.fate, job.notice);
        self.sends += 1;
        if fate.answer != Answer::Throttled {
            self.schedule(self.now + fate.latency, Ev::Accepted { notice });
        }
        self.schedule(self.now + fate.latency.min(self.p.send_timeout_ms), Ev::SendDone { job: id });
    }

    fn answer(&self, fate: &Fate, id: usize) -> SendResult {
        if fate.latency > self.p.send_timeout_ms {
            return SendResult::Unknown { reason: "no answer within the send timeout".into() };
        }
        match fate.answer {
            Answer::Accepted => SendResult::Accepted { message_id: format!("sim-{id}") },
            Answer::UnknownAfterAccept => SendResult::Unknown { reason: "500 after accept".into() },
            Answer::Throttled => {
                SendResult::NotAccepted { class: NotAccepted::Throttled, reason: "throttled".into() }
            }
        }
    }

    async fn send_done(&mut self, id: usize) {
        let Some(job) = self.jobs.get(&id) else { return }; // the worker died meanwhile
        let (instance, fate) = (job.instance, job.fate);
        if fate.crash == Some(Crash::AfterSendBeforeCommit) {
            self.crash(instance);
            return;
        }
        let answer = self.answer(&fate, id);
        if self.strategy.durable() {
            self.durable_resume(id, answer).await;
        } else {
            self.baseline_done(id, answer);
        }
    }
}
