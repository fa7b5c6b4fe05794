//! The Stripe mapping against Stripe's own published example objects (tests/fixtures/stripe, with
//! its README naming the source and what each test sets), in both API shapes.

use chrono::{DateTime, Utc};
use notice_ledger::intake::{BillingFact, BillingMapping, IntakeDecision, IntakePlanner};
use notice_ledger::keyring::KeyRing;
use notice_ledger::locale::TimeZone;
use notice_ledger::{Kind, NoticeSecret};
use notice_stripe::StripeMapping;
use notice_testkit::MemoryLedger;
use serde_json::{json, Value};

fn fixture(name: &str) -> Value {
    let path = format!("{}/../../tests/fixtures/stripe/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `event.json`'s envelope around `object`, as Stripe delivers an event of `event_type`.
fn event(event_type: &str, object: Value) -> Value {
    let mut e = fixture("event.json");
    e["type"] = json!(event_type);
    e["data"]["object"] = object;
    e
}

fn set(value: &mut Value, pointer: &str, new: Value) {
    *value.pointer_mut(pointer).unwrap_or_else(|| panic!("the fixture has {pointer}")) = new;
}

const PERIOD_START: i64 = 1_790_812_800; // 2026-10-01T00:00:00Z
const CHARGE: i64 = 1_790_816_400; // 2026-10-01T01:00:00Z

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).unwrap()
}

/// Stripe's invoice fixture made an upcoming renewal invoice (README: what is set and why).
fn upcoming_2025() -> Value {
    let mut inv = fixture("invoice.json");
    set(&mut inv, "/parent/subscription_details/subscription", json!("sub_1Pgc6rB7WZ01zgkWNy0Cn5nw"));
    set(&mut inv, "/customer_email", json!("ada@example.com"));
    set(&mut inv, "/next_payment_attempt", json!(CHARGE));
    set(&mut inv, "/lines/data/0/parent/type", json!("subscription_item_details"));
    set(&mut inv, "/lines/data/0/parent/subscription_item_details/proration", json!(false));
    set(&mut inv, "/lines/data/0/period", json!({"start": PERIOD_START, "end": PERIOD_START + 2_678_400}));
    set(&mut inv, "/customer_address/country", json!("US"));
    set(&mut inv, "/customer_address/state", json!("CA"));
    inv
}

fn upcoming_2024() -> Value {
    let mut inv = fixture("invoice.2024-06.json");
    set(&mut inv, "/subscription", json!("sub_1OPouiJN5vQBdWExOgfg6t5C"));
    set(&mut inv, "/customer_email", json!("ada@example.com"));
    set(&mut inv, "/next_payment_attempt", json!(CHARGE));
    set(&mut inv, "/lines/data/0/type", json!("subscription"));
    set(&mut inv, "/lines/data/0/period", json!({"start": PERIOD_START, "end": PERIOD_START + 2_678_400}));
    inv
}

fn renewal(event: &Value) -> notice_ledger::intake::Renewal {
    match StripeMapping.fact(event) {
        Ok(BillingFact::Renewal(r)) => r,
        other => panic!("a renewal: {other:?}"),
    }
}

#[test]
fn invoice_upcoming_in_both_api_shapes_is_the_same_renewal() {
    let new = renewal(&event("invoice.upcoming", upcoming_2025()));
    assert_eq!(new.subscription_id, "sub_1Pgc6rB7WZ01zgkWNy0Cn5nw");
    assert_eq!(new.period_start_at, at(PERIOD_START));
    assert_eq!(new.charge_at, at(CHARGE));
    assert_eq!((new.amount_minor, new.currency.as_str()), (1000, "USD"));
    assert_eq!(new.email, "ada@example.com");
    assert_eq!(new.jurisdiction.as_deref(), Some("US-CA"));
    assert_eq!(new.plan_name.as_deref(), Some("My First Invoice Item (created for API docs)"));
    assert_eq!(new.locale, None, "the invoice carries no preferred locale");

    let old = renewal(&event("invoice.upcoming", upcoming_2024()));
    assert_eq!(old.subscription_id, "sub_1OPouiJN5vQBdWExOgfg6t5C");
    assert_eq!((old.period_start_at, old.charge_at), (at(PERIOD_START), at(CHARGE)));
    assert_eq!(
        (old.amount_minor, old.currency.as_str(), old.email.as_str()),
        (1000, "USD", "ada@example.com")
    );
    assert_eq!(old.jurisdiction, None, "the fixture's address has no country");

    // An expanded subscription object names its id too; a preferred locale is carried when present.
    let mut expanded = upcoming_2024();
    set(&mut expanded, "/subscription", json!({"id": "sub_expanded", "object": "subscription"}));
    expanded["customer_preferred_locales"] = json!(["de-AT", "en"]);
    let r = renewal(&event("invoice.upcoming", expanded));
    assert_eq!((r.subscription_id.as_str(), r.locale.as_deref()), ("sub_expanded", Some("de-AT")));
}

