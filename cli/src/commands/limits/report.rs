//! The report of `noticectl limits`: every number is the core's — [`RateLimits::with_account_rate`]
//! fills the account and the built-in provider limit from the MaxSendRate, [`Limit::shard`] splits
//! a limit over its shards, [`RateLimits::bucket_for`] and [`RateLimits::needs_mx`] place a domain —
//! and this module only gathers them, says where each came from, and adds the notes.

use notice_ledger::rate::limits::{DomainLimit, ACCOUNT_SHARE, PROVIDER_BURST_SECS, PROVIDER_SHARE};
use notice_ledger::rate::providers::{domains_of, Provider, PROVIDERS_VERSION};
use notice_ledger::rate::{Limit, RateLimits, Rollup, MX_LOOKUP_BOUND};

use super::num;
use super::view::{
    AccountSource, AccountView, DefaultSource, DefaultView, DomainView, LimitView, LimitsReport, Match,
    ProviderSource, ProviderView, ProvidersView, QueryView, RollupView, SECS_PER_HOUR,
};

/// What the explanations of one configuration share.
struct Wording<'a> {
    /// What the explanations call the configuration: the built-in default, or where it was read.
    name: &'a str,
    /// `MaxSendRate R/s (--max-send-rate)` when given.
    mrs: Option<&'a str>,
}

