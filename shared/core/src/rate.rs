//! A per-recipient-domain send rate shared by every sender instance.
//!
//! Mailbox providers throttle (and then junk) senders that burst at one domain, and Lambda scales
//! out: a limit kept in one process means nothing. The gate is consulted before the claim; over the
//! limit the job is deferred with jitter — not claimed, not sent, not lost — so replays and
//! backlogs drain at the domain's pace. Limits are fixed windows (`interval_secs`) counted in one
//! conditional write each, so a window never admits more than its limit.
//!
//! Configuration (`NOTICE_RATE_LIMITS`, JSON; no limit when unset):
//! ```json
//! { "interval_secs": 60, "default_per_interval": 600, "domains": { "gmail.com": 300, "example.org": 10 } }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Duration, TimeZone, Utc};
use rand::Rng;
use serde::Deserialize;

use crate::error::{ConfigError, LedgerError};

/// Limits per recipient domain.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RateLimits {
    pub interval_secs: u32,
    pub default_per_interval: u32,
    #[serde(default)]
    pub domains: BTreeMap<String, u32>,
}

impl RateLimits {
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let limits: Self = serde_json::from_str(text)
            .map_err(|e| ConfigError::Invalid { name: "NOTICE_RATE_LIMITS", reason: e.to_string() })?;
        if limits.interval_secs == 0 {
            return Err(ConfigError::Invalid {
                name: "NOTICE_RATE_LIMITS",
                reason: "interval_secs must be > 0".into(),
            });
        }
        Ok(Self {
            domains: limits.domains.into_iter().map(|(d, n)| (d.to_ascii_lowercase(), n)).collect(),
            ..limits
        })
    }

    pub fn limit_for(&self, domain: &str) -> u32 {
        self.domains.get(domain).copied().unwrap_or(self.default_per_interval)
    }

    /// The fixed window `now` falls in: (index, end).
    pub fn window(&self, now: DateTime<Utc>) -> (i64, DateTime<Utc>) {
        let len = i64::from(self.interval_secs);
        let index = now.timestamp().div_euclid(len);
        let end = Utc.timestamp_opt((index + 1) * len, 0).single().unwrap_or(now);
        (index, end)
    }

    /// When a limited job should come back: after the window, spread over a quarter of the next
    /// one so deferred jobs do not return as one burst.
    pub fn retry_at(&self, window_end: DateTime<Utc>) -> DateTime<Utc> {
        let spread_ms = i64::from(self.interval_secs) * 250;
        window_end + Duration::milliseconds(rand::thread_rng().gen_range(0..=spread_ms.max(1)))
    }
}

/// Whether a send to a domain may start now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    Limited { retry_at: DateTime<Utc> },
}

/// The rate port.
#[async_trait]
pub trait RateGate: Send + Sync {
    async fn admit(&self, domain: &str, now: DateTime<Utc>) -> Result<Admission, LedgerError>;
}

/// In-process gate with the same fixed-window rule (tests, simulations, local runs).
pub struct MemoryRateGate {
    limits: RateLimits,
    counts: Mutex<HashMap<(String, i64), u32>>,
}

impl MemoryRateGate {
    pub fn new(limits: RateLimits) -> Self {
        Self { limits, counts: Mutex::new(HashMap::new()) }
    }
}

#[async_trait]
impl RateGate for MemoryRateGate {
    async fn admit(&self, domain: &str, now: DateTime<Utc>) -> Result<Admission, LedgerError> {
        let (index, end) = self.limits.window(now);
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let used = counts.entry((domain.to_owned(), index)).or_default();
        if *used >= self.limits.limit_for(domain) {
            return Ok(Admission::Limited { retry_at: self.limits.retry_at(end) });
        }
        *used += 1;
        Ok(Admission::Admitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[tokio::test]
    async fn memory_gate_admits_the_limit_per_window_then_defers() {
        let limits = RateLimits::from_json(
            r#"{"interval_secs":60,"default_per_interval":2,"domains":{"Slow.example":1}}"#,
        )
        .unwrap();
        let gate = MemoryRateGate::new(limits);
        let t = at("2026-12-02T12:00:10Z");
        assert_eq!(gate.admit("a.example", t).await.unwrap(), Admission::Admitted);
        assert_eq!(gate.admit("a.example", t).await.unwrap(), Admission::Admitted);
        let Admission::Limited { retry_at } = gate.admit("a.example", t).await.unwrap() else { panic!() };
        assert!(retry_at >= at("2026-12-02T12:01:00Z") && retry_at <= at("2026-12-02T12:01:15Z"));
        assert_eq!(gate.admit("slow.example", t).await.unwrap(), Admission::Admitted);
        assert!(matches!(gate.admit("slow.example", t).await.unwrap(), Admission::Limited { .. }));
        assert_eq!(gate.admit("a.example", at("2026-12-02T12:01:00Z")).await.unwrap(), Admission::Admitted);
    }

    #[test]
    fn bad_limits_are_configuration_errors() {
        assert!(RateLimits::from_json(r#"{"interval_secs":0,"default_per_interval":1}"#).is_err());
        assert!(RateLimits::from_json(r#"{"interval_secs":60}"#).is_err());
    }
}
