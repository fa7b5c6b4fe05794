//! `noticectl windows` as a reviewer runs it over the example policy (docs/windows/us-ca-arl.json):
//! the real binary, its table, its JSON, its errors. Expected windows are worked out by hand from
//! the file: annual_renewal 60 d → 7 d, narrowed to 45 d → 15 d in US-CA; trial_conversion
//! 30 d → 2 d, narrowed to 21 d → 3 d in US-CA; price_change 30 d → 5 d, closing at 7 d in US-CA;
//! renewal_notice_t72 72 h → 24 h, closing at 48 h in US-NY; other kinds refused.

use std::process::{Command, Output};

use serde_json::Value;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/windows/us-ca-arl.json");

fn noticectl(env: &[(&str, &str)], args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noticectl"));
    cmd.current_dir(dir.path()).env_remove("NOTICE_WINDOWS").env_remove("NOTICE_WINDOWS_FILE").args(args);
    cmd.envs(env.iter().copied());
    cmd.output().expect("run noticectl")
}

fn stdout_ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// The cells of the table row whose first two cells are `kind` and `jurisdiction`.
fn row(stdout: &str, kind: &str, jurisdiction: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|l| {
            l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect::<Vec<_>>()
        })
        .find(|cells| cells.len() > 2 && cells[0] == kind && cells[1] == jurisdiction)
        .unwrap_or_else(|| panic!("no {kind} × {jurisdiction} row in:\n{stdout}"))
}

#[test]
fn the_example_policy_shows_every_kind_in_every_jurisdiction_and_where_each_bound_comes_from() {
    let out = stdout_ok(&noticectl(&[], &["windows", "--windows", EXAMPLE]));
    let expect = |kind, j, cells: [&str; 4]| {
        assert_eq!(row(&out, kind, j)[2..], cells, "{kind} × {j}");
    };
    expect(
        "annual_renewal",
        "US-CA",
        [
            "1080 h (45 d)",
            "360 h (15 d)",
            "jurisdictions.US-CA.kinds.annual_renewal.opens_at_most_hours_before",
            "jurisdictions.US-CA.kinds.annual_renewal.closes_at_least_hours_before",
        ],
    );
    expect(
        "annual_renewal",
        "(none)",
        [
            "1440 h (60 d)",
            "168 h (7 d)",
            "kinds.annual_renewal.opens_hours_before",
            "kinds.annual_renewal.closes_hours_before",
        ],
    );
    expect(
        "annual_renewal",
        "US-NY",
        [
            "1440 h (60 d)",
            "168 h (7 d)",
            "kinds.annual_renewal.opens_hours_before",
            "kinds.annual_renewal.closes_hours_before",
        ],
    );
    expect(
        "trial_conversion",
        "US-CA",
        [
            "504 h (21 d)",
            "72 h (3 d)",
            "jurisdictions.US-CA.kinds.trial_conversion.opens_at_most_hours_before",
            "jurisdictions.US-CA.kinds.trial_conversion.closes_at_least_hours_before",
        ],
    );
    expect(
        "renewal_notice_t72",
        "US-NY",
        [
            "72 h (3 d)",
            "48 h (2 d)",
            "kinds.renewal_notice_t72.opens_hours_before",
            "jurisdiction_floors_hours.US-NY",
        ],
    );
    expect(
        "renewal_notice_t72",
        "US-CA",
        [
            "72 h (3 d)",
            "24 h (1 d)",
            "kinds.renewal_notice_t72.opens_hours_before",
            "kinds.renewal_notice_t72.closes_hours_before",
        ],
    );
    expect(
        "price_change",
        "US-CA",
        [
            "720 h (30 d)",
            "168 h (7 d)",
            "kinds.price_change.opens_hours_before",
            "jurisdictions.US-CA.kinds.price_change.closes_at_least_hours_before",
        ],
    );
    expect(
        "price_change",
        "US-NY",
        [
            "720 h (30 d)",
            "120 h (5 d)",
            "kinds.price_change.opens_hours_before",
            "kinds.price_change.closes_hours_before",
        ],
    );
    let table_rows = out.lines().filter(|l| l.contains(" h (")).count();
    assert_eq!(table_rows, 12, "4 named kinds × 3 jurisdictions (none, US-CA, US-NY):\n{out}");
    assert!(!out.contains("(other kinds)"), "other kinds are refused, so they have no window: {out}");
    assert!(out.contains("other kinds: refused as invalid"), "{out}");
    assert!(out.contains("EXAMPLE ONLY - not legal advice"), "the caveat is shown: {out}");
    assert!(out.contains("17602"), "the statute reference is shown: {out}");
}

