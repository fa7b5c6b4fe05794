//! Settings read from the environment, shared by the Lambdas and `noticectl` so every entry point
//! interprets a variable the same way. Everything is read and checked once, at start-up.

use std::time::Duration;

use notice_ledger::keyring::KeyRing;
use notice_ledger::links::ManageLinks;
use notice_ledger::rate::{RateLimits, RATE_LIMITS_VAR};
use notice_ledger::ConfigError;
use notice_ledger::Mode;
use notice_ledger::NoticeSecret;

/// Default manage link base; deployments set `NOTICE_MANAGE_URL`.
pub const DEFAULT_MANAGE_URL: &str = "https://billing.example.com/manage";

/// `NOTICE_MODE`: `enforce` (default) or `shadow`.
pub fn mode_from_env() -> Result<Mode, ConfigError> {
    match std::env::var("NOTICE_MODE") {
        Err(_) => Ok(Mode::Enforce),
        Ok(v) if v.is_empty() => Ok(Mode::Enforce),
        Ok(v) => v.parse().map_err(|reason| ConfigError::Invalid { name: "NOTICE_MODE", reason }),
    }
}

/// `NOTICE_STALE_AFTER_SECS` (default 900): claim age that counts as quarantined.
pub fn stale_after_from_env() -> Result<Duration, ConfigError> {
    secs_from_env("NOTICE_STALE_AFTER_SECS", 900)
}

/// `NOTICE_PARK_SPREAD_SECS` (default 0): wake-ups of parked notices whose windows open together
/// are spread over this span (the notice key picks each one's offset, inside its window).
pub fn park_spread_from_env() -> Result<Duration, ConfigError> {
    secs_from_env("NOTICE_PARK_SPREAD_SECS", 0)
}

/// A whole number of seconds from `name`, or `default`.
pub fn secs_from_env(name: &'static str, default: u64) -> Result<Duration, ConfigError> {
    match std::env::var(name) {
        Err(_) => Ok(Duration::from_secs(default)),
        Ok(v) => v.trim().parse::<u64>().map(Duration::from_secs).map_err(|_| ConfigError::Invalid {
            name,
            reason: format!("{v:?} is not a whole number of seconds"),
        }),
    }
}

/// Reads the notice key secret from `var`; a process must refuse to start without it.
pub fn secret_from_env(var: &'static str) -> Result<NoticeSecret, ConfigError> {
    let value = std::env::var_os(var).ok_or(ConfigError::Missing(var))?;
    // A failed secret fetch often leaves a blank value: never run (or derive keys) with it.
    crate::secret::checked(var, value.into_encoded_bytes())
}

/// `NOTICE_RATE_LIMITS`: unset (or empty) means the built-in default ([`RateLimits::builtin`]),
/// so a deployment is paced unless it says otherwise; `off` or `{}` is `None` (no limit); anything
/// invalid is a start-up error naming the variable.
pub fn rate_limits_from_env() -> Result<Option<RateLimits>, ConfigError> {
    match std::env::var(RATE_LIMITS_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(Some(RateLimits::builtin())),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(ConfigError::Invalid { name: RATE_LIMITS_VAR, reason: "is not UTF-8".into() })
        }
        Ok(v) if v.trim().is_empty() => Ok(Some(RateLimits::builtin())),
        Ok(v) => Ok(RateLimits::parse(&v)?),
    }
}

/// The deployed function's own name (`AWS_LAMBDA_FUNCTION_NAME`, e.g. `<stack>-sender`), used as
/// the EMF `Function` dimension so two stacks in one account never share metrics or alarms;
/// `fallback` (the binary's name) outside Lambda.
pub fn function_name(fallback: &str) -> String {
    optional("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|| fallback.to_owned())
}

/// Required, non-empty variable.
pub fn required(name: &'static str) -> Result<String, ConfigError> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(ConfigError::Missing(name)),
    }
}

