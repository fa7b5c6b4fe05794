//! The Stripe API client against a local stand-in on 127.0.0.1:0 that answers as Stripe does
//! (its customer object: https://docs.stripe.com/api/customers/object, the fields read here and
//! their neighbours): the key goes as a Bearer token, the version is pinned, the bound holds, and
//! each failure is the fault the intake answers by.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use notice_ledger::intake::{CustomerSource, LookupError};
use notice_ledger::Fault;
use notice_stripe::api::{ApiKey, StripeApi, API_VERSION};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const KEY: &str = "rk_test_51Restricted0Key0For0Tests";

/// Stripe's customer object (`tests/fixtures/stripe/customer.json`, Stripe's own fixture), with
/// the fields this client reads set as a Californian's: `email` and `preferred_locales` (empty in
/// the fixture) and `address` (all `null` there).
fn customer_object() -> serde_json::Value {
    let mut customer = fixture("customer.json");
    customer["email"] = json!("jennyrosen@example.com");
    customer["preferred_locales"] = json!(["fr-CA", "en"]);
    customer["address"] = json!({
        "city": "Sacramento", "country": "US", "line1": "1 Capitol Mall", "line2": null,
        "postal_code": "95814", "state": "CA"
    });
    customer
}

/// What the stand-in does with each request.
#[derive(Clone)]
enum Serve {
    Answer(u16, String),
    Never,
}

/// A one-shot HTTP/1.1 stand-in: records each request's head and answers per `serve`.
async fn stand_in(serve: Serve) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let serve = serve.clone();
            let record = record.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                record.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                match serve {
                    Serve::Never => tokio::time::sleep(Duration::from_secs(60)).await,
                    Serve::Answer(status, body) => {
                        let answer = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = socket.write_all(answer.as_bytes()).await;
                    }
                }
            });
        }
    });
    (base, seen)
}

fn api(base: &str) -> StripeApi {
    StripeApi::new(base, ApiKey::parse(KEY).unwrap())
        .unwrap()
        .with_timeout(Duration::from_millis(500))
        .unwrap()
}

#[tokio::test]
async fn a_customer_is_read_with_the_key_as_bearer_and_the_version_pinned() {
    let (base, seen) = stand_in(Serve::Answer(200, customer_object().to_string())).await;
    let customer = api(&base).customer("cus_NffrFeUfNV2Hib").await.unwrap();
    assert_eq!(customer.email.as_deref(), Some("jennyrosen@example.com"));
    assert_eq!(customer.locale.as_deref(), Some("fr-CA"));
    assert_eq!(customer.jurisdiction.as_deref(), Some("US-CA"));
    let head = seen.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.starts_with("get /v1/customers/cus_nffrfeufnv2hib http/1.1\r\n"), "{head}");
    assert!(head.contains(&format!("authorization: bearer {}\r\n", KEY.to_ascii_lowercase())), "{head}");
    assert!(head.contains(&format!("stripe-version: {}\r\n", API_VERSION.to_ascii_lowercase())), "{head}");
}

