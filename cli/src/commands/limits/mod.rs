//! `noticectl limits`: the send-rate limits a configuration gives — the account, the default for
//! unlisted domains and every listed domain with its shards, and whether the MX rollup places the
//! others — worked out exactly as the sender does at cold start (`RateLimits::with_account_rate`
//! over `NOTICE_RATE_LIMITS` and SES's `MaxSendRate`). No AWS calls and no DNS: the MaxSendRate is
//! a flag, unknown when absent, and a domain the rollup would look up is said to be so.
//!
//! This module holds the arguments, how the configuration is read and the command's flow; the
//! numbers, taken from the core and explained, are gathered in [`report`](mod@report), the
//! shape of the report (the JSON of `--json`) is in [`view`], and the text for people in
//! [`render`](mod@render).

use std::process::ExitCode;

use anyhow::Context;
use notice_ledger::rate::{RateLimits, RATE_LIMITS_VAR};

use super::capacity::count;

mod render;
mod report;
mod view;

use render::render;
use report::report;

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct LimitsArgs {
    /// The configuration to read (JSON, `off`, or @FILE), as NOTICE_RATE_LIMITS would hold it;
    /// default: NOTICE_RATE_LIMITS itself (unset: the built-in default the sender uses).
    #[arg(long, value_name = "JSON")]
    rate_limits: Option<String>,
    /// SES's MaxSendRate (messages/s, `aws sesv2 get-account`), as the sender reads it at cold
    /// start; absent: unknown, as when the sender cannot read it.
    #[arg(long, value_name = "R")]
    max_send_rate: Option<f64>,
    /// Also show the limit this recipient domain gets (repeatable).
    #[arg(long = "domain", value_name = "D")]
    domains: Vec<String>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// The configuration text and where it came from: `--rate-limits` (inline or @FILE) or the
/// environment, read as the sender reads it.
fn configuration(flag: Option<&str>) -> anyhow::Result<(Option<RateLimits>, String)> {
    let Some(value) = flag else {
        let source = match std::env::var_os(RATE_LIMITS_VAR) {
            None => format!("{RATE_LIMITS_VAR} (unset: the built-in default)"),
            Some(v) if v.to_string_lossy().trim().is_empty() => {
                format!("{RATE_LIMITS_VAR} (empty: the built-in default)")
            }
            Some(_) => RATE_LIMITS_VAR.to_owned(),
        };
        let limits = notice_setup::config::rate_limits_from_env()?;
        return Ok((limits, source));
    };
    let (text, source) = match value.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path).with_context(|| format!("--rate-limits {path}"))?,
            format!("--rate-limits @{path}"),
        ),
        None => (value.to_owned(), "--rate-limits".to_owned()),
    };
    // As `rate_limits_from_env`: an empty value is the built-in default.
    if text.trim().is_empty() {
        return Ok((Some(RateLimits::builtin()), format!("{source} (empty: the built-in default)")));
    }
    let limits = RateLimits::parse(&text).with_context(|| source.clone())?;
    Ok((limits, source))
}

/// The recipient domain as the sender keys it: lower case, after the last `@` (so an address
/// works too).
fn normalize_domain(raw: &str) -> anyhow::Result<String> {
    let trimmed = raw.trim();
    let domain = trimmed.rsplit_once('@').map_or(trimmed, |(_, d)| d).to_ascii_lowercase();
    if domain.is_empty() || domain.contains(['#', ' ']) {
        anyhow::bail!("limits: --domain {raw:?} is not a domain name");
    }
    Ok(domain)
}

/// A number for people: 12.6, 6.3, 45 360, 1 440 000; below 1, three significant figures.
pub(crate) fn num(x: f64) -> String {
    if x > 0.0 && x < 1.0 {
        let decimals = (-x.log10().floor()) as usize + 2;
        let s = format!("{x:.decimals$}");
        return s.trim_end_matches('0').trim_end_matches('.').to_owned();
    }
    let rounded = (x * 100.0).round() / 100.0;
    let whole = rounded.trunc();
    let mut out = count(whole);
    let frac = format!("{:.2}", rounded - whole);
    let frac = frac.trim_start_matches('0').trim_end_matches('0');
    if frac != "." {
        out.push_str(frac);
    }
    out
}

pub(crate) fn run(args: LimitsArgs) -> anyhow::Result<ExitCode> {
    if let Some(rate) = args.max_send_rate {
        if !(rate.is_finite() && rate > 0.0) {
            anyhow::bail!("limits: --max-send-rate must be a number > 0, not {rate}");
        }
    }
    let queries = args.domains.iter().map(|d| normalize_domain(d)).collect::<Result<Vec<_>, _>>()?;
    let (configured, source) = configuration(args.rate_limits.as_deref())?;
    let r = report(configured, source, args.max_send_rate, &queries);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", render(&r));
    }
    Ok(crate::exit::Exit::Ok.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_rounded_for_people() {
        assert_eq!(num(12.6), "12.6");
        assert_eq!(num(14.0 * 0.9), "12.6");
        assert_eq!(num(6.3), "6.3");
        assert_eq!(num(45_360.000_000_1), "45 360");
        assert_eq!(num(1_440_000.0), "1 440 000");
        assert_eq!(num(0.5), "0.5");
        assert_eq!(num(0.012_34), "0.0123");
        assert_eq!(num(33.333), "33.33");
        assert_eq!(num(0.0), "0");
    }

    #[test]
    fn a_domain_is_keyed_as_the_sender_keys_it() {
        assert_eq!(normalize_domain(" Gmail.COM ").unwrap(), "gmail.com");
        assert_eq!(normalize_domain("ada@Example.org").unwrap(), "example.org");
        assert!(normalize_domain("").unwrap_err().to_string().contains("--domain"));
        assert!(normalize_domain("gmail.com#1").is_err());
    }
}
