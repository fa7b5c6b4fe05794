//! `noticectl config check | preview | publish` and `send --config` as a writer of notice texts
//! runs them (docs/notices.md): the real binary over the shipped example `examples/notices-de`
//! and over a copy of it with one mistake — the verdict, the line it names, what a reviewer opens,
//! what a customer receives — and the settings the configuration replaced, refused at start.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/notices-de");
const SECRET: &str = "config-tests-secret-0123456789";

/// `noticectl ARGS` in `dir`, with no NOTICE_* or AWS settings from the caller's environment
/// beyond `env`: no profile, no credentials, an endpoint nothing answers on.
fn noticectl(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noticectl"));
    cmd.current_dir(dir);
    for var in [
        "NOTICE_CONFIG",
        "NOTICE_CONFIG_REFRESH_SECS",
        "NOTICE_TEMPLATE_DIR",
        "NOTICE_WINDOWS",
        "NOTICE_WINDOWS_FILE",
        "NOTICE_LEDGER_URL",
        "NOTICE_STATE_DIR",
        "NOTICE_MODE",
        "NOTICE_FROM",
        "NOTICE_MANAGE_URL",
        "NOTICE_LINK_SECRET",
        "NOTICE_KEY_SECRET_ARN",
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL_S3",
        "AWS_ENDPOINT_URL_SSM",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("NOTICE_KEY_SECRET", SECRET)
        .env("AWS_CONFIG_FILE", dir.join("no-aws-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-aws-credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        .env("AWS_REGION", "us-east-1")
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("run noticectl")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn example() -> String {
    Path::new(EXAMPLE).canonicalize().unwrap().display().to_string()
}

/// Every file under `dir` with its bytes, sorted by path: the state to compare before and after.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                files.push((path.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// A copy of the example in `into/notices`, with `templates/de.body.txt`'s last line (line 9)
/// printing a variable no job carries.
fn broken_copy(into: &Path) -> PathBuf {
    let copy = into.join("notices");
    for (path, bytes) in snapshot(Path::new(EXAMPLE)) {
        let to = copy.join(&path);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, bytes).unwrap();
    }
    let body = copy.join("templates/de.body.txt");
    let original = std::fs::read_to_string(&body).unwrap();
    let line = "Vielen Dank, dass Sie unser Kunde sind.";
    assert_eq!(
        original.lines().position(|l| l == line),
        Some(8),
        "the example's de.body.txt changed:\n{original}"
    );
    std::fs::write(&body, original.replace(line, "Vielen Dank, {{ kundenname }}.")).unwrap();
    copy
}

#[test]
fn the_example_checks_clean_and_names_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let example = example();
    let before = snapshot(Path::new(&example));

    let out = noticectl(dir.path(), &["config", "check", &example], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let line = stdout.lines().next().unwrap_or_default();
    assert!(line.starts_with("ok: example-de · version sha256:"), "{stdout}");
    let version = line.split("version ").nth(1).unwrap().split(' ').next().unwrap().to_owned();
    assert_eq!(version.len(), "sha256:".len() + 64, "{stdout}");

    let out = noticectl(dir.path(), &["config", "check", &example, "--json"], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["ok"], true, "{doc}");
    assert_eq!(doc["name"], "example-de", "{doc}");
    assert_eq!(doc["version"], version.as_str(), "the same files are the same version: {doc}");

    assert_eq!(snapshot(Path::new(&example)), before, "checking writes nothing");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing written where it ran");
}

#[test]
fn an_unknown_variable_is_named_by_file_and_line_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let broken = broken_copy(dir.path());
    let broken = broken.to_str().unwrap();

    let out = noticectl(dir.path(), &["config", "check", broken], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.lines().any(|l| l.starts_with("templates/de.body.txt:9: ")
            && l.contains("unknown variable")
            && l.contains("kundenname")),
        "{stdout}"
    );
    assert!(!stdout.contains("ok:"), "{stdout}");
    assert!(stderr.contains("nothing can be published"), "{stderr}");

    let out = noticectl(dir.path(), &["config", "check", broken, "--json"], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["ok"], false, "{doc}");
    let problems = doc["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|p| p["file"] == "templates/de.body.txt"
            && p["line"] == 9
            && p["message"].as_str().unwrap().contains("unknown variable `kundenname`")),
        "{doc}"
    );
}

#[test]
fn preview_writes_what_an_austrian_customer_in_california_would_read() {
    let dir = tempfile::tempdir().unwrap();
    let example = example();
    let args = [
        "config",
        "preview",
        &example,
        "--kind",
        "price_change",
        "--locale",
        "de-AT",
        "--jurisdiction",
        "US-CA",
        "--out",
        "out",
    ];
    let out = noticectl(dir.path(), &args, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("price_change/de"), "the texts used are named: {stdout}");

    let read = |name: &str| std::fs::read_to_string(dir.path().join("out").join(name)).unwrap();
    let txt = read("notice.txt");
    let subject = txt.lines().next().unwrap();
    assert!(subject.starts_with("Subject: Neuer Preis für"), "{txt}");
    assert!(subject.contains("31. Dezember 2026"), "a German long date: {txt}");
    assert!(txt.contains("€\u{a0}29,00"), "Austrian CLDR: euro sign, no-break space, comma: {txt:?}");

    let eml = read("notice.eml");
    assert!(eml.contains("Content-Language: de\r\n"), "{eml}");

    let html = read("notice.html");
    assert!(html.contains("href=\"https://"), "{html}");
    assert!(!html.contains("&#x2f;"), "links stay plain URLs: {html}");
    assert!(html.contains("31. Dezember 2026"), "{html}");
}

#[test]
fn publish_dry_run_names_the_object_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let example = example();
    let before = snapshot(Path::new(&example));
    let check = noticectl(dir.path(), &["config", "check", &example, "--json"], &[]);
    let doc: Value = serde_json::from_slice(&check.stdout).unwrap();
    let hex = doc["version"].as_str().unwrap().trim_start_matches("sha256:").to_owned();

    let args =
        ["config", "publish", &example, "--bucket", "b", "--parameter", "/stack/notice-config", "--dry-run"];
    let out = noticectl(dir.path(), &args, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "no AWS call is made: {stdout}\n{stderr}");
    assert!(stdout.contains(&format!("would upload s3://b/notice-config/{hex}.json")), "{stdout}");
    assert!(stdout.contains("would point /stack/notice-config at it"), "{stdout}");
    assert!(!stdout.contains("uploaded") && !stdout.contains(", now "), "{stdout}");
    assert_eq!(snapshot(Path::new(&example)), before);
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing written where it ran");
}

