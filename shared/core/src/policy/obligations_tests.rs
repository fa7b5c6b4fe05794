use chrono::{DateTime, Utc};

use super::*;
use crate::policy::WindowPolicy;

/// California's annual-term and trial rules, a monthly catch-all there, Colorado's anniversary
/// reminder beside the default reminder, New York's price change, and a default reminder.
const POLICY: &str = r#"{
  "kinds": {
    "renewal_notice_t72": { "opens_hours_before": 72, "closes_hours_before": 24 },
    "annual_renewal": { "opens_hours_before": 1080, "closes_hours_before": 360 },
    "trial_conversion": { "opens_hours_before": 504, "closes_hours_before": 72 },
    "price_change": { "opens_hours_before": 720, "closes_hours_before": 168 },
    "anniversary_reminder": { "opens_hours_before": 960, "closes_hours_before": 600 }
  },
  "obligations": {
    "default": [
      { "rule": "reminder", "on": "renewal", "kind": "renewal_notice_t72" },
      { "rule": "trial", "on": "trial_conversion", "kind": "renewal_notice_t72" }
    ],
    "jurisdictions": {
      "US-CA": [
        { "rule": "ca-annual", "on": "renewal", "term_months_at_least": 12, "kind": "annual_renewal",
          "description": "BPC 17602" },
        { "rule": "ca-shorter", "on": "renewal", "term_months_below": 12, "kind": "renewal_notice_t72" },
        { "rule": "ca-trial", "on": "trial_conversion", "trial_days_over": 31, "kind": "trial_conversion" },
        { "rule": "ca-price", "on": "price_change", "kind": "price_change" }
      ],
      "US-CO": [
        { "rule": "co-reminder", "on": "renewal", "kind": "renewal_notice_t72" },
        { "rule": "co-anniversary", "on": "renewal", "anniversary_months": 12, "kind": "anniversary_reminder" }
      ],
      "US-NY": [ { "rule": "ny-price", "on": "price_change", "kind": "price_change" } ]
    }
  }
}"#;

fn policy() -> WindowPolicy {
    WindowPolicy::from_json(POLICY).unwrap()
}

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn contract(occasion: Occasion, j: Option<&str>, term: Option<(&str, u64)>) -> Contract {
    Contract { term: term.and_then(|(i, c)| Term::parse(i, c)), ..Contract::new(occasion, j) }
}

fn kinds(p: &WindowPolicy, c: &Contract) -> Result<Vec<String>, Unowed> {
    p.obligations().owed(c).map(|owed| owed.iter().map(|o| format!("{}:{}", o.rule.name, o.kind)).collect())
}

#[test]
fn an_annual_californian_is_owed_the_annual_notice_a_monthly_one_the_reminder() {
    let p = policy();
    let annual = contract(Occasion::Renewal, Some("US-CA"), Some(("year", 1)));
    assert_eq!(kinds(&p, &annual).unwrap(), ["ca-annual:annual_renewal"]);
    let twelve_months = contract(Occasion::Renewal, Some("US-CA"), Some(("month", 12)));
    assert_eq!(kinds(&p, &twelve_months).unwrap(), ["ca-annual:annual_renewal"]);
    let monthly = contract(Occasion::Renewal, Some("US-CA"), Some(("month", 1)));
    assert_eq!(kinds(&p, &monthly).unwrap(), ["ca-shorter:renewal_notice_t72"]);
    // 52 weeks is just under 12 average months.
    let weekly = contract(Occasion::Renewal, Some("US-CA"), Some(("week", 52)));
    assert_eq!(kinds(&p, &weekly).unwrap(), ["ca-shorter:renewal_notice_t72"]);
    let texan = contract(Occasion::Renewal, Some("US-TX"), Some(("year", 1)));
    assert_eq!(kinds(&p, &texan).unwrap(), ["reminder:renewal_notice_t72"]);
    let nowhere = contract(Occasion::Renewal, None, None);
    assert_eq!(kinds(&p, &nowhere).unwrap(), ["reminder:renewal_notice_t72"]);
}

