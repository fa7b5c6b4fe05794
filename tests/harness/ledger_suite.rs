//! The behaviour every ledger adapter must share, written once over `Arc<dyn Ledger>` and run
//! against each adapter by [`ledger_suite_tests!`](crate::ledger_suite_tests).
//!
//! Each case gets a fresh, empty ledger. Times are whole seconds, so the precision an adapter
//! stores (nanoseconds, microseconds, milliseconds) never decides a result.
//!
//! Adapters may differ in one place, and the suite accepts both answers: repeating a transition
//! whose result already stands (a retry after a lost reply) is `Ok` for DynamoDB and PostgreSQL and
//! a `Conflict` for memory and SQLite. Either way the row must be unchanged.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use notice_ledger::ledger::{
    Claim, ClaimOutcome, ClaimRequest, ClaimToken, DeliveryStatus, EvidenceEffect, Ledger, LedgerRow, Origin,
    ProviderEvidence, RowState,
};
use notice_ledger::{Identity, LedgerError, NoticeKey, NoticeSecret};
use tokio::task::JoinSet;

/// Runs every suite case as its own `#[tokio::test]` in the invoking module. `$fixture` is an
/// async fn returning a [`SuiteFixture`] over a fresh, empty ledger.
#[macro_export]
macro_rules! ledger_suite_tests {
    ($fixture:path) => {
        $crate::ledger_suite_tests!(@cases $fixture;
            concurrent_claims_mint_exactly_once,
            a_claim_recognises_its_own_token,
            commits_are_conditional_on_the_claim_token,
            released_keys_can_be_claimed_again,
            missed_windows_are_recorded_once,
            open_claims_lists_old_claims_oldest_first_within_the_limit,
            revisions_are_distinct_keys,
            provider_evidence_resolves_learns_and_detects_duplicates,
            concurrent_evidence_loses_nothing,
            operator_actions_only_touch_open_claims,
            backfill_never_overwrites,
            get_many_answers_in_the_callers_order,
        );
    };
    (@cases $fixture:path; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let fixture = $fixture().await;
                $crate::ledger_suite::$case(fixture.ledger()).await;
            }
        )*
    };
}

/// A fresh ledger plus whatever must stay alive while it is used (emulator, temp dir, …).
pub struct SuiteFixture {
    ledger: Arc<dyn Ledger>,
    _keep: Box<dyn std::any::Any + Send + Sync>,
}

impl SuiteFixture {
    pub fn new(ledger: Arc<dyn Ledger>, keep: impl std::any::Any + Send + Sync) -> Self {
        Self { ledger, _keep: Box::new(keep) }
    }

    pub fn ledger(&self) -> Arc<dyn Ledger> {
        Arc::clone(&self.ledger)
    }
}

// ── helpers ──

/// A fresh key whose first hex character is `shard`; unique across the test binary.
pub fn key_in(shard: u8) -> NoticeKey {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    NoticeKey::parse(&format!("{:x}{:063x}", shard % 16, n)).unwrap_or_else(|e| panic!("test key: {e}"))
}

/// A fresh key, spread over all shards.
pub fn fresh_key() -> NoticeKey {
    static SHARD: AtomicU64 = AtomicU64::new(0);
    key_in((SHARD.fetch_add(1, Ordering::Relaxed) % 16) as u8)
}

/// A fixed instant plus `secs` (whole seconds: every adapter stores them exactly).
pub fn t(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + secs, 0).single().unwrap_or_else(|| panic!("time {secs}"))
}

