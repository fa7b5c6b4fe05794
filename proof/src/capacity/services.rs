//! The modelled AWS services, each behind the port the real sender already uses: DynamoDB as the
//! ledger ([`ClaimLedger`]) and the rate buckets' store ([`BucketStore`]), SES as the [`Mailer`],
//! EventBridge Scheduler as the [`Parker`]. Each call costs a sampled latency in simulated time and
//! meets the service's published limits; a call over a limit is throttled, as the real one is.
//! The rows and buckets themselves are the core's in-memory adapters, so every conditional write
//! is decided by the project's own rules, in the order calls reach the item.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use notice_ledger::ledger::{
    Claim, ClaimLedger, ClaimOutcome, ClaimRequest, LedgerRow, RowReader, WithdrawRequest,
};
use notice_ledger::mailer::{Mailer, NotAccepted, OutgoingMail, SendResult};
use notice_ledger::park::{ParkError, ParkRefusal, ParkRequest, Parked, Parker};
use notice_ledger::rate::{Applied, BucketError, BucketState, BucketStore, MemoryBuckets};
use notice_ledger::{LedgerError, NoticeKey};
use notice_testkit::MemoryLedger;
use rand::rngs::StdRng;

use super::clock::{since_epoch, Clock, Us};
use super::meter::{Gauge, Meter, Peak};
use super::producer::notice_of;
use super::world::{lock, rng, Ev, Latency, Shared};

/// DynamoDB's limits as the model applies them (defaults and sources: docs/capacity.md).
#[derive(Clone, Debug)]
pub(super) struct DynamoLimits {
    pub(super) latency: Latency,
    /// One partition — one item — takes at most this many write units a second.
    pub(super) item_wcu: f64,
    /// What the table serves at the start: a new on-demand table's 4 000 writes/s, or the warm
    /// throughput it was given.
    pub(super) table_wcu: f64,
    pub(super) table_rcu: f64,
    /// The per-table on-demand quota (40 000 by default), the most it grows to.
    pub(super) quota_wcu: f64,
    pub(super) quota_rcu: f64,
}

/// A partition's 1 000 writes a second is a hard ceiling: burst capacity does not lift it, so an
/// item's meter holds only a tenth of a second.
const PARTITION_BURST_SECS: f64 = 0.1;

/// The open-claims index is sharded by the key's first hex digit (16 partition-key values).
const INDEX_SHARDS: usize = 16;

#[derive(Default)]
pub(super) struct DynamoBooks {
    pub(super) calls: u64,
    /// Calls by operation (`claim`, `batch_read`, `token` …), to say what a figure is made of.
    pub(super) by_op: std::collections::BTreeMap<&'static str, u64>,
    /// Token writes whose condition failed (the bucket was full, or crossed between idle and
    /// busy since the writer last saw it): each is answered with the item and retried.
    pub(super) refused_token_writes: u64,
    pub(super) wcu: f64,
    pub(super) rcu: f64,
    pub(super) throttled: u64,
    pub(super) table_w: Peak,
    pub(super) table_r: Peak,
    /// Every bucket item's write demand (throttled calls included), and the writes it served.
    pub(super) items: HashMap<String, Peak>,
    pub(super) served: HashMap<String, Peak>,
    pub(super) index: Vec<Peak>,
    /// First throttle: when, and which limit.
    pub(super) first_throttle: Option<(Us, &'static str)>,
}

impl DynamoBooks {
    pub(super) fn hottest_item(&self) -> (String, f64) {
        self.items
            .iter()
            .map(|(k, p)| (k.clone(), p.peak()))
            .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .unwrap_or_default()
    }

    /// The most writes a second any one bucket item served: its admission ceiling when saturated.
    pub(super) fn most_served(&self) -> f64 {
        self.served.values().map(Peak::peak).fold(0.0, f64::max)
    }

