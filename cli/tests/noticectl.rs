//! `noticectl` as a user runs it: a real binary, a real state directory, real files.

use notice_ledger::ledger::ClaimLedger;
use std::path::Path;
use std::process::{Command, Output};

const NOW: &str = "2026-12-02T12:00:00Z";

fn job(sub: &str, revision: u64, charge_at: &str) -> String {
    serde_json::json!({"subscription_id": sub, "period_start": "2026-12-01", "kind": "renewal_notice_t72",
        "revision": revision, "email": format!("{sub}@example.com"), "charge_at": charge_at,
        "template_data": {"plan_name": "Coffee Box", "amount": {"minor": 2900, "currency": "USD"}}})
    .to_string()
}

fn noticectl(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir)
        .env_remove("NOTICE_KEY_SECRET")
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_STATE_DIR")
        .env_remove("NOTICE_MODE")
        .args(args)
        .output()
        .expect("run noticectl")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn eml_count(dir: &Path) -> usize {
    match std::fs::read_dir(dir.join(".notices/outbox")) {
        Ok(entries) => entries
            .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "eml")))
            .count(),
        Err(_) => 0,
    }
}

#[test]
fn send_twice_in_an_empty_folder_sends_each_distinct_notice_once() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        job("sub_1", 0, "2026-12-04T09:00:00Z"),
        job("sub_2", 0, "2026-12-04T09:00:00Z"),
        job("sub_1", 0, "2026-12-04T09:00:00Z"), // duplicate
        job("sub_1", 1, "2026-12-04T09:00:00Z"), // corrected notice
        "{this is not json".to_owned(),
        job("sub_3", 0, "2027-03-01T09:00:00Z"), // early
        job("sub_4", 0, "2026-12-02T20:00:00Z"), // late
        job("sub|5", 0, "2026-12-04T09:00:00Z"), // bad identity
    ];
    std::fs::write(dir.path().join("renewals.jsonl"), lines.join("\n")).unwrap();

    let first = noticectl(dir.path(), &["send", "renewals.jsonl", "--now", NOW]);
    let (out, err) = text(&first);
    assert_eq!(first.status.code(), Some(1), "invalid input makes the run fail\n{out}\n{err}");
    assert!(err.contains("created a random local secret"), "{err}");
    assert_eq!(eml_count(dir.path()), 3, "sub_1 r0, sub_2 r0, sub_1 r1\n{out}");
    assert!(
        out.lines().any(|l| l.starts_with("line 5")
            && l.contains("invalid")
            && l.contains("line 5 is not valid JSON")),
        "{out}"
    );
    assert!(out.lines().any(|l| l.starts_with("line 8") && l.contains("subscription_id")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("line 6") && l.contains("deferred")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("line 7") && l.contains("missed")), "{out}");
    assert!(out.contains("8 job(s):"), "{out}");
    let secret = dir.path().join(".notices/secret");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777, 0o600);
    }

    let second = noticectl(dir.path(), &["send", "renewals.jsonl", "--now", NOW]);
    let (out, err) = text(&second);
    assert_eq!(eml_count(dir.path()), 3, "second run sends nothing\n{out}");
    assert_eq!(
        out.lines().filter(|l| l.contains("suppressed") && l.contains("already sent")).count(),
        4,
        "{out}"
    );
    assert!(!err.contains("created a random local secret"));
    assert!(!err.contains("panicked") && !text(&first).1.contains("panicked"));
}

