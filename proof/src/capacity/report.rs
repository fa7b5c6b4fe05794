//! What a run showed: the customers' side (sent once, duplicates, lost, late), the services' side
//! (each modelled limit's peak against its quota, the first to bind) and the ledger's cost.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use notice_ledger::ledger::RowState;
use serde::Serialize;

use super::args::{Config, Params};
use super::clock::{Us, MINUTE, SEC};
use super::producer::{body, Notice, Source};
use super::run::Run;
use super::world::lock;

/// us-east-1 on-demand prices per million request units (docs/capacity.md, *Sources*).
const DOLLARS_PER_MILLION_WRU: f64 = 0.625;
const DOLLARS_PER_MILLION_RRU: f64 = 0.125;
/// A send more than this after its window opened is late.
const LATE_AFTER: Us = 5 * MINUTE;

#[derive(Clone, Debug, Serialize)]
pub(super) struct LimitUse {
    pub(super) name: String,
    pub(super) peak: f64,
    pub(super) quota: f64,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct Dynamo {
    pub(super) calls: u64,
    pub(super) calls_per_sent_notice: f64,
    /// Calls per sent notice by operation; they add up to `calls_per_sent_notice`.
    pub(super) per_sent_notice_by_operation: std::collections::BTreeMap<&'static str, f64>,
    /// Token writes refused by their condition (counted in the calls above).
    pub(super) refused_token_writes: u64,
    pub(super) write_units: f64,
    pub(super) read_units: f64,
    pub(super) throttled_calls: u64,
    /// The most writes a second one bucket item served (5-second average).
    pub(super) most_writes_one_item_served: f64,
    pub(super) write_units_per_million_notices: f64,
    pub(super) read_units_per_million_notices: f64,
    pub(super) dollars_per_million_notices: f64,
}

#[derive(Clone, Debug, Serialize)]
pub(super) struct Report {
    pub(super) per_hour: u64,
    pub(super) minutes: f64,
    pub(super) seed: u64,
    pub(super) config: Config,
    /// Notices in the run; `due` of them had their window open at least 5 minutes before its end.
    pub(super) notices: u64,
    pub(super) due: u64,
    pub(super) sent_once: u64,
    pub(super) duplicates: u64,
    pub(super) lost: u64,
    pub(super) missed: u64,
    /// Open claims at the end whose notice SES never took (a worker died between claim and send):
    /// on the quarantine view, for an operator.
    pub(super) quarantined: u64,
    pub(super) late: u64,
    /// Due notices not sent by the end (still on the queue or parked), counted late as well.
    pub(super) waiting: u64,
    pub(super) lateness_p50_secs: f64,
    pub(super) lateness_p99_secs: f64,
    /// The replay: from its start (its first enqueue; a paced replay enqueues over a while) to
    /// its last notice sent (`None`: no replay, or not drained by the end), and the rate that is.
    pub(super) replay_drain_secs: Option<f64>,
    pub(super) replay_sends_per_sec: Option<f64>,
    /// The bucket the replay's domain takes its tokens from besides the account's (`None`: no
    /// replay, or the account alone limits it) and the rate a replay to it can drain at: the
    /// lower of that bucket's and the account's.
    pub(super) replay_bucket: Option<String>,
    pub(super) replay_bucket_per_sec: Option<f64>,
    pub(super) limits: Vec<LimitUse>,
    pub(super) first_limit: Option<String>,
    pub(super) first_limit_at_secs: Option<f64>,
    pub(super) dynamodb: Dynamo,
    pub(super) ses_throttled: u64,
    pub(super) parks_refused: u64,
    /// Jobs a refused park put back on the queue as new delayed messages.
    pub(super) requeued: u64,
    pub(super) longest_scheduler_delay_secs: f64,
    pub(super) sqs_receives: u64,
    pub(super) sqs_over_limit_receives: u64,
    pub(super) dead_lettered: u64,
    pub(super) invocations: u64,
    pub(super) crashed_invocations: u64,
    pub(super) outcomes: BTreeMap<&'static str, u64>,
    pub(super) queue_actions: BTreeMap<&'static str, u64>,
}

fn secs(us: Us) -> f64 {
    us as f64 / SEC as f64
}

fn percentile(sorted: &[Us], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    secs(sorted[i.min(sorted.len() - 1)])
}

/// The customers' side of a run, notice by notice.
#[derive(Default)]
struct Customers {
    due: u64,
    sent_once: u64,
    duplicates: u64,
    lost: u64,
    missed: u64,
    quarantined: u64,
    late: u64,
    waiting: u64,
    /// How late each due (or replayed) notice was sent, or is at the end if still waiting; sorted.
    lateness: Vec<Us>,
}

impl Customers {
    /// Each notice counted: sent once or more, or — never sent — where it is at the end.
    async fn count(run: &Run, notices: &[Notice]) -> Customers {
        let horizon = run.p.horizon;
        let mut c = Customers::default();
        for (idx, n) in notices.iter().enumerate() {
            c.duplicates += u64::from(n.sends.saturating_sub(1));
            if n.sends == 1 {
                c.sent_once += 1;
            }
            let is_due = n.opens + LATE_AFTER <= horizon;
            if is_due {
                c.due += 1;
            }
            if let Some(first) = n.first_send {
                if is_due || n.source == Source::Replay {
                    let l = (first - n.opens).max(0);
                    c.lateness.push(l);
                    if l > LATE_AFTER {
                        c.late += 1;
                    }
                }
                continue;
            }
            // Never sent: where is it?
            let row = match notice_ledger::Job::parse(&body(idx as u32, n, &run.domains), &notice_texts::Icu)
            {
                Ok(job) => run.svc.dynamo.row(&job.key(&run.secret)).await,
                Err(_) => None,
            };
            match row.map(|r| r.state) {
                Some(RowState::Claimed) => c.quarantined += 1,
                Some(RowState::Missed) => c.missed += 1,
                _ if n.dead_lettered || (n.on_queue == 0 && !n.scheduled) => c.lost += 1,
                _ if is_due => {
                    c.waiting += 1;
                    let l = horizon - n.opens;
                    c.lateness.push(l);
                    if l > LATE_AFTER {
                        c.late += 1;
                    }
                }
                _ => {}
            }
        }
        c.lateness.sort_unstable();
        c
    }
}

/// The replay's side of a run: how long it took to drain, and the rate its bucket allows.
struct Replay {
    drain: Option<Us>,
    sends_per_sec: Option<f64>,
    bucket: Option<String>,
    bucket_per_sec: Option<f64>,
}

impl Replay {
    fn of(p: &Params, notices: &[Notice]) -> Replay {
        let replayed: Vec<&Notice> = notices.iter().filter(|n| n.source == Source::Replay).collect();
        let drain = (!replayed.is_empty() && replayed.iter().all(|n| n.first_send.is_some())).then(|| {
            replayed.iter().filter_map(|n| n.first_send.map(|f| f - p.replay_at)).max().unwrap_or(0)
        });
        let bucket = (p.replay > 0).then(|| p.rate_limits.bucket_for(&p.replay_domain)).flatten();
        let account_rate = p.rate_limits.account().map(|l| l.per_second);
        let bucket_per_sec = match (bucket.as_ref().map(|b| b.limit.limit.per_second), account_rate) {
            (Some(b), Some(a)) => Some(b.min(a)),
            (b, a) => b.or(a).filter(|_| p.replay > 0),
        };
        Replay {
            drain,
            sends_per_sec: drain.filter(|&d| d > 0).map(|d| replayed.len() as f64 / secs(d)),
            bucket: bucket.map(|b| b.item),
            bucket_per_sec,
        }
    }
}

impl Dynamo {
    /// The ledger's calls and their cost, per sent notice (`sent` of them) and per million.
    fn of(run: &Run, sent: f64) -> Dynamo {
        let per_million = |units: f64| if sent > 0.0 { units / sent * 1e6 } else { 0.0 };
        run.svc.dynamo.books(|b| Dynamo {
            calls: b.calls,
            calls_per_sent_notice: if sent > 0.0 { b.calls as f64 / sent } else { 0.0 },
            per_sent_notice_by_operation: b
                .by_op
                .iter()
                .map(|(op, n)| (*op, if sent > 0.0 { *n as f64 / sent } else { 0.0 }))
                .collect(),
            refused_token_writes: b.refused_token_writes,
            write_units: b.wcu,
            read_units: b.rcu,
            throttled_calls: b.throttled,
            most_writes_one_item_served: b.most_served(),
            write_units_per_million_notices: per_million(b.wcu),
            read_units_per_million_notices: per_million(b.rcu),
            dollars_per_million_notices: per_million(b.wcu) / 1e6 * DOLLARS_PER_MILLION_WRU
                + per_million(b.rcu) / 1e6 * DOLLARS_PER_MILLION_RRU,
        })
    }
}

/// Each modelled limit's peak over the run against its quota.
fn limits(run: &Run) -> Vec<LimitUse> {
    let p = &run.p;
    let (hottest, index, table_w, table_r) = run
        .svc
        .dynamo
        .books(|b| (b.hottest_item(), b.hottest_index_shard(), b.table_w.peak(), b.table_r.peak()));
    let ses_peak = run.svc.ses.state(|s| s.peak.peak());
    let (live, creates, invocations) =
        run.svc.scheduler.state(|s| (s.live.peak, s.creates.peak(), s.invocations.peak()));
    let in_flight = lock(&run.ctx.queue).in_flight.peak;
    vec![
        LimitUse {
            name: format!("DynamoDB writes/s on one bucket item ({})", hottest.0),
            peak: hottest.1,
            quota: p.dynamo.item_wcu,
        },
        LimitUse {
            name: "DynamoDB writes/s on one open-claims index shard".into(),
            peak: index,
            quota: p.dynamo.item_wcu,
        },
        LimitUse { name: "DynamoDB table writes/s".into(), peak: table_w, quota: p.dynamo.quota_wcu },
        LimitUse { name: "DynamoDB table reads/s".into(), peak: table_r, quota: p.dynamo.quota_rcu },
        LimitUse {
            name: "SQS messages in flight".into(),
            peak: in_flight as f64,
            quota: p.sqs.in_flight_cap as f64,
        },
        LimitUse {
            name: "Lambda concurrent invocations".into(),
            peak: f64::from(run.pollers.peak),
            quota: f64::from(run.pollers.cap()),
        },
        LimitUse { name: "SES sends/s".into(), peak: ses_peak, quota: p.ses_rate },
        LimitUse {
            name: "Scheduler live schedules".into(),
            peak: live as f64,
            quota: p.scheduler.live_quota,
        },
        LimitUse {
            name: "Scheduler CreateSchedule/s".into(),
            peak: creates,
            quota: p.scheduler.create_per_sec,
        },
        LimitUse {
            name: "Scheduler invocations/s".into(),
            peak: invocations,
            quota: p.scheduler.invocations_per_sec,
        },
    ]
}

/// The first limit that refused, delayed or capped anything: when, and which.
fn first_limit(run: &Run) -> Option<(Us, String)> {
    let mut firsts: Vec<(Us, String)> = Vec::new();
    if let Some((t, what)) = run.svc.dynamo.books(|b| b.first_throttle) {
        firsts.push((t, what.to_owned()));
    }
    if let Some(t) = run.svc.ses.state(|s| s.first_throttle) {
        firsts.push((t, "SES sends/s".into()));
    }
    let (sched_first, first_wait) = run.svc.scheduler.state(|s| (s.first_refusal, s.first_wait));
    if let Some((t, what)) = sched_first {
        firsts.push((t, what.to_owned()));
    }
    if let Some(t) = first_wait {
        firsts.push((t, "Scheduler invocations/s".into()));
    }
    if let Some(t) = lock(&run.ctx.queue).first_over_limit {
        firsts.push((t, "SQS messages in flight".into()));
    }
    if let Some(t) = run.pollers.first_capped {
        firsts.push((t, "Lambda concurrent invocations".into()));
    }
    firsts.sort();
    firsts.into_iter().next()
}

impl Report {
    pub(super) async fn of(run: &Run) -> Report {
        let p = &run.p;
        let notices: Vec<_> = lock(&run.ctx.books).notices.clone();
        let c = Customers::count(run, &notices).await;
        let replay = Replay::of(p, &notices);
        let sent = notices.iter().filter(|n| n.sends > 0).count() as f64;
        let ses_throttled = run.svc.ses.state(|s| s.throttled);
        let (parks_refused, longest) = run.svc.scheduler.state(|s| (s.refused, s.longest_wait));
        let (over_limit, dead, receives, requeued) = {
            let q = lock(&run.ctx.queue);
            (q.over_limit, q.dead_lettered, q.receives, q.requeued)
        };
        let first = first_limit(run);
        Report {
            per_hour: p.per_hour,
            minutes: secs(p.horizon) / 60.0,
            seed: p.seed,
            config: p.config(),
            notices: notices.len() as u64,
            due: c.due,
            sent_once: c.sent_once,
            duplicates: c.duplicates,
            lost: c.lost,
            missed: c.missed,
            quarantined: c.quarantined,
            late: c.late,
            waiting: c.waiting,
            lateness_p50_secs: percentile(&c.lateness, 0.5),
            lateness_p99_secs: percentile(&c.lateness, 0.99),
            replay_drain_secs: replay.drain.map(secs),
            replay_sends_per_sec: replay.sends_per_sec,
            replay_bucket: replay.bucket,
            replay_bucket_per_sec: replay.bucket_per_sec,
            limits: limits(run),
            first_limit: first.as_ref().map(|f| f.1.clone()),
            first_limit_at_secs: first.map(|f| secs(f.0)),
            dynamodb: Dynamo::of(run, sent),
            ses_throttled,
            parks_refused,
            requeued,
            longest_scheduler_delay_secs: secs(longest),
            sqs_receives: receives,
            sqs_over_limit_receives: over_limit,
            dead_lettered: dead,
            invocations: run.c.invocations,
            crashed_invocations: run.c.crashed,
            outcomes: lock(&run.ctx.outcomes).clone(),
            queue_actions: lock(&run.ctx.actions).clone(),
        }
    }