/// A worker's claim request for `key` at `at`, with a fresh token.
pub fn request(key: &NoticeKey, at: DateTime<Utc>) -> ClaimRequest {
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

pub fn evidence(
    key: &NoticeKey,
    message_id: &str,
    status: DeliveryStatus,
    at: DateTime<Utc>,
) -> ProviderEvidence {
    ProviderEvidence { key: key.clone(), message_id: message_id.into(), status, at }
}

pub fn is_conflict<T: std::fmt::Debug>(result: &Result<T, LedgerError>) -> bool {
    matches!(result, Err(LedgerError::Conflict(_)))
}

/// The stored row, which must exist.
pub async fn row(ledger: &dyn Ledger, key: &NoticeKey) -> LedgerRow {
    ledger
        .get(key)
        .await
        .unwrap_or_else(|e| panic!("get {}: {e}", key.prefix()))
        .unwrap_or_else(|| panic!("{} has no row", key.prefix()))
}

/// Claims `req`, which must mint.
pub async fn mint(ledger: &dyn Ledger, req: &ClaimRequest) -> Claim {
    match ledger.claim(req).await {
        Ok(ClaimOutcome::Minted(claim)) => claim,
        other => panic!("expected a fresh claim of {}, got {other:?}", req.key.prefix()),
    }
}

/// Claims `req`, which must be held off; returns the row that holds it.
pub async fn held(ledger: &dyn Ledger, req: &ClaimRequest) -> LedgerRow {
    match ledger.claim(req).await {
        Ok(ClaimOutcome::Held(row)) => row,
        other => panic!("expected {} to be held, got {other:?}", req.key.prefix()),
    }
}

/// The claim that holds `key`, as its owner knows it.
async fn own_claim(ledger: &dyn Ledger, key: &NoticeKey) -> Claim {
    let stored = row(ledger, key).await;
    Claim {
        key: key.clone(),
        token: stored.claim_token.unwrap_or_else(|| panic!("{} is claimed without a token", key.prefix())),
        claimed_at: stored.claimed_at.unwrap_or_else(|| panic!("{} is claimed without a time", key.prefix())),
    }
}

/// A repeat of a transition that already happened: `Ok` (recognised retry) or `Conflict`, and
/// the row must not change either way.
async fn assert_repeat_changes_nothing(
    ledger: &dyn Ledger,
    key: &NoticeKey,
    what: &str,
    result: Result<(), LedgerError>,
    before: &LedgerRow,
) {
    assert!(matches!(result, Ok(()) | Err(LedgerError::Conflict(_))), "{what}: {result:?}");
    assert_eq!(&row(ledger, key).await, before, "{what} changed the row");
}

// ── cases ──

/// Many workers racing for each key: exactly one mints; everyone else sees the winner's row.
pub async fn concurrent_claims_mint_exactly_once(ledger: Arc<dyn Ledger>) {
    for _ in 0..10 {
        let key = fresh_key();
        let mut racers = JoinSet::new();
        for _ in 0..6 {
            let ledger = Arc::clone(&ledger);
            let req = request(&key, t(0));
            racers.spawn(async move { ledger.claim(&req).await });
        }
        let mut minted = Vec::new();
        let mut held_rows = Vec::new();
        while let Some(joined) = racers.join_next().await {
            match joined.unwrap_or_else(|e| panic!("claim task: {e}")) {
                Ok(ClaimOutcome::Minted(claim)) => minted.push(claim),
                Ok(ClaimOutcome::Held(row)) => held_rows.push(row),
                Err(e) => panic!("claim failed: {e}"),
            }
        }
        assert_eq!(minted.len(), 1, "exactly one claim wins: {minted:?}");
        assert_eq!(held_rows.len(), 5);
        for row in &held_rows {
            assert_eq!(row.state, RowState::Claimed);
            assert_eq!(row.claim_token.as_ref(), Some(&minted[0].token), "losers see the winner's claim");
        }
        let stored = row(&*ledger, &key).await;
        assert_eq!((stored.state, stored.claim_token), (RowState::Claimed, Some(minted[0].token.clone())));
    }
}

/// The same request again (a retry whose first reply was lost) is this attempt's own claim.
pub async fn a_claim_recognises_its_own_token(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let key = fresh_key();
    let req = request(&key, t(0));
    let first = mint(l, &req).await;
    assert_eq!(first.claimed_at, t(0));
    let again = ClaimRequest { at: t(5), ..req.clone() };
    assert_eq!(mint(l, &again).await, first, "same token, same claim, original claim time");

    let row = held(l, &request(&key, t(6))).await;
    assert_eq!(row.state, RowState::Claimed);
    assert_eq!(row.origin, Origin::Worker);
    assert_eq!(row.claim_token.as_ref(), Some(&req.token));
    assert_eq!(row.claimed_at, Some(t(0)));
    assert_eq!(row.updated_at, t(0));
    assert_eq!(
        (row.subscription_id.as_str(), row.period_start.as_str(), row.kind.as_str(), row.revision),
        ("sub_8812", "2026-10-01", "renewal_notice_t72", 0)
    );
    assert_eq!(row.content_digest.as_deref(), Some("digest-1"));
    assert_eq!((row.message_id, row.detail, row.delivery_status), (None, None, None));
    assert!(row.duplicate_message_ids.is_empty());
}

/// Only the holder of the claim token moves a claim, and a decided row stays decided.
pub async fn commits_are_conditional_on_the_claim_token(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let key = fresh_key();
    let claim = mint(l, &request(&key, t(0))).await;

    let stranger = Claim { token: ClaimToken::random(), ..claim.clone() };
    assert!(is_conflict(&l.commit_sent(&stranger, "m-1", t(1)).await));
    assert!(is_conflict(&l.commit_rejected(&stranger, "nope", t(1)).await));
    assert!(is_conflict(&l.release(&stranger, "nope", t(1)).await));
    assert_eq!(row(l, &key).await.state, RowState::Claimed, "a stranger changed nothing");

    l.commit_sent(&claim, "m-1", t(2)).await.unwrap_or_else(|e| panic!("own commit: {e}"));
    let sent = row(l, &key).await;
    assert_eq!(sent.state, RowState::Sent);
    assert_eq!(sent.message_id.as_deref(), Some("m-1"));
    assert_eq!(sent.updated_at, t(2));
    assert_eq!(sent.claim_token.as_ref(), Some(&claim.token));
    assert_eq!(sent.origin, Origin::Worker);

    let repeat = l.commit_sent(&claim, "m-1", t(3)).await;
    assert_repeat_changes_nothing(l, &key, "repeated commit", repeat, &sent).await;
    assert!(is_conflict(&l.commit_sent(&claim, "m-2", t(3)).await), "a different message id conflicts");
    assert!(is_conflict(&l.commit_rejected(&claim, "late", t(3)).await));
    assert!(is_conflict(&l.release(&claim, "late", t(3)).await));
    assert_eq!(row(l, &key).await, sent);

    let ghost = Claim { key: key_in(3), token: ClaimToken::random(), claimed_at: t(0) };
    assert!(is_conflict(&l.commit_sent(&ghost, "m", t(1)).await), "no row at all");

    // Rejection is final too.
    let rejected = fresh_key();
    let claim = mint(l, &request(&rejected, t(0))).await;
    l.commit_rejected(&claim, "MessageRejected: bad address", t(1)).await.unwrap_or_else(|e| panic!("{e}"));
    let row_after = row(l, &rejected).await;
    assert_eq!(row_after.state, RowState::Rejected);
    assert_eq!(row_after.detail.as_deref(), Some("MessageRejected: bad address"));
    assert_eq!(row_after.message_id, None);
    assert_eq!(held(l, &request(&rejected, t(2))).await.state, RowState::Rejected);
    let repeat = l.commit_rejected(&claim, "MessageRejected: bad address", t(3)).await;
    assert_repeat_changes_nothing(l, &rejected, "repeated rejection", repeat, &row_after).await;
}

/// A released claim may be claimed again, and the old holder can no longer commit.
pub async fn released_keys_can_be_claimed_again(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let key = fresh_key();
    let old = mint(l, &request(&key, t(0))).await;
    l.release(&old, "throttled: slow down", t(1)).await.unwrap_or_else(|e| panic!("release: {e}"));
    let released = row(l, &key).await;
    assert_eq!(released.state, RowState::Released);
    assert_eq!(released.detail.as_deref(), Some("throttled: slow down"));
    assert!(l.open_claims(t(100), 10).await.unwrap_or_else(|e| panic!("{e}")).is_empty());

    let new = mint(l, &request(&key, t(10))).await;
    assert_ne!(new.token, old.token);
    assert_eq!(new.claimed_at, t(10));
    let row_now = row(l, &key).await;
    assert_eq!((row_now.state, row_now.claimed_at, row_now.detail), (RowState::Claimed, Some(t(10)), None));
    assert_eq!(row_now.claim_token.as_ref(), Some(&new.token));

    // The slow worker whose claim was released cannot overwrite the new owner.
    assert!(is_conflict(&l.commit_sent(&old, "m-old", t(11)).await));
    assert!(is_conflict(&l.release(&old, "again", t(11)).await));
    l.commit_sent(&new, "m-new", t(12)).await.unwrap_or_else(|e| panic!("new owner commits: {e}"));
    assert_eq!(row(l, &key).await.message_id.as_deref(), Some("m-new"));
}

/// A closed window is recorded once, over nothing but a released row.
pub async fn missed_windows_are_recorded_once(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let key = fresh_key();
    assert_eq!(
        l.record_missed(&request(&key, t(0)), "send window closed").await.unwrap_or_else(|e| panic!("{e}")),
        None
    );
    let missed = row(l, &key).await;
    assert_eq!(missed.state, RowState::Missed);
    assert_eq!(missed.detail.as_deref(), Some("send window closed"));
    assert_eq!(missed.claimed_at, None);
    assert_eq!(missed.updated_at, t(0));
    assert!(
        l.open_claims(t(100), 10).await.unwrap_or_else(|e| panic!("{e}")).is_empty(),
        "not an open claim"
    );

    assert_eq!(held(l, &request(&key, t(1))).await.state, RowState::Missed, "decided: never claimed");
    let again = l.record_missed(&request(&key, t(2)), "again").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.map(|r| r.state), Some(RowState::Missed));
    assert_eq!(row(l, &key).await, missed, "unchanged");

    // A claimed key is returned, not overwritten.
    let busy = key_in(7);
    mint(l, &request(&busy, t(0))).await;
    let existing = l.record_missed(&request(&busy, t(1)), "late").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(existing.map(|r| r.state), Some(RowState::Claimed));
    assert_eq!(row(l, &busy).await.state, RowState::Claimed);

    // A sent key too.
    let sent = fresh_key();
    let claim = mint(l, &request(&sent, t(0))).await;
    l.commit_sent(&claim, "m", t(1)).await.unwrap_or_else(|e| panic!("{e}"));
    let existing = l.record_missed(&request(&sent, t(2)), "late").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(existing.map(|r| r.state), Some(RowState::Sent));

    // A released key may be recorded as missed.
    let released = key_in(8);
    let claim = mint(l, &request(&released, t(0))).await;
    l.release(&claim, "paused", t(1)).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        l.record_missed(&request(&released, t(2)), "late").await.unwrap_or_else(|e| panic!("{e}")),
        None
    );
    assert_eq!(row(l, &released).await.state, RowState::Missed);
}

