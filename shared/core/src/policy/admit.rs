//! What the policy refuses before any window is worked out: a kind it does not know, and a notice
//! that lacks the content its law requires.
//!
//! A misspelled kind (`annual_renewl`) would otherwise get the default 72 h window — a notice
//! outside the legal window it was meant to have, with no error anywhere. So once a policy lists
//! kinds, every other kind is refused as invalid input, naming the closest known kind, unless the
//! policy says `"other_kinds": "default"`. Statutes also say what a notice must contain (California
//! BPC §17602: the amount, the charge date, how to cancel): `requires` lists template variables
//! that must be present and non-empty, checked on the job's own values before anything is claimed
//! — a built-in default (`plan_name` → "subscription") never satisfies a requirement.
//!
//! Both refusals are [`InvalidJob`]s, so they travel the one path bad input takes (no row, nothing
//! sent, the dead-letter queue with the reason).

use std::fmt;

use serde_json::{Map, Value};

use super::WindowPolicy;
use crate::error::InvalidJob;
use crate::job::Job;

/// The known kinds an "unknown kind" error lists at most.
const MAX_LISTED_KINDS: usize = 20;

/// What a policy does with a kind it does not list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OtherKinds {
    /// Refused as invalid: what a policy that lists kinds does unless it says otherwise.
    Refuse,
    /// Given the `default` window: a policy that lists no kinds (the built-in one included), or
    /// one that says `"other_kinds": "default"`.
    #[default]
    Default,
}

/// An entry of the policy that can carry `requires`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Scope {
    /// `default.requires`: every notice.
    Default,
    Kind(String),
    Jurisdiction(String),
    JurisdictionKind(String, String),
}

impl Scope {
    fn applies(&self, kind: &str, jurisdiction: Option<&str>) -> bool {
        match self {
            Scope::Default => true,
            Scope::Kind(k) => k == kind,
            Scope::Jurisdiction(j) => Some(j.as_str()) == jurisdiction,
            Scope::JurisdictionKind(j, k) => Some(j.as_str()) == jurisdiction && k == kind,
        }
    }

    /// The configuration path of this entry's `requires`.
    pub fn path(&self) -> String {
        match self {
            Scope::Default => "default.requires".to_owned(),
            Scope::Kind(k) => format!("kinds.{k}.requires"),
            Scope::Jurisdiction(j) => format!("jurisdictions.{j}.requires"),
            Scope::JurisdictionKind(j, k) => format!("jurisdictions.{j}.kinds.{k}.requires"),
        }
    }
}

/// One required template variable and the policy field that requires it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    pub variable: String,
    /// E.g. `jurisdictions.US-CA.kinds.annual_renewal.requires`.
    pub path: String,
}

/// A kind the policy does not list, with the closest one it does.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct UnknownKind {
    pub kind: String,
    pub suggestion: Option<String>,
    pub known: Vec<String>,
}

impl fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "names an unknown kind {:?}", self.kind)?;
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean {s:?}?)")?;
        }
        let shown: Vec<&str> = self.known.iter().take(MAX_LISTED_KINDS).map(String::as_str).collect();
        write!(f, "; the policy knows: {}", shown.join(", "))?;
        if self.known.len() > MAX_LISTED_KINDS {
            write!(f, ", … ({} in all)", self.known.len())?;
        }
        Ok(())
    }
}

impl From<UnknownKind> for InvalidJob {
    fn from(e: UnknownKind) -> Self {
        InvalidJob::new("kind", e.to_string())
    }
}

/// A notice without a variable its policy requires.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "has no {variable:?} (missing or empty), which a notice of kind {kind}{} must carry (`{path}`)",
    jurisdiction.as_deref().map(|j| format!(" in {j}")).unwrap_or_default()
)]
pub struct MissingContent {
    pub variable: String,
    pub kind: String,
    pub jurisdiction: Option<String>,
    pub path: String,
}

impl From<MissingContent> for InvalidJob {
    fn from(e: MissingContent) -> Self {
        InvalidJob::new("template_data", e.to_string())
    }
}