    /// The report as a table for a terminal.
    pub(super) fn table(&self, elapsed: std::time::Duration) -> String {
        let mut s = String::new();
        let c = &self.config;
        let _ = writeln!(
            s,
            "capacity model: {} notices/hour, {} simulated minutes, seed {} ({} configuration)",
            self.per_hour,
            self.minutes,
            self.seed,
            if c.recommended { "recommended" } else { "default" }
        );
        let _ = writeln!(
            s,
            "  rate limits {}; SES {}/s; MaximumConcurrency {}; batch {} (window {} s); park spread {} s; table warm {} WCU/s",
            c.rate_limits,
            c.ses_max_send_rate,
            c.max_concurrency,
            c.batch_size,
            c.batch_window_secs,
            c.park_spread_secs,
            c.table_warm_wcu
        );
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "notices {}  due {}  sent once {}  duplicates {}  lost {}  missed {}  quarantined {}",
            self.notices, self.due, self.sent_once, self.duplicates, self.lost, self.missed, self.quarantined
        );
        let _ = writeln!(
            s,
            "late {} (of them still waiting {})  lateness p50 {:.1} s  p99 {:.1} s",
            self.late, self.waiting, self.lateness_p50_secs, self.lateness_p99_secs
        );
        if let (Some(d), Some(r)) = (self.replay_drain_secs, self.replay_sends_per_sec) {
            let _ = writeln!(s, "replay drained in {d:.1} s ({r:.1} sends/s)");
        }
        if let Some(rate) = self.replay_bucket_per_sec {
            let bucket = self.replay_bucket.as_deref().unwrap_or("the account");
            let _ = writeln!(s, "replay's bucket: {bucket}, {rate:.1}/s (with the account's)");
        }
        let _ = writeln!(s);
        self.services_table(&mut s);
        let outcomes: Vec<String> = self.outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(s, "outcomes: {}", outcomes.join(", "));
        let _ = writeln!(s, "({:.1} s)", elapsed.as_secs_f64());
        s
    }

