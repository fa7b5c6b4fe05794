//! Checking a notice configuration as a whole — what `noticectl config check` reports and what
//! every sender verifies before it starts on a version: every template parses, uses only known
//! variables, every kind × locale has texts in its own language, and renders for every jurisdiction
//! the policy names with the manifest's sample data, showing every variable the policy requires.

use std::sync::Arc;

use serde_json::Value;

use crate::locale::{Icu, Locale};
use crate::notices::bundle::{self, Bundle, TEMPLATES};
use crate::notices::config::{
    parse_template_name, NoticeConfig, TemplateSet, BUILTIN_MANIFEST, BUILTIN_TEMPLATES, PARTS,
};
use crate::notices::problem::Problem;
use crate::render::{self, Renderer};
use notice_ledger::identity::NoticeSecret;
use notice_ledger::job::Job;
use notice_ledger::links::ManageLinks;

/// A configuration is only ever made checked: the constructors live beside the check.
impl NoticeConfig {
    /// Loads and checks `bundle` as a whole: a configuration with any problem is not loaded, so a
    /// sender never starts on texts or a policy nobody could have checked.
    pub fn load(bundle: Bundle) -> Result<Self, Vec<Problem>> {
        checked(Self::compile(bundle, false))
    }

    /// The built-in configuration: the English texts and `windows` as its policy (the policy a
    /// deployment without a bundle of its own gives in `NOTICE_WINDOWS`; `None`: the built-in
    /// window). Its version covers the policy too, so evidence can tell two such set-ups apart.
    pub fn builtin(windows: Option<&str>) -> Result<Self, Vec<Problem>> {
        let mut files: Vec<(&str, &str)> = BUILTIN_TEMPLATES.to_vec();
        files.push((bundle::MANIFEST, BUILTIN_MANIFEST));
        files.push((bundle::WINDOWS, windows.unwrap_or("{}")));
        let bundle = Bundle::from_files(files).map_err(|e| vec![Problem::from(e)])?;
        checked(Self::compile(bundle, true))
    }
}

impl Renderer {
    /// The built-in texts under the built-in window (tests, benches, first runs).
    pub fn builtin(links: ManageLinks) -> Self {
        match NoticeConfig::builtin(None) {
            Ok(config) => Self::new(Arc::new(config), links),
            // The built-in bundle is compiled in and checked by tests: a failure here is a bug.
            Err(problems) => unreachable!("the built-in notice configuration is invalid: {problems:?}"),
        }
    }
}

/// The whole check, every problem in one answer: what the shallow half found (syntax, names,
/// manifest, policy), then the names and coverage of whatever compiled, and the render check
/// only once nothing else is wrong — a render of a half-broken configuration would only repeat
/// the problems above in other words.
fn checked(
    (config, mut problems): (Option<NoticeConfig>, Vec<Problem>),
) -> Result<NoticeConfig, Vec<Problem>> {
    if let Some(config) = &config {
        deep(config, &mut problems);
    }
    problems.sort_by(|a, b| (&a.file, a.line, &a.message).cmp(&(&b.file, b.line, &b.message)));
    problems.dedup();
    match config {
        Some(config) if problems.is_empty() => Ok(config),
        _ => Err(problems),
    }
}

/// The checks that need a compiled configuration.
fn deep(config: &NoticeConfig, problems: &mut Vec<Problem>) {
    let clean = problems.is_empty();
    names(config, problems);
    let policy_kinds: Vec<String> = config.policy().kinds().into_iter().map(str::to_owned).collect();
    coverage(config, &policy_kinds, problems);
    if clean && problems.is_empty() {
        renders(config, policy_kinds, problems);
    }
}

/// Names: every template's kind and locale are ones the manifest declares, and it uses only
/// known variables.
fn names(config: &NoticeConfig, problems: &mut Vec<Problem>) {
    let manifest = config.manifest();
    for (name, source) in config.bundle().templates() {
        let path = format!("{TEMPLATES}{name}");
        let Some((set, _)) = parse_template_name(name) else { continue };
        match Locale::parse(&set.locale, &Icu) {
            Ok(l) if l.as_str() != set.locale => problems.push(Problem::file(
                &path,
                None,
                format!("locale {:?} is written {:?}", set.locale, l.as_str()),
            )),
            Ok(l) if !manifest.locales.contains(&l) => problems.push(Problem::file(
                &path,
                None,
                format!("locale {} is not in the manifest's `locales`", set.locale),
            )),
            Ok(_) => {}
            Err(e) => problems.push(Problem::file(&path, None, format!("locale {:?}: {e}", set.locale))),
        }
        if let Some(kind) = &set.kind {
            if !manifest.kinds.contains(kind) {
                problems.push(Problem::file(
                    &path,
                    None,
                    format!("kind {kind:?} is not in the manifest's `kinds` ({})", list(&manifest.kinds)),
                ));
            }
        }
        // Only known variables: a misspelled name must fail here, not blank out at send time.
        if let Ok(template) = config.env().get_template(name) {
            let mut unknown: Vec<String> = template
                .undeclared_variables(false)
                .into_iter()
                .filter(|v| !manifest.knows_variable(v))
                .collect();
            unknown.sort();
            for v in unknown {
                problems.push(Problem::file(
                    &path,
                    first_line_using(source, &v),
                    format!(
                        "uses unknown variable `{v}` (known: {}; declare job variables in the manifest's `variables`)",
                        manifest.known_variables().join(", ")
                    ),
                ));
            }
        }
    }
}

