//! Claim → commit: who may mint, move and reclaim a row, closed windows, revisions, and reads.

use std::collections::HashSet;
use std::sync::Arc;

use notice_ledger::ledger::{Claim, ClaimOutcome, ClaimRequest, ClaimToken, Ledger, Origin, RowState};
use notice_ledger::{Identity, NoticeKey, NoticeSecret};
use tokio::task::JoinSet;

use super::{assert_repeat_changes_nothing, fresh_key, held, is_conflict, key_in, mint, request, row, t};

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
