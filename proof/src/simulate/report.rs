//! The report: one row per strategy — what customers got, read off a finished run and, for the
//! durable strategies, off the ledger it wrote — as a table or as JSON.

use std::collections::{BTreeMap, HashMap};

use notice_ledger::ledger::RowState;
use notice_ledger::queue;
use notice_ledger::NoticeKey;
use serde::Serialize;

use super::args::{Params, Span};
use super::queue::{Counters, Run};
use super::time::ms;
use super::trace::TraceSummary;

/// One row of the report.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Row {
    pub(super) strategy: String,
    pub(super) notices: usize,
    /// Notices at least one copy of which reached the customer.
    pub(super) delivered: usize,
    /// Copies received beyond the first.
    pub(super) duplicates: u64,
    /// Never delivered, not quarantined, not recorded as missed.
    pub(super) lost: usize,
    /// Open claims at the end (outcome unknown to the workers).
    pub(super) quarantined: usize,
    /// … of which the provider did accept a copy (the reconciler closes these from its events).
    pub(super) quarantined_sent: usize,
    /// Window closed before any copy went out (recorded, never sent).
    pub(super) missed: usize,
    /// Copies accepted outside the notice's window.
    pub(super) outside_window: u64,
    /// Provider calls.
    pub(super) sends: u64,
    pub(super) sends_per_notice: f64,
    /// Ledger calls (durable strategy).
    pub(super) ledger_calls: Option<u64>,
    pub(super) ledger_calls_per_notice: Option<f64>,
    /// How the real sender's deliveries ended, by outcome (durable strategy).
    pub(super) outcomes: BTreeMap<String, u64>,
    pub(super) counters: Counters,
}

#[derive(Debug, Clone, Serialize)]
pub(super) struct Report {
    pub(super) params: Params,
    pub(super) trace: TraceSummary,
    pub(super) rows: Vec<Row>,
}

impl Run<'_> {
    /// The row of a finished run.
    pub(super) async fn report(mut self) -> Result<Row, String> {
        // Drop parked futures before reading the ledger.
        self.jobs.clear();
        let n = self.trace.notices.len();
        let mut states: Vec<Option<RowState>> = vec![None; n];
        let mut ledger_calls = None;
        if let Some(d) = &self.durable {
            ledger_calls = Some(d.ledger.calls() as u64);
            let rows = d.ledger.inner().get_many(&d.keys).await.map_err(|e| e.to_string())?;
            let by_key: HashMap<&NoticeKey, RowState> = rows.iter().map(|r| (&r.key, r.state)).collect();
            for (i, key) in d.keys.iter().enumerate() {
                states[i] = by_key.get(key).copied();
            }
        }
        let (mut delivered, mut duplicates, mut lost, mut quarantined, mut quarantined_sent, mut missed) =
            (0, 0u64, 0, 0, 0, 0);
        for ((&copies, state), &window_missed) in self.deliveries.iter().zip(&states).zip(&self.missed) {
            let open_claim = *state == Some(RowState::Claimed);
            let was_missed = *state == Some(RowState::Missed) || window_missed;
            duplicates += u64::from(copies.saturating_sub(1));
            if copies > 0 {
                delivered += 1;
            }
            if open_claim {
                quarantined += 1;
                if copies > 0 {
                    quarantined_sent += 1;
                }
            }
            if copies == 0 && !open_claim {
                if was_missed {
                    missed += 1;
                } else {
                    lost += 1;
                }
            }
        }
        let per_notice = |v: u64| v as f64 / n.max(1) as f64;
        Ok(Row {
            strategy: self.strategy.name(self.p.ledger),
            notices: n,
            delivered,
            duplicates,
            lost,
            quarantined,
            quarantined_sent,
            missed,
            outside_window: self.outside_window,
            sends: self.sends,
            sends_per_notice: per_notice(self.sends),
            ledger_calls,
            ledger_calls_per_notice: ledger_calls.map(per_notice),
            outcomes: std::mem::take(&mut self.outcomes),
            counters: self.c.clone(),
        })
    }
}

fn pct(p: f64) -> String {
    format!("{}%", (p * 1000.0).round() / 10.0)
}

pub(super) fn table(r: &Report, took: std::time::Duration) -> String {
    let p = &r.params;
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    for l in settings(r) {
        line(l);
    }
    line(String::new());
    line(format!(
        "{:<32} {:>10} {:>6} {:>11} {:>12}",
        "strategy", "duplicates", "lost", "quarantined", "sends/notice"
    ));
    for row in &r.rows {
        line(format!(
            "{:<32} {:>10} {:>6} {:>11} {:>12.3}",
            row.strategy, row.duplicates, row.lost, row.quarantined, row.sends_per_notice
        ));
    }
    line(String::new());
    for row in &r.rows {
        let c = &row.counters;
        if c.dead_lettered_by_receive_count + c.expired_by_retention > 0 {
            line(format!(
                "{}: {} messages dead-lettered after {} receives, {} dropped at retention",
                row.strategy, c.dead_lettered_by_receive_count, p.max_receive_count, c.expired_by_retention
            ));
        }
        if c.parked + c.park_conflicts > 0 {
            line(format!(
                "{}: {} schedules created ({} parks found one already there), {} fired",
                row.strategy, c.parked, c.park_conflicts, c.unparked
            ));
        }
        if let Some(per_notice) = row.ledger_calls_per_notice {
            line(format!(
                "{}: {} of {} quarantined claims had gone out (the reconciler closes those from provider \
                 events; the rest wait for an operator); {:.2} ledger calls per notice",
                row.strategy, row.quarantined_sent, row.quarantined, per_notice
            ));
        }
    }
    line(format!(
        "duplicates = extra copies customers received · lost = never delivered, not quarantined, not \
         recorded as missed · simulated in {:.1} s",
        took.as_secs_f64()
    ));
    out
}

/// The run's settings, one line each: the world, its chaos, its trace and its queue.
fn settings(r: &Report) -> [String; 4] {
    let p = &r.params;
    let t = &r.trace;
    [
    format!(
        "{} notices · seed {} · {} instances × {} · visibility timeout {} · send timeout {}",
        p.notices,
        p.seed,
        p.instances,
        p.concurrency,
        Span(p.visibility_timeout_ms),
        Span(p.send_timeout_ms)
    ),
    format!(
        "chaos: crash {} per step · 5xx after accept {} · throttled {} · broker duplicates {} · \
         latency Pareto(median {}, α {}, cap {})",
        pct(p.crash_rate),
        pct(p.unknown_rate),
        pct(p.throttle_rate),
        pct(p.ghost_rate),
        Span(p.latency_median_ms),
        p.latency_alpha,
        Span(p.latency_cap_ms)
    ),
    format!(
        "trace: {} enqueues · {} producer duplicates · redeploy at {} · replay at {} of {} jobs (charges {}..{})",
        t.enqueues,
        t.producer_duplicates,
        t.redeploy_at.as_deref().unwrap_or("off"),
        t.replay_at.as_deref().unwrap_or("off"),
        t.replayed_jobs,
        Span(p.replay_from_ms),
        Span(p.replay_to_ms)
    ),
    format!(
        "queue: {} · hidden at most {} per receive without parking (15 min with) · dead-lettered after {} receives · retention {}",
        match p.lead_days {
            Some(days) => format!("jobs enqueued up to {days}d before their window opens"),
            None => "jobs enqueued on day 0".to_owned(),
        },
        Span(ms(queue::MAX_VISIBILITY)),
        p.max_receive_count,
        Span(p.retention_ms)
    ),
    ]
}
