//! The shared ledger behaviour ([`notice_e2e::ledger_suite`]) run against every adapter — memory,
//! SQLite (a temp file), DynamoDB (moto, table from `template.yaml`) and PostgreSQL (a real
//! throwaway cluster) — plus what only the PostgreSQL ledger has to show: its schema, its index,
//! TLS, other-language workers on the same table, and two senders racing on one database.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use notice_dynamodb::ledger::DynamoLedger;
use notice_dynamodb::{DynamoBuckets, DynamoKeyCheck};
use notice_e2e::ledger_suite::{fresh_key, held, mint, request, row, t, SuiteFixture};
use notice_e2e::postgres::{fresh_postgres_url, postgres_server};
use notice_e2e::start_moto;
use notice_ledger::keycheck::{KeyCheck, KeyCheckStore, MemoryKeyCheck};
use notice_ledger::ledger::ClaimLedger;
use notice_ledger::ledger::OperatorLedger;
use notice_ledger::ledger::RowReader;
use notice_ledger::ledger::{ClaimRequest, Ledger, RenderedNotice, RowState};
use notice_ledger::links::ManageLinks;
use notice_ledger::rate::{BucketStore, MemoryBuckets};
use notice_ledger::DeliverContext;
use notice_ledger::{
    ConfigError, Job, LedgerError, NoticeSecret, NoticeSender, Outcome, SendBudget, WindowPolicy,
};
use notice_postgres::{PostgresLedger, MIGRATION, QUARANTINE_QUERY};
use notice_setup::ledger_url::ledger_for;
use notice_sqlite::SqliteLedger;
use notice_testkit::faults::RecordingMailer;
use notice_testkit::MemoryLedger;
use notice_texts::Renderer;

async fn memory_ledger() -> SuiteFixture {
    let key_checks = Arc::new(MemoryKeyCheck::default());
    SuiteFixture::new(Arc::new(MemoryLedger::new()), Arc::new(MemoryBuckets::default()), ())
        .with_key_checks(key_checks.clone(), key_checks)
}

async fn sqlite_ledger() -> SuiteFixture {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let ledger =
        SqliteLedger::open(dir.path().join("ledger.db")).unwrap_or_else(|e| panic!("open sqlite: {e}"));
    let buckets = ledger.buckets();
    let reopened =
        SqliteLedger::open(dir.path().join("ledger.db")).unwrap_or_else(|e| panic!("reopen sqlite: {e}"));
    let key_checks = Arc::new(ledger.key_checks());
    SuiteFixture::new(Arc::new(ledger), Arc::new(buckets), dir)
        .with_key_checks(key_checks, Arc::new(reopened.key_checks()))
}

async fn dynamodb_ledger() -> SuiteFixture {
    let moto = start_moto().await;
    moto.create_ledger_table("notices").await;
    let client = notice_setup::aws::dynamodb_client(&moto.sdk_config().await);
    let buckets = DynamoBuckets::new(client.clone(), "notices");
    let key_checks = Arc::new(DynamoKeyCheck::new(client.clone(), "notices"));
    let reopened = notice_setup::aws::dynamodb_client(&moto.sdk_config().await);
    SuiteFixture::new(Arc::new(DynamoLedger::new(client, "notices")), Arc::new(buckets), moto)
        .with_key_checks(key_checks, Arc::new(DynamoKeyCheck::new(reopened, "notices")))
}

async fn postgres_ledger() -> SuiteFixture {
    let url = fresh_postgres_url("suite").await;
    let ledger = migrated(&url).await;
    let reopened = PostgresLedger::connect(&url).await.unwrap_or_else(|e| panic!("reconnect {url}: {e}"));
    SuiteFixture::new(Arc::new(ledger.clone()), Arc::new(ledger.buckets()), ())
        .with_key_checks(Arc::new(ledger.key_checks()), Arc::new(reopened.key_checks()))
}

