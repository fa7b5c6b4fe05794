//! What only the DynamoDB ledger has, against the emulator on a table created from
//! `template.yaml`: the sparse open-claims index and its shards, batched reads, TTL, millisecond
//! storage, recognition of its own retried writes, and malformed items. The behaviour every
//! adapter shares is in `ledger_suite.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Duration, TimeZone, Utc};
use notice_dynamodb::ledger::DynamoLedger;
use notice_e2e::{start_moto, Moto};
use notice_ledger::ledger::ClaimLedger;
use notice_ledger::ledger::EvidenceLedger;
use notice_ledger::ledger::OperatorLedger;
use notice_ledger::ledger::QuarantineView;
use notice_ledger::ledger::RowReader;
use notice_ledger::ledger::{
    Claim, ClaimOutcome, ClaimRequest, ClaimToken, DeliveryStatus, EvidenceEffect, LedgerRow,
    ProviderEvidence, RenderedNotice, RowState,
};
use notice_ledger::{LedgerError, NoticeKey};

const TABLE: &str = "notices";

struct Fixture {
    moto: Moto,
    ledger: Arc<DynamoLedger>,
    raw: aws_sdk_dynamodb::Client,
}

async fn fixture() -> Fixture {
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    let cfg = moto.sdk_config().await;
    let ledger = Arc::new(DynamoLedger::new(notice_setup::aws::dynamodb_client(&cfg), TABLE));
    let raw = moto.dynamodb().await;
    Fixture { moto, ledger, raw }
}

impl Fixture {
    /// The stored item, bypassing the adapter.
    async fn item(&self, key: &NoticeKey) -> HashMap<String, AttributeValue> {
        self.raw
            .get_item()
            .table_name(TABLE)
            .key("notice_key", AttributeValue::S(key.as_str().to_owned()))
            .consistent_read(true)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GetItem: {e:?}\nmoto log:\n{}", self.moto.log()))
            .item
            .unwrap_or_default()
    }

    async fn row(&self, key: &NoticeKey) -> LedgerRow {
        self.ledger.get(key).await.expect("get").expect("row exists")
    }

    async fn mint(&self, req: &ClaimRequest) -> Claim {
        match self.ledger.claim(req).await.expect("claim") {
            ClaimOutcome::Minted(claim) => claim,
            held => panic!("expected a fresh claim, got {held:?}"),
        }
    }
}

/// A fresh key in shard `shard` (its first hex character); unique across the test binary.
fn key_in(shard: u8) -> NoticeKey {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    NoticeKey::parse(&format!("{:x}{:063x}", shard % 16, n)).expect("valid key")
}

fn key() -> NoticeKey {
    static SHARD: AtomicU64 = AtomicU64::new(0);
    key_in((SHARD.fetch_add(1, Ordering::Relaxed) % 16) as u8)
}

fn t(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + secs, 0).single().expect("valid time")
}

fn request(key: &NoticeKey, at: DateTime<Utc>) -> ClaimRequest {
    ClaimRequest {
        key: key.clone(),
        token: ClaimToken::random(),
        subscription_id: "sub_8812".into(),
        period_start: "2026-10-01".into(),
        kind: "renewal_notice_t72".into(),
        revision: 0,
        content_digest: "digest-1".into(),
        at,
        charge_at: Some(at + chrono::Duration::hours(72)),
        jurisdiction: Some("US-CA".into()),
        rendered: None,
        obligation: None,
        aliases: Vec::new(),
        on_quarantine_view: true,
    }
}

fn evidence(
    key: &NoticeKey,
    message_id: &str,
    status: DeliveryStatus,
    at: DateTime<Utc>,
) -> ProviderEvidence {
    ProviderEvidence { key: key.clone(), message_id: message_id.into(), status, at }
}

fn is_conflict<T: std::fmt::Debug>(result: Result<T, LedgerError>) -> bool {
    matches!(result, Err(LedgerError::Conflict(_)))
}

