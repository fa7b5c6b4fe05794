//! The `noticectl evidence` report as people read it: one block per notice (the default) or one
//! wide table row per notice (`--wide`), with their footers. Apart from the command's flow because
//! it only formats; `--json` serialises the report directly.

use super::versions::PolicyBasis;
use super::{revisions_text, NoticeEvidence, Report};
use crate::terminal::{escape, table};

/// Hex characters of the rendered digest the block shows (`--json` and `--wide` show it whole).
const SHORT_DIGEST: usize = 12;

pub(super) fn short_digest(digest: &str) -> &str {
    digest.get(..SHORT_DIGEST).unwrap_or(digest)
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
        "evidence for subscription {}, period {}: {} notice(s) in {} ({} keys: kinds {} × revisions {}, key secret {})",
        escape(&r.subscription_id),
        r.period_start,
        r.notices.len(),
        r.ledger,
        r.keys_looked_up,
        r.kinds.join(","),
        revisions_text(&r.revisions),
        r.key_secret,
    )
}

/// The report as one block per notice, every line within [`COLUMNS`]: the default.
pub(super) fn render_blocks(r: &Report) -> String {
    let dash = || "-".to_owned();
    let mut lines = vec![headline(r), String::new()];
    for n in &r.notices {
        // As every output line shows a key: its `vN-` (if any) and 12 hex characters.
        let prefix = notice_ledger::NoticeKey::parse(&n.notice_key)
            .map_or_else(|_| n.notice_key.clone(), |key| key.prefix().to_owned());
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
        lines.push(field("policy", policy_text(&n.policy)));
        if let Some(rule) = &n.obligation {
            let about = n.obligation_description.as_deref().map_or_else(String::new, |d| format!(" — {d}"));
            lines.push(field("rule", escape(&format!("{rule}{about}"))));
        }
        lines.push(field("message", n.message_id.as_deref().map_or_else(dash, escape)));
        lines.push(field("delivery", n.delivery_status.map_or_else(dash, str::to_owned)));
        if let (Some(config), Some(template), Some(digest)) =
            (&n.config_version, &n.template, &n.rendered_digest)
        {
            lines.push(field(
                "template",
                format!("{} · rendered digest {}", escape(template), escape(short_digest(digest))),
            ));
            lines.push(field("config", format!("version {}", escape(config))));
        }
        if let Some(check) = &n.render {
            let job = check.job.as_deref().map_or_else(String::new, |j| format!(" (JOBS {j})"));
            lines.push(field("render", format!("{}{job} — {}", check.verdict, check.detail)));
        }
        if let Some(detail) = &n.detail {
            lines.push(field("detail", escape(detail)));
        }
        if !n.duplicate_message_ids.is_empty() {
            lines.push(field("duplicates", escape(&n.duplicate_message_ids.join(", "))));
        }
        lines.push(String::new());
    }
    lines.push(format!("{} --wide: one table row per notice; --json: every field.", window_note(r)));
    if let Some(summary) = render_summary(r) {
        lines.push(summary);
    }
    if r.notices.iter().any(|n| n.rendered_digest.is_some()) {
        lines.push(format!(
            "template: the one used (<kind>/<locale>); rendered digest: SHA-256 of the rendered subject, \
             text and HTML (first {SHORT_DIGEST} hex; --json: whole); config version: the notice \
             configuration that rendered it."
        ));
    }
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

/// The columns of `--wide`, one per field of [`wide_row`].
const WIDE_COLUMNS: [&str; 18] = [
    "kind",
    "rev",
    "state",
    "claimed / recorded at",
    "before charge",
    "charge at",
    "jurisdiction",
    "window",
    "inside",
    "policy",
    "rule",
    "message id",
    "delivery",
    "template",
    "config version",
    "rendered digest",
    "render",
    "detail",
];

/// One notice as a row of [`WIDE_COLUMNS`].
fn wide_row(n: &NoticeEvidence) -> Vec<String> {
    let dash = || "-".to_owned();
    vec![
        n.kind.clone(),
        n.revision.to_string(),
        state_text(n),
        n.at.map_or_else(dash, |t| t.to_rfc3339()),
        n.hours_before_charge.map_or_else(dash, |h| format!("{h:.1} h")),
        n.charge_at.map_or_else(dash, |t| t.to_rfc3339()),
        n.jurisdiction.as_deref().map_or_else(dash, escape),
        n.window
            .as_ref()
            .map_or_else(dash, |w| format!("{} h → {} h", w.opens_hours_before, w.closes_hours_before)),
        n.inside_window.map_or_else(dash, |inside| if inside { "yes" } else { "no" }.to_owned()),
        n.policy.short(),
        n.obligation.as_deref().map_or_else(dash, escape),
        n.message_id.as_deref().map_or_else(dash, escape),
        n.delivery_status.map_or_else(dash, str::to_owned),
        n.template.as_deref().map_or_else(dash, escape),
        n.config_version.as_deref().map_or_else(dash, escape),
        n.rendered_digest.as_deref().map_or_else(dash, escape),
        n.render.as_ref().map_or_else(dash, |c| c.verdict.to_owned()),
        n.detail.as_deref().map_or_else(dash, escape),
    ]
}

/// The report as one wide table row per notice (`--wide`).
pub(super) fn render(r: &Report) -> String {
    let mut out = format!("{}\n\n", headline(r));
    let rows: Vec<Vec<String>> = r.notices.iter().map(wide_row).collect();
    out.push_str(&table(&WIDE_COLUMNS, &rows));
    out.push_str(&format!(
        "\nclaimed / recorded at: the claim, taken right before the one send attempt (for a missed notice: when the miss was recorded)\n{}\n",
        window_note(r)
    ));
    for n in &r.notices {
        if let Some(reason) = &n.policy.reason {
            out.push_str(&format!("{} revision {}: policy given now: {reason}\n", n.kind, n.revision));
        }
        if let Some(check) = n.render.as_ref().filter(|c| c.verdict != "matches") {
            out.push_str(&format!(
                "{} revision {}: render {}: {}\n",
                n.kind, n.revision, check.verdict, check.detail
            ));
        }
    }
    if let Some(summary) = render_summary(r) {
        out.push_str(&format!("{summary}\n"));
    }
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

/// The block's `policy` line: the version that judged the window, or the policy given now and why.
fn policy_text(p: &PolicyBasis) -> String {
    match &p.reason {
        None => format!("{} · from {}", p.short(), escape(&p.from)),
        Some(reason) => format!("{} — {reason}", p.short()),
    }
}

/// What the windows were judged by, for the footer.
fn window_note(r: &Report) -> String {
    let fallback = r.notices.iter().any(|n| n.policy.reason.is_some());
    let mut note = "window: opens → closes, hours before the charge, under the policy of the configuration \
                    version the row names (policy: where it was found)."
        .to_owned();
    if fallback {
        note.push_str(&format!(
            " Rows without a version found (--config DIR or s3://BUCKET) are judged by {} — the policy \
             given now; judge by the one deployed then if it has changed.",
            r.policy
        ));
    }
    note
}

/// `render: 2 matches, 1 differs` (`--render` only).
fn render_summary(r: &Report) -> Option<String> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for check in r.notices.iter().filter_map(|n| n.render.as_ref()) {
        match counts.iter_mut().find(|(v, _)| *v == check.verdict) {
            Some((_, n)) => *n += 1,
            None => counts.push((check.verdict, 1)),
        }
    }
    if counts.is_empty() {
        return None;
    }
    let parts: Vec<String> = counts.iter().map(|(v, n)| format!("{n} {v}")).collect();
    Some(format!(
        "render: {} — re-rendered from the row's configuration version and the job in JOBS; `differs`, \
         `inputs differ` or an unavailable version exit 1",
        parts.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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
