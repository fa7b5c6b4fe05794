//! `noticectl withdraw` as an operator runs it: the real binary on a real state directory
//! (SQLite ledger, file outbox), then `send` and `replay` of the same notices.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use chrono::Utc;
use notice_ledger::ledger::{ClaimLedger, ClaimOutcome, ClaimRequest, RowReader, RowState};
use notice_ledger::{Job, NoticeKey, NoticeSecret};
use notice_sqlite::SqliteLedger;

const NOW: &str = "2026-12-02T12:00:00Z";
const SECRET: &str = "withdraw-test-secret-0123";
const KIND: &str = "renewal_notice_t72";

fn job(sub: &str) -> String {
    serde_json::json!({"subscription_id": sub, "period_start": "2026-12-01", "kind": KIND,
        "email": format!("{sub}@example.com"), "charge_at": "2026-12-04T09:00:00Z"})
    .to_string()
}

fn identity(sub: &str) -> serde_json::Value {
    serde_json::json!({"subscription_id": sub, "period_start": "2026-12-01", "kind": KIND})
}

fn key(sub: &str) -> NoticeKey {
    Job::parse(&job(sub), &notice_texts::Icu).unwrap().key(&NoticeSecret::new(SECRET).unwrap())
}

/// A state directory whose local secret is [`SECRET`], so the test derives the CLI's keys.
fn state() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".notices")).unwrap();
    std::fs::write(dir.path().join(".notices/secret"), SECRET).unwrap();
    dir
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noticectl"));
    cmd.env("NOTICE_OPERATOR", "ops-test");
    cmd.current_dir(dir)
        .env_remove("NOTICE_KEY_SECRET")
        .env_remove("NOTICE_KEY_SECRET_ARN")
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_STATE_DIR")
        .env_remove("NOTICE_MODE")
        .env_remove("NOTICE_QUEUE_URL")
        .env("USER", "ops-test")
        .args(args);
    cmd
}

fn noticectl(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).stdin(Stdio::null()).output().expect("run noticectl")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn withdraw_one(dir: &Path, sub: &str, extra: &[&str]) -> Output {
    let mut args = vec!["withdraw", "--subscription-id", sub, "--period-start", "2026-12-01", "--kind", KIND];
    args.extend_from_slice(extra);
    noticectl(dir, &args)
}

fn eml_count(dir: &Path) -> usize {
    match std::fs::read_dir(dir.join(".notices/outbox")) {
        Ok(entries) => entries
            .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "eml")))
            .count(),
        Err(_) => 0,
    }
}

fn ledger(dir: &Path) -> SqliteLedger {
    SqliteLedger::open(dir.join(".notices/ledger.db")).unwrap()
}

fn row_state(dir: &Path, sub: &str) -> Option<RowState> {
    let ledger = ledger(dir);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(ledger.get(&key(sub))).unwrap().map(|r| r.state)
}

/// Sends `subs`' jobs through `noticectl send` at [`NOW`] (inside their window).
fn send(dir: &Path, subs: &[&str]) -> Output {
    let lines: Vec<String> = subs.iter().map(|s| job(s)).collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n")).unwrap();
    noticectl(dir, &["send", "jobs.jsonl", "--now", NOW])
}

