//! The legal send window: a pure function of (job, now).
//!
//! A reminder must reach the customer while they can still cancel. By default the window opens
//! 72 h and closes 24 h before `charge_at`; a notice kind may have its own window, and a
//! jurisdiction may bound both sides of it — a ceiling on how early the window may open and a
//! floor on how late it may close — because real rules do (California wants an annual renewal's
//! notice 15 to 45 days before the charge). Configuration comes as JSON (docs/configuration.md,
//! "Send windows"; a worked example in docs/windows/us-ca-arl.json):
//!
//! ```json
//! { "default": { "opens_hours_before": 72, "closes_hours_before": 24 },
//!   "kinds": { "annual_renewal": { "opens_hours_before": 1440, "closes_hours_before": 168 } },
//!   "jurisdictions": { "US-CA": { "kinds": { "annual_renewal":
//!       { "opens_at_most_hours_before": 1080, "closes_at_least_hours_before": 360 } } } },
//!   "jurisdiction_floors_hours": { "US-NY": 48 } }
//! ```
//!
//! The effective window for (kind, jurisdiction) is the kind's window (or `default`) with
//! `opens = min(kind opens, opens_at_most)` and `closes = max(kind closes, closes_at_least)`; a
//! jurisdiction's per-kind entry overrides its general bounds field by field, and
//! `jurisdiction_floors_hours.J` is shorthand for `jurisdictions.J.closes_at_least_hours_before`.
//! Every combination must leave a non-empty window, checked at start-up ([`WindowPolicy::validate`]).
//!
//! Before any window: once the policy lists kinds, an unlisted kind is refused as invalid
//! (`"other_kinds": "default"` keeps the older behaviour), and `requires` names the template
//! variables a notice must carry (`admit.rs`). Jurisdictions are ISO 3166 codes in upper case,
//! as jobs are normalised to ([`crate::jurisdiction`]).
//!
//! Files: this one holds the model and the decision; `admit.rs` the refusals before it;
//! `parse.rs` reads the JSON, naming the field path of anything wrong.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};

use crate::job::Job;

mod admit;
pub mod obligations;
mod parse;

pub use admit::{MissingContent, OtherKinds, Refusal, Requirement, UnknownKind};
pub use obligations::{Contract, Fact, Holds, Obligations, Occasion, Owed, Rule, RuleScope, Term, Unowed};

/// Where a window opens and closes, counted back from the charge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub opens_hours_before: u32,
    pub closes_hours_before: u32,
}

impl Default for Window {
    fn default() -> Self {
        Self { opens_hours_before: 72, closes_hours_before: 24 }
    }
}

impl Window {
    /// The opening instant (inclusive) for a charge at `charge_at`.
    pub fn opens_at(&self, charge_at: DateTime<Utc>) -> DateTime<Utc> {
        charge_at - Duration::hours(i64::from(self.opens_hours_before))
    }

    /// The closing instant (exclusive) for a charge at `charge_at`.
    pub fn closes_at(&self, charge_at: DateTime<Utc>) -> DateTime<Utc> {
        charge_at - Duration::hours(i64::from(self.closes_hours_before))
    }

    /// Whether `at` lies inside the window of a charge at `charge_at`.
    pub fn contains(&self, charge_at: DateTime<Utc>, at: DateTime<Utc>) -> bool {
        self.opens_at(charge_at) <= at && at < self.closes_at(charge_at)
    }
}

/// A jurisdiction's bounds on a window, in hours before the charge. `None`: that side is not
/// bounded here (a per-kind entry then falls back to the jurisdiction's general bound).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bounds {
    /// The ceiling: the window opens no earlier than this.
    pub opens_at_most_hours_before: Option<u32>,
    /// The floor: the window closes no later than this.
    pub closes_at_least_hours_before: Option<u32>,
}

/// One entry of `jurisdictions`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct JurisdictionRules {
    bounds: Bounds,
    kinds: BTreeMap<String, Bounds>,
}

/// What to do with a job right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowDecision {
    /// Inside the window; it closes at `closes_at`.
    Send { closes_at: DateTime<Utc> },
    /// Too early: not claimed, not sent; come back at `until` (the window closes at `closes_at`).
    Defer { until: DateTime<Utc>, closes_at: DateTime<Utc> },
    /// The window has closed: never send, record it.
    Missed { closed_at: DateTime<Utc> },
}

