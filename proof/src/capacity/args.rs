//! The `capacity` command line, and the configuration a run uses: the defaults a deployment gets
//! from template.yaml and AWS, or (`--recommended`) the configuration docs/capacity.md recommends
//! for the volume.

use std::collections::BTreeMap;

use notice_ledger::rate::providers::provider_of;
use notice_ledger::rate::RateLimits;
use serde::Serialize;

use super::clock::{Us, MS, SEC};
use super::queue::{LambdaLimits, SqsLimits};
use super::services::{DynamoLimits, SchedulerLimits};
use super::world::Latency;

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CapacityArgs {
    /// Notices producers enqueue per hour (and, in steady state, whose windows open per hour).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub(super) per_hour: u64,
    /// Simulated minutes.
    #[arg(long, default_value_t = 10.0, value_parser = positive)]
    pub(super) minutes: f64,
    /// Seed: the same seed gives the same report.
    #[arg(long, default_value_t = 1)]
    pub(super) seed: u64,
    /// Run the configuration docs/capacity.md recommends for this volume instead of the defaults
    /// (rate limits, SES rate, MaximumConcurrency, park spread, table warm throughput, quotas).
    #[arg(long)]
    pub(super) recommended: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub(super) json: bool,

    // ── producers ──
    /// Longest lead: jobs are enqueued uniformly 0..N days before their window opens.
    #[arg(long, default_value_t = 30.0, value_parser = non_negative)]
    pub(super) lead_days: f64,
    /// Every window of the run opens in the same minute (one billing day for everyone).
    #[arg(long)]
    pub(super) fixed_billing_day: bool,
    /// Named recipient domains and their shares; the rest go to the long tail.
    #[arg(long, default_value = "gmail.com=0.35,outlook.com=0.15,yahoo.com=0.10")]
    pub(super) domains: String,
    /// Domains in the long tail.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub(super) tail_domains: u32,
    /// An operator replays this many notices at once (windows open, never sent), all to one domain.
    #[arg(long, default_value_t = 0)]
    pub(super) replay: u32,
    #[arg(long, default_value = "gmail.com")]
    pub(super) replay_domain: String,
    #[arg(long, default_value_t = 60.0, value_parser = non_negative)]
    pub(super) replay_at_secs: f64,
    /// The replay is the run's only traffic: no producers, no steady-state backlog — how fast a
    /// replay to one provider drains against that provider's bucket alone (docs/capacity.md,
    /// *A replay to one provider*).
    #[arg(long)]
    pub(super) replay_alone: bool,
    /// Enqueue the replay at this many messages a second, ten a call as `noticectl replay` does
    /// (`--rate`, or the bucket's rate it paces a provider at by default; 0: all at once).
    #[arg(long, default_value_t = 0.0)]
    pub(super) replay_per_sec: f64,
    /// Probability that an invocation crashes part-way (its records come back after the timeout).
    #[arg(long, default_value_t = 0.0005, value_parser = probability)]
    pub(super) crash_rate: f64,
    /// Probability that SQS delivers a received message a second time (at-least-once).
    #[arg(long, default_value_t = 0.0005, value_parser = probability)]
    pub(super) redelivery_rate: f64,

    // ── DynamoDB ──
    #[arg(long, default_value_t = 4.0, value_parser = positive)]
    pub(super) ddb_latency_ms: f64,
    /// Write units per second one partition (so one item) takes.
    #[arg(long, default_value_t = 1_000.0, value_parser = positive)]
    pub(super) ddb_item_wcu: f64,
    /// Writes/reads per second the table serves at the start (a new on-demand table: 4 000 / 12 000;
    /// more with warm throughput).
    #[arg(long, default_value_t = 4_000.0, value_parser = positive)]
    pub(super) ddb_table_wcu: f64,
    #[arg(long, default_value_t = 12_000.0, value_parser = positive)]
    pub(super) ddb_table_rcu: f64,
    /// Per-table on-demand quota (write and read request units per second).
    #[arg(long, default_value_t = 40_000.0, value_parser = positive)]
    pub(super) ddb_quota: f64,

    // ── SQS and Lambda ──
    #[arg(long, default_value_t = 180.0, value_parser = positive)]
    pub(super) visibility_secs: f64,
    #[arg(long, default_value_t = 120_000)]
    pub(super) in_flight_cap: i64,
    #[arg(long, default_value_t = 20)]
    pub(super) max_receives: u32,
    /// The sender's event source mapping's BatchSize (template.yaml: 25).
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(super) batch_size: u32,
    /// The sender's event source mapping's MaximumBatchingWindowInSeconds (template.yaml: 1): how
    /// long Lambda gathers records before invoking with fewer than a full batch (0 to 300; Lambda
    /// requires at least 1 for a BatchSize over 10).
    #[arg(long, default_value_t = 1.0, value_parser = non_negative)]
    pub(super) batch_window_secs: f64,
    #[arg(long, default_value_t = 8.0, value_parser = positive)]
    pub(super) sqs_latency_ms: f64,
    /// The event source mapping's MaximumConcurrency (template.yaml's SenderMaxConcurrency).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=1_000))]
    pub(super) max_concurrency: u32,
    #[arg(long, default_value_t = 1_000)]
    pub(super) account_concurrency: u32,
    #[arg(long, default_value_t = 50.0, value_parser = non_negative)]
    pub(super) cold_start_ms: f64,

    // ── SES and Scheduler ──
    /// The SES account's MaxSendRate.
    #[arg(long, default_value_t = 14.0, value_parser = positive)]
    pub(super) ses_rate: f64,
    #[arg(long, default_value_t = 60.0, value_parser = positive)]
    pub(super) ses_latency_ms: f64,
    #[arg(long, default_value_t = 10_000_000.0, value_parser = positive)]
    pub(super) schedules_quota: f64,
    #[arg(long, default_value_t = 5_000.0, value_parser = positive)]
    pub(super) create_schedule_per_sec: f64,
    #[arg(long, default_value_t = 1_000.0, value_parser = positive)]
    pub(super) invocations_per_sec: f64,
    #[arg(long, default_value_t = 20.0, value_parser = positive)]
    pub(super) scheduler_latency_ms: f64,

    // ── the sender ──
    /// NOTICE_RATE_LIMITS as JSON (default: the built-in limits, on).
    #[arg(long)]
    pub(super) rate_limits: Option<String>,
    /// NOTICE_PARK_SPREAD_SECS.
    #[arg(long, default_value_t = 0)]
    pub(super) park_spread_secs: u64,
}

fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a positive number")),
    }
}

fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a number ≥ 0")),
    }
}

fn probability(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("`{s}` is not a probability in [0, 1]")),
    }
}

/// A run's checked parameters.
#[derive(Clone, Debug)]
pub(super) struct Params {
    pub(super) per_hour: u64,
    pub(super) horizon: Us,
    pub(super) seed: u64,
    pub(super) recommended: bool,
    pub(super) lead_days: f64,
    pub(super) fixed_billing_day: bool,
    pub(super) named_domains: Vec<(String, f64)>,
    pub(super) tail_domains: u32,
    pub(super) replay: u32,
    pub(super) replay_domain: String,
    pub(super) replay_at: Us,
    pub(super) replay_per_sec: f64,
    pub(super) replay_alone: bool,
    pub(super) crash_rate: f64,
    pub(super) redelivery_rate: f64,
    pub(super) dynamo: DynamoLimits,
    pub(super) sqs: SqsLimits,
    pub(super) sqs_latency: Latency,
    pub(super) lambda: LambdaLimits,
    pub(super) cold_start: Us,
    pub(super) ses_rate: f64,
    pub(super) ses_latency: Latency,
    pub(super) scheduler: SchedulerLimits,
    pub(super) rate_limits: RateLimits,
    pub(super) rate_limits_json: Option<String>,
    pub(super) park_spread_secs: u64,
}

/// The configuration a run used, for the report.
#[derive(Clone, Debug, Serialize)]
pub(super) struct Config {
    pub(super) recommended: bool,
    pub(super) rate_limits: String,
    pub(super) ses_max_send_rate: f64,
    pub(super) max_concurrency: u32,
    pub(super) account_concurrency: u32,
    pub(super) park_spread_secs: u64,
    pub(super) batch_size: usize,
    pub(super) batch_window_secs: f64,
    pub(super) table_warm_wcu: f64,
    pub(super) table_warm_rcu: f64,
    pub(super) table_quota: f64,
    pub(super) schedules_quota: f64,
    pub(super) create_schedule_per_sec: f64,
    pub(super) invocations_per_sec: f64,
}

fn parse_domains(text: &str) -> Result<Vec<(String, f64)>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (d, s) =
            part.split_once('=').ok_or_else(|| format!("--domains: `{part}` is not DOMAIN=SHARE"))?;
        let share: f64 = s.parse().map_err(|_| format!("--domains: `{s}` is not a share"))?;
        if !(0.0..=1.0).contains(&share) {
            return Err(format!("--domains: the share of {d} must be in [0, 1]"));
        }
        out.push((d.trim().to_ascii_lowercase(), share));
    }
    let total: f64 = out.iter().map(|(_, s)| s).sum();
    if total > 1.0 + 1e-9 {
        return Err(format!("--domains: the shares add up to {total}, more than 1"));
    }
    Ok(out)
}

/// The recommended configuration asks for this many times the modelled need: peaks run a few
/// per cent above the hour's average, and a quota at twice the need would be just over half used.
pub(super) const MARGIN: f64 = 2.5;

