//! Rendering a job into a message: subject, plain text and HTML.
//!
//! Templates are minijinja (Jinja2 syntax). The defaults are compiled in; a directory can override
//! any of `subject.txt`, `body.txt`, `body.html`, and per kind `<kind>.subject.txt` and so on.
//! HTML output is auto-escaped. Variables: everything in `template_data`, plus `charge_at`
//! (RFC 3339), `charge_date` (e.g. `1 October 2026`), `manage_url`, `subscription_id`, `kind`,
//! `revision`, `period_start`.

use std::path::Path;

use minijinja::Environment;
use serde_json::{Map, Value};

use crate::error::ConfigError;
use crate::identity::NoticeKey;
use crate::job::Job;
use crate::links::ManageLinks;
use crate::mailer::OutgoingMail;

const PARTS: [&str; 3] = ["subject.txt", "body.txt", "body.html"];

pub struct Renderer {
    env: Environment<'static>,
    links: ManageLinks,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot render template {template}: {reason}")]
pub struct RenderError {
    pub template: String,
    pub reason: String,
}

impl Renderer {
    /// The compiled-in templates.
    pub fn new(links: ManageLinks) -> Self {
        let mut env = Environment::new();
        for (name, source) in [
            ("subject.txt", include_str!("../templates/subject.txt")),
            ("body.txt", include_str!("../templates/body.txt")),
            ("body.html", include_str!("../templates/body.html")),
        ] {
            // The defaults are compile-time constants covered by tests; a syntax error is a bug here.
            if let Err(e) = env.add_template(name, source) {
                unreachable!("built-in template {name} is invalid: {e}");
            }
        }
        Self { env, links }
    }

    /// Defaults overridden by every template file found in `dir`. Syntax errors surface here, at
    /// start-up, not on the first message.
    pub fn with_dir(links: ManageLinks, dir: &Path) -> Result<Self, ConfigError> {
        let mut renderer = Self::new(links);
        let entries = std::fs::read_dir(dir).map_err(|e| ConfigError::Invalid {
            name: "NOTICE_TEMPLATE_DIR",
            reason: format!("{}: {e}", dir.display()),
        })?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !PARTS.iter().any(|p| name.ends_with(p)) {
                continue;
            }
            let source = std::fs::read_to_string(entry.path()).map_err(|e| ConfigError::Invalid {
                name: "NOTICE_TEMPLATE_DIR",
                reason: format!("{name}: {e}"),
            })?;
            renderer.env.add_template_owned(name.clone(), source).map_err(|e| ConfigError::Invalid {
                name: "NOTICE_TEMPLATE_DIR",
                reason: format!("{name}: {e}"),
            })?;
        }
        Ok(renderer)
    }

    pub fn render(&self, job: &Job, key: &NoticeKey) -> Result<OutgoingMail, RenderError> {
        let ctx = self.context(job);
        let kind = job.identity.kind().as_str();
        let part = |name: &str| -> Result<String, RenderError> {
            let specific = format!("{kind}.{name}");
            let template = self
                .env
                .get_template(&specific)
                .or_else(|_| self.env.get_template(name))
                .map_err(|e| RenderError { template: name.to_owned(), reason: e.to_string() })?;
            template
                .render(&ctx)
                .map_err(|e| RenderError { template: template.name().to_owned(), reason: e.to_string() })
        };
        let subject = clean_subject(&part("subject.txt")?);
        Ok(OutgoingMail {
            key: key.clone(),
            kind: kind.to_owned(),
            to: job.email.clone(),
            subject,
            text: part("body.txt")?,
            html: part("body.html")?,
        })
    }

    fn context(&self, job: &Job) -> Value {
        let mut ctx = self.variables(job);
        ctx.entry("plan_name").or_insert_with(|| Value::String("subscription".into()));
        Value::Object(ctx)
    }

    /// The template variables as the job supplies them (its `template_data` and the values derived
    /// from it), before any built-in default: what a policy's `requires` is checked against, so a
    /// default text never stands in for content a law requires.
    pub fn variables(&self, job: &Job) -> Map<String, Value> {
        let mut ctx: Map<String, Value> = job.template_data.clone();
        let id = &job.identity;
        for (k, v) in [
            ("charge_at", Value::String(job.charge_at.to_rfc3339())),
            ("charge_date", Value::String(job.charge_at.format("%-d %B %Y").to_string())),
            ("subscription_id", Value::String(id.subscription_id().to_owned())),
            ("kind", Value::String(id.kind().as_str().to_owned())),
            ("revision", Value::from(id.revision())),
            ("period_start", Value::String(id.period_start().format("%Y-%m-%d").to_string())),
            ("manage_url", Value::String(self.links.url_for(&job.identity))),
        ] {
            ctx.insert(k.to_owned(), v);
        }
        ctx
    }
}

