//! A free trial in Stripe's shapes: `customer.subscription.created` and `.updated` of a trialing
//! subscription (Stripe's published subscription fixture, and the sample in events/stripe) become
//! the trial's conversion; a moved or ended trial names its old end; what cannot be announced is
//! refused naming the field; the subscription record read from the API states the same trial.

use chrono::{DateTime, Utc};
use notice_ledger::intake::{BillingFact, BillingMapping, Trial, TrialConversion};
use notice_ledger::policy::Term;
use notice_stripe::StripeMapping;
use serde_json::{json, Value};

fn fixture(name: &str) -> Value {
    let path = format!("{}/../../tests/fixtures/stripe/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The sample a webhook endpoint receives when a 60-day trial of an annual plan starts.
fn sample() -> Value {
    let path = format!("{}/../../events/stripe/subscription-created-trial.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

const START: i64 = 1_801_353_600; // 2027-01-31T00:00:00Z
const END: i64 = 1_806_537_600; // 2027-04-01T00:00:00Z

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).unwrap()
}

fn trial_of(event: &Value) -> TrialConversion {
    match StripeMapping.fact(event) {
        Ok(BillingFact::TrialConversion(t)) => t,
        other => panic!("a trial conversion: {other:?}"),
    }
}

#[test]
fn a_trialing_subscription_created_is_its_trials_conversion() {
    let t = trial_of(&sample());
    assert_eq!(t.subscription_id, "sub_trial_annual_ca");
    assert_eq!(t.previous_end, None);
    assert_eq!(
        t.trial,
        Some(Trial {
            subscription_id: "sub_trial_annual_ca".into(),
            customer_id: "cus_trial_ca".into(),
            starts_at: at(START),
            ends_at: at(END),
            amount_minor: 29900,
            currency: "USD".into(),
            plan_name: Some("Coffee Box Annual".into()),
            term: Term::parse("year", 1),
            started_at: Some(at(START)),
        })
    );
    assert_eq!(t.trial.as_ref().and_then(Trial::days), Some(60));
    // Stripe's own fixture, made to trial: the amount is the price's unit amount × quantity.
    let mut sub = fixture("subscription.json");
    sub["status"] = "trialing".into();
    sub["trial_start"] = START.into();
    sub["trial_end"] = END.into();
    sub["items"]["data"][0]["quantity"] = 3.into();
    sub["cancel_at_period_end"] = false.into();
    sub["cancel_at"] = Value::Null;
    let mut event = sample();
    event["data"]["object"] = sub;
    let trial = trial_of(&event).trial.unwrap();
    assert_eq!((trial.amount_minor, trial.currency.as_str()), (3 * 2000, "USD"));
    assert_eq!(trial.term, Term::parse("month", 1));
}

#[test]
fn a_subscription_created_without_a_trial_or_ending_with_it_is_unhandled() {
    let mut event = sample();
    event["data"]["object"]["status"] = "active".into();
    assert!(matches!(StripeMapping.fact(&event), Ok(BillingFact::Unhandled { .. })));
    let mut event = sample();
    event["data"]["object"]["cancel_at_period_end"] = true.into();
    assert!(matches!(StripeMapping.fact(&event), Ok(BillingFact::Unhandled { .. })));
}

#[test]
fn what_a_trials_notice_cannot_state_is_refused_naming_the_field() {
    let refusal = |pointer: &str, value: Value| {
        let mut event = sample();
        *event.pointer_mut(pointer).unwrap() = value;
        StripeMapping.fact(&event).unwrap_err()
    };
    let r = refusal("/data/object/trial_end", Value::Null);
    assert_eq!((r.event_type.as_str(), r.field.as_str()), ("customer.subscription.created", "trial_end"));
    assert_eq!(refusal("/data/object/trial_start", Value::Null).field, "trial_start");
    // A tiered or metered price: no amount to announce, never a guessed one.
    let r = refusal("/data/object/items/data/0/price/unit_amount", Value::Null);
    assert_eq!(r.field, "items.data[0].price.unit_amount");
    assert_eq!(refusal("/data/object/customer", Value::Null).field, "customer");
    assert_eq!(refusal("/data/object/items/data", json!([])).field, "items.data");
}

fn updated(object: Value, previous: Value) -> Value {
    let mut event = sample();
    event["type"] = "customer.subscription.updated".into();
    event["data"]["object"] = object;
    event["data"]["previous_attributes"] = previous;
    event
}

#[test]
fn a_moved_trial_names_its_old_end_and_an_ended_one_plans_nothing_new() {
    let sub = sample()["data"]["object"].clone();
    let mut extended = sub.clone();
    extended["trial_end"] = (END + 30 * 86_400).into();
    let t = trial_of(&updated(extended, json!({"trial_end": END})));
    assert_eq!(t.previous_end, Some(at(END)));
    assert_eq!(t.trial.map(|t| t.ends_at), Some(at(END + 30 * 86_400)));
    // Ended early: active now, the old end named.
    let mut ended = sub.clone();
    ended["status"] = "active".into();
    ended["trial_end"] = (START + 86_400).into();
    let t = trial_of(&updated(ended, json!({"trial_end": END, "status": "trialing"})));
    assert_eq!((t.trial, t.previous_end), (None, Some(at(END))));
    // Any other change of a trialing subscription (its price, its metadata): the trial as it
    // stands, planned again — the same notice, or a corrected one.
    let t = trial_of(&updated(sub.clone(), json!({"metadata": {}})));
    assert_eq!((t.trial.map(|t| t.ends_at), t.previous_end), (Some(at(END)), None));
    // A cancellation during the trial stays a cancellation of the period the trial ends.
    let mut cancelled = sub;
    cancelled["cancel_at_period_end"] = true.into();
    match StripeMapping.fact(&updated(cancelled, json!({"cancel_at_period_end": false}))) {
        Ok(BillingFact::Cancellation(c)) => assert_eq!(c.period_start_at, at(END)),
        other => panic!("a cancellation: {other:?}"),
    }
}

#[test]
fn the_subscription_record_states_the_same_trial_as_its_event() {
    let object = sample()["data"]["object"].clone();
    let record = notice_stripe::api::subscription(&object);
    assert_eq!(record.trial, Some(Ok(trial_of(&sample()).trial.unwrap())));
    let mut active = object.clone();
    active["status"] = "active".into();
    assert_eq!(notice_stripe::api::subscription(&active).trial, None);
    let mut unpriced = object;
    unpriced["items"]["data"][0]["price"]["unit_amount"] = Value::Null;
    match notice_stripe::api::subscription(&unpriced).trial {
        Some(Err(r)) => assert_eq!(r.field, "items.data[0].price.unit_amount"),
        other => panic!("a refusal: {other:?}"),
    }
}