/// The quarantine view: open claims older than the cut, oldest first, at most `limit`; every way
/// out of `claimed` leaves it, and decided rows never appear.
pub async fn open_claims_lists_old_claims_oldest_first_within_the_limit(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    // 32 claims, two per shard, claimed at t(0), t(10), …; the cut at t(200) leaves 20 older.
    // Claimed in reverse so that insertion order is not the answer.
    let keys: Vec<NoticeKey> = (0..32u8).map(key_in).collect();
    for (i, key) in keys.iter().enumerate().rev() {
        mint(l, &request(key, t(i as i64 * 10))).await;
    }
    // Decided rows never show up, however old.
    let sent = key_in(0);
    let c = mint(l, &request(&sent, t(-100))).await;
    l.commit_sent(&c, "m", t(1)).await.unwrap_or_else(|e| panic!("{e}"));
    l.record_missed(&request(&key_in(1), t(-100)), "late").await.unwrap_or_else(|e| panic!("{e}"));

    let cut = t(200);
    let open = l.open_claims(cut, 100).await.unwrap_or_else(|e| panic!("open claims: {e}"));
    let expected: Vec<&NoticeKey> = keys.iter().take(20).collect();
    assert_eq!(
        open.iter().map(|r| &r.key).collect::<Vec<_>>(),
        expected,
        "oldest first, only before the cut"
    );
    assert!(open.iter().all(|r| r.state == RowState::Claimed));
    assert_eq!(open[3].claimed_at, Some(t(30)));

    let first5 = l.open_claims(cut, 5).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first5.iter().map(|r| &r.key).collect::<Vec<_>>(), expected[..5].to_vec());
    assert!(l.open_claims(cut, 0).await.unwrap_or_else(|e| panic!("{e}")).is_empty());
    assert!(l.open_claims(t(0), 100).await.unwrap_or_else(|e| panic!("{e}")).is_empty(), "strictly before");

    // Every way out of `claimed` leaves the view.
    l.commit_sent(&own_claim(l, &keys[0]).await, "m0", t(300)).await.unwrap_or_else(|e| panic!("{e}"));
    l.commit_rejected(&own_claim(l, &keys[1]).await, "bad", t(300)).await.unwrap_or_else(|e| panic!("{e}"));
    l.release(&own_claim(l, &keys[2]).await, "throttled", t(300)).await.unwrap_or_else(|e| panic!("{e}"));
    l.operator_release(&keys[3], "ops@example", "stuck", t(300)).await.unwrap_or_else(|e| panic!("{e}"));
    l.operator_resolve_sent(&keys[4], "m4", "ops", t(300)).await.unwrap_or_else(|e| panic!("{e}"));
    l.apply_evidence(&evidence(&keys[5], "m5", DeliveryStatus::Accepted, t(300)))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let open = l.open_claims(cut, 100).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(open.iter().map(|r| &r.key).collect::<Vec<_>>(), expected[6..].to_vec());
}