/// What the recommended configuration is sized for: the send rate at the busiest second.
pub(super) fn peak_send_rate(per_hour: u64, minutes: f64, fixed_billing_day: bool, spread_secs: u64) -> f64 {
    let steady = per_hour as f64 / 3_600.0;
    if fixed_billing_day {
        // The run's whole cohort opens in one minute and wakes over the spread.
        let cohort = per_hour as f64 * minutes / 60.0;
        cohort / (spread_secs.max(1) as f64)
    } else {
        steady
    }
}

impl Params {
    pub(super) fn from_args(a: &CapacityArgs) -> Result<Self, String> {
        // The event source mapping's own rules (Lambda's CreateEventSourceMapping refuses the rest).
        if a.batch_window_secs > 300.0 {
            return Err("--batch-window-secs: Lambda allows at most 300".into());
        }
        if a.batch_size > 10 && a.batch_window_secs < 1.0 {
            return Err(format!(
                "--batch-size {}: Lambda requires a batching window of at least 1 s (--batch-window-secs) for a batch over 10",
                a.batch_size
            ));
        }
        if a.replay_alone && a.replay == 0 {
            return Err("--replay-alone needs --replay N".into());
        }
        let named_domains = parse_domains(&a.domains)?;
        let mut p = Params {
            per_hour: a.per_hour,
            horizon: (a.minutes * 60.0 * SEC as f64) as Us,
            seed: a.seed,
            recommended: a.recommended,
            lead_days: a.lead_days,
            fixed_billing_day: a.fixed_billing_day,
            named_domains,
            tail_domains: a.tail_domains,
            replay: a.replay,
            replay_domain: a.replay_domain.to_ascii_lowercase(),
            replay_at: (a.replay_at_secs * SEC as f64) as Us,
            replay_per_sec: a.replay_per_sec,
            replay_alone: a.replay_alone,
            crash_rate: a.crash_rate,
            redelivery_rate: a.redelivery_rate,
            dynamo: DynamoLimits {
                latency: Latency::ms(a.ddb_latency_ms),
                item_wcu: a.ddb_item_wcu,
                table_wcu: a.ddb_table_wcu,
                table_rcu: a.ddb_table_rcu,
                quota_wcu: a.ddb_quota,
                quota_rcu: a.ddb_quota,
            },
            sqs: SqsLimits {
                visibility: (a.visibility_secs * SEC as f64) as Us,
                in_flight_cap: a.in_flight_cap,
                max_receives: a.max_receives,
                batch: a.batch_size as usize,
                window: (a.batch_window_secs * SEC as f64) as Us,
            },
            sqs_latency: Latency::ms(a.sqs_latency_ms),
            lambda: LambdaLimits {
                max_concurrency: a.max_concurrency,
                account_concurrency: a.account_concurrency,
                start: 5,
                ramp_per_minute: 300,
                ceiling: 1_000,
            },
            cold_start: (a.cold_start_ms * MS as f64) as Us,
            ses_rate: a.ses_rate,
            ses_latency: Latency::ms(a.ses_latency_ms),
            scheduler: SchedulerLimits {
                latency: Latency::ms(a.scheduler_latency_ms),
                live_quota: a.schedules_quota,
                create_per_sec: a.create_schedule_per_sec,
                invocations_per_sec: a.invocations_per_sec,
            },
            rate_limits: RateLimits::builtin(),
            rate_limits_json: a.rate_limits.clone(),
            park_spread_secs: a.park_spread_secs,
        };
        if a.recommended {
            p.recommend();
        }
        let limits = match &p.rate_limits_json {
            None => RateLimits::builtin(),
            Some(json) => RateLimits::parse(json).map_err(|e| format!("--rate-limits: {e}"))?.ok_or(
                "--rate-limits: `off` is not a configuration this model runs (limits are on by default)",
            )?,
        };
        p.rate_limits = limits.with_account_rate(Some(p.ses_rate));
        Ok(p)
    }

    /// Live schedules in steady state: every job parks from its enqueue to its window's opening
    /// (none for a replay alone: it has no producers).
    pub(super) fn steady_schedules(&self) -> f64 {
        if self.replay_alone {
            return 0.0;
        }
        self.per_hour as f64 * self.lead_days * 24.0 / 2.0
    }