#[test]
fn a_jurisdiction_silent_on_an_occasion_keeps_the_default_and_one_with_none_owes_nothing() {
    let p = policy();
    // New York speaks about price changes only: its renewals keep the default reminder.
    let ny = contract(Occasion::Renewal, Some("US-NY"), Some(("month", 1)));
    assert_eq!(kinds(&p, &ny).unwrap(), ["reminder:renewal_notice_t72"]);
    let ny_price = contract(Occasion::PriceChange, Some("US-NY"), None);
    assert_eq!(kinds(&p, &ny_price).unwrap(), ["ny-price:price_change"]);
    // No default rule speaks about price changes: nothing owed outside CA and NY.
    let tx_price = contract(Occasion::PriceChange, Some("US-TX"), None);
    assert_eq!(kinds(&p, &tx_price).unwrap(), Vec::<String>::new());
}

#[test]
fn a_contract_no_rule_holds_for_is_refused_with_its_facts() {
    let p = policy();
    let short_trial = Contract {
        trial_days: Some(14),
        ..contract(Occasion::TrialConversion, Some("US-CA"), Some(("month", 1)))
    };
    let err = kinds(&p, &short_trial).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Unowed::Unmatched { .. }), "{text}");
    assert!(text.contains("a trial conversion in US-CA, term 1 month, trial 14 days"), "{text}");
    assert!(text.contains("obligations.jurisdictions.US-CA"), "{text}");
    let long_trial = Contract { trial_days: Some(32), ..short_trial };
    assert_eq!(kinds(&p, &long_trial).unwrap(), ["ca-trial:trial_conversion"]);
}

#[test]
fn a_rule_needing_an_unstated_fact_refuses_rather_than_guesses() {
    let p = policy();
    let no_term = contract(Occasion::Renewal, Some("US-CA"), None);
    let err = kinds(&p, &no_term).unwrap_err();
    assert!(matches!(&err, Unowed::Needs { rule, .. } if rule == "ca-annual"), "{err}");
    assert!(err.to_string().contains("the term"), "{err}");
    let no_trial = contract(Occasion::TrialConversion, Some("US-CA"), Some(("month", 1)));
    assert!(kinds(&p, &no_trial).unwrap_err().to_string().contains("the trial's length"));
}

#[test]
fn colorado_owes_the_anniversary_reminder_only_at_the_first_charge_past_each_year() {
    let p = policy();
    let started = at("2026-01-15T10:00:00Z");
    let renewal = |charge: &str| Contract {
        started_at: Some(started),
        charge_at: Some(at(charge)),
        ..contract(Occasion::Renewal, Some("US-CO"), Some(("month", 1)))
    };
    assert_eq!(kinds(&p, &renewal("2026-12-15T10:00:00Z")).unwrap(), ["co-reminder:renewal_notice_t72"]);
    assert_eq!(
        kinds(&p, &renewal("2027-01-15T10:00:00Z")).unwrap(),
        ["co-reminder:renewal_notice_t72", "co-anniversary:anniversary_reminder"]
    );
    assert_eq!(kinds(&p, &renewal("2027-02-15T10:00:00Z")).unwrap(), ["co-reminder:renewal_notice_t72"]);
    assert_eq!(
        kinds(&p, &renewal("2028-01-15T10:00:00Z")).unwrap(),
        ["co-reminder:renewal_notice_t72", "co-anniversary:anniversary_reminder"]
    );
    // The first charge after the start is no anniversary.
    assert_eq!(kinds(&p, &renewal("2026-02-15T10:00:00Z")).unwrap(), ["co-reminder:renewal_notice_t72"]);
    let unstated = contract(Occasion::Renewal, Some("US-CO"), Some(("month", 1)));
    assert!(kinds(&p, &unstated).unwrap_err().to_string().contains("the subscription's start"));
}

