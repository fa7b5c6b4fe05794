//! The per-domain rate buckets every ledger store keeps beside its rows: two conditional writes,
//! each checked as the store applies it, one bucket per name, and the same token arithmetic
//! through [`BucketGate`] whatever the store — including many gates racing on one bucket.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use notice_ledger::rate::{
    take, tokens, Admission, Applied, BucketGate, BucketState, BucketStore, RateGate, RateLimits,
};

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + secs, 0).single().unwrap_or_else(|| panic!("time {secs}"))
}

/// A domain no other case (or earlier run on a shared store) uses.
fn domain(case: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{case}-{}-{}.example", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `add` applies only to a busy bucket within its room, `reset` only to an idle or missing one;
/// a refused write answers with what the bucket holds and writes nothing.
pub async fn bucket_writes_apply_only_under_their_condition(store: Arc<dyn BucketStore>) {
    let d = domain("cond");
    let ok = |r: Result<Applied, notice_ledger::rate::BucketError>| r.unwrap_or_else(|e| panic!("{e}"));
    let s = |tat_us| BucketState { tat_us };
    assert_eq!(ok(store.load(&d).await.map(|_| Applied::Refused(None))), Applied::Refused(None));
    assert_eq!(
        ok(store.add(&d, 10, 100, 1_000).await),
        Applied::Refused(None),
        "no bucket: nothing to add to"
    );
    assert_eq!(ok(store.reset(&d, 150, 100).await), Applied::Done(s(150)), "a missing bucket starts");
    assert_eq!(ok(store.reset(&d, 170, 120).await), Applied::Refused(Some(s(150))), "busy: no reset");
    assert_eq!(ok(store.add(&d, 10, 120, 1_000).await), Applied::Done(s(160)));
    assert_eq!(ok(store.add(&d, 10, 120, 155).await), Applied::Refused(Some(s(160))), "no room left");
    assert_eq!(ok(store.add(&d, 10, 200, 1_000).await), Applied::Refused(Some(s(160))), "idle: no add");
    assert_eq!(ok(store.reset(&d, 210, 200).await), Applied::Done(s(210)), "idle: restarts");
    assert_eq!(store.load(&d).await.unwrap_or_else(|e| panic!("{e}")), Some(s(210)));
    let other = domain("cond-other");
    assert_eq!(store.load(&other).await.unwrap_or_else(|e| panic!("{e}")), None, "buckets are separate");
}

/// Through the gate: a burst, then one token per interval, exactly, on every store.
pub async fn buckets_admit_the_burst_then_refill_at_the_rate(store: Arc<dyn BucketStore>) {
    let d = domain("refill");
    let limits = RateLimits::parse(&format!(r#"{{"domains":{{"{d}":{{"per_second":0.5,"burst":3}}}}}}"#))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("limits"));
    let gate = BucketGate::new(store.clone(), limits);
    let admitted =
        |n: usize, answers: &[Admission]| answers.iter().filter(|a| **a == Admission::Admitted).count() == n;
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(gate.admit(&d, at(0)).await.unwrap_or_else(|e| panic!("{e}")));
    }
    assert!(admitted(3, &answers), "burst 3: {answers:?}");
    let Some(Admission::Limited { retry_at, .. }) = answers.last().copied() else { panic!("limited") };
    assert!(retry_at >= at(2) && retry_at <= at(2) + Duration::seconds(6), "next token at +2 s: {retry_at}");
    assert!(matches!(gate.admit(&d, at(1)).await, Ok(Admission::Limited { .. })), "not yet at +1 s");
    assert_eq!(gate.admit(&d, at(2)).await.unwrap_or_else(|e| panic!("{e}")), Admission::Admitted);
    // A fresh gate (another process) reads the stored bucket: it shares it.
    let limits = RateLimits::parse(&format!(r#"{{"domains":{{"{d}":{{"per_second":0.5,"burst":3}}}}}}"#))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("limits"));
    let other = BucketGate::new(store.clone(), limits);
    assert!(matches!(other.admit(&d, at(2)).await, Ok(Admission::Limited { .. })));
    let stored = store.load(&d).await.unwrap_or_else(|e| panic!("{e}"));
    let limit = notice_ledger::rate::Limit { per_second: 0.5, burst: 3 };
    assert_eq!(tokens(stored, at(2).timestamp_micros(), &limit), 0);
    assert_eq!(tokens(stored, at(8).timestamp_micros(), &limit), 3, "refilled after burst intervals");
    // A lagging clock (before the stored TAT) finds no extra room.
    assert!(matches!(other.admit(&d, at(-100)).await, Ok(Admission::Limited { .. })));
}

/// Many gates (senders) at the same instant on one bucket: exactly the burst is admitted.
pub async fn racing_gates_never_admit_more_than_the_burst(store: Arc<dyn BucketStore>) {
    let d = domain("race");
    let json = format!(r#"{{"domains":{{"{d}":{{"per_second":0.001,"burst":4}}}}}}"#);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..6 {
        let gate = BucketGate::new(
            store.clone(),
            RateLimits::parse(&json).unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("limits")),
        );
        let d = d.clone();
        tasks.spawn(async move {
            let mut admitted = 0;
            let mut errors = 0;
            for _ in 0..4 {
                match gate.admit(&d, at(0)).await {
                    Ok(Admission::Admitted) => admitted += 1,
                    Ok(Admission::Limited { .. }) => {}
                    Err(_) => errors += 1,
                }
            }
            (admitted, errors)
        });
    }
    let (mut admitted, mut errors) = (0, 0);
    while let Some(joined) = tasks.join_next().await {
        let (a, e) = joined.unwrap_or_else(|e| panic!("task: {e}"));
        admitted += a;
        errors += e;
    }
    assert_eq!(errors, 0);
    // Contended gates may defer rather than admit, but can never admit more than the burst.
    assert!(admitted <= 4, "{admitted} admitted from a burst of 4");
    assert!(admitted >= 1, "somebody wins");
    let gate = BucketGate::new(
        store,
        RateLimits::parse(&json).unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("limits")),
    );
    let mut rest = 0;
    while matches!(gate.admit(&d, at(0)).await, Ok(Admission::Admitted)) {
        rest += 1;
    }
    assert_eq!(admitted + rest, 4, "the bucket held exactly the burst");
}

/// Takes of several tokens at once, racing on one bucket: never more than the burst in all, the
/// rest refused; under a generous limit racing takes queue in the store and are all granted (no
/// contention deferrals), every token counted once.
pub async fn racing_takes_of_many_tokens_share_the_burst_exactly(store: Arc<dyn BucketStore>) {
    let tight = notice_ledger::rate::Limit { per_second: 0.001, burst: 10 };
    let d = domain("take-race");
    let now = at(0).timestamp_micros();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..6 {
        let (store, d) = (store.clone(), d.clone());
        tasks.spawn(async move {
            let mut granted = 0;
            for want in [1, 3, 2] {
                granted += take(&*store, &d, want, now, &tight, None)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"))
                    .granted;
            }
            granted
        });
    }
    let mut granted = 0;
    while let Some(joined) = tasks.join_next().await {
        granted += joined.unwrap_or_else(|e| panic!("task: {e}"));
    }
    assert!(granted <= 10, "{granted} tokens from a burst of 10");
    let rest = take(&*store, &d, 100, now, &tight, None).await.unwrap_or_else(|e| panic!("{e}")).granted;
    assert_eq!(granted + rest, 10, "the bucket held exactly the burst");
    assert_eq!(take(&*store, &d, 1, now, &tight, None).await.unwrap_or_else(|e| panic!("{e}")).granted, 0);

    let generous = notice_ledger::rate::Limit { per_second: 1_000.0, burst: 1_000 };
    let d = domain("take-queue");
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (store, d) = (store.clone(), d.clone());
        tasks.spawn(async move {
            let mut refused = 0;
            for _ in 0..5 {
                let taken =
                    take(&*store, &d, 2, now, &generous, None).await.unwrap_or_else(|e| panic!("{e}"));
                if taken.granted != 2 {
                    refused += 1;
                }
            }
            refused
        });
    }
    let mut refused = 0;
    while let Some(joined) = tasks.join_next().await {
        refused += joined.unwrap_or_else(|e| panic!("task: {e}"));
    }
    assert_eq!(refused, 0, "80 tokens of a 1 000 burst: racing takes queue, none deferred");
    let stored = store.load(&d).await.unwrap_or_else(|e| panic!("{e}")).unwrap_or_else(|| panic!("bucket"));
    assert_eq!(stored.tat_us, now + 80 * generous.interval_us(), "every token counted once");
}
