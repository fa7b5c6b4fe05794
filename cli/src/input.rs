//! Reading job files: JSON Lines of job bodies, a Lambda SQS event, or JSON Lines of dumped SQS
//! events. Every item keeps where it came from, so errors name a line.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use notice_ledger::{InvalidJob, Job};

/// Longest input line read. A job body is at most 256 KiB (SQS's own limit); a line may also be a
/// dumped SQS event of up to ten records. Anything longer is refused line by line, unread.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// One job body from an input file.
#[derive(Clone, Debug, PartialEq)]
pub struct InputItem {
    /// Where it came from: `line 7`, or `line 1 record 3` inside an SQS event.
    pub origin: String,
    pub line: usize,
    pub body: String,
    /// SQS string message attributes that came with it (e.g. `replay_batch`).
    pub attributes: BTreeMap<String, String>,
    /// Why the line could not be read (invalid UTF-8, over [`MAX_LINE_BYTES`]): it costs only
    /// itself, and is reported as invalid with its line number.
    pub unreadable: Option<String>,
}

impl InputItem {
    /// The job, or why this item is not one (unreadable line or invalid body).
    pub fn job(&self) -> Result<Job, InvalidJob> {
        match &self.unreadable {
            Some(problem) => Err(InvalidJob::new("body", problem.clone())),
            None => Job::parse(&self.body, &notice_texts::Icu),
        }
    }
}

/// The io error is the `source()`, not part of the message: `noticectl` prints the whole chain
/// (`{:#}`: "cannot read PATH: <io error>").
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {path}")]
    Read { path: String, source: std::io::Error },
}

/// The items of the file at `path`; `-` reads standard input.
pub fn read_items(path: &Path) -> Result<Vec<InputItem>, InputError> {
    let bytes = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes)
            .map_err(|source| InputError::Read { path: "standard input".into(), source })?;
        bytes
    } else {
        std::fs::read(path).map_err(|source| InputError::Read { path: path.display().to_string(), source })?
    };
    Ok(parse_bytes(&bytes))
}

/// [`parse_items`] over raw bytes: a UTF-8 byte-order mark is skipped, and a line that is not
/// UTF-8 or is longer than [`MAX_LINE_BYTES`] becomes an unreadable item with its line number
/// while every other line is read as usual.
pub fn parse_bytes(bytes: &[u8]) -> Vec<InputItem> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if let Ok(text) = std::str::from_utf8(bytes) {
        return parse_items(text);
    }
    let mut items = Vec::new();
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let line_no = i + 1;
        match std::str::from_utf8(line) {
            Ok(text) => items.extend(parse_line(text, line_no)),
            Err(e) => items.push(unreadable(
                line_no,
                format!("line {line_no} is not valid UTF-8 (bad byte at column {})", e.valid_up_to() + 1),
            )),
        }
    }
    items
}

/// A whole-file SQS event first, or one pretty-printed message (a JSON object spread over several
/// lines); otherwise one item per non-blank line, where a line that is itself an SQS event expands
/// into its records. A line that is not JSON stays an item: the sender reports it as invalid with
/// its line number.
pub fn parse_items(text: &str) -> Vec<InputItem> {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    if text.len() <= MAX_LINE_BYTES * 16 {
        if let Ok(value) = serde_json::from_str::<Value>(text) {
            if let Some(records) = sqs_records(&value) {
                return records_to_items(records, 1, true);
            }
            if value.is_object() && text.trim().lines().nth(1).is_some() {
                let line = text.lines().position(|l| !l.trim().is_empty()).unwrap_or(0) + 1;
                return vec![InputItem {
                    origin: format!("line {line}"),
                    line,
                    body: value.to_string(),
                    attributes: BTreeMap::new(),
                    unreadable: None,
                }];
            }
        }
    }
    text.lines().enumerate().flat_map(|(i, line)| parse_line(line, i + 1)).collect()
}

fn unreadable(line: usize, problem: String) -> InputItem {
    InputItem {
        origin: format!("line {line}"),
        line,
        body: String::new(),
        attributes: BTreeMap::new(),
        unreadable: Some(problem),
    }
}

/// The items of one line: none when blank, the records of an SQS event, or one job body.
fn parse_line(line: &str, line_no: usize) -> Vec<InputItem> {
    if line.len() > MAX_LINE_BYTES {
        return vec![unreadable(
            line_no,
            format!("line {line_no} is {} bytes; at most {MAX_LINE_BYTES} are read", line.len()),
        )];
    }
    let mut items = Vec::new();
    {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return items;
        }
        let value = match serde_json::from_str::<Value>(trimmed) {
            Ok(value) => value,
            // A file line is not an SQS body: name the line, not a field.
            Err(e) => return vec![unreadable(line_no, format!("line {line_no} is not valid JSON: {e}"))],
        };
        match sqs_records(&value) {
            Some(records) => items.extend(records_to_items(records, line_no, false)),
            None => items.push(InputItem {
                origin: format!("line {line_no}"),
                line: line_no,
                body: trimmed.to_owned(),
                attributes: BTreeMap::new(),
                unreadable: None,
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
                unreadable: None,
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
        let problem = items[1].unreadable.as_deref().unwrap_or_default();
        assert!(problem.starts_with("line 4 is not valid JSON"), "{problem}");
    }

    #[test]
    fn one_pretty_printed_message_is_one_item() {
        let job = serde_json::json!({"subscription_id": "sub_1", "kind": "k", "template_data": {"a": 1}});
        let items = parse_items(&format!("\n{}\n", serde_json::to_string_pretty(&job).unwrap()));
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!((items[0].origin.as_str(), items[0].line), ("line 2", 2));
        assert_eq!(serde_json::from_str::<Value>(&items[0].body).unwrap(), job);
        // One compact line reads as before.
        assert_eq!(parse_items(&format!("{job}\n"))[0].body, job.to_string());
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

    #[test]
    fn a_bom_is_skipped_and_bad_lines_cost_only_themselves() {
        let good = r#"{"a":1}"#;
        let mut bytes = b"\xEF\xBB\xBF".to_vec();
        bytes.extend_from_slice(format!("{good}\n").as_bytes());
        bytes.extend_from_slice(b"{\"bad\":\"\xff\xfe\"}\n");
        bytes.extend_from_slice(format!("{{\"big\":\"{}\"}}\n", "x".repeat(MAX_LINE_BYTES)).as_bytes());
        bytes.extend_from_slice(format!("{good}\n").as_bytes());
        let items = parse_bytes(&bytes);
        assert_eq!(items.len(), 4);
        assert_eq!(items[0].body, good, "the BOM must not reach line 1");
        assert_eq!(items[0].unreadable, None);
        assert!(items[1].unreadable.as_deref().is_some_and(|p| p.contains("line 2") && p.contains("UTF-8")));
        assert!(items[2].unreadable.as_deref().is_some_and(|p| p.contains("line 3") && p.contains("bytes")));
        assert_eq!((items[3].line, items[3].body.as_str()), (4, good));
        let err = items[1].job().unwrap_err();
        assert_eq!(err.field, "body");
        // Valid UTF-8 with a BOM takes the fast path and still loses the BOM.
        let items = parse_bytes(format!("\u{FEFF}{good}\n").as_bytes());
        assert_eq!(items[0].body, good);
    }
}
