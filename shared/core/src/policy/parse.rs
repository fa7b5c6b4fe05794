//! `NOTICE_WINDOWS` JSON → [`WindowPolicy`], walking the document by hand so that every error
//! names the field path at fault (`jurisdictions.US-CA.kinds.trial_conversion.opens_at_most_hours_before`)
//! — serde's derived errors say only "line 1 column 212". Old files (default, kinds,
//! jurisdiction_floors_hours) read exactly as before.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::admit::Scope;
use super::obligations::{Obligations, Occasion, Rule};
use super::{invalid, Bounds, JurisdictionRules, OtherKinds, PolicyError, Window, WindowPolicy};
use crate::identity::Kind;

const TOP: &[&str] = &[
    "default",
    "kinds",
    "jurisdictions",
    "jurisdiction_floors_hours",
    "other_kinds",
    "obligations",
    "description",
];
const OBLIGATIONS: &[&str] = &["default", "jurisdictions", "description"];
const RULE: &[&str] = &[
    "rule",
    "on",
    "kind",
    "term_months_at_least",
    "term_months_below",
    "trial_days_over",
    "trial_days_at_most",
    "anniversary_months",
    "description",
];
const WINDOW: &[&str] = &["opens_hours_before", "closes_hours_before", "requires", "description"];
const JURISDICTION: &[&str] =
    &["opens_at_most_hours_before", "closes_at_least_hours_before", "kinds", "requires", "description"];
const KIND_BOUNDS: &[&str] =
    &["opens_at_most_hours_before", "closes_at_least_hours_before", "requires", "description"];
/// Longest template variable name `requires` accepts.
const MAX_VARIABLE_LEN: usize = 64;

pub(super) fn policy(text: &str) -> Result<WindowPolicy, PolicyError> {
    let value: Value = serde_json::from_str(text).map_err(|e| invalid(format!("is not valid JSON: {e}")))?;
    let top = object(&value, "")?;
    known(top, "", TOP)?;
    let mut policy = WindowPolicy::default();
    note(top, "", &mut policy.descriptions)?;
    if let Some(v) = present(top, "default") {
        policy.default = window(v, "default", &mut policy)?;
        requires(object(v, "default")?, "default", Scope::Default, &mut policy.requires)?;
    }
    if let Some(v) = present(top, "kinds") {
        for (kind, w) in object(v, "kinds")? {
            let path = format!("kinds.{kind}");
            kind_name(kind, &path)?;
            let parsed = window(w, &path, &mut policy)?;
            requires(object(w, &path)?, &path, Scope::Kind(kind.clone()), &mut policy.requires)?;
            policy.kinds.insert(kind.clone(), parsed);
        }
    }
    if let Some(v) = present(top, "jurisdiction_floors_hours") {
        for (j, floor) in object(v, "jurisdiction_floors_hours")? {
            let path = format!("jurisdiction_floors_hours.{j}");
            code(j, &path)?;
            policy.jurisdiction_floors_hours.insert(j.clone(), hours(floor, &path)?);
        }
    }
    if let Some(v) = present(top, "jurisdictions") {
        for (j, entry) in object(v, "jurisdictions")? {
            let path = format!("jurisdictions.{j}");
            code(j, &path)?;
            let rules = jurisdiction(entry, j, &path, &mut policy)?;
            if rules.bounds.closes_at_least_hours_before.is_some()
                && policy.jurisdiction_floors_hours.contains_key(j)
            {
                return Err(invalid(format!(
                    "`{path}.closes_at_least_hours_before` and `jurisdiction_floors_hours.{j}` both set \
                     {j}'s floor: keep one"
                )));
            }
            policy.jurisdictions.insert(j.clone(), rules);
        }
    }
    if let Some(v) = present(top, "obligations") {
        policy.obligations = obligations(v, &mut policy.descriptions)?;
    }
    policy.other_kinds = match present(top, "other_kinds") {
        None if policy.kinds().is_empty() => OtherKinds::Default,
        None => OtherKinds::Refuse,
        Some(Value::String(s)) if s == "refuse" => OtherKinds::Refuse,
        Some(Value::String(s)) if s == "default" => OtherKinds::Default,
        Some(other) => {
            return Err(invalid(format!(
                "`other_kinds` must be \"refuse\" (unlisted kinds are invalid) or \"default\" (they get the \
                 `default` window), not {other}"
            )))
        }
    };
    Ok(policy)
}

