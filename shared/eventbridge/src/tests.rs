//! Against a local stub that answers as EventBridge does: the request's shape, per-entry
//! failures, an error for the whole call, and batches split at ten entries.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;
use notice_ledger::outcomes::{OutcomeKind, PublishedBy, SCHEMA_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// A server answering each request with the next reply of `replies` (the last one repeated),
/// keeping what it read: (head, body) per request.
async fn stub(replies: Vec<String>) -> (SocketAddr, Arc<Mutex<Vec<(String, String)>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&seen);
    tokio::spawn(async move {
        let mut n = 0;
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let mut bytes = Vec::new();
            let mut buf = [0u8; 8192];
            let (head, body) = loop {
                let read = socket.read(&mut buf).await.unwrap_or(0);
                if read == 0 {
                    return;
                }
                bytes.extend_from_slice(&buf[..read]);
                let text = String::from_utf8_lossy(&bytes).into_owned();
                if let Some(end) = text.find("\r\n\r\n") {
                    let head = text[..end].to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length: "))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if text.len() >= end + 4 + length {
                        break (head, text[end + 4..].to_owned());
                    }
                }
            };
            kept.lock().unwrap_or_else(|p| p.into_inner()).push((head, body));
            let reply = replies.get(n).or(replies.last()).cloned().unwrap_or_default();
            n += 1;
            let _ = socket.write_all(reply.as_bytes()).await;
        }
    });
    (addr, seen)
}

fn reply(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn publisher(addr: SocketAddr) -> EventBridgePublisher {
    let creds = SharedCredentialsProvider::new(Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"));
    let http = AwsHttp::new(Some(creds), Duration::from_secs(2));
    EventBridgePublisher::new(http, "eu-west-1", Some(&format!("http://{addr}")), "billing-outcomes")
        .unwrap_or_else(|e| panic!("{e}"))
}

fn event(i: usize) -> OutcomeEvent {
    OutcomeEvent {
        schema_version: SCHEMA_VERSION,
        notice_key: format!("{i:064x}"),
        subscription_id: format!("sub_{i}"),
        period_start: "2026-10-01".into(),
        kind: "renewal_notice_t72".into(),
        revision: 0,
        outcome: OutcomeKind::Missed,
        at: chrono::Utc::now(),
        charge_at: None,
        hours_before_charge: None,
        reason: Some("send window closed".into()),
        message_id: None,
        config_version: None,
        jurisdiction: None,
        obligation: None,
        published_by: PublishedBy::Sender,
    }
}

#[tokio::test]
async fn per_entry_failures_are_read_in_order() {
    let (addr, seen) = stub(vec![reply(
        "200 OK",
        r#"{"FailedEntryCount":1,"Entries":[{"EventId":"e-1"},{"ErrorCode":"ThrottlingException","ErrorMessage":"slow down"},{"EventId":"e-3"}]}"#,
    )])
    .await;
    let results = publisher(addr).publish(&[event(1), event(2), event(3)]).await;
    assert_eq!(results[0], Ok(()));
    assert_eq!(
        results[1],
        Err(PublishError::Refused { code: "ThrottlingException".into(), message: "slow down".into() })
    );
    assert_eq!(results[2], Ok(()));
    let requests = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(requests.len(), 1);
    let (head, body) = &requests[0];
    assert!(head.starts_with("post / http/1.1"), "{head}");
    assert!(head.contains("x-amz-target: awsevents.putevents"), "{head}");
    assert!(head.contains("content-type: application/x-amz-json-1.1"), "{head}");
    assert!(head.contains("/eu-west-1/events/aws4_request"), "{head}");
    let body: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let entry = &body["Entries"][1];
    assert_eq!(entry["Source"], SOURCE);
    assert_eq!(entry["DetailType"], DETAIL_TYPE);
    assert_eq!(entry["EventBusName"], "billing-outcomes");
    let detail: OutcomeEvent = serde_json::from_str(entry["Detail"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the detail is an outcome event: {e}"));
    assert_eq!(detail, event(2).clone_with_at(detail.at));
}

#[tokio::test]
async fn an_error_for_the_whole_call_fails_every_entry_of_it() {
    let (addr, _) = stub(vec![reply(
        "400 Bad Request",
        r#"{"__type":"ResourceNotFoundException","message":"Event bus billing-outcomes does not exist."}"#,
    )])
    .await;
    let results = publisher(addr).publish(&[event(1), event(2)]).await;
    assert_eq!(results.len(), 2);
    for r in results {
        assert!(
            matches!(&r, Err(PublishError::Refused { code, message }) if code == "ResourceNotFoundException" && message.contains("does not exist")),
            "{r:?}"
        );
    }
}

#[tokio::test]
async fn a_batch_is_split_at_ten_entries() {
    let ten = format!(r#"{{"FailedEntryCount":0,"Entries":[{}]}}"#, [r#"{"EventId":"e"}"#; 10].join(","));
    let two = r#"{"FailedEntryCount":0,"Entries":[{"EventId":"e"},{"EventId":"e"}]}"#;
    let (addr, seen) = stub(vec![reply("200 OK", &ten), reply("200 OK", two)]).await;
    let events: Vec<OutcomeEvent> = (0..12).map(event).collect();
    let results = publisher(addr).publish(&events).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 12);
    let sizes: Vec<usize> = seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(_, body)| {
            let v: Value = serde_json::from_str(body).unwrap_or_default();
            v["Entries"].as_array().map_or(0, Vec::len)
        })
        .collect();
    assert_eq!(sizes, [10, 2]);
}

#[tokio::test]
async fn no_listener_is_unavailable_for_every_entry() {
    let creds = SharedCredentialsProvider::new(Credentials::new("AKIDEXAMPLE", "secret", None, None, "test"));
    let http = AwsHttp::new(Some(creds), Duration::from_secs(1));
    let p = EventBridgePublisher::new(http, "us-east-1", Some("http://127.0.0.1:1"), "b")
        .unwrap_or_else(|e| panic!("{e}"));
    let results = p.publish(&[event(1)]).await;
    assert!(matches!(results[..], [Err(PublishError::Unavailable(_))]), "{results:?}");
}

#[test]
fn the_default_endpoint_is_the_regions() {
    let p = EventBridgePublisher::new(AwsHttp::new(None, Duration::from_secs(1)), "eu-central-1", None, "b")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.target.uri().to_string(), "https://events.eu-central-1.amazonaws.com/");
}

trait WithAt {
    fn clone_with_at(&self, at: chrono::DateTime<chrono::Utc>) -> Self;
}

impl WithAt for OutcomeEvent {
    fn clone_with_at(&self, at: chrono::DateTime<chrono::Utc>) -> Self {
        Self { at, ..self.clone() }
    }
}
