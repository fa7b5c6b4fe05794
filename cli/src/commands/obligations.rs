//! `noticectl obligations`: what a contract owes under the configuration's obligations — every
//! notice kind, its window in days before the charge, the content it must state and the rule it
//! came from, per occasion (renewal, trial conversion, price change) — worked out by the core's own
//! rule choice (`policy/obligations.rs`) and window arithmetic, so the table a legal reviewer signs
//! off is the decision the intake makes. No ledger, no AWS calls.

use std::process::ExitCode;

use anyhow::Context;
use notice_ledger::jurisdiction;
use notice_ledger::policy::{Contract, Fact, Holds, Occasion, Rule, RuleScope, Term, WindowPolicy};
use serde::Serialize;

use crate::commands::windows::{hours_and_days, policy_of, PolicyArg};
use crate::exit::Exit;
use crate::terminal::{escape, table};

#[derive(clap::Args, Debug)]
pub(crate) struct ObligationsArgs {
    #[command(flatten)]
    policy: PolicyArg,
    #[command(flatten)]
    config: crate::notices_arg::ConfigArg,
    /// The customer's jurisdiction (ISO 3166: `US-CA`, any case); default: none (the `default` rules).
    #[arg(long, value_name = "J")]
    jurisdiction: Option<String>,
    /// The billing interval: day, week, month or year.
    #[arg(long, value_name = "UNIT")]
    interval: Option<String>,
    /// Intervals per charge (Stripe's `interval_count`).
    #[arg(long, value_name = "N", default_value_t = 1)]
    interval_count: u64,
    /// A trial of this many days before the first charge (answers the trial conversion's rules).
    #[arg(long, value_name = "DAYS")]
    trial_days: Option<u32>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// One notice owed (or the reason none could be decided) at one occasion.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct Row {
    occasion: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    opens_hours_before: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    closes_hours_before: Option<u32>,
    requires: Vec<String>,
    /// `US-CA/ca-annual-term`, `default/reminder`.
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conditions: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    /// Why nothing is owed, or why it cannot be decided from these facts.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct Report {
    source: String,
    jurisdiction: Option<String>,
    term: Option<String>,
    trial_days: Option<u32>,
    rows: Vec<Row>,
    /// Stripe's "upcoming renewal events" days that serve every rule (`None`: none does).
    upcoming_renewal_days: Option<u32>,
    /// Why: the rule whose window opens earliest, and how early.
    upcoming_renewal_because: Option<String>,
}

/// The days Stripe's account-wide "upcoming renewal events" setting offers (Billing → Subscriptions
/// and emails): `invoice.upcoming` comes that many days before every renewal.
const STRIPE_UPCOMING_DAYS: [u32; 5] = [3, 7, 15, 30, 45];

/// The fewest upcoming-renewal days that reach every owed window's opening (an earlier event parks
/// the job until its window opens; a later one may find it closed and record it `missed`).
fn upcoming_days(policy: &WindowPolicy) -> (Option<u32>, Option<String>) {
    let Some((hours, rule)) = policy.earliest_owed_opening() else { return (None, None) };
    let days = hours.div_ceil(24);
    let choice = STRIPE_UPCOMING_DAYS.into_iter().find(|d| *d >= days);
    let why = match choice {
        Some(_) => format!("the earliest owed window opens {days} d before the charge ({rule})"),
        None => format!(
            "the earliest owed window opens {days} d before the charge ({rule}), earlier than any setting: \
             such notices must be planned from an earlier event"
        ),
    };
    (choice, Some(why))
}

