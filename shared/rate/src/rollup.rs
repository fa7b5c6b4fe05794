//! The MX rollup (`"rollup": "mx"` in `NOTICE_RATE_LIMITS`, off by default): a recipient domain
//! that would ride the tail — no limit of its own, in no provider by the built-in table or a
//! mapping — takes its provider's bucket when all of its MX hosts are that provider's
//! ([`super::mx`]). A company on Google Workspace is then paced with gmail.com, because Google
//! receives, and throttles, both on one platform.
//!
//! The lookup is a port ([`MxLookup`]); the `notice_dns` adapter answers it from a per-environment
//! cache kept for the record's TTL, and from DNS otherwise. The gate asks only for the domains of
//! a batch that [`RateLimits::needs_mx`] names, all at once, and [`RateLimits`] still decides the
//! bucket ([`RateLimits::bucket_for_rolled_up`]): this module only finds the provider.
//!
//! # What can go wrong, and why it is still safe
//!
//! * **DNS slow or down.** A batch waits for its lookups at most [`MX_LOOKUP_BOUND`] (200 ms),
//!   all of them together. A lookup that fails or does not answer in time puts its domain on the
//!   tail — the account bucket only, exactly what it had without the rollup — and counts
//!   `MxRollupFallbacks`. Never an error: no send fails, waits or is deferred for DNS.
//! * **A wrong answer** (a stale cache, a spoofed reply). The worst is a domain in a bucket that is
//!   not its platform's (paced tighter than it needs) or on the tail (paced as without the
//!   rollup). Every token is still taken from a bucket and the account: no answer lets more
//!   through than a bucket's bound.
//! * **Anyone can point an MX at a provider.** That moves only their own domain into that
//!   provider's bucket, where it takes its share like every other of its domains.
//! * **A domain changes provider.** Its cached answer lives no longer than its record's TTL, so it
//!   changes bucket within one TTL.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tracing::{debug, warn};

use crate::limits::RateLimits;
use crate::ports::TokenRequest;
use crate::providers::Provider;

/// The longest a batch waits for the MX lookups of its domains: a few round trips to the VPC
/// resolver and one to a slow authority, and still small beside a batch's DynamoDB and SES calls.
pub const MX_LOOKUP_BOUND: Duration = Duration::from_millis(200);

/// Why an MX lookup gave no answer. Never fails a send: the domain rides the tail.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MxLookupError {
    /// No answer within the lookup's bound.
    #[error("no answer within {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The resolver answered with an error (SERVFAIL, REFUSED, a broken reply, no resolver).
    #[error("{0}")]
    Failed(String),
    /// The same domain failed a moment ago; asked again only after a pause, so a broken domain
    /// does not cost every batch the bound.
    #[error("failed {} s ago: {reason}", .ago.as_secs())]
    RecentlyFailed { ago: Duration, reason: String },
}

/// The port the gate asks: which provider receives `domain`'s mail, by its MX hosts.
#[async_trait]
pub trait MxLookup: Send + Sync {
    /// The provider all of `domain`'s MX hosts belong to ([`super::mx::provider_of_mx`]);
    /// `Ok(None)` when they are nobody's, or the domain has no MX or does not exist. `domain` is a
    /// recipient domain as the sender keys it (lower-case A-labels, no trailing dot).
    async fn provider_by_mx(&self, domain: &str) -> Result<Option<Provider>, MxLookupError>;
}

/// Where the rollup counts what it does: the sender's own counters, which the core keeps (its
/// `Metrics` implements this), so this crate counts nothing itself.
pub trait RollupCounters: Send + Sync {
    /// A lookup gave no answer and its domain rode the tail (`MxRollupFallbacks`).
    fn mx_rollup_fallback(&self);
}

/// The gate's side of the rollup: the lookup, and the counters `MxRollupFallbacks` goes to.
pub(crate) struct MxRollup {
    lookup: Arc<dyn MxLookup>,
    metrics: Arc<dyn RollupCounters>,
}

impl MxRollup {
    pub(crate) fn new(lookup: Arc<dyn MxLookup>, metrics: Arc<dyn RollupCounters>) -> Self {
        Self { lookup, metrics }
    }

    /// The provider of every domain among `requests` that `limits` wants looked up and whose MX
    /// hosts are one provider's; each distinct domain asked once, all at once, for at most
    /// [`MX_LOOKUP_BOUND`]. A domain missing from the answer rides the tail.
    pub(crate) async fn providers(
        &self,
        limits: &RateLimits,
        requests: &[TokenRequest],
    ) -> HashMap<String, Provider> {
        let mut domains: Vec<&str> =
            requests.iter().map(|r| r.domain.as_str()).filter(|d| limits.needs_mx(d)).collect();
        if domains.is_empty() {
            return HashMap::new();
        }
        domains.sort_unstable();
        domains.dedup();
        let lookups = domains.iter().map(|&domain| async move {
            let answer = tokio::time::timeout(MX_LOOKUP_BOUND, self.lookup.provider_by_mx(domain))
                .await
                .unwrap_or(Err(MxLookupError::TimedOut(MX_LOOKUP_BOUND)));
            (domain, answer)
        });
        let mut found = HashMap::new();
        for (domain, answer) in futures::future::join_all(lookups).await {
            match answer {
                Ok(Some(provider)) => {
                    found.insert(domain.to_owned(), provider);
                }
                Ok(None) => {}
                Err(e) => {
                    self.metrics.mx_rollup_fallback();
                    // A remembered failure was logged when it happened.
                    if matches!(e, MxLookupError::RecentlyFailed { .. }) {
                        debug!(domain, error = %e, "MX lookup skipped: the domain rides the account bucket only");
                    } else {
                        warn!(domain, error = %e, "MX lookup gave no answer: the domain rides the account bucket only");
                    }
                }
            }
        }
        found
    }
}
