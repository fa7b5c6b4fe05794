//! A per-recipient-domain send rate shared by every sender instance and by replays.
//!
//! Mailbox providers throttle (and then junk) senders that burst at one domain, and Lambda scales
//! out: a limit kept in one process means nothing. Each domain has one stored token bucket, kept
//! as GCRA state (the *theoretical arrival time*, TAT, of the next send at the sustained rate) and
//! updated with one conditional write per admission, so no number of senders can take more than
//! `burst + per_second · t` tokens in any span `t`.
//!
//! The arithmetic is [`gcra`] and [`grant`] (n tokens at once), pure functions of (state, now,
//! limit). The shared part is [`BucketGate`]; the stores ([`BucketStore`]: DynamoDB, PostgreSQL,
//! SQLite, memory) take tokens with [`BucketStore::take`]. Where the store can evaluate the
//! condition at apply time (DynamoDB's conditional `UpdateItem`, the memory store) a take is one
//! write that *adds* n intervals to TAT if TAT is still within the room it was computed for, so
//! concurrent admissions queue in the store instead of failing each other's compare-and-set: a
//! write fails only when the bucket really is full (or crossed from idle to busy meanwhile), and
//! its failure returns the current TAT, so the retry is exact. The others compare-and-set.
//!
//! Why the bound holds for any interleaving: every successful take moves the one stored TAT
//! forward by k intervals and is applied only while `max(TAT, now) + k·interval ≤ now +
//! burst·interval`; that is GCRA applied k times in the order the store serialises the writes.
//!
//! Why GCRA rather than stored (tokens, last refill): one integer of state, no refill rounding, a
//! limit change applies at once to existing buckets, and TAT only ever moves forward — so a stale
//! copy can only under-estimate how full the bucket is, and a sender whose clock is behind (a
//! `now` earlier than the stored TAT) finds *less* room, never more.
//!
//! Configuration (`NOTICE_RATE_LIMITS`; on by default with [`Limit::DEFAULT`]):
//! ```json
//! { "default": { "per_second": 10, "burst": 50 },
//!   "domains": { "example.org": { "per_second": 1, "burst": 5 } } }
//! ```
//! `{}` or `off` switches it off; with only `domains`, other domains are not limited.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use rand::Rng;
use serde::Deserialize;

use crate::error::{ConfigError, LedgerError};

/// The variable the limits are read from (named in every configuration error).
pub const RATE_LIMITS_VAR: &str = "NOTICE_RATE_LIMITS";

/// Highest rate accepted: the bucket counts in microseconds.
const MAX_PER_SECOND: f64 = 1_000_000.0;
/// Largest burst accepted (keeps `burst × interval` far inside `i64` microseconds).
const MAX_BURST: u32 = 1_000_000;
/// Compare-and-set rounds before a contended admission is deferred instead.
const MAX_ATTEMPTS: u32 = 5;

/// One domain's limit: a sustained rate and how many sends may go out at once after a pause.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    pub per_second: f64,
    pub burst: u32,
}

impl Limit {
    /// The default for every domain when `NOTICE_RATE_LIMITS` is unset: 10 a second keeps one
    /// domain under SES's starting account rate (14/s), so a replay to one big mailbox provider
    /// cannot take the whole account's quota; 36 000 an hour is far above a renewal day's volume;
    /// a burst of 50 absorbs a few concurrent sender batches (10 records each) without deferring
    /// ordinary traffic.
    pub const DEFAULT: Limit = Limit { per_second: 10.0, burst: 50 };

    /// Microseconds between two tokens, rounded up so the admitted rate never exceeds `per_second`.
    pub fn interval_us(&self) -> i64 {
        ((1_000_000.0 / self.per_second).ceil() as i64).max(1)
    }

    /// How far TAT may run ahead of now and still admit: `(burst − 1)` intervals.
    pub fn tolerance_us(&self) -> i64 {
        i64::from(self.burst.saturating_sub(1)).saturating_mul(self.interval_us())
    }

    fn check(&self, what: &str) -> Result<(), String> {
        if !(self.per_second.is_finite() && self.per_second > 0.0 && self.per_second <= MAX_PER_SECOND) {
            return Err(format!("{what}: per_second must be a number above 0 and at most {MAX_PER_SECOND}"));
        }
        if self.burst == 0 || self.burst > MAX_BURST {
            return Err(format!("{what}: burst must be a whole number from 1 to {MAX_BURST}"));
        }
        Ok(())
    }

