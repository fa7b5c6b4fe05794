//! One run: one strategy over the trace, as a discrete-event loop in simulated time — the events,
//! a receive, and a job's steps: the durable strategies' (the sender Lambda's own worker,
//! `durable.rs`) and the baselines' (the same window policy and queue policy, a different dedupe).

use notice_ledger::ledger::RowState;
use notice_ledger::mailer::{NotAccepted, SendResult};
use notice_ledger::metrics::Metrics;
use notice_ledger::queue::{Carried, Disposition, Executor};
use notice_ledger::{Delivery, Outcome, QueueAction, Receive, WindowDecision};

use super::durable::{Polled, WorkFuture};
use super::ports::{JobPorts, SimCall};
use super::queue::{Ev, JobRun, Ready, Run};
use super::strategies::Strategy;
use super::time::{ms, Ms};
use super::trace::{fate, Answer, Crash, Fate};

impl Run<'_> {
    /// Runs the trace to its horizon; the finished run is read by the report.
    pub(super) async fn run(mut self) -> Result<Self, String> {
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
        while let Some((at, ev)) = self.next_event() {
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
        Ok(self)
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
        self.jobs.insert(id, JobRun { msg, receipt, notice, instance, fate, future: None, ports: None });
        if self.strategy.durable() {
            self.durable_start(id).await;
        } else {
            self.baseline_start(id).await;
        }
    }

    /// A baseline's job is done with `outcome`: the core's [`Executor`] carries out the shipped
    /// queue policy's action on the simulated message — what the worker does after a delivery,
    /// here after a delivery of the baseline's own dedupe.
    async fn finish(&mut self, id: usize, outcome: &Outcome) {
        let Some(job) = self.jobs.get(&id) else { return };
        let (notice, jitter) = (job.notice, job.fate.jitter);
        let now = self.trace.at(self.now);
        // Baselines derive no key; their parked job is named by the notice's own.
        let named = self.trace.notices[notice].job.key(&self.park_names);
        let receive = Receive { key: Some(&named), count: job.receipt, now, jitter };
        let existing = self.schedules.get(&notice).map(|&at| self.trace.at(at));
        let ports = JobPorts::new(self.trace.notices[notice].body.clone(), now, existing);
        let delivery = Delivery { key: Some(named.clone()), outcome: outcome.clone() };
        let metrics = Metrics::default();
        let executor = Executor {
            policy: &self.queue,
            parker: Some(&*ports.parker),
            metrics: &metrics,
            cldr: &notice_texts::Icu,
        };
        let carried = executor.carry_out(&*ports.message, &delivery, &receive).await;
        self.apply(id, carried, &ports);
    }

    /// What carrying out the job's queue action asked of its ports, applied to the simulated
    /// queue and schedules — unless the worker dies first: a park's schedule is made before that
    /// crash point, so a crash before the ack leaves both the schedule and the message.
    fn apply(&mut self, id: usize, carried: Carried, ports: &JobPorts) {
        let Some(job) = self.jobs.get(&id) else { return };
        let notice = job.notice;
        if let Some(at) = ports.parker.take_parked() {
            self.park(notice, self.trace.ms(at));
        } else if ports.parker.existing().is_some() && matches!(carried.action, QueueAction::Park { .. }) {
            self.c.park_conflicts += 1;
        }
        let Some(job) = self.jobs.get(&id) else { return };
        if job.fate.crash == Some(Crash::AfterCommitBeforeAck) {
            let instance = job.instance;
            self.crash(instance);
            return;
        }
        let Some(job) = self.remove_job(id) else { return };
        for call in ports.message.take_calls() {
            match call {
                SimCall::Hide(wait) => self.change_visibility(job.msg, job.receipt, ms(wait)),
                SimCall::Requeue(delay) => self.requeue(job.msg, ms(delay)),
                SimCall::DeadLetter => self.c.dead_lettered += 1,
            }
        }
        if carried.disposition == Disposition::Ack {
            self.delete(job.msg, job.receipt);
        }
    }

    /// Parks the notice: a one-time schedule named by the notice key puts the same body back on
    /// the queue at `at`.
    fn park(&mut self, notice: usize, at: Ms) {
        self.schedules.insert(notice, at);
        self.c.parked += 1;
        self.schedule(at, Ev::Unpark { notice });
    }

    /// The provider gets the request now; the customer gets the copy (unless throttled) when its
    /// latency is up; the worker hears back then or gives up at the send timeout.
    fn issue_send(&mut self, id: usize) {
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
            self.baseline_done(id, answer).await;
        }
    }

    // ── The durable strategies: the sender Lambda's worker, suspended in the mailer while a send runs ──

    async fn durable_start(&mut self, id: usize) {
        let Some(d) = &self.durable else { return };
        let Some(job) = self.jobs.get_mut(&id) else { return };
        let now = self.trace.at(self.now);
        let ports = JobPorts::new(self.trace.notices[job.notice].body.clone(), now, None);
        let fut = d.work(self.queue, &ports, job.receipt, job.fate.jitter);
        job.ports = Some(ports);
        self.drive(id, fut).await;
    }

    async fn durable_resume(&mut self, id: usize, answer: SendResult) {
        let Some(d) = &self.durable else { return };
        let Some(fut) = self.jobs.get_mut(&id).and_then(|j| j.future.take()) else { return };
        d.answer(id, answer);
        self.drive(id, fut).await;
    }

    /// Polls the job's worker until it finishes or parks in the mailer. The notice's schedule, as
    /// it stands now, is what the worker's parker finds.
    async fn drive(&mut self, id: usize, mut fut: WorkFuture) {
        let Some(d) = &self.durable else { return };
        let Some(job) = self.jobs.get(&id) else { return };
        let existing = self.schedules.get(&job.notice).map(|&at| self.trace.at(at));
        if let Some(ports) = &job.ports {
            ports.parker.set_existing(existing);
        }
        match d.poll(id, &mut fut, self.trace.at(self.now)).await {
            Polled::Done(worked) => {
                let Some(ports) = self.jobs.get_mut(&id).and_then(|j| j.ports.take()) else { return };
                // A batch of one: one result.
                for w in worked {
                    if let Some(delivery) = &w.delivery {
                        *self.outcomes.entry(delivery.outcome.label().to_owned()).or_default() += 1;
                    }
                    self.apply(id, w.carried, &ports);
                }
            }
            Polled::Parked { issued } => {
                let Some(job) = self.jobs.get_mut(&id) else { return };
                job.future = Some(fut);
                if issued {
                    // The claim is committed and the sender called the mailer.
                    if job.fate.crash == Some(Crash::AfterClaimBeforeSend) {
                        let instance = job.instance;
                        self.crash(instance);
                        return;
                    }
                    self.issue_send(id);
                }
            }
        }
    }

    // ── Baselines: the same window policy and queue policy, a different dedupe ──

    async fn baseline_start(&mut self, id: usize) {
        let Some(job) = self.jobs.get(&id) else { return };
        let (notice, instance, fate) = (job.notice, job.instance, job.fate);
        match self.trace.policy.decide(&self.trace.notices[notice].job, self.trace.at(self.now)) {
            WindowDecision::Send { .. } => {}
            WindowDecision::Defer { until, closes_at } => {
                return self.finish(id, &Outcome::Deferred { until, closes_at }).await
            }
            WindowDecision::Missed { closed_at } => {
                self.missed[notice] = true;
                return self.finish(id, &Outcome::Missed { closed_at }).await;
            }
        }
        match self.strategy {
            Strategy::InProcessCache if self.instances[instance].sent.contains(&notice) => {
                self.c.suppressed_by_cache += 1;
                return self.finish(id, &CACHED).await;
            }
            Strategy::SharedCache { ttl } => {
                if self.shared.get(&notice).is_some_and(|&expiry| expiry > self.now) {
                    self.c.suppressed_by_cache += 1;
                    return self.finish(id, &CACHED).await;
                }
                self.shared.insert(notice, self.now + ttl);
            }
            _ => {}
        }
        if fate.crash == Some(Crash::AfterClaimBeforeSend) {
            self.crash(instance);
            return;
        }
        self.issue_send(id);
    }

    /// The worker heard back: a cache remembers what was sent; a failed send releases its claim.
    async fn baseline_done(&mut self, id: usize, answer: SendResult) {
        let Some(job) = self.jobs.get(&id) else { return };
        let (instance, notice) = (job.instance, job.notice);
        if matches!(answer, SendResult::Accepted { .. }) {
            match self.strategy {
                Strategy::InProcessCache => {
                    self.instances[instance].sent.insert(notice);
                }
                Strategy::SharedCache { ttl } => {
                    self.shared.insert(notice, self.now + ttl);
                }
                _ => {}
            }
            self.finish(id, &Outcome::Sent { message_id: format!("sim-{id}") }).await;
        } else {
            if let Strategy::SharedCache { .. } = self.strategy {
                self.shared.remove(&notice); // release the claim so a retry may send
            }
            // A baseline cannot tell "not accepted" from "unknown": it releases and retries.
            let released = Outcome::Released { class: NotAccepted::Throttled, reason: format!("{answer:?}") };
            self.finish(id, &released).await;
        }
    }
}

/// A cache's "already sent": acked like the ledger's suppression.
const CACHED: Outcome = Outcome::Suppressed { state: RowState::Sent };
