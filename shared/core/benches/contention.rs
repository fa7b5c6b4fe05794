//! Contention on one domain's bucket (issue 22): many senders admitting on one item, the previous
//! compare-and-set design against the current take (`notice_ledger::rate::take`).
//!
//! Method. A simulated DynamoDB item store implements `BucketStore` (and, for the previous design
//! only, a `swap`). A call is sent, takes one leg (RTT/2 on average: `RTT/2 − jitter/2` plus a
//! uniform draw from `0..=jitter`) to reach the item, is applied to the item under its lock in the
//! order calls *arrive* — DynamoDB's per-item apply order — and its answer takes another leg back.
//! A write (applied or refused: DynamoDB serialises and bills both) also holds the item for a
//! service time: writes queue on the item in arrival order, each starting at `max(arrival, end of
//! the write before)`, so one item applies at most `1 / service` writes a second. Reads (`load`,
//! once per sender of the previous design) cost the round trip only.
//!
//! Time. Each admitter carries its own instant (a task-local): the exact instant its last answer
//! arrived. Calls are sent at that instant and applied in order of their arrival instants by
//! whichever task wakes first, and `now` is the real clock (µs) at that instant. Tasks are paced
//! by `tokio::time::sleep_until` to those instants; tokio's timer wakes tasks on millisecond ticks
//! (its lateness is measured at start-up and taken off), and without the task-local instant every
//! admitter woken by one tick would read the same `now` and send together. A call whose task ran
//! so late that a later-sent call was already applied is applied right after it (counted).
//!
//! N admitters (10, 100, 1000), each its own sender instance with its own remembered bucket state,
//! loop admissions of 1 token for a fixed wall time (2 s) on a multi-thread runtime. A limited
//! answer is handed back to the queue: one more round trip (the sender's `ChangeMessageVisibility`)
//! before the next admission. The first run uses a limit that cannot bind in the run (100 000/s,
//! burst 100 000), so every limited answer is a contention deferral; the second a tight one
//! (500/s, burst 50), checking that the admissions never exceed `burst + rate · t`.
//!
//! * **previous design** (compare-and-set, re-implemented here only): load once (then the
//!   remembered state), compute with `rate::gcra`, write conditional on the exact previous TAT;
//!   a refused write returns the current TAT; 5 rounds, then defer.
//! * **current design**: `rate::take` (what `BucketGate` runs per bucket) with the sender's
//!   remembered state: a write that adds k intervals if `now ≤ TAT ≤ max`, or resets an idle
//!   bucket, both checked when applied.
//!
//! What the model leaves out: DynamoDB's per-partition throttling (1 000 WCU/s; excess writes are
//! rejected with a throttling error, not queued) beyond the service time, adaptive capacity,
//! retries of throttled or failed requests, latency tails (the jitter is uniform and bounded),
//! clock skew between senders, and the sender's own work between admissions (the claim, the send).
//!
//! `cargo bench -p notice_ledger --bench contention`. Settings: `NOTICE_BENCH_SECS` (default 2)
//! per configuration; `NOTICE_BENCH_RTT_MS` (default 5); `NOTICE_BENCH_JITTER_US` (default 1000:
//! two requests sent a fraction of a millisecond apart from different senders do not reliably
//! arrive in that order; 0 makes arrival order send order); `NOTICE_BENCH_APPLY_US` (default 100,
//! an assumption: the documented 1 000 WCU/s of one partition bounds one item's serial apply at
//! 1 ms a write, the real per-item cost is not published, and 100 µs puts the item's ceiling at
//! 10 000 writes/s so that the designs rather than the ceiling set the numbers; 1000 turns the
//! documented 1 000 writes/s into a queue); `NOTICE_BENCH_ADMITTERS` (default `10,100,1000`).
//! Without `--bench` (e.g. under `cargo test`) it runs 0.2 s with 10 admitters as a smoke test.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use notice_ledger::rate::{
    gcra, grant, take, Applied, BucketState, BucketStore, Decision, Limit, MemoryBuckets, Taken,
};
use notice_ledger::LedgerError;
use rand::Rng;
use tokio::time::{sleep, sleep_until, Instant};

