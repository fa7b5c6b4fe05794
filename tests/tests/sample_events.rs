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

/// The instant the samples were written for: their records' `SentTimestamp`s fall in the seconds
/// after it, and the README's first command pins `--now` to it.
const SAMPLES_SENT_AT: &str = "2026-12-02T12:00:00Z";

/// How far today is from [`SAMPLES_SENT_AT`], in whole seconds, fixed once per run: every file is
/// moved by the same amount, so a job repeated across files (a duplicate, a replay) stays
/// byte-identical and is suppressed, never a payload conflict.
fn since_the_samples() -> chrono::Duration {
    static SHIFT: std::sync::OnceLock<chrono::Duration> = std::sync::OnceLock::new();
    *SHIFT.get_or_init(|| {
        let sent = chrono::DateTime::parse_from_rfc3339(SAMPLES_SENT_AT).expect("a constant instant");
        chrono::Duration::seconds((chrono::Utc::now() - sent.with_timezone(&chrono::Utc)).num_seconds())
    })
}

/// The samples carry fixed dates (a job's `charge_at`), so the sender's real clock would make
/// every one of them `missed` once those dates pass. Each job's `charge_at` is moved by
/// [`since_the_samples`], which keeps what the sample means — inside its window, early, late — on
/// any day the suite runs. Bodies that are not a job (SES envelopes, broken JSON) pass untouched.
fn as_if_sent_now(text: &str) -> String {
    let Ok(mut event) = serde_json::from_str::<Value>(text) else { return text.to_owned() };
    let Some(records) = event.get_mut("Records").and_then(Value::as_array_mut) else {
        return text.to_owned();
    };
    for record in records {
        let Some(body) = record.get("body").and_then(Value::as_str) else { continue };
        let Ok(mut job) = serde_json::from_str::<Value>(body) else { continue };
        let charge_at = job.get("charge_at").and_then(Value::as_str);
        let Some(charge_at) = charge_at.and_then(|c| chrono::DateTime::parse_from_rfc3339(c).ok()) else {
            continue;
        };
        let moved = charge_at.with_timezone(&chrono::Utc) + since_the_samples();
        job["charge_at"] = Value::String(moved.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        record["body"] = Value::String(job.to_string());
    }
    event.to_string()
}

#[test]
fn a_sample_replayed_today_keeps_its_place_in_the_window() {
    let valid = as_if_sent_now(&read("sender-valid.json"));
    let event: Value = serde_json::from_str(&valid).expect("still JSON");
    for record in event["Records"].as_array().expect("records") {
        let job: Value = serde_json::from_str(record["body"].as_str().expect("body")).expect("a job");
        let charge_at = chrono::DateTime::parse_from_rfc3339(job["charge_at"].as_str().expect("charge_at"))
            .expect("RFC 3339");
        let ahead = charge_at.with_timezone(&chrono::Utc) - chrono::Utc::now();
        // Sent 45–58 h before their charges: inside the default 72–24 h window.
        assert!(ahead > chrono::Duration::hours(24) && ahead < chrono::Duration::hours(72), "{job}");
    }
    // Broken JSON bodies pass through as they are.
    let invalid = as_if_sent_now(&read("sender-invalid.json"));
    assert!(invalid.contains("2026-13-01"));
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

// ------------------------------------------------------------------------------------------------
// Every sample event, delivered to the Lambda binary it is for — the `notice-*` entry points
// (`functions/*/src/main.rs`, built here as `notice-e2e-*`) started as Lambda starts them, against
// a local Lambda Runtime API and the emulator — is accepted: the runtime deserialises it, the
// handler answers (no invocation error), and no record is refused or left unprocessed.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notice_e2e::start_moto;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, Mutex as AsyncMutex};

const NEXT: &str = "/2018-06-01/runtime/invocation/next";
const INVOCATION_TIMEOUT: Duration = Duration::from_secs(60);
/// As the events name it (`eventSourceARN`), so deferrals and parking address a real queue.
const REMINDER_QUEUE: &str = "notice-ledger-ReminderQueue-7Hq2LwX9aB1c";

/// What the binary posted for one invocation.
#[derive(Debug)]
enum Completion {
    Response(Value),
    Error(String),
}

/// A Lambda Runtime API serving one invocation at a time to one process.
struct RuntimeApi {
    address: String,
    invocations: mpsc::UnboundedSender<(String, String)>,
    completions: mpsc::UnboundedReceiver<(String, Completion)>,
}

async fn start_runtime_api(function_name: &str) -> RuntimeApi {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
    let address = listener.local_addr().expect("bound address").to_string();
    let (invocations, pending) = mpsc::unbounded_channel::<(String, String)>();
    let (completed, completions) = mpsc::unbounded_channel();
    let pending = Arc::new(AsyncMutex::new(pending));
    let arn = format!("arn:aws:lambda:us-east-1:123456789012:function:{function_name}");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_connection(stream, pending.clone(), completed.clone(), arn.clone()));
        }
    });
    RuntimeApi { address, invocations, completions }
}

