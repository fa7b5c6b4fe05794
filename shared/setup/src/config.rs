//! Settings read from the environment, shared by the Lambdas and `noticectl` so every entry point
//! interprets a variable the same way. Everything is read and checked once, at start-up.

use std::path::PathBuf;
use std::time::Duration;

use notice_ledger::links::ManageLinks;
use notice_ledger::rate::{RateLimits, RATE_LIMITS_VAR};
use notice_ledger::render::Renderer;
use notice_ledger::ConfigError;
use notice_ledger::Mode;
use notice_ledger::{NoticeSecret, WindowPolicy};

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

/// `NOTICE_WINDOWS` (inline JSON) or `NOTICE_WINDOWS_FILE` (path); the default window otherwise.
pub fn windows_from_env() -> Result<WindowPolicy, ConfigError> {
    if let Ok(text) = std::env::var("NOTICE_WINDOWS") {
        return WindowPolicy::from_json(&text);
    }
    if let Ok(path) = std::env::var("NOTICE_WINDOWS_FILE") {
        let text = std::fs::read_to_string(&path).map_err(|e| ConfigError::Invalid {
            name: "NOTICE_WINDOWS_FILE",
            reason: format!("{path}: {e}"),
        })?;
        return WindowPolicy::from_json(&text);
    }
    Ok(WindowPolicy::default())
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
        Ok(v) => RateLimits::parse(&v),
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
pub fn links_from_env(key_secret: &NoticeSecret) -> Result<ManageLinks, ConfigError> {
    let base = optional("NOTICE_MANAGE_URL").unwrap_or_else(|| DEFAULT_MANAGE_URL.to_owned());
    let secret = match optional("NOTICE_LINK_SECRET") {
        Some(v) => crate::secret::checked("NOTICE_LINK_SECRET", v)?,
        None => key_secret.derive_subkey("notice-ledger/manage-link/v1"),
    };
    Ok(ManageLinks::new(base, secret))
}

/// Renderer with templates from `NOTICE_TEMPLATE_DIR` when set.
pub fn renderer_from_env(key_secret: &NoticeSecret) -> Result<Renderer, ConfigError> {
    let links = links_from_env(key_secret)?;
    match optional("NOTICE_TEMPLATE_DIR") {
        Some(dir) => Renderer::with_dir(links, &PathBuf::from(dir)),
        None => Ok(Renderer::new(links)),
    }
}

/// `NOTICE_ENVIRONMENT`: `production` (the default, and what an unset variable means) or `staging`.
pub fn is_production() -> Result<bool, ConfigError> {
    match optional("NOTICE_ENVIRONMENT").as_deref().map(str::trim) {
        None | Some("production") => Ok(true),
        Some("staging") => Ok(false),
        Some(other) => Err(ConfigError::Invalid {
            name: "NOTICE_ENVIRONMENT",
            reason: format!("must be `production` or `staging`, not {other:?}"),
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
