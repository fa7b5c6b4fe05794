//! `noticectl validate` as a producer's engineer runs it: the real binary over the sample events and
//! over a file of bad lines under the example policy (docs/windows/us-ca-arl.json) — every verdict,
//! the summary byte for byte, the exit code, `--json`, standard input — and nothing written.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/windows/us-ca-arl.json");
const NOW: &str = "2026-12-02T12:00:00Z";
const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/renewals.jsonl");

/// Runs `noticectl validate ARGS` in an empty directory with `stdin`; returns the output and
/// whether the directory is still empty afterwards.
fn validate(args: &[&str], stdin: &str) -> (Output, bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir.path())
        .env_remove("NOTICE_WINDOWS")
        .env_remove("NOTICE_WINDOWS_FILE")
        .env_remove("NOTICE_TEMPLATE_DIR")
        .arg("validate")
        .args(args)
        // The sample windows (1 to 3 December 2026) are judged at one pinned instant inside them.
        .args(["--now", NOW])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run noticectl");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let untouched = std::fs::read_dir(dir.path()).unwrap().next().is_none();
    (out, untouched)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_sample_events_give_two_invalid_lines_and_exit_1() {
    let (out, untouched) = validate(&[SAMPLES], "");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(untouched, "no state directory, ledger or outbox is created");
    let text = stdout(&out);
    // At the pinned instant line 8's window opens later and line 9's has closed: `send --now` the
    // same instant answers them `deferred` and `missed`.
    assert!(
        text.ends_with("\n9 messages: 5 ok, 1 deferred, 1 missed (7 jobs, 0 withdraws), 2 invalid\n"),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("line 8           deferred ")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("line 9           missed ")), "{text}");
    let invalid: Vec<&str> = text.lines().filter(|l| l.contains(" invalid ")).collect();
    assert_eq!(invalid.len(), 2, "{text}");
    assert!(
        invalid[0].starts_with("line 6 ") && invalid[0].contains("field `body` line 6 is not valid JSON")
    );
    assert!(invalid[1].starts_with("line 7 ") && invalid[1].contains("field `period_start`"));
    assert!(text.contains(
        "line 1           ok            send renewal_notice_t72 US-CA · window 2026-12-01T09:00:00Z → 2026-12-03T09:00:00Z\n"
    ));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the built-in default"));
}

/// A misspelled kind, a California annual notice without its amount, a lower-case jurisdiction, a
/// jurisdiction that is not a code, a withdraw of an unknown kind and a valid withdraw.
const BAD: &str = r#"{"subscription_id":"s1","period_start":"2027-01-01","kind":"annual_renewl","email":"a@example.com","charge_at":"2026-12-31T09:00:00Z","jurisdiction":"US-CA","template_data":{"plan_name":"Box","amount":{"minor":29000,"currency":"USD"}}}
{"subscription_id":"s2","period_start":"2027-01-01","kind":"annual_renewal","email":"a@example.com","charge_at":"2026-12-31T09:00:00Z","jurisdiction":"US-CA","template_data":{"plan_name":"Box"}}
{"subscription_id":"s3","period_start":"2027-01-01","kind":"annual_renewal","email":"a@example.com","charge_at":"2026-12-31T09:00:00Z","jurisdiction":"us-ca","template_data":{"plan_name":"Box","amount":{"minor":29000,"currency":"USD"}}}
{"subscription_id":"s4","period_start":"2027-01-01","kind":"annual_renewal","email":"a@example.com","charge_at":"2026-12-31T09:00:00Z","jurisdiction":"US_CA"}

{"action":"withdraw","subscription_id":"s5","period_start":"2027-01-01","kind":"trial_conversoin"}
{"action":"withdraw","subscription_id":"s6","period_start":"2027-01-01","kind":"price_change"}
"#;

const BAD_EXPECTED: &str = r#"line 1           invalid       field `kind` names an unknown kind "annual_renewl" (did you mean "annual_renewal"?); the policy knows: annual_renewal, price_change, renewal_notice_t72, trial_conversion
line 2           invalid       field `template_data` has no "amount" (missing or empty), which a notice of kind annual_renewal in US-CA must carry (`jurisdictions.US-CA.kinds.annual_renewal.requires`)
line 3           ok            send annual_renewal US-CA · window 2026-11-16T09:00:00Z → 2026-12-16T09:00:00Z
                               1080 h (45 d) → 360 h (15 d) before the charge, from jurisdictions.US-CA.kinds.annual_renewal.opens_at_most_hours_before and jurisdictions.US-CA.kinds.annual_renewal.closes_at_least_hours_before
line 4           invalid       field `jurisdiction` must be an ISO 3166 country or subdivision code: "US_CA" is not an ISO 3166-1 alpha-2 country (`DE`) or ISO 3166-2 subdivision (`US-CA`) code
line 6           invalid       field `kind` names an unknown kind "trial_conversoin" (did you mean "trial_conversion"?); the policy knows: annual_renewal, price_change, renewal_notice_t72, trial_conversion
line 7           ok            withdraw price_change
6 messages: 2 ok (1 job, 1 withdraw), 4 invalid
"#;

#[test]
fn bad_lines_under_the_example_policy_are_named_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.jsonl");
    std::fs::write(&file, BAD).unwrap();
    let (out, untouched) = validate(&[file.to_str().unwrap(), "--windows", EXAMPLE], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(untouched);
    assert_eq!(stdout(&out), BAD_EXPECTED);

    // The same lines on standard input, as JSON.
    let (out, _) = validate(&["-", "--windows", EXAMPLE, "--json"], BAD);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(doc["source"], "standard input");
    assert_eq!(
        doc["summary"],
        serde_json::json!({"messages": 6, "ok": 2, "deferred": 0, "missed": 0, "invalid": 4, "jobs": 1, "withdraws": 1})
    );
    let messages = doc["messages"].as_array().unwrap();
    assert_eq!(messages[0]["field"], "kind");
    assert_eq!(messages[1]["field"], "template_data");
    assert_eq!(messages[2]["jurisdiction"], "US-CA", "normalised");
    assert_eq!(messages[2]["window"]["opens_at"], "2026-11-16T09:00:00Z");
    assert_eq!(
        messages[2]["window"]["closes_from"],
        "jurisdictions.US-CA.kinds.annual_renewal.closes_at_least_hours_before"
    );
    assert_eq!(
        (messages[4]["action"].as_str(), messages[4]["status"].as_str()),
        (Some("withdraw"), Some("invalid"))
    );
    assert_eq!((messages[5]["line"].as_u64(), messages[5]["status"].as_str()), (Some(7), Some("ok")));
}

#[test]
fn one_pretty_printed_job_is_one_message() {
    let job = serde_json::json!({"subscription_id": "sub_1", "period_start": "2026-12-01", "kind": "renewal_notice_t72",
        "email": "a@example.com", "charge_at": "2026-12-04T09:00:00Z", "jurisdiction": "de-by"});
    let (out, _) = validate(&["-"], &serde_json::to_string_pretty(&job).unwrap());
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("line 1           ok            send renewal_notice_t72 DE-BY · window"),
        "{text}"
    );
    assert!(text.ends_with("\n1 message: 1 ok (1 job, 0 withdraws), 0 invalid\n"), "{text}");
}

#[test]
fn a_policy_that_cannot_be_read_exits_2() {
    let (out, _) = validate(&[SAMPLES, "--windows", "/nonexistent/policy.json"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).is_empty());
}
