//! `noticectl capacity` as an operator runs it: the real binary, its table, its JSON, its errors.
//! Every expected number is worked out by hand in the comments.

use std::process::{Command, Output};

use serde_json::Value;

fn noticectl(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .current_dir(dir.path())
        .env_remove("NOTICE_STATE_DIR")
        .env_remove("NOTICE_PARK_SPREAD_SECS")
        .args(args)
        .output()
        .expect("run noticectl")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn json(per_day: &str) -> Value {
    let out = noticectl(&["capacity", "--per-day", per_day, "--lead-days", "30", "--json"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{stdout}"))
}

fn number(doc: &Value, field: &str) -> f64 {
    doc[field].as_f64().unwrap_or_else(|| panic!("{field} is not a number in {doc:#}"))
}

fn close(doc: &Value, field: &str, expected: f64) {
    let actual = number(doc, field);
    assert!((actual - expected).abs() <= expected.abs() * 1e-9 + 1e-9, "{field}: {actual} != {expected}");
}

/// (quota, request) of each quota request.
fn requests(doc: &Value) -> Vec<(String, f64)> {
    doc["quota_requests"]
        .as_array()
        .unwrap_or_else(|| panic!("quota_requests is not an array in {doc:#}"))
        .iter()
        .map(|q| (q["quota"].as_str().unwrap().to_owned(), q["request"].as_f64().unwrap()))
        .collect()
}

const SCHEDULES: &str = "EventBridge Scheduler: schedules per Region";

#[test]
fn the_table_names_27_million_live_schedules_and_a_raise_at_one_million_a_day() {
    let out = noticectl(&["capacity", "--per-day", "1000000", "--lead-days", "30"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    // (30 days − 72 h) × 1 000 000 = 27 × 1 000 000 = 27 000 000 live schedules, 270 % of 10 000 000.
    let row = stdout.lines().find(|l| l.contains("schedules (live)")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(row.contains("27 000 000"), "{row}");
    assert!(row.contains("10 000 000") && row.contains("270 %"), "{row}");
    assert!(row.trim_end().ends_with("raise"), "{row}");
    // 1 000 000 / 86 400 × 3 = 34.72/s: far below the CreateSchedule and invocation quotas.
    let create = stdout.lines().find(|l| l.contains("CreateSchedule")).unwrap();
    assert!(create.contains("34.7/s") && create.trim_end().ends_with("ok"), "{create}");
    // The assumptions are stated.
    assert!(stdout.contains("peak hour = 3×") && stdout.contains("uniform openings"), "{stdout}");
    // 2 × 27 000 000 = 54 000 000, and the SQS bound 34.72 × 900 = 31 250 is fine.
    let tail = stdout
        .split("Quota requests to file before going live:")
        .nth(1)
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(tail.contains("schedules per Region: request 54 000 000"), "{tail}");
    assert!(!tail.contains("none"), "{tail}");
    assert!(stdout.lines().any(|l| l.contains("SQS in-flight") && l.contains("31 250")), "{stdout}");
}

#[test]
fn one_hundred_thousand_a_day_needs_no_quota_request() {
    let out = noticectl(&["capacity", "--per-day", "100000"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    // 27 × 100 000 = 2 700 000: 27 % of 10 000 000.
    let row = stdout.lines().find(|l| l.contains("schedules (live)")).unwrap();
    assert!(row.contains("2 700 000") && row.contains("27 %") && row.trim_end().ends_with("ok"), "{row}");
    assert!(stdout.trim_end().ends_with("Quota requests to file before going live:\n  none"), "{stdout}");
}

#[test]
fn json_at_one_hundred_thousand_a_day() {
    let doc = json("100000");
    // peak = 100 000 / 86 400 × 3 = 3.472 2…/s
    let peak = 100_000.0 / 86_400.0 * 3.0;
    close(&doc, "live_schedules", 2_700_000.0); // 27 × 100 000
    close(&doc, "create_schedule_per_sec", peak);
    close(&doc, "invocations_per_sec", peak);
    close(&doc, "sqs_in_flight", 3_125.0); // 3.472 2… × 900
    close(&doc, "ses_rate_needed", peak);
    close(&doc, "ledger_writes_per_sec", peak * 3.0); // 10.416 6…
    assert_eq!(requests(&doc), []);
}

#[test]
fn json_at_one_million_a_day() {
    let doc = json("1000000");
    // peak = 1 000 000 / 86 400 × 3 = 34.722 2…/s
    let peak = 1_000_000.0 / 86_400.0 * 3.0;
    close(&doc, "live_schedules", 27_000_000.0); // 27 × 1 000 000
    close(&doc, "create_schedule_per_sec", peak);
    close(&doc, "invocations_per_sec", peak);
    close(&doc, "sqs_in_flight", 31_250.0); // 34.722 2… × 900
    close(&doc, "ses_rate_needed", peak);
    close(&doc, "ledger_writes_per_sec", peak * 3.0); // 104.166 6…
    assert_eq!(requests(&doc), [(SCHEDULES.to_owned(), 54_000_000.0)]); // 2 × 27 000 000
}

#[test]
fn json_at_ten_million_a_day() {
    let doc = json("10000000");
    // peak = 10 000 000 / 86 400 × 3 = 347.222…/s
    let peak = 10_000_000.0 / 86_400.0 * 3.0;
    close(&doc, "live_schedules", 270_000_000.0); // 27 × 10 000 000
    close(&doc, "create_schedule_per_sec", peak); // 6.9 % of 5 000: ok
    close(&doc, "invocations_per_sec", peak); // 34.7 % of 1 000: ok
    close(&doc, "sqs_in_flight", 312_500.0); // 347.22… × 900, over the 120 000 hard limit
    close(&doc, "ses_rate_needed", peak);
    close(&doc, "ledger_writes_per_sec", peak * 3.0); // 1 041.67
                                                      // The SQS limit cannot be raised: it is no request, but a hard-limit verdict.
    assert_eq!(requests(&doc), [(SCHEDULES.to_owned(), 540_000_000.0)]); // 2 × 270 000 000
    let sqs = doc["rows"].as_array().unwrap().iter().find(|r| r["key"] == "sqs_in_flight").unwrap();
    assert_eq!(sqs["verdict"], "hard_limit", "{sqs:#}");
}

#[test]
fn a_fixed_billing_day_wakes_its_cohort_over_the_spread() {
    let out = noticectl(&[
        "capacity",
        "--per-day",
        "1000000",
        "--fixed-billing-day",
        "--spread-secs",
        "3600",
        "--json",
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    // 1 000 000 / 3 600 = 277.78/s for invocations and SES; 1 000 000 / 1 000 = 1 000 s to drain.
    close(&doc, "invocations_per_sec", 1_000_000.0 / 3_600.0);
    close(&doc, "ses_rate_needed", 1_000_000.0 / 3_600.0);
    close(&doc, "cohort_drain_secs", 1_000.0);
    // min(1 000 000, 277.78 × 900) = 250 000.
    close(&doc, "sqs_in_flight", 250_000.0);
}

#[test]
fn per_day_zero_exits_2_naming_the_flag() {
    let out = noticectl(&["capacity", "--per-day", "0"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("--per-day"), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
}

#[test]
fn a_window_that_closes_before_it_opens_exits_2_naming_both_flags() {
    let out = noticectl(&["capacity", "--per-day", "1000", "--opens-hours", "24", "--closes-hours", "48"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--closes-hours") && stderr.contains("--opens-hours"), "{stderr}");
}
