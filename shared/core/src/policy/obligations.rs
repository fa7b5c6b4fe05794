//! Which notices a contract owes: rules, per jurisdiction and a default, from a contract's facts
//! (the occasion, the term, a trial's length, a 12-month anniversary) to notice kinds — the
//! decision no billing platform makes per contract (each has one global lead time), so that an
//! annual Californian is owed the 15–45-day notice and a monthly subscriber the merchant's 72 h
//! reminder from one stack. Each owed kind then gets its window and required content from the rest
//! of the policy, exactly as a producer's job of that kind would.
//!
//! ```json
//! "obligations": {
//!   "default": [ { "rule": "reminder", "on": "renewal", "kind": "renewal_notice_t72" } ],
//!   "jurisdictions": { "US-CA": [
//!     { "rule": "ca-annual", "on": "renewal", "term_months_at_least": 12, "kind": "annual_renewal" },
//!     { "rule": "ca-monthly", "on": "renewal", "term_months_below": 12, "kind": "renewal_notice_t72" } ] } }
//! ```
//!
//! How rules are chosen — one statement, because a reviewer signs off on it:
//! - the contract's jurisdiction's rules **for its occasion** (renewal, trial conversion, price
//!   change) if it has any, else the `default` rules for that occasion: a jurisdiction that speaks
//!   about an occasion speaks about it completely, and one that does not keeps the default;
//! - every rule whose conditions all hold is owed (two rules, two notices: Colorado's anniversary
//!   reminder beside the monthly one); a kind owed twice is one notice, under its first rule;
//! - rules exist for the occasion but **none holds** → refused, the facts named ([`Unowed`]); a
//!   default never stands in for a jurisdiction's rule;
//! - a rule whose condition needs a fact the billing system did not state (the term, the trial's
//!   length, the subscription's start) → refused, naming the fact: a guess would be a legal rule
//!   decided by a default;
//! - no rule at all for the occasion → nothing owed (the configuration says so).
//!
//! Jurisdictions are matched exactly (`US-CA` is not `US`), as the windows are.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Months, Utc};

/// What the billing system announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Occasion {
    /// A renewal charge of an existing term.
    Renewal,
    /// The first charge after a free or promotional trial.
    TrialConversion,
    /// A new price that applies from a coming charge.
    PriceChange,
}

impl Occasion {
    pub const ALL: [Occasion; 3] = [Occasion::Renewal, Occasion::TrialConversion, Occasion::PriceChange];

    /// The configuration's word (`on`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Occasion::Renewal => "renewal",
            Occasion::TrialConversion => "trial_conversion",
            Occasion::PriceChange => "price_change",
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == word)
    }

    /// For sentences: "a renewal", "a trial conversion", "a price change".
    pub fn phrase(&self) -> &'static str {
        match self {
            Occasion::Renewal => "a renewal",
            Occasion::TrialConversion => "a trial conversion",
            Occasion::PriceChange => "a price change",
        }
    }
}

/// A billing interval's unit, as billing systems state it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Day,
    Week,
    Month,
    Year,
}

/// A contract's term: `count` × `unit` between two charges (Stripe's `interval` and
/// `interval_count`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    pub unit: Unit,
    pub count: u32,
}

/// Days in an average month (365.25 / 12): a term of days or weeks compared with rules in months.
const DAYS_PER_MONTH: f64 = 30.4375;

impl Term {
    /// `interval` (`day`, `week`, `month`, `year`) and `count` ≥ 1; `None` for anything else.
    pub fn parse(interval: &str, count: u64) -> Option<Self> {
        let unit = match interval {
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "year" => Unit::Year,
            _ => return None,
        };
        let count = u32::try_from(count).ok().filter(|c| *c >= 1)?;
        Some(Self { unit, count })
    }

    /// The term in months: exact for months and years, by the average month for days and weeks.
    pub fn months(&self) -> f64 {
        let count = f64::from(self.count);
        match self.unit {
            Unit::Day => count / DAYS_PER_MONTH,
            Unit::Week => count * 7.0 / DAYS_PER_MONTH,
            Unit::Month => count,
            Unit::Year => count * 12.0,
        }
    }

