//! `noticectl limits` as an operator runs it: the real binary, its table, its JSON, its errors.
//! Every expected number is worked out by hand in the comments.

use std::process::{Command, Output};

use serde_json::Value;

/// The configuration of the brief: gmail.com split in 8 shards, a configured account, no default.
const GMAIL: &str = r#"{"domains":{"gmail.com":{"per_second":400,"burst":800,"shards":8}},"account":{"per_second":90,"burst":90}}"#;

/// Runs `noticectl` with NOTICE_RATE_LIMITS cleared, or set to `rate_limits`.
fn noticectl_with(rate_limits: Option<&str>, args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noticectl"));
    cmd.current_dir(dir.path()).env_remove("NOTICE_STATE_DIR").env_remove("NOTICE_RATE_LIMITS").args(args);
    if let Some(value) = rate_limits {
        cmd.env("NOTICE_RATE_LIMITS", value);
    }
    cmd.output().expect("run noticectl")
}

fn noticectl(args: &[&str]) -> Output {
    noticectl_with(None, args)
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The stdout of a run that must succeed.
fn stdout_ok(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    stdout
}

fn json(out: &Output) -> Value {
    let stdout = stdout_ok(out);
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{stdout}"))
}

/// The table row that starts with `name`.
fn row<'a>(stdout: &'a str, name: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.trim_start().split("  ").next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} row in:\n{stdout}"))
}

/// The whitespace-separated cells of a row, with the thousands spaces of numbers kept apart
/// by the two-space column gap.
fn cells(row: &str) -> Vec<String> {
    row.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect()
}

fn number(doc: &Value, pointer: &str) -> f64 {
    doc.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{pointer} is not a number in {doc:#}"))
}

fn close(doc: &Value, pointer: &str, expected: f64) {
    let actual = number(doc, pointer);
    assert!((actual - expected).abs() <= expected.abs() * 1e-9, "{pointer}: {actual} != {expected}");
}

fn string<'a>(doc: &'a Value, pointer: &str) -> &'a str {
    doc.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{pointer} is not a string in {doc:#}"))
}

#[test]
fn the_builtin_default_with_a_max_send_rate_of_14_gives_the_account_90_percent_and_a_provider_half_of_that() {
    let stdout = stdout_ok(&noticectl(&["limits", "--max-send-rate", "14"]));
    // 14 × 0.9 = 12.6/s; burst one second of it, rounded down = 12; 12.6 × 3 600 = 45 360/h.
    assert_eq!(cells(row(&stdout, "account")), ["account", "12.6/s", "45 360/h", "12", "-", "-"], "{stdout}");
    // 12.6 × 0.5 = 6.3/s; burst 6.3 × 5 = 31.5, rounded down = 31; 6.3 × 3 600 = 22 680/h.
    assert_eq!(
        cells(row(&stdout, "each provider")),
        ["each provider", "6.3/s", "22 680/h", "31", "1", "-"],
        "{stdout}"
    );
    // The long tail has no bucket of its own: the account's only.
    assert_eq!(cells(row(&stdout, "other domains"))[1], "none", "{stdout}");
    // Each number says where it came from.
    let account = stdout.lines().find(|l| l.trim_start().starts_with("account:")).unwrap();
    assert!(account.contains("90 % of MaxSendRate 14/s"), "{account}");
    let providers = stdout.lines().find(|l| l.trim_start().starts_with("providers:")).unwrap();
    assert!(
        providers.contains("built-in provider limit") && providers.contains("50 % of the account rate"),
        "{providers}"
    );
    assert!(providers.contains("5 s"), "{providers}");
    assert!(stdout.contains("google (2), microsoft ("), "the providers and their domain counts: {stdout}");
    let other = stdout.lines().find(|l| l.trim_start().starts_with("other domains:")).unwrap();
    assert!(other.contains("only the account's tokens"), "{other}");
    assert!(stdout.contains("unset: the built-in default"), "{stdout}");
}

