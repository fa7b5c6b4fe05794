//! A per-recipient-domain send rate shared by every sender instance and by replays, and an
//! account-wide rate above it.
//!
//! Mailbox providers throttle (and then junk) senders that burst at one domain, SES throttles an
//! account above its `MaxSendRate`, and Lambda scales out: a limit kept in one process means
//! nothing. Each domain (or each shard of a hot domain) and the account have one stored token
//! bucket, kept as GCRA state — the *theoretical arrival time*, TAT, of the next send at the
//! sustained rate — so no number of senders can take more than `burst + per_second · t` tokens in
//! any span `t`.
//!
//! # What can go wrong, and why it is still safe
//!
//! * **Racing senders.** A take of k tokens is one write the store applies atomically and checks
//!   *when it applies it* ([`BucketStore::add`]: add k intervals if TAT is still within the room;
//!   [`BucketStore::reset`]: restart an idle bucket). Concurrent takes queue in the store instead of
//!   failing each other; every successful take is GCRA applied k times in the store's order, so the
//!   bound holds for any interleaving. A refused write returns the current TAT; the retry is exact.
//! * **Stale or skewed clocks.** TAT only moves forward: a remembered state can only under-estimate
//!   it, and a sender whose clock lags finds less room, never more.
//! * **Wasted tokens.** A batch takes its tokens before its claims; a token whose record then ends
//!   otherwise (a duplicate that won the claim race, a render failure, the account bucket empty
//!   after the domain's) is spent without a send — never one too many.
//! * **Store down.** No token, no claim: the record is retried (`ledger_unavailable`).
//!
//! Layout: [`limits`] (configuration: per-domain limits, shards, the account), [`providers`] (the
//! built-in table of receiving providers), [`mx`] and [`rollup`] (the optional MX rollup: the MX
//! host table, and the lookup port the gate asks), [`gcra`] (the pure arithmetic), [`gate`] (the
//! take algorithm over a store, batches, shards, the account), [`error`] (a store's fault), `memory` (the in-process store; feature `testing`).
//!
//! This crate imports nothing of the protocol: the core (`notice_ledger`) re-exports it as
//! `notice_ledger::rate`, converts its errors into the ledger's and the configuration's, and keeps
//! the counters ([`RollupCounters`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub mod error;
pub mod gate;
pub mod gcra;
pub mod limits;
#[cfg(any(test, feature = "testing"))]
pub mod memory;
pub mod mx;
pub mod providers;
pub mod rollup;
#[cfg(test)]
mod tests;

pub use error::{BucketError, Fault};
pub use gate::{take, BucketGate, ACCOUNT_BUCKET};
pub use gcra::{gcra, grant, tokens, BucketState, Decision, Grant};
pub use limits::{Limit, LimitsError, RateLimits, Rollup, RATE_LIMITS_VAR};
#[cfg(any(test, feature = "testing"))]
pub use memory::MemoryBuckets;
pub use rollup::{MxLookup, MxLookupError, RollupCounters, MX_LOOKUP_BOUND};

/// Which bucket said no.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateScope {
    /// The recipient domain's (or its shard's) bucket.
    Domain,
    /// The account-wide bucket (a share of SES's `MaxSendRate`).
    Account,
}

impl RateScope {
    pub fn as_str(self) -> &'static str {
        match self {
            RateScope::Domain => "domain",
            RateScope::Account => "account",
        }
    }
}

/// Whether a send to a domain may start now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    /// No token: come back at `retry_at` (the token's due time plus jitter).
    Limited {
        retry_at: DateTime<Utc>,
        scope: RateScope,
    },
}

/// One record asking for a token: its recipient domain and a stable number from its notice key
/// (which picks the shard of a sharded domain).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRequest {
    pub domain: String,
    pub shard_seed: u64,
}

/// The rate port the send path uses.
#[async_trait]
pub trait RateGate: Send + Sync {
    /// Takes one token for `domain` at `now`, or says when to come back.
    async fn admit(&self, domain: &str, now: DateTime<Utc>) -> Result<Admission, BucketError> {
        let request = TokenRequest { domain: domain.to_owned(), shard_seed: 0 };
        let mut answers = self.admit_batch(std::slice::from_ref(&request), now).await?;
        Ok(answers.pop().unwrap_or(Admission::Admitted))
    }

    /// Tokens for a batch's records at once — one write per (domain, shard) and one for the
    /// account — answered in the order asked.
    async fn admit_batch(
        &self,
        requests: &[TokenRequest],
        now: DateTime<Utc>,
    ) -> Result<Vec<Admission>, BucketError>;

    /// Token writes that failed their condition since the last call (`TokenWriteConflicts`).
    fn take_conflicts(&self) -> u64 {
        0
    }
}

/// What a conditional bucket write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Written: the bucket now holds this.
    Done(BucketState),
    /// The condition failed when the write was applied; the bucket holds this (`None`: no bucket).
    Refused(Option<BucketState>),
}

/// Where buckets are stored: one record per bucket name (a domain, `domain#shard`, or
/// [`ACCOUNT_BUCKET`]), written only by these two conditional writes, each checked by the store
/// when it applies it. Every adapter passes the same suite (`tests/harness/ledger_suite/buckets.rs`).
#[async_trait]
pub trait BucketStore: Send + Sync {
    /// The stored state of the bucket (`None`: no bucket yet), strongly consistent.
    async fn load(&self, bucket: &str) -> Result<Option<BucketState>, BucketError>;

    /// A busy bucket: `TAT += add_us` if the bucket exists and `now_us ≤ TAT ≤ max_us`.
    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, BucketError>;

    /// An idle bucket: `TAT = tat_us` if there is no bucket or `TAT < now_us`.
    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, BucketError>;
}

#[async_trait]
impl<T: BucketStore + ?Sized> BucketStore for std::sync::Arc<T> {
    async fn load(&self, bucket: &str) -> Result<Option<BucketState>, BucketError> {
        (**self).load(bucket).await
    }
    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, BucketError> {
        (**self).add(bucket, add_us, now_us, max_us).await
    }
    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, BucketError> {
        (**self).reset(bucket, tat_us, now_us).await
    }
}

/// What [`take`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    /// Tokens taken (0 when the bucket had no room).
    pub granted: u32,
    /// The bucket as the take left (or, when nothing was granted, found) it.
    pub state: Option<BucketState>,
    /// Writes refused on the way (each returned the current state).
    pub conflicts: u32,
}
