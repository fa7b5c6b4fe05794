//! `notice_dns`: the MX lookup the rate gate's MX rollup asks ([`notice_ledger::rate::MxLookup`];
//! `"rollup": "mx"` in `NOTICE_RATE_LIMITS`), over `hickory-resolver`.
//!
//! * **Where it asks.** The system's resolver configuration (`/etc/resolv.conf`: in Lambda, the
//!   VPC's resolver), or one given server (tests: a DNS server on the loopback). Plain DNS over
//!   UDP (TCP for a truncated answer); no encrypted transports, no DNSSEC, no hosts file.
//! * **How long.** Each lookup gives up after [`QUERY_DEADLINE`], inside the gate's own 200 ms
//!   bound ([`notice_ledger::rate::MX_LOOKUP_BOUND`]), so the failure is this crate's to remember.
//! * **What it keeps.** One cache per environment (per process), domain → provider, each answer
//!   for its record's TTL (at most [`MAX_TTL`]): a positive answer for the MX records' TTL, a
//!   nonexistent domain or a domain without MX for its zone's negative TTL (the SOA's, RFC 2308;
//!   [`NEGATIVE_TTL_WITHOUT_SOA`] when the answer carries none). A failure (no answer in time,
//!   SERVFAIL, REFUSED, no resolver) is remembered for [`FAILURE_PAUSE`], so a broken domain costs
//!   one deadline per pause, not one per batch. At most [`CACHE_CAPACITY`] domains: past that,
//!   expired answers go first, then the one that would expire soonest.
//!
//! Which provider a set of MX hosts belongs to is decided in the core
//! ([`notice_ledger::rate::mx::provider_of_mx`]); this crate only asks DNS and remembers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hickory_resolver::config::{NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::proto::rr::RData;
use hickory_resolver::{Resolver, TokioResolver};
use notice_ledger::rate::mx::provider_of_mx;
use notice_ledger::rate::providers::Provider;
use notice_ledger::rate::{MxLookup, MxLookupError, MX_LOOKUP_BOUND};
use tracing::debug;

/// How long one lookup may take: the gate's bound less a margin, so the lookup's own timer fires
/// first and its failure is remembered (a lookup the gate abandons leaves no trace).
pub const QUERY_DEADLINE: Duration = Duration::from_millis(MX_LOOKUP_BOUND.as_millis() as u64 - 20);

/// The longest an answer is kept, whatever its TTL: a domain that moves provider changes bucket
/// within a day even if its zone says a week.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// How long "no MX" is kept when the answer carries no SOA to take the negative TTL from.
pub const NEGATIVE_TTL_WITHOUT_SOA: Duration = Duration::from_secs(60);

/// How long a failed lookup is not retried for the same domain (it rides the tail meanwhile).
pub const FAILURE_PAUSE: Duration = Duration::from_secs(30);

/// Domains remembered per environment: a Lambda environment sees a few thousand distinct recipient
/// domains an hour at most; 10 000 small entries are well under a megabyte.
pub const CACHE_CAPACITY: usize = 10_000;

/// The resolver could not be configured (an unreadable or empty `/etc/resolv.conf`).
#[derive(Debug, thiserror::Error)]
#[error("the system's DNS resolver configuration could not be read: {0}")]
pub struct SetupError(String);

/// MX lookups through `hickory-resolver`, with the per-environment cache (module doc).
pub struct MxResolver {
    resolver: TokioResolver,
    cache: Mutex<Cache>,
}

impl MxResolver {
    /// Asks the servers of the system's resolver configuration (`/etc/resolv.conf`).
    pub fn from_system() -> Result<Self, SetupError> {
        let mut builder = TokioResolver::builder_tokio().map_err(|e| SetupError(e.to_string()))?;
        tune(builder.options_mut());
        let resolver = builder.build().map_err(|e| SetupError(e.to_string()))?;
        Ok(Self::with_resolver(resolver))
    }

    /// Asks only `server`, over UDP (a local DNS server; tests).
    pub fn with_name_server(server: SocketAddr) -> Result<Self, SetupError> {
        let mut name_server = NameServerConfig::udp(server.ip());
        for connection in &mut name_server.connections {
            connection.port = server.port();
        }
        let config = ResolverConfig::from_name_servers(vec![name_server]);
        let mut builder = Resolver::builder_with_config(config, TokioRuntimeProvider::default());
        tune(builder.options_mut());
        let resolver = builder.build().map_err(|e| SetupError(e.to_string()))?;
        Ok(Self::with_resolver(resolver))
    }

