//! What a run showed: the customers' side (sent once, duplicates, lost, late), the services' side
//! (each modelled limit's peak against its quota, the first to bind) and the ledger's cost.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use notice_ledger::ledger::RowState;
use serde::Serialize;

use super::args::Config;
use super::clock::{Us, MINUTE, SEC};
use super::producer::{body, Source};
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

impl Report {
    pub(super) async fn of(run: &Run) -> Report {
        let p = &run.p;
        let horizon = p.horizon;
        let (
            mut due,
            mut sent_once,
            mut duplicates,
            mut lost,
            mut missed,
            mut quarantined,
            mut late,
            mut waiting,
        ) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
        let mut lateness = Vec::new();
        let notices: Vec<_> = lock(&run.ctx.books).notices.clone();
        for (idx, n) in notices.iter().enumerate() {
            duplicates += u64::from(n.sends.saturating_sub(1));
            if n.sends == 1 {
                sent_once += 1;
            }
            let is_due = n.opens + LATE_AFTER <= horizon;
            if is_due {
                due += 1;
            }
            if let Some(first) = n.first_send {
                if is_due || n.source == Source::Replay {
                    let l = (first - n.opens).max(0);
                    lateness.push(l);
                    if l > LATE_AFTER {
                        late += 1;
                    }
                }
                continue;
            }
            // Never sent: where is it?
            let row = match notice_ledger::Job::parse(&body(idx as u32, n, &run.domains)) {
                Ok(job) => run.svc.dynamo.row(&job.key(&run.secret)).await,
                Err(_) => None,
            };
            match row.map(|r| r.state) {
                Some(RowState::Claimed) => quarantined += 1,
                Some(RowState::Missed) => missed += 1,
                _ if n.dead_lettered || (n.on_queue == 0 && !n.scheduled) => lost += 1,
                _ if is_due => {
                    waiting += 1;
                    let l = horizon - n.opens;
                    lateness.push(l);
                    if l > LATE_AFTER {
                        late += 1;
                    }
                }
                _ => {}
            }
        }
        lateness.sort_unstable();
        let replayed: Vec<&super::producer::Notice> =
            notices.iter().filter(|n| n.source == Source::Replay).collect();
        let replay_drain =
            (!replayed.is_empty() && replayed.iter().all(|n| n.first_send.is_some())).then(|| {
                replayed.iter().filter_map(|n| n.first_send.map(|f| f - p.replay_at)).max().unwrap_or(0)
            });

        let replay_bucket = (p.replay > 0).then(|| p.rate_limits.bucket_for(&p.replay_domain)).flatten();
        let account_rate = p.rate_limits.account().map(|l| l.per_second);
        let replay_rate = match (replay_bucket.as_ref().map(|b| b.limit.limit.per_second), account_rate) {
            (Some(b), Some(a)) => Some(b.min(a)),
            (b, a) => b.or(a).filter(|_| p.replay > 0),
        };

        let sent = notices.iter().filter(|n| n.sends > 0).count() as f64;
        let per_million = |units: f64| if sent > 0.0 { units / sent * 1e6 } else { 0.0 };
        let (
            calls,
            by_op,
            refused_tokens,
            wcu,
            rcu,
            throttled,
            table_w,
            table_r,
            hottest,
            index,
            ddb_first,
            served,
        ) = run.svc.dynamo.books(|b| {
            (
                b.calls,
                b.by_op.clone(),
                b.refused_token_writes,
                b.wcu,
                b.rcu,
                b.throttled,
                b.table_w.peak(),
                b.table_r.peak(),
                b.hottest_item(),
                b.hottest_index_shard(),
                b.first_throttle,
                b.most_served(),
            )
        });
        let (ses_peak, ses_throttled, ses_first) =
            run.svc.ses.state(|s| (s.peak.peak(), s.throttled, s.first_throttle));
        let (live, creates, invocations, refused, sched_first, longest, first_wait) =
            run.svc.scheduler.state(|s| {
                (
                    s.live.peak,
                    s.creates.peak(),
                    s.invocations.peak(),
                    s.refused,
                    s.first_refusal,
                    s.longest_wait,
                    s.first_wait,
                )
            });
        let (in_flight, over_limit, first_over, dead, receives, requeued) = {
            let q = lock(&run.ctx.queue);
            (q.in_flight.peak, q.over_limit, q.first_over_limit, q.dead_lettered, q.receives, q.requeued)
        };

        let limits = vec![
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
        ];
        // The first limit that refused, delayed or capped anything.
        let mut firsts: Vec<(Us, String)> = Vec::new();
        if let Some((t, what)) = ddb_first {
            firsts.push((t, what.to_owned()));
        }
        if let Some(t) = ses_first {
            firsts.push((t, "SES sends/s".into()));
        }
        if let Some((t, what)) = sched_first {
            firsts.push((t, what.to_owned()));
        }
        if let Some(t) = first_wait {
            firsts.push((t, "Scheduler invocations/s".into()));
        }
        if let Some(t) = first_over {
            firsts.push((t, "SQS messages in flight".into()));
        }
        if let Some(t) = run.pollers.first_capped {
            firsts.push((t, "Lambda concurrent invocations".into()));
        }
        firsts.sort();
        let first = firsts.into_iter().next();

        Report {
            per_hour: p.per_hour,
            minutes: secs(horizon) / 60.0,
            seed: p.seed,
            config: p.config(),
            notices: notices.len() as u64,
            due,
            sent_once,
            duplicates,
            lost,
            missed,
            quarantined,
            late,
            waiting,
            lateness_p50_secs: percentile(&lateness, 0.5),
            lateness_p99_secs: percentile(&lateness, 0.99),
            replay_drain_secs: replay_drain.map(secs),
            replay_sends_per_sec: replay_drain.filter(|&d| d > 0).map(|d| replayed.len() as f64 / secs(d)),
            replay_bucket: replay_bucket.map(|b| b.item),
            replay_bucket_per_sec: replay_rate,
            limits,
            first_limit: first.as_ref().map(|f| f.1.clone()),
            first_limit_at_secs: first.map(|f| secs(f.0)),
            dynamodb: Dynamo {
                calls,
                calls_per_sent_notice: if sent > 0.0 { calls as f64 / sent } else { 0.0 },
                per_sent_notice_by_operation: by_op
                    .into_iter()
                    .map(|(op, n)| (op, if sent > 0.0 { n as f64 / sent } else { 0.0 }))
                    .collect(),
                refused_token_writes: refused_tokens,
                write_units: wcu,
                read_units: rcu,
                throttled_calls: throttled,
                most_writes_one_item_served: served,
                write_units_per_million_notices: per_million(wcu),
                read_units_per_million_notices: per_million(rcu),
                dollars_per_million_notices: per_million(wcu) / 1e6 * DOLLARS_PER_MILLION_WRU
                    + per_million(rcu) / 1e6 * DOLLARS_PER_MILLION_RRU,
            },
            ses_throttled,
            parks_refused: refused,
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
        let outcomes: Vec<String> = self.outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(s, "outcomes: {}", outcomes.join(", "));
        let _ = writeln!(s, "({:.1} s)", elapsed.as_secs_f64());
        s
    }
}
