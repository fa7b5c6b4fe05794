//! The notice configuration end to end with the core: the German example bundle checks clean; each
//! kind of mistake is named with its file (and line where there is one); the locale fallback
//! chain; a template printing a variable the job lacks is rejected at send time before any claim;
//! the claim row records the configuration version, the texts and the rendering's digest; a
//! switched configuration applies to the next delivery.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{TimeZone as _, Utc};
use notice_ledger::ledger::{RowReader, RowState};
use notice_ledger::links::ManageLinks;
use notice_ledger::locale::Locale;
use notice_ledger::render::rendered_digest;
use notice_ledger::{DeliverContext, Job, NoticeSecret, NoticeSender, Outcome};
use notice_testkit::faults::RecordingMailer;
use notice_testkit::MemoryLedger;
use notice_texts::{Bundle, Icu, NoticeConfig, Problem, Renderer};

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/notices-de")
}

/// The example bundle copied to a scratch directory, to be broken one way per test.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = example_dir();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    for f in ["manifest.json", "windows.json"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    for e in std::fs::read_dir(src.join("templates")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join("templates").join(e.file_name())).unwrap();
    }
    dir
}

fn load(dir: &Path) -> Result<NoticeConfig, Vec<Problem>> {
    NoticeConfig::load(Bundle::from_dir(dir).map_err(|e| vec![Problem::from(e)])?)
}

fn problems(dir: &Path) -> Vec<Problem> {
    match load(dir) {
        Ok(_) => panic!("expected problems"),
        Err(p) => p,
    }
}

fn links() -> ManageLinks {
    ManageLinks::new("https://billing.shop.de/verwalten", NoticeSecret::new("links").unwrap())
}

fn job(kind: &str, locale: Option<&str>, zone: Option<&str>, data: serde_json::Value) -> Job {
    let mut v = serde_json::json!({"subscription_id":"sub_1","period_start":"2026-12-31","kind":kind,
        "email":"kunde@example.de","charge_at":"2026-12-31T23:30:00Z","template_data": data});
    if let Some(l) = locale {
        v["locale"] = l.into();
    }
    if let Some(z) = zone {
        v["time_zone"] = z.into();
    }
    Job::from_value(&v, &Icu).unwrap()
}

fn data() -> serde_json::Value {
    serde_json::json!({"plan_name":"Kaffee-Abo","amount":{"minor":2900,"currency":"EUR"}})
}

#[test]
fn the_german_example_checks_clean() {
    let config = load(&example_dir()).unwrap_or_else(|p| panic!("{p:#?}"));
    assert_eq!(config.manifest().name, "example-de");
    assert!(config.version().as_str().starts_with("sha256:"));
    assert!(!config.is_builtin());
}

#[test]
fn locales_fall_back_along_their_chain_and_format_in_the_customers_own() {
    let config = Arc::new(load(&example_dir()).unwrap());
    let r = Renderer::new(config, links());
    let secret = NoticeSecret::new("s").unwrap();
    // de-AT has no texts of its own: the German ones, with Austrian dates, in the customer's zone.
    let j = job("annual_renewal", Some("de-AT"), Some("Europe/Vienna"), data());
    let out = r.render(&j, &j.key(&secret)).unwrap();
    assert_eq!(out.template.label(), "*/de");
    assert_eq!(out.mail.language, "de");
    assert!(out.mail.subject.contains("1. Jänner 2027"), "{}", out.mail.subject);
    assert!(out.mail.text.contains("€\u{a0}29,00"), "Austrian amounts lead with the sign: {}", out.mail.text);
    let j = job("annual_renewal", Some("de-DE"), Some("Europe/Berlin"), data());
    let out = r.render(&j, &j.key(&secret)).unwrap();
    assert!(
        out.mail.text.contains("1. Januar 2027") && out.mail.text.contains("29,00\u{a0}€"),
        "{}",
        out.mail.text
    );
    // A kind's own texts before the shared ones.
    let j = job("price_change", Some("de-DE"), None, data());
    assert_eq!(r.render(&j, &j.key(&secret)).unwrap().template.label(), "price_change/de");
    // A locale the configuration does not cover: its default language, never an empty notice.
    let j = job("annual_renewal", Some("fr-FR"), None, data());
    let out = r.render(&j, &j.key(&secret)).unwrap();
    assert_eq!(out.template.label(), "*/de");
    assert!(out.mail.subject.contains("31. Dezember 2026"), "UTC by default: {}", out.mail.subject);
    // English customers get the English texts, with an English amount.
    let j = job("annual_renewal", Some("en-GB"), None, data());
    let out = r.render(&j, &j.key(&secret)).unwrap();
    assert_eq!(out.template.label(), "*/en");
    assert!(out.mail.text.contains("€29.00"), "{}", out.mail.text);
}

