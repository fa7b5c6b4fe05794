//! Every adapter against the one definition of the transition rules
//! ([`notice_ledger::ledger::rules::permits`]): each write, on a row in each state.

use std::sync::Arc;

use notice_ledger::ledger::rules::{permits, Verdict, Write};
use notice_ledger::ledger::{Claim, ClaimOutcome, ClaimToken, Ledger, LedgerRow, Origin, RowState};

use super::{fresh_key, request, t, withdraw_request};

/// The starting rows: none, an open claim (ours or another worker's), released, and each decided state.
fn starts(mine: &ClaimToken, theirs: &ClaimToken) -> Vec<(&'static str, Option<(RowState, ClaimToken)>)> {
    vec![
        ("no row", None),
        ("our claim", Some((RowState::Claimed, mine.clone()))),
        ("their claim", Some((RowState::Claimed, theirs.clone()))),
        ("released", Some((RowState::Released, theirs.clone()))),
        ("sent", Some((RowState::Sent, theirs.clone()))),
        ("rejected", Some((RowState::Rejected, theirs.clone()))),
        ("missed", Some((RowState::Missed, theirs.clone()))),
        ("withdrawn", Some((RowState::Withdrawn, theirs.clone()))),
    ]
}

/// Seeds a row in `state` through backfill (which writes a row as given where none exists).
async fn seed(
    l: &dyn Ledger,
    key: &notice_ledger::NoticeKey,
    state: RowState,
    token: ClaimToken,
) -> LedgerRow {
    let row = LedgerRow {
        key: key.clone(),
        state,
        origin: Origin::Worker,
        claim_token: Some(token),
        subscription_id: "sub_8812".into(),
        period_start: "2026-10-01".into(),
        kind: "renewal_notice_t72".into(),
        revision: 0,
        content_digest: Some("digest-1".into()),
        claimed_at: Some(t(-100)),
        // Seeded as an index-keeping ledger lists it and every other ledger reads it back.
        on_quarantine_view: state == RowState::Claimed,
        updated_at: t(-100),
        message_id: None,
        detail: None,
        delivery_status: None,
        duplicate_message_ids: Vec::new(),
        charge_at: None,
        jurisdiction: None,
        rendered: None,
        obligation: None,
    };
    assert!(l.backfill(&row).await.unwrap_or_else(|e| panic!("seed {state}: {e}")), "seed {state}");
    row
}

/// Claim, commit, operator release, backfill and withdraw each do exactly what the rules permit,
/// from every starting row.
pub async fn every_write_obeys_the_transition_rules(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let (mine, theirs) = (ClaimToken::random(), ClaimToken::random());
    for (name, start) in starts(&mine, &theirs) {
        for write in ["claim", "commit", "operator", "backfill", "withdraw"] {
            let key = fresh_key();
            let existing = match &start {
                Some((state, token)) => Some(seed(l, &key, *state, token.clone()).await),
                None => None,
            };
            let rule = match write {
                "claim" => Write::Claim { token: &mine },
                "commit" => Write::Commit { token: &mine },
                "operator" => Write::Operator,
                "withdraw" => Write::Withdraw,
                _ => Write::Backfill,
            };
            let expected = permits(existing.as_ref(), rule);
            let did = match write {
                "claim" => {
                    let req =
                        notice_ledger::ledger::ClaimRequest { token: mine.clone(), ..request(&key, t(0)) };
                    match l.claim(&req).await.unwrap_or_else(|e| panic!("{name}/claim: {e}")) {
                        ClaimOutcome::Minted(_) => Verdict::Apply,
                        ClaimOutcome::Held(_) => Verdict::Refuse,
                    }
                }
                "commit" => {
                    let claim = Claim { key: key.clone(), token: mine.clone(), claimed_at: t(-100) };
                    if l.commit_sent(&claim, "msg-new", t(0)).await.is_ok() {
                        Verdict::Apply
                    } else {
                        Verdict::Refuse
                    }
                }
                "withdraw" => {
                    let req = withdraw_request(&key, t(0));
                    match l.withdraw(&req).await.unwrap_or_else(|e| panic!("{name}/withdraw: {e}")) {
                        None => Verdict::Apply,
                        Some(held) if held.state == RowState::Withdrawn => Verdict::AlreadyOwn,
                        Some(held) => {
                            assert_eq!(Some(&held), existing.as_ref(), "{name}/withdraw returns the row");
                            Verdict::Refuse
                        }
                    }
                }
                "operator" => {
                    let released = l.operator_release(&key, "suite", "rules", t(0)).await;
                    if released.is_ok() {
                        Verdict::Apply
                    } else {
                        Verdict::Refuse
                    }
                }
                _ => {
                    let row = existing.clone().unwrap_or_else(|| LedgerRow {
                        key: key.clone(),
                        state: RowState::Sent,
                        origin: Origin::Backfill,
                        claim_token: None,
                        subscription_id: "sub_8812".into(),
                        period_start: "2026-10-01".into(),
                        kind: "renewal_notice_t72".into(),
                        revision: 0,
                        content_digest: None,
                        claimed_at: None,
                        on_quarantine_view: false,
                        updated_at: t(0),
                        message_id: Some("legacy".into()),
                        detail: None,
                        delivery_status: None,
                        duplicate_message_ids: Vec::new(),
                        charge_at: None,
                        jurisdiction: None,
                        rendered: None,
                        obligation: None,
                    });
                    let wrote = l.backfill(&LedgerRow { detail: Some("again".into()), ..row }).await;
                    if wrote.unwrap_or_else(|e| panic!("{name}/backfill: {e}")) {
                        Verdict::Apply
                    } else {
                        Verdict::Refuse
                    }
                }
            };
            // A claim the rules call "already ours" is reported as minted.
            let expected = if expected == Verdict::AlreadyOwn && write != "withdraw" {
                Verdict::Apply
            } else {
                expected
            };
            assert_eq!(did, expected, "{write} on {name}");
        }
    }
}
