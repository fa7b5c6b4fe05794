//! `--config DIR` (default `NOTICE_CONFIG`), declared once for every command that judges a
//! message — `send`, `validate`, `replay`, `enqueue`, `withdraw`, `backfill`, `windows` — so each of
//! them judges it under the same configuration, through the core's one admission
//! ([`notice_ledger::admission`]). A command that judged a withdraw under another policy than the
//! sender's would answer "withdrawn" for a misspelled kind while the real notice still goes out.

use std::path::PathBuf;
use std::sync::Arc;

use notice_ledger::keyring::KeyRing;
use notice_ledger::{Notices, WindowPolicy};
use notice_setup::notices::ConfigSpec;
use notice_texts::notices::NoticeConfig;
use notice_texts::Renderer;

#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct ConfigArg {
    /// A notice configuration directory (templates/, windows.json, manifest.json) used as is;
    /// default: NOTICE_CONFIG, else the built-in English texts (their policy from NOTICE_WINDOWS).
    #[arg(long = "config", value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

impl ConfigArg {
    /// Where the configuration comes from: `--config`, else `NOTICE_CONFIG`; the settings it
    /// replaces refused beside it either way.
    pub(crate) fn spec(&self) -> anyhow::Result<ConfigSpec> {
        let spec = match &self.dir {
            Some(dir) => ConfigSpec::Dir(dir.clone()),
            None => ConfigSpec::from_env()?,
        };
        // The refusal speaks of what the user typed: `--config DIR` when the flag was given, the
        // variable only when the environment named the configuration.
        if let Some(dir) = &self.dir {
            for var in ["NOTICE_WINDOWS", "NOTICE_WINDOWS_FILE"] {
                if notice_setup::config::optional(var).is_some() {
                    anyhow::bail!(
                        "{var} is set beside --config {}: the policy in force is the configuration's \
                         windows.json; unset {var}",
                        dir.display()
                    );
                }
            }
        }
        spec.refuse_replaced_settings()?;
        Ok(spec)
    }

    /// How the output names it.
    pub(crate) fn describe(&self) -> anyhow::Result<String> {
        Ok(match &self.dir {
            Some(dir) => format!("--config {}", dir.display()),
            None => match self.spec()? {
                ConfigSpec::Builtin => "the built-in texts (NOTICE_CONFIG unset)".to_owned(),
                spec => format!("{} (NOTICE_CONFIG)", spec.describe()),
            },
        })
    }

    /// The texts and the policy in force, with the manage links of `keys` (the links never shape
    /// a verdict; a command that shows no link may pass any ring).
    pub(crate) fn notices(&self, keys: &KeyRing) -> anyhow::Result<Notices> {
        let (renderer, policy) = self.texts(keys)?;
        Ok(Notices { texts: renderer, policy })
    }

    /// [`Self::notices`] as the texts themselves (`noticectl send` builds its sender on them).
    pub(crate) fn texts(&self, keys: &KeyRing) -> anyhow::Result<(Arc<Renderer>, WindowPolicy)> {
        Ok(notice_setup::notices::notices_from(&self.spec()?, keys)?)
    }
}

/// The built-in texts under the policy in `text` (`--windows FILE`), with the manage links of
/// `keys`.
pub(crate) fn builtin_with_policy(text: &str, keys: &KeyRing) -> anyhow::Result<Notices> {
    let config = NoticeConfig::builtin(Some(text)).map_err(|problems| {
        // Only the policy can be wrong in the built-in texts: its reasons, in the words of the
        // flag the caller names (`--windows FILE`), not of the file inside the bundle.
        let reasons: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
        anyhow::anyhow!("{}", reasons.join("; "))
    })?;
    let policy = config.policy().clone();
    let links = notice_setup::config::links_from_env(keys)?;
    Ok(Notices { texts: Arc::new(Renderer::new(Arc::new(config), links)), policy })
}