#[test]
fn publish_of_a_broken_copy_stops_at_the_check_before_any_aws_call() {
    let dir = tempfile::tempdir().unwrap();
    let broken = broken_copy(dir.path());
    // No credentials and an endpoint nothing answers on: reaching AWS would exit 2, not 1.
    let args = [
        "config",
        "publish",
        broken.to_str().unwrap(),
        "--bucket",
        "b",
        "--parameter",
        "/stack/notice-config",
    ];
    let out = noticectl(dir.path(), &args, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("templates/de.body.txt:9: ") && stdout.contains("kundenname"), "{stdout}");
    assert!(stderr.contains("nothing published"), "{stderr}");
    assert!(!stdout.contains("s3://") && !stdout.contains("uploaded"), "{stdout}");
}

#[test]
fn send_with_the_example_mails_a_german_customer_in_german() {
    let dir = tempfile::tempdir().unwrap();
    let example = example();
    // annual_renewal: open 1440 h (60 d) → 168 h (7 d) before the charge; the charge is ~29 d ahead.
    let job = serde_json::json!({"subscription_id": "sub_de", "period_start": "2027-01-01",
        "kind": "annual_renewal", "email": "kunde@example.com", "charge_at": "2026-12-31T09:00:00Z",
        "locale": "de-DE", "time_zone": "Europe/Berlin",
        "template_data": {"plan_name": "Kaffee-Abo", "amount": {"minor": 2900, "currency": "EUR"}}});
    std::fs::write(dir.path().join("jobs.jsonl"), format!("{job}\n")).unwrap();

    let args =
        ["send", "jobs.jsonl", "--config", &example, "--now", "2026-12-02T12:00:00Z", "--state-dir", "state"];
    let out = noticectl(dir.path(), &args, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let header =
        stderr.lines().find(|l| l.starts_with("noticectl: 1 job(s) from jobs.jsonl")).unwrap_or_default();
    assert!(header.contains("texts example-de "), "the header names the configuration: {stderr}");
    assert!(stdout.contains("1 job(s): 1 sent"), "{stdout}");

    let emls: Vec<PathBuf> = std::fs::read_dir(dir.path().join("state/outbox"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "eml"))
        .collect();
    assert_eq!(emls.len(), 1, "{emls:?}");
    let eml = std::fs::read_to_string(&emls[0]).unwrap();
    assert!(eml.contains("Content-Language: de\r\n"), "{eml}");
    assert!(eml.contains("Guten Tag"), "the German text: {eml}");
    assert!(!eml.contains("Hello,"), "not the English fallback: {eml}");
}

#[test]
fn send_refuses_the_settings_the_configuration_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let example = example();
    let job = serde_json::json!({"subscription_id": "sub_1", "period_start": "2027-01-01",
        "kind": "annual_renewal", "email": "a@example.com", "charge_at": "2026-12-31T09:00:00Z"});
    std::fs::write(dir.path().join("jobs.jsonl"), format!("{job}\n")).unwrap();
    let outbox_is_empty = |dir: &Path| {
        std::fs::read_dir(dir.join("state/outbox")).map_or(true, |mut entries| entries.next().is_none())
    };

    let args = ["send", "jobs.jsonl", "--state-dir", "state"];
    let out = noticectl(dir.path(), &args, &[("NOTICE_TEMPLATE_DIR", "templates")]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("NOTICE_TEMPLATE_DIR") && stderr.contains("NOTICE_CONFIG"), "{stderr}");
    assert!(outbox_is_empty(dir.path()));

    let out = noticectl(dir.path(), &args, &[("NOTICE_CONFIG", &example), ("NOTICE_WINDOWS", "{}")]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("NOTICE_WINDOWS") && stderr.contains("windows.json"), "{stderr}");
    assert!(outbox_is_empty(dir.path()));

    // The same with the directory given as --config: never silently ignored either.
    let flagged = ["send", "jobs.jsonl", "--state-dir", "state", "--config", example.as_str()];
    let out = noticectl(dir.path(), &flagged, &[("NOTICE_WINDOWS_FILE", "windows.json")]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("NOTICE_WINDOWS_FILE") && stderr.contains("windows.json"), "{stderr}");
    // In the words the user typed: the flag, not the variable it stands in for.
    assert!(stderr.contains("beside --config") && !stderr.contains("NOTICE_CONFIG"), "{stderr}");
    assert!(outbox_is_empty(dir.path()));
    assert!(!dir.path().join("state").exists(), "a refused send leaves no state directory");
}

