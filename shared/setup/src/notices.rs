//! Which notice configuration a process runs with (`NOTICE_CONFIG`), loaded and checked once at
//! start-up — and, for a published one, looked up again every `NOTICE_CONFIG_REFRESH_SECS`.
//!
//! - unset: the built-in English texts, with `NOTICE_WINDOWS` / `NOTICE_WINDOWS_FILE` as their
//!   policy (tests, local runs; the start-up log says "built-in");
//! - a directory: used as is (`noticectl send --config DIR`, local runs);
//! - `ssm:<parameter>`: the deployed form — the parameter holds the `s3://…/<sha256>.json` of
//!   the published version ([`crate::notices`] loads it; the template sets this);
//! - `s3://bucket/…/<sha256>.json`: one published version, pinned.
//!
//! A configuration that cannot be found, read, verified or checked stops the process naming
//! what is wrong: nothing falls back to the built-in texts once a configuration is named.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notice_ledger::{ConfigError, WindowPolicy};
use notice_texts::Renderer;
use notice_texts::{Bundle, NoticeConfig, Problem};

use crate::config::optional;

/// The variable naming the configuration.
pub const CONFIG_VAR: &str = "NOTICE_CONFIG";
/// How often a running sender looks up a published pointer again (default 300 s).
pub const REFRESH_VAR: &str = "NOTICE_CONFIG_REFRESH_SECS";

/// Where the configuration comes from, as `NOTICE_CONFIG` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigSpec {
    Builtin,
    Dir(PathBuf),
    /// An SSM parameter holding the published version's location.
    Parameter(String),
    /// One published version's location (`s3://…`).
    Object(String),
}

impl ConfigSpec {
    pub fn parse(value: &str) -> Self {
        let value = value.trim();
        if let Some(name) = value.strip_prefix("ssm:") {
            Self::Parameter(name.to_owned())
        } else if value.starts_with("s3://") {
            Self::Object(value.to_owned())
        } else {
            Self::Dir(PathBuf::from(value))
        }
    }

    /// `NOTICE_CONFIG`, refusing the settings it replaces: `NOTICE_TEMPLATE_DIR` is gone (a
    /// template directory without its policy and manifest cannot be checked), and a policy in
    /// `NOTICE_WINDOWS` beside a configuration would be a second policy nobody versioned.
    pub fn from_env() -> Result<Self, ConfigError> {
        let spec = optional(CONFIG_VAR).map_or(Self::Builtin, |v| Self::parse(&v));
        spec.refuse_replaced_settings()?;
        Ok(spec)
    }

