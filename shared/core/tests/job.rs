//! A job body → a validated `Job` or `Withdrawal`, under the ICU4X checks every entry point hands
//! the parse (`notice_texts::Icu`): moved here from `src/job.rs` with the locale and money
//! checks that only CLDR can answer.

use notice_ledger::identity::NoticeSecret;
use notice_ledger::job::*;
use notice_ledger::locale::{Locale, TimeZone};
use notice_texts::Icu;
use serde_json::Value;

const GOOD: &str = r#"{"subscription_id":"sub_8812","period_start":"2026-10-01","kind":"renewal_notice_t72",
    "revision":0,"email":"ada@example.com","charge_at":"2026-10-01T09:00:00Z","jurisdiction":"US-CA",
    "template_data":{"plan_name":"Coffee Box","amount":{"minor":2900,"currency":"USD"}},"future_field":true}"#;

fn with(field: &str, value: Value) -> String {
    let mut v: Value = serde_json::from_str(GOOD).unwrap();
    v[field] = value;
    v.to_string()
}

fn without(field: &str) -> String {
    let mut v: Value = serde_json::from_str(GOOD).unwrap();
    v.as_object_mut().unwrap().remove(field);
    v.to_string()
}

#[test]
fn parses_contract_example_and_ignores_unknown_fields() {
    let job = Job::parse(GOOD, &Icu).unwrap();
    assert_eq!(job.identity.subscription_id(), "sub_8812");
    assert_eq!(job.identity.revision(), 0);
    assert_eq!(job.jurisdiction.as_deref(), Some("US-CA"));
    assert_eq!(job.template_data["plan_name"], "Coffee Box");
    assert_eq!(Job::from_value(&job.to_value(), &Icu).unwrap(), job);
}

#[test]
fn revision_defaults_to_zero() {
    assert_eq!(Job::parse(&without("revision"), &Icu).unwrap().identity.revision(), 0);
}

#[test]
fn errors_name_the_field() {
    let cases = [
        (without("subscription_id"), "subscription_id"),
        (without("email"), "email"),
        (without("charge_at"), "charge_at"),
        (with("revision", serde_json::json!(-1)), "revision"),
        (with("revision", serde_json::json!(1.5)), "revision"),
        (with("revision", serde_json::json!("1")), "revision"),
        (with("email", serde_json::json!("not-an-address")), "email"),
        (with("email", serde_json::json!("a@b.com\r\nBcc: x@y.z")), "email"),
        (with("charge_at", serde_json::json!("2026-10-01")), "charge_at"),
        (with("template_data", serde_json::json!([1])), "template_data"),
        (with("jurisdiction", serde_json::json!("US CA")), "jurisdiction"),
        (with("kind", serde_json::json!(7)), "kind"),
        (with("locale", serde_json::json!("en US")), "locale"),
        (with("locale", serde_json::json!("und")), "locale"),
        (with("locale", serde_json::json!(7)), "locale"),
        (with("time_zone", serde_json::json!("Europe/Atlantis")), "time_zone"),
        (with("time_zone", serde_json::json!("+02:00")), "time_zone"),
        (with("time_zone", serde_json::json!(2)), "time_zone"),
        (with("obligation", serde_json::json!(7)), "obligation"),
        (with("obligation", serde_json::json!("ca-annual-term")), "obligation"),
        (with("obligation", serde_json::json!("US-CA/")), "obligation"),
        (with("obligation", serde_json::json!("US-CA/a|b")), "obligation"),
        (with("obligation", serde_json::json!("US-CA/a/b")), "obligation"),
        (
            with("obligation", serde_json::json!(format!("US/{}", "r".repeat(MAX_OBLIGATION_LEN)))),
            "obligation",
        ),
        (with("email", serde_json::json!("victim@example.com,attacker@evil.example")), "email"),
        (with("email", serde_json::json!("Victim <victim@example.com>")), "email"),
        (with("email", serde_json::json!("a@-b.com")), "email"),
        (with("email", serde_json::json!("a\u{200B}@example.com")), "email"),
        (
            with("template_data", serde_json::json!({"plan_name": "x".repeat(MAX_TEMPLATE_DATA_BYTES)})),
            "template_data",
        ),
        (with("template_data", serde_json::json!({"amount": "12.34 CAD"})), "template_data.amount"),
        (
            with("template_data", serde_json::json!({"amount": {"minor": 1234, "currency": "cad"}})),
            "template_data.amount",
        ),
        (
            with("template_data", serde_json::json!({"amount": {"minor": 12.5, "currency": "CAD"}})),
            "template_data.amount",
        ),
        ("[]".to_string(), "body"),
        ("{not json".to_string(), "body"),
    ];
    for (body, field) in cases {
        let err = Job::parse(&body, &Icu).unwrap_err();
        assert_eq!(err.field, field, "{body}");
        assert!(err.to_string().contains(field));
    }
}