#[test]
fn the_new_period_comes_from_the_subscription_line_else_the_period_end() {
    // Without a subscription line (the fixture's own one-off item): the invoice's period_end.
    let mut inv = upcoming_2025();
    set(&mut inv, "/lines/data/0/parent/type", json!("invoice_item_details"));
    set(&mut inv, "/period_end", json!(PERIOD_START + 60));
    assert_eq!(renewal(&event("invoice.upcoming", inv)).period_start_at, at(PERIOD_START + 60));
    // A proration line is never the period.
    let mut inv = upcoming_2024();
    set(&mut inv, "/lines/data/0/proration", json!(true));
    set(&mut inv, "/period_end", json!(PERIOD_START + 120));
    assert_eq!(renewal(&event("invoice.upcoming", inv)).period_start_at, at(PERIOD_START + 120));
}

#[test]
fn what_cannot_be_announced_is_refused_naming_the_field() {
    let refused = |object: Value| StripeMapping.fact(&event("invoice.upcoming", object)).unwrap_err();
    // The fixtures as published: no e-mail (2025 shape), no subscription (2024 shape).
    assert_eq!(refused(fixture("invoice.json")).field, "customer_email");
    let e = refused(fixture("invoice.2024-06.json"));
    assert_eq!(e.field, "subscription");
    assert!(e.to_string().contains("parent.subscription_details.subscription"), "{e}");
    let mut no_attempt = upcoming_2025();
    set(&mut no_attempt, "/next_payment_attempt", Value::Null);
    assert_eq!(refused(no_attempt).field, "next_payment_attempt");
    let mut no_amount = upcoming_2024();
    set(&mut no_amount, "/amount_due", json!("10.00"));
    assert_eq!(refused(no_amount).field, "amount_due");
    let mut envelope = event("invoice.upcoming", upcoming_2025());
    envelope.as_object_mut().unwrap().remove("type");
    assert_eq!(StripeMapping.fact(&envelope).unwrap_err().field, "type");
    let mut no_object = event("invoice.upcoming", upcoming_2025());
    no_object["data"] = json!({});
    assert_eq!(StripeMapping.fact(&no_object).unwrap_err().field, "data.object");
}

#[test]
fn cancellations_in_both_shapes_and_what_is_not_one() {
    let cancel = |event: Value| match StripeMapping.fact(&event) {
        Ok(BillingFact::Cancellation(c)) => c,
        other => panic!("a cancellation: {other:?}"),
    };
    // 2025 shape as published: cancel_at_period_end true, the period's end on its item.
    let c = cancel(event("customer.subscription.updated", fixture("subscription.json")));
    assert_eq!(c.subscription_id, "sub_1Pgc6rB7WZ01zgkWNy0Cn5nw");
    assert_eq!(c.period_start_at, at(976_287_773));
    assert!(c.reason.contains("cancel_at_period_end"), "{}", c.reason);
    // 2024 shape as published: not cancelling at the period's end, but cancel_at is set no later
    // than it — the renewal will not happen either.
    let c = cancel(event("customer.subscription.updated", fixture("subscription.2024-06.json")));
    assert_eq!(
        (c.subscription_id.as_str(), c.period_start_at),
        ("sub_1OPouiJN5vQBdWExOgfg6t5C", at(1_234_567_890))
    );
    assert!(c.reason.contains("cancel_at"), "{}", c.reason);
    // Deleted, both shapes.
    let c = cancel(event("customer.subscription.deleted", fixture("subscription.2024-06.json")));
    assert_eq!(c.reason, "stripe customer.subscription.deleted");
    let mut sub = fixture("subscription.json");
    set(&mut sub, "/cancel_at_period_end", json!(false));
    set(&mut sub, "/items/data/0/current_period_end", json!(PERIOD_START));
    assert_eq!(cancel(event("customer.subscription.deleted", sub.clone())).period_start_at, at(PERIOD_START));

    // An update that cancels nothing (a cancel_at after the renewal, a price change): unhandled.
    set(&mut sub, "/cancel_at", json!(PERIOD_START + 1));
    assert!(matches!(
        StripeMapping.fact(&event("customer.subscription.updated", sub.clone())),
        Ok(BillingFact::Unhandled { .. })
    ));
    set(&mut sub, "/cancel_at", Value::Null);
    assert!(matches!(
        StripeMapping.fact(&event("customer.subscription.updated", sub.clone())),
        Ok(BillingFact::Unhandled { .. })
    ));
    // No period end anywhere: refused, naming it.
    let mut sub = fixture("subscription.2024-06.json");
    set(&mut sub, "/current_period_end", Value::Null);
    let e = StripeMapping.fact(&event("customer.subscription.deleted", sub)).unwrap_err();
    assert_eq!(e.field, "current_period_end");
}