    /// When a limited job should come back: when its token is due, spread over the time the whole
    /// bucket needs to refill (1 s to 60 s), so the jobs deferred together do not return together.
    pub fn retry_at(&self, due: DateTime<Utc>) -> DateTime<Utc> {
        let refill_ms = i64::from(self.burst).saturating_mul(self.interval_us()) / 1000;
        let spread_ms = refill_ms.clamp(1000, 60_000);
        due + Duration::milliseconds(rand::thread_rng().gen_range(0..=spread_ms))
    }
}

/// Limits per recipient domain. Built only by [`RateLimits::parse`] or [`RateLimits::builtin`],
/// so every limit in it is valid.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimits {
    default: Option<Limit>,
    domains: BTreeMap<String, Limit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitsJson {
    default: Option<Limit>,
    #[serde(default)]
    domains: BTreeMap<String, Limit>,
}

impl RateLimits {
    /// The limits in force when `NOTICE_RATE_LIMITS` is unset: [`Limit::DEFAULT`] for every domain.
    pub fn builtin() -> Self {
        Self { default: Some(Limit::DEFAULT), domains: BTreeMap::new() }
    }

    /// Parses `NOTICE_RATE_LIMITS`. `Ok(None)` means off (`off`, `"off"` or `{}`); anything
    /// unreadable or out of range is an error naming the variable.
    pub fn parse(text: &str) -> Result<Option<Self>, ConfigError> {
        let invalid = |reason: String| ConfigError::Invalid { name: RATE_LIMITS_VAR, reason };
        let text = text.trim();
        if text == "off" || text == "\"off\"" {
            return Ok(None);
        }
        let json: RateLimitsJson = serde_json::from_str(text).map_err(|e| {
            if text.contains("interval_secs") {
                invalid(format!(
                    "the fixed-window format was replaced by a token bucket: use \
                     {{\"default\":{{\"per_second\":10,\"burst\":50}},\"domains\":{{…}}}} ({e})"
                ))
            } else {
                invalid(e.to_string())
            }
        })?;
        if let Some(limit) = &json.default {
            limit.check("default").map_err(invalid)?;
        }
        let mut domains = BTreeMap::new();
        for (domain, limit) in json.domains {
            let domain = domain.trim().to_ascii_lowercase();
            if domain.is_empty() || domain.contains(['@', '#', ' ']) {
                return Err(invalid(format!("{domain:?} is not a domain name")));
            }
            limit.check(&format!("domain {domain}")).map_err(invalid)?;
            if domains.insert(domain.clone(), limit).is_some() {
                return Err(invalid(format!("domain {domain} is listed twice")));
            }
        }
        if json.default.is_none() && domains.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self { default: json.default, domains }))
    }

    /// The limit for `domain` (lower case), or `None` when it is not limited.
    pub fn limit_for(&self, domain: &str) -> Option<Limit> {
        self.domains.get(domain).copied().or(self.default)
    }

    /// One line for start-up logs and `noticectl` banners.
    pub fn describe(&self) -> String {
        let one = |l: &Limit| format!("{}/s burst {}", l.per_second, l.burst);
        let default = self.default.as_ref().map_or("not limited".to_owned(), one);
        if self.domains.is_empty() {
            return format!("every domain {default}");
        }
        let listed: Vec<String> = self.domains.iter().map(|(d, l)| format!("{d} {}", one(l))).collect();
        format!("{}; other domains {default}", listed.join(", "))
    }
}

// ── The arithmetic ──

/// Stored state of one domain's bucket: the theoretical arrival time of the next send at the
/// sustained rate, in microseconds since the epoch. It only ever moves forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BucketState {
    pub tat_us: i64,
}

/// What [`gcra`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Take a token: store this state (conditional on the state it was computed from).
    Admit(BucketState),
    /// No token now; the next one is due at this instant (microseconds since the epoch).
    Limited { due_us: i64 },
}