    pub(super) fn hottest_index_shard(&self) -> f64 {
        self.index.iter().map(Peak::peak).fold(0.0, f64::max)
    }
}

struct DynamoState {
    table_w: Meter,
    table_r: Meter,
    items: HashMap<String, Meter>,
    index: Vec<Meter>,
    /// The busiest second so far: an on-demand table serves up to twice it.
    peak_w: f64,
    peak_r: f64,
    second: i64,
    books: DynamoBooks,
}

/// What one call touches besides the table itself.
#[derive(Clone, Copy)]
enum Touch<'a> {
    Nothing,
    /// A bucket item (one partition key, all writes on one partition).
    Item(&'a str),
    /// The row's entry in the open-claims index shard (a GSI write, throttling the base write).
    Index(usize),
}

pub(super) struct Dynamo {
    clock: Clock,
    rng: Mutex<StdRng>,
    limits: DynamoLimits,
    rows: MemoryLedger,
    buckets: MemoryBuckets,
    state: Mutex<DynamoState>,
}

impl Dynamo {
    pub(super) fn new(clock: Clock, seed: u64, limits: DynamoLimits) -> Self {
        let state = DynamoState {
            table_w: Meter::new(limits.table_wcu, 1.0),
            table_r: Meter::new(limits.table_rcu, 1.0),
            items: HashMap::new(),
            index: (0..INDEX_SHARDS).map(|_| Meter::new(limits.item_wcu, PARTITION_BURST_SECS)).collect(),
            peak_w: 0.0,
            peak_r: 0.0,
            second: 0,
            books: DynamoBooks { index: vec![Peak::default(); INDEX_SHARDS], ..DynamoBooks::default() },
        };
        Self {
            clock,
            rng: rng(seed, 1),
            limits,
            rows: MemoryLedger::new(),
            buckets: MemoryBuckets::default(),
            state: Mutex::new(state),
        }
    }

    pub(super) fn books<R>(&self, f: impl FnOnce(&DynamoBooks) -> R) -> R {
        f(&lock(&self.state).books)
    }

    /// The ledger's row for `key`, read outside simulated time (the report).
    pub(super) async fn row(&self, key: &NoticeKey) -> Option<LedgerRow> {
        self.rows.get(key).await.ok().flatten()
    }

    /// Meters one call of `wcu` write and `rcu` read units at now; `Err` if a limit throttles it.
    fn meter(&self, op: &'static str, wcu: f64, rcu: f64, touch: Touch<'_>) -> Result<(), &'static str> {
        let now = self.clock.now();
        let mut s = lock(&self.state);
        let s = &mut *s;
        // On-demand growth: once a second, serve up to twice the busiest second so far.
        let second = now.div_euclid(1_000_000);
        if second != s.second {
            s.peak_w = s.peak_w.max(s.books.table_w.peak());
            s.peak_r = s.peak_r.max(s.books.table_r.peak());
            s.second = second;
            let w = (2.0 * s.peak_w).max(self.limits.table_wcu).min(self.limits.quota_wcu);
            let r = (2.0 * s.peak_r).max(self.limits.table_rcu).min(self.limits.quota_rcu);
            if w > s.table_w.rate() {
                s.table_w.set_rate(w, 1.0);
            }
            if r > s.table_r.rate() {
                s.table_r.set_rate(r, 1.0);
            }
        }
        s.books.calls += 1;
        *s.books.by_op.entry(op).or_default() += 1;
        s.books.table_w.add(wcu, now);
        s.books.table_r.add(rcu, now);
        let item_ok = match touch {
            Touch::Nothing => true,
            Touch::Item(item) => {
                s.books.items.entry(item.to_owned()).or_default().add(wcu, now);
                let limit = self.limits.item_wcu;
                s.items
                    .entry(item.to_owned())
                    .or_insert_with(|| Meter::new(limit, PARTITION_BURST_SECS))
                    .has(wcu, now)
            }
            Touch::Index(shard) => {
                s.books.index[shard].add(1.0, now);
                s.index[shard].has(1.0, now)
            }
        };
        let table_ok = s.table_w.has(wcu, now) && s.table_r.has(rcu, now);
        if !(item_ok && table_ok) {
            s.books.throttled += 1;
            let which = match (item_ok, touch) {
                (false, Touch::Item(_)) => "DynamoDB writes/s on one bucket item",
                (false, _) => "DynamoDB writes/s on one open-claims index shard",
                _ if wcu > 0.0 => "DynamoDB table writes/s",
                _ => "DynamoDB table reads/s",
            };
            s.books.first_throttle.get_or_insert((now, which));
            return Err(which);
        }
        s.table_w.take(wcu);
        s.table_r.take(rcu);
        match touch {
            Touch::Item(item) => {
                if let Some(m) = s.items.get_mut(item) {
                    m.take(wcu);
                }
                s.books.served.entry(item.to_owned()).or_default().add(wcu, now);
            }
            Touch::Index(shard) => {
                s.index[shard].take(1.0);
                // DynamoDB bills the index entry's write as one more write request unit.
                s.books.wcu += 1.0;
            }
            Touch::Nothing => {}
        }
        s.books.wcu += wcu;
        s.books.rcu += rcu;
        Ok(())
    }

