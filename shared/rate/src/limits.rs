//! The configured limits: per receiving mail provider ([`super::providers`]: what receiving
//! systems throttle on — every Outlook.com domain reaches one platform), per named recipient
//! domain, optionally a default for other domains, and the account (`NOTICE_RATE_LIMITS`; on by
//! default). Each limit may be split into shards:
//!
//! ```json
//! { "providers": { "google": { "per_second": 400, "burst": 800, "shards": 8 },
//!                  "default": { "per_second": 20, "burst": 100 } },
//!   "domains": { "acme.example": "microsoft",
//!                "big-customer.example": { "per_second": 5, "burst": 10 } },
//!   "default": { "per_second": 10, "burst": 50 },
//!   "account": { "per_second": 90, "burst": 90 },
//!   "rollup": "mx" }
//! ```
//!
//! A recipient domain's bucket, first match: a domain named with a limit (its own bucket); its
//! provider — named under `domains` (`"acme.example": "microsoft"`, a company on Microsoft 365),
//! in the built-in table, or (with `"rollup": "mx"`, off by default) the one all of its MX hosts
//! belong to ([`super::rollup`]) — when that provider has a limit (its own under `providers`,
//! else `providers.default`); else `default`, one bucket per domain; else none: the long tail
//! rides the account bucket only. So a batch writes one token item per provider present, not one
//! per distinct domain.
//!
//! `account` takes `shards` too: every batch writes the account bucket once, so past about 1 000
//! batches a second (one item's write capacity) it must be split like a busy domain.
//!
//! `{}` or `off` switches limiting off; in a configuration, only what it lists is limited (a
//! configuration without `providers` keeps the per-domain behaviour it had). Unset `account`:
//! 90 % of SES's `MaxSendRate` when the sender could read it at start-up
//! ([`RateLimits::with_account_rate`]). The built-in configuration (`NOTICE_RATE_LIMITS` unset)
//! limits every provider in the table to half the account rate with a burst of 5 s of it — or
//! 10/s, burst 50, when the account rate is unknown — so a default deployment uses its SES quota
//! on any mix yet no single provider takes all of it; other domains ride the account bucket only.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;

use super::providers::{provider_of, Provider};

/// The variable the limits are read from (named in every configuration error).
pub const RATE_LIMITS_VAR: &str = "NOTICE_RATE_LIMITS";

/// `NOTICE_RATE_LIMITS` that cannot be used: what is wrong with it, in the operator's words. The
/// core makes it `ConfigError::Invalid` naming the variable, with the same words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid setting {RATE_LIMITS_VAR}: {reason}")]
pub struct LimitsError {
    pub reason: String,
}

/// Highest rate accepted: the bucket counts in microseconds.
const MAX_PER_SECOND: f64 = 1_000_000.0;
/// Largest burst accepted (keeps `burst × interval` far inside `i64` microseconds).
const MAX_BURST: u32 = 1_000_000;
/// Most shards one domain may be split into.
const MAX_SHARDS: u32 = 256;
/// The share of SES's `MaxSendRate` the account bucket takes when `account` is unset: SES
/// throttles above it, and every throttled send costs a claim, a release and a receive.
pub const ACCOUNT_SHARE: f64 = 0.9;
/// A provider's built-in share of the account rate.
pub const PROVIDER_SHARE: f64 = 0.5;
/// The built-in provider limit's burst, in seconds of its rate.
pub const PROVIDER_BURST_SECS: f64 = 5.0;
/// A provider's bucket item: `provider:<name>` (a domain name never holds `:`).
pub const PROVIDER_BUCKET_PREFIX: &str = "provider:";

/// How a domain unknown to the built-in table and the configuration may still find its provider
/// (`"rollup"` in `NOTICE_RATE_LIMITS`; absent: none, the domain rides the tail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rollup {
    /// By its MX hosts' names ([`super::mx`]), looked up when a batch asks ([`super::rollup`]).
    Mx,
}

impl Rollup {
    /// The configuration's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Rollup::Mx => "mx",
        }
    }
}

/// One bucket's limit: a sustained rate and how many sends may go out at once after a pause.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    pub per_second: f64,
    pub burst: u32,
}

impl Limit {
    /// The built-in provider limit when the account rate is unknown: 10 a second keeps one
    /// provider under SES's starting account rate (14/s); a burst of 50 absorbs a few concurrent
    /// sender batches (10 records each) without deferring ordinary traffic.
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

