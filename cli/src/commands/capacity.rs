//! `noticectl capacity`: which AWS quotas a volume needs — a pure calculator, no AWS calls.
//!
//! A reminder is enqueued up to `--lead-days` ahead and each early job is parked as one
//! EventBridge Scheduler one-time schedule until its window opens, so about
//! `V × (L − opens/24)` schedules are live at once. The rest follows from the day's rate, an
//! assumed peak factor, and whether the windows of a day open spread out or all at once (a fixed
//! billing day). [`plan`] does the arithmetic; `run` prints it as a table or as JSON.

use std::process::ExitCode;

use serde::Serialize;

mod render;

pub(crate) use render::{count, rate, render, round_up_sensibly};
use render::{percent, trim};

/// EventBridge Scheduler: schedules per Region (documented default, adjustable).
pub(crate) const DEFAULT_SCHEDULE_QUOTA: u64 = 10_000_000;
/// EventBridge Scheduler: CreateSchedule requests per second (5 000; 1 000 or 250 in some
/// smaller Regions).
pub(crate) const DEFAULT_CREATE_QUOTA: u64 = 5_000;
/// EventBridge Scheduler: target invocations per second.
pub(crate) const DEFAULT_INVOCATION_QUOTA: u64 = 1_000;
/// SQS standard queue: in-flight messages (received, not yet deleted). Not adjustable.
pub(crate) const SQS_IN_FLIGHT_LIMIT: f64 = 120_000.0;
/// Only waits of at most this long are spent hidden on the queue; longer ones park in Scheduler
/// (`notice_ledger::queue::MAX_HIDE`). A spread wake-up also lands at least this long before the
/// window closes (`SPREAD_MARGIN`).
pub(crate) const MAX_HIDDEN_WAIT_SECS: f64 = 900.0;
/// One DynamoDB partition takes at most this many writes per second: the ceiling of one
/// recipient domain's rate-bucket item.
pub(crate) const PARTITION_WRITES_PER_SEC: f64 = 1_000.0;
/// At or above this share of a quota, ask for more.
const RAISE_AT_PERCENT: f64 = 50.0;
/// Ask for this multiple of the need.
const HEADROOM: f64 = 2.0;
/// Fixed billing day: SES need is the cohort over the spread, but over no less than this.
const SES_MIN_SPREAD_SECS: f64 = 60.0;
const SECS_PER_DAY: f64 = 86_400.0;

/// DynamoDB item operations of one receive on one path of today's default send path (rate limits
/// on), counted in items as DynamoDB bills them: the dedupe read is one strongly consistent
/// `BatchGetItem` per SQS batch, one item read per record; token writes are one per (domain,
/// shard) per batch plus one for the account, so at most about one per notice (the figure used
/// here, an upper bound: a batch whose records share domains writes less); writes are
/// conditional (a failed condition still costs the write).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct LedgerPath {
    pub(crate) path: &'static str,
    pub(crate) reads: u32,
    pub(crate) writes: u32,
    pub(crate) which: &'static str,
}

/// A new notice: its row in the batch read, then (at most) a token write, the claim and the commit.
pub(crate) const NEW_NOTICE: LedgerPath = LedgerPath {
    path: "new notice (sent)",
    reads: 1,
    writes: 3,
    which: "its row in the batch read; token write (at most), claim, commit",
};