#[tokio::test]
async fn open_claims_lists_old_claims_across_shards_and_forgets_decided_ones() {
    let f = fixture().await;
    // 32 claims, two per shard, claimed at t(0), t(10), …; the cut is at t(200) → 20 are older.
    let mut claims = Vec::new();
    for i in 0..32u8 {
        let key = key_in(i);
        claims.push(f.mint(&request(&key, t(i64::from(i) * 10))).await);
    }
    // Decided rows never show up, however old.
    let sent = key_in(0);
    let c = f.mint(&request(&sent, t(-100))).await;
    f.ledger.commit_sent(&c, "m", t(1)).await.expect("commit");
    let missed = key_in(1);
    f.ledger.record_missed(&request(&missed, t(-100)), "late").await.expect("missed");
    let item = f.item(&missed).await;
    assert!(
        !item.contains_key("open_shard") && !item.contains_key("open_since"),
        "missed rows are not open claims"
    );

    let cut = t(200);
    let open = f.ledger.open_claims(cut, 100).await.expect("open claims");
    let expected: Vec<&NoticeKey> = claims.iter().take(20).map(|c| &c.key).collect();
    assert_eq!(
        open.iter().map(|r| &r.key).collect::<Vec<_>>(),
        expected,
        "oldest first, only before the cut"
    );
    assert!(open.iter().all(|r| r.state == RowState::Claimed));

    let first5 = f.ledger.open_claims(cut, 5).await.expect("open claims");
    assert_eq!(first5.iter().map(|r| &r.key).collect::<Vec<_>>(), expected[..5].to_vec());
    assert!(f.ledger.open_claims(cut, 0).await.expect("open claims").is_empty());

    assert_eq!(f.ledger.count_open_claims(cut).await.expect("count"), (20, Some(t(0))));
    assert_eq!(f.ledger.count_open_claims(t(0)).await.expect("count"), (0, None));

    // Every way out of `claimed` removes the row from the index.
    f.ledger.commit_sent(&claims[0], "m0", t(300)).await.expect("commit");
    f.ledger.commit_rejected(&claims[1], "bad", t(300)).await.expect("reject");
    f.ledger.release(&claims[2], "throttled", t(300)).await.expect("release");
    f.ledger
        .operator_release(&claims[3].key, "ops@example", "stuck", t(300))
        .await
        .expect("operator release");
    f.ledger.operator_resolve_sent(&claims[4].key, "m4", "ops", t(300)).await.expect("operator resolve");
    f.ledger
        .apply_evidence(&evidence(&claims[5].key, "m5", DeliveryStatus::Accepted, t(300)))
        .await
        .expect("evidence");
    for claim in &claims[..6] {
        let item = f.item(&claim.key).await;
        assert!(!item.contains_key("open_shard") && !item.contains_key("open_since"), "{item:?}");
    }
    let open = f.ledger.open_claims(cut, 100).await.expect("open claims");
    assert_eq!(open.iter().map(|r| &r.key).collect::<Vec<_>>(), expected[6..].to_vec());
    assert_eq!(f.ledger.count_open_claims(cut).await.expect("count"), (14, Some(t(60))));

    // The index keys are the shard (first hex character) and the claim time in epoch ms.
    let item = f.item(&claims[6].key).await;
    assert_eq!(item.get("open_shard"), Some(&AttributeValue::S("6".into())));
    assert_eq!(item.get("open_since"), Some(&AttributeValue::N(t(60).timestamp_millis().to_string())));
}

#[tokio::test]
async fn retried_transitions_whose_result_stands_are_not_conflicts() {
    // The SDK retries writes whose response was lost; the second attempt finds its own result.
    let f = fixture().await;
    let key = key();
    let claim = f.mint(&request(&key, t(0))).await;
    f.ledger.commit_sent(&claim, "m-1", t(1)).await.expect("commit");
    f.ledger.commit_sent(&claim, "m-1", t(2)).await.expect("replayed commit");
    assert_eq!(f.row(&key).await.updated_at, t(1), "the replay wrote nothing");
    assert!(is_conflict(f.ledger.commit_sent(&claim, "m-2", t(2)).await));

    let released = key_in(5);
    let claim = f.mint(&request(&released, t(0))).await;
    f.ledger.release(&claim, "throttled", t(1)).await.expect("release");
    f.ledger.release(&claim, "throttled", t(2)).await.expect("replayed release");
    assert!(is_conflict(f.ledger.commit_rejected(&claim, "throttled", t(2)).await));

    let stuck = key_in(6);
    f.mint(&request(&stuck, t(0))).await;
    f.ledger.operator_release(&stuck, "ada", "stuck", t(5)).await.expect("operator release");
    f.ledger.operator_release(&stuck, "ada", "stuck", t(5)).await.expect("replayed operator release");
    assert!(is_conflict(f.ledger.operator_release(&stuck, "bob", "other", t(6)).await));
}

