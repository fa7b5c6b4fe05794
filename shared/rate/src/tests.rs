use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::*;
use proptest::prelude::*;

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn limit(per_second: f64, burst: u32) -> Limit {
    Limit { per_second, burst }
}

/// Runs arrivals (µs, any order) through `gcra` from an empty bucket; returns the admitted ones.
fn admitted(arrivals: &[i64], l: &Limit) -> Vec<i64> {
    let mut state = None;
    let mut out = Vec::new();
    for &now in arrivals {
        if let Decision::Admit(next) = gcra(state, now, l) {
            assert!(state.is_none_or(|s: BucketState| next.tat_us > s.tat_us), "TAT moves forward");
            state = Some(next);
            out.push(now);
        }
    }
    out
}

proptest! {
    /// Never more than `burst + rate · t` admissions in any span `t`, for sorted arrivals.
    #[test]
    fn never_over_burst_plus_rate_times_t(
        per_second in 0.01f64..2000.0,
        burst in 1u32..60,
        gaps in proptest::collection::vec(0i64..400_000, 1..400),
    ) {
        let l = limit(per_second, burst);
        let mut now = 1_700_000_000_000_000i64;
        let arrivals: Vec<i64> = gaps.iter().map(|g| { now += g; now }).collect();
        let got = admitted(&arrivals, &l);
        for (i, start) in got.iter().enumerate() {
            for (j, end) in got.iter().enumerate().skip(i) {
                let n = (j - i + 1) as f64;
                let span_s = (end - start) as f64 / 1e6;
                prop_assert!(n <= f64::from(burst) + per_second * span_s + 1e-9,
                    "{n} sends in {span_s} s at {per_second}/s burst {burst}");
            }
        }
    }

    /// A bucket left alone refills exactly: `k` intervals after draining, exactly `k` tokens
    /// (up to the burst), and a full bucket admits exactly `burst` at one instant.
    #[test]
    fn refill_is_exact(per_second in 0.01f64..5000.0, burst in 1u32..200, k in 0u32..250) {
        let l = limit(per_second, burst);
        let t0 = 1_700_000_000_000_000i64;
        let drained = admitted(&vec![t0; burst as usize + 5], &l);
        prop_assert_eq!(drained.len(), burst as usize);
        let mut state = Some(BucketState { tat_us: t0 + i64::from(burst) * l.interval_us() });
        let later = t0 + i64::from(k) * l.interval_us();
        let expect = k.min(burst);
        prop_assert_eq!(tokens(state, later, &l), expect);
        let mut n = 0;
        while let Decision::Admit(next) = gcra(state, later, &l) {
            state = Some(next);
            n += 1;
        }
        prop_assert_eq!(n, expect);
    }

    /// Clock skew: arrivals in any order (a sender whose clock lags behind the stored TAT)
    /// never admit more than `burst + rate · (latest − earliest)`, and an earlier `now` never
    /// admits where a later one would not.
    #[test]
    fn a_lagging_clock_never_admits_extra(
        per_second in 0.01f64..2000.0,
        burst in 1u32..60,
        offsets in proptest::collection::vec(0i64..5_000_000, 1..300),
        tat_ahead in 0i64..10_000_000,
        back in 0i64..10_000_000,
    ) {
        let l = limit(per_second, burst);
        let t0 = 1_700_000_000_000_000i64;
        let arrivals: Vec<i64> = offsets.iter().map(|o| t0 + o).collect();
        let got = admitted(&arrivals, &l).len() as f64;
        let span = (offsets.iter().max().unwrap() - offsets.iter().min().unwrap()) as f64 / 1e6;
        prop_assert!(got <= f64::from(burst) + per_second * span + 1e-9);

        let state = Some(BucketState { tat_us: t0 + tat_ahead });
        let earlier = t0 - back;
        if matches!(gcra(state, earlier, &l), Decision::Admit(_)) {
            prop_assert!(matches!(gcra(state, t0, &l), Decision::Admit(_)));
        }
        prop_assert!(tokens(state, earlier, &l) <= tokens(state, t0, &l));
    }
}

proptest! {
    /// n tokens at once are exactly n single admissions: the same count, the same state.
    #[test]
    fn n_tokens_in_one_write_equal_n_single_admissions(
        per_second in 0.01f64..5000.0,
        burst in 1u32..200,
        want in 0u32..300,
        ahead in -5_000_000i64..50_000_000,
    ) {
        let l = limit(per_second, burst);
        let now = 1_700_000_000_000_000i64;
        let start = Some(BucketState { tat_us: now + ahead });
        let g = grant(start, now, want, &l);
        let mut state = start;
        let mut singles = 0;
        while singles < want {
            match gcra(state, now, &l) {
                Decision::Admit(next) => { state = Some(next); singles += 1; }
                Decision::Limited { .. } => break,
            }
        }
        prop_assert_eq!(g.granted, singles);
        if singles > 0 {
            prop_assert_eq!(Some(g.next), state);
        }
        prop_assert!(g.granted <= burst);
    }

    /// Takes of any size from senders with skewed clocks, applied in any order (the order the
    /// store serialises them): never more than `burst + rate · (latest − earliest)` tokens, and
    /// for clocks in order never more than `burst + rate · t` in any span `t`.
    #[test]
    fn concurrent_n_token_takes_never_exceed_the_bound(
        per_second in 0.01f64..2000.0,
        burst in 1u32..60,
        takes in proptest::collection::vec((0i64..5_000_000, 1u32..12), 1..200),
    ) {
        let l = limit(per_second, burst);
        let t0 = 1_700_000_000_000_000i64;
        let apply = |order: &[(i64, u32)]| {
            let mut state = None;
            let mut granted = Vec::new();
            for &(offset, want) in order {
                let g = grant(state, t0 + offset, want, &l);
                if g.granted > 0 {
                    prop_assert!(state.is_none_or(|s: BucketState| g.next.tat_us > s.tat_us), "TAT moves forward");
                    state = Some(g.next);
                    granted.push((offset, g.granted));
                }
            }
            Ok(granted)
        };
        let any_order = apply(&takes)?;
        let total: u32 = any_order.iter().map(|(_, k)| k).sum();
        let span = (takes.iter().map(|t| t.0).max().unwrap() - takes.iter().map(|t| t.0).min().unwrap()) as f64 / 1e6;
        prop_assert!(f64::from(total) <= f64::from(burst) + per_second * span + 1e-9, "{total} in {span} s");

        let mut sorted = takes.clone();
        sorted.sort_by_key(|t| t.0);
        let in_order = apply(&sorted)?;
        for i in 0..in_order.len() {
            let mut n = 0u32;
            for j in i..in_order.len() {
                n += in_order[j].1;
                let span_s = (in_order[j].0 - in_order[i].0) as f64 / 1e6;
                prop_assert!(f64::from(n) <= f64::from(burst) + per_second * span_s + 1e-9,
                    "{n} tokens in {span_s} s at {per_second}/s burst {burst}");
            }
        }
    }
}

