//! Keys as printed (issue 48, item 5): after `noticectl key rotate`, `send` prints a new notice's
//! key as `v2-` and 12 hex characters; `show`, `quarantine` and `key` must take every form a
//! command prints — the printed prefix with or without its `v2-`, the whole key with or without
//! it — for a notice under either version, on a local ledger and its local secret.

use std::path::Path;
use std::process::{Command, Output};

const NOW: &str = "2027-06-02T12:00:00Z";

fn job(sub: &str) -> String {
    serde_json::json!({"subscription_id": sub, "period_start": "2027-06-01", "kind": "renewal_notice_t72",
        "email": format!("{sub}@example.com"), "charge_at": "2027-06-04T09:00:00Z"})
    .to_string()
}

fn noticectl(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir)
        .env_remove("NOTICE_KEY_SECRET")
        .env_remove("NOTICE_KEY_SECRET_ARN")
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_STATE_DIR")
        .env_remove("NOTICE_CONFIG")
        .env_remove("NOTICE_WINDOWS")
        .env_remove("NOTICE_WINDOWS_FILE")
        .env_remove("NOTICE_LINK_SECRET")
        .args(args)
        .output()
        .expect("run noticectl")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Sends `sub`'s notice and returns the key prefix its `sent` line prints.
fn send(dir: &Path, sub: &str) -> String {
    std::fs::write(dir.join("jobs.jsonl"), format!("{}\n", job(sub))).expect("write jobs");
    let out = noticectl(dir, &["send", "jobs.jsonl", "--now", NOW]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    let line = t.lines().find(|l| l.contains(" sent ")).unwrap_or_else(|| panic!("no sent line: {t}"));
    let is_prefix = |token: &str| {
        let hex = token.strip_prefix("v2-").unwrap_or(token);
        hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let prefix = line.split_whitespace().find(|t| is_prefix(t));
    prefix.unwrap_or_else(|| panic!("no key prefix in {line:?}")).to_owned()
}

fn key(dir: &Path, sub: &str) -> String {
    let out = noticectl(
        dir,
        &["key", "--subscription-id", sub, "--period-start", "2027-06-01", "--kind", "renewal_notice_t72"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `show ARG` found the row of `whole`.
fn shows(dir: &Path, arg: &str, whole: &str) {
    let out = noticectl(dir, &["show", arg]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "show {arg}: {t}");
    assert!(
        t.contains(&format!("\"notice_key\": \"{whole}\"")) && t.contains("\"state\": \"sent\""),
        "{arg}: {t}"
    );
}

fn rotate(dir: &Path) {
    let rotated = noticectl(dir, &["key", "rotate", "--yes"]);
    assert_eq!(rotated.status.code(), Some(0), "{}", text(&rotated));
}

#[test]
fn every_printed_form_of_a_key_shows_its_row_under_either_version() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let first = send(d, "sub_a");
    assert_eq!(first.len(), 12, "before rotation: 12 hex characters ({first})");
    rotate(d);
    let second = send(d, "sub_b");
    assert!(second.starts_with("v2-") && second.len() == 15, "after rotation: {second}");

    // `key` prints the key each notice lives under: the first still under v1, the second v2.
    let (a, b) = (key(d, "sub_a"), key(d, "sub_b"));
    assert!(a.len() == 64 && a.starts_with(&first), "the v1 key of the notice sent before: {a}");
    assert!(b.len() == 59 && b.starts_with(&second), "the v2 key of the notice sent after: {b}");

    // Each printed form, with and without its `v2-`, prefix or whole (and in capitals).
    for arg in [second.as_str(), &second[3..], b.as_str(), &b[3..], &second.to_uppercase()] {
        shows(d, arg, &b);
    }
    for arg in [first.as_str(), a.as_str()] {
        shows(d, arg, &a);
    }

    // `evidence` prints the key as `send` does, and `show` takes that too.
    let ev = noticectl(
        d,
        &[
            "evidence",
            "--subscription-id",
            "sub_b",
            "--period-start",
            "2027-06-01",
            "--kinds",
            "renewal_notice_t72",
        ],
    );
    let t = text(&ev);
    assert_eq!(ev.status.code(), Some(0), "{t}");
    assert!(t.contains(&format!("key {second} ")), "evidence prints {second}: {t}");

    // The version must match when it is given.
    let v3 = noticectl(d, &["show", &format!("v3-{}", &second[3..])]);
    assert_eq!(v3.status.code(), Some(1), "nothing found: {}", text(&v3));
    assert!(text(&v3).contains("no ledger row has a key starting with v3-"), "{}", text(&v3));

    // Nothing found is exit 1 (docs/operations.md, *Exit codes*), for a prefix as for a whole key.
    let none = ["000000000000", "111111111111"]
        .into_iter()
        .find(|p| !a.starts_with(p) && !b[3..].starts_with(p))
        .unwrap_or("222222222222");
    for arg in [none.to_owned(), format!("v2-{none}")] {
        let out = noticectl(d, &["show", &arg]);
        assert_eq!(out.status.code(), Some(1), "{arg}: {}", text(&out));
        assert!(
            text(&out).contains(&format!("no ledger row has a key starting with {arg}")),
            "{}",
            text(&out)
        );
    }
    for arg in ["0".repeat(64), format!("v2-{}", "0".repeat(56))] {
        let out = noticectl(d, &["show", &arg]);
        assert_eq!(out.status.code(), Some(1), "{arg}: {}", text(&out));
        assert!(text(&out).contains(&format!("{arg}: no ledger row")), "{}", text(&out));
    }
}

#[test]
fn quarantine_takes_an_open_claims_later_version_key_as_printed() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    send(d, "sub_a");
    rotate(d);
    // A claim under v2 that never got its commit (the sender died after claiming).
    let k = key(d, "sub_c");
    assert!(k.starts_with("v2-"), "a notice the ledger has not seen is keyed under v2: {k}");
    let parsed = notice_ledger::Job::parse(&job("sub_c"), &notice_texts::Icu).expect("job");
    let claim_key = notice_ledger::NoticeKey::parse(&k).expect("a v2 key");
    let an_hour_ago = chrono::Utc::now() - chrono::Duration::hours(1);
    tokio::runtime::Runtime::new().expect("runtime").block_on(async {
        use notice_ledger::ledger::ClaimLedger;
        let ledger = notice_sqlite::SqliteLedger::open(d.join(".notices/ledger.db")).expect("ledger");
        let req = notice_ledger::ledger::ClaimRequest::for_job(&parsed, claim_key, an_hour_ago);
        ledger.claim(&req).await.expect("claim");
    });

    let printed = &k[..15];
    let dry = noticectl(d, &["quarantine", "release", &printed[3..], "--reason", "x", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(0), "the prefix without its v2-: {}", text(&dry));
    assert!(text(&dry).contains(&format!("would release {k}")), "{}", text(&dry));

    let resolved = noticectl(d, &["quarantine", "resolve", printed, "--sent", "--message-id", "m-7"]);
    assert_eq!(resolved.status.code(), Some(0), "the printed prefix: {}", text(&resolved));
    assert!(text(&resolved).contains(&format!("resolved {k} as sent")), "{}", text(&resolved));
    shows(d, printed, &k);
}
