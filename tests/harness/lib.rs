//! The end-to-end harness: a private moto server per test (DynamoDB, SQS and SES v2 in one
//! process) and a scriptable SES v2 stand-in for the failure modes moto cannot produce
//! (5xx, throttling, hangs, dropped connections).
//!
//! Failures here are loud on purpose: if the emulator cannot be started the test panics with
//! the fix (`./scripts/test.sh`) instead of skipping.

pub mod ledger_suite;
pub mod postgres;
pub mod sender_app;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::{Credentials, SharedCredentialsProvider};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, LocalSecondaryIndex,
    Projection, ProjectionType, ProvisionedThroughput, ScalarAttributeType, TableStatus,
    TimeToLiveSpecification,
};
use base64::Engine as _;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

/// Region every emulator client uses.
pub const REGION: &str = "us-east-1";
/// moto's default account id (what appears in its ARNs and queue URLs).
pub const ACCOUNT_ID: &str = "123456789012";
/// Static credentials moto accepts.
pub const ACCESS_KEY_ID: &str = "test";
pub const SECRET_ACCESS_KEY: &str = "test";

const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

// ------------------------------------------------------------------------------------------
// paths and the template

/// Workspace root (from `CARGO_MANIFEST_DIR/..`).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("tests crate at {} has no parent directory", manifest.display()))
}

/// `template.yaml` parsed as YAML. CloudFormation short-form tags (`!Ref`, `!Sub`, …) appear as
/// [`serde_yaml::Value::Tagged`].
pub fn template() -> serde_yaml::Value {
    let path = workspace_root().join("template.yaml");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
}

/// The `Properties` of a resource in `template.yaml`, as JSON. Panics if the resource is missing
/// or its properties use an intrinsic function (they could not be evaluated here).
pub fn template_resource_properties(logical_id: &str) -> Value {
    let template = template();
    let props = template
        .get("Resources")
        .and_then(|r| r.get(logical_id))
        .and_then(|r| r.get("Properties"))
        .unwrap_or_else(|| panic!("template.yaml has no Resources.{logical_id}.Properties"));
    yaml_to_json(props, &format!("Resources.{logical_id}.Properties"))
        .unwrap_or_else(|e| panic!("template.yaml: {e}"))
}

/// The ledger table's definition: `template.yaml`'s `NoticeTable` properties.
pub fn ledger_table_properties() -> Value {
    template_resource_properties("NoticeTable")
}

fn yaml_to_json(value: &serde_yaml::Value, path: &str) -> Result<Value, String> {
    use serde_yaml::Value as Y;
    Ok(match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64().map(Value::from).unwrap_or(Value::Null)
            }
        }
        Y::String(s) => Value::String(s.clone()),
        Y::Sequence(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| yaml_to_json(v, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Y::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s.clone(),
                    other => return Err(format!("{path}: non-string key {other:?}")),
                };
                let child = yaml_to_json(v, &format!("{path}.{key}"))?;
                out.insert(key, child);
            }
            Value::Object(out)
        }
        Y::Tagged(tagged) => {
            return Err(format!(
                "{path} uses the intrinsic function {} — the tests create the table from these \
                 properties, so they must be plain values",
                tagged.tag
            ))
        }
    })
}

// ------------------------------------------------------------------------------------------
// minimal HTTP/1.1 client (moto's management API)

