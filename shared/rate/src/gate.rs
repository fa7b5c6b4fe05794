//! The shared gate: limits + a bucket store + this process's last-seen state per bucket, and the
//! one take algorithm every store runs ([`take`]).
//!
//! A batch's records take their tokens together ([`BucketGate::admit_batch`]): one write per
//! (bucket, shard) — a receiving provider's, or a named domain's ([`RateLimits::bucket_for`]) —
//! for as many tokens as that bucket's records want, then one write on the account bucket for as
//! many as those granted; a long-tail domain takes only the account's. With the MX rollup on, the
//! batch's otherwise unplaced domains are looked up first, all at once and for at most 200 ms
//! ([`super::rollup`]). A sharded bucket's records take from the shard their batch's first record's
//! notice key picks (one write per bucket a batch, whatever the shard count) and spill once to the
//! next shard before they are limited.
//!
//! The remembered state saves the read before a write: it is at worst older than the stored one,
//! and since TAT only moves forward an old state never admits what the stored one would refuse —
//! the store's condition catches it and returns the current state. A "limited" computed from it
//! costs no call at all.
//!
//! **Hold-off.** On a hot bucket the remembered state shows room again one interval later, so
//! every environment with a batch for it writes about once an interval: E environments, about E
//! writes per token, nearly all refused — billed, and counted against the item's 1 000 writes a
//! second until it throttles and admits less than its rate. So an environment that *loses* a take
//! (nothing after a refused write, or — once it has been refused — less than half of what it
//! wanted) does not write that bucket before the due time plus a uniform draw over
//! `want × interval × 2^(c − 1)`, `c` its losses in a row: binary exponential backoff, so the
//! crowd's writes thin out until most of them find tokens. The span is capped at the bucket's
//! refill (`(burst − 1) × interval`, at most 60 s): every hold ends before a bucket the crowd
//! avoids could overflow. When it ends, the environment reads the bucket before writing: what it
//! remembers is stale, a write from it would likely be refused, and a read is no write on the
//! item. Its limited records come back no sooner than its hold-off ends, spread over a span that
//! doubles with `c` too ([`Limit::retry_after_losses`]), so a crowd's deferred jobs do not return
//! together. A take granted all it wanted resets `c`; a sender alone on a bucket is never refused,
//! so never held off. The hold-off only skips writes (every token is still a conditional write the
//! store checks), and draws from the gate's jitter generator: one seed, one run.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::BucketError;
use crate::gcra::{grant, instant, micros, BucketState};
use crate::limits::{DomainLimit, Limit, RateLimits};
use crate::ports::{Admission, Applied, BucketStore, RateGate, RateScope, Taken, TokenRequest};
use crate::rollup::{MxLookup, MxRollup, RollupCounters};

/// The account-wide bucket's name: `@` never occurs in a domain name.
pub const ACCOUNT_BUCKET: &str = "@account";

/// Conditional writes per take: each refused write returns the current TAT, so a second write is
/// exact unless the bucket crossed between idle and busy again meanwhile.
const TAKE_ATTEMPTS: u32 = 4;

/// Takes up to `want` tokens from `bucket` at `now_us`, starting from `hint` (a remembered,
/// possibly older state). A busy bucket (TAT ≥ now) is increased by k intervals if TAT is still at
/// most `now + (burst − k)·interval`; an idle one (TAT < now, or none) is reset to
/// `now + k·interval`. Both conditions are checked by the store as it applies the write, so takes
/// racing on one bucket are serialised there, not failed.
pub async fn take(
    store: &dyn BucketStore,
    bucket: &str,
    want: u32,
    now_us: i64,
    limit: &Limit,
    hint: Option<BucketState>,
) -> Result<Taken, BucketError> {
    let interval = limit.interval_us();
    let ceiling = now_us.saturating_add(i64::from(limit.burst).saturating_mul(interval));
    let mut known = hint;
    let mut conflicts = 0;
    for _ in 0..TAKE_ATTEMPTS {
        // No room by an older state is no room at all.
        let k = grant(known, now_us, want, limit).granted;
        if k == 0 {
            return Ok(Taken { granted: 0, state: known, conflicts });
        }
        let add = i64::from(k).saturating_mul(interval);
        let applied = match known {
            Some(state) if state.tat_us >= now_us => store.add(bucket, add, now_us, ceiling - add).await?,
            _ => store.reset(bucket, now_us.saturating_add(add), now_us).await?,
        };
        match applied {
            Applied::Done(state) => return Ok(Taken { granted: k, state: Some(state), conflicts }),
            Applied::Refused(current) => {
                conflicts += 1;
                known = current;
            }
        }
    }
    Ok(Taken { granted: 0, state: known, conflicts })
}

