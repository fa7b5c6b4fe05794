//! `noticectl evidence --config … --render …` over a notice really sent by `noticectl send --config
//! examples/notices-de` into a local SQLite ledger: the window is judged by the policy of the
//! version the row names (not by another version given beside it), a row whose version is not given
//! says which policy it fell back to, and re-rendering from the stored version and the job file
//! matches — or says `differs` / `inputs differ` and exits 1.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const SECRET: &str = "evidence-versions-secret-0123456789";
const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/notices-de");
const NOW: &str = "2026-12-02T12:00:00Z";
/// The example's own annual_renewal window, and the copy's narrower one.
const ORIGINAL: &str = r#""annual_renewal": { "opens_hours_before": 1440, "closes_hours_before": 168 }"#;
const NARROWED: &str = r#""annual_renewal": { "opens_hours_before": 1000, "closes_hours_before": 200 }"#;

fn job(plan: &str) -> Value {
    serde_json::json!({"subscription_id": "sub_de", "period_start": "2027-01-01",
        "kind": "annual_renewal", "email": "kunde@example.com", "charge_at": "2026-12-31T09:00:00Z",
        "locale": "de-DE", "time_zone": "Europe/Berlin",
        "template_data": {"plan_name": plan, "amount": {"minor": 2900, "currency": "EUR"}}})
}

fn noticectl(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir)
        .env("NOTICE_KEY_SECRET", SECRET)
        .env_remove("NOTICE_KEY_SECRET_ARN")
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_CONFIG")
        .env_remove("NOTICE_WINDOWS")
        .env_remove("NOTICE_WINDOWS_FILE")
        .env_remove("NOTICE_MANAGE_URL")
        .env_remove("NOTICE_LINK_SECRET")
        .env_remove("NOTICE_STATE_DIR")
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("run noticectl")
}

fn code_and_stdout(out: &Output) -> (Option<i32>, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code(), format!("{stdout}\n--- stderr:\n{stderr}"))
}

/// A copy of `from` (manifest, windows, templates) at `to`.
fn copy_config(from: &Path, to: &Path) {
    for sub in ["", "templates"] {
        std::fs::create_dir_all(to.join(sub)).unwrap();
        for entry in std::fs::read_dir(from.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                std::fs::copy(&path, to.join(sub).join(path.file_name().unwrap())).unwrap();
            }
        }
    }
}

/// A sent annual_renewal from the example, and a copy of the example whose annual_renewal window
/// is narrower (so another version).
fn sent_with_the_example() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy");
    copy_config(Path::new(EXAMPLE), &copy);
    let windows = std::fs::read_to_string(copy.join("windows.json")).unwrap();
    assert!(windows.contains(ORIGINAL), "the example's annual_renewal window changed: update this test");
    std::fs::write(copy.join("windows.json"), windows.replace(ORIGINAL, NARROWED)).unwrap();

    std::fs::write(dir.path().join("jobs.jsonl"), format!("{}\n", job("Kaffee-Abo"))).unwrap();
    let out = noticectl(
        dir.path(),
        &[],
        &["send", "jobs.jsonl", "--config", EXAMPLE, "--now", NOW, "--state-dir", "state"],
    );
    let (code, text) = code_and_stdout(&out);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("1 job(s): 1 sent"), "{text}");
    (dir, copy)
}

fn evidence(dir: &Path, env: &[(&str, &str)], more: &[&str]) -> Output {
    let mut args = vec![
        "evidence",
        "--state-dir",
        "state",
        "--subscription-id",
        "sub_de",
        "--period-start",
        "2027-01-01",
        "--kinds",
        "annual_renewal",
        "--revisions",
        "0",
    ];
    args.extend_from_slice(more);
    noticectl(dir, env, &args)
}

/// `text` with every run of white space (a wrapped line's break and indent included) as one space.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The one notice of a `--json` run, and the run's exit code.
fn notice_json(dir: &Path, env: &[(&str, &str)], more: &[&str]) -> (Option<i32>, Value) {
    let mut more = more.to_vec();
    more.push("--json");
    let out = evidence(dir, env, &more);
    let (code, text) = code_and_stdout(&out);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(doc["notices"].as_array().map(Vec::len), Some(1), "{doc:#}");
    (code, doc["notices"][0].clone())
}

