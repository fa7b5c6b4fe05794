use super::*;
use crate::error::InvalidJob;
use crate::identity::{Identity, NoticeSecret};
use crate::ledger::RowState;
use crate::mailer::NotAccepted;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn key(sub: &str) -> NoticeKey {
    let secret = NoticeSecret::new("queue-policy-test-secret").unwrap();
    Identity::new(sub, "2026-10-01", "renewal_notice_t72", 0).unwrap().derive_key(&secret)
}

const NOW: &str = "2026-10-01T00:00:00Z";
const MIN: u64 = 60;
/// The waits of the table: none, just under and just over the hide bound, 11 h, 30 days.
const WAITS: [u64; 5] = [0, 14 * MIN, 16 * MIN, 11 * 3600, 30 * 86_400];
const COUNTS: [u32; 5] = [1, 5, 9, 10, 20];

/// Every outcome, each with its due time `wait` seconds from now where it has one.
fn outcomes(now: DateTime<Utc>, wait: u64) -> Vec<Outcome> {
    let until = now + TimeDelta::seconds(wait as i64);
    let closes_at = until + TimeDelta::hours(48);
    vec![
        Outcome::Sent { message_id: "m".into() },
        Outcome::Suppressed { state: RowState::Sent },
        Outcome::InFlight { until, withdraw: false },
        Outcome::Deferred { until, closes_at },
        Outcome::RateLimited { until },
        Outcome::Missed { closed_at: now },
        Outcome::Released { class: NotAccepted::Throttled, reason: "429".into() },
        Outcome::Quarantined { reason: "500".into(), message_id: None },
        Outcome::Rejected { reason: "bad address".into() },
        Outcome::PayloadConflict { state: RowState::Sent },
        Outcome::ShadowSent { message_id: None, would_suppress: None },
        Outcome::Invalid(InvalidJob::new("email", "missing")),
        Outcome::RenderFailed("template".into()),
        Outcome::LedgerUnavailable("down".into()),
        Outcome::NoTimeLeft,
        Outcome::Withdrawn { already: false },
        Outcome::WithdrawTooLate { state: RowState::Sent, at: now },
        Outcome::WithdrawNotNeeded { state: RowState::Missed },
    ]
}

/// What the table says, written out by hand.
fn expected(policy: &QueuePolicy, outcome: &Outcome, count: u32, wait: u64, jitter: f64) -> QueueAction {
    let now = at(NOW);
    let long = |secs: u64, due: DateTime<Utc>| {
        if secs <= 15 * MIN {
            QueueAction::Hide(Duration::from_secs(secs))
        } else if policy.parking {
            QueueAction::Park { at: round_up_to_minute(due) }
        } else {
            QueueAction::Hide(Duration::from_secs(secs.min(12 * 3600)))
        }
    };
    let action = match outcome.label() {
        "sent"
        | "suppressed"
        | "missed"
        | "quarantined"
        | "rejected"
        | "shadow_sent"
        | "withdrawn"
        | "withdraw_too_late"
        | "withdraw_not_needed" => QueueAction::Delete,
        "in_flight" | "deferred" => long(wait, now + TimeDelta::seconds(wait as i64)),
        "rate_limited" => {
            let after = if count >= 2 { backoff(count - 1, jitter).as_secs() } else { 0 };
            let secs = wait.max(after);
            long(secs, now + TimeDelta::seconds(secs as i64))
        }
        "released" | "ledger_unavailable" | "no_time_left" => QueueAction::Backoff(backoff(count, jitter)),
        "invalid" | "payload_conflict" | "render_failed" => QueueAction::DeadLetter,
        other => panic!("an outcome the table does not know: {other}"),
    };
    match action {
        QueueAction::Hide(d) | QueueAction::Backoff(d) if count >= 10 => {
            QueueAction::Requeue(d.min(Duration::from_secs(15 * MIN)))
        }
        other => other,
    }
}

