//! Simulated time: milliseconds since the start of a run (2026-10-01T00:00:00Z), and its units.

/// Simulated milliseconds since the start of a run (2026-10-01T00:00:00Z).
pub(super) type Ms = i64;

pub(super) const SECOND: Ms = 1_000;
pub(super) const MINUTE: Ms = 60 * SECOND;
pub(super) const HOUR: Ms = 60 * MINUTE;
pub(super) const DAY: Ms = 24 * HOUR;

/// A duration of the shared retry rule in simulated milliseconds.
pub(super) fn ms(d: std::time::Duration) -> Ms {
    Ms::try_from(d.as_millis()).unwrap_or(Ms::MAX)
}
