//! `noticectl simulate`: a seeded chaos simulation that compares dedupe strategies on the same
//! traces — proof, not claims.
//!
//! # The model
//!
//! Discrete events in simulated milliseconds; nothing sleeps, so a week of traffic takes seconds.
//!
//! * **Notices.** `--notices` renewal reminders. Each charges at 09:00 UTC on one of `--charge-days`
//!   days starting on day 4, and its job is enqueued at a random instant of day 0 (days ahead of its
//!   window) or, with `--lead-days N`, at a random instant up to N days before its window opens, as
//!   producers do (simulated time before day 0 is negative). The window is the core's
//!   [`WindowPolicy`] (opens 72 h, closes 24 h before the charge), applied by every strategy, so
//!   every window of one charge day opens at the same instant: the queue sees a burst.
//! * **Queue.** At-least-once, SQS-like. A receive hides the message for `--visibility-timeout`; a
//!   message that is neither deleted nor re-hidden in time is delivered again — even while its
//!   first worker is still waiting on a slow send. Deferred jobs are hidden until their window opens
//!   (at most 12 h at a time), failed ones back off: both by the sender's own rule,
//!   [`notice_ledger::retry`]. A delete or visibility change with a stale receipt (the message was
//!   received again since) is ignored. With probability `--ghost-rate` a receive is followed, within
//!   10 s, by a spurious second delivery of the same message to another consumer.
//! * **Queue limits.** These lose long-lead jobs that only wait on the queue. The redrive policy
//!   moves a message received `--max-receive-count` times (20) to the dead-letter queue instead of
//!   delivering it again, and the queue drops a message `--retention` (14 d) after its first
//!   enqueue, from the dead-letter queue too. Nothing redrives the dead-letter queue here.
//! * **Workers.** `--instances` worker instances, each running up to `--concurrency` jobs. An
//!   instance that crashes loses every job it has in flight and its in-process cache, and restarts
//!   at once.
//! * **Chaos, per receive** (drawn from the seed, the message and the receive number, so it is the
//!   same for every strategy): a crash with probability `--crash-rate` at *each* step — before the
//!   claim, after the claim and before the send, after the send and before the commit, after the
//!   commit and before the ack; a send latency from a Pareto distribution (`--latency-median`,
//!   `--latency-alpha`, capped at `--latency-cap`); a provider answer that is "500 after accept"
//!   (`--unknown-rate`: the message went out but the worker cannot know) or "throttled"
//!   (`--throttle-rate`: nothing went out). A send slower than `--send-timeout` is abandoned by the
//!   worker as unknown, but the provider still accepts it when its latency is up.
//! * **Chaos, per trace:** the producer enqueues some jobs twice, up to 20 min apart
//!   (`--producer-dup-rate`); a redeploy at `--redeploy-at` kills every in-flight job and every
//!   cache at one instant (default: 3 s into the first window burst); at `--replay-at` an operator
//!   re-enqueues every job whose charge lies in [`--replay-from`, `--replay-to`) — by default jobs
//!   already delivered that morning, whose windows are still open.
//!
//! # The strategies
//!
//! * `none` — send whatever arrives.
//! * `in-process cache` — each instance remembers what it sent; lost on crash and redeploy.
//! * `broker dedup id` — the broker drops a re-enqueue of the same notice within `--dedup-window`
//!   and never delivers a message spuriously twice (FIFO-style); visibility expiry still redelivers.
//! * `shared cache claim (TTL)` — `SET key NX EX ttl` before the send, refreshed on success and
//!   deleted on failure; a held key means "someone has it" and the job is acked. One row per `--ttl`.
//! * `durable ledger` — **the real core**: a [`NoticeSender`] over a `MemoryLedger` (or a SQLite
//!   file with `--ledger sqlite`) and a mailer adapter that hands each send to this simulation.
//!   The simulation polls the real `deliver_body` future with the simulated `now` and, while the
//!   simulated send is in flight, keeps it suspended inside the mailer call; a crash drops the
//!   future exactly where the worker stopped. Like the baselines, it waits for a window on the
//!   queue, 12 h per hop.
//! * `durable ledger, parking` — the same, plus the sender's parking: a job deferred because its
//!   window opens more than 12 h away ([`retry::deferral`] says `Park`; never a rate limit) gets a
//!   one-time schedule named by its notice key, then is acked. At the opening (rounded up to the
//!   minute) the schedule puts the same body back on the queue as a new message — new enqueue
//!   time, receive count 0 — and deletes itself. A second park while the schedule exists
//!   conflicts: acked, nothing created. The schedule is created before the ack, so a crash between
//!   the two (the "after the commit" crash) brings the message back to park again and conflict.
//!
//! # What is counted
//!
//! *Duplicates*: copies a customer received beyond the first. *Lost*: notices never delivered,
//! not quarantined and not recorded as missed — among them those whose messages were all
//! dead-lettered or expired. *Quarantined*: notices whose ledger row is still an open claim at the
//! end — the outcome is unknown to the workers, and the claim is on the operators' quarantine view
//! (the reconciler closes the ones the provider reports as sent). *Sends/notice*: provider calls
//! per notice.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use notice_ledger::faults::FaultyLedger;
use notice_ledger::ledger::memory::MemoryLedger;
use notice_ledger::ledger::{Ledger, RowState};
use notice_ledger::links::ManageLinks;
use notice_ledger::mailer::{Mailer, NotAccepted, OutgoingMail, SendResult};
use notice_ledger::metrics::Metrics;
use notice_ledger::render::Renderer;
use notice_ledger::retry::{self, Deferral};
use notice_ledger::{
    Delivery, Disposition, Job, Mode, NoticeKey, NoticeSecret, NoticeSender, Outcome, SendBudget,
    WindowDecision, WindowPolicy,
};
use notice_sqlite::SqliteLedger;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Simulated milliseconds since the start of a run (2026-10-01T00:00:00Z).
type Ms = i64;

const SECOND: Ms = 1_000;
const MINUTE: Ms = 60 * SECOND;
const HOUR: Ms = 60 * MINUTE;
const DAY: Ms = 24 * HOUR;
/// A spurious broker duplicate arrives within this long of the receive it copies.
const GHOST_WITHIN: Ms = 10 * SECOND;
/// A producer duplicate is enqueued within this long of the original.
const PRODUCER_DUP_WITHIN: Ms = 20 * MINUTE;
/// The first charge day, counted from the start; billing runs at this hour.
const FIRST_CHARGE_DAY: i64 = 4;
const CHARGE_HOUR: Ms = 9 * HOUR;

