//! The emulator: a private moto server per test (DynamoDB, SQS, SES v2 and EventBridge Scheduler
//! in one process), its SDK clients and environment, resources created the way `template.yaml`
//! deploys them, and moto's recorder and state.
//!
//! Failures are loud on purpose: if the emulator cannot be found or started the test panics with
//! the fix (`./scripts/test.sh`) instead of skipping.

use std::path::{Path, PathBuf};
use std::process::Stdio;
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
use tokio::process::{Child, Command};

use crate::http::{http_request, HttpResponse};
use crate::template::{ledger_table_properties, workspace_root};

/// Region every emulator client uses.
pub const REGION: &str = "us-east-1";
/// moto's default account id (what appears in its ARNs and queue URLs).
pub const ACCOUNT_ID: &str = "123456789012";
/// Static credentials moto accepts.
pub const ACCESS_KEY_ID: &str = "test";
pub const SECRET_ACCESS_KEY: &str = "test";

const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

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
    launch_moto().await.unwrap_or_else(|e| panic!("{e}"))
}

/// [`start_moto`] for a program rather than a test: what is wrong comes back as an error (the
/// first line says what to do), never a panic.
pub async fn launch_moto() -> Result<Moto, String> {
    let binary = moto_python();
    if !binary.is_file() {
        return Err(format!(
            "the emulator's Python was not found at {} — run ./scripts/test.sh (it creates .venv and \
             installs tests/requirements.txt: moto[server]==5.2.5), or point MOTO_PYTHON at a Python \
             that has moto[server] installed",
            binary.display()
        ));
    }
    let mut last_error = String::new();
    // A port picked as free can be taken before moto binds it: try a few.
    for _ in 0..3 {
        match try_start_moto(&binary).await {
            Ok(moto) => return Ok(moto),
            Err(e) => last_error = e,
        }
    }
    Err(format!(
        "moto_server ({}) did not come up — run ./scripts/test.sh to (re)install it.\n{last_error}",
        binary.display()
    ))
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
        // Every signed request is checked as AWS would (moto itself does not).
        .env("MOTO_SIGV4_SECRET", SECRET_ACCESS_KEY)
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

/// A recorded request's `X-Amz-Target` (`DynamoDB_20120810.PutItem`, `AmazonSQS.SendMessage`, …),
/// whatever the case of the header's name; `None` for REST-style APIs, which have none.
pub fn amz_target(recorded: &Value) -> Option<&str> {
    let headers = recorded["headers"].as_object()?;
    headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("x-amz-target")).and_then(|(_, v)| v.as_str())
}
