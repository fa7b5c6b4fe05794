//! The `simulate` command line and the checked parameters it becomes.

use std::fmt;

use serde::Serialize;

use super::time::{Ms, DAY, HOUR, MINUTE, SECOND};

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct SimulateArgs {
    /// Notices to deliver.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    notices: u32,
    /// Seed of the trace: the same seed gives the same schedule of chaos to every strategy.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub(super) json: bool,
    /// Ledger behind the durable strategy.
    #[arg(long, value_enum, default_value = "memory")]
    ledger: SimLedger,
    /// Worker instances.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    instances: u32,
    /// Jobs one instance runs at once.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    concurrency: u32,
    /// Days over which charges are spread (one 09:00 UTC burst each).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=60))]
    charge_days: u32,
    /// Queue visibility timeout (e.g. 30s, 5m).
    #[arg(long, default_value = "30s", value_parser = parse_span)]
    visibility_timeout: Span,
    /// How long a worker waits for the provider before the outcome counts as unknown.
    #[arg(long, default_value = "45s", value_parser = parse_span)]
    send_timeout: Span,
    /// Median send latency.
    #[arg(long, default_value = "200ms", value_parser = parse_span)]
    latency_median: Span,
    /// Pareto shape of the send latency (smaller = heavier tail).
    #[arg(long, default_value_t = 1.0, value_parser = positive)]
    latency_alpha: f64,
    /// Longest send latency.
    #[arg(long, default_value = "10m", value_parser = parse_span)]
    latency_cap: Span,
    /// Probability of a worker crash at each of the four steps of one receive.
    #[arg(long, default_value_t = 0.001, value_parser = probability)]
    crash_rate: f64,
    /// Probability that the provider accepts a message but answers 5xx.
    #[arg(long, default_value_t = 0.005, value_parser = probability)]
    unknown_rate: f64,
    /// Probability that the provider throttles a send (nothing goes out).
    #[arg(long, default_value_t = 0.01, value_parser = probability)]
    throttle_rate: f64,
    /// Probability that the broker also delivers a received message to a second consumer.
    #[arg(long, default_value_t = 0.01, value_parser = probability)]
    ghost_rate: f64,
    /// Probability that the producer enqueues a job twice.
    #[arg(long, default_value_t = 0.02, value_parser = probability)]
    producer_dup_rate: f64,
    /// When every worker dies at once (e.g. 1d9h3s), or `off`.
    #[arg(long, default_value = "1d9h3s", value_parser = parse_when)]
    redeploy_at: When,
    /// When the operator replays a range of jobs, or `off`.
    #[arg(long, default_value = "2d15h", value_parser = parse_when)]
    replay_at: When,
    /// Replayed jobs: charge at or after this instant …
    #[arg(long, default_value = "5d", value_parser = parse_span)]
    replay_from: Span,
    /// … and before this one.
    #[arg(long, default_value = "6d", value_parser = parse_span)]
    replay_to: Span,
    /// Broker deduplication window.
    #[arg(long, default_value = "5m", value_parser = parse_span)]
    dedup_window: Span,
    /// TTLs of the shared-cache claim, one row each (comma-separated).
    #[arg(long, value_delimiter = ',', default_values = ["30s", "5m", "1h", "1d"], value_parser = parse_span)]
    ttl: Vec<Span>,
    /// Enqueue each job at a random instant up to this many days before its window opens, as
    /// producers do; without it every job is enqueued on day 0.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=365))]
    lead_days: Option<u32>,
    /// The queue's redrive policy: a message received this many times goes to the dead-letter
    /// queue at its next receive.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    max_receive_count: u32,
    /// The queue deletes a message this long after its first enqueue (SQS: at most 14 days).
    #[arg(long, default_value = "14d", value_parser = parse_span)]
    retention: Span,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum SimLedger {
    Memory,
    Sqlite,
}

impl SimLedger {
    pub(super) fn name(self) -> &'static str {
        match self {
            SimLedger::Memory => "memory",
            SimLedger::Sqlite => "sqlite",
        }
    }
}

/// A simulated duration, written like `1d9h3s`, `5m` or `200ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span(pub(super) Ms);

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
struct When(Option<Span>);

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
pub(super) struct Params {
    pub(super) notices: usize,
    pub(super) seed: u64,
    pub(super) ledger: SimLedger,
    pub(super) instances: usize,
    pub(super) concurrency: usize,
    pub(super) charge_days: u32,
    pub(super) visibility_timeout_ms: Ms,
    pub(super) send_timeout_ms: Ms,
    pub(super) latency_median_ms: Ms,
    pub(super) latency_alpha: f64,
    pub(super) latency_cap_ms: Ms,
    pub(super) crash_rate: f64,
    pub(super) unknown_rate: f64,
    pub(super) throttle_rate: f64,
    pub(super) ghost_rate: f64,
    pub(super) producer_dup_rate: f64,
    pub(super) redeploy_at_ms: Option<Ms>,
    pub(super) replay_at_ms: Option<Ms>,
    pub(super) replay_from_ms: Ms,
    pub(super) replay_to_ms: Ms,
    pub(super) dedup_window_ms: Ms,
    pub(super) ttls_ms: Vec<Ms>,
    pub(super) lead_days: Option<u32>,
    pub(super) max_receive_count: u32,
    pub(super) retention_ms: Ms,
}

impl Params {
    pub(super) fn from_args(a: &SimulateArgs) -> Result<Self, String> {
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

/// Parses `simulate ARGS…` as the command line would, then checks it: the tests' way in.
#[cfg(test)]
pub(super) fn parse_params(extra: &[&str]) -> Result<Params, String> {
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: SimulateArgs,
    }

    let argv = ["simulate"].iter().chain(extra.iter());
    Cli::try_parse_from(argv).map_err(|e| e.to_string()).and_then(|c| Params::from_args(&c.args))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let parse = parse_params;
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
