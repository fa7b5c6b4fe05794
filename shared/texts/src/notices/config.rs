//! A loaded notice configuration: its compiled templates, its policy and manifest, and which
//! texts answer a (kind, locale). Made only through the whole check (`NoticeConfig::load`,
//! `NoticeConfig::builtin`, beside the renderer that check uses), so every configuration in use has passed the whole check.

use std::collections::BTreeMap;
use std::sync::Arc;

use minijinja::{AutoEscape, Environment, UndefinedBehavior};

use super::bundle::{self, Bundle, BundleError, ConfigVersion};
use super::manifest::Manifest;
use super::problem::Problem;
use crate::locale::{fallback_chain, Locale};
use notice_ledger::policy::WindowPolicy;
pub use notice_ledger::render::TemplateSet;

/// The three parts of a notice, in the order they are rendered.
pub const PARTS: [&str; 3] = ["subject.txt", "body.txt", "body.html"];

/// The built-in texts (English), for local runs and tests without a configuration of their own.
pub(crate) const BUILTIN_TEMPLATES: [(&str, &str); 3] = [
    ("templates/en.subject.txt", include_str!("../../templates/en.subject.txt")),
    ("templates/en.body.txt", include_str!("../../templates/en.body.txt")),
    ("templates/en.body.html", include_str!("../../templates/en.body.html")),
];
pub(crate) const BUILTIN_MANIFEST: &str = include_str!("../../templates/manifest.json");

/// A template file name read back: its set and part. `None`: not a template name.
pub fn parse_template_name(name: &str) -> Option<(TemplateSet, &'static str)> {
    let part = PARTS.iter().find(|p| name.ends_with(&format!(".{p}")))?;
    let stem = &name[..name.len() - part.len() - 1];
    let (kind, locale) = match stem.split_once('.') {
        Some((kind, locale)) => (Some(kind.to_owned()), locale),
        None => (None, stem),
    };
    if locale.is_empty() || locale.contains('.') || kind.as_deref() == Some("") {
        return None;
    }
    Some((TemplateSet { kind, locale: locale.to_owned() }, part))
}

/// A loaded notice configuration: its version, manifest, policy and compiled templates.
pub struct NoticeConfig {
    version: ConfigVersion,
    bundle: Bundle,
    manifest: Manifest,
    policy: WindowPolicy,
    env: Environment<'static>,
    /// Every complete set of texts, by (kind, locale).
    sets: BTreeMap<TemplateSet, ()>,
    builtin: bool,
}

impl std::fmt::Debug for NoticeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoticeConfig")
            .field("version", &self.version)
            .field("name", &self.manifest.name)
            .finish()
    }
}

impl NoticeConfig {
    /// Parses the manifest and policy and compiles every template; the shallow half of the check.
    /// Answers the configuration whenever its manifest and policy parse — even beside broken
    /// templates — so that the deep half can still report every other problem in the same run
    /// (a template's syntax error must not hide a misspelled variable in the next file). A
    /// configuration answered beside problems is only ever checked, never loaded.
    pub(crate) fn compile(bundle: Bundle, builtin: bool) -> (Option<Self>, Vec<Problem>) {
        let mut problems = Vec::new();
        let manifest = match bundle.get(bundle::MANIFEST) {
            None => Err(vec![BundleError::new(Some(bundle::MANIFEST), "is missing")]),
            Some(text) => match Manifest::parse(text) {
                (Some(manifest), mistakes) => {
                    problems.extend(mistakes.into_iter().map(Problem::from));
                    Ok(manifest)
                }
                (None, mistakes) => Err(mistakes),
            },
        };
        let policy = match bundle.get(bundle::WINDOWS) {
            None => Err(Problem::file(bundle::WINDOWS, None, "is missing")),
            Some(text) => {
                WindowPolicy::from_json(text).map_err(|e| Problem::file(bundle::WINDOWS, None, e.to_string()))
            }
        };
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::SemiStrict);
        env.set_formatter(html_formatter);
        // Every set's parts as the bundle has them; a part that does not compile is still there
        // (its syntax error is its own problem, never "the set has no …"), but its set is not
        // complete, so nothing renders with it.
        let mut sets: BTreeMap<TemplateSet, (Vec<&str>, bool)> = BTreeMap::new();
        for (name, source) in bundle.templates() {
            let path = format!("{}{name}", bundle::TEMPLATES);
            let Some((set, part)) = parse_template_name(name) else {
                problems.push(Problem::file(
                    &path,
                    None,
                    "is not a template name: <kind>.<locale>.<part> or <locale>.<part>, <part> one of \
                     subject.txt, body.txt, body.html",
                ));
                continue;
            };
            let compiled = match env.add_template_owned(name.to_owned(), source.to_owned()) {
                Ok(()) => true,
                Err(e) => {
                    problems.push(Problem::file(&path, e.line(), template_error(&e)));
                    false
                }
            };
            let entry = sets.entry(set).or_insert_with(|| (Vec::new(), true));
            entry.0.push(part);
            entry.1 &= compiled;
        }
        let manifest = match manifest {
            Ok(m) => Some(m),
            Err(mistakes) => {
                problems.extend(mistakes.into_iter().map(Problem::from));
                None
            }
        };
        let policy = match policy {
            Ok(p) => Some(p),
            Err(p) => {
                problems.push(p);
                None
            }
        };
        let mut complete = BTreeMap::new();
        for (set, (parts, compiled)) in sets {
            let missing: Vec<&str> = PARTS.iter().copied().filter(|p| !parts.contains(p)).collect();
            if missing.is_empty() {
                if compiled {
                    complete.insert(set, ());
                }
            } else {
                problems.push(Problem::file(
                    &format!("{}{}", bundle::TEMPLATES, set.file(parts[0])),
                    None,
                    format!(
                        "its set has no {} (a set is subject.txt, body.txt and body.html)",
                        missing.join(", ")
                    ),
                ));
            }
        }
        let config = match (manifest, policy) {
            (Some(manifest), Some(policy)) => Some(Self {
                version: bundle.version(),
                bundle,
                manifest,
                policy,
                env,
                sets: complete,
                builtin,
            }),
            _ => None,
        };
        (config, problems)
    }

    pub fn version(&self) -> &ConfigVersion {
        &self.version
    }

    pub fn bundle(&self) -> &Bundle {
        &self.bundle
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub fn policy(&self) -> &WindowPolicy {
        &self.policy
    }

    /// Whether these are the built-in texts (start-up logs say so).
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }

    /// The compiled templates.
    pub(crate) fn env(&self) -> &Environment<'static> {
        &self.env
    }

    /// Every complete set of texts.
    pub fn sets(&self) -> impl Iterator<Item = &TemplateSet> {
        self.sets.keys()
    }

    /// The texts answering `kind` in `locale` (`None`: the default locale): the first locale of
    /// the fallback chain with texts, the kind's own before the shared ones.
    pub fn resolve(&self, kind: &str, locale: Option<&Locale>) -> Option<TemplateSet> {
        let mut chain: Vec<String> = locale.map(fallback_chain).unwrap_or_default();
        chain.extend(fallback_chain(&self.manifest.default_locale));
        for loc in chain {
            for k in [Some(kind.to_owned()), None] {
                let set = TemplateSet { kind: k, locale: loc.clone() };
                if self.sets.contains_key(&set) {
                    return Some(set);
                }
            }
        }
        None
    }
}

