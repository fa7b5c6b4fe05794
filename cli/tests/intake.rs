//! `noticectl intake stripe` as the local half of the whole path: Stripe's sample events
//! (events/stripe/events.jsonl: a monthly, an annual and a trial Californian's `invoice.upcoming`, a
//! cancellation, a deletion) planned under the US example's obligations, the messages piped into
//! `noticectl send` — the annual customer gets the annual notice, the monthly one and the trial
//! (without Stripe's API an upcoming invoice is the renewal it states) the 72 h reminder, each
//! cancellation withdraws every kind the rules can owe, and planning the same events again after
//! the send builds the same bodies, which the ledger suppresses.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/notices-us");
const EVENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/stripe/events.jsonl");
/// Inside both windows: the monthly 72 h → 24 h before 1 March, the annual 45 → 15 days before 1 April.
const NOW: &str = "2027-02-27T12:00:00Z";
const SECRET: &str = "intake-cli-test-secret-0123456789";

fn noticectl(state: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noticectl"));
    cmd.env("NOTICE_OPERATOR", "ops-test");
    cmd.arg("--state-dir").arg(state).args(args);
    cmd.env("NOTICE_KEY_SECRET", SECRET).env_remove("NOTICE_CONFIG").env_remove("NOTICE_INTAKE_KIND");
    cmd.env_remove("NOTICE_LEDGER_URL").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run noticectl");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn intake(state: &Path, file: &str) -> Output {
    noticectl(state, &["intake", "stripe", file, "--config", EXAMPLE, "--billing-time-zone", "UTC"], None)
}

/// `intake stripe FILE` under the US example, reading Stripe's API at `base` (a stand-in).
fn intake_reading(state: &Path, file: &Path, base: &str) -> Output {
    let file = file.to_str().unwrap_or_default();
    let key = "rk_test_51Restricted0Key0For0Tests";
    let args = ["intake", "stripe", file, "--config", EXAMPLE, "--billing-time-zone", "UTC"];
    noticectl(state, &[&args[..], &["--stripe-api-key", key, "--stripe-api-base", base]].concat(), None)
}

