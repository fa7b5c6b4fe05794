//! The arithmetic: GCRA over one integer of state, as pure functions of (state, now, limit).
//!
//! Why GCRA rather than stored (tokens, last refill): one integer of state, no refill rounding, a
//! limit change applies at once to existing buckets, and TAT only ever moves forward — so a stale
//! copy can only under-estimate how full the bucket is, and a sender whose clock is behind (a
//! `now` earlier than the stored TAT) finds *less* room, never more.

use chrono::{DateTime, Utc};

use crate::limits::Limit;

/// Stored state of one bucket: the theoretical arrival time of the next send at the sustained
/// rate, in microseconds since the epoch. It only ever moves forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BucketState {
    pub tat_us: i64,
}

/// What [`gcra`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Take a token: store this state.
    Admit(BucketState),
    /// No token now; the next one is due at this instant (microseconds since the epoch).
    Limited { due_us: i64 },
}

/// GCRA: admit at `now_us` when the bucket's TAT is at most `(burst − 1)` intervals ahead; an
/// admission moves TAT one interval past `max(TAT, now)`. `None` is an empty (full-of-tokens)
/// bucket. A `now` earlier than the stored TAT keeps the stored TAT, so a lagging clock sees less
/// room, never more; over any span `t` at most `burst + t / interval` sends are admitted.
pub fn gcra(state: Option<BucketState>, now_us: i64, limit: &Limit) -> Decision {
    let tat = state.map_or(now_us, |s| s.tat_us.max(now_us));
    let tolerance = limit.tolerance_us();
    if tat.saturating_sub(now_us) > tolerance {
        return Decision::Limited { due_us: tat.saturating_sub(tolerance) };
    }
    Decision::Admit(BucketState { tat_us: tat.saturating_add(limit.interval_us()) })
}

/// What [`grant`] decided for a request of several tokens at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Tokens granted (0 ..= wanted).
    pub granted: u32,
    /// The state to store when `granted > 0`: TAT `granted` intervals past `max(TAT, now)`.
    pub next: BucketState,
    /// When the next token after these is due (microseconds since the epoch).
    pub due_us: i64,
}

/// GCRA for `want` tokens at once: as many as fit at `now_us` (up to `want`), so a batch's records
/// to one domain take their tokens in one write. Equal to calling [`gcra`] `granted` times.
pub fn grant(state: Option<BucketState>, now_us: i64, want: u32, limit: &Limit) -> Grant {
    let interval = limit.interval_us();
    let base = state.map_or(now_us, |s| s.tat_us.max(now_us));
    let ceiling = now_us.saturating_add(i64::from(limit.burst).saturating_mul(interval));
    let room = u32::try_from(ceiling.saturating_sub(base).max(0) / interval).unwrap_or(u32::MAX);
    let granted = want.min(room);
    let tat = base.saturating_add(i64::from(granted).saturating_mul(interval));
    Grant { granted, next: BucketState { tat_us: tat }, due_us: tat.saturating_sub(limit.tolerance_us()) }
}

/// Tokens available at `now_us` (what a gate would admit in a row right now): for operators and
/// tests.
pub fn tokens(state: Option<BucketState>, now_us: i64, limit: &Limit) -> u32 {
    let Some(state) = state else { return limit.burst };
    let ahead = state.tat_us.saturating_sub(now_us).max(0);
    let room = limit.tolerance_us().saturating_add(limit.interval_us()).saturating_sub(ahead);
    u32::try_from(room.max(0) / limit.interval_us()).unwrap_or(u32::MAX).min(limit.burst)
}

pub(crate) fn micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

pub(crate) fn instant(us: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(us).unwrap_or(DateTime::<Utc>::MAX_UTC)
}
