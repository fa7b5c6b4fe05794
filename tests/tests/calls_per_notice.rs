//! DynamoDB calls per notice on the default send path (rate limits on), counted from moto's own
//! request log: batches of 10 with a realistic recipient-domain mix (35 % gmail.com, 15 %
//! outlook.com, 10 % yahoo.com, the rest on domains of their own). Per batch of first deliveries:
//! no read (each claim decides), one token write per receiving provider present and one for the
//! account (the long tail has no bucket of its own; plus the rare refused write retried), then a
//! claim and a commit per notice. The same batches redelivered, or replayed by an operator: one
//! `BatchGetItem` each (the dedupe read) and nothing else — no token, no claim.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{Duration, Utc};
use notice_e2e::amz_target;
use notice_e2e::sender_app::*;
use notice_ledger::rate::RateLimits;
use serde_json::Value;

/// The domain of notice `i` of a batch: 3–4 gmail.com, 1–2 outlook.com, 1 yahoo.com, the rest
/// each its own domain.
fn domain(batch: usize, i: usize) -> String {
    match (batch * 10 + i) % 20 {
        0..=6 => "gmail.com".into(),
        7..=9 => "outlook.com".into(),
        10 | 11 => "yahoo.com".into(),
        n => format!("tail{batch}-{n}.example"),
    }
}

/// DynamoDB operations in the recording, by `X-Amz-Target` operation name.
fn dynamodb_calls(recorded: &[Value]) -> BTreeMap<String, usize> {
    let mut calls = BTreeMap::new();
    for entry in recorded {
        if let Some(op) = amz_target(entry).and_then(|t| t.strip_prefix("DynamoDB_20120810.")) {
            *calls.entry(op.to_owned()).or_default() += 1;
        }
    }
    calls
}

#[tokio::test]
async fn the_default_path_makes_no_read_one_token_write_per_provider_and_two_writes_per_notice() {
    let env = env().await;
    let mut s = settings(&env, false);
    // As shipped: the built-in limits with the account rate a sender reads from SES at start
    // (high enough that nothing here waits for a token).
    let limits = RateLimits::builtin().with_account_rate(Some(1000.0));
    s.send.rate_limits = Some(limits.clone());
    let app = app_with(&env, s, None).await;
    let charge = Utc::now() + Duration::hours(48);
    let batches = 6;
    let mut events = Vec::new();
    let mut all_bodies = Vec::new();
    let mut buckets_per_batch = Vec::new();
    for b in 0..batches {
        let bodies: Vec<String> = (0..10)
            .map(|i| {
                let mut job = job_charged(&format!("calls_{b}_{i}"), 0, charge);
                job["email"] = format!("c{b}x{i}@{}", domain(b, i)).into();
                job.to_string()
            })
            .collect();
        // The token items the batch writes: its providers' buckets, and the account's.
        let buckets: BTreeSet<String> =
            (0..10).filter_map(|i| limits.bucket_for(&domain(b, i)).map(|bucket| bucket.item)).collect();
        buckets_per_batch.push(buckets.len() + 1);
        events.push(batch(&env, &bodies).await);
        all_bodies.push(bodies);
    }
    env.moto.start_recording().await;
    for event in events {
        let resp = invoke(&app, event).await;
        assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    }
    let recorded = env.moto.recorded_requests().await;
    let calls = dynamodb_calls(&recorded);
    let notices = batches * 10;
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), notices, "every notice sent once");
    let get = |op: &str| calls.get(op).copied().unwrap_or(0);
    assert_eq!(get("BatchGetItem"), 0, "first deliveries: each claim decides, no read: {calls:?}");
    assert_eq!(get("GetItem"), 0, "no read per record: {calls:?}");
    assert_eq!(get("PutItem"), notices, "one claim per notice: {calls:?}");
    let token_writes = get("UpdateItem") - notices; // the rest are the commits
    let buckets: usize = buckets_per_batch.iter().sum();
    // 2 providers + the account in the even batches (gmail.com, outlook.com), 1 + 1 in the odd
    // ones (yahoo.com): the six tail domains of a batch write nothing of their own.
    assert_eq!(buckets, 3 * 3 + 3 * 2, "{buckets_per_batch:?}");
    assert!(
        token_writes >= buckets && token_writes <= buckets + batches,
        "one token write per (batch, bucket), {buckets} in all, plus at most one refused write a batch: {token_writes} ({calls:?})"
    );
    let total: usize = calls.values().sum();
    let per_notice = total as f64 / notices as f64;
    eprintln!(
        "measured: {total} DynamoDB calls for {notices} notices in batches of 10 ({per_notice:.2} per notice; \
         {} token items a batch on average): {calls:?}",
        buckets as f64 / batches as f64
    );
    // The floor on this mix: (60 claims + 60 commits + 15 token writes) / 60 = 2.25.
    assert!(per_notice <= 2.4, "{per_notice:.2} calls per notice");

    // The same batches again — handed out a second time by the queue, then replayed by an
    // operator: each batch reads its rows once, finds every notice sent, and writes nothing.
    let mut again = Vec::new();
    for bodies in &all_bodies {
        let mut event = batch(&env, bodies).await;
        for record in &mut event.records {
            record.attributes.insert("ApproximateReceiveCount".into(), "2".into());
        }
        again.push(event);
    }
    for bodies in &all_bodies {
        again.push(batch_from(&env, bodies, Some("replay-calls")).await);
    }
    env.moto.start_recording().await;
    for event in again {
        let resp = invoke(&app, event).await;
        assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    }
    let calls = dynamodb_calls(&env.moto.recorded_requests().await);
    assert_eq!(
        calls,
        BTreeMap::from([("BatchGetItem".to_owned(), 2 * batches)]),
        "a redelivered or replayed batch: one read, no token, no claim"
    );
    assert!(env.moto.recorded_send_email_requests().await.is_empty(), "nothing sent again");
}

/// A producer's duplicate delivered for the first time is not read: its claim's conditional write
/// refuses it (one refused write and a token spent — never a second send).
#[tokio::test]
async fn a_first_delivery_of_a_sent_notice_is_refused_by_its_claim() {
    let env = env().await;
    let mut s = settings(&env, false);
    s.send.rate_limits = Some(RateLimits::builtin().with_account_rate(Some(1000.0)));
    let app = app_with(&env, s, None).await;
    let body = job("calls_duplicate", 0).to_string();
    let first = invoke(&app, batch(&env, std::slice::from_ref(&body)).await).await;
    assert!(first.batch_item_failures.is_empty(), "{first:?}");
    env.moto.start_recording().await;
    let duplicate = invoke(&app, batch(&env, std::slice::from_ref(&body)).await).await;
    assert!(duplicate.batch_item_failures.is_empty(), "suppressed and acked: {duplicate:?}");
    let calls = dynamodb_calls(&env.moto.recorded_requests().await);
    assert_eq!(calls.get("BatchGetItem"), None, "{calls:?}");
    assert_eq!(calls.get("PutItem"), Some(&1), "the refused claim: {calls:?}");
    assert!(env.moto.recorded_send_email_requests().await.is_empty(), "not sent a second time");
}