/// A writer's first draft with four unrelated mistakes: every one is reported in the one run,
/// sorted by file and line, and none drags in a misleading second message (a template that does
/// not compile is still there: its set is not "missing" it).
#[test]
fn every_problem_is_reported_in_one_run_with_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let copy = broken_copy(dir.path());
    // A syntax error on line 2 of one part.
    let html = copy.join("templates/price_change.en.body.html");
    let original = std::fs::read_to_string(&html).unwrap();
    let mut lines: Vec<&str> = original.lines().collect();
    lines.insert(1, "{% if amount %}never closed");
    std::fs::write(&html, lines.join("\n")).unwrap();
    // An unknown variable in a second template (the broken copy has one in de.body.txt:9).
    let subject = copy.join("templates/en.subject.txt");
    std::fs::write(&subject, "Your {{ plan_nme }} renews soon\n").unwrap();
    // A locale the manifest cannot read.
    let manifest = copy.join("manifest.json");
    let declared = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, declared.replace(r#""de-CH", "en""#, r#""de-CH", "en", "not a locale!""#))
        .unwrap();

    let out = noticectl(dir.path(), &["config", "check", copy.to_str().unwrap()], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let problems: Vec<&str> = stdout.lines().collect();
    let expect = [
        ("manifest.json: ", "not a locale!"),
        ("templates/de.body.txt:9: ", "`kundenname`"),
        ("templates/en.subject.txt:1: ", "`plan_nme`"),
        ("templates/price_change.en.body.html:", "syntax"),
    ];
    for (start, says) in expect {
        assert!(
            problems.iter().any(|l| l.starts_with(start) && l.contains(says)),
            "{start} … {says}:\n{stdout}"
        );
    }
    let mut sorted = problems.clone();
    sorted.sort();
    assert_eq!(problems, sorted, "sorted by file and line");
    assert!(!stdout.contains("its set has no"), "a broken part is not a missing one:\n{stdout}");
    assert_eq!(problems.len(), expect.len(), "nothing but the four mistakes:\n{stdout}");
    assert!(stderr.contains("4 problem(s)"), "{stderr}");
}

#[test]
fn a_directory_that_cannot_be_read_exits_2_not_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = noticectl(dir.path(), &["config", "check", "no-such-dir"], &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "an unreadable file is exit 2 in the table:\n{stdout}\n{stderr}");
    assert!(stderr.contains("no-such-dir"), "{stderr}");
}

/// The sample charge is 2026-12-31 09:00 UTC: a customer in Honolulu reads the 30th, and the
/// preview shows what they read, not what UTC reads.
#[test]
fn preview_in_the_customers_time_zone_shows_their_date() {
    let dir = tempfile::tempdir().unwrap();
    let example = example();
    let preview = |zone: &str, out: &str| {
        let args = [
            "config",
            "preview",
            &example,
            "--kind",
            "price_change",
            "--locale",
            "de",
            "--out",
            out,
            "--time-zone",
            zone,
        ];
        noticectl(dir.path(), &args, &[])
    };
    let out = preview("Pacific/Honolulu", "hawaii");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let txt = std::fs::read_to_string(dir.path().join("hawaii/notice.txt")).unwrap();
    assert!(txt.contains("30. Dezember 2026") && !txt.contains("31. Dezember 2026"), "{txt}");

    let out = preview("Mars/Olympus_Mons", "mars");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("--time-zone") && stderr.contains("Mars/Olympus_Mons"), "{stderr}");
    assert!(!dir.path().join("mars").exists(), "a refused preview writes nothing");
}