/// The per-path table, printed as is. Update it here when the send path changes.
pub(crate) const LEDGER_PATHS: [LedgerPath; 4] = [
    NEW_NOTICE,
    LedgerPath { path: "duplicate copy", reads: 1, writes: 0, which: "the batch read finds the row" },
    LedgerPath {
        path: "rate-limited receive",
        reads: 1,
        writes: 0,
        which: "its row in the batch read; its domain's one token write is the batch's",
    },
    LedgerPath { path: "missed window", reads: 0, writes: 1, which: "the missed row" },
];

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CapacityArgs {
    /// Notices sent per day (> 0).
    #[arg(long, value_name = "V")]
    per_day: u64,
    /// How many days ahead of the charge producers enqueue (≥ 0).
    #[arg(long, value_name = "L", default_value_t = 30.0)]
    lead_days: f64,
    /// The send window opens this many hours before the charge.
    #[arg(long, value_name = "O", default_value_t = 72.0)]
    opens_hours: f64,
    /// The send window closes this many hours before the charge (< --opens-hours).
    #[arg(long, value_name = "C", default_value_t = 24.0)]
    closes_hours: f64,
    /// The park spread (NOTICE_PARK_SPREAD_SECS): wake-ups of notices whose windows open together
    /// are spread over this many seconds.
    #[arg(long, value_name = "S", default_value_t = 0)]
    spread_secs: u64,
    /// Peak hour's rate ÷ the day's average (an assumption: measure yours; ≥ 1).
    #[arg(long, value_name = "P", default_value_t = 3.0)]
    peak_factor: f64,
    /// Every notice of a day is charged at the same instant: all of a day's windows open in the
    /// same second.
    #[arg(long)]
    fixed_billing_day: bool,
    /// EventBridge Scheduler CreateSchedule requests/s quota.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CREATE_QUOTA)]
    create_quota: u64,
    /// EventBridge Scheduler target invocations/s quota.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_INVOCATION_QUOTA)]
    invocation_quota: u64,
    /// EventBridge Scheduler schedules-per-Region quota.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SCHEDULE_QUOTA)]
    schedule_quota: u64,
    /// The SES account's MaxSendRate (messages/s); without it the SES row shows only the need.
    #[arg(long, value_name = "RATE")]
    ses_rate: Option<f64>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Checked inputs of [`plan`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Inputs {
    pub(crate) per_day: u64,
    pub(crate) lead_days: f64,
    pub(crate) opens_hours: f64,
    pub(crate) closes_hours: f64,
    pub(crate) spread_secs: u64,
    pub(crate) peak_factor: f64,
    pub(crate) fixed_billing_day: bool,
    pub(crate) create_quota: u64,
    pub(crate) invocation_quota: u64,
    pub(crate) schedule_quota: u64,
    pub(crate) ses_rate: Option<f64>,
}

impl Inputs {
    /// The defaults of the command, at `per_day` notices a day.
    #[cfg(test)]
    fn new(per_day: u64) -> Self {
        Inputs {
            per_day,
            lead_days: 30.0,
            opens_hours: 72.0,
            closes_hours: 24.0,
            spread_secs: 0,
            peak_factor: 3.0,
            fixed_billing_day: false,
            create_quota: DEFAULT_CREATE_QUOTA,
            invocation_quota: DEFAULT_INVOCATION_QUOTA,
            schedule_quota: DEFAULT_SCHEDULE_QUOTA,
            ses_rate: None,
        }
    }

    /// Every flag checked; each error names its flag.
    pub(crate) fn check(self) -> anyhow::Result<Self> {
        if self.per_day == 0 {
            anyhow::bail!("capacity: --per-day must be greater than 0");
        }
        if !(self.lead_days.is_finite() && self.lead_days >= 0.0) {
            anyhow::bail!("capacity: --lead-days must be a number ≥ 0, not {}", self.lead_days);
        }
        if !(self.opens_hours.is_finite() && self.opens_hours > 0.0) {
            anyhow::bail!("capacity: --opens-hours must be a number > 0, not {}", self.opens_hours);
        }
        if !(self.closes_hours.is_finite() && self.closes_hours >= 0.0) {
            anyhow::bail!("capacity: --closes-hours must be a number ≥ 0, not {}", self.closes_hours);
        }
        if self.closes_hours >= self.opens_hours {
            anyhow::bail!(
                "capacity: --closes-hours ({}) must be less than --opens-hours ({}): the window would be empty",
                self.closes_hours, self.opens_hours
            );
        }
        if !(self.peak_factor.is_finite() && self.peak_factor >= 1.0) {
            anyhow::bail!("capacity: --peak-factor must be a number ≥ 1, not {}", self.peak_factor);
        }
        for (flag, quota) in [
            ("--create-quota", self.create_quota),
            ("--invocation-quota", self.invocation_quota),
            ("--schedule-quota", self.schedule_quota),
        ] {
            if quota == 0 {
                anyhow::bail!("capacity: {flag} must be greater than 0");
            }
        }
        if let Some(rate) = self.ses_rate {
            if !(rate.is_finite() && rate > 0.0) {
                anyhow::bail!("capacity: --ses-rate must be a number > 0, not {rate}");
            }
        }
        Ok(self)
    }
}

impl TryFrom<&CapacityArgs> for Inputs {
    type Error = anyhow::Error;
    fn try_from(a: &CapacityArgs) -> anyhow::Result<Self> {
        Inputs {
            per_day: a.per_day,
            lead_days: a.lead_days,
            opens_hours: a.opens_hours,
            closes_hours: a.closes_hours,
            spread_secs: a.spread_secs,
            peak_factor: a.peak_factor,
            fixed_billing_day: a.fixed_billing_day,
            create_quota: a.create_quota,
            invocation_quota: a.invocation_quota,
            schedule_quota: a.schedule_quota,
            ses_rate: a.ses_rate,
        }
        .check()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    /// Below half the quota.
    Ok,
    /// At half the quota or more: file an increase to at least twice the need.
    Raise,
    /// At half the limit or more, and the limit cannot be raised.
    HardLimit,
    /// No quota to compare with (the SES rate without `--ses-rate`).
    Unchecked,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Raise => "raise",
            Verdict::HardLimit => "hard limit",
            Verdict::Unchecked => "-",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Unit {
    Count,
    PerSecond,
}

/// One row of the main table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Row {
    /// The JSON field that carries `needed`.
    pub(crate) key: &'static str,
    pub(crate) what: &'static str,
    /// The quota's name, as in a quota request.
    pub(crate) quota_name: &'static str,
    pub(crate) unit: Unit,
    pub(crate) needed: f64,
    pub(crate) quota: Option<f64>,
    pub(crate) percent_of_quota: Option<f64>,
    pub(crate) verdict: Verdict,
}

/// A quota increase to file: at least twice the need, rounded up.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct QuotaRequest {
    pub(crate) quota: &'static str,
    pub(crate) current: f64,
    pub(crate) needed: f64,
    pub(crate) request: f64,
}

/// Everything the command prints; numbers at full precision.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct CapacityPlan {
    pub(crate) inputs: Inputs,
    pub(crate) assumptions: Vec<String>,
    pub(crate) avg_rate_per_sec: f64,
    pub(crate) peak_rate_per_sec: f64,
    /// Days a parked job waits in Scheduler: `max(0, L − O/24)`.
    pub(crate) wait_days: f64,
    pub(crate) live_schedules: f64,
    pub(crate) create_schedule_per_sec: f64,
    pub(crate) invocations_per_sec: f64,
    /// Fixed billing day only: seconds to wake one day's cohort at the invocation quota.
    pub(crate) cohort_drain_secs: Option<f64>,
    pub(crate) sqs_in_flight: f64,
    pub(crate) ses_rate_needed: f64,
    pub(crate) ledger_reads_per_sec: f64,
    pub(crate) ledger_writes_per_sec: f64,
    pub(crate) ledger_paths: Vec<LedgerPath>,
    pub(crate) rows: Vec<Row>,
    pub(crate) notes: Vec<String>,
    pub(crate) quota_requests: Vec<QuotaRequest>,
}

#[cfg(test)]
impl CapacityPlan {
    fn row(&self, key: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.key == key)
    }
}

