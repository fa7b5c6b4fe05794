//! The DynamoDB ledger against the emulator, on a table created from `template.yaml`: the same
//! conditions as the in-memory and SQLite ledgers, plus the sparse open-claims index.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Duration, TimeZone, Utc};
use notice_e2e::{start_moto, Moto};
use notice_ledger::ledger::dynamodb::DynamoLedger;
use notice_ledger::ledger::{
    Claim, ClaimOutcome, ClaimRequest, ClaimToken, DeliveryStatus, EvidenceEffect, Ledger, LedgerRow, Origin,
    ProviderEvidence, RowState,
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
    let ledger = Arc::new(DynamoLedger::new(notice_ledger::aws::dynamodb_client(&cfg), TABLE));
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
async fn concurrent_claims_mint_exactly_once() {
    let f = fixture().await;
    for _ in 0..10 {
        let key = key();
        let (a, b) = (request(&key, t(0)), request(&key, t(0)));
        let (ra, rb) = tokio::join!(f.ledger.claim(&a), f.ledger.claim(&b));
        let outcomes = [ra.expect("claim a"), rb.expect("claim b")];
        let minted: Vec<&Claim> = outcomes
            .iter()
            .filter_map(|o| match o {
                ClaimOutcome::Minted(c) => Some(c),
                ClaimOutcome::Held(_) => None,
            })
            .collect();
        assert_eq!(minted.len(), 1, "exactly one claim wins: {outcomes:?}");
        let held = outcomes.iter().find_map(|o| match o {
            ClaimOutcome::Held(row) => Some(row),
            ClaimOutcome::Minted(_) => None,
        });
        let held = held.expect("the loser sees the winner's row");
        assert_eq!(held.state, RowState::Claimed);
        assert_eq!(held.claim_token.as_ref(), Some(&minted[0].token));
    }
}

#[tokio::test]
async fn a_claim_recognises_its_own_token() {
    let f = fixture().await;
    let key = key();
    let req = request(&key, t(0));
    let first = f.mint(&req).await;
    // Same request again (an SDK retry whose first response was lost looks exactly like this).
    let mut again = req.clone();
    again.at = t(5);
    let second = f.mint(&again).await;
    assert_eq!(first, second, "same token, same claim, original claim time");

    // Anyone else is held off and sees the row.
    match f.ledger.claim(&request(&key, t(6))).await.expect("claim") {
        ClaimOutcome::Held(row) => {
            assert_eq!(row.state, RowState::Claimed);
            assert_eq!(row.claimed_at, Some(t(0)));
            assert_eq!(row.subscription_id, "sub_8812");
            assert_eq!(row.content_digest.as_deref(), Some("digest-1"));
            assert_eq!(row.origin, Origin::Worker);
        }
        other => panic!("expected Held, got {other:?}"),
    }
}

#[tokio::test]
async fn commits_are_conditional_on_the_claim_token() {
    let f = fixture().await;
    let key = key();
    let claim = f.mint(&request(&key, t(0))).await;

    let stranger = Claim { token: ClaimToken::random(), ..claim.clone() };
    assert!(is_conflict(f.ledger.commit_sent(&stranger, "m-1", t(1)).await));
    assert!(is_conflict(f.ledger.commit_rejected(&stranger, "nope", t(1)).await));
    assert!(is_conflict(f.ledger.release(&stranger, "nope", t(1)).await));
    assert_eq!(f.row(&key).await.state, RowState::Claimed, "a stranger changed nothing");

    f.ledger.commit_sent(&claim, "m-1", t(2)).await.expect("own commit");
    let row = f.row(&key).await;
    assert_eq!(row.state, RowState::Sent);
    assert_eq!(row.message_id.as_deref(), Some("m-1"));
    assert_eq!(row.updated_at, t(2));
    assert_eq!(row.claim_token.as_ref(), Some(&claim.token));

    // Repeating the very same commit (an SDK retry) is recognised; anything else conflicts.
    f.ledger.commit_sent(&claim, "m-1", t(3)).await.expect("replayed commit");
    assert!(is_conflict(f.ledger.commit_sent(&claim, "m-2", t(3)).await));
    assert!(is_conflict(f.ledger.commit_rejected(&claim, "late", t(3)).await));
    assert!(is_conflict(f.ledger.release(&claim, "late", t(3)).await));
    assert_eq!(f.row(&key).await.message_id.as_deref(), Some("m-1"));

    // No row at all.
    let ghost = Claim { key: key_in(3), token: ClaimToken::random(), claimed_at: t(0) };
    assert!(is_conflict(f.ledger.commit_sent(&ghost, "m", t(1)).await));

    // Rejection is final too.
    let key2 = key_in(4);
    let claim2 = f.mint(&request(&key2, t(0))).await;
    f.ledger.commit_rejected(&claim2, "MessageRejected: bad address", t(1)).await.expect("reject");
    let row = f.row(&key2).await;
    assert_eq!(row.state, RowState::Rejected);
    assert_eq!(row.detail.as_deref(), Some("MessageRejected: bad address"));
    assert!(matches!(f.ledger.claim(&request(&key2, t(2))).await, Ok(ClaimOutcome::Held(_))));
}

#[tokio::test]
async fn released_keys_can_be_claimed_again() {
    let f = fixture().await;
    let key = key();
    let old = f.mint(&request(&key, t(0))).await;
    f.ledger.release(&old, "throttled: slow down", t(1)).await.expect("release");
    let row = f.row(&key).await;
    assert_eq!(row.state, RowState::Released);
    assert_eq!(row.detail.as_deref(), Some("throttled: slow down"));
    assert!(!f.item(&key).await.contains_key("open_shard"), "released rows leave the index");

    let new = f.mint(&request(&key, t(10))).await;
    assert_ne!(new.token, old.token);
    assert_eq!(new.claimed_at, t(10));
    let row = f.row(&key).await;
    assert_eq!((row.state, row.claimed_at, row.detail), (RowState::Claimed, Some(t(10)), None));

    // The slow worker whose claim was released cannot overwrite the new owner.
    assert!(is_conflict(f.ledger.commit_sent(&old, "m-old", t(11)).await));
    f.ledger.commit_sent(&new, "m-new", t(12)).await.expect("new owner commits");
    assert_eq!(f.row(&key).await.message_id.as_deref(), Some("m-new"));
}

#[tokio::test]
async fn missed_windows_are_recorded_once() {
    let f = fixture().await;
    let key = key();
    let req = request(&key, t(0));
    assert_eq!(f.ledger.record_missed(&req, "send window closed").await.expect("missed"), None);
    let row = f.row(&key).await;
    assert_eq!(row.state, RowState::Missed);
    assert_eq!(row.detail.as_deref(), Some("send window closed"));
    assert_eq!(row.claimed_at, None);
    assert!(!f.item(&key).await.contains_key("open_since"), "missed rows are not open claims");

    // Decided: neither a claim nor another miss changes it.
    match f.ledger.claim(&request(&key, t(1))).await.expect("claim") {
        ClaimOutcome::Held(held) => assert_eq!(held.state, RowState::Missed),
        other => panic!("expected Held, got {other:?}"),
    }
    let again = f.ledger.record_missed(&request(&key, t(2)), "again").await.expect("missed");
    assert_eq!(again.map(|r| r.state), Some(RowState::Missed));

    // A claimed key is returned, not overwritten.
    let busy = key_in(7);
    f.mint(&request(&busy, t(0))).await;
    let existing = f.ledger.record_missed(&request(&busy, t(1)), "late").await.expect("missed");
    assert_eq!(existing.map(|r| r.state), Some(RowState::Claimed));
    assert_eq!(f.row(&busy).await.state, RowState::Claimed);

    // A released key may be recorded as missed.
    let released = key_in(8);
    let claim = f.mint(&request(&released, t(0))).await;
    f.ledger.release(&claim, "paused", t(1)).await.expect("release");
    assert_eq!(f.ledger.record_missed(&request(&released, t(2)), "late").await.expect("missed"), None);
    assert_eq!(f.row(&released).await.state, RowState::Missed);
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
    f.ledger.record_missed(&request(&key_in(1), t(-100)), "late").await.expect("missed");

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
async fn provider_evidence_resolves_learns_and_detects_duplicates() {
    let f = fixture().await;

    // Resolve: a quarantined claim closed by the Send event.
    let quarantined = key();
    f.mint(&request(&quarantined, t(0))).await;
    let ev = evidence(&quarantined, "m-1", DeliveryStatus::Accepted, t(5));
    assert_eq!(f.ledger.apply_evidence(&ev).await.expect("evidence"), EvidenceEffect::Resolved);
    let row = f.row(&quarantined).await;
    assert_eq!(row.state, RowState::Sent);
    assert_eq!(row.message_id.as_deref(), Some("m-1"));
    assert_eq!(row.delivery_status, Some(DeliveryStatus::Accepted));
    assert_eq!(row.subscription_id, "sub_8812", "identity kept");
    // Idempotent: the same event again changes nothing.
    assert_eq!(f.ledger.apply_evidence(&ev).await.expect("evidence"), EvidenceEffect::Updated);
    assert_eq!(f.row(&quarantined).await, row);

    // Event times finer than the stored milliseconds do not defeat idempotency.
    let fine =
        evidence(&quarantined, "m-1", DeliveryStatus::Delivered, t(6) + Duration::nanoseconds(123_456));
    assert_eq!(f.ledger.apply_evidence(&fine).await.expect("evidence"), EvidenceEffect::Updated);
    let row = f.row(&quarantined).await;
    assert_eq!(f.ledger.apply_evidence(&fine).await.expect("evidence"), EvidenceEffect::Updated);
    assert_eq!(f.row(&quarantined).await, row);
    assert_eq!(row.updated_at, t(6));

    // Learned: a key the ledger never saw (restored from an older backup).
    let unknown = key();
    let ev = evidence(&unknown, "m-9", DeliveryStatus::Delivered, t(7));
    assert_eq!(f.ledger.apply_evidence(&ev).await.expect("evidence"), EvidenceEffect::Learned);
    let row = f.row(&unknown).await;
    assert_eq!((row.state, row.origin), (RowState::Sent, Origin::ProviderEvents));
    assert_eq!((row.subscription_id.as_str(), row.period_start.as_str(), row.kind.as_str()), ("", "", ""));
    assert_eq!(row.revision, 0);
    assert_eq!(row.message_id.as_deref(), Some("m-9"));
    assert_eq!(row.delivery_status, Some(DeliveryStatus::Delivered));
    assert!(f.item(&unknown).await.contains_key("expires_at"));
    // …and it now blocks sends.
    assert!(matches!(f.ledger.claim(&request(&unknown, t(8))).await, Ok(ClaimOutcome::Held(_))));

    // Out of order: a late Send never hides a Delivery.
    let ordered = key();
    let claim = f.mint(&request(&ordered, t(0))).await;
    f.ledger.commit_sent(&claim, "m-2", t(1)).await.expect("commit");
    for (status, at) in
        [(DeliveryStatus::Delivered, t(3)), (DeliveryStatus::Accepted, t(2)), (DeliveryStatus::Delayed, t(4))]
    {
        let effect = f.ledger.apply_evidence(&evidence(&ordered, "m-2", status, at)).await.expect("evidence");
        assert_eq!(effect, EvidenceEffect::Updated);
    }
    let row = f.row(&ordered).await;
    assert_eq!(row.delivery_status, Some(DeliveryStatus::Delivered));
    assert_eq!(row.updated_at, t(4));
    assert_eq!(row.state, RowState::Sent);

    // Duplicate: a second message id really went out; recorded once, first id kept.
    let dup = evidence(&ordered, "m-3", DeliveryStatus::Accepted, t(6));
    let expected = EvidenceEffect::DuplicateSend { first: "m-2".into(), second: "m-3".into() };
    assert_eq!(f.ledger.apply_evidence(&dup).await.expect("evidence"), expected);
    assert_eq!(f.ledger.apply_evidence(&dup).await.expect("evidence"), expected);
    let row = f.row(&ordered).await;
    assert_eq!(row.message_id.as_deref(), Some("m-2"));
    assert_eq!(row.duplicate_message_ids, vec!["m-3".to_owned()]);
    assert_eq!(row.delivery_status, Some(DeliveryStatus::Delivered));

    // Concurrent reconcilers applying different events to one row lose nothing.
    let busy = key();
    f.mint(&request(&busy, t(0))).await;
    let events = [
        evidence(&busy, "m-4", DeliveryStatus::Accepted, t(1)),
        evidence(&busy, "m-4", DeliveryStatus::Delivered, t(2)),
        evidence(&busy, "m-5", DeliveryStatus::Accepted, t(3)),
        evidence(&busy, "m-4", DeliveryStatus::Delayed, t(4)),
    ];
    let results = futures_join(&f.ledger, &events).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let row = f.row(&busy).await;
    assert_eq!(row.state, RowState::Sent);
    let first = row.message_id.clone().expect("message id");
    let other = if first == "m-4" { "m-5" } else { "m-4" };
    assert_eq!(row.duplicate_message_ids, vec![other.to_owned()]);
}

/// Applies all events concurrently.
async fn futures_join(
    ledger: &Arc<DynamoLedger>,
    events: &[ProviderEvidence],
) -> Vec<Result<EvidenceEffect, LedgerError>> {
    let handles: Vec<_> = events
        .iter()
        .cloned()
        .map(|ev| {
            let ledger = Arc::clone(ledger);
            tokio::spawn(async move { ledger.apply_evidence(&ev).await })
        })
        .collect();
    let mut results = Vec::new();
    for handle in handles {
        results.push(handle.await.expect("task"));
    }
    results
}

#[tokio::test]
async fn operator_actions_only_touch_open_claims() {
    let f = fixture().await;

    let stuck = key();
    f.mint(&request(&stuck, t(0))).await;
    f.ledger.operator_release(&stuck, "ada", "crashed before send", t(100)).await.expect("release");
    let row = f.row(&stuck).await;
    assert_eq!((row.state, row.origin), (RowState::Released, Origin::Operator));
    let detail = row.detail.expect("audit detail");
    assert!(detail.contains("ada") && detail.contains("crashed before send"), "{detail}");
    assert_eq!(f.mint(&request(&stuck, t(101))).await.claimed_at, t(101), "claimable again");

    // A sent row is never released: that is how duplicates happen.
    let sent = key();
    let claim = f.mint(&request(&sent, t(0))).await;
    f.ledger.commit_sent(&claim, "m-1", t(1)).await.expect("commit");
    assert!(is_conflict(f.ledger.operator_release(&sent, "ada", "oops", t(2)).await));
    assert!(is_conflict(f.ledger.operator_resolve_sent(&sent, "m-x", "ada", t(2)).await));
    let row = f.row(&sent).await;
    assert_eq!((row.state, row.message_id.as_deref()), (RowState::Sent, Some("m-1")));

    assert!(is_conflict(f.ledger.operator_release(&key(), "ada", "no row", t(2)).await));

    let resolved = key();
    f.mint(&request(&resolved, t(0))).await;
    f.ledger.operator_resolve_sent(&resolved, "m-found", "bob", t(50)).await.expect("resolve");
    let row = f.row(&resolved).await;
    assert_eq!((row.state, row.origin), (RowState::Sent, Origin::Operator));
    assert_eq!(row.message_id.as_deref(), Some("m-found"));
    assert!(row.detail.is_some_and(|d| d.contains("bob")));
    assert!(is_conflict(f.ledger.operator_release(&resolved, "ada", "late", t(51)).await));
}

#[tokio::test]
async fn backfill_never_overwrites() {
    let f = fixture().await;
    let key = key();
    let row = LedgerRow {
        key: key.clone(),
        state: RowState::Sent,
        origin: Origin::Backfill,
        claim_token: None,
        subscription_id: "sub_1".into(),
        period_start: "2026-09-01".into(),
        kind: "renewal_notice_t72".into(),
        revision: 0,
        content_digest: None,
        claimed_at: None,
        updated_at: t(-1000),
        message_id: Some("legacy-1".into()),
        detail: Some("backfilled".into()),
        delivery_status: None,
        duplicate_message_ids: Vec::new(),
    };
    assert!(f.ledger.backfill(&row).await.expect("backfill"));
    assert_eq!(f.row(&key).await, row);
    let other = LedgerRow { message_id: Some("legacy-2".into()), ..row.clone() };
    assert!(!f.ledger.backfill(&other).await.expect("backfill"));
    assert_eq!(f.row(&key).await, row, "unchanged");

    // Not over a claim either.
    let claimed = key_in(9);
    f.mint(&request(&claimed, t(0))).await;
    assert!(!f.ledger.backfill(&LedgerRow { key: claimed.clone(), ..row }).await.expect("backfill"));
    assert_eq!(f.row(&claimed).await.state, RowState::Claimed);
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
async fn rows_carry_a_ttl_and_malformed_items_are_reported() {
    let f = fixture().await;
    let ledger = DynamoLedger::new(notice_ledger::aws::dynamodb_client(&f.moto.sdk_config().await), TABLE)
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
    let first = expires(&f.item(&key).await);
    let want = (now + Duration::days(30)).timestamp();
    assert!((first - want).abs() <= 5, "{first} vs {want}");
    ledger.commit_sent(&claim, "m", now + Duration::seconds(60)).await.expect("commit");
    assert!(expires(&f.item(&key).await) >= first + 55, "refreshed on every write");

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