#[tokio::test]
async fn a_stand_in_that_never_answers_is_a_timeout_within_the_bound() {
    let (base, _) = stand_in(Serve::Never).await;
    let started = Instant::now();
    let err = api(&base).customer("cus_1").await.unwrap_err();
    assert!(matches!(err, LookupError::Failed { fault: Fault::TimedOut, .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test]
async fn stripe_failing_is_a_fault_to_retry_and_a_missing_customer_is_not_found() {
    let (base, _) = stand_in(Serve::Answer(500, r#"{"error":{"message":"oops"}}"#.into())).await;
    let err = api(&base).customer("cus_1").await.unwrap_err();
    assert!(matches!(err, LookupError::Failed { fault: Fault::Other, .. }), "{err:?}");
    let (base, _) = stand_in(Serve::Answer(429, "{}".into())).await;
    assert!(matches!(
        api(&base).customer("cus_1").await,
        Err(LookupError::Failed { fault: Fault::Throttled, .. })
    ));
    let (base, _) = stand_in(Serve::Answer(401, r#"{"error":{"message":"Invalid API Key"}}"#.into())).await;
    let err = api(&base).customer("cus_1").await.unwrap_err();
    assert!(matches!(err, LookupError::Failed { fault: Fault::BadCredentials, .. }), "{err:?}");
    assert!(!format!("{err} {err:?}").contains(KEY), "the key is never in an error");
    let (base, _) = stand_in(Serve::Answer(403, "{}".into())).await;
    assert!(matches!(
        api(&base).customer("cus_1").await,
        Err(LookupError::Failed { fault: Fault::Denied { .. }, .. })
    ));
    let (base, _) = stand_in(Serve::Answer(404, r#"{"error":{"message":"No such customer"}}"#.into())).await;
    assert!(matches!(api(&base).customer("cus_1").await, Err(LookupError::NotFound { .. })));
    let deleted = json!({"id": "cus_1", "object": "customer", "deleted": true}).to_string();
    let (base, _) = stand_in(Serve::Answer(200, deleted)).await;
    assert!(matches!(api(&base).customer("cus_1").await, Err(LookupError::NotFound { .. })));
    // An id that is not Stripe's is never put in a path.
    let (base, seen) = stand_in(Serve::Answer(200, customer_object().to_string())).await;
    assert!(matches!(api(&base).customer("../v1/charges").await, Err(LookupError::NotFound { .. })));
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn no_listener_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let err = api(&base).customer("cus_1").await.unwrap_err();
    assert!(matches!(err, LookupError::Failed { fault: Fault::Unreachable(_), .. }), "{err:?}");
}

#[test]
fn the_key_is_checked_and_never_shown() {
    assert_eq!(ApiKey::parse(" ").unwrap_err(), notice_stripe::api::ApiSetupError::EmptyKey);
    assert!(ApiKey::parse("whsec_abc").is_err());
    let key = ApiKey::parse(KEY).unwrap();
    assert_eq!(key.kind(), "restricted");
    assert!(!format!("{key:?}").contains("Restricted0Key"));
    let api = StripeApi::new("http://127.0.0.1:1", key).unwrap();
    assert!(!format!("{api:?}").contains("Restricted0Key"));
    assert!(StripeApi::new("ftp://x", ApiKey::parse(KEY).unwrap()).is_err());
}

/// Stripe's subscription object, as its API reference shows one (trimmed to the fields around
/// those read: `start_date`, the first item's `price.recurring`).
fn subscription_object() -> serde_json::Value {
    json!({
        "id": "sub_1MowQVLkdIwHu7ixeRlqHVzs",
        "object": "subscription",
        "billing_cycle_anchor": 1679609767,
        "cancel_at": null,
        "cancel_at_period_end": false,
        "collection_method": "charge_automatically",
        "created": 1679609767,
        "currency": "usd",
        "customer": "cus_Na6dX7aXxi11N4",
        "items": {
            "object": "list",
            "data": [{
                "id": "si_Na6dzxczY5fwHx",
                "object": "subscription_item",
                "current_period_end": 1682288167,
                "current_period_start": 1679609767,
                "price": {
                    "id": "price_1MowQULkdIwHu7ixraBm864M",
                    "object": "price",
                    "currency": "usd",
                    "recurring": {"interval": "month", "interval_count": 1, "usage_type": "licensed"},
                    "type": "recurring",
                    "unit_amount": 1000
                },
                "quantity": 1
            }],
            "has_more": false
        },
        "livemode": false,
        "metadata": {},
        "start_date": 1679609767,
        "status": "active",
        "trial_end": null
    })
}

/// An anniversary's facts: the subscription's `start_date` and term, read with the same key,
/// version and bound as a customer; a subscription Stripe does not know is not found, and a key
/// without read access to subscriptions says so.
#[tokio::test]
async fn a_subscriptions_start_is_read_from_its_record() {
    use notice_ledger::intake::SubscriptionSource;
    let (base, seen) = stand_in(Serve::Answer(200, subscription_object().to_string())).await;
    let found = api(&base).subscription("sub_1MowQVLkdIwHu7ixeRlqHVzs").await.unwrap();
    assert_eq!(found.started_at.map(|t| t.timestamp()), Some(1679609767));
    assert_eq!(found.term, notice_ledger::policy::Term::parse("month", 1));
    let head = seen.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.starts_with("get /v1/subscriptions/sub_1mowqvlkdiwhu7ixerlqhvzs http/1.1\r\n"), "{head}");
    assert!(head.contains(&format!("stripe-version: {}\r\n", API_VERSION.to_ascii_lowercase())), "{head}");

    let (base, _) =
        stand_in(Serve::Answer(404, r#"{"error":{"message":"No such subscription"}}"#.into())).await;
    assert!(matches!(api(&base).subscription("sub_1").await, Err(LookupError::NotFound { .. })));
    let (base, _) = stand_in(Serve::Answer(403, "{}".into())).await;
    match api(&base).subscription("sub_1").await {
        Err(LookupError::Failed { fault: Fault::Denied { action }, .. }) => {
            assert_eq!(action.as_deref(), Some("read subscriptions"))
        }
        other => panic!("expected Denied, got {other:?}"),
    }
    let (base, _) = stand_in(Serve::Answer(500, "{}".into())).await;
    assert!(matches!(
        api(&base).subscription("sub_1").await,
        Err(LookupError::Failed { fault: Fault::Other, .. })
    ));
    let (base, seen) = stand_in(Serve::Answer(200, "{}".into())).await;
    assert!(matches!(api(&base).subscription("../v1/customers").await, Err(LookupError::NotFound { .. })));
    assert!(seen.lock().unwrap().is_empty(), "an id that is not Stripe's is never sent");
    // A record without a start: unstated, never guessed.
    let (base, _) =
        stand_in(Serve::Answer(200, json!({"id": "sub_2", "object": "subscription"}).to_string())).await;
    assert_eq!(api(&base).subscription("sub_2").await.unwrap().started_at, None);
}

/// Stripe's own published object (`tests/fixtures/stripe`, from `stripe/openapi`'s fixtures).
fn fixture(name: &str) -> serde_json::Value {
    let path = format!("{}/../../tests/fixtures/stripe/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The period the fixtures' subscription is in: it ends (and the next opens) here.
const PERIOD_END: i64 = 1_790_812_800;

/// Stripe's subscription (2025-03-31 shape) now at 39.00 a month, its latest invoice — expanded,
/// Stripe's invoice object — billing the current period at `billed` (its one line made the
/// subscription item's line for that period; the fixture's is a one-off proration).
fn changed_subscription(billed: i64) -> serde_json::Value {
    let mut sub = fixture("subscription.json");
    sub["items"]["data"][0]["current_period_end"] = json!(PERIOD_END);
    sub["items"]["data"][0]["price"]["unit_amount"] = json!(3900);
    let mut invoice = fixture("invoice.json");
    let line = &mut invoice["lines"]["data"][0];
    line["amount"] = json!(billed);
    line["period"] = json!({"start": PERIOD_END - 30 * 86_400, "end": PERIOD_END});
    line["parent"]["type"] = json!("subscription_item_details");
    line["parent"]["subscription_item_details"]["proration"] = json!(false);
    sub["latest_invoice"] = invoice;
    sub
}

/// Issue 49, item 3: a price change's facts from the subscription record, its latest invoice
/// expanded in the same request — the price now (Σ unit amount × quantity of the items: tells a
/// stale event) and the amount in force (the latest invoice's subscription lines for the current
/// period: tells a change back). Where the invoice cannot say, the amount in force is unknown,
/// never guessed.
#[tokio::test]
async fn a_subscriptions_price_now_and_the_amount_in_force_are_read_with_its_latest_invoice() {
    use notice_ledger::intake::{Amount, SubscriptionSource};
    let usd = |minor| Some(Amount { minor, currency: "USD".into() });
    let object = changed_subscription(2900);
    let (base, seen) = stand_in(Serve::Answer(200, object.to_string())).await;
    let found = api(&base).priced_subscription("sub_1Pgc6rB7WZ01zgkWNy0Cn5nw").await.unwrap();
    assert_eq!((found.price, found.in_force), (usd(3900), usd(2900)));
    let head = seen.lock().unwrap()[0].clone();
    assert!(head.contains("?expand%5B%5D=latest_invoice "), "one request, the invoice expanded: {head}");
    // A key without read access to invoices: denied, naming what it lacks.
    let (base, _) = stand_in(Serve::Answer(403, "{}".into())).await;
    match api(&base).priced_subscription("sub_1").await {
        Err(LookupError::Failed { fault: Fault::Denied { action }, .. }) => {
            assert_eq!(action.as_deref(), Some("read subscriptions and invoices"))
        }
        other => panic!("expected Denied, got {other:?}"),
    }

    let in_force = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut object = changed_subscription(2900);
        f(&mut object);
        notice_stripe::api::in_force(&object)
    };
    assert_eq!(in_force(&|_| {}), usd(2900));
    // Not expanded (an id, as without `expand`): unknown.
    assert_eq!(in_force(&|o| o["latest_invoice"] = json!("in_1Pgc6tB7WZ01zgkWu9fdqL6I")), None);
    // A proration invoice (Stripe's fixture line as published), or an older period's: unknown.
    assert_eq!(
        in_force(
            &|o| o["latest_invoice"]["lines"]["data"][0]["parent"]["type"] = json!("invoice_item_details")
        ),
        None
    );
    assert_eq!(
        in_force(&|o| o["latest_invoice"]["lines"]["data"][0]["period"]["end"] = json!(PERIOD_END - 1)),
        None
    );
    // More lines than the expanded invoice carries: unknown rather than a partial sum.
    assert_eq!(in_force(&|o| o["latest_invoice"]["lines"]["has_more"] = json!(true)), None);
    // Before API 2025-03-31: the line's `type: subscription`, the period end on the subscription.
    let old = in_force(&|o| {
        let line = &mut o["latest_invoice"]["lines"]["data"][0];
        line["parent"] = serde_json::Value::Null;
        line["type"] = json!("subscription");
        line["proration"] = json!(false);
        o["current_period_end"] = json!(PERIOD_END);
    });
    assert_eq!(old, usd(2900));
}