    /// One of `shards` equal parts: the rate and burst divided (the burst rounded down, at least
    /// 1), so the shards' bounds add up to no more than the whole's.
    pub fn shard(&self, shards: u32) -> Limit {
        let shards = shards.max(1);
        Limit { per_second: self.per_second / f64::from(shards), burst: (self.burst / shards).max(1) }
    }

    /// When a limited job should come back: when its token is due, spread by `jitter` in `[0, 1]`
    /// over the time the whole bucket needs to refill (1 s to 60 s), so the jobs deferred together
    /// do not return together.
    pub fn retry_at(&self, due: DateTime<Utc>, jitter: f64) -> DateTime<Utc> {
        self.retry_after_losses(due, jitter, 0)
    }

    /// [`Limit::retry_at`] for a sender that lost `lost` takes in a row to others (the gate's
    /// hold-off): the spread doubles with each, up to 60 s, so a crowd's deferred jobs come back
    /// spread as thin as the crowd's writes.
    pub fn retry_after_losses(&self, due: DateTime<Utc>, jitter: f64, lost: u32) -> DateTime<Utc> {
        let refill_ms = i64::from(self.burst).saturating_mul(self.interval_us()) / 1000;
        let widen = 1i64 << lost.saturating_sub(1).min(6);
        let spread_ms = refill_ms.clamp(1000, 60_000).saturating_mul(widen).min(60_000);
        due + Duration::milliseconds((spread_ms as f64 * jitter.clamp(0.0, 1.0)).round() as i64)
    }
}

/// A domain's limit and how many bucket items carry it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DomainLimit {
    pub limit: Limit,
    pub shards: u32,
}

/// The bucket a recipient domain's tokens come from (besides the account's), and its limit.
#[derive(Clone, Debug, PartialEq)]
pub struct DomainBucket {
    /// The bucket item's name (before any shard suffix): the domain, or `provider:<name>`.
    pub item: String,
    /// The provider, when the bucket is one.
    pub provider: Option<Provider>,
    pub limit: DomainLimit,
}

