//! What `noticectl limits` prints, as data: the JSON object `--json` writes and the table
//! [`super::render`] draws from it. Every number at full precision.

use notice_ledger::rate::Limit;
use serde::Serialize;

pub(super) const SECS_PER_HOUR: f64 = 3_600.0;

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

impl QueryView {
    /// A domain with no bucket besides the account's (the long tail), or with limits off.
    pub(crate) fn not_limited(domain: &str, mx_lookup: bool) -> Self {
        QueryView {
            domain: domain.to_owned(),
            matched: Match::NotLimited,
            provider: None,
            limit: None,
            shards: None,
            per_shard: None,
            mx_lookup,
        }
    }
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
