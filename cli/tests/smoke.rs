//! `noticectl smoke` against a stack on the emulator: its outputs read by stack name, its jobs
//! run by the real sender and its SES events (the mailbox simulator's answers, from a stand-in
//! for SES's event feed) by the real reconciler, as AWS would run them (the harness's driver).
//! A healthy stack passes every check; a stack whose events never arrive fails the checks that
//! need them, naming what never came; a missing stack and a declined confirmation change nothing.

use std::path::Path;
use std::process::Output;

use notice_e2e::smoke_stack::SmokeStack;
use notice_ledger::ledger::{RowReader, RowState};
use notice_ledger::{Job, NoticeSecret};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/notices-de");

/// Runs `noticectl smoke ARGS` against the stack while the driver plays AWS around the functions
/// (with SES's event feed when `events`); with `None`, nothing consumes the queue.
async fn smoke(stack: &SmokeStack, events: Option<bool>, args: &[&str]) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_noticectl"));
    command
        .arg("smoke")
        .args(["--stack", &stack.name])
        .args(args)
        .current_dir(dir.path())
        .env_remove("NOTICE_KEY_SECRET")
        .env_remove("NOTICE_KEY_SECRET_ARN")
        .env_remove("NOTICE_LEDGER_URL")
        .stdin(std::process::Stdio::null());
    for (k, v) in stack.env.moto.env_vars() {
        command.env(k, v);
    }
    let child = command.output();
    let Some(events) = events else { return child.await.expect("noticectl runs") };
    let mut driver = stack.driver().await;
    driver.ses_events = events;
    tokio::select! {
        out = child => out.expect("noticectl runs"),
        () = driver.run(&stack.env.moto) => unreachable!("the driver runs until dropped"),
    }
}

