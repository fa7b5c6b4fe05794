//! A ledger file made before the evidence columns existed opens without a migration step.

use chrono::{TimeZone, Utc};
use notice_ledger::ledger::{
    ClaimLedger, ClaimOutcome, ClaimRequest, ClaimToken, RenderedNotice, RowReader, RowState,
};
use notice_ledger::NoticeKey;

use super::*;

/// The first schema, before `charge_at_ms` and `jurisdiction`.
const OLD_SCHEMA: &str = "
CREATE TABLE notices (
    notice_key TEXT PRIMARY KEY, state TEXT NOT NULL, origin TEXT NOT NULL, claim_token TEXT,
    subscription_id TEXT NOT NULL, period_start TEXT NOT NULL, kind TEXT NOT NULL,
    revision INTEGER NOT NULL, content_digest TEXT, claimed_at_ms INTEGER,
    updated_at_ms INTEGER NOT NULL, message_id TEXT, detail TEXT, delivery_status TEXT,
    duplicate_message_ids TEXT NOT NULL DEFAULT '[]'
);
INSERT INTO notices VALUES ('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 'sent', 'worker', 't',
    'sub_1', '2026-10-01', 'renewal_notice_t72', 0, 'd', 1790000000000, 1790000001000, 'ses-old', NULL,
    'delivered', '[]');
";

#[tokio::test]
async fn an_old_file_gains_the_evidence_columns_and_keeps_its_rows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.db");
    Connection::open(&path).and_then(|c| c.execute_batch(OLD_SCHEMA)).expect("old file");

    let ledger = SqliteLedger::open(&path).expect("open the old file");
    let old_key = NoticeKey::parse(&"a".repeat(64)).expect("key");
    let old = ledger.get(&old_key).await.expect("read").expect("the old row");
    assert_eq!((old.message_id.as_deref(), old.charge_at, old.jurisdiction), (Some("ses-old"), None, None));

    let key = NoticeKey::parse(&"b".repeat(64)).expect("key");
    let at = Utc.timestamp_opt(1_790_000_000, 0).single().expect("time");
    let req = ClaimRequest {
        key: key.clone(),
        token: ClaimToken::random(),
        subscription_id: "sub_1".into(),
        period_start: "2026-10-01".into(),
        kind: "annual_renewal".into(),
        revision: 0,
        content_digest: "d".into(),
        at,
        charge_at: Some(at + chrono::Duration::hours(100)),
        jurisdiction: Some("US-CA".into()),
        rendered: None,
        obligation: None,
        aliases: Vec::new(),
        on_quarantine_view: true,
    };
    assert!(matches!(ledger.claim(&req).await.expect("claim"), ClaimOutcome::Minted(_)));
    let row = ledger.get(&key).await.expect("read").expect("row");
    assert_eq!((row.charge_at, row.jurisdiction.as_deref()), (req.charge_at, Some("US-CA")));
    drop(ledger);
    SqliteLedger::open(&path).expect("opening again adds nothing and fails nothing");
}

/// The schema with the charge evidence, before the rendered-notice columns.
const CHARGE_EVIDENCE_SCHEMA: &str = "
CREATE TABLE notices (
    notice_key TEXT PRIMARY KEY, state TEXT NOT NULL, origin TEXT NOT NULL, claim_token TEXT,
    subscription_id TEXT NOT NULL, period_start TEXT NOT NULL, kind TEXT NOT NULL,
    revision INTEGER NOT NULL, content_digest TEXT, claimed_at_ms INTEGER,
    updated_at_ms INTEGER NOT NULL, message_id TEXT, detail TEXT, delivery_status TEXT,
    duplicate_message_ids TEXT NOT NULL DEFAULT '[]', charge_at_ms INTEGER, jurisdiction TEXT
);
INSERT INTO notices VALUES ('cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc', 'sent', 'worker', 't',
    'sub_1', '2026-10-01', 'annual_renewal', 0, 'd', 1790000000000, 1790000001000, 'ses-old', NULL,
    'delivered', '[]', 1790360000000, 'US-CA');
";

fn claim_request(key: &NoticeKey, at: chrono::DateTime<Utc>) -> ClaimRequest {
    ClaimRequest {
        key: key.clone(),
        token: ClaimToken::random(),
        subscription_id: "sub_1".into(),
        period_start: "2026-10-01".into(),
        kind: "annual_renewal".into(),
        revision: 0,
        content_digest: "d".into(),
        at,
        charge_at: Some(at + chrono::Duration::hours(100)),
        jurisdiction: Some("DE".into()),
        rendered: None,
        obligation: None,
        aliases: Vec::new(),
        on_quarantine_view: true,
    }
}

fn rendered() -> RenderedNotice {
    RenderedNotice {
        config_version: "sha256:ab12cd34".into(),
        template: "annual_renewal/de".into(),
        rendered_digest: "7c".repeat(32),
    }
}