/// GCRA: admit at `now_us` when the bucket's TAT is at most `(burst − 1)` intervals ahead; an
/// admission moves TAT one interval past `max(TAT, now)`. `None` is an empty (full-of-tokens)
/// bucket. A `now` earlier than the stored TAT keeps the stored TAT, so a lagging clock sees less
/// room, never more; over any span `t` at most `burst + t / interval` sends are admitted.
pub fn gcra(state: Option<BucketState>, now_us: i64, limit: &Limit) -> Decision {
    let tat = state.map_or(now_us, |s| s.tat_us.max(now_us));
    let tolerance = limit.tolerance_us();
    if tat.saturating_sub(now_us) > tolerance {
        return Decision::Limited { due_us: tat.saturating_sub(tolerance) };
    }
    Decision::Admit(BucketState { tat_us: tat.saturating_add(limit.interval_us()) })
}

/// What [`grant`] decided for a request of several tokens at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Tokens granted (0 ..= wanted).
    pub granted: u32,
    /// The state to store when `granted > 0`: TAT `granted` intervals past `max(TAT, now)`.
    pub next: BucketState,
    /// When the next token after these is due (microseconds since the epoch).
    pub due_us: i64,
}

/// GCRA for `want` tokens at once: as many as fit at `now_us` (up to `want`), so a batch's records
/// to one domain take their tokens in one write. Equal to calling [`gcra`] `granted` times.
pub fn grant(state: Option<BucketState>, now_us: i64, want: u32, limit: &Limit) -> Grant {
    let interval = limit.interval_us();
    let base = state.map_or(now_us, |s| s.tat_us.max(now_us));
    let ceiling = now_us.saturating_add(i64::from(limit.burst).saturating_mul(interval));
    let room = u32::try_from(ceiling.saturating_sub(base).max(0) / interval).unwrap_or(u32::MAX);
    let granted = want.min(room);
    let tat = base.saturating_add(i64::from(granted).saturating_mul(interval));
    Grant { granted, next: BucketState { tat_us: tat }, due_us: tat.saturating_sub(limit.tolerance_us()) }
}

/// Tokens available at `now_us` (what a gate would admit in a row right now): for operators and
/// tests.
pub fn tokens(state: Option<BucketState>, now_us: i64, limit: &Limit) -> u32 {
    let Some(state) = state else { return limit.burst };
    let ahead = state.tat_us.saturating_sub(now_us).max(0);
    let room = limit.tolerance_us().saturating_add(limit.interval_us()).saturating_sub(ahead);
    u32::try_from(room.max(0) / limit.interval_us()).unwrap_or(u32::MAX).min(limit.burst)
}

fn micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

fn instant(us: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(us).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

// ── Ports ──

/// Whether a send to a domain may start now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    /// No token: come back at `retry_at` (the token's due time plus jitter).
    Limited {
        retry_at: DateTime<Utc>,
    },
}

/// The rate port the send path uses.
#[async_trait]
pub trait RateGate: Send + Sync {
    /// Takes one token for `domain` at `now`, or says when to come back.
    async fn admit(&self, domain: &str, now: DateTime<Utc>) -> Result<Admission, LedgerError>;

    /// Token writes that failed their condition since the last call (`TokenWriteConflicts`).
    fn take_conflicts(&self) -> u64 {
        0
    }
}

/// What a conditional bucket write found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swap {
    /// The bucket held the expected state and now holds the new one.
    Done,
    /// It held this instead (`None`: no bucket); nothing was written.
    Conflict(Option<BucketState>),
}

/// What a [`BucketStore::take`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    /// Tokens taken (0 when the bucket had no room).
    pub granted: u32,
    /// The bucket as the take left (or, when nothing was granted, found) it.
    pub state: Option<BucketState>,
    /// Writes that failed their condition on the way (each returned the current state).
    pub conflicts: u32,
}