#[test]
fn charge_at_gives_instants_and_json_carries_every_field() {
    let out = noticectl(
        &[],
        &[
            "windows",
            "--windows",
            EXAMPLE,
            "--kind",
            "trial_conversion",
            "--jurisdiction",
            "US-CA",
            "--charge-at",
            "2026-10-31T09:00:00Z",
            "--json",
        ],
    );
    let doc: Value = serde_json::from_str(&stdout_ok(&out)).unwrap();
    let windows = doc["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 1, "{doc:#}");
    let w = &windows[0];
    assert_eq!(w["kind"], "trial_conversion");
    assert_eq!(w["jurisdiction"], "US-CA");
    assert_eq!(w["opens_hours_before"], 504);
    assert_eq!(w["closes_hours_before"], 72);
    assert_eq!(w["opens_days_before"], 21.0);
    // 21 days and 3 days before 31 October 09:00 UTC.
    assert_eq!(w["opens_at"], "2026-10-10T09:00:00Z");
    assert_eq!(w["closes_at"], "2026-10-28T09:00:00Z");
    assert_eq!(w["opens_from"], "jurisdictions.US-CA.kinds.trial_conversion.opens_at_most_hours_before");

    let table = stdout_ok(&noticectl(
        &[],
        &[
            "windows",
            "--windows",
            EXAMPLE,
            "--kind",
            "annual_renewal",
            "--jurisdiction",
            "us-ca",
            "--charge-at",
            "2026-10-31T09:00:00Z",
        ],
    ));
    let cells = row(&table, "annual_renewal", "US-CA");
    assert_eq!(cells[4..6], ["2026-09-16T09:00:00+00:00", "2026-10-16T09:00:00+00:00"], "{table}");
}

#[test]
fn the_policy_comes_from_the_environment_as_the_sender_reads_it() {
    let inline = r#"{"jurisdiction_floors_hours":{"US-NY":60}}"#;
    let out = stdout_ok(&noticectl(&[("NOTICE_WINDOWS", inline)], &["windows"]));
    assert!(out.contains("from NOTICE_WINDOWS"), "{out}");
    assert_eq!(row(&out, "(other kinds)", "US-NY")[3], "60 h (2.5 d)");
    let file = stdout_ok(&noticectl(&[("NOTICE_WINDOWS_FILE", EXAMPLE)], &["windows"]));
    assert_eq!(row(&file, "annual_renewal", "US-CA")[2], "1080 h (45 d)");
    let builtin = stdout_ok(&noticectl(&[], &["windows"]));
    assert_eq!(row(&builtin, "(other kinds)", "(none)")[2..4], ["72 h (3 d)", "24 h (1 d)"]);
    assert!(builtin.contains("other kinds: the `default` window"), "{builtin}");
}

#[test]
fn a_kind_or_jurisdiction_the_sender_would_refuse_is_named_as_such() {
    let out = noticectl(&[], &["windows", "--windows", EXAMPLE, "--kind", "annual_renewl"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(r#"did you mean "annual_renewal""#), "{stderr}");
    let out = noticectl(&[], &["windows", "--windows", EXAMPLE, "--jurisdiction", "US_CA"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ISO 3166"));
}

#[test]
fn a_bad_policy_exits_2_naming_the_field() {
    let bad =
        r#"{"jurisdictions":{"US-CA":{"kinds":{"trial_conversion":{"opens_at_most_hours_before":-3}}}}}"#;
    let out = noticectl(&[("NOTICE_WINDOWS", bad)], &["windows"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("jurisdictions.US-CA.kinds.trial_conversion.opens_at_most_hours_before")
            && stderr.contains("negative"),
        "{stderr}"
    );
    let empty = r#"{"jurisdictions":{"US-CA":{"closes_at_least_hours_before":360}}}"#;
    let out = noticectl(&[("NOTICE_WINDOWS", empty)], &["windows"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is empty"));
    assert!(String::from_utf8_lossy(&out.stderr).contains("NOTICE_WINDOWS"), "the variable the user set");

    // Given as a flag, the error speaks of the flag: never of a variable the user did not set.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("w.json");
    std::fs::write(&file, bad).unwrap();
    let file = file.to_str().unwrap();
    for args in [&["windows", "--windows", file][..], &["validate", "-", "--windows", file][..]] {
        let out = noticectl(&[], args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("--windows") && stderr.contains("opens_at_most_hours_before"), "{stderr}");
        assert!(!stderr.contains("NOTICE_WINDOWS"), "{args:?}: {stderr}");
    }
}