#[test]
fn a_withdraw_needs_only_the_identity_and_names_what_is_wrong() {
    let w = r#"{"action":"withdraw","subscription_id":"sub_8812","period_start":"2026-10-01",
        "kind":"renewal_notice_t72","revision":1,"reason":"cancelled"}"#;
    let Message::Withdraw(parsed) = Message::parse(w, &Icu).unwrap() else { panic!("a withdraw") };
    assert_eq!(parsed.identity.revision(), 1);
    assert_eq!(parsed.reason.as_deref(), Some("cancelled"));
    assert_eq!(Withdrawal::from_value(&parsed.to_value()).unwrap(), parsed);
    // The same identity as the job it withdraws: the same key.
    let job = Job::parse(&with("revision", serde_json::json!(1)), &Icu).unwrap();
    let secret = NoticeSecret::new(b"k".to_vec()).unwrap();
    assert_eq!(parsed.key(&secret), job.key(&secret));
    // A withdraw carrying a job's fields is still a withdraw.
    let Message::Withdraw(_) = Message::parse(&with("action", serde_json::json!("withdraw")), &Icu).unwrap()
    else {
        panic!("email and charge_at are ignored on a withdraw")
    };
    assert!(matches!(Message::parse(GOOD, &Icu).unwrap(), Message::Send(_)));
    assert!(matches!(
        Message::parse(&with("action", serde_json::json!("send")), &Icu).unwrap(),
        Message::Send(_)
    ));

    let withdraw = |f: &str, v: Value| {
        let mut body: Value = serde_json::from_str(w).unwrap();
        body[f] = v;
        body.to_string()
    };
    let cases = [
        (withdraw("action", serde_json::json!("cancel")), "action"),
        (withdraw("action", serde_json::json!(1)), "action"),
        (with("action", serde_json::json!("withdrawn")), "action"),
        (withdraw("subscription_id", Value::Null), "subscription_id"),
        (withdraw("period_start", serde_json::json!("October")), "period_start"),
        (withdraw("kind", serde_json::json!("")), "kind"),
        (withdraw("revision", serde_json::json!(-1)), "revision"),
        (withdraw("reason", serde_json::json!("two\nlines")), "reason"),
        (withdraw("reason", serde_json::json!("x".repeat(MAX_WITHDRAW_REASON_CHARS + 1))), "reason"),
        (withdraw("reason", serde_json::json!(5)), "reason"),
    ];
    for (body, field) in cases {
        let err = Message::parse(&body, &Icu).unwrap_err();
        assert_eq!(err.field, field, "{body}");
    }
    let err = Job::parse(w, &Icu).unwrap_err();
    assert_eq!(err.field, "action", "a withdraw is never read as a job");
    assert!(Message::parse(
        &withdraw("reason", serde_json::json!("x".repeat(MAX_WITHDRAW_REASON_CHARS))),
        &Icu
    )
    .is_ok());
}