    /// The services' side of the table: each limit's peak against its quota, the first to bind,
    /// the ledger's calls and cost, and the other services' counts.
    fn services_table(&self, s: &mut String) {
        let _ = writeln!(s, "{:<58} {:>14} {:>14} {:>7}", "limit", "peak", "quota", "use");
        for l in &self.limits {
            let share = if l.quota > 0.0 { l.peak / l.quota * 100.0 } else { 0.0 };
            let flag = if share > 50.0 { "  > 50 %" } else { "" };
            let _ = writeln!(s, "{:<58} {:>14.1} {:>14.1} {:>6.1}%{flag}", l.name, l.peak, l.quota, share);
        }
        let _ = writeln!(
            s,
            "first limit to bind: {}",
            match (&self.first_limit, self.first_limit_at_secs) {
                (Some(name), Some(at)) => format!("{name}, at {at:.1} s"),
                _ => "none".into(),
            }
        );
        let d = &self.dynamodb;
        let _ = writeln!(
            s,
            "DynamoDB: {:.2} calls per sent notice, {:.0} WRU + {:.0} RRU per million notices = ${:.2}; {} calls throttled",
            d.calls_per_sent_notice,
            d.write_units_per_million_notices,
            d.read_units_per_million_notices,
            d.dollars_per_million_notices,
            d.throttled_calls
        );
        let ops: Vec<String> =
            d.per_sent_notice_by_operation.iter().map(|(op, n)| format!("{op} {n:.2}")).collect();
        let _ = writeln!(
            s,
            "DynamoDB calls per sent notice by operation: {}; token writes refused by their condition {}",
            ops.join(", "),
            d.refused_token_writes
        );
        let _ = writeln!(
            s,
            "SES throttled {}; parks refused {} (requeued {}); longest Scheduler delay {:.1} s; SQS receives {} (over the in-flight limit {}); dead-lettered {}; invocations {} (crashed {})",
            self.ses_throttled,
            self.parks_refused,
            self.requeued,
            self.longest_scheduler_delay_secs,
            self.sqs_receives,
            self.sqs_over_limit_receives,
            self.dead_lettered,
            self.invocations,
            self.crashed_invocations
        );
    }
}