#[tokio::test]
async fn a_take_grants_many_tokens_in_one_write_and_the_rest_are_limited() {
    let store = MemoryBuckets::default();
    let l = limit(10.0, 5);
    let now = 1_700_000_000_000_000i64;
    let first = take(&store, "x.example", 3, now, &l, None).await.unwrap();
    assert_eq!(first.granted, 3);
    // A stale hint (no bucket) is corrected by the refused reset's answer.
    let second = take(&store, "x.example", 4, now, &l, None).await.unwrap();
    assert_eq!((second.granted, second.conflicts), (2, 1), "only the burst's rest fits");
    let third = take(&store, "x.example", 1, now, &l, second.state).await.unwrap();
    assert_eq!((third.granted, third.state, third.conflicts), (0, second.state, 0), "full: nothing written");
    assert_eq!(
        take(&store, "x.example", 1, now + l.interval_us(), &l, third.state).await.unwrap().granted,
        1
    );
}

#[tokio::test]
async fn memory_gate_admits_the_burst_then_one_per_interval_and_defers_with_jitter() {
    let limits = RateLimits::parse(
        r#"{"default":{"per_second":1,"burst":2},"domains":{"Slow.example":{"per_second":0.1,"burst":1}}}"#,
    )
    .unwrap()
    .unwrap();
    let gate = BucketGate::in_memory(limits);
    let t = at("2026-12-02T12:00:10Z");
    assert_eq!(gate.admit("a.example", t).await.unwrap(), Admission::Admitted);
    assert_eq!(gate.admit("a.example", t).await.unwrap(), Admission::Admitted);
    let Admission::Limited { retry_at, .. } = gate.admit("a.example", t).await.unwrap() else { panic!() };
    // The next token is due one interval later; jitter spreads over at most the whole bucket's
    // refill (burst 2 × 1 s).
    assert!(retry_at >= at("2026-12-02T12:00:11Z") && retry_at <= at("2026-12-02T12:00:13Z"), "{retry_at}");
    assert_eq!(gate.admit("slow.example", t).await.unwrap(), Admission::Admitted);
    assert!(matches!(gate.admit("slow.example", t).await.unwrap(), Admission::Limited { .. }));
    assert_eq!(gate.admit("a.example", at("2026-12-02T12:00:11Z")).await.unwrap(), Admission::Admitted);
    assert!(matches!(
        gate.admit("a.example", at("2026-12-02T12:00:11Z")).await.unwrap(),
        Admission::Limited { .. }
    ));
}

