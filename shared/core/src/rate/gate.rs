//! The shared gate: limits + a bucket store + this process's last-seen state per bucket, and the
//! one take algorithm every store runs ([`take`]).
//!
//! A batch's records take their tokens together ([`BucketGate::admit_batch`]): one write per
//! (domain, shard) for as many tokens as that bucket's records want, then one write on the account
//! bucket for as many as the domains granted. A sharded domain's record takes from the shard its
//! notice key picks and spills once to the next shard before it is limited.
//!
//! The remembered state saves the read before a write: it is at worst older than the stored one,
//! and since TAT only moves forward an old state never admits what the stored one would refuse —
//! the store's condition catches it and returns the current state. A "limited" computed from it
//! costs no call at all.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::gcra::{grant, instant, micros};
use super::limits::DomainLimit;
use super::{
    Admission, Applied, BucketState, BucketStore, Limit, RateGate, RateLimits, RateScope, Taken, TokenRequest,
};
use crate::error::LedgerError;

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
) -> Result<Taken, LedgerError> {
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

pub struct BucketGate {
    store: Arc<dyn BucketStore>,
    limits: RateLimits,
    seen: Mutex<HashMap<String, BucketState>>,
    wall_clock: bool,
    /// Token writes refused since last drained (`TokenWriteConflicts`).
    conflicts: AtomicU64,
    /// Spreads limited jobs' retries; seeded by simulations so one seed gives one run.
    jitter: Mutex<StdRng>,
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
        }
    }

    /// Draws retry jitter from `seed` instead of the system's entropy (simulations).
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter = Mutex::new(StdRng::seed_from_u64(seed));
        self
    }

    fn jitter(&self) -> f64 {
        self.jitter.lock().unwrap_or_else(|p| p.into_inner()).gen()
    }

    /// A gate over buckets in this process only (tests, simulations).
    pub fn in_memory(limits: RateLimits) -> Self {
        Self::new(Arc::new(super::MemoryBuckets::default()), limits)
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

    fn remembered(&self, bucket: &str) -> Option<BucketState> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).get(bucket).copied()
    }

    fn remember(&self, bucket: &str, state: Option<BucketState>) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        match state {
            Some(state) => seen.insert(bucket.to_owned(), state),
            None => seen.remove(bucket),
        };
    }

    async fn take_from(
        &self,
        bucket: &str,
        want: u32,
        now_us: i64,
        limit: &Limit,
    ) -> Result<Taken, LedgerError> {
        let taken = take(&*self.store, bucket, want, now_us, limit, self.remembered(bucket)).await?;
        self.remember(bucket, taken.state);
        self.conflicts.fetch_add(u64::from(taken.conflicts), Ordering::Relaxed);
        Ok(taken)
    }

    /// `want` tokens from one shard of a domain (or of the account), spilling once to the next shard; returns the
    /// tokens granted and, when short, when the primary shard's next token is due.
    async fn take_domain(
        &self,
        domain: &str,
        shard: u32,
        want: u32,
        now_us: i64,
        dl: DomainLimit,
    ) -> Result<(u32, i64), LedgerError> {
        let limit = dl.limit.shard(dl.shards);
        let primary = self.take_from(&bucket_name(domain, shard, dl.shards), want, now_us, &limit).await?;
        let mut granted = primary.granted;
        if granted < want && dl.shards > 1 {
            let next = bucket_name(domain, (shard + 1) % dl.shards, dl.shards);
            granted += self.take_from(&next, want - granted, now_us, &limit).await?.granted;
        }
        Ok((granted, due(primary.state, now_us, &limit)))
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

/// A domain's bucket item: the domain, or `domain#shard` when it is split.
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
    ) -> Result<Vec<Admission>, LedgerError> {
        let now = if self.wall_clock { Utc::now() } else { now };
        let now_us = micros(now);
        let mut answers = vec![Admission::Admitted; requests.len()];

        // ── Domains: one take per (domain, shard) for all of its records ──
        let mut groups: BTreeMap<(&str, u32), (DomainLimit, Vec<usize>)> = BTreeMap::new();
        for (i, r) in requests.iter().enumerate() {
            if let Some(dl) = self.limits.domain_limit(&r.domain) {
                let shard = (r.shard_seed % u64::from(dl.shards)) as u32;
                groups.entry((r.domain.as_str(), shard)).or_insert_with(|| (dl, Vec::new())).1.push(i);
            }
        }
        let takes = groups.iter().map(|((domain, shard), (dl, records))| {
            let want = u32::try_from(records.len()).unwrap_or(u32::MAX);
            self.take_domain(domain, *shard, want, now_us, *dl)
        });
        let taken = futures::future::try_join_all(takes).await?;
        for (((_, _), (dl, records)), (granted, due_us)) in groups.iter().zip(taken) {
            let limit = dl.limit.shard(dl.shards);
            for &i in records.iter().skip(granted as usize) {
                answers[i] = Admission::Limited {
                    retry_at: limit.retry_at(instant(due_us), self.jitter()),
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
                let (granted, due_us) =
                    self.take_domain(ACCOUNT_BUCKET, shard, want, now_us, account).await?;
                let limit = account.limit.shard(account.shards);
                for &i in admitted.iter().skip(granted as usize) {
                    answers[i] = Admission::Limited {
                        retry_at: limit.retry_at(instant(due_us), self.jitter()),
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