async fn serve_connection(
    stream: TcpStream,
    pending: Arc<AsyncMutex<mpsc::UnboundedReceiver<(String, String)>>>,
    completed: mpsc::UnboundedSender<(String, Completion)>,
    arn: String,
) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    // HTTP/1.1 keep-alive: one request after the other on this connection.
    while let Some((method, path, body)) = read_request(&mut read).await {
        let reply = if method == "GET" && path == NEXT {
            let Some((id, event)) = pending.lock().await.recv().await else { return };
            let deadline = chrono::Utc::now().timestamp_millis() + INVOCATION_TIMEOUT.as_millis() as i64;
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nLambda-Runtime-Aws-Request-Id: {id}\r\n\
                 Lambda-Runtime-Deadline-Ms: {deadline}\r\nLambda-Runtime-Invoked-Function-Arn: {arn}\r\n\
                 Lambda-Runtime-Trace-Id: Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0\r\n\
                 Content-Length: {}\r\n\r\n{event}",
                event.len()
            )
        } else if method == "POST" && path.starts_with("/2018-06-01/runtime/invocation/") {
            let rest = &path["/2018-06-01/runtime/invocation/".len()..];
            let (id, kind) = rest.split_once('/').unwrap_or((rest, ""));
            let text = String::from_utf8_lossy(&body).into_owned();
            let completion = match kind {
                "response" => Completion::Response(
                    serde_json::from_str(&text)
                        .unwrap_or_else(|e| panic!("response is not JSON ({e}): {text}")),
                ),
                _ => Completion::Error(text),
            };
            let _ = completed.send((id.to_owned(), completion));
            accepted()
        } else if method == "POST" && path == "/2018-06-01/runtime/init/error" {
            let _ = completed.send((String::new(), Completion::Error(String::from_utf8_lossy(&body).into())));
            accepted()
        } else {
            panic!("unexpected Runtime API request {method} {path}");
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn accepted() -> String {
    let body = r#"{"status":"OK"}"#;
    format!(
        "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// One request: method, path and the body (Content-Length or chunked). `None` at end of stream.
async fn read_request(
    read: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    if read.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        read.read_line(&mut header).await.ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let mut body = Vec::new();
    if headers.get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            read.read_line(&mut size).await.ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            read.read_exact(&mut chunk).await.ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(len) = headers.get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(len, 0);
        read.read_exact(&mut body).await.ok()?;
    }
    Some((method, path, body))
}

/// A Lambda binary running against its own Runtime API, its output collected.
struct Function {
    name: &'static str,
    api: RuntimeApi,
    child: Child,
    output: Arc<Mutex<Vec<String>>>,
    invocations: usize,
}

impl Function {
    /// Starts `binary` with nothing of this process's environment: the Lambda service's variables,
    /// the emulator's endpoint and credentials, and `env`.
    async fn start(name: &'static str, binary: &str, env: &[(String, String)]) -> Self {
        let api = start_runtime_api(name).await;
        let mut command = Command::new(binary);
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_LAMBDA_RUNTIME_API", &api.address)
            .env("AWS_LAMBDA_FUNCTION_NAME", name)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}"))
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "2026/12/02/[$LATEST]sample")
            .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {binary}: {e}"));
        let output = Arc::new(Mutex::new(Vec::new()));
        for pipe in [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let output = output.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    output.lock().expect("output lock").push(line);
                }
            });
        }
        Self { name, api, child, output, invocations: 0 }
    }

    fn output(&self) -> String {
        self.output.lock().expect("output lock").join("\n")
    }

    /// The `Function` dimension of every EMF document (a JSON line with `_aws`) printed so far.
    fn emf_functions(&self) -> Vec<String> {
        self.output
            .lock()
            .expect("output lock")
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v.get("_aws").is_some())
            .map(|v| v["Function"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Log lines (JSON) written since line `from`.
    fn logs_since(&self, from: usize) -> Vec<Value> {
        self.output.lock().expect("output lock")[from..]
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v.get("level").is_some())
            .collect()
    }

    /// Invokes the binary with the sample event `file`; returns its response and its log lines.
    async fn invoke(&mut self, file: &str) -> (Value, Vec<Value>) {
        self.invocations += 1;
        let id = format!("sample-{}-{}", self.name, self.invocations);
        let from = self.output.lock().expect("output lock").len();
        self.api.invocations.send((id.clone(), as_if_sent_now(&read(file)))).expect("runtime API is serving");
        let completion = tokio::select! {
            c = self.api.completions.recv() => c,
            status = self.child.wait() => panic!(
                "{} exited ({status:?}) while handling {file}; its output:\n{}", self.name, self.output()
            ),
            () = tokio::time::sleep(INVOCATION_TIMEOUT) => panic!(
                "{} did not answer {file} within {INVOCATION_TIMEOUT:?}; its output:\n{}", self.name, self.output()
            ),
        };
        let (got_id, completion) = completion.expect("runtime API channel open");
        // Give the log lines of this invocation time to arrive.
        tokio::time::sleep(Duration::from_millis(200)).await;
        match completion {
            Completion::Response(value) if got_id == id => (value, self.logs_since(from)),
            Completion::Response(value) => {
                panic!("{}: a response for {got_id} while {id} was asked: {value}", self.name)
            }
            Completion::Error(error) => panic!(
                "{} did not accept {file} (invocation {got_id}): {error}; its output:\n{}",
                self.name,
                self.output()
            ),
        }
    }
}