/// The arithmetic of the command (see the module header and docs/deploy.md, *Capacity*).
pub(crate) fn plan(inputs: &Inputs) -> CapacityPlan {
    let v = inputs.per_day as f64;
    let spread = effective_spread(inputs);
    let avg_rate = v / SECS_PER_DAY;
    let peak_rate = avg_rate * inputs.peak_factor;
    let wait_days = (inputs.lead_days - inputs.opens_hours / 24.0).max(0.0);
    let parks = wait_days > 0.0;
    let live_schedules = v * wait_days;
    let create_per_sec = if parks { peak_rate } else { 0.0 };
    // A fixed billing day opens a whole day's windows together: its parked cohort wakes within the
    // spread. Without parking there are no wake-ups; jobs come in at the enqueue rate.
    let cohort = inputs.fixed_billing_day && parks;
    let wake_rate = if cohort { v / spread.max(1.0) } else { peak_rate };
    let invocations_per_sec = if parks { wake_rate } else { 0.0 };
    let cohort_drain_secs = cohort.then(|| v / inputs.invocation_quota as f64);
    let ses_rate_needed = if cohort { v / spread.max(SES_MIN_SPREAD_SECS) } else { peak_rate };
    let sqs_in_flight =
        if cohort { v.min(wake_rate * MAX_HIDDEN_WAIT_SECS) } else { peak_rate * MAX_HIDDEN_WAIT_SECS };
    let ledger_reads_per_sec = ses_rate_needed * f64::from(NEW_NOTICE.reads);
    let ledger_writes_per_sec = ses_rate_needed * f64::from(NEW_NOTICE.writes);

    let rows = quota_rows(
        inputs,
        live_schedules,
        create_per_sec,
        invocations_per_sec,
        sqs_in_flight,
        ses_rate_needed,
    );
    let quota_requests = quota_requests(&rows);

    CapacityPlan {
        inputs: inputs.clone(),
        assumptions: assumptions(inputs, wait_days),
        avg_rate_per_sec: avg_rate,
        peak_rate_per_sec: peak_rate,
        wait_days,
        live_schedules,
        create_schedule_per_sec: create_per_sec,
        invocations_per_sec,
        cohort_drain_secs,
        sqs_in_flight,
        ses_rate_needed,
        ledger_reads_per_sec,
        ledger_writes_per_sec,
        ledger_paths: LEDGER_PATHS.to_vec(),
        notes: notes(inputs, &rows, parks, cohort, ses_rate_needed),
        rows,
        quota_requests,
    }
}