/// A corrected notice (`revision` bumped) is a different key: it is claimed and sent on its own.
pub async fn revisions_are_distinct_keys(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let secret = NoticeSecret::new("suite-secret").unwrap_or_else(|e| panic!("{e}"));
    let subscription = format!("sub_rev_{}", fresh_key().prefix());
    let keys: Vec<NoticeKey> = [0u64, 1, 7]
        .iter()
        .map(|rev| {
            Identity::new(&subscription, "2026-10-01", "renewal_notice_t72", *rev)
                .unwrap_or_else(|e| panic!("identity: {e}"))
                .derive_key(&secret)
        })
        .collect();
    assert_eq!(keys.iter().collect::<HashSet<_>>().len(), 3, "one key per revision");

    for (key, rev) in keys.iter().zip([0u64, 1, 7]) {
        let req = ClaimRequest { revision: rev, subscription_id: subscription.clone(), ..request(key, t(0)) };
        let claim = mint(l, &req).await;
        l.commit_sent(&claim, &format!("m-rev-{rev}"), t(1)).await.unwrap_or_else(|e| panic!("{e}"));
        let stored = row(l, key).await;
        assert_eq!((stored.state, stored.revision), (RowState::Sent, rev));
        assert_eq!(stored.subscription_id, subscription);
    }
    let rows = l.get_many(&keys).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows.iter().map(|r| r.revision).collect::<Vec<_>>(), vec![0, 1, 7]);
}

