//! The manifest (`manifest.json`): what a notice configuration says it covers — its name, its
//! default language, the locales and kinds it has texts for, and the variables its texts may use
//! (each with a sample value, which `config check` and `config preview` render with).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::bundle::{BundleError, MANIFEST};
use crate::locale::{Icu, Locale};
use notice_ledger::identity::Kind;

/// A checked manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    pub name: String,
    pub description: Option<String>,
    /// The language every kind must have texts in: the last step of every fallback chain.
    pub default_locale: Locale,
    /// The locales the texts cover, the default among them.
    pub locales: Vec<Locale>,
    /// The kinds the texts cover; empty: any kind (then texts must not be per kind).
    pub kinds: Vec<String>,
    /// The job variables (`template_data` keys) the texts may use, with sample values.
    pub variables: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: String,
    #[serde(default)]
    description: Option<String>,
    default_locale: String,
    #[serde(default)]
    locales: Vec<String>,
    #[serde(default)]
    kinds: Vec<String>,
    #[serde(default)]
    variables: Map<String, Value>,
}

/// Variables every notice has, whatever its job carries: the renderer derives them.
pub const DERIVED_VARIABLES: [&str; 9] = [
    "charge_at",
    "charge_date",
    "subscription_id",
    "kind",
    "revision",
    "period_start",
    "manage_url",
    "locale",
    "time_zone",
];

impl Manifest {
    /// The manifest and every mistake in it. A mistake in one entry (a bad locale, a kind's
    /// spelling) is reported and that entry left out, so the rest of the configuration is still
    /// checked in the same run; only JSON that does not parse, or a bad `name` or
    /// `default_locale`, leaves no manifest to check against.
    pub fn parse(text: &str) -> (Option<Self>, Vec<BundleError>) {
        let err = |reason: String| BundleError::new(Some(MANIFEST), reason);
        let raw: Raw = match serde_json::from_str(text) {
            Ok(raw) => raw,
            Err(e) => return (None, vec![err(format!("line {}: {e}", e.line()))]),
        };
        let mut problems = Vec::new();
        if raw.name.trim().is_empty() {
            problems.push(err("`name` is empty".into()));
        }
        let default_locale = match Locale::parse(&raw.default_locale, &Icu) {
            Ok(l) => Some(l),
            Err(e) => {
                problems.push(err(format!("`default_locale`: {e}")));
                None
            }
        };
        let mut locales = Vec::new();
        for l in &raw.locales {
            match Locale::parse(l, &Icu) {
                Ok(locale) if locales.contains(&locale) => {
                    problems.push(err(format!("`locales` names {l:?} twice")));
                }
                Ok(locale) => locales.push(locale),
                Err(e) => problems.push(err(format!("`locales`: {e}"))),
            }
        }
        for k in &raw.kinds {
            if let Err(e) = Kind::parse(k) {
                problems.push(err(format!("`kinds`: {k:?} {}", e.reason)));
            }
        }
        for name in raw.variables.keys() {
            if DERIVED_VARIABLES.contains(&name.as_str()) {
                problems.push(err(format!(
                    "`variables` names {name:?}, which every notice has already (it is derived from the job)"
                )));
            }
        }
        let Some(default_locale) = default_locale.filter(|_| !raw.name.trim().is_empty()) else {
            return (None, problems);
        };
        if !locales.contains(&default_locale) {
            locales.insert(0, default_locale.clone());
        }
        let kinds = raw.kinds.into_iter().filter(|k| Kind::parse(k).is_ok()).collect();
        let manifest = Self {
            name: raw.name,
            description: raw.description,
            default_locale,
            locales,
            kinds,
            variables: raw.variables,
        };
        (Some(manifest), problems)
    }

    /// Whether a template may use `name`.
    pub fn knows_variable(&self, name: &str) -> bool {
        DERIVED_VARIABLES.contains(&name) || self.variables.contains_key(name)
    }

    /// Every variable a template may use, sorted.
    pub fn known_variables(&self) -> Vec<String> {
        let mut all: Vec<String> =
            DERIVED_VARIABLES.iter().map(|s| (*s).to_owned()).chain(self.variables.keys().cloned()).collect();
        all.sort();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names_the_mistake() {
        let parse = |text: &str| match Manifest::parse(text) {
            (Some(m), problems) if problems.is_empty() => Ok(m),
            (_, problems) => Err(problems.into_iter().map(|p| p.reason).collect::<Vec<_>>().join("; ")),
        };
        let m = parse(r#"{"name":"a","default_locale":"de","locales":["de-AT"],"kinds":["annual_renewal"]}"#)
            .unwrap();
        assert_eq!(m.locales.iter().map(Locale::as_str).collect::<Vec<_>>(), ["de", "de-AT"]);
        let e = parse("{\"name\":\"a\",\n\"default_locale\":\"de\",\n\"kind\":[]}").unwrap_err();
        assert!(e.contains("line 3") && e.contains("kind"), "{e}");
        let e = parse(r#"{"name":"a","default_locale":"de","kinds":["Annual"]}"#).unwrap_err();
        assert!(e.contains("Annual"), "{e}");
        let e = parse(r#"{"name":"a","default_locale":"de","variables":{"manage_url":"x"}}"#).unwrap_err();
        assert!(e.contains("manage_url"), "{e}");
        assert!(parse(r#"{"name":"a","default_locale":"not a locale!"}"#).is_err());
    }

    #[test]
    fn every_mistake_is_named_and_the_rest_is_still_a_manifest() {
        let (manifest, problems) = Manifest::parse(
            r#"{"name":"a","default_locale":"en","locales":["fr","not a locale!","fr"],
                "kinds":["Annual","annual_renewal"]}"#,
        );
        let reasons: Vec<String> = problems.into_iter().map(|p| p.reason).collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(reasons[0].contains("not a locale!"), "{reasons:?}");
        assert!(reasons[1].contains("twice"), "{reasons:?}");
        assert!(reasons[2].contains("Annual"), "{reasons:?}");
        let manifest = manifest.expect("the good entries still make a manifest to check against");
        assert_eq!(manifest.locales.iter().map(Locale::as_str).collect::<Vec<_>>(), ["en", "fr"]);
        assert_eq!(manifest.kinds, ["annual_renewal"]);
    }
}