/// Local runs share the domain's bucket through the SQLite file: two processes together send no
/// more than the burst, and a rerun suppresses what went out without needing a token.
#[test]
fn two_processes_on_one_ledger_file_share_the_domains_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..30).map(|i| job(&format!("sub_{i}"), 0, "2026-12-04T09:00:00Z")).collect();
    std::fs::write(dir.path().join("jobs.jsonl"), lines.join("\n")).unwrap();
    // Each process its own half: two processes that both find a key free may both take a token
    // for it (one claim wins), which would make the count below depend on timing.
    std::fs::write(dir.path().join("a.jsonl"), lines[..15].join("\n")).unwrap();
    std::fs::write(dir.path().join("b.jsonl"), lines[15..].join("\n")).unwrap();
    assert!(noticectl(
        dir.path(),
        &["key", "--subscription-id", "x", "--period-start", "2026-12-01", "--kind", "k"]
    )
    .status
    .success());
    let spawn = |file: &str| {
        Command::new(env!("CARGO_BIN_EXE_noticectl"))
            .env("NOTICE_OPERATOR", "ops-test")
            .current_dir(dir.path())
            .env_remove("NOTICE_KEY_SECRET")
            .env("NOTICE_RATE_LIMITS", r#"{"default":{"per_second":0.001,"burst":5}}"#)
            .args(["send", file, "--now", NOW, "--concurrency", "8"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("a.jsonl"), spawn("b.jsonl"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    // A process whose jobs the other one still held in flight says so and exits 1: neither sent
    // nor decided by it. Nothing else may fail.
    for o in [&a, &b] {
        let (out, err) = text(o);
        let held = out.lines().filter(|l| l.starts_with("line ") && l.contains(" in_flight ")).count();
        let limited = out.lines().filter(|l| l.starts_with("line ") && l.contains(" rate_limited ")).count();
        match o.status.code() {
            Some(0) => assert_eq!(held + limited, 0, "{out}"),
            // Held jobs, or jobs left over by the shared rate limit: both need attention.
            Some(1) => assert!(
                (held > 0 && err.contains("still in flight")) || (held == 0 && limited > 0),
                "{out}\n{err}"
            ),
            other => panic!("exit {other:?}\n{out}\n{err}"),
        }
    }
    let count = |o: &Output, what: &str| {
        text(o).0.lines().filter(|l| l.starts_with("line ") && l.contains(what)).count()
    };
    assert_eq!(count(&a, " sent ") + count(&b, " sent "), 5, "one burst between both processes");
    assert_eq!(eml_count(dir.path()), 5);
    assert!(text(&a).1.contains("rate other domains 0.001/s burst 5 each"), "{}", text(&a).1);
    let again = spawn("jobs.jsonl").wait_with_output().unwrap();
    assert_eq!(count(&again, "already sent"), 5, "sent notices are suppressed with an empty bucket");
    assert_eq!(count(&again, "rate_limited"), 25);
}

#[test]
fn two_processes_on_one_ledger_file_send_each_notice_once() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..150).map(|i| job(&format!("sub_{i}"), 0, "2026-12-04T09:00:00Z")).collect();
    std::fs::write(dir.path().join("jobs.jsonl"), lines.join("\n")).unwrap();
    // Create the secret first so both processes use the same one.
    assert!(noticectl(
        dir.path(),
        &["key", "--subscription-id", "x", "--period-start", "2026-12-01", "--kind", "k"]
    )
    .status
    .success());
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_noticectl"))
            .env("NOTICE_OPERATOR", "ops-test")
            .current_dir(dir.path())
            .env_remove("NOTICE_KEY_SECRET")
            // About the claim race, not pacing: 150 jobs to one domain exceed the default bucket.
            .env("NOTICE_RATE_LIMITS", "off")
            .args(["send", "jobs.jsonl", "--now", NOW, "--concurrency", "16"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    // A process whose jobs the other one still held in flight says so and exits 1: neither sent
    // nor decided by it. Nothing else may fail.
    for o in [&a, &b] {
        let (out, err) = text(o);
        let held = out.lines().filter(|l| l.starts_with("line ") && l.contains(" in_flight ")).count();
        let limited = out.lines().filter(|l| l.starts_with("line ") && l.contains(" rate_limited ")).count();
        match o.status.code() {
            Some(0) => assert_eq!(held + limited, 0, "{out}"),
            // Held jobs, or jobs left over by the shared rate limit: both need attention.
            Some(1) => assert!(
                (held > 0 && err.contains("still in flight")) || (held == 0 && limited > 0),
                "{out}\n{err}"
            ),
            other => panic!("exit {other:?}\n{out}\n{err}"),
        }
    }
    let sent = |o: &Output| text(o).0.lines().filter(|l| l.contains(" sent ")).count();
    assert_eq!(sent(&a) + sent(&b), 150, "every notice sent by exactly one process");
    assert_eq!(eml_count(dir.path()), 150);
}

#[test]
fn quarantine_release_is_refused_without_confirmation_and_audited_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join(".notices");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(state.join("secret"), "quarantine-test-secret").unwrap();
    // A worker claimed the notice and died: an open claim, older than any cut-off.
    let body = job("sub_q", 0, "2026-12-04T09:00:00Z");
    let parsed = notice_ledger::Job::parse(&body, &notice_texts::Icu).unwrap();
    let key = parsed.key(&notice_ledger::NoticeSecret::new("quarantine-test-secret").unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        use notice_ledger::ledger::ClaimRequest;
        let ledger = notice_sqlite::SqliteLedger::open(state.join("ledger.db")).unwrap();
        // Two hours before the pinned `--now` the send below runs at (never the wall clock: a
        // claim stamped after that instant would read as young, held by a sender still running).
        let at = NOW.parse::<chrono::DateTime<chrono::Utc>>().unwrap() - chrono::Duration::hours(2);
        ledger.claim(&ClaimRequest::for_job(&parsed, key.clone(), at)).await.unwrap();
    });
    std::fs::write(dir.path().join("one.jsonl"), &body).unwrap();

    let list = noticectl(dir.path(), &["quarantine", "list", "--older-than", "15m"]);
    let (out, err) = text(&list);
    assert!(out.contains(key.as_str()) && out.contains("sub_q"), "{out}");
    assert!(err.contains("1 quarantined claim(s)"), "{err}");

    let resend = noticectl(dir.path(), &["send", "one.jsonl", "--now", NOW]);
    assert!(text(&resend).0.contains("claimed elsewhere"), "quarantined claims are never auto-released");
    assert_eq!(resend.status.code(), Some(1), "a quarantined claim needs attention: {:?}", text(&resend));
    assert!(text(&resend).0.contains("needs attention (1):"), "listed at the end: {:?}", text(&resend));

    let refused = noticectl(
        dir.path(),
        &["quarantine", "release", key.as_str(), "--reason", "checked SES: never sent"],
    );
    assert_eq!(refused.status.code(), Some(3), "a refused confirmation is a safety stop");
    assert!(text(&refused).1.contains("pass --yes"), "{:?}", text(&refused));

    let dry = noticectl(dir.path(), &["quarantine", "release", key.as_str(), "--reason", "x", "--dry-run"]);
    assert!(text(&dry).0.contains("nothing changed"));

    let released = noticectl(
        dir.path(),
        &[
            "quarantine",
            "release",
            key.as_str(),
            "--reason",
            "checked SES: never sent",
            "--by",
            "oncall-ada",
            "--yes",
        ],
    );
    assert!(released.status.success(), "{:?}", text(&released));

    let again = noticectl(dir.path(), &["quarantine", "release", key.as_str(), "--reason", "again", "--yes"]);
    assert_eq!(again.status.code(), Some(2), "a released row is no longer an open claim");

    let sent = noticectl(dir.path(), &["send", "one.jsonl", "--now", NOW]);
    assert!(text(&sent).0.contains(" sent "), "{:?}", text(&sent));
    assert_eq!(eml_count(dir.path()), 1);

    let resolve =
        noticectl(dir.path(), &["quarantine", "resolve", key.as_str(), "--sent", "--message-id", "m-1"]);
    assert_eq!(resolve.status.code(), Some(2), "a sent row cannot be resolved again");
}

/// A fresh claim on `body`'s notice at `at`, as another process's send in flight leaves it.
fn claim(
    state: &Path,
    secret: &str,
    body: &str,
    at: chrono::DateTime<chrono::Utc>,
) -> notice_ledger::NoticeKey {
    std::fs::create_dir_all(state).unwrap();
    std::fs::write(state.join("secret"), secret).unwrap();
    let parsed = notice_ledger::Job::parse(body, &notice_texts::Icu).unwrap();
    let key = parsed.key(&notice_ledger::NoticeSecret::new(secret).unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ledger = notice_sqlite::SqliteLedger::open(state.join("ledger.db")).unwrap();
        let req = notice_ledger::ledger::ClaimRequest::for_job(&parsed, key.clone(), at);
        ledger.claim(&req).await.unwrap();
    });
    key
}

#[test]
fn now_takes_a_date_a_minute_or_rfc_3339_and_says_which_when_wrong() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("one.jsonl"), job("sub_d", 0, "2026-12-04T09:00:00Z")).unwrap();
    // Midnight UTC on 2 December: 57 h before the charge, inside 72 h → 24 h.
    let date = noticectl(dir.path(), &["send", "one.jsonl", "--now", "2026-12-02"]);
    assert!(date.status.success() && text(&date).0.contains(" sent "), "{:?}", text(&date));
    let minute = noticectl(dir.path(), &["send", "one.jsonl", "--now", "2026-12-02T12:00"]);
    assert!(text(&minute).0.contains("already sent"), "{:?}", text(&minute));
    let bad = noticectl(dir.path(), &["send", "one.jsonl", "--now", "2026-12"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = text(&bad).1;
    assert!(err.contains("YYYY-MM-DD (midnight UTC), YYYY-MM-DDTHH:MM (UTC) or RFC 3339"), "{err}");
}

#[test]
fn send_prints_results_in_input_order_even_when_one_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let held = job("sub_held", 0, "2026-12-04T09:00:00Z");
    claim(&dir.path().join(".notices"), "order-test-secret", &held, NOW.parse().unwrap());
    let lines =
        [held, job("sub_next", 0, "2026-12-04T09:00:00Z"), job("sub_last", 0, "2026-12-04T09:00:00Z")];
    std::fs::write(dir.path().join("jobs.jsonl"), lines.join("\n")).unwrap();
    let out = noticectl(dir.path(), &["send", "jobs.jsonl", "--now", NOW]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "a held job is neither sent nor decided\n{stdout}\n{stderr}");
    let order: Vec<&str> = stdout.lines().filter_map(|l| l.split_whitespace().nth(1)).collect();
    assert_eq!(&order[..3], ["1", "2", "3"], "{stdout}");
    assert!(stdout.lines().next().unwrap().contains("in_flight"), "{stdout}");
    assert!(stdout.lines().last().unwrap().starts_with("3 job(s): 1 in_flight, 2 sent"), "{stdout}");
}