async fn migrated(url: &str) -> PostgresLedger {
    let ledger = PostgresLedger::connect(url).await.unwrap_or_else(|e| panic!("connect {url}: {e}"));
    ledger.migrate().await.unwrap_or_else(|e| panic!("migrate {url}: {e}"));
    ledger
}

mod memory {
    notice_e2e::ledger_suite_tests!(super::memory_ledger);
}

mod sqlite {
    notice_e2e::ledger_suite_tests!(super::sqlite_ledger);
}

mod dynamodb {
    notice_e2e::ledger_suite_tests!(super::dynamodb_ledger);
}

mod postgres {
    notice_e2e::ledger_suite_tests!(super::postgres_ledger);
}

// ── PostgreSQL only ──

#[tokio::test]
async fn postgres_keeps_the_key_check_in_ledger_meta_and_reports_a_corrupt_one() {
    let server = postgres_server().await;
    let db = server.create_database("key_check").await;
    let url = server.url(&db);
    let ledger = migrated(&url).await;
    let check = KeyCheck::parse(&format!("v1:{}", "c".repeat(64))).unwrap_or_else(|e| panic!("{e}"));
    let store = ledger.key_checks();
    assert_eq!(store.record_key_check(&check).await.unwrap_or_else(|e| panic!("record: {e}")), check);
    // Re-running the migration (a redeploy's `ledger init`) keeps it.
    ledger.migrate().await.unwrap_or_else(|e| panic!("migrate again: {e}"));
    let stored = server
        .psql(&db, "SELECT value FROM ledger_meta WHERE name = 'key_check'")
        .await
        .unwrap_or_else(|e| panic!("psql: {e}"));
    assert_eq!(stored.trim(), check.to_stored());
    // It is no notice row: the key scan and the open-claims count do not see it.
    assert!(ledger.keys_with_prefix("", 10).await.unwrap_or_else(|e| panic!("keys: {e}")).is_empty());
    let open = ledger.count_open_claims(Utc::now()).await.unwrap_or_else(|e| panic!("count: {e}"));
    assert_eq!(open, (0, None));

    server
        .psql(&db, "UPDATE ledger_meta SET value = 'v1:tampered' WHERE name = 'key_check'")
        .await
        .unwrap_or_else(|e| panic!("psql: {e}"));
    assert!(matches!(store.key_check().await, Err(LedgerError::Corrupt(_))));
    assert!(matches!(store.record_key_check(&check).await, Err(LedgerError::Corrupt(_))));

    // A database whose schema predates the table: told to run `ledger init`, not "no check".
    server.psql(&db, "DROP TABLE ledger_meta").await.unwrap_or_else(|e| panic!("psql: {e}"));
    match store.key_check().await {
        Err(LedgerError::Unavailable { detail: text, .. }) => assert!(text.contains("ledger init"), "{text}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn postgres_migration_is_idempotent_and_the_quarantine_query_uses_the_partial_index() {
    let server = postgres_server().await;
    let db = server.create_database("schema").await;
    let url = server.url(&db);
    let a = PostgresLedger::connect(&url).await.unwrap_or_else(|e| panic!("connect: {e}"));
    let b = PostgresLedger::connect(&url).await.unwrap_or_else(|e| panic!("connect: {e}"));
    // Two processes deploying at once, then a redeploy.
    let (ra, rb) = tokio::join!(a.migrate(), b.migrate());
    ra.unwrap_or_else(|e| panic!("migrate a: {e}"));
    rb.unwrap_or_else(|e| panic!("migrate b: {e}"));
    a.migrate().await.unwrap_or_else(|e| panic!("migrate again: {e}"));

    let indexdef = server
        .psql(&db, "SELECT indexdef FROM pg_indexes WHERE indexname = 'notices_open_claims'")
        .await
        .unwrap_or_else(|e| panic!("psql: {e}"));
    assert!(indexdef.contains("(claimed_at, notice_key) WHERE (state = 'claimed'::text)"), "{indexdef}");

    // The adapter's own quarantine query is answered from the partial index.
    let plan = server
        .psql(
            &db,
            &format!(
                "SET enable_seqscan = off; PREPARE quarantine(timestamptz, bigint) AS {QUARANTINE_QUERY}; \
                 EXPLAIN EXECUTE quarantine(now(), 50)"
            ),
        )
        .await
        .unwrap_or_else(|e| panic!("psql: {e}"));
    assert!(plan.contains("notices_open_claims"), "quarantine plan:\n{plan}");
}

#[tokio::test]
async fn postgres_migration_lets_a_table_made_before_withdraw_hold_tombstones() {
    let server = postgres_server().await;
    let db = server.create_database("before_withdraw").await;
    // The state and key checks as tables were created before `withdrawn` and key rotation existed.
    let (tables, _upgrade) = MIGRATION
        .split_once("-- Tables made before withdraw or key rotation existed")
        .unwrap_or_else(|| panic!("marker"));
    let old = tables
        .replace(", 'withdrawn', 'alias')", ")")
        .replace("'^([0-9a-f]{64}|v[1-9][0-9]{0,5}-[0-9a-f]{56})$'", "'^[0-9a-f]{64}$'");
    assert!(!old.contains("alias") && !old.contains("{56}"), "{old}");
    server.psql(&db, &old).await.unwrap_or_else(|e| panic!("old schema: {e}"));
    let check = "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'notices_state_check'";
    let before = server.psql(&db, check).await.unwrap_or_else(|e| panic!("psql: {e}"));
    assert!(!before.contains("withdrawn"), "the old table refuses tombstones: {before}");
    let ledger = PostgresLedger::connect(&server.url(&db)).await.unwrap_or_else(|e| panic!("connect: {e}"));
    ledger.migrate().await.unwrap_or_else(|e| panic!("migrate: {e}"));
    ledger.migrate().await.unwrap_or_else(|e| panic!("migrate again: {e}"));
    let after = server.psql(&db, check).await.unwrap_or_else(|e| panic!("psql: {e}"));
    assert!(after.contains("withdrawn"), "{after}");
    let key = notice_e2e::ledger_suite::fresh_key();
    let req = notice_e2e::ledger_suite::withdraw_request(&key, chrono::Utc::now());
    assert_eq!(ledger.withdraw(&req).await.unwrap_or_else(|e| panic!("withdraw: {e}")), None);
    // Rotation: a key under a later secret version, and an alias row, are admitted now.
    assert!(after.contains("alias"), "{after}");
    let old_key = notice_e2e::ledger_suite::fresh_key();
    let new_key = notice_ledger::NoticeKey::parse(&format!("v2-{}", &old_key.as_str()[8..]))
        .unwrap_or_else(|e| panic!("{e}"));
    let req = notice_e2e::ledger_suite::request(&new_key, chrono::Utc::now()).with_aliases(vec![old_key]);
    let claimed = ledger.claim(&req).await.unwrap_or_else(|e| panic!("claim under v2: {e}"));
    assert!(matches!(claimed, notice_ledger::ledger::ClaimOutcome::Minted(_)), "{claimed:?}");
}

#[tokio::test]
async fn postgres_schema_is_shared_with_workers_in_other_languages() {
    let server = postgres_server().await;
    let db = server.create_database("interop").await;
    let ledger = migrated(&server.url(&db)).await;
    let sql_claim = |key: &str, token: &str| {
        format!(
            "INSERT INTO notices (notice_key, state, origin, claim_token, subscription_id, period_start, kind, \
             revision, content_digest, claimed_at, updated_at) \
             VALUES ('{key}', 'claimed', 'worker', '{token}', 'sub_8812', '2026-10-01', 'renewal_notice_t72', 0, \
             'digest-1', now(), now()) \
             ON CONFLICT (notice_key) DO UPDATE SET state = excluded.state, claim_token = excluded.claim_token, \
             claimed_at = excluded.claimed_at, updated_at = excluded.updated_at \
             WHERE notices.state = 'released' RETURNING claim_token"
        )
    };

    // A worker in another language claims with the documented statement; this ledger sees it.
    let theirs = fresh_key();
    let out =
        server.psql(&db, &sql_claim(theirs.as_str(), "tok-python")).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out, "tok-python");
    let row_now = held(&ledger, &request(&theirs, t(0))).await;
    assert_eq!(
        (row_now.state, row_now.claim_token.map(|c| c.as_str().to_owned())),
        (RowState::Claimed, Some("tok-python".into()))
    );

    // …and the other way round: a key this ledger claimed is refused to them (no token back).
    let ours = fresh_key();
    mint(&ledger, &request(&ours, t(0))).await;
    let out = server.psql(&db, &sql_claim(ours.as_str(), "tok-node")).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out, "", "the claim statement returns nothing for a held key");

    // Mistakes that would silently defeat deduplication are refused by the database.
    let upper = fresh_key().as_str().to_ascii_uppercase();
    let refused = server.psql(&db, &sql_claim(&upper.replace('0', "A"), "tok")).await;
    assert!(refused.as_ref().is_err_and(|e| e.contains("notices_notice_key_check")), "{refused:?}");
    let refused = server
        .psql(&db, &format!("UPDATE notices SET state = 'pending' WHERE notice_key = '{}'", ours.as_str()))
        .await;
    assert!(refused.as_ref().is_err_and(|e| e.contains("notices_state_check")), "{refused:?}");
}