fn messages(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn stripes_events_become_the_owed_notices_and_a_second_pass_sends_nothing_more() {
    let state = tempfile::tempdir().unwrap();
    let planned = intake(state.path(), EVENTS);
    let stderr = String::from_utf8_lossy(&planned.stderr).into_owned();
    assert_eq!(planned.status.code(), Some(0), "{stderr}");
    let bodies = messages(&planned);
    let jobs: Vec<(&str, &str)> = bodies
        .iter()
        .filter(|m| m.get("action").is_none())
        .map(|m| (m["subscription_id"].as_str().unwrap(), m["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        jobs,
        [
            ("sub_monthly_ca", "renewal_notice_t72"),
            ("sub_annual_ca", "annual_renewal"),
            ("sub_trial_ca", "renewal_notice_t72")
        ]
    );
    let withdrawn: Vec<&str> = bodies
        .iter()
        .filter(|m| m["action"] == "withdraw" && m["subscription_id"] == "sub_annual_ny")
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    // Every kind for the cancelled period — an announced kind (a price change's, a trial
    // conversion's: the US example's trial rules owe `renewal_notice_t72` too) at its first
    // revision without a row and the one past it, where a superseded notice's successor may be
    // parked — and the anniversary reminder planned a renewal ahead for the period after it.
    assert_eq!(
        withdrawn,
        [
            "anniversary_reminder",
            "annual_renewal",
            "price_change",
            "price_change",
            "renewal_notice_t72",
            "renewal_notice_t72",
            "trial_conversion",
            "trial_conversion",
            "anniversary_reminder"
        ]
    );
    assert!(stderr.contains("events: 5 · jobs: 3 · withdraws: 18 · ignored: 0 · refused: 0"), "{stderr}");

    let send = |input: &[u8]| {
        noticectl(state.path(), &["send", "-", "--config", EXAMPLE, "--now", NOW], Some(input))
    };
    let sent = send(&planned.stdout);
    let report = String::from_utf8_lossy(&sent.stdout).into_owned();
    assert_eq!(sent.status.code(), Some(0), "{report}{}", String::from_utf8_lossy(&sent.stderr));
    assert!(report.contains("3 sent, 18 withdrawn"), "{report}");
    let outbox: Vec<String> = std::fs::read_dir(state.path().join("outbox"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(outbox.len(), 3);
    assert!(outbox
        .iter()
        .any(|m| m.contains("grace@example.com") && m.contains("renews automatically for another term")));

    // Stripe delivers again: the same bodies (revision 0 reused), which the ledger suppresses; the
    // cancellations find their tombstones and plan nothing.
    let again = intake(state.path(), EVENTS);
    let resent = messages(&again);
    assert_eq!(resent.iter().filter(|m| m.get("action").is_none()).count(), 3);
    assert_eq!(&resent[..3], &bodies[..3], "a redelivery plans the very same jobs");
    let second = send(&again.stdout);
    assert_eq!(resent.len(), 3, "the withdraws are already written: {resent:?}");
    let report = String::from_utf8_lossy(&second.stdout).into_owned();
    assert!(report.contains("3 job(s): 3 suppressed"), "{report}");
    assert_eq!(std::fs::read_dir(state.path().join("outbox")).unwrap().count(), 3, "nothing sent twice");
}

#[test]
fn an_event_no_rule_can_place_is_refused_naming_the_fact_and_exits_one() {
    let state = tempfile::tempdir().unwrap();
    let mut event: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../events/stripe/upcoming-monthly.json"
        ))
        .unwrap(),
    )
    .unwrap();
    event["data"]["object"]["customer_address"]["state"] = "CO".into();
    let file = state.path().join("colorado.json");
    std::fs::write(&file, serde_json::to_string_pretty(&event).unwrap()).unwrap();
    let out = intake(state.path(), file.to_str().unwrap());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing to enqueue");
    assert!(stderr.contains("co-anniversary") && stderr.contains("the subscription's start"), "{stderr}");
}

/// Issue 49: the row and `noticectl evidence` name the rule that made the notice. An annual
/// Californian's `invoice.upcoming`, planned and sent with no AWS, is on the ledger under
/// California's annual-term rule, and `evidence` shows the rule and its statute (the block and
/// `--json`); the job carries it as `obligation`.
#[test]
fn evidence_names_the_california_annual_rule_that_made_the_notice() {
    let state = tempfile::tempdir().unwrap();
    let annual = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/stripe/upcoming-annual.json");
    let planned = intake(state.path(), annual);
    assert_eq!(planned.status.code(), Some(0), "{}", String::from_utf8_lossy(&planned.stderr));
    let bodies = messages(&planned);
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    assert_eq!(bodies[0]["obligation"], "US-CA/ca-annual-term");
    let period = bodies[0]["period_start"].as_str().unwrap().to_owned();

    let sent =
        noticectl(state.path(), &["send", "-", "--config", EXAMPLE, "--now", NOW], Some(&planned.stdout));
    let report = String::from_utf8_lossy(&sent.stdout).into_owned();
    assert_eq!(sent.status.code(), Some(0), "{report}{}", String::from_utf8_lossy(&sent.stderr));
    assert!(report.contains("1 sent"), "{report}");

    let evidence = |extra: &[&str]| {
        let mut args = vec![
            "evidence",
            "--subscription-id",
            "sub_annual_ca",
            "--period-start",
            &period,
            "--config",
            EXAMPLE,
        ];
        args.extend_from_slice(extra);
        let out = noticectl(state.path(), &args, None);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
        text
    };
    let blocks = evidence(&[]);
    assert!(
        blocks.contains("  rule       US-CA/ca-annual-term — Cal. Bus. & Prof. Code section 17602"),
        "{blocks}"
    );
    let json: Value = serde_json::from_str(&evidence(&["--json"])).unwrap();
    let notice = &json["notices"][0];
    assert_eq!(notice["kind"], "annual_renewal");
    assert_eq!(notice["state"], "sent");
    assert_eq!(notice["obligation"], "US-CA/ca-annual-term");
    assert!(notice["obligation_description"].as_str().unwrap().contains("section 17602"), "{notice}");
    let wide = evidence(&["--wide"]);
    assert!(wide.contains("US-CA/ca-annual-term"), "{wide}");
}

/// A one-request-at-a-time stand-in for Stripe's API on 127.0.0.1:0: answers every
/// `GET /v1/subscriptions/{id}` with `object` (Stripe's subscription object), counting requests.
fn stripe_stand_in(object: Value) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let (base, served, _) = stripe_objects(Value::Null, object);
    (base, served)
}

/// The same, answering `GET /v1/customers/{id}` with `customer` too; the subscription object it
/// serves can be moved on (as Stripe's record moves with each change) through the mutex.
#[allow(clippy::type_complexity)]
fn stripe_objects(
    customer: Value,
    subscription: Value,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>, std::sync::Arc<std::sync::Mutex<Value>>) {
    use std::io::{Read, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let record = std::sync::Arc::new(std::sync::Mutex::new(subscription));
    let (count, current) = (served.clone(), record.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let head = String::from_utf8_lossy(&head).into_owned();
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let object = if head.starts_with("GET /v1/subscriptions/") {
                current.lock().unwrap().clone()
            } else if head.starts_with("GET /v1/customers/") {
                customer.clone()
            } else {
                Value::Null
            };
            let (status, body) =
                if object.is_null() { (404, "{}".to_owned()) } else { (200, object.to_string()) };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (base, served, record)
}

/// Stripe's own published object (`tests/fixtures/stripe`, from `stripe/openapi`'s fixtures).
fn fixture(name: &str) -> Value {
    let path = format!("{}/../tests/fixtures/stripe/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// When the new price applies in the change-back test: 1 April 2027, 00:00 UTC.
const APPLIES: i64 = 1_806_537_600;

/// Stripe's invoice fixture as a subscription's latest invoice: its line bills the month before
/// `APPLIES` at 29.00, the amount in force before a price change.
fn invoice_before_applies() -> Value {
    let mut invoice = fixture("invoice.json");
    let line = &mut invoice["lines"]["data"][0];
    line["amount"] = 2900.into();
    line["period"] = serde_json::json!({"start": APPLIES - 31 * 86_400, "end": APPLIES});
    line["parent"]["type"] = "subscription_item_details".into();
    line["parent"]["subscription_item_details"]["proration"] = false.into();
    invoice
}

/// Stripe's subscription fixture for `cus_back`, now at `amount` a month from `APPLIES`, its
/// latest invoice (Stripe's invoice fixture, expanded) billing the current period at 29.00.
fn subscription_now(amount: i64) -> Value {
    let mut sub = fixture("subscription.json");
    sub["id"] = "sub_back_ca".into();
    sub["customer"] = "cus_back".into();
    sub["cancel_at_period_end"] = false.into();
    sub["cancel_at"] = Value::Null;
    sub["items"]["data"][0]["current_period_end"] = APPLIES.into();
    sub["items"]["data"][0]["price"]["unit_amount"] = amount.into();
    sub["latest_invoice"] = invoice_before_applies();
    sub
}

/// `customer.subscription.updated`: the price from `from` to `to` (event.json's envelope).
fn changed(id: &str, from: i64, to: i64) -> String {
    let mut sub = subscription_now(to);
    sub["latest_invoice"] = "in_1Pgc6tB7WZ01zgkWu9fdqL6I".into();
    let mut old = sub["items"]["data"][0].clone();
    old["price"]["unit_amount"] = from.into();
    let mut event = fixture("event.json");
    event["id"] = id.into();
    event["type"] = "customer.subscription.updated".into();
    event["data"]["object"] = sub;
    event["data"]["previous_attributes"] = serde_json::json!({"items": {"data": [old]}});
    event.to_string()
}

/// Issue 49, item 3 through `noticectl intake stripe`: a Californian's price goes from 29.00 to
/// 39.00 (from 1 April), planned and handed to `send` before its window opens (deferred), then
/// back to 29.00 — what the current period was billed at, read from the subscription's latest
/// invoice on the stand-in. The change back plans withdraws only; the pending notice for 39.00,
/// sent again inside its window, meets its tombstone: nothing is ever announced. Both events in
/// one file, in either order, plan withdraws only (the change to 39.00 is overtaken: Stripe's
/// record is at 29.00).
#[test]
fn a_change_back_before_the_notice_went_out_only_withdraws() {
    let state = tempfile::tempdir().unwrap();
    // Stripe's customer fixture, with the fields the intake reads set (empty or `null` there).
    let mut customer = fixture("customer.json");
    customer["id"] = "cus_back".into();
    customer["email"] = "back@example.com".into();
    customer["preferred_locales"] = serde_json::json!(["en-US"]);
    customer["address"] = serde_json::json!({"city": "Sacramento", "country": "US", "line1": "1 Capitol Mall",
                                             "line2": null, "postal_code": "95814", "state": "CA"});
    let (base, served, record) = stripe_objects(customer, subscription_now(3900));
    let plan = |events: &str| {
        let file = state.path().join("events.jsonl");
        std::fs::write(&file, events).unwrap();
        let out = intake_reading(state.path(), &file, &base);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        out
    };
    let send = |input: &[u8], now: &str| {
        let out = noticectl(state.path(), &["send", "-", "--config", EXAMPLE, "--now", now], Some(input));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let actions = |out: &std::process::Output| -> Vec<(String, u64)> {
        messages(out)
            .iter()
            .map(|m| (m["action"].as_str().unwrap_or("send").to_owned(), m["revision"].as_u64().unwrap()))
            .collect()
    };
    let w = |r: u64| ("withdraw".to_owned(), r);

    let up = plan(&changed("evt_up", 2900, 3900));
    assert_eq!(actions(&up), [w(0), ("send".to_owned(), 1)]);
    // 1 February: 59 days ahead, before California's 30-day window: deferred.
    let early = send(&up.stdout, "2027-02-01T12:00:00Z");
    assert!(early.contains("1 withdrawn") && early.contains("1 deferred"), "{early}");

    *record.lock().unwrap() = subscription_now(2900);
    let back = plan(&changed("evt_back", 3900, 2900));
    assert_eq!(actions(&back), [w(1), w(2)], "withdraws only, where 39.00 waits");
    let report = send(&back.stdout, "2027-02-01T12:00:00Z");
    assert!(report.contains("2 withdrawn"), "{report}");
    // Delivered again: nothing more to withdraw.
    assert!(plan(&changed("evt_back", 3900, 2900)).stdout.is_empty());
    // The pending notice for 39.00, inside its window at last: it meets its tombstone.
    let inside = send(&up.stdout, "2027-03-10T12:00:00Z");
    assert!(inside.contains("suppressed") && !inside.contains(" sent"), "{inside}");
    assert!(std::fs::read_dir(state.path().join("outbox")).map(|d| d.count()).unwrap_or(0) == 0, "{inside}");

    // Both events in one file, in either order (Stripe's record at 29.00): withdraws only.
    for (file, sub) in [("evt_a", "sub_order_a"), ("evt_b", "sub_order_b")] {
        let (up, back) = (
            changed(file, 2900, 3900).replace("sub_back_ca", sub),
            changed(file, 3900, 2900).replace("sub_back_ca", sub),
        );
        let lines = if sub.ends_with('a') { format!("{up}\n{back}\n") } else { format!("{back}\n{up}\n") };
        let mut moved = subscription_now(2900);
        moved["id"] = sub.into();
        *record.lock().unwrap() = moved;
        let out = plan(&lines);
        assert_eq!(actions(&out), [w(0), w(1)], "{sub}");
    }
    assert!(served.load(std::sync::atomic::Ordering::Relaxed) >= 10, "read from Stripe, not guessed");
}

/// Issue 49, item 4: Colorado's 12-month reminder, planned from the renewal before it. A monthly
/// Coloradan whose subscription began on 1 April 2026 (read from Stripe's subscription record: the
/// upcoming invoice does not state it) is owed, with the charge of 1 March 2027, the merchant's
/// reminder and — for the 1 April 2027 renewal, which crosses the anniversary — the anniversary
/// reminder, 25–40 days before it. Sent early it is deferred (the Lambda parks it), inside its
/// window it goes out, and `evidence` names Colorado's rule.
#[test]
fn a_colorado_anniversary_reminder_is_planned_a_renewal_ahead_and_sent_inside_its_window() {
    use chrono::TimeZone as _;
    let state = tempfile::tempdir().unwrap();
    let started = chrono::Utc.with_ymd_and_hms(2026, 4, 1, 9, 0, 0).unwrap().timestamp();
    let (base, served) = stripe_stand_in(serde_json::json!({
        "id": "sub_monthly_ca", "object": "subscription", "start_date": started, "status": "active",
        "items": {"object": "list", "data": [{"object": "subscription_item",
            "price": {"object": "price", "recurring": {"interval": "month", "interval_count": 1}}}]}
    }));
    let mut event: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../events/stripe/upcoming-monthly.json"
        ))
        .unwrap(),
    )
    .unwrap();
    event["data"]["object"]["customer_address"]["state"] = "CO".into();
    let file = state.path().join("colorado.json");
    std::fs::write(&file, serde_json::to_string_pretty(&event).unwrap()).unwrap();
    let planned = intake_reading(state.path(), &file, &base);
    let stderr = String::from_utf8_lossy(&planned.stderr).into_owned();
    assert_eq!(planned.status.code(), Some(0), "{stderr}");
    assert_eq!(served.load(std::sync::atomic::Ordering::Relaxed), 1, "the start was read from Stripe");
    let bodies = messages(&planned);
    let jobs: Vec<(&str, &str, &str)> = bodies
        .iter()
        .map(|m| {
            (
                m["kind"].as_str().unwrap(),
                m["period_start"].as_str().unwrap(),
                m["obligation"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        jobs,
        [
            ("renewal_notice_t72", "2027-03-01", "US-CO/co-reminder"),
            ("anniversary_reminder", "2027-04-01", "US-CO/co-anniversary"),
        ]
    );
    let reminder = &bodies[1];
    assert!(reminder["charge_at"].as_str().unwrap().starts_with("2027-04-01"), "{reminder}");

    let send = |now: &str| {
        let out =
            noticectl(state.path(), &["send", "-", "--config", EXAMPLE, "--now", now], Some(&planned.stdout));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // 10 February: 50 days before the anniversary renewal, before its window (40 days) opens.
    let early = send("2027-02-10T12:00:00Z");
    assert!(early.contains("2 job(s): 2 deferred"), "{early}");
    // Its window opens 40 days before the 1 April charge (10:00 UTC, an hour after the period).
    assert!(early.contains("deferred           window opens 2027-02-20T10:00:00+00:00"), "{early}");
    // 27 February: 32 days before it, inside 25–40; and inside the 1 March reminder's 72 h.
    let inside = send(NOW);
    assert!(inside.contains("2 sent"), "{inside}");

    let out = noticectl(
        state.path(),
        &[
            "evidence",
            "--subscription-id",
            "sub_monthly_ca",
            "--period-start",
            "2027-04-01",
            "--config",
            EXAMPLE,
        ],
        None,
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("anniversary_reminder revision 0"), "{text}");
    assert!(text.contains("  rule       US-CO/co-anniversary — C.R.S. section 6-1-732"), "{text}");
}

/// The price-change sample (events/stripe/subscription-price-change.json: Stripe's subscription
/// fixture going from 29.00 to 39.00 a month on 1 April 2027, `previous_attributes` naming the old
/// item) through `noticectl intake stripe`, with Stripe's customer fixture (a Californian) and the
/// subscription's record (its latest invoice billed at 29.00) on the stand-in: one
/// `price_change` notice for 39.00 from 1 April, under California's rule.
#[test]
fn the_price_change_sample_is_one_price_change_notice_with_the_customer_read_from_stripe() {
    let state = tempfile::tempdir().unwrap();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/stripe/subscription-price-change.json");
    let event: Value = serde_json::from_str(&std::fs::read_to_string(sample).unwrap()).unwrap();
    // Stripe's customer fixture, with the fields the intake reads set.
    let mut customer = fixture("customer.json");
    customer["email"] = "price@example.com".into();
    customer["preferred_locales"] = serde_json::json!(["en-US"]);
    customer["address"] = serde_json::json!({"city": "Sacramento", "country": "US", "line1": "1 Capitol Mall",
                                             "line2": null, "postal_code": "95814", "state": "CA"});
    // The record as it stands after the change: 39.00 now, the current period billed at 29.00.
    let mut record = event["data"]["object"].clone();
    record["latest_invoice"] = invoice_before_applies();
    let (base, _, _) = stripe_objects(customer, record);
    let out = intake_reading(state.path(), Path::new(sample), &base);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let jobs: Vec<Value> = messages(&out).into_iter().filter(|m| m.get("action").is_none()).collect();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let job = &jobs[0];
    assert_eq!(
        (job["subscription_id"].as_str(), job["kind"].as_str(), job["period_start"].as_str()),
        (Some("sub_price_ca"), Some("price_change"), Some("2027-04-01"))
    );
    assert_eq!(job["template_data"]["amount"]["minor"], 3900);
    assert_eq!(job["email"], "price@example.com");
    assert_eq!(job["obligation"], "US-CA/ca-price-change");
}

const TRIAL_SAMPLE: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../events/stripe/subscription-created-trial.json");

/// The trial sample's customer (a Californian) and its subscription as Stripe's API serves them
/// (the sample's own object, at `minor` per year), on a stand-in: its base URL, the request count
/// and the record, which a test changes as Stripe's side changes.
fn trial_stand_in(
    minor: i64,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>, std::sync::Arc<std::sync::Mutex<Value>>) {
    let mut customer = fixture("customer.json");
    customer["id"] = "cus_trial_ca".into();
    customer["email"] = "trial@example.com".into();
    customer["preferred_locales"] = serde_json::json!(["en-US"]);
    customer["address"] = serde_json::json!({"city": "Sacramento", "country": "US", "line1": "1 Capitol Mall",
                                             "line2": null, "postal_code": "95814", "state": "CA"});
    stripe_objects(customer, trial_record(minor))
}

/// The trial sample's subscription at `minor` per year.
fn trial_record(minor: i64) -> Value {
    let sample: Value = serde_json::from_str(&std::fs::read_to_string(TRIAL_SAMPLE).unwrap()).unwrap();
    let mut object = sample["data"]["object"].clone();
    let item = &mut object["items"]["data"][0];
    item["price"]["unit_amount"] = minor.into();
    item["price"]["unit_amount_decimal"] = minor.to_string().into();
    item["plan"]["amount"] = minor.into();
    item["plan"]["amount_decimal"] = minor.to_string().into();
    object
}

/// The sends among `out`'s messages, and the revisions of its withdraws.
fn sends_and_withdraws(out: &Output) -> (Vec<Value>, Vec<u64>) {
    let (sends, withdraws): (Vec<Value>, Vec<Value>) =
        messages(out).into_iter().partition(|m| m.get("action").is_none());
    (sends, withdraws.iter().map(|w| w["revision"].as_u64().unwrap()).collect())
}

/// The trial sample (events/stripe/subscription-created-trial.json: Stripe's subscription fixture
/// trialing for 60 days, 31 January to 1 April 2027, on an annual price of 299.00) through
/// `noticectl intake stripe`, the customer (a Californian) and the subscription read from the
/// stand-in: California's trial-conversion notice, charged at the trial's end, minted one past
/// the revision it withdraws. Handed to `send` on 27 February it is deferred (its window opens 21
/// days before the end, on 11 March); on 20 March it is sent; the sample planned again builds the
/// same body, which the ledger suppresses.
#[test]
fn the_trial_sample_is_the_trial_conversion_notice_parked_until_its_window_and_sent_once() {
    let state = tempfile::tempdir().unwrap();
    let (base, served, _) = trial_stand_in(29900);
    let planned = intake_reading(state.path(), Path::new(TRIAL_SAMPLE), &base);
    assert_eq!(planned.status.code(), Some(0), "{}", String::from_utf8_lossy(&planned.stderr));
    let (jobs, withdrawn) = sends_and_withdraws(&planned);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(withdrawn, [0]);
    let job = &jobs[0];
    assert_eq!(
        (job["subscription_id"].as_str(), job["kind"].as_str(), job["period_start"].as_str()),
        (Some("sub_trial_annual_ca"), Some("trial_conversion"), Some("2027-04-01"))
    );
    assert_eq!(job["revision"], 1);
    assert!(job["charge_at"].as_str().unwrap().starts_with("2027-04-01T00:00:00"), "{job}");
    assert_eq!(job["template_data"]["amount"]["minor"], 29900);
    assert_eq!(job["email"], "trial@example.com");
    assert_eq!(job["obligation"], "US-CA/ca-long-trial");
    assert_eq!(
        served.load(std::sync::atomic::Ordering::Relaxed),
        2,
        "the subscription and the customer were read from Stripe"
    );

    let send = |input: &[u8], now: &str| {
        let out = noticectl(state.path(), &["send", "-", "--config", EXAMPLE, "--now", now], Some(input));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let early = send(&planned.stdout, NOW);
    assert!(early.contains("1 deferred"), "{early}");
    let inside = send(&planned.stdout, "2027-03-20T12:00:00Z");
    assert!(inside.contains("1 sent"), "{inside}");
    let again = intake_reading(state.path(), Path::new(TRIAL_SAMPLE), &base);
    assert_eq!(sends_and_withdraws(&again), (jobs, vec![]), "a redelivery plans the very same job");
    let report = send(&again.stdout, "2027-03-21T12:00:00Z");
    assert!(report.contains("1 job(s): 1 suppressed"), "{report}");
    assert_eq!(std::fs::read_dir(state.path().join("outbox")).unwrap().count(), 1, "sent once");
}

/// The trial sample, then its price raised to 399.00 during the trial (a
/// `customer.subscription.updated` of the same subscription, Stripe's record changed with it),
/// both planned weeks before the notice's window: the parked 299.00 meets a tombstone, the sample
/// delivered again afterwards plans nothing, and when the window opens the customer gets one
/// notice, at 399.00.
#[test]
fn a_price_raised_during_the_trial_is_told_once_at_the_new_amount() {
    let state = tempfile::tempdir().unwrap();
    let (base, _, record) = trial_stand_in(29900);
    let send = |input: &[u8], now: &str| {
        let out = noticectl(state.path(), &["send", "-", "--config", EXAMPLE, "--now", now], Some(input));
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let created = intake_reading(state.path(), Path::new(TRIAL_SAMPLE), &base);
    assert_eq!(created.status.code(), Some(0), "{}", String::from_utf8_lossy(&created.stderr));
    let early = send(&created.stdout, NOW);
    assert!(early.contains("1 deferred"), "{early}");

    *record.lock().unwrap() = trial_record(39900);
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(TRIAL_SAMPLE).unwrap()).unwrap();
    event["id"] = "evt_trial_raised".into();
    event["type"] = "customer.subscription.updated".into();
    event["data"]["object"] = trial_record(39900);
    event["data"]["previous_attributes"] = serde_json::json!({"items": {}});
    let file = state.path().join("raised.json");
    std::fs::write(&file, serde_json::to_string_pretty(&event).unwrap()).unwrap();
    let raised = intake_reading(state.path(), &file, &base);
    assert_eq!(raised.status.code(), Some(0), "{}", String::from_utf8_lossy(&raised.stderr));
    let (jobs, withdrawn) = sends_and_withdraws(&raised);
    assert_eq!(withdrawn, [1], "the parked 299.00's revision");
    assert_eq!((jobs.len(), jobs[0]["revision"].as_u64()), (1, Some(2)), "{jobs:?}");
    assert_eq!(jobs[0]["template_data"]["amount"]["minor"], 39900);
    let early = send(&raised.stdout, NOW);
    assert!(early.contains("1 deferred"), "{early}");

    // The sample delivered again, after the change: overtaken, nothing planned.
    let late = intake_reading(state.path(), Path::new(TRIAL_SAMPLE), &base);
    let stderr = String::from_utf8_lossy(&late.stderr);
    assert_eq!(late.status.code(), Some(0), "{stderr}");
    assert!(messages(&late).is_empty(), "{stderr}");
    assert!(stderr.contains("now converts at 39900 USD"), "{stderr}");

    // The window opens: both parked messages come due; 299.00 meets its tombstone.
    let due = [created.stdout.as_slice(), raised.stdout.as_slice()].concat();
    let report = send(&due, "2027-03-20T12:00:00Z");
    assert!(report.contains("1 sent"), "{report}");
    let outbox: Vec<String> = std::fs::read_dir(state.path().join("outbox"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(outbox.len(), 1, "one notice");
    assert!(outbox[0].contains("399.00") && !outbox[0].contains("299.00"), "{}", outbox[0]);
}