    /// One call: metered at its start, answered after its latency. The lean client the sender
    /// uses does not retry, so a throttle comes back as the ledger being unavailable.
    async fn call(&self, op: &'static str, wcu: f64, rcu: f64, touch: Touch<'_>) -> Result<(), LedgerError> {
        let metered = self.meter(op, wcu, rcu, touch);
        let latency = self.limits.latency.sample(&mut lock(&self.rng));
        self.clock.sleep(latency).await;
        metered.map_err(|limit| LedgerError::unavailable(format!("ThrottlingException: {limit}")))
    }

    /// Counts a token write whose condition failed.
    fn refused(&self, applied: Result<Applied, BucketError>) -> Result<Applied, BucketError> {
        if matches!(applied, Ok(Applied::Refused(_))) {
            lock(&self.state).books.refused_token_writes += 1;
        }
        applied
    }
}

impl Dynamo {
    /// What a write out of `claimed` touches: the index entry's removal only when the claim was on
    /// the quarantine view (a claim made off it has none to remove).
    async fn leaving(&self, claim: &Claim) -> Touch<'static> {
        match self.rows.get(&claim.key).await {
            Ok(Some(row)) if row.on_quarantine_view => Touch::Index(index_shard(&claim.key)),
            _ => Touch::Nothing,
        }
    }
}

fn index_shard(key: &NoticeKey) -> usize {
    key.as_str().chars().next().and_then(|c| c.to_digit(16)).unwrap_or(0) as usize
}

#[async_trait]
impl RowReader for Dynamo {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        self.call("read", 0.0, 1.0, Touch::Nothing).await?;
        self.rows.get(key).await
    }

    /// `BatchGetItem`: one call, one strongly consistent read unit per key.
    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        self.call("batch_read", 0.0, keys.len() as f64, Touch::Nothing).await?;
        self.rows.get_many(keys).await
    }
}

#[async_trait]
impl ClaimLedger for Dynamo {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        // A claim made off the quarantine view writes no index entry (`on_quarantine_view`).
        let touch = if req.on_quarantine_view { Touch::Index(index_shard(&req.key)) } else { Touch::Nothing };
        self.call("claim", 1.0, 0.0, touch).await?;
        self.rows.claim(req).await
    }

    async fn commit_sent(
        &self,
        claim: &Claim,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.call("commit_sent", 1.0, 0.0, self.leaving(claim).await).await?;
        self.rows.commit_sent(claim, message_id, at).await
    }

    async fn commit_rejected(
        &self,
        claim: &Claim,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.call("commit_rejected", 1.0, 0.0, self.leaving(claim).await).await?;
        self.rows.commit_rejected(claim, reason, at).await
    }

    async fn release(&self, claim: &Claim, reason: &str, at: DateTime<Utc>) -> Result<(), LedgerError> {
        self.call("release", 1.0, 0.0, self.leaving(claim).await).await?;
        self.rows.release(claim, reason, at).await
    }

    async fn put_on_quarantine_view(&self, claim: &Claim) -> Result<(), LedgerError> {
        self.call("list_open_claim", 1.0, 0.0, Touch::Index(index_shard(&claim.key))).await?;
        self.rows.put_on_quarantine_view(claim).await
    }

    async fn record_missed(
        &self,
        req: &ClaimRequest,
        reason: &str,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        self.call("record_missed", 1.0, 0.0, Touch::Nothing).await?;
        self.rows.record_missed(req, reason).await
    }

    async fn withdraw(&self, req: &WithdrawRequest) -> Result<Option<LedgerRow>, LedgerError> {
        self.call("withdraw", 1.0, 0.0, Touch::Nothing).await?;
        self.rows.withdraw(req).await
    }
}

