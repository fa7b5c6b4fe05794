//! Which notice configuration version judges each window of `noticectl evidence`: the `--config`
//! directories, `s3://` buckets of published versions, or the built-in configuration. Apart from
//! the command's flow because finding a version (and saying why it was not found) is its own concern.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;
use notice_configstore::{ConfigLocation, ConfigStore, StoreError};
use notice_texts::notices::{Bundle, ConfigVersion, NoticeConfig};
use serde::Serialize;

use crate::terminal::escape;

/// Which policy judged a notice's window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct PolicyBasis {
    /// `version`: the policy of the configuration version the row names; `given now`: the policy
    /// given to this run (the row names no version, or it was not found).
    pub(crate) basis: &'static str,
    /// The version whose policy judged it, and its manifest name (basis `version`).
    pub(crate) version: Option<String>,
    pub(crate) name: Option<String>,
    /// Where that version was found, or where the policy given now came from.
    pub(crate) from: String,
    /// Why the row's own version was not used (basis `given now`).
    pub(crate) reason: Option<String>,
}

impl PolicyBasis {
    pub(super) fn version(config: &NoticeConfig, from: &str) -> Self {
        Self {
            basis: "version",
            version: Some(config.version().to_string()),
            name: Some(config.manifest().name.clone()),
            from: from.to_owned(),
            reason: None,
        }
    }

    pub(super) fn given_now(source: &str, reason: String) -> Self {
        Self { basis: "given now", version: None, name: None, from: source.to_owned(), reason: Some(reason) }
    }

    /// `version sha256:ab12cd34ef56… (example-de)` or `given now: <source>`.
    pub(super) fn short(&self) -> String {
        match (&self.version, &self.name) {
            (Some(v), Some(name)) => format!("version {}… ({})", v.get(..19).unwrap_or(v), escape(name)),
            _ => format!("given now: {}", self.from),
        }
    }
}

/// The configuration versions a run can judge and render by: the `--config` directories (loaded
/// up front), the buckets (fetched per version, once), and the built-in configuration.
pub(super) struct Versions {
    dirs: Vec<(String, Arc<NoticeConfig>)>,
    buckets: Vec<String>,
    store: Option<Result<ConfigStore, String>>,
    fetched: HashMap<String, Result<(Arc<NoticeConfig>, String), String>>,
    builtin: Option<Result<Arc<NoticeConfig>, String>>,
}

impl Versions {
    pub(super) fn new(sources: &[String]) -> anyhow::Result<Self> {
        let mut versions = Self {
            dirs: Vec::new(),
            buckets: Vec::new(),
            store: None,
            fetched: HashMap::new(),
            builtin: None,
        };
        for source in sources {
            if let Some(bucket) = source.strip_prefix("s3://") {
                let bucket = bucket.trim_end_matches('/');
                ConfigLocation::published(bucket, &"0".repeat(64))
                    .with_context(|| format!("--config {source}: expected s3://BUCKET"))?;
                versions.buckets.push(bucket.to_owned());
            } else {
                let config = notice_setup::notices::from_dir(std::path::Path::new(source))
                    .with_context(|| format!("--config {source}"))?;
                versions.dirs.push((source.clone(), Arc::new(config)));
            }
        }
        Ok(versions)
    }

    /// Kinds the given directories' policies name.
    pub(super) fn kinds(&self) -> Vec<String> {
        self.dirs.iter().flat_map(|(_, c)| c.policy().kinds()).map(str::to_owned).collect()
    }

    /// Version `version` and where it was found, or why it was not.
    pub(super) async fn find(&mut self, version: &str) -> Result<(Arc<NoticeConfig>, String), String> {
        if let Some((dir, config)) = self.dirs.iter().find(|(_, c)| c.version().as_str() == version) {
            return Ok((Arc::clone(config), dir.clone()));
        }
        if let Some(found) = self.fetched.get(version) {
            return found.clone();
        }
        let found = self.look_up(version).await;
        self.fetched.insert(version.to_owned(), found.clone());
        found
    }

    async fn look_up(&mut self, version: &str) -> Result<(Arc<NoticeConfig>, String), String> {
        let parsed = ConfigVersion::parse(version)?;
        let mut why = Vec::new();
        if self.dirs.is_empty() {
            why.push("no --config directory given".to_owned());
        } else {
            let held: Vec<String> =
                self.dirs.iter().map(|(d, c)| format!("{d} is {}", c.version().short())).collect();
            why.push(format!("not among the --config directories ({})", held.join(", ")));
        }
        for bucket in self.buckets.clone() {
            match self.fetch(&bucket, &parsed).await {
                Ok(found) => return Ok(found),
                Err(e) => why.push(e),
            }
        }
        let builtin = self.builtin.get_or_insert_with(|| {
            notice_setup::notices::builtin_from_env().map(Arc::new).map_err(|e| format!("{e}"))
        });
        match builtin {
            Ok(config) if config.version() == &parsed => {
                return Ok((Arc::clone(config), "the built-in configuration".to_owned()))
            }
            Ok(config) => why.push(format!("not the built-in configuration ({})", config.version().short())),
            Err(e) => why.push(format!("the built-in configuration: {e}")),
        }
        Err(why.join("; "))
    }

    async fn fetch(
        &mut self,
        bucket: &str,
        version: &ConfigVersion,
    ) -> Result<(Arc<NoticeConfig>, String), String> {
        let location = ConfigLocation::published(bucket, version.hex()).map_err(|e| e.to_string())?;
        if self.store.is_none() {
            let sdk = notice_setup::aws::load_sdk_config().await;
            self.store =
                Some(notice_setup::aws::config_store(&sdk).map_err(|e| format!("s3://{bucket}: {e}")));
        }
        let store = match self.store.as_ref() {
            Some(Ok(store)) => store,
            Some(Err(e)) => return Err(e.clone()),
            None => unreachable!("set above"),
        };
        let bytes = match store.fetch(&location).await {
            Ok(bytes) => bytes,
            Err(StoreError::ObjectMissing { .. }) => return Err(format!("not in s3://{bucket}")),
            Err(e) => return Err(e.to_string()),
        };
        let bundle = Bundle::from_published(&bytes, version).map_err(|e| format!("{location}: {e}"))?;
        let config = NoticeConfig::load(bundle).map_err(|problems| {
            let shown: Vec<String> = problems.iter().take(3).map(ToString::to_string).collect();
            format!("{location} fails its check: {}", shown.join("; "))
        })?;
        Ok((Arc::new(config), location.to_string()))
    }
}
