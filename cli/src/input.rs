//! Reading job files: JSON Lines of job bodies, a Lambda SQS event, or JSON Lines of dumped SQS
//! events. Every item keeps where it came from, so errors name a line.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// One job body from an input file.
#[derive(Clone, Debug, PartialEq)]
pub struct InputItem {
    /// Where it came from: `line 7`, or `line 1 record 3` inside an SQS event.
    pub origin: String,
    pub line: usize,
    pub body: String,
    /// SQS string message attributes that came with it (e.g. `replay_batch`).
    pub attributes: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
}

pub fn read_items(path: &Path) -> Result<Vec<InputItem>, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| InputError::Read { path: path.display().to_string(), source })?;
    Ok(parse_items(&text))
}

/// A whole-file SQS event first; otherwise one item per non-blank line, where a line that is
/// itself an SQS event expands into its records. A line that is not JSON stays an item: the
/// sender reports it as invalid with its line number.
pub fn parse_items(text: &str) -> Vec<InputItem> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        if let Some(records) = sqs_records(&value) {
            return records_to_items(records, 1, true);
        }
    }
    let mut items = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(trimmed).ok().as_ref().and_then(sqs_records) {
            Some(records) => items.extend(records_to_items(records, line_no, false)),
            None => items.push(InputItem {
                origin: format!("line {line_no}"),
                line: line_no,
                body: trimmed.to_owned(),
                attributes: BTreeMap::new(),
            }),
        }
    }
    items
}

fn sqs_records(value: &Value) -> Option<&Vec<Value>> {
    value.get("Records")?.as_array()
}

fn records_to_items(records: &[Value], line: usize, whole_file: bool) -> Vec<InputItem> {
    records
        .iter()
        .enumerate()
        .map(|(i, record)| {
            let attributes = record
                .get("messageAttributes")
                .and_then(Value::as_object)
                .map(|attrs| {
                    attrs
                        .iter()
                        .filter_map(|(k, v)| {
                            v.get("stringValue").and_then(Value::as_str).map(|s| (k.clone(), s.to_owned()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            InputItem {
                origin: if whole_file {
                    format!("record {}", i + 1)
                } else {
                    format!("line {line} record {}", i + 1)
                },
                line,
                body: record.get("body").and_then(Value::as_str).unwrap_or("").to_owned(),
                attributes,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_keep_line_numbers_and_skip_blanks() {
        let items = parse_items("{\"a\":1}\n\n   \nnot json\n{\"b\":2}\n");
        let origins: Vec<_> = items.iter().map(|i| i.origin.as_str()).collect();
        assert_eq!(origins, ["line 1", "line 4", "line 5"]);
        assert_eq!(items[1].body, "not json");
    }

    #[test]
    fn sqs_event_file_expands_records_with_attributes() {
        let event = serde_json::json!({"Records": [
            {"messageId": "m1", "body": "{\"x\":1}", "messageAttributes": {"replay_batch": {"stringValue": "b-7", "dataType": "String"}}},
            {"messageId": "m2", "body": "{\"x\":2}"}
        ]});
        let items = parse_items(&serde_json::to_string_pretty(&event).unwrap());
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].origin, "record 1");
        assert_eq!(items[0].attributes.get("replay_batch").map(String::as_str), Some("b-7"));
        let dumped = format!("{}\n{}\n", event, event);
        let items = parse_items(&dumped);
        assert_eq!(items.len(), 4);
        assert_eq!(items[3].origin, "line 2 record 2");
    }
}