    /// The recommended configuration for this volume (docs/capacity.md, *Recommended
    /// configuration*): every adjustable quota and rate at [`MARGIN`] times the need, so none
    /// runs above half of it at peak; every bucket item that a batch writes — a named domain's,
    /// the account's — split so that each shard takes at most half a partition's writes.
    fn recommend(&mut self) {
        let minutes = self.horizon as f64 / (60.0 * SEC as f64);
        // Wake-ups round up to the minute: without a spread a minute's openings wake in one
        // second. Two minutes keep lateness well under 5 minutes; a fixed billing day's cohort
        // instead wakes over the run at the steady rate.
        self.park_spread_secs =
            if self.fixed_billing_day { (minutes * 60.0) as u64 } else { self.park_spread_secs.max(120) };
        let r = peak_send_rate(self.per_hour, minutes, self.fixed_billing_day, self.park_spread_secs);
        let steady = self.per_hour as f64 / 3_600.0;
        self.ses_rate = (MARGIN * r).ceil().max(self.ses_rate);
        let account = self.ses_rate * 0.9;
        // A shard's writes: at most one per batch that holds one of its records, so at most its
        // records per second; half a partition is 500.
        let shards = |per_second: f64| (per_second / 500.0).ceil().clamp(1.0, 256.0) as u32;
        // Buckets by receiving provider, as shipped: a named domain of a provider in the table
        // adds its share to that provider's bucket; a named domain of no provider gets its own;
        // the long tail rides the account bucket only (no per-domain `default`: one token write
        // per distinct domain in every batch, docs/configuration.md *Send rates*).
        let mut by_provider: BTreeMap<&'static str, f64> = BTreeMap::new();
        let mut own = Vec::new();
        for (d, share) in &self.named_domains {
            match provider_of(d) {
                Some(p) => *by_provider.entry(p.name()).or_default() += share,
                None => own.push((d.clone(), *share)),
            }
        }
        let sized = |share: f64| {
            let per_second = (MARGIN * share * r).ceil().max(10.0);
            let burst = (per_second * 5.0).ceil() as u32;
            format!(r#"{{"per_second":{per_second},"burst":{burst},"shards":{}}}"#, shards(per_second))
        };
        let mut providers: Vec<String> =
            by_provider.iter().map(|(p, share)| format!(r#""{p}":{}"#, sized(*share))).collect();
        // Providers the mix does not name: the built-in share, half the account, burst 5 s.
        providers.push(format!(
            r#""default":{{"per_second":{},"burst":{}}}"#,
            (account / 2.0).ceil(),
            (account * 2.5).ceil()
        ));
        let domains: Vec<String> =
            own.iter().map(|(d, share)| format!(r#""{d}":{}"#, sized(*share))).collect();
        self.rate_limits_json = Some(format!(
            r#"{{"providers":{{{}}},"domains":{{{}}},"account":{{"per_second":{},"burst":{},"shards":{}}}}}"#,
            providers.join(","),
            domains.join(","),
            account.floor(),
            account.floor().max(1.0),
            shards(MARGIN * r),
        ));
        // Every job is received about twice (once to park, once to send); at low load a batch
        // holds a record or two, and an invocation takes about 0.1 s.
        let need = ((steady + r) * 0.1).ceil() as u32;
        self.lambda.max_concurrency = ((MARGIN * f64::from(need)).ceil() as u32).clamp(20, 1_000);
        self.lambda.account_concurrency =
            self.lambda.account_concurrency.max(2 * self.lambda.max_concurrency);
        // Ledger: a read per notice, at most 4 writes (token, claim, commit, a refused token).
        self.dynamo.table_wcu = self.dynamo.table_wcu.max(MARGIN * 4.0 * r);
        self.dynamo.table_rcu = self.dynamo.table_rcu.max(MARGIN * 2.0 * r);
        self.dynamo.quota_wcu = self.dynamo.quota_wcu.max(self.dynamo.table_wcu);
        self.dynamo.quota_rcu = self.dynamo.quota_rcu.max(self.dynamo.table_rcu);
        self.scheduler.live_quota = self.scheduler.live_quota.max(MARGIN * self.steady_schedules());
        // Parks run at the producers' rate, plus the catch-up while Lambda's pollers ramp up
        // (about 1.3× for a minute at the start): half as much again.
        self.scheduler.create_per_sec = self.scheduler.create_per_sec.max(MARGIN * 1.5 * steady);
        self.scheduler.invocations_per_sec = self.scheduler.invocations_per_sec.max(MARGIN * r);
    }

    pub(super) fn config(&self) -> Config {
        Config {
            recommended: self.recommended,
            rate_limits: self.rate_limits.describe(),
            ses_max_send_rate: self.ses_rate,
            max_concurrency: self.lambda.max_concurrency,
            account_concurrency: self.lambda.account_concurrency,
            park_spread_secs: self.park_spread_secs,
            batch_size: self.sqs.batch,
            batch_window_secs: self.sqs.window as f64 / SEC as f64,
            table_warm_wcu: self.dynamo.table_wcu,
            table_warm_rcu: self.dynamo.table_rcu,
            table_quota: self.dynamo.quota_wcu,
            schedules_quota: self.scheduler.live_quota,
            create_schedule_per_sec: self.scheduler.create_per_sec,
            invocations_per_sec: self.scheduler.invocations_per_sec,
        }
    }
}