#[test]
fn with_now_every_time_a_send_writes_is_the_pinned_one() {
    let dir = tempfile::tempdir().unwrap();
    let body = job("sub_t", 0, "2026-12-04T09:00:00Z");
    std::fs::create_dir_all(dir.path().join(".notices")).unwrap();
    std::fs::write(dir.path().join(".notices/secret"), "pinned-test-secret").unwrap();
    std::fs::write(dir.path().join("one.jsonl"), &body).unwrap();
    let out = noticectl(dir.path(), &["send", "one.jsonl", "--now", NOW]);
    assert!(out.status.success(), "{:?}", text(&out));
    let key = notice_ledger::Job::parse(&body, &notice_texts::Icu)
        .unwrap()
        .key(&notice_ledger::NoticeSecret::new("pinned-test-secret").unwrap());
    let row = tokio::runtime::Runtime::new().unwrap().block_on(async {
        use notice_ledger::ledger::RowReader;
        let ledger = notice_sqlite::SqliteLedger::open(dir.path().join(".notices/ledger.db")).unwrap();
        ledger.get(&key).await.unwrap().unwrap()
    });
    let now: chrono::DateTime<chrono::Utc> = NOW.parse().unwrap();
    assert_eq!(row.state, notice_ledger::ledger::RowState::Sent);
    assert_eq!((row.claimed_at, row.updated_at), (Some(now), now), "{row:?}");
}

