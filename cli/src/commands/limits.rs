//! `noticectl limits`: the send-rate limits a configuration gives — the account, the default for
//! unlisted domains and every listed domain with its shards, and whether the MX rollup places the
//! others — worked out exactly as the sender does at cold start (`RateLimits::with_account_rate`
//! over `NOTICE_RATE_LIMITS` and SES's `MaxSendRate`). No AWS calls and no DNS: the MaxSendRate is
//! a flag, unknown when absent, and a domain the rollup would look up is said to be so.

use std::process::ExitCode;

use anyhow::Context;
use notice_ledger::rate::limits::{DomainLimit, ACCOUNT_SHARE, PROVIDER_BURST_SECS, PROVIDER_SHARE};
use notice_ledger::rate::providers::{domains_of, Provider, PROVIDERS_VERSION};
use notice_ledger::rate::{Limit, RateLimits, Rollup, MX_LOOKUP_BOUND, RATE_LIMITS_VAR};
use serde::Serialize;

use super::capacity::count;
use crate::terminal::table;

const SECS_PER_HOUR: f64 = 3_600.0;

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

/// One limit as the command prints it; numbers at full precision.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct LimitView {
    pub(crate) per_second: f64,
    pub(crate) per_hour: f64,
    pub(crate) burst: u32,
}

impl From<Limit> for LimitView {
    fn from(l: Limit) -> Self {
        LimitView { per_second: l.per_second, per_hour: l.per_second * SECS_PER_HOUR, burst: l.burst }
    }
}

/// Where the account limit came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AccountSource {
    /// `account` in the configuration.
    Configured,
    /// [`ACCOUNT_SHARE`] of `--max-send-rate`.
    MaxSendRate,
    /// Neither: no account-wide limit.
    None,
    /// Limits are off.
    Off,
}

/// Where the limit for the other domains (in no provider, not named) came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DefaultSource {
    /// `default` in the configuration: one bucket per domain.
    Configured,
    /// No `default`: those domains take only the account's tokens (the long tail).
    None,
    /// Limits are off.
    Off,
}

/// Where the limit of a provider without one of its own came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ProviderSource {
    /// `providers.default` in the configuration.
    Configured,
    /// The built-in provider limit once the account rate is known: [`PROVIDER_SHARE`] of it, a
    /// [`PROVIDER_BURST_SECS`] burst.
    AccountShare,
    /// The built-in provider limit with the account rate unknown: [`Limit::DEFAULT`].
    Builtin,
    /// A configuration without `providers.default`: only the providers it lists are limited.
    None,
    /// Limits are off.
    Off,
}

/// One provider's bucket: its limit and the domains that share it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ProviderView {
    pub(crate) provider: String,
    #[serde(flatten)]
    pub(crate) limit: LimitView,
    pub(crate) shards: u32,
    pub(crate) per_shard: LimitView,
    /// Its own limit (`providers.<name>`), not the provider default.
    pub(crate) own: bool,
    /// The built-in table's domains, then those the configuration maps to it.
    pub(crate) domains: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ProvidersView {
    /// The built-in table's version (`rate::providers::PROVIDERS_VERSION`).
    pub(crate) table: &'static str,
    pub(crate) source: ProviderSource,
    /// The limit of a provider without one of its own.
    pub(crate) default: Option<LimitView>,
    pub(crate) explanation: String,
    /// Every provider with a bucket.
    pub(crate) list: Vec<ProviderView>,
}

