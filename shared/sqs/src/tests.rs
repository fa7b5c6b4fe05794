//! The SQS adapter's failures, read from the SDK's typed error: a closed port, and a stand-in
//! server that answers every call with one scripted SQS error.

use std::time::Duration;

use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use chrono::Utc;
use notice_ledger::intake::JobQueue;
use notice_ledger::queue::QueuedMessage;
use notice_ledger::Fault;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// An SQS client for `endpoint` with static credentials and no retries (one call, one answer).
fn client(endpoint: &str) -> aws_sdk_sqs::Client {
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(endpoint)
        .retry_config(aws_sdk_sqs::config::retry::RetryConfig::disabled())
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

/// A server that answers every request with `status` and the SQS JSON error `code`.
async fn answering(status: &'static str, code: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0u8; 8192];
                // Headers, then the Content-Length body.
                loop {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
                    let complete = text.find("\r\n\r\n").is_some_and(|end| {
                        let len = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: ")?.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        got.len() >= end + 4 + len
                    });
                    if complete || n == 0 {
                        break;
                    }
                }
                let body = format!(r#"{{"__type":"com.amazonaws.sqs#{code}","message":"scripted {code}"}}"#);
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(body.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

fn received(sqs: aws_sdk_sqs::Client, endpoint: &str) -> ReceivedMessage {
    ReceivedMessage {
        sqs,
        message_id: "m-1".into(),
        body: "{}".into(),
        receipt_handle: Some("receipt".into()),
        queue_arn: None,
        queue_url: Some(format!("{endpoint}/123456789012/reminders")),
        dead_letter_queue_url: Some(format!("{endpoint}/123456789012/reminders-dlq")),
        attributes: Vec::new(),
        received_at: Utc::now(),
    }
}

#[tokio::test]
async fn a_closed_port_is_unreachable_by_its_kind_on_every_call() {
    let endpoint = "http://127.0.0.1:1";
    let refused = Fault::Unreachable("connection refused");
    let message = received(client(endpoint), endpoint);
    for err in [
        message.hide(Duration::from_secs(30)).await.unwrap_err(),
        message.requeue(Duration::from_secs(30)).await.unwrap_err(),
        message.dead_letter("invalid").await.unwrap_err(),
    ] {
        assert_eq!((err.service, &err.fault), ("SQS", &refused), "{err}");
    }
    let producer = Producer::new(client(endpoint), format!("{endpoint}/1/q"));
    let err = producer.enqueue(&serde_json::json!({"a": 1})).await.unwrap_err();
    assert_eq!((err.service, &err.fault), ("SQS", &refused), "{err}");
    let err = producer.send_batch(&[(0, Message::body("{}"))]).await.unwrap_err();
    assert_eq!(err.fault(), refused, "{err}");
}

#[tokio::test]
async fn a_throttled_or_denied_answer_is_its_kind_not_its_words() {
    let throttled = answering("400 Bad Request", "RequestThrottled").await;
    let message = received(client(&throttled), &throttled);
    let err = message.hide(Duration::from_secs(30)).await.unwrap_err();
    assert_eq!(err.fault, Fault::Throttled, "{err}");
    let producer = Producer::new(client(&throttled), format!("{throttled}/1/q"));
    let err = producer.enqueue(&serde_json::json!({"a": 1})).await.unwrap_err();
    assert_eq!(err.fault, Fault::Throttled, "{err}");

    let denied = answering("400 Bad Request", "AccessDeniedException").await;
    let producer = Producer::new(client(&denied), format!("{denied}/1/q"));
    let err = producer.send(Message::body("{}")).await.unwrap_err();
    assert_eq!(err.fault(), Fault::Denied { action: Some("sqs:SendMessage".into()) }, "{err}");
    let message = received(client(&denied), &denied);
    let err = message.hide(Duration::from_secs(30)).await.unwrap_err();
    assert_eq!(err.fault, Fault::Denied { action: Some("sqs:ChangeMessageVisibility".into()) }, "{err}");

    // An error code with no kind of its own is not guessed from its message.
    let other = answering("400 Bad Request", "InvalidParameterValue").await;
    let message = received(client(&other), &other);
    let err = message.requeue(Duration::from_secs(30)).await.unwrap_err();
    assert_eq!(err.fault, Fault::Other, "{err}");
}

#[tokio::test]
async fn a_message_without_a_queue_is_no_service_fault() {
    let mut message = received(client("http://127.0.0.1:1"), "http://127.0.0.1:1");
    message.queue_url = None;
    message.dead_letter_queue_url = None;
    let err = message.requeue(Duration::from_secs(1)).await.unwrap_err();
    assert_eq!(err.fault, Fault::Other, "{err}");
    let err = message.dead_letter("x").await.unwrap_err();
    assert_eq!(err.fault, Fault::Other, "{err}");
}

/// The port's promise every reader trusts (the dedupe rule, the span, the replay's metrics): an
/// empty `replay_batch` attribute is no replay.
#[test]
fn an_empty_replay_batch_attribute_is_no_replay() {
    let attribute = |value: &str| Attribute {
        name: REPLAY_BATCH_ATTRIBUTE.into(),
        data_type: "String".into(),
        value: value.into(),
    };
    let mut message = received(client("http://127.0.0.1:1"), "http://127.0.0.1:1");
    assert_eq!(message.replay_batch(), None);
    message.attributes = vec![attribute("")];
    assert_eq!(message.replay_batch(), None);
    message.attributes = vec![attribute("replay-2026-12-05")];
    assert_eq!(message.replay_batch(), Some("replay-2026-12-05"));
}
