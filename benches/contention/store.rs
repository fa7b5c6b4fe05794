//! The simulated DynamoDB item the benchmark races on: network legs, per-item apply order,
//! service time, and the counts.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use notice_ledger::rate::{Applied, BucketError, BucketState, BucketStore};
use rand::Rng;
use tokio::time::{sleep, sleep_until, Instant};

/// The one domain every admitter sends to.
pub(crate) const BUCKET: &str = "example.com";
/// The previous design's compare-and-set rounds before a contended admission was deferred.
pub(crate) const CAS_ROUNDS: u32 = 5;

// ───────────────────────────── simulated time ─────────────────────────────

tokio::task_local! {
    /// Where an admitter is in time: the instant its last answer arrived. Exact, unlike tokio's
    /// timer, which wakes tasks on millisecond ticks: admitters woken by one tick would otherwise
    /// all read the same `now` and start together.
    pub(crate) static AT: Cell<Option<Instant>>;
}

/// The current task's instant (outside an admitter: the clock).
pub(crate) fn at() -> Instant {
    AT.try_with(Cell::get).ok().flatten().unwrap_or_else(Instant::now)
}

pub(crate) fn set_at(instant: Instant) {
    let _ = AT.try_with(|c| c.set(Some(instant)));
}

/// The wall clock at a simulated instant, in µs since the epoch: the real clock, read at the
/// instant the admitter's answer arrived rather than when its task woke.
pub(crate) fn wall_us(epoch: (Instant, i64), instant: Instant) -> i64 {
    match instant.checked_duration_since(epoch.0) {
        Some(d) => epoch.1 + d.as_micros() as i64,
        None => epoch.1 - epoch.0.saturating_duration_since(instant).as_micros() as i64,
    }
}

// ───────────────────────────── the simulated item store ─────────────────────────────

/// A call waiting for its turn on the item.
pub(crate) enum Op {
    Read,
    Write(Box<dyn FnOnce(Option<BucketState>) -> Applied + Send>),
}

/// One bucket item: its state, the calls on their way to it, when its write queue is next free,
/// and what was done to it.
pub(crate) struct Item {
    pub(crate) state: Option<BucketState>,
    /// Calls sent and not yet applied, by (arrival instant, sequence): the apply order.
    pub(crate) in_flight: BTreeMap<(Instant, u64), Op>,
    /// Applied calls whose caller has not taken the answer: (answer, when it left the item).
    pub(crate) answered: HashMap<u64, (Applied, Instant)>,
    pub(crate) next_seq: u64,
    /// The latest arrival applied: a call sent so late that it would arrive before it (its task
    /// ran behind the simulated time) arrives just after it instead, and is counted in `late`.
    pub(crate) applied_through: Instant,
    pub(crate) late: u64,
    pub(crate) free_at: Instant,
    pub(crate) applied: u64,
    pub(crate) refused: u64,
    pub(crate) loads: u64,
}

impl Item {
    /// Applies, in order of arrival, every call that has arrived by `now`. A write starts when it
    /// has arrived and the write before it has finished, and takes `service`.
    pub(crate) fn apply_arrived(&mut self, now: Instant, service: Duration) {
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
pub(crate) struct Timing {
    pub(crate) calls: AtomicU64,
    /// Time a call waited for the item (behind earlier writes) plus its own service time.
    pub(crate) queue_us: AtomicU64,
    /// How far after the simulated instant of an answer tokio woke its task (may be negative).
    pub(crate) wake_lag_us: AtomicI64,
}

/// The previous design's write: store `new` if the item still holds exactly `expected`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Swap {
    Done,
    Conflict(Option<BucketState>),
}

pub(crate) struct SimStore {
    /// Each leg takes this plus a uniform draw from `0..=jitter`: RTT/2 on average.
    pub(crate) leg_base: Duration,
    pub(crate) jitter: Duration,
    /// The timer's mean lateness ending a sleep, taken off the way back (see [`lateness`]).
    pub(crate) lateness: Duration,
    pub(crate) service: Duration,
    pub(crate) items: Mutex<HashMap<String, Arc<Mutex<Item>>>>,
    pub(crate) timing: Timing,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `BucketStore::add`'s condition, as `MemoryBuckets` applies it.
pub(crate) fn apply_add(state: Option<BucketState>, add_us: i64, now_us: i64, max_us: i64) -> Applied {
    match state {
        Some(s) if s.tat_us >= now_us && s.tat_us <= max_us => {
            Applied::Done(BucketState { tat_us: s.tat_us.saturating_add(add_us) })
        }
        other => Applied::Refused(other),
    }
}

/// `BucketStore::reset`'s condition, as `MemoryBuckets` applies it.
pub(crate) fn apply_reset(state: Option<BucketState>, tat_us: i64, now_us: i64) -> Applied {
    match state {
        Some(s) if s.tat_us >= now_us => Applied::Refused(Some(s)),
        _ => Applied::Done(BucketState { tat_us }),
    }
}

impl SimStore {
    pub(crate) fn new(net: &Net, service: Duration) -> Self {
        Self {
            leg_base: (net.rtt / 2).saturating_sub(net.jitter / 2),
            jitter: net.jitter,
            lateness: net.lateness,
            service,
            items: Mutex::new(HashMap::new()),
            timing: Timing::default(),
        }
    }

