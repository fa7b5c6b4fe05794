//! One run: the event loop in simulated time. Producers enqueue, schedules fire, the event source
//! mapping starts invocations, and each invocation runs the sender Lambda's own sequence over the
//! real core — [`NoticeSender::prefetch`] for the batch, [`NoticeSender::deliver`] (with the batch's prefetched reads in its context)
//! per record, [`QueuePolicy::action`] for what the queue does, a park through the [`Parker`]
//! port — against the modelled services.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notice_ledger::links::ManageLinks;
use notice_ledger::park::Parker;
use notice_ledger::queue::{Disposition, QueueError, QueuedMessage};
use notice_ledger::rate::{BucketGate, BucketStore, RateGate};
use notice_ledger::worker::{Record, Worker};
use notice_ledger::{Mode, NoticeSecret, NoticeSender, QueuePolicy, SendBudget, WindowPolicy};
use notice_setup::assemble::{assemble, queue_policy, GateClock, SendConfig, SenderPorts};
use notice_texts::Renderer;
use rand::rngs::StdRng;
use rand::Rng;

use super::args::Params;
use super::clock::{at, since_epoch, Clock, TaskId, Tasks, Us, MS, SEC};
use super::producer::{body, charge_at, lead, Domains, Notice, Source, FIXED_OPENING};
use super::queue::{Pollers, Queue, Received};
use super::services::{Dynamo, Scheduler, Services, Ses};
use super::world::{lock, rng, seeded, Books, Ev, Shared};

/// A progress line on stderr every 10 simulated seconds (simulated time of the horizon, events,
/// wall time, an estimate of the wall time left), rewritten in place, when a person is watching:
/// `capacity` sets it when stderr is a terminal and the output is not `--json`.
pub(super) static PROGRESS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn progress(at: Us, horizon: Us, events: u64, started: std::time::Instant) {
    use std::io::Write;
    let done = (at as f64 / horizon.max(1) as f64).clamp(1e-6, 1.0);
    let wall = started.elapsed().as_secs_f64();
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r  simulated {:.0} of {:.0} s · {} events · {:.0} s, about {:.0} s left   ",
        at as f64 / SEC as f64,
        horizon as f64 / SEC as f64,
        notice_ledger::text::thousands(events),
        wall,
        wall / done - wall
    );
    let _ = err.flush();
}

/// The queue the model's jobs come from and go back to.
const QUEUE_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:notice-ledger-reminders";

#[derive(Clone, Debug)]
enum Item {
    Wake(TaskId, std::task::Waker),
    Ev(Ev),
}

/// A heap entry: earliest first, then in the order raised (so one seed gives one run).
struct Entry {
    at: Us,
    seq: u64,
    item: Item,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// What every invocation shares.
pub(super) struct Ctx {
    pub(super) clock: Clock,
    pub(super) books: Shared,
    pub(super) queue: Mutex<Queue>,
    pub(super) parker: Arc<Scheduler>,
    pub(super) policy: QueuePolicy,
    pub(super) p: Params,
    rng: Mutex<StdRng>,
    /// Outcomes by label, and queue actions by label.
    pub(super) outcomes: Mutex<BTreeMap<&'static str, u64>>,
    pub(super) actions: Mutex<BTreeMap<&'static str, u64>>,
}

impl Ctx {
    fn sqs_latency(&self) -> Us {
        self.p.sqs_latency.sample(&mut lock(&self.rng))
    }
}

/// Run-wide counters besides the services' own.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) invocations: u64,
    pub(super) crashed: u64,
    pub(super) environments: u64,
    pub(super) events: u64,
}

pub(super) struct Run {
    pub(super) p: Params,
    pub(super) ctx: Arc<Ctx>,
    pub(super) svc: Services,
    pub(super) pollers: Pollers,
    pub(super) domains: Domains,
    pub(super) c: Counters,
    pub(super) secret: NoticeSecret,
    tasks: Tasks,
    heap: BinaryHeap<Entry>,
    seq: u64,
    renderer: Arc<Renderer>,
    idle: Vec<Arc<NoticeSender>>,
    /// Running invocations: their number and environment.
    running: HashMap<TaskId, (u64, Arc<NoticeSender>)>,
    /// When the event source mapping began gathering a batch it could not yet fill (a batching
    /// window is set and fewer than a batch are visible); `None` when not gathering.
    gathering: Option<Us>,
    /// The traffic (arrivals, domains, leads) and the chaos (duplicate deliveries, crashes) draw
    /// from their own streams, so a change in one leaves the other as it was.
    rng: StdRng,
    chaos: StdRng,
}