    /// The instant one term before `at` (the previous charge of a renewal at `at`).
    pub fn before(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self.unit {
            Unit::Day => at.checked_sub_signed(chrono::Duration::days(i64::from(self.count))),
            Unit::Week => at.checked_sub_signed(chrono::Duration::weeks(i64::from(self.count))),
            Unit::Month => at.checked_sub_months(Months::new(self.count)),
            Unit::Year => at.checked_sub_months(Months::new(self.count.checked_mul(12)?)),
        }
    }

    /// The instant one term after `at` (the next charge of a renewal at `at`), by the calendar as
    /// billing systems count it (31 January + 1 month = 28 or 29 February).
    pub fn after(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.times_after(at, 1)
    }

    /// The instant `n` terms after `at`, counted from `at` (so a subscription anchored on the
    /// 31st renews on 31 March after 28 February, as billing systems anchor it).
    pub fn times_after(&self, at: DateTime<Utc>, n: u32) -> Option<DateTime<Utc>> {
        let count = self.count.checked_mul(n)?;
        match self.unit {
            Unit::Day => at.checked_add_signed(chrono::Duration::days(i64::from(count))),
            Unit::Week => at.checked_add_signed(chrono::Duration::weeks(i64::from(count))),
            Unit::Month => at.checked_add_months(Months::new(count)),
            Unit::Year => at.checked_add_months(Months::new(count.checked_mul(12)?)),
        }
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.unit {
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
            Unit::Year => "year",
        };
        let plural = if self.count == 1 { "" } else { "s" };
        write!(f, "{} {unit}{plural}", self.count)
    }
}

/// What the billing system stated about one contract at one occasion: the facts rules read.
/// `None`: not stated (a rule that needs it refuses rather than guesses).
#[derive(Clone, Debug, PartialEq)]
pub struct Contract {
    pub occasion: Occasion,
    /// ISO 3166 code, upper case (as jobs are normalised to).
    pub jurisdiction: Option<String>,
    pub term: Option<Term>,
    /// A trial conversion's trial length, in days.
    pub trial_days: Option<u32>,
    /// When the subscription began (its anniversaries count from here).
    pub started_at: Option<DateTime<Utc>>,
    /// The charge this occasion is about (a renewal's instant).
    pub charge_at: Option<DateTime<Utc>>,
}

impl Contract {
    pub fn new(occasion: Occasion, jurisdiction: Option<&str>) -> Self {
        Self {
            occasion,
            jurisdiction: jurisdiction.map(str::to_owned),
            term: None,
            trial_days: None,
            started_at: None,
            charge_at: None,
        }
    }

    /// The facts, for a refusal or a log line: "a renewal in US-CA, term 1 month, no trial length
    /// stated".
    pub fn describe(&self) -> String {
        let mut parts = vec![format!(
            "{} in {}",
            self.occasion.phrase(),
            self.jurisdiction.as_deref().unwrap_or("no jurisdiction")
        )];
        parts.push(self.term.map_or("term not stated".to_owned(), |t| format!("term {t}")));
        if self.occasion == Occasion::TrialConversion {
            parts.push(
                self.trial_days.map_or("trial length not stated".to_owned(), |d| format!("trial {d} days")),
            );
        }
        if let Some(started) = self.started_at {
            parts.push(format!("started {}", started.format("%Y-%m-%d")));
        }
        parts.join(", ")
    }
}

/// One rule: conditions on the facts (all must hold), and the kind it owes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Its name (unique in the configuration): recorded with what it decided.
    pub name: String,
    pub on: Occasion,
    pub kind: String,
    pub term_months_at_least: Option<u32>,
    pub term_months_below: Option<u32>,
    pub trial_days_over: Option<u32>,
    pub trial_days_at_most: Option<u32>,
    /// A renewal that is the first charge at or after an anniversary of this many months.
    pub anniversary_months: Option<u32>,
    pub description: Option<String>,
}

/// Whether a rule holds for a contract, or which fact it needs to tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holds {
    Yes,
    No,
    Needs(Fact),
}