#[tokio::test]
async fn evidence_is_kept_at_millisecond_precision_and_learned_rows_expire() {
    let f = fixture().await;
    let key = key();
    f.mint(&request(&key, t(0))).await;
    // Event times finer than the stored milliseconds do not defeat idempotency.
    let fine = evidence(&key, "m-1", DeliveryStatus::Delivered, t(6) + Duration::nanoseconds(123_456));
    assert_eq!(f.ledger.apply_evidence(&fine).await.expect("evidence").effect, EvidenceEffect::Resolved);
    let row = f.row(&key).await;
    assert_eq!(row.updated_at, t(6));
    assert_eq!(f.ledger.apply_evidence(&fine).await.expect("evidence").effect, EvidenceEffect::Updated);
    assert_eq!(f.row(&key).await, row);

    let unknown = key_in(4);
    let ev = evidence(&unknown, "m-9", DeliveryStatus::Delivered, t(7));
    assert_eq!(f.ledger.apply_evidence(&ev).await.expect("evidence").effect, EvidenceEffect::Learned);
    assert!(f.item(&unknown).await.contains_key("expires_at"), "learned rows carry the TTL too");
}

#[tokio::test]
async fn get_many_reads_more_than_one_batch() {
    let f = fixture().await;
    let keys: Vec<NoticeKey> = (0..230).map(|_| key()).collect();
    let writes: Vec<_> = keys
        .iter()
        .map(|k| {
            let ledger = Arc::clone(&f.ledger);
            let req = request(k, t(0));
            tokio::spawn(async move { ledger.claim(&req).await })
        })
        .collect();
    for w in writes {
        assert!(matches!(w.await.expect("task"), Ok(ClaimOutcome::Minted(_))));
    }
    let mut ask: Vec<NoticeKey> = keys.clone();
    ask.extend((0..20).map(|_| key())); // missing keys are simply absent
    ask.push(keys[0].clone()); // a repeated key is answered once
    let rows = f.ledger.get_many(&ask).await.expect("get_many");
    assert_eq!(rows.iter().map(|r| &r.key).collect::<Vec<_>>(), keys.iter().collect::<Vec<_>>());
    assert!(f.ledger.get_many(&[]).await.expect("get_many").is_empty());
}