#[derive(clap::Args, Debug, Clone)]
pub struct SimulateArgs {
    /// Notices to deliver.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub notices: u32,
    /// Seed of the trace: the same seed gives the same schedule of chaos to every strategy.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Ledger behind the durable strategy.
    #[arg(long, value_enum, default_value = "memory")]
    pub ledger: SimLedger,
    /// Worker instances.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub instances: u32,
    /// Jobs one instance runs at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub concurrency: u32,
    /// Days over which charges are spread (one 09:00 UTC burst each).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=60))]
    pub charge_days: u32,
    /// Queue visibility timeout (e.g. 30s, 5m).
    #[arg(long, default_value = "30s", value_parser = parse_span)]
    pub visibility_timeout: Span,
    /// How long a worker waits for the provider before the outcome counts as unknown.
    #[arg(long, default_value = "45s", value_parser = parse_span)]
    pub send_timeout: Span,
    /// Median send latency.
    #[arg(long, default_value = "200ms", value_parser = parse_span)]
    pub latency_median: Span,
    /// Pareto shape of the send latency (smaller = heavier tail).
    #[arg(long, default_value_t = 1.0, value_parser = positive)]
    pub latency_alpha: f64,
    /// Longest send latency.
    #[arg(long, default_value = "10m", value_parser = parse_span)]
    pub latency_cap: Span,
    /// Probability of a worker crash at each of the four steps of one receive.
    #[arg(long, default_value_t = 0.001, value_parser = probability)]
    pub crash_rate: f64,
    /// Probability that the provider accepts a message but answers 5xx.
    #[arg(long, default_value_t = 0.005, value_parser = probability)]
    pub unknown_rate: f64,
    /// Probability that the provider throttles a send (nothing goes out).
    #[arg(long, default_value_t = 0.01, value_parser = probability)]
    pub throttle_rate: f64,
    /// Probability that the broker also delivers a received message to a second consumer.
    #[arg(long, default_value_t = 0.01, value_parser = probability)]
    pub ghost_rate: f64,
    /// Probability that the producer enqueues a job twice.
    #[arg(long, default_value_t = 0.02, value_parser = probability)]
    pub producer_dup_rate: f64,
    /// When every worker dies at once (e.g. 1d9h3s), or `off`.
    #[arg(long, default_value = "1d9h3s", value_parser = parse_when)]
    pub redeploy_at: When,
    /// When the operator replays a range of jobs, or `off`.
    #[arg(long, default_value = "2d15h", value_parser = parse_when)]
    pub replay_at: When,
    /// Replayed jobs: charge at or after this instant …
    #[arg(long, default_value = "5d", value_parser = parse_span)]
    pub replay_from: Span,
    /// … and before this one.
    #[arg(long, default_value = "6d", value_parser = parse_span)]
    pub replay_to: Span,
    /// Broker deduplication window.
    #[arg(long, default_value = "5m", value_parser = parse_span)]
    pub dedup_window: Span,
    /// TTLs of the shared-cache claim, one row each (comma-separated).
    #[arg(long, value_delimiter = ',', default_values = ["30s", "5m", "1h", "1d"], value_parser = parse_span)]
    pub ttl: Vec<Span>,
    /// Enqueue each job at a random instant up to this many days before its window opens, as
    /// producers do; without it every job is enqueued on day 0.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=365))]
    pub lead_days: Option<u32>,
    /// The queue's redrive policy: a message received this many times goes to the dead-letter
    /// queue at its next receive.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub max_receive_count: u32,
    /// The queue deletes a message this long after its first enqueue (SQS: at most 14 days).
    #[arg(long, default_value = "14d", value_parser = parse_span)]
    pub retention: Span,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SimLedger {
    Memory,
    Sqlite,
}

impl SimLedger {
    fn name(self) -> &'static str {
        match self {
            SimLedger::Memory => "memory",
            SimLedger::Sqlite => "sqlite",
        }
    }
}

/// A simulated duration, written like `1d9h3s`, `5m` or `200ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span(Ms);

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut left = self.0;
        if left == 0 {
            return f.write_str("0s");
        }
        for (unit, size) in [("d", DAY), ("h", HOUR), ("m", MINUTE), ("s", SECOND), ("ms", 1)] {
            if left >= size {
                write!(f, "{}{unit}", left / size)?;
                left %= size;
            }
        }
        Ok(())
    }
}

/// An instant of the run, or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct When(Option<Span>);

fn parse_span(s: &str) -> Result<Span, String> {
    let text = s.trim();
    let bad = |why: &str| format!("{text:?}: {why} (write durations like 200ms, 30s, 5m, 1d9h)");
    if text.is_empty() {
        return Err(bad("empty duration"));
    }
    let mut total: Ms = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad("expected a number"));
        }
        let n: i64 = rest[..digits].parse().map_err(|_| bad("number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let size = match &rest[..unit_len] {
            "ms" => 1,
            "s" => SECOND,
            "m" => MINUTE,
            "h" => HOUR,
            "d" => DAY,
            "" => return Err(bad("missing unit")),
            _ => return Err(bad("unknown unit")),
        };
        total = n.checked_mul(size).and_then(|v| total.checked_add(v)).ok_or_else(|| bad("too large"))?;
        rest = &rest[unit_len..];
    }
    Ok(Span(total))
}

fn parse_when(s: &str) -> Result<When, String> {
    if s.trim() == "off" {
        return Ok(When(None));
    }
    parse_span(s).map(|span| When(Some(span)))
}

fn probability(s: &str) -> Result<f64, String> {
    let p: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("{s} is not a probability between 0 and 1"));
    }
    Ok(p)
}

fn positive(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!("{s} must be a positive number"));
    }
    Ok(v)
}

/// Checked parameters of one simulation.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    pub notices: usize,
    pub seed: u64,
    pub ledger: SimLedger,
    pub instances: usize,
    pub concurrency: usize,
    pub charge_days: u32,
    pub visibility_timeout_ms: Ms,
    pub send_timeout_ms: Ms,
    pub latency_median_ms: Ms,
    pub latency_alpha: f64,
    pub latency_cap_ms: Ms,
    pub crash_rate: f64,
    pub unknown_rate: f64,
    pub throttle_rate: f64,
    pub ghost_rate: f64,
    pub producer_dup_rate: f64,
    pub redeploy_at_ms: Option<Ms>,
    pub replay_at_ms: Option<Ms>,
    pub replay_from_ms: Ms,
    pub replay_to_ms: Ms,
    pub dedup_window_ms: Ms,
    pub ttls_ms: Vec<Ms>,
    pub lead_days: Option<u32>,
    pub max_receive_count: u32,
    pub retention_ms: Ms,
}

impl Params {
    pub fn from_args(a: &SimulateArgs) -> Result<Self, String> {
        let positive_span = |name: &str, s: Span| {
            if s.0 > 0 {
                Ok(s.0)
            } else {
                Err(format!("--{name} must be longer than 0"))
            }
        };
        if a.crash_rate * 4.0 > 1.0 {
            return Err("--crash-rate applies at each of 4 steps: it must be at most 0.25".into());
        }
        if a.unknown_rate + a.throttle_rate > 1.0 {
            return Err("--unknown-rate plus --throttle-rate must be at most 1".into());
        }
        if a.replay_from.0 >= a.replay_to.0 {
            return Err("--replay-from must be before --replay-to".into());
        }
        if a.ttl.is_empty() {
            return Err("--ttl needs at least one duration".into());
        }
        let ttls_ms = a.ttl.iter().map(|t| positive_span("ttl", *t)).collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            notices: a.notices as usize,
            seed: a.seed,
            ledger: a.ledger,
            instances: a.instances as usize,
            concurrency: a.concurrency as usize,
            charge_days: a.charge_days,
            visibility_timeout_ms: positive_span("visibility-timeout", a.visibility_timeout)?,
            send_timeout_ms: positive_span("send-timeout", a.send_timeout)?,
            latency_median_ms: positive_span("latency-median", a.latency_median)?,
            latency_alpha: a.latency_alpha,
            latency_cap_ms: positive_span("latency-cap", a.latency_cap)?,
            crash_rate: a.crash_rate,
            unknown_rate: a.unknown_rate,
            throttle_rate: a.throttle_rate,
            ghost_rate: a.ghost_rate,
            producer_dup_rate: a.producer_dup_rate,
            redeploy_at_ms: a.redeploy_at.0.map(|s| s.0),
            replay_at_ms: a.replay_at.0.map(|s| s.0),
            replay_from_ms: a.replay_from.0,
            replay_to_ms: a.replay_to.0,
            dedup_window_ms: positive_span("dedup-window", a.dedup_window)?,
            ttls_ms,
            lead_days: a.lead_days,
            max_receive_count: a.max_receive_count,
            retention_ms: positive_span("retention", a.retention)?,
        })
    }
}

