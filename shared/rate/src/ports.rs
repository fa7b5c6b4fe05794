//! The ports: the gate the send path asks for tokens ([`RateGate`]), the store the buckets live in
//! ([`BucketStore`]: two conditional writes checked when applied), and what they answer.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::error::BucketError;
use crate::gcra::BucketState;

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
/// [`ACCOUNT_BUCKET`](crate::ACCOUNT_BUCKET)), written only by these two conditional writes, each checked by the store
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

/// What [`take`](crate::take) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    /// Tokens taken (0 when the bucket had no room).
    pub granted: u32,
    /// The bucket as the take left (or, when nothing was granted, found) it.
    pub state: Option<BucketState>,
    /// Writes refused on the way (each returned the current state).
    pub conflicts: u32,
}
