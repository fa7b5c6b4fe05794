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
//! host table, and the lookup port the gate asks), [`gcra`] (the pure arithmetic), [`ports`] (the
//! gate the send path asks, the bucket store, what they answer), [`gate`] (the take algorithm over
//! a store, batches, shards, the account), [`error`] (a store's fault), `memory` (the in-process
//! store; feature `testing`).
//!
//! This crate imports nothing of the protocol: the core (`notice_ledger`) re-exports it as
//! `notice_ledger::rate`, converts its errors into the ledger's and the configuration's, and keeps
//! the counters ([`RollupCounters`]).

pub mod error;
pub mod gate;
pub mod gcra;
pub mod limits;
#[cfg(any(test, feature = "testing"))]
pub mod memory;
pub mod mx;
pub mod ports;
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
pub use ports::{Admission, Applied, BucketStore, RateGate, RateScope, Taken, TokenRequest};
pub use rollup::{MxLookup, MxLookupError, RollupCounters, MX_LOOKUP_BOUND};
