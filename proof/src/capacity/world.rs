//! What the modelled services and the event loop share: the notices' books, the events the
//! services raise for the loop, and the seeded randomness.

use std::sync::{Arc, Mutex, MutexGuard};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::clock::{Us, MS};
use super::producer::Notice;

/// Something the loop handles at a simulated instant (besides waking a task).
#[derive(Clone, Copy, Debug)]
pub(super) enum Ev {
    /// A producer enqueues the next notice.
    Produce,
    /// A schedule holding notice `idx` is due.
    Fire { idx: u32 },
    /// Scheduler's target invocation puts notice `idx` back on the queue.
    Unpark { idx: u32 },
    /// A hidden message's visibility timeout ends (stale unless `vis` still matches).
    Visible { msg: u32, vis: u32 },
    /// The operator's replay enqueues `left` more notices (at once, or a second's worth).
    Replay { left: u32 },
    /// An invocation crashes where it stands.
    Crash { task: u32, invocation: u64 },
    /// A batching window that began with fewer than a batch visible ends: invoke with what is there.
    BatchWindow,
    /// Once a second: Lambda's poller scaling, on-demand growth.
    Tick,
}

/// The notices, and events raised by services for the loop.
#[derive(Default)]
pub(super) struct Books {
    pub(super) notices: Vec<Notice>,
    pub(super) outbox: Vec<(Us, Ev)>,
}

pub(super) type Shared = Arc<Mutex<Books>>;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A service's latency: log-normal around `median` (σ = 0.5), capped at 10× the median.
#[derive(Clone, Copy, Debug)]
pub(super) struct Latency {
    pub(super) median: Us,
}

impl Latency {
    pub(super) fn ms(median_ms: f64) -> Self {
        Self { median: (median_ms * MS as f64) as Us }
    }

    pub(super) fn sample(&self, rng: &mut StdRng) -> Us {
        // Box–Muller: one standard normal from two uniforms.
        let u1: f64 = rng.gen::<f64>().max(f64::MIN_POSITIVE);
        let u2: f64 = rng.gen();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let x = self.median as f64 * (0.5 * z).exp();
        (x.min(self.median as f64 * 10.0)) as Us
    }
}

/// One seeded generator per concern, so adding a draw in one place leaves the others' streams alone.
pub(super) fn seeded(seed: u64, lane: u64) -> StdRng {
    StdRng::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ lane)
}

/// [`seeded`], for a service shared by the run's invocations.
pub(super) fn rng(seed: u64, lane: u64) -> Mutex<StdRng> {
    Mutex::new(seeded(seed, lane))
}
