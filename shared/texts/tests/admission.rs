//! The admission's verdicts, each step refusing what it should and naming the field, under the
//! example configuration (examples/notices-de: a policy that lists its kinds and requires content
//! in California). The admission is the core's (`notice_ledger::admission`); it judges here under
//! the texts that ship.

use std::path::Path;
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};

use notice_ledger::admission::*;
use notice_ledger::identity::NoticeSecret;
use notice_ledger::links::ManageLinks;
use notice_ledger::WindowDecision;
use notice_texts::{Bundle, NoticeConfig, Renderer};

fn notices_from(dir: &Path) -> Notices {
    let config = NoticeConfig::load(Bundle::from_dir(dir).unwrap()).unwrap();
    let policy = config.policy().clone();
    let links = ManageLinks::new("https://billing.example.com/manage", NoticeSecret::new("l").unwrap());
    Notices { texts: Arc::new(Renderer::new(Arc::new(config), links)), policy }
}

fn example() -> Notices {
    notices_from(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/notices-de"))
}

fn charge() -> DateTime<Utc> {
    "2027-01-31T09:00:00Z".parse().unwrap()
}

fn job(kind: &str) -> Value {
    json!({"subscription_id": "sub_1", "period_start": "2027-02-01", "kind": kind,
        "email": "ada@example.com", "charge_at": charge().to_rfc3339(), "jurisdiction": "US-CA",
        "template_data": {"plan_name": "Coffee Box", "amount": {"minor": 29000, "currency": "USD"}}})
}

fn admit(n: &Notices, body: &Value, now: DateTime<Utc>) -> Judgement {
    n.admit(&body.to_string(), now)
}

fn refused(judgement: Judgement) -> Refused {
    match judgement {
        Err(r) => r,
        Ok(a) => panic!("admitted: {a:?}"),
    }
}

#[test]
fn a_misspelled_kind_is_refused_for_a_job_and_a_withdraw_alike() {
    let n = example();
    let at = charge() - Duration::days(20);
    let as_job = refused(admit(&n, &job("anual_renewal"), at));
    let withdraw = json!({"action": "withdraw", "subscription_id": "sub_1", "period_start": "2027-02-01",
        "kind": "anual_renewal"});
    let as_withdraw = refused(admit(&n, &withdraw, at));
    for r in [&as_job, &as_withdraw] {
        assert_eq!((r.label(), r.field()), ("invalid", "kind"));
        assert!(r.reason().contains(r#"did you mean "annual_renewal"?"#), "{r}");
        assert!(matches!(r.why, Why::Invalid { cause: Cause::UnknownKind, .. }));
        assert_eq!(r.identity.as_ref().map(|i| i.kind().as_str()), Some("anual_renewal"));
    }
    let mut known = withdraw.clone();
    known["kind"] = "annual_renewal".into();
    assert!(matches!(admit(&n, &known, at), Ok(Admitted::Withdraw(_))));
}

#[test]
fn an_amount_is_the_money_object_only() {
    let n = example();
    let at = charge() - Duration::days(20);
    for (amount, says) in [
        (json!("12.34 CAD"), "must be an object"),
        (json!({"minor": 1234, "currency": "cad"}), "upper case"),
        (json!({"minor": 1234}), "`currency` is required"),
    ] {
        let mut body = job("annual_renewal");
        body["template_data"]["amount"] = amount;
        let r = refused(admit(&n, &body, at));
        assert_eq!((r.label(), r.field()), ("invalid", "template_data.amount"), "{r}");
        assert!(r.reason().contains(says), "{r}");
        assert!(r.identity.is_none(), "the schema refuses before the policy");
    }
}

#[test]
fn content_the_law_requires_is_checked_before_any_window() {
    let n = example();
    let mut body = job("annual_renewal");
    body["template_data"].as_object_mut().unwrap().remove("amount");
    // Even a job whose window closed long ago: the refusal comes first.
    let r = refused(admit(&n, &body, charge() + Duration::days(3)));
    assert_eq!((r.label(), r.field()), ("invalid", "template_data"));
    assert!(r.reason().contains("\"amount\"") && r.reason().contains("jurisdictions.US-CA"), "{r}");
    assert!(matches!(r.why, Why::Invalid { cause: Cause::MissingContent, .. }));
}

#[test]
fn the_window_at_the_instant_and_a_draft_for_every_job_that_may_be_sent() {
    let n = example();
    let body = job("annual_renewal");
    // US-CA annual renewal: 45 days to 15 days before the charge.
    let cases = [
        (charge() - Duration::days(50), "defer", true),
        (charge() - Duration::days(30), "send", true),
        (charge() - Duration::days(10), "missed", false),
    ];
    for (at, window, drafted) in cases {
        let Ok(Admitted::Send(admitted)) = admit(&n, &body, at) else { panic!("admitted at {at}") };
        let seen = match admitted.window {
            WindowDecision::Defer { until, .. } => {
                assert_eq!(until, charge() - Duration::days(45));
                "defer"
            }
            WindowDecision::Send { closes_at } => {
                assert_eq!(closes_at, charge() - Duration::days(15));
                "send"
            }
            WindowDecision::Missed { .. } => "missed",
        };
        assert_eq!(seen, window, "at {at}");
        assert_eq!(admitted.draft.is_some(), drafted, "at {at}");
    }
}

#[test]
fn a_template_the_job_cannot_fill_is_refused_even_before_its_window() {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/notices-de");
    for entry in ["manifest.json", "windows.json"] {
        std::fs::copy(src.join(entry), dir.path().join(entry)).unwrap();
    }
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    for entry in std::fs::read_dir(src.join("templates")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join("templates").join(entry.file_name())).unwrap();
    }
    // The English body prints a variable only some jobs carry.
    let body_txt = dir.path().join("templates/en.body.txt");
    let text = std::fs::read_to_string(&body_txt).unwrap();
    std::fs::write(&body_txt, text.replace("Thank you", "Seats: {{ seats }}. Thank you")).unwrap();
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("manifest.json")).unwrap()).unwrap();
    manifest["variables"]["seats"] = json!(3);
    std::fs::write(dir.path().join("manifest.json"), manifest.to_string()).unwrap();
    let n = notices_from(dir.path());

    let mut english = job("renewal_notice_t72");
    english["locale"] = "en".into();
    let early = charge() - Duration::days(10);
    let r = refused(admit(&n, &english, early));
    assert_eq!((r.label(), r.field()), ("render_failed", "template"));
    assert!(r.reason().contains("seats"), "{r}");
    english["template_data"]["seats"] = json!(3);
    assert!(admit(&n, &english, early).is_ok());
}