/// Optional variable; empty counts as unset.
pub fn optional(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Manage links: base from `NOTICE_MANAGE_URL`, secret from `NOTICE_LINK_SECRET`, or — when that is
/// unset — derived from the notice key secret under its own label, so the two never coincide.
///
/// On Lambda (outside `sam local`) the base is required and must not be on a reserved example
/// domain: a customer must never get a cancel link to `example.com`. Local runs and tests keep
/// the example default.
pub fn links_from_env(keys: &KeyRing) -> Result<ManageLinks, ConfigError> {
    let base = match optional("NOTICE_MANAGE_URL") {
        Some(base) => base,
        None if runs_deployed() => return Err(ConfigError::Missing("NOTICE_MANAGE_URL")),
        None => DEFAULT_MANAGE_URL.to_owned(),
    };
    if let Some(reason) = fragment_in_base(&base) {
        return Err(ConfigError::Invalid { name: "NOTICE_MANAGE_URL", reason });
    }
    if runs_deployed() {
        if let Some(host) = reserved_example_host(&base) {
            return Err(ConfigError::Invalid {
                name: "NOTICE_MANAGE_URL",
                reason: format!(
                    "{base:?} is on {host}, a reserved example domain: customers would get a cancel link \
                     that goes nowhere (set the stack parameter ManageUrl to your own page)"
                ),
            });
        }
    }
    let secret = match optional("NOTICE_LINK_SECRET") {
        Some(v) => crate::secret::checked("NOTICE_LINK_SECRET", v)?,
        // Derived from the first key secret version, whatever the current one: rotating the key
        // secret must not break every link already mailed (the link secret rotates on its own,
        // docs/security.md). A ring that no longer holds v1 has nothing to derive it from.
        None => match keys.version(1) {
            Some(first) => first.secret().derive_subkey(LINK_LABEL),
            None => {
                return Err(ConfigError::Invalid {
                    name: "NOTICE_LINK_SECRET",
                    reason: "is unset and the key secret no longer holds version v1, which the link \
                             secret is derived from: set NOTICE_LINK_SECRET"
                        .into(),
                })
            }
        },
    };
    Ok(ManageLinks::new(base, secret))
}

/// Why a manage-link base with a fragment (`#…`) is refused: the link's `s`, `p` and `t` would be
/// appended after it, inside the fragment, which browsers never send — every link would fail.
fn fragment_in_base(base: &str) -> Option<String> {
    base.contains('#').then(|| {
        format!(
            "{base:?} contains '#': the link's parameters would land in the fragment, which browsers never \
             send to your page, so no link could be verified (drop the fragment)"
        )
    })
}

/// The label the derived link secret is an HMAC of under the first key secret version.
pub const LINK_LABEL: &str = "notice-ledger/manage-link/v1";

/// Whether this process is a deployed Lambda function: not `sam local`, not a function run with
/// `NOTICE_ENVIRONMENT=local` (`notice-local-stack`), not a test or noticectl.
pub fn runs_deployed() -> bool {
    optional("AWS_LAMBDA_FUNCTION_NAME").is_some()
        && optional("AWS_SAM_LOCAL").is_none()
        && optional("NOTICE_ENVIRONMENT").as_deref().map(str::trim) != Some("local")
}

/// The host of `url` when it is a reserved example or test name (RFC 2606, RFC 6761).
pub fn reserved_example_host(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = host_port.split(':').next().unwrap_or_default().trim_end_matches('.').to_ascii_lowercase();
    let reserved_domain = ["example.com", "example.net", "example.org"]
        .iter()
        .any(|d| host == *d || host.ends_with(&format!(".{d}")));
    let tld = host.rsplit('.').next().unwrap_or_default();
    let reserved_tld = ["example", "test", "invalid", "localhost"].contains(&tld);
    (reserved_domain || reserved_tld).then_some(host)
}

/// `NOTICE_ENVIRONMENT`: `production` (the default, and what an unset variable means), `staging`,
/// or `local` (a function run on a developer's machine against the emulator: `notice-local-stack`).
pub fn is_production() -> Result<bool, ConfigError> {
    match optional("NOTICE_ENVIRONMENT").as_deref().map(str::trim) {
        None | Some("production") => Ok(true),
        Some("staging" | "local") => Ok(false),
        Some(other) => Err(ConfigError::Invalid {
            name: "NOTICE_ENVIRONMENT",
            reason: format!("must be `production`, `staging` or `local`, not {other:?}"),
        }),
    }
}

/// `NOTICE_REDIRECT_ALL_MAIL_TO`: one address every notice goes to instead of its customer (SES's
/// mailbox simulator, a team inbox). Refused unless `NOTICE_ENVIRONMENT=staging`: a production
/// stack that mails nobody it should is as wrong as a test stack that mails customers.
pub fn redirect_from_env() -> Result<Option<String>, ConfigError> {
    const NAME: &str = "NOTICE_REDIRECT_ALL_MAIL_TO";
    let Some(to) = optional(NAME) else { return Ok(None) };
    if is_production()? {
        return Err(ConfigError::Invalid {
            name: NAME,
            reason: "is only allowed on a stack marked non-production (NOTICE_ENVIRONMENT=staging)".into(),
        });
    }
    let to = notice_ledger::address::parse_recipient(to.trim())
        .map_err(|e| ConfigError::Invalid { name: NAME, reason: e.to_string() })?;
    Ok(Some(to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_example_and_test_hosts_are_recognised() {
        for url in [
            "https://billing.example.com/manage",
            "https://example.org",
            "http://EXAMPLE.net:8080/x",
            "https://shop.example/manage",
            "https://billing.test/m?x=1",
            "https://a.invalid",
            "http://localhost:3000/manage",
            "https://user@billing.example.com./m",
        ] {
            assert!(reserved_example_host(url).is_some(), "{url}");
        }
        for url in
            ["https://billing.acme.com/manage", "https://example.company.de/x", "https://notexample.com"]
        {
            assert_eq!(reserved_example_host(url), None, "{url}");
        }
    }

    #[test]
    fn a_base_with_a_fragment_is_refused() {
        let reason = fragment_in_base("https://billing.acme.com/#/manage").unwrap_or_default();
        assert!(reason.contains("contains '#'") && reason.contains("fragment"), "{reason}");
        assert_eq!(fragment_in_base("https://billing.acme.com/manage?x=1"), None);
    }

    #[test]
    fn a_blank_or_missing_secret_is_refused_by_name() {
        // Variable names of their own: no other test reads them, so setting them cannot race.
        std::env::set_var("NOTICE_TEST_BLANK_SECRET", "  \t");
        let blank = secret_from_env("NOTICE_TEST_BLANK_SECRET").unwrap_err().to_string();
        assert!(blank.contains("NOTICE_TEST_BLANK_SECRET") && blank.contains("blank"), "{blank}");
        let missing = secret_from_env("NOTICE_TEST_UNSET_SECRET").unwrap_err().to_string();
        assert!(missing.contains("NOTICE_TEST_UNSET_SECRET"), "{missing}");
        std::env::set_var("NOTICE_TEST_GOOD_SECRET", "a-real-secret-of-some-length");
        assert!(secret_from_env("NOTICE_TEST_GOOD_SECRET").is_ok());
    }
}
