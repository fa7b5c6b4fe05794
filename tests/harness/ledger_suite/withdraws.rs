//! Withdraw tombstones: what they hold off, what provider evidence may do to them, and a claim
//! racing a withdraw for one key.

use std::sync::Arc;

use notice_ledger::ledger::{ClaimOutcome, DeliveryStatus, EvidenceEffect, Ledger, Origin, RowState};

use super::{evidence, fresh_key, held, mint, request, row, t, withdraw_request};

/// The tombstone is written once, carries no claim token or digest, and holds off every later
/// claim and missed record; only a `Send` event moves it (to `sent`), other events leave it.
pub async fn a_tombstone_holds_off_every_claim_and_only_a_send_event_moves_it(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let key = fresh_key();
    let req = withdraw_request(&key, t(0));
    assert_eq!(l.withdraw(&req).await.expect("withdraw"), None, "written");
    let tomb = row(l, &key).await;
    assert_eq!(tomb.state, RowState::Withdrawn);
    assert_eq!(tomb.origin, Origin::Worker);
    assert_eq!(tomb.claim_token, None, "nothing can commit a tombstone");
    assert_eq!(tomb.content_digest, None, "any content of the notice is withdrawn");
    assert_eq!(tomb.claimed_at, None);
    assert_eq!(tomb.updated_at, t(0));
    assert!(tomb
        .detail
        .as_deref()
        .is_some_and(|d| d.contains("withdrawn by suite") && d.contains("cancelled")));

    let again = l.withdraw(&withdraw_request(&key, t(5))).await.expect("second withdraw");
    assert_eq!(again.as_ref(), Some(&tomb), "a second withdraw finds the first tombstone, unchanged");
    assert_eq!(held(l, &request(&key, t(10))).await, tomb, "a claim is held off");
    let missed = l.record_missed(&request(&key, t(11)), "late").await.expect("record missed");
    assert_eq!(missed.as_ref(), Some(&tomb), "a missed record is held off");

    for status in [DeliveryStatus::Delivered, DeliveryStatus::Bounced, DeliveryStatus::Complained] {
        let effect = l.apply_evidence(&evidence(&key, "m-1", status, t(20))).await.expect("evidence").effect;
        assert_eq!(effect, EvidenceEffect::KeptWithdrawn, "{status:?}");
    }
    assert_eq!(row(l, &key).await, tomb, "no event but a Send changes a tombstone");

    let effect =
        l.apply_evidence(&evidence(&key, "m-1", DeliveryStatus::Accepted, t(30))).await.expect("send").effect;
    assert_eq!(effect, EvidenceEffect::SentAfterWithdraw);
    let sent = row(l, &key).await;
    assert_eq!(sent.state, RowState::Sent);
    assert_eq!(sent.message_id.as_deref(), Some("m-1"));
    assert_eq!(sent.delivery_status, Some(DeliveryStatus::Accepted));
    assert!(sent.detail.as_deref().is_some_and(|d| d.starts_with("sent after it was withdrawn")), "{sent:?}");
    let late = l.withdraw(&withdraw_request(&key, t(40))).await.expect("withdraw after");
    assert_eq!(late.map(|r| r.state), Some(RowState::Sent), "too late now");
}

/// A claim and a withdraw of one key, at once, many times over: exactly one of them wins each
/// time, and the loser is shown the winner's row.
pub async fn a_claim_and_a_withdraw_racing_on_one_key_exclude_each_other(ledger: Arc<dyn Ledger>) {
    let (mut claims_won, mut withdraws_won) = (0, 0);
    for i in 0..24 {
        let key = fresh_key();
        let claim_req = request(&key, t(i));
        let withdraw_req = withdraw_request(&key, t(i));
        let (l1, l2) = (Arc::clone(&ledger), Arc::clone(&ledger));
        let claim = tokio::spawn(async move { l1.claim(&claim_req).await });
        let withdraw = tokio::spawn(async move { l2.withdraw(&withdraw_req).await });
        let claim = claim.await.expect("claim task").expect("claim");
        let withdraw = withdraw.await.expect("withdraw task").expect("withdraw");
        let stored = row(&*ledger, &key).await;
        match (claim, withdraw) {
            (ClaimOutcome::Minted(_), Some(holder)) => {
                assert_eq!(holder.state, RowState::Claimed, "the withdraw saw the claim");
                assert_eq!(stored.state, RowState::Claimed);
                claims_won += 1;
            }
            (ClaimOutcome::Held(holder), None) => {
                assert_eq!(holder.state, RowState::Withdrawn, "the claim saw the tombstone");
                assert_eq!(stored.state, RowState::Withdrawn);
                withdraws_won += 1;
            }
            (claim, withdraw) => panic!("both or neither won: {claim:?} / {withdraw:?}"),
        }
    }
    assert_eq!(claims_won + withdraws_won, 24);
    // A released claim is claimable, so it is withdrawable.
    let key = fresh_key();
    let claim = mint(&*ledger, &request(&key, t(100))).await;
    ledger.release(&claim, "throttled", t(101)).await.expect("release");
    let req = withdraw_request(&key, t(102));
    assert_eq!(ledger.withdraw(&req).await.expect("withdraw"), None);
    assert_eq!(row(&*ledger, &key).await, req.to_row(), "the tombstone replaces the released row whole");
}