/// One config, shared by every message in flight; swapped whole when a new version is loaded.
pub type SharedConfig = Arc<NoticeConfig>;

/// HTML escaping without minijinja's `/` → `&#x2f;`: links stay ordinary URLs in their
/// attributes (link checkers and click tracking follow them), and `&`, `<`, `>`, `"`, `'` — what
/// can break out of text or a quoted attribute — are still escaped.
fn html_formatter(
    out: &mut minijinja::Output,
    state: &minijinja::State,
    value: &minijinja::Value,
) -> Result<(), minijinja::Error> {
    if state.auto_escape() != AutoEscape::Html || value.is_safe() || value.is_undefined() || value.is_none() {
        return minijinja::escape_formatter(out, state, value);
    }
    let text = value.to_string();
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#x27;"),
            c => escaped.push(c),
        }
    }
    out.write_str(&escaped)
        .map_err(|_| minijinja::Error::new(minijinja::ErrorKind::WriteFailure, "write failed"))
}

/// A template error in one line: what went wrong, without minijinja's source excerpt.
pub(crate) fn template_error(e: &minijinja::Error) -> String {
    match e.detail() {
        Some(detail) => format!("{}: {detail}", e.kind()),
        None => e.kind().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locale::Icu;

    #[test]
    fn template_names_read_back() {
        let (set, part) = parse_template_name("annual_renewal.de-AT.body.html").unwrap();
        assert_eq!(
            (set.kind.as_deref(), set.locale.as_str(), part),
            (Some("annual_renewal"), "de-AT", "body.html")
        );
        assert_eq!(set.file("subject.txt"), "annual_renewal.de-AT.subject.txt");
        assert_eq!(set.label(), "annual_renewal/de-AT");
        let (set, _) = parse_template_name("en.subject.txt").unwrap();
        assert_eq!((set.kind.as_deref(), set.label().as_str()), (None, "*/en"));
        assert!(parse_template_name("en.body.md").is_none());
        assert!(parse_template_name("a.b.c.body.txt").is_none());
        assert!(parse_template_name(".body.txt").is_none());
    }

    #[test]
    fn builtin_loads_and_answers_any_locale_in_english() {
        let config = NoticeConfig::builtin(None).unwrap();
        assert!(config.is_builtin());
        let de = Locale::parse("de-AT", &Icu).unwrap();
        assert_eq!(config.resolve("anything", Some(&de)).unwrap().label(), "*/en");
        let other =
            NoticeConfig::builtin(Some(r#"{"default":{"opens_hours_before":48,"closes_hours_before":24}}"#))
                .unwrap();
        assert_ne!(config.version(), other.version(), "the policy is part of the version");
    }
}