#[test]
fn a_key_prefix_of_twelve_names_an_open_claim_and_a_shorter_one_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let an_hour_ago = chrono::Utc::now() - chrono::Duration::hours(1);
    let key = claim(
        &dir.path().join(".notices"),
        "prefix-test-secret",
        &job("sub_p", 0, "2026-12-04T09:00:00Z"),
        an_hour_ago,
    );
    let prefix = &key.as_str()[..12];

    let dry = noticectl(
        dir.path(),
        &["quarantine", "release", &prefix.to_uppercase(), "--reason", "x", "--dry-run"],
    );
    assert!(dry.status.success(), "{:?}", text(&dry));
    assert!(text(&dry).0.contains(&format!("would release {key}")), "{:?}", text(&dry));

    let short =
        noticectl(dir.path(), &["quarantine", "release", &prefix[..11], "--reason", "x", "--dry-run"]);
    assert_eq!(short.status.code(), Some(2));
    assert!(text(&short).1.contains("a key prefix needs at least 12"), "{:?}", text(&short));

    let other = if prefix.starts_with('0') { "111111111111" } else { "000000000000" };
    let none = noticectl(dir.path(), &["quarantine", "resolve", other, "--sent", "--message-id", "m"]);
    assert_eq!(none.status.code(), Some(1), "nothing found: {:?}", text(&none));
    assert!(text(&none).1.contains("no open claim in sqlite:"), "{:?}", text(&none));
    assert!(text(&none).1.contains(&format!("has a key starting with {other}")), "{:?}", text(&none));

    let resolved = noticectl(dir.path(), &["quarantine", "resolve", prefix, "--sent", "--message-id", "m-7"]);
    assert!(resolved.status.success(), "{:?}", text(&resolved));
    assert!(text(&resolved).0.contains(&format!("resolved {key} as sent")), "{:?}", text(&resolved));

    // `show` finds any row by its prefix (the ledger's operator port), or says there is none.
    let show = noticectl(dir.path(), &["show", prefix]);
    assert!(show.status.success(), "{:?}", text(&show));
    assert!(text(&show).0.contains(&format!("\"notice_key\": \"{key}\"")), "{:?}", text(&show));
    assert!(text(&show).0.contains("\"state\": \"sent\""), "{:?}", text(&show));
    let unknown = noticectl(dir.path(), &["show", other]);
    assert_eq!(unknown.status.code(), Some(1), "nothing found: {:?}", text(&unknown));
    assert!(
        text(&unknown).1.contains(&format!("no ledger row has a key starting with {other}")),
        "{:?}",
        text(&unknown)
    );
    let whole = noticectl(dir.path(), &["show", key.as_str()]);
    assert!(whole.status.success() && text(&whole).0.contains("\"state\": \"sent\""), "{:?}", text(&whole));
}

#[test]
fn replay_counts_withdraws_as_withdraws_not_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let withdraw =
        serde_json::json!({"action": "withdraw", "subscription_id": "sub_w", "period_start": "2026-12-01",
        "kind": "renewal_notice_t72", "reason": "cancelled"})
        .to_string();
    let lines = [job("sub_1", 0, "2026-12-04T09:00:00Z"), withdraw.clone(), withdraw];
    std::fs::write(dir.path().join("backlog.jsonl"), lines.join("\n")).unwrap();
    let out = noticectl(dir.path(), &["replay", "--from", "backlog.jsonl", "--dry-run"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout
            .contains("3 job(s) · 0 invalid · 1 repeated in file · in ledger: none · new: 1 · withdraws: 1"),
        "{stdout}"
    );
    assert!(stdout.contains("1 new of 1 would be enqueued, with 1 withdraw(s)"), "{stdout}");
}
