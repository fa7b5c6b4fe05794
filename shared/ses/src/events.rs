//! SES event notifications → [`ProviderEvidence`].
//!
//! SES publishes through SNS (an SQS body that is an SNS envelope whose `Message` is the event as a
//! JSON string — or, with raw message delivery, the event itself) or through EventBridge
//! (`source: aws.ses`, the event in `detail`). Correlation is by the `notice_key` EmailTag
//! (`mail.tags.notice_key`): SES replaces any Message-ID we could set. Events carry no guarantee of
//! order or uniqueness; the ledger's evidence rules absorb both.

use chrono::{DateTime, Utc};
use serde_json::Value;

use notice_ledger::ledger::{DeliveryStatus, ProviderEvidence};
use notice_ledger::NoticeKey;

/// The plain-text message SNS sends when SES validates a new topic.
pub const SNS_VALIDATION_TEXT: &str = "Successfully validated SNS topic for Amazon SES event publishing.";

/// What one notification turned out to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SesNotification {
    /// An event about one of our notices.
    Evidence(ProviderEvidence),
    /// An event without a `notice_key` tag (mail sent by something else through the same
    /// configuration set): counted and skipped.
    Untagged { event_type: String },
    /// SNS's topic validation message: skipped.
    Validation,
}

/// A notification that cannot be understood: the record fails (→ dead-letter queue).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed SES notification: {0}")]
pub struct MalformedEvent(pub String);

fn malformed(msg: impl Into<String>) -> MalformedEvent {
    MalformedEvent(msg.into())
}

/// Parses one SQS message body: an SNS envelope, a raw SES event, or an EventBridge event.
pub fn parse_body(body: &str) -> Result<SesNotification, MalformedEvent> {
    if body.trim() == SNS_VALIDATION_TEXT {
        return Ok(SesNotification::Validation);
    }
    let value: Value = serde_json::from_str(body).map_err(|e| malformed(format!("body is not JSON: {e}")))?;
    parse_value(&value)
}

/// Parses an already-decoded notification of any of the three shapes.
pub fn parse_value(value: &Value) -> Result<SesNotification, MalformedEvent> {
    if value.get("Type").and_then(Value::as_str) == Some("Notification") {
        let message = value
            .get("Message")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("SNS envelope without a Message string"))?;
        return parse_body(message);
    }
    if value.get("source").and_then(Value::as_str) == Some("aws.ses") {
        let detail = value.get("detail").ok_or_else(|| malformed("EventBridge event without detail"))?;
        let detail_type = value.get("detail-type").and_then(Value::as_str).unwrap_or("");
        return parse_ses_event(detail, Some(detail_type));
    }
    parse_ses_event(value, None)
}

/// EventBridge names events by `detail-type` ("Email Sent"); SNS/SQS by `eventType` ("Send").
fn event_type(event: &Value, detail_type: Option<&str>) -> Option<String> {
    event
        .get("eventType")
        .or_else(|| event.get("notificationType"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| detail_type.and_then(eventbridge_type).map(str::to_owned))
}

fn eventbridge_type(detail_type: &str) -> Option<&'static str> {
    Some(match detail_type {
        "Email Sent" => "Send",
        "Email Delivered" => "Delivery",
        "Email Bounced" => "Bounce",
        "Email Complaint Received" => "Complaint",
        "Email Rejected" => "Reject",
        "Email Delivery Delayed" => "DeliveryDelay",
        "Email Rendering Failed" => "Rendering Failure",
        "Email Opened" => "Open",
        "Email Clicked" => "Click",
        "Email Subscribed" => "Subscription",
        _ => return None,
    })
}

/// SES event type → the delivery status it proves.
pub fn status_for(event_type: &str) -> Option<DeliveryStatus> {
    Some(match event_type {
        "Send" => DeliveryStatus::Accepted,
        "DeliveryDelay" => DeliveryStatus::Delayed,
        "Delivery" => DeliveryStatus::Delivered,
        "Open" | "Click" | "Subscription" => DeliveryStatus::Engaged,
        "Reject" | "Rendering Failure" | "RenderingFailure" => DeliveryStatus::NotDelivered,
        "Bounce" => DeliveryStatus::Bounced,
        "Complaint" => DeliveryStatus::Complained,
        _ => return None,
    })
}

