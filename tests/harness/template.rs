//! `template.yaml` as the schema source: the tests build the ledger table from the template's own
//! `NoticeTable` properties, so the emulated table cannot drift from the deployed one.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Workspace root (from `CARGO_MANIFEST_DIR/..`).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("tests crate at {} has no parent directory", manifest.display()))
}

/// `template.yaml` parsed as YAML. CloudFormation short-form tags (`!Ref`, `!Sub`, …) appear as
/// [`serde_yaml::Value::Tagged`].
pub fn template() -> serde_yaml::Value {
    let path = workspace_root().join("template.yaml");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
}

/// The `Properties` of a resource in `template.yaml`, as JSON. Panics if the resource is missing
/// or its properties use an intrinsic function (they could not be evaluated here).
pub fn template_resource_properties(logical_id: &str) -> Value {
    let template = template();
    let props = template
        .get("Resources")
        .and_then(|r| r.get(logical_id))
        .and_then(|r| r.get("Properties"))
        .unwrap_or_else(|| panic!("template.yaml has no Resources.{logical_id}.Properties"));
    yaml_to_json(props, &format!("Resources.{logical_id}.Properties"))
        .unwrap_or_else(|e| panic!("template.yaml: {e}"))
}

/// The ledger table's definition: `template.yaml`'s `NoticeTable` properties.
pub fn ledger_table_properties() -> Value {
    template_resource_properties("NoticeTable")
}

fn yaml_to_json(value: &serde_yaml::Value, path: &str) -> Result<Value, String> {
    use serde_yaml::Value as Y;
    Ok(match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64().map(Value::from).unwrap_or(Value::Null)
            }
        }
        Y::String(s) => Value::String(s.clone()),
        Y::Sequence(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| yaml_to_json(v, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Y::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s.clone(),
                    other => return Err(format!("{path}: non-string key {other:?}")),
                };
                let child = yaml_to_json(v, &format!("{path}.{key}"))?;
                out.insert(key, child);
            }
            Value::Object(out)
        }
        Y::Tagged(tagged) => {
            return Err(format!(
                "{path} uses the intrinsic function {} — the tests create the table from these \
                 properties, so they must be plain values",
                tagged.tag
            ))
        }
    })
}