/// Longest hold-off, whatever the bucket's refill time (as [`Limit::retry_at`]'s spread).
const MAX_HOLD_US: i64 = 60_000_000;

/// Doublings of the hold-off span counted at most (the span is capped long before).
const MAX_HOLD_DOUBLINGS: u32 = 30;

/// What this environment knows of one bucket.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// The state last seen (`None`: no bucket, or never seen).
    state: Option<BucketState>,
    /// No write to this bucket before this instant (µs since the epoch; 0: none).
    hold_until_us: i64,
    /// Takes in a row lost to others (module doc, *Hold-off*); 0: not contended.
    lost: u32,
    /// This gate's own takes on the bucket under way, and how many it has started: a refusal
    /// while another of its own overlapped may be its own doing, not a crowd's, and holds nothing
    /// off (one Lambda environment takes once a batch, but a process may deliver concurrently).
    in_flight: u32,
    started: u64,
}

/// A take this gate has started on a bucket ([`BucketGate::begin`]).
struct Ticket {
    seen: Seen,
    number: u64,
    alone: bool,
}

/// The hold-off after the `lost`-th take lost in a row: the due time plus
/// `jitter` (in `[0, 1]`) of `want × interval × 2^(lost − 1)`, capped by the bucket's refill time
/// and [`MAX_HOLD_US`].
fn hold_until(due_us: i64, want: u32, lost: u32, limit: &Limit, jitter: f64) -> i64 {
    let interval = limit.interval_us();
    let cap = limit.tolerance_us().max(interval).min(MAX_HOLD_US);
    let base = i64::from(want.max(1)).saturating_mul(interval);
    let doublings = lost.saturating_sub(1).min(MAX_HOLD_DOUBLINGS);
    let span = base.saturating_mul(1i64 << doublings).min(cap);
    due_us.saturating_add((span as f64 * jitter.clamp(0.0, 1.0)).round() as i64)
}

/// What one bucket's take in a gate did: the take, when this gate writes the bucket next at the
/// earliest, and its losses in a row.
struct GateTake {
    taken: Taken,
    hold_until_us: i64,
    lost: u32,
}

pub struct BucketGate {
    store: Arc<dyn BucketStore>,
    limits: RateLimits,
    seen: Mutex<HashMap<String, Seen>>,
    wall_clock: bool,
    /// Token writes refused since last drained (`TokenWriteConflicts`).
    conflicts: AtomicU64,
    /// Spreads limited jobs' retries; seeded by simulations so one seed gives one run.
    jitter: Mutex<StdRng>,
    /// The MX rollup's lookup, when the limits turn it on ([`super::rollup`]).
    rollup: Option<MxRollup>,
}

impl BucketGate {
    pub fn new(store: Arc<dyn BucketStore>, limits: RateLimits) -> Self {
        Self {
            store,
            limits,
            seen: Mutex::new(HashMap::new()),
            wall_clock: false,
            conflicts: AtomicU64::new(0),
            jitter: Mutex::new(StdRng::from_entropy()),
            rollup: None,
        }
    }

    /// Looks up the MX of the domains the limits' rollup wants placed ([`RateLimits::needs_mx`])
    /// through `lookup`, and counts the lookups that gave no answer (`MxRollupFallbacks`) into
    /// `metrics` — the sender's own counters: the gate answers a whole batch, not one record.
    /// Without the rollup in the limits, nothing is ever looked up.
    pub fn with_mx_rollup(
        mut self,
        lookup: Arc<dyn MxLookup>,
        metrics: Arc<impl RollupCounters + 'static>,
    ) -> Self {
        self.rollup = Some(MxRollup::new(lookup, metrics));
        self
    }