/// The one domain every admitter sends to.
const BUCKET: &str = "example.com";
/// The previous design's compare-and-set rounds before a contended admission was deferred.
const CAS_ROUNDS: u32 = 5;

// ───────────────────────────── simulated time ─────────────────────────────

tokio::task_local! {
    /// Where an admitter is in time: the instant its last answer arrived. Exact, unlike tokio's
    /// timer, which wakes tasks on millisecond ticks: admitters woken by one tick would otherwise
    /// all read the same `now` and start together.
    static AT: Cell<Option<Instant>>;
}

/// The current task's instant (outside an admitter: the clock).
fn at() -> Instant {
    AT.try_with(Cell::get).ok().flatten().unwrap_or_else(Instant::now)
}

fn set_at(instant: Instant) {
    let _ = AT.try_with(|c| c.set(Some(instant)));
}

/// The wall clock at a simulated instant, in µs since the epoch: the real clock, read at the
/// instant the admitter's answer arrived rather than when its task woke.
fn wall_us(epoch: (Instant, i64), instant: Instant) -> i64 {
    match instant.checked_duration_since(epoch.0) {
        Some(d) => epoch.1 + d.as_micros() as i64,
        None => epoch.1 - epoch.0.saturating_duration_since(instant).as_micros() as i64,
    }
}

// ───────────────────────────── the simulated item store ─────────────────────────────

/// A call waiting for its turn on the item.
enum Op {
    Read,
    Write(Box<dyn FnOnce(Option<BucketState>) -> Applied + Send>),
}

/// One bucket item: its state, the calls on their way to it, when its write queue is next free,
/// and what was done to it.
struct Item {
    state: Option<BucketState>,
    /// Calls sent and not yet applied, by (arrival instant, sequence): the apply order.
    in_flight: BTreeMap<(Instant, u64), Op>,
    /// Applied calls whose caller has not taken the answer: (answer, when it left the item).
    answered: HashMap<u64, (Applied, Instant)>,
    next_seq: u64,
    /// The latest arrival applied: a call sent so late that it would arrive before it (its task
    /// ran behind the simulated time) arrives just after it instead, and is counted in `late`.
    applied_through: Instant,
    late: u64,
    free_at: Instant,
    applied: u64,
    refused: u64,
    loads: u64,
}

impl Item {
    /// Applies, in order of arrival, every call that has arrived by `now`. A write starts when it
    /// has arrived and the write before it has finished, and takes `service`.
    fn apply_arrived(&mut self, now: Instant, service: Duration) {
        while let Some(entry) = self.in_flight.first_entry() {
            let (arrival, seq) = *entry.key();
            if arrival > now {
                break;
            }
            self.applied_through = arrival;
            let answer = match entry.remove() {
                Op::Read => {
                    self.loads += 1;
                    (Applied::Refused(self.state), arrival)
                }
                Op::Write(apply) => {
                    self.free_at = self.free_at.max(arrival) + service;
                    let applied = apply(self.state);
                    match applied {
                        Applied::Done(state) => {
                            self.state = Some(state);
                            self.applied += 1;
                        }
                        Applied::Refused(_) => self.refused += 1,
                    }
                    (applied, self.free_at)
                }
            };
            self.answered.insert(seq, answer);
        }
    }
}

/// What the store did, over all items, in microseconds.
#[derive(Default)]
struct Timing {
    calls: AtomicU64,
    /// Time a call waited for the item (behind earlier writes) plus its own service time.
    queue_us: AtomicU64,
    /// How far after the simulated instant of an answer tokio woke its task (may be negative).
    wake_lag_us: AtomicI64,
}

