//! `noticectl evidence --render`: re-render each notice from its stored configuration version and
//! its job, and compare the digest with the stored one. Apart because it alone reads JOBS and
//! renders; the rest of the command only reads the ledger.

use std::collections::HashMap;
use std::sync::Arc;

use notice_ledger::ledger::LedgerRow;
use notice_ledger::{Job, NoticeKey};
use notice_texts::notices::NoticeConfig;
use notice_texts::Renderer;
use serde::Serialize;

use super::output::short_digest;
use crate::terminal::escape;

/// `--render`'s verdict on one notice.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct RenderCheck {
    /// `matches`, `differs`, `inputs differ`, `version unavailable`, `cannot render`, or (nothing
    /// to compare) `no job`, `not rendered`.
    pub(crate) verdict: &'static str,
    pub(crate) detail: String,
    /// Where the job came from in JOBS (`line 3`).
    pub(crate) job: Option<String>,
}

impl RenderCheck {
    fn new(verdict: &'static str, detail: String, job: Option<&str>) -> Self {
        Self { verdict, detail, job: job.map(str::to_owned) }
    }

    /// A verdict that makes the run exit 1.
    pub(super) fn needs_attention(&self) -> bool {
        matches!(self.verdict, "differs" | "inputs differ" | "version unavailable" | "cannot render")
    }
}

/// The jobs of a `--render` file by notice key, and how to render them as the sender did.
pub(super) struct RenderInputs {
    jobs: HashMap<NoticeKey, Vec<(String, Job)>>,
    links: notice_ledger::links::ManageLinks,
    manage_url: String,
}

impl RenderInputs {
    pub(super) fn read(
        path: &std::path::Path,
        secret: &notice_ledger::keyring::KeyRing,
    ) -> anyhow::Result<Self> {
        let mut jobs: HashMap<NoticeKey, Vec<(String, Job)>> = HashMap::new();
        for item in crate::input::read_items(path)? {
            match item.job() {
                Ok(job) => {
                    // Under every version held: the row names the key the notice went out under.
                    for key in secret.all_keys(&job.identity) {
                        jobs.entry(key).or_default().push((item.origin.clone(), job.clone()));
                    }
                }
                Err(e) => eprintln!(
                    "noticectl evidence: --render {}: {}: {e} (skipped)",
                    path.display(),
                    item.origin
                ),
            }
        }
        let links = notice_setup::config::links_from_env(secret)?;
        let manage_url = notice_setup::config::optional("NOTICE_MANAGE_URL")
            .unwrap_or_else(|| format!("{} (the default)", notice_setup::config::DEFAULT_MANAGE_URL));
        Ok(Self { jobs, links, manage_url })
    }

    /// The verdict on `row`, rendered with `config` (or why that version is unavailable).
    pub(super) fn check(
        &self,
        row: &LedgerRow,
        config: &Result<(Arc<NoticeConfig>, String), String>,
    ) -> RenderCheck {
        let Some(stored) = &row.rendered else {
            return RenderCheck::new(
                "not rendered",
                "the row stores no rendered digest to compare".into(),
                None,
            );
        };
        let Some(candidates) = self.jobs.get(&row.key) else {
            return RenderCheck::new("no job", "JOBS holds no job for this notice".into(), None);
        };
        let (origin, job) = candidates
            .iter()
            .find(|(_, j)| row.content_digest.as_deref() == Some(j.content_digest().as_str()))
            .unwrap_or(&candidates[0]);
        let origin = Some(origin.as_str());
        if let Some(digest) = row.content_digest.as_deref().filter(|d| *d != job.content_digest()) {
            return RenderCheck::new(
                "inputs differ",
                format!(
                    "its content inputs (recipient, charge, jurisdiction, locale, time zone, template data) digest to {}, not {} as stored: not the job that was sent",
                    short_digest(&job.content_digest()),
                    short_digest(digest)
                ),
                origin,
            );
        }
        let config = match config {
            Ok((config, _)) => Arc::clone(config),
            Err(why) => {
                let detail = format!("version {} not found: {why}", escape(&stored.config_version));
                return RenderCheck::new("version unavailable", detail, origin);
            }
        };
        let rendered = match Renderer::new(config, self.links.clone()).render(job, &row.key) {
            Ok(rendered) => rendered,
            Err(e) => return RenderCheck::new("cannot render", e.to_string(), origin),
        };
        let again = &rendered.record;
        if again.rendered_digest == stored.rendered_digest {
            let detail = format!(
                "re-rendered {} from version {}: digest {} as stored",
                escape(&again.template),
                short_digest(stored.config_version.trim_start_matches("sha256:")),
                short_digest(&again.rendered_digest)
            );
            return RenderCheck::new("matches", detail, origin);
        }
        let template = if again.template == stored.template {
            String::new()
        } else {
            format!(" (template {}, stored {})", escape(&again.template), escape(&stored.template))
        };
        let detail = format!(
            "re-rendered digest {} ≠ stored {}{template}; manage links made with NOTICE_MANAGE_URL {} — if \
             the sender used another base or link secret, that alone makes it differ",
            short_digest(&again.rendered_digest),
            escape(short_digest(&stored.rendered_digest)),
            escape(&self.manage_url)
        );
        RenderCheck::new("differs", detail, origin)
    }
}