impl Run {
    pub(super) fn new(p: Params) -> Result<Self, String> {
        let clock = Clock::default();
        let books: Shared = Arc::new(Mutex::new(Books::default()));
        let backlog_live = p.steady_schedules().round() as i64;
        let svc = Services {
            dynamo: Arc::new(Dynamo::new(clock.clone(), p.seed, p.dynamo.clone())),
            ses: Arc::new(Ses::new(clock.clone(), p.seed, p.ses_rate, p.ses_latency, books.clone())),
            scheduler: Arc::new(Scheduler::new(
                clock.clone(),
                p.seed,
                p.scheduler.clone(),
                backlog_live,
                books.clone(),
            )),
        };
        let mut named = p.named_domains.clone();
        if p.replay > 0 && !named.iter().any(|(d, _)| *d == p.replay_domain) {
            named.push((p.replay_domain.clone(), 0.0));
        }
        let domains = Domains::new(&named, p.tail_domains);
        let secret = NoticeSecret::new("capacity-model-key-secret").map_err(|e| e.to_string())?;
        let links = NoticeSecret::new("capacity-model-links").map_err(|e| e.to_string())?;
        let renderer =
            Arc::new(Renderer::builtin(ManageLinks::new("https://billing.example.com/manage", links)));
        // As the sender Lambda's: parking exactly when there is a parker (there always is here).
        let parker: Arc<dyn Parker> = svc.scheduler.clone();
        let policy = queue_policy(Some(&parker), Duration::from_secs(p.park_spread_secs));
        let ctx = Arc::new(Ctx {
            clock,
            books,
            queue: Mutex::new(Queue::new(p.sqs.clone())),
            parker: svc.scheduler.clone(),
            policy,
            p: p.clone(),
            rng: rng(p.seed, 4),
            outcomes: Mutex::default(),
            actions: Mutex::default(),
        });
        let pollers = Pollers::new(p.lambda.clone());
        let (rng, chaos) = (seeded(p.seed, 5), seeded(p.seed, 6));
        Ok(Self {
            p,
            ctx,
            svc,
            pollers,
            domains,
            c: Counters::default(),
            secret,
            tasks: Tasks::default(),
            heap: BinaryHeap::new(),
            seq: 0,
            renderer,
            idle: Vec::new(),
            running: HashMap::new(),
            gathering: None,
            rng,
            chaos,
        })
    }

    fn push(&mut self, at: Us, item: Item) {
        self.seq += 1;
        self.heap.push(Entry { at, seq: self.seq, item });
    }

    /// A sender as one Lambda execution environment builds it at cold start: the real core over
    /// the modelled ledger and SES, the rate gate on (the default) over the modelled buckets.
    fn environment(&mut self) -> (Arc<NoticeSender>, Us) {
        if let Some(env) = self.idle.pop() {
            return (env, 0);
        }
        self.c.environments += 1;
        let buckets: Arc<dyn BucketStore> = self.svc.dynamo.clone();
        let config = SendConfig {
            secret: self.secret.clone().into(),
            mode: Mode::Enforce,
            policy: WindowPolicy::default(),
            renderer: self.renderer.clone(),
            // Sends are answered in simulated time; the real timer must never fire.
            send_timeout: Duration::from_secs(7 * 86_400),
            claim_lifetime: SendBudget::default().claim_lifetime,
            // The gate is the model's own, below: on simulated time, its jitter seeded.
            rate_limits: None,
            park_spread: Duration::from_secs(self.p.park_spread_secs),
            gate_clock: GateClock::Callers,
            redirect_all_mail_to: None,
        };
        let ports = SenderPorts {
            ledger: self.svc.dynamo.clone(),
            buckets: buckets.clone(),
            mailer: self.svc.ses.clone(),
            parker: Some(self.ctx.parker.clone()),
        };
        let gate = BucketGate::new(buckets, self.p.rate_limits.clone())
            .with_jitter_seed(self.p.seed.wrapping_mul(1_000_003).wrapping_add(self.c.environments));
        let gate: Arc<dyn RateGate> = Arc::new(gate);
        // The sender reads simulated time, for its commits and for the worker's instants.
        let clock: Arc<dyn notice_ledger::clock::Clock> = Arc::new(self.ctx.clock.clone());
        // Its queue redelivers, like the shipped sender's: claims are made off the quarantine view.
        let sender = assemble(config, ports)
            .sender
            .with_rate_gate(Some(gate))
            .with_clock(clock)
            .redelivered_by_queue();
        (Arc::new(sender), self.p.cold_start)
    }