#[tokio::test]
async fn two_gates_on_one_store_share_the_bucket() {
    let store = Arc::new(MemoryBuckets::default());
    let limits = RateLimits::parse(r#"{"default":{"per_second":1,"burst":3}}"#).unwrap().unwrap();
    let a = BucketGate::new(store.clone(), limits.clone());
    let b = BucketGate::new(store, limits);
    let t = at("2026-12-02T12:00:00Z");
    let mut admitted = 0;
    for _ in 0..5 {
        for gate in [&a, &b] {
            if gate.admit("x.example", t).await.unwrap() == Admission::Admitted {
                admitted += 1;
            }
        }
    }
    assert_eq!(admitted, 3, "one burst between both gates");
}

/// A store whose calls take a turn of the runtime, like a network round trip.
struct SlowStore(MemoryBuckets);

#[async_trait]
impl BucketStore for SlowStore {
    async fn load(&self, bucket: &str) -> Result<Option<BucketState>, BucketError> {
        tokio::task::yield_now().await;
        self.0.load(bucket).await
    }
    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, BucketError> {
        tokio::task::yield_now().await;
        let out = self.0.add(bucket, add_us, now_us, max_us).await;
        tokio::task::yield_now().await;
        out
    }
    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, BucketError> {
        tokio::task::yield_now().await;
        let out = self.0.reset(bucket, tat_us, now_us).await;
        tokio::task::yield_now().await;
        out
    }
}

#[tokio::test]
async fn a_batch_to_one_domain_is_limited_by_rate_not_by_its_own_contention() {
    let limits = RateLimits::parse(r#"{"default":{"per_second":100000,"burst":50}}"#).unwrap().unwrap();
    let gate = BucketGate::new(Arc::new(SlowStore(MemoryBuckets::default())), limits).on_wall_clock();
    let t = Utc::now();
    let admitted = futures::future::join_all((0..10).map(|_| gate.admit("gmail.com", t))).await;
    assert!(admitted.iter().all(|a| matches!(a, Ok(Admission::Admitted))), "{admitted:?}");
}

#[test]
fn configuration_defaults_off_switches_and_errors_name_the_variable() {
    assert_eq!(RateLimits::builtin().limit_for("gmail.com"), Some(Limit::DEFAULT));
    for off in ["{}", "off", "\"off\"", " off ", r#"{"domains":{}}"#] {
        assert_eq!(RateLimits::parse(off).unwrap(), None, "{off}");
    }
    let only =
        RateLimits::parse(r#"{"domains":{"Example.ORG":{"per_second":2,"burst":4}}}"#).unwrap().unwrap();
    assert_eq!(only.limit_for("example.org"), Some(limit(2.0, 4)));
    assert_eq!(only.limit_for("gmail.com"), None, "only listed domains are limited");
    for bad in [
        r#"{"interval_secs":60,"default_per_interval":600}"#,
        r#"{"default":{"per_second":0,"burst":5}}"#,
        r#"{"default":{"per_second":-1,"burst":5}}"#,
        r#"{"default":{"per_second":1,"burst":0}}"#,
        r#"{"default":{"per_second":1}}"#,
        r#"{"domains":{"a@b":{"per_second":1,"burst":1}}}"#,
        r#"{"domains":{"x.org":{"per_second":1,"burst":1}},"dmains":{}}"#,
        "on",
    ] {
        let err = RateLimits::parse(bad).unwrap_err().to_string();
        assert!(err.contains(RATE_LIMITS_VAR), "{bad}: {err}");
    }
    let old = RateLimits::parse(r#"{"interval_secs":60,"default_per_interval":600}"#).unwrap_err();
    assert!(old.to_string().contains("token bucket"), "{old}");
}

#[test]
fn the_interval_rounds_up_so_the_rate_is_never_exceeded() {
    assert_eq!(limit(3.0, 1).interval_us(), 333_334);
    assert_eq!(limit(10.0, 50).tolerance_us(), 49 * 100_000);
    assert_eq!(limit(0.5, 1).interval_us(), 2_000_000);
}

fn requests(domains: &[(&str, u64)]) -> Vec<TokenRequest> {
    domains.iter().map(|(d, seed)| TokenRequest { domain: (*d).to_owned(), shard_seed: *seed }).collect()
}

fn count_admitted(answers: &[Admission]) -> usize {
    answers.iter().filter(|a| **a == Admission::Admitted).count()
}

#[tokio::test]
async fn a_batch_takes_one_write_per_domain_and_the_account_caps_the_sum() {
    let limits =
        RateLimits::parse(r#"{"default":{"per_second":1,"burst":4},"account":{"per_second":1,"burst":5}}"#)
            .unwrap()
            .unwrap();
    let store = Arc::new(CountingStore::default());
    let gate = BucketGate::new(store.clone(), limits);
    let t = at("2026-12-02T12:00:00Z");
    // 6 to a.example (burst 4: 2 limited by the domain), 3 to b.example: 7 pass the domains, the
    // account's burst of 5 admits 5 of them.
    let batch = requests(&[
        ("a.example", 0),
        ("a.example", 0),
        ("a.example", 0),
        ("a.example", 0),
        ("a.example", 0),
        ("a.example", 0),
        ("b.example", 0),
        ("b.example", 0),
        ("b.example", 0),
    ]);
    let answers = gate.admit_batch(&batch, t).await.unwrap();
    assert_eq!(count_admitted(&answers), 5, "{answers:?}");
    let by = |scope| {
        answers.iter().filter(|a| matches!(a, Admission::Limited { scope: s, .. } if *s == scope)).count()
    };
    assert_eq!(by(RateScope::Domain), 2);
    assert_eq!(by(RateScope::Account), 2);
    assert_eq!(store.writes(), 3, "one write per domain and one for the account");
    // The account is empty now: a lone record to a fresh domain is limited by the account.
    let one = gate.admit_batch(&requests(&[("c.example", 0)]), t).await.unwrap();
    assert!(matches!(one[0], Admission::Limited { scope: RateScope::Account, .. }), "{one:?}");
}

#[tokio::test]
async fn a_sharded_domain_splits_its_bound_picks_by_key_and_spills_once() {
    let limits = RateLimits::parse(r#"{"domains":{"gmail.com":{"per_second":4,"burst":8,"shards":4}}}"#)
        .unwrap()
        .unwrap();
    let store = Arc::new(MemoryBuckets::default());
    let gate = BucketGate::new(store.clone(), limits);
    let t = at("2026-12-02T12:00:00Z");
    // Shard 1 holds burst 2; 3 records keyed to it: 2 there, 1 spilled to shard 2.
    let answers = gate
        .admit_batch(&requests(&[("gmail.com", 1), ("gmail.com", 5), ("gmail.com", 9)]), t)
        .await
        .unwrap();
    assert_eq!(count_admitted(&answers), 3, "{answers:?}");
    let mut used = Vec::new();
    for s in 0..4 {
        used.push(store.load(&format!("gmail.com#{s}")).await.unwrap().is_some());
    }
    assert_eq!(used, [false, true, true, false], "seed 1 → shard 1, spilled to shard 2");
    // A batch's records take from the shard its first record picks, whatever their own keys:
    // seed 4 → shard 0 (burst 2), spilled to shard 1 (empty) — 2 of 40.
    let many: Vec<(&str, u64)> = (4..44).map(|i| ("gmail.com", i)).collect();
    let answers = gate.admit_batch(&requests(&many), t).await.unwrap();
    assert_eq!(count_admitted(&answers), 2, "{answers:?}");
    assert!(answers.iter().all(|a| !matches!(a, Admission::Limited { scope: RateScope::Account, .. })));
    // Whatever the batches, never more than the whole burst (8) at one instant: shard 3 is left.
    let mut admitted = 3 + 2;
    for first in 0..8u64 {
        let answers =
            gate.admit_batch(&requests(&[("gmail.com", first), ("gmail.com", 1)]), t).await.unwrap();
        admitted += count_admitted(&answers);
    }
    assert_eq!(admitted, 8, "the shards' bursts add up to the domain's");
}

#[tokio::test]
async fn a_sharded_bucket_is_written_once_a_batch_whatever_its_keys_scatter_over() {
    let limits = RateLimits::parse(r#"{"providers":{"google":{"per_second":400,"burst":2000,"shards":8}}}"#)
        .unwrap()
        .unwrap();
    let store = Arc::new(CountingStore::default());
    let gate = BucketGate::new(store.clone(), limits);
    let t = at("2026-12-02T12:00:00Z");
    // 25 records whose keys pick all 8 shards: one write, on the shard the first one picks.
    let batch: Vec<(&str, u64)> =
        (0..25).map(|i| (if i % 2 == 0 { "gmail.com" } else { "googlemail.com" }, i + 3)).collect();
    let answers = gate.admit_batch(&requests(&batch), t).await.unwrap();
    assert_eq!(count_admitted(&answers), 25, "{answers:?}");
    assert_eq!(store.writes(), 1, "one write for the provider, none for the account (unset)");
    assert!(store.inner.load("provider:google#3").await.unwrap().is_some());
}

#[tokio::test]
async fn a_sharded_account_spreads_batches_over_its_items_and_caps_the_sum() {
    // The account split in 4 (rate 1/s and burst 2 each); domains unlimited.
    let limits = RateLimits::parse(r#"{"account":{"per_second":4,"burst":8,"shards":4}}"#).unwrap().unwrap();
    assert_eq!(limits.account_limit().map(|a| a.shards), Some(4));
    assert!(limits.describe().contains("account 4/s burst 8 in 4 shards"), "{}", limits.describe());
    let store = Arc::new(CountingStore::default());
    let gate = BucketGate::new(store.clone(), limits);
    let t = at("2026-12-02T12:00:00Z");
    // A batch whose first record's key picks shard 1 (seed bits above 32): 3 records, 2 from
    // shard 1 and 1 spilled to shard 2 — two writes.
    let batch = requests(&[("a.example", 1 << 32), ("b.example", 7), ("c.example", 9)]);
    let answers = gate.admit_batch(&batch, t).await.unwrap();
    assert_eq!(count_admitted(&answers), 3, "{answers:?}");
    assert_eq!(store.writes(), 2);
    for (shard, used) in [(0, false), (1, true), (2, true), (3, false)] {
        assert_eq!(
            store.inner.load(&format!("@account#{shard}")).await.unwrap().is_some(),
            used,
            "shard {shard}"
        );
    }
    // Whatever the batches, never more than the whole burst at one instant.
    let mut admitted = 3;
    for i in 0..20u64 {
        let answers =
            gate.admit_batch(&requests(&[("d.example", i << 32), ("e.example", i)]), t).await.unwrap();
        admitted += count_admitted(&answers);
        assert!(answers.iter().all(|a| !matches!(a, Admission::Limited { scope: RateScope::Domain, .. })));
    }
    assert_eq!(admitted, 8, "the shards' bursts add up to the account's");
    let err =
        RateLimits::parse(r#"{"account":{"per_second":4,"burst":2,"shards":4}}"#).unwrap_err().to_string();
    assert!(err.contains("account") && err.contains("burst"), "{err}");
}

#[test]
fn shards_and_account_are_parsed_and_checked_by_name() {
    let l = RateLimits::parse(
        r#"{"domains":{"gmail.com":{"per_second":400,"burst":800,"shards":8}},"account":{"per_second":90,"burst":90}}"#,
    )
    .unwrap()
    .unwrap();
    assert_eq!(l.domain_limit("gmail.com").map(|d| d.shards), Some(8));
    assert_eq!(l.limit_for("gmail.com").unwrap().shard(8), limit(50.0, 100));
    assert_eq!(l.account(), Some(limit(90.0, 90)));
    assert_eq!(l.limit_for("outlook.com"), None, "only listed domains");
    for (bad, names) in [
        (r#"{"domains":{"g.com":{"per_second":1,"burst":4,"shards":0}}}"#, "shards"),
        (r#"{"domains":{"g.com":{"per_second":1,"burst":2,"shards":4}}}"#, "burst"),
        (r#"{"account":{"per_second":0,"burst":1}}"#, "account"),
        (r#"{"acount":{"per_second":1,"burst":1}}"#, "acount"),
    ] {
        let err = RateLimits::parse(bad).unwrap_err().to_string();
        assert!(err.contains(RATE_LIMITS_VAR) && err.contains(names), "{bad}: {err}");
    }
    // A configured default does not follow the account; the built-in provider limit does.
    let configured = RateLimits::parse(r#"{"default":{"per_second":3,"burst":3}}"#).unwrap().unwrap();
    assert_eq!(configured.with_account_rate(Some(100.0)).limit_for("x.org"), Some(limit(3.0, 3)));
    let builtin = RateLimits::builtin().with_account_rate(Some(100.0));
    assert_eq!(builtin.account(), Some(limit(90.0, 90)));
    assert_eq!(builtin.limit_for("gmail.com"), Some(limit(45.0, 225)));
    assert_eq!(builtin.limit_for("x.org"), None, "the long tail: the account only");
    assert_eq!(RateLimits::builtin().with_account_rate(None).limit_for("hotmail.de"), Some(Limit::DEFAULT));
}

#[test]
fn a_domain_takes_its_named_bucket_else_its_providers_else_the_default_else_only_the_accounts() {
    let l = RateLimits::parse(
        r#"{"providers":{"google":{"per_second":400,"burst":800,"shards":8},"default":{"per_second":20,"burst":100}},
            "domains":{"acme.example":"microsoft","Gmail.com":{"per_second":5,"burst":5},"solo.example":{"per_second":2,"burst":2}},
            "account":{"per_second":90,"burst":90}}"#,
    )
    .unwrap()
    .unwrap();
    let bucket = |d: &str| l.bucket_for(d).map(|b| (b.item, b.limit.limit, b.limit.shards));
    // A named domain is its own bucket, even one the table puts under a provider.
    assert_eq!(bucket("gmail.com"), Some(("gmail.com".into(), limit(5.0, 5), 1)));
    // The table's provider, with its own limit and shards; another provider's default.
    assert_eq!(bucket("googlemail.com"), Some(("provider:google".into(), limit(400.0, 800), 8)));
    assert_eq!(bucket("outlook.com"), Some(("provider:microsoft".into(), limit(20.0, 100), 1)));
    assert_eq!(bucket("live.co.uk"), bucket("hotmail.com"), "one platform, one bucket");
    // A company's domain on Microsoft 365, by configuration.
    assert_eq!(bucket("acme.example"), Some(("provider:microsoft".into(), limit(20.0, 100), 1)));
    assert_eq!(bucket("solo.example"), Some(("solo.example".into(), limit(2.0, 2), 1)));
    // The long tail: no bucket (no `default` configured) — the account only.
    assert_eq!(bucket("small-shop.example"), None);
    assert!(l.describe().contains("other domains: the account only"), "{}", l.describe());

    // A configuration without providers keeps its per-domain behaviour: gmail.com and
    // googlemail.com are two buckets under `default`.
    let old = RateLimits::parse(r#"{"default":{"per_second":10,"burst":50}}"#).unwrap().unwrap();
    assert_eq!(old.bucket_for("gmail.com").map(|b| b.item), Some("gmail.com".to_owned()));
    assert_eq!(old.bucket_for("googlemail.com").map(|b| b.item), Some("googlemail.com".to_owned()));
    // The built-in one keys by provider and leaves the tail to the account.
    let builtin = RateLimits::builtin();
    assert_eq!(
        builtin.bucket_for("GMAIL.com".to_ascii_lowercase().as_str()).map(|b| b.item),
        Some("provider:google".into())
    );
    assert_eq!(builtin.bucket_for("x.org"), None);

    for (bad, names) in [
        (r#"{"providers":{"gogle":{"per_second":1,"burst":1}}}"#, "\"gogle\" is not a provider"),
        (r#"{"domains":{"acme.example":"micrsoft"}}"#, "\"micrsoft\" is not a provider"),
        (r#"{"domains":{"acme.example":42}}"#, "domain acme.example"),
        (r#"{"domains":{"a.example":"google","A.example":{"per_second":1,"burst":1}}}"#, "listed twice"),
        (r#"{"providers":{"default":{"per_second":1,"burst":4,"shards":2}}}"#, "providers.default"),
        (r#"{"domains":{"acme.example":"microsoft"}}"#, "mapped to microsoft, which has no limit"),
        (
            r#"{"domains":{"acme.example":"microsoft"},"providers":{"google":{"per_second":1,"burst":1}}}"#,
            "add providers.microsoft",
        ),
    ] {
        let err = RateLimits::parse(bad).unwrap_err().to_string();
        assert!(err.contains(RATE_LIMITS_VAR) && err.contains(names), "{bad}: {err}");
    }
}

/// The write a batch costs: one per provider present (and per named domain), one for the account —
/// not one per distinct domain. The long tail writes only the account.
#[tokio::test]
async fn a_batch_writes_one_token_item_per_provider_present_and_one_for_the_account() {
    let store = Arc::new(CountingStore::default());
    let gate = BucketGate::new(store.clone(), RateLimits::builtin().with_account_rate(Some(1000.0)));
    let batch = requests(&[
        ("gmail.com", 1),
        ("googlemail.com", 2),
        ("gmail.com", 3),
        ("outlook.com", 4),
        ("hotmail.de", 5),
        ("tail-1.example", 6),
        ("tail-2.example", 7),
        ("tail-3.example", 8),
    ]);
    let answers = gate.admit_batch(&batch, at("2026-12-02T12:00:00Z")).await.unwrap();
    assert_eq!(count_admitted(&answers), 8);
    assert_eq!(store.writes(), 3, "google, microsoft, the account");
    let tail = requests(&[("tail-4.example", 9), ("tail-5.example", 10)]);
    gate.admit_batch(&tail, at("2026-12-02T12:00:01Z")).await.unwrap();
    assert_eq!(store.writes(), 4, "the tail: the account's write only");
}

/// Memory buckets that count writes.
#[derive(Default)]
struct CountingStore {
    inner: MemoryBuckets,
    writes: std::sync::atomic::AtomicUsize,
}

impl CountingStore {
    fn writes(&self) -> usize {
        self.writes.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait]
impl BucketStore for CountingStore {
    async fn load(&self, bucket: &str) -> Result<Option<BucketState>, BucketError> {
        self.inner.load(bucket).await
    }
    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, BucketError> {
        self.writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.add(bucket, add_us, now_us, max_us).await
    }
    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, BucketError> {
        self.writes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.reset(bucket, tat_us, now_us).await
    }
}

/// `gates` sender environments, one gate each over one store, each asking for `want` tokens of one
/// domain every `every_us` (staggered) for `span_us`, calls applied in time order: (tokens
/// granted, writes).
async fn many_gates_on_one_bucket(
    gates: u64,
    want: usize,
    every_us: i64,
    span_us: i64,
    limits: &str,
) -> (usize, usize) {
    let limits = RateLimits::parse(limits).unwrap().unwrap();
    let store = Arc::new(CountingStore::default());
    let gates: Vec<BucketGate> =
        (0..gates).map(|i| BucketGate::new(store.clone(), limits.clone()).with_jitter_seed(i)).collect();
    let t0 = at("2026-12-02T12:00:00Z").timestamp_micros();
    let batch = requests(&vec![("hot.example", 0); want]);
    let stagger = every_us / gates.len() as i64;
    let mut granted = 0;
    for tick in 0..span_us / every_us {
        for (i, gate) in gates.iter().enumerate() {
            let now = t0 + tick * every_us + i as i64 * stagger;
            let answers =
                gate.admit_batch(&batch, DateTime::from_timestamp_micros(now).unwrap()).await.unwrap();
            granted += count_admitted(&answers);
            for a in &answers {
                if let Admission::Limited { retry_at, .. } = a {
                    assert!(retry_at.timestamp_micros() >= now, "a retry in the past");
                }
            }
        }
    }
    (granted, store.writes())
}

/// The hold-off: 100 environments polling one hot bucket (200/s) with batches of 8 every 25 ms —
/// 160 times its rate — write it less than once per token (0.64), yet take ≥ 90 % of its rate.
/// Each remembering only "no room until the next interval", they wrote it 20 times per token.
#[tokio::test]
async fn many_gates_on_one_hot_bucket_write_it_far_less_than_once_per_token_and_take_its_rate() {
    let span_us = 20_000_000;
    let (granted, writes) =
        many_gates_on_one_bucket(100, 8, 25_000, span_us, r#"{"default":{"per_second":200,"burst":200}}"#)
            .await;
    let bound = 200 + 200 * span_us as usize / 1_000_000;
    assert!(granted <= bound, "{granted} tokens, bound {bound}");
    assert!(granted * 10 >= bound * 9, "{granted} tokens of {bound}: the rate is under-used");
    assert!(writes <= granted, "{writes} writes for {granted} tokens (bound: one write per token)");
}

/// A lone environment is never held off: asking every millisecond it takes the burst, then every
/// token when it is due, one write per take and none refused.
#[tokio::test]
async fn a_lone_gate_is_not_held_off() {
    let span_us = 5_000_000;
    let (granted, writes) =
        many_gates_on_one_bucket(1, 1, 1_000, span_us, r#"{"default":{"per_second":100,"burst":10}}"#).await;
    assert_eq!(granted, 10 + 100 * 5 - 1, "the burst and every token due before the end");
    assert_eq!(writes, granted, "one write per token, none refused");
}

/// A gate that lost its write to another is held off: it does not write the bucket when the next
/// token is due (the other gate, never refused, takes it), its limited record comes back no
/// sooner than it would write, and after the hold-off it writes again.
#[tokio::test]
async fn a_gate_that_lost_the_token_holds_off_and_its_record_comes_back_after_it() {
    let limits = RateLimits::parse(r#"{"default":{"per_second":10,"burst":4}}"#).unwrap().unwrap();
    let store = Arc::new(CountingStore::default());
    let a = BucketGate::new(store.clone(), limits.clone()).with_jitter_seed(1);
    let b = BucketGate::new(store.clone(), limits).with_jitter_seed(2);
    let t = at("2026-12-02T12:00:00Z");
    let one = requests(&[("x.example", 0)]);
    let four = requests(&[("x.example", 0); 4]);
    assert_eq!(count_admitted(&a.admit_batch(&four, t).await.unwrap()), 4);
    // b has never seen the bucket: its reset is refused, the add it retries with finds no room.
    let Admission::Limited { retry_at, .. } = b.admit_batch(&one, t).await.unwrap()[0] else { panic!() };
    assert_eq!(store.writes(), 2);
    let due = t + chrono::Duration::milliseconds(100);
    assert!(retry_at >= due, "{retry_at}");
    // The next token is due: b is held off (no write), a takes it.
    let Admission::Limited { retry_at: again, .. } = b.admit_batch(&one, due).await.unwrap()[0] else {
        panic!("held off, not admitted")
    };
    assert_eq!(store.writes(), 2, "a held-off gate does not write");
    assert!(again >= due, "{again}");
    assert_eq!(a.admit_batch(&one, due).await.unwrap()[0], Admission::Admitted);
    assert_eq!(store.writes(), 3);
    // After its hold-off (at most the refill, 300 ms past the due time) b writes and is granted.
    let later = due + chrono::Duration::milliseconds(450);
    assert_eq!(b.admit_batch(&one, later).await.unwrap()[0], Admission::Admitted);
    assert_eq!(store.writes(), 4);
}

#[test]
fn a_deferral_after_losses_spreads_wider_up_to_a_minute() {
    let l = limit(10.0, 20); // refills in 2 s
    let due = at("2026-12-02T12:00:00Z");
    let secs = |lost| (l.retry_after_losses(due, 1.0, lost) - due).num_milliseconds();
    assert_eq!(l.retry_at(due, 1.0), l.retry_after_losses(due, 1.0, 0));
    assert_eq!((secs(0), secs(1), secs(2), secs(3)), (2_000, 2_000, 4_000, 8_000));
    assert_eq!(secs(40), 60_000, "at most a minute");
    assert_eq!(l.retry_after_losses(due, 0.0, 40), due, "never before the due time");
}

// ── The MX rollup ──

/// An MX lookup answering from a table and recording what it was asked; a domain not in the table
/// fails, and one answered `Pending` never answers.
struct TableMx {
    answers: std::collections::HashMap<&'static str, MxAnswer>,
    asked: std::sync::Mutex<Vec<String>>,
}

enum MxAnswer {
    Is(Option<providers::Provider>),
    Pending,
}

impl TableMx {
    fn new(answers: impl IntoIterator<Item = (&'static str, MxAnswer)>) -> Self {
        Self { answers: answers.into_iter().collect(), asked: Default::default() }
    }

    fn asked(&self) -> Vec<String> {
        let mut asked = self.asked.lock().unwrap().clone();
        asked.sort();
        asked
    }
}

#[async_trait]
impl MxLookup for TableMx {
    async fn provider_by_mx(&self, domain: &str) -> Result<Option<providers::Provider>, MxLookupError> {
        self.asked.lock().unwrap().push(domain.to_owned());
        match self.answers.get(domain) {
            Some(MxAnswer::Is(p)) => Ok(*p),
            Some(MxAnswer::Pending) => std::future::pending().await,
            None => Err(MxLookupError::Failed("SERVFAIL".into())),
        }
    }
}

/// The sender's counters as the rollup sees them ([`RollupCounters`]; the core's `Metrics` is the
/// real one), drained as the core drains its own.
#[derive(Default)]
struct Metrics {
    mx_rollup_fallbacks: std::sync::atomic::AtomicU64,
}

struct Drained {
    mx_rollup_fallbacks: u64,
}

impl Metrics {
    fn drain(&self) -> Drained {
        Drained {
            mx_rollup_fallbacks: self.mx_rollup_fallbacks.swap(0, std::sync::atomic::Ordering::Relaxed),
        }
    }
}

impl RollupCounters for Metrics {
    fn mx_rollup_fallback(&self) {
        self.mx_rollup_fallbacks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

const ROLLUP_LIMITS: &str = r#"{"providers":{"google":{"per_second":10,"burst":20},"default":{"per_second":5,"burst":10}},
    "domains":{"mapped.example":"yahoo","own.example":{"per_second":1,"burst":1}},
    "account":{"per_second":1000,"burst":1000},"rollup":"mx"}"#;

#[test]
fn the_rollup_is_off_unless_configured_and_only_mx_is_accepted() {
    assert_eq!(RateLimits::builtin().rollup(), None);
    let plain =
        RateLimits::parse(r#"{"providers":{"default":{"per_second":5,"burst":10}}}"#).unwrap().unwrap();
    assert_eq!(plain.rollup(), None);
    assert!(!plain.needs_mx("workspace.example"), "off: nothing is looked up");
    assert!(!plain.describe().contains("rollup"), "{}", plain.describe());

    let on = RateLimits::parse(ROLLUP_LIMITS).unwrap().unwrap();
    assert_eq!(on.rollup(), Some(Rollup::Mx));
    assert!(
        on.describe().contains("mx rollup: other domains by their MX hosts; other domains: the account only"),
        "{}",
        on.describe()
    );
    let null = RateLimits::parse(r#"{"providers":{"default":{"per_second":5,"burst":10}},"rollup":null}"#);
    assert_eq!(null.unwrap(), Some(plain), "null is no rollup");

    for (bad, names) in [
        (
            r#"{"providers":{"default":{"per_second":5,"burst":10}},"rollup":"dns"}"#,
            r#"rollup: "dns" is not a rollup"#,
        ),
        (r#"{"providers":{"default":{"per_second":5,"burst":10}},"rollup":"MX"}"#, r#""MX" is not a rollup"#),
        (
            r#"{"providers":{"default":{"per_second":5,"burst":10}},"rollup":true}"#,
            "rollup: true is not a rollup",
        ),
        (r#"{"providers":{"default":{"per_second":5,"burst":10}},"rollup":{"mx":1}}"#, "is not a rollup"),
        (r#"{"rollup":"mx"}"#, "no provider has a limit"),
        (
            r#"{"default":{"per_second":5,"burst":10},"rollup":"mx"}"#,
            "add providers.<name> or providers.default",
        ),
    ] {
        let err = RateLimits::parse(bad).unwrap_err().to_string();
        assert!(err.contains(RATE_LIMITS_VAR) && err.contains(names), "{bad}: {err}");
    }
}

#[test]
fn only_a_domain_nothing_else_places_is_looked_up_and_the_configuration_and_table_come_first() {
    use providers::Provider;
    let l = RateLimits::parse(ROLLUP_LIMITS).unwrap().unwrap();
    // Placed without DNS: the table's, a mapped one, a named one.
    for placed in ["gmail.com", "hotmail.de", "mapped.example", "own.example"] {
        assert!(!l.needs_mx(placed), "{placed}");
    }
    assert!(l.needs_mx("workspace.example"));
    let item = |b: Option<limits::DomainBucket>| b.map(|b| (b.item, b.provider));
    // An MX answer never overrides the configuration or the table.
    assert_eq!(
        item(l.bucket_for_rolled_up("own.example", Provider::Google)),
        Some(("own.example".into(), None))
    );
    assert_eq!(
        item(l.bucket_for_rolled_up("mapped.example", Provider::Google)),
        Some(("provider:yahoo".into(), Some(Provider::Yahoo)))
    );
    assert_eq!(
        item(l.bucket_for_rolled_up("hotmail.de", Provider::Google)),
        Some(("provider:microsoft".into(), Some(Provider::Microsoft)))
    );
    // An unplaced domain takes its MX provider's bucket, its own limit or the provider default.
    assert_eq!(item(l.bucket_for("workspace.example")), None, "without an answer: the tail");
    let google = l.bucket_for_rolled_up("workspace.example", Provider::Google).unwrap();
    assert_eq!((google.item.as_str(), google.limit.limit), ("provider:google", limit(10.0, 20)));
    let m365 = l.bucket_for_rolled_up("m365.example", Provider::Microsoft).unwrap();
    assert_eq!((m365.item.as_str(), m365.limit.limit), ("provider:microsoft", limit(5.0, 10)));
    // A provider without a limit leaves the domain where it was: here, the tail.
    let only_google =
        RateLimits::parse(r#"{"providers":{"google":{"per_second":10,"burst":20}},"rollup":"mx"}"#)
            .unwrap()
            .unwrap();
    assert_eq!(only_google.bucket_for_rolled_up("m365.example", Provider::Microsoft), None);
}

#[tokio::test]
async fn a_batch_s_unplaced_domains_take_their_mx_provider_s_bucket_and_failures_ride_the_tail() {
    use providers::Provider;
    let store = Arc::new(CountingStore::default());
    let metrics = Arc::new(Metrics::default());
    let mx = Arc::new(TableMx::new([
        ("workspace.example", MxAnswer::Is(Some(Provider::Google))),
        ("m365.example", MxAnswer::Is(Some(Provider::Microsoft))),
        ("selfhosted.example", MxAnswer::Is(None)),
    ]));
    let gate = BucketGate::new(store.clone(), RateLimits::parse(ROLLUP_LIMITS).unwrap().unwrap())
        .with_mx_rollup(mx.clone(), metrics.clone());
    let t = at("2026-12-02T12:00:00Z");
    let batch = requests(&[
        ("gmail.com", 1),
        ("workspace.example", 2),
        ("workspace.example", 3),
        ("m365.example", 4),
        ("selfhosted.example", 5),
        ("broken.example", 6),
        ("own.example", 7),
    ]);
    let answers = gate.admit_batch(&batch, t).await.unwrap();
    assert_eq!(count_admitted(&answers), 7);
    // Asked once per distinct unplaced domain; never for the table's, a named or a mapped one.
    assert_eq!(mx.asked(), ["broken.example", "m365.example", "selfhosted.example", "workspace.example"]);
    // gmail.com and the two Workspace records: three tokens from google's bucket in one write.
    let interval = limit(10.0, 20).interval_us();
    let google = store.load("provider:google").await.unwrap().map(|s| s.tat_us);
    assert_eq!(google, Some(t.timestamp_micros() + 3 * interval));
    assert!(store.load("provider:microsoft").await.unwrap().is_some(), "Microsoft 365 by its MX");
    for tail in ["selfhosted.example", "broken.example", "workspace.example"] {
        assert_eq!(store.load(tail).await.unwrap(), None, "{tail}: no item of its own");
    }
    assert_eq!(store.writes(), 4, "google, microsoft, own.example, the account");
    // The failed lookup is counted, never an error; nobody's MX is no failure.
    assert_eq!(metrics.drain().mx_rollup_fallbacks, 1);
}

#[tokio::test]
async fn a_lookup_that_does_not_answer_within_the_bound_rides_the_tail_and_is_counted() {
    let store = Arc::new(CountingStore::default());
    let metrics = Arc::new(Metrics::default());
    let mx =
        Arc::new(TableMx::new([("slow.example", MxAnswer::Pending), ("slow-2.example", MxAnswer::Pending)]));
    let gate = BucketGate::new(store.clone(), RateLimits::parse(ROLLUP_LIMITS).unwrap().unwrap())
        .with_mx_rollup(mx.clone(), metrics.clone());
    let batch = requests(&[("slow.example", 1), ("slow-2.example", 2)]);
    let started = std::time::Instant::now();
    let answers = gate.admit_batch(&batch, at("2026-12-02T12:00:00Z")).await.unwrap();
    let waited = started.elapsed();
    assert_eq!(count_admitted(&answers), 2, "admitted on the account's tokens");
    // Both lookups wait together: one bound for the batch, not one per domain (the slack is for
    // timers on a loaded machine, well under a second bound).
    assert!(
        waited >= MX_LOOKUP_BOUND && waited < MX_LOOKUP_BOUND * 2 - std::time::Duration::from_millis(50),
        "{waited:?}"
    );
    assert_eq!(store.writes(), 1, "the account only");
    assert_eq!(metrics.drain().mx_rollup_fallbacks, 2);
}

#[tokio::test]
async fn without_the_rollup_in_the_limits_a_gate_never_looks_up() {
    let metrics = Arc::new(Metrics::default());
    let mx = Arc::new(TableMx::new([]));
    let limits =
        RateLimits::parse(r#"{"providers":{"default":{"per_second":5,"burst":10}}}"#).unwrap().unwrap();
    let gate = BucketGate::in_memory(limits).with_mx_rollup(mx.clone(), metrics.clone());
    gate.admit_batch(&requests(&[("workspace.example", 1)]), at("2026-12-02T12:00:00Z")).await.unwrap();
    assert!(mx.asked().is_empty());
    assert_eq!(metrics.drain().mx_rollup_fallbacks, 0);
}
