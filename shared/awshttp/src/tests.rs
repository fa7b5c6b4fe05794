//! The client against one-shot local servers: signing, whole answers, bounds, failures.

use std::net::SocketAddr;
use std::time::Duration;

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{PayloadChecksumKind, PercentEncodingMode, UriPathNormalizationMode};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::signing::signing_settings;

fn creds(token: Option<&str>) -> Option<SharedCredentialsProvider> {
    Some(SharedCredentialsProvider::new(Credentials::new(
        "AKIDEXAMPLE",
        "secret",
        token.map(str::to_owned),
        None,
        "test",
    )))
}

/// A server answering one request per connection with `reply`, handing back what it read.
async fn one_shot(reply: &'static str) -> (SocketAddr, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap_or_else(|e| panic!("accept: {e}"));
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).await.unwrap_or(0);
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if n == 0 || text.contains("\r\n\r\n") && text.ends_with("}") {
                break;
            }
        }
        let _ = socket.write_all(reply.as_bytes()).await;
        String::from_utf8_lossy(&seen).into_owned()
    });
    (addr, task)
}

#[test]
fn targets_need_a_host_and_an_http_scheme() {
    assert!(Target::new("https://dynamodb.us-east-1.amazonaws.com", "/", "us-east-1", "dynamodb").is_ok());
    let t = Target::new("http://127.0.0.1:5000/", "/v2/email/outbound-emails", "us-east-1", "ses")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.uri().to_string(), "http://127.0.0.1:5000/v2/email/outbound-emails");
    assert!(Target::new("127.0.0.1:5000", "/", "us-east-1", "ses").is_err());
    assert!(Target::new("ftp://host", "/", "us-east-1", "ses").is_err());
}

#[test]
fn error_codes_as_the_sdk_reads_them() {
    let mut headers = HeaderMap::new();
    assert_eq!(
        error_code(&headers, Some("com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException")),
        Some("ConditionalCheckFailedException")
    );
    assert_eq!(error_code(&headers, None), None);
    headers
        .insert("x-amzn-ErrorType", HeaderValue::from_static("MessageRejected:http://internal.amazon.com/"));
    assert_eq!(error_code(&headers, Some("Other")), Some("MessageRejected"), "the header wins");
}

#[tokio::test]
async fn signs_with_the_session_token_and_reads_the_whole_answer() {
    let (addr, server) = one_shot(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{\"a\":\"b\"}\r\n",
    )
    .await;
    let http = AwsHttp::new(creds(Some("TOKEN123")), Duration::from_secs(3));
    let target = Target::new(&format!("http://{addr}"), "/", "eu-west-1", "dynamodb")
        .unwrap_or_else(|e| panic!("{e}"));
    let xt = HeaderName::from_static("x-amz-target");
    let response = http
        .post(
            &target,
            "application/x-amz-json-1.0",
            &[(xt, "DynamoDB_20120810.PutItem")],
            b"{}".to_vec(),
            Duration::from_secs(5),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
    assert_eq!(&response.body[..], b"{\"a\":\"b\"}\r\n");
    let seen = server.await.unwrap_or_else(|e| panic!("{e}")).to_ascii_lowercase();
    assert!(seen.starts_with("post / http/1.1"), "{seen}");
    assert!(seen.contains("x-amz-security-token: token123"), "{seen}");
    assert!(seen.contains("authorization: aws4-hmac-sha256 credential=akidexample/"), "{seen}");
    assert!(seen.contains("/eu-west-1/dynamodb/aws4_request"), "{seen}");
    assert!(seen.contains("x-amz-target: dynamodb_20120810.putitem"), "{seen}");
}

/// A server answering one bodiless request (a `GET`) with `reply`, handing back what it read.
async fn one_get(reply: String) -> (SocketAddr, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap_or_else(|e| panic!("accept: {e}"));
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        let _ = socket.write_all(reply.as_bytes()).await;
        String::from_utf8_lossy(&seen).into_owned()
    });
    (addr, task)
}