/// Which setting one side of an effective window came from, so a reviewer can trace every bound
/// to the line of configuration that set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundSource<'a> {
    /// `default` (the kind has no window of its own).
    Default,
    /// `kinds.<kind>`.
    Kind(&'a str),
    /// `jurisdictions.<j>`: the jurisdiction's general bound.
    Jurisdiction(&'a str),
    /// `jurisdictions.<j>.kinds.<kind>`: the jurisdiction's bound for this kind.
    JurisdictionKind(&'a str, &'a str),
    /// `jurisdiction_floors_hours.<j>` (the floor-only shorthand).
    Floor(&'a str),
}

/// A side of a window, for naming the configuration field that set it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Opens,
    Closes,
}

impl BoundSource<'_> {
    /// The configuration path of the field that set `side`, e.g.
    /// `jurisdictions.US-CA.kinds.trial_conversion.opens_at_most_hours_before`.
    pub fn path(&self, side: Side) -> String {
        let (window_field, bound_field) = match side {
            Side::Opens => ("opens_hours_before", "opens_at_most_hours_before"),
            Side::Closes => ("closes_hours_before", "closes_at_least_hours_before"),
        };
        match self {
            BoundSource::Default => format!("default.{window_field}"),
            BoundSource::Kind(k) => format!("kinds.{k}.{window_field}"),
            BoundSource::Jurisdiction(j) => format!("jurisdictions.{j}.{bound_field}"),
            BoundSource::JurisdictionKind(j, k) => format!("jurisdictions.{j}.kinds.{k}.{bound_field}"),
            BoundSource::Floor(j) => format!("jurisdiction_floors_hours.{j}"),
        }
    }

    /// Whether a jurisdiction (rather than the kind's own window) set this side.
    pub fn is_jurisdiction(&self) -> bool {
        matches!(
            self,
            BoundSource::Jurisdiction(_) | BoundSource::JurisdictionKind(..) | BoundSource::Floor(_)
        )
    }
}

/// The window a (kind, jurisdiction) gets, and where each side came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Effective<'a> {
    pub window: Window,
    pub opens_from: BoundSource<'a>,
    pub closes_from: BoundSource<'a>,
}

impl Effective<'_> {
    /// Empty when it closes no later than it opens: such a window can never send.
    pub fn is_empty(&self) -> bool {
        self.window.closes_hours_before >= self.window.opens_hours_before
    }
}

/// The send-window configuration (`NOTICE_WINDOWS`), validated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowPolicy {
    default: Window,
    kinds: BTreeMap<String, Window>,
    jurisdictions: BTreeMap<String, JurisdictionRules>,
    jurisdiction_floors_hours: BTreeMap<String, u32>,
    /// Free-text notes (`description` fields) by their path: ignored by the decision, shown by
    /// `noticectl windows` so a reviewed policy can carry its references.
    descriptions: Vec<(String, String)>,
    /// Kinds the policy does not list: refused, or given `default` (see `admit.rs`).
    other_kinds: OtherKinds,
    /// `requires` of every entry that has one (see `admit.rs`).
    requires: BTreeMap<admit::Scope, Vec<String>>,
    /// Which kinds a contract owes (`obligations.rs`); empty when the policy has none.
    obligations: Obligations,
}

fn invalid(reason: String) -> PolicyError {
    PolicyError(reason)
}

/// A windows policy that cannot be used, naming the field and what is wrong with it. Where the
/// policy came from — a configuration's `windows.json`, `--windows FILE`, `NOTICE_WINDOWS` — is
/// the caller's to say, in the words the user gave it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PolicyError(pub String);

/// A policy read from the environment: the variable names it.
impl From<PolicyError> for crate::error::ConfigError {
    fn from(e: PolicyError) -> Self {
        Self::Invalid { name: "NOTICE_WINDOWS", reason: e.0 }
    }
}

