//! The trace — everything decided by the seed alone, hence the same for every strategy: the
//! notices and their windows, every enqueue, and the chaos of each receive.

use std::sync::Arc;

use chrono::{DateTime, NaiveDate, Utc};
use notice_ledger::{Job, WindowPolicy};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::args::{Params, Span};
use super::time::{Ms, DAY, HOUR, MINUTE, SECOND};

/// A spurious broker duplicate arrives within this long of the receive it copies.
const GHOST_WITHIN: Ms = 10 * SECOND;
/// A producer duplicate is enqueued within this long of the original.
const PRODUCER_DUP_WITHIN: Ms = 20 * MINUTE;
/// The first charge day, counted from the start; billing runs at this hour.
const FIRST_CHARGE_DAY: i64 = 4;
const CHARGE_HOUR: Ms = 9 * HOUR;

/// Why a job entered the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    Producer,
    ProducerDuplicate,
    Replay,
}

/// One renewal reminder: its job and its window in simulated time.
pub(super) struct Notice {
    pub(super) body: Arc<str>,
    pub(super) job: Job,
    pub(super) opens_at: Ms,
    pub(super) closes_at: Ms,
}

/// Everything the seed decides, read (never changed) by every run.
pub(super) struct Trace {
    start: DateTime<Utc>,
    pub(super) policy: WindowPolicy,
    pub(super) notices: Vec<Notice>,
    /// (when, notice, why): every enqueue the producer and the operator make, in the same order for
    /// every strategy. Its index names the message and keys its per-receive chaos.
    pub(super) enqueues: Vec<(Ms, usize, Origin)>,
    /// Nothing can be sent after this: every window has closed.
    pub(super) horizon: Ms,
}

/// Same trace, summarised.
#[derive(Clone, Debug, Serialize)]
pub(super) struct TraceSummary {
    pub(super) notices: usize,
    pub(super) enqueues: usize,
    pub(super) producer_duplicates: usize,
    pub(super) replayed_jobs: usize,
    pub(super) redeploy_at: Option<String>,
    pub(super) replay_at: Option<String>,
}

impl Trace {
    pub(super) fn build(p: &Params) -> Result<Self, String> {
        let start = NaiveDate::from_ymd_opt(2026, 10, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|n| n.and_utc())
            .ok_or("cannot build the start instant")?;
        let policy = WindowPolicy::default();
        let mut rng = StdRng::seed_from_u64(p.seed);
        let mut notices = Vec::with_capacity(p.notices);
        let mut enqueues = Vec::with_capacity(p.notices + p.notices / 8);
        let mut horizon = 0;
        let lead = p.lead_days.map(|days| i64::from(days) * DAY);
        for i in 0..p.notices {
            let day = rng.gen_range(FIRST_CHARGE_DAY..FIRST_CHARGE_DAY + i64::from(p.charge_days));
            // Drawn in the same place with or without a lead, so the day-0 trace stays as it was.
            let enqueue_draw = rng.gen_range(0..lead.unwrap_or(DAY));
            let duplicate = rng.gen::<f64>() < p.producer_dup_rate;
            let duplicate_after = rng.gen_range(0..=PRODUCER_DUP_WITHIN);

            let charge_at = day * DAY + CHARGE_HOUR;
            let charge = start + chrono::Duration::milliseconds(charge_at);
            let body = serde_json::json!({
                "subscription_id": format!("sub_{i:07}"),
                "period_start": charge.format("%Y-%m-%d").to_string(),
                "kind": "renewal_notice_t72",
                "email": format!("customer{i}@example.com"),
                "charge_at": charge.to_rfc3339(),
                "template_data": { "plan_name": "Coffee Box", "amount": {"minor": 2900, "currency": "USD"} },
            })
            .to_string();
            let job = Job::parse(&body, &notice_texts::Icu)
                .map_err(|e| format!("simulated job {i} is invalid: {e}"))?;
            let window = policy.window_for(&job);
            let opens_at = charge_at - i64::from(window.opens_hours_before) * HOUR;
            let closes_at = charge_at - i64::from(window.closes_hours_before) * HOUR;
            horizon = horizon.max(closes_at + DAY);
            // With a lead, early jobs are enqueued before day 0: simulated time may be negative.
            let enqueue_at = if lead.is_some() { opens_at - enqueue_draw } else { enqueue_draw };

            enqueues.push((enqueue_at, i, Origin::Producer));
            if duplicate {
                enqueues.push((enqueue_at + duplicate_after, i, Origin::ProducerDuplicate));
            }
            notices.push(Notice { body: body.into(), job, opens_at, closes_at });
        }
        if let Some(at) = p.replay_at_ms {
            let charge_of = |n: &Notice| (n.job.charge_at - start).num_milliseconds();
            for (i, n) in notices.iter().enumerate() {
                if (p.replay_from_ms..p.replay_to_ms).contains(&charge_of(n)) {
                    enqueues.push((at, i, Origin::Replay));
                }
            }
        }
        Ok(Self { start, policy, notices, enqueues, horizon })
    }