#[test]
fn the_window_is_judged_by_the_version_the_row_names_not_by_another_one_given() {
    let (dir, copy) = sent_with_the_example();
    let copy = copy.to_str().unwrap();

    let (code, n) = notice_json(dir.path(), &[], &["--config", EXAMPLE, "--config", copy]);
    assert_eq!(code, Some(0), "{n:#}");
    let version = n["config_version"].as_str().expect("the row names its version").to_owned();
    assert_eq!(n["policy"]["basis"], "version", "{n:#}");
    assert_eq!(n["policy"]["version"].as_str(), Some(version.as_str()));
    assert_eq!(
        (n["policy"]["name"].as_str(), n["policy"]["from"].as_str()),
        (Some("example-de"), Some(EXAMPLE))
    );
    assert_eq!(
        (&n["window"]["opens_hours_before"], &n["window"]["closes_hours_before"]),
        (&1440.into(), &168.into())
    );
    assert_eq!(n["inside_window"], true);

    // The same with the copy given first: still the original's window.
    let (_, n) = notice_json(dir.path(), &[], &["--config", copy, "--config", EXAMPLE]);
    assert_eq!(n["window"]["opens_hours_before"], 1440, "{n:#}");

    let blocks = evidence(dir.path(), &[], &["--config", EXAMPLE, "--config", copy]);
    let (code, text) = code_and_stdout(&blocks);
    assert_eq!(code, Some(0), "{text}");
    let short = &version[..19];
    // The block wraps at 100 columns, and where depends on how long the checkout's path is.
    let expected = format!("  policy     version {short}… (example-de) · from {EXAMPLE}");
    assert!(flat(&text).contains(&flat(&expected)), "{text}");
    assert!(text.contains("1440 h → 168 h before the charge"), "{text}");
    let wide = evidence(dir.path(), &[], &["--config", EXAMPLE, "--wide"]);
    let (_, text) = code_and_stdout(&wide);
    assert!(text.contains(&format!("version {short}… (example-de)")), "{text}");

    // Only the copy: the row's version is not given, and the run says which policy judged it.
    let (code, n) = notice_json(dir.path(), &[], &["--config", copy]);
    assert_eq!(code, Some(0), "{n:#}");
    assert_eq!(n["policy"]["basis"], "given now", "{n:#}");
    let reason = n["policy"]["reason"].as_str().unwrap();
    assert!(reason.contains(&format!("its version {version} was not found")), "{reason}");
    assert!(reason.contains("not among the --config directories"), "{reason}");
    assert!(n["policy"]["from"].as_str().unwrap().contains("built-in default"), "{n:#}");
    assert_eq!(n["window"]["opens_hours_before"], 72, "the built-in window, not the copy's 1000 h: {n:#}");
    let blocks = evidence(dir.path(), &[], &["--config", copy]);
    let (_, text) = code_and_stdout(&blocks);
    assert!(flat(&text).contains("policy given now: the built-in default"), "{text}");
    assert!(text.contains("was not found"), "{text}");
}

