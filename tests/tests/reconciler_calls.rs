//! DynamoDB calls per SES event in the reconciler, counted from moto's own request log — the
//! reconciler's side of `calls_per_notice.rs`. An SQS batch of SES events is applied in one call:
//! one strongly consistent `BatchGetItem` for every row the batch names, then one conditional
//! `PutItem` per key whose row the events change, and nothing for a row that already says what
//! its events say. A bounce's or complaint's outcome event is built from the row the ledger
//! answered with, not read again. (Before: a `GetItem` and a `PutItem` per event, a `GetItem`
//! per already-final event, and one more `GetItem` per bounce or complaint with an outcome bus.)

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::Utc;
use notice_dynamodb::ledger::DynamoLedger;
use notice_e2e::ledger_suite::{fresh_key, mint, request, t};
use notice_e2e::ses_events::{sns, sqs_event};
use notice_e2e::{amz_target, start_moto, Moto};
use notice_ledger::ledger::{
    ClaimLedger, DeliveryStatus, EvidenceEffect, EvidenceLedger, ProviderEvidence, RowReader, RowState,
};
use notice_ledger::outcomes::OutcomeKind;
use notice_ledger::NoticeKey;
use notice_reconciler::{handle_sqs, handle_sqs_with_outcomes, OutcomeSink, ReconcilerApp};
use notice_testkit::outcomes::RecordingPublisher;
use serde_json::json;

const TABLE: &str = "notices";

async fn ledger(moto: &Moto) -> Arc<DynamoLedger> {
    moto.create_ledger_table(TABLE).await;
    let client = notice_setup::aws::dynamodb_client(&moto.sdk_config().await);
    Arc::new(DynamoLedger::new(client, TABLE))
}

/// An SES event of `event_type` for the message `message_id` tagged with `key`, in its SNS
/// envelope (the template's wiring: configuration set → SNS → SQS).
fn ses_event(event_type: &str, key: &NoticeKey, message_id: &str) -> String {
    let event = json!({"eventType": event_type, "mail": {"timestamp": Utc::now().to_rfc3339(),
        "messageId": message_id, "source": "billing@example.com", "destination": ["x@example.com"],
        "tags": {"notice_key": [key.as_str()]}}});
    sns(&event.to_string())
}

/// DynamoDB operations recorded since the last `start_recording`, by operation name.
async fn dynamodb_calls(moto: &Moto) -> BTreeMap<String, usize> {
    let mut calls = BTreeMap::new();
    for entry in moto.recorded_requests().await {
        if let Some(op) = amz_target(&entry).and_then(|t| t.strip_prefix("DynamoDB_20120810.")) {
            *calls.entry(op.to_owned()).or_default() += 1;
        }
    }
    calls
}

fn calls(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(op, n)| ((*op).to_owned(), *n)).collect()
}

/// Ten quarantined claims, each closed by its `Send` event in one batch: one batch read and one
/// write per row (1.1 calls an event, against 2 when each event read its row). The same batch
/// again finds every row final: the batch read and nothing else (0.1 an event, against 1).
#[tokio::test]
async fn a_batch_of_ten_events_for_ten_keys_reads_once_and_writes_each_row_once() {
    let moto = start_moto().await;
    let ledger = ledger(&moto).await;
    let keys: Vec<NoticeKey> = (0..10).map(|_| fresh_key()).collect();
    for key in &keys {
        mint(&*ledger, &request(key, t(0))).await;
    }
    let bodies: Vec<String> =
        keys.iter().enumerate().map(|(i, k)| ses_event("Send", k, &format!("ses-{i}"))).collect();
    let app = ReconcilerApp { ledger: ledger.clone() };

    moto.start_recording().await;
    let (resp, tally) = handle_sqs(&app, sqs_event(&bodies)).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    assert_eq!(tally.resolved, 10, "{tally:?}");
    let first = dynamodb_calls(&moto).await;
    assert_eq!(first, calls(&[("BatchGetItem", 1), ("PutItem", 10)]), "one batch read, a write a row");
    for (i, key) in keys.iter().enumerate() {
        let row = ledger.get(key).await.expect("get").expect("row");
        assert_eq!((row.state, row.message_id), (RowState::Sent, Some(format!("ses-{i}"))));
    }

    moto.start_recording().await;
    let (resp, tally) = handle_sqs(&app, sqs_event(&bodies)).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    assert_eq!(tally.updated, 10, "{tally:?}");
    let again = dynamodb_calls(&moto).await;
    assert_eq!(again, calls(&[("BatchGetItem", 1)]), "rows already final: the batch read, no write");
    eprintln!(
        "measured: {first:?} for 10 new events ({:.2} calls an event), {again:?} for 10 redelivered ({:.2})",
        first.values().sum::<usize>() as f64 / 10.0,
        again.values().sum::<usize>() as f64 / 10.0
    );
}