#[test]
fn other_events_and_invoices_sent_by_stripe_are_unhandled() {
    // event.json as published: plan.created.
    let published = fixture("event.json");
    assert_eq!(StripeMapping.event_type(&published), Some("plan.created"));
    assert_eq!(StripeMapping.event_id(&published), Some("evt_1Pgc76B7WZ01zgkWwyRHS12y"));
    assert!(matches!(StripeMapping.fact(&published), Ok(BillingFact::Unhandled { .. })));
    let mut send_invoice = upcoming_2025();
    set(&mut send_invoice, "/collection_method", json!("send_invoice"));
    assert!(matches!(
        StripeMapping.fact(&event("invoice.upcoming", send_invoice)),
        Ok(BillingFact::Unhandled { .. })
    ));
}

#[tokio::test]
async fn both_shapes_plan_the_same_job_for_the_same_subscription() {
    let planner = IntakePlanner::new(
        Kind::parse("renewal_notice_t72").unwrap(),
        TimeZone::parse("UTC").unwrap(),
        KeyRing::from(NoticeSecret::new("e2e-secret-0123456789").unwrap()),
        std::sync::Arc::new(notice_texts::Icu),
    );
    let mut old = upcoming_2024();
    set(&mut old, "/subscription", json!("sub_1Pgc6rB7WZ01zgkWNy0Cn5nw"));
    let mut new = upcoming_2025();
    set(&mut new, "/customer_address", Value::Null);
    set(&mut new, "/lines/data/0/description", json!(old["lines"]["data"][0]["description"].clone()));
    let ledger = MemoryLedger::new();
    let mut bodies = Vec::new();
    for invoice in [old, new] {
        let fact = StripeMapping.fact(&event("invoice.upcoming", invoice)).unwrap();
        let decisions = planner.plan("invoice.upcoming", &fact, &ledger).await.unwrap();
        let [IntakeDecision::Send(job)] = decisions.as_slice() else { panic!("one send: {decisions:?}") };
        bodies.push(job.to_value());
    }
    assert_eq!(bodies[0], bodies[1], "one key, one body, whichever API version Stripe used");
    assert_eq!(bodies[0]["period_start"], "2026-10-01");
}

#[test]
fn the_term_comes_from_the_price_or_the_lines_period() {
    use notice_ledger::policy::Term;
    // API 2025-03-31: no price on the line; the fixture's period is one month (31 days from 1 Oct).
    assert_eq!(renewal(&event("invoice.upcoming", upcoming_2025())).term, Term::parse("month", 1));
    let mut annual = upcoming_2025();
    let year_later = at(PERIOD_START).checked_add_months(chrono::Months::new(12)).unwrap().timestamp();
    set(&mut annual, "/lines/data/0/period", json!({"start": PERIOD_START, "end": year_later}));
    assert_eq!(renewal(&event("invoice.upcoming", annual)).term, Term::parse("year", 1));
    let mut odd = upcoming_2025();
    set(&mut odd, "/lines/data/0/period", json!({"start": PERIOD_START, "end": PERIOD_START + 1000}));
    assert_eq!(renewal(&event("invoice.upcoming", odd)).term, None, "no whole term: not guessed");
    // Older versions: the price's recurring interval wins over the period.
    let mut priced = upcoming_2024();
    set(&mut priced, "/lines/data/0/price/recurring", json!({"interval": "month", "interval_count": 3}));
    assert_eq!(renewal(&event("invoice.upcoming", priced)).term, Term::parse("month", 3));
}