/// The previous design's write: store `new` if the item still holds exactly `expected`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Swap {
    Done,
    Conflict(Option<BucketState>),
}

struct SimStore {
    /// Each leg takes this plus a uniform draw from `0..=jitter`: RTT/2 on average.
    leg_base: Duration,
    jitter: Duration,
    /// The timer's mean lateness ending a sleep, taken off the way back (see [`lateness`]).
    lateness: Duration,
    service: Duration,
    items: Mutex<HashMap<String, Arc<Mutex<Item>>>>,
    timing: Timing,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `BucketStore::add`'s condition, as `MemoryBuckets` applies it.
fn apply_add(state: Option<BucketState>, add_us: i64, now_us: i64, max_us: i64) -> Applied {
    match state {
        Some(s) if s.tat_us >= now_us && s.tat_us <= max_us => {
            Applied::Done(BucketState { tat_us: s.tat_us.saturating_add(add_us) })
        }
        other => Applied::Refused(other),
    }
}

/// `BucketStore::reset`'s condition, as `MemoryBuckets` applies it.
fn apply_reset(state: Option<BucketState>, tat_us: i64, now_us: i64) -> Applied {
    match state {
        Some(s) if s.tat_us >= now_us => Applied::Refused(Some(s)),
        _ => Applied::Done(BucketState { tat_us }),
    }
}

impl SimStore {
    fn new(net: &Net, service: Duration) -> Self {
        Self {
            leg_base: (net.rtt / 2).saturating_sub(net.jitter / 2),
            jitter: net.jitter,
            lateness: net.lateness,
            service,
            items: Mutex::new(HashMap::new()),
            timing: Timing::default(),
        }
    }

    fn item(&self, bucket: &str) -> Arc<Mutex<Item>> {
        let mut items = lock(&self.items);
        let item = items.entry(bucket.to_owned()).or_insert_with(|| {
            Arc::new(Mutex::new(Item {
                state: None,
                in_flight: BTreeMap::new(),
                answered: HashMap::new(),
                next_seq: 0,
                applied_through: Instant::now(),
                late: 0,
                free_at: Instant::now(),
                applied: 0,
                refused: 0,
                loads: 0,
            }))
        });
        Arc::clone(item)
    }

    /// One leg of a round trip.
    fn leg(&self) -> Duration {
        let jitter_us = u64::try_from(self.jitter.as_micros()).unwrap_or(u64::MAX);
        self.leg_base + Duration::from_micros(rand::thread_rng().gen_range(0..=jitter_us))
    }

    /// One call, sent at the admitter's simulated instant ([`at`]): it arrives a leg later and is
    /// applied after every call that arrived before it (whoever wakes first applies all that
    /// have arrived, so the order is that of the arrival instants, not of tokio's wake-ups); the
    /// answer leaves the item when the call is applied (a write: after its service) and arrives
    /// a leg later, which is the admitter's instant from then on.
    async fn call(&self, bucket: &str, op: Op) -> Applied {
        let item = self.item(bucket);
        let sent = at();
        let (seq, arrival) = {
            let mut item = lock(&item);
            let mut arrival = sent + self.leg();
            if arrival <= item.applied_through {
                item.late += 1;
                arrival = item.applied_through + Duration::from_nanos(1);
            }
            let seq = item.next_seq;
            item.next_seq += 1;
            item.in_flight.insert((arrival, seq), op);
            (seq, arrival)
        };
        sleep_until(arrival).await;
        let (applied, left) = loop {
            let answer = {
                let mut item = lock(&item);
                item.apply_arrived(Instant::now(), self.service);
                item.answered.remove(&seq)
            };
            match answer {
                Some(answer) => break answer,
                None => sleep(Duration::from_millis(1)).await,
            }
        };
        self.timing.calls.fetch_add(1, Ordering::Relaxed);
        let queue = left.saturating_duration_since(arrival);
        self.timing.queue_us.fetch_add(queue.as_micros() as u64, Ordering::Relaxed);
        self.arrive(left + self.leg()).await;
        applied
    }