/// `obligations`: `default` and `jurisdictions.<J>`, each a list of rules (see `obligations.rs`).
fn obligations(value: &Value, notes: &mut Vec<(String, String)>) -> Result<Obligations, PolicyError> {
    let map = object(value, "obligations")?;
    known(map, "obligations", OBLIGATIONS)?;
    note(map, "obligations", notes)?;
    let mut out = Obligations::default();
    let mut names: Vec<String> = Vec::new();
    if let Some(v) = present(map, "default") {
        out.default = rules(v, "obligations.default", &mut names, notes)?;
    }
    if let Some(v) = present(map, "jurisdictions") {
        for (j, list) in object(v, "obligations.jurisdictions")? {
            let path = format!("obligations.jurisdictions.{j}");
            code(j, &path)?;
            out.jurisdictions.insert(j.clone(), rules(list, &path, &mut names, notes)?);
        }
    }
    Ok(out)
}

fn rules(
    value: &Value,
    path: &str,
    names: &mut Vec<String>,
    notes: &mut Vec<(String, String)>,
) -> Result<Vec<Rule>, PolicyError> {
    let Value::Array(items) = value else {
        return Err(invalid(format!("`{path}` must be a list of rules, not {}", kind_of(value))));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let rule = rule(item, &format!("{path}[{i}]"), notes)?;
        if names.contains(&rule.name) {
            return Err(invalid(format!(
                "`{path}[{i}].rule`: {:?} names another rule already; each rule needs its own name \
                 (it is recorded with what it decided)",
                rule.name
            )));
        }
        names.push(rule.name.clone());
        out.push(rule);
    }
    Ok(out)
}

fn rule(value: &Value, path: &str, notes: &mut Vec<(String, String)>) -> Result<Rule, PolicyError> {
    let map = object(value, path)?;
    known(map, path, RULE)?;
    let text = |name: &str| -> Result<String, PolicyError> {
        match present(map, name) {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
            Some(other) => {
                Err(invalid(format!("`{path}.{name}` must be a non-empty string, not {}", kind_of(other))))
            }
            None => Err(invalid(format!("`{path}.{name}` is required"))),
        }
    };
    let name = text("rule")?;
    let ok_name = name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'));
    if !ok_name {
        return Err(invalid(format!(
            "`{path}.rule`: {name:?} is not a rule name (lower-case letters, digits, `_` and `-`; at most 64)"
        )));
    }
    let on_word = text("on")?;
    let on = Occasion::parse(&on_word).ok_or_else(|| {
        let words: Vec<&str> = Occasion::ALL.iter().map(Occasion::as_str).collect();
        invalid(format!("`{path}.on`: {on_word:?} is not an occasion (one of: {})", words.join(", ")))
    })?;
    let kind = text("kind")?;
    kind_name(&kind, &format!("{path}.kind"))?;
    let count = |name: &str| present(map, name).map(|v| whole(v, &format!("{path}.{name}"))).transpose();
    let rule = Rule {
        name,
        on,
        kind,
        term_months_at_least: count("term_months_at_least")?,
        term_months_below: count("term_months_below")?,
        trial_days_over: count("trial_days_over")?,
        trial_days_at_most: count("trial_days_at_most")?,
        anniversary_months: count("anniversary_months")?,
        description: None,
    };
    if let (Some(low), Some(high)) = (rule.term_months_at_least, rule.term_months_below) {
        if low >= high {
            return Err(invalid(format!(
                "`{path}`: `term_months_at_least` ({low}) must be below `term_months_below` ({high}): \
                 as written the rule holds for no contract"
            )));
        }
    }
    for (field, set) in
        [("trial_days_over", rule.trial_days_over), ("trial_days_at_most", rule.trial_days_at_most)]
    {
        if set.is_some() && on != Occasion::TrialConversion {
            return Err(invalid(format!(
                "`{path}.{field}` only applies to `\"on\": \"trial_conversion\"` (this rule is on {on_word})"
            )));
        }
    }
    if let (Some(over), Some(most)) = (rule.trial_days_over, rule.trial_days_at_most) {
        if over >= most {
            return Err(invalid(format!(
                "`{path}`: `trial_days_over` ({over}) must be below `trial_days_at_most` ({most}): \
                 as written the rule holds for no contract"
            )));
        }
    }
    if let Some(every) = rule.anniversary_months {
        if on != Occasion::Renewal || every == 0 {
            return Err(invalid(format!(
                "`{path}.anniversary_months` must be at least 1 and only applies to `\"on\": \"renewal\"`"
            )));
        }
    }
    note(map, path, notes)?;
    let description = notes.last().filter(|(p, _)| p == path).map(|(_, d)| d.clone());
    Ok(Rule { description, ..rule })
}

