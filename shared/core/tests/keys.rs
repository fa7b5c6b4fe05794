//! Key derivation against the committed vectors, and properties of validation.

use notice_ledger::{Identity, Job, NoticeKey, NoticeSecret};
use proptest::prelude::*;

#[test]
fn committed_vectors_match() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/notice_keys.json"))
            .expect("vectors file");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("vectors JSON");
    let vectors = doc["vectors"].as_array().expect("vectors array");
    assert!(vectors.len() >= 8);
    for v in vectors {
        let secret = NoticeSecret::new(v["secret"].as_str().unwrap()).unwrap();
        let id = Identity::new(
            v["subscription_id"].as_str().unwrap(),
            v["period_start"].as_str().unwrap(),
            v["kind"].as_str().unwrap(),
            v["revision"].as_u64().unwrap(),
        )
        .unwrap();
        assert_eq!(id.derive_key(&secret).as_str(), v["key"].as_str().unwrap(), "vector {v}");
    }
}

fn identity_text() -> impl Strategy<Value = String> {
    // Any non-empty text without '|' or control characters, including non-ASCII.
    "[^|\\p{Cc}]{1,40}"
}

proptest! {
    #[test]
    fn key_is_deterministic_hex_and_depends_on_every_field(
        sub in identity_text(),
        kind in "[a-z0-9_]{1,64}",
        rev in 0..=notice_ledger::identity::MAX_REVISION - 1,
        days in 0i64..20000,
    ) {
        let date = (chrono::NaiveDate::from_ymd_opt(2000, 1, 1).unwrap() + chrono::Duration::days(days))
            .format("%Y-%m-%d").to_string();
        let secret = NoticeSecret::new("prop-secret").unwrap();
        let id = Identity::new(&sub, &date, &kind, rev).unwrap();
        let key = id.derive_key(&secret);
        prop_assert_eq!(&key, &Identity::new(&sub, &date, &kind, rev).unwrap().derive_key(&secret));
        prop_assert!(NoticeKey::parse(key.as_str()).is_ok());
        let bumped = Identity::new(&sub, &date, &kind, rev + 1).unwrap().derive_key(&secret);
        prop_assert_ne!(&key, &bumped);
        let other_secret = NoticeSecret::new("other").unwrap();
        prop_assert_ne!(&key, &id.derive_key(&other_secret));
        let other_sub = format!("{sub}x");
        prop_assert_ne!(&key, &Identity::new(&other_sub, &date, &kind, rev).unwrap().derive_key(&secret));
    }

    #[test]
    fn separator_or_control_in_subscription_is_rejected(
        prefix in "[a-z]{0,5}",
        bad in prop_oneof![Just('|'), Just('\n'), Just('\u{0}'), Just('\u{7f}'), Just('\t')],
        suffix in "[a-z]{0,5}",
    ) {
        let sub = format!("{prefix}{bad}{suffix}");
        let err = Identity::new(&sub, "2026-10-01", "k", 0).unwrap_err();
        prop_assert_eq!(err.field, "subscription_id");
    }

    #[test]
    fn kind_outside_charset_is_rejected(kind in "[a-z0-9_]{0,10}[A-Z\\-. |][a-z0-9_]{0,10}") {
        let err = Identity::new("sub", "2026-10-01", &kind, 0).unwrap_err();
        prop_assert_eq!(err.field, "kind");
    }

    #[test]
    fn arbitrary_bodies_never_panic(body in ".{0,200}") {
        let _ = Job::parse(&body, &notice_texts::Icu);
    }

    #[test]
    fn arbitrary_period_start_is_accepted_only_as_real_date(s in "[0-9-]{8,12}") {
        let ok = Identity::new("sub", &s, "k", 0).is_ok();
        let real = s.len() == 10 && chrono::NaiveDate::parse_from_str(&s, "%Y-%m-%d")
            .map(|d| d.format("%Y-%m-%d").to_string() == s).unwrap_or(false);
        prop_assert_eq!(ok, real, "{}", s);
    }
}
