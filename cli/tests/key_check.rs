//! The key check (issue 36, item 1): a ledger remembers which key secret its notice keys were made
//! with, and every command that derives keys refuses another secret — instead of answering "no
//! notices" or "all new" from keys that name nothing. Local (SQLite) and on the emulator's
//! DynamoDB, the way an operator without the deployment's secret would meet it.

use std::path::Path;
use std::process::{Command, Output};

use notice_e2e::{start_moto, Moto};

const RIGHT: &str = "the-deployment-secret-0123456789";
const WRONG: &str = "another-secret-entirely-98765";

fn job() -> String {
    serde_json::json!({"subscription_id": "sub_k", "period_start": "2026-12-01", "kind": "renewal_notice_t72",
        "email": "k@example.com", "charge_at": "2026-12-04T09:00:00Z"})
    .to_string()
}

fn noticectl(dir: &Path, secret: Option<&str>, env: &[(String, String)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noticectl"));
    cmd.env("NOTICE_OPERATOR", "ops-test");
    cmd.current_dir(dir)
        .env_remove("NOTICE_KEY_SECRET")
        .env_remove("NOTICE_KEY_SECRET_ARN")
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_CONFIG")
        .env_remove("NOTICE_WINDOWS")
        .env_remove("NOTICE_WINDOWS_FILE")
        .env_remove("NOTICE_TEMPLATE_DIR")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .args(args);
    if let Some(s) = secret {
        cmd.env("NOTICE_KEY_SECRET", s);
    }
    cmd.output().expect("run noticectl")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn evidence<'a>(ledger: &'a [&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "evidence",
        "--subscription-id",
        "sub_k",
        "--period-start",
        "2026-12-01",
        "--kinds",
        "renewal_notice_t72",
    ];
    args.extend_from_slice(ledger);
    args
}

/// A refusal: exit 2, both identifiers named, neither secret printed, nothing else said.
fn assert_refused(out: &Output) {
    let t = text(out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("is not the one") && t.matches("v1·").count() >= 2, "{t}");
    assert!(!t.contains(RIGHT) && !t.contains(WRONG), "a secret printed: {t}");
}

#[test]
fn a_local_ledger_refuses_another_secret_in_every_command_that_derives_keys() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jobs.jsonl"), format!("{}\n", job())).unwrap();
    let send =
        noticectl(dir.path(), Some(RIGHT), &[], &["send", "jobs.jsonl", "--now", "2026-12-02T12:00:00Z"]);
    assert_eq!(send.status.code(), Some(0), "{}", text(&send));

    let ok = noticectl(dir.path(), Some(RIGHT), &[], &evidence(&[]));
    let t = text(&ok);
    assert_eq!(ok.status.code(), Some(0), "{t}");
    assert!(t.contains("key secret v1·"), "evidence names the secret's identifier: {t}");

    assert_refused(&noticectl(dir.path(), Some(WRONG), &[], &evidence(&[])));
    assert_refused(&noticectl(
        dir.path(),
        Some(WRONG),
        &[],
        &["send", "jobs.jsonl", "--now", "2026-12-02T12:00:00Z"],
    ));
    assert_refused(&noticectl(
        dir.path(),
        Some(WRONG),
        &[],
        &[
            "key",
            "--subscription-id",
            "sub_k",
            "--period-start",
            "2026-12-01",
            "--kind",
            "renewal_notice_t72",
        ],
    ));
    assert_refused(&noticectl(
        dir.path(),
        Some(WRONG),
        &[],
        &[
            "withdraw",
            "--subscription-id",
            "sub_k",
            "--period-start",
            "2026-12-01",
            "--kind",
            "renewal_notice_t72",
            "--dry-run",
        ],
    ));
    assert_refused(&noticectl(
        dir.path(),
        Some(WRONG),
        &[],
        &["backfill", "--from", "jobs.jsonl", "--dry-run"],
    ));
}

#[tokio::test]
async fn a_random_local_secret_never_reads_a_deployed_ledger() {
    let moto: Moto = start_moto().await;
    moto.create_ledger_table("notices").await;
    let env = moto.env_vars();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jobs.jsonl"), format!("{}\n", job())).unwrap();

    // The deployment's first sender records its secret's check (the sender's own start path).
    let client = notice_setup::aws::dynamodb_client(&moto.sdk_config().await);
    let store = notice_dynamodb::keycheck::DynamoKeyCheck::new(client, "notices");
    let right = notice_ledger::NoticeSecret::new(RIGHT).unwrap();
    let key =
        notice_sender::verify_key_secret(&store, &right.clone().into()).await.expect("first start records");
    assert_eq!(notice_sender::verify_key_secret(&store, &right.clone().into()).await.expect("verifies"), key);
    let wrong = notice_ledger::NoticeSecret::new(WRONG).unwrap();
    let refused =
        notice_sender::verify_key_secret(&store, &wrong.clone().into()).await.expect_err("another secret");
    assert!(
        refused.to_string().contains("NOTICE_KEY_SECRET") && !refused.to_string().contains(WRONG),
        "{refused}"
    );

    // An operator without the deployment's secret: noticectl makes a random local one.
    let ledger = ["--ledger", "dynamodb:notices"];
    assert_refused(&noticectl(dir.path(), None, &env, &evidence(&ledger)));
    let mut replay = vec!["replay", "--from", "jobs.jsonl", "--dry-run"];
    replay.extend_from_slice(&ledger);
    assert_refused(&noticectl(dir.path(), None, &env, &replay));
    // With the deployment's secret it answers (no notices: none were sent).
    let ok = noticectl(dir.path(), Some(RIGHT), &env, &evidence(&ledger));
    assert_eq!(ok.status.code(), Some(1), "no rows is 'attention', not a refusal: {}", text(&ok));
}
