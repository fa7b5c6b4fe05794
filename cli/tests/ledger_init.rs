//! `noticectl ledger init` and the key check (issue 36, item 1): with a key secret configured, a
//! fresh PostgreSQL ledger gets its check at init — protected before its first sender starts — and
//! a ledger that holds another secret's check is refused (exit 2, both identifiers, no value).
//! On the throwaway PostgreSQL cluster of the e2e harness (`PG_BIN`, or the Debian package).

use std::process::{Command, Output};

use notice_e2e::postgres::postgres_server;
use notice_ledger::keycheck::KeyCheck;
use notice_ledger::NoticeSecret;

const RIGHT: &str = "the-deployment-secret-0123456789";
const WRONG: &str = "another-secret-entirely-98765";

fn noticectl(secret: Option<&str>, args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noticectl"));
    cmd.current_dir(dir.path())
        .env_remove("NOTICE_KEY_SECRET")
        .env_remove("NOTICE_KEY_SECRET_ARN")
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_STATE_DIR")
        .args(args);
    if let Some(s) = secret {
        cmd.env("NOTICE_KEY_SECRET", s);
    }
    cmd.output().expect("run noticectl")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn check_of(secret: &str) -> KeyCheck {
    KeyCheck::of(&NoticeSecret::new(secret).unwrap())
}

#[tokio::test]
async fn init_records_the_key_check_and_refuses_another_secret() {
    let server = postgres_server().await;
    let db = server.create_database("init_keycheck").await;
    let url = server.url(&db);
    let stored =
        || async { server.psql(&db, "SELECT value FROM ledger_meta WHERE name = 'key_check'").await };

    let first = noticectl(Some(RIGHT), &["ledger", "init", "--postgres", &url]);
    let t = text(&first);
    assert_eq!(first.status.code(), Some(0), "{t}");
    assert!(t.contains(&format!("key check: recorded key secret {}", check_of(RIGHT))), "{t}");
    assert_eq!(stored().await.unwrap(), check_of(RIGHT).to_stored(), "the fresh ledger holds the check");

    // Idempotent: again with the same secret, and without any secret (schema only).
    let again = noticectl(Some(RIGHT), &["ledger", "init", "--postgres", &url]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(text(&again).contains("the ledger's matches key secret"), "{}", text(&again));
    let bare = noticectl(None, &["ledger", "init", "--postgres", &url]);
    assert_eq!(bare.status.code(), Some(0), "{}", text(&bare));

    let refused = noticectl(Some(WRONG), &["ledger", "init", "--postgres", &url]);
    let t = text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{t}");
    assert!(
        t.contains(&check_of(WRONG).identifier()) && t.contains(&check_of(RIGHT).identifier()),
        "both identifiers named: {t}"
    );
    assert!(t.contains("is not the one") && t.contains("left as it is"), "{t}");
    assert!(!t.contains(RIGHT) && !t.contains(WRONG), "a secret printed: {t}");
    assert_eq!(stored().await.unwrap(), check_of(RIGHT).to_stored(), "the check is never replaced");

    // The recorded check protects the ledger at once: a command with another secret is refused.
    let key = noticectl(
        Some(WRONG),
        &[
            "key",
            "--subscription-id",
            "sub_k",
            "--period-start",
            "2026-12-01",
            "--kind",
            "renewal_notice_t72",
            "--ledger",
            &url,
        ],
    );
    assert_eq!(key.status.code(), Some(2), "{}", text(&key));
}

#[tokio::test]
async fn init_without_a_key_secret_records_nothing() {
    let server = postgres_server().await;
    let db = server.create_database("init_nosecret").await;
    let out = noticectl(None, &["ledger", "init", "--postgres", &server.url(&db)]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("key check: none recorded here"), "{t}");
    assert_eq!(server.psql(&db, "SELECT count(*) FROM ledger_meta").await.unwrap(), "0");
    // No local secret was made or recorded in its place.
    let blank = noticectl(Some("   "), &["ledger", "init", "--postgres", &server.url(&db)]);
    assert_eq!(blank.status.code(), Some(2), "a blank secret is an error: {}", text(&blank));
    assert_eq!(server.psql(&db, "SELECT count(*) FROM ledger_meta").await.unwrap(), "0");
}