#[tokio::test]
async fn postgres_keeps_every_u64_revision() {
    let ledger = migrated(&fresh_postgres_url("revision").await).await;
    let key = fresh_key();
    let req = ClaimRequest { revision: u64::MAX, ..request(&key, t(0)) };
    mint(&ledger, &req).await;
    assert_eq!(row(&ledger, &key).await.revision, 18_446_744_073_709_551_615);
}

#[tokio::test]
async fn postgres_recognises_a_retried_transition_whose_result_stands() {
    let ledger = migrated(&fresh_postgres_url("replay").await).await;
    let key = fresh_key();
    let claim = mint(&ledger, &request(&key, t(0))).await;
    ledger.commit_sent(&claim, "m-1", t(1)).await.unwrap_or_else(|e| panic!("commit: {e}"));
    ledger.commit_sent(&claim, "m-1", t(2)).await.unwrap_or_else(|e| panic!("retried commit: {e}"));
    assert_eq!(row(&ledger, &key).await.updated_at, t(1), "the retry wrote nothing");
    assert!(matches!(ledger.commit_sent(&claim, "m-2", t(2)).await, Err(LedgerError::Conflict(_))));
    assert!(matches!(ledger.release(&claim, "late", t(2)).await, Err(LedgerError::Conflict(_))));
}

