use aws_sdk_dynamodb::types::AttributeValue;
use notice_ledger::ledger::{learned_row, ClaimToken, DeliveryStatus, Origin, ProviderEvidence};

use super::claim::CLAIMABLE;
use super::*;
use crate::item::{n, open_shard};
use chrono::TimeZone;
use notice_ledger::ledger::RenderedNotice;

fn key(c: char) -> NoticeKey {
    NoticeKey::parse(&c.to_string().repeat(64)).expect("valid key")
}

fn at(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().expect("valid time")
}

fn claimed_row() -> LedgerRow {
    LedgerRow {
        key: key('c'),
        state: RowState::Claimed,
        origin: Origin::Worker,
        claim_token: Some(ClaimToken::from_stored("tok")),
        subscription_id: "sub_8812".into(),
        period_start: "2026-10-01".into(),
        kind: "renewal_notice_t72".into(),
        revision: 3,
        content_digest: Some("digest".into()),
        claimed_at: Some(at(1_700_000_000_123)),
        on_quarantine_view: false,
        updated_at: at(1_700_000_000_123),
        message_id: None,
        detail: None,
        delivery_status: None,
        duplicate_message_ids: Vec::new(),
        charge_at: Some(at(1_700_259_200_000)),
        jurisdiction: Some("US-CA".into()),
        rendered: None,
        obligation: None,
    }
}

#[test]
fn claimed_row_round_trips_with_index_keys() {
    let row = LedgerRow { on_quarantine_view: true, ..claimed_row() };
    let item = row_to_item(&row, 42);
    assert_eq!(item.get(attr::OPEN_SHARD), Some(&s("c")));
    assert_eq!(item.get(attr::OPEN_SINCE), Some(&n(1_700_000_000_123i64)));
    assert!(!item.contains_key(attr::EXPIRES_AT), "an open claim must never expire");
    assert_eq!(item_to_row(&item).expect("round trip"), row);
}

/// A claim made off the quarantine view (the sender Lambda's) carries no index keys: its claim
/// and commit write the table alone.
#[test]
fn claimed_row_off_the_view_has_no_index_keys() {
    let row = claimed_row();
    let item = row_to_item(&row, 42);
    assert!(!item.contains_key(attr::OPEN_SHARD) && !item.contains_key(attr::OPEN_SINCE));
    assert!(!item.contains_key(attr::EXPIRES_AT), "an open claim must never expire");
    assert_eq!(item_to_row(&item).expect("round trip"), row);
}

#[test]
fn decided_rows_leave_the_index_and_round_trip() {
    let mut row = claimed_row();
    row.state = RowState::Sent;
    row.message_id = Some("0100-abc".into());
    row.delivery_status = Some(DeliveryStatus::Delivered);
    row.duplicate_message_ids = vec!["0100-def".into()];
    row.detail = Some("note".into());
    let item = row_to_item(&row, 1);
    assert_eq!(item.get(attr::EXPIRES_AT), Some(&n(1)));
    assert!(!item.contains_key(attr::OPEN_SHARD));
    assert!(!item.contains_key(attr::OPEN_SINCE));
    assert_eq!(item_to_row(&item).expect("round trip"), row);
}

#[test]
fn learned_row_round_trips() {
    let ev = ProviderEvidence {
        key: key('0'),
        message_id: "m".into(),
        status: DeliveryStatus::Accepted,
        at: at(5),
    };
    let row = learned_row(&ev);
    assert_eq!(item_to_row(&row_to_item(&row, 1)).expect("round trip"), row);
}

#[test]
fn malformed_items_name_the_attribute() {
    let good = row_to_item(&claimed_row(), 1);
    let cases: [(&str, Option<AttributeValue>); 7] = [
        (attr::STATE, Some(s("pending"))),
        (attr::STATE, None),
        (attr::REVISION, Some(s("3"))),
        (attr::REVISION, Some(n(-1))),
        (attr::UPDATED_AT, Some(n("soon"))),
        (attr::KEY, Some(s("not-a-key"))),
        (attr::DUPLICATES, Some(AttributeValue::L(vec![n(1)]))),
    ];
    for (name, value) in cases {
        let mut item = good.clone();
        match value {
            Some(v) => item.insert(name.to_owned(), v),
            None => item.remove(name),
        };
        match item_to_row(&item) {
            Err(LedgerError::Corrupt(msg)) => assert!(msg.contains(name), "{msg} should name {name}"),
            other => panic!("{name}: expected Corrupt, got {other:?}"),
        }
    }
}

fn rendered() -> RenderedNotice {
    RenderedNotice {
        config_version: "sha256:ab12cd34".into(),
        template: "annual_renewal/de".into(),
        rendered_digest: "9f".repeat(32),
    }
}