fn text(out: &Output) -> String {
    format!("{}\n--- stderr:\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The ledger row of the run's probe `name`, from the job the run printed in its plan line.
async fn row_state(
    stack: &SmokeStack,
    run: &str,
    name: &str,
    kind: &str,
    charge_day: &str,
) -> Option<RowState> {
    let job = serde_json::json!({"subscription_id": format!("{run}-{name}"), "period_start": charge_day, "kind": kind,
        "revision": 0, "email": "x@example.com", "charge_at": format!("{charge_day}T00:00:00Z")});
    let key = Job::from_value(&job, &notice_texts::Icu)
        .expect("job")
        .key(&NoticeSecret::new(notice_e2e::sender_app::SECRET).expect("s"));
    let ledger = notice_e2e::sender_app::ledger(&stack.env).await;
    ledger.get(&key).await.expect("read").map(|r| r.state)
}

/// The run name and charge day from the plan line (`run smoke-… · kind K · charge YYYY-MM-DDT…`).
fn plan_of(stdout: &str) -> (String, String, String) {
    let line = stdout.lines().find(|l| l.trim_start().starts_with("run smoke-")).expect("a plan line");
    let field = |after: &str| {
        line.split(after).nth(1).and_then(|r| r.split_whitespace().next()).expect("a field").to_owned()
    };
    (field("run "), field("kind "), field("charge ")[..10].to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_stack_passes_every_check_and_sends_each_notice_once() {
    let stack = SmokeStack::start("notice-staging", Path::new(EXAMPLE)).await;
    let out = smoke(&stack, Some(true), &["--yes", "--poll", "1", "--timeout", "150"]).await;
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for check in ["delivered", "bounced", "complained", "withdrawn", "replay", "metrics"] {
        assert!(
            stdout.lines().any(|l| l.starts_with("PASS") && l.split_whitespace().nth(1) == Some(check)),
            "{check}: {shown}"
        );
    }
    assert!(stdout.contains("verdict: PASS · 6 checks"), "{shown}");
    assert!(
        stdout.contains("key secret v1·"),
        "the secret's identifier, checked against the ledger: {shown}"
    );
    // The configuration's first kind, inside its window; the mail only to the simulator.
    let (run, kind, day) = plan_of(&stdout);
    assert_eq!(kind, "renewal_notice_t72", "{shown}");
    let sent = stack.env.moto.sent_messages().await;
    assert_eq!(sent.len(), 3, "one mail each for delivered, bounced, complained: {sent:#?}");
    assert!(
        sent.iter().all(|m| m["destinations"]["ToAddresses"][0]
            .as_str()
            .is_some_and(|to| to.ends_with(&format!("+{run}@simulator.amazonses.com")))),
        "{sent:#?}"
    );
    assert_eq!(row_state(&stack, &run, "withdrawn", &kind, &day).await, Some(RowState::Withdrawn));
    assert_eq!(row_state(&stack, &run, "bounced", &kind, &day).await, Some(RowState::Sent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staging_stack_that_redirects_every_notice_is_checked_by_the_redirects_answer() {
    let to = "bounce@simulator.amazonses.com";
    let stack = SmokeStack::start_redirecting("notice-staging", Path::new(EXAMPLE), Some(to)).await;
    let out = smoke(&stack, Some(true), &["--yes", "--poll", "1", "--timeout", "150"]).await;
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("redirects every notice to {to}")), "{shown}");
    let checks: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("PASS"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(checks, ["bounced", "withdrawn", "replay", "metrics"], "{shown}");
    let sent = stack.env.moto.sent_messages().await;
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0]["destinations"]["ToAddresses"][0], to, "{sent:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ses_events_the_checks_that_need_them_fail_naming_what_never_came() {
    let stack = SmokeStack::start("notice-no-events", Path::new(EXAMPLE)).await;
    let out = smoke(&stack, Some(false), &["--yes", "--poll", "1", "--timeout", "25", "--json"]).await;
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(1), "{shown}");
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {shown}"));
    let verdict = |check: &str| {
        doc["checks"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["check"] == check))
            .map(|c| {
                (
                    c["verdict"].as_str().unwrap_or("").to_owned(),
                    c["detail"].as_str().unwrap_or("").to_owned(),
                )
            })
            .unwrap_or_else(|| panic!("no {check} check: {doc:#}"))
    };
    for check in ["delivered", "bounced", "complained"] {
        let (v, detail) = verdict(check);
        assert_eq!(v, "FAIL", "{check}: {doc:#}");
        assert!(detail.starts_with("timed out after 25 s: sent once"), "{check}: {detail}");
        assert!(detail.contains(&format!("waiting for the {check} event")), "{check}: {detail}");
    }
    assert_eq!(verdict("withdrawn").0, "PASS", "{doc:#}");
    // The sends themselves were counted: the metrics need no SES event.
    let (v, detail) = verdict("metrics");
    assert_eq!(v, "PASS", "{doc:#}");
    assert!(
        detail.starts_with("NoticesSent 3 ·") && detail.ends_with("DuplicateSendsDetected 0"),
        "{detail}"
    );
    assert_eq!(doc["passed"], false);
}

/// Messages waiting on the stack's queue.
async fn depth(stack: &SmokeStack) -> String {
    let out = stack
        .env
        .moto
        .sqs()
        .await
        .get_queue_attributes()
        .queue_url(&stack.env.queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await
        .expect("attributes");
    out.attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages).cloned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_stack_a_dry_run_and_a_refused_confirmation_enqueue_nothing() {
    let stack = SmokeStack::start("notice-staging", Path::new(EXAMPLE)).await;
    let missing = SmokeStack { env: stack.env, name: "no-such-stack".into(), redirect: None };
    let out = smoke(&missing, None, &["--yes"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-stack"), "{}", text(&out));
    let stack = SmokeStack { env: missing.env, name: "notice-staging".into(), redirect: None };

    let dry = smoke(&stack, None, &["--dry-run"]).await;
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry));
    assert!(String::from_utf8_lossy(&dry.stdout).contains("dry run: nothing enqueued"), "{}", text(&dry));
    // No terminal and no --yes: refused (3), before anything is enqueued.
    let refused = smoke(&stack, None, &[]).await;
    assert_eq!(refused.status.code(), Some(3), "{}", text(&refused));
    let unknown = smoke(&stack, None, &["--yes", "--kind", "annual_renewl"]).await;
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("annual_renewal"), "{}", text(&unknown));
    assert_eq!(depth(&stack).await, "0");
    assert!(stack.env.moto.sent_messages().await.is_empty());
}
