//! Footprint of the core: peak resident memory after 10 000 notices, and ledger calls per notice.
//!
//! Pushes 10 000 distinct notices through `NoticeSender::deliver` over a counting
//! `FaultyLedger<MemoryLedger>` (no fault injected) and a mailer that accepts at once, then the same
//! 10 000 again (every one a redelivery). Reads `VmHWM` (peak RSS) from `/proc/self/status`. The
//! in-memory ledger keeps every row in this process, so the number is an upper bound for the
//! sender Lambda, whose ledger lives in DynamoDB.
//!
//! `cargo bench -p notice-benches --bench footprint` (without `--bench`, e.g. under `cargo test`,
//! it runs 200 notices as a smoke test).

#[path = "job.rs"]
mod job;
use job::body;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use notice_ledger::links::ManageLinks;
use notice_ledger::mailer::{Mailer, OutgoingMail, SendResult};
use notice_ledger::DeliverContext;
use notice_ledger::{NoticeSecret, NoticeSender, Outcome, WindowPolicy};
use notice_testkit::faults::FaultyLedger;
use notice_testkit::MemoryLedger;
use notice_texts::Renderer;

/// Accepts at once and notes how many ledger calls had been made when the send started.
struct ProbeMailer {
    ledger: Arc<FaultyLedger<MemoryLedger>>,
    calls_at_send: AtomicUsize,
}

#[async_trait]
impl Mailer for ProbeMailer {
    async fn send(&self, mail: &OutgoingMail) -> SendResult {
        self.calls_at_send.store(self.ledger.calls(), Ordering::SeqCst);
        SendResult::Accepted { message_id: format!("probe-{}", mail.key.prefix()) }
    }
}

/// A `kB` field of `/proc/self/status` (0 where there is no procfs).
fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB ({:.1} MB)", kib as f64 / 1024.0, kib as f64 * 1024.0 / 1e6)
}

/// (min, max, mean) of a list of counts.
fn spread(v: &[usize]) -> (usize, usize, f64) {
    let min = v.iter().copied().min().unwrap_or(0);
    let max = v.iter().copied().max().unwrap_or(0);
    (min, max, v.iter().sum::<usize>() as f64 / v.len().max(1) as f64)
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n: u64 = if full { 10_000 } else { 200 };
    let rss_at_start = status_kib("VmRSS");

    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => panic!("tokio runtime: {e}"),
    };
    let secret = |s: &str| match NoticeSecret::new(s) {
        Ok(secret) => secret,
        Err(e) => panic!("{e}"),
    };
    let ledger = Arc::new(FaultyLedger::new(MemoryLedger::new(), None));
    let mailer = Arc::new(ProbeMailer { ledger: ledger.clone(), calls_at_send: AtomicUsize::new(0) });
    let sender = NoticeSender::new(
        ledger.clone(),
        mailer.clone(),
        Arc::new(Renderer::builtin(ManageLinks::new(
            "https://billing.example.com/manage",
            secret("footprint-links"),
        ))),
        WindowPolicy::default(),
        secret("footprint-secret"),
    );
    let now: DateTime<Utc> = match DateTime::parse_from_rfc3339("2026-10-02T00:00:00Z") {
        Ok(t) => t.with_timezone(&Utc),
        Err(e) => panic!("{e}"),
    };

    let (mut before_send, mut per_new, mut writes_per_new, mut per_redelivery) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let started = Instant::now();
    rt.block_on(async {
        for i in 0..n {
            let (c0, w0) = (ledger.calls(), ledger.writes());
            let outcome = sender.deliver(&body(i), DeliverContext::at(now)).await.outcome;
            assert!(matches!(outcome, Outcome::Sent { .. }), "{outcome:?}");
            before_send.push(mailer.calls_at_send.load(Ordering::SeqCst) - c0);
            per_new.push(ledger.calls() - c0);
            writes_per_new.push(ledger.writes() - w0);
        }
        for i in 0..n {
            let c0 = ledger.calls();
            let outcome = sender.deliver(&body(i), DeliverContext::at(now)).await.outcome;
            assert!(matches!(outcome, Outcome::Suppressed { .. }), "{outcome:?}");
            per_redelivery.push(ledger.calls() - c0);
        }
    });
    let took = started.elapsed();
    let peak = status_kib("VmHWM");
    let rows = ledger.inner().rows().len();

    let show = |name: &str, v: &[usize]| {
        let (min, max, mean) = spread(v);
        println!("{name:<44} min {min}  max {max}  mean {mean:.2}");
    };
    println!("footprint: {n} notices through the core (MemoryLedger, instant mailer), then {n} redeliveries");
    show("ledger calls before the send, new notice", &before_send);
    show("ledger calls per new notice", &per_new);
    show("ledger writes per new notice", &writes_per_new);
    show("ledger calls per redelivery (suppressed)", &per_redelivery);
    println!("{:<44} {rows}", "ledger rows held in memory");
    println!("{:<44} {}", "RSS at start", mib(rss_at_start));
    println!("{:<44} {}", "peak RSS (VmHWM)", mib(peak));
    println!(
        "{:<44} {:.1} ms ({:.1} µs per delivery)",
        "time",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / (2 * n) as f64
    );
    if full {
        let verdict = if peak > 0 && peak * 1024 <= 30_000_000 { "met" } else { "missed" };
        println!("{:<44} {verdict} (peak {} against 30 MB)", "target: peak RSS <= 30 MB", mib(peak));
    }
}