    fn with_resolver(resolver: TokioResolver) -> Self {
        Self { resolver, cache: Mutex::new(Cache::new(CACHE_CAPACITY)) }
    }

    /// Asks DNS: the provider of `domain`'s MX hosts, and until when that answer holds.
    async fn query(&self, domain: &str) -> Result<(Option<Provider>, Instant), MxLookupError> {
        // Fully qualified: the system's search domains never apply to a recipient domain.
        let name = format!("{}.", domain.trim_end_matches('.'));
        let asked = tokio::time::timeout(QUERY_DEADLINE, self.resolver.mx_lookup(name.as_str())).await;
        let now = Instant::now();
        match asked {
            Err(_) => Err(MxLookupError::TimedOut(QUERY_DEADLINE)),
            Ok(Ok(lookup)) => {
                let hosts: Vec<String> = lookup
                    .answers()
                    .iter()
                    .filter_map(|r| match &r.data {
                        RData::MX(mx) => Some(mx.exchange.to_ascii()),
                        _ => None,
                    })
                    .collect();
                let provider = provider_of_mx(hosts.iter().map(String::as_str));
                Ok((provider, lookup.valid_until().min(now + MAX_TTL)))
            }
            Ok(Err(NetError::Dns(DnsError::NoRecordsFound(none)))) => {
                // NXDOMAIN, or a domain without MX: nobody's, for the zone's negative TTL.
                let ttl =
                    none.negative_ttl.map_or(NEGATIVE_TTL_WITHOUT_SOA, |s| Duration::from_secs(s.into()));
                Ok((None, now + ttl.min(MAX_TTL)))
            }
            // The resolver's own per-query timer may fire first: the same deadline.
            Ok(Err(NetError::Timeout)) => Err(MxLookupError::TimedOut(QUERY_DEADLINE)),
            Ok(Err(e)) => Err(MxLookupError::Failed(e.to_string())),
        }
    }
}

/// The resolver's options for the rollup, over the system's (or the defaults): the deadline per
/// query (a retry fits inside the lookup's deadline or not at all), no cache of its own (this
/// crate's is the one, keyed by the answer the gate needs), no hosts file.
fn tune(options: &mut ResolverOpts) {
    options.timeout = QUERY_DEADLINE;
    options.cache_size = 0;
    options.use_hosts_file = ResolveHosts::Never;
}

#[async_trait]
impl MxLookup for MxResolver {
    async fn provider_by_mx(&self, domain: &str) -> Result<Option<Provider>, MxLookupError> {
        if let Some(known) = self.cache().get(domain, Instant::now()) {
            return known;
        }
        let answer = self.query(domain).await;
        let now = Instant::now();
        match &answer {
            Ok((provider, until)) => {
                debug!(
                    domain,
                    provider = provider.map(Provider::name),
                    ttl_secs = until.saturating_duration_since(now).as_secs(),
                    "MX looked up"
                );
                self.cache().insert(domain, Remembered::Answer(*provider), *until, now);
            }
            Err(e) => {
                self.cache().insert(
                    domain,
                    Remembered::Failure { reason: e.to_string(), at: now },
                    now + FAILURE_PAUSE,
                    now,
                );
            }
        }
        answer.map(|(provider, _)| provider)
    }
}

impl MxResolver {
    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the cache keeps for a domain.
#[derive(Clone, Debug, PartialEq)]
enum Remembered {
    Answer(Option<Provider>),
    Failure { reason: String, at: Instant },
}

/// Domain → what was found, until when; bounded (module doc).
struct Cache {
    entries: HashMap<String, (Remembered, Instant)>,
    capacity: usize,
}

impl Cache {
    fn new(capacity: usize) -> Self {
        Self { entries: HashMap::new(), capacity: capacity.max(1) }
    }

    /// The answer for `domain` while it holds at `now`: `None` when there is none (or it expired).
    fn get(&self, domain: &str, now: Instant) -> Option<Result<Option<Provider>, MxLookupError>> {
        let (remembered, until) = self.entries.get(domain)?;
        if now >= *until {
            return None;
        }
        Some(match remembered {
            Remembered::Answer(provider) => Ok(*provider),
            Remembered::Failure { reason, at } => Err(MxLookupError::RecentlyFailed {
                ago: now.saturating_duration_since(*at),
                reason: reason.clone(),
            }),
        })
    }

