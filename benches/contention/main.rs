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
//! `cargo bench -p notice-benches --bench contention`. Settings: `NOTICE_BENCH_SECS` (default 2)
//! per configuration; `NOTICE_BENCH_RTT_MS` (default 5); `NOTICE_BENCH_JITTER_US` (default 1000:
//! two requests sent a fraction of a millisecond apart from different senders do not reliably
//! arrive in that order; 0 makes arrival order send order); `NOTICE_BENCH_APPLY_US` (default 100,
//! an assumption: the documented 1 000 WCU/s of one partition bounds one item's serial apply at
//! 1 ms a write, the real per-item cost is not published, and 100 µs puts the item's ceiling at
//! 10 000 writes/s so that the designs rather than the ceiling set the numbers; 1000 turns the
//! documented 1 000 writes/s into a queue); `NOTICE_BENCH_ADMITTERS` (default `10,100,1000`).
//! Without `--bench` (e.g. under `cargo test`) it runs 0.2 s with 10 admitters as a smoke test.

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use notice_ledger::rate::{
    gcra, grant, take, BucketState, BucketStore, Decision, Limit, MemoryBuckets, Taken,
};
use tokio::time::Instant;

mod store;

use store::*;

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
