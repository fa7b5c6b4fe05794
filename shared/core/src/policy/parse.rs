//! `NOTICE_WINDOWS` JSON → [`WindowPolicy`], walking the document by hand so that every error
//! names the field path at fault (`jurisdictions.US-CA.kinds.trial_conversion.opens_at_most_hours_before`)
//! — serde's derived errors say only "line 1 column 212". Old files (default, kinds,
//! jurisdiction_floors_hours) read exactly as before.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{invalid, Bounds, JurisdictionRules, Window, WindowPolicy};
use crate::error::ConfigError;
use crate::identity::Kind;
use crate::job::MAX_CODE_LEN;

const TOP: &[&str] = &["default", "kinds", "jurisdictions", "jurisdiction_floors_hours", "description"];
const WINDOW: &[&str] = &["opens_hours_before", "closes_hours_before"];
const JURISDICTION: &[&str] =
    &["opens_at_most_hours_before", "closes_at_least_hours_before", "kinds", "description"];
const KIND_BOUNDS: &[&str] = &["opens_at_most_hours_before", "closes_at_least_hours_before", "description"];

pub(super) fn policy(text: &str) -> Result<WindowPolicy, ConfigError> {
    let value: Value = serde_json::from_str(text).map_err(|e| invalid(format!("is not valid JSON: {e}")))?;
    let top = object(&value, "")?;
    known(top, "", TOP)?;
    let mut policy = WindowPolicy::default();
    note(top, "", &mut policy.descriptions)?;
    if let Some(v) = present(top, "default") {
        policy.default = window(v, "default")?;
    }
    if let Some(v) = present(top, "kinds") {
        for (kind, w) in object(v, "kinds")? {
            let path = format!("kinds.{kind}");
            kind_name(kind, &path)?;
            policy.kinds.insert(kind.clone(), window(w, &path)?);
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
            let rules = jurisdiction(entry, &path, &mut policy.descriptions)?;
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
    Ok(policy)
}

fn jurisdiction(
    value: &Value,
    path: &str,
    notes: &mut Vec<(String, String)>,
) -> Result<JurisdictionRules, ConfigError> {
    let map = object(value, path)?;
    known(map, path, JURISDICTION)?;
    note(map, path, notes)?;
    let mut rules = JurisdictionRules { bounds: bounds(map, path)?, kinds: BTreeMap::new() };
    if let Some(v) = present(map, "kinds") {
        let kinds_path = format!("{path}.kinds");
        for (kind, entry) in object(v, &kinds_path)? {
            let kind_path = format!("{kinds_path}.{kind}");
            kind_name(kind, &kind_path)?;
            let entry_map = object(entry, &kind_path)?;
            known(entry_map, &kind_path, KIND_BOUNDS)?;
            note(entry_map, &kind_path, notes)?;
            rules.kinds.insert(kind.clone(), bounds(entry_map, &kind_path)?);
        }
    }
    Ok(rules)
}

fn bounds(map: &Map<String, Value>, path: &str) -> Result<Bounds, ConfigError> {
    let field = |name: &str| present(map, name).map(|v| hours(v, &format!("{path}.{name}"))).transpose();
    Ok(Bounds {
        opens_at_most_hours_before: field("opens_at_most_hours_before")?,
        closes_at_least_hours_before: field("closes_at_least_hours_before")?,
    })
}

fn window(value: &Value, path: &str) -> Result<Window, ConfigError> {
    let map = object(value, path)?;
    known(map, path, WINDOW)?;
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
fn hours(value: &Value, path: &str) -> Result<u32, ConfigError> {
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

/// An optional `description`: free text, kept for `noticectl windows`, never read by the decision.
fn note(map: &Map<String, Value>, path: &str, notes: &mut Vec<(String, String)>) -> Result<(), ConfigError> {
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

fn kind_name(kind: &str, path: &str) -> Result<(), ConfigError> {
    Kind::parse(kind)
        .map(drop)
        .map_err(|e| invalid(format!("`{path}`: {kind:?} is not a notice kind: {}", e.reason)))
}

/// A jurisdiction code as jobs carry it (`[A-Za-z0-9_-]`, at most 32): anything else could never match.
fn code(j: &str, path: &str) -> Result<(), ConfigError> {
    let ok = !j.is_empty()
        && j.len() <= MAX_CODE_LEN
        && j.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "`{path}`: {j:?} is not a jurisdiction code (1 to {MAX_CODE_LEN} of [A-Za-z0-9_-], as jobs carry it)"
        )))
    }
}

fn object<'v>(value: &'v Value, path: &str) -> Result<&'v Map<String, Value>, ConfigError> {
    value.as_object().ok_or_else(|| {
        let what = if path.is_empty() { "the configuration".to_owned() } else { format!("`{path}`") };
        invalid(format!("{what} must be a JSON object, not {}", kind_of(value)))
    })
}

fn known(map: &Map<String, Value>, path: &str, allowed: &[&str]) -> Result<(), ConfigError> {
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