fn jurisdiction(
    value: &Value,
    j: &str,
    path: &str,
    policy: &mut WindowPolicy,
) -> Result<JurisdictionRules, PolicyError> {
    let map = object(value, path)?;
    known(map, path, JURISDICTION)?;
    note(map, path, &mut policy.descriptions)?;
    requires(map, path, Scope::Jurisdiction(j.to_owned()), &mut policy.requires)?;
    let mut rules = JurisdictionRules { bounds: bounds(map, path)?, kinds: BTreeMap::new() };
    if let Some(v) = present(map, "kinds") {
        let kinds_path = format!("{path}.kinds");
        for (kind, entry) in object(v, &kinds_path)? {
            let kind_path = format!("{kinds_path}.{kind}");
            kind_name(kind, &kind_path)?;
            let entry_map = object(entry, &kind_path)?;
            known(entry_map, &kind_path, KIND_BOUNDS)?;
            note(entry_map, &kind_path, &mut policy.descriptions)?;
            let scope = Scope::JurisdictionKind(j.to_owned(), kind.clone());
            requires(entry_map, &kind_path, scope, &mut policy.requires)?;
            rules.kinds.insert(kind.clone(), bounds(entry_map, &kind_path)?);
        }
    }
    Ok(rules)
}

fn bounds(map: &Map<String, Value>, path: &str) -> Result<Bounds, PolicyError> {
    let field = |name: &str| present(map, name).map(|v| hours(v, &format!("{path}.{name}"))).transpose();
    Ok(Bounds {
        opens_at_most_hours_before: field("opens_at_most_hours_before")?,
        closes_at_least_hours_before: field("closes_at_least_hours_before")?,
    })
}

fn window(value: &Value, path: &str, policy: &mut WindowPolicy) -> Result<Window, PolicyError> {
    let map = object(value, path)?;
    known(map, path, WINDOW)?;
    note(map, path, &mut policy.descriptions)?;
    let field = |name: &str| {
        let field_path = format!("{path}.{name}");
        let v = present(map, name).ok_or_else(|| invalid(format!("`{field_path}` is required")))?;
        hours(v, &field_path)
    };
    Ok(Window {
        opens_hours_before: field("opens_hours_before")?,
        closes_hours_before: field("closes_hours_before")?,
    })
}

/// A whole, non-negative number of hours that fits a `u32`.
fn hours(value: &Value, path: &str) -> Result<u32, PolicyError> {
    let Value::Number(n) = value else {
        return Err(invalid(format!("`{path}` must be a whole number of hours, not {}", kind_of(value))));
    };
    if let Some(h) = n.as_u64() {
        return u32::try_from(h)
            .map_err(|_| invalid(format!("`{path}` is {h} hours; at most {} are accepted", u32::MAX)));
    }
    if n.as_f64().is_some_and(|f| f < 0.0) {
        return Err(invalid(format!("`{path}` must not be negative (got {n})")));
    }
    Err(invalid(format!("`{path}` must be a whole number of hours (got {n})")))
}