/// A fact a rule may need that a billing event may not state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fact {
    Term,
    TrialLength,
    /// The subscription's start (with the charge and the term): anniversaries count from it.
    Start,
}

impl Fact {
    pub fn phrase(&self) -> &'static str {
        match self {
            Fact::Term => "the term (interval and count)",
            Fact::TrialLength => "the trial's length",
            Fact::Start => "the subscription's start, the charge and the term",
        }
    }
}

impl Rule {
    /// Whether the rule holds for `c` (see [`Holds`]).
    pub fn holds(&self, c: &Contract) -> Holds {
        if self.term_months_at_least.is_some() || self.term_months_below.is_some() {
            let Some(term) = c.term else { return Holds::Needs(Fact::Term) };
            let months = term.months();
            let too_short = self.term_months_at_least.is_some_and(|m| months < f64::from(m));
            let too_long = self.term_months_below.is_some_and(|m| months >= f64::from(m));
            if too_short || too_long {
                return Holds::No;
            }
        }
        if self.trial_days_over.is_some() || self.trial_days_at_most.is_some() {
            let Some(days) = c.trial_days else { return Holds::Needs(Fact::TrialLength) };
            let too_short = self.trial_days_over.is_some_and(|over| days <= over);
            let too_long = self.trial_days_at_most.is_some_and(|most| days > most);
            if too_short || too_long {
                return Holds::No;
            }
        }
        if let Some(every) = self.anniversary_months {
            let (Some(started), Some(charge), Some(term)) = (c.started_at, c.charge_at, c.term) else {
                return Holds::Needs(Fact::Start);
            };
            if !crosses_anniversary(started, term.before(charge), charge, every) {
                return Holds::No;
            }
        }
        Holds::Yes
    }

    /// Its conditions in words, for the reviewer's table: "term ≥ 12 months".
    pub fn conditions(&self) -> String {
        let mut parts = Vec::new();
        if let Some(m) = self.term_months_at_least {
            parts.push(format!("term ≥ {m} months"));
        }
        if let Some(m) = self.term_months_below {
            parts.push(format!("term < {m} months"));
        }
        if let Some(d) = self.trial_days_over {
            parts.push(format!("trial > {d} days"));
        }
        if let Some(d) = self.trial_days_at_most {
            parts.push(format!("trial ≤ {d} days"));
        }
        if let Some(m) = self.anniversary_months {
            parts.push(format!("first charge at or after each {m}-month anniversary"));
        }
        if parts.is_empty() {
            "every contract".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// Whether the charge at `charge` is the first at or after an `every`-month anniversary of
/// `started` (the anniversary lies after the previous charge, `previous`, and at or before this one).
fn crosses_anniversary(
    started: DateTime<Utc>,
    previous: Option<DateTime<Utc>>,
    charge: DateTime<Utc>,
    every: u32,
) -> bool {
    let Some(previous) = previous else { return false };
    let mut k: u32 = 1;
    while let Some(anniversary) =
        k.checked_mul(every).and_then(|m| started.checked_add_months(Months::new(m)))
    {
        if anniversary > charge {
            return false;
        }
        if anniversary > previous {
            return true;
        }
        k += 1;
    }
    false
}

/// Where an owed notice's rule lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleScope<'a> {
    Default,
    Jurisdiction(&'a str),
}

impl fmt::Display for RuleScope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleScope::Default => f.write_str("default"),
            RuleScope::Jurisdiction(j) => f.write_str(j),
        }
    }
}

/// A notice a contract owes, and the rule that owes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owed<'a> {
    pub kind: &'a str,
    pub rule: &'a Rule,
    pub scope: RuleScope<'a>,
}

impl Owed<'_> {
    /// The rule's id as jobs and ledger rows carry it (`US-CA/ca-annual-term`, `default/reminder`):
    /// the scope and the name, so a reader finds the rule in the configuration without guessing
    /// which list it came from.
    pub fn rule_id(&self) -> String {
        format!("{}/{}", self.scope, self.rule.name)
    }
}