#[test]
fn render_matches_and_tells_a_tampered_digest_and_other_inputs_apart() {
    let (dir, _copy) = sent_with_the_example();
    let (code, n) = notice_json(dir.path(), &[], &["--config", EXAMPLE, "--render", "jobs.jsonl"]);
    assert_eq!((code, &n["render"]["verdict"]), (Some(0), &Value::from("matches")), "{n:#}");
    assert_eq!(n["render"]["job"], "line 1");
    let blocks = evidence(dir.path(), &[], &["--config", EXAMPLE, "--render", "jobs.jsonl"]);
    let (_, text) = code_and_stdout(&blocks);
    assert!(text.contains("  render     matches (JOBS line 1)"), "{text}");

    // Other template data under the same notice key: not the job that was sent.
    std::fs::write(dir.path().join("other.jsonl"), format!("{}\n", job("Tee-Abo"))).unwrap();
    let (code, n) = notice_json(dir.path(), &[], &["--config", EXAMPLE, "--render", "other.jsonl"]);
    assert_eq!((code, &n["render"]["verdict"]), (Some(1), &Value::from("inputs differ")), "{n:#}");

    // The version is not given: nothing to render with.
    let (code, n) = notice_json(dir.path(), &[], &["--render", "jobs.jsonl"]);
    assert_eq!((code, &n["render"]["verdict"]), (Some(1), &Value::from("version unavailable")), "{n:#}");

    // Another manage-link base than the sender's changes the links, so the digest.
    let other_base = [("NOTICE_MANAGE_URL", "https://billing.other.test/manage")];
    let (code, n) = notice_json(dir.path(), &other_base, &["--config", EXAMPLE, "--render", "jobs.jsonl"]);
    assert_eq!((code, &n["render"]["verdict"]), (Some(1), &Value::from("differs")), "{n:#}");
    assert!(n["render"]["detail"].as_str().unwrap().contains("https://billing.other.test/manage"), "{n:#}");

    // The stored digest edited in the SQLite file itself.
    let stored = n["rendered_digest"].as_str().unwrap().to_owned();
    let db = dir.path().join("state/ledger.db");
    assert!(!dir.path().join("state/ledger.db-wal").exists(), "the ledger was left checkpointed");
    let bytes = std::fs::read(&db).unwrap();
    let forged: String = stored.chars().map(|c| if c == '0' { '1' } else { '0' }).collect();
    let (from, to) = (stored.as_bytes(), forged.as_bytes());
    let mut patched = bytes.clone();
    let mut replaced = 0;
    let mut at = 0;
    while let Some(i) = patched[at..].windows(from.len()).position(|w| w == from) {
        patched[at + i..at + i + from.len()].copy_from_slice(to);
        replaced += 1;
        at += i + from.len();
    }
    assert!(replaced > 0, "the digest is stored as text in {}", db.display());
    std::fs::write(&db, patched).unwrap();
    let (code, n) = notice_json(dir.path(), &[], &["--config", EXAMPLE, "--render", "jobs.jsonl"]);
    assert_eq!(n["rendered_digest"].as_str(), Some(forged.as_str()), "the edit took: {n:#}");
    assert_eq!((code, &n["render"]["verdict"]), (Some(1), &Value::from("differs")), "{n:#}");
    assert!(n["render"]["detail"].as_str().unwrap().contains("NOTICE_MANAGE_URL"), "{n:#}");
}

/// The version a row names, fetched from the bucket `noticectl config publish` uploaded it to (the
/// emulator's S3): the window is that version's, and a bucket without it says so.
#[tokio::test]
async fn a_version_is_fetched_from_the_publish_bucket() {
    let (dir, _copy) = sent_with_the_example();
    let moto = notice_e2e::start_moto().await;
    let sdk = moto.sdk_config().await;
    let s3 =
        aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&sdk).force_path_style(true).build());
    for bucket in ["acme-notice-config", "empty-notice-config"] {
        s3.create_bucket().bucket(bucket).send().await.expect("bucket");
    }
    let env: Vec<(String, String)> = moto.env_vars();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let publish =
        noticectl(dir.path(), &env, &["config", "publish", EXAMPLE, "--bucket", "acme-notice-config"]);
    let (code, text) = code_and_stdout(&publish);
    assert_eq!(code, Some(0), "{text}");

    let (code, n) = notice_json(dir.path(), &env, &["--config", "s3://acme-notice-config"]);
    assert_eq!(code, Some(0), "{n:#}");
    assert_eq!(n["policy"]["basis"], "version", "{n:#}");
    assert_eq!(n["policy"]["name"], "example-de", "{n:#}");
    assert_eq!(n["window"]["opens_hours_before"], 1440, "{n:#}");

    let (_, n) = notice_json(dir.path(), &env, &["--config", "s3://empty-notice-config"]);
    assert_eq!(n["policy"]["basis"], "given now", "{n:#}");
    let reason = n["policy"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("s3://empty-notice-config"), "{reason}");
}