    /// Makes `back` the admitter's instant and sleeps until then (less the timer's lateness).
    async fn arrive(&self, back: Instant) {
        set_at(back);
        sleep_until(back.checked_sub(self.lateness).unwrap_or(back)).await;
        let lag = match Instant::now().checked_duration_since(back) {
            Some(late) => late.as_micros() as i64,
            None => -(back.saturating_duration_since(Instant::now()).as_micros() as i64),
        };
        self.timing.wake_lag_us.fetch_add(lag, Ordering::Relaxed);
    }

    async fn write(
        &self,
        bucket: &str,
        apply: impl FnOnce(Option<BucketState>) -> Applied + Send + 'static,
    ) -> Applied {
        self.call(bucket, Op::Write(Box::new(apply))).await
    }

    /// The previous design's compare-and-set, with the same delays and apply order.
    async fn swap(&self, bucket: &str, expected: Option<BucketState>, new: BucketState) -> Swap {
        let applied = self
            .write(bucket, move |s| if s == expected { Applied::Done(new) } else { Applied::Refused(s) })
            .await;
        match applied {
            Applied::Done(_) => Swap::Done,
            Applied::Refused(current) => Swap::Conflict(current),
        }
    }

    /// A call that touches no bucket (the sender handing a limited job back to its queue).
    async fn other_call(&self) {
        self.arrive(at() + self.leg() + self.leg()).await;
    }

    /// (applied, refused, loads, late) on one item.
    fn counts(&self, bucket: &str) -> (u64, u64, u64, u64) {
        let item = self.item(bucket);
        let item = lock(&item);
        (item.applied, item.refused, item.loads, item.late)
    }
}

#[async_trait]
impl BucketStore for SimStore {
    async fn load(&self, bucket: &str) -> Result<Option<BucketState>, LedgerError> {
        match self.call(bucket, Op::Read).await {
            Applied::Done(state) => Ok(Some(state)),
            Applied::Refused(state) => Ok(state),
        }
    }

    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, LedgerError> {
        Ok(self.write(bucket, move |s| apply_add(s, add_us, now_us, max_us)).await)
    }

    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, LedgerError> {
        Ok(self.write(bucket, move |s| apply_reset(s, tat_us, now_us)).await)
    }
}

/// The network every store in a run shares.
struct Net {
    rtt: Duration,
    jitter: Duration,
    lateness: Duration,
}

/// How late tokio's timer ends a sleep, on average: it fires on a millisecond tick after the
/// deadline. Measured over 40 sleeps of `leg` and taken off every sleep to a simulated instant,
/// so tasks run close to their simulated time (the mean offset of every run is printed).
async fn lateness(leg: Duration) -> Duration {
    let mut late = Duration::ZERO;
    for _ in 0..40 {
        let deadline = Instant::now() + leg;
        sleep_until(deadline).await;
        late += Instant::now().saturating_duration_since(deadline);
    }
    late / 40
}

/// The simulated item's two writes decide exactly as `MemoryBuckets` does (checked at start-up).
async fn same_as_memory_buckets() {
    let tats = [None, Some(100), Some(150), Some(200), Some(250)];
    for tat in tats {
        for (add, now, max) in [(10, 100, 200), (10, 150, 150), (10, 201, 300), (50, 0, 199)] {
            let memory = MemoryBuckets::default();
            if let Some(t) = tat {
                let _ = memory.reset(BUCKET, t, i64::MIN).await;
            }
            let state = tat.map(|t| BucketState { tat_us: t });
            let got = memory.add(BUCKET, add, now, max).await.ok();
            assert_eq!(got, Some(apply_add(state, add, now, max)), "add {tat:?} {add} {now} {max}");
            let memory = MemoryBuckets::default();
            if let Some(t) = tat {
                let _ = memory.reset(BUCKET, t, i64::MIN).await;
            }
            let got = memory.reset(BUCKET, now + add, now).await.ok();
            assert_eq!(got, Some(apply_reset(state, now + add, now)), "reset {tat:?} {now}");
        }
    }
}

// ───────────────────────────── the two designs ─────────────────────────────

#[derive(Clone, Copy, PartialEq, Eq)]
enum Design {
    /// Compare-and-set on the exact TAT (the design before issue 22).
    Previous,
    /// `rate::take`: add / reset checked when applied.
    Current,
}

impl Design {
    fn label(self) -> &'static str {
        match self {
            Design::Previous => "previous: compare-and-set",
            Design::Current => "current: rate::take",
        }
    }
}