    pub(super) fn at(&self, t: Ms) -> DateTime<Utc> {
        self.start + chrono::Duration::milliseconds(t)
    }

    pub(super) fn ms(&self, instant: DateTime<Utc>) -> Ms {
        (instant - self.start).num_milliseconds()
    }

    pub(super) fn summary(&self, p: &Params) -> TraceSummary {
        let count = |o: Origin| self.enqueues.iter().filter(|e| e.2 == o).count();
        TraceSummary {
            notices: self.notices.len(),
            enqueues: self.enqueues.len(),
            producer_duplicates: count(Origin::ProducerDuplicate),
            replayed_jobs: count(Origin::Replay),
            redeploy_at: p.redeploy_at_ms.map(|t| Span(t).to_string()),
            replay_at: p.replay_at_ms.map(|t| Span(t).to_string()),
        }
    }
}

/// Where a worker dies during one receive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Crash {
    BeforeClaim,
    AfterClaimBeforeSend,
    AfterSendBeforeCommit,
    AfterCommitBeforeAck,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    Accepted,
    /// Accepted, then a 5xx: the message is out, the worker cannot know.
    UnknownAfterAccept,
    Throttled,
}

/// The chaos of one receive of one message: a pure function of (seed, enqueue index, receive).
#[derive(Clone, Copy, Debug)]
pub(super) struct Fate {
    pub(super) crash: Option<Crash>,
    pub(super) latency: Ms,
    pub(super) answer: Answer,
    pub(super) ghost_after: Option<Ms>,
    pub(super) jitter: f64,
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(super) fn fate(p: &Params, enqueue: usize, receive: u32) -> Fate {
    let stream = splitmix(splitmix(p.seed) ^ splitmix((enqueue as u64) << 16 ^ u64::from(receive)));
    let mut rng = StdRng::seed_from_u64(stream);
    // Every draw is made on every receive, in this order, so no fate shifts another.
    let u_crash: f64 = rng.gen();
    let u_latency: f64 = rng.gen();
    let u_answer: f64 = rng.gen();
    let u_ghost: f64 = rng.gen();
    let ghost_after = rng.gen_range(0..=GHOST_WITHIN);
    let jitter: f64 = rng.gen();

    let c = p.crash_rate;
    let crash = [
        Crash::BeforeClaim,
        Crash::AfterClaimBeforeSend,
        Crash::AfterSendBeforeCommit,
        Crash::AfterCommitBeforeAck,
    ]
    .into_iter()
    .enumerate()
    .find(|(i, _)| u_crash < c * (*i as f64 + 1.0))
    .map(|(_, crash)| crash);
    // Pareto: x_m / U^(1/α), with x_m chosen so that the median is `latency_median`.
    let x_m = p.latency_median_ms as f64 / 2f64.powf(1.0 / p.latency_alpha);
    let latency = (x_m / (1.0 - u_latency).powf(1.0 / p.latency_alpha)).min(p.latency_cap_ms as f64);
    let answer = if u_answer < p.unknown_rate {
        Answer::UnknownAfterAccept
    } else if u_answer < p.unknown_rate + p.throttle_rate {
        Answer::Throttled
    } else {
        Answer::Accepted
    };
    Fate {
        crash,
        latency: (latency as Ms).max(1),
        answer,
        ghost_after: (u_ghost < p.ghost_rate).then_some(ghost_after),
        jitter,
    }
}
