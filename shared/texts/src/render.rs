//! Rendering a job into a message: subject, plain text and HTML, from the notice configuration
//! in force ([`crate::notices`]), in the customer's language and time zone: the core's [`Texts`]
//! port, implemented.
//!
//! Strict on purpose: a template that prints a variable the job did not supply is an error (the
//! notice is rejected before anything is claimed, naming the template and the variable) — never
//! a blank in a customer's inbox. Testing a variable (`{% if amount %}`) is allowed, so optional
//! content stays optional. Variables: the job's `template_data` (an `amount` of the form
//! `{"minor": 2900, "currency": "EUR"}` is formatted for the locale), plus `charge_at` (RFC 3339),
//! `charge_date` (the long date in the customer's language and zone), `manage_url`,
//! `subscription_id`, `kind`, `revision`, `period_start`, `locale` (of the texts used) and
//! `time_zone`.

use std::collections::HashSet;

use minijinja::ErrorKind;
use notice_ledger::identity::NoticeKey;
use notice_ledger::job::Job;
use notice_ledger::ledger::RenderedNotice;
use notice_ledger::links::ManageLinks;
use notice_ledger::mailer::clean_subject;
pub use notice_ledger::render::variables;
use notice_ledger::render::Texts;
pub use notice_ledger::render::{rendered_digest, Draft, RenderError, Rendered, TemplateSet};
use serde_json::{Map, Value};

use crate::locale::{format_date, format_money, Cldr, Icu, Locale, Money, TimeZone};
use crate::notices::config::{template_error, NoticeConfig, SharedConfig};

/// Renders jobs with one notice configuration and one manage-link secret.
pub struct Renderer {
    config: SharedConfig,
    links: ManageLinks,
}

impl Renderer {
    pub fn new(config: SharedConfig, links: ManageLinks) -> Self {
        Self { config, links }
    }

    pub fn config(&self) -> &SharedConfig {
        &self.config
    }

    /// A renderer over another configuration with the same manage links (a new version loaded
    /// by a running sender).
    pub fn with_config(&self, config: SharedConfig) -> Self {
        Self { config, links: self.links.clone() }
    }

    pub fn render(&self, job: &Job, key: &NoticeKey) -> Result<Rendered, RenderError> {
        render(&self.config, &self.links, job, key)
    }

    /// The notice for `job`, before its key is known ([`Draft::addressed`]).
    pub fn draft(&self, job: &Job) -> Result<Draft, RenderError> {
        draft(&self.config, &self.links, job)
    }

    /// The template variables as the job supplies them (its `template_data` and the values derived
    /// from it), before any formatting: what a policy's `requires` is checked against.
    pub fn variables(&self, job: &Job) -> Map<String, Value> {
        variables(&self.links, job)
    }
}

impl Cldr for Renderer {
    fn canonical_locale(&self, text: &str) -> Result<String, String> {
        Icu.canonical_locale(text)
    }

    fn shown_exactly(&self, money: &Money) -> bool {
        Icu.shown_exactly(money)
    }
}

impl Texts for Renderer {
    fn draft(&self, job: &Job) -> Result<Draft, RenderError> {
        Renderer::draft(self, job)
    }

    fn variables(&self, job: &Job) -> Map<String, Value> {
        Renderer::variables(self, job)
    }

    fn version(&self) -> String {
        self.config.version().to_string()
    }
}

/// Renders `job` with `config`'s texts (the [`Renderer`]'s work, and the configuration check's).
pub(crate) fn render(
    config: &NoticeConfig,
    links: &ManageLinks,
    job: &Job,
    key: &NoticeKey,
) -> Result<Rendered, RenderError> {
    draft(config, links, job).map(|d| d.addressed(key))
}