#[test]
fn every_outcome_by_receive_count_and_wait() {
    let now = at(NOW);
    let mut checked = 0;
    for policy in [QueuePolicy::parking(), QueuePolicy::default()] {
        for count in COUNTS {
            for wait in WAITS {
                for outcome in outcomes(now, wait) {
                    let receive = Receive { key: None, count, now, jitter: 0.0 };
                    let got = policy.action(&outcome, &receive);
                    let want = expected(&policy, &outcome, count, wait, 0.0);
                    assert_eq!(
                        got,
                        want,
                        "{} receive {count} wait {wait} s, parking {}",
                        outcome.label(),
                        policy.parking
                    );
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 2 * 5 * 5 * 18);
}

#[test]
fn nothing_hides_longer_than_fifteen_minutes_when_parking_is_there() {
    let now = at(NOW);
    for count in 1..=25 {
        for wait in WAITS.iter().chain(&[901, 3600, 43_200, 43_201]) {
            for jitter in [0.0, 0.5, 1.0] {
                for outcome in outcomes(now, *wait) {
                    let receive = Receive { key: None, count, now, jitter };
                    match QueuePolicy::parking().action(&outcome, &receive) {
                        QueueAction::Hide(d) | QueueAction::Backoff(d) | QueueAction::Requeue(d) => {
                            assert!(d <= MAX_HIDE, "{} hides {d:?}", outcome.label())
                        }
                        QueueAction::Park { at } => assert!(at >= now + TimeDelta::seconds(*wait as i64)),
                        QueueAction::Delete | QueueAction::DeadLetter => {}
                    }
                }
            }
        }
    }
}

#[test]
fn a_rate_limited_job_whose_token_is_twenty_minutes_away_parks() {
    let now = at(NOW);
    let receive = Receive { key: None, count: 1, now, jitter: 0.5 };
    let until = at("2026-10-01T00:20:00Z");
    assert_eq!(
        QueuePolicy::parking().action(&Outcome::RateLimited { until }, &receive),
        QueueAction::Park { at: until }
    );
    let soon = at("2026-10-01T00:00:02Z");
    assert_eq!(
        QueuePolicy::parking().action(&Outcome::RateLimited { until: soon }, &receive),
        QueueAction::Hide(Duration::from_secs(2)),
        "first receive: back when the token is due"
    );
    let again = Receive { count: 2, ..receive };
    assert_eq!(
        QueuePolicy::parking().action(&Outcome::RateLimited { until: soon }, &again),
        QueueAction::Hide(backoff(1, 0.5)),
        "limited again: at least the previous receive's backoff"
    );
}

#[test]
fn backoff_grows_is_capped_and_jitters_over_the_upper_half() {
    assert_eq!(backoff(1, 0.0), Duration::from_secs(15));
    assert_eq!(backoff(1, 1.0), Duration::from_secs(30));
    assert_eq!(backoff(2, 1.0), Duration::from_secs(60));
    assert_eq!(backoff(30, 1.0), BACKOFF_CAP);
    assert_eq!(backoff(30, 0.0), BACKOFF_CAP / 2);
    assert_eq!(backoff(0, 7.0), BACKOFF_BASE, "jitter is clamped, receive 0 counts as the first");
}

#[test]
fn parks_at_the_opening_rounded_up_to_the_minute() {
    let policy = QueuePolicy::parking();
    let k = key("sub_round");
    assert_eq!(policy.park_time(at("2026-10-31T09:00:00Z"), None, Some(&k)), at("2026-10-31T09:00:00Z"));
    assert_eq!(policy.park_time(at("2026-10-01T12:00:00.001Z"), None, Some(&k)), at("2026-10-01T12:01:00Z"));
    assert_eq!(policy.park_time(at("2026-10-05T08:59:30Z"), None, None), at("2026-10-05T09:00:00Z"));
}

#[test]
fn the_spread_is_stable_for_one_key_spreads_many_and_stays_inside_the_window() {
    let spread = Duration::from_secs(6 * 3600);
    let policy = QueuePolicy { parking: true, park_spread: spread };
    let opens = at("2026-10-28T09:00:00Z");
    let closes = at("2026-10-30T09:00:00Z");
    let mut offsets = std::collections::BTreeSet::new();
    for i in 0..200 {
        let k = key(&format!("sub_{i}"));
        let wake = policy.park_time(opens, Some(closes), Some(&k));
        assert_eq!(
            wake,
            policy.park_time(opens, Some(closes), Some(&k)),
            "a redelivery parks at the same time"
        );
        assert!(wake >= opens && wake < opens + TimeDelta::from_std(spread).unwrap(), "{wake}");
        offsets.insert((wake - opens).num_seconds());
    }
    assert!(offsets.len() > 150, "200 keys spread over 6 h: {} distinct offsets", offsets.len());

    // A window narrower than the spread: every wake-up still lands 15 minutes before the close.
    let tight_close = at("2026-10-28T10:00:00Z");
    for i in 0..200 {
        let k = key(&format!("sub_{i}"));
        let wake = policy.park_time(opens, Some(tight_close), Some(&k));
        assert!(wake >= opens && wake <= tight_close - TimeDelta::minutes(15), "{wake}");
    }
    // No room at all: the opening itself.
    let k = key("sub_none");
    assert_eq!(policy.park_time(opens, Some(opens + TimeDelta::minutes(10)), Some(&k)), opens);
    // Through the policy: a deferred job 30 days out parks inside its spread.
    let receive = Receive { key: Some(&k), count: 1, now: at(NOW), jitter: 0.3 };
    let QueueAction::Park { at: wake } =
        policy.action(&Outcome::Deferred { until: opens, closes_at: closes }, &receive)
    else {
        panic!("a 27-day wait parks");
    };
    assert_eq!(wake, policy.park_time(opens, Some(closes), Some(&k)));
}

/// A job worked once outside the queue (`noticectl send`, `enqueue`) is answered what its first
/// receive would be, unspread: the policy's one decision, not a second table.
#[test]
fn a_job_worked_once_gets_its_first_receives_action() {
    let now = at(NOW);
    for policy in [QueuePolicy::default(), QueuePolicy::parking()] {
        for wait in WAITS {
            for outcome in outcomes(now, wait) {
                let first = Receive { key: None, count: 1, now, jitter: 0.0 };
                assert_eq!(policy.action_once(&outcome, now), policy.action(&outcome, &first), "{outcome:?}");
            }
        }
    }
    let invalid = Outcome::Invalid(InvalidJob::new("email", "missing"));
    assert_eq!(QueuePolicy::parking().action_once(&invalid, now), QueueAction::DeadLetter);
    let released = Outcome::Released { class: NotAccepted::Throttled, reason: "429".into() };
    assert!(matches!(QueuePolicy::parking().action_once(&released, now), QueueAction::Backoff(_)));
    let far = Outcome::Deferred { until: now + TimeDelta::days(30), closes_at: now + TimeDelta::days(32) };
    assert!(matches!(QueuePolicy::parking().action_once(&far, now), QueueAction::Park { .. }));
}
