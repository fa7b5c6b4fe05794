//! Pacing a replay by the senders' own buckets. A replay enqueued faster than a provider's
//! bucket admits is not sent any sooner: its extra jobs are limited, hidden on the queue and back
//! off for up to 15 minutes, so the bucket refills unused while they sleep and the backlog drains
//! slower than the provider's rate (docs/capacity.md, *A replay to one provider*). Enqueued at
//! the rate each bucket admits, nearly every job finds its token on its first receive.
//!
//! The plan gives every job the instant it may be enqueued: each provider (or named domain) and
//! the account at their bucket's rate, as the senders' [`RateLimits`] place the job, and every job
//! at most `--rate` a second. Jobs of different buckets do not wait for each other: a replay of
//! 40 000 gmail.com jobs and 100 others sends the 100 at once.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use notice_ledger::rate::RateLimits;

/// The lane of jobs whose domain has no bucket of its own (the long tail: the account only).
pub const TAIL_LANE: &str = "other domains";

/// One bucket's share of a replay.
#[derive(Clone, Debug, PartialEq)]
pub struct Lane {
    /// The bucket (`provider:google`, a named domain) or [`TAIL_LANE`].
    pub name: String,
    /// Its rate; `None` for the tail, which only the account and `--rate` pace.
    pub per_second: Option<f64>,
    pub jobs: usize,
    /// When its last job may be enqueued, from the start.
    pub last: Duration,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// When each job, in the caller's order, may be enqueued, from the start.
    pub offsets: Vec<Duration>,
    pub lanes: Vec<Lane>,
    /// The account's rate, when it has a limit.
    pub account_per_second: Option<f64>,
    /// When the last job may be enqueued.
    pub total: Duration,
}

/// Plans `domains` (each job's recipient domain, in enqueue order) under `limits` (`None`: limits
/// are off) at `share` (in (0, 1]) of each bucket's rate — the rest left to live traffic — and at
/// most `overall` jobs a second. Within a lane jobs keep their order; across lanes the job that
/// may go earliest goes first.
pub fn plan(limits: Option<&RateLimits>, domains: &[String], share: f64, overall: f64) -> Plan {
    let overall = overall.max(f64::MIN_POSITIVE);
    let share = if share.is_finite() { share.clamp(f64::MIN_POSITIVE, 1.0) } else { 1.0 };
    let account =
        limits.and_then(|l| l.account_limit()).map(|a| a.limit.per_second * share).filter(|r| *r > 0.0);
    let mut names: Vec<String> = Vec::new();
    let mut rates: Vec<Option<f64>> = Vec::new();
    let mut queues: Vec<VecDeque<usize>> = Vec::new();
    let mut counts: Vec<usize> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    for (i, domain) in domains.iter().enumerate() {
        let bucket = limits.and_then(|l| l.bucket_for(domain));
        let (name, rate) = match bucket {
            Some(b) => (b.item, Some(b.limit.limit.per_second * share).filter(|r| *r > 0.0)),
            None => (TAIL_LANE.to_owned(), None),
        };
        let lane = *index.entry(name.clone()).or_insert_with(|| {
            names.push(name);
            rates.push(rate);
            queues.push(VecDeque::new());
            counts.push(0);
            names.len() - 1
        });
        queues[lane].push_back(i);
        counts[lane] += 1;
    }
    let mut offsets = vec![0.0f64; domains.len()];
    let mut lane_next = vec![0.0f64; names.len()];
    let mut lane_last = vec![0.0f64; names.len()];
    let (mut account_next, mut all_next) = (0.0f64, 0.0f64);
    loop {
        // The lane whose next job may go earliest (the first such lane on a tie).
        let mut best: Option<(usize, f64)> = None;
        for (lane, queue) in queues.iter().enumerate() {
            if queue.is_empty() {
                continue;
            }
            let at = lane_next[lane].max(account_next).max(all_next);
            if best.is_none_or(|(_, t)| at < t) {
                best = Some((lane, at));
            }
        }
        let Some((lane, at)) = best else { break };
        let Some(job) = queues[lane].pop_front() else { break };
        offsets[job] = at;
        lane_last[lane] = at;
        if let Some(rate) = rates[lane] {
            lane_next[lane] = at + 1.0 / rate;
        }
        if let Some(rate) = account {
            account_next = at + 1.0 / rate;
        }
        all_next = at + 1.0 / overall;
    }
    let secs = |s: f64| Duration::from_secs_f64(s.max(0.0));
    let total = offsets.iter().copied().fold(0.0, f64::max);
    let lanes = names
        .into_iter()
        .zip(rates)
        .enumerate()
        .map(|(lane, (name, per_second))| Lane {
            name,
            per_second,
            jobs: counts[lane],
            last: secs(lane_last[lane]),
        })
        .collect();
    Plan {
        offsets: offsets.into_iter().map(secs).collect(),
        lanes,
        account_per_second: account,
        total: secs(total),
    }
}