/// A Send and a Bounce for one key in the same batch: both apply, in the batch's order, and the
/// row is written once; the bounce's outcome event carries the notice's identity from the row the
/// ledger answered with — no `GetItem` for it.
#[tokio::test]
async fn two_events_for_one_key_apply_in_order_and_the_bounce_is_published_without_a_read() {
    let moto = start_moto().await;
    let ledger = ledger(&moto).await;
    let (bounced, delivered) = (fresh_key(), fresh_key());
    mint(&*ledger, &request(&bounced, t(0))).await;
    let claim = mint(&*ledger, &request(&delivered, t(0))).await;
    ledger.commit_sent(&claim, "ses-d", t(1)).await.expect("commit");
    let publisher = Arc::new(RecordingPublisher::default());
    let sink = OutcomeSink { publisher: publisher.clone() };
    let app = ReconcilerApp { ledger: ledger.clone() };
    let bodies = [
        ses_event("Send", &bounced, "ses-b"),
        ses_event("Delivery", &delivered, "ses-d"),
        ses_event("Bounce", &bounced, "ses-b"),
    ];

    moto.start_recording().await;
    let (resp, tally) = handle_sqs_with_outcomes(&app, Some(&sink), sqs_event(&bodies)).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    assert_eq!((tally.resolved, tally.updated, tally.outcomes_published), (1, 2, 1), "{tally:?}");
    assert_eq!(
        dynamodb_calls(&moto).await,
        calls(&[("BatchGetItem", 1), ("PutItem", 2)]),
        "one batch read, one write per changed row, no read for the outcome"
    );
    let row = ledger.get(&bounced).await.expect("get").expect("row");
    assert_eq!(
        (row.state, row.message_id.as_deref(), row.delivery_status),
        (RowState::Sent, Some("ses-b"), Some(DeliveryStatus::Bounced)),
        "the Send resolved the claim, then the Bounce advanced it"
    );
    let events = publisher.events();
    assert_eq!(publisher.outcomes(), [OutcomeKind::Bounced]);
    assert_eq!(events[0].subscription_id, "sub_8812", "the identity comes from the applied row");
    assert_eq!(events[0].message_id.as_deref(), Some("ses-b"));
}

/// Another writer changes a row between the batch read and the batch's write: the guarded
/// `PutItem` is refused, that key's events are applied again from the row DynamoDB returns, and
/// the row ends right; the other keys of the batch are written as read.
#[tokio::test]
async fn a_row_changed_between_the_batch_read_and_its_write_ends_right() {
    let moto = start_moto().await;
    let ledger = ledger(&moto).await;
    let (calm, contested, fresh) = (fresh_key(), fresh_key(), fresh_key());
    mint(&*ledger, &request(&calm, t(0))).await;
    mint(&*ledger, &request(&contested, t(0))).await;
    let read: HashMap<NoticeKey, _> = ledger
        .get_many(&[calm.clone(), contested.clone(), fresh.clone()])
        .await
        .expect("batch read")
        .into_iter()
        .map(|row| (row.key.clone(), row))
        .collect();
    assert_eq!(read.len(), 2, "no row for the fresh key");

    // The concurrent writer: another reconciler applies the contested notice's Send first.
    let ev = |key: &NoticeKey, id: &str, status, secs| ProviderEvidence {
        key: key.clone(),
        message_id: id.into(),
        status,
        at: t(secs),
    };
    ledger.apply_evidence(&ev(&contested, "ses-c", DeliveryStatus::Accepted, 1)).await.expect("applied");
    // …and another one learns the fresh key from its own event.
    ledger.apply_evidence(&ev(&fresh, "ses-f", DeliveryStatus::Accepted, 1)).await.expect("applied");

    let batch = [
        ev(&calm, "ses-a", DeliveryStatus::Accepted, 2),
        ev(&contested, "ses-c", DeliveryStatus::Delivered, 3),
        ev(&contested, "ses-x", DeliveryStatus::Accepted, 4),
        ev(&fresh, "ses-f", DeliveryStatus::Delivered, 5),
    ];
    let answers: Vec<_> =
        ledger.apply_evidence_as_read(&batch, read).await.into_iter().map(|a| a.expect("applied")).collect();
    let effects: Vec<_> = answers.iter().map(|a| a.effect.clone()).collect();
    assert_eq!(
        effects,
        [
            EvidenceEffect::Resolved,
            // Applied again from the row the other reconciler left: already sent as ses-c.
            EvidenceEffect::Updated,
            EvidenceEffect::DuplicateSend { first: "ses-c".into(), second: "ses-x".into() },
            EvidenceEffect::Updated,
        ]
    );
    let contested_row = ledger.get(&contested).await.expect("get").expect("row");
    assert_eq!(contested_row, answers[2].row, "the answer is the stored row");
    assert_eq!(contested_row.message_id.as_deref(), Some("ses-c"));
    assert_eq!(contested_row.delivery_status, Some(DeliveryStatus::Delivered));
    assert_eq!(contested_row.duplicate_message_ids, ["ses-x".to_owned()]);
    let fresh_row = ledger.get(&fresh).await.expect("get").expect("row");
    assert_eq!(fresh_row, answers[3].row);
    assert_eq!(fresh_row.delivery_status, Some(DeliveryStatus::Delivered), "nothing lost to the race");
    let calm_row = ledger.get(&calm).await.expect("get").expect("row");
    assert_eq!((calm_row.state, calm_row.message_id.as_deref()), (RowState::Sent, Some("ses-a")));
}