    /// Draws retry jitter from `seed` instead of the system's entropy (simulations).
    #[cfg(any(test, feature = "testing"))]
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter = Mutex::new(StdRng::seed_from_u64(seed));
        self
    }

    fn jitter(&self) -> f64 {
        self.jitter.lock().unwrap_or_else(|p| p.into_inner()).gen()
    }

    /// A gate over buckets in this process only (tests, simulations).
    #[cfg(any(test, feature = "testing"))]
    pub fn in_memory(limits: RateLimits) -> Self {
        Self::new(Arc::new(crate::memory::MemoryBuckets::default()), limits)
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

    /// Starts a take on `bucket`: what this gate knows of it, or `Err` with it while held off.
    fn begin(&self, bucket: &str, now_us: i64) -> Result<Ticket, Seen> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let entry = seen.entry(bucket.to_owned()).or_default();
        if now_us < entry.hold_until_us {
            return Err(*entry);
        }
        let alone = entry.in_flight == 0;
        entry.in_flight += 1;
        entry.started += 1;
        Ok(Ticket { seen: *entry, number: entry.started, alone })
    }

    /// Ends a take (`None`: it failed): remembers what it found and updates the bucket's
    /// hold-off (module doc, *Hold-off*). Returns the hold-off's end and the losses in a row.
    fn finish(
        &self,
        bucket: &str,
        ticket: &Ticket,
        taken: Option<&Taken>,
        want: u32,
        now_us: i64,
        limit: &Limit,
    ) -> (i64, u32) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let entry = seen.entry(bucket.to_owned()).or_default();
        entry.in_flight = entry.in_flight.saturating_sub(1);
        let overlapped = !ticket.alone || entry.started > ticket.number;
        if let Some(taken) = taken {
            entry.state = taken.state;
            let contended = !overlapped && (entry.lost > 0 || taken.conflicts > 0);
            if taken.granted >= want {
                entry.lost = 0;
                entry.hold_until_us = 0;
            } else if contended {
                // Contended, and under half of what it wanted: lost.
                entry.lost = if taken.granted.saturating_mul(2) < want {
                    entry.lost.saturating_add(1)
                } else {
                    entry.lost.max(1)
                };
                let due_us = due(taken.state, now_us, limit);
                entry.hold_until_us = hold_until(due_us, want, entry.lost, limit, self.jitter());
            }
            // Else short but never refused by others in sight: no hold-off.
        }
        let hold = (entry.hold_until_us, entry.lost);
        if entry.state.is_none() && entry.lost == 0 && entry.in_flight == 0 {
            seen.remove(bucket);
        }
        hold
    }

    async fn take_from(
        &self,
        bucket: &str,
        want: u32,
        now_us: i64,
        limit: &Limit,
    ) -> Result<GateTake, BucketError> {
        let ticket = match self.begin(bucket, now_us) {
            Ok(ticket) => ticket,
            Err(held) => {
                // Held off: no write, and no token.
                let taken = Taken { granted: 0, state: held.state, conflicts: 0 };
                return Ok(GateTake { taken, hold_until_us: held.hold_until_us, lost: held.lost });
            }
        };
        let result = async {
            // Contended: what it remembers is stale, and a write from it would likely be refused.
            let hint = if ticket.seen.lost > 0 { self.store.load(bucket).await? } else { ticket.seen.state };
            take(&*self.store, bucket, want, now_us, limit, hint).await
        }
        .await;
        let (hold_until_us, lost) = self.finish(bucket, &ticket, result.as_ref().ok(), want, now_us, limit);
        let taken = result?;
        self.conflicts.fetch_add(u64::from(taken.conflicts), Ordering::Relaxed);
        Ok(GateTake { taken, hold_until_us, lost })
    }

    /// `want` tokens from one shard of a domain (or of the account), spilling once to the next shard; returns the
    /// tokens granted and, when short, when the primary shard's next token is due (never before
    /// this gate's hold-off on it ends).
    async fn take_domain(
        &self,
        domain: &str,
        shard: u32,
        want: u32,
        now_us: i64,
        dl: DomainLimit,
    ) -> Result<(u32, i64, u32), BucketError> {
        let limit = dl.limit.shard(dl.shards);
        let primary = self.take_from(&bucket_name(domain, shard, dl.shards), want, now_us, &limit).await?;
        let mut granted = primary.taken.granted;
        if granted < want && dl.shards > 1 {
            let next = bucket_name(domain, (shard + 1) % dl.shards, dl.shards);
            granted += self.take_from(&next, want - granted, now_us, &limit).await?.taken.granted;
        }
        Ok((granted, due(primary.taken.state, now_us, &limit).max(primary.hold_until_us), primary.lost))
    }
}