impl WindowPolicy {
    /// Parses and checks the JSON configuration. Unknown fields, bounds that are not whole
    /// non-negative numbers of hours, and empty windows are errors naming the field.
    pub fn from_json(text: &str) -> Result<Self, PolicyError> {
        let policy = parse::policy(text)?;
        policy.validate()?;
        Ok(policy)
    }

    /// Every combination of kind and jurisdiction must leave a non-empty window: a policy that can
    /// never send is a configuration error, found at start-up rather than as a stream of missed
    /// notices. A jurisdiction's ceiling must also lie above its floor.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.other_kinds == OtherKinds::Refuse && self.kinds().is_empty() {
            return Err(invalid(
                "`other_kinds` is \"refuse\" but the policy lists no kinds: it would refuse every job"
                    .to_owned(),
            ));
        }
        for (j, rules) in &self.jurisdictions {
            let general_floor = rules
                .bounds
                .closes_at_least_hours_before
                .map(|f| (f, BoundSource::Jurisdiction(j)))
                .or_else(|| self.jurisdiction_floors_hours.get(j).map(|f| (*f, BoundSource::Floor(j))));
            let general = (
                rules.bounds.opens_at_most_hours_before.map(|c| (c, BoundSource::Jurisdiction(j))),
                general_floor,
            );
            let per_kind = rules.kinds.iter().map(|(k, b)| {
                let jk = BoundSource::JurisdictionKind(j, k);
                (
                    b.opens_at_most_hours_before.map(|c| (c, jk)).or(general.0),
                    b.closes_at_least_hours_before.map(|f| (f, jk)).or(general.1),
                )
            });
            for (ceiling, floor) in std::iter::once(general).chain(per_kind) {
                if let (Some((c, c_from)), Some((f, f_from))) = (ceiling, floor) {
                    if c <= f {
                        return Err(invalid(format!(
                            "`{}` ({c} h) must be greater than `{}` ({f} h): a ceiling at or below the floor leaves no window",
                            c_from.path(Side::Opens),
                            f_from.path(Side::Closes)
                        )));
                    }
                }
            }
        }
        for (scope, rule) in self.obligations.rules() {
            if let Err(unknown) = self.check_kind(&rule.kind) {
                return Err(invalid(format!("obligation rule `{}` ({scope}) {unknown}", rule.name)));
            }
        }
        let kinds = std::iter::once(None).chain(self.kinds().into_iter().map(Some));
        for kind in kinds {
            let jurisdictions = std::iter::once(None).chain(self.jurisdictions().into_iter().map(Some));
            for jurisdiction in jurisdictions {
                let e = self.effective(kind, jurisdiction);
                if e.is_empty() {
                    return Err(invalid(format!(
                        "the window for {} in {} is empty: it opens {} h before the charge (`{}`) but closes {} h before (`{}`)",
                        kind.map_or("kinds not listed (`default`)".to_owned(), |k| format!("kind `{k}`")),
                        jurisdiction.map_or("no jurisdiction".to_owned(), |j| format!("jurisdiction `{j}`")),
                        e.window.opens_hours_before,
                        e.opens_from.path(Side::Opens),
                        e.window.closes_hours_before,
                        e.closes_from.path(Side::Closes),
                    )));
                }
            }
        }
        Ok(())
    }

    /// The earliest any window opens, in hours before the charge (a jurisdiction only ever moves
    /// an opening later, so the kind windows decide it).
    pub fn longest_opening_hours(&self) -> u32 {
        self.kinds.values().chain([&self.default]).map(|w| w.opens_hours_before).max().unwrap_or(0)
    }

    /// Every kind the policy names: its own window under `kinds`, or bounds under a jurisdiction.
    pub fn kinds(&self) -> Vec<&str> {
        let named = self.kinds.keys().chain(self.jurisdictions.values().flat_map(|r| r.kinds.keys()));
        named.map(String::as_str).collect::<BTreeSet<_>>().into_iter().collect()
    }

    /// Every jurisdiction the policy bounds (`jurisdictions` and `jurisdiction_floors_hours`).
    pub fn jurisdictions(&self) -> Vec<&str> {
        let named = self.jurisdictions.keys().chain(self.jurisdiction_floors_hours.keys());
        named.map(String::as_str).collect::<BTreeSet<_>>().into_iter().collect()
    }

    /// The earliest any owed renewal or trial notice's window opens, in hours before the charge,
    /// with its rule (scope and name): how early a billing system's "upcoming renewal" event must
    /// come for every owed notice to be parked in time rather than missed. `None` without
    /// obligations for those occasions.
    pub fn earliest_owed_opening(&self) -> Option<(u32, String)> {
        self.obligations
            .rules()
            .filter(|(_, r)| r.on != Occasion::PriceChange)
            .map(|(scope, r)| {
                let j = match scope {
                    obligations::RuleScope::Default => None,
                    obligations::RuleScope::Jurisdiction(j) => Some(j),
                };
                (self.effective(Some(&r.kind), j).window.opens_hours_before, format!("{scope}/{}", r.name))
            })
            .max_by_key(|(hours, _)| *hours)
    }

    /// Which kinds a contract owes (`obligations`; empty when the policy has none).
    pub fn obligations(&self) -> &Obligations {
        &self.obligations
    }

    /// The policy's `description` notes, each with the path of the object it describes (`""`
    /// for the top level).
    pub fn descriptions(&self) -> &[(String, String)] {
        &self.descriptions
    }

    /// The effective window for `kind` (`None`: a kind the policy does not list) in
    /// `jurisdiction` (`None`, or one without an entry: the kind's own window, as it always was).
    pub fn effective<'a>(&'a self, kind: Option<&str>, jurisdiction: Option<&str>) -> Effective<'a> {
        let (window, from) = match kind.and_then(|k| self.kinds.get_key_value(k)) {
            Some((k, w)) => (*w, BoundSource::Kind(k.as_str())),
            None => (self.default, BoundSource::Default),
        };
        let mut e = Effective { window, opens_from: from, closes_from: from };
        let Some(j) = jurisdiction else { return e };
        let rules = self.jurisdictions.get_key_value(j);
        let per_kind =
            rules.and_then(|(j, r)| kind.and_then(|k| r.kinds.get_key_value(k)).map(|(k, b)| (j, k, b)));
        let ceiling = per_kind
            .and_then(|(j, k, b)| {
                b.opens_at_most_hours_before.map(|h| (h, BoundSource::JurisdictionKind(j, k)))
            })
            .or_else(|| {
                rules.and_then(|(j, r)| {
                    r.bounds.opens_at_most_hours_before.map(|h| (h, BoundSource::Jurisdiction(j)))
                })
            });
        let floor = per_kind
            .and_then(|(j, k, b)| {
                b.closes_at_least_hours_before.map(|h| (h, BoundSource::JurisdictionKind(j, k)))
            })
            .or_else(|| {
                rules.and_then(|(j, r)| {
                    r.bounds.closes_at_least_hours_before.map(|h| (h, BoundSource::Jurisdiction(j)))
                })
            })
            .or_else(|| {
                self.jurisdiction_floors_hours.get_key_value(j).map(|(j, h)| (*h, BoundSource::Floor(j)))
            });
        if let Some((hours, source)) = ceiling {
            if hours < e.window.opens_hours_before {
                e.window.opens_hours_before = hours;
                e.opens_from = source;
            }
        }
        if let Some((hours, source)) = floor {
            if hours > e.window.closes_hours_before {
                e.window.closes_hours_before = hours;
                e.closes_from = source;
            }
        }
        e
    }

    /// The effective window for a job: its kind's window within its jurisdiction's bounds.
    pub fn window_for(&self, job: &Job) -> Window {
        self.effective(Some(job.identity.kind().as_str()), job.jurisdiction.as_deref()).window
    }

    /// Opening instant inclusive, closing instant exclusive.
    pub fn decide(&self, job: &Job, now: DateTime<Utc>) -> WindowDecision {
        let window = self.window_for(job);
        let opens_at = window.opens_at(job.charge_at);
        let closes_at = window.closes_at(job.charge_at);
        if now < opens_at {
            WindowDecision::Defer { until: opens_at, closes_at }
        } else if now >= closes_at {
            WindowDecision::Missed { closed_at: closes_at }
        } else {
            WindowDecision::Send { closes_at }
        }
    }
}

#[cfg(test)]
mod tests;
