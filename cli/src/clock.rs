//! `--now`: the one parser of a pinned instant, for every command that takes one.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};

/// The forms `--now` accepts, as its error names them.
pub(crate) const NOW_FORMS: &str =
    "YYYY-MM-DD (midnight UTC), YYYY-MM-DDTHH:MM (UTC) or RFC 3339 (2026-12-02T12:00:00Z)";

/// `2026-12-02` (midnight UTC), `2026-12-02T12:00` (UTC), or RFC 3339 with its offset.
pub(crate) fn parse_now(value: &str) -> Result<DateTime<Utc>, String> {
    let text = value.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M") {
        return Ok(t.and_utc());
    }
    if let Ok(d) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(d.and_time(NaiveTime::MIN).and_utc());
    }
    Err(format!("{:?} is not a time: use {NOW_FORMS}", crate::terminal::escape(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_a_minute_or_rfc_3339() {
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        assert_eq!(parse_now("2026-12-02").unwrap(), at("2026-12-02T00:00:00Z"));
        assert_eq!(parse_now("2026-12-02T12:30").unwrap(), at("2026-12-02T12:30:00Z"));
        assert_eq!(parse_now("2026-12-02T12:00:00Z").unwrap(), at("2026-12-02T12:00:00Z"));
        assert_eq!(parse_now("2026-12-02T14:00:00+02:00").unwrap(), at("2026-12-02T12:00:00Z"));
        for bad in ["2026-12", "tomorrow", "2026-13-01", "2026-12-02T25:00", ""] {
            let e = parse_now(bad).unwrap_err();
            assert!(e.contains("YYYY-MM-DD (midnight UTC)") && e.contains("RFC 3339"), "{bad}: {e}");
        }
    }
}
