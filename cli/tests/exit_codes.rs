//! The exit-code contract of docs/operations.md (*Exit codes*), pinned command by command on the
//! real binary: 0 all done; 1 done, but something needs attention (listed at the end); 2 usage,
//! configuration or a dependency unreachable; 3 a safety stop. And a dependency failure is one
//! line with its cause and next step, never the SDK's debug dump once per job.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const NOW: &str = "2026-12-02T12:00:00Z";
const SECRET: &str = "exit-codes-secret-0123456789";

fn job(sub: &str, charge_at: &str) -> String {
    serde_json::json!({"subscription_id": sub, "period_start": "2026-12-01", "kind": "renewal_notice_t72",
        "email": format!("{sub}@example.com"), "charge_at": charge_at,
        "template_data": {"plan_name": "Coffee Box", "amount": {"minor": 2900, "currency": "USD"}}})
    .to_string()
}

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../events/renewals.jsonl")
}

/// `noticectl` in `dir`, with no NOTICE_* or AWS settings from the caller's environment: the
/// AWS variables are exactly `aws` (no profile, no config files, no instance metadata).
fn noticectl(dir: &Path, args: &[&str], aws: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noticectl"));
    cmd.env("NOTICE_OPERATOR", "ops-test");
    cmd.current_dir(dir).env("NOTICE_KEY_SECRET", SECRET);
    for var in [
        "NOTICE_LEDGER_URL",
        "NOTICE_STATE_DIR",
        "NOTICE_MODE",
        "NOTICE_QUEUE_URL",
        "NOTICE_WINDOWS",
        "NOTICE_WINDOWS_FILE",
        "NOTICE_KEY_SECRET_ARN",
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_SQS",
        "AWS_ENDPOINT_URL_DYNAMODB",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("AWS_CONFIG_FILE", dir.join("no-aws-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-aws-credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .envs(aws.iter().copied())
        .args(args)
        .output()
        .expect("run noticectl")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A fresh folder with the files the cases use.
fn folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write =
        |name: &str, lines: &[String]| std::fs::write(dir.path().join(name), lines.join("\n")).unwrap();
    write("valid.jsonl", &[job("sub_1", "2026-12-04T09:00:00Z"), job("sub_2", "2026-12-04T09:00:00Z")]);
    write("missed.jsonl", &[job("sub_late", "2026-12-02T20:00:00Z")]);
    write("mixed.jsonl", &[job("sub_1", "2026-12-04T09:00:00Z"), "{broken".to_owned()]);
    dir
}

const UNREACHABLE: &[(&str, &str)] =
    &[("AWS_ENDPOINT_URL", "http://127.0.0.1:1"), ("AWS_ACCESS_KEY_ID", "x"), ("AWS_SECRET_ACCESS_KEY", "y")];

struct Case {
    what: &'static str,
    /// Run first, in the same folder (their codes are not checked here).
    before: &'static [&'static [&'static str]],
    args: &'static [&'static str],
    aws: &'static [(&'static str, &'static str)],
    code: i32,
}

#[test]
fn every_command_exits_by_the_one_contract() {
    let sample = sample();
    let sample = sample.to_str().unwrap();
    let cases = [
        Case {
            what: "send: all sent",
            before: &[],
            args: &["send", "valid.jsonl", "--now", NOW],
            aws: &[],
            code: 0,
        },
        Case {
            what: "send: a missed window needs attention",
            before: &[],
            args: &["send", "missed.jsonl", "--now", NOW],
            aws: &[],
            code: 1,
        },
        Case {
            what: "send: the sample has invalid lines",
            before: &[],
            args: &["send", "SAMPLE", "--now", NOW],
            aws: &[],
            code: 1,
        },
        Case {
            what: "replay --dry-run: new jobs and an invalid line, as the real run",
            before: &[],
            args: &["replay", "--from", "mixed.jsonl", "--dry-run"],
            aws: &[],
            code: 1,
        },
        Case {
            what: "replay --dry-run: new jobs only",
            before: &[],
            args: &["replay", "--from", "valid.jsonl", "--dry-run"],
            aws: &[],
            code: 0,
        },
        Case {
            what: "replay --dry-run: a backlog all known is a stop, as the real run",
            before: &[&["send", "valid.jsonl", "--now", NOW]],
            args: &["replay", "--from", "valid.jsonl", "--dry-run"],
            aws: &[],
            code: 3,
        },
        Case {
            what: "replay: a backlog all known is a stop",
            before: &[&["send", "valid.jsonl", "--now", NOW]],
            args: &["replay", "--from", "valid.jsonl", "--queue-url", "http://127.0.0.1:1/1/q", "--yes"],
            aws: UNREACHABLE,
            code: 3,
        },
        Case {
            what: "replay: no terminal and no --yes",
            before: &[],
            args: &["replay", "--from", "valid.jsonl", "--queue-url", "http://127.0.0.1:1/1/q"],
            aws: &[],
            code: 3,
        },
        Case {
            what: "backfill --dry-run: an invalid line, as the real run",
            before: &[],
            args: &["backfill", "--from", "mixed.jsonl", "--dry-run"],
            aws: &[],
            code: 1,
        },
        Case {
            what: "validate: an invalid line",
            before: &[],
            args: &["validate", "SAMPLE"],
            aws: &[],
            code: 1,
        },
        Case {
            what: "validate: all valid",
            before: &[],
            // The sample windows, judged at an instant inside them (a missed window is exit 1).
            args: &["validate", "valid.jsonl", "--now", "2026-12-02T12:00:00Z"],
            aws: &[],
            code: 0,
        },
        Case {
            what: "a bad flag",
            before: &[],
            args: &["send", "valid.jsonl", "--bogus"],
            aws: &[],
            code: 2,
        },
        Case {
            what: "windows: an unreadable policy",
            before: &[],
            args: &["windows", "--windows", "no-such-policy.json"],
            aws: &[],
            code: 2,
        },
        Case {
            what: "withdraw: no terminal and no --yes",
            before: &[],
            args: &[
                "withdraw",
                "--subscription-id",
                "sub_9",
                "--period-start",
                "2026-12-01",
                "--kind",
                "renewal_notice_t72",
            ],
            aws: &[],
            code: 3,
        },
        Case {
            what: "withdraw --dry-run: would withdraw",
            before: &[],
            args: &[
                "withdraw",
                "--subscription-id",
                "sub_9",
                "--period-start",
                "2026-12-01",
                "--kind",
                "renewal_notice_t72",
                "--dry-run",
            ],
            aws: &[],
            code: 0,
        },
        Case {
            what: "withdraw: too late",
            before: &[&["send", "valid.jsonl", "--now", NOW]],
            args: &[
                "withdraw",
                "--subscription-id",
                "sub_1",
                "--period-start",
                "2026-12-01",
                "--kind",
                "renewal_notice_t72",
                "--yes",
            ],
            aws: &[],
            code: 1,
        },
        Case {
            what: "replay --dry-run: DynamoDB unreachable",
            before: &[],
            args: &["replay", "--dry-run", "--from", "SAMPLE", "--ledger", "dynamodb:T"],
            aws: UNREACHABLE,
            code: 2,
        },
        // Nothing found is 1, whichever form of the key was given.
        Case {
            what: "show: a whole key without its row",
            before: &[&["send", "valid.jsonl", "--now", NOW]],
            args: &["show", "0000000000000000000000000000000000000000000000000000000000000000"],
            aws: &[],
            code: 1,
        },
        Case {
            what: "show: a prefix that names no row",
            before: &[&["send", "valid.jsonl", "--now", NOW]],
            args: &["show", "000000000000"],
            aws: &[],
            code: 1,
        },
        Case {
            what: "quarantine resolve: a prefix that names no open claim",
            before: &[&["send", "valid.jsonl", "--now", NOW]],
            args: &["quarantine", "resolve", "000000000000", "--sent", "--message-id", "m"],
            aws: &[],
            code: 1,
        },
        Case {
            what: "show: a key prefix too short is usage",
            before: &[],
            args: &["show", "0000"],
            aws: &[],
            code: 2,
        },
        // An unreadable file is 2.
        Case {
            what: "config check: a directory that cannot be read",
            before: &[],
            args: &["config", "check", "no-such-dir"],
            aws: &[],
            code: 2,
        },
        Case {
            what: "send: a jobs file that cannot be read",
            before: &[],
            args: &["send", "no-such-file.jsonl", "--now", NOW],
            aws: &[],
            code: 2,
        },
    ];
    let mut wrong = Vec::new();
    for case in &cases {
        let dir = folder();
        for before in case.before {
            noticectl(dir.path(), before, &[]);
        }
        let args: Vec<&str> = case.args.iter().map(|a| if *a == "SAMPLE" { sample } else { a }).collect();
        let out = noticectl(dir.path(), &args, case.aws);
        if out.status.code() != Some(case.code) {
            let (stdout, stderr) = text(&out);
            wrong.push(format!(
                "{}: exit {:?}, want {}\n{stdout}{stderr}",
                case.what,
                out.status.code(),
                case.code
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n---\n"));
}

/// What needs attention is listed at the end of a send, just above the summary line.
#[test]
fn send_lists_what_needs_attention_at_the_end() {
    let dir = folder();
    let out = noticectl(dir.path(), &["send", sample().to_str().unwrap(), "--now", NOW], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let tail: Vec<&str> = stdout.lines().skip_while(|l| !l.starts_with("needs attention (3):")).collect();
    assert_eq!(tail.len(), 5, "the list, then the summary: {stdout}");
    assert!(tail[1].contains("line 6") && tail[1].contains("invalid"), "{stdout}");
    assert!(tail[2].contains("line 7") && tail[2].contains("invalid"), "{stdout}");
    assert!(tail[3].contains("line 9") && tail[3].contains("missed"), "{stdout}");
    assert!(tail[4].starts_with("9 job(s):"), "{stdout}");
}

/// One line with the cause and the next step, exit 2 — not the SDK's debug form once per job.
fn assert_one_line(what: &str, out: &Output, cause: &str) {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(2), "{what}: {stdout}{stderr}");
    assert!(stderr.lines().count() <= 3, "{what}: at most 3 lines on stderr:\n{stderr}");
    for debug in ["DispatchFailure", "ConnectorError", "invalid setting", "NOT enqueued"] {
        assert!(
            !stderr.contains(debug) && !stdout.contains(debug),
            "{what}: {debug:?} printed:\n{stdout}{stderr}"
        );
    }
    assert!(stderr.contains(cause), "{what}: want {cause:?}:\n{stderr}");
}

#[test]
fn a_dependency_failure_is_one_line_and_exit_2() {
    let dir = folder();
    let sample = sample();
    let sample = sample.to_str().unwrap();
    // 40 new jobs: before, each printed the SDK's debug dump.
    let backlog: Vec<String> = (0..40).map(|i| job(&format!("sub_{i}"), "2026-12-04T09:00:00Z")).collect();
    std::fs::write(dir.path().join("backlog.jsonl"), backlog.join("\n")).unwrap();

    let dry = noticectl(
        dir.path(),
        &["replay", "--dry-run", "--from", sample, "--ledger", "dynamodb:T"],
        UNREACHABLE,
    );
    assert_one_line(
        "DynamoDB unreachable",
        &dry,
        "DynamoDB unreachable at http://127.0.0.1:1 (connection refused)",
    );
    assert!(text(&dry).1.contains("nothing was written"), "{}", text(&dry).1);

    let queue =
        ["replay", "--from", "backlog.jsonl", "--queue-url", "http://127.0.0.1:1/1/reminders", "--yes"];
    let refused = noticectl(dir.path(), &queue, UNREACHABLE);
    assert_one_line(
        "SQS unreachable",
        &refused,
        "SQS unreachable at http://127.0.0.1:1 (connection refused)",
    );
    assert!(text(&refused).1.contains("0 of 40 message(s) enqueued"), "{}", text(&refused).1);

    let no_credentials = noticectl(dir.path(), &queue, &[]);
    assert_one_line("no credentials", &no_credentials, "no AWS credentials for SQS");

    let postgres = noticectl(
        dir.path(),
        &["replay", "--dry-run", "--from", sample, "--ledger", "postgres://u@127.0.0.1:1/db"],
        &[],
    );
    assert_one_line(
        "PostgreSQL unreachable",
        &postgres,
        "PostgreSQL unreachable at postgres://u@127.0.0.1:1/db",
    );

    // -v adds the debug form.
    let verbose = noticectl(
        dir.path(),
        &["-v", "replay", "--dry-run", "--from", sample, "--ledger", "dynamodb:T"],
        UNREACHABLE,
    );
    assert_eq!(verbose.status.code(), Some(2));
    assert!(text(&verbose).1.contains("DynamoDB unreachable"), "{}", text(&verbose).1);
}

/// A command refused at the door (exit 2) leaves nothing behind: no state directory, no local
/// secret, no empty ledger — the next run starts exactly as this one did. And a command that
/// needs nothing local (`key` with the deployment's secret) makes nothing local.
#[test]
fn refused_and_read_only_commands_leave_no_state_behind() {
    let dir = folder();
    let state = dir.path().join(".notices");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/notices-de");
    let example = example.to_str().expect("a UTF-8 path");
    for (what, args, env) in [
        (
            "send, unreadable --config",
            &["send", "valid.jsonl", "--now", NOW, "--config", "no-such-dir"][..],
            &[][..],
        ),
        (
            "send, bad NOTICE_RATE_LIMITS",
            &["send", "valid.jsonl", "--now", NOW][..],
            &[("NOTICE_RATE_LIMITS", "{not json")][..],
        ),
        (
            "send, a malformed --ledger",
            &["send", "valid.jsonl", "--now", NOW, "--ledger", "mysql://x"][..],
            &[][..],
        ),
        (
            "withdraw, a kind the configuration does not list",
            &[
                "withdraw",
                "--subscription-id",
                "s",
                "--period-start",
                "2026-12-01",
                "--kind",
                "anual_renewal",
                "--yes",
                "--config",
                example,
            ][..],
            &[][..],
        ),
    ] {
        let out = noticectl(dir.path(), args, env);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{what}: {stdout}\n{stderr}");
        assert!(!state.exists(), "{what} left {} behind: {stdout}\n{stderr}", state.display());
    }
    let out = noticectl(
        dir.path(),
        &["key", "--subscription-id", "s", "--period-start", "2026-12-01", "--kind", "renewal_notice_t72"],
        &[],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim().len(), 64, "one key: {stdout}");
    assert!(!state.exists(), "`key` with NOTICE_KEY_SECRET made {}", state.display());
}