    /// Keeps `remembered` for `domain` until `until` (not at all when that has passed); makes room
    /// first when full: the expired entries, else the one that would expire soonest.
    fn insert(&mut self, domain: &str, remembered: Remembered, until: Instant, now: Instant) {
        if until <= now {
            self.entries.remove(domain);
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(domain) {
            self.entries.retain(|_, (_, until)| *until > now);
            if self.entries.len() >= self.capacity {
                let soonest =
                    self.entries.iter().min_by_key(|(_, (_, until))| *until).map(|(d, _)| d.clone());
                if let Some(soonest) = soonest {
                    self.entries.remove(&soonest);
                }
            }
        }
        self.entries.insert(domain.to_owned(), (remembered, until));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The lookup used when no resolver could be configured: every domain rides the tail, and every
/// lookup counts as a fallback (`MxRollupFallbacks`), so the alarm, not a silent tail, says so.
pub struct NoResolver {
    reason: String,
}

impl NoResolver {
    pub fn new(reason: impl Into<String>) -> Self {
        Self { reason: reason.into() }
    }
}

#[async_trait]
impl MxLookup for NoResolver {
    async fn provider_by_mx(&self, _domain: &str) -> Result<Option<Provider>, MxLookupError> {
        Err(MxLookupError::Failed(self.reason.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `assemble` builds the resolver in a plain function: building it must need no runtime, and
    /// a machine without a resolver configuration gets an error, never a panic.
    #[test]
    fn the_system_resolver_is_built_without_a_runtime() {
        match MxResolver::from_system() {
            Ok(_) => {}
            Err(e) => assert!(e.to_string().contains("resolver configuration"), "{e}"),
        }
    }

    #[test]
    fn the_deadline_fits_inside_the_gate_s_bound() {
        assert!(QUERY_DEADLINE < MX_LOOKUP_BOUND);
        assert!(QUERY_DEADLINE >= Duration::from_millis(100), "room for a round trip to a slow authority");
    }

    #[test]
    fn an_answer_holds_until_its_ttl_and_a_failure_until_the_pause() {
        let t0 = Instant::now();
        let mut cache = Cache::new(10);
        cache.insert(
            "a.example",
            Remembered::Answer(Some(Provider::Google)),
            t0 + Duration::from_secs(5),
            t0,
        );
        assert_eq!(cache.get("a.example", t0 + Duration::from_secs(4)), Some(Ok(Some(Provider::Google))));
        assert_eq!(cache.get("a.example", t0 + Duration::from_secs(5)), None, "expired at its TTL");
        let failure = Remembered::Failure { reason: "SERVFAIL".into(), at: t0 };
        cache.insert("b.example", failure, t0 + FAILURE_PAUSE, t0);
        let Some(Err(MxLookupError::RecentlyFailed { ago, reason })) =
            cache.get("b.example", t0 + Duration::from_secs(3))
        else {
            panic!("a remembered failure")
        };
        assert_eq!((ago, reason.as_str()), (Duration::from_secs(3), "SERVFAIL"));
        assert_eq!(cache.get("b.example", t0 + FAILURE_PAUSE), None);
        // A TTL of 0 keeps nothing, and replaces what was there.
        cache.insert("a.example", Remembered::Answer(None), t0, t0);
        assert_eq!(cache.get("a.example", t0), None);
    }

    #[test]
    fn a_full_cache_drops_the_expired_then_the_soonest_to_expire() {
        let t0 = Instant::now();
        let secs = Duration::from_secs;
        let mut cache = Cache::new(3);
        cache.insert("short.example", Remembered::Answer(None), t0 + secs(1), t0);
        cache.insert("long.example", Remembered::Answer(None), t0 + secs(100), t0);
        cache.insert("mid.example", Remembered::Answer(None), t0 + secs(50), t0);
        // Full: at t0 + 2 s, short.example has expired and makes the room.
        cache.insert("new.example", Remembered::Answer(Some(Provider::Apple)), t0 + secs(10), t0 + secs(2));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("short.example", t0), None);
        // Full and nothing expired: the one that would expire soonest goes.
        cache.insert("newer.example", Remembered::Answer(None), t0 + secs(200), t0 + secs(3));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("new.example", t0 + secs(3)), None, "the soonest to expire");
        assert!(
            cache.get("long.example", t0 + secs(3)).is_some()
                && cache.get("mid.example", t0 + secs(3)).is_some()
        );
        // Replacing a domain already kept makes no room.
        cache.insert(
            "long.example",
            Remembered::Answer(Some(Provider::Google)),
            t0 + secs(300),
            t0 + secs(3),
        );
        assert_eq!(cache.len(), 3);
    }
}
