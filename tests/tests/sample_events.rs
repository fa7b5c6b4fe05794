//! The files in `events/` have the shapes Lambda delivers, and their notice keys are the published
//! test vectors (secret `local-demo-secret`).

use std::path::PathBuf;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use hmac::{Hmac, Mac};
use notice_e2e::workspace_root;
use serde_json::Value;
use sha2::Sha256;

const SAMPLE_SECRET: &[u8] = b"local-demo-secret";

fn events_dir() -> PathBuf {
    workspace_root().join("events")
}

fn read(name: &str) -> String {
    let path = events_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn sqs(name: &str) -> SqsEvent {
    serde_json::from_str(&read(name)).unwrap_or_else(|e| panic!("{name} is not an SQS event: {e}"))
}

fn bodies(name: &str) -> Vec<String> {
    let event = sqs(name);
    assert!(!event.records.is_empty(), "{name} has no records");
    event
        .records
        .into_iter()
        .map(|r| {
            assert_eq!(r.event_source.as_deref(), Some("aws:sqs"), "{name}");
            assert!(r.message_id.is_some() && r.receipt_handle.is_some(), "{name}");
            assert!(r.attributes.contains_key("ApproximateReceiveCount"), "{name}");
            r.body.unwrap_or_else(|| panic!("{name}: record without body"))
        })
        .collect()
}

fn key(identity: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SAMPLE_SECRET).expect("any key length");
    mac.update(identity.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

fn job_key(job: &Value) -> String {
    key(&format!(
        "{}|{}|{}|{}",
        job["subscription_id"].as_str().expect("subscription_id"),
        job["period_start"].as_str().expect("period_start"),
        job["kind"].as_str().expect("kind"),
        job.get("revision").and_then(Value::as_u64).unwrap_or(0)
    ))
}

#[test]
fn published_key_vector() {
    assert_eq!(
        key("sub_8812|2026-12-01|renewal_notice_t72|0"),
        "e2ad6e31e416bca7da293084f79399c22577b04a1704b31a6279d73948d14dca"
    );
}

#[test]
fn every_json_file_is_json() {
    let mut count = 0;
    for entry in std::fs::read_dir(events_dir()).expect("events/ exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) == Some("json") {
            let text = std::fs::read_to_string(&path).expect("readable");
            serde_json::from_str::<Value>(&text)
                .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
            count += 1;
        }
    }
    assert!(count >= 15, "expected the full set of sample events, found {count}");
}

#[test]
fn renewals_jsonl_covers_every_case() {
    let text = read("renewals.jsonl");
    let lines: Vec<&str> = text.lines().collect();
    let parsed: Vec<Option<Value>> = lines.iter().map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(parsed.iter().filter(|p| p.is_none()).count(), 1, "exactly one broken line");
    let jobs: Vec<&Value> = parsed.iter().flatten().collect();
    let distinct: std::collections::BTreeSet<String> = jobs.iter().map(|j| j.to_string()).collect();
    assert_eq!(distinct.len() + 1, jobs.len(), "exactly one exact duplicate");
    assert!(jobs.iter().any(|j| j["revision"] == 1));
    assert!(jobs.iter().any(|j| j["period_start"] == "2026-13-01"));
    assert!(jobs.iter().any(|j| j["charge_at"] == "2027-03-01T09:00:00Z"));
    assert!(jobs.iter().any(|j| j["charge_at"] == "2026-12-02T20:00:00Z"));
}

#[test]
fn sender_events_are_sqs_batches_of_jobs() {
    for name in ["sender-valid.json", "sender-revision.json", "sender-early.json", "sender-late.json"] {
        for body in bodies(name) {
            let job: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(job["subscription_id"].is_string(), "{name}");
        }
    }
    let dup = bodies("sender-duplicate.json");
    assert_eq!(dup.len(), 2);
    assert_eq!(dup[0], dup[1]);

    let invalid = bodies("sender-invalid.json");
    assert_eq!(invalid.len(), 2);
    assert!(invalid.iter().any(|b| serde_json::from_str::<Value>(b).is_err()));
    assert!(invalid.iter().any(|b| b.contains("2026-13-01")));

    let replay = sqs("sender-replay.json");
    let attr = &replay.records[0].message_attributes["replay_batch"];
    assert_eq!(attr.data_type.as_deref(), Some("String"));
    assert!(attr.string_value.is_some());
}

fn ses_event_in_sns(name: &str) -> Value {
    let body = &bodies(name)[0];
    let envelope: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(envelope["Type"], "Notification", "{name}");
    let message = envelope["Message"].as_str().expect("Message is a string");
    serde_json::from_str(message).unwrap_or_else(|e| panic!("{name}: Message is not JSON: {e}"))
}

#[test]
fn ses_events_carry_the_key_of_a_sample_job() {
    let jobs: Vec<Value> =
        read("renewals.jsonl").lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let known: Vec<String> = jobs.iter().map(job_key).collect();

    let mut events = vec![
        ses_event_in_sns("ses-sns-sqs-send.json"),
        ses_event_in_sns("ses-sns-sqs-delivery.json"),
        ses_event_in_sns("ses-sns-sqs-bounce.json"),
    ];
    let raw: Value = serde_json::from_str(&bodies("ses-sqs-raw-send.json")[0]).expect("raw SES event");
    events.push(raw);
    for name in ["ses-eventbridge-send.json", "ses-eventbridge-delivery.json"] {
        let eb: EventBridgeEvent =
            serde_json::from_str(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(eb.source, "aws.ses");
        assert!(eb.detail_type.starts_with("Email "));
        events.push(eb.detail);
    }
    for event in &events {
        let tag = event["mail"]["tags"]["notice_key"][0].as_str().expect("notice_key tag");
        assert!(known.iter().any(|k| k == tag), "unknown key {tag}");
        assert!(event["mail"]["messageId"].is_string());
        assert!(event["eventType"].is_string());
    }

    let validation = &bodies("ses-sns-sqs-validation.json")[0];
    let envelope: Value = serde_json::from_str(validation).expect("envelope");
    assert_eq!(envelope["Message"], "Successfully validated SNS topic for Amazon SES event publishing.");
}

#[test]
fn reporter_event_is_a_scheduler_event() {
    let eb: EventBridgeEvent = serde_json::from_str(&read("reporter-schedule.json")).expect("event");
    assert_eq!(eb.source, "aws.scheduler");
}