#[test]
fn digest_tracks_content_not_identity_order() {
    let a = Job::parse(GOOD, &Icu).unwrap();
    let b = Job::parse(
        &with(
            "template_data",
            serde_json::json!({"amount":{"currency":"USD","minor":2900},"plan_name":"Coffee Box"}),
        ),
        &Icu,
    )
    .unwrap();
    assert_eq!(a.content_digest(), b.content_digest());
    let c = Job::parse(
        &with("template_data", serde_json::json!({"amount":{"minor":3900,"currency":"USD"}})),
        &Icu,
    )
    .unwrap();
    assert_ne!(a.content_digest(), c.content_digest());
}

#[test]
fn locale_and_time_zone_are_validated_canonicalised_and_round_tripped() {
    let job = Job::parse(&with("locale", serde_json::json!("pt_br")), &Icu).unwrap();
    assert_eq!(job.locale.as_ref().map(Locale::as_str), Some("pt-BR"));
    assert_eq!(job.time_zone, None);
    let mut body: Value = serde_json::from_str(GOOD).unwrap();
    body["locale"] = "de-AT".into();
    body["time_zone"] = "Europe/Vienna".into();
    let job = Job::from_value(&body, &Icu).unwrap();
    assert_eq!(job.time_zone.as_ref().map(TimeZone::as_str), Some("Europe/Vienna"));
    let again = job.to_value();
    assert_eq!(again["locale"], "de-AT");
    assert_eq!(again["time_zone"], "Europe/Vienna");
    assert_eq!(Job::from_value(&again, &Icu).unwrap(), job);
    assert!(Job::parse(GOOD, &Icu).unwrap().to_value().get("time_zone").is_none());
}

/// Ledger rows written before `time_zone` existed hold these digests; a redelivery of the
/// same job must still match them (else it dead-letters as a payload conflict). The values
/// were computed with `content_digest` as it was before the field was added.
#[test]
fn digest_of_a_job_without_time_zone_is_unchanged() {
    // The digested content of those rows, string amount and all: a job body no longer
    // carries one (the money object only), but the digest of what the rows hold is pinned.
    let as_then = |body: &str| {
        let mut job = Job::parse(body, &Icu).unwrap();
        job.template_data.insert("amount".into(), "29.00 USD".into());
        job
    };
    assert_eq!(
        as_then(GOOD).content_digest(),
        "9f5795aa670e1dc9b042d93d3a753088b2321be09d39a7c4710e440749cba67d"
    );
    let pt_br = as_then(&with("locale", serde_json::json!("pt-BR")));
    assert_eq!(pt_br.content_digest(), "de0f9858a55ea810373ae4f60bc4a4352374306cbfc47b8df28918ebc8e8b3ee");
    let zoned = as_then(&with("time_zone", serde_json::json!("UTC")));
    assert_ne!(zoned.content_digest(), as_then(GOOD).content_digest());
}

/// A job names the rule that owes it, round-trips it, and an old job without one stays valid
/// with the same digest: the rule says why, not what the customer reads.
#[test]
fn obligation_is_optional_round_tripped_and_not_digested() {
    let plain = Job::parse(GOOD, &Icu).unwrap();
    assert_eq!(plain.obligation, None);
    assert!(plain.to_value().get("obligation").is_none());
    let owed = Job::parse(&with("obligation", serde_json::json!("US-CA/ca-annual-term")), &Icu).unwrap();
    assert_eq!(owed.obligation.as_deref(), Some("US-CA/ca-annual-term"));
    assert_eq!(owed.to_value()["obligation"], "US-CA/ca-annual-term");
    assert_eq!(Job::from_value(&owed.to_value(), &Icu).unwrap(), owed);
    assert_eq!(owed.content_digest(), plain.content_digest());
    assert!(Job::parse(&with("obligation", Value::Null), &Icu).unwrap().obligation.is_none());
}
