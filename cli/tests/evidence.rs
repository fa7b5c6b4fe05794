//! `noticectl evidence` over a SQLite file and a DynamoDB table (the emulator): one subscription
//! with a sent, a missed and a quarantined notice, judged by the example California policy
//! (docs/windows/us-ca-arl.json). Every time is set relative to the charge, so the hours before
//! it are known to the minute.

use std::path::Path;
use std::process::{Command, Output};

use chrono::{DateTime, Duration, DurationRound, Utc};
use notice_dynamodb::ledger::DynamoLedger;
use notice_ledger::ledger::{
    ClaimOutcome, ClaimRequest, DeliveryStatus, Ledger, ProviderEvidence, RenderedNotice,
};
use notice_ledger::{Job, NoticeSecret};
use notice_sqlite::SqliteLedger;
use serde_json::Value;

const SECRET: &str = "evidence-secret-0123456789";
const SUB: &str = "sub_4711";
const PERIOD: &str = "2026-11-01";
const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/windows/us-ca-arl.json");

/// The charge: an hour ago, on the minute, so every notice lies in the past.
fn charge() -> DateTime<Utc> {
    Utc::now().duration_trunc(Duration::minutes(1)).unwrap() - Duration::hours(1)
}

fn job(kind: &str, revision: u64, charge: DateTime<Utc>) -> Job {
    Job::parse(
        &serde_json::json!({"subscription_id": SUB, "period_start": PERIOD, "kind": kind, "revision": revision,
            "email": "ada@example.com", "charge_at": charge.to_rfc3339(), "jurisdiction": "US-CA"})
        .to_string(),
        &notice_texts::Icu,
    )
    .unwrap()
}

/// annual_renewal r0: claimed 720 h 30 min before the charge, sent, delivered (inside US-CA's
/// 1080 h → 360 h); trial_conversion r0: missed 10 h 12 min before (US-CA's trial window closes
/// at 72 h); annual_renewal r1: claimed 500 h before and never committed (quarantined).
async fn seed(ledger: &dyn Ledger, charge: DateTime<Utc>) {
    let secret = NoticeSecret::new(SECRET).unwrap();
    let sent = job("annual_renewal", 0, charge);
    let at = charge - Duration::hours(720) - Duration::minutes(30);
    let req = ClaimRequest::for_job(&sent, sent.key(&secret), at);
    let ClaimOutcome::Minted(claim) = ledger.claim(&req).await.unwrap() else { panic!("seed claim") };
    ledger.commit_sent(&claim, "ses-0100-annual", at + Duration::seconds(1)).await.unwrap();
    let delivered = ProviderEvidence {
        key: sent.key(&secret),
        message_id: "ses-0100-annual".into(),
        status: DeliveryStatus::Delivered,
        at: at + Duration::seconds(5),
    };
    ledger.apply_evidence(&delivered).await.unwrap();

    let missed = job("trial_conversion", 0, charge);
    let at = charge - Duration::hours(10) - Duration::minutes(12);
    let req = ClaimRequest::for_job(&missed, missed.key(&secret), at);
    let closed = (charge - Duration::hours(72)).to_rfc3339();
    assert_eq!(ledger.record_missed(&req, &format!("send window closed at {closed}")).await.unwrap(), None);

    let open = job("annual_renewal", 1, charge);
    let req = ClaimRequest::for_job(&open, open.key(&secret), charge - Duration::hours(500));
    assert!(matches!(ledger.claim(&req).await.unwrap(), ClaimOutcome::Minted(_)));
}

fn noticectl(dir: &Path, env: &[(String, String)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("NOTICE_KEY_SECRET", SECRET)
        .env_remove("NOTICE_KEY_SECRET_ARN")
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_WINDOWS")
        .env_remove("NOTICE_WINDOWS_FILE")
        .env_remove("NOTICE_STALE_AFTER_SECS")
        .args(args)
        .output()
        .expect("run noticectl")
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn notice<'a>(doc: &'a Value, kind: &str, revision: u64) -> &'a Value {
    doc["notices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == kind && n["revision"] == revision)
        .unwrap_or_else(|| panic!("no {kind} r{revision} in {doc:#}"))
}

/// The cells of the table row for `kind` revision `rev`.
fn row(stdout: &str, kind: &str, rev: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|l| {
            l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect::<Vec<_>>()
        })
        .find(|c| c.len() > 3 && c[0] == kind && c[1] == rev)
        .unwrap_or_else(|| panic!("no {kind} r{rev} row in:\n{stdout}"))
}