#[tokio::test]
async fn a_get_is_signed_as_s3_expects() {
    let (addr, server) =
        one_get("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".into()).await;
    let http = AwsHttp::new(creds(None), Duration::from_secs(3));
    let target = Target::new(&format!("http://{addr}"), "/bucket/notice-config/ab.json", "eu-west-1", "s3")
        .unwrap_or_else(|e| panic!("{e}"));
    let response = http.get(&target, 16, Duration::from_secs(5)).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((response.status, &response.body[..]), (StatusCode::OK, &b"hello"[..]));
    let seen = server.await.unwrap_or_else(|e| panic!("{e}")).to_ascii_lowercase();
    assert!(seen.starts_with("get /bucket/notice-config/ab.json http/1.1"), "{seen}");
    // The SHA-256 of the empty payload, which S3 requires as a header.
    let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    assert!(seen.contains(&format!("x-amz-content-sha256: {empty}")), "{seen}");
    assert!(seen.contains("/eu-west-1/s3/aws4_request"), "{seen}");
    assert!(!seen.contains("content-type"), "{seen}");
}

#[tokio::test]
async fn a_get_longer_than_its_bound_is_refused() {
    for announced in [true, false] {
        let reply = if announced {
            format!("HTTP/1.1 200 OK\r\nContent-Length: 64\r\nConnection: close\r\n\r\n{}", "x".repeat(64))
        } else {
            format!("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{}", "x".repeat(64))
        };
        let (addr, _server) = one_get(reply).await;
        let http = AwsHttp::new(creds(None), Duration::from_secs(3));
        let target = Target::new(&format!("http://{addr}"), "/b/k", "us-east-1", "s3")
            .unwrap_or_else(|e| panic!("{e}"));
        let err = http.get(&target, 16, Duration::from_secs(5)).await.err();
        assert!(
            matches!(err, Some(GetError::TooLarge { limit: 16, status: StatusCode::OK })),
            "announced={announced}: {err:?}"
        );
    }
}

#[test]
fn only_s3_is_signed_the_s3_way() {
    let s3 = signing_settings("s3");
    assert_eq!(s3.payload_checksum_kind, PayloadChecksumKind::XAmzSha256);
    assert_eq!(s3.percent_encoding_mode, PercentEncodingMode::Single);
    assert_eq!(s3.uri_path_normalization_mode, UriPathNormalizationMode::Disabled);
    let ssm = signing_settings("ssm");
    assert_eq!(ssm.payload_checksum_kind, PayloadChecksumKind::NoHeader);
    assert_eq!(ssm.percent_encoding_mode, PercentEncodingMode::Double);
}

#[tokio::test]
async fn a_silent_server_is_a_timeout_and_maybe_sent() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
    let _hold = tokio::spawn(async move {
        let accepted = listener.accept().await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        drop(accepted);
    });
    let http = AwsHttp::new(creds(None), Duration::from_secs(3));
    let target =
        Target::new(&format!("http://{addr}"), "/", "us-east-1", "ses").unwrap_or_else(|e| panic!("{e}"));
    let err = http
        .post(&target, "application/json", &[], b"{}".to_vec(), Duration::from_millis(200))
        .await
        .err()
        .unwrap_or_else(|| panic!("a silent server must not answer"));
    assert!(matches!(err, CallError::Timeout(_)), "{err:?}");
    assert!(!err.nothing_sent());
}

#[tokio::test]
async fn no_listener_is_a_connect_error() {
    let http = AwsHttp::new(creds(None), Duration::from_secs(3));
    let target = Target::new("http://127.0.0.1:1", "/", "us-east-1", "ses").unwrap_or_else(|e| panic!("{e}"));
    let err = http
        .post(&target, "application/json", &[], b"{}".to_vec(), Duration::from_secs(3))
        .await
        .err()
        .unwrap_or_else(|| panic!("nothing listens on port 1"));
    assert!(matches!(err, CallError::Connect(_)), "{err:?}");
    let CallError::Connect(failure) = &err else { unreachable!() };
    assert_eq!(failure.kind, Some(std::io::ErrorKind::ConnectionRefused), "{err:?}");
}

#[tokio::test]
async fn without_credentials_nothing_is_sent() {
    let http = AwsHttp::new(None, Duration::from_secs(3));
    let target = Target::new("http://127.0.0.1:1", "/", "us-east-1", "ses").unwrap_or_else(|e| panic!("{e}"));
    let err = http
        .post(&target, "application/json", &[], b"{}".to_vec(), Duration::from_secs(3))
        .await
        .err()
        .unwrap_or_else(|| panic!("no credentials"));
    assert!(matches!(err, CallError::Credentials(_)) && err.nothing_sent(), "{err:?}");
}