    /// The settings this configuration replaces must not be set beside it, however it was given
    /// (`NOTICE_CONFIG`, or `noticectl send --config DIR`): nothing is silently ignored.
    pub fn refuse_replaced_settings(&self) -> Result<(), ConfigError> {
        if optional("NOTICE_TEMPLATE_DIR").is_some() {
            return Err(ConfigError::Invalid {
                name: "NOTICE_TEMPLATE_DIR",
                reason: "is replaced by NOTICE_CONFIG: a notice configuration directory (templates/, \
                         windows.json, manifest.json; docs/notices.md)"
                    .into(),
            });
        }
        if *self != Self::Builtin {
            for var in ["NOTICE_WINDOWS", "NOTICE_WINDOWS_FILE"] {
                if optional(var).is_some() {
                    return Err(ConfigError::Invalid {
                        name: "NOTICE_WINDOWS",
                        reason: format!(
                            "{var} is set beside {CONFIG_VAR}: the policy in force is the configuration's \
                             windows.json; unset {var}"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// How logs and `noticectl` name it.
    pub fn describe(&self) -> String {
        match self {
            Self::Builtin => "the built-in texts (NOTICE_CONFIG unset)".into(),
            Self::Dir(dir) => format!("the directory {}", dir.display()),
            Self::Parameter(name) => format!("the version SSM parameter {name} points at"),
            Self::Object(url) => url.clone(),
        }
    }
}

/// A configuration that failed its check, as one start-up error listing every problem.
pub fn problems_error(source: &str, problems: &[Problem]) -> ConfigError {
    let shown: Vec<String> = problems.iter().take(10).map(ToString::to_string).collect();
    let more = problems.len().saturating_sub(shown.len());
    let tail = if more > 0 { format!("; and {more} more (noticectl config check)") } else { String::new() };
    ConfigError::Invalid {
        name: CONFIG_VAR,
        reason: format!(
            "{source} fails its check ({} problem{}): {}{tail}",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" },
            shown.join("; ")
        ),
    }
}

/// The built-in configuration, its policy from `NOTICE_WINDOWS` / `NOTICE_WINDOWS_FILE`.
pub fn builtin_from_env() -> Result<NoticeConfig, ConfigError> {
    let windows = windows_text_from_env()?;
    if let Some(text) = &windows {
        // The policy's own error, naming its path, before it is wrapped into a configuration.
        notice_ledger::WindowPolicy::from_json(text)?;
    }
    NoticeConfig::builtin(windows.as_deref()).map_err(|problems| {
        // Only the policy can be wrong here: name the variable it came from.
        let reason = problems.iter().map(|p| p.message.clone()).collect::<Vec<_>>().join("; ");
        ConfigError::Invalid { name: "NOTICE_WINDOWS", reason }
    })
}

/// A configuration directory, read and checked.
pub fn from_dir(dir: &std::path::Path) -> Result<NoticeConfig, ConfigError> {
    let shown = dir.display().to_string();
    let bundle = Bundle::from_dir(dir).map_err(|e| problems_error(&shown, &[Problem::from(e)]))?;
    NoticeConfig::load(bundle).map_err(|problems| problems_error(&shown, &problems))
}

/// The configuration of a spec that needs no AWS call (built-in or a directory); a published one
/// is named as such, so a command without AWS access says why it cannot use it.
pub fn load_local(spec: &ConfigSpec) -> Result<NoticeConfig, ConfigError> {
    match spec {
        ConfigSpec::Builtin => builtin_from_env(),
        ConfigSpec::Dir(dir) => from_dir(dir),
        ConfigSpec::Parameter(_) | ConfigSpec::Object(_) => Err(ConfigError::Invalid {
            name: CONFIG_VAR,
            reason: format!(
                "{} is a published configuration; this command reads a directory (give the directory the \
                 version was published from)",
                spec.describe()
            ),
        }),
    }
}

/// `NOTICE_CONFIG_REFRESH_SECS` (default 300, at least 30): how stale a running sender's
/// configuration may be after a publish.
pub fn refresh_from_env() -> Result<Duration, ConfigError> {
    crate::config::secs_from_env(REFRESH_VAR, 300).map(|d| d.max(Duration::from_secs(30)))
}

/// A published configuration: read the pointer (for `ssm:`), fetch the object, verify that its
/// digest is its name, unpack and check it. Returns the configuration and where it was found.
#[cfg(feature = "configstore")]
pub async fn load_published(
    sdk: &aws_config::SdkConfig,
    spec: &ConfigSpec,
) -> Result<(NoticeConfig, notice_configstore::ConfigLocation), ConfigError> {
    let store = crate::aws::config_store(sdk)
        .map_err(|e| ConfigError::Invalid { name: CONFIG_VAR, reason: e.to_string() })?;
    let location = locate(&store, spec).await?;
    let config = fetch(&store, &location).await?;
    Ok((config, location))
}

#[cfg(feature = "configstore")]
async fn locate(
    store: &notice_configstore::ConfigStore,
    spec: &ConfigSpec,
) -> Result<notice_configstore::ConfigLocation, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid { name: CONFIG_VAR, reason };
    match spec {
        ConfigSpec::Parameter(name) => store.read_pointer(name).await.map_err(|e| invalid(e.to_string())),
        ConfigSpec::Object(url) => {
            url.parse().map_err(|e: notice_configstore::LocationError| invalid(e.to_string()))
        }
        other => Err(invalid(format!("{} is not a published configuration", other.describe()))),
    }
}

#[cfg(feature = "configstore")]
async fn fetch(
    store: &notice_configstore::ConfigStore,
    location: &notice_configstore::ConfigLocation,
) -> Result<NoticeConfig, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid { name: CONFIG_VAR, reason };
    let bytes = store.fetch(location).await.map_err(|e| invalid(e.to_string()))?;
    let version = notice_texts::notices::ConfigVersion::parse(&format!("sha256:{}", location.version_hex()))
        .map_err(|e| invalid(format!("{location}: {e}")))?;
    let shown = location.to_string();
    let bundle =
        Bundle::from_published(&bytes, &version).map_err(|e| problems_error(&shown, &[Problem::from(e)]))?;
    NoticeConfig::load(bundle).map_err(|problems| problems_error(&shown, &problems))
}

/// A running sender's view of its published configuration: looks the pointer up again once
/// `every` has passed, and loads a version it has not seen. A version that fails to load leaves
/// the current one in force (the caller logs and counts it): never a version nobody checked.
#[cfg(feature = "configstore")]
pub struct ConfigWatch {
    store: notice_configstore::ConfigStore,
    spec: ConfigSpec,
    current: notice_configstore::ConfigLocation,
    every: Duration,
    last: std::time::Instant,
}

#[cfg(feature = "configstore")]
impl ConfigWatch {
    /// A watch of `spec` (only a parameter can change), starting at `current`.
    pub fn new(
        sdk: &aws_config::SdkConfig,
        spec: ConfigSpec,
        current: notice_configstore::ConfigLocation,
        every: Duration,
    ) -> Result<Self, ConfigError> {
        let store = crate::aws::config_store(sdk)
            .map_err(|e| ConfigError::Invalid { name: CONFIG_VAR, reason: e.to_string() })?;
        Ok(Self { store, spec, current, every, last: std::time::Instant::now() })
    }

    /// Where the configuration in force came from.
    pub fn current(&self) -> &notice_configstore::ConfigLocation {
        &self.current
    }

    /// `Ok(Some(config))` when the pointer moved to a version that loaded and checked;
    /// `Ok(None)` when nothing is due or nothing changed; `Err` when the lookup or the new
    /// version failed (the current one stays in force; the next check is `every` later).
    pub async fn poll(
        &mut self,
    ) -> Result<Option<(NoticeConfig, notice_configstore::ConfigLocation)>, ConfigError> {
        if !matches!(self.spec, ConfigSpec::Parameter(_)) || self.last.elapsed() < self.every {
            return Ok(None);
        }
        self.last = std::time::Instant::now();
        let location = locate(&self.store, &self.spec).await?;
        if location == self.current {
            return Ok(None);
        }
        let config = fetch(&self.store, &location).await?;
        self.current = location.clone();
        Ok(Some((config, location)))
    }

    /// Makes the next [`ConfigWatch::poll`] look the pointer up (tests, and an operator's nudge).
    pub fn due_now(&mut self) {
        self.last = std::time::Instant::now().checked_sub(self.every).unwrap_or(self.last);
    }
}

/// The policy in force: the windows.json of the configuration in `NOTICE_CONFIG` (a directory),
/// else `NOTICE_WINDOWS` (inline JSON) or `NOTICE_WINDOWS_FILE` (path), else the default window.
pub fn windows_from_env() -> Result<WindowPolicy, ConfigError> {
    match ConfigSpec::from_env()? {
        ConfigSpec::Builtin => builtin_windows_from_env(),
        spec => load_local(&spec).map(|c| c.policy().clone()),
    }
}

/// `NOTICE_WINDOWS` (inline JSON) or `NOTICE_WINDOWS_FILE` (path) as given; `None` when neither.
pub fn windows_text_from_env() -> Result<Option<String>, ConfigError> {
    if let Ok(text) = std::env::var("NOTICE_WINDOWS") {
        return Ok(Some(text));
    }
    if let Ok(path) = std::env::var("NOTICE_WINDOWS_FILE") {
        return std::fs::read_to_string(&path).map(Some).map_err(|e| ConfigError::Invalid {
            name: "NOTICE_WINDOWS_FILE",
            reason: format!("{path}: {e}"),
        });
    }
    Ok(None)
}

fn builtin_windows_from_env() -> Result<WindowPolicy, ConfigError> {
    match windows_text_from_env()? {
        Some(text) => Ok(WindowPolicy::from_json(&text)?),
        None => Ok(WindowPolicy::default()),
    }
}

/// The renderer and policy of a configuration that needs no AWS call (`NOTICE_CONFIG` unset or a
/// directory), with the manage links from the environment.
pub fn notices_from_env(
    key_secret: &notice_ledger::keyring::KeyRing,
) -> Result<(Arc<Renderer>, WindowPolicy), ConfigError> {
    notices_from(&ConfigSpec::from_env()?, key_secret)
}

/// [`notices_from_env`] for a spec given another way (`noticectl send --config DIR`).
pub fn notices_from(
    spec: &ConfigSpec,
    key_secret: &notice_ledger::keyring::KeyRing,
) -> Result<(Arc<Renderer>, WindowPolicy), ConfigError> {
    let config = load_local(spec)?;
    let policy = config.policy().clone();
    Ok((Arc::new(Renderer::new(Arc::new(config), crate::config::links_from_env(key_secret)?)), policy))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(ConfigSpec::parse("ssm:/notice/config"), ConfigSpec::Parameter("/notice/config".into()));
        assert_eq!(
            ConfigSpec::parse("s3://b/notice-config/x.json"),
            ConfigSpec::Object("s3://b/notice-config/x.json".into())
        );
        assert_eq!(ConfigSpec::parse("./notices"), ConfigSpec::Dir(PathBuf::from("./notices")));
    }

    #[test]
    fn problems_are_listed_in_one_line() {
        let problems: Vec<Problem> =
            (0..12).map(|i| Problem::file("templates/x.body.txt", Some(i), format!("p{i}"))).collect();
        let e = problems_error("dir", &problems).to_string();
        assert!(
            e.contains("12 problems") && e.contains("templates/x.body.txt:0: p0") && e.contains("2 more"),
            "{e}"
        );
    }
}
