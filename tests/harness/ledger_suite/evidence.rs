//! The evidence a row keeps for an audit: the charge a notice announced and the jurisdiction it
//! was judged in, and what rendered the message, written with the claim or the missed record and
//! kept by every later write; and the obligation rule that owed the notice.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use notice_ledger::ledger::{ClaimRequest, DeliveryStatus, Ledger, LedgerRow, RenderedNotice, RowState};
use notice_ledger::NoticeKey;

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

/// What rendered the message — configuration version, template, digest of the rendering — goes
/// onto the claimed (or missed) row whole and stays through commit and provider evidence; a
/// claim without it stores none; a released row taken over gets the new claim's (or none); every
/// read (one row, a batch, the quarantine view) and a backfilled row carry it.
pub async fn the_rendered_notice_is_kept_as_evidence(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let rendered = |template: &str| RenderedNotice {
        config_version: "sha256:ab12cd34ef56".into(),
        template: template.into(),
        rendered_digest: "3a".repeat(32),
    };
    let sent = fresh_key();
    let claim = mint(l, &request(&sent, t(0)).with_rendered(rendered("annual_renewal/de"))).await;
    assert_eq!(row(l, &sent).await.rendered, Some(rendered("annual_renewal/de")), "on the claim");
    let open = l.open_claims(t(10), 100).await.unwrap_or_else(|e| panic!("open claims: {e}"));
    let listed = open.iter().find(|r| r.key == sent).unwrap_or_else(|| panic!("the open claim is listed"));
    assert_eq!(listed.rendered, Some(rendered("annual_renewal/de")), "the quarantine view carries it");
    l.commit_sent(&claim, "ses-1", t(1)).await.unwrap_or_else(|e| panic!("commit: {e}"));
    l.apply_evidence(&evidence(&sent, "ses-1", DeliveryStatus::Delivered, t(2)))
        .await
        .unwrap_or_else(|e| panic!("evidence: {e}"));
    let stored = row(l, &sent).await;
    assert_eq!(
        (stored.state, stored.rendered),
        (RowState::Sent, Some(rendered("annual_renewal/de"))),
        "kept"
    );

    let missed = fresh_key();
    let late = request(&missed, t(0)).with_rendered(rendered("annual_renewal/default"));
    assert_eq!(
        l.record_missed(&late, "send window closed").await.unwrap_or_else(|e| panic!("missed: {e}")),
        None
    );
    let stored = row(l, &missed).await;
    assert_eq!((stored.state, stored.rendered), (RowState::Missed, Some(rendered("annual_renewal/default"))));

    let bare = fresh_key();
    mint(l, &request(&bare, t(0))).await;
    assert_eq!(row(l, &bare).await.rendered, None, "absent stays absent");

    let released = fresh_key();
    let first = mint(l, &request(&released, t(0)).with_rendered(rendered("annual_renewal/de"))).await;
    l.release(&first, "throttled", t(1)).await.unwrap_or_else(|e| panic!("release: {e}"));
    mint(l, &request(&released, t(2))).await;
    assert_eq!(row(l, &released).await.rendered, None, "the new claim's evidence, here none");

    let backfilled = fresh_key();
    let restored = LedgerRow {
        rendered: Some(rendered("annual_renewal/fr")),
        ..request(&backfilled, t(0)).to_row(RowState::Sent, None)
    };
    assert!(l.backfill(&restored).await.unwrap_or_else(|e| panic!("backfill: {e}")));
    assert_eq!(row(l, &backfilled).await.rendered, Some(rendered("annual_renewal/fr")), "whole rows too");

    let many = l
        .get_many(&[sent.clone(), bare.clone(), missed.clone()])
        .await
        .unwrap_or_else(|e| panic!("get_many: {e}"));
    let templates: Vec<_> = many.iter().map(|r| r.rendered.as_ref().map(|r| r.template.as_str())).collect();
    assert_eq!(
        templates,
        [Some("annual_renewal/de"), None, Some("annual_renewal/default")],
        "batch reads carry it too"
    );
}

/// The obligation rule that owed a notice (`US-CA/ca-annual-term`) goes onto the claimed (or
/// missed) row and stays through commit and provider evidence; a claim without one stores none; a
/// released row taken over gets the new claim's; a tombstone never has one; every read (one row, a
/// batch, the quarantine view) and a backfilled row carry it.
pub async fn the_obligation_rule_is_kept_as_evidence(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let owed = |key: &NoticeKey, at: DateTime<Utc>, rule: &str| ClaimRequest {
        obligation: Some(rule.into()),
        ..request(key, at)
    };
    let sent = fresh_key();
    let claim = mint(l, &owed(&sent, t(0), "US-CA/ca-annual-term")).await;
    assert_eq!(row(l, &sent).await.obligation.as_deref(), Some("US-CA/ca-annual-term"), "on the claim");
    let open = l.open_claims(t(10), 100).await.unwrap_or_else(|e| panic!("open claims: {e}"));
    let listed = open.iter().find(|r| r.key == sent).unwrap_or_else(|| panic!("the open claim is listed"));
    assert_eq!(listed.obligation.as_deref(), Some("US-CA/ca-annual-term"), "the quarantine view carries it");
    l.commit_sent(&claim, "ses-1", t(1)).await.unwrap_or_else(|e| panic!("commit: {e}"));
    l.apply_evidence(&evidence(&sent, "ses-1", DeliveryStatus::Delivered, t(2)))
        .await
        .unwrap_or_else(|e| panic!("evidence: {e}"));
    let stored = row(l, &sent).await;
    assert_eq!((stored.state, stored.obligation.as_deref()), (RowState::Sent, Some("US-CA/ca-annual-term")));

    let missed = fresh_key();
    let late = owed(&missed, t(0), "US-CO/co-anniversary");
    assert_eq!(
        l.record_missed(&late, "send window closed").await.unwrap_or_else(|e| panic!("missed: {e}")),
        None
    );
    let stored = row(l, &missed).await;
    assert_eq!(
        (stored.state, stored.obligation.as_deref()),
        (RowState::Missed, Some("US-CO/co-anniversary"))
    );

    let bare = fresh_key();
    mint(l, &request(&bare, t(0))).await;
    assert_eq!(row(l, &bare).await.obligation, None, "a producer's own job names no rule");

    let released = fresh_key();
    let first = mint(l, &owed(&released, t(0), "default/reminder")).await;
    l.release(&first, "throttled", t(1)).await.unwrap_or_else(|e| panic!("release: {e}"));
    mint(l, &owed(&released, t(2), "US-CA/ca-shorter-term")).await;
    assert_eq!(
        row(l, &released).await.obligation.as_deref(),
        Some("US-CA/ca-shorter-term"),
        "the new claim's"
    );

    let backfilled = fresh_key();
    let restored = owed(&backfilled, t(0), "default/reminder").to_row(RowState::Sent, None);
    assert!(l.backfill(&restored).await.unwrap_or_else(|e| panic!("backfill: {e}")));
    assert_eq!(row(l, &backfilled).await.obligation.as_deref(), Some("default/reminder"), "whole rows too");

    let many = l
        .get_many(&[sent.clone(), bare.clone(), missed.clone()])
        .await
        .unwrap_or_else(|e| panic!("get_many: {e}"));
    let rules: Vec<_> = many.iter().map(|r| r.obligation.as_deref()).collect();
    assert_eq!(rules, [Some("US-CA/ca-annual-term"), None, Some("US-CO/co-anniversary")], "batch reads too");
}