#[async_trait]
impl BucketStore for Dynamo {
    async fn load(&self, bucket: &str) -> Result<Option<BucketState>, BucketError> {
        self.call("token_read", 0.0, 1.0, Touch::Nothing).await?;
        self.buckets.load(bucket).await
    }

    /// `UpdateItem` with its condition: a refused condition still costs its write unit.
    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, BucketError> {
        self.call("token", 1.0, 0.0, Touch::Item(bucket)).await?;
        self.refused(self.buckets.add(bucket, add_us, now_us, max_us).await)
    }

    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, BucketError> {
        self.call("token_reset", 1.0, 0.0, Touch::Item(bucket)).await?;
        self.refused(self.buckets.reset(bucket, tat_us, now_us).await)
    }
}

/// SES v2: the account's `MaxSendRate` (a second of burst), then throttling; a send counts for its
/// notice when SES takes it, so a worker that dies before the answer has still sent it.
pub(super) struct Ses {
    clock: Clock,
    rng: Mutex<StdRng>,
    latency: Latency,
    books: Shared,
    state: Mutex<SesState>,
}

pub(super) struct SesState {
    rate: Meter,
    pub(super) peak: Peak,
    pub(super) accepted: u64,
    pub(super) throttled: u64,
    pub(super) first_throttle: Option<Us>,
}

impl Ses {
    pub(super) fn new(clock: Clock, seed: u64, max_send_rate: f64, latency: Latency, books: Shared) -> Self {
        let state = SesState {
            rate: Meter::new(max_send_rate, 1.0),
            peak: Peak::default(),
            accepted: 0,
            throttled: 0,
            first_throttle: None,
        };
        Self { clock, rng: rng(seed, 2), latency, books, state: Mutex::new(state) }
    }

    pub(super) fn state<R>(&self, f: impl FnOnce(&SesState) -> R) -> R {
        f(&lock(&self.state))
    }
}

#[async_trait]
impl Mailer for Ses {
    async fn send(&self, mail: &OutgoingMail) -> SendResult {
        let now = self.clock.now();
        let accepted = {
            let mut s = lock(&self.state);
            s.peak.add(1.0, now);
            let ok = s.rate.try_take(1.0, now);
            if ok {
                s.accepted += 1;
            } else {
                s.throttled += 1;
                s.first_throttle.get_or_insert(now);
            }
            ok
        };
        if accepted {
            if let Some(idx) = notice_of(&mail.to) {
                let mut b = lock(&self.books);
                if let Some(n) = b.notices.get_mut(idx as usize) {
                    n.sends += 1;
                    n.first_send.get_or_insert(now);
                }
            }
        }
        let latency = self.latency.sample(&mut lock(&self.rng));
        self.clock.sleep(latency).await;
        if accepted {
            SendResult::Accepted { message_id: format!("sim-{now}-{}", mail.key.prefix()) }
        } else {
            SendResult::NotAccepted {
                class: NotAccepted::Throttled,
                reason: "Maximum sending rate exceeded.".into(),
            }
        }
    }
}

/// EventBridge Scheduler's quotas as modelled.
#[derive(Clone, Debug)]
pub(super) struct SchedulerLimits {
    pub(super) latency: Latency,
    pub(super) live_quota: f64,
    pub(super) create_per_sec: f64,
    pub(super) invocations_per_sec: f64,
}

/// EventBridge Scheduler: one-time schedules named by the notice (here, by the notice's index),
/// counted against the live-schedule quota, created within the CreateSchedule rate, and invoked
/// no faster than the invocation throttle — invocations above it wait their turn.
pub(super) struct Scheduler {
    clock: Clock,
    rng: Mutex<StdRng>,
    limits: SchedulerLimits,
    books: Shared,
    state: Mutex<SchedulerState>,
}

