//! The planner's one private step: the next renewal on the subscription's grid. (The planner
//! against the ledger's rows is tested in `tests/intake.rs`, with the in-memory ledger.)

use chrono::{DateTime, Utc};

use super::*;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

/// The renewal planned ahead lies on the subscription's own grid: anchored on the 31st, the one
/// after 28 February is 31 March (as Stripe anchors it), charged as long after its period opens as
/// this one; off the grid (an anchor moved since the start), one term on.
#[test]
fn the_next_renewal_keeps_the_subscriptions_anchor() {
    let anchored = Renewal {
        subscription_id: "sub_8812".into(),
        started_at: Some(at("2026-01-31T10:00:00Z")),
        period_start_at: at("2026-02-28T10:00:00Z"),
        charge_at: at("2026-02-28T11:00:00Z"),
        amount_minor: 2900,
        currency: "USD".into(),
        email: "ada@example.com".into(),
        locale: Some("fr-CA".into()),
        jurisdiction: Some("US-CA".into()),
        plan_name: Some("Coffee Box".into()),
        occasion: Occasion::Renewal,
        term: Term::parse("month", 1),
        trial_days: None,
    };
    let next = super::plan::next_renewal(&anchored).unwrap();
    assert_eq!(
        (next.period_start_at, next.charge_at),
        (at("2026-03-31T10:00:00Z"), at("2026-03-31T11:00:00Z"))
    );
    let moved = Renewal { started_at: Some(at("2026-01-15T10:00:00Z")), ..anchored.clone() };
    assert_eq!(super::plan::next_renewal(&moved).unwrap().period_start_at, at("2026-03-28T10:00:00Z"));
    assert!(super::plan::next_renewal(&Renewal { term: None, ..anchored }).is_none());
}