#[tokio::test]
async fn only_decided_rows_carry_a_ttl_and_malformed_items_are_reported() {
    let f = fixture().await;
    let ledger = DynamoLedger::new(notice_setup::aws::dynamodb_client(&f.moto.sdk_config().await), TABLE)
        .with_retention(30);
    assert_eq!(ledger.table(), TABLE);
    let key = key();
    let now = Utc::now();
    let claim = match ledger.claim(&request(&key, now)).await.expect("claim") {
        ClaimOutcome::Minted(c) => c,
        other => panic!("{other:?}"),
    };
    let expires = |item: &HashMap<String, AttributeValue>| match item.get("expires_at") {
        Some(AttributeValue::N(n)) => n.parse::<i64>().expect("epoch seconds"),
        other => panic!("expires_at: {other:?}"),
    };
    assert!(
        !f.item(&key).await.contains_key("expires_at"),
        "an open claim has no expiry: TTL must never delete a claim nobody resolved"
    );
    let committed_at = now + Duration::seconds(60);
    ledger.commit_sent(&claim, "m", committed_at).await.expect("commit");
    let decided = expires(&f.item(&key).await);
    let want = (committed_at + Duration::days(30)).timestamp();
    assert!(
        (decided - want).abs() <= 5,
        "decided rows expire retention after their last write: {decided} vs {want}"
    );

    // A row whose state someone edited by hand into something the ledger does not know.
    let bad = key_in(2);
    f.mint(&request(&bad, t(0))).await;
    f.raw
        .update_item()
        .table_name(TABLE)
        .key("notice_key", AttributeValue::S(bad.as_str().to_owned()))
        .update_expression("SET #s = :v")
        .expression_attribute_names("#s", "state")
        .expression_attribute_values(":v", AttributeValue::S("pending".into()))
        .send()
        .await
        .expect("raw update");
    match f.ledger.get(&bad).await {
        Err(LedgerError::Corrupt(msg)) => assert!(msg.contains("state"), "{msg}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// An attribute value as DynamoDB's JSON (the types a ledger row uses).
fn value_json(v: &AttributeValue) -> serde_json::Value {
    match v {
        AttributeValue::S(s) => serde_json::json!({ "S": s }),
        AttributeValue::N(n) => serde_json::json!({ "N": n }),
        AttributeValue::Bool(b) => serde_json::json!({ "BOOL": b }),
        AttributeValue::Null(b) => serde_json::json!({ "NULL": b }),
        AttributeValue::Ss(v) => serde_json::json!({ "SS": v }),
        AttributeValue::L(v) => serde_json::json!({ "L": v.iter().map(value_json).collect::<Vec<_>>() }),
        AttributeValue::M(m) => {
            serde_json::json!({ "M": m.iter().map(|(k, v)| (k.clone(), value_json(v))).collect::<serde_json::Map<_, _>>() })
        }
        other => panic!("no JSON form for {other:?} in this test"),
    }
}

/// DynamoDB may leave keys of a `BatchGetItem` unprocessed (throughput, size): the sender's batch
/// read asks again for exactly those and answers with every row — or, when they stay
/// unprocessed, fails (each record then reads on its own) rather than answer "no row".
#[tokio::test]
async fn a_batch_read_asks_again_for_unprocessed_keys_and_never_takes_them_for_absent() {
    let f = fixture().await;
    let k = key();
    assert!(matches!(f.ledger.claim(&request(&k, t(0))).await, Ok(ClaimOutcome::Minted(_))));
    let item: serde_json::Map<String, serde_json::Value> =
        f.item(&k).await.iter().map(|(name, v)| (name.clone(), value_json(v))).collect();
    let unprocessed = serde_json::json!({
        "Responses": { TABLE: [] },
        "UnprocessedKeys": { TABLE: { "Keys": [{ "notice_key": { "S": k.as_str() } }], "ConsistentRead": true } }
    });
    let answered = serde_json::json!({ "Responses": { TABLE: [item] }, "UnprocessedKeys": {} });
    let answered_again = answered.clone();
    let stub = notice_e2e::start_ses_stub(vec![
        notice_e2e::StubReply::Json(unprocessed.clone()),
        notice_e2e::StubReply::Json(answered),
    ])
    .await;
    let cfg = f.moto.sdk_config().await.to_builder().endpoint_url(stub.endpoint()).build();
    let via_stub = DynamoLedger::new(notice_setup::aws::dynamodb_client(&cfg), TABLE);
    let rows = via_stub.get_many(std::slice::from_ref(&k)).await.expect("get_many");
    assert_eq!(rows.len(), 1, "the unprocessed key was asked for again");
    assert_eq!((rows[0].key.clone(), rows[0].state), (k.clone(), RowState::Claimed));
    assert_eq!(stub.requests(), 2);

    let stuck = notice_e2e::start_ses_stub(vec![notice_e2e::StubReply::Json(unprocessed.clone())]).await;
    let cfg = f.moto.sdk_config().await.to_builder().endpoint_url(stuck.endpoint()).build();
    let via_stuck = DynamoLedger::new(notice_setup::aws::dynamodb_client(&cfg), TABLE);
    let err = via_stuck.get_many(std::slice::from_ref(&k)).await.expect_err("never answered");
    assert!(err.to_string().contains("unprocessed"), "{err}");

    // The sender's client reads through the lean client: the same answers, the same rounds.
    let lean = notice_e2e::start_ses_stub(vec![
        notice_e2e::StubReply::Json(unprocessed),
        notice_e2e::StubReply::Json(answered_again),
    ])
    .await;
    let cfg = f.moto.sdk_config().await.to_builder().endpoint_url(lean.endpoint()).build();
    let client = notice_setup::aws::dynamodb_client(&cfg);
    assert!(client.lean().endpoint().is_some(), "the sender's client has the lean path");
    let via_lean = DynamoLedger::new(client, TABLE);
    let rows = via_lean.get_many(std::slice::from_ref(&k)).await.expect("get_many (lean)");
    assert_eq!((rows.len(), rows[0].state), (1, RowState::Claimed));
    assert_eq!(lean.requests(), 2, "asked again for the unprocessed key");
    // Against the emulator itself: the lean batch read finds the row and leaves absent keys out.
    let real = DynamoLedger::new(notice_setup::aws::dynamodb_client(&f.moto.sdk_config().await), TABLE);
    let rows = real.get_many(&[k.clone(), key()]).await.expect("get_many (moto)");
    assert_eq!(rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>(), vec![k.clone()]);
}

/// The evidence attributes (charge time in epoch ms, jurisdiction) reach the item through the one
/// write path (the lean client), from two clients alike, on claims and missed rows, and a commit
/// (an `UpdateItem` that rewrites only what it sets) keeps them.
#[tokio::test]
async fn evidence_attributes_are_written_by_the_lean_client_and_the_sdk_alike() {
    let f = fixture().await;
    let second = DynamoLedger::new(notice_setup::aws::dynamodb_client(&f.moto.sdk_config().await), TABLE);
    let charge = t(360_000);
    let expected = |item: &HashMap<String, AttributeValue>, what: &str| {
        assert_eq!(
            item.get("charge_at"),
            Some(&AttributeValue::N(charge.timestamp_millis().to_string())),
            "{what}"
        );
        assert_eq!(item.get("jurisdiction"), Some(&AttributeValue::S("US-CA".into())), "{what}");
    };
    for (ledger, path) in [(&*f.ledger, "lean client"), (&second, "a second client")] {
        let evidence = |k: &NoticeKey| ClaimRequest {
            charge_at: Some(charge),
            jurisdiction: Some("US-CA".into()),
            ..request(k, t(0))
        };
        let claimed = key();
        let ClaimOutcome::Minted(claim) = ledger.claim(&evidence(&claimed)).await.expect("claim") else {
            panic!("{path}: expected a fresh claim")
        };
        expected(&f.item(&claimed).await, &format!("{path}: claim"));
        ledger.commit_sent(&claim, "ses-1", t(1)).await.expect("commit");
        expected(&f.item(&claimed).await, &format!("{path}: after the commit"));
        let missed = key();
        assert_eq!(ledger.record_missed(&evidence(&missed), "closed").await.expect("missed"), None);
        expected(&f.item(&missed).await, &format!("{path}: missed"));
    }
    // A row written before the attributes existed reads back without them.
    let old = key();
    let bare = ClaimRequest { charge_at: None, jurisdiction: None, ..request(&old, t(0)) };
    f.mint(&bare).await;
    let item = f.item(&old).await;
    assert!(!item.contains_key("charge_at") && !item.contains_key("jurisdiction"), "{item:?}");
    assert_eq!((f.row(&old).await.charge_at, f.row(&old).await.jurisdiction), (None, None));
}

/// What rendered the message (configuration version, template, digest of the rendering) reaches
/// the item through the one write path from two clients, on claims and missed rows, and stays through a commit; an
/// item holding only part of it — someone removed an attribute by hand — reads as corrupt.
#[tokio::test]
async fn rendered_notice_attributes_are_written_by_both_paths_and_partial_ones_are_corrupt() {
    let f = fixture().await;
    let second = DynamoLedger::new(notice_setup::aws::dynamodb_client(&f.moto.sdk_config().await), TABLE);
    let rendered = RenderedNotice {
        config_version: "builtin:0a1b2c".into(),
        template: "annual_renewal/default".into(),
        rendered_digest: "5e".repeat(32),
    };
    let expected = |item: &HashMap<String, AttributeValue>, what: &str| {
        let text = |name: &str| match item.get(name) {
            Some(AttributeValue::S(v)) => v.clone(),
            other => panic!("{what}: {name} is {other:?}"),
        };
        let stored = (text("config_version"), text("template"), text("rendered_digest"));
        assert_eq!(stored, (rendered.config_version.clone(), rendered.template.clone(), "5e".repeat(32)));
    };
    for (ledger, path) in [(&*f.ledger, "lean client"), (&second, "a second client")] {
        let claimed = key();
        let req = request(&claimed, t(0)).with_rendered(rendered.clone());
        let ClaimOutcome::Minted(claim) = ledger.claim(&req).await.expect("claim") else {
            panic!("{path}: expected a fresh claim")
        };
        expected(&f.item(&claimed).await, &format!("{path}: claim"));
        ledger.commit_sent(&claim, "ses-1", t(1)).await.expect("commit");
        expected(&f.item(&claimed).await, &format!("{path}: after the commit"));
        assert_eq!(f.row(&claimed).await.rendered.as_ref(), Some(&rendered), "{path}: read back");
        let missed = key();
        let late = request(&missed, t(0)).with_rendered(rendered.clone());
        assert_eq!(ledger.record_missed(&late, "closed").await.expect("missed"), None);
        expected(&f.item(&missed).await, &format!("{path}: missed"));
    }
    let bare = key();
    f.mint(&request(&bare, t(0))).await;
    let item = f.item(&bare).await;
    assert!(!item.contains_key("config_version") && !item.contains_key("template"), "{item:?}");
    assert_eq!(f.row(&bare).await.rendered, None);

    let partial = key();
    f.mint(&request(&partial, t(0)).with_rendered(rendered.clone())).await;
    f.raw
        .update_item()
        .table_name(TABLE)
        .key("notice_key", AttributeValue::S(partial.as_str().to_owned()))
        .update_expression("REMOVE #d")
        .expression_attribute_names("#d", "rendered_digest")
        .send()
        .await
        .expect("raw update");
    match f.ledger.get(&partial).await {
        Err(LedgerError::Corrupt(msg)) => assert!(msg.contains("rendered_digest"), "{msg}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[tokio::test]
async fn the_key_check_item_is_kept_once_never_expires_and_no_reader_takes_it_for_a_row() {
    use notice_dynamodb::keycheck::KEY_CHECK_ITEM_KEY;
    use notice_dynamodb::DynamoKeyCheck;
    use notice_ledger::keycheck::{KeyCheck, KeyCheckStore};

    let f = fixture().await;
    let cfg = f.moto.sdk_config().await;
    let client = || notice_setup::aws::dynamodb_client(&cfg);
    let store = DynamoKeyCheck::new(client(), TABLE);
    let check = |c: char| KeyCheck::parse(&format!("v1:{}", c.to_string().repeat(64))).expect("check");
    assert_eq!(store.key_check().await.expect("read"), None);
    assert_eq!(store.record_key_check(&check('a')).await.expect("record"), check('a'));
    // Another process (a new client) with another secret is told the first check.
    let reopened = DynamoKeyCheck::new(client(), TABLE);
    assert_eq!(reopened.key_check().await.expect("read"), Some(check('a')));
    assert_eq!(reopened.record_key_check(&check('b')).await.expect("record"), check('a'));

    // The item: its key and the stored form, nothing that would put it in the open-claims index
    // or under TTL.
    let item = f
        .raw
        .get_item()
        .table_name(TABLE)
        .key("notice_key", AttributeValue::S(KEY_CHECK_ITEM_KEY.to_owned()))
        .consistent_read(true)
        .send()
        .await
        .expect("GetItem")
        .item
        .expect("the key check item");
    let mut names: Vec<&str> = item.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["key_check", "notice_key"]);
    assert_eq!(item.get("key_check"), Some(&AttributeValue::S(check('a').to_stored())));

    // Beside an open claim, a rate bucket and the key check, readers see only the claim.
    let open = key_in(5);
    f.mint(&request(&open, t(0))).await;
    let now_us = Utc::now().timestamp_micros();
    notice_ledger::rate::BucketStore::reset(
        &notice_dynamodb::DynamoBuckets::new(client(), TABLE),
        "example.com",
        now_us + 1_000_000,
        now_us,
    )
    .await
    .expect("bucket");
    let keys = f.ledger.keys_with_prefix("", 100).await.expect("keys");
    assert_eq!(keys, vec![open.clone()]);
    let (count, _) = f.ledger.count_open_claims(t(10)).await.expect("count");
    assert_eq!(count, 1);
    let listed = f.ledger.open_claims(t(10), 10).await.expect("open claims");
    assert_eq!(listed.iter().map(|r| &r.key).collect::<Vec<_>>(), vec![&open]);

    // A stored value that is not `<version>:<64 hex>`, or no value at all, is corrupt.
    for bad in [Some("v1:tampered"), None] {
        let mut put = f
            .raw
            .put_item()
            .table_name(TABLE)
            .item("notice_key", AttributeValue::S(KEY_CHECK_ITEM_KEY.to_owned()));
        if let Some(bad) = bad {
            put = put.item("key_check", AttributeValue::S(bad.to_owned()));
        }
        put.send().await.expect("raw put");
        assert!(matches!(store.key_check().await, Err(LedgerError::Corrupt(_))), "{bad:?}");
        assert!(matches!(store.record_key_check(&check('a')).await, Err(LedgerError::Corrupt(_))), "{bad:?}");
    }
}