/// The quota rows of the plan: each need against its quota (`ses_rate` is the account's, when
/// given).
fn quota_rows(
    inputs: &Inputs,
    live_schedules: f64,
    create_per_sec: f64,
    invocations_per_sec: f64,
    sqs_in_flight: f64,
    ses_rate_needed: f64,
) -> Vec<Row> {
    vec![
        row(
            "live_schedules",
            "Scheduler schedules (live)",
            "EventBridge Scheduler: schedules per Region",
            Unit::Count,
            live_schedules,
            Some(inputs.schedule_quota as f64),
            false,
        ),
        row(
            "create_schedule_per_sec",
            "Scheduler CreateSchedule (peak)",
            "EventBridge Scheduler: CreateSchedule requests per second",
            Unit::PerSecond,
            create_per_sec,
            Some(inputs.create_quota as f64),
            false,
        ),
        row(
            "invocations_per_sec",
            "Scheduler invocations (peak)",
            "EventBridge Scheduler: target invocations per second",
            Unit::PerSecond,
            invocations_per_sec,
            Some(inputs.invocation_quota as f64),
            false,
        ),
        row(
            "sqs_in_flight",
            "SQS in-flight (worst case)",
            "SQS: in-flight messages per standard queue",
            Unit::Count,
            sqs_in_flight,
            Some(SQS_IN_FLIGHT_LIMIT),
            true,
        ),
        row(
            "ses_rate_needed",
            "SES send rate (peak)",
            "SES: maximum send rate (MaxSendRate)",
            Unit::PerSecond,
            ses_rate_needed,
            inputs.ses_rate,
            false,
        ),
    ]
}

/// An increase to ask for on every row whose verdict is to raise the quota: [`HEADROOM`] times
/// the need, rounded up sensibly, and always above the current quota.
fn quota_requests(rows: &[Row]) -> Vec<QuotaRequest> {
    rows.iter()
        .filter(|r| r.verdict == Verdict::Raise)
        .filter_map(|r| {
            let current = r.quota?;
            let mut request = round_up_sensibly(r.needed * HEADROOM);
            if request <= current {
                request = round_up_sensibly(current * (1.0 + 1e-9));
            }
            Some(QuotaRequest { quota: r.quota_name, current, needed: r.needed, request })
        })
        .collect()
}

/// The spread the sender applies: never past [`MAX_HIDDEN_WAIT_SECS`] before the window closes.
pub(crate) fn effective_spread(inputs: &Inputs) -> f64 {
    let room = ((inputs.opens_hours - inputs.closes_hours) * 3_600.0 - MAX_HIDDEN_WAIT_SECS).max(0.0);
    (inputs.spread_secs as f64).min(room)
}

fn row(
    key: &'static str,
    what: &'static str,
    quota_name: &'static str,
    unit: Unit,
    needed: f64,
    quota: Option<f64>,
    hard: bool,
) -> Row {
    let percent_of_quota = quota.map(|q| needed / q * 100.0);
    let verdict = match percent_of_quota {
        None => Verdict::Unchecked,
        Some(p) if p < RAISE_AT_PERCENT => Verdict::Ok,
        Some(_) if hard => Verdict::HardLimit,
        Some(_) => Verdict::Raise,
    };
    Row { key, what, quota_name, unit, needed, quota, percent_of_quota, verdict }
}