#[tokio::test]
async fn postgres_counts_open_claims_for_the_reporter() {
    let ledger = migrated(&fresh_postgres_url("count").await).await;
    assert_eq!(ledger.count_open_claims(t(100)).await.unwrap_or_else(|e| panic!("{e}")), (0, None));
    for i in 0..5 {
        mint(&ledger, &request(&fresh_key(), t(i * 10))).await;
    }
    let claim = mint(&ledger, &request(&fresh_key(), t(-50))).await;
    ledger.commit_sent(&claim, "m", t(1)).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ledger.count_open_claims(t(25)).await.unwrap_or_else(|e| panic!("{e}")), (3, Some(t(0))));
}

#[tokio::test]
async fn postgres_without_the_schema_says_how_to_create_it() {
    let ledger = PostgresLedger::connect(&fresh_postgres_url("unmigrated").await)
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    match ledger.claim(&request(&fresh_key(), t(0))).await {
        Err(LedgerError::Unavailable { detail: msg, .. }) => {
            assert!(msg.contains("noticectl ledger init"), "{msg}")
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

/// A table made by a version before the evidence columns: the adapter says to re-run `ledger
/// init`, and re-running it adds them without touching the rows already there.
#[tokio::test]
async fn postgres_ledger_init_again_adds_the_evidence_columns_to_an_older_table() {
    let server = postgres_server().await;
    let db = server.create_database("upgrade").await;
    let ledger = migrated(&server.url(&db)).await;
    let before = fresh_key();
    let claim = mint(&ledger, &request(&before, t(0))).await;
    ledger.commit_sent(&claim, "ses-before", t(1)).await.unwrap_or_else(|e| panic!("commit: {e}"));
    server
        .psql(&db, "ALTER TABLE notices DROP COLUMN charge_at, DROP COLUMN jurisdiction")
        .await
        .unwrap_or_else(|e| panic!("make the old table: {e}"));
    // A fresh connection: prepared statements cached on the old pool knew the dropped columns.
    let old = PostgresLedger::connect(&server.url(&db)).await.unwrap_or_else(|e| panic!("connect: {e}"));
    match old.get(&before).await {
        Err(LedgerError::Unavailable { detail: msg, .. }) => {
            assert!(msg.contains("noticectl ledger init"), "{msg}")
        }
        other => panic!("expected Unavailable naming ledger init, got {other:?}"),
    }
    old.migrate().await.unwrap_or_else(|e| panic!("migrate again: {e}"));
    let kept = row(&old, &before).await;
    assert_eq!(
        (kept.message_id.as_deref(), kept.charge_at, kept.jurisdiction),
        (Some("ses-before"), None, None)
    );
    let after = fresh_key();
    mint(&old, &request(&after, t(0))).await;
    let stored = row(&old, &after).await;
    assert_eq!((stored.charge_at, stored.jurisdiction.as_deref()), (Some(t(72 * 3600)), Some("US-CA")));
}

/// A table made before the rendered-notice columns: re-running `ledger init` adds them (and the
/// check that keeps the three together) without touching older rows; the database refuses a
/// partial write, and a row made partial behind its back reads as corrupt.
#[tokio::test]
async fn postgres_ledger_init_again_adds_the_rendered_notice_columns() {
    let server = postgres_server().await;
    let db = server.create_database("upgrade_rendered").await;
    let ledger = migrated(&server.url(&db)).await;
    let before = fresh_key();
    mint(&ledger, &request(&before, t(0))).await;
    server
        .psql(&db, "ALTER TABLE notices DROP COLUMN config_version, DROP COLUMN template, DROP COLUMN rendered_digest")
        .await
        .unwrap_or_else(|e| panic!("make the old table: {e}"));
    let old = PostgresLedger::connect(&server.url(&db)).await.unwrap_or_else(|e| panic!("connect: {e}"));
    match old.get(&before).await {
        Err(LedgerError::Unavailable { detail: msg, .. }) => {
            assert!(msg.contains("noticectl ledger init"), "{msg}")
        }
        other => panic!("expected Unavailable naming ledger init, got {other:?}"),
    }
    old.migrate().await.unwrap_or_else(|e| panic!("migrate again: {e}"));
    old.migrate().await.unwrap_or_else(|e| panic!("and again: {e}"));
    assert_eq!(row(&old, &before).await.rendered, None, "older rows read without it");

    let rendered = RenderedNotice {
        config_version: "builtin:0a1b2c3d".into(),
        template: "annual_renewal/de".into(),
        rendered_digest: "e4".repeat(32),
    };
    let after = fresh_key();
    mint(&old, &request(&after, t(0)).with_rendered(rendered.clone())).await;
    assert_eq!(row(&old, &after).await.rendered, Some(rendered));

    let partial = format!("UPDATE notices SET template = NULL WHERE notice_key = '{}'", after.as_str());
    let refused = server.psql(&db, &partial).await;
    assert!(refused.as_ref().is_err_and(|e| e.contains("notices_rendered_check")), "{refused:?}");
    server
        .psql(&db, &format!("ALTER TABLE notices DROP CONSTRAINT notices_rendered_check; {partial}"))
        .await
        .unwrap_or_else(|e| panic!("make a partial row: {e}"));
    match old.get(&after).await {
        Err(LedgerError::Corrupt(msg)) => assert!(msg.contains("template"), "{msg}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[tokio::test]
async fn postgres_tls_verifies_the_server_and_is_never_dropped_silently() {
    let server = postgres_server().await;
    let db = server.create_database("tls").await;
    let ca = server.ca_certificate().display().to_string();
    let port = server.port();

    // Verified against the CA given in the URL, by IP address and by host name.
    for host in ["127.0.0.1", "localhost"] {
        let url = format!("postgres://postgres@{host}:{port}/{db}?sslmode=require&sslrootcert={ca}");
        let ledger = migrated(&url).await;
        mint(&ledger, &request(&fresh_key(), t(0))).await;
        let sessions = server
            .psql(&db, "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE s.ssl AND a.application_name = 'notice-ledger'")
            .await
            .unwrap_or_else(|e| panic!("psql: {e}"));
        assert_ne!(sessions, "0", "the ledger's sessions use TLS");
    }

    // A certificate nobody vouches for is refused, not accepted.
    let url = format!("postgres://postgres@127.0.0.1:{port}/{db}?sslmode=verify-full");
    match PostgresLedger::connect(&url).await {
        Err(LedgerError::Unavailable { detail: msg, .. }) => {
            assert!(msg.to_lowercase().contains("certificate"), "{msg}")
        }
        other => panic!("expected an untrusted certificate to be refused, got {other:?}"),
    }

    // An unreachable server fails fast, and the password never reaches the message.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap_or_else(|e| panic!("port: {e}"))
        .port();
    let url = format!("postgres://ada:hunter2@127.0.0.1:{closed}/x?sslmode=require&connect_timeout=2");
    match PostgresLedger::connect(&url).await {
        Err(LedgerError::Unavailable { detail: msg, .. }) => assert!(!msg.contains("hunter2"), "{msg}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

const SECRET: &str = "two-senders-secret";

fn job(i: usize) -> Job {
    let body = format!(
        r#"{{"subscription_id":"sub_race_{i}","period_start":"2026-10-01","kind":"renewal_notice_t72",
            "email":"user{i}@example.com","charge_at":"2026-10-04T09:00:00Z"}}"#
    );
    Job::parse(&body, &notice_texts::Icu).unwrap_or_else(|e| panic!("job {i}: {e}"))
}

fn now() -> DateTime<Utc> {
    "2026-10-02T00:00:00Z".parse().unwrap_or_else(|e| panic!("time: {e}"))
}

fn sender(ledger: PostgresLedger, mailer: Arc<RecordingMailer>) -> NoticeSender {
    NoticeSender::new(
        Arc::new(ledger),
        mailer,
        Arc::new(Renderer::builtin(ManageLinks::new(
            "https://billing.example.com/manage",
            NoticeSecret::new("links").unwrap_or_else(|e| panic!("{e}")),
        ))),
        WindowPolicy::default(),
        NoticeSecret::new(SECRET).unwrap_or_else(|e| panic!("{e}")),
    )
    .with_budget(SendBudget {
        send_timeout: Duration::from_secs(5),
        min_time_left: Duration::from_secs(1),
        ..SendBudget::default()
    })
}

/// Two sender processes (each with its own connection pool) get the same 40 jobs at the same
/// time: every notice goes out exactly once, and the ledger knows which send it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_concurrent_senders_send_each_notice_once() {
    let url = fresh_postgres_url("two_senders").await;
    migrated(&url).await;
    let mailers = [Arc::new(RecordingMailer::default()), Arc::new(RecordingMailer::default())];
    let mut senders = Vec::new();
    for mailer in &mailers {
        let ledger = PostgresLedger::connect_with_pool_size(&url, 4).await.unwrap_or_else(|e| panic!("{e}"));
        senders.push(Arc::new(sender(ledger, Arc::clone(mailer))));
    }
    let jobs: Vec<Job> = (0..40).map(job).collect();

    let mut runs = tokio::task::JoinSet::new();
    for (which, sender) in senders.iter().enumerate() {
        for job in &jobs {
            let (job, sender) = (job.clone(), Arc::clone(sender));
            runs.spawn(async move { (which, sender.deliver(&job, DeliverContext::at(now())).await) });
        }
    }
    let mut sent_by_key: HashMap<String, Vec<String>> = HashMap::new();
    while let Some(joined) = runs.join_next().await {
        let (which, delivery) = joined.unwrap_or_else(|e| panic!("task: {e}"));
        let key = delivery.key.unwrap_or_else(|| panic!("valid jobs have keys")).as_str().to_owned();
        match delivery.outcome {
            Outcome::Sent { message_id } => {
                sent_by_key.entry(key).or_default().push(format!("{which}:{message_id}"))
            }
            // Already sent by the other, or still in flight there: the queue would bring it back.
            Outcome::Suppressed { state: RowState::Sent } | Outcome::InFlight { .. } => {}
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    let mails: usize = mailers.iter().map(|m| m.sent().len()).sum();
    assert_eq!(mails, 40, "one mail per notice across both senders");
    assert_eq!(sent_by_key.len(), 40);
    assert!(sent_by_key.values().all(|sends| sends.len() == 1), "{sent_by_key:?}");

    let secret = NoticeSecret::new(SECRET).unwrap_or_else(|e| panic!("{e}"));
    let keys: Vec<_> = jobs.iter().map(|j| j.key(&secret)).collect();
    let check = migrated(&url).await;
    let rows = check.get_many(&keys).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows.len(), 40);
    for r in rows {
        assert_eq!(r.state, RowState::Sent);
        let committed = r.message_id.unwrap_or_else(|| panic!("sent without a message id"));
        let recorded = &sent_by_key[r.key.as_str()][0];
        assert!(recorded.ends_with(&format!(":{committed}")), "{recorded} vs {committed}");
    }
}

/// The Lambdas' choice: a `postgres://` URL wins, else the DynamoDB table; nothing about a bad or
/// unreachable URL leaks its password.
#[tokio::test]
async fn lambda_ledger_selection_prefers_a_postgres_url_over_the_table() {
    let sdk = aws_config::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .build();
    let url = fresh_postgres_url("select").await;
    let direct = migrated(&url).await;

    let chosen = match ledger_for(&sdk, Some(&url), Some("notices"), 400).await {
        Ok(ledger) => ledger,
        Err(e) => panic!("postgres ledger: {e}"),
    };
    let key = fresh_key();
    mint(&*chosen, &request(&key, t(0))).await;
    assert_eq!(row(&direct, &key).await.state, RowState::Claimed, "the claim landed in PostgreSQL");

    let refuses = |result: Result<Arc<dyn Ledger>, ConfigError>, name: &str| match result {
        Ok(_) => panic!("expected {name} to be refused"),
        Err(ConfigError::Invalid { name: n, reason }) => {
            assert_eq!(n, name);
            assert!(!reason.contains("hunter2"), "{reason}");
        }
        Err(e) => panic!("expected Invalid({name}), got {e}"),
    };
    refuses(
        ledger_for(&sdk, Some("mysql://ada:hunter2@db/x"), Some("notices"), 400).await,
        "NOTICE_LEDGER_URL",
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap_or_else(|e| panic!("port: {e}"))
        .port();
    let unreachable = format!("postgres://ada:hunter2@127.0.0.1:{closed}/x?connect_timeout=2");
    // A store that cannot be reached is the setting's error with the ledger's typed one inside,
    // so a caller tells it by its kind; the password is never in it.
    match ledger_for(&sdk, Some(&unreachable), None, 400).await {
        Ok(_) => panic!("expected an unreachable PostgreSQL to be refused"),
        Err(ConfigError::Ledger { name, error }) => {
            assert_eq!(name, "NOTICE_LEDGER_URL");
            assert!(matches!(error.fault(), Some(notice_ledger::Fault::Unreachable(_))), "{error}");
            assert!(!error.to_string().contains("hunter2"), "{error}");
        }
        Err(e) => panic!("expected Ledger(NOTICE_LEDGER_URL), got {e}"),
    }
    refuses(ledger_for(&sdk, None, Some("notices"), 7).await, "NOTICE_RETENTION_DAYS");

    assert!(matches!(ledger_for(&sdk, None, None, 400).await, Err(ConfigError::Missing("NOTICE_TABLE"))));
    assert!(ledger_for(&sdk, Some(""), Some("notices"), 400).await.is_ok(), "empty URL: the DynamoDB table");
}

/// The sender's gate follows its ledger: `NOTICE_LEDGER_URL` opens the buckets in the same store
/// (PostgreSQL table `rate_buckets`, the SQLite file), never somewhere else — and so does the
/// key check (`ledger_meta`).
#[tokio::test]
async fn each_ledger_url_opens_the_rate_buckets_beside_its_ledger() {
    use notice_ledger::rate::{Applied, BucketState};
    use notice_setup::ledger_url::LedgerUrl;

    let server = postgres_server().await;
    let db = server.create_database("buckets_url").await;
    migrated(&server.url(&db)).await;
    let opened = LedgerUrl::parse(&server.url(&db))
        .unwrap_or_else(|e| panic!("{e}"))
        .open_with_buckets(None, 400)
        .await
        .unwrap_or_else(|e| panic!("open: {e}"));
    let written = opened.buckets.reset("pg.example", 42, 0).await;
    assert_eq!(written.unwrap_or_else(|e| panic!("{e}")), Applied::Done(BucketState { tat_us: 42 }));
    let stored = server
        .psql(&db, "SELECT tat_us FROM rate_buckets WHERE domain = 'pg.example'")
        .await
        .unwrap_or_else(|e| panic!("psql: {e}"));
    assert_eq!(stored, "42");
    let check = KeyCheck::parse(&format!("v1:{}", "d".repeat(64))).unwrap_or_else(|e| panic!("{e}"));
    opened.key_checks.record_key_check(&check).await.unwrap_or_else(|e| panic!("record: {e}"));
    let stored = server
        .psql(&db, "SELECT value FROM ledger_meta WHERE name = 'key_check'")
        .await
        .unwrap_or_else(|e| panic!("psql: {e}"));
    assert_eq!(stored, check.to_stored(), "the key check is kept in the ledger's database");

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("ledger.db");
    let url = LedgerUrl::parse(&format!("sqlite:{}", path.display())).unwrap_or_else(|e| panic!("{e}"));
    let opened = url.open_with_buckets(None, 400).await.unwrap_or_else(|e| panic!("open: {e}"));
    let written = opened.buckets.reset("lite.example", 7, 0).await;
    assert_eq!(written.unwrap_or_else(|e| panic!("{e}")), Applied::Done(BucketState { tat_us: 7 }));
    let again = SqliteLedger::open(&path).unwrap_or_else(|e| panic!("{e}")).buckets();
    assert_eq!(
        again.load("lite.example").await.unwrap_or_else(|e| panic!("{e}")),
        Some(BucketState { tat_us: 7 }),
        "another process on the file sees the same bucket"
    );
    opened.key_checks.record_key_check(&check).await.unwrap_or_else(|e| panic!("record: {e}"));
    let again = SqliteLedger::open(&path).unwrap_or_else(|e| panic!("{e}")).key_checks();
    assert_eq!(
        again.key_check().await.unwrap_or_else(|e| panic!("{e}")),
        Some(check),
        "the key check is in the file"
    );
}
