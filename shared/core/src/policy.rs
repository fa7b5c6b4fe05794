//! The legal send window: a pure function of (job, now).
//!
//! A reminder must reach the customer while they can still cancel. By default the window opens
//! 72 h and closes 24 h before `charge_at`; a notice kind may have its own window and a
//! jurisdiction may raise the close (its floor). Configuration comes as JSON (see docs/configuration.md,
//! "Send windows"):
//!
//! ```json
//! { "default": { "opens_hours_before": 72, "closes_hours_before": 24 },
//!   "kinds": { "renewal_notice_t72": { "opens_hours_before": 72, "closes_hours_before": 24 } },
//!   "jurisdiction_floors_hours": { "US-NY": 48 } }
//! ```

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;

use crate::error::ConfigError;
use crate::job::Job;

/// Where a window opens and closes, counted back from the charge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    pub opens_hours_before: u32,
    pub closes_hours_before: u32,
}

impl Default for Window {
    fn default() -> Self {
        Self { opens_hours_before: 72, closes_hours_before: 24 }
    }
}

/// What to do with a job right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowDecision {
    /// Inside the window; it closes at `closes_at`.
    Send { closes_at: DateTime<Utc> },
    /// Too early: not claimed, not sent; come back at `until` (the window closes at `closes_at`).
    Defer { until: DateTime<Utc>, closes_at: DateTime<Utc> },
    /// The window has closed: never send, record it.
    Missed { closed_at: DateTime<Utc> },
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct WindowPolicy {
    #[serde(default)]
    default: Window,
    #[serde(default)]
    kinds: BTreeMap<String, Window>,
    #[serde(default)]
    jurisdiction_floors_hours: BTreeMap<String, u32>,
}

impl WindowPolicy {
    /// Parses and checks the JSON configuration.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let policy: Self = serde_json::from_str(text)
            .map_err(|e| ConfigError::Invalid { name: "NOTICE_WINDOWS", reason: e.to_string() })?;
        policy.validate()?;
        Ok(policy)
    }

    /// Every combination of window and floor must leave a non-empty window: a policy that can never
    /// send is a configuration error, found at start-up rather than as a stream of missed notices.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let floors = self.jurisdiction_floors_hours.iter().map(|(j, f)| (Some(j.as_str()), *f));
        let windows = std::iter::once(("default", &self.default))
            .chain(self.kinds.iter().map(|(k, w)| (k.as_str(), w)));
        for (name, window) in windows {
            for (jurisdiction, floor) in std::iter::once((None, 0)).chain(floors.clone()) {
                let closes = window.closes_hours_before.max(floor);
                if closes >= window.opens_hours_before {
                    return Err(ConfigError::Invalid {
                        name: "NOTICE_WINDOWS",
                        reason: format!(
                            "window `{name}`{} is empty: opens {} h before the charge but closes {} h before",
                            jurisdiction.map(|j| format!(" in {j}")).unwrap_or_default(),
                            window.opens_hours_before,
                            closes
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The earliest any window opens, in hours before the charge.
    pub fn longest_opening_hours(&self) -> u32 {
        self.kinds.values().chain([&self.default]).map(|w| w.opens_hours_before).max().unwrap_or(0)
    }

    /// The effective window for a job: its kind's window, with the close raised to the floor.
    pub fn window_for(&self, job: &Job) -> Window {
        let mut window = self.kinds.get(job.identity.kind().as_str()).copied().unwrap_or(self.default);
        if let Some(floor) = job.jurisdiction.as_deref().and_then(|j| self.jurisdiction_floors_hours.get(j)) {
            window.closes_hours_before = window.closes_hours_before.max(*floor);
        }
        window
    }

    /// Opening instant inclusive, closing instant exclusive.
    pub fn decide(&self, job: &Job, now: DateTime<Utc>) -> WindowDecision {
        let window = self.window_for(job);
        let opens_at = job.charge_at - Duration::hours(i64::from(window.opens_hours_before));
        let closes_at = job.charge_at - Duration::hours(i64::from(window.closes_hours_before));
        if now < opens_at {
            WindowDecision::Defer { until: opens_at, closes_at }
        } else if now >= closes_at {
            WindowDecision::Missed { closed_at: closes_at }
        } else {
            WindowDecision::Send { closes_at }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(jurisdiction: Option<&str>, kind: &str) -> Job {
        let mut v = serde_json::json!({"subscription_id":"s","period_start":"2026-10-01","kind":kind,
            "email":"a@example.com","charge_at":"2026-10-04T09:00:00Z"});
        if let Some(j) = jurisdiction {
            v["jurisdiction"] = j.into();
        }
        Job::from_value(&v).unwrap()
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn default_window_boundaries() {
        let p = WindowPolicy::default();
        let j = job(None, "renewal_notice_t72");
        // opens 2026-10-01T09:00Z (72 h), closes 2026-10-03T09:00Z (24 h)
        assert_eq!(
            p.decide(&j, at("2026-10-01T08:59:59Z")),
            WindowDecision::Defer {
                until: at("2026-10-01T09:00:00Z"),
                closes_at: at("2026-10-03T09:00:00Z")
            }
        );
        assert!(matches!(p.decide(&j, at("2026-10-01T09:00:00Z")), WindowDecision::Send { .. }));
        assert!(matches!(p.decide(&j, at("2026-10-03T08:59:59Z")), WindowDecision::Send { .. }));
        assert_eq!(
            p.decide(&j, at("2026-10-03T09:00:00Z")),
            WindowDecision::Missed { closed_at: at("2026-10-03T09:00:00Z") }
        );
    }

    #[test]
    fn jurisdiction_floor_raises_close() {
        let p = WindowPolicy::from_json(r#"{"jurisdiction_floors_hours":{"US-NY":48}}"#).unwrap();
        let now = at("2026-10-02T12:00:00Z"); // 45 h before the charge
        assert!(matches!(p.decide(&job(None, "k"), now), WindowDecision::Send { .. }));
        assert!(matches!(p.decide(&job(Some("US-CA"), "k"), now), WindowDecision::Send { .. }));
        assert_eq!(
            p.decide(&job(Some("US-NY"), "k"), now),
            WindowDecision::Missed { closed_at: at("2026-10-02T09:00:00Z") }
        );
    }

    #[test]
    fn per_kind_window() {
        let p = WindowPolicy::from_json(
            r#"{"kinds":{"annual_t30d":{"opens_hours_before":720,"closes_hours_before":168}}}"#,
        )
        .unwrap();
        let now = at("2026-09-20T09:00:00Z");
        assert!(matches!(p.decide(&job(None, "annual_t30d"), now), WindowDecision::Send { .. }));
        assert!(matches!(p.decide(&job(None, "renewal_notice_t72"), now), WindowDecision::Defer { .. }));
    }

    #[test]
    fn empty_window_is_a_configuration_error() {
        let err = WindowPolicy::from_json(r#"{"jurisdiction_floors_hours":{"XX":72}}"#).unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
        assert!(WindowPolicy::from_json(r#"{"default":{"opens_hours_before":24,"closes_hours_before":24}}"#)
            .is_err());
        assert!(WindowPolicy::from_json(r#"{"defualt":{}}"#).is_err());
    }
}
