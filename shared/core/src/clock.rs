//! Time as a port: the sender is handed its clock, as tests hand tokio a paused one, so nothing
//! below the composition root reads the wall clock for what it writes. A delivery is judged at
//! the instant its caller gives it (the delivery context's `at`); the commit that follows its
//! send is stamped by this clock — the wall clock where a sender runs for real, one pinned instant
//! in a rehearsal (`noticectl send --now`), so that every row of a rehearsal carries one time.

use chrono::{DateTime, Utc};

/// Where the sender reads the time of the writes that follow a send (commit, reject, release).
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock: what a deployed sender runs with.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// One instant, always: a rehearsal at a pinned time.
#[derive(Clone, Copy, Debug)]
pub struct PinnedClock(pub DateTime<Utc>);

impl Clock for PinnedClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
    }
}
