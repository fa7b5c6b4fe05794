//! What a ledger row keeps: bounded provider evidence, the rendering evidence read back whole, and
//! the rule that owed the notice, through the in-memory ledger.

use chrono::Utc;

use notice_ledger::error::LedgerError;
use notice_ledger::identity::{Identity, NoticeSecret};
use notice_ledger::ledger::*;
use notice_testkit::MemoryLedger;

#[test]
fn a_flood_of_duplicate_ids_keeps_a_bounded_row() {
    let key = Identity::new("s", "2026-10-01", "k", 0).unwrap().derive_key(&NoticeSecret::new("x").unwrap());
    let now = Utc::now();
    let ev =
        |id: &str| ProviderEvidence::bounded(key.clone(), id, DeliveryStatus::Accepted, now, now).unwrap();
    let mut row = learned_row(&ev("first"));
    for i in 0..1000 {
        let effect = apply_to_row(&mut row, &ev(&format!("dup-{i}")));
        assert!(matches!(effect, EvidenceEffect::DuplicateSend { .. }));
    }
    assert_eq!(row.duplicate_message_ids.len(), MAX_DUPLICATE_IDS);
    assert_eq!(row.message_id.as_deref(), Some("first"));
    let far = ProviderEvidence::bounded(
        key.clone(),
        "first",
        DeliveryStatus::Delivered,
        now + chrono::Duration::days(9000),
        now,
    )
    .unwrap();
    apply_to_row(&mut row, &far);
    assert!(row.updated_at <= now + chrono::Duration::seconds(EVENT_CLOCK_SKEW_SECS));
    assert!(ProviderEvidence::bounded(
        key,
        &"x".repeat(MAX_MESSAGE_ID_LEN + 1),
        DeliveryStatus::Accepted,
        now,
        now
    )
    .is_err());
    let long = release_detail("ops\nBcc", &"r".repeat(5000), now);
    assert!(long.len() < MAX_REASON_CHARS + 200 && !long.contains('\n'), "{long}");
}

/// A batch's answers go back to their events by position: two keys' groups interleaved come back in
/// the batch's order, and an event its group did not answer is an error of its own (retried by its
/// SQS record), never the next event's answer.
#[test]
fn a_batch_of_evidence_answers_each_event_in_its_place() {
    let secret = NoticeSecret::new("x").unwrap();
    let key = |s: &str| Identity::new(s, "2026-10-01", "k", 0).unwrap().derive_key(&secret);
    let now = Utc::now();
    let ev = |k: &str, id: &str| {
        ProviderEvidence::bounded(key(k), id, DeliveryStatus::Accepted, now, now).unwrap()
    };
    let batch = [ev("a", "m-a"), ev("b", "m-b"), ev("a", "m-a2")];
    let groups = positions_by_key(&batch);
    assert_eq!(groups, vec![vec![0, 2], vec![1]]);
    let a = apply_in_order(None, [&batch[0], &batch[2]]);
    assert_eq!(a[0].effect, EvidenceEffect::Learned);
    assert!(matches!(a[1].effect, EvidenceEffect::DuplicateSend { .. }), "{:?}", a[1].effect);
    let answers = in_batch_order(batch.len(), &groups, vec![a.into_iter().map(Ok).collect(), Vec::new()]);
    assert_eq!(answers.len(), 3);
    assert_eq!(answers[0].as_ref().unwrap().row.message_id.as_deref(), Some("m-a"));
    assert!(answers[1].is_err(), "the unanswered event is an error: {:?}", answers[1]);
    assert_eq!(answers[2].as_ref().unwrap().row.duplicate_message_ids, vec!["m-a2".to_string()]);
}

fn rendered() -> RenderedNotice {
    RenderedNotice {
        config_version: "builtin:0a1b2c3d".into(),
        template: "annual_renewal/default".into(),
        rendered_digest: "d4".repeat(32),
    }
}