#[test]
fn the_builtin_default_without_a_max_send_rate_is_10_a_second_burst_50_and_no_account_limit() {
    let stdout = stdout_ok(&noticectl(&["limits"]));
    // Limit::DEFAULT: 10/s, 10 × 3 600 = 36 000/h, burst 50.
    assert_eq!(
        cells(row(&stdout, "each provider")),
        ["each provider", "10/s", "36 000/h", "50", "1", "-"],
        "{stdout}"
    );
    assert_eq!(cells(row(&stdout, "account")), ["account", "none", "-", "-", "-", "-"], "{stdout}");
    let account = stdout.lines().find(|l| l.trim_start().starts_with("account:")).unwrap();
    assert!(account.contains("MaxSendRate is unknown") && account.contains("--max-send-rate"), "{account}");
    assert!(stdout.contains("SES MaxSendRate unknown"), "{stdout}");
}

#[test]
fn a_sharded_domain_is_split_and_a_configured_account_ignores_the_max_send_rate() {
    let stdout = stdout_ok(&noticectl(&[
        "limits",
        "--rate-limits",
        GMAIL,
        "--max-send-rate",
        "14",
        "--domain",
        "GMail.com",
        "--domain",
        "example.org",
        "--domain",
        "outlook.com",
    ]));
    // 400/s × 3 600 = 1 440 000/h; 8 shards of 400 / 8 = 50/s (180 000/h), burst 800 / 8 = 100.
    assert_eq!(
        cells(row(&stdout, "gmail.com")),
        ["gmail.com", "400/s", "1 440 000/h", "800", "8", "50/s (180 000/h) burst 100"],
        "{stdout}"
    );
    // Configured 90/s (324 000/h), not 90 % of 14 = 12.6/s.
    assert_eq!(cells(row(&stdout, "account")), ["account", "90/s", "324 000/h", "90", "-", "-"], "{stdout}");
    assert!(!stdout.contains("12.6"), "{stdout}");
    let account = stdout.lines().find(|l| l.trim_start().starts_with("account:")).unwrap();
    assert!(account.contains("configured"), "{account}");
    // No `default`: other domains are not limited, and the asked-about domains say which applies.
    assert_eq!(cells(row(&stdout, "other domains"))[1], "none", "{stdout}");
    let asked = stdout.split("domains asked about (--domain):").nth(1).unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        asked.contains("gmail.com: listed: 400/s") && asked.contains("in 8 shards of 50/s burst 100"),
        "{asked}"
    );
    assert!(asked.contains("example.org: no bucket of its own: only the account's tokens"), "{asked}");
    // A configuration without `providers` keeps its per-domain behaviour: no provider buckets.
    assert!(asked.contains("outlook.com: no bucket of its own"), "{asked}");
    assert!(!stdout.contains("each provider"), "{stdout}");
    // 400/s is above the account's 90/s, which is above SES's 14/s.
    assert!(stdout.contains("gmail.com (400/s) is above the account's 90/s"), "{stdout}");
    assert!(stdout.contains("account rate 90/s is above the MaxSendRate 14/s"), "{stdout}");
}