#[tokio::test]
async fn a_file_with_charge_evidence_gains_the_rendered_columns_and_stores_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.db");
    Connection::open(&path).and_then(|c| c.execute_batch(CHARGE_EVIDENCE_SCHEMA)).expect("older file");

    let ledger = SqliteLedger::open(&path).expect("open the older file");
    let old = ledger.get(&NoticeKey::parse(&"c".repeat(64)).expect("key")).await.expect("read").expect("row");
    assert_eq!((old.jurisdiction.as_deref(), old.rendered), (Some("US-CA"), None));

    let at = Utc.timestamp_opt(1_790_000_000, 0).single().expect("time");
    let with = NoticeKey::parse(&"d".repeat(64)).expect("key");
    let req = claim_request(&with, at).with_rendered(rendered());
    assert!(matches!(ledger.claim(&req).await.expect("claim"), ClaimOutcome::Minted(_)));
    assert_eq!(ledger.get(&with).await.expect("read").expect("row").rendered, Some(rendered()));

    let without = NoticeKey::parse(&"e".repeat(64)).expect("key");
    assert!(matches!(
        ledger.claim(&claim_request(&without, at)).await.expect("claim"),
        ClaimOutcome::Minted(_)
    ));
    assert_eq!(ledger.get(&without).await.expect("read").expect("row").rendered, None);

    let missed = NoticeKey::parse(&"f".repeat(64)).expect("key");
    let late = claim_request(&missed, at).with_rendered(rendered());
    assert_eq!(ledger.record_missed(&late, "send window closed").await.expect("missed"), None);
    let row = ledger.get(&missed).await.expect("read").expect("row");
    assert_eq!((row.state, row.rendered), (RowState::Missed, Some(rendered())));

    // Someone cleared one of the three by hand: the row can no longer prove what was sent.
    Connection::open(&path)
        .and_then(|c| c.execute("UPDATE notices SET template = NULL WHERE notice_key = ?1", [with.as_str()]))
        .expect("tamper");
    match ledger.get(&with).await {
        Err(LedgerError::Corrupt(msg)) => assert!(msg.contains("template"), "{msg}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    drop(ledger);
    SqliteLedger::open(&path).expect("opening again adds nothing and fails nothing");
}

/// The schema with the rendered-notice evidence, before the obligation column.
const RENDERED_EVIDENCE_SCHEMA: &str = "
CREATE TABLE notices (
    notice_key TEXT PRIMARY KEY, state TEXT NOT NULL, origin TEXT NOT NULL, claim_token TEXT,
    subscription_id TEXT NOT NULL, period_start TEXT NOT NULL, kind TEXT NOT NULL,
    revision INTEGER NOT NULL, content_digest TEXT, claimed_at_ms INTEGER,
    updated_at_ms INTEGER NOT NULL, message_id TEXT, detail TEXT, delivery_status TEXT,
    duplicate_message_ids TEXT NOT NULL DEFAULT '[]', charge_at_ms INTEGER, jurisdiction TEXT,
    config_version TEXT, template TEXT, rendered_digest TEXT
);
INSERT INTO notices VALUES ('cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc', 'sent', 'worker', 't',
    'sub_1', '2026-10-01', 'annual_renewal', 0, 'd', 1790000000000, 1790000001000, 'ses-old', NULL,
    'delivered', '[]', 1790360000000, 'US-CA', 'sha256:ab12cd34', 'annual_renewal/de',
    '7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c');
";

/// A ledger file written before rows named their obligation rule opens, keeps its rows (they name
/// none), and from then on a claim — or a missed record — of a planned job keeps the rule.
#[tokio::test]
async fn a_file_with_rendered_evidence_gains_the_obligation_column_and_stores_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.db");
    Connection::open(&path).and_then(|c| c.execute_batch(RENDERED_EVIDENCE_SCHEMA)).expect("older file");

    let ledger = SqliteLedger::open(&path).expect("open the older file");
    let old = ledger.get(&NoticeKey::parse(&"c".repeat(64)).expect("key")).await.expect("read").expect("row");
    assert_eq!((old.rendered.is_some(), old.obligation), (true, None));

    let at = Utc.timestamp_opt(1_790_000_000, 0).single().expect("time");
    let owed = |key: &NoticeKey| ClaimRequest {
        obligation: Some("US-CA/ca-annual-term".into()),
        ..claim_request(key, at).with_rendered(rendered())
    };
    let claimed = NoticeKey::parse(&"d".repeat(64)).expect("key");
    assert!(matches!(ledger.claim(&owed(&claimed)).await.expect("claim"), ClaimOutcome::Minted(_)));
    let row = ledger.get(&claimed).await.expect("read").expect("row");
    assert_eq!(row.obligation.as_deref(), Some("US-CA/ca-annual-term"));

    let missed = NoticeKey::parse(&"f".repeat(64)).expect("key");
    assert_eq!(ledger.record_missed(&owed(&missed), "send window closed").await.expect("missed"), None);
    let row = ledger.get(&missed).await.expect("read").expect("row");
    assert_eq!((row.state, row.obligation.as_deref()), (RowState::Missed, Some("US-CA/ca-annual-term")));
    drop(ledger);
    SqliteLedger::open(&path).expect("opening again adds nothing and fails nothing");
}