#[test]
fn a_withdrawn_notice_is_suppressed_when_its_job_comes_and_nothing_is_sent() {
    let dir = state();
    let out = withdraw_one(dir.path(), "sub_w", &["--reason", "customer cancelled", "--by", "ada", "--yes"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let printed = text(&out);
    assert!(printed.contains(&format!("notice {}", key("sub_w"))), "{printed}");
    assert!(printed.contains("would withdraw: no ledger row yet"), "{printed}");
    assert!(printed.contains("withdrawn") && printed.contains("by ada"), "{printed}");
    assert!(!printed.contains(SECRET), "the secret is never printed");

    let row = {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(ledger(dir.path()).get(&key("sub_w"))).unwrap().unwrap()
    };
    assert_eq!((row.state, row.origin.as_str()), (RowState::Withdrawn, "operator"));
    let detail = row.detail.unwrap_or_default();
    assert!(detail.contains("withdrawn by ada") && detail.contains("customer cancelled"), "{detail}");

    let sent = send(dir.path(), &["sub_w", "sub_w"]);
    let printed = text(&sent);
    assert_eq!(sent.status.code(), Some(0), "{printed}");
    assert!(printed.contains("2 job(s): 2 suppressed"), "{printed}");
    assert!(printed.contains("already withdrawn"), "{printed}");
    assert_eq!(eml_count(dir.path()), 0, "nothing in the outbox");
    assert_eq!(row_state(dir.path(), "sub_w"), Some(RowState::Withdrawn));

    let again = withdraw_one(dir.path(), "sub_w", &["--yes"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(text(&again).contains("already withdrawn since"), "{}", text(&again));
}

#[test]
fn a_sent_notice_is_too_late_to_withdraw_exit_1_and_stays_sent() {
    let dir = state();
    let sent = send(dir.path(), &["sub_s"]);
    assert_eq!(eml_count(dir.path()), 1, "{}", text(&sent));

    for extra in [&["--dry-run"][..], &["--yes"][..]] {
        let out = withdraw_one(dir.path(), "sub_s", extra);
        let printed = text(&out);
        assert_eq!(out.status.code(), Some(1), "too late is exit 1 ({extra:?}): {printed}");
        assert!(printed.contains("too late: the notice is sent since"), "{printed}");
        assert!(printed.contains("tell its producer"), "{printed}");
    }
    assert_eq!(row_state(dir.path(), "sub_s"), Some(RowState::Sent));
    assert_eq!(eml_count(dir.path()), 1);
}

#[test]
fn a_dry_run_writes_nothing_and_says_what_would_happen() {
    let dir = state();
    let out = withdraw_one(dir.path(), "sub_d", &["--dry-run"]);
    let printed = text(&out);
    assert_eq!(out.status.code(), Some(0), "{printed}");
    assert!(printed.contains("would withdraw") && printed.contains("dry run: nothing written"), "{printed}");
    assert_eq!(row_state(dir.path(), "sub_d"), None, "a dry run leaves no row");

    let lines = [identity("sub_d"), identity("sub_e")].map(|v| v.to_string());
    std::fs::write(dir.path().join("w.jsonl"), lines.join("\n")).unwrap();
    let out = noticectl(dir.path(), &["withdraw", "--from", "w.jsonl", "--dry-run"]);
    let printed = text(&out);
    assert_eq!(out.status.code(), Some(0), "{printed}");
    assert!(printed.contains("would withdraw          2"), "{printed}");
    assert!(printed.contains("dry run: nothing written"), "{printed}");
    assert_eq!((row_state(dir.path(), "sub_d"), row_state(dir.path(), "sub_e")), (None, None));
}

#[test]
fn a_refused_confirmation_writes_nothing() {
    let dir = state();
    // No terminal: the prompt refuses rather than block (only --yes skips it).
    let mut piped = command(
        dir.path(),
        &["withdraw", "--subscription-id", "sub_n", "--period-start", "2026-12-01", "--kind", KIND],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    {
        use std::io::Write;
        piped.stdin.take().unwrap().write_all(b"n\n").unwrap();
    }
    let out = piped.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "a refused confirmation is a safety stop: {}", text(&out));
    assert!(text(&out).contains("refusing without confirmation"), "{}", text(&out));
    assert_eq!(row_state(dir.path(), "sub_n"), None);

    // On a terminal (util-linux `script` gives it one), answering "n" declines: exit 3.
    let bin = env!("CARGO_BIN_EXE_noticectl");
    let inner = format!("{bin} withdraw --subscription-id sub_n --period-start 2026-12-01 --kind {KIND}");
    let Ok(mut tty) = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .current_dir(dir.path())
        .env("NOTICE_OPERATOR", "ops-test")
        .env_remove("NOTICE_KEY_SECRET")
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_STATE_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("`script` is not installed: the terminal half of this test is skipped");
        return;
    };
    {
        use std::io::Write;
        tty.stdin.take().unwrap().write_all(b"n\n").unwrap();
    }
    let out = tty.wait_with_output().unwrap();
    let printed = text(&out);
    assert_eq!(out.status.code(), Some(3), "{printed}");
    assert!(printed.contains("Type 'yes' to continue") && printed.contains("nothing withdrawn"), "{printed}");
    assert_eq!(row_state(dir.path(), "sub_n"), None, "declined: nothing written");
}

#[tokio::test]
async fn a_file_of_withdraws_counts_every_state_names_a_bad_line_and_lists_the_too_late() {
    let dir = state();
    // sub_sent sent; sub_claim an open claim; sub_rel a released claim; sub_late missed its
    // window; sub_gone already withdrawn; sub_new1 / sub_new2 never seen.
    let sent = send(dir.path(), &["sub_sent"]);
    assert_eq!(eml_count(dir.path()), 1, "{}", text(&sent));
    assert_eq!(withdraw_one(dir.path(), "sub_gone", &["--yes"]).status.code(), Some(0));
    {
        let ledger = ledger(dir.path());
        let at = Utc::now();
        let req = |sub: &str| {
            ClaimRequest::for_job(&Job::parse(&job(sub), &notice_texts::Icu).unwrap(), key(sub), at)
        };
        assert!(matches!(ledger.claim(&req("sub_claim")).await.unwrap(), ClaimOutcome::Minted(_)));
        let ClaimOutcome::Minted(claim) = ledger.claim(&req("sub_rel")).await.unwrap() else {
            panic!("claim sub_rel")
        };
        ledger.release(&claim, "throttled", at).await.unwrap();
        assert!(ledger.record_missed(&req("sub_late"), "window closed").await.unwrap().is_none());
    }
    let mut lines: Vec<String> = ["sub_sent", "sub_claim", "sub_rel", "sub_late", "sub_gone", "sub_new1"]
        .iter()
        .map(|s| identity(s).to_string())
        .collect();
    lines.push(
        r#"{"subscription_id":"sub_bad","period_start":"December","kind":"renewal_notice_t72"}"#.into(),
    );
    lines.push(identity("sub_new1").to_string()); // repeated
    let mut with_action = identity("sub_new2");
    with_action["action"] = "withdraw".into();
    with_action["reason"] = "plan changed".into();
    with_action["email"] = "ignored@example.com".into();
    lines.push(with_action.to_string());
    std::fs::write(dir.path().join("w.jsonl"), lines.join("\n")).unwrap();

    let dry = noticectl(dir.path(), &["withdraw", "--from", "w.jsonl", "--dry-run"]);
    let printed = text(&dry);
    assert_eq!(dry.status.code(), Some(1), "a bad line and too-late keys: exit 1\n{printed}");
    for want in [
        "withdraw census: 9 line(s), 7 distinct notice(s)",
        "would withdraw          3  (1 over a released claim)",
        "already withdrawn       1",
        "too late                2",
        "not needed              1  (missed 1)",
        "invalid lines           1",
        "repeated in file        1",
        "line 7: field `period_start`",
        "dry run: nothing written",
    ] {
        assert!(printed.contains(want), "missing {want:?}\n{printed}");
    }
    assert!(printed.contains(&format!("line 1     {}  sent since", key("sub_sent").prefix())), "{printed}");
    assert!(
        printed.contains(&format!("line 2     {}  claimed since", key("sub_claim").prefix())),
        "{printed}"
    );
    assert_eq!(ledger(dir.path()).get(&key("sub_new1")).await.unwrap(), None, "the dry run wrote nothing");
    assert_eq!(
        ledger(dir.path()).get(&key("sub_rel")).await.unwrap().map(|r| r.state),
        Some(RowState::Released)
    );

    let run = noticectl(dir.path(), &["withdraw", "--from", "w.jsonl", "--yes", "--by", "ops-bulk"]);
    let printed = text(&run);
    assert_eq!(run.status.code(), Some(1), "{printed}");
    for want in [
        "withdraw done by ops-bulk:",
        "withdrawn               3  (1 over a released claim)",
        "already withdrawn       1",
        "too late                2",
        "invalid lines           1",
    ] {
        assert!(printed.contains(want), "missing {want:?}\n{printed}");
    }
    assert!(printed.contains(&key("sub_sent").prefix().to_string()), "{printed}");
    for (sub, state) in [
        ("sub_new1", RowState::Withdrawn),
        ("sub_new2", RowState::Withdrawn),
        ("sub_rel", RowState::Withdrawn),
        ("sub_gone", RowState::Withdrawn),
        ("sub_sent", RowState::Sent),
        ("sub_claim", RowState::Claimed),
        ("sub_late", RowState::Missed),
    ] {
        assert_eq!(ledger(dir.path()).get(&key(sub)).await.unwrap().map(|r| r.state), Some(state), "{sub}");
    }
    let tomb = ledger(dir.path()).get(&key("sub_new2")).await.unwrap().unwrap();
    assert!(tomb.detail.unwrap_or_default().contains("by ops-bulk"), "who is recorded");

    // Everything withdrawable is withdrawn now: a second run writes nothing, still says too late.
    let again = noticectl(dir.path(), &["withdraw", "--from", "w.jsonl"]);
    let printed = text(&again);
    assert!(
        printed.contains("already withdrawn       4") && printed.contains("nothing to write"),
        "{printed}"
    );
}

#[test]
fn replay_counts_a_withdrawn_key_and_never_enqueues_it() {
    let dir = state();
    assert_eq!(withdraw_one(dir.path(), "sub_w", &["--yes"]).status.code(), Some(0));
    std::fs::write(dir.path().join("backlog.jsonl"), [job("sub_w"), job("sub_fresh")].join("\n")).unwrap();
    let dry = noticectl(dir.path(), &["replay", "--from", "backlog.jsonl", "--dry-run"]);
    let printed = text(&dry);
    assert!(dry.status.success(), "{printed}");
    assert!(
        printed.contains("2 job(s) · 0 invalid · 0 repeated in file · in ledger: withdrawn 1 · new: 1"),
        "{printed}"
    );
    assert!(printed.contains("withdrawn 1: never enqueued"), "{printed}");
    assert!(printed.contains("1 new of 2 would be enqueued"), "{printed}");

    // Only the withdrawn one: nothing is new, a stop verdict, so nothing is enqueued (no queue is
    // even needed) — exit 3, in the dry run as in the real one.
    std::fs::write(dir.path().join("only.jsonl"), job("sub_w")).unwrap();
    let dry = noticectl(dir.path(), &["replay", "--from", "only.jsonl", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(3), "{}", text(&dry));
    let run = noticectl(dir.path(), &["replay", "--from", "only.jsonl", "--yes"]);
    let printed = text(&run);
    assert_eq!(run.status.code(), Some(3), "{printed}");
    assert!(printed.contains("0 new of 1: stop"), "{printed}");
    assert!(!printed.contains("enqueued 1"), "{printed}");
}

#[test]
fn bad_identity_arguments_name_the_flag_and_a_remote_ledger_needs_the_deployment_secret() {
    let dir = state();
    let out = noticectl(
        dir.path(),
        &["withdraw", "--subscription-id", "s", "--period-start", "Dec 1", "--kind", KIND, "--yes"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--period-start must be a date"), "{}", text(&out));
    let out = withdraw_one(dir.path(), "sub_r", &["--reason", "two\nlines", "--yes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--reason"), "{}", text(&out));

    let out = withdraw_one(dir.path(), "sub_r", &["--ledger", "dynamodb:notices", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("needs the deployment's key secret"), "{}", text(&out));
    assert_eq!(row_state(dir.path(), "sub_r"), None);
}

/// A withdraw is evidence: it names who acted. With no `--operator`, no NOTICE_OPERATOR and no
/// $USER it is refused before anything is opened; NOTICE_OPERATOR names the actor otherwise.
#[test]
fn a_withdraw_without_an_operator_is_refused_and_notice_operator_names_one() {
    let dir = tempfile::tempdir().unwrap();
    let args =
        ["withdraw", "--subscription-id", "sub_o", "--period-start", "2026-12-01", "--kind", KIND, "--yes"];
    let out = command(dir.path(), &args)
        .env_remove("NOTICE_OPERATOR")
        .env_remove("USER")
        .stdin(Stdio::null())
        .output()
        .expect("run noticectl");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--operator NAME") && text(&out).contains("NOTICE_OPERATOR"),
        "{}",
        text(&out)
    );
    assert!(!dir.path().join(".notices").exists(), "a refused withdraw leaves no state behind");

    let out = command(dir.path(), &args)
        .env("NOTICE_OPERATOR", "on-call-robot")
        .env_remove("USER")
        .stdin(Stdio::null())
        .output()
        .expect("run noticectl");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("by on-call-robot"), "{}", text(&out));

    let out = command(dir.path(), &[&args[..], &["--operator", "ada\u{7}"]].concat())
        .stdin(Stdio::null())
        .output()
        .expect("run noticectl");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--operator"), "{}", text(&out));
}