/// What both ledgers must show, from the JSON and the table.
fn check(dir: &Path, env: &[(String, String)], ledger: &str, charge: DateTime<Utc>) {
    let base = [
        "evidence",
        "--subscription-id",
        SUB,
        "--period-start",
        PERIOD,
        "--windows",
        EXAMPLE,
        "--ledger",
        ledger,
    ];
    let json_args: Vec<&str> = base.iter().copied().chain(["--json"]).collect();
    let doc: Value = serde_json::from_str(&ok(&noticectl(dir, env, &json_args))).unwrap();
    assert_eq!(doc["notices"].as_array().unwrap().len(), 3, "{doc:#}");
    assert_eq!(doc["keys_looked_up"], 16, "the policy's four kinds × revisions 0-3");

    let sent = notice(&doc, "annual_renewal", 0);
    assert_eq!(sent["state"], "sent");
    assert_eq!(sent["minutes_before_charge"], 720 * 60 + 30);
    assert_eq!(sent["hours_before_charge"], 720.5);
    assert_eq!(sent["charge_at"].as_str().map(|t| t.parse::<DateTime<Utc>>().unwrap()), Some(charge));
    assert_eq!(sent["jurisdiction"], "US-CA");
    assert_eq!(sent["message_id"], "ses-0100-annual");
    assert_eq!(sent["delivery_status"], "delivered");
    assert_eq!(sent["window"]["opens_hours_before"], 1080);
    assert_eq!(sent["window"]["closes_hours_before"], 360);
    assert_eq!(sent["inside_window"], true);

    let missed = notice(&doc, "trial_conversion", 0);
    assert_eq!(missed["state"], "missed");
    assert_eq!(missed["minutes_before_charge"], 10 * 60 + 12);
    assert_eq!(missed["inside_window"], false);
    assert_eq!(missed["window"]["closes_hours_before"], 72);
    assert!(missed["detail"].as_str().unwrap().starts_with("send window closed at"), "{missed:#}");
    assert_eq!(missed["message_id"], Value::Null);

    let open = notice(&doc, "annual_renewal", 1);
    assert_eq!((open["state"].as_str(), open["quarantined"].as_bool()), (Some("claimed"), Some(true)));
    assert_eq!(open["minutes_before_charge"], 500 * 60);

    let wide_args: Vec<&str> = base.iter().copied().chain(["--wide"]).collect();
    let table = ok(&noticectl(dir, env, &wide_args));
    let cells = row(&table, "annual_renewal", "0");
    let claimed = (charge - Duration::hours(720) - Duration::minutes(30)).to_rfc3339();
    assert_eq!(cells[2..6].to_vec(), ["sent", claimed.as_str(), "720.5 h", charge.to_rfc3339().as_str()]);
    assert!(
        cells.contains(&"1080 h → 360 h".to_owned()) && cells.contains(&"delivered".to_owned()),
        "{cells:?}"
    );
    assert_eq!(row(&table, "trial_conversion", "0")[4], "10.2 h");
    assert_eq!(row(&table, "annual_renewal", "1")[2], "claimed (quarantined)");
    assert!(
        !table.contains(SECRET) && !ok(&noticectl(dir, env, &json_args)).contains(SECRET),
        "never the secret"
    );

    // The default: one block per notice, readable in 100 columns.
    let blocks = ok(&noticectl(dir, env, &base));
    let wide: Vec<&str> = blocks.lines().filter(|l| l.chars().count() > 100).collect();
    assert!(wide.is_empty(), "lines over 100 columns: {wide:#?}\n{blocks}");
    let key = |n: &Value| n["notice_key"].as_str().unwrap()[..12].to_owned();
    let block = |head: &str| -> Vec<String> {
        let lines: Vec<&str> = blocks.lines().collect();
        let at =
            lines.iter().position(|l| l.starts_with(head)).unwrap_or_else(|| panic!("no {head}:\n{blocks}"));
        lines[at..].iter().take_while(|l| !l.is_empty()).map(|l| (*l).to_owned()).collect()
    };
    let sent_block = block("annual_renewal revision 0 ·").join("\n");
    for want in [
        format!("key {} · sent", key(sent)),
        format!("when       {claimed} (claimed"),
        format!("720.5 h before the charge at {}", charge.to_rfc3339()),
        "1080 h → 360 h before the charge · US-CA · inside: yes".to_owned(),
        "message    ses-0100-annual".to_owned(),
        "delivery   delivered".to_owned(),
    ] {
        assert!(sent_block.contains(&want), "{want:?} not in\n{sent_block}");
    }
    let missed_block = block("trial_conversion revision 0 ·").join("\n");
    assert!(
        missed_block.contains("10.2 h before the charge") && missed_block.contains("inside: no"),
        "{missed_block}"
    );
    assert!(block("annual_renewal revision 1 ·")[0].ends_with("claimed (quarantined)"), "{blocks}");
    assert!(!blocks.contains(SECRET), "never the secret");
}