/// The arithmetic of the command: `configured` as read (`None`: off), then the account rate
/// applied as the sender applies it.
pub(crate) fn report(
    configured: Option<RateLimits>,
    config_source: String,
    max_send_rate: Option<f64>,
    queries: &[String],
) -> LimitsReport {
    let mrs = max_send_rate.map(|r| format!("MaxSendRate {}/s (--max-send-rate)", num(r)));
    let Some(configured) = configured else {
        return off(config_source, max_send_rate, mrs.as_deref(), queries);
    };
    let builtin = configured == RateLimits::builtin();
    let name = if builtin { "the built-in default".to_owned() } else { config_source.clone() };
    let words = Wording { name: &name, mrs: mrs.as_deref() };
    // The account as configured, before the MaxSendRate fills it.
    let configured_account = configured.account_limit();
    let limits = configured.with_account_rate(max_send_rate);

    let account = account_view(configured_account, limits.account(), &words);
    let default = default_view(limits.default_limit(), &words);
    let providers = providers_view(&limits, builtin, &words);
    let domains = domain_views(&limits, &words);
    let rollup = rollup_view(limits.rollup(), &words);
    let queries = queries.iter().map(|d| query_view(&limits, d)).collect();
    let notes = notes(&limits, max_send_rate, &words, &account, &providers, &default, &domains);
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

/// Limits off (`off` or `{}`): no bucket anywhere, and notes saying what paces sends instead.
fn off(
    config_source: String,
    max_send_rate: Option<f64>,
    mrs: Option<&str>,
    queries: &[String],
) -> LimitsReport {
    let mut notes = vec![match mrs {
        Some(m) => format!(
            "nothing paces sends: the sender sends as fast as its batches go, and SES throttles above {m}"
        ),
        None => "nothing paces sends: the sender sends as fast as its batches go, and SES throttles above its MaxSendRate".to_owned(),
    }];
    if max_send_rate.is_some() {
        notes.push(
            "--max-send-rate changes nothing while limits are off: the sender takes no account bucket"
                .to_owned(),
        );
    }
    let off = format!("{config_source} is `off` or `{{}}`, which switches limiting off");
    LimitsReport {
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
        queries: queries.iter().map(|d| QueryView::not_limited(d, false)).collect(),
        sender_log: "off".to_owned(),
        notes,
    }
}

/// The account: `configured` (`account` in the configuration, with its shards), else `filled`
/// from the MaxSendRate by [`RateLimits::with_account_rate`], else none.
fn account_view(configured: Option<DomainLimit>, filled: Option<Limit>, words: &Wording) -> AccountView {
    let Wording { name, mrs } = *words;
    match (configured, filled) {
        (Some(DomainLimit { limit: l, shards }), _) => AccountView {
            source: AccountSource::Configured,
            limit: Some(l.into()),
            shards: (shards > 1).then_some(shards),
            per_shard: (shards > 1).then(|| l.shard(shards).into()),
            explanation: {
                let shards = match shards {
                    1 => String::new(),
                    s => format!(", split over {s} bucket items"),
                };
                match mrs {
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
                mrs.unwrap_or("MaxSendRate"),
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
    }
}

/// The limit of a domain in no provider and not listed (`default`), if any.
fn default_view(default: Option<Limit>, words: &Wording) -> DefaultView {
    let name = words.name;
    match default {
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
    }
}

/// Every provider with a bucket, and where the limit of those without one of their own came from.
fn providers_view(limits: &RateLimits, builtin: bool, words: &Wording) -> ProvidersView {
    let provider_default = limits.provider_limit_default();
    let (source, explanation) = provider_source(provider_default, builtin, limits.account(), words.name);
    ProvidersView {
        table: PROVIDERS_VERSION,
        source,
        default: provider_default.map(Into::into),
        explanation,
        list: Provider::ALL.iter().filter_map(|&p| provider_view(limits, p)).collect(),
    }
}

/// Where `provider_default` (the limit of a provider without one of its own) came from: the
/// configuration, or the built-in limit — a share of the `account` rate once it is known.
fn provider_source(
    provider_default: Option<Limit>,
    builtin: bool,
    account: Option<Limit>,
    name: &str,
) -> (ProviderSource, String) {
    match (provider_default, builtin, account) {
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
    }
}

/// `p`'s bucket, when it has one: its limit, and the built-in table's domains then those the
/// configuration maps to it.
fn provider_view(limits: &RateLimits, p: Provider) -> Option<ProviderView> {
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
}

/// Every domain listed with a limit of its own, split over its shards.
fn domain_views(limits: &RateLimits, words: &Wording) -> Vec<DomainView> {
    let name = words.name;
    limits
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
        .collect()
}

/// The MX rollup, on or off.
fn rollup_view(rollup: Option<Rollup>, words: &Wording) -> RollupView {
    let name = words.name;
    match rollup {
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
    }
}

/// The bucket `domain` (asked about with `--domain`) takes, as the sender decides it.
fn query_view(limits: &RateLimits, domain: &str) -> QueryView {
    let Some(bucket) = limits.bucket_for(domain) else {
        return QueryView::not_limited(domain, limits.needs_mx(domain));
    };
    QueryView {
        domain: domain.to_owned(),
        matched: match bucket.provider {
            Some(_) => Match::Provider,
            None if limits.domains().any(|(name, _)| name == domain) => Match::Listed,
            None => Match::Default,
        },
        provider: bucket.provider.map(|p| p.name().to_owned()),
        limit: Some(bucket.limit.limit.into()),
        shards: Some(bucket.limit.shards),
        per_shard: Some(bucket.limit.limit.shard(bucket.limit.shards).into()),
        mx_lookup: limits.needs_mx(domain),
    }
}

/// What the table does not say by itself: the account's hold over every other limit, and what an
/// unknown MaxSendRate leaves out.
fn notes(
    limits: &RateLimits,
    max_send_rate: Option<f64>,
    words: &Wording,
    account: &AccountView,
    providers: &ProvidersView,
    default: &DefaultView,
    domains: &[DomainView],
) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(a) = limits.account() {
        notes.push(format!(
            "every send also takes an account token: all domains together send at most {}/s ({}/h), burst {}",
            num(a.per_second),
            num(a.per_second * SECS_PER_HOUR),
            a.burst
        ));
        let faster = above_account(a.per_second, providers, default, domains);
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
                    words.mrs.unwrap_or("MaxSendRate")
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
    notes
}

/// The buckets that allow more than the account's `rate` (which then holds them to it): listed
/// domains, providers with a limit of their own, the provider default and the other domains'.
fn above_account(
    rate: f64,
    providers: &ProvidersView,
    default: &DefaultView,
    domains: &[DomainView],
) -> Vec<String> {
    let above = |l: &LimitView| l.per_second > rate;
    domains
        .iter()
        .filter(|d| above(&d.limit))
        .map(|d| format!("{} ({}/s)", d.domain, num(d.limit.per_second)))
        .chain(
            providers
                .list
                .iter()
                .filter(|p| p.own && above(&p.limit))
                .map(|p| format!("provider {} ({}/s)", p.provider, num(p.limit.per_second))),
        )
        .chain(
            providers
                .default
                .filter(above)
                .map(|l| format!("every other provider ({}/s)", num(l.per_second))),
        )
        .chain(default.limit.filter(above).map(|l| format!("other domains ({}/s)", num(l.per_second))))
        .collect()
}