fn record_ids(file: &str) -> Vec<String> {
    sqs(file).records.into_iter().map(|r| r.message_id.expect("messageId")).collect()
}

fn failures(file: &str, response: &Value) -> Vec<String> {
    let failures = response
        .get("batchItemFailures")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{file}: the response is not an SQS batch response: {response}"));
    failures.iter().map(|f| f["itemIdentifier"].as_str().expect("itemIdentifier").to_owned()).collect()
}

/// The binary's EMF documents carry its deployed name (`AWS_LAMBDA_FUNCTION_NAME`, here a stack's
/// `<stack>-sender`, not the binary's name) as `Function`: what its own stack's alarms read.
fn assert_emf_function(function: &Function) {
    let names = function.emf_functions();
    assert!(
        !names.is_empty(),
        "{} printed no EMF document; its output:\n{}",
        function.name,
        function.output()
    );
    assert!(names.iter().all(|n| n == function.name), "{}: EMF Function dimensions {names:?}", function.name);
}

/// Every record's outcome, from the sender's `processed` log line in the record's span.
fn outcomes(file: &str, logs: &[Value]) -> BTreeMap<String, String> {
    let mut outcomes = BTreeMap::new();
    for log in logs {
        // Each span's fields once (in `spans`), never again as the current `span`: the bytes of
        // every line are paid for in CloudWatch Logs.
        assert!(log.get("span").is_none(), "{file}: the current span printed a second time: {log}");
    }
    for log in logs.iter().filter(|l| l["fields"]["message"] == "processed") {
        let notice = log["spans"].as_array().and_then(|spans| spans.iter().find(|s| s["name"] == "notice"));
        let id = notice
            .and_then(|span| span["message_id"].as_str())
            .unwrap_or_else(|| panic!("{file}: no message_id in {log}"));
        // The invocation's span: its request id, and not the trace id the runtime was handed.
        let invoke = log["spans"].as_array().and_then(|spans| spans.first()).unwrap_or(&Value::Null);
        assert_eq!(invoke["name"], "invoke", "{file}: {log}");
        assert!(invoke["requestId"].as_str().is_some_and(|r| !r.is_empty()), "{file}: {log}");
        assert!(invoke.get("xrayTraceId").is_none(), "{file}: the trace id printed on a line: {log}");
        // The span carries no copy of the line's outcome, and a `replay_batch` only when there is one.
        let span = notice.unwrap_or(&Value::Null);
        assert!(span.get("outcome").is_none(), "{file}: the outcome repeated in the span: {log}");
        assert!(
            span.get("replay_batch").is_none_or(|b| b.as_str().is_some_and(|b| !b.is_empty())),
            "{file}: an empty replay_batch printed: {log}"
        );
        let outcome =
            log["fields"]["outcome"].as_str().unwrap_or_else(|| panic!("{file}: no outcome in {log}"));
        // The one line per message carries the provider's message id once sent, and only then.
        let provider_id = log["fields"]["message_id"].as_str();
        assert_eq!(
            provider_id.is_some_and(|m| !m.is_empty()),
            outcome == "sent",
            "{file}: a `processed` line's provider message id: {log}"
        );
        assert!(outcomes.insert(id.to_owned(), outcome.to_owned()).is_none(), "{file}: {id} processed twice");
    }
    for id in record_ids(file) {
        assert!(outcomes.contains_key(&id), "{file}: record {id} has no outcome; logs: {logs:?}");
    }
    outcomes
}