#[tokio::test]
async fn evidence_from_a_sqlite_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let charge = charge();
    seed(&SqliteLedger::open(dir.path().join("ledger.db")).unwrap(), charge).await;
    let ledger = format!("sqlite:{}", dir.path().join("ledger.db").display());
    check(dir.path(), &[], &ledger, charge);

    // Explicit kinds and revisions: only what was asked for.
    let only = ok(&noticectl(
        dir.path(),
        &[],
        &[
            "evidence",
            "--subscription-id",
            SUB,
            "--period-start",
            PERIOD,
            "--kinds",
            "trial_conversion",
            "--revisions",
            "0",
            "--ledger",
            &ledger,
            "--json",
        ],
    ));
    let doc: Value = serde_json::from_str(&only).unwrap();
    assert_eq!((doc["keys_looked_up"].as_u64(), doc["notices"].as_array().map(Vec::len)), (Some(1), Some(1)));
    // The built-in policy (no --windows) still judges it: the default window 72 h → 24 h.
    assert_eq!(doc["notices"][0]["window"]["opens_hours_before"], 72);
}

#[tokio::test]
async fn no_rows_says_so_and_exits_1_and_too_many_keys_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    seed(&SqliteLedger::open(dir.path().join("ledger.db")).unwrap(), charge()).await;
    let ledger = format!("sqlite:{}", dir.path().join("ledger.db").display());
    let out = noticectl(
        dir.path(),
        &[],
        &[
            "evidence",
            "--subscription-id",
            "sub_other",
            "--period-start",
            PERIOD,
            "--windows",
            EXAMPLE,
            "--ledger",
            &ledger,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no ledger rows for subscription sub_other"), "{stderr}");
    assert!(out.stdout.is_empty());

    let wrong_secret = Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir.path())
        .env("NOTICE_KEY_SECRET", "another-secret-0123456789")
        .env_remove("NOTICE_WINDOWS")
        .args([
            "evidence",
            "--subscription-id",
            SUB,
            "--period-start",
            PERIOD,
            "--windows",
            EXAMPLE,
            "--ledger",
            &ledger,
        ])
        .output()
        .unwrap();
    assert_eq!(wrong_secret.status.code(), Some(1), "another secret derives other keys");

    let out = noticectl(
        dir.path(),
        &[],
        &[
            "evidence",
            "--subscription-id",
            SUB,
            "--period-start",
            PERIOD,
            "--kinds",
            "a,b",
            "--revisions",
            "0-60",
            "--ledger",
            &ledger,
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 100"));
    let out = noticectl(
        dir.path(),
        &[],
        &["evidence", "--subscription-id", SUB, "--period-start", PERIOD, "--ledger", &ledger],
    );
    assert_eq!(out.status.code(), Some(2), "the built-in policy names no kinds: --kinds is needed");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--kinds"));
}

#[tokio::test]
async fn evidence_from_a_dynamodb_ledger() {
    let moto = notice_e2e::start_moto().await;
    moto.create_ledger_table("notices").await;
    let charge = charge();
    let ledger = DynamoLedger::new(notice_setup::aws::dynamodb_client(&moto.sdk_config().await), "notices");
    seed(&ledger, charge).await;
    let dir = tempfile::tempdir().unwrap();
    check(dir.path(), &moto.env_vars(), "dynamodb:notices", charge);
}

/// A row that stores what rendered its message shows it: the template, the configuration version
/// and the first 12 hex of the rendered digest in the block (within 100 columns), all of it whole
/// in `--json`, `--wide` and `noticectl show`; a row without it shows none of it.
#[tokio::test]
async fn evidence_and_show_name_the_configuration_and_template_that_rendered_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let sqlite = SqliteLedger::open(&path).unwrap();
    let ledger: &dyn Ledger = &sqlite;
    let charge = charge();
    let secret = NoticeSecret::new(SECRET).unwrap();
    let config = format!("sha256:{}", "ab12".repeat(16));
    let digest = "9c0ffee1".repeat(8);
    let rendered = RenderedNotice {
        config_version: config.clone(),
        template: "annual_renewal/de".into(),
        rendered_digest: digest.clone(),
    };
    let sent = job("annual_renewal", 0, charge);
    let req = ClaimRequest::for_job(&sent, sent.key(&secret), charge - Duration::hours(720))
        .with_rendered(rendered.clone());
    let ClaimOutcome::Minted(claim) = ledger.claim(&req).await.unwrap() else { panic!("seed claim") };
    ledger.commit_sent(&claim, "ses-rendered", charge - Duration::hours(719)).await.unwrap();
    let older = job("annual_renewal", 1, charge);
    let req = ClaimRequest::for_job(&older, older.key(&secret), charge - Duration::hours(700));
    assert!(matches!(ledger.claim(&req).await.unwrap(), ClaimOutcome::Minted(_)));
    drop(sqlite);

    let db = format!("sqlite:{}", path.display());
    let base = [
        "evidence",
        "--subscription-id",
        SUB,
        "--period-start",
        PERIOD,
        "--kinds",
        "annual_renewal",
        "--revisions",
        "0-1",
        "--ledger",
        &db,
    ];
    let json_args: Vec<&str> = base.iter().copied().chain(["--json"]).collect();
    let doc: Value = serde_json::from_str(&ok(&noticectl(dir.path(), &[], &json_args))).unwrap();
    let with = notice(&doc, "annual_renewal", 0);
    assert_eq!(
        (&with["config_version"], &with["template"], &with["rendered_digest"]),
        (&Value::from(config.as_str()), &Value::from("annual_renewal/de"), &Value::from(digest.as_str()))
    );
    let without = notice(&doc, "annual_renewal", 1);
    assert_eq!((&without["config_version"], &without["rendered_digest"]), (&Value::Null, &Value::Null));

    let blocks = ok(&noticectl(dir.path(), &[], &base));
    let wide: Vec<&str> = blocks.lines().filter(|l| l.chars().count() > 100).collect();
    assert!(wide.is_empty(), "lines over 100 columns: {wide:#?}\n{blocks}");
    let (first, second) =
        blocks.split_once("annual_renewal revision 1 ·").unwrap_or_else(|| panic!("{blocks}"));
    assert!(
        first.contains("  template   annual_renewal/de · rendered digest 9c0ffee19c0f\n")
            && first.contains(&format!("  config     version {config}\n")),
        "{blocks}"
    );
    assert!(!first.contains(&digest), "the block shows the digest short: {blocks}");
    assert!(!second.lines().take_while(|l| !l.is_empty()).any(|l| l.contains("template")), "{blocks}");

    let wide_args: Vec<&str> = base.iter().copied().chain(["--wide"]).collect();
    let table = ok(&noticectl(dir.path(), &[], &wide_args));
    let cells = row(&table, "annual_renewal", "0");
    for want in ["annual_renewal/de", config.as_str(), digest.as_str()] {
        assert!(cells.iter().any(|c| c == want), "{want} not in {cells:?}");
    }

    let show = ok(&noticectl(dir.path(), &[], &["show", sent.key(&secret).as_str(), "--ledger", &db]));
    let shown: Value = serde_json::from_str(&show).unwrap();
    assert_eq!(
        (&shown["config_version"], &shown["template"], &shown["rendered_digest"]),
        (&Value::from(config.as_str()), &Value::from("annual_renewal/de"), &Value::from(digest.as_str()))
    );
    let show = ok(&noticectl(dir.path(), &[], &["show", older.key(&secret).as_str(), "--ledger", &db]));
    let shown: Value = serde_json::from_str(&show).unwrap();
    assert_eq!((&shown["template"], &shown["rendered_digest"]), (&Value::Null, &Value::Null));
}