pub(super) struct SchedulerState {
    create: Meter,
    invoke: Meter,
    /// The notice each live in-run schedule holds, with its wake-up.
    schedules: HashMap<u32, Us>,
    pub(super) live: Gauge,
    pub(super) creates: Peak,
    pub(super) invocations: Peak,
    pub(super) refused: u64,
    pub(super) first_refusal: Option<(Us, &'static str)>,
    /// The longest an invocation waited behind the throttle.
    pub(super) longest_wait: Us,
    pub(super) first_wait: Option<Us>,
}

impl Scheduler {
    /// `backlog` schedules are live when the run starts (parked before it).
    pub(super) fn new(clock: Clock, seed: u64, limits: SchedulerLimits, backlog: i64, books: Shared) -> Self {
        let state = SchedulerState {
            create: Meter::new(limits.create_per_sec, 1.0),
            invoke: Meter::new(limits.invocations_per_sec, 1.0),
            schedules: HashMap::new(),
            live: Gauge { now: backlog, peak: backlog },
            creates: Peak::default(),
            invocations: Peak::default(),
            refused: 0,
            first_refusal: None,
            longest_wait: 0,
            first_wait: None,
        };
        Self { clock, rng: rng(seed, 3), limits, books, state: Mutex::new(state) }
    }

    pub(super) fn state<R>(&self, f: impl FnOnce(&SchedulerState) -> R) -> R {
        f(&lock(&self.state))
    }

    /// A schedule is due: its invocation runs when the throttle lets it; the schedule deletes
    /// itself after it (ActionAfterCompletion DELETE). Returns when the job is back on the queue.
    pub(super) fn fire(&self, idx: u32) -> Us {
        let now = self.clock.now();
        let mut s = lock(&self.state);
        s.schedules.remove(&idx);
        s.invocations.add(1.0, now);
        let slot = s.invoke.reserve(1.0, now);
        if slot > now {
            s.longest_wait = s.longest_wait.max(slot - now);
            // A delay past a second is the throttle binding, not jitter.
            if slot - now > super::clock::SEC {
                s.first_wait.get_or_insert(now);
            }
        }
        s.live.add(-1);
        let latency = self.limits.latency.sample(&mut lock(&self.rng));
        slot + latency
    }
}

#[async_trait]
impl Parker for Scheduler {
    async fn park(&self, req: &ParkRequest<'_>) -> Result<Parked, ParkError> {
        let now = self.clock.now();
        let fire_at = since_epoch(req.at);
        let idx = notice_of(req.body);
        let answer = {
            let mut s = lock(&self.state);
            s.creates.add(1.0, now);
            let refuse = |s: &mut SchedulerState, reason, what: &'static str| {
                s.refused += 1;
                s.first_refusal.get_or_insert((now, what));
                Err(ParkError::refused(reason, what))
            };
            if !s.create.try_take(1.0, now) {
                refuse(&mut s, ParkRefusal::Throttled, "Scheduler CreateSchedule/s")
            } else if let Some(&at) = idx.and_then(|i| s.schedules.get(&i)) {
                // ConflictException: the sender reads the parked schedule's time.
                Ok(Parked::AlreadyParked { body: None, at: Some(super::clock::at(at)) })
            } else if s.live.now as f64 >= self.limits.live_quota {
                refuse(&mut s, ParkRefusal::Quota, "Scheduler live schedules")
            } else {
                s.live.add(1);
                if let Some(i) = idx {
                    s.schedules.insert(i, fire_at);
                    let mut b = lock(&self.books);
                    if let Some(n) = b.notices.get_mut(i as usize) {
                        n.scheduled = true;
                    }
                    b.outbox.push((fire_at, Ev::Fire { idx: i }));
                }
                Ok(Parked::Scheduled)
            }
        };
        let latency = self.limits.latency.sample(&mut lock(&self.rng));
        self.clock.sleep(latency).await;
        answer
    }

    async fn unpark(&self, _key: &NoticeKey) -> Result<bool, ParkError> {
        Ok(false) // the model has no withdraws
    }
}

/// The services of one run, shared by every execution environment.
pub(super) struct Services {
    pub(super) dynamo: Arc<Dynamo>,
    pub(super) ses: Arc<Ses>,
    pub(super) scheduler: Arc<Scheduler>,
}
