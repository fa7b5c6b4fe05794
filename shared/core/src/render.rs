//! What the protocol needs from the notice texts (the [`Texts`] port), and the message they make:
//! a [`Draft`] the admission renders for every job it admits, addressed to its key by the sender.
//!
//! The texts themselves — the notice configuration, its templates, rendering in the customer's
//! language and zone (minijinja, ICU4X) — are the texts crate's (`shared/texts`), which implements [`Texts`]; this
//! crate links none of it, so a function that renders nothing (the reconciler, the reporter)
//! links no template engine and no CLDR data.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::identity::NoticeKey;
use crate::job::Job;
use crate::ledger::RenderedNotice;
use crate::links::ManageLinks;
use crate::locale::Cldr;
use crate::mailer::OutgoingMail;

/// One version of the notice texts, as the admission and the sender use it: strict rendering of
/// a job, the variables a policy's `requires` is checked against, and the version recorded as
/// evidence. It answers the job's parse too ([`Cldr`]): the texts' locales are CLDR's.
pub trait Texts: Cldr {
    /// The notice for `job`, before its key is known ([`Draft::addressed`]); strict: a variable
    /// a template prints that the job does not supply is an error naming the template.
    fn draft(&self, job: &Job) -> Result<Draft, RenderError>;

    /// The template variables as the job supplies them (its `template_data` and the values
    /// derived from it), before any formatting: what a policy's `requires` is checked against.
    fn variables(&self, job: &Job) -> Map<String, Value>;

    /// The configuration version these texts are (`sha256:…`), as recorded on every claim row.
    fn version(&self) -> String;
}

#[derive(Debug, thiserror::Error)]
#[error("cannot render template {template}: {reason}")]
pub struct RenderError {
    pub template: String,
    pub reason: String,
}

/// Which texts answered a notice: the kind they were written for (`None`: shared by every kind)
/// and their locale.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TemplateSet {
    pub kind: Option<String>,
    pub locale: String,
}

impl TemplateSet {
    /// The template file name (inside `templates/`) of one part.
    pub fn file(&self, part: &str) -> String {
        match &self.kind {
            Some(kind) => format!("{kind}.{}.{part}", self.locale),
            None => format!("{}.{part}", self.locale),
        }
    }

    /// `<kind>/<locale>` as recorded on a ledger row (`*` for texts shared by every kind).
    pub fn label(&self) -> String {
        format!("{}/{}", self.kind.as_deref().unwrap_or("*"), self.locale)
    }
}

/// A rendered notice and what produced it (recorded on its ledger row as evidence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    pub mail: OutgoingMail,
    pub template: TemplateSet,
    pub record: RenderedNotice,
}

/// A notice rendered before its key is known: the admission renders every job it admits (so a
/// template that cannot be filled is refused when the job arrives, in every entry point alike),
/// and the sender addresses the draft to the key the notice turns out to live under. The key
/// never shapes the text: the manage link hangs off the subscription period, not the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Draft {
    pub kind: String,
    pub to: String,
    pub subject: String,
    pub text: String,
    pub html: String,
    /// The language of the texts used.
    pub language: String,
    pub template: TemplateSet,
    pub record: RenderedNotice,
}

impl Draft {
    /// The draft as the message for `key` (the EmailTag every provider event echoes).
    pub fn addressed(self, key: &NoticeKey) -> Rendered {
        let mail = OutgoingMail {
            key: key.clone(),
            kind: self.kind,
            to: self.to,
            subject: self.subject,
            text: self.text,
            html: self.html,
            language: self.language,
        };
        Rendered { mail, template: self.template, record: self.record }
    }
}

/// The template variables as the job supplies them (its `template_data` and the values derived
/// from it), before any formatting: what a policy's `requires` is checked against.
pub fn variables(links: &ManageLinks, job: &Job) -> Map<String, Value> {
    let mut ctx: Map<String, Value> = job.template_data.clone();
    let id = &job.identity;
    for (k, v) in [
        ("charge_at", Value::String(job.charge_at.to_rfc3339())),
        ("charge_date", Value::String(job.charge_at.format("%Y-%m-%d").to_string())),
        ("subscription_id", Value::String(id.subscription_id().to_owned())),
        ("kind", Value::String(id.kind().as_str().to_owned())),
        ("revision", Value::from(id.revision())),
        ("period_start", Value::String(id.period_start().format("%Y-%m-%d").to_string())),
        ("manage_url", Value::String(links.url_for(&job.identity))),
    ] {
        ctx.insert(k.to_owned(), v);
    }
    ctx
}

/// SHA-256 over the rendered subject, text and HTML, each length-prefixed so no two renderings
/// share a digest by moving text between parts.
pub fn rendered_digest(subject: &str, text: &str, html: &str) -> String {
    let mut h = Sha256::new();
    for part in [subject, text, html] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_digest_separates_parts() {
        assert_ne!(rendered_digest("ab", "c", ""), rendered_digest("a", "bc", ""));
    }
}