/// Limits per provider, per named domain and for the account. Built only by
/// [`RateLimits::parse`] or [`RateLimits::builtin`], so every limit in it is valid.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimits {
    /// Per-domain limit for a domain with no bucket otherwise (one bucket per domain).
    default: Option<Limit>,
    domains: BTreeMap<String, DomainLimit>,
    /// Domains the configuration assigns to a provider (a company on Microsoft 365).
    domain_providers: BTreeMap<String, Provider>,
    providers: BTreeMap<Provider, DomainLimit>,
    /// The limit of a provider not listed under `providers`.
    provider_default: Option<Limit>,
    account: Option<Limit>,
    /// Bucket items the account limit is split over (1 unless configured).
    account_shards: u32,
    /// The built-in configuration: the provider default follows the account rate once known.
    providers_follow_account: bool,
    /// How a domain the table and the configuration do not place finds its provider (`None`: it
    /// does not, and rides the tail).
    rollup: Option<Rollup>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitJson {
    per_second: f64,
    burst: u32,
    #[serde(default)]
    shards: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitsJson {
    default: Option<Limit>,
    /// A limit object, or the name of the provider the domain's mail goes to.
    #[serde(default)]
    domains: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    providers: BTreeMap<String, LimitJson>,
    account: Option<LimitJson>,
    /// Any JSON value, checked by hand so that an error names the value itself.
    rollup: Option<serde_json::Value>,
}

/// A domain's own limit, or the provider its mail goes to: `(domains, domain_providers)`.
type DomainSpecs = (BTreeMap<String, DomainLimit>, BTreeMap<String, Provider>);

/// The per-domain limits and the domains mapped to a provider, each domain named once
/// (normalised: lower case, no trailing dot).
fn parse_domains(specs: BTreeMap<String, serde_json::Value>) -> Result<DomainSpecs, String> {
    let mut domains = BTreeMap::new();
    let mut domain_providers = BTreeMap::new();
    for (domain, spec) in specs {
        let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
        if domain.is_empty() || domain.contains(['@', '#', ' ', ':']) {
            return Err(format!("{domain:?} is not a domain name"));
        }
        if domains.contains_key(&domain) || domain_providers.contains_key(&domain) {
            return Err(format!("domain {domain} is listed twice"));
        }
        if let serde_json::Value::String(name) = &spec {
            let provider = Provider::parse(name).ok_or_else(|| {
                format!("domain {domain}: {name:?} is not a provider (known: {})", provider_names())
            })?;
            domain_providers.insert(domain, provider);
            continue;
        }
        let spec: LimitJson = serde_json::from_value(spec).map_err(|e| {
            format!(
                "domain {domain}: a limit {{\"per_second\",\"burst\"[,\"shards\"]}} or a provider name ({e})"
            )
        })?;
        let limit = Limit { per_second: spec.per_second, burst: spec.burst };
        limit.check(&format!("domain {domain}"))?;
        let shards = check_shards(&format!("domain {domain}"), spec.shards, &limit)?;
        domains.insert(domain, DomainLimit { limit, shards });
    }
    Ok((domains, domain_providers))
}

/// The per-provider limits and `providers.default` (unsharded: shards are set per provider).
fn parse_providers(
    specs: BTreeMap<String, LimitJson>,
) -> Result<(BTreeMap<Provider, DomainLimit>, Option<Limit>), String> {
    let mut providers = BTreeMap::new();
    let mut provider_default = None;
    for (name, spec) in specs {
        let limit = Limit { per_second: spec.per_second, burst: spec.burst };
        if name == "default" {
            limit.check("providers.default")?;
            if spec.shards.is_some_and(|s| s != 1) {
                return Err("providers.default: shards are set per provider".into());
            }
            provider_default = Some(limit);
            continue;
        }
        let provider = Provider::parse(&name).ok_or_else(|| {
            format!("providers: {name:?} is not a provider (known: {}, or default)", provider_names())
        })?;
        limit.check(&format!("provider {name}"))?;
        let shards = check_shards(&format!("provider {name}"), spec.shards, &limit)?;
        providers.insert(provider, DomainLimit { limit, shards });
    }
    Ok((providers, provider_default))
}

/// `rollup`: absent, or `"mx"`; any other value is named in the error.
fn parse_rollup(value: Option<&serde_json::Value>) -> Result<Option<Rollup>, String> {
    match value {
        None => Ok(None),
        Some(serde_json::Value::String(name)) if name == Rollup::Mx.name() => Ok(Some(Rollup::Mx)),
        Some(other) => {
            Err(format!("rollup: {other} is not a rollup (known: \"mx\"; leave rollup out for none)"))
        }
    }
}

/// Shards of one limit: 1 to [`MAX_SHARDS`], and no more than its burst (each shard needs a token).
fn check_shards(what: &str, shards: Option<u32>, limit: &Limit) -> Result<u32, String> {
    let shards = shards.unwrap_or(1);
    if shards == 0 || shards > MAX_SHARDS {
        return Err(format!("{what}: shards must be a whole number from 1 to {MAX_SHARDS}"));
    }
    if shards > limit.burst {
        return Err(format!("{what}: {shards} shards need a burst of at least {shards} (one token each)"));
    }
    Ok(shards)
}

impl RateLimits {
    /// The limits in force when `NOTICE_RATE_LIMITS` is unset: every provider of the table limited,
    /// by a share of the account rate once known ([`RateLimits::with_account_rate`]), else
    /// [`Limit::DEFAULT`]; the long tail on the account only.
    pub fn builtin() -> Self {
        Self {
            default: None,
            domains: BTreeMap::new(),
            domain_providers: BTreeMap::new(),
            providers: BTreeMap::new(),
            provider_default: Some(Limit::DEFAULT),
            account: None,
            account_shards: 1,
            providers_follow_account: true,
            rollup: None,
        }
    }

    /// Parses `NOTICE_RATE_LIMITS`. `Ok(None)` means off (`off`, `"off"` or `{}`); anything
    /// unreadable or out of range is an error naming the variable.
    pub fn parse(text: &str) -> Result<Option<Self>, LimitsError> {
        let invalid = |reason: String| LimitsError { reason };
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
        let (account, account_shards) = match &json.account {
            None => (None, 1),
            Some(spec) => {
                let limit = Limit { per_second: spec.per_second, burst: spec.burst };
                limit.check("account").map_err(invalid)?;
                (Some(limit), check_shards("account", spec.shards, &limit).map_err(invalid)?)
            }
        };
        let (domains, domain_providers) = parse_domains(json.domains).map_err(invalid)?;
        let (providers, provider_default) = parse_providers(json.providers).map_err(invalid)?;
        // A domain mapped to a provider without a limit would silently fall to `default` or the
        // account: the mapping would mean nothing.
        if provider_default.is_none() {
            if let Some((domain, provider)) =
                domain_providers.iter().find(|(_, p)| !providers.contains_key(*p))
            {
                return Err(invalid(format!(
                    "domain {domain} is mapped to {name}, which has no limit: add providers.{name} or \
                     providers.default",
                    name = provider.name()
                )));
            }
        }
        let rollup = parse_rollup(json.rollup.as_ref()).map_err(invalid)?;
        // A rollup only moves domains into providers' buckets: with no provider limited it would
        // look up every tail domain and change nothing.
        if rollup.is_some() && providers.is_empty() && provider_default.is_none() {
            return Err(invalid(
                "rollup \"mx\" puts a domain in its provider's bucket, but no provider has a limit: add \
                 providers.<name> or providers.default"
                    .into(),
            ));
        }
        if json.default.is_none()
            && domains.is_empty()
            && providers.is_empty()
            && provider_default.is_none()
            && account.is_none()
        {
            return Ok(None);
        }
        Ok(Some(Self {
            default: json.default,
            domains,
            domain_providers,
            providers,
            provider_default,
            account,
            account_shards,
            providers_follow_account: false,
            rollup,
        }))
    }

    /// Fills what follows SES's `MaxSendRate` (sends per second, read at start-up; `None` when it
    /// could not be read): an unset account limit becomes [`ACCOUNT_SHARE`] of it (burst: one
    /// second of it), and the built-in provider limit becomes [`PROVIDER_SHARE`] of the account's
    /// with a burst of [`PROVIDER_BURST_SECS`]. Configured limits stay as they are.
    pub fn with_account_rate(mut self, max_send_rate: Option<f64>) -> Self {
        let Some(rate) = max_send_rate.filter(|r| r.is_finite() && *r > 0.0) else { return self };
        let account = self.account.unwrap_or_else(|| {
            let per_second = (rate * ACCOUNT_SHARE).min(MAX_PER_SECOND);
            Limit { per_second, burst: (per_second.floor() as u32).clamp(1, MAX_BURST) }
        });
        self.account = Some(account);
        if self.providers_follow_account {
            let per_second = account.per_second * PROVIDER_SHARE;
            let burst = ((per_second * PROVIDER_BURST_SECS).floor() as u32).clamp(1, MAX_BURST);
            self.provider_default = Some(Limit { per_second, burst });
        }
        self
    }

    /// The bucket `domain` (lower-case A-labels) takes its tokens from besides the account's, or
    /// `None` when only the account limits it (the long tail). With the MX rollup on, a domain
    /// [`RateLimits::needs_mx`] names is decided by [`RateLimits::bucket_for_rolled_up`] once its
    /// MX is known; without an answer, by this.
    pub fn bucket_for(&self, domain: &str) -> Option<DomainBucket> {
        self.decide(domain, None)
    }

    /// The bucket of `domain` whose MX hosts all belong to `by_mx` ([`super::rollup`]): the
    /// provider's when it has a limit — unless the configuration or the built-in table places the
    /// domain otherwise, which comes first — else as [`RateLimits::bucket_for`].
    pub fn bucket_for_rolled_up(&self, domain: &str, by_mx: Provider) -> Option<DomainBucket> {
        self.decide(domain, Some(by_mx))
    }

    /// Whether the sender should look up `domain`'s MX before deciding its bucket: the rollup is
    /// on, and neither the configuration (a limit or a provider of its own) nor the built-in table
    /// places the domain. Everything else is decided without DNS.
    pub fn needs_mx(&self, domain: &str) -> bool {
        self.rollup.is_some()
            && !self.domains.contains_key(domain)
            && !self.domain_providers.contains_key(domain)
            && provider_of(domain).is_none()
    }

    /// The MX rollup, when on.
    pub fn rollup(&self) -> Option<Rollup> {
        self.rollup
    }

    /// The one place that decides a domain's bucket: a named limit, else its provider (mapped,
    /// from the table, else from its MX) when that has a limit, else `default`, else none.
    fn decide(&self, domain: &str, by_mx: Option<Provider>) -> Option<DomainBucket> {
        if let Some(limit) = self.domains.get(domain) {
            return Some(DomainBucket { item: domain.to_owned(), provider: None, limit: *limit });
        }
        let provider = self.domain_providers.get(domain).copied().or_else(|| provider_of(domain)).or(by_mx);
        if let Some(provider) = provider {
            if let Some(limit) = self.provider_limit(provider) {
                let item = format!("{PROVIDER_BUCKET_PREFIX}{}", provider.name());
                return Some(DomainBucket { item, provider: Some(provider), limit });
            }
        }
        self.default.map(|limit| DomainBucket {
            item: domain.to_owned(),
            provider: None,
            limit: DomainLimit { limit, shards: 1 },
        })
    }

    /// The limit for `domain` (lower case) and its shard count, or `None` when only the account
    /// limits it.
    pub fn domain_limit(&self, domain: &str) -> Option<DomainLimit> {
        self.bucket_for(domain).map(|b| b.limit)
    }

    /// The limit for `domain` as a whole (all its shards), or `None` when only the account limits it.
    pub fn limit_for(&self, domain: &str) -> Option<Limit> {
        self.domain_limit(domain).map(|d| d.limit)
    }

    /// The limit of `provider` (its own, else the provider default), or `None` when its domains
    /// fall to `default` or the account.
    pub fn provider_limit(&self, provider: Provider) -> Option<DomainLimit> {
        self.providers
            .get(&provider)
            .copied()
            .or(self.provider_default.map(|limit| DomainLimit { limit, shards: 1 }))
    }

    /// The limit of a provider without one of its own (`providers.default`, or the built-in share).
    pub fn provider_limit_default(&self) -> Option<Limit> {
        self.provider_default
    }

    /// Whether `provider` has a limit of its own (`providers.<name>`).
    pub fn provider_configured(&self, provider: Provider) -> bool {
        self.providers.contains_key(&provider)
    }

    /// Domains the configuration assigns to a provider.
    pub fn domain_providers(&self) -> impl Iterator<Item = (&str, Provider)> {
        self.domain_providers.iter().map(|(d, p)| (d.as_str(), *p))
    }

    /// The account-wide limit, if any.
    pub fn account(&self) -> Option<Limit> {
        self.account
    }

    /// The account-wide limit with the number of bucket items it is split over.
    pub fn account_limit(&self) -> Option<DomainLimit> {
        self.account.map(|limit| DomainLimit { limit, shards: self.account_shards })
    }

    /// Every listed domain with its limit (for operators).
    pub fn domains(&self) -> impl Iterator<Item = (&str, DomainLimit)> {
        self.domains.iter().map(|(d, l)| (d.as_str(), *l))
    }

    /// The limit for domains not listed, if any.
    pub fn default_limit(&self) -> Option<Limit> {
        self.default
    }

    /// One line for start-up logs and `noticectl` banners.
    pub fn describe(&self) -> String {
        let one = |l: &Limit| format!("{}/s burst {}", l.per_second, l.burst);
        let sharded = |l: &DomainLimit| match l.shards {
            1 => one(&l.limit),
            s => format!("{} in {s} shards", one(&l.limit)),
        };
        let mut parts = Vec::new();
        for (p, l) in &self.providers {
            parts.push(format!("{} {}", p.name(), sharded(l)));
        }
        if let Some(l) = &self.provider_default {
            let other = if self.providers.is_empty() { "every provider" } else { "other providers" };
            parts.push(format!("{other} {}", one(l)));
        }
        for (d, l) in &self.domains {
            parts.push(format!("{d} {}", sharded(l)));
        }
        for (d, p) in &self.domain_providers {
            parts.push(format!("{d} → {}", p.name()));
        }
        if let Some(rollup) = self.rollup {
            parts.push(format!("{} rollup: other domains by their MX hosts", rollup.name()));
        }
        parts.push(match &self.default {
            Some(l) => format!("other domains {} each", one(l)),
            None => "other domains: the account only".to_owned(),
        });
        if let Some(l) = &self.account {
            parts.push(match self.account_shards {
                1 => format!("account {}", one(l)),
                s => format!("account {} in {s} shards", one(l)),
            });
        }
        parts.join("; ")
    }
}

/// Every provider's configuration name, for error messages.
fn provider_names() -> String {
    Provider::ALL.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
}