/// Where buckets are stored: one record per domain. Every adapter passes the same suite
/// (`tests/harness/ledger_suite/buckets.rs`).
#[async_trait]
pub trait BucketStore: Send + Sync {
    /// Takes up to `want` tokens for `domain` at `now_us`, starting from `hint` (a remembered,
    /// possibly older state: TAT only moves forward, so it never over-estimates the room).
    ///
    /// The default is compare-and-set over [`BucketStore::swap`]; stores that can check the room
    /// at apply time override it with one conditional increment (and say so in
    /// [`BucketStore::takes_atomically`]).
    async fn take(
        &self,
        domain: &str,
        want: u32,
        now_us: i64,
        limit: &Limit,
        hint: Option<BucketState>,
    ) -> Result<Taken, LedgerError> {
        let mut known = match hint {
            Some(state) => Some(state),
            None => self.load(domain).await?,
        };
        let mut conflicts = 0;
        for _ in 0..MAX_ATTEMPTS {
            let g = grant(known, now_us, want, limit);
            if g.granted == 0 {
                return Ok(Taken { granted: 0, state: known, conflicts });
            }
            match self.swap(domain, known, g.next).await? {
                Swap::Done => return Ok(Taken { granted: g.granted, state: Some(g.next), conflicts }),
                Swap::Conflict(current) => {
                    conflicts += 1;
                    known = current;
                }
            }
        }
        // Every lost round means another sender took a token: the domain is busy, not down.
        Ok(Taken { granted: 0, state: known, conflicts })
    }

    /// Whether [`BucketStore::take`] is one write checked at apply time, so concurrent takes do
    /// not fail each other (the gate then does not serialise a process's admissions per domain).
    fn takes_atomically(&self) -> bool {
        false
    }

    /// The stored state of `domain`'s bucket (`None`: no bucket yet), strongly consistent.
    async fn load(&self, domain: &str) -> Result<Option<BucketState>, LedgerError>;

    /// Stores `new` if the bucket still holds `expected` (`None`: no bucket yet) — one
    /// conditional write; otherwise returns what it holds.
    async fn swap(
        &self,
        domain: &str,
        expected: Option<BucketState>,
        new: BucketState,
    ) -> Result<Swap, LedgerError>;
}

#[async_trait]
impl<T: BucketStore + ?Sized> BucketStore for Arc<T> {
    async fn take(
        &self,
        domain: &str,
        want: u32,
        now_us: i64,
        limit: &Limit,
        hint: Option<BucketState>,
    ) -> Result<Taken, LedgerError> {
        (**self).take(domain, want, now_us, limit, hint).await
    }
    fn takes_atomically(&self) -> bool {
        (**self).takes_atomically()
    }
    async fn load(&self, domain: &str) -> Result<Option<BucketState>, LedgerError> {
        (**self).load(domain).await
    }
    async fn swap(
        &self,
        domain: &str,
        expected: Option<BucketState>,
        new: BucketState,
    ) -> Result<Swap, LedgerError> {
        (**self).swap(domain, expected, new).await
    }
}

/// The shared gate: limits + a bucket store + this process's last-seen state per domain.
///
/// The remembered state saves the read before a write: it is at worst older than the stored
/// one, and since TAT only moves forward an old state never admits what the stored one would
/// refuse — the conditional write catches it and returns the current state. A "limited"
/// computed from it costs no call at all.
pub struct BucketGate {
    store: Arc<dyn BucketStore>,
    limits: RateLimits,
    seen: Mutex<HashMap<String, BucketState>>,
    /// One admission per domain at a time in this process: records of one batch to one domain
    /// would otherwise race each other's conditional writes and defer for contention, not rate.
    turns: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    wall_clock: bool,
    /// Token writes that failed their condition since last drained (`TokenWriteConflicts`).
    conflicts: std::sync::atomic::AtomicU64,
}

impl BucketGate {
    pub fn new(store: Arc<dyn BucketStore>, limits: RateLimits) -> Self {
        Self {
            store,
            limits,
            seen: Mutex::new(HashMap::new()),
            turns: Mutex::new(HashMap::new()),
            wall_clock: false,
            conflicts: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// A gate over buckets in this process only (tests, simulations).
    pub fn in_memory(limits: RateLimits) -> Self {
        Self::new(Arc::new(MemoryBuckets::default()), limits)
    }

    /// Counts on the real clock, read at the moment of admission, whatever `now` a caller passes:
    /// the sender's `now` is taken when a record starts, and a record that started a moment
    /// earlier than the one that took the last token would find less room than there is. Also for
    /// `noticectl send --now`, where the pinned instant is for send windows only.
    pub fn on_wall_clock(mut self) -> Self {
        self.wall_clock = true;
        self
    }

    pub fn limits(&self) -> &RateLimits {
        &self.limits
    }

    fn remembered(&self, domain: &str) -> Option<BucketState> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).get(domain).copied()
    }

