//! Send-path benchmarks (criterion).
//!
//! * `core/*` — CPU per notice on the core path: parse → window → key → render → claim → send →
//!   commit over a `MemoryLedger` and a mailer that accepts instantly. No I/O, so this is the
//!   overhead the algorithm adds around the provider call (target: under 20 µs per notice).
//! * `batch/*` — N jobs processed concurrently the way the sender Lambda does it
//!   (`stream::iter(..).buffer_unordered(N)`), each send taking 50 ms (a tokio sleep). Wall time of
//!   a batch against one notice (target: a batch of 10 within 1.3 × one notice).
//!
//! `cargo bench -p notice-benches --bench send_path`; `scripts/bench.sh` prints a summary.

#[path = "job.rs"]
mod job;
use job::body;

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures::StreamExt;
use notice_ledger::links::ManageLinks;
use notice_ledger::mailer::{Mailer, OutgoingMail, SendResult};
use notice_ledger::DeliverContext;
use notice_ledger::{Job, NoticeSecret, NoticeSender, Outcome, WindowPolicy};
use notice_testkit::MemoryLedger;
use notice_texts::Renderer;

/// Accepts every message, after `latency` (zero: at once, without touching the timer).
struct BenchMailer {
    latency: Duration,
    sent: AtomicU64,
}

#[async_trait]
impl Mailer for BenchMailer {
    async fn send(&self, _mail: &OutgoingMail) -> SendResult {
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        let n = self.sent.fetch_add(1, Ordering::Relaxed);
        SendResult::Accepted { message_id: format!("bench-{n}") }
    }
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-10-02T00:00:00Z").map(|t| t.with_timezone(&Utc)).unwrap_or_default()
}

fn secret(s: &str) -> NoticeSecret {
    match NoticeSecret::new(s) {
        Ok(secret) => secret,
        Err(e) => panic!("bench secret: {e}"),
    }
}

fn renderer() -> Renderer {
    Renderer::builtin(ManageLinks::new("https://billing.example.com/manage", secret("bench-links")))
}

fn sender(latency: Duration) -> NoticeSender {
    NoticeSender::new(
        Arc::new(MemoryLedger::new()),
        Arc::new(BenchMailer { latency, sent: AtomicU64::new(0) }),
        Arc::new(renderer()),
        WindowPolicy::default(),
        secret("bench-secret"),
    )
}

fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => panic!("tokio runtime: {e}"),
    }
}

fn expect_sent(outcome: &Outcome) {
    assert!(matches!(outcome, Outcome::Sent { .. }), "{outcome:?}");
}

/// New notices, in chunks of at most 10 000 per fresh ledger (so the map's growth stays bounded),
/// bodies built outside the timed region.
fn deliver_new(rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
    rt.block_on(async {
        let mut total = Duration::ZERO;
        let mut done = 0;
        while done < iters {
            let chunk = (iters - done).min(10_000);
            let s = sender(Duration::ZERO);
            let bodies: Vec<String> = (0..chunk).map(body).collect();
            let started = Instant::now();
            for b in &bodies {
                let delivery = s.deliver(black_box(b), DeliverContext::at(now())).await;
                expect_sent(&delivery.outcome);
                black_box(delivery);
            }
            total += started.elapsed();
            done += chunk;
        }
        total
    })
}

fn core(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("core");
    group.throughput(Throughput::Elements(1));

    group.bench_function("deliver_new_notice", |b| b.iter_custom(|iters| deliver_new(&rt, iters)));

    let s = sender(Duration::ZERO);
    let dup = body(0);
    rt.block_on(async { expect_sent(&s.deliver(&dup, DeliverContext::at(now())).await.outcome) });
    group.bench_function("deliver_redelivery_suppressed", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    black_box(s.deliver(black_box(&dup), DeliverContext::at(now())).await);
                }
                started.elapsed()
            })
        })
    });

    let r = renderer();
    let key_secret = secret("bench-secret");
    group.bench_function("parse_and_key", |b| {
        b.iter(|| match Job::parse(black_box(&dup), &notice_texts::Icu) {
            Ok(job) => black_box(job.key(&key_secret)),
            Err(e) => panic!("{e}"),
        })
    });
    let job = match Job::parse(&dup, &notice_texts::Icu) {
        Ok(job) => job,
        Err(e) => panic!("{e}"),
    };
    let key = job.key(&key_secret);
    group.bench_function("render", |b| b.iter(|| black_box(r.render(black_box(&job), &key).is_ok())));
    group.finish();
}

/// One batch of `n` new notices with a 50 ms mailer, `concurrency` at a time; setup untimed.
fn batch_once(rt: &tokio::runtime::Runtime, n: u64, concurrency: usize) -> Duration {
    let s = Arc::new(sender(Duration::from_millis(50)));
    let bodies: Vec<String> = (0..n).map(body).collect();
    rt.block_on(async {
        let started = Instant::now();
        let outcomes: Vec<_> = futures::stream::iter(bodies)
            .map(|b| {
                let s = Arc::clone(&s);
                async move { s.deliver(&b, DeliverContext::at(now())).await.outcome }
            })
            .buffer_unordered(concurrency)
            .collect()
            .await;
        let took = started.elapsed();
        outcomes.iter().for_each(expect_sent);
        took
    })
}

fn batch(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("batch_50ms_mailer");
    group.sample_size(10);
    for n in [1u64, 10, 1_000] {
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter_custom(|iters| (0..iters).map(|_| batch_once(&rt, n, n as usize)).sum())
        });
    }
    group.finish();
}

criterion_group!(benches, core, batch);
criterion_main!(benches);