/// [`render`] without the key.
fn draft(config: &NoticeConfig, links: &ManageLinks, job: &Job) -> Result<Draft, RenderError> {
    let kind = job.identity.kind().as_str();
    let set = config.resolve(kind, job.locale.as_ref()).ok_or_else(|| RenderError {
        template: format!("{kind}/{}", job.locale.as_ref().map_or("-", Locale::as_str)),
        reason: "the configuration has no texts for this kind in this locale or its default".into(),
    })?;
    let ctx = context(links, job, &set)?;
    let env = config.env();
    let part = |name: &str| -> Result<String, RenderError> {
        let file = set.file(name);
        let template = env
            .get_template(&file)
            .map_err(|e| RenderError { template: file.clone(), reason: template_error(&e) })?;
        template.render(&ctx).map_err(|e| {
            let reason = if e.kind() == ErrorKind::UndefinedError {
                let have: HashSet<&str> =
                    ctx.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
                let mut missing: Vec<String> = template
                    .undeclared_variables(false)
                    .into_iter()
                    .filter(|v| !have.contains(v.as_str()))
                    .collect();
                missing.sort();
                format!(
                    "prints {} , which the job does not supply (template line {})",
                    if missing.is_empty() { "an undefined value".to_owned() } else { missing.join(", ") },
                    e.line().map_or_else(|| "?".to_owned(), |l| l.to_string())
                )
                .replace(" ,", ",")
            } else {
                template_error(&e)
            };
            RenderError { template: format!("templates/{file}"), reason }
        })
    };
    let subject = clean_subject(&part("subject.txt")?);
    let text = part("body.txt")?;
    let html = part("body.html")?;
    let digest = rendered_digest(&subject, &text, &html);
    let record = RenderedNotice {
        config_version: config.version().to_string(),
        template: set.label(),
        rendered_digest: digest,
    };
    Ok(Draft {
        kind: kind.to_owned(),
        to: job.email.clone(),
        subject,
        text,
        html,
        language: set.locale.clone(),
        template: set,
        record,
    })
}

/// The template context: the job's variables, `amount` formatted, and the texts' locale.
fn context(links: &ManageLinks, job: &Job, set: &TemplateSet) -> Result<Value, RenderError> {
    let format_locale = formatting_locale(job.locale.as_ref(), &set.locale);
    let zone = match &job.time_zone {
        Some(zone) => zone.clone(),
        None => TimeZone::utc(),
    };
    let mut ctx = variables(links, job);
    ctx.insert("charge_date".into(), Value::String(format_date(job.charge_at, &zone, &format_locale)));
    ctx.insert("locale".into(), Value::String(set.locale.clone()));
    ctx.insert("time_zone".into(), Value::String(zone.as_str().to_owned()));
    if let Some(amount @ Value::Object(_)) = ctx.get("amount") {
        let money = Money::from_value(amount, &Icu).map_err(|reason| RenderError {
            template: "template_data.amount".into(),
            reason: format!("{reason} (expected {{\"minor\": 2900, \"currency\": \"EUR\"}})"),
        })?;
        ctx.insert("amount".into(), Value::String(format_money(&money, &format_locale)));
    }
    Ok(Value::Object(ctx))
}

