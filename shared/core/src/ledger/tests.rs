use chrono::Utc;

use super::*;
use crate::identity::{Identity, NoticeSecret};

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
