//! `noticectl evidence`: what the ledger shows about one subscription's notices for one period —
//! for a disputed charge or a regulator's question: which notice went out when, how long before
//! the charge, judged against which window, and what the provider reported.
//!
//! No index or scan: the notice keys are derived (kinds × revisions, under the deployment's
//! secret, as `noticectl key` does) and read in one batch (one DynamoDB `BatchGetItem`, hence at
//! most [`MAX_KEYS`] keys). The secret is used, never printed.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use chrono::{DateTime, Utc};
use notice_ledger::ledger::{LedgerRow, RowState};
use notice_ledger::{Identity, NoticeKey, WindowPolicy};
use serde::Serialize;

use super::windows::{PolicyArg, WindowView};
use crate::exit::Exit;
use crate::ledger_target::LedgerArg;
use crate::local::StateDir;
use crate::terminal::{escape, table};

/// Keys one run may derive: one DynamoDB `BatchGetItem` holds 100.
pub(crate) const MAX_KEYS: usize = 100;

#[derive(clap::Args, Debug)]
pub(crate) struct EvidenceArgs {
    #[arg(long)]
    subscription_id: String,
    /// The period the notices were for (YYYY-MM-DD), as in the jobs.
    #[arg(long)]
    period_start: String,
    /// Notice kinds to look for, comma-separated; default: every kind the windows policy names.
    #[arg(long, value_delimiter = ',', value_name = "K1,K2")]
    kinds: Vec<String>,
    /// Revisions to look for: a range (`0-3`) or a list (`0,2`).
    #[arg(long, default_value = "0-3", value_name = "N-M")]
    revisions: String,
    #[command(flatten)]
    policy: PolicyArg,
    #[command(flatten)]
    ledger: LedgerArg,
    /// A claim older than this many seconds is shown as quarantined; default
    /// NOTICE_STALE_AFTER_SECS (900).
    #[arg(long, value_name = "SECS")]
    stale_after_secs: Option<u64>,
    /// Print one JSON object (for export) instead of the blocks.
    #[arg(long, conflicts_with = "wide")]
    json: bool,
    /// One table row per notice (about 250 columns) instead of one block per notice.
    #[arg(long)]
    wide: bool,
}

/// One notice as the ledger records it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct NoticeEvidence {
    pub(crate) notice_key: String,
    pub(crate) kind: String,
    pub(crate) revision: u64,
    pub(crate) state: &'static str,
    /// An open claim older than the stale age: the send's outcome is unknown to the ledger.
    pub(crate) quarantined: bool,
    pub(crate) origin: &'static str,
    /// When the claim was taken — immediately before the one send attempt.
    pub(crate) claimed_at: Option<DateTime<Utc>>,
    /// The row's last write (a commit, a provider event, or the missed record itself).
    pub(crate) updated_at: DateTime<Utc>,
    /// The moment judged against the window: the claim, or for a missed notice when the miss was
    /// recorded.
    pub(crate) at: Option<DateTime<Utc>>,
    pub(crate) charge_at: Option<DateTime<Utc>>,
    pub(crate) jurisdiction: Option<String>,
    pub(crate) hours_before_charge: Option<f64>,
    pub(crate) minutes_before_charge: Option<i64>,
    /// The effective window for this kind and jurisdiction under the policy given, and whether
    /// `at` lies inside it (both need the stored charge time).
    pub(crate) window: Option<WindowView>,
    pub(crate) inside_window: Option<bool>,
    pub(crate) message_id: Option<String>,
    pub(crate) delivery_status: Option<&'static str>,
    pub(crate) duplicate_message_ids: Vec<String>,
    /// Why the row is missed, rejected or released; who resolved it.
    pub(crate) detail: Option<String>,
    /// Digest of the content inputs (recipient, charge, jurisdiction, locale, template data) of
    /// the job that claimed it; the rendered body itself is not stored.
    pub(crate) content_digest: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct Report {
    subscription_id: String,
    period_start: String,
    ledger: String,
    policy: String,
    kinds: Vec<String>,
    revisions: Vec<u64>,
    keys_looked_up: usize,
    notices: Vec<NoticeEvidence>,
}