/// Longest subject sent, in characters. Mail clients show ~60–80; beyond a few hundred a subject is
/// data gone wrong, and every header line must stay within RFC 5322's 998 octets once encoded.
pub const MAX_SUBJECT_CHARS: usize = 250;

/// A subject is one header line of text: control characters (NUL, ESC, DEL, CR/LF …) and
/// direction overrides are dropped, runs of whitespace become one space, and the result is capped
/// at [`MAX_SUBJECT_CHARS`] (ending in `…` when cut). Applied before any provider sees it, so SES
/// and the outbox send the same subject.
pub fn clean_subject(raw: &str) -> String {
    let visible: String = raw
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .filter(|c| !c.is_control() && !matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'))
        .collect();
    let words = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.chars().count() <= MAX_SUBJECT_CHARS {
        return words;
    }
    let mut cut: String = words.chars().take(MAX_SUBJECT_CHARS - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::NoticeSecret;

    fn job(data: Value) -> Job {
        Job::from_value(&serde_json::json!({"subscription_id":"sub_1","period_start":"2026-10-01",
            "kind":"renewal_notice_t72","email":"a@example.com","charge_at":"2026-10-01T09:00:00Z",
            "template_data": data}))
        .unwrap()
    }

    fn renderer() -> Renderer {
        Renderer::new(ManageLinks::new("https://billing.example.com/manage", NoticeSecret::new("l").unwrap()))
    }

    #[test]
    fn default_templates_render_data_and_link() {
        let j = job(serde_json::json!({"plan_name":"Coffee Box","amount":"29.00 USD"}));
        let key = j.key(&NoticeSecret::new("s").unwrap());
        let mail = renderer().render(&j, &key).unwrap();
        assert_eq!(mail.subject, "Your Coffee Box renews on 1 October 2026");
        assert!(mail.text.contains("29.00 USD"));
        assert!(mail.text.contains("https://billing.example.com/manage?"));
        assert!(mail.html.contains("<strong>Coffee Box</strong>"));
    }

    #[test]
    fn html_is_escaped() {
        let j = job(serde_json::json!({"plan_name":"<script>x</script>"}));
        let mail = renderer().render(&j, &j.key(&NoticeSecret::new("s").unwrap())).unwrap();
        assert!(!mail.html.contains("<script>"));
        assert!(mail.html.contains("&lt;script&gt;"));
    }

    #[test]
    fn directory_overrides_per_kind() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("renewal_notice_t72.subject.txt"), "Heads up: {{ plan_name }}\n")
            .unwrap();
        let links = ManageLinks::new("https://x.example", NoticeSecret::new("l").unwrap());
        let r = Renderer::with_dir(links, dir.path()).unwrap();
        let j = job(serde_json::json!({"plan_name":"Tea"}));
        let mail = r.render(&j, &j.key(&NoticeSecret::new("s").unwrap())).unwrap();
        assert_eq!(mail.subject, "Heads up: Tea");
        std::fs::write(dir.path().join("body.txt"), "{% if %}").unwrap();
        let links = ManageLinks::new("https://x.example", NoticeSecret::new("l").unwrap());
        assert!(Renderer::with_dir(links, dir.path()).is_err());
    }

    #[test]
    fn subjects_lose_control_characters_and_are_capped() {
        assert_eq!(clean_subject("Your\0 plan\x1b[31m\x7f renews\r\nBcc: x"), "Your plan[31m renews Bcc: x");
        assert_eq!(clean_subject("a\u{202E}b"), "ab");
        let long = clean_subject(&"Überraschung ".repeat(100));
        assert_eq!(long.chars().count(), MAX_SUBJECT_CHARS);
        assert!(long.ends_with('…'));
        let j = job(serde_json::json!({"plan_name": format!("Tea\u{1b}\u{0}{}", "x".repeat(400))}));
        let mail = renderer().render(&j, &j.key(&NoticeSecret::new("s").unwrap())).unwrap();
        assert!(mail.subject.chars().count() <= MAX_SUBJECT_CHARS);
        assert!(!mail.subject.chars().any(char::is_control));
    }
}
