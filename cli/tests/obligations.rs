//! `noticectl obligations` as a legal reviewer runs it over the US example
//! (examples/notices-us): the real binary, its JSON and its exit codes. Expected rows are read off
//! the example's windows.json by hand: an annual Californian owes `annual_renewal` 45 d → 15 d
//! (`US-CA/ca-annual-term`), a monthly one the 72 h reminder, a trial of more than 31 days
//! `trial_conversion` 21 d → 3 d; Colorado adds the anniversary reminder 40 d → 25 d, decided by the
//! subscription's start; a contract whose term is not given is one the intake would refuse (exit 1).

use std::process::{Command, Output};

use serde_json::Value;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/notices-us");

fn noticectl(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noticectl"));
    cmd.current_dir(dir.path()).env_remove("NOTICE_CONFIG").env_remove("NOTICE_WINDOWS").args(args);
    cmd.output().expect("run noticectl")
}

/// One row: `(occasion, kind, opens h, closes h, rule)`.
type Row = (String, String, u64, u64, String);

/// Every row of the JSON answer, and the exit code.
fn owed(args: &[&str]) -> (Vec<Row>, Option<i32>) {
    let mut all = vec!["obligations", "--config", EXAMPLE, "--json"];
    all.extend_from_slice(args);
    let out = noticectl(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    let rows = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let text = |f: &str| r[f].as_str().unwrap_or("-").to_owned();
            let hours = |f: &str| r[f].as_u64().unwrap_or(0);
            (
                text("occasion"),
                text("kind"),
                hours("opens_hours_before"),
                hours("closes_hours_before"),
                text("rule"),
            )
        })
        .collect();
    (rows, out.status.code())
}

fn row(occasion: &str, kind: &str, opens: u64, closes: u64, rule: &str) -> Row {
    (occasion.into(), kind.into(), opens, closes, rule.into())
}

#[test]
fn each_contract_is_shown_the_notices_it_owes_and_the_rule_of_each() {
    let (rows, code) = owed(&["--jurisdiction", "us-ca", "--interval", "year"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        rows,
        [
            row("renewal", "annual_renewal", 1080, 360, "US-CA/ca-annual-term"),
            row("price_change", "price_change", 720, 168, "US-CA/ca-price-change"),
        ]
    );
    let (rows, _) = owed(&["--jurisdiction", "US-CA", "--interval", "month", "--trial-days", "45"]);
    assert_eq!(rows[0], row("renewal", "renewal_notice_t72", 72, 24, "US-CA/ca-shorter-term"));
    assert_eq!(rows[1], row("trial_conversion", "trial_conversion", 504, 72, "US-CA/ca-long-trial"));
    let (rows, code) = owed(&["--jurisdiction", "US-CO", "--interval", "month"]);
    assert_eq!(code, Some(0));
    assert_eq!(rows[0], row("renewal", "renewal_notice_t72", 72, 24, "US-CO/co-reminder"));
    assert_eq!(rows[1], row("renewal", "anniversary_reminder", 960, 600, "US-CO/co-anniversary"));
    // Texas has no rules: the default reminder, and no price-change notice.
    let out = noticectl(&["obligations", "--config", EXAMPLE, "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["upcoming_renewal_days"], 45, "California's annual notice opens 45 d ahead: {report}");
    assert!(report["upcoming_renewal_because"].as_str().unwrap().contains("US-CA/ca-annual-term"));
    let (rows, _) = owed(&["--jurisdiction", "US-TX", "--interval", "month"]);
    assert_eq!(rows[0], row("renewal", "renewal_notice_t72", 72, 24, "default/reminder"));
    assert_eq!(rows[1], row("price_change", "-", 0, 0, "-"));
}

#[test]
fn a_contract_the_intake_would_refuse_exits_one_and_bad_flags_two() {
    let (rows, code) = owed(&["--jurisdiction", "US-CA"]);
    assert_eq!(code, Some(1), "no term: California's renewal rules cannot place it");
    assert_eq!(rows[0].1, "-");
    let out = noticectl(&["obligations", "--config", EXAMPLE, "--interval", "fortnight"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--interval \"fortnight\""));
    let de = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/notices-de");
    let out = noticectl(&["obligations", "--config", de]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no `obligations`"));
}
