//! The notice configuration: the merchant's texts per kind and locale, the windows policy in force
//! and a manifest, as one versioned unit. Why one unit: the text a customer got and the law it was
//! judged under must be recorded together, by one version, and changed together by one publish.
//!
//! - [`bundle`]: the files, packed into one content-addressed object (its SHA-256 is the version);
//! - [`manifest`]: what the configuration says it covers;
//! - this module: a loaded configuration ([`NoticeConfig`]): compiled templates, the policy, and
//!   which template answers a (kind, locale);
//! - the whole check (`noticectl config check`, every sender's start) renders the texts, so it
//!   sits above rendering, in the crate's `config_check`.
//!
//! Template names, inside `templates/`: `<kind>.<locale>.<part>` for one kind, or `<locale>.<part>`
//! for every kind, where `<part>` is `subject.txt`, `body.txt` or `body.html`. A (kind, locale) is
//! answered by the first locale of its fallback chain (`de-AT` → `de` → the default locale) that
//! has texts, the kind's own before the shared ones. A loaded configuration always answers its
//! default locale (the check makes sure), so nothing falls back to texts outside it.

pub mod bundle;
pub mod config;
pub mod manifest;
pub mod problem;

pub use bundle::{Bundle, BundleError, ConfigVersion};
pub use config::{parse_template_name, NoticeConfig, SharedConfig, TemplateSet, PARTS};
pub use manifest::Manifest;
pub use problem::Problem;