fn rule_row(
    policy: &WindowPolicy,
    occasion: Occasion,
    jurisdiction: Option<&str>,
    (scope, rule): (RuleScope<'_>, &Rule),
    note: Option<String>,
) -> Row {
    let window = policy.effective(Some(&rule.kind), jurisdiction).window;
    let requires = policy.requirements(&rule.kind, jurisdiction).into_iter().map(|r| r.variable).collect();
    Row {
        occasion: occasion.as_str(),
        kind: Some(rule.kind.clone()),
        opens_hours_before: Some(window.opens_hours_before),
        closes_hours_before: Some(window.closes_hours_before),
        requires,
        rule: Some(format!("{scope}/{}", rule.name)),
        conditions: Some(rule.conditions()),
        description: rule.description.clone(),
        note,
    }
}

fn note_row(occasion: Occasion, note: String) -> Row {
    Row {
        occasion: occasion.as_str(),
        kind: None,
        opens_hours_before: None,
        closes_hours_before: None,
        requires: Vec::new(),
        rule: None,
        conditions: None,
        description: None,
        note: Some(note),
    }
}

/// The rows for every occasion (a trial conversion only when a trial is given): each rule that
/// holds for these facts, each that depends on a fact a table cannot give (the subscription's
/// start: "at the renewal after each anniversary"), and a refusal where the intake would refuse.
fn rows(policy: &WindowPolicy, contract: &Contract) -> Vec<Row> {
    let occasions = Occasion::ALL
        .into_iter()
        .filter(|o| *o != Occasion::TrialConversion || contract.trial_days.is_some());
    let mut out = Vec::new();
    for occasion in occasions {
        let c = Contract { occasion, ..contract.clone() };
        let j = c.jurisdiction.as_deref();
        let (scope, candidates) = policy.obligations().candidates(occasion, j);
        if candidates.is_empty() {
            out.push(note_row(occasion, format!("no rule speaks for {}: nothing owed", occasion.phrase())));
            continue;
        }
        let before = out.len();
        for rule in candidates {
            match rule.holds(&c) {
                Holds::Yes => out.push(rule_row(policy, occasion, j, (scope, rule), None)),
                Holds::No => {}
                Holds::Needs(Fact::Start) => {
                    let note = format!("decided by {}", Fact::Start.phrase());
                    out.push(rule_row(policy, occasion, j, (scope, rule), Some(note)))
                }
                Holds::Needs(fact) => out.push(note_row(
                    occasion,
                    format!("refused: rule `{}` needs {}", rule.name, fact.phrase()),
                )),
            }
        }
        if out.len() == before {
            out.push(note_row(occasion, format!("refused: no rule of {scope} holds for {}", c.describe())));
        }
    }
    out
}

fn days(hours: Option<u32>) -> String {
    hours.map_or_else(|| "-".to_owned(), hours_and_days)
}

fn render(r: &Report) -> String {
    let mut out = format!(
        "what a contract owes under {}: {}, term {}{} (no ledger, no AWS calls)\n\n",
        r.source,
        r.jurisdiction.as_deref().unwrap_or("no jurisdiction"),
        r.term.as_deref().unwrap_or("not given"),
        r.trial_days.map_or(String::new(), |d| format!(", trial {d} days")),
    );
    let header = ["occasion", "kind", "opens", "closes", "must state", "rule", "when"];
    let cells: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            vec![
                row.occasion.to_owned(),
                row.kind.clone().unwrap_or_else(|| "-".to_owned()),
                days(row.opens_hours_before),
                days(row.closes_hours_before),
                if row.requires.is_empty() { "-".to_owned() } else { row.requires.join(", ") },
                row.rule.clone().unwrap_or_else(|| "-".to_owned()),
                match (&row.conditions, &row.note) {
                    (Some(c), Some(n)) => format!("{c} ({n})"),
                    (Some(c), None) => c.clone(),
                    (None, n) => n.clone().unwrap_or_default(),
                },
            ]
        })
        .collect();
    out.push_str(&table(&header, &cells));
    if let Some(why) = &r.upcoming_renewal_because {
        let choice = r.upcoming_renewal_days.map_or("no setting".to_owned(), |d| format!("{d} days"));
        out.push_str(&format!("\nStripe upcoming renewal events, for every rule: {choice} — {why}\n"));
    }
    let described: Vec<&Row> = r.rows.iter().filter(|row| row.description.is_some()).collect();
    if !described.is_empty() {
        out.push_str("\nrules:\n");
        for row in described {
            let (rule, text) = (row.rule.as_deref().unwrap_or("-"), row.description.as_deref().unwrap_or(""));
            out.push_str(&format!("  {rule}: {}\n", escape(text)));
        }
    }
    out
}

pub(crate) fn run(args: ObligationsArgs) -> anyhow::Result<ExitCode> {
    let (policy, source) = policy_of(&args.policy, &args.config)?;
    if policy.obligations().is_empty() {
        anyhow::bail!(
            "{source} has no `obligations`: the intake gives every notice its stated kind \
             (NOTICE_INTAKE_KIND); docs/intake.md, \"Obligations\""
        );
    }
    let jurisdiction = args
        .jurisdiction
        .as_deref()
        .map(|j| jurisdiction::normalise(j).with_context(|| format!("--jurisdiction {j:?}")))
        .transpose()?;
    let term = args
        .interval
        .as_deref()
        .map(|unit| {
            Term::parse(unit, args.interval_count).with_context(|| {
                format!(
                    "--interval {unit:?} --interval-count {}: the interval is day, week, month or year, the count at least 1",
                    args.interval_count
                )
            })
        })
        .transpose()?;
    let contract = Contract {
        term,
        trial_days: args.trial_days,
        ..Contract::new(Occasion::Renewal, jurisdiction.as_deref())
    };
    let (upcoming_renewal_days, upcoming_renewal_because) = upcoming_days(&policy);
    let report = Report {
        source,
        jurisdiction,
        term: term.map(|t| t.to_string()),
        trial_days: args.trial_days,
        rows: rows(&policy, &contract),
        upcoming_renewal_days,
        upcoming_renewal_because,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    // A contract the intake would refuse needs a rule before it happens.
    let refused = report.rows.iter().any(|r| r.note.as_deref().is_some_and(|n| n.starts_with("refused")));
    Ok(Exit::attention_if(refused).into())
}