/// Dates and amounts follow the customer's own locale when the texts are in its language
/// (`de-AT` reading the `de` texts gets Austrian month names), else the texts' locale, so a
/// notice never mixes two languages.
fn formatting_locale(job: Option<&Locale>, texts: &str) -> Locale {
    let texts = Locale::parse(texts, &Icu).ok();
    match (job, texts) {
        (Some(j), Some(t)) if j.language() == t.language() => j.clone(),
        (_, Some(t)) => t,
        (Some(j), None) => j.clone(),
        (None, None) => Locale::parse("en", &Icu).unwrap_or_else(|_| unreachable!("`en` is a locale")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notice_ledger::identity::NoticeSecret;
    use notice_ledger::mailer::MAX_SUBJECT_CHARS;

    fn job(data: Value) -> Job {
        Job::from_value(
            &serde_json::json!({"subscription_id":"sub_1","period_start":"2026-10-01",
            "kind":"renewal_notice_t72","email":"a@example.com","charge_at":"2026-10-01T09:00:00Z",
            "template_data": data}),
            &Icu,
        )
        .unwrap()
    }

    fn renderer() -> Renderer {
        Renderer::builtin(ManageLinks::new(
            "https://billing.example.com/manage",
            NoticeSecret::new("l").unwrap(),
        ))
    }

    fn render(j: &Job) -> Rendered {
        renderer().render(j, &j.key(&NoticeSecret::new("s").unwrap())).unwrap()
    }

    #[test]
    fn default_templates_render_data_and_link() {
        let j = job(serde_json::json!({"plan_name":"Coffee Box","amount":{"minor":2900,"currency":"USD"}}));
        let r = render(&j);
        assert_eq!(r.mail.subject, "Your Coffee Box subscription renews on October 1, 2026");
        assert!(r.mail.text.contains("$29.00"));
        assert!(r.mail.text.contains("https://billing.example.com/manage?"));
        assert!(r.mail.html.contains("<strong>Coffee Box</strong>"));
        assert!(
            r.mail.html.contains("href=\"https://billing.example.com/manage?"),
            "links are plain URLs: {}",
            r.mail.html
        );
        assert_eq!(r.mail.language, "en");
        assert_eq!(r.record.template, "*/en");
        assert_eq!(r.record.config_version, renderer().config().version().to_string());
        assert_eq!(r.record.rendered_digest, rendered_digest(&r.mail.subject, &r.mail.text, &r.mail.html));
    }

    /// A job that lacks a variable its texts print is refused naming the variable and the line of
    /// the template — said as such, so it never reads as a line of the job's file.
    #[test]
    fn a_missing_variable_names_the_template_line() {
        let bundle = crate::notices::Bundle::from_files([
            ("manifest.json", r#"{"name":"t","default_locale":"en","variables":{"plan_name":"Box"}}"#),
            ("windows.json", "{}"),
            ("templates/en.subject.txt", "Renewal"),
            ("templates/en.body.txt", "Hello,\nyour {{ plan_name }} renews.\n"),
            ("templates/en.body.html", "<p>{{ plan_name }}</p>"),
        ])
        .unwrap();
        let config = NoticeConfig::load(bundle).unwrap();
        let links = ManageLinks::new("https://billing.example.com/manage", NoticeSecret::new("l").unwrap());
        let j = job(serde_json::json!({}));
        let e = super::render(&config, &links, &j, &j.key(&NoticeSecret::new("s").unwrap())).unwrap_err();
        assert_eq!(e.template, "templates/en.body.txt");
        assert!(e.reason.contains("plan_name") && e.reason.ends_with("(template line 2)"), "{}", e.reason);
    }

    #[test]
    fn built_in_texts_read_well_with_only_the_required_fields() {
        let r = render(&job(serde_json::json!({})));
        assert_eq!(r.mail.subject, "Your subscription renews on October 1, 2026");
        assert!(!r.mail.text.contains("subscription subscription"));
        assert!(!r.mail.text.contains("charge"), "no amount line without an amount: {}", r.mail.text);
    }

    #[test]
    fn amounts_are_formatted_and_a_bad_amount_names_the_field() {
        let r = render(&job(serde_json::json!({"amount":{"minor":2900,"currency":"USD"}})));
        assert!(r.mail.text.contains("$29.00"), "{}", r.mail.text);
        // A job body with such an amount is refused when it is parsed (`job.rs`); a job built
        // by hand still cannot print one.
        let bad = serde_json::json!({"minor":"x","currency":"USD"});
        let mut j = job(serde_json::json!({}));
        j.template_data.insert("amount".into(), bad);
        let e = renderer().render(&j, &j.key(&NoticeSecret::new("s").unwrap())).unwrap_err();
        assert_eq!(e.template, "template_data.amount");
    }

    #[test]
    fn html_is_escaped() {
        let r = render(&job(serde_json::json!({"plan_name":"<script>x</script>"})));
        assert!(!r.mail.html.contains("<script>"));
        assert!(r.mail.html.contains("&lt;script&gt;x&lt;/script&gt;"));
    }

    #[test]
    fn subjects_lose_control_characters_and_are_capped() {
        assert_eq!(clean_subject("Your\0 plan\x1b[31m\x7f renews\r\nBcc: x"), "Your plan[31m renews Bcc: x");
        assert_eq!(clean_subject("a\u{202E}b"), "ab");
        let long = clean_subject(&"Überraschung ".repeat(100));
        assert_eq!(long.chars().count(), MAX_SUBJECT_CHARS);
        assert!(long.ends_with('…'));
        let r = render(&job(serde_json::json!({"plan_name": format!("Tea\u{1b}\u{0}{}", "x".repeat(400))})));
        assert!(r.mail.subject.chars().count() <= MAX_SUBJECT_CHARS);
        assert!(!r.mail.subject.chars().any(char::is_control));
    }
}