/// One dedupe strategy under test. Both durable ones run the real core: `DurableLedger` waits for
/// a window on the queue in hops of at most 12 h, `DurableLedgerParking` parks longer waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    None,
    InProcessCache,
    BrokerDedup { window: Ms },
    SharedCache { ttl: Ms },
    DurableLedger,
    DurableLedgerParking,
}

impl Strategy {
    fn name(self, ledger: SimLedger) -> String {
        match self {
            Strategy::None => "none".into(),
            Strategy::InProcessCache => "in-process cache".into(),
            Strategy::BrokerDedup { window } => format!("broker dedup id ({})", Span(window)),
            Strategy::SharedCache { ttl } => format!("shared cache claim (TTL {})", Span(ttl)),
            Strategy::DurableLedger => format!("durable ledger ({})", ledger.name()),
            Strategy::DurableLedgerParking => format!("durable ledger, parking ({})", ledger.name()),
        }
    }

    fn durable(self) -> bool {
        matches!(self, Strategy::DurableLedger | Strategy::DurableLedgerParking)
    }

    /// Every strategy the parameters ask for, in table order.
    pub fn all(p: &Params) -> Vec<Strategy> {
        let mut all = vec![
            Strategy::None,
            Strategy::InProcessCache,
            Strategy::BrokerDedup { window: p.dedup_window_ms },
        ];
        all.extend(p.ttls_ms.iter().map(|&ttl| Strategy::SharedCache { ttl }));
        all.extend([Strategy::DurableLedger, Strategy::DurableLedgerParking]);
        all
    }
}

// ── The trace: everything decided by the seed alone ──

/// Why a job entered the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    Producer,
    ProducerDuplicate,
    Replay,
}

struct Notice {
    body: Arc<str>,
    job: Job,
    opens_at: Ms,
    closes_at: Ms,
}

struct Trace {
    start: DateTime<Utc>,
    policy: WindowPolicy,
    notices: Vec<Notice>,
    /// (when, notice, why): every enqueue the producer and the operator make, in the same order for
    /// every strategy. Its index names the message and keys its per-receive chaos.
    enqueues: Vec<(Ms, usize, Origin)>,
    /// Nothing can be sent after this: every window has closed.
    horizon: Ms,
}

/// Same trace, summarised.
#[derive(Clone, Debug, Serialize)]
pub struct TraceSummary {
    pub notices: usize,
    pub enqueues: usize,
    pub producer_duplicates: usize,
    pub replayed_jobs: usize,
    pub redeploy_at: Option<String>,
    pub replay_at: Option<String>,
}