    /// The notices of the run: the steady-state backlog (parked before the start, due during
    /// it), the producers' first enqueue, the replay, the clock.
    fn seed_events(&mut self) {
        let due = if self.p.replay_alone {
            0
        } else {
            (self.p.per_hour as f64 * self.p.horizon as f64 / (3_600.0 * SEC as f64)).round() as u32
        };
        let spread = self.p.park_spread_secs > 0;
        for i in 0..due {
            let opens = if self.p.fixed_billing_day {
                FIXED_OPENING
            } else {
                (i64::from(i) * self.p.horizon) / i64::from(due.max(1)) + self.rng.gen_range(0..SEC)
            };
            let mut n = Notice::new(self.domains.draw(&mut self.rng), opens, Source::Backlog);
            n.scheduled = true;
            let fires = if spread {
                // The spread's offset comes from the notice key, as the sender computes it.
                let text = body(i, &n, &self.domains);
                let key =
                    notice_ledger::Job::parse(&text, &notice_texts::Icu).ok().map(|j| j.key(&self.secret));
                let closes = charge_at(opens) - chrono::TimeDelta::hours(24);
                since_epoch(self.ctx.policy.park_time(at(opens), Some(closes), key.as_ref()))
            } else {
                since_epoch(self.ctx.policy.park_time(at(opens), None, None))
            };
            lock(&self.ctx.books).notices.push(n);
            self.push(fires, Item::Ev(Ev::Fire { idx: i }));
        }
        if !self.p.replay_alone {
            self.push(0, Item::Ev(Ev::Produce));
        }
        if self.p.replay > 0 {
            self.push(self.p.replay_at, Item::Ev(Ev::Replay { left: self.p.replay }));
        }
        self.push(SEC, Item::Ev(Ev::Tick));
    }

