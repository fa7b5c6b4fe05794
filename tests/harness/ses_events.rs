//! SES's event stream for the mail the emulator accepted: a `Send` and a `Delivery` event per
//! message, as the configuration set publishes them through SNS to the events queue (an SQS event
//! the reconciler takes as it is). moto records neither tags nor events, so each accepted message
//! (`/moto-api/data.json`: id, destination, subject) is paired with the recorded `SendEmail` request
//! that made it (same recipient and subject, first unpaired one) to learn its `notice_key` tag —
//! so the reconciler resolves exactly the sends that were made, under SES's own message ids.
//! Mail to SES's mailbox simulator gets the simulator's answer instead: `bounce@` (labels
//! allowed: `bounce+run@`) a `Send` and a `Bounce`; `complaint@` a `Send`, a `Delivery` and a
//! `Complaint`.

use chrono::Utc;
use serde_json::{json, Value};

/// The SQS event (SNS envelopes) carrying a `Send` and a `Delivery` event for every message in
/// `sent` (moto's `ses.Message` entries) whose `SendEmail` request is among `requests` (the bodies
/// [`crate::Moto::recorded_send_email_requests`] returns). Messages without a matching tagged
/// request are left out.
pub fn ses_events_for_sends(sent: &[Value], requests: &[Value]) -> Value {
    let mut used = vec![false; requests.len()];
    let mut records = Vec::new();
    for message in sent {
        let (Some(id), Some(to)) =
            (message["id"].as_str(), message["destinations"]["ToAddresses"][0].as_str())
        else {
            continue;
        };
        let subject = message["subject"].as_str().unwrap_or_default();
        let found = requests.iter().enumerate().position(|(i, r)| {
            !used[i]
                && r["Destination"]["ToAddresses"][0].as_str() == Some(to)
                && r["Content"]["Simple"]["Subject"]["Data"].as_str().unwrap_or_default() == subject
        });
        let Some(i) = found else { continue };
        used[i] = true;
        let tags: Vec<(String, String)> = requests[i]["EmailTags"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| Some((t["Name"].as_str()?.to_owned(), t["Value"].as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        if !tags.iter().any(|(name, _)| name == "notice_key") {
            continue;
        }
        let mut tag_map = serde_json::Map::new();
        for (name, value) in tags {
            tag_map.insert(name, json!([value]));
        }
        let source = requests[i]["FromEmailAddress"].as_str().unwrap_or_default();
        let now = Utc::now().to_rfc3339();
        let mail = json!({"timestamp": now, "messageId": id, "source": source, "destination": [to],
            "commonHeaders": {"to": [to], "subject": subject, "messageId": id}, "tags": tag_map});
        for (event_type, detail) in events_for(to, &now) {
            let event = json!({"eventType": event_type, "mail": mail, detail.0: detail.1});
            let sns = json!({"Type": "Notification", "MessageId": format!("local-{id}-{event_type}"),
                "TopicArn": "arn:aws:sns:us-east-1:123456789012:notice-ledger-SesEventsTopic-local",
                "Message": event.to_string(), "Timestamp": now});
            records.push(json!({"messageId": format!("local-{id}-{event_type}"), "receiptHandle": "local",
                "body": sns.to_string(), "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
                "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:notice-ledger-SesEventsQueue-local",
                "awsRegion": "us-east-1"}));
        }
    }
    json!({ "Records": records })
}

/// The events SES publishes for mail to `to`: the mailbox simulator's answer for its addresses,
/// else a send and a delivery.
fn events_for(to: &str, now: &str) -> Vec<(&'static str, (&'static str, Value))> {
    let send = ("Send", ("send", json!({})));
    let delivery = (
        "Delivery",
        (
            "delivery",
            json!({"timestamp": now, "recipients": [to], "smtpResponse": "250 2.6.0 Message received"}),
        ),
    );
    let (local, domain) = to.rsplit_once('@').unwrap_or((to, ""));
    let mailbox = local.split('+').next().unwrap_or(local);
    match (mailbox, domain) {
        ("bounce", "simulator.amazonses.com") => vec![
            send,
            (
                "Bounce",
                (
                    "bounce",
                    json!({"bounceType": "Permanent", "bounceSubType": "General", "timestamp": now,
                        "bouncedRecipients": [{"emailAddress": to, "status": "5.1.1", "diagnosticCode": "smtp; 550 5.1.1 user unknown"}]}),
                ),
            ),
        ],
        ("complaint", "simulator.amazonses.com") => vec![
            send,
            delivery,
            (
                "Complaint",
                (
                    "complaint",
                    json!({"timestamp": now, "complaintFeedbackType": "abuse",
                        "complainedRecipients": [{"emailAddress": to}]}),
                ),
            ),
        ],
        _ => vec![send, delivery],
    }
}

/// `message` in the SNS envelope the events queue carries (SNS → SQS without raw delivery).
pub fn sns(message: &str) -> String {
    json!({"Type": "Notification", "MessageId": "sns-1", "TopicArn": "arn:aws:sns:us-east-1:123456789012:ses-events",
        "Message": message, "Timestamp": Utc::now().to_rfc3339()})
    .to_string()
}

/// An SQS event from the events queue with these bodies, one record each (first deliveries,
/// message ids `ses-msg-<i>`), as Lambda hands it to the reconciler or the sender.
pub fn sqs_event(bodies: &[String]) -> aws_lambda_events::event::sqs::SqsEvent {
    let records: Vec<Value> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| {
            json!({"messageId": format!("ses-msg-{i}"), "receiptHandle": "r", "body": b,
            "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {}, "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:ses-events", "awsRegion": "us-east-1"})
        })
        .collect();
    match serde_json::from_value(json!({ "Records": records })) {
        Ok(event) => event,
        Err(e) => panic!("an SQS event of {} records: {e}", bodies.len()),
    }
}