impl Trace {
    fn build(p: &Params) -> Result<Self, String> {
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
                "template_data": { "plan_name": "Coffee Box", "amount": "29.00 USD" },
            })
            .to_string();
            let job = Job::parse(&body).map_err(|e| format!("simulated job {i} is invalid: {e}"))?;
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

    fn at(&self, t: Ms) -> DateTime<Utc> {
        self.start + chrono::Duration::milliseconds(t)
    }

    fn ms(&self, instant: DateTime<Utc>) -> Ms {
        (instant - self.start).num_milliseconds()
    }

    fn summary(&self, p: &Params) -> TraceSummary {
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
enum Crash {
    BeforeClaim,
    AfterClaimBeforeSend,
    AfterSendBeforeCommit,
    AfterCommitBeforeAck,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Accepted,
    /// Accepted, then a 5xx: the message is out, the worker cannot know.
    UnknownAfterAccept,
    Throttled,
}

/// The chaos of one receive of one message: a pure function of (seed, enqueue index, receive).
#[derive(Clone, Copy, Debug)]
struct Fate {
    crash: Option<Crash>,
    latency: Ms,
    answer: Answer,
    ghost_after: Option<Ms>,
    jitter: f64,
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fate(p: &Params, enqueue: usize, receive: u32) -> Fate {
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

// ── The durable strategy's mailer: the real sender parks in here while the simulated send runs ──

#[derive(Default)]
struct GateState {
    /// The job whose future is being polled.
    current: usize,
    /// The job that called the mailer during this poll (its claim is committed).
    issued: Option<usize>,
    /// The polled future is waiting for a simulated send.
    parked: bool,
    /// Answers of finished simulated sends, by job.
    answers: HashMap<usize, SendResult>,
}

fn lock(gate: &Mutex<GateState>) -> MutexGuard<'_, GateState> {
    gate.lock().unwrap_or_else(|p| p.into_inner())
}

/// Hands every send to the simulation and waits (in simulated time) for its answer.
struct SimMailer {
    gate: Arc<Mutex<GateState>>,
}

#[async_trait]
impl Mailer for SimMailer {
    async fn send(&self, _mail: &OutgoingMail) -> SendResult {
        let job = {
            let mut g = lock(&self.gate);
            g.issued = Some(g.current);
            g.current
        };
        std::future::poll_fn(|_| {
            let mut g = lock(&self.gate);
            match g.answers.remove(&job) {
                Some(answer) => Poll::Ready(answer),
                None => {
                    g.parked = true;
                    Poll::Pending
                }
            }
        })
        .await
    }
}

type DeliveryFuture = Pin<Box<dyn Future<Output = Delivery>>>;

/// Polls a real `deliver_body` future until it finishes (`Some`) or parks in the simulated mailer
/// (`None`). Real I/O (the SQLite ledger's blocking pool) is awaited as usual.
struct UntilParked<'a> {
    fut: &'a mut DeliveryFuture,
    gate: &'a Mutex<GateState>,
}

impl Future for UntilParked<'_> {
    type Output = Option<Delivery>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match this.fut.as_mut().poll(cx) {
            Poll::Ready(delivery) => Poll::Ready(Some(delivery)),
            Poll::Pending if lock(this.gate).parked => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

struct Durable {
    sender: Arc<NoticeSender>,
    ledger: Arc<FaultyLedger<Arc<dyn Ledger>>>,
    gate: Arc<Mutex<GateState>>,
    keys: Vec<NoticeKey>,
    _dir: Option<tempfile::TempDir>,
}

impl Durable {
    fn new(p: &Params, trace: &Trace) -> Result<Self, String> {
        let (inner, dir): (Arc<dyn Ledger>, _) = match p.ledger {
            SimLedger::Memory => (Arc::new(MemoryLedger::new()), None),
            SimLedger::Sqlite => {
                let dir = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
                let ledger = SqliteLedger::open(dir.path().join("ledger.db")).map_err(|e| e.to_string())?;
                (Arc::new(ledger), Some(dir))
            }
        };
        let ledger = Arc::new(FaultyLedger::new(inner, None));
        let gate = Arc::new(Mutex::new(GateState::default()));
        let secret = NoticeSecret::new("simulation-key-secret").map_err(|e| e.to_string())?;
        let links = NoticeSecret::new("simulation-links").map_err(|e| e.to_string())?;
        let sender = NoticeSender {
            ledger: ledger.clone(),
            mailer: Arc::new(SimMailer { gate: gate.clone() }),
            renderer: Arc::new(Renderer::new(ManageLinks::new("https://billing.example.com/manage", links))),
            policy: trace.policy.clone(),
            secret,
            mode: Mode::Enforce,
            // Send timeouts are simulated (the mailer answers "unknown" in simulated time); the real
            // timer must never fire, however long the host takes between two polls.
            budget: SendBudget {
                send_timeout: std::time::Duration::from_secs(7 * 86_400),
                ..SendBudget::default()
            },
            metrics: Arc::new(Metrics::default()),
            rate_gate: None,
        };
        let keys = trace.notices.iter().map(|n| n.job.key(&sender.secret)).collect();
        Ok(Self { sender: Arc::new(sender), ledger, gate, keys, _dir: dir })
    }
}

// ── One run: one strategy over the trace ──

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// The trace's enqueue number `idx` happens.
    Enqueue { idx: usize },
    /// The message's visibility timer (generation `gen`) ran out.
    Visible { msg: usize, gen: u64 },
    /// The broker delivers the message a second time, spuriously.
    Ghost { msg: usize },
    /// The worker hears back from the provider (or gives up waiting).
    SendDone { job: usize },
    /// The provider accepted a copy: the customer will receive it.
    Accepted { notice: usize },
    /// Every worker dies at once.
    Redeploy,
    /// The notice's one-time schedule puts its job back on the queue and deletes itself.
    Unpark { notice: usize },
}

#[derive(Clone, Copy, Debug)]
enum Ready {
    Visible { msg: usize, gen: u64 },
    Ghost { msg: usize },
}

struct Message {
    /// Keys the per-receive chaos: the trace's enqueue index, or an index past the trace for a
    /// schedule's re-enqueue.
    chaos: usize,
    notice: usize,
    /// First enqueue plus retention: the queue (and its dead-letter queue) drops it then.
    expires_at: Ms,
    receives: u32,
    gen: u64,
    /// Off the queue: deleted, dead-lettered or expired.
    deleted: bool,
}

struct Instance {
    jobs: BTreeSet<usize>,
    /// In-process cache: notices this instance sent since it started.
    sent: HashSet<usize>,
}

struct JobRun {
    msg: usize,
    receipt: u32,
    notice: usize,
    instance: usize,
    fate: Fate,
    future: Option<DeliveryFuture>,
}

#[derive(Default, Debug, Clone, Serialize)]
pub struct Counters {
    /// Messages handed to a worker (deferrals included).
    pub receives: u64,
    /// Receives of a message whose earlier receive was still being worked on (visibility expired).
    pub redelivered_while_in_flight: u64,
    /// Spurious second deliveries by the broker.
    pub ghost_deliveries: u64,
    /// Instance crashes (the redeploy not included).
    pub crashes: u64,
    /// In-flight jobs lost to crashes and the redeploy.
    pub jobs_killed: u64,
    pub jobs_killed_by_redeploy: u64,
    /// Enqueues the broker dropped as duplicates of a recent dedup id.
    pub broker_dropped_enqueues: u64,
    /// Jobs acked because a cache said the notice was sent or claimed.
    pub suppressed_by_cache: u64,
    /// Deletes and visibility changes ignored because the message had been received again since.
    pub stale_receipts: u64,
    /// Jobs whose disposition was "dead-letter" (bad input).
    pub dead_lettered: u64,
    /// Messages the redrive policy moved to the dead-letter queue after `--max-receive-count`
    /// receives. Nothing redrives them in the simulation.
    pub dead_lettered_by_receive_count: u64,
    /// Messages the queue dropped at `--retention` before they were received again.
    pub expired_by_retention: u64,
    /// One-time schedules created by parking jobs.
    pub parked: u64,
    /// Parks that found the notice's schedule already there (conflict: acked, nothing created).
    pub park_conflicts: u64,
    /// Schedules that fired and put their job back on the queue.
    pub unparked: u64,
}

/// One row of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub strategy: String,
    pub notices: usize,
    /// Notices at least one copy of which reached the customer.
    pub delivered: usize,
    /// Copies received beyond the first.
    pub duplicates: u64,
    /// Never delivered, not quarantined, not recorded as missed.
    pub lost: usize,
    /// Open claims at the end (outcome unknown to the workers).
    pub quarantined: usize,
    /// … of which the provider did accept a copy (the reconciler closes these from its events).
    pub quarantined_sent: usize,
    /// Window closed before any copy went out (recorded, never sent).
    pub missed: usize,
    /// Copies accepted outside the notice's window.
    pub outside_window: u64,
    /// Provider calls.
    pub sends: u64,
    pub sends_per_notice: f64,
    /// Ledger calls (durable strategy).
    pub ledger_calls: Option<u64>,
    pub ledger_calls_per_notice: Option<f64>,
    /// How the real sender's deliveries ended, by outcome (durable strategy).
    pub outcomes: BTreeMap<String, u64>,
    pub counters: Counters,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub params: Params,
    pub trace: TraceSummary,
    pub rows: Vec<Row>,
}

struct Run<'t> {
    p: &'t Params,
    trace: &'t Trace,
    strategy: Strategy,
    now: Ms,
    seq: u64,
    heap: BinaryHeap<Reverse<(Ms, u64, Ev)>>,
    messages: Vec<Message>,
    ready: VecDeque<Ready>,
    instances: Vec<Instance>,
    next_instance: usize,
    jobs: BTreeMap<usize, JobRun>,
    next_job: usize,
    in_flight: HashMap<usize, u32>,
    /// Broker dedup: notice → when its dedup id was last accepted.
    dedup_ids: HashMap<usize, Ms>,
    /// Shared cache: notice → expiry.
    shared: HashMap<usize, Ms>,
    /// Parking: notices with a pending one-time schedule (named by the notice key).
    schedules: HashSet<usize>,
    deliveries: Vec<u32>,
    missed: Vec<bool>,
    outside_window: u64,
    sends: u64,
    outcomes: BTreeMap<String, u64>,
    c: Counters,
    durable: Option<Durable>,
}

impl<'t> Run<'t> {
    fn new(p: &'t Params, trace: &'t Trace, strategy: Strategy) -> Result<Self, String> {
        let durable = if strategy.durable() { Some(Durable::new(p, trace)?) } else { None };
        let n = trace.notices.len();
        Ok(Self {
            p,
            trace,
            strategy,
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            messages: Vec::new(),
            ready: VecDeque::new(),
            instances: (0..p.instances)
                .map(|_| Instance { jobs: BTreeSet::new(), sent: HashSet::new() })
                .collect(),
            next_instance: 0,
            jobs: BTreeMap::new(),
            next_job: 0,
            in_flight: HashMap::new(),
            dedup_ids: HashMap::new(),
            shared: HashMap::new(),
            schedules: HashSet::new(),
            deliveries: vec![0; n],
            missed: vec![false; n],
            outside_window: 0,
            sends: 0,
            outcomes: BTreeMap::new(),
            c: Counters::default(),
            durable,
        })
    }

