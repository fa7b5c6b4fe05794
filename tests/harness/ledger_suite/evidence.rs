//! The evidence a row keeps for an audit: the charge a notice announced and the jurisdiction it
//! was judged in, written with the claim or the missed record and kept by every later write.

use std::sync::Arc;

use notice_ledger::ledger::{ClaimRequest, DeliveryStatus, Ledger, RowState};

use super::{evidence, fresh_key, mint, request, row, t};

/// Charge time and jurisdiction go onto the claimed row and stay through commit and provider
/// evidence; a missed row carries them too; a released row taken over gets the new claim's.
pub async fn charge_time_and_jurisdiction_are_kept_as_evidence(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let charge = t(100 * 3600);
    let sent = fresh_key();
    let req =
        ClaimRequest { charge_at: Some(charge), jurisdiction: Some("US-CA".into()), ..request(&sent, t(0)) };
    let claim = mint(l, &req).await;
    let stored = row(l, &sent).await;
    assert_eq!(
        (stored.charge_at, stored.jurisdiction.as_deref()),
        (Some(charge), Some("US-CA")),
        "on the claim"
    );
    l.commit_sent(&claim, "ses-1", t(1)).await.unwrap_or_else(|e| panic!("commit: {e}"));
    l.apply_evidence(&evidence(&sent, "ses-1", DeliveryStatus::Delivered, t(2)))
        .await
        .unwrap_or_else(|e| panic!("evidence: {e}"));
    let stored = row(l, &sent).await;
    assert_eq!(stored.state, RowState::Sent);
    assert_eq!(stored.delivery_status, Some(DeliveryStatus::Delivered));
    assert_eq!((stored.charge_at, stored.jurisdiction.as_deref()), (Some(charge), Some("US-CA")), "kept");

    let missed = fresh_key();
    let late = ClaimRequest {
        charge_at: Some(t(3600)),
        jurisdiction: Some("US-NY".into()),
        ..request(&missed, t(0))
    };
    assert_eq!(
        l.record_missed(&late, "send window closed").await.unwrap_or_else(|e| panic!("missed: {e}")),
        None
    );
    let stored = row(l, &missed).await;
    assert_eq!(stored.state, RowState::Missed);
    assert_eq!((stored.charge_at, stored.jurisdiction.as_deref()), (Some(t(3600)), Some("US-NY")));

    let bare = fresh_key();
    mint(l, &ClaimRequest { charge_at: None, jurisdiction: None, ..request(&bare, t(0)) }).await;
    let stored = row(l, &bare).await;
    assert_eq!((stored.charge_at, stored.jurisdiction), (None, None), "absent stays absent");

    let released = fresh_key();
    let first = mint(l, &ClaimRequest { charge_at: Some(charge), ..request(&released, t(0)) }).await;
    l.release(&first, "throttled", t(1)).await.unwrap_or_else(|e| panic!("release: {e}"));
    mint(l, &ClaimRequest { charge_at: Some(t(7200)), jurisdiction: None, ..request(&released, t(2)) }).await;
    let stored = row(l, &released).await;
    assert_eq!((stored.charge_at, stored.jurisdiction), (Some(t(7200)), None), "the new claim's evidence");

    let many = l.get_many(&[sent.clone(), missed.clone()]).await.unwrap_or_else(|e| panic!("get_many: {e}"));
    let charges: Vec<_> = many.iter().map(|r| r.charge_at).collect();
    assert_eq!(charges, [Some(charge), Some(t(3600))], "batch reads carry them too");
}