    pub(crate) fn item(&self, bucket: &str) -> Arc<Mutex<Item>> {
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
    pub(crate) fn leg(&self) -> Duration {
        let jitter_us = u64::try_from(self.jitter.as_micros()).unwrap_or(u64::MAX);
        self.leg_base + Duration::from_micros(rand::thread_rng().gen_range(0..=jitter_us))
    }

    /// One call, sent at the admitter's simulated instant ([`at`]): it arrives a leg later and is
    /// applied after every call that arrived before it (whoever wakes first applies all that
    /// have arrived, so the order is that of the arrival instants, not of tokio's wake-ups); the
    /// answer leaves the item when the call is applied (a write: after its service) and arrives
    /// a leg later, which is the admitter's instant from then on.
    pub(crate) async fn call(&self, bucket: &str, op: Op) -> Applied {
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
    pub(crate) async fn arrive(&self, back: Instant) {
        set_at(back);
        sleep_until(back.checked_sub(self.lateness).unwrap_or(back)).await;
        let lag = match Instant::now().checked_duration_since(back) {
            Some(late) => late.as_micros() as i64,
            None => -(back.saturating_duration_since(Instant::now()).as_micros() as i64),
        };
        self.timing.wake_lag_us.fetch_add(lag, Ordering::Relaxed);
    }

    pub(crate) async fn write(
        &self,
        bucket: &str,
        apply: impl FnOnce(Option<BucketState>) -> Applied + Send + 'static,
    ) -> Applied {
        self.call(bucket, Op::Write(Box::new(apply))).await
    }

    /// The previous design's compare-and-set, with the same delays and apply order.
    pub(crate) async fn swap(&self, bucket: &str, expected: Option<BucketState>, new: BucketState) -> Swap {
        let applied = self
            .write(bucket, move |s| if s == expected { Applied::Done(new) } else { Applied::Refused(s) })
            .await;
        match applied {
            Applied::Done(_) => Swap::Done,
            Applied::Refused(current) => Swap::Conflict(current),
        }
    }

    /// A call that touches no bucket (the sender handing a limited job back to its queue).
    pub(crate) async fn other_call(&self) {
        self.arrive(at() + self.leg() + self.leg()).await;
    }

    /// (applied, refused, loads, late) on one item.
    pub(crate) fn counts(&self, bucket: &str) -> (u64, u64, u64, u64) {
        let item = self.item(bucket);
        let item = lock(&item);
        (item.applied, item.refused, item.loads, item.late)
    }
}

#[async_trait]
impl BucketStore for SimStore {
    async fn load(&self, bucket: &str) -> Result<Option<BucketState>, BucketError> {
        match self.call(bucket, Op::Read).await {
            Applied::Done(state) => Ok(Some(state)),
            Applied::Refused(state) => Ok(state),
        }
    }

    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, BucketError> {
        Ok(self.write(bucket, move |s| apply_add(s, add_us, now_us, max_us)).await)
    }

    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, BucketError> {
        Ok(self.write(bucket, move |s| apply_reset(s, tat_us, now_us)).await)
    }
}

/// The network every store in a run shares.
pub(crate) struct Net {
    pub(crate) rtt: Duration,
    pub(crate) jitter: Duration,
    pub(crate) lateness: Duration,
}

/// How late tokio's timer ends a sleep, on average: it fires on a millisecond tick after the
/// deadline. Measured over 40 sleeps of `leg` and taken off every sleep to a simulated instant,
/// so tasks run close to their simulated time (the mean offset of every run is printed).
pub(crate) async fn lateness(leg: Duration) -> Duration {
    let mut late = Duration::ZERO;
    for _ in 0..40 {
        let deadline = Instant::now() + leg;
        sleep_until(deadline).await;
        late += Instant::now().saturating_duration_since(deadline);
    }
    late / 40
}
