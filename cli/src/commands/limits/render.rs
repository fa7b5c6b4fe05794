//! The text `noticectl limits` prints without `--json`: the table of buckets, where each number
//! comes from, the domains asked about, the sender's log line and the notes.

use super::num;
use super::view::{LimitView, LimitsReport, Match, QueryView};
use crate::terminal::table;

fn per_sec(l: &LimitView) -> String {
    format!("{}/s", num(l.per_second))
}

fn per_hour(l: &LimitView) -> String {
    format!("{}/h", num(l.per_hour))
}

fn one(l: &LimitView) -> String {
    format!("{} ({}) burst {}", per_sec(l), per_hour(l), l.burst)
}

/// The table the command prints.
pub(crate) fn render(r: &LimitsReport) -> String {
    let mrs = r.max_send_rate.map_or("unknown".to_owned(), |m| format!("{}/s", num(m)));
    let mut out =
        format!("send-rate limits from {}; SES MaxSendRate {mrs} (no AWS calls)\n\n", r.config_source);
    if !r.enabled {
        out.push_str(&format!(
            "rate limits: off — {}; no domain and no account limit\n",
            r.account.explanation
        ));
    } else {
        out.push_str(&bucket_table(r));
        out.push_str(&sources(r));
    }
    if !r.queries.is_empty() {
        out.push_str("\ndomains asked about (--domain):\n");
        for q in &r.queries {
            out.push_str(&query_line(q, r.enabled));
        }
    }
    out.push_str(&format!("\nthe sender logs: {}\n", r.sender_log));
    if !r.notes.is_empty() {
        out.push_str("\nnotes:\n");
        for n in &r.notes {
            out.push_str(&format!("  - {n}\n"));
        }
    }
    out
}

/// One row per bucket: the account, the providers with a limit of their own, the other
/// providers, the listed domains and the other domains.
fn bucket_table(r: &LimitsReport) -> String {
    let dash = || "-".to_owned();
    let mut rows = Vec::new();
    let mut row =
        |what: String, limit: Option<&LimitView>, shards: Option<u32>, shard: Option<&LimitView>| {
            rows.push(match limit {
                Some(l) => vec![
                    what,
                    per_sec(l),
                    per_hour(l),
                    l.burst.to_string(),
                    shards.map_or_else(dash, |s| s.to_string()),
                    shard
                        .map_or_else(dash, |s| format!("{} ({}) burst {}", per_sec(s), per_hour(s), s.burst)),
                ],
                None => vec![what, "none".to_owned(), dash(), dash(), dash(), dash()],
            });
        };
    row("account".to_owned(), r.account.limit.as_ref(), r.account.shards, r.account.per_shard.as_ref());
    for p in r.providers.list.iter().filter(|p| p.own) {
        row(format!("provider {}", p.provider), Some(&p.limit), Some(p.shards), Some(&p.per_shard));
    }
    let others = r.providers.list.iter().filter(|p| !p.own).count();
    if others > 0 || r.providers.default.is_some() {
        let what =
            if r.providers.list.iter().any(|p| p.own) { "each other provider" } else { "each provider" };
        row(what.to_owned(), r.providers.default.as_ref(), r.providers.default.map(|_| 1), None);
    }
    for d in &r.domains {
        row(d.domain.clone(), Some(&d.limit), Some(d.shards), Some(&d.per_shard));
    }
    row("other domains".to_owned(), r.default.limit.as_ref(), r.default.limit.map(|_| 1), None);
    table(&["bucket", "per second", "per hour", "burst", "shards", "per shard"], &rows)
}

/// Where each number of the table comes from.
fn sources(r: &LimitsReport) -> String {
    let mut out = String::from("\nwhere each number comes from:\n");
    out.push_str(&format!("  account: {}\n", r.account.explanation));
    out.push_str(&format!("  providers: {}\n", r.providers.explanation));
    if !r.providers.list.is_empty() {
        let listed: Vec<String> =
            r.providers.list.iter().map(|p| format!("{} ({})", p.provider, p.domains.len())).collect();
        out.push_str(&format!(
            "    one bucket each, for all its domains (table {}; --json lists them): {}\n",
            r.providers.table,
            listed.join(", ")
        ));
    }
    for d in &r.domains {
        out.push_str(&format!("  {}: {}\n", d.domain, d.explanation));
    }
    out.push_str(&format!("  other domains: {}\n", r.default.explanation));
    out.push_str(&format!("  MX rollup: {}\n", r.rollup.explanation));
    out
}

/// The line of a domain asked about with `--domain` (`enabled`: limits are on).
fn query_line(q: &QueryView, enabled: bool) -> String {
    let what = match (q.matched, &q.limit) {
        (Match::NotLimited, _) | (_, None) if enabled => {
            "no bucket of its own: only the account's tokens (the long tail)".to_owned()
        }
        (Match::NotLimited, _) | (_, None) => "not limited".to_owned(),
        (Match::Listed, Some(l)) => match (q.shards, &q.per_shard) {
            (Some(s), Some(p)) if s > 1 => {
                format!("listed: {} in {s} shards of {}/s burst {}", one(l), num(p.per_second), p.burst)
            }
            _ => format!("listed: {}", one(l)),
        },
        (Match::Default, Some(l)) => format!("not listed, the default for other domains: {}", one(l)),
        (Match::Provider, Some(l)) => format!(
            "provider {}'s bucket, shared with its other domains: {}",
            q.provider.as_deref().unwrap_or("?"),
            one(l)
        ),
    };
    let mx = if q.mx_lookup {
        " — unless its MX hosts are all one provider's: then that provider's bucket (the sender looks it up)"
    } else {
        ""
    };
    format!("  {}: {what}{mx}\n", q.domain)
}
