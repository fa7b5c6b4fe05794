//! How `noticectl capacity` prints its plan: numbers for people, and the tables.

use super::*;
use crate::terminal::table;

/// Up to two significant figures, rounded up, and a whole number at least 1: 69.4 → 70,
/// 694.4 → 700, 54 000 000 → 54 000 000, 0.7 → 1.
pub(crate) fn round_up_sensibly(x: f64) -> f64 {
    if x <= 1.0 {
        return 1.0;
    }
    let digits = x.log10().floor() as i32 + 1;
    let step = 10f64.powi((digits - 2).max(0));
    ((x / step) - 1e-9).ceil() * step
}

/// A whole number with spaces between thousands: 27 000 000.
pub(crate) fn count(x: f64) -> String {
    notice_ledger::text::thousands(x.round() as u64)
}

/// A rate with about four significant figures: 3.47, 34.7, 347.2, 1 042; a whole one as is: 14.
pub(crate) fn rate(x: f64) -> String {
    if x == x.round() {
        count(x)
    } else if x < 10.0 {
        format!("{x:.2}")
    } else if x < 1_000.0 {
        format!("{x:.1}")
    } else {
        count(x)
    }
}

pub(super) fn percent(p: f64) -> String {
    if p < 1.0 {
        format!("{p:.2} %")
    } else if p < 10.0 {
        format!("{p:.1} %")
    } else {
        format!("{} %", count(p))
    }
}

/// A flag's value as typed: 30, 2.5.
pub(super) fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn amount(unit: Unit, x: f64) -> String {
    match unit {
        Unit::Count => count(x),
        Unit::PerSecond => format!("{}/s", rate(x)),
    }
}

/// The table the command prints.
pub(crate) fn render(p: &CapacityPlan) -> String {
    let i = &p.inputs;
    let mut out = format!(
        "capacity for {} notices a day, enqueued {} days ahead (no AWS calls)\n\nassumptions:\n",
        count(i.per_day as f64),
        trim(i.lead_days)
    );
    for a in &p.assumptions {
        out.push_str(&format!("  - {a}\n"));
    }
    out.push_str(&format!(
        "\nrate: {}/s on average, {}/s in the peak hour\n\n",
        rate(p.avg_rate_per_sec),
        rate(p.peak_rate_per_sec)
    ));
    let rows: Vec<Vec<String>> = p
        .rows
        .iter()
        .map(|r| {
            vec![
                r.what.to_owned(),
                amount(r.unit, r.needed),
                r.quota.map_or("-".to_owned(), |q| amount(r.unit, q)),
                r.percent_of_quota.map_or("-".to_owned(), percent),
                r.verdict.label().to_owned(),
            ]
        })
        .collect();
    out.push_str(&table(&["what", "needed", "quota", "% of quota", "verdict"], &rows));
    if let Some(drain) = p.cohort_drain_secs {
        out.push_str(&format!(
            "\nfixed billing day: one day's cohort of {} wakes at {}/s; at the invocation quota ({}/s) it takes {} s ({} min) to wake\n",
            count(i.per_day as f64),
            rate(p.invocations_per_sec),
            count(i.invocation_quota as f64),
            count(drain),
            trim((drain / 60.0 * 10.0).round() / 10.0)
        ));
    }
    out.push_str("\nDynamoDB ledger per receive (today's default path, rate limits on):\n");
    let paths: Vec<Vec<String>> = p
        .ledger_paths
        .iter()
        .map(|l| vec![l.path.to_owned(), l.reads.to_string(), l.writes.to_string(), l.which.to_owned()])
        .collect();
    out.push_str(&table(&["path", "reads", "writes", "which"], &paths));
    out.push_str(&format!(
        "  at peak: {} reads/s, {} writes/s (the send rate × the new-notice path)\n",
        rate(p.ledger_reads_per_sec),
        rate(p.ledger_writes_per_sec)
    ));
    out.push_str(&format!(
        "  one rate-bucket item per recipient domain takes ≤ {} writes/s (one DynamoDB partition): a domain sent more than {}/s needs its bucket sharded\n",
        count(PARTITION_WRITES_PER_SEC),
        count(PARTITION_WRITES_PER_SEC)
    ));
    if !p.notes.is_empty() {
        out.push_str("\nnotes:\n");
        for n in &p.notes {
            out.push_str(&format!("  - {n}\n"));
        }
    }
    out.push_str("\nQuota requests to file before going live:\n");
    if p.quota_requests.is_empty() {
        out.push_str("  none\n");
    }
    for q in &p.quota_requests {
        let unit = p.rows.iter().find(|r| r.quota_name == q.quota).map_or(Unit::Count, |r| r.unit);
        out.push_str(&format!(
            "  - {}: request {} (needed {}, quota {})\n",
            q.quota,
            amount(unit, q.request),
            amount(unit, q.needed),
            amount(unit, q.current)
        ));
    }
    out
}