#[test]
fn every_kind_a_cancellation_must_withdraw_is_listed_once() {
    assert_eq!(
        policy().obligations().kinds(),
        ["anniversary_reminder", "annual_renewal", "price_change", "renewal_notice_t72", "trial_conversion"]
    );
    assert!(WindowPolicy::from_json(r#"{"default": {"opens_hours_before": 72, "closes_hours_before": 24}}"#)
        .unwrap()
        .obligations()
        .is_empty());
}

#[test]
fn bad_rules_are_refused_naming_the_field() {
    let with = |rules: &str| {
        let text = POLICY.replacen(
            r#""US-NY": [ { "rule": "ny-price", "on": "price_change", "kind": "price_change" } ]"#,
            rules,
            1,
        );
        assert_ne!(text, POLICY, "the replacement must apply");
        WindowPolicy::from_json(&text).unwrap_err().to_string()
    };
    let cases: [(&str, &str); 9] = [
        (
            r#""US-NY": [ { "rule": "ny", "on": "price_change", "kind": "price_chnage" } ]"#,
            "did you mean \"price_change\"",
        ),
        (
            r#""US-NY": [ { "rule": "ny", "on": "price-change", "kind": "price_change" } ]"#,
            "obligations.jurisdictions.US-NY[0].on",
        ),
        (
            r#""US-NY": [ { "rule": "reminder", "on": "price_change", "kind": "price_change" } ]"#,
            "names another rule already",
        ),
        (
            r#""US-NY": [ { "on": "price_change", "kind": "price_change" } ]"#,
            "`obligations.jurisdictions.US-NY[0].rule` is required",
        ),
        (
            r#""US-NY": [ { "rule": "ny", "on": "renewal", "term_months_at_least": 12, "term_months_below": 12, "kind": "price_change" } ]"#,
            "holds for no contract",
        ),
        (
            r#""US-NY": [ { "rule": "ny", "on": "renewal", "trial_days_over": 31, "kind": "price_change" } ]"#,
            "only applies to `\"on\": \"trial_conversion\"`",
        ),
        (
            r#""US-NY": [ { "rule": "ny", "on": "renewal", "kind": "price_change", "days": 3 } ]"#,
            "unknown field `obligations.jurisdictions.US-NY[0].days`",
        ),
        (
            r#""us-ny": [ { "rule": "ny", "on": "renewal", "kind": "price_change" } ]"#,
            "upper case, as `US-NY`",
        ),
        (r#""US-NY": { "rule": "ny" }"#, "must be a list of rules"),
    ];
    for (rules, expected) in cases {
        let err = with(rules);
        assert!(err.contains(expected), "{rules}: {err}");
    }
}

#[test]
fn a_rule_keeps_its_description_and_says_its_conditions() {
    let p = policy();
    let (scope, rule) = p.obligations().rules().find(|(_, r)| r.name == "ca-annual").unwrap();
    assert_eq!(scope, RuleScope::Jurisdiction("US-CA"));
    assert_eq!(rule.description.as_deref(), Some("BPC 17602"));
    assert_eq!(rule.conditions(), "term ≥ 12 months");
}

#[test]
fn a_trial_rule_can_bound_the_length_from_both_sides() {
    let text = POLICY.replacen(
        r#"{ "rule": "ca-trial", "on": "trial_conversion", "trial_days_over": 31, "kind": "trial_conversion" },"#,
        r#"{ "rule": "ca-trial", "on": "trial_conversion", "trial_days_over": 31, "kind": "trial_conversion" },
           { "rule": "ca-short-trial", "on": "trial_conversion", "trial_days_at_most": 31, "kind": "renewal_notice_t72" },"#,
        1,
    );
    let p = WindowPolicy::from_json(&text).unwrap();
    let trial = |days| Contract {
        trial_days: Some(days),
        ..contract(Occasion::TrialConversion, Some("US-CA"), None)
    };
    assert_eq!(kinds(&p, &trial(31)).unwrap(), ["ca-short-trial:renewal_notice_t72"]);
    assert_eq!(kinds(&p, &trial(32)).unwrap(), ["ca-trial:trial_conversion"]);
    let bad = POLICY.replacen(
        r#""trial_days_over": 31,"#,
        r#""trial_days_over": 31, "trial_days_at_most": 14,"#,
        1,
    );
    assert!(WindowPolicy::from_json(&bad).unwrap_err().to_string().contains("holds for no contract"));
    let months = POLICY.replacen(r#""term_months_at_least": 12"#, r#""term_months_at_least": 1.5"#, 1);
    let err = WindowPolicy::from_json(&months).unwrap_err().to_string();
    assert!(err.contains("term_months_at_least` must be a whole, non-negative number"), "{err}");
}