    fn schedule(&mut self, at: Ms, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    async fn run(mut self) -> Result<Row, String> {
        for (idx, &(at, _, _)) in self.trace.enqueues.iter().enumerate() {
            self.schedule(at, Ev::Enqueue { idx });
        }
        if let Some(at) = self.p.redeploy_at_ms {
            self.schedule(at, Ev::Redeploy);
        }
        // Ample for any sensible parameters (the defaults need about 16 events per enqueue); a
        // visibility timeout far below the send latency makes messages bounce without end.
        let budget = 1_000 * self.trace.enqueues.len() as u64 + 1_000_000;
        let mut events = 0u64;
        while let Some(Reverse((at, _, ev))) = self.heap.pop() {
            if at > self.trace.horizon {
                break;
            }
            events += 1;
            if events > budget {
                return Err(format!(
                    "{}: more than {budget} events; the parameters keep messages bouncing (is the \
                     visibility timeout far below the send latency?)",
                    self.strategy.name(self.p.ledger)
                ));
            }
            self.now = at;
            self.handle(ev).await;
            self.dispatch().await;
        }
        self.report().await
    }

    async fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Enqueue { idx } => self.enqueue(idx),
            Ev::Visible { msg, gen } => {
                if self.messages.get(msg).is_some_and(|m| !m.deleted && m.gen == gen) {
                    self.ready.push_back(Ready::Visible { msg, gen });
                }
            }
            Ev::Ghost { msg } => {
                if self.messages.get(msg).is_some_and(|m| !m.deleted) {
                    self.ready.push_back(Ready::Ghost { msg });
                }
            }
            Ev::SendDone { job } => self.send_done(job).await,
            Ev::Accepted { notice } => {
                self.deliveries[notice] += 1;
                let n = &self.trace.notices[notice];
                if self.now < n.opens_at || self.now >= n.closes_at {
                    self.outside_window += 1;
                }
            }
            Ev::Redeploy => {
                for i in 0..self.instances.len() {
                    let killed = self.kill(i);
                    self.c.jobs_killed_by_redeploy += killed;
                }
            }
            Ev::Unpark { notice } => {
                self.schedules.remove(&notice);
                self.c.unparked += 1;
                // A new message: new enqueue time, receive count 0, its own chaos.
                let chaos = self.trace.enqueues.len() + self.c.unparked as usize;
                self.push_message(chaos, notice);
            }
        }
    }

    fn enqueue(&mut self, idx: usize) {
        let (_, notice, _) = self.trace.enqueues[idx];
        if let Strategy::BrokerDedup { window } = self.strategy {
            if self.dedup_ids.get(&notice).is_some_and(|&first| self.now - first < window) {
                self.c.broker_dropped_enqueues += 1;
                return;
            }
            self.dedup_ids.insert(notice, self.now);
        }
        self.push_message(idx, notice);
    }

    fn push_message(&mut self, chaos: usize, notice: usize) {
        let msg = self.messages.len();
        let expires_at = self.now.saturating_add(self.p.retention_ms);
        self.messages.push(Message { chaos, notice, expires_at, receives: 0, gen: 0, deleted: false });
        self.ready.push_back(Ready::Visible { msg, gen: 0 });
    }

    /// SQS's limits, applied when a message would be received: retention, then the redrive policy.
    /// Returns whether the message left the queue.
    fn leaves_queue(&mut self, msg: usize) -> bool {
        let m = &mut self.messages[msg];
        if self.now >= m.expires_at {
            m.deleted = true;
            self.c.expired_by_retention += 1;
        } else if m.receives >= self.p.max_receive_count {
            m.deleted = true;
            self.c.dead_lettered_by_receive_count += 1;
        }
        m.deleted
    }

    fn free_instance(&mut self) -> Option<usize> {
        let n = self.instances.len();
        (0..n)
            .map(|k| (self.next_instance + k) % n)
            .find(|&i| self.instances[i].jobs.len() < self.p.concurrency)
            .inspect(|&i| {
                self.next_instance = (i + 1) % n;
            })
    }

    /// Free consumer slots take visible messages, oldest first.
    async fn dispatch(&mut self) {
        while let Some(entry) = self.ready.pop_front() {
            let (msg, ghost, current) = match entry {
                Ready::Visible { msg, gen } => (msg, false, self.messages[msg].gen == gen),
                Ready::Ghost { msg } => (msg, true, true),
            };
            if !current || self.messages[msg].deleted || self.leaves_queue(msg) {
                continue;
            }
            let Some(instance) = self.free_instance() else {
                self.ready.push_front(entry);
                return;
            };
            self.receive(instance, msg, ghost).await;
        }
    }

    /// A consumer slot on `instance` receives `msg`.
    async fn receive(&mut self, instance: usize, msg: usize, ghost: bool) {
        let (enqueue, notice, receipt, gen) = {
            let m = &mut self.messages[msg];
            m.receives += 1;
            m.gen += 1;
            (m.chaos, m.notice, m.receives, m.gen)
        };
        self.schedule(self.now + self.p.visibility_timeout_ms, Ev::Visible { msg, gen });
        self.c.receives += 1;
        if ghost {
            self.c.ghost_deliveries += 1;
        } else if self.in_flight.get(&msg).is_some_and(|&n| n > 0) {
            self.c.redelivered_while_in_flight += 1;
        }
        let fate = fate(self.p, enqueue, receipt);
        if let Some(after) = fate.ghost_after {
            // A FIFO-style broker does not hand one message to two consumers.
            if !matches!(self.strategy, Strategy::BrokerDedup { .. }) {
                self.schedule(self.now + after, Ev::Ghost { msg });
            }
        }
        if fate.crash == Some(Crash::BeforeClaim) {
            self.crash(instance);
            return;
        }
        let id = self.next_job;
        self.next_job += 1;
        self.instances[instance].jobs.insert(id);
        *self.in_flight.entry(msg).or_default() += 1;
        self.jobs.insert(id, JobRun { msg, receipt, notice, instance, fate, future: None });
        if self.strategy.durable() {
            self.durable_start(id).await;
        } else {
            self.baseline_start(id);
        }
    }

    fn remove_job(&mut self, id: usize) -> Option<JobRun> {
        let job = self.jobs.remove(&id)?;
        self.instances[job.instance].jobs.remove(&id);
        if let Some(n) = self.in_flight.get_mut(&job.msg) {
            *n = n.saturating_sub(1);
        }
        Some(job)
    }

    /// The instance crashes (see [`Run::kill`]).
    fn crash(&mut self, instance: usize) {
        self.c.crashes += 1;
        self.kill(instance);
    }

    /// The instance dies: every job it runs stops where it is, its cache is gone, and it restarts
    /// empty. Returns the jobs killed.
    fn kill(&mut self, instance: usize) -> u64 {
        let ids: Vec<usize> = self.instances[instance].jobs.iter().copied().collect();
        for &id in &ids {
            self.remove_job(id);
        }
        self.instances[instance].sent.clear();
        self.c.jobs_killed += ids.len() as u64;
        ids.len() as u64
    }

    /// The job is done; the worker acts on its disposition unless it dies first.
    fn finish(&mut self, id: usize, disposition: Disposition) {
        let Some(job) = self.jobs.get(&id) else { return };
        if job.fate.crash == Some(Crash::AfterCommitBeforeAck) {
            let instance = job.instance;
            self.crash(instance);
            return;
        }
        let Some(job) = self.remove_job(id) else { return };
        match disposition {
            Disposition::Ack => self.delete(job.msg, job.receipt),
            Disposition::RetryAt(until) => {
                let wait = match retry::deferral(until, self.trace.at(self.now)) {
                    Deferral::Hide(wait) => wait,
                    // Hop-only: the queue hides it as long as it can, and the job looks again.
                    Deferral::Park { .. } => retry::MAX_VISIBILITY,
                };
                self.change_visibility(job.msg, job.receipt, ms(wait));
            }
            Disposition::Retry => {
                let wait = ms(retry::backoff(job.receipt, job.fate.jitter));
                self.change_visibility(job.msg, job.receipt, wait);
            }
            Disposition::DeadLetter => {
                self.c.dead_lettered += 1;
                self.delete(job.msg, job.receipt);
            }
        }
    }

    /// Parks the job: a one-time schedule named by the notice key puts the same body back on the
    /// queue at `at`, then the message is acked. The schedule comes first, so a crash before the
    /// ack (see [`Run::finish`]) leaves both, and the message, redelivered, finds the schedule.
    fn park(&mut self, id: usize, at: Ms) {
        let Some(job) = self.jobs.get(&id) else { return };
        if self.schedules.insert(job.notice) {
            self.c.parked += 1;
            self.schedule(at, Ev::Unpark { notice: job.notice });
        } else {
            self.c.park_conflicts += 1;
        }
        self.finish(id, Disposition::Ack);
    }

    fn delete(&mut self, msg: usize, receipt: u32) {
        let m = &mut self.messages[msg];
        if m.receives == receipt {
            m.deleted = true;
        } else {
            self.c.stale_receipts += 1;
        }
    }

    fn change_visibility(&mut self, msg: usize, receipt: u32, wait: Ms) {
        let m = &mut self.messages[msg];
        if m.receives != receipt {
            self.c.stale_receipts += 1;
            return;
        }
        m.gen += 1;
        let gen = m.gen;
        self.schedule(self.now + wait, Ev::Visible { msg, gen });
    }

    /// The provider gets the request now; the customer gets the copy (unless throttled) when its
    /// latency is up; the worker hears back then or gives up at the send timeout.
    fn issue_send(&mut self, id: usize) {
        let Some(job) = self.jobs.get(&id) else { return };
        let (fate, notice) = (job.fate, job.notice);
        self.sends += 1;
        if fate.answer != Answer::Throttled {
            self.schedule(self.now + fate.latency, Ev::Accepted { notice });
        }
        self.schedule(self.now + fate.latency.min(self.p.send_timeout_ms), Ev::SendDone { job: id });
    }

    fn answer(&self, fate: &Fate, id: usize) -> SendResult {
        if fate.latency > self.p.send_timeout_ms {
            return SendResult::Unknown { reason: "no answer within the send timeout".into() };
        }
        match fate.answer {
            Answer::Accepted => SendResult::Accepted { message_id: format!("sim-{id}") },
            Answer::UnknownAfterAccept => SendResult::Unknown { reason: "500 after accept".into() },
            Answer::Throttled => {
                SendResult::NotAccepted { class: NotAccepted::Throttled, reason: "throttled".into() }
            }
        }
    }

    async fn send_done(&mut self, id: usize) {
        let Some(job) = self.jobs.get(&id) else { return }; // the worker died meanwhile
        let (instance, notice, fate) = (job.instance, job.notice, job.fate);
        if fate.crash == Some(Crash::AfterSendBeforeCommit) {
            self.crash(instance);
            return;
        }
        let answer = self.answer(&fate, id);
        if self.strategy.durable() {
            self.durable_resume(id, answer).await;
            return;
        }
        if matches!(answer, SendResult::Accepted { .. }) {
            match self.strategy {
                Strategy::InProcessCache => {
                    self.instances[instance].sent.insert(notice);
                }
                Strategy::SharedCache { ttl } => {
                    self.shared.insert(notice, self.now + ttl);
                }
                _ => {}
            }
            self.finish(id, Disposition::Ack);
        } else {
            if let Strategy::SharedCache { .. } = self.strategy {
                self.shared.remove(&notice); // release the claim so a retry may send
            }
            self.finish(id, Disposition::Retry);
        }
    }

    // ── Baselines: the same window policy, a different dedupe ──

    fn baseline_start(&mut self, id: usize) {
        let Some(job) = self.jobs.get(&id) else { return };
        let (notice, instance, fate) = (job.notice, job.instance, job.fate);
        match self.trace.policy.decide(&self.trace.notices[notice].job, self.trace.at(self.now)) {
            WindowDecision::Send { .. } => {}
            WindowDecision::Defer { until } => return self.finish(id, Disposition::RetryAt(until)),
            WindowDecision::Missed { .. } => {
                self.missed[notice] = true;
                return self.finish(id, Disposition::Ack);
            }
        }
        match self.strategy {
            Strategy::InProcessCache if self.instances[instance].sent.contains(&notice) => {
                self.c.suppressed_by_cache += 1;
                return self.finish(id, Disposition::Ack);
            }
            Strategy::SharedCache { ttl } => {
                if self.shared.get(&notice).is_some_and(|&expiry| expiry > self.now) {
                    self.c.suppressed_by_cache += 1;
                    return self.finish(id, Disposition::Ack);
                }
                self.shared.insert(notice, self.now + ttl);
            }
            _ => {}
        }
        if fate.crash == Some(Crash::AfterClaimBeforeSend) {
            self.crash(instance);
            return;
        }
        self.issue_send(id);
    }

    // ── The durable ledger: the real core ──

    async fn durable_start(&mut self, id: usize) {
        let Some(d) = &self.durable else { return };
        let Some(job) = self.jobs.get(&id) else { return };
        let sender = Arc::clone(&d.sender);
        let body = Arc::clone(&self.trace.notices[job.notice].body);
        let now = self.trace.at(self.now);
        let fut: DeliveryFuture = Box::pin(async move { sender.deliver_body(&body, now, None).await });
        self.drive(id, fut).await;
    }

    async fn durable_resume(&mut self, id: usize, answer: SendResult) {
        let Some(d) = &self.durable else { return };
        let Some(fut) = self.jobs.get_mut(&id).and_then(|j| j.future.take()) else { return };
        lock(&d.gate).answers.insert(id, answer);
        self.drive(id, fut).await;
    }

    /// Polls the job's real delivery until it finishes or parks in the mailer.
    async fn drive(&mut self, id: usize, mut fut: DeliveryFuture) {
        let Some(d) = &self.durable else { return };
        let gate = Arc::clone(&d.gate);
        {
            let mut g = lock(&gate);
            g.current = id;
            g.issued = None;
            g.parked = false;
        }
        match (UntilParked { fut: &mut fut, gate: &gate }).await {
            Some(delivery) => {
                *self.outcomes.entry(delivery.outcome.label().to_owned()).or_default() += 1;
                // Only a window that has not opened is parked; a rate limit waits on the queue.
                if let (Strategy::DurableLedgerParking, Outcome::Deferred { until }) =
                    (self.strategy, &delivery.outcome)
                {
                    if let Deferral::Park { at } = retry::deferral(*until, self.trace.at(self.now)) {
                        let at = self.trace.ms(at);
                        return self.park(id, at);
                    }
                }
                self.finish(id, delivery.outcome.disposition());
            }
            None => {
                let issued = lock(&gate).issued.take() == Some(id);
                let Some(job) = self.jobs.get_mut(&id) else { return };
                job.future = Some(fut);
                if issued {
                    // The claim is committed and the sender called the mailer.
                    if job.fate.crash == Some(Crash::AfterClaimBeforeSend) {
                        let instance = job.instance;
                        self.crash(instance);
                        return;
                    }
                    self.issue_send(id);
                }
            }
        }
    }

    async fn report(mut self) -> Result<Row, String> {
        // Drop parked futures before reading the ledger.
        self.jobs.clear();
        let n = self.trace.notices.len();
        let mut states: Vec<Option<RowState>> = vec![None; n];
        let mut ledger_calls = None;
        if let Some(d) = &self.durable {
            ledger_calls = Some(d.ledger.calls() as u64);
            let rows = d.ledger.inner().get_many(&d.keys).await.map_err(|e| e.to_string())?;
            let by_key: HashMap<&NoticeKey, RowState> = rows.iter().map(|r| (&r.key, r.state)).collect();
            for (i, key) in d.keys.iter().enumerate() {
                states[i] = by_key.get(key).copied();
            }
        }
        let (mut delivered, mut duplicates, mut lost, mut quarantined, mut quarantined_sent, mut missed) =
            (0, 0u64, 0, 0, 0, 0);
        for ((&copies, state), &window_missed) in self.deliveries.iter().zip(&states).zip(&self.missed) {
            let open_claim = *state == Some(RowState::Claimed);
            let was_missed = *state == Some(RowState::Missed) || window_missed;
            duplicates += u64::from(copies.saturating_sub(1));
            if copies > 0 {
                delivered += 1;
            }
            if open_claim {
                quarantined += 1;
                if copies > 0 {
                    quarantined_sent += 1;
                }
            }
            if copies == 0 && !open_claim {
                if was_missed {
                    missed += 1;
                } else {
                    lost += 1;
                }
            }
        }
        let per_notice = |v: u64| v as f64 / n.max(1) as f64;
        Ok(Row {
            strategy: self.strategy.name(self.p.ledger),
            notices: n,
            delivered,
            duplicates,
            lost,
            quarantined,
            quarantined_sent,
            missed,
            outside_window: self.outside_window,
            sends: self.sends,
            sends_per_notice: per_notice(self.sends),
            ledger_calls,
            ledger_calls_per_notice: ledger_calls.map(per_notice),
            outcomes: std::mem::take(&mut self.outcomes),
            counters: self.c.clone(),
        })
    }
}