/// Why the policy refuses a message before any window is worked out.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(transparent)]
    UnknownKind(#[from] UnknownKind),
    #[error(transparent)]
    MissingContent(#[from] MissingContent),
}

impl From<Refusal> for InvalidJob {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::UnknownKind(e) => e.into(),
            Refusal::MissingContent(e) => e.into(),
        }
    }
}

impl WindowPolicy {
    /// What this policy does with kinds it does not list.
    pub fn other_kinds(&self) -> OtherKinds {
        self.other_kinds
    }

    /// Whether the policy admits `job` at all: a kind it knows, carrying every variable its
    /// (kind, jurisdiction) requires. `variables` gives the job's template variables (as
    /// the renderer's `variables` does) and is only called when something is required.
    /// The one check the sender, its batch prefetch and `noticectl validate` all make.
    pub fn admit(&self, job: &Job, variables: impl FnOnce() -> Map<String, Value>) -> Result<(), Refusal> {
        self.check_kind(job.identity.kind().as_str())?;
        if self.requires_content() {
            self.check_content(job, &variables())?;
        }
        Ok(())
    }

    /// Whether `kind` may be sent (or withdrawn) under this policy.
    pub fn check_kind(&self, kind: &str) -> Result<(), UnknownKind> {
        if self.other_kinds == OtherKinds::Default {
            return Ok(());
        }
        let known = self.kinds();
        if known.contains(&kind) {
            return Ok(());
        }
        let suggestion = known
            .iter()
            .map(|k| (strsim::damerau_levenshtein(kind, k), *k))
            .filter(|(d, k)| *d <= 3.max(k.len() / 4))
            .min()
            .map(|(_, k)| k.to_owned());
        Err(UnknownKind {
            kind: kind.to_owned(),
            suggestion,
            known: known.into_iter().map(str::to_owned).collect(),
        })
    }

    /// Every variable a (kind, jurisdiction) notice must carry, each with the field that requires
    /// it; requirements add up (`default`, the kind, the jurisdiction, the jurisdiction × kind) and
    /// none removes another.
    pub fn requirements(&self, kind: &str, jurisdiction: Option<&str>) -> Vec<Requirement> {
        let mut out: Vec<Requirement> = Vec::new();
        for (scope, variables) in &self.requires {
            if !scope.applies(kind, jurisdiction) {
                continue;
            }
            for v in variables {
                if !out.iter().any(|r| &r.variable == v) {
                    out.push(Requirement { variable: v.clone(), path: scope.path() });
                }
            }
        }
        out
    }

    /// Whether any entry requires content (so a caller can skip building the variables).
    pub fn requires_content(&self) -> bool {
        !self.requires.is_empty()
    }

    /// The first requirement of the job's (kind, jurisdiction) that `variables` (the template
    /// variables as the job supplies them, before any built-in default) leave missing or empty.
    pub fn check_content(&self, job: &Job, variables: &Map<String, Value>) -> Result<(), MissingContent> {
        let kind = job.identity.kind().as_str();
        let jurisdiction = job.jurisdiction.as_deref();
        for r in self.requirements(kind, jurisdiction) {
            if !variables.get(&r.variable).is_some_and(present) {
                return Err(MissingContent {
                    variable: r.variable,
                    kind: kind.to_owned(),
                    jurisdiction: jurisdiction.map(str::to_owned),
                    path: r.path,
                });
            }
        }
        Ok(())
    }

    /// Whether the policy names `jurisdiction` (a job from anywhere else gets its kind's window,
    /// and is counted as `UnlistedJurisdiction`).
    pub fn names_jurisdiction(&self, jurisdiction: &str) -> bool {
        self.jurisdictions.contains_key(jurisdiction)
            || self.jurisdiction_floors_hours.contains_key(jurisdiction)
    }
}

/// Present and non-empty: not null, not a blank string, not an empty list or object.
fn present(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::String(s) => !s.trim().is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Bool(_) | Value::Number(_) => true,
    }
}