/// The previous design's take of one token, re-implemented: load once (or the remembered state),
/// `gcra`, compare-and-set on the exact previous TAT, 5 rounds, then defer.
async fn cas_take(store: &SimStore, now_us: i64, limit: &Limit, hint: Option<BucketState>) -> Taken {
    let mut known = match hint {
        Some(state) => Some(state),
        None => store.load(BUCKET).await.ok().flatten(),
    };
    let mut conflicts = 0;
    for _ in 0..CAS_ROUNDS {
        let next = match gcra(known, now_us, limit) {
            Decision::Admit(next) => next,
            Decision::Limited { .. } => return Taken { granted: 0, state: known, conflicts },
        };
        match store.swap(BUCKET, known, next).await {
            Swap::Done => return Taken { granted: 1, state: Some(next), conflicts },
            Swap::Conflict(current) => {
                conflicts += 1;
                known = current;
            }
        }
    }
    Taken { granted: 0, state: known, conflicts }
}

/// What one admitter did.
#[derive(Default)]
struct Tally {
    attempts: u64,
    admitted: u64,
    limited: u64,
    /// Limited although the state the take ended with had room: every write lost to others.
    contention: u64,
    /// Admission latency, µs.
    latency_us: Vec<u32>,
    first_admit_us: Option<i64>,
    last_admit_us: Option<i64>,
}

/// One sender instance: its own remembered state, admissions of 1 token until `until`.
async fn admitter(design: Design, store: Arc<SimStore>, limit: Limit, until: Instant) -> Tally {
    let epoch = (Instant::now(), Utc::now().timestamp_micros());
    set_at(epoch.0);
    let mut tally = Tally::default();
    let mut known: Option<BucketState> = None;
    while at() < until {
        let started = at();
        let now_us = wall_us(epoch, started);
        let taken = match design {
            Design::Previous => cas_take(&store, now_us, &limit, known).await,
            Design::Current => match take(&*store, BUCKET, 1, now_us, &limit, known).await {
                Ok(taken) => taken,
                Err(e) => panic!("simulated store: {e}"),
            },
        };
        known = taken.state;
        tally.attempts += 1;
        let took = at().saturating_duration_since(started);
        tally.latency_us.push(u32::try_from(took.as_micros()).unwrap_or(u32::MAX));
        if taken.granted > 0 {
            tally.admitted += 1;
            tally.first_admit_us = Some(tally.first_admit_us.map_or(now_us, |t| t.min(now_us)));
            tally.last_admit_us = Some(tally.last_admit_us.map_or(now_us, |t| t.max(now_us)));
        } else {
            tally.limited += 1;
            if grant(taken.state, now_us, 1, &limit).granted > 0 {
                tally.contention += 1;
            }
            // The job goes back to the queue (one call) and the slot takes the next.
            store.other_call().await;
        }
    }
    tally
}

// ───────────────────────────── runs and the report ─────────────────────────────

struct Run {
    design: Design,
    admitters: usize,
    secs: f64,
    tally: Tally,
    applied: u64,
    refused: u64,
    loads: u64,
    late: u64,
    queue_ms: f64,
    wake_lag_ms: f64,
}