/// Runs the given strategies over one trace.
pub async fn simulate(p: &Params, strategies: &[Strategy]) -> Result<Report, String> {
    let trace = Trace::build(p)?;
    let mut rows = Vec::with_capacity(strategies.len());
    for &strategy in strategies {
        rows.push(Run::new(p, &trace, strategy)?.run().await?);
    }
    Ok(Report { params: p.clone(), trace: trace.summary(p), rows })
}

pub async fn run(args: SimulateArgs) -> Result<ExitCode, String> {
    let p = Params::from_args(&args)?;
    let started = std::time::Instant::now();
    let report = simulate(&p, &Strategy::all(&p)).await?;
    if args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        println!("{text}");
    } else {
        print!("{}", table(&report, started.elapsed()));
    }
    Ok(ExitCode::SUCCESS)
}

/// A duration of the shared retry rule in simulated milliseconds.
fn ms(d: std::time::Duration) -> Ms {
    Ms::try_from(d.as_millis()).unwrap_or(Ms::MAX)
}

fn pct(p: f64) -> String {
    format!("{}%", (p * 1000.0).round() / 10.0)
}

fn table(r: &Report, took: std::time::Duration) -> String {
    let p = &r.params;
    let t = &r.trace;
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!(
        "{} notices · seed {} · {} instances × {} · visibility timeout {} · send timeout {}",
        p.notices,
        p.seed,
        p.instances,
        p.concurrency,
        Span(p.visibility_timeout_ms),
        Span(p.send_timeout_ms)
    ));
    line(format!(
        "chaos: crash {} per step · 5xx after accept {} · throttled {} · broker duplicates {} · \
         latency Pareto(median {}, α {}, cap {})",
        pct(p.crash_rate),
        pct(p.unknown_rate),
        pct(p.throttle_rate),
        pct(p.ghost_rate),
        Span(p.latency_median_ms),
        p.latency_alpha,
        Span(p.latency_cap_ms)
    ));
    line(format!(
        "trace: {} enqueues · {} producer duplicates · redeploy at {} · replay at {} of {} jobs (charges {}..{})",
        t.enqueues,
        t.producer_duplicates,
        t.redeploy_at.as_deref().unwrap_or("off"),
        t.replay_at.as_deref().unwrap_or("off"),
        t.replayed_jobs,
        Span(p.replay_from_ms),
        Span(p.replay_to_ms)
    ));
    line(format!(
        "queue: {} · hidden at most {} per receive · dead-lettered after {} receives · retention {}",
        match p.lead_days {
            Some(days) => format!("jobs enqueued up to {days}d before their window opens"),
            None => "jobs enqueued on day 0".to_owned(),
        },
        Span(ms(retry::MAX_VISIBILITY)),
        p.max_receive_count,
        Span(p.retention_ms)
    ));
    line(String::new());
    line(format!(
        "{:<32} {:>10} {:>6} {:>11} {:>12}",
        "strategy", "duplicates", "lost", "quarantined", "sends/notice"
    ));
    for row in &r.rows {
        line(format!(
            "{:<32} {:>10} {:>6} {:>11} {:>12.3}",
            row.strategy, row.duplicates, row.lost, row.quarantined, row.sends_per_notice
        ));
    }
    line(String::new());
    for row in &r.rows {
        let c = &row.counters;
        if c.dead_lettered_by_receive_count + c.expired_by_retention > 0 {
            line(format!(
                "{}: {} messages dead-lettered after {} receives, {} dropped at retention",
                row.strategy, c.dead_lettered_by_receive_count, p.max_receive_count, c.expired_by_retention
            ));
        }
        if c.parked + c.park_conflicts > 0 {
            line(format!(
                "{}: {} schedules created ({} parks found one already there), {} fired",
                row.strategy, c.parked, c.park_conflicts, c.unparked
            ));
        }
        if let Some(per_notice) = row.ledger_calls_per_notice {
            line(format!(
                "{}: {} of {} quarantined claims had gone out (the reconciler closes those from provider \
                 events; the rest wait for an operator); {:.2} ledger calls per notice",
                row.strategy, row.quarantined_sent, row.quarantined, per_notice
            ));
        }
    }
    line(format!(
        "duplicates = extra copies customers received · lost = never delivered, not quarantined, not \
         recorded as missed · simulated in {:.1} s",
        took.as_secs_f64()
    ));
    out
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: SimulateArgs,
    }

    fn params(extra: &[&str]) -> Params {
        let argv = ["simulate"].iter().chain(extra.iter());
        let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{e}"));
        Params::from_args(&cli.args).unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test]
    async fn durable_ledger_neither_duplicates_nor_loses_while_no_dedupe_duplicates() {
        for seed in ["1", "2", "3"] {
            let p = params(&["--notices", "2000", "--seed", seed]);
            let report = simulate(&p, &[Strategy::None, Strategy::DurableLedger]).await.unwrap();
            let (none, durable) = (&report.rows[0], &report.rows[1]);
            assert!(none.duplicates > 0, "seed {seed}: the trace never redelivered: {none:?}");
            assert_eq!(durable.duplicates, 0, "seed {seed}: {durable:?}");
            assert_eq!(durable.lost, 0, "seed {seed}: {durable:?}");
            assert_eq!(durable.missed, 0, "seed {seed}: {durable:?}");
            assert_eq!(
                durable.delivered + durable.quarantined - durable.quarantined_sent,
                2000,
                "{durable:?}"
            );
            assert!(durable.quarantined > 0, "seed {seed}: unknown outcomes must show up as quarantine");
            assert!(durable.counters.redelivered_while_in_flight > 0, "seed {seed}: {durable:?}");
            assert!(durable.counters.jobs_killed_by_redeploy > 0, "seed {seed}: {durable:?}");
        }
    }

    #[tokio::test]
    async fn same_seed_same_report_and_other_seed_other_report() {
        let a = simulate(&params(&["--notices", "300", "--seed", "9"]), &[Strategy::None]).await.unwrap();
        let b = simulate(&params(&["--notices", "300", "--seed", "9"]), &[Strategy::None]).await.unwrap();
        let c = simulate(&params(&["--notices", "300", "--seed", "10"]), &[Strategy::None]).await.unwrap();
        let key = |r: &Report| serde_json::to_string(&r.rows).unwrap();
        assert_eq!(key(&a), key(&b));
        assert_ne!(key(&a), key(&c));
    }

    #[tokio::test]
    async fn without_chaos_every_strategy_delivers_each_notice_once() {
        let p = params(&[
            "--notices",
            "200",
            "--crash-rate",
            "0",
            "--unknown-rate",
            "0",
            "--throttle-rate",
            "0",
            "--ghost-rate",
            "0",
            "--producer-dup-rate",
            "0",
            "--redeploy-at",
            "off",
            "--replay-at",
            "off",
            "--latency-cap",
            "1s",
        ]);
        let report = simulate(&p, &Strategy::all(&p)).await.unwrap();
        for row in &report.rows {
            assert_eq!((row.delivered, row.duplicates, row.lost, row.quarantined), (200, 0, 0, 0), "{row:?}");
        }
    }

    #[tokio::test]
    async fn thirty_day_leads_lose_jobs_waiting_on_the_queue_and_none_when_parked() {
        for seed in ["1", "2", "3"] {
            let p = params(&["--notices", "300", "--seed", seed, "--lead-days", "30"]);
            let strategies = [Strategy::DurableLedger, Strategy::DurableLedgerParking];
            let report = simulate(&p, &strategies).await.unwrap();
            let (hops, parking) = (&report.rows[0], &report.rows[1]);
            assert!(hops.lost > 0, "seed {seed}: {hops:?}");
            assert!(hops.counters.dead_lettered_by_receive_count > 0, "seed {seed}: {hops:?}");
            assert_eq!(hops.duplicates, 0, "seed {seed}: {hops:?}");
            assert_eq!(
                (parking.duplicates, parking.lost, parking.missed),
                (0, 0, 0),
                "seed {seed}: {parking:?}"
            );
            let c = &parking.counters;
            assert_eq!(c.dead_lettered_by_receive_count + c.expired_by_retention, 0, "seed {seed}: {c:?}");
            assert!(c.parked > 0 && c.unparked == c.parked, "seed {seed}: {c:?}");
            assert!(c.park_conflicts > 0, "seed {seed}: producer duplicates must park twice: {c:?}");
            assert_eq!(
                parking.delivered + parking.quarantined - parking.quarantined_sent,
                300,
                "{parking:?}"
            );
        }
    }

    #[tokio::test]
    async fn without_a_receive_limit_retention_still_loses_what_waits_on_the_queue() {
        let p = params(&["--notices", "300", "--lead-days", "30", "--max-receive-count", "1000"]);
        let report = simulate(&p, &[Strategy::DurableLedger, Strategy::DurableLedgerParking]).await.unwrap();
        let (hops, parking) = (&report.rows[0], &report.rows[1]);
        assert!(hops.lost > 0 && hops.counters.expired_by_retention > 0, "{hops:?}");
        assert_eq!(hops.counters.dead_lettered_by_receive_count, 0, "{hops:?}");
        assert_eq!((parking.duplicates, parking.lost, parking.missed), (0, 0, 0), "{parking:?}");
    }

    #[tokio::test]
    async fn a_crash_between_park_and_ack_parks_again_and_loses_nothing() {
        // No producer duplicates and no broker ghosts: every conflict is a redelivery after a crash.
        let p = params(&[
            "--notices",
            "300",
            "--lead-days",
            "30",
            "--crash-rate",
            "0.05",
            "--producer-dup-rate",
            "0",
            "--ghost-rate",
            "0",
        ]);
        let report = simulate(&p, &[Strategy::DurableLedgerParking]).await.unwrap();
        let parking = &report.rows[0];
        assert!(parking.counters.park_conflicts > 0, "{parking:?}");
        assert_eq!((parking.duplicates, parking.lost, parking.missed), (0, 0, 0), "{parking:?}");
    }

    #[test]
    fn spans_parse_and_print() {
        assert_eq!(parse_span("1d9h3s"), Ok(Span(DAY + 9 * HOUR + 3 * SECOND)));
        assert_eq!(parse_span("200ms"), Ok(Span(200)));
        assert_eq!(Span(DAY + 9 * HOUR + 3 * SECOND).to_string(), "1d9h3s");
        assert!(parse_span("").is_err());
        assert!(parse_span("10").is_err());
        assert!(parse_span("5y").is_err());
        assert!(parse_span("99999999999999999999d").is_err());
        assert_eq!(parse_when("off"), Ok(When(None)));
        assert!(probability("1.5").is_err());
        assert!(probability("NaN").is_err());
    }

    #[test]
    fn bad_combinations_are_errors_not_panics() {
        let parse = |extra: &[&str]| {
            let argv = ["simulate"].iter().chain(extra.iter());
            Cli::try_parse_from(argv).map_err(|e| e.to_string()).and_then(|c| Params::from_args(&c.args))
        };
        assert!(parse(&["--crash-rate", "0.5"]).is_err());
        assert!(parse(&["--replay-from", "6d", "--replay-to", "5d"]).is_err());
        assert!(parse(&["--visibility-timeout", "0s"]).is_err());
        assert!(parse(&["--notices", "0"]).is_err());
        assert!(parse(&["--ttl", "0s"]).is_err());
        assert!(parse(&["--lead-days", "0"]).is_err());
        assert!(parse(&["--max-receive-count", "0"]).is_err());
        assert!(parse(&["--retention", "0s"]).is_err());
    }
}
