//! After the send: the quarantine view of open claims, provider evidence, operator actions and
//! backfill.

use std::sync::Arc;

use chrono::Duration;
use notice_ledger::ledger::{
    DeliveryStatus, EvidenceEffect, Ledger, LedgerRow, Origin, ProviderEvidence, RowState,
};
use notice_ledger::NoticeKey;
use tokio::task::JoinSet;

use super::{evidence, fresh_key, held, is_conflict, key_in, mint, own_claim, request, row, t};

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

/// A claim made off the quarantine view (the sender Lambda's, whose queue redelivers) is listed
/// exactly when its row says so — never by an index-keeping ledger before it is put on; always by
/// one whose view is every open claim — and `put_on_quarantine_view` lists it, under its own
/// token only, and does nothing to a row that has moved on.
pub async fn claims_made_off_the_view_are_listed_when_put_on(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let off = |key: &NoticeKey| notice_ledger::ledger::ClaimRequest {
        on_quarantine_view: false,
        ..request(key, t(0))
    };
    let (a, b, gone) = (fresh_key(), fresh_key(), fresh_key());
    let claim_a = mint(l, &off(&a)).await;
    let claim_b = mint(l, &off(&b)).await;
    let claim_gone = mint(l, &off(&gone)).await;
    let listed = |open: &[LedgerRow], key: &NoticeKey| open.iter().any(|r| &r.key == key);

    let open = l.open_claims(t(100), 1000).await.unwrap_or_else(|e| panic!("{e}"));
    let stored_a = row(l, &a).await;
    assert_eq!(listed(&open, &a), stored_a.on_quarantine_view, "the view lists what the row says");
    let every_claim = stored_a.on_quarantine_view;

    // Someone else's token lists nothing; the holder's does.
    let stranger = notice_ledger::ledger::Claim {
        token: notice_ledger::ledger::ClaimToken::random(),
        ..claim_a.clone()
    };
    l.put_on_quarantine_view(&stranger).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(row(l, &a).await.on_quarantine_view, every_claim, "a stranger's token lists nothing");
    l.put_on_quarantine_view(&claim_a).await.unwrap_or_else(|e| panic!("{e}"));
    l.put_on_quarantine_view(&claim_a).await.unwrap_or_else(|e| panic!("twice: {e}"));
    let stored_a = row(l, &a).await;
    assert!(stored_a.on_quarantine_view && stored_a.state == RowState::Claimed);
    assert_eq!(stored_a.claimed_at, Some(t(0)), "claim time kept");

    // A row that has moved on: nothing to list, and no error.
    l.commit_sent(&claim_gone, "m-gone", t(5)).await.unwrap_or_else(|e| panic!("{e}"));
    l.put_on_quarantine_view(&claim_gone).await.unwrap_or_else(|e| panic!("moved on: {e}"));
    assert_eq!(row(l, &gone).await.state, RowState::Sent);

    let open = l.open_claims(t(100), 1000).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(listed(&open, &a), "put on: listed");
    assert_eq!(listed(&open, &b), every_claim, "not put on: listed only where the view is every open claim");
    assert!(!listed(&open, &gone), "sent: never listed");
    let (count, _) = l.count_open_claims(t(100)).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(count, open.len(), "the count agrees with the list");

    // Leaving `claimed` takes a listed claim off the view.
    l.commit_sent(&claim_a, "m-a", t(6)).await.unwrap_or_else(|e| panic!("{e}"));
    l.commit_sent(&claim_b, "m-b", t(6)).await.unwrap_or_else(|e| panic!("{e}"));
    let open = l.open_claims(t(100), 1000).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(!listed(&open, &a) && !listed(&open, &b));
}