fn parse_ses_event(event: &Value, detail_type: Option<&str>) -> Result<SesNotification, MalformedEvent> {
    let kind = event_type(event, detail_type).ok_or_else(|| malformed("no eventType"))?;
    let status = status_for(&kind).ok_or_else(|| malformed(format!("unknown SES event type {kind:?}")))?;
    let mail = event.get("mail").ok_or_else(|| malformed(format!("{kind} event without mail")))?;
    let tag = mail
        .get("tags")
        .and_then(|t| t.get("notice_key"))
        .and_then(|v| v.as_array().and_then(|a| a.first()).or(Some(v)))
        .and_then(Value::as_str);
    let Some(tag) = tag else {
        return Ok(SesNotification::Untagged { event_type: kind });
    };
    let key = NoticeKey::parse(tag).map_err(|e| malformed(format!("notice_key tag: {e}")))?;
    let message_id = mail
        .get("messageId")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| malformed(format!("{kind} event without mail.messageId")))?;
    let received_at = Utc::now();
    let at = mail
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map_or(received_at, |t| t.with_timezone(&Utc));
    ProviderEvidence::bounded(key, message_id, status, at, received_at)
        .map(SesNotification::Evidence)
        .map_err(|e| malformed(format!("{kind} event: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "439cd4564d72ee966ff47dffecf8bdbbd67b3b4e01b23211daafb0ea4ce4dacc";

    fn ses(event_type: &str) -> Value {
        json!({"eventType": event_type, "mail": {"timestamp": "2026-11-02T12:00:00.000Z", "messageId": "0100-abc",
            "source": "billing@example.com", "destination": ["a@example.com"],
            "tags": {"notice_key": [KEY], "kind": ["renewal_notice_t72"]}}})
    }

    #[test]
    fn sns_envelope_raw_and_eventbridge_agree() {
        let raw = ses("Send");
        let envelope = json!({"Type": "Notification", "MessageId": "x", "Message": raw.to_string()});
        let mut detail = raw.clone();
        detail.as_object_mut().unwrap().remove("eventType");
        let eventbridge = json!({"source": "aws.ses", "detail-type": "Email Sent", "detail": detail});
        let a = parse_body(&raw.to_string()).unwrap();
        assert_eq!(a, parse_body(&envelope.to_string()).unwrap());
        assert_eq!(a, parse_value(&eventbridge).unwrap());
        let SesNotification::Evidence(ev) = a else { panic!() };
        assert_eq!(ev.key.as_str(), KEY);
        assert_eq!(ev.message_id, "0100-abc");
        assert_eq!(ev.status, DeliveryStatus::Accepted);
    }

    #[test]
    fn an_event_carrying_a_later_secret_versions_key_resolves_by_it() {
        // While the key secret rotates, sends are tagged with keys of either version.
        let v2 = format!("v2-{}", &KEY[..56]);
        let mut event = ses("Delivery");
        event["mail"]["tags"]["notice_key"] = json!([v2]);
        let SesNotification::Evidence(ev) = parse_value(&event).unwrap() else { panic!() };
        assert_eq!((ev.key.as_str(), ev.key.version()), (v2.as_str(), 2));
        event["mail"]["tags"]["notice_key"] = json!([format!("v2-{KEY}")]);
        assert!(parse_value(&event).is_err(), "a v2 key is 56 hex characters, not 64");
    }

    #[test]
    fn far_future_timestamps_are_clamped_and_oversized_ids_refused() {
        let mut event = ses("Delivery");
        event["mail"]["timestamp"] = json!("2999-01-01T00:00:00Z");
        let SesNotification::Evidence(ev) = parse_value(&event).unwrap() else { panic!() };
        assert!(ev.at <= Utc::now() + chrono::Duration::minutes(6), "{}", ev.at);
        let past = parse_value(&ses("Delivery")).unwrap();
        let SesNotification::Evidence(past) = past else { panic!() };
        assert_eq!(past.at.to_rfc3339(), "2026-11-02T12:00:00+00:00", "a past time is kept");
        for id in ["x".repeat(200 * 1024), "id with space".into(), "id\u{1b}".into()] {
            let mut event = ses("Send");
            event["mail"]["messageId"] = json!(id);
            assert!(parse_value(&event).is_err(), "{:.40}", id);
        }
    }

    #[test]
    fn every_event_type_maps() {
        for (t, s) in [
            ("Delivery", DeliveryStatus::Delivered),
            ("Bounce", DeliveryStatus::Bounced),
            ("Complaint", DeliveryStatus::Complained),
            ("Reject", DeliveryStatus::NotDelivered),
            ("DeliveryDelay", DeliveryStatus::Delayed),
            ("Rendering Failure", DeliveryStatus::NotDelivered),
            ("Open", DeliveryStatus::Engaged),
            ("Click", DeliveryStatus::Engaged),
            ("Subscription", DeliveryStatus::Engaged),
        ] {
            let SesNotification::Evidence(ev) = parse_value(&ses(t)).unwrap() else { panic!("{t}") };
            assert_eq!(ev.status, s, "{t}");
        }
    }

    #[test]
    fn validation_untagged_and_malformed() {
        let validation = json!({"Type": "Notification", "Message": SNS_VALIDATION_TEXT});
        assert_eq!(parse_body(&validation.to_string()).unwrap(), SesNotification::Validation);
        let mut untagged = ses("Delivery");
        untagged["mail"]["tags"] = json!({"other": ["x"]});
        assert_eq!(
            parse_value(&untagged).unwrap(),
            SesNotification::Untagged { event_type: "Delivery".into() }
        );
        let mut no_headers = ses("Send");
        no_headers["mail"].as_object_mut().unwrap().remove("headers");
        assert!(parse_value(&no_headers).is_ok());
        assert!(parse_body("{").is_err());
        assert!(parse_body("[]").is_err());
        let mut bad_key = ses("Send");
        bad_key["mail"]["tags"]["notice_key"] = json!(["not-a-key"]);
        assert!(parse_value(&bad_key).is_err());
        let mut no_id = ses("Send");
        no_id["mail"].as_object_mut().unwrap().remove("messageId");
        assert!(parse_value(&no_id).is_err());
        assert!(parse_value(&json!({"Type": "Notification"})).is_err());
    }
}