    fn remember(&self, domain: &str, state: Option<BucketState>) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        match state {
            Some(state) => seen.insert(domain.to_owned(), state),
            None => seen.remove(domain),
        };
    }
}

#[async_trait]
impl RateGate for BucketGate {
    async fn admit(&self, domain: &str, now: DateTime<Utc>) -> Result<Admission, LedgerError> {
        let Some(limit) = self.limits.limit_for(domain) else {
            return Ok(Admission::Admitted);
        };
        // Compare-and-set stores: one admission per domain at a time in this process, or the
        // records of one batch would race each other's writes and defer for contention.
        let turn = (!self.store.takes_atomically()).then(|| {
            let mut turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(turns.entry(domain.to_owned()).or_default())
        });
        let _turn = match &turn {
            Some(turn) => Some(turn.lock().await),
            None => None,
        };
        let now = if self.wall_clock { Utc::now() } else { now };
        let now_us = micros(now);
        let taken = self.store.take(domain, 1, now_us, &limit, self.remembered(domain)).await?;
        self.remember(domain, taken.state);
        self.conflicts.fetch_add(u64::from(taken.conflicts), std::sync::atomic::Ordering::Relaxed);
        if taken.granted > 0 {
            return Ok(Admission::Admitted);
        }
        let due_us = match grant(taken.state, now_us, 1, &limit) {
            g if g.granted == 0 => g.due_us,
            // Room now, yet nothing granted: every round lost to another sender — busy, not down.
            _ => now_us.saturating_add(limit.interval_us()),
        };
        tracing::debug!(domain, conflicts = taken.conflicts, "no token");
        Ok(Admission::Limited { retry_at: limit.retry_at(instant(due_us)) })
    }

    fn take_conflicts(&self) -> u64 {
        self.conflicts.swap(0, std::sync::atomic::Ordering::Relaxed)
    }
}

/// Buckets in this process only (tests, simulations).
#[derive(Default)]
pub struct MemoryBuckets {
    buckets: Mutex<HashMap<String, BucketState>>,
}

