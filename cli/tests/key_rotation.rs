//! Rotating the key secret (issue 36, item 2) with `noticectl key rotate` and `key retire`, on a
//! local ledger and its local secret: a plan, a dry run, a confirmation; the notice sent before
//! the switch is not sent again after it; a new notice is keyed under the new version; an old
//! version is retired only when nothing can be decided under it any more.

use std::path::Path;
use std::process::{Command, Output};

fn job(sub: &str, charge: &str) -> String {
    serde_json::json!({"subscription_id": sub, "period_start": "2027-06-01", "kind": "renewal_notice_t72",
        "email": format!("{sub}@example.com"), "charge_at": charge})
    .to_string()
}

fn noticectl(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .current_dir(dir)
        .env_remove("NOTICE_KEY_SECRET")
        .env_remove("NOTICE_KEY_SECRET_ARN")
        .env_remove("NOTICE_LEDGER_URL")
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

fn outbox(dir: &Path) -> usize {
    std::fs::read_dir(dir.join(".notices/outbox")).map(|d| d.count()).unwrap_or(0)
}

fn secret(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(".notices/secret")).expect("the local secret")
}

fn send(dir: &Path, body: &str, now: &str) -> Output {
    std::fs::write(dir.join("jobs.jsonl"), format!("{body}\n")).expect("write jobs");
    noticectl(dir, &["send", "jobs.jsonl", "--now", now])
}

fn key(dir: &Path, sub: &str) -> String {
    let out = noticectl(
        dir,
        &["key", "--subscription-id", sub, "--period-start", "2027-06-01", "--kind", "renewal_notice_t72"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn a_rotation_sends_nothing_twice_and_keys_new_notices_under_the_new_version() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let now = "2027-06-02T12:00:00Z";
    let first = send(d, &job("sub_a", "2027-06-04T09:00:00Z"), now);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    assert_eq!(outbox(d), 1);
    let v1_key = key(d, "sub_a");
    assert_eq!(v1_key.len(), 64, "before rotation: today's keys");
    let before = secret(d);

    let plan = noticectl(d, &["key", "rotate", "--dry-run"]);
    let t = text(&plan);
    assert_eq!(plan.status.code(), Some(0), "{t}");
    assert!(
        t.contains("now:   v1 current")
            && t.contains("after: v2 current, v1 active")
            && t.contains("dry run"),
        "{t}"
    );
    assert_eq!(secret(d), before, "a dry run writes nothing");
    let unconfirmed = noticectl(d, &["key", "rotate"]);
    assert_eq!(unconfirmed.status.code(), Some(3), "{}", text(&unconfirmed));
    assert_eq!(secret(d), before, "nothing without a confirmation");

    let rotated = noticectl(d, &["key", "rotate", "--yes"]);
    let t = text(&rotated);
    assert_eq!(rotated.status.code(), Some(0), "{t}");
    assert!(t.contains("rotated: v2 is current"), "{t}");
    assert!(!t.contains(before.trim()), "the secret is never printed: {t}");
    let ring = secret(d);
    assert!(ring.contains(r#""current":"v2""#) && ring.contains(before.trim()), "v1 is kept: {ring}");

    // The notice sent under v1 is not sent again; a new one is keyed under v2.
    let again = send(d, &job("sub_a", "2027-06-04T09:00:00Z"), now);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert_eq!(outbox(d), 1, "the replay after the switch is suppressed: {}", text(&again));
    let new = send(d, &job("sub_b", "2027-06-04T09:00:00Z"), now);
    assert_eq!(new.status.code(), Some(0), "{}", text(&new));
    assert_eq!(outbox(d), 2);
    assert!(key(d, "sub_b").starts_with("v2-"), "a new notice is keyed under v2");
    assert!(text(&new).contains("v2-"), "{}", text(&new));

    // Evidence finds both, whichever version keyed them.
    for sub in ["sub_a", "sub_b"] {
        let ev = noticectl(
            d,
            &[
                "evidence",
                "--subscription-id",
                sub,
                "--period-start",
                "2027-06-01",
                "--kinds",
                "renewal_notice_t72",
            ],
        );
        assert!(text(&ev).contains("sent"), "{sub}: {}", text(&ev));
    }

    // v1 still holds a notice whose charge is ahead: not retirable, nothing written.
    let ring = secret(d);
    let blocked = noticectl(d, &["key", "retire", "v1", "--yes"]);
    let t = text(&blocked);
    assert_eq!(blocked.status.code(), Some(1), "{t}");
    assert!(t.contains("not retirable yet") && t.contains("charge still ahead: 1"), "{t}");
    assert_eq!(secret(d), ring);
    let current = noticectl(d, &["key", "retire", "v2"]);
    assert_eq!(current.status.code(), Some(2), "{}", text(&current));
    assert!(text(&current).contains("not an older active version"), "{}", text(&current));
}

#[test]
fn a_version_with_nothing_left_under_it_is_retired_and_stays_for_evidence() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    // A notice whose charge has passed (today is after 2026-10-04).
    let past = serde_json::json!({"subscription_id": "sub_old", "period_start": "2026-10-01",
        "kind": "renewal_notice_t72", "email": "old@example.com", "charge_at": "2026-10-04T09:00:00Z"})
    .to_string();
    let sent = send(d, &past, "2026-10-02T12:00:00Z");
    assert_eq!(sent.status.code(), Some(0), "{}", text(&sent));
    assert_eq!(noticectl(d, &["key", "rotate", "--yes"]).status.code(), Some(0));
    let dry = noticectl(d, &["key", "retire", "v1", "--dry-run"]);
    let t = text(&dry);
    assert_eq!(dry.status.code(), Some(0), "{t}");
    assert!(t.contains("retirable") && t.contains("rows under v1: 1") && t.contains("dry run"), "{t}");
    let retired = noticectl(d, &["key", "retire", "v1", "--yes"]);
    assert_eq!(retired.status.code(), Some(0), "{}", text(&retired));
    let ring = secret(d);
    assert!(ring.contains(r#""retired":["v1"]"#), "{ring}");
    let ev = noticectl(
        d,
        &[
            "evidence",
            "--subscription-id",
            "sub_old",
            "--period-start",
            "2026-10-01",
            "--kinds",
            "renewal_notice_t72",
        ],
    );
    assert!(text(&ev).contains("sent"), "a retired version's notice is still found: {}", text(&ev));
}
