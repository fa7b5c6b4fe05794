//! The manifest (`manifest.json`): what a notice configuration says it covers — its name, its
//! default language, the locales and kinds it has texts for, and the variables its texts may use
//! (each with a sample value, which `config check` and `config preview` render with).

use serde::Deserialize;
use serde_json::{Map, Value};

use super::bundle::{BundleError, MANIFEST};
use crate::identity::Kind;
use crate::locale::Locale;

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
    pub fn parse(text: &str) -> Result<Self, BundleError> {
        let raw: Raw = serde_json::from_str(text)
            .map_err(|e| BundleError::new(Some(MANIFEST), format!("line {}: {e}", e.line())))?;
        let err = |reason: String| BundleError::new(Some(MANIFEST), reason);
        if raw.name.trim().is_empty() {
            return Err(err("`name` is empty".into()));
        }
        let default_locale =
            Locale::parse(&raw.default_locale).map_err(|e| err(format!("`default_locale`: {e}")))?;
        let mut locales = Vec::new();
        for l in &raw.locales {
            let locale = Locale::parse(l).map_err(|e| err(format!("`locales`: {e}")))?;
            if locales.contains(&locale) {
                return Err(err(format!("`locales` names {l:?} twice")));
            }
            locales.push(locale);
        }
        if !locales.contains(&default_locale) {
            locales.insert(0, default_locale.clone());
        }
        for k in &raw.kinds {
            Kind::parse(k).map_err(|e| err(format!("`kinds`: {k:?} {}", e.reason)))?;
        }
        for name in raw.variables.keys() {
            if DERIVED_VARIABLES.contains(&name.as_str()) {
                return Err(err(format!(
                    "`variables` names {name:?}, which every notice has already (it is derived from the job)"
                )));
            }
        }
        Ok(Self {
            name: raw.name,
            description: raw.description,
            default_locale,
            locales,
            kinds: raw.kinds,
            variables: raw.variables,
        })
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
        let m = Manifest::parse(
            r#"{"name":"a","default_locale":"de","locales":["de-AT"],"kinds":["annual_renewal"]}"#,
        )
        .unwrap();
        assert_eq!(m.locales.iter().map(Locale::as_str).collect::<Vec<_>>(), ["de", "de-AT"]);
        let e = Manifest::parse("{\"name\":\"a\",\n\"default_locale\":\"de\",\n\"kind\":[]}").unwrap_err();
        assert!(e.reason.contains("line 3") && e.reason.contains("kind"), "{e}");
        let e = Manifest::parse(r#"{"name":"a","default_locale":"de","kinds":["Annual"]}"#).unwrap_err();
        assert!(e.reason.contains("Annual"), "{e}");
        let e = Manifest::parse(r#"{"name":"a","default_locale":"de","variables":{"manage_url":"x"}}"#)
            .unwrap_err();
        assert!(e.reason.contains("manage_url"), "{e}");
        assert!(Manifest::parse(r#"{"name":"a","default_locale":"not a locale!"}"#).is_err());
    }
}