/// Provider events resolve a quarantined claim, teach the ledger unknown sends, never move a row
/// backwards, and record a second message id once as a duplicate.
pub async fn provider_evidence_resolves_learns_and_detects_duplicates(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let apply = |ev: ProviderEvidence| async move {
        l.apply_evidence(&ev).await.unwrap_or_else(|e| panic!("apply evidence: {e}"))
    };

    // Resolve: a quarantined claim closed by the Send event.
    let quarantined = fresh_key();
    mint(l, &request(&quarantined, t(0))).await;
    let ev = evidence(&quarantined, "m-1", DeliveryStatus::Accepted, t(5));
    assert_eq!(apply(ev.clone()).await, EvidenceEffect::Resolved);
    let resolved = row(l, &quarantined).await;
    assert_eq!(resolved.state, RowState::Sent);
    assert_eq!(resolved.message_id.as_deref(), Some("m-1"));
    assert_eq!(resolved.delivery_status, Some(DeliveryStatus::Accepted));
    assert_eq!(resolved.updated_at, t(5));
    assert_eq!(resolved.subscription_id, "sub_8812", "identity kept");
    assert_eq!(resolved.origin, Origin::Worker);
    // Idempotent: the same event again changes nothing.
    assert_eq!(apply(ev).await, EvidenceEffect::Updated);
    assert_eq!(row(l, &quarantined).await, resolved);
    // Sub-second event times: applying the same event twice still changes nothing the second time.
    let fine =
        evidence(&quarantined, "m-1", DeliveryStatus::Delivered, t(6) + Duration::nanoseconds(123_456_789));
    assert_eq!(apply(fine.clone()).await, EvidenceEffect::Updated);
    let after_fine = row(l, &quarantined).await;
    assert_eq!(apply(fine).await, EvidenceEffect::Updated);
    assert_eq!(row(l, &quarantined).await, after_fine);

    // Released and missed rows also become sent: the evidence says it went out.
    for state in [RowState::Released, RowState::Missed] {
        let k = fresh_key();
        if state == RowState::Released {
            let c = mint(l, &request(&k, t(0))).await;
            l.release(&c, "throttled", t(1)).await.unwrap_or_else(|e| panic!("{e}"));
        } else {
            l.record_missed(&request(&k, t(0)), "late").await.unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(
            apply(evidence(&k, "m-x", DeliveryStatus::Accepted, t(2))).await,
            EvidenceEffect::Resolved
        );
        let r = row(l, &k).await;
        assert_eq!((r.state, r.message_id.as_deref()), (RowState::Sent, Some("m-x")), "{state}");
    }

    // Learned: a key the ledger never saw (restored from an older backup).
    let unknown = fresh_key();
    assert_eq!(
        apply(evidence(&unknown, "m-9", DeliveryStatus::Delivered, t(7))).await,
        EvidenceEffect::Learned
    );
    let learned = row(l, &unknown).await;
    assert_eq!((learned.state, learned.origin), (RowState::Sent, Origin::ProviderEvents));
    assert_eq!(
        (learned.subscription_id.as_str(), learned.period_start.as_str(), learned.kind.as_str()),
        ("", "", "")
    );
    assert_eq!(learned.revision, 0);
    assert_eq!(learned.claim_token, None);
    assert_eq!(learned.message_id.as_deref(), Some("m-9"));
    assert_eq!(learned.delivery_status, Some(DeliveryStatus::Delivered));
    assert_eq!(learned.updated_at, t(7));
    // …and it now blocks sends.
    assert_eq!(held(l, &request(&unknown, t(8))).await.state, RowState::Sent);

    // Out of order: a late Send never hides a Delivery; updated_at only moves forward.
    let ordered = fresh_key();
    let claim = mint(l, &request(&ordered, t(0))).await;
    l.commit_sent(&claim, "m-2", t(1)).await.unwrap_or_else(|e| panic!("{e}"));
    for (status, at) in
        [(DeliveryStatus::Delivered, t(3)), (DeliveryStatus::Accepted, t(2)), (DeliveryStatus::Delayed, t(4))]
    {
        assert_eq!(apply(evidence(&ordered, "m-2", status, at)).await, EvidenceEffect::Updated);
    }
    let r = row(l, &ordered).await;
    assert_eq!(
        (r.state, r.delivery_status, r.updated_at),
        (RowState::Sent, Some(DeliveryStatus::Delivered), t(4))
    );

    // Duplicate: a second message id really went out; recorded once, the first id kept.
    let dup = evidence(&ordered, "m-3", DeliveryStatus::Accepted, t(6));
    let expected = EvidenceEffect::DuplicateSend { first: "m-2".into(), second: "m-3".into() };
    assert_eq!(apply(dup.clone()).await, expected);
    assert_eq!(apply(dup).await, expected);
    let r = row(l, &ordered).await;
    assert_eq!(r.message_id.as_deref(), Some("m-2"));
    assert_eq!(r.duplicate_message_ids, vec!["m-3".to_owned()]);
    assert_eq!(r.delivery_status, Some(DeliveryStatus::Delivered));
    assert_eq!(r.state, RowState::Sent);
}

/// Reconcilers applying different events to one row at the same time lose nothing.
pub async fn concurrent_evidence_loses_nothing(ledger: Arc<dyn Ledger>) {
    for _ in 0..5 {
        let busy = fresh_key();
        mint(&*ledger, &request(&busy, t(0))).await;
        let events = [
            evidence(&busy, "m-4", DeliveryStatus::Accepted, t(1)),
            evidence(&busy, "m-4", DeliveryStatus::Delivered, t(2)),
            evidence(&busy, "m-5", DeliveryStatus::Accepted, t(3)),
            evidence(&busy, "m-4", DeliveryStatus::Delayed, t(4)),
        ];
        let mut reconcilers = JoinSet::new();
        for ev in events {
            let ledger = Arc::clone(&ledger);
            reconcilers.spawn(async move { ledger.apply_evidence(&ev).await });
        }
        while let Some(joined) = reconcilers.join_next().await {
            joined.unwrap_or_else(|e| panic!("task: {e}")).unwrap_or_else(|e| panic!("apply evidence: {e}"));
        }
        let r = row(&*ledger, &busy).await;
        assert_eq!(r.state, RowState::Sent);
        let first = r.message_id.clone().unwrap_or_else(|| panic!("no message id"));
        let other = if first == "m-4" { "m-5" } else { "m-4" };
        assert_eq!(r.duplicate_message_ids, vec![other.to_owned()], "{r:?}");
    }
}

/// Operators release or resolve open claims only; a sent row is never released (that is how
/// duplicates happen), and nothing happens to keys with no row.
pub async fn operator_actions_only_touch_open_claims(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;

    let stuck = fresh_key();
    mint(l, &request(&stuck, t(0))).await;
    l.operator_release(&stuck, "ada", "crashed before send", t(100)).await.unwrap_or_else(|e| panic!("{e}"));
    let r = row(l, &stuck).await;
    assert_eq!((r.state, r.origin, r.updated_at), (RowState::Released, Origin::Operator, t(100)));
    let detail = r.detail.clone().unwrap_or_else(|| panic!("no audit detail"));
    assert!(detail.contains("ada") && detail.contains("crashed before send"), "{detail}");
    assert!(is_conflict(&l.operator_release(&stuck, "ada", "twice", t(101)).await), "released is not open");
    assert_eq!(row(l, &stuck).await, r);
    assert_eq!(mint(l, &request(&stuck, t(102))).await.claimed_at, t(102), "claimable again");

    let sent = fresh_key();
    let claim = mint(l, &request(&sent, t(0))).await;
    l.commit_sent(&claim, "m-1", t(1)).await.unwrap_or_else(|e| panic!("{e}"));
    let before = row(l, &sent).await;
    assert!(is_conflict(&l.operator_release(&sent, "ada", "oops", t(2)).await));
    assert!(is_conflict(&l.operator_resolve_sent(&sent, "m-x", "ada", t(2)).await));
    assert_eq!(row(l, &sent).await, before);

    let missed = fresh_key();
    l.record_missed(&request(&missed, t(0)), "late").await.unwrap_or_else(|e| panic!("{e}"));
    assert!(is_conflict(&l.operator_release(&missed, "ada", "oops", t(2)).await));
    assert!(is_conflict(&l.operator_resolve_sent(&missed, "m-x", "ada", t(2)).await));
    assert_eq!(row(l, &missed).await.state, RowState::Missed);

    let nothing = fresh_key();
    assert!(is_conflict(&l.operator_release(&nothing, "ada", "no row", t(2)).await));
    assert!(is_conflict(&l.operator_resolve_sent(&nothing, "m", "ada", t(2)).await));
    assert_eq!(l.get(&nothing).await.unwrap_or_else(|e| panic!("{e}")), None, "no row was created");

    let resolved = fresh_key();
    mint(l, &request(&resolved, t(0))).await;
    l.operator_resolve_sent(&resolved, "m-found", "bob", t(50)).await.unwrap_or_else(|e| panic!("{e}"));
    let r = row(l, &resolved).await;
    assert_eq!((r.state, r.origin, r.updated_at), (RowState::Sent, Origin::Operator, t(50)));
    assert_eq!(r.message_id.as_deref(), Some("m-found"));
    assert!(r.detail.as_deref().is_some_and(|d| d.contains("bob")), "{:?}", r.detail);
    assert!(is_conflict(&l.operator_release(&resolved, "ada", "late", t(51)).await));
}

/// Backfill writes only where no row exists, and writes the row exactly as given.
pub async fn backfill_never_overwrites(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let key = fresh_key();
    let backfilled = LedgerRow {
        key: key.clone(),
        state: RowState::Sent,
        origin: Origin::Backfill,
        claim_token: None,
        subscription_id: "sub_1".into(),
        period_start: "2026-09-01".into(),
        kind: "renewal_notice_t72".into(),
        revision: 2,
        content_digest: None,
        claimed_at: None,
        updated_at: t(-1000),
        message_id: Some("legacy-1".into()),
        detail: Some("backfilled".into()),
        delivery_status: Some(DeliveryStatus::Delivered),
        duplicate_message_ids: Vec::new(),
    };
    assert!(l.backfill(&backfilled).await.unwrap_or_else(|e| panic!("backfill: {e}")));
    assert_eq!(row(l, &key).await, backfilled, "written exactly");
    let other = LedgerRow { message_id: Some("legacy-2".into()), ..backfilled.clone() };
    assert!(!l.backfill(&other).await.unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(row(l, &key).await, backfilled, "unchanged");
    assert_eq!(held(l, &request(&key, t(0))).await.origin, Origin::Backfill, "and it blocks sends");

    // Not over a claim either.
    let claimed = key_in(9);
    mint(l, &request(&claimed, t(0))).await;
    assert!(!l
        .backfill(&LedgerRow { key: claimed.clone(), ..backfilled })
        .await
        .unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(row(l, &claimed).await.state, RowState::Claimed);
}

/// Rows for many keys, in the caller's order; keys without a row are simply absent.
pub async fn get_many_answers_in_the_callers_order(ledger: Arc<dyn Ledger>) {
    let keys: Vec<NoticeKey> = (0..120).map(|_| fresh_key()).collect();
    let mut writers = JoinSet::new();
    for k in &keys {
        let ledger = Arc::clone(&ledger);
        let req = request(k, t(0));
        writers.spawn(async move { ledger.claim(&req).await });
    }
    while let Some(joined) = writers.join_next().await {
        let outcome = joined.unwrap_or_else(|e| panic!("task: {e}"));
        assert!(matches!(outcome, Ok(ClaimOutcome::Minted(_))), "{outcome:?}");
    }
    let mut ask: Vec<NoticeKey> = keys.iter().rev().cloned().collect();
    ask.insert(7, fresh_key()); // missing keys are simply absent
    ask.push(fresh_key());
    let rows = ledger.get_many(&ask).await.unwrap_or_else(|e| panic!("get_many: {e}"));
    assert_eq!(rows.iter().map(|r| &r.key).collect::<Vec<_>>(), keys.iter().rev().collect::<Vec<_>>());
    assert!(rows.iter().all(|r| r.state == RowState::Claimed));
    assert!(ledger.get_many(&[]).await.unwrap_or_else(|e| panic!("{e}")).is_empty());
    assert!(ledger.get_many(&[fresh_key()]).await.unwrap_or_else(|e| panic!("{e}")).is_empty());
}