impl Run {
    fn per_s(&self, n: u64) -> f64 {
        n as f64 / self.secs
    }
    fn pct(&self, n: u64) -> f64 {
        100.0 * n as f64 / self.tally.attempts.max(1) as f64
    }
    fn latency_ms(&self, q: f64) -> f64 {
        let v = &self.tally.latency_us;
        if v.is_empty() {
            return 0.0;
        }
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        f64::from(v[i]) / 1000.0
    }
    /// GCRA's bound on the admissions: `burst + span / interval` over the span of their `now`s.
    fn bound(&self, limit: &Limit) -> u64 {
        match (self.tally.first_admit_us, self.tally.last_admit_us) {
            (Some(a), Some(b)) => u64::from(limit.burst) + ((b - a) / limit.interval_us()) as u64,
            _ => 0,
        }
    }
}

async fn run(design: Design, admitters: usize, limit: Limit, net: &Net, service: Duration, secs: f64) -> Run {
    let store = Arc::new(SimStore::new(net, service));
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..admitters)
        .map(|_| tokio::spawn(AT.scope(Cell::new(None), admitter(design, Arc::clone(&store), limit, until))))
        .collect();
    let mut tally = Tally::default();
    for task in tasks {
        let t = match task.await {
            Ok(t) => t,
            Err(e) => panic!("admitter: {e}"),
        };
        tally.attempts += t.attempts;
        tally.admitted += t.admitted;
        tally.limited += t.limited;
        tally.contention += t.contention;
        tally.latency_us.extend(t.latency_us);
        tally.first_admit_us = [tally.first_admit_us, t.first_admit_us].into_iter().flatten().min();
        tally.last_admit_us = [tally.last_admit_us, t.last_admit_us].into_iter().flatten().max();
    }
    let elapsed = started.elapsed().as_secs_f64();
    tally.latency_us.sort_unstable();
    let (applied, refused, loads, late) = store.counts(BUCKET);
    let calls = store.timing.calls.load(Ordering::Relaxed).max(1) as f64;
    Run {
        design,
        admitters,
        secs: elapsed,
        tally,
        applied,
        refused,
        loads,
        late,
        queue_ms: store.timing.queue_us.load(Ordering::Relaxed) as f64 / calls / 1000.0,
        wake_lag_ms: store.timing.wake_lag_us.load(Ordering::Relaxed) as f64 / calls / 1000.0,
    }
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => match v.trim().parse() {
            Ok(v) => v,
            Err(_) => panic!("{name}={v:?} is not a number"),
        },
        Err(_) => default,
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let secs: f64 = if full { env("NOTICE_BENCH_SECS", 2.0) } else { 0.2 };
    let rtt = Duration::from_secs_f64(env("NOTICE_BENCH_RTT_MS", 5.0) / 1000.0);
    let service = Duration::from_micros(env("NOTICE_BENCH_APPLY_US", 100));
    let admitters: Vec<usize> = if full {
        let list = std::env::var("NOTICE_BENCH_ADMITTERS").unwrap_or_else(|_| "10,100,1000".to_owned());
        list.split(',')
            .map(|n| n.trim().parse().unwrap_or_else(|_| panic!("NOTICE_BENCH_ADMITTERS: {n:?}")))
            .collect()
    } else {
        vec![10]
    };
    let generous = Limit { per_second: 100_000.0, burst: 100_000 };
    let tight = Limit { per_second: 500.0, burst: 50 };

    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => panic!("tokio runtime: {e}"),
    };
    rt.block_on(same_as_memory_buckets());
    let jitter = Duration::from_micros(env("NOTICE_BENCH_JITTER_US", 1000));
    let leg = (rtt / 2).saturating_sub(jitter / 2);
    let net = Net { rtt, jitter, lateness: rt.block_on(lateness(leg)) };

    println!(
        "contention: one domain item; RTT {:.1} ms (each leg RTT/2 - {} µs + uniform 0..={} µs); calls \
         applied one at a time in order of arrival, {} µs service per write (ceiling {:.0} writes/s); \
         {secs} s per configuration; timer lateness {} µs",
        rtt.as_secs_f64() * 1000.0,
        jitter.as_micros() / 2,
        jitter.as_micros(),
        service.as_micros(),
        if service.is_zero() { f64::INFINITY } else { 1.0 / service.as_secs_f64() },
        net.lateness.as_micros(),
    );

    let mut generous_runs = Vec::new();
    let mut tight_runs = Vec::new();
    rt.block_on(async {
        for &n in &admitters {
            for design in [Design::Previous, Design::Current] {
                generous_runs.push(run(design, n, generous, &net, service, secs).await);
            }
        }
        for &n in &admitters {
            for design in [Design::Previous, Design::Current] {
                tight_runs.push(run(design, n, tight, &net, service, secs).await);
            }
        }
    });

    println!();
    println!(
        "Limit {}/s burst {} (cannot bind in the run): every limited answer is a contention deferral.",
        generous.per_second, generous.burst
    );
    println!();
    println!(
        "| design | admitters | admitted/s | writes applied/s (item) | writes refused/s | \
         contention deferrals (% of attempts) | admission p50 / p99 ms | queue + service per call ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &generous_runs {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.2} % | {:.1} / {:.1} | {:.2} |",
            r.design.label(),
            r.admitters,
            r.per_s(r.tally.admitted),
            r.per_s(r.applied),
            r.per_s(r.refused),
            r.pct(r.tally.contention),
            r.latency_ms(0.5),
            r.latency_ms(0.99),
            r.queue_ms,
        );
        assert_eq!(r.tally.limited, r.tally.contention, "the generous limit bound");
    }
    let loads: u64 = generous_runs.iter().map(|r| r.loads).sum();
    println!();
    println!("(reads: {loads} in all, one per sender of the previous design)");

    println!();
    println!(
        "Limit {}/s burst {}: admissions never above burst + rate·t (t: first to last admitted `now`).",
        tight.per_second, tight.burst
    );
    println!();
    println!(
        "| design | admitters | admitted | bound | admitted/s | limited (% of attempts) | \
         of which contention | writes applied/s | writes refused/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &tight_runs {
        let bound = r.bound(&tight);
        println!(
            "| {} | {} | {} | {} | {:.0} | {:.1} % | {:.2} % | {:.0} | {:.0} |",
            r.design.label(),
            r.admitters,
            r.tally.admitted,
            bound,
            r.per_s(r.tally.admitted),
            r.pct(r.tally.limited),
            r.pct(r.tally.contention),
            r.per_s(r.applied),
            r.per_s(r.refused),
        );
        assert!(r.tally.admitted <= bound, "{} admitted above the bound", r.design.label());
    }

    let all = generous_runs.iter().chain(&tight_runs);
    let lag = all.clone().map(|r| r.wake_lag_ms).fold(f64::MIN, f64::max);
    let late: u64 = all.map(|r| r.late).sum();
    println!();
    println!(
        "(simulation health: mean wake-up offset from the simulated instant, worst run: {lag:+.2} ms; \
         {late} calls reached the item after a later-sent one had been applied, and were applied next)"
    );

    if let Some(r) = generous_runs.iter().find(|r| r.design == Design::Current && r.admitters == 100) {
        let (rate, deferred) = (r.per_s(r.tally.admitted), r.pct(r.tally.contention));
        let met = rate >= 1000.0 && deferred < 1.0;
        println!();
        println!(
            "goal (100 admitters, current design): >= 1000 admissions/s with < 1 % contention deferrals: \
             {rate:.0}/s, {deferred:.2} % -> {}",
            if met { "met" } else { "missed" }
        );
    }
}