#[test]
fn rendered_notice_evidence_round_trips_and_is_absent_on_older_items() {
    let row = LedgerRow { rendered: Some(rendered()), ..claimed_row() };
    let item = row_to_item(&row, 1);
    assert_eq!(item.get(attr::CONFIG_VERSION), Some(&s("sha256:ab12cd34")));
    assert_eq!(item.get(attr::TEMPLATE), Some(&s("annual_renewal/de")));
    assert_eq!(item.get(attr::RENDERED_DIGEST), Some(&s(&"9f".repeat(32))));
    assert_eq!(item_to_row(&item).expect("round trip"), row);
    assert_eq!(RenderedNotice::STORED_AS, [attr::CONFIG_VERSION, attr::TEMPLATE, attr::RENDERED_DIGEST]);

    // An item written before the evidence was stored (or without it) has none of the three.
    let older = row_to_item(&claimed_row(), 1);
    assert!(!older.contains_key(attr::CONFIG_VERSION) && !older.contains_key(attr::TEMPLATE));
    assert_eq!(item_to_row(&older).expect("older item").rendered, None);
}

/// The obligation rule that owed the notice is an optional attribute: written when the row has
/// one, read back, and absent (no attribute, `None`) on items written without it or before it.
#[test]
fn the_obligation_rule_round_trips_and_is_absent_on_older_items() {
    let row = LedgerRow { obligation: Some("US-CA/ca-annual-term".into()), ..claimed_row() };
    let item = row_to_item(&row, 1);
    assert_eq!(item.get(attr::OBLIGATION), Some(&s("US-CA/ca-annual-term")));
    assert_eq!(item_to_row(&item).expect("round trip"), row);
    let older = row_to_item(&claimed_row(), 1);
    assert!(!older.contains_key(attr::OBLIGATION));
    assert_eq!(item_to_row(&older).expect("older item").obligation, None);
    let mut wrong = item.clone();
    wrong.insert(attr::OBLIGATION.to_owned(), n(7));
    match item_to_row(&wrong) {
        Err(LedgerError::Corrupt(msg)) => assert!(msg.contains(attr::OBLIGATION), "{msg}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn an_item_with_part_of_the_rendered_evidence_is_corrupt() {
    let whole = row_to_item(&LedgerRow { rendered: Some(rendered()), ..claimed_row() }, 1);
    for missing in [attr::CONFIG_VERSION, attr::TEMPLATE, attr::RENDERED_DIGEST] {
        let mut item = whole.clone();
        item.remove(missing);
        match item_to_row(&item) {
            Err(LedgerError::Corrupt(msg)) => assert!(msg.contains(missing), "{msg} should name {missing}"),
            other => panic!("without {missing}: expected Corrupt, got {other:?}"),
        }
    }
    let mut only_template = row_to_item(&claimed_row(), 1);
    only_template.insert(attr::TEMPLATE.to_owned(), s("annual_renewal/default"));
    assert!(matches!(item_to_row(&only_template), Err(LedgerError::Corrupt(_))));
    let mut not_a_string = whole;
    not_a_string.insert(attr::RENDERED_DIGEST.to_owned(), n(1));
    assert!(matches!(item_to_row(&not_a_string), Err(LedgerError::Corrupt(_))));
}

#[test]
fn expression_maps_are_absent_when_empty() {
    let e = Expr::new("attribute_not_exists(x)");
    assert_eq!(e.parts(), (None, None));
    let mut e = Expr::new(CLAIMABLE);
    e.name(attr::KEY).name(attr::STATE).value(":released", s("released"));
    let (names, values) = e.parts();
    assert_eq!(names.map(|m| m.len()), Some(2));
    assert_eq!(values.map(|m| m.len()), Some(1));
}

#[test]
fn evidence_guard_pins_what_evidence_changes() {
    let mut row = claimed_row();
    row.duplicate_message_ids = vec!["a".into()];
    let guard = DynamoLedger::unchanged_since_read(&row);
    for name in [attr::STATE, attr::UPDATED_AT, attr::MESSAGE_ID, attr::CLAIM_TOKEN, attr::DUPLICATES] {
        assert!(guard.text.contains(&format!("#{name}")), "{} lacks {name}", guard.text);
    }
    assert!(guard.text.contains("attribute_not_exists(#message_id)"));
    assert!(guard.text.contains("size(#duplicate_message_ids) = :r_dups"));
    // Every placeholder used is defined.
    for (placeholder, _) in guard.values.iter() {
        assert!(guard.text.contains(placeholder.as_str()), "{placeholder} unused");
    }
}

#[test]
fn shards_cover_every_key_prefix() {
    for c in "0123456789abcdef".chars() {
        assert!(SHARDS.contains(&open_shard(&key(c))));
    }
}
