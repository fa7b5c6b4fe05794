//! The configured limits: per recipient domain (optionally split into shards), a default for
//! other domains, and the account (`NOTICE_RATE_LIMITS`; on by default):
//!
//! ```json
//! { "default": { "per_second": 10, "burst": 50 },
//!   "domains": { "gmail.com": { "per_second": 400, "burst": 800, "shards": 8 } },
//!   "account": { "per_second": 90, "burst": 90 } }
//! ```
//!
//! `account` takes `shards` too: every batch writes the account bucket once, so past about 1 000
//! batches a second (one item's write capacity) it must be split like a busy domain.
//!
//! `{}` or `off` switches limiting off; with only `domains`, other domains are not limited.
//! Unset `account`: 90 % of SES's `MaxSendRate` when the sender could read it at start-up
//! ([`RateLimits::with_account_rate`]). Unset `default` in the built-in configuration: half the
//! account rate with a burst of 5 s of it, so a default deployment uses its SES quota on any domain
//! mix yet no single domain takes all of it — or 10/s, burst 50, when the account rate is unknown.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;

use crate::error::ConfigError;

/// The variable the limits are read from (named in every configuration error).
pub const RATE_LIMITS_VAR: &str = "NOTICE_RATE_LIMITS";

/// Highest rate accepted: the bucket counts in microseconds.
const MAX_PER_SECOND: f64 = 1_000_000.0;
/// Largest burst accepted (keeps `burst × interval` far inside `i64` microseconds).
const MAX_BURST: u32 = 1_000_000;
/// Most shards one domain may be split into.
const MAX_SHARDS: u32 = 256;
/// The share of SES's `MaxSendRate` the account bucket takes when `account` is unset: SES
/// throttles above it, and every throttled send costs a claim, a release and a receive.
pub const ACCOUNT_SHARE: f64 = 0.9;
/// A domain's built-in default share of the account rate.
pub const DOMAIN_SHARE: f64 = 0.5;
/// The built-in default's burst, in seconds of its rate.
pub const DOMAIN_BURST_SECS: f64 = 5.0;

/// One bucket's limit: a sustained rate and how many sends may go out at once after a pause.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    pub per_second: f64,
    pub burst: u32,
}

impl Limit {
    /// The default for every domain when the account rate is unknown: 10 a second keeps one
    /// domain under SES's starting account rate (14/s); a burst of 50 absorbs a few concurrent
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

/// Limits per recipient domain and for the account. Built only by [`RateLimits::parse`] or
/// [`RateLimits::builtin`], so every limit in it is valid.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimits {
    default: Option<Limit>,
    domains: BTreeMap<String, DomainLimit>,
    account: Option<Limit>,
    /// Bucket items the account limit is split over (1 unless configured).
    account_shards: u32,
    /// The default was not configured: it follows the account rate once that is known.
    default_follows_account: bool,
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
    #[serde(default)]
    domains: BTreeMap<String, LimitJson>,
    account: Option<LimitJson>,
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
    /// The limits in force when `NOTICE_RATE_LIMITS` is unset: every domain limited, by a share of
    /// the account rate once known ([`RateLimits::with_account_rate`]), else [`Limit::DEFAULT`].
    pub fn builtin() -> Self {
        Self {
            default: Some(Limit::DEFAULT),
            domains: BTreeMap::new(),
            account: None,
            account_shards: 1,
            default_follows_account: true,
        }
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
        let (account, account_shards) = match &json.account {
            None => (None, 1),
            Some(spec) => {
                let limit = Limit { per_second: spec.per_second, burst: spec.burst };
                limit.check("account").map_err(invalid)?;
                (Some(limit), check_shards("account", spec.shards, &limit).map_err(invalid)?)
            }
        };
        let mut domains = BTreeMap::new();
        for (domain, spec) in json.domains {
            let domain = domain.trim().to_ascii_lowercase();
            if domain.is_empty() || domain.contains(['@', '#', ' ']) {
                return Err(invalid(format!("{domain:?} is not a domain name")));
            }
            let limit = Limit { per_second: spec.per_second, burst: spec.burst };
            limit.check(&format!("domain {domain}")).map_err(invalid)?;
            let shards = check_shards(&format!("domain {domain}"), spec.shards, &limit).map_err(invalid)?;
            if domains.insert(domain.clone(), DomainLimit { limit, shards }).is_some() {
                return Err(invalid(format!("domain {domain} is listed twice")));
            }
        }
        if json.default.is_none() && domains.is_empty() && account.is_none() {
            return Ok(None);
        }
        Ok(Some(Self {
            default: json.default,
            domains,
            account,
            account_shards,
            default_follows_account: false,
        }))
    }

    /// Fills what follows SES's `MaxSendRate` (sends per second, read at start-up; `None` when it
    /// could not be read): an unset account limit becomes [`ACCOUNT_SHARE`] of it (burst: one
    /// second of it), and the built-in default becomes [`DOMAIN_SHARE`] of that with a burst of
    /// [`DOMAIN_BURST_SECS`]. Configured limits stay as they are.
    pub fn with_account_rate(mut self, max_send_rate: Option<f64>) -> Self {
        let Some(rate) = max_send_rate.filter(|r| r.is_finite() && *r > 0.0) else { return self };
        let account = self.account.unwrap_or_else(|| {
            let per_second = (rate * ACCOUNT_SHARE).min(MAX_PER_SECOND);
            Limit { per_second, burst: (per_second.floor() as u32).clamp(1, MAX_BURST) }
        });
        self.account = Some(account);
        if self.default_follows_account {
            let per_second = account.per_second * DOMAIN_SHARE;
            let burst = ((per_second * DOMAIN_BURST_SECS).floor() as u32).clamp(1, MAX_BURST);
            self.default = Some(Limit { per_second, burst });
        }
        self
    }

    /// The limit for `domain` (lower case) and its shard count, or `None` when it is not limited.
    pub fn domain_limit(&self, domain: &str) -> Option<DomainLimit> {
        self.domains.get(domain).copied().or(self.default.map(|limit| DomainLimit { limit, shards: 1 }))
    }

    /// The limit for `domain` as a whole (all its shards), or `None` when it is not limited.
    pub fn limit_for(&self, domain: &str) -> Option<Limit> {
        self.domain_limit(domain).map(|d| d.limit)
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
        let default = self.default.as_ref().map_or("not limited".to_owned(), one);
        let account = match (self.account.as_ref(), self.account_shards) {
            (None, _) => String::new(),
            (Some(l), 1) => format!("; account {}", one(l)),
            (Some(l), s) => format!("; account {} in {s} shards", one(l)),
        };
        if self.domains.is_empty() {
            return format!("every domain {default}{account}");
        }
        let listed: Vec<String> = self
            .domains
            .iter()
            .map(|(d, l)| match l.shards {
                1 => format!("{d} {}", one(&l.limit)),
                s => format!("{d} {} in {s} shards", one(&l.limit)),
            })
            .collect();
        format!("{}; other domains {default}{account}", listed.join(", "))
    }
}