/// Provider events resolve a quarantined claim, teach the ledger unknown sends, never move a row
/// backwards, and record a second message id once as a duplicate.
pub async fn provider_evidence_resolves_learns_and_detects_duplicates(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    // Each answer carries the row as the evidence left it: the stored row, read back.
    let apply = |ev: ProviderEvidence| async move {
        let applied = l.apply_evidence(&ev).await.unwrap_or_else(|e| panic!("apply evidence: {e}"));
        assert_eq!(applied.row, row(l, &ev.key).await, "the answer's row is the stored row");
        applied.effect
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

/// A batch of evidence (one SQS batch of provider events) answers each item in the batch's order
/// with the row as that item left it: two events for one key both apply, in order; a key with no
/// row is learned; a row that already says everything changes nothing; the rows stored are the
/// ones the last answer for each key carries.
pub async fn a_batch_of_evidence_applies_each_keys_events_in_order(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    let quarantined = fresh_key();
    mint(l, &request(&quarantined, t(0))).await;
    let delivered = fresh_key();
    let claim = mint(l, &request(&delivered, t(0))).await;
    l.commit_sent(&claim, "m-d", t(1)).await.unwrap_or_else(|e| panic!("commit: {e}"));
    l.apply_evidence(&evidence(&delivered, "m-d", DeliveryStatus::Delivered, t(2)))
        .await
        .unwrap_or_else(|e| panic!("evidence: {e}"));
    let delivered_row = row(l, &delivered).await;
    let unknown = fresh_key();
    let batch = [
        evidence(&quarantined, "m-q", DeliveryStatus::Accepted, t(3)),
        evidence(&unknown, "m-u", DeliveryStatus::Accepted, t(3)),
        evidence(&delivered, "m-d", DeliveryStatus::Delivered, t(2)),
        evidence(&quarantined, "m-q", DeliveryStatus::Bounced, t(4)),
        evidence(&unknown, "m-u", DeliveryStatus::Delivered, t(5)),
    ];
    let answers: Vec<_> = l
        .apply_evidence_batch(&batch)
        .await
        .into_iter()
        .map(|a| a.unwrap_or_else(|e| panic!("apply evidence: {e}")))
        .collect();
    let effects: Vec<_> = answers.iter().map(|a| a.effect.clone()).collect();
    assert_eq!(
        effects,
        [
            EvidenceEffect::Resolved,
            EvidenceEffect::Learned,
            EvidenceEffect::Updated,
            EvidenceEffect::Updated,
            EvidenceEffect::Updated
        ]
    );
    // Each answer's row is the row as that event left it.
    assert_eq!(answers[0].row.delivery_status, Some(DeliveryStatus::Accepted));
    assert_eq!(answers[3].row.delivery_status, Some(DeliveryStatus::Bounced));
    assert_eq!(answers[3].row.subscription_id, "sub_8812", "the identity an outcome event needs");
    assert_eq!(answers[1].row.delivery_status, Some(DeliveryStatus::Accepted));
    assert_eq!(answers[4].row.delivery_status, Some(DeliveryStatus::Delivered));
    // What is stored is what the last answer for each key says.
    assert_eq!(row(l, &quarantined).await, answers[3].row);
    assert_eq!(row(l, &unknown).await, answers[4].row);
    assert_eq!(row(l, &delivered).await, delivered_row, "an event already on the row changes nothing");
    assert_eq!(answers[2].row, delivered_row);
    assert_eq!(answers[3].row.state, RowState::Sent);
    assert_eq!(answers[4].row.origin, Origin::ProviderEvents);
    assert!(l.apply_evidence_batch(&[]).await.is_empty(), "an empty batch answers nothing");
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
        on_quarantine_view: false,
        updated_at: t(-1000),
        message_id: Some("legacy-1".into()),
        detail: Some("backfilled".into()),
        delivery_status: Some(DeliveryStatus::Delivered),
        duplicate_message_ids: Vec::new(),
        charge_at: Some(t(-500)),
        jurisdiction: Some("US-NY".into()),
        rendered: None,
        obligation: None,
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

/// `noticectl show PREFIX`: the keys that start with a prefix, in key order, at most `limit` —
/// none for a prefix no key has, one for a unique prefix, several when it is ambiguous.
pub async fn keys_are_found_by_prefix(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    // Three keys sharing a 12-character prefix, one apart; fresh per case (each gets its own ledger).
    let stem = "abcdef012345";
    let keys: Vec<NoticeKey> = ["0", "1", "2"]
        .iter()
        .map(|tail| {
            NoticeKey::parse(&format!("{stem}{tail}{}", "7".repeat(51))).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    for key in &keys {
        mint(l, &request(key, t(0))).await;
    }
    let other =
        NoticeKey::parse(&format!("abcdef01234f{}", "0".repeat(52))).unwrap_or_else(|e| panic!("{e}"));
    mint(l, &request(&other, t(0))).await;
    let found = |prefix: &'static str, limit| async move {
        l.keys_with_prefix(prefix, limit).await.unwrap_or_else(|e| panic!("keys_with_prefix({prefix}): {e}"))
    };
    assert_eq!(found("abcdef0123450", 5).await, keys[..1], "a unique prefix");
    assert_eq!(found("abcdef012345", 5).await, keys, "an ambiguous one, in key order");
    assert_eq!(found("abcdef012345", 2).await.len(), 2, "at most the limit");
    assert_eq!(found("abcdef01234", 5).await.len(), 4);
    assert!(found("abcdef012346", 5).await.is_empty(), "no key");
}