#[test]
fn the_configuration_is_read_from_the_environment_or_a_file() {
    // The same configuration through NOTICE_RATE_LIMITS…
    let doc = json(&noticectl_with(Some(GMAIL), &["limits", "--json"]));
    assert_eq!(string(&doc, "/config_source"), "NOTICE_RATE_LIMITS");
    assert_eq!(number(&doc, "/domains/0/shards"), 8.0);
    close(&doc, "/account/limit/per_second", 90.0);
    // …and through @FILE; the flag wins over the variable.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.json");
    std::fs::write(&path, r#"{"default":{"per_second":2.5,"burst":7}}"#).unwrap();
    let flag = format!("@{}", path.display());
    let doc = json(&noticectl_with(Some(GMAIL), &["limits", "--rate-limits", &flag, "--json"]));
    assert_eq!(string(&doc, "/default/source"), "configured");
    close(&doc, "/default/limit/per_second", 2.5);
    // 2.5 × 3 600 = 9 000/h.
    close(&doc, "/default/limit/per_hour", 9_000.0);
    assert_eq!(number(&doc, "/default/limit/burst"), 7.0);
    assert_eq!(doc["domains"], serde_json::json!([]), "{doc:#}");
    assert_eq!(string(&doc, "/account/source"), "none");
}

#[test]
fn off_says_so_plainly() {
    for (env, args) in [
        (Some("off"), vec!["limits", "--max-send-rate", "14", "--domain", "gmail.com"]),
        (None, vec!["limits", "--rate-limits", "{}", "--domain", "gmail.com"]),
    ] {
        let stdout = stdout_ok(&noticectl_with(env, &args));
        assert!(stdout.contains("rate limits: off"), "{stdout}");
        assert!(stdout.contains("gmail.com: not limited"), "{stdout}");
        assert!(stdout.contains("the sender logs: off"), "{stdout}");
        // No table of limits.
        assert!(!stdout.contains("per second"), "{stdout}");
    }
    let doc = json(&noticectl_with(Some("off"), &["limits", "--max-send-rate", "14", "--json"]));
    assert_eq!(doc["enabled"], Value::Bool(false), "{doc:#}");
    assert_eq!(string(&doc, "/account/source"), "off");
    assert_eq!(doc["account"]["limit"], Value::Null, "{doc:#}");
    assert_eq!(string(&doc, "/default/source"), "off");
    assert_eq!(string(&doc, "/sender_log"), "off");
}

#[test]
fn invalid_json_exits_2_naming_notice_rate_limits() {
    for (env, args) in [
        (Some(r#"{"default":{"per_second":10}"#), vec!["limits"]),
        (None, vec!["limits", "--rate-limits", r#"{"default":"#]),
        (None, vec!["limits", "--rate-limits", r#"{"default":{"per_second":0,"burst":5}}"#]),
    ] {
        let out = noticectl_with(env, &args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}\n{stdout}\n{stderr}");
        assert!(stderr.contains("NOTICE_RATE_LIMITS"), "{stderr}");
        assert!(stdout.is_empty(), "{stdout}");
    }
    let out = noticectl(&["limits", "--max-send-rate", "0"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--max-send-rate"), "{stderr}");
}

#[test]
fn json_carries_every_number_and_its_source() {
    let doc = json(&noticectl(&["limits", "--max-send-rate", "14", "--domain", "Ada@Example.org", "--json"]));
    assert_eq!(doc["enabled"], Value::Bool(true), "{doc:#}");
    assert_eq!(doc["builtin"], Value::Bool(true), "{doc:#}");
    close(&doc, "/max_send_rate", 14.0);
    // 14 × 0.9 = 12.6/s, 45 360/h, burst 12.
    assert_eq!(string(&doc, "/account/source"), "max_send_rate");
    close(&doc, "/account/limit/per_second", 12.6);
    close(&doc, "/account/limit/per_hour", 45_360.0);
    assert_eq!(number(&doc, "/account/limit/burst"), 12.0);
    // 12.6 × 0.5 = 6.3/s, 22 680/h, burst 31, for every provider of the table.
    assert_eq!(string(&doc, "/providers/source"), "account_share");
    close(&doc, "/providers/default/per_second", 6.3);
    close(&doc, "/providers/default/per_hour", 22_680.0);
    assert_eq!(number(&doc, "/providers/default/burst"), 31.0);
    assert_eq!(doc["providers"]["list"].as_array().map(Vec::len), Some(18), "{doc:#}");
    assert_eq!(string(&doc, "/providers/list/0/provider"), "google");
    assert_eq!(doc["providers"]["list"][0]["domains"], serde_json::json!(["gmail.com", "googlemail.com"]));
    assert_eq!(string(&doc, "/default/source"), "none");
    // The address is keyed by its domain, lower case: a domain of no provider, the account only.
    assert_eq!(string(&doc, "/queries/0/domain"), "example.org");
    assert_eq!(string(&doc, "/queries/0/matched"), "not_limited");
    assert_eq!(
        string(&doc, "/sender_log"),
        "every provider 6.3/s burst 31; other domains: the account only; account 12.6/s burst 12"
    );

    let doc = json(&noticectl(&["limits", "--json", "--domain", "Hotmail.DE"]));
    assert_eq!(string(&doc, "/providers/source"), "builtin");
    close(&doc, "/providers/default/per_second", 10.0);
    assert_eq!(number(&doc, "/providers/default/burst"), 50.0);
    assert_eq!(string(&doc, "/queries/0/matched"), "provider");
    assert_eq!(string(&doc, "/queries/0/provider"), "microsoft");
    assert_eq!(string(&doc, "/account/source"), "none");
    assert_eq!(doc["account"]["limit"], Value::Null, "{doc:#}");
    assert_eq!(doc["max_send_rate"], Value::Null, "{doc:#}");

    let doc = json(&noticectl(&[
        "limits",
        "--rate-limits",
        GMAIL,
        "--max-send-rate",
        "14",
        "--json",
        "--domain",
        "gmail.com",
    ]));
    assert_eq!(doc["builtin"], Value::Bool(false), "{doc:#}");
    assert_eq!(string(&doc, "/account/source"), "configured");
    close(&doc, "/account/limit/per_second", 90.0);
    assert_eq!(number(&doc, "/account/limit/burst"), 90.0);
    assert_eq!(string(&doc, "/default/source"), "none");
    assert_eq!(doc["default"]["limit"], Value::Null, "{doc:#}");
    assert_eq!(string(&doc, "/domains/0/domain"), "gmail.com");
    close(&doc, "/domains/0/per_second", 400.0);
    close(&doc, "/domains/0/per_hour", 1_440_000.0);
    assert_eq!(number(&doc, "/domains/0/burst"), 800.0);
    assert_eq!(number(&doc, "/domains/0/shards"), 8.0);
    close(&doc, "/domains/0/per_shard/per_second", 50.0);
    close(&doc, "/domains/0/per_shard/per_hour", 180_000.0);
    assert_eq!(number(&doc, "/domains/0/per_shard/burst"), 100.0);
    assert_eq!(string(&doc, "/queries/0/matched"), "listed");
    close(&doc, "/queries/0/per_shard/per_second", 50.0);
}

#[test]
fn the_mx_rollup_is_shown_on_or_off_and_which_domains_it_would_look_up() {
    // Off by default, and in a configuration that does not name it.
    let stdout = stdout_ok(&noticectl(&["limits", "--domain", "workspace.example"]));
    assert!(stdout.contains("MX rollup: off"), "{stdout}");
    assert!(!stdout.contains("unless its MX hosts"), "{stdout}");
    let doc = json(&noticectl(&["limits", "--json", "--domain", "workspace.example"]));
    assert_eq!(doc["rollup"]["enabled"], Value::Bool(false), "{doc:#}");
    assert_eq!(doc["rollup"]["mode"], Value::Null, "{doc:#}");
    assert_eq!(doc["queries"][0]["mx_lookup"], Value::Bool(false), "{doc:#}");

    let rollup = r#"{"providers":{"google":{"per_second":10,"burst":20}},"domains":{"acme.example":"google"},"rollup":"mx"}"#;
    let args =
        ["limits", "--domain", "workspace.example", "--domain", "gmail.com", "--domain", "acme.example"];
    let stdout = stdout_ok(&noticectl_with(Some(rollup), &args));
    assert!(stdout.contains("MX rollup: on"), "{stdout}");
    assert!(stdout.contains("at most 200 ms"), "{stdout}");
    assert!(stdout.contains("MxRollupFallbacks"), "{stdout}");
    // A domain nothing places: the tail, unless its MX says otherwise; the table's and a mapped
    // domain are never looked up.
    let line = |d: &str| stdout.lines().find(|l| l.trim_start().starts_with(&format!("{d}:"))).unwrap_or("");
    assert!(
        line("workspace.example").contains("the long tail")
            && line("workspace.example").contains("unless its MX hosts are all one provider's"),
        "{stdout}"
    );
    assert!(!line("gmail.com").contains("unless its MX"), "{stdout}");
    assert!(!line("acme.example").contains("unless its MX"), "{stdout}");
    assert!(stdout.contains("the sender logs: google 10/s burst 20; acme.example → google; mx rollup: other domains by their MX hosts; other domains: the account only"), "{stdout}");

    let mut json_args = args.to_vec();
    json_args.push("--json");
    let doc = json(&noticectl_with(Some(rollup), &json_args));
    assert_eq!(doc["rollup"]["enabled"], Value::Bool(true), "{doc:#}");
    assert_eq!(string(&doc, "/rollup/mode"), "mx");
    let looked_up: Vec<bool> = (0..3).map(|i| doc["queries"][i]["mx_lookup"] == Value::Bool(true)).collect();
    assert_eq!(looked_up, [true, false, false], "{doc:#}");

    // Anything but "mx" stops the command as it stops the sender, naming the value.
    let out = noticectl_with(Some(&rollup.replace(r#""mx""#, r#""dns""#)), &["limits"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("NOTICE_RATE_LIMITS") && stderr.contains(r#""dns" is not a rollup"#), "{stderr}");
}
