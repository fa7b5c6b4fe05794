//! Cold start of the `notice-sender` Lambda: process spawn → first Runtime API poll.
//!
//! A tiny Runtime API on 127.0.0.1 notes the instant the first
//! `GET /2018-06-01/runtime/invocation/next` arrives (and never answers it); the process is then
//! killed. That span covers exec, configuration from the environment, the SDK clients, the start's
//! own AWS calls and the runtime's start — everything a Lambda cold start runs in our code before
//! the first event.
//!
//! The sender makes AWS calls before its first poll: SES's `GetAccount` (the account's send rate)
//! and the ledger's key check (`GetItem`, then `PutItem` on a ledger that has none — the first
//! start). A second stand-in on 127.0.0.1 (`AWS_ENDPOINT_URL`) answers them at once: `GetAccount`
//! with a sandbox account's quota, every other call with `{}` (no key check yet: recorded). Those
//! round trips cost loopback time only, so the figure is our code's, not an AWS region's; the
//! side-by-side runner measures the start against the emulator. The requests it answered are
//! counted and printed.
//!
//! `cargo bench -p notice-benches --bench cold_start` after
//! `cargo build --release -p notice-sender`. `NOTICE_SENDER_BIN` overrides the binary,
//! `COLD_START_RUNS` the number of runs (default 30). Without `--bench` (e.g. under `cargo test`)
//! it does nothing.

use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const FIRST_POLL: &str = "GET /2018-06-01/runtime/invocation/next ";

fn sender_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("NOTICE_SENDER_BIN") {
        return PathBuf::from(path);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("release/notice-sender")
}

/// SES v2 `GetAccount` as a sandbox account answers it (REST JSON, `GET /v2/email/account`).
const SES_ACCOUNT: &str = r#"{"SendQuota":{"Max24HourSend":200,"MaxSendRate":1,"SentLast24Hours":0},"SendingEnabled":true,"ProductionAccessEnabled":false}"#;

/// Answers every AWS call on `listener` at once, counting them in `calls`: `GetAccount` with
/// [`SES_ACCOUNT`], anything else (DynamoDB's JSON protocol) with `{}`. One thread per
/// connection, kept alive as the SDK's client keeps it.
fn serve_aws(listener: TcpListener, calls: Arc<AtomicUsize>) {
    for stream in listener.incoming().flatten() {
        let calls = Arc::clone(&calls);
        std::thread::spawn(move || {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
            let Ok(mut writer) = stream.try_clone() else { return };
            let mut reader = BufReader::new(stream);
            loop {
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                    return;
                }
                let mut length = 0usize;
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 {
                        return;
                    }
                    let header = header.trim_end();
                    if header.is_empty() {
                        break;
                    }
                    if let Some((name, value)) = header.split_once(':') {
                        if name.eq_ignore_ascii_case("content-length") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                calls.fetch_add(1, Ordering::Relaxed);
                let (content_type, answer) = if request_line.contains("/v2/email/account") {
                    ("application/json", SES_ACCOUNT)
                } else {
                    ("application/x-amz-json-1.0", "{}")
                };
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{answer}",
                    answer.len()
                );
                if std::io::Write::write_all(&mut writer, response.as_bytes()).is_err() {
                    return;
                }
            }
        });
    }
}

fn spawn(bin: &PathBuf, port: u16, aws_port: u16) -> std::io::Result<Child> {
    Command::new(bin)
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", format!("127.0.0.1:{port}"))
        .env("AWS_LAMBDA_FUNCTION_NAME", "notice-sender")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/notice-sender")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("NOTICE_TABLE", "notices")
        .env("NOTICE_KEY_SECRET", "cold-start-secret")
        .env("NOTICE_FROM", "billing@example.com")
        .env("NOTICE_MANAGE_URL", "https://billing.notice-ledger.dev/manage")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{aws_port}"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
}

/// Reads the request line of one connection.
fn request_line(stream: &TcpStream) -> String {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut line = String::new();
    let _ = BufReader::new(stream).read_line(&mut line);
    line
}

/// One cold start; `Err` carries what went wrong and the process's stderr.
fn once(bin: &PathBuf, listener: &TcpListener, aws_port: u16) -> Result<Duration, String> {
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let started = Instant::now();
    let mut child = spawn(bin, port, aws_port).map_err(|e| format!("{}: {e}", bin.display()))?;
    let result = loop {
        match listener.accept() {
            Ok((stream, _)) => {
                let line = request_line(&stream);
                let at = started.elapsed();
                if line.starts_with(FIRST_POLL) {
                    break Ok(at);
                }
                break Err(format!("first request was {line:?}, not the invocation poll"));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Ok(Some(status)) = child.try_wait() {
                    break Err(format!("notice-sender exited before polling ({status})"));
                }
                if started.elapsed() > Duration::from_secs(20) {
                    break Err("no poll within 20 s".into());
                }
                std::thread::sleep(Duration::from_micros(50));
            }
            Err(e) => break Err(e.to_string()),
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    result.map_err(|e| {
        let mut stderr = String::new();
        if let Some(mut err) = child.stderr.take() {
            let _ = err.read_to_string(&mut stderr);
        }
        format!("{e}\n{stderr}")
    })
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("cold_start: measured only under `cargo bench`");
        return;
    }
    let bin = sender_binary();
    if !bin.is_file() {
        println!(
            "cold_start: skipped: {} not found (build it with `cargo build --release -p notice-sender`)",
            bin.display()
        );
        return;
    }
    let runs: usize = std::env::var("COLD_START_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(30).max(1);
    let listener = match TcpListener::bind("127.0.0.1:0").and_then(|l| l.set_nonblocking(true).map(|()| l)) {
        Ok(l) => l,
        Err(e) => panic!("cannot listen on 127.0.0.1: {e}"),
    };
    let aws = match TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => panic!("cannot listen on 127.0.0.1: {e}"),
    };
    let aws_port = match aws.local_addr() {
        Ok(a) => a.port(),
        Err(e) => panic!("no address for the AWS stand-in: {e}"),
    };
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    std::thread::spawn(move || serve_aws(aws, counted));
    // One unmeasured run warms the page cache, as a provisioned Lambda host would be.
    if let Err(e) = once(&bin, &listener, aws_port) {
        panic!("cold start failed: {e}");
    }
    let mut ms: Vec<f64> = Vec::with_capacity(runs);
    let calls_before = calls.load(Ordering::Relaxed);
    for _ in 0..runs {
        match once(&bin, &listener, aws_port) {
            Ok(d) => ms.push(d.as_secs_f64() * 1e3),
            Err(e) => panic!("cold start failed: {e}"),
        }
    }
    let aws_calls = (calls.load(Ordering::Relaxed) - calls_before) as f64 / runs as f64;
    ms.sort_by(f64::total_cmp);
    let pick = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    println!(
        "cold_start: {} spawn -> first Runtime API poll over {runs} runs ({aws_calls:.1} AWS calls each, answered on loopback): min {:.1} ms  median {:.1} ms  p90 {:.1} ms  max {:.1} ms",
        bin.display(),
        pick(0.0),
        pick(0.5),
        pick(0.9),
        pick(1.0)
    );
}