/// When the next token of a bucket in `state` is due; "now plus an interval" when it had room yet
/// granted nothing (every write lost to another sender: busy, not down).
fn due(state: Option<BucketState>, now_us: i64, limit: &Limit) -> i64 {
    let g = grant(state, now_us, 1, limit);
    if g.granted == 0 {
        g.due_us
    } else {
        now_us.saturating_add(limit.interval_us())
    }
}

/// A bucket's item: its name (a domain, `provider:<name>`, the account's), or `name#shard` when
/// it is split.
fn bucket_name(domain: &str, shard: u32, shards: u32) -> String {
    if shards <= 1 {
        domain.to_owned()
    } else {
        format!("{domain}#{shard}")
    }
}

#[async_trait]
impl RateGate for BucketGate {
    async fn admit_batch(
        &self,
        requests: &[TokenRequest],
        now: DateTime<Utc>,
    ) -> Result<Vec<Admission>, BucketError> {
        let now = if self.wall_clock { Utc::now() } else { now };
        let now_us = micros(now);
        let mut answers = vec![Admission::Admitted; requests.len()];

        // ── Providers and named domains: one take per (bucket, shard) for all of its records;
        //    a domain with no bucket of its own (the long tail) takes only the account's ──
        let by_mx = match &self.rollup {
            Some(rollup) => rollup.providers(&self.limits, requests).await,
            None => HashMap::new(),
        };
        let mut groups: BTreeMap<String, (DomainLimit, Vec<usize>)> = BTreeMap::new();
        for (i, r) in requests.iter().enumerate() {
            let bucket = match by_mx.get(&r.domain) {
                Some(&provider) => self.limits.bucket_for_rolled_up(&r.domain, provider),
                None => self.limits.bucket_for(&r.domain),
            };
            if let Some(bucket) = bucket {
                groups.entry(bucket.item).or_insert_with(|| (bucket.limit, Vec::new())).1.push(i);
            }
        }
        // A split bucket: the group's first record picks the shard for the whole group, so a
        // batch writes one item per bucket (two with the spill), not one per shard its keys
        // scatter over — batches, not records, spread over the shards.
        let takes = groups.iter().map(|(item, (dl, records))| {
            let want = u32::try_from(records.len()).unwrap_or(u32::MAX);
            let seed = records.first().map_or(0, |&i| requests[i].shard_seed);
            let shard = (seed % u64::from(dl.shards)) as u32;
            self.take_domain(item, shard, want, now_us, *dl)
        });
        let taken = futures::future::try_join_all(takes).await?;
        for ((_, (dl, records)), (granted, due_us, lost)) in groups.iter().zip(taken) {
            let limit = dl.limit.shard(dl.shards);
            for &i in records.iter().skip(granted as usize) {
                answers[i] = Admission::Limited {
                    retry_at: limit.retry_after_losses(instant(due_us), self.jitter(), lost),
                    scope: RateScope::Domain,
                };
            }
        }

        // ── The account: one take for every record the domains admitted ──
        if let Some(account) = self.limits.account_limit() {
            let admitted: Vec<usize> =
                (0..answers.len()).filter(|&i| answers[i] == Admission::Admitted).collect();
            if let Some(&first) = admitted.first() {
                let want = u32::try_from(admitted.len()).unwrap_or(u32::MAX);
                // A split account: the batch's first record picks the shard (other bits of its
                // key than the domain shard's), so batches spread over the shards.
                let shard = ((requests[first].shard_seed >> 32) % u64::from(account.shards)) as u32;
                let (granted, due_us, lost) =
                    self.take_domain(ACCOUNT_BUCKET, shard, want, now_us, account).await?;
                let limit = account.limit.shard(account.shards);
                for &i in admitted.iter().skip(granted as usize) {
                    answers[i] = Admission::Limited {
                        retry_at: limit.retry_after_losses(instant(due_us), self.jitter(), lost),
                        scope: RateScope::Account,
                    };
                }
            }
        }
        Ok(answers)
    }

    fn take_conflicts(&self) -> u64 {
        self.conflicts.swap(0, Ordering::Relaxed)
    }
}