/// `event` with `data.previous_attributes`: the fields a `customer.subscription.updated` changed,
/// with their old values (Stripe's event shape; the fixtures' envelope has none).
fn updated_with(object: Value, previous: Value) -> Value {
    let mut e = event("customer.subscription.updated", object);
    e["data"]["previous_attributes"] = previous;
    e
}

/// The 2025 subscription fixture renewing at `PERIOD_START`, not cancelling.
fn renewing_2025() -> Value {
    let mut sub = fixture("subscription.json");
    set(&mut sub, "/cancel_at_period_end", json!(false));
    set(&mut sub, "/cancel_at", Value::Null);
    set(&mut sub, "/items/data/0/current_period_end", json!(PERIOD_START));
    sub
}

fn price_change(event: &Value) -> notice_ledger::intake::PriceChange {
    match StripeMapping.fact(event) {
        Ok(BillingFact::PriceChange(c)) => c,
        other => panic!("a price change: {other:?}"),
    }
}

#[test]
fn a_changed_price_is_a_price_change_from_the_next_renewal_in_both_shapes() {
    // 2025 shape: the item's price went from 15.00 to the fixture's 20.00 (quantity 1).
    let sub = renewing_2025();
    let mut old_items = sub["items"].clone();
    set(&mut old_items, "/data/0/price/unit_amount", json!(1500));
    let c = price_change(&updated_with(sub.clone(), json!({"items": old_items})));
    assert_eq!(c.subscription_id, "sub_1Pgc6rB7WZ01zgkWNy0Cn5nw");
    assert_eq!(c.customer_id, "cus_QXg1o8vcGmoR32");
    assert_eq!((c.previous_minor, c.amount_minor, c.currency.as_str()), (1500, 2000, "USD"));
    assert_eq!((c.period_start_at, c.charge_at), (at(PERIOD_START), at(PERIOD_START)));
    assert_eq!(c.term, notice_ledger::policy::Term::parse("month", 1));
    assert_eq!(c.in_force_minor, None, "the event does not state the amount in force");
    // A quantity change changes the amount too.
    let mut more = sub.clone();
    set(&mut more, "/items/data/0/quantity", json!(3));
    let c = price_change(&updated_with(more, json!({"items": sub["items"].clone()})));
    assert_eq!((c.previous_minor, c.amount_minor), (2000, 6000));
    // 2024 shape: the old `plan` and `quantity` on the subscription; the period on it.
    let mut old = fixture("subscription.2024-06.json");
    set(&mut old, "/cancel_at", Value::Null);
    set(&mut old, "/current_period_end", json!(PERIOD_START));
    let c = price_change(&updated_with(
        old.clone(),
        json!({"plan": {"amount": 1500, "currency": "usd"}, "quantity": 1}),
    ));
    assert_eq!((c.previous_minor, c.amount_minor), (1500, 2000));
    assert_eq!((c.customer_id.as_str(), c.period_start_at), ("cus_PEHTIoPSgT0tXQ", at(PERIOD_START)));
    // The same amount per period (10.00 × 2 before, 20.00 × 1 now): nothing to announce.
    let same = updated_with(old, json!({"plan": {"amount": 1000, "currency": "usd"}, "quantity": 2}));
    assert!(matches!(StripeMapping.fact(&same), Ok(BillingFact::Unhandled { .. })));
}

#[test]
fn a_price_change_that_cannot_be_announced_is_refused_naming_the_field() {
    let sub = renewing_2025();
    let mut old_items = sub["items"].clone();
    set(&mut old_items, "/data/0/price/unit_amount", json!(1500));
    let refused =
        |sub: Value| StripeMapping.fact(&updated_with(sub, json!({"items": old_items.clone()}))).unwrap_err();
    let mut tiered = sub.clone();
    set(&mut tiered, "/items/data/0/price/unit_amount", Value::Null);
    assert_eq!(refused(tiered).field, "items.data[0].price.unit_amount");
    let mut no_customer = sub.clone();
    set(&mut no_customer, "/customer", Value::Null);
    assert_eq!(refused(no_customer).field, "customer");
    let mut no_period = sub.clone();
    set(&mut no_period, "/items/data/0/current_period_end", Value::Null);
    assert_eq!(refused(no_period).field, "current_period_end");
    // A cancellation in the same update wins: no notice for a renewal that will not happen.
    let mut cancelling = sub;
    set(&mut cancelling, "/cancel_at_period_end", json!(true));
    assert!(matches!(
        StripeMapping.fact(&updated_with(cancelling, json!({"items": old_items.clone()}))),
        Ok(BillingFact::Cancellation(_))
    ));
}