#[test]
fn a_template_syntax_error_names_file_and_line() {
    let dir = scratch();
    std::fs::write(dir.path().join("templates/de.body.txt"), "Guten Tag,\n\n{% if plan_name %}\nkein Ende\n")
        .unwrap();
    let p = problems(dir.path());
    assert!(
        p.iter().any(|p| p.file.as_deref() == Some("templates/de.body.txt") && p.line.is_some()),
        "{p:#?}"
    );
}

#[test]
fn an_unknown_variable_is_named_with_its_line() {
    let dir = scratch();
    let path = dir.path().join("templates/de.body.txt");
    let text = std::fs::read_to_string(&path).unwrap().replace("{{ manage_url }}", "{{ manage_link }}");
    std::fs::write(&path, text).unwrap();
    let p = problems(dir.path());
    let hit = p.iter().find(|p| p.message.contains("`manage_link`")).unwrap_or_else(|| panic!("{p:#?}"));
    assert_eq!(hit.file.as_deref(), Some("templates/de.body.txt"));
    assert_eq!(hit.line, Some(7), "{hit}");
}

#[test]
fn an_incomplete_set_an_undeclared_locale_and_an_unknown_kind_are_named() {
    let dir = scratch();
    std::fs::remove_file(dir.path().join("templates/price_change.en.body.html")).unwrap();
    let p = problems(dir.path());
    assert!(p.iter().any(|p| p.message.contains("body.html")), "{p:#?}");

    let dir = scratch();
    std::fs::write(dir.path().join("templates/fr.subject.txt"), "x").unwrap();
    std::fs::write(dir.path().join("templates/fr.body.txt"), "x").unwrap();
    std::fs::write(dir.path().join("templates/fr.body.html"), "x").unwrap();
    let p = problems(dir.path());
    assert!(
        p.iter().any(|p| p.file.as_deref() == Some("templates/fr.body.txt") && p.message.contains("locales")),
        "{p:#?}"
    );

    let dir = scratch();
    for part in ["subject.txt", "body.txt", "body.html"] {
        std::fs::write(dir.path().join(format!("templates/anual_renewal.de.{part}")), "x").unwrap();
    }
    let p = problems(dir.path());
    assert!(p.iter().any(|p| p.message.contains("\"anual_renewal\"")), "{p:#?}");
}

#[test]
fn a_required_variable_the_texts_never_show_is_named() {
    let dir = scratch();
    let path = dir.path().join("templates/price_change.de.body.html");
    let text = std::fs::read_to_string(&path).unwrap().replace("<strong>{{ amount }}</strong>", "mehr");
    std::fs::write(&path, text).unwrap();
    let p = problems(dir.path());
    assert!(
        p.iter().any(|p| p.file.as_deref() == Some("templates/price_change.de.body.html")
            && p.message.contains("`amount`")),
        "{p:#?}"
    );
}

#[test]
fn a_kind_of_the_policy_without_texts_or_a_locale_without_its_language_is_named() {
    let dir = scratch();
    let path = dir.path().join("manifest.json");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"price_change\"]", "\"price_change\", \"win_back\"]");
    std::fs::write(&path, text).unwrap();
    let p = problems(dir.path());
    assert!(
        p.iter().any(|p| p.file.as_deref() == Some("windows.json") && p.message.contains("win_back")),
        "{p:#?}"
    );

    let dir = scratch();
    let path = dir.path().join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap().replace("\"en\"]", "\"en\", \"fr\"]");
    std::fs::write(&path, text).unwrap();
    let p = problems(dir.path());
    assert!(p.iter().any(|p| p.message.contains("fr") && p.message.contains("language")), "{p:#?}");
}

