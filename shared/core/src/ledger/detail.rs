//! The free text a row stores: the audit lines an operator release, a resolution and a withdraw
//! leave, and the bound on any text a row is handed. One wording for every adapter.

use chrono::{DateTime, Utc};

/// The audit text an operator release leaves on the row.
pub fn release_detail(who: &str, reason: &str, at: DateTime<Utc>) -> String {
    format!(
        "released by {} at {}: {}",
        bounded_text(who, 64),
        at.to_rfc3339(),
        bounded_text(reason, MAX_REASON_CHARS)
    )
}

/// The audit text a withdraw leaves on its tombstone.
pub fn withdraw_detail(who: &str, reason: Option<&str>, at: DateTime<Utc>) -> String {
    let mut detail = format!("withdrawn by {} at {}", bounded_text(who, 64), at.to_rfc3339());
    if let Some(reason) = reason.filter(|r| !r.trim().is_empty()) {
        detail.push_str(": ");
        detail.push_str(&bounded_text(reason, MAX_REASON_CHARS));
    }
    detail
}

/// The audit text an operator resolution leaves on the row.
pub fn resolve_detail(who: &str, at: DateTime<Utc>) -> String {
    format!("resolved as sent by {} at {}", bounded_text(who, 64), at.to_rfc3339())
}

/// Longest reason stored on a row (operator and withdraw reasons, provider refusals).
pub const MAX_REASON_CHARS: usize = 500;

/// `text` on one line, without control characters, at most `max` characters: what a row stores of
/// free text it was handed.
pub fn bounded_text(text: &str, max: usize) -> String {
    let clean: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let mut out: String = clean.trim().chars().take(max).collect();
    if clean.trim().chars().count() > max {
        out.push('…');
    }
    out
}

// A withdraw reason the job accepts is stored whole, never cut short.
const _: () = assert!(crate::job::MAX_WITHDRAW_REASON_CHARS <= MAX_REASON_CHARS);
