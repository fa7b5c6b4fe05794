//! When a job that cannot finish now comes back — one rule for the sender and the simulation.
//!
//! A queue can hide a message for at most [`MAX_VISIBILITY`] and keeps it at most 14 days from
//! its first enqueue (`maxReceiveCount` dead-letters it earlier). So:
//!
//! * a window that opens within [`MAX_VISIBILITY`] is waited for on the queue (one hop);
//! * a window further away is **parked**: the job leaves the queue and a one-time schedule puts
//!   its own body back on the queue when the window opens ([`Deferral::Park`]);
//! * a transient failure backs off exponentially with jitter over the upper half.
//!
//! What can go wrong, and why it is still safe: parking writes nothing to the ledger and sends
//! nothing, so a crash before, during or after it leaves at worst a message that is redelivered
//! and parked again (the schedule's name is the notice key: the second park finds the first) or a
//! schedule plus a redelivered message — both end on the normal path, where the ledger catches
//! every copy. A schedule that fires early only meets a short visibility deferral.

use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

/// SQS cannot hide a message for longer than 12 hours.
pub const MAX_VISIBILITY: Duration = Duration::from_secs(12 * 3600);
/// First retry waits about this long; each further receive doubles it.
pub const BACKOFF_BASE: Duration = Duration::from_secs(30);
/// Longest backoff between retries.
pub const BACKOFF_CAP: Duration = Duration::from_secs(15 * 60);

/// How a job whose window is not open yet waits for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deferral {
    /// Hide the message on the queue for this long (at most [`MAX_VISIBILITY`]).
    Hide(Duration),
    /// Take it off the queue and schedule it back at `at` (the opening, rounded up to the minute).
    Park { at: DateTime<Utc> },
}

/// The deferral for a window opening at `opens_at`, seen at `now`.
pub fn deferral(opens_at: DateTime<Utc>, now: DateTime<Utc>) -> Deferral {
    let wait = (opens_at - now).to_std().unwrap_or(Duration::ZERO);
    if wait <= MAX_VISIBILITY {
        return Deferral::Hide(wait);
    }
    Deferral::Park { at: round_up_to_minute(opens_at) }
}

/// Scheduler expressions name whole seconds; a minute boundary at or after the opening can never
/// fire before the window opens.
fn round_up_to_minute(at: DateTime<Utc>) -> DateTime<Utc> {
    let minute = TimeDelta::minutes(1);
    match at.duration_trunc(minute) {
        Ok(floor) if floor == at => at,
        Ok(floor) => floor + minute,
        Err(_) => at,
    }
}

/// Backoff before receive `receive_count + 1`: `BACKOFF_BASE × 2^(receive_count − 1)`, capped at
/// [`BACKOFF_CAP`], and spread over its upper half by `jitter` in `[0, 1]` so the retries of one
/// burst do not come back together.
pub fn backoff(receive_count: u32, jitter: f64) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(1u32 << receive_count.saturating_sub(1).min(10)).min(BACKOFF_CAP);
    let half = exp / 2;
    half + half.mul_f64(jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn within_twelve_hours_waits_on_the_queue() {
        let now = at("2026-10-01T00:00:00Z");
        assert_eq!(deferral(at("2026-10-01T06:00:00Z"), now), Deferral::Hide(Duration::from_secs(6 * 3600)));
        assert_eq!(deferral(at("2026-10-01T12:00:00Z"), now), Deferral::Hide(MAX_VISIBILITY));
        assert_eq!(deferral(at("2026-09-30T00:00:00Z"), now), Deferral::Hide(Duration::ZERO));
    }

    #[test]
    fn further_away_parks_at_the_opening_rounded_up() {
        let now = at("2026-10-01T00:00:00Z");
        assert_eq!(
            deferral(at("2026-10-31T09:00:00Z"), now),
            Deferral::Park { at: at("2026-10-31T09:00:00Z") }
        );
        assert_eq!(
            deferral(at("2026-10-01T12:00:00.001Z"), now),
            Deferral::Park { at: at("2026-10-01T12:01:00Z") }
        );
        assert_eq!(
            deferral(at("2026-10-05T08:59:30Z"), now),
            Deferral::Park { at: at("2026-10-05T09:00:00Z") }
        );
    }

    #[test]
    fn backoff_grows_is_capped_and_jitters_over_the_upper_half() {
        assert_eq!(backoff(1, 0.0), Duration::from_secs(15));
        assert_eq!(backoff(1, 1.0), Duration::from_secs(30));
        assert_eq!(backoff(2, 1.0), Duration::from_secs(60));
        assert_eq!(backoff(30, 1.0), BACKOFF_CAP);
        assert_eq!(backoff(30, 0.0), BACKOFF_CAP / 2);
        assert_eq!(backoff(0, 7.0), BACKOFF_BASE, "jitter is clamped, receive 0 counts as the first");
    }
}