/// A response from [`http_request`].
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names lowercased.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One HTTP/1.1 request (`Connection: close`) to `endpoint` (`http://host:port`).
pub async fn http_request(
    endpoint: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> std::io::Result<HttpResponse> {
    let authority = endpoint
        .strip_prefix("http://")
        .ok_or_else(|| std::io::Error::other(format!("only http:// endpoints: {endpoint}")))?
        .trim_end_matches('/');
    let call = async {
        let mut stream = TcpStream::connect(authority).await?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\
             Accept: */*\r\nContent-Length: {}\r\n",
            body.len()
        );
        if !body.is_empty() {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        stream.flush().await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        parse_response(&raw)
    };
    tokio::time::timeout(HTTP_TIMEOUT, call)
        .await
        .map_err(|_| std::io::Error::other(format!("{method} {endpoint}{path} timed out")))?
}

fn parse_response(raw: &[u8]) -> std::io::Result<HttpResponse> {
    let bad = |what: &str| std::io::Error::other(format!("malformed HTTP response: {what}"));
    let split = find(raw, b"\r\n\r\n").ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|_| bad("non-UTF-8 headers"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or_else(|| bad("empty"))?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad(status_line))?;
    let headers = parse_headers(lines);
    let rest = &raw[split + 4..];
    let body = if headers.get("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        decode_chunked(rest).ok_or_else(|| bad("bad chunked body"))?
    } else if let Some(len) = headers.get("content-length").and_then(|l| l.parse::<usize>().ok()) {
        rest[..len.min(rest.len())].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(HttpResponse { status, headers, body })
}

fn parse_headers<'a>(lines: impl Iterator<Item = &'a str>) -> BTreeMap<String, String> {
    lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Decodes a complete chunked body; `None` if it is incomplete or malformed.
fn decode_chunked(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = find(data, b"\r\n")?;
        let size_field = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_field.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        if data.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

// ------------------------------------------------------------------------------------------
// moto

/// A private moto server. The process is killed when this is dropped.
pub struct Moto {
    endpoint: String,
    child: Child,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Moto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Moto").field("endpoint", &self.endpoint).finish()
    }
}

/// The Python that has moto installed: env `MOTO_PYTHON`, else `<workspace root>/.venv/bin/python`.
fn moto_python() -> PathBuf {
    match std::env::var_os("MOTO_PYTHON") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => workspace_root().join(".venv/bin/python"),
    }
}

/// moto's server wrapped so requests apply one at a time (see the script's docstring).
fn moto_script() -> PathBuf {
    workspace_root().join("tests/moto_serial.py")
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap_or_else(|e| panic!("cannot bind a loopback port: {e}"));
    listener.local_addr().unwrap_or_else(|e| panic!("cannot read the bound port: {e}")).port()
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// Starts moto (through `tests/moto_serial.py`, which applies requests one at a time) on a free
/// 127.0.0.1 port and waits until `GET /moto-api/` answers 200 (at most 30 s). Python: env
/// `MOTO_PYTHON`, else `<workspace root>/.venv/bin/python`.
///
/// # Panics
/// If the binary is missing or the server does not come up — run `./scripts/test.sh`, which
/// installs the pinned emulator into `.venv`.
pub async fn start_moto() -> Moto {
    let binary = moto_python();
    if !binary.is_file() {
        panic!(
            "the emulator's Python was not found at {} — run ./scripts/test.sh (it creates .venv and \
             installs tests/requirements.txt: moto[server]==5.2.5), or point MOTO_PYTHON at a Python \
             that has moto[server] installed",
            binary.display()
        );
    }
    let mut last_error = String::new();
    // A port picked as free can be taken before moto binds it: try a few.
    for _ in 0..3 {
        match try_start_moto(&binary).await {
            Ok(moto) => return moto,
            Err(e) => last_error = e,
        }
    }
    panic!(
        "moto_server ({}) did not come up — run ./scripts/test.sh to (re)install it.\n{last_error}",
        binary.display()
    );
}

async fn try_start_moto(binary: &Path) -> Result<Moto, String> {
    let dir = tempfile::Builder::new()
        .prefix("notice-e2e-moto-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let port = free_port();
    let log_path = dir.path().join("moto.log");
    let log =
        std::fs::File::create(&log_path).map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let log_err = log.try_clone().map_err(|e| format!("cannot clone log handle: {e}"))?;
    let mut child = Command::new(binary)
        .arg(moto_script())
        .arg("-H")
        .arg("127.0.0.1")
        .arg("-p")
        .arg(port.to_string())
        // Each server records into its own file (moto's default is ./moto_recording, shared by
        // every server started from the same directory).
        .env("MOTO_RECORDER_FILEPATH", dir.path().join("recording.jsonl"))
        .env("AWS_DEFAULT_REGION", REGION)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot spawn {}: {e}", binary.display()))?;
    let endpoint = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "moto_server exited with {status} before answering; its log:\n{}",
                log_tail(&log_path)
            ));
        }
        if let Ok(resp) = http_request(&endpoint, "GET", "/moto-api/", b"").await {
            if resp.status == 200 {
                return Ok(Moto { endpoint, child, dir });
            }
        }
        if Instant::now() > deadline {
            let _ = child.start_kill();
            return Err(format!(
                "GET {endpoint}/moto-api/ did not answer 200 within {}s; moto log:\n{}",
                STARTUP_TIMEOUT.as_secs(),
                log_tail(&log_path)
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl Moto {
    /// `http://127.0.0.1:PORT`
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The moto server's stdout/stderr (last lines), for diagnosing a failing test.
    pub fn log(&self) -> String {
        log_tail(&self.dir.path().join("moto.log"))
    }

    /// Region `us-east-1`, static credentials `test`/`test`, every service at this server.
    /// Built directly (not from the environment), so `AWS_ENDPOINT_URL_*` variables set for the
    /// code under test cannot redirect the harness's own clients.
    pub async fn sdk_config(&self) -> SdkConfig {
        SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                ACCESS_KEY_ID,
                SECRET_ACCESS_KEY,
                None,
                None,
                "notice-e2e-static",
            )))
            .endpoint_url(self.endpoint.clone())
            .build()
    }

    /// Environment for a process that should reach this server through the standard AWS SDK
    /// variables (`AWS_ENDPOINT_URL`, `AWS_REGION`, credentials).
    pub fn env_vars(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint.as_str()),
            ("AWS_REGION", REGION),
            ("AWS_DEFAULT_REGION", REGION),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    pub async fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.sdk_config().await)
    }

    pub async fn sqs(&self) -> aws_sdk_sqs::Client {
        aws_sdk_sqs::Client::new(&self.sdk_config().await)
    }

    pub async fn scheduler(&self) -> aws_sdk_scheduler::Client {
        aws_sdk_scheduler::Client::new(&self.sdk_config().await)
    }

    /// An EventBridge Scheduler group, as template.yaml's `ParkedJobsGroup`.
    pub async fn create_schedule_group(&self, name: &str) {
        self.scheduler().await.create_schedule_group().name(name).send().await.expect("CreateScheduleGroup");
    }

    pub async fn sesv2(&self) -> aws_sdk_sesv2::Client {
        aws_sdk_sesv2::Client::new(&self.sdk_config().await)
    }

    /// Creates `table_name` exactly as `template.yaml`'s `NoticeTable` declares it (keys,
    /// attribute definitions, indexes, billing mode, TTL) and waits until it is ACTIVE.
    pub async fn create_ledger_table(&self, table_name: &str) {
        let props = ledger_table_properties();
        let client = self.dynamodb().await;
        let mut req = client.create_table().table_name(table_name);

        for def in array(&props, "AttributeDefinitions") {
            req = req.attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(string(def, "AttributeName"))
                    .attribute_type(ScalarAttributeType::from(string(def, "AttributeType")))
                    .build()
                    .unwrap_or_else(|e| panic!("AttributeDefinitions: {e}")),
            );
        }
        for element in key_schema(&props) {
            req = req.key_schema(element);
        }
        let billing = props.get("BillingMode").and_then(Value::as_str).unwrap_or("PROVISIONED");
        req = req.billing_mode(BillingMode::from(billing));
        if let Some(pt) = props.get("ProvisionedThroughput") {
            req = req.provisioned_throughput(throughput(pt));
        } else if billing == "PROVISIONED" {
            panic!("NoticeTable: BillingMode PROVISIONED needs ProvisionedThroughput");
        }
        for gsi in props.get("GlobalSecondaryIndexes").and_then(Value::as_array).into_iter().flatten() {
            let mut index = GlobalSecondaryIndex::builder()
                .index_name(string(gsi, "IndexName"))
                .set_key_schema(Some(key_schema(gsi)))
                .projection(projection(gsi));
            if let Some(pt) = gsi.get("ProvisionedThroughput") {
                index = index.provisioned_throughput(throughput(pt));
            }
            req = req.global_secondary_indexes(
                index.build().unwrap_or_else(|e| panic!("GlobalSecondaryIndexes: {e}")),
            );
        }
        for lsi in props.get("LocalSecondaryIndexes").and_then(Value::as_array).into_iter().flatten() {
            req = req.local_secondary_indexes(
                LocalSecondaryIndex::builder()
                    .index_name(string(lsi, "IndexName"))
                    .set_key_schema(Some(key_schema(lsi)))
                    .projection(projection(lsi))
                    .build()
                    .unwrap_or_else(|e| panic!("LocalSecondaryIndexes: {e}")),
            );
        }
        req.send().await.unwrap_or_else(|e| {
            panic!(
                "CreateTable {table_name} from template.yaml failed: {:?}",
                aws_sdk_dynamodb::error::DisplayErrorContext(&e)
            )
        });

        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            let out = client.describe_table().table_name(table_name).send().await.unwrap_or_else(|e| {
                panic!("DescribeTable {table_name}: {}", aws_sdk_dynamodb::error::DisplayErrorContext(&e))
            });
            if out.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
                break;
            }
            assert!(Instant::now() < deadline, "table {table_name} not ACTIVE after 30s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        if let Some(ttl) = props.get("TimeToLiveSpecification") {
            let enabled = ttl.get("Enabled").and_then(Value::as_bool).unwrap_or(false);
            if enabled {
                client
                    .update_time_to_live()
                    .table_name(table_name)
                    .time_to_live_specification(
                        TimeToLiveSpecification::builder()
                            .attribute_name(string(ttl, "AttributeName"))
                            .enabled(true)
                            .build()
                            .unwrap_or_else(|e| panic!("TimeToLiveSpecification: {e}")),
                    )
                    .send()
                    .await
                    .unwrap_or_else(|e| {
                        panic!(
                            "UpdateTimeToLive {table_name}: {}",
                            aws_sdk_dynamodb::error::DisplayErrorContext(&e)
                        )
                    });
            }
        }
    }

    /// Creates a standard queue; returns its URL.
    pub async fn create_queue(&self, name: &str) -> String {
        let out = self.sqs().await.create_queue().queue_name(name).send().await.unwrap_or_else(|e| {
            panic!("CreateQueue {name}: {}", aws_sdk_sqs::error::DisplayErrorContext(&e))
        });
        out.queue_url().unwrap_or_else(|| panic!("CreateQueue {name} returned no QueueUrl")).to_owned()
    }

    /// Registers `address` (or a domain) as an SES identity so moto accepts sends From it.
    /// moto marks it verified at once; sends From an unregistered address fail with
    /// `MessageRejected`. Idempotent.
    pub async fn verify_email_identity(&self, address: &str) {
        let result = self.sesv2().await.create_email_identity().email_identity(address).send().await;
        if let Err(e) = result {
            let already = e.as_service_error().is_some_and(|s| s.is_already_exists_exception());
            if !already {
                panic!("CreateEmailIdentity {address}: {}", aws_sdk_sesv2::error::DisplayErrorContext(&e));
            }
        }
    }

    /// Creates an SES configuration set. (moto does not check that sends name an existing one.)
    pub async fn create_configuration_set(&self, name: &str) {
        self.sesv2()
            .await
            .create_configuration_set()
            .configuration_set_name(name)
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!("CreateConfigurationSet {name}: {}", aws_sdk_sesv2::error::DisplayErrorContext(&e))
            });
    }

    async fn moto_api(&self, method: &str, path: &str) -> HttpResponse {
        let resp = http_request(&self.endpoint, method, path, b"")
            .await
            .unwrap_or_else(|e| panic!("{method} {}{path}: {e}", self.endpoint));
        assert_eq!(
            resp.status,
            200,
            "{method} {}{path} answered {}: {}",
            self.endpoint,
            resp.status,
            resp.text()
        );
        resp
    }

    /// Clears the request recording and starts recording every request made after this call.
    pub async fn start_recording(&self) {
        self.moto_api("POST", "/moto-api/recorder/reset-recording").await;
        self.moto_api("POST", "/moto-api/recorder/start-recording").await;
    }

    /// Stops recording (the recording is kept).
    pub async fn stop_recording(&self) {
        self.moto_api("POST", "/moto-api/recorder/stop-recording").await;
    }

    /// Every request recorded since [`Moto::start_recording`]: moto's entries
    /// (`method`, `url`, `headers`, `body`, `body_encoded`) with the body decoded to text under
    /// `body_text`.
    pub async fn recorded_requests(&self) -> Vec<Value> {
        let resp = self.moto_api("GET", "/moto-api/recorder/download-recording").await;
        resp.text()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let mut entry: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("recording line is not JSON ({e}): {line}"));
                let body = entry.get("body").and_then(Value::as_str).unwrap_or("");
                let text = if entry.get("body_encoded").and_then(Value::as_bool) == Some(true) {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(body)
                        .unwrap_or_else(|e| panic!("recorded body is not base64 ({e})"));
                    String::from_utf8_lossy(&bytes).into_owned()
                } else {
                    body.to_owned()
                };
                entry["body_text"] = Value::String(text);
                entry
            })
            .collect()
    }

    /// The JSON bodies of every SES v2 `SendEmail` request (`POST /v2/email/outbound-emails`)
    /// recorded since [`Moto::start_recording`], in order — including requests moto refused.
    /// Each is the request as the client sent it: `FromEmailAddress`, `Destination`, `Content`,
    /// `EmailTags` ([{Name, Value}]), `ConfigurationSetName`, …
    pub async fn recorded_send_email_requests(&self) -> Vec<Value> {
        self.recorded_requests()
            .await
            .into_iter()
            .filter(|entry| {
                let method = entry.get("method").and_then(Value::as_str).unwrap_or("");
                let url = entry.get("url").and_then(Value::as_str).unwrap_or("");
                let path = url.split('?').next().unwrap_or("");
                method.eq_ignore_ascii_case("POST") && path.ends_with("/v2/email/outbound-emails")
            })
            .map(|entry| {
                let text = entry["body_text"].as_str().unwrap_or("");
                serde_json::from_str(text)
                    .unwrap_or_else(|e| panic!("SendEmail body is not JSON ({e}): {text}"))
            })
            .collect()
    }

    /// moto's whole state (`GET /moto-api/data.json`).
    pub async fn data(&self) -> Value {
        let resp = self.moto_api("GET", "/moto-api/data.json").await;
        serde_json::from_slice(&resp.body).unwrap_or_else(|e| panic!("/moto-api/data.json is not JSON: {e}"))
    }

    /// Messages moto's SES accepted (v1 and v2 share one store): `ses.Message` (simple content:
    /// `id`, `source`, `destinations`, `subject`, `body`) followed by `ses.RawMessage`. moto keeps
    /// neither tags nor configuration set here: use [`Moto::recorded_send_email_requests`].
    pub async fn sent_messages(&self) -> Vec<Value> {
        let data = self.data().await;
        ["Message", "RawMessage"]
            .iter()
            .flat_map(|kind| {
                data.get("ses")
                    .and_then(|ses| ses.get(*kind))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect()
    }

    /// Resets every service's state (`POST /moto-api/reset`).
    pub async fn reset(&self) {
        self.moto_api("POST", "/moto-api/reset").await;
    }
}

fn array<'a>(value: &'a Value, field: &str) -> &'a Vec<Value> {
    value
        .get(field)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("template NoticeTable: {field} must be a list, got {value}"))
}

fn string<'a>(value: &'a Value, field: &str) -> &'a str {
    value
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("template NoticeTable: {field} must be a string in {value}"))
}

fn key_schema(value: &Value) -> Vec<KeySchemaElement> {
    array(value, "KeySchema")
        .iter()
        .map(|k| {
            KeySchemaElement::builder()
                .attribute_name(string(k, "AttributeName"))
                .key_type(KeyType::from(string(k, "KeyType")))
                .build()
                .unwrap_or_else(|e| panic!("KeySchema: {e}"))
        })
        .collect()
}

fn projection(index: &Value) -> Projection {
    let p = index
        .get("Projection")
        .unwrap_or_else(|| panic!("template NoticeTable: index without Projection: {index}"));
    let mut b = Projection::builder();
    if let Some(t) = p.get("ProjectionType").and_then(Value::as_str) {
        b = b.projection_type(ProjectionType::from(t));
    }
    for attr in p.get("NonKeyAttributes").and_then(Value::as_array).into_iter().flatten() {
        b = b.non_key_attributes(
            attr.as_str().unwrap_or_else(|| panic!("template NoticeTable: NonKeyAttributes must be strings")),
        );
    }
    b.build()
}

fn throughput(pt: &Value) -> ProvisionedThroughput {
    let units = |field: &str| {
        pt.get(field)
            .and_then(|v| v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok())))
            .unwrap_or_else(|| panic!("template NoticeTable: ProvisionedThroughput.{field}"))
    };
    ProvisionedThroughput::builder()
        .read_capacity_units(units("ReadCapacityUnits"))
        .write_capacity_units(units("WriteCapacityUnits"))
        .build()
        .unwrap_or_else(|e| panic!("ProvisionedThroughput: {e}"))
}

// ------------------------------------------------------------------------------------------
// SES v2 stub

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