#[async_trait]
impl BucketStore for MemoryBuckets {
    async fn take(
        &self,
        domain: &str,
        want: u32,
        now_us: i64,
        limit: &Limit,
        _hint: Option<BucketState>,
    ) -> Result<Taken, LedgerError> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let current = buckets.get(domain).copied();
        let g = grant(current, now_us, want, limit);
        if g.granted == 0 {
            return Ok(Taken { granted: 0, state: current, conflicts: 0 });
        }
        buckets.insert(domain.to_owned(), g.next);
        Ok(Taken { granted: g.granted, state: Some(g.next), conflicts: 0 })
    }

    fn takes_atomically(&self) -> bool {
        true
    }

    async fn load(&self, domain: &str) -> Result<Option<BucketState>, LedgerError> {
        Ok(self.buckets.lock().unwrap_or_else(|p| p.into_inner()).get(domain).copied())
    }

    async fn swap(
        &self,
        domain: &str,
        expected: Option<BucketState>,
        new: BucketState,
    ) -> Result<Swap, LedgerError> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let current = buckets.get(domain).copied();
        if current != expected {
            return Ok(Swap::Conflict(current));
        }
        buckets.insert(domain.to_owned(), new);
        Ok(Swap::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn limit(per_second: f64, burst: u32) -> Limit {
        Limit { per_second, burst }
    }

    /// Runs arrivals (µs, any order) through `gcra` from an empty bucket; returns the admitted ones.
    fn admitted(arrivals: &[i64], l: &Limit) -> Vec<i64> {
        let mut state = None;
        let mut out = Vec::new();
        for &now in arrivals {
            if let Decision::Admit(next) = gcra(state, now, l) {
                assert!(state.is_none_or(|s: BucketState| next.tat_us > s.tat_us), "TAT moves forward");
                state = Some(next);
                out.push(now);
            }
        }
        out
    }

    proptest! {
        /// Never more than `burst + rate · t` admissions in any span `t`, for sorted arrivals.
        #[test]
        fn never_over_burst_plus_rate_times_t(
            per_second in 0.01f64..2000.0,
            burst in 1u32..60,
            gaps in proptest::collection::vec(0i64..400_000, 1..400),
        ) {
            let l = limit(per_second, burst);
            let mut now = 1_700_000_000_000_000i64;
            let arrivals: Vec<i64> = gaps.iter().map(|g| { now += g; now }).collect();
            let got = admitted(&arrivals, &l);
            for (i, start) in got.iter().enumerate() {
                for (j, end) in got.iter().enumerate().skip(i) {
                    let n = (j - i + 1) as f64;
                    let span_s = (end - start) as f64 / 1e6;
                    prop_assert!(n <= f64::from(burst) + per_second * span_s + 1e-9,
                        "{n} sends in {span_s} s at {per_second}/s burst {burst}");
                }
            }
        }

        /// A bucket left alone refills exactly: `k` intervals after draining, exactly `k` tokens
        /// (up to the burst), and a full bucket admits exactly `burst` at one instant.
        #[test]
        fn refill_is_exact(per_second in 0.01f64..5000.0, burst in 1u32..200, k in 0u32..250) {
            let l = limit(per_second, burst);
            let t0 = 1_700_000_000_000_000i64;
            let drained = admitted(&vec![t0; burst as usize + 5], &l);
            prop_assert_eq!(drained.len(), burst as usize);
            let mut state = Some(BucketState { tat_us: t0 + i64::from(burst) * l.interval_us() });
            let later = t0 + i64::from(k) * l.interval_us();
            let expect = k.min(burst);
            prop_assert_eq!(tokens(state, later, &l), expect);
            let mut n = 0;
            while let Decision::Admit(next) = gcra(state, later, &l) {
                state = Some(next);
                n += 1;
            }
            prop_assert_eq!(n, expect);
        }

        /// Clock skew: arrivals in any order (a sender whose clock lags behind the stored TAT)
        /// never admit more than `burst + rate · (latest − earliest)`, and an earlier `now` never
        /// admits where a later one would not.
        #[test]
        fn a_lagging_clock_never_admits_extra(
            per_second in 0.01f64..2000.0,
            burst in 1u32..60,
            offsets in proptest::collection::vec(0i64..5_000_000, 1..300),
            tat_ahead in 0i64..10_000_000,
            back in 0i64..10_000_000,
        ) {
            let l = limit(per_second, burst);
            let t0 = 1_700_000_000_000_000i64;
            let arrivals: Vec<i64> = offsets.iter().map(|o| t0 + o).collect();
            let got = admitted(&arrivals, &l).len() as f64;
            let span = (offsets.iter().max().unwrap() - offsets.iter().min().unwrap()) as f64 / 1e6;
            prop_assert!(got <= f64::from(burst) + per_second * span + 1e-9);

            let state = Some(BucketState { tat_us: t0 + tat_ahead });
            let earlier = t0 - back;
            if matches!(gcra(state, earlier, &l), Decision::Admit(_)) {
                prop_assert!(matches!(gcra(state, t0, &l), Decision::Admit(_)));
            }
            prop_assert!(tokens(state, earlier, &l) <= tokens(state, t0, &l));
        }
    }

    proptest! {
        /// n tokens at once are exactly n single admissions: the same count, the same state.
        #[test]
        fn n_tokens_in_one_write_equal_n_single_admissions(
            per_second in 0.01f64..5000.0,
            burst in 1u32..200,
            want in 0u32..300,
            ahead in -5_000_000i64..50_000_000,
        ) {
            let l = limit(per_second, burst);
            let now = 1_700_000_000_000_000i64;
            let start = Some(BucketState { tat_us: now + ahead });
            let g = grant(start, now, want, &l);
            let mut state = start;
            let mut singles = 0;
            while singles < want {
                match gcra(state, now, &l) {
                    Decision::Admit(next) => { state = Some(next); singles += 1; }
                    Decision::Limited { .. } => break,
                }
            }
            prop_assert_eq!(g.granted, singles);
            if singles > 0 {
                prop_assert_eq!(Some(g.next), state);
            }
            prop_assert!(g.granted <= burst);
        }

        /// Takes of any size from senders with skewed clocks, applied in any order (the order the
        /// store serialises them): never more than `burst + rate · (latest − earliest)` tokens, and
        /// for clocks in order never more than `burst + rate · t` in any span `t`.
        #[test]
        fn concurrent_n_token_takes_never_exceed_the_bound(
            per_second in 0.01f64..2000.0,
            burst in 1u32..60,
            takes in proptest::collection::vec((0i64..5_000_000, 1u32..12), 1..200),
        ) {
            let l = limit(per_second, burst);
            let t0 = 1_700_000_000_000_000i64;
            let apply = |order: &[(i64, u32)]| {
                let mut state = None;
                let mut granted = Vec::new();
                for &(offset, want) in order {
                    let g = grant(state, t0 + offset, want, &l);
                    if g.granted > 0 {
                        prop_assert!(state.is_none_or(|s: BucketState| g.next.tat_us > s.tat_us), "TAT moves forward");
                        state = Some(g.next);
                        granted.push((offset, g.granted));
                    }
                }
                Ok(granted)
            };
            let any_order = apply(&takes)?;
            let total: u32 = any_order.iter().map(|(_, k)| k).sum();
            let span = (takes.iter().map(|t| t.0).max().unwrap() - takes.iter().map(|t| t.0).min().unwrap()) as f64 / 1e6;
            prop_assert!(f64::from(total) <= f64::from(burst) + per_second * span + 1e-9, "{total} in {span} s");

            let mut sorted = takes.clone();
            sorted.sort_by_key(|t| t.0);
            let in_order = apply(&sorted)?;
            for i in 0..in_order.len() {
                let mut n = 0u32;
                for j in i..in_order.len() {
                    n += in_order[j].1;
                    let span_s = (in_order[j].0 - in_order[i].0) as f64 / 1e6;
                    prop_assert!(f64::from(n) <= f64::from(burst) + per_second * span_s + 1e-9,
                        "{n} tokens in {span_s} s at {per_second}/s burst {burst}");
                }
            }
        }
    }

    #[tokio::test]
    async fn the_memory_store_takes_many_tokens_in_one_step_and_the_rest_are_limited() {
        let store = MemoryBuckets::default();
        let l = limit(10.0, 5);
        let now = 1_700_000_000_000_000i64;
        let first = store.take("x.example", 3, now, &l, None).await.unwrap();
        assert_eq!(first.granted, 3);
        let second = store.take("x.example", 4, now, &l, None).await.unwrap();
        assert_eq!(second.granted, 2, "only the burst's rest fits");
        let third = store.take("x.example", 1, now, &l, None).await.unwrap();
        assert_eq!((third.granted, third.state), (0, second.state), "full: nothing written");
        assert_eq!(store.take("x.example", 1, now + l.interval_us(), &l, None).await.unwrap().granted, 1);
        assert!(store.takes_atomically());
    }

    #[tokio::test]
    async fn memory_gate_admits_the_burst_then_one_per_interval_and_defers_with_jitter() {
        let limits = RateLimits::parse(
            r#"{"default":{"per_second":1,"burst":2},"domains":{"Slow.example":{"per_second":0.1,"burst":1}}}"#,
        )
        .unwrap()
        .unwrap();
        let gate = BucketGate::in_memory(limits);
        let t = at("2026-12-02T12:00:10Z");
        assert_eq!(gate.admit("a.example", t).await.unwrap(), Admission::Admitted);
        assert_eq!(gate.admit("a.example", t).await.unwrap(), Admission::Admitted);
        let Admission::Limited { retry_at } = gate.admit("a.example", t).await.unwrap() else { panic!() };
        // The next token is due one interval later; jitter spreads over at most the whole bucket's
        // refill (burst 2 × 1 s).
        assert!(
            retry_at >= at("2026-12-02T12:00:11Z") && retry_at <= at("2026-12-02T12:00:13Z"),
            "{retry_at}"
        );
        assert_eq!(gate.admit("slow.example", t).await.unwrap(), Admission::Admitted);
        assert!(matches!(gate.admit("slow.example", t).await.unwrap(), Admission::Limited { .. }));
        assert_eq!(gate.admit("a.example", at("2026-12-02T12:00:11Z")).await.unwrap(), Admission::Admitted);
        assert!(matches!(
            gate.admit("a.example", at("2026-12-02T12:00:11Z")).await.unwrap(),
            Admission::Limited { .. }
        ));
    }

    #[tokio::test]
    async fn two_gates_on_one_store_share_the_bucket() {
        let store = Arc::new(MemoryBuckets::default());
        let limits = RateLimits::parse(r#"{"default":{"per_second":1,"burst":3}}"#).unwrap().unwrap();
        let a = BucketGate::new(store.clone(), limits.clone());
        let b = BucketGate::new(store, limits);
        let t = at("2026-12-02T12:00:00Z");
        let mut admitted = 0;
        for _ in 0..5 {
            for gate in [&a, &b] {
                if gate.admit("x.example", t).await.unwrap() == Admission::Admitted {
                    admitted += 1;
                }
            }
        }
        assert_eq!(admitted, 3, "one burst between both gates");
    }

    /// A store whose calls take a turn of the runtime, like a network round trip.
    struct SlowStore(MemoryBuckets);

    #[async_trait]
    impl BucketStore for SlowStore {
        async fn load(&self, domain: &str) -> Result<Option<BucketState>, LedgerError> {
            tokio::task::yield_now().await;
            self.0.load(domain).await
        }
        async fn swap(
            &self,
            domain: &str,
            expected: Option<BucketState>,
            new: BucketState,
        ) -> Result<Swap, LedgerError> {
            tokio::task::yield_now().await;
            let out = self.0.swap(domain, expected, new).await;
            tokio::task::yield_now().await;
            out
        }
    }

    #[tokio::test]
    async fn a_batch_to_one_domain_is_limited_by_rate_not_by_its_own_contention() {
        let limits = RateLimits::parse(r#"{"default":{"per_second":100000,"burst":50}}"#).unwrap().unwrap();
        let gate = BucketGate::new(Arc::new(SlowStore(MemoryBuckets::default())), limits).on_wall_clock();
        let t = Utc::now();
        let admitted = futures::future::join_all((0..10).map(|_| gate.admit("gmail.com", t))).await;
        assert!(admitted.iter().all(|a| matches!(a, Ok(Admission::Admitted))), "{admitted:?}");
    }

    #[test]
    fn configuration_defaults_off_switches_and_errors_name_the_variable() {
        assert_eq!(RateLimits::builtin().limit_for("gmail.com"), Some(Limit::DEFAULT));
        for off in ["{}", "off", "\"off\"", " off ", r#"{"domains":{}}"#] {
            assert_eq!(RateLimits::parse(off).unwrap(), None, "{off}");
        }
        let only =
            RateLimits::parse(r#"{"domains":{"Example.ORG":{"per_second":2,"burst":4}}}"#).unwrap().unwrap();
        assert_eq!(only.limit_for("example.org"), Some(limit(2.0, 4)));
        assert_eq!(only.limit_for("gmail.com"), None, "only listed domains are limited");
        for bad in [
            r#"{"interval_secs":60,"default_per_interval":600}"#,
            r#"{"default":{"per_second":0,"burst":5}}"#,
            r#"{"default":{"per_second":-1,"burst":5}}"#,
            r#"{"default":{"per_second":1,"burst":0}}"#,
            r#"{"default":{"per_second":1}}"#,
            r#"{"domains":{"a@b":{"per_second":1,"burst":1}}}"#,
            r#"{"domains":{"x.org":{"per_second":1,"burst":1}},"dmains":{}}"#,
            "on",
        ] {
            let err = RateLimits::parse(bad).unwrap_err().to_string();
            assert!(err.contains(RATE_LIMITS_VAR), "{bad}: {err}");
        }
        let old = RateLimits::parse(r#"{"interval_secs":60,"default_per_interval":600}"#).unwrap_err();
        assert!(old.to_string().contains("token bucket"), "{old}");
    }

    #[test]
    fn the_interval_rounds_up_so_the_rate_is_never_exceeded() {
        assert_eq!(limit(3.0, 1).interval_us(), 333_334);
        assert_eq!(limit(10.0, 50).tolerance_us(), 49 * 100_000);
        assert_eq!(limit(0.5, 1).interval_us(), 2_000_000);
    }
}