/// `1 h 46 min`, `3 min 20 s`, `12 s`, `0.4 s`: how long a plan takes, for people.
pub fn human(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 10.0 {
        return format!("{secs:.1} s");
    }
    let s = secs.round() as u64;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s} s"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, m, _) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_send_rate: f64) -> RateLimits {
        RateLimits::builtin().with_account_rate(Some(max_send_rate))
    }

    fn domains(spec: &[(&str, usize)]) -> Vec<String> {
        spec.iter().flat_map(|(d, n)| std::iter::repeat_n((*d).to_owned(), *n)).collect()
    }

    /// The most jobs of `of` (by index) in any window of `secs` seconds.
    fn most_in(offsets: &[Duration], of: impl Fn(usize) -> bool, secs: f64) -> usize {
        let mut at: Vec<f64> =
            offsets.iter().enumerate().filter(|(i, _)| of(*i)).map(|(_, d)| d.as_secs_f64()).collect();
        at.sort_by(f64::total_cmp);
        let mut best = 0;
        let mut lo = 0;
        for hi in 0..at.len() {
            while at[hi] - at[lo] >= secs {
                lo += 1;
            }
            best = best.max(hi - lo + 1);
        }
        best
    }

    #[test]
    fn one_provider_goes_at_its_bucket_rate_and_the_rest_do_not_wait_behind_it() {
        // SES at 14/s: the account 12.6/s, google 6.3/s.
        let l = limits(14.0);
        let d = domains(&[("gmail.com", 630), ("tail.example", 100)]);
        let p = plan(Some(&l), &d, 1.0, 50.0);
        let gmail = |i: usize| i < 630;
        // 630 at 6.3/s: the last at 99.84 s at the earliest (the first at 0), a little later
        // where a tail job took the account's slot.
        let last_gmail = p.offsets[..630].iter().max().copied().unwrap_or_default().as_secs_f64();
        assert!((629.0 / 6.3..629.0 / 6.3 + 2.0).contains(&last_gmail), "{last_gmail}");
        assert!(most_in(&p.offsets, gmail, 10.0) <= 64, "at most 6.3/s to google");
        // The tail shares the account with google: 12.6/s together, so the 100 are done in
        // about 100 / 6.3 s, not behind the 630.
        let last_tail = p.offsets[630..].iter().max().copied().unwrap_or_default();
        assert!(last_tail.as_secs_f64() < 20.0, "{last_tail:?}");
        assert!(most_in(&p.offsets, |_| true, 10.0) <= 127, "at most 12.6/s on the account");
        let lane = |n: &str| p.lanes.iter().find(|l| l.name == n).cloned();
        assert_eq!(lane("provider:google").map(|l| (l.jobs, l.per_second)), Some((630, Some(6.3))));
        assert_eq!(lane(TAIL_LANE).map(|l| (l.jobs, l.per_second)), Some((100, None)));
        assert_eq!(p.account_per_second, Some(12.6));
        assert_eq!(p.total.as_secs_f64(), last_gmail);
    }

    #[test]
    fn rate_caps_every_lane_and_order_within_a_lane_is_kept() {
        let l = limits(1000.0);
        let d = domains(&[("outlook.com", 50), ("yahoo.com", 50)]);
        let p = plan(Some(&l), &d, 1.0, 10.0);
        assert!(most_in(&p.offsets, |_| true, 0.999) <= 10, "--rate 10 caps the whole replay");
        for w in p.offsets[..50].windows(2) {
            assert!(w[0] <= w[1], "a lane keeps the file's order");
        }
        assert!((p.total.as_secs_f64() - 9.9).abs() < 0.01, "{:?}", p.total);
    }

    #[test]
    fn limits_off_pace_by_rate_alone() {
        let d = domains(&[("gmail.com", 20)]);
        let p = plan(None, &d, 1.0, 5.0);
        assert_eq!(p.lanes.len(), 1);
        assert_eq!(p.lanes[0].name, TAIL_LANE);
        assert!((p.total.as_secs_f64() - 19.0 / 5.0).abs() < 1e-9);
        assert!(plan(None, &[], 1.0, 5.0).offsets.is_empty());
    }

    #[test]
    fn a_share_leaves_the_rest_of_each_bucket_to_live_traffic() {
        let l = limits(14.0);
        let d = domains(&[("gmail.com", 64)]);
        let p = plan(Some(&l), &d, 0.5, 50.0);
        assert_eq!(p.lanes[0].per_second, Some(3.15));
        assert_eq!(p.account_per_second, Some(6.3));
        assert!((p.total.as_secs_f64() - 63.0 / 3.15).abs() < 1e-6, "{:?}", p.total);
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(human(Duration::from_secs(12)), "12 s");
        assert_eq!(human(Duration::from_millis(389)), "0.4 s");
        assert_eq!(human(Duration::from_secs(200)), "3 min 20 s");
        assert_eq!(human(Duration::from_secs(6344)), "1 h 45 min");
        assert_eq!(human(Duration::from_secs_f64(3.000_000_4)), "3.0 s");
    }
}