/// A whole, non-negative count (months, days) that fits a `u32`.
fn whole(value: &Value, path: &str) -> Result<u32, PolicyError> {
    value
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| invalid(format!("`{path}` must be a whole, non-negative number, not {value}")))
}

/// An optional `description`: free text, kept for `noticectl windows`, never read by the decision.
fn note(map: &Map<String, Value>, path: &str, notes: &mut Vec<(String, String)>) -> Result<(), PolicyError> {
    match present(map, "description") {
        None => Ok(()),
        Some(Value::String(text)) => {
            notes.push((path.to_owned(), text.clone()));
            Ok(())
        }
        Some(other) => {
            Err(invalid(format!("`{}` must be a string, not {}", join(path, "description"), kind_of(other))))
        }
    }
}

fn kind_name(kind: &str, path: &str) -> Result<(), PolicyError> {
    Kind::parse(kind)
        .map(drop)
        .map_err(|e| invalid(format!("`{path}`: {kind:?} is not a notice kind: {}", e.reason)))
}

/// A jurisdiction as jobs are normalised to: an ISO 3166 code, in upper case. A lower-case key
/// is refused rather than folded, so the file reads exactly as the windows it gives.
fn code(j: &str, path: &str) -> Result<(), PolicyError> {
    match crate::jurisdiction::normalise(j) {
        Ok(canonical) if canonical == j => Ok(()),
        Ok(canonical) => {
            Err(invalid(format!("`{path}`: write the jurisdiction code in upper case, as `{canonical}`")))
        }
        Err(e) => Err(invalid(format!("`{path}`: {e}"))),
    }
}

/// An optional `requires`: a list of template variable names, each at most once.
fn requires(
    map: &Map<String, Value>,
    path: &str,
    scope: Scope,
    into: &mut BTreeMap<Scope, Vec<String>>,
) -> Result<(), PolicyError> {
    let Some(value) = present(map, "requires") else { return Ok(()) };
    let field = join(path, "requires");
    let Value::Array(items) = value else {
        return Err(invalid(format!(
            "`{field}` must be a list of template variable names, not {}",
            kind_of(value)
        )));
    };
    let mut names: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::String(name) = item else {
            return Err(invalid(format!(
                "`{field}[{i}]` must be a template variable name, not {}",
                kind_of(item)
            )));
        };
        let ok = !name.is_empty()
            && name.len() <= MAX_VARIABLE_LEN
            && name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return Err(invalid(format!(
                "`{field}[{i}]`: {name:?} is not a template variable name (a letter or `_`, then letters, \
                 digits or `_`; at most {MAX_VARIABLE_LEN})"
            )));
        }
        if names.contains(name) {
            return Err(invalid(format!("`{field}` lists {name:?} twice")));
        }
        names.push(name.clone());
    }
    if !names.is_empty() {
        into.insert(scope, names);
    }
    Ok(())
}

fn object<'v>(value: &'v Value, path: &str) -> Result<&'v Map<String, Value>, PolicyError> {
    value.as_object().ok_or_else(|| {
        let what = if path.is_empty() { "the configuration".to_owned() } else { format!("`{path}`") };
        invalid(format!("{what} must be a JSON object, not {}", kind_of(value)))
    })
}

fn known(map: &Map<String, Value>, path: &str, allowed: &[&str]) -> Result<(), PolicyError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(unknown) => Err(invalid(format!(
            "unknown field `{}` (expected one of: {})",
            join(path, unknown),
            allowed.join(", ")
        ))),
    }
}

/// A field that is there and not `null`.
fn present<'v>(map: &'v Map<String, Value>, name: &str) -> Option<&'v Value> {
    map.get(name).filter(|v| !v.is_null())
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
