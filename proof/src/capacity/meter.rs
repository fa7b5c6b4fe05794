//! Capacity meters: what a modelled service admits per second, and the peak it saw.

use super::clock::{Us, SEC};

/// A service limit of `rate` units a second with `burst` units of headroom — DynamoDB's
/// per-partition and per-table throughput, SES's MaxSendRate, Scheduler's request quotas. A
/// request over it is refused (throttled) and uses nothing.
#[derive(Clone, Debug)]
pub(super) struct Meter {
    rate: f64,
    burst: f64,
    level: f64,
    at: Us,
}

impl Meter {
    /// Full at the start, `burst_secs` seconds of `rate` deep (at least one unit).
    pub(super) fn new(rate: f64, burst_secs: f64) -> Self {
        let burst = (rate * burst_secs).max(1.0);
        Self { rate, burst, level: burst, at: 0 }
    }

    pub(super) fn rate(&self) -> f64 {
        self.rate
    }

    /// Raises the rate (an on-demand table growing towards twice its previous peak).
    pub(super) fn set_rate(&mut self, rate: f64, burst_secs: f64) {
        self.rate = rate;
        self.burst = (rate * burst_secs).max(1.0);
    }

    fn refill(&mut self, now: Us) {
        if now > self.at {
            let secs = (now - self.at) as f64 / SEC as f64;
            self.level = (self.level + secs * self.rate).min(self.burst);
            self.at = now;
        }
    }

    /// Takes `units` at `now`, or refuses and takes nothing.
    pub(super) fn try_take(&mut self, units: f64, now: Us) -> bool {
        let ok = self.has(units, now);
        if ok {
            self.level -= units;
        }
        ok
    }

    /// Whether `units` are available at `now` (for a request that needs several meters at once).
    pub(super) fn has(&mut self, units: f64, now: Us) -> bool {
        self.refill(now);
        self.level >= units
    }

    /// Takes `units` checked by [`Meter::has`] at the same instant.
    pub(super) fn take(&mut self, units: f64) {
        self.level -= units;
    }

    /// When `units` would next be available, for a queue served at the meter's rate (Scheduler
    /// delays invocations above its throttle instead of refusing them): takes them then.
    pub(super) fn reserve(&mut self, units: f64, now: Us) -> Us {
        self.refill(now);
        self.level -= units;
        if self.level >= 0.0 {
            return now;
        }
        let wait = (-self.level / self.rate * SEC as f64).ceil() as Us;
        now + wait
    }
}

/// Seconds a peak is averaged over. A bucket with a second of burst lets one calendar second
/// reach burst + rate — twice its rate — without anything being throttled; averaging over a few
/// seconds compares sustained use with a quota, and every throttle is counted apart.
pub(super) const PEAK_WINDOW_SECS: usize = 5;

/// The busiest [`PEAK_WINDOW_SECS`]-second average of units per second — the figure compared
/// with a quota.
#[derive(Clone, Debug, Default)]
pub(super) struct Peak {
    second: i64,
    /// Units in the current second and the ones before it, newest last.
    window: [f64; PEAK_WINDOW_SECS],
    peak: f64,
}

impl Peak {
    pub(super) fn add(&mut self, units: f64, now: Us) {
        let second = now.div_euclid(SEC);
        if second != self.second {
            self.close();
            let gap = (second - self.second).clamp(0, PEAK_WINDOW_SECS as i64) as usize;
            self.window.rotate_left(gap);
            for slot in &mut self.window[PEAK_WINDOW_SECS - gap..] {
                *slot = 0.0;
            }
            self.second = second;
        }
        self.window[PEAK_WINDOW_SECS - 1] += units;
    }

    fn close(&mut self) {
        let avg = self.window.iter().sum::<f64>() / PEAK_WINDOW_SECS as f64;
        self.peak = self.peak.max(avg);
    }

    /// The peak so far, the current window included.
    pub(super) fn peak(&self) -> f64 {
        let avg = self.window.iter().sum::<f64>() / PEAK_WINDOW_SECS as f64;
        self.peak.max(avg)
    }
}

/// A level (messages in flight, live schedules) and the highest it reached.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Gauge {
    pub(super) now: i64,
    pub(super) peak: i64,
}

impl Gauge {
    pub(super) fn add(&mut self, d: i64) {
        self.now += d;
        self.peak = self.peak.max(self.now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meter_admits_its_rate_and_throttles_above_it() {
        // 1 000 units a second, one second of burst: 3 000 requests spread evenly over 2 s
        // (1 500/s) get the burst plus 2 s of rate, the rest are throttled.
        let mut m = Meter::new(1_000.0, 1.0);
        let mut granted = 0;
        for i in 0..3_000 {
            if m.try_take(1.0, i * 2 * SEC / 3_000) {
                granted += 1;
            }
        }
        assert!((2_900..=3_000).contains(&granted), "granted {granted}");
        let mut m = Meter::new(1_000.0, 1.0);
        let mut granted = 0;
        for i in 0..30_000 {
            if m.try_take(1.0, i * 10 * SEC / 30_000) {
                granted += 1;
            }
        }
        // 3 000/s offered for 10 s against 1 000/s: about 1 000 burst + 10 000.
        assert!((10_500..=11_100).contains(&granted), "granted {granted}");
    }

    #[test]
    fn a_reserved_meter_serves_a_burst_at_its_rate() {
        let mut m = Meter::new(1_000.0, 0.001);
        let last = (0..5_000).map(|_| m.reserve(1.0, 0)).max().unwrap_or(0);
        // 5 000 due at once drain in about 5 s.
        assert!((4_900 * 1_000..=5_000 * 1_000).contains(&last), "last at {last} µs");
    }

    #[test]
    fn the_peak_is_the_busiest_window() {
        let mut p = Peak::default();
        // 10 a second for 20 s, then 50 in one second, then quiet.
        for s in 0..20 {
            for i in 0..10 {
                p.add(1.0, s * SEC + i * 100_000);
            }
        }
        assert_eq!(p.peak(), 10.0);
        for i in 0..50 {
            p.add(1.0, 20 * SEC + i * 10_000);
        }
        p.add(0.0, 40 * SEC);
        // The window holding the spike: four seconds of 10 and one of 50.
        assert_eq!(p.peak(), 90.0 / 5.0);
    }
}