#[test]
fn rendered_evidence_is_read_back_whole_or_not_at_all() {
    let text = |s: &str| Some(s.to_owned());
    let whole = RenderedNotice::from_stored(
        text("builtin:0a1b2c3d"),
        text("annual_renewal/default"),
        text(&"d4".repeat(32)),
    );
    assert_eq!(whole.expect("whole"), Some(rendered()));
    assert_eq!(RenderedNotice::from_stored(None, None, None).expect("none"), None);
    match RenderedNotice::from_stored(text("sha256:ab"), None, text("00")) {
        Err(LedgerError::Corrupt(msg)) => {
            assert!(msg.contains("template") && !msg.contains("config_version"), "{msg}")
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(matches!(RenderedNotice::from_stored(None, None, text("00")), Err(LedgerError::Corrupt(_))));
}

#[tokio::test]
async fn the_memory_ledger_keeps_what_rendered_the_message() {
    use notice_ledger::identity::NoticeKey;
    let ledger = MemoryLedger::new();
    let now = Utc::now();
    let request = |c: char| ClaimRequest {
        key: NoticeKey::parse(&c.to_string().repeat(64)).unwrap(),
        token: ClaimToken::random(),
        subscription_id: "s".into(),
        period_start: "2026-10-01".into(),
        kind: "annual_renewal".into(),
        revision: 0,
        content_digest: "d".into(),
        at: now,
        charge_at: None,
        jurisdiction: None,
        rendered: None,
        obligation: None,
        aliases: Vec::new(),
        on_quarantine_view: true,
    };
    let with = request('a').with_rendered(rendered());
    assert!(matches!(ledger.claim(&with).await.unwrap(), ClaimOutcome::Minted(_)));
    assert_eq!(ledger.get(&with.key).await.unwrap().unwrap().rendered, Some(rendered()));
    let without = request('b');
    assert!(matches!(ledger.claim(&without).await.unwrap(), ClaimOutcome::Minted(_)));
    assert_eq!(ledger.get(&without.key).await.unwrap().unwrap().rendered, None);
    let missed = request('c').with_rendered(rendered());
    assert_eq!(ledger.record_missed(&missed, "closed").await.unwrap(), None);
    assert_eq!(ledger.get(&missed.key).await.unwrap().unwrap().rendered, Some(rendered()));
}

/// The rule that owed a notice travels from the job to the claim row and to a missed record; a
/// producer's own job names none, and a tombstone never carries one.
#[tokio::test]
async fn the_memory_ledger_keeps_the_rule_that_owed_the_notice() {
    use notice_ledger::job::{Job, Withdrawal};
    let ledger = MemoryLedger::new();
    let secret = NoticeSecret::new(b"k".to_vec()).unwrap();
    let body = |sub: &str, obligation: Option<&str>| {
        let mut v = serde_json::json!({"subscription_id": sub, "period_start": "2026-10-01",
            "kind": "annual_renewal", "email": "ada@example.com", "charge_at": "2026-10-01T09:00:00Z"});
        if let Some(o) = obligation {
            v["obligation"] = o.into();
        }
        Job::from_value(&v, &notice_texts::Icu).unwrap()
    };
    let owed = body("sub_owed", Some("US-CA/ca-annual-term"));
    let claim = ClaimRequest::for_job(&owed, owed.key(&secret), Utc::now());
    assert!(matches!(ledger.claim(&claim).await.unwrap(), ClaimOutcome::Minted(_)));
    let row = ledger.get(&claim.key).await.unwrap().unwrap();
    assert_eq!(row.obligation.as_deref(), Some("US-CA/ca-annual-term"));

    let late = body("sub_late", Some("US-CO/co-anniversary"));
    let missed = ClaimRequest::for_job(&late, late.key(&secret), Utc::now());
    assert_eq!(ledger.record_missed(&missed, "send window closed").await.unwrap(), None);
    let row = ledger.get(&missed.key).await.unwrap().unwrap();
    assert_eq!((row.state, row.obligation.as_deref()), (RowState::Missed, Some("US-CO/co-anniversary")));

    let plain = body("sub_plain", None);
    let claim = ClaimRequest::for_job(&plain, plain.key(&secret), Utc::now());
    assert!(matches!(ledger.claim(&claim).await.unwrap(), ClaimOutcome::Minted(_)));
    assert_eq!(ledger.get(&claim.key).await.unwrap().unwrap().obligation, None);

    let w = Withdrawal::from_value(&serde_json::json!({"action": "withdraw", "subscription_id": "sub_gone",
        "period_start": "2026-10-01", "kind": "annual_renewal"}))
    .unwrap();
    let req = WithdrawRequest::new(&w, w.key(&secret), Origin::Worker, "intake", Utc::now());
    assert_eq!(req.to_row().obligation, None);
}