#[tokio::test]
async fn every_sample_event_is_accepted_by_its_function() {
    let moto = start_moto().await;
    moto.create_ledger_table("notices").await;
    let queue = moto.create_queue(REMINDER_QUEUE).await;
    let dlq = moto.create_queue("notice-ledger-ReminderDLQ-Qm3dV8sT1wYz").await;
    moto.verify_email_identity("billing@example.com").await;
    moto.create_configuration_set("notice-events").await;
    moto.create_schedule_group("notice-parked").await;

    let mut common = moto.env_vars();
    common.push(("NOTICE_TABLE".into(), "notices".into()));
    let mut sender_env = common.clone();
    for (k, v) in [
        // The secret the samples' notice keys were made with (events/README.md).
        ("NOTICE_KEY_SECRET", "local-demo-secret"),
        ("NOTICE_FROM", "billing@example.com"),
        // A deployed sender needs a manage page of its own (never a reserved example domain).
        ("NOTICE_MANAGE_URL", "https://billing.notice-ledger.dev/manage"),
        ("NOTICE_CONFIGURATION_SET", "notice-events"),
        ("NOTICE_QUEUE_URL", queue.as_str()),
        ("NOTICE_DEAD_LETTER_QUEUE_URL", dlq.as_str()),
        ("NOTICE_SCHEDULE_GROUP", "notice-parked"),
        ("NOTICE_SCHEDULER_ROLE_ARN", "arn:aws:iam::123456789012:role/notice-scheduler-to-queue"),
    ] {
        sender_env.push((k.into(), v.into()));
    }

    // Sender: every job is decided (sent, suppressed, deferred or parked, missed — whatever the
    // clock makes of the fixed sample dates); only the broken jobs are invalid, and those go to the
    // DLQ directly (acked). A record stays on the queue only when it is deferred.
    let mut sender =
        Function::start("notice-ledger-sender", env!("CARGO_BIN_EXE_notice-e2e-sender"), &sender_env).await;
    let refused =
        ["invalid", "payload_conflict", "render_failed", "ledger_unavailable", "no_time_left", "released"];
    for file in [
        "sender-valid.json",
        "sender-duplicate.json",
        "sender-revision.json",
        "sender-replay.json",
        "sender-early.json",
        "sender-late.json",
        "sender-invalid.json",
    ] {
        let (response, logs) = sender.invoke(file).await;
        let outcomes = outcomes(file, &logs);
        eprintln!("{file}: {outcomes:?}, batch item failures {:?}", failures(file, &response));
        if file == "sender-valid.json" {
            assert!(outcomes.values().any(|o| o == "sent"), "{file}: nothing sent: {outcomes:?}");
        }
        for id in failures(file, &response) {
            let outcome = &outcomes[&id];
            assert!(
                matches!(outcome.as_str(), "deferred" | "rate_limited"),
                "{file}: {id} failed as {outcome}"
            );
        }
        for (id, outcome) in &outcomes {
            if file == "sender-invalid.json" {
                assert_eq!(outcome, "invalid", "{file}: {id}");
            } else {
                assert!(!refused.contains(&outcome.as_str()), "{file}: {id} was {outcome}; logs: {logs:?}");
            }
        }
        if file == "sender-invalid.json" {
            assert!(failures(file, &response).is_empty(), "{file}: invalid jobs are dead-lettered directly");
        }
    }
    let dead = moto.sqs().await.receive_message().queue_url(&dlq).max_number_of_messages(10).send().await;
    let dead = dead.expect("ReceiveMessage on the DLQ").messages.unwrap_or_default();
    assert_eq!(dead.len(), 2, "sender-invalid.json's two jobs are in the DLQ");
    assert_emf_function(&sender);

    // Reconciler: every SES event shape (SNS→SQS envelopes, raw delivery, the topic's validation
    // message, EventBridge) is applied or skipped, never failed.
    let mut reconciler =
        Function::start("notice-ledger-reconciler", env!("CARGO_BIN_EXE_notice-e2e-reconciler"), &common)
            .await;
    for file in [
        "ses-sns-sqs-send.json",
        "ses-sns-sqs-delivery.json",
        "ses-sns-sqs-bounce.json",
        "ses-sns-sqs-validation.json",
        "ses-sqs-raw-send.json",
    ] {
        let (response, _) = reconciler.invoke(file).await;
        eprintln!("{file}: {response}");
        assert_eq!(failures(file, &response), Vec::<String>::new(), "{file}: {response}");
    }
    for file in ["ses-eventbridge-send.json", "ses-eventbridge-delivery.json"] {
        let (response, _) = reconciler.invoke(file).await;
        eprintln!("{file}: {response}");
        assert!(response.get("result").is_some(), "{file}: {response}");
    }
    assert_emf_function(&reconciler);

    // Reporter: the schedule's event.
    let mut reporter =
        Function::start("notice-ledger-reporter", env!("CARGO_BIN_EXE_notice-e2e-reporter"), &common).await;
    let (response, _) = reporter.invoke("reporter-schedule.json").await;
    eprintln!("reporter-schedule.json: {response}");
    assert_emf_function(&reporter);

    // Nothing in events/ was left out.
    let invoked = [sender.invocations, reconciler.invocations, reporter.invocations].iter().sum::<usize>();
    let files = std::fs::read_dir(events_dir())
        .expect("events/")
        .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json")))
        .count();
    assert_eq!(invoked, files, "every events/*.json is invoked by its function");
}