fn assumptions(inputs: &Inputs, wait_days: f64) -> Vec<String> {
    let mut out = vec![format!(
        "peak hour = {}× the day's average rate (an assumption: --peak-factor; measure your own)",
        trim(inputs.peak_factor)
    )];
    out.push(if inputs.fixed_billing_day {
        format!(
            "fixed billing day: all {} windows of a day open in the same second; parked wake-ups spread over {} s (NOTICE_PARK_SPREAD_SECS)",
            count(inputs.per_day as f64),
            count(effective_spread(inputs))
        )
    } else {
        "uniform openings: charges spread over the day, so windows open at the rate jobs are enqueued (--fixed-billing-day if not)".to_owned()
    });
    let parked = if wait_days > 0.0 {
        format!("a job waits {} days parked in EventBridge Scheduler", trim(wait_days))
    } else {
        "no job waits for its window".to_owned()
    };
    out.push(format!(
        "jobs enqueued {} days ahead; the window opens {} h and closes {} h before the charge; {parked} (waits of at most 15 min stay hidden on the queue)",
        trim(inputs.lead_days),
        trim(inputs.opens_hours),
        trim(inputs.closes_hours),
    ));
    out.push(
        "quotas: AWS documented defaults unless set (--schedule-quota, --create-quota, --invocation-quota, --ses-rate)"
            .to_owned(),
    );
    out
}

fn notes(inputs: &Inputs, rows: &[Row], parks: bool, cohort: bool, ses_rate_needed: f64) -> Vec<String> {
    let v = inputs.per_day as f64;
    let mut out = Vec::new();
    if inputs.lead_days * 24.0 < inputs.closes_hours {
        out.push(format!(
            "--lead-days {} is shorter than --closes-hours {}: every job arrives after its window closed and is recorded as missed, never sent",
            trim(inputs.lead_days),
            trim(inputs.closes_hours)
        ));
    } else if !parks {
        out.push("jobs arrive inside their window: nothing is parked in EventBridge Scheduler".to_owned());
    }
    for r in rows {
        match r.verdict {
            Verdict::Raise => out.push(format!(
                "{}: at {} of the quota; file an increase to at least 2× the need",
                r.what,
                percent(r.percent_of_quota.unwrap_or_default())
            )),
            Verdict::HardLimit => {
                let queues = (r.needed / (SQS_IN_FLIGHT_LIMIT * RAISE_AT_PERCENT / 100.0)).ceil();
                out.push(format!(
                    "{}: {} if every receive at that rate hid the full 15 minutes, against a hard limit of {} per standard queue (not adjustable). A receive hides only while its job waits (a token, a window within 15 min, a backoff), so keep the domain and account rates above the wake rate; if waits cannot be avoided, split the traffic over at least {} queues{}. The in-flight alarm fires at 80 000",
                    r.what,
                    count(r.needed),
                    count(SQS_IN_FLIGHT_LIMIT),
                    count(queues),
                    if cohort { " (a longer NOTICE_PARK_SPREAD_SECS)" } else { "" }
                ))
            }
            Verdict::Ok | Verdict::Unchecked => {}
        }
    }
    if cohort {
        let spread = effective_spread(inputs);
        if spread < inputs.spread_secs as f64 {
            out.push(format!(
                "NOTICE_PARK_SPREAD_SECS={} is cut to {} s: a wake-up lands at least 15 min before the window closes",
                inputs.spread_secs,
                count(spread)
            ));
        }
        let half = inputs.invocation_quota as f64 * RAISE_AT_PERCENT / 100.0;
        let spread_needed = (v / half).ceil();
        if spread < spread_needed {
            out.push(format!(
                "NOTICE_PARK_SPREAD_SECS={} wakes a day's cohort at {}/s: a spread of at least {} s keeps it under half the invocation quota",
                inputs.spread_secs,
                rate(v / spread.max(1.0)),
                count(spread_needed)
            ));
        }
    }
    if inputs.ses_rate.is_none() {
        out.push(format!(
            "SES not checked: pass --ses-rate (MaxSendRate from `aws sesv2 get-account`); it must be at least {}/s (sandbox 1/s, production starts around 14/s, raised on request), and Max24HourSend at least {}",
            rate(ses_rate_needed),
            count(v)
        ));
    }
    out
}

pub(crate) fn run(args: CapacityArgs) -> anyhow::Result<ExitCode> {
    let inputs = Inputs::try_from(&args)?;
    let p = plan(&inputs);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&p)?);
    } else {
        print!("{}", render(&p));
    }
    Ok(crate::exit::Exit::Ok.into())
}

#[cfg(test)]
mod tests;