#[tokio::test]
async fn printing_a_variable_the_job_lacks_is_rejected_before_any_claim() {
    let dir = scratch();
    // The shared German body prints the plan name unguarded; the sample data still has it.
    let path = dir.path().join("templates/de.body.txt");
    let text =
        std::fs::read_to_string(&path).unwrap().replace("Guten Tag,", "Guten Tag, {{ plan_name }}-Kunde,");
    std::fs::write(&path, text).unwrap();
    let config = Arc::new(load(dir.path()).unwrap());
    let policy = config.policy().clone();
    let ledger = Arc::new(MemoryLedger::default());
    let mailer = Arc::new(RecordingMailer::default());
    let secret = NoticeSecret::new("s").unwrap();
    let sender = NoticeSender::new(
        ledger.clone(),
        mailer.clone(),
        Arc::new(Renderer::new(config, links())),
        policy,
        secret.clone(),
    );
    let j = job("renewal_notice_t72", Some("de"), None, serde_json::json!({}));
    let now = Utc.with_ymd_and_hms(2026, 12, 30, 12, 0, 0).unwrap();
    let d = sender.deliver(j.to_value().to_string().as_str(), DeliverContext::at(now)).await;
    let Outcome::RenderFailed(reason) = &d.outcome else { panic!("{:?}", d.outcome) };
    assert!(reason.contains("templates/de.body.txt") && reason.contains("plan_name"), "{reason}");
    assert_eq!(sender.metrics().drain().render_failed, 1, "counted (it pages)");
    assert!(mailer.sent().is_empty());
    assert!(ledger.get(&j.key(&secret)).await.unwrap().is_none(), "nothing claimed");
}

#[tokio::test]
async fn the_row_records_what_was_sent_and_a_switch_applies_to_the_next_notice() {
    let builtin = Renderer::builtin(links());
    let german = Arc::new(load(&example_dir()).unwrap());
    let ledger = Arc::new(MemoryLedger::default());
    let mailer = Arc::new(RecordingMailer::default());
    let secret = NoticeSecret::new("s").unwrap();
    let sender = NoticeSender::new(
        ledger.clone(),
        mailer.clone(),
        Arc::new(builtin),
        german.policy().clone(),
        secret.clone(),
    );
    let now = Utc.with_ymd_and_hms(2026, 12, 30, 12, 0, 0).unwrap();
    let first = job("renewal_notice_t72", Some("de"), None, data());
    sender.deliver(first.to_value().to_string().as_str(), DeliverContext::at(now)).await;
    sender.switch(Arc::new(Renderer::new(Arc::clone(&german), links())), german.policy().clone());
    let mut second = job("renewal_notice_t72", Some("de"), None, data());
    second.identity = notice_ledger::Identity::new("sub_2", "2026-12-31", "renewal_notice_t72", 0).unwrap();
    sender.deliver(second.to_value().to_string().as_str(), DeliverContext::at(now)).await;

    let sent = mailer.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!((sent[0].language.as_str(), sent[1].language.as_str()), ("en", "de"));
    let row = ledger.get(&second.key(&secret)).await.unwrap().unwrap();
    assert_eq!(row.state, RowState::Sent);
    let rendered = row.rendered.expect("the claim records the rendering");
    assert_eq!(rendered.config_version, german.version().to_string());
    assert_eq!(rendered.template, "*/de");
    assert_eq!(rendered.rendered_digest, rendered_digest(&sent[1].subject, &sent[1].text, &sent[1].html));
    let first_row = ledger.get(&first.key(&secret)).await.unwrap().unwrap();
    assert_ne!(first_row.rendered.unwrap().config_version, rendered.config_version);
    assert_eq!(Locale::parse("de", &Icu).unwrap().as_str(), "de");
}
