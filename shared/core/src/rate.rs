//! The send rates — limits, GCRA, the gate, the bucket store port, providers — are the
//! `notice_rate` crate (`shared/rate`), which imports nothing of this one; named here, at their
//! old path, so `notice_ledger::rate::…` is what every caller and adapter always used. Where its
//! errors cross into the protocol they become the core's own ([`crate::error`]: a `BucketError`
//! is the `LedgerError` of the same kind and words, a `LimitsError` is
//! `ConfigError::Invalid { name: "NOTICE_RATE_LIMITS", … }`), and its MX rollup counts into the
//! sender's [`crate::metrics::Metrics`] (`RollupCounters`).

pub use notice_rate::*;