/// The policy and the texts cover the same kinds.
fn coverage(config: &NoticeConfig, policy_kinds: &[String], problems: &mut Vec<Problem>) {
    let manifest = config.manifest();
    if !manifest.kinds.is_empty() {
        for k in policy_kinds.iter().filter(|k| !manifest.kinds.contains(k)) {
            problems.push(Problem::file(
                "manifest.json",
                None,
                format!("`kinds` lacks {k:?}, which windows.json names"),
            ));
        }
        if !policy_kinds.is_empty() {
            for k in manifest.kinds.iter().filter(|k| !policy_kinds.contains(k)) {
                problems.push(Problem::file(
                    "windows.json",
                    None,
                    format!("has no window for kind {k:?}, which the manifest names (it would be refused)"),
                ));
            }
        }
    }
}

/// Every kind × locale has texts in its own language, and renders everywhere the policy names.
fn renders(config: &NoticeConfig, policy_kinds: Vec<String>, problems: &mut Vec<Problem>) {
    let manifest = config.manifest();
    let kinds: Vec<String> = if manifest.kinds.is_empty() {
        if policy_kinds.is_empty() {
            vec!["any_kind".to_owned()]
        } else {
            policy_kinds
        }
    } else {
        manifest.kinds.clone()
    };
    let mut jurisdictions: Vec<Option<String>> = vec![None];
    jurisdictions.extend(config.policy().jurisdictions().into_iter().map(|j| Some(j.to_owned())));
    let Ok(secret) = NoticeSecret::new("notice-config-check") else {
        unreachable!("a non-empty constant is a valid secret")
    };
    let links = ManageLinks::new("https://manage.example.com/check", secret.clone());
    for kind in &kinds {
        for locale in &manifest.locales {
            let Some(set) = config.resolve(kind, Some(locale)) else {
                problems.push(Problem::file(
                    "manifest.json",
                    None,
                    format!(
                        "no texts answer kind {kind:?} in {locale} (nor in the default locale {})",
                        manifest.default_locale
                    ),
                ));
                continue;
            };
            let texts_language =
                Locale::parse(&set.locale, &Icu).map(|l| l.language().to_owned()).unwrap_or_default();
            if texts_language != locale.language() {
                problems.push(Problem::file(
                    "manifest.json",
                    None,
                    format!(
                        "`locales` names {locale}, but kind {kind:?} has no texts in its language (it would get {})",
                        set.file(PARTS[1])
                    ),
                ));
                continue;
            }
            for jurisdiction in &jurisdictions {
                sample_renders(
                    config,
                    Sample { kind, locale, jurisdiction: jurisdiction.as_deref(), set: &set },
                    &links,
                    &secret,
                    problems,
                );
            }
        }
    }
}

/// One sample of the render check: a kind in a locale (answered by `set`) and a jurisdiction.
struct Sample<'a> {
    kind: &'a str,
    locale: &'a Locale,
    jurisdiction: Option<&'a str>,
    set: &'a TemplateSet,
}

/// The sample job satisfies the policy, renders, and both bodies show every variable the policy
/// requires.
fn sample_renders(
    config: &NoticeConfig,
    sample: Sample<'_>,
    links: &ManageLinks,
    secret: &NoticeSecret,
    problems: &mut Vec<Problem>,
) {
    let Sample { kind, locale, jurisdiction, set } = sample;
    let policy = config.policy();
    let job = match sample_job(config, kind, locale, jurisdiction) {
        Ok(job) => job,
        Err(e) => {
            problems.push(Problem::file("manifest.json", None, format!("sample job: {e}")));
            return;
        }
    };
    let place = jurisdiction.map(|j| format!(" in {j}")).unwrap_or_default();
    if let Err(refusal) = policy.admit(&job, || render::variables(links, &job)) {
        problems.push(Problem::file(
            "manifest.json",
            None,
            format!("the sample variables do not satisfy the policy for {kind}{place}: {refusal}"),
        ));
        return;
    }
    if let Err(e) = render::render(config, links, &job, &job.key(secret)) {
        problems.push(Problem::file(&e.template, None, format!("{kind} / {locale}{place}: {}", e.reason)));
        return;
    }
    // Required content must be *shown*, in both bodies, not only supplied.
    for r in policy.requirements(kind, jurisdiction) {
        for part in ["body.txt", "body.html"] {
            let file = set.file(part);
            let shows = config
                .env()
                .get_template(&file)
                .map(|t| t.undeclared_variables(false).contains(&r.variable))
                .unwrap_or(false);
            if !shows {
                problems.push(Problem::file(
                    &format!("{TEMPLATES}{file}"),
                    None,
                    format!(
                        "never shows `{}`, which windows.json requires for {kind}{place} ({})",
                        r.variable, r.path
                    ),
                ));
            }
        }
    }
}

/// A job of `kind` in `locale` (and `jurisdiction`) carrying the manifest's sample variables.
pub fn sample_job(
    config: &NoticeConfig,
    kind: &str,
    locale: &Locale,
    jurisdiction: Option<&str>,
) -> Result<Job, notice_ledger::error::InvalidJob> {
    let mut body = serde_json::json!({
        "subscription_id": "sub_sample",
        "period_start": "2026-12-31",
        "kind": kind,
        "email": "customer@example.com",
        "charge_at": "2026-12-31T09:00:00Z",
        "locale": locale.as_str(),
        "template_data": Value::Object(config.manifest().variables.clone()),
    });
    if let (Some(j), Some(obj)) = (jurisdiction, body.as_object_mut()) {
        obj.insert("jurisdiction".into(), Value::String(j.to_owned()));
    }
    Job::from_value(&body, &Icu)
}

fn first_line_using(source: &str, variable: &str) -> Option<usize> {
    source
        .lines()
        .position(|l| {
            l.match_indices(variable).any(|(i, _)| {
                let before = l[..i].chars().next_back();
                let after = l[i + variable.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
        .map(|i| i + 1)
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}