    /// Runs to the horizon.
    pub(super) async fn run(mut self) -> Result<Self, String> {
        self.seed_events();
        let started = std::time::Instant::now();
        let mut shown = 0;
        while let Some(Entry { at, item, .. }) = self.heap.pop() {
            if at > self.p.horizon {
                break;
            }
            if PROGRESS.load(std::sync::atomic::Ordering::Relaxed) && at / (10 * SEC) > shown {
                shown = at / (10 * SEC);
                progress(at, self.p.horizon, self.c.events, started);
            }
            self.ctx.clock.advance(at);
            self.c.events += 1;
            match item {
                Item::Wake(task, waker) => {
                    waker.wake();
                    self.poll(task);
                }
                Item::Ev(ev) => self.handle(ev),
            }
            self.collect();
            self.dispatch();
        }
        if PROGRESS.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!();
        }
        Ok(self)
    }

    fn poll(&mut self, task: TaskId) {
        if self.tasks.poll(&self.ctx.clock, task) {
            if let Some((_, env)) = self.running.remove(&task) {
                self.idle.push(env);
                self.pollers.finish();
            }
        }
    }

    /// Moves wake-ups and service events into the heap.
    fn collect(&mut self) {
        for (at, task, waker) in self.ctx.clock.take_wakes() {
            self.push(at, Item::Wake(task, waker));
        }
        let raised = std::mem::take(&mut lock(&self.ctx.books).outbox);
        for (at, ev) in raised {
            self.push(at, Item::Ev(ev));
        }
    }

    fn handle(&mut self, ev: Ev) {
        let now = self.ctx.clock.now();
        match ev {
            Ev::Produce => {
                let domain = self.domains.draw(&mut self.rng);
                let opens = now + lead(&mut self.rng, self.p.lead_days);
                {
                    let mut books = lock(&self.ctx.books);
                    let idx = books.notices.len() as u32;
                    books.notices.push(Notice::new(domain, opens, Source::Produced));
                    lock(&self.ctx.queue).send(idx, &mut books);
                }
                // Poisson arrivals at the producers' rate.
                let mean = 3_600.0 * SEC as f64 / self.p.per_hour as f64;
                let u: f64 = self.rng.gen::<f64>().max(f64::MIN_POSITIVE);
                let gap = (-u.ln() * mean).max(1.0) as Us;
                self.push(now + gap, Item::Ev(Ev::Produce));
            }
            Ev::Fire { idx } => {
                let back = self.svc.scheduler.fire(idx);
                self.push(back, Item::Ev(Ev::Unpark { idx }));
            }
            Ev::Unpark { idx } => {
                let mut books = lock(&self.ctx.books);
                if let Some(n) = books.notices.get_mut(idx as usize) {
                    n.scheduled = false;
                }
                lock(&self.ctx.queue).send(idx, &mut books);
            }
            Ev::Visible { msg, vis } => lock(&self.ctx.queue).expire(msg, vis),
            Ev::Replay { left } => {
                let domain = self.domains.index_of(&self.p.replay_domain).unwrap_or(0);
                // Paced: ten a `SendMessageBatch`, one every ten intervals (noticectl replay).
                let rate = self.p.replay_per_sec;
                let now_batch = if rate > 0.0 { left.min(10) } else { left };
                if now_batch < left {
                    let gap = (10.0 / rate * SEC as f64).round() as Us;
                    self.push(now + gap.max(1), Item::Ev(Ev::Replay { left: left - now_batch }));
                }
                let mut books = lock(&self.ctx.books);
                let mut queue = lock(&self.ctx.queue);
                for _ in 0..now_batch {
                    let idx = books.notices.len() as u32;
                    books.notices.push(Notice::new(domain, now, Source::Replay)); // due now: lateness is its wait
                    queue.send(idx, &mut books);
                }
            }
            Ev::Crash { task, invocation } => {
                if self.running.get(&task).is_some_and(|(n, _)| *n == invocation) && self.tasks.kill(task) {
                    self.running.remove(&task); // the environment dies with it
                    self.pollers.finish();
                    self.c.crashed += 1;
                }
            }
            // Nothing to do here: `dispatch`, after every event, sees that the window has ended.
            Ev::BatchWindow => {}
            Ev::Tick => {
                let waiting = lock(&self.ctx.queue).has_visible();
                self.pollers.tick(now, waiting);
                self.push(now + SEC, Item::Ev(Ev::Tick));
            }
        }
    }

    /// Free pollers take visible messages, a batch at a time: at once when a whole batch is
    /// visible or no batching window is set, else when the window that began with the first
    /// visible record ends.
    fn dispatch(&mut self) {
        while self.pollers.free() {
            let now = self.ctx.clock.now();
            let window = self.p.sqs.window;
            if window > 0 {
                let (visible, full) = {
                    let mut queue = lock(&self.ctx.queue);
                    (queue.has_visible(), queue.fills_a_batch())
                };
                if !visible {
                    return;
                }
                if !full {
                    let since = match self.gathering {
                        Some(since) => since,
                        None => {
                            self.gathering = Some(now);
                            self.push(now + window, Item::Ev(Ev::BatchWindow));
                            now
                        }
                    };
                    if now < since + window {
                        return;
                    }
                }
                self.gathering = None;
            }
            let batch = {
                let mut books = lock(&self.ctx.books);
                let mut queue = lock(&self.ctx.queue);
                if !queue.has_visible() {
                    return;
                }
                let mut out = Vec::new();
                let rate = self.p.redelivery_rate;
                let rng = &mut self.chaos;
                let got = queue.receive(now, &mut books, &mut out, || rate > 0.0 && rng.gen::<f64>() < rate);
                books.outbox.extend(out);
                let bodies: Vec<String> = got
                    .iter()
                    .map(|r| body(r.notice, &books.notices[r.notice as usize], &self.domains))
                    .collect();
                (got, bodies)
            };
            if batch.0.is_empty() {
                return; // over the in-flight limit
            }
            let (env, cold) = self.environment();
            self.c.invocations += 1;
            let invocation = self.c.invocations;
            let fut = Box::pin(invoke(self.ctx.clone(), env.clone(), batch.0, batch.1, cold));
            let task = self.tasks.spawn(fut);
            self.pollers.start();
            self.running.insert(task, (invocation, env));
            if self.p.crash_rate > 0.0 && self.chaos.gen::<f64>() < self.p.crash_rate {
                let after = self.chaos.gen_range(0..300 * MS);
                self.push(now + after, Item::Ev(Ev::Crash { task, invocation }));
            }
            self.poll(task);
            self.collect();
        }
    }
}