/// The MX rollup (`"rollup"` in the configuration).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct RollupView {
    pub(crate) enabled: bool,
    /// `"mx"` when on.
    pub(crate) mode: Option<&'static str>,
    pub(crate) explanation: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct AccountView {
    pub(crate) source: AccountSource,
    pub(crate) limit: Option<LimitView>,
    /// Bucket items the account is split over, and what each allows (only when configured so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) shards: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) per_shard: Option<LimitView>,
    pub(crate) explanation: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct DefaultView {
    pub(crate) source: DefaultSource,
    pub(crate) limit: Option<LimitView>,
    pub(crate) explanation: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct DomainView {
    pub(crate) domain: String,
    #[serde(flatten)]
    pub(crate) limit: LimitView,
    pub(crate) shards: u32,
    /// What each shard's bucket allows (`Limit::shard`).
    pub(crate) per_shard: LimitView,
    pub(crate) explanation: String,
}

/// Which limit a domain asked about with `--domain` gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Match {
    /// Named under `domains` with a limit: its own bucket.
    Listed,
    /// Its provider's bucket.
    Provider,
    /// `default`: a bucket of its own.
    Default,
    /// No bucket besides the account's (the long tail), or limits are off.
    NotLimited,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct QueryView {
    pub(crate) domain: String,
    pub(crate) matched: Match,
    /// The provider whose bucket it takes, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) provider: Option<String>,
    pub(crate) limit: Option<LimitView>,
    pub(crate) shards: Option<u32>,
    pub(crate) per_shard: Option<LimitView>,
    /// The sender looks this domain's MX up first (the rollup is on and nothing else places it):
    /// a provider's bucket when all its MX hosts are one provider's, else what `matched` says.
    pub(crate) mx_lookup: bool,
}

/// Everything the command prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct LimitsReport {
    /// Where the configuration was read from.
    pub(crate) config_source: String,
    /// The configuration is the built-in default (NOTICE_RATE_LIMITS unset or empty).
    pub(crate) builtin: bool,
    /// False when limits are off (`off` or `{}`).
    pub(crate) enabled: bool,
    pub(crate) max_send_rate: Option<f64>,
    pub(crate) account: AccountView,
    pub(crate) providers: ProvidersView,
    pub(crate) default: DefaultView,
    pub(crate) rollup: RollupView,
    pub(crate) domains: Vec<DomainView>,
    pub(crate) queries: Vec<QueryView>,
    /// The line the sender logs at start-up (`RateLimits::describe`), or `off`.
    pub(crate) sender_log: String,
    pub(crate) notes: Vec<String>,
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

/// The arithmetic of the command: `configured` as read (`None`: off), then the account rate
/// applied as the sender applies it.
pub(crate) fn report(
    configured: Option<RateLimits>,
    config_source: String,
    max_send_rate: Option<f64>,
    queries: &[String],
) -> LimitsReport {
    let mut notes = Vec::new();
    let mrs = max_send_rate.map(|r| format!("MaxSendRate {}/s (--max-send-rate)", num(r)));
    let Some(configured) = configured else {
        notes.push(match &mrs {
            Some(m) => format!(
                "nothing paces sends: the sender sends as fast as its batches go, and SES throttles above {m}"
            ),
            None => "nothing paces sends: the sender sends as fast as its batches go, and SES throttles above its MaxSendRate".to_owned(),
        });
        if max_send_rate.is_some() {
            notes.push(
                "--max-send-rate changes nothing while limits are off: the sender takes no account bucket"
                    .to_owned(),
            );
        }
        let off = format!("{config_source} is `off` or `{{}}`, which switches limiting off");
        return LimitsReport {
            config_source,
            builtin: false,
            enabled: false,
            max_send_rate,
            account: AccountView {
                source: AccountSource::Off,
                limit: None,
                shards: None,
                per_shard: None,
                explanation: off.clone(),
            },
            providers: ProvidersView {
                table: PROVIDERS_VERSION,
                source: ProviderSource::Off,
                default: None,
                explanation: off.clone(),
                list: Vec::new(),
            },
            default: DefaultView { source: DefaultSource::Off, limit: None, explanation: off.clone() },
            rollup: RollupView { enabled: false, mode: None, explanation: off },
            domains: Vec::new(),
            queries: queries
                .iter()
                .map(|d| QueryView {
                    domain: d.clone(),
                    matched: Match::NotLimited,
                    provider: None,
                    limit: None,
                    shards: None,
                    per_shard: None,
                    mx_lookup: false,
                })
                .collect(),
            sender_log: "off".to_owned(),
            notes,
        };
    };
    let builtin = configured == RateLimits::builtin();
    // What the explanations call the configuration.
    let name = if builtin { "the built-in default".to_owned() } else { config_source.clone() };
    let configured_account = configured.account();
    let account_shards = configured.account_limit().map_or(1, |a| a.shards);
    let limits = configured.with_account_rate(max_send_rate);

    let account = match (configured_account, limits.account()) {
        (Some(l), _) => AccountView {
            source: AccountSource::Configured,
            limit: Some(l.into()),
            shards: (account_shards > 1).then_some(account_shards),
            per_shard: (account_shards > 1).then(|| l.shard(account_shards).into()),
            explanation: {
                let shards = match account_shards {
                    1 => String::new(),
                    s => format!(", split over {s} bucket items"),
                };
                match &mrs {
                    Some(m) => {
                        format!("configured (`account` in {name}{shards}); the {m} does not change it")
                    }
                    None => format!("configured (`account` in {name}{shards})"),
                }
            },
        },
        (None, Some(l)) => AccountView {
            source: AccountSource::MaxSendRate,
            limit: Some(l.into()),
            shards: None,
            per_shard: None,
            explanation: format!(
                "{} % of {} = {}/s; burst one second of it, rounded down = {}",
                num(ACCOUNT_SHARE * 100.0),
                mrs.as_deref().unwrap_or("MaxSendRate"),
                num(l.per_second),
                l.burst
            ),
        },
        (None, None) => AccountView {
            source: AccountSource::None,
            limit: None,
            shards: None,
            per_shard: None,
            explanation: format!(
                "none: {name} sets no `account` and the MaxSendRate is unknown (pass --max-send-rate); \
                 a sender that cannot read it from SES GetAccount runs without an account limit"
            ),
        },
    };

    let default = match limits.default_limit() {
        None => DefaultView {
            source: DefaultSource::None,
            limit: None,
            explanation: format!(
                "none: {name} sets no `default`, so a domain in no provider and not listed takes only the \
                 account's tokens (the long tail: no token write of its own)"
            ),
        },
        Some(l) => DefaultView {
            source: DefaultSource::Configured,
            limit: Some(l.into()),
            explanation: format!("configured (`default` in {name}): one bucket per domain"),
        },
    };

    let provider_default = limits.provider_limit_default();
    let (source, explanation) = match (provider_default, builtin, limits.account()) {
        (None, _, _) => (
            ProviderSource::None,
            format!(
                "{name} limits only the providers it lists under `providers`; the others' domains fall to \
                 `default` (one bucket per domain) or the account"
            ),
        ),
        (Some(_), false, _) => {
            (ProviderSource::Configured, format!("configured (`providers.default` in {name})"))
        }
        (Some(l), true, Some(a)) => (
            ProviderSource::AccountShare,
            format!(
                "the built-in provider limit: {} % of the account rate ({}/s × {} = {}/s), burst {} s of it, rounded down = {}",
                num(PROVIDER_SHARE * 100.0),
                num(a.per_second),
                num(PROVIDER_SHARE),
                num(l.per_second),
                num(PROVIDER_BURST_SECS),
                l.burst
            ),
        ),
        (Some(l), true, None) => (
            ProviderSource::Builtin,
            format!(
                "the built-in provider limit while the MaxSendRate is unknown: {}/s, burst {}; with it, {} % of the account rate and a {} s burst",
                num(l.per_second),
                l.burst,
                num(PROVIDER_SHARE * 100.0),
                num(PROVIDER_BURST_SECS)
            ),
        ),
    };
    let providers = ProvidersView {
        table: PROVIDERS_VERSION,
        source,
        default: provider_default.map(Into::into),
        explanation,
        list: Provider::ALL
            .iter()
            .filter_map(|&p| {
                let dl = limits.provider_limit(p)?;
                let mut domains: Vec<String> = domains_of(p).map(str::to_owned).collect();
                domains.extend(limits.domain_providers().filter(|(_, q)| *q == p).map(|(d, _)| d.to_owned()));
                Some(ProviderView {
                    provider: p.name().to_owned(),
                    limit: dl.limit.into(),
                    shards: dl.shards,
                    per_shard: dl.limit.shard(dl.shards).into(),
                    own: limits.provider_configured(p),
                    domains,
                })
            })
            .collect(),
    };

    let domains: Vec<DomainView> = limits
        .domains()
        .map(|(domain, DomainLimit { limit, shards })| {
            let shard = limit.shard(shards);
            let explanation = if shards == 1 {
                format!("configured (`domains` in {name}); one bucket")
            } else {
                format!(
                    "configured (`domains` in {name}); {shards} shards each take 1/{shards}: {}/s ÷ {shards} = {}/s, burst {} ÷ {shards}, rounded down = {}",
                    num(limit.per_second),
                    num(shard.per_second),
                    limit.burst,
                    shard.burst
                )
            };
            DomainView {
                domain: domain.to_owned(),
                limit: limit.into(),
                shards,
                per_shard: shard.into(),
                explanation,
            }
        })
        .collect();

    let rollup = match limits.rollup() {
        Some(rollup @ Rollup::Mx) => RollupView {
            enabled: true,
            mode: Some(rollup.name()),
            explanation: format!(
                "on (`\"rollup\": \"mx\"` in {name}): a domain in no provider and not named takes a provider's \
                 bucket when all of its MX hosts are that provider's (aspmx.l.google.com, \
                 *.mail.protection.outlook.com …), looked up by the sender — a batch waits at most {} ms, \
                 answers are kept for their TTL, and a lookup that fails or times out leaves the domain \
                 where it is (counted as MxRollupFallbacks); this command does no DNS",
                MX_LOOKUP_BOUND.as_millis()
            ),
        },
        None => RollupView {
            enabled: false,
            mode: None,
            explanation: format!(
                "off: {name} sets no `rollup`, so a domain's bucket never depends on DNS (`\"rollup\": \"mx\"` \
                 places the others by their MX hosts)"
            ),
        },
    };

    let queries = queries
        .iter()
        .map(|d| match limits.bucket_for(d) {
            Some(bucket) => QueryView {
                domain: d.clone(),
                matched: match bucket.provider {
                    Some(_) => Match::Provider,
                    None if limits.domains().any(|(name, _)| name == d) => Match::Listed,
                    None => Match::Default,
                },
                provider: bucket.provider.map(|p| p.name().to_owned()),
                limit: Some(bucket.limit.limit.into()),
                shards: Some(bucket.limit.shards),
                per_shard: Some(bucket.limit.limit.shard(bucket.limit.shards).into()),
                mx_lookup: limits.needs_mx(d),
            },
            None => QueryView {
                domain: d.clone(),
                matched: Match::NotLimited,
                provider: None,
                limit: None,
                shards: None,
                per_shard: None,
                mx_lookup: limits.needs_mx(d),
            },
        })
        .collect();

    if let Some(a) = limits.account() {
        notes.push(format!(
            "every send also takes an account token: all domains together send at most {}/s ({}/h), burst {}",
            num(a.per_second),
            num(a.per_second * SECS_PER_HOUR),
            a.burst
        ));
        let faster: Vec<String> = domains
            .iter()
            .filter(|d| d.limit.per_second > a.per_second)
            .map(|d| format!("{} ({}/s)", d.domain, num(d.limit.per_second)))
            .chain(
                providers
                    .list
                    .iter()
                    .filter(|p| p.own && p.limit.per_second > a.per_second)
                    .map(|p| format!("provider {} ({}/s)", p.provider, num(p.limit.per_second))),
            )
            .chain(
                providers
                    .default
                    .filter(|l| l.per_second > a.per_second)
                    .map(|l| format!("every other provider ({}/s)", num(l.per_second))),
            )
            .chain(
                default
                    .limit
                    .filter(|l| l.per_second > a.per_second)
                    .map(|l| format!("other domains ({}/s)", num(l.per_second))),
            )
            .collect();
        if !faster.is_empty() {
            notes.push(format!(
                "{} {} above the account's {}/s: the account bucket holds {} to {}/s, together with every other domain",
                faster.join(", "),
                if faster.len() == 1 { "is" } else { "are" },
                num(a.per_second),
                if faster.len() == 1 { "it" } else { "them" },
                num(a.per_second)
            ));
        }
        if let (Some(rate), AccountSource::Configured) = (max_send_rate, account.source) {
            if a.per_second > rate {
                notes.push(format!(
                    "the configured account rate {}/s is above the {}: SES throttles the rest, and every throttled send costs a claim, a release and a receive",
                    num(a.per_second),
                    mrs.as_deref().unwrap_or("MaxSendRate")
                ));
            }
        }
    } else {
        notes.push(
            "no account limit: nothing here keeps all domains together under SES's MaxSendRate".to_owned(),
        );
    }
    // Only when the MaxSendRate would change something: an unset `account`.
    if max_send_rate.is_none() && account.source == AccountSource::None {
        notes.push(
            "MaxSendRate unknown: these are the limits of a sender that could not read it; pass --max-send-rate (MaxSendRate from `aws sesv2 get-account`) for the usual case".to_owned(),
        );
    }

    LimitsReport {
        config_source,
        builtin,
        enabled: true,
        max_send_rate,
        account,
        providers,
        default,
        rollup,
        domains,
        queries,
        sender_log: limits.describe(),
        notes,
    }
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

fn per_sec(l: &LimitView) -> String {
    format!("{}/s", num(l.per_second))
}

fn per_hour(l: &LimitView) -> String {
    format!("{}/h", num(l.per_hour))
}

fn one(l: &LimitView) -> String {
    format!("{} ({}) burst {}", per_sec(l), per_hour(l), l.burst)
}

/// The table the command prints.
pub(crate) fn render(r: &LimitsReport) -> String {
    let mrs = r.max_send_rate.map_or("unknown".to_owned(), |m| format!("{}/s", num(m)));
    let mut out =
        format!("send-rate limits from {}; SES MaxSendRate {mrs} (no AWS calls)\n\n", r.config_source);
    if !r.enabled {
        out.push_str(&format!(
            "rate limits: off — {}; no domain and no account limit\n",
            r.account.explanation
        ));
    } else {
        let dash = || "-".to_owned();
        let mut rows = Vec::new();
        let mut row =
            |what: String, limit: Option<&LimitView>, shards: Option<u32>, shard: Option<&LimitView>| {
                rows.push(match limit {
                    Some(l) => vec![
                        what,
                        per_sec(l),
                        per_hour(l),
                        l.burst.to_string(),
                        shards.map_or_else(dash, |s| s.to_string()),
                        shard.map_or_else(dash, |s| {
                            format!("{} ({}) burst {}", per_sec(s), per_hour(s), s.burst)
                        }),
                    ],
                    None => vec![what, "none".to_owned(), dash(), dash(), dash(), dash()],
                });
            };
        row("account".to_owned(), r.account.limit.as_ref(), r.account.shards, r.account.per_shard.as_ref());
        for p in r.providers.list.iter().filter(|p| p.own) {
            row(format!("provider {}", p.provider), Some(&p.limit), Some(p.shards), Some(&p.per_shard));
        }
        let others = r.providers.list.iter().filter(|p| !p.own).count();
        if others > 0 || r.providers.default.is_some() {
            let what =
                if r.providers.list.iter().any(|p| p.own) { "each other provider" } else { "each provider" };
            row(what.to_owned(), r.providers.default.as_ref(), r.providers.default.map(|_| 1), None);
        }
        for d in &r.domains {
            row(d.domain.clone(), Some(&d.limit), Some(d.shards), Some(&d.per_shard));
        }
        row("other domains".to_owned(), r.default.limit.as_ref(), r.default.limit.map(|_| 1), None);
        out.push_str(&table(&["bucket", "per second", "per hour", "burst", "shards", "per shard"], &rows));
        out.push_str("\nwhere each number comes from:\n");
        out.push_str(&format!("  account: {}\n", r.account.explanation));
        out.push_str(&format!("  providers: {}\n", r.providers.explanation));
        if !r.providers.list.is_empty() {
            let listed: Vec<String> =
                r.providers.list.iter().map(|p| format!("{} ({})", p.provider, p.domains.len())).collect();
            out.push_str(&format!(
                "    one bucket each, for all its domains (table {}; --json lists them): {}\n",
                r.providers.table,
                listed.join(", ")
            ));
        }
        for d in &r.domains {
            out.push_str(&format!("  {}: {}\n", d.domain, d.explanation));
        }
        out.push_str(&format!("  other domains: {}\n", r.default.explanation));
        out.push_str(&format!("  MX rollup: {}\n", r.rollup.explanation));
    }
    if !r.queries.is_empty() {
        out.push_str("\ndomains asked about (--domain):\n");
        for q in &r.queries {
            let what = match (q.matched, &q.limit) {
                (Match::NotLimited, _) | (_, None) if r.enabled => {
                    "no bucket of its own: only the account's tokens (the long tail)".to_owned()
                }
                (Match::NotLimited, _) | (_, None) => "not limited".to_owned(),
                (Match::Listed, Some(l)) => match (q.shards, &q.per_shard) {
                    (Some(s), Some(p)) if s > 1 => {
                        format!(
                            "listed: {} in {s} shards of {}/s burst {}",
                            one(l),
                            num(p.per_second),
                            p.burst
                        )
                    }
                    _ => format!("listed: {}", one(l)),
                },
                (Match::Default, Some(l)) => format!("not listed, the default for other domains: {}", one(l)),
                (Match::Provider, Some(l)) => format!(
                    "provider {}'s bucket, shared with its other domains: {}",
                    q.provider.as_deref().unwrap_or("?"),
                    one(l)
                ),
            };
            let mx = if q.mx_lookup {
                " — unless its MX hosts are all one provider's: then that provider's bucket (the sender looks it up)"
            } else {
                ""
            };
            out.push_str(&format!("  {}: {what}{mx}\n", q.domain));
        }
    }
    out.push_str(&format!("\nthe sender logs: {}\n", r.sender_log));
    if !r.notes.is_empty() {
        out.push_str("\nnotes:\n");
        for n in &r.notes {
            out.push_str(&format!("  - {n}\n"));
        }
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