/// Why no notice could be decided for a contract.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unowed {
    /// Rules speak about this occasion here, and none holds.
    #[error("no obligation rule of {scope} holds for {facts}: add a rule for such contracts (`obligations.{path}`)")]
    Unmatched { scope: String, path: String, facts: String },
    /// A rule needs a fact the billing system did not state.
    #[error("rule `{rule}` needs {fact}, which the billing event does not state ({facts})")]
    Needs { rule: String, fact: &'static str, facts: String },
}

/// The `obligations` of a policy, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Obligations {
    pub(super) default: Vec<Rule>,
    pub(super) jurisdictions: BTreeMap<String, Vec<Rule>>,
}

impl Obligations {
    /// No rules at all: the intake's stated kind decides (`NOTICE_INTAKE_KIND`).
    pub fn is_empty(&self) -> bool {
        self.default.is_empty() && self.jurisdictions.values().all(Vec::is_empty)
    }

    /// Every rule, with its scope, in the file's order (default first).
    pub fn rules(&self) -> impl Iterator<Item = (RuleScope<'_>, &Rule)> {
        let default = self.default.iter().map(|r| (RuleScope::Default, r));
        let named = self
            .jurisdictions
            .iter()
            .flat_map(|(j, rules)| rules.iter().map(move |r| (RuleScope::Jurisdiction(j.as_str()), r)));
        default.chain(named)
    }

    /// The rule a job or row names by its id (`US-CA/ca-annual-term`, see [`Owed::rule_id`]), if
    /// this configuration has it: evidence shows its description beside the id it stored.
    pub fn rule(&self, id: &str) -> Option<&Rule> {
        let (scope, name) = id.split_once('/')?;
        let rules = match scope {
            "default" => &self.default,
            j => self.jurisdictions.get(j)?,
        };
        rules.iter().find(|r| r.name == name)
    }

    /// The jurisdictions that have rules of their own.
    pub fn jurisdictions(&self) -> impl Iterator<Item = &str> {
        self.jurisdictions.keys().map(String::as_str)
    }

    /// The rules that speak for `occasion` in `jurisdiction`, and where they live (see the
    /// module's header).
    pub fn candidates<'a>(
        &'a self,
        occasion: Occasion,
        jurisdiction: Option<&str>,
    ) -> (RuleScope<'a>, Vec<&'a Rule>) {
        if let Some((j, rules)) = jurisdiction.and_then(|j| self.jurisdictions.get_key_value(j)) {
            let here: Vec<&Rule> = rules.iter().filter(|r| r.on == occasion).collect();
            if !here.is_empty() {
                return (RuleScope::Jurisdiction(j), here);
            }
        }
        (RuleScope::Default, self.default.iter().filter(|r| r.on == occasion).collect())
    }

    /// The notices `contract` owes (none when no rule speaks for its occasion), each kind once.
    pub fn owed(&self, contract: &Contract) -> Result<Vec<Owed<'_>>, Unowed> {
        let (scope, candidates) = self.candidates(contract.occasion, contract.jurisdiction.as_deref());
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let mut owed: Vec<Owed<'_>> = Vec::new();
        for rule in candidates {
            match rule.holds(contract) {
                Holds::Yes if owed.iter().any(|o| o.kind == rule.kind) => {}
                Holds::Yes => owed.push(Owed { kind: &rule.kind, rule, scope }),
                Holds::No => {}
                Holds::Needs(fact) => {
                    let fact = fact.phrase();
                    return Err(Unowed::Needs { rule: rule.name.clone(), fact, facts: contract.describe() });
                }
            }
        }
        if owed.is_empty() {
            let path = match scope {
                RuleScope::Default => "default".to_owned(),
                RuleScope::Jurisdiction(j) => format!("jurisdictions.{j}"),
            };
            return Err(Unowed::Unmatched { scope: scope.to_string(), path, facts: contract.describe() });
        }
        Ok(owed)
    }

    /// Every kind some rule may owe (what a cancellation must withdraw), sorted, each once.
    pub fn kinds(&self) -> Vec<&str> {
        let mut kinds: Vec<&str> = self.rules().map(|(_, r)| r.kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        kinds
    }
}

#[cfg(test)]
#[path = "obligations_tests.rs"]
mod tests;