/// One Lambda invocation: the core's one worker — what the sender Lambda ships — over one batch,
/// on the modelled queue; then the event source mapping deletes the records it did not report as
/// failures.
async fn invoke(ctx: Arc<Ctx>, env: Arc<NoticeSender>, batch: Vec<Received>, bodies: Vec<String>, cold: Us) {
    ctx.clock.sleep(ctx.sqs_latency() + cold + 2 * MS).await;
    let received_at = ctx.clock.now_utc();
    let messages: Vec<ModelMessage<'_>> =
        batch.iter().zip(&bodies).map(|(r, body)| ModelMessage { ctx: &ctx, r, body, received_at }).collect();
    let records: Vec<Record<'_>> = messages
        .iter()
        .map(|m| Record {
            message: m,
            message_id: "",
            receive_count: m.r.receives,
            jitter: lock(&ctx.rng).gen::<f64>(),
            metrics: env.metrics(),
        })
        .collect();
    let worker = Worker {
        sender: &env,
        policy: &ctx.policy,
        parker: Some(ctx.parker.as_ref()),
        deadline: None,
        concurrency: records.len(),
        events: false,
    };
    let worked = worker.work(&records).await;
    for w in &worked {
        if let Some(delivery) = &w.delivery {
            *lock(&ctx.outcomes).entry(delivery.outcome.label()).or_default() += 1;
        }
        *lock(&ctx.actions).entry(w.carried.action.label()).or_default() += 1;
    }
    ctx.clock.sleep(ctx.sqs_latency()).await;
    let mut books = lock(&ctx.books);
    let mut queue = lock(&ctx.queue);
    for (r, w) in batch.iter().zip(&worked) {
        if w.carried.disposition != Disposition::Keep {
            queue.delete(r, &mut books);
        }
    }
}

/// A received message of the modelled queue, as the core's [`QueuedMessage`] port: every call
/// takes an SQS round trip of simulated time and never fails (the model's SQS is always up).
struct ModelMessage<'a> {
    ctx: &'a Ctx,
    r: &'a Received,
    body: &'a str,
    received_at: chrono::DateTime<chrono::Utc>,
}

#[async_trait::async_trait]
impl QueuedMessage for ModelMessage<'_> {
    fn body(&self) -> &str {
        self.body
    }

    fn queue_arn(&self) -> Option<&str> {
        Some(QUEUE_ARN)
    }

    fn replay_batch(&self) -> Option<&str> {
        None
    }

    fn received_at(&self) -> chrono::DateTime<chrono::Utc> {
        self.received_at
    }

    async fn hide(&self, wait: Duration) -> Result<(), QueueError> {
        let ctx = self.ctx;
        ctx.clock.sleep(ctx.sqs_latency()).await;
        let now = ctx.clock.now();
        let wait = Us::try_from(wait.as_micros()).unwrap_or(Us::MAX / 4);
        let mut books = lock(&ctx.books);
        let mut out = Vec::new();
        lock(&ctx.queue).change_visibility(self.r, wait, now, &mut out);
        books.outbox.extend(out);
        Ok(())
    }

    async fn requeue(&self, delay: Duration) -> Result<(), QueueError> {
        // SendMessage with the delay; the mapping deletes the old message afterwards.
        let ctx = self.ctx;
        ctx.clock.sleep(ctx.sqs_latency()).await;
        let now = ctx.clock.now();
        let delay = Us::try_from(delay.as_micros()).unwrap_or(Us::MAX / 4);
        let mut books = lock(&ctx.books);
        let mut out = Vec::new();
        lock(&ctx.queue).send_delayed(self.r.notice, delay, now, &mut books, &mut out);
        books.outbox.extend(out);
        Ok(())
    }

    async fn dead_letter(&self, _reason: &str) -> Result<(), QueueError> {
        let mut books = lock(&self.ctx.books);
        lock(&self.ctx.queue).dead_letter(self.r, &mut books);
        Ok(())
    }
}