/// `0-3` → 0, 1, 2, 3; `0,2` → 0, 2; `5` → 5.
pub(crate) fn parse_revisions(text: &str) -> anyhow::Result<Vec<u64>> {
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .with_context(|| format!("--revisions {text:?}: {s:?} is not a revision (an integer >= 0)"))
    };
    let mut out = Vec::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((from, to)) => {
                let (from, to) = (number(from)?, number(to)?);
                if from > to {
                    anyhow::bail!("--revisions {text:?}: the range {from}-{to} is backwards");
                }
                if to - from >= MAX_KEYS as u64 {
                    anyhow::bail!("--revisions {text:?}: at most {MAX_KEYS} revisions in one run");
                }
                out.extend(from..=to);
            }
            None => out.push(number(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// What one row shows, judged against `policy` and the stale age at `now`.
pub(crate) fn notice_evidence(
    row: &LedgerRow,
    kind: &str,
    revision: u64,
    policy: &WindowPolicy,
    stale_before: DateTime<Utc>,
) -> NoticeEvidence {
    let at = match row.state {
        RowState::Missed => Some(row.updated_at),
        _ => row.claimed_at,
    };
    let before = row.charge_at.zip(at).map(|(charge, at)| charge - at);
    // Rows written before jurisdictions were normalised may hold `us-ca`: judged as `US-CA`.
    let jurisdiction = row
        .jurisdiction
        .as_deref()
        .map(|j| notice_ledger::jurisdiction::normalise(j).unwrap_or_else(|_| j.to_owned()));
    let jurisdiction = jurisdiction.as_deref();
    let window = row.charge_at.map(|charge| {
        let effective = policy.effective(Some(kind), jurisdiction);
        WindowView::new(Some(kind), jurisdiction, &effective, Some(charge))
    });
    let inside_window = row
        .charge_at
        .zip(at)
        .map(|(charge, at)| policy.effective(Some(kind), jurisdiction).window.contains(charge, at));
    NoticeEvidence {
        notice_key: row.key.as_str().to_owned(),
        kind: kind.to_owned(),
        revision,
        state: row.state.as_str(),
        quarantined: row.state == RowState::Claimed && row.claimed_at.is_some_and(|t| t < stale_before),
        origin: row.origin.as_str(),
        claimed_at: row.claimed_at,
        updated_at: row.updated_at,
        at,
        charge_at: row.charge_at,
        jurisdiction: row.jurisdiction.clone(),
        hours_before_charge: before.map(|d| d.num_milliseconds() as f64 / 3_600_000.0),
        minutes_before_charge: before.map(|d| d.num_minutes()),
        window,
        inside_window,
        message_id: row.message_id.clone(),
        delivery_status: row.delivery_status.map(|d| d.as_str()),
        duplicate_message_ids: row.duplicate_message_ids.clone(),
        detail: row.detail.clone(),
        content_digest: row.content_digest.clone(),
    }
}

/// Columns the default (block) output keeps within.
const COLUMNS: usize = 100;

/// The state as an operator reads it: an open claim is quarantined or still in flight.
fn state_text(n: &NoticeEvidence) -> String {
    match (n.state, n.quarantined) {
        ("claimed", true) => "claimed (quarantined)".to_owned(),
        ("claimed", false) => "claimed (in flight)".to_owned(),
        (s, _) => s.to_owned(),
    }
}

/// The first line of both renderings: whose notices, where, and which keys were looked up.
fn headline(r: &Report) -> String {
    format!(
        "evidence for subscription {}, period {}: {} notice(s) in {} ({} keys: kinds {} × revisions {})",
        escape(&r.subscription_id),
        r.period_start,
        r.notices.len(),
        r.ledger,
        r.keys_looked_up,
        r.kinds.join(","),
        revisions_text(&r.revisions),
    )
}

/// The report as one block per notice, every line within [`COLUMNS`]: the default.
fn render_blocks(r: &Report) -> String {
    let dash = || "-".to_owned();
    let mut lines = vec![headline(r), String::new()];
    for n in &r.notices {
        let prefix = n.notice_key.get(..crate::key_arg::MIN_PREFIX).unwrap_or(&n.notice_key);
        lines.push(format!("{} revision {} · key {prefix} · {}", n.kind, n.revision, state_text(n)));
        let what =
            if n.state == "missed" { "the miss was recorded" } else { "claimed, right before the send" };
        let field = |label: &str, value: String| format!("  {label:<10} {value}");
        lines.push(field("when", n.at.map_or_else(dash, |t| format!("{} ({what})", t.to_rfc3339()))));
        lines.push(field(
            "before",
            match (n.hours_before_charge, n.charge_at) {
                (Some(h), Some(charge)) => format!("{h:.1} h before the charge at {}", charge.to_rfc3339()),
                (None, Some(charge)) => format!("- (charge at {})", charge.to_rfc3339()),
                _ => "- (no charge time on the row)".to_owned(),
            },
        ));
        let window = n.window.as_ref().map_or_else(dash, |w| {
            format!("{} h → {} h before the charge", w.opens_hours_before, w.closes_hours_before)
        });
        let jurisdiction = n.jurisdiction.as_deref().map_or_else(|| "no jurisdiction".to_owned(), escape);
        let inside = n.inside_window.map_or_else(dash, |i| if i { "yes" } else { "no" }.to_owned());
        lines.push(field("window", format!("{window} · {jurisdiction} · inside: {inside}")));
        lines.push(field("message", n.message_id.as_deref().map_or_else(dash, escape)));
        lines.push(field("delivery", n.delivery_status.map_or_else(dash, str::to_owned)));
        if let Some(detail) = &n.detail {
            lines.push(field("detail", escape(detail)));
        }
        if !n.duplicate_message_ids.is_empty() {
            lines.push(field("duplicates", escape(&n.duplicate_message_ids.join(", "))));
        }
        lines.push(String::new());
    }
    lines.push(format!(
        "window: opens → closes, hours before the charge, under {} — the policy given now; judge by the \
         one deployed then if it has changed. --wide: one table row per notice; --json: every field.",
        r.policy
    ));
    if r.notices.iter().any(|n| n.charge_at.is_none()) {
        lines.push(
            "no charge time: the row was written before charge times were stored (or backfilled, or \
             learned from provider events)"
                .to_owned(),
        );
    }
    let mut out = String::new();
    for line in &lines {
        for part in wrap(line, COLUMNS) {
            out.push_str(&part);
            out.push('\n');
        }
    }
    out
}

/// `line` in pieces of at most `width` characters, broken at spaces (a longer word is cut); the
/// pieces after the first are indented to the value column of a block's field line.
fn wrap(line: &str, width: usize) -> Vec<String> {
    if line.chars().count() <= width {
        return vec![line.to_owned()];
    }
    let indent = if line.starts_with("  ") { " ".repeat(13) } else { " ".repeat(4) };
    let body = line.trim_start_matches(' ');
    let mut out = Vec::new();
    let mut current = " ".repeat(line.len() - body.len());
    let mut fresh = true;
    // Split on single spaces so the padding inside a line survives (as empty words).
    for word in body.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        if fresh && word.is_empty() && !out.is_empty() {
            continue;
        }
        loop {
            let used = current.chars().count();
            let need = if fresh { word.len() } else { word.len() + 1 };
            if used + need <= width {
                if !fresh {
                    current.push(' ');
                }
                current.extend(word.iter());
                fresh = false;
                break;
            }
            if fresh {
                current.extend(word.drain(..width - used));
            }
            out.push(std::mem::replace(&mut current, indent.clone()));
            fresh = true;
            if word.is_empty() {
                break;
            }
        }
    }
    if !fresh {
        out.push(current);
    }
    out
}

/// The report as one wide table row per notice (`--wide`).
fn render(r: &Report) -> String {
    let mut out = format!("{}\n\n", headline(r));
    let dash = || "-".to_owned();
    let rows: Vec<Vec<String>> = r
        .notices
        .iter()
        .map(|n| {
            let state = state_text(n);
            vec![
                n.kind.clone(),
                n.revision.to_string(),
                state,
                n.at.map_or_else(dash, |t| t.to_rfc3339()),
                n.hours_before_charge.map_or_else(dash, |h| format!("{h:.1} h")),
                n.charge_at.map_or_else(dash, |t| t.to_rfc3339()),
                n.jurisdiction.as_deref().map_or_else(dash, escape),
                n.window.as_ref().map_or_else(dash, |w| {
                    format!("{} h → {} h", w.opens_hours_before, w.closes_hours_before)
                }),
                n.inside_window.map_or_else(dash, |inside| if inside { "yes" } else { "no" }.to_owned()),
                n.message_id.as_deref().map_or_else(dash, escape),
                n.delivery_status.map_or_else(dash, str::to_owned),
                n.detail.as_deref().map_or_else(dash, escape),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "kind",
            "rev",
            "state",
            "claimed / recorded at",
            "before charge",
            "charge at",
            "jurisdiction",
            "window",
            "inside",
            "message id",
            "delivery",
            "detail",
        ],
        &rows,
    ));
    out.push_str(&format!(
        "\nclaimed / recorded at: the claim, taken right before the one send attempt (for a missed notice: when the miss was recorded)\n\
         window: opens → closes, hours before the charge, under {} — the policy given now; judge by the one deployed then if it has changed\n",
        r.policy
    ));
    if r.notices.iter().any(|n| n.charge_at.is_none()) {
        out.push_str("a `-` charge: the row was written before charge times were stored (or backfilled, or learned from provider events)\n");
    }
    for n in r.notices.iter().filter(|n| !n.duplicate_message_ids.is_empty()) {
        out.push_str(&format!(
            "{} revision {}: further message ids (duplicates that went out): {}\n",
            n.kind,
            n.revision,
            escape(&n.duplicate_message_ids.join(", "))
        ));
    }
    out
}

fn revisions_text(revisions: &[u64]) -> String {
    match (revisions.first(), revisions.last()) {
        (Some(first), Some(last)) if revisions.len() as u64 == last - first + 1 && revisions.len() > 1 => {
            format!("{first}-{last}")
        }
        _ => revisions.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
    }
}

pub(crate) async fn run(state_dir: PathBuf, args: EvidenceArgs) -> anyhow::Result<ExitCode> {
    let (policy, policy_source) = args.policy.load()?;
    let kinds: Vec<String> = if args.kinds.is_empty() {
        let named: Vec<String> = policy.kinds().into_iter().map(str::to_owned).collect();
        if named.is_empty() {
            anyhow::bail!(
                "evidence: give --kinds: the windows policy ({policy_source}) names no kinds to look for"
            );
        }
        named
    } else {
        args.kinds.iter().map(|k| k.trim().to_owned()).collect()
    };
    let revisions = parse_revisions(&args.revisions)?;
    let wanted = kinds.len() * revisions.len();
    if wanted > MAX_KEYS {
        anyhow::bail!(
            "evidence: {} kinds × {} revisions is {wanted} keys; at most {MAX_KEYS} in one run (narrow --kinds or --revisions)",
            kinds.len(),
            revisions.len()
        );
    }
    let stale_after = match args.stale_after_secs {
        Some(secs) => std::time::Duration::from_secs(secs),
        None => notice_setup::config::stale_after_from_env()?,
    };

    let state = StateDir::open(&state_dir)?;
    let secret = state.secret().await?;
    let mut derived: HashMap<NoticeKey, (String, u64)> = HashMap::with_capacity(wanted);
    let mut keys = Vec::with_capacity(wanted);
    for kind in &kinds {
        for revision in &revisions {
            let identity = Identity::new(&args.subscription_id, &args.period_start, kind, *revision)?;
            let key = identity.derive_key(&secret);
            derived.insert(key.clone(), (kind.clone(), *revision));
            keys.push(key);
        }
    }

    let target = args.ledger.target(&state.root)?;
    let ledger = target.open().await?.ledger;
    let rows = ledger.get_many(&keys).await.context("ledger lookup failed")?;
    let now = Utc::now();
    let stale_before = now - chrono::Duration::from_std(stale_after).unwrap_or(chrono::Duration::MAX);
    let mut notices: Vec<NoticeEvidence> = rows
        .iter()
        .filter_map(|row| {
            let (kind, revision) = derived.get(&row.key)?;
            Some(notice_evidence(row, kind, *revision, &policy, stale_before))
        })
        .collect();
    notices.sort_by(|a, b| (a.kind.as_str(), a.revision).cmp(&(b.kind.as_str(), b.revision)));

    if notices.is_empty() {
        eprintln!(
            "noticectl evidence: no ledger rows for subscription {}, period {} (kinds {} × revisions {}) in {} — \
             if notices were sent, check the kinds, the revisions and that the key secret is the deployment's",
            escape(&args.subscription_id),
            args.period_start,
            kinds.join(","),
            revisions_text(&revisions),
            target.describe()
        );
        return Ok(Exit::Attention.into());
    }
    let report = Report {
        subscription_id: args.subscription_id,
        period_start: args.period_start,
        ledger: target.describe(),
        policy: policy_source,
        kinds,
        revisions,
        keys_looked_up: keys.len(),
        notices,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if args.wide {
        print!("{}", render(&report));
    } else {
        print!("{}", render_blocks(&report));
    }
    Ok(Exit::Ok.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_read_as_ranges_or_lists() {
        assert_eq!(parse_revisions("0-3").unwrap(), [0, 1, 2, 3]);
        assert_eq!(parse_revisions("2,0,2").unwrap(), [0, 2]);
        assert_eq!(parse_revisions("5").unwrap(), [5]);
        assert_eq!(parse_revisions("0-1,4").unwrap(), [0, 1, 4]);
        assert!(parse_revisions("3-1").is_err());
        assert!(parse_revisions("-1").is_err());
        assert!(parse_revisions("a").is_err());
        assert!(parse_revisions("0-1000").is_err());
        assert_eq!(revisions_text(&[0, 1, 2, 3]), "0-3");
        assert_eq!(revisions_text(&[0, 2]), "0,2");
        assert_eq!(revisions_text(&[4]), "4");
    }

    #[test]
    fn long_lines_wrap_at_spaces_and_cut_long_words() {
        let field = format!("  {:<10} {}", "detail", "word ".repeat(40));
        let parts = wrap(field.trim_end(), 100);
        assert!(parts.len() > 1 && parts.iter().all(|p| p.chars().count() <= 100), "{parts:#?}");
        assert!(parts[0].starts_with("  detail     word"), "padding kept: {:?}", parts[0]);
        assert!(parts[1..].iter().all(|p| p.starts_with(&" ".repeat(13)) && !p.starts_with(&" ".repeat(14))));
        let long = format!("header {}", "x".repeat(250));
        let parts = wrap(&long, 100);
        assert!(parts.iter().all(|p| p.chars().count() <= 100), "{parts:#?}");
        assert_eq!(parts.concat().matches('x').count(), 250, "nothing lost: {parts:#?}");
        assert_eq!(wrap("short", 100), ["short"]);
    }
}
