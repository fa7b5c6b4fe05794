//! A local HTTP server standing in for SES v2, scripted to produce the failure modes moto cannot
//! (5xx, throttling, hangs, dropped connections).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::http::{decode_chunked, find, parse_headers};

/// How the stub answers one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StubReply {
    /// HTTP 500, `x-amzn-ErrorType: InternalFailure`: the outcome of the send is unknown.
    Status500,
    /// HTTP 429, `x-amzn-ErrorType: TooManyRequestsException` (SES v2 throttling, a modeled
    /// error: the message was not accepted).
    Throttle429,
    /// HTTP 200 `{"MessageId": message_id}`.
    Accept { message_id: String },
    /// Reads the request and never answers (until the client gives up and closes).
    Hang,
    /// Any modeled error, e.g. `Reject { status: 400, error_type: "MessageRejected".into(), … }`.
    Reject { status: u16, error_type: String, message: String },
    /// Reads the request and closes the connection without a response (a connection reset).
    CloseConnection,
    /// HTTP 200 with this JSON body (any other operation's answer, e.g. `GetAccount`).
    Json(serde_json::Value),
}

impl StubReply {
    pub fn accept(message_id: impl Into<String>) -> Self {
        StubReply::Accept { message_id: message_id.into() }
    }

    /// SES v2 `MessageRejected` (HTTP 400).
    pub fn message_rejected(message: impl Into<String>) -> Self {
        StubReply::Reject { status: 400, error_type: "MessageRejected".into(), message: message.into() }
    }
}

/// One request the stub received.
#[derive(Clone, Debug)]
pub struct StubRequest {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

#[derive(Default)]
struct StubState {
    count: AtomicUsize,
    requests: Mutex<Vec<StubRequest>>,
}

/// A local HTTP server standing in for SES v2 (point `AWS_ENDPOINT_URL_SESV2` or the sesv2
/// client's endpoint at it). The n-th request gets `script[n]` (the last entry once the script
/// runs out). Stops when dropped.
pub struct SesStub {
    endpoint: String,
    state: Arc<StubState>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for SesStub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SesStub")
            .field("endpoint", &self.endpoint)
            .field("requests", &self.requests())
            .finish()
    }
}

/// Starts the SES v2 stub on a free loopback port.
///
/// # Panics
/// If `script` is empty.
pub async fn start_ses_stub(script: Vec<StubReply>) -> SesStub {
    assert!(!script.is_empty(), "start_ses_stub needs at least one reply");
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("SES stub cannot bind a loopback port: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("SES stub has no local address: {e}"));
    let state = Arc::new(StubState::default());
    let script = Arc::new(script);
    let accept_state = Arc::clone(&state);
    let task = tokio::spawn(async move {
        // Dropping the set (when this task is aborted) aborts every connection task.
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    connections.spawn(serve_connection(
                        stream,
                        Arc::clone(&accept_state),
                        Arc::clone(&script),
                    ));
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    });
    SesStub { endpoint: format!("http://{addr}"), state, task }
}

impl SesStub {
    /// `http://127.0.0.1:PORT`
    pub fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    /// How many requests arrived (complete requests, whatever the reply).
    pub fn requests(&self) -> usize {
        self.state.count.load(Ordering::SeqCst)
    }

    /// Request bodies, in arrival order.
    pub fn bodies(&self) -> Vec<String> {
        self.received().into_iter().map(|r| r.body).collect()
    }

    /// Full requests, in arrival order.
    pub fn received(&self) -> Vec<StubRequest> {
        self.state.requests.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for SesStub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_connection(mut stream: TcpStream, state: Arc<StubState>, script: Arc<Vec<StubReply>>) {
    let mut buf = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buf).await else {
            return;
        };
        let n = {
            let mut requests = state.requests.lock().unwrap_or_else(|p| p.into_inner());
            requests.push(request);
            state.count.fetch_add(1, Ordering::SeqCst)
        };
        let reply = &script[n.min(script.len() - 1)];
        let request_id = format!("00000000-0000-4000-8000-{n:012}");
        let (status, reason, error_type, body) = match reply {
            StubReply::Accept { message_id } => {
                (200, "OK", None, serde_json::json!({ "MessageId": message_id }).to_string())
            }
            StubReply::Json(value) => (200, "OK", None, value.to_string()),
            StubReply::Status500 => (
                500,
                "Internal Server Error",
                Some("InternalFailure".to_owned()),
                r#"{"message":"InternalFailure"}"#.to_owned(),
            ),
            StubReply::Throttle429 => (
                429,
                "Too Many Requests",
                Some("TooManyRequestsException".to_owned()),
                r#"{"message":"Too many requests have been made to the operation."}"#.to_owned(),
            ),
            StubReply::Reject { status, error_type, message } => (
                *status,
                "Error",
                Some(error_type.clone()),
                serde_json::json!({ "message": message }).to_string(),
            ),
            StubReply::Hang => {
                // Hold the connection until the client gives up.
                let mut sink = [0u8; 1024];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
            StubReply::CloseConnection => return,
        };
        let mut head = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n\
             x-amzn-RequestId: {request_id}\r\nContent-Length: {}\r\n",
            body.len()
        );
        if let Some(error_type) = error_type {
            head.push_str(&format!("x-amzn-ErrorType: {error_type}\r\n"));
        }
        head.push_str("\r\n");
        if stream.write_all(head.as_bytes()).await.is_err()
            || stream.write_all(body.as_bytes()).await.is_err()
            || stream.flush().await.is_err()
        {
            return;
        }
    }
}

/// Reads one request from a keep-alive connection; `None` on EOF or garbage.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<StubRequest> {
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(pos) = find(buf, b"\r\n\r\n") {
            break pos;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next()?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let headers = parse_headers(lines);
    let body_start = header_end + 4;
    let chunked = headers.get("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        loop {
            if let Some(end) = find(&buf[body_start..], b"0\r\n\r\n") {
                let total = body_start + end + 5;
                let body = decode_chunked(&buf[body_start..total])?;
                buf.drain(..total);
                break body;
            }
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    } else {
        let len: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
        while buf.len() < body_start + len {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body = buf[body_start..body_start + len].to_vec();
        buf.drain(..body_start + len);
        body
    };
    Some(StubRequest { method, path, headers, body: String::from_utf8_lossy(&body).into_owned() })
}
