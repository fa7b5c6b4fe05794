//! Which evidence becomes an outcome event, its schema, and a publisher that fails, refuses or hangs
//! never failing a send.

use std::time::Duration;

use chrono::{DateTime, Utc};

use notice_ledger::deliver::{Delivery, Outcome};
use notice_ledger::error::InvalidJob;
use notice_ledger::identity::{NoticeKey, NoticeSecret};
use notice_ledger::job::Message;
use notice_ledger::ledger::{ClaimRequest, LedgerRow};
use notice_ledger::ledger::{DeliveryStatus, ProviderEvidence, RenderedNotice, RowState, WithdrawRequest};
use notice_ledger::mailer::NotAccepted;
use notice_ledger::outcomes::*;
use notice_testkit::outcomes::{FaultyPublisher, PublishFault, RecordingPublisher};

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

const JOB: &str = r#"{"subscription_id":"sub_8812","period_start":"2026-10-01","kind":"renewal_notice_t72",
  "revision":2,"email":"ada@example.com","charge_at":"2026-10-01T09:00:00Z","jurisdiction":"US-CA",
  "template_data":{"plan_name":"Coffee Box"}}"#;
const WITHDRAW: &str = r#"{"action":"withdraw","subscription_id":"sub_8812","period_start":"2026-10-01",
  "kind":"renewal_notice_t72","revision":2,"reason":"cancelled at period end"}"#;

fn message(body: &str) -> Message {
    Message::parse(body, &notice_texts::Icu).unwrap_or_else(|e| panic!("{e}"))
}

fn key_of(m: &Message) -> NoticeKey {
    let secret = NoticeSecret::new("outcome-test-secret").unwrap_or_else(|e| panic!("{e}"));
    m.identity().derive_key(&secret)
}

fn every_outcome() -> Vec<Outcome> {
    let at = t("2026-09-28T09:00:00Z");
    vec![
        Outcome::Sent { message_id: "0100-abc".into() },
        Outcome::Suppressed { state: RowState::Sent },
        Outcome::InFlight { until: at, withdraw: false },
        Outcome::Deferred { until: at, closes_at: at },
        Outcome::RateLimited { until: at },
        Outcome::Missed { closed_at: t("2026-09-30T09:00:00Z") },
        Outcome::Released { class: NotAccepted::Throttled, reason: "slow down".into() },
        Outcome::Quarantined { reason: "unknown".into(), message_id: None },
        Outcome::Rejected { reason: "MessageRejected: bad address".into() },
        Outcome::PayloadConflict { state: RowState::Sent },
        Outcome::ShadowSent { message_id: Some("m".into()), would_suppress: None },
        Outcome::Invalid(InvalidJob::new("email", "is required")),
        Outcome::RenderFailed("no plan".into()),
        Outcome::LedgerUnavailable("down".into()),
        Outcome::NoTimeLeft,
        Outcome::Withdrawn { already: false },
        Outcome::WithdrawTooLate { state: RowState::Sent, at },
        Outcome::WithdrawNotNeeded { state: RowState::Missed },
    ]
}

#[test]
fn every_sender_outcome_maps_to_its_event_or_to_none() {
    let job = message(JOB);
    let withdraw = message(WITHDRAW);
    let at = t("2026-09-28T09:00:00Z");
    let mut published = Vec::new();
    for outcome in every_outcome() {
        let m = if matches!(
            outcome,
            Outcome::Withdrawn { .. } | Outcome::WithdrawTooLate { .. } | Outcome::WithdrawNotNeeded { .. }
        ) {
            &withdraw
        } else {
            &job
        };
        let delivery = Delivery { key: Some(key_of(m)), outcome: outcome.clone() };
        let event = OutcomeEvent::for_delivery(&delivery, m, at, Some("sha256:ab12"));
        assert_eq!(event.as_ref().map(|e| e.outcome), published_as(&outcome), "{}", outcome.label());
        let Some(event) = event else { continue };
        published.push(event.outcome);
        assert_eq!(event.schema_version, SCHEMA_VERSION);
        assert_eq!(event.notice_key, key_of(m).as_str());
        assert_eq!(
            (
                event.subscription_id.as_str(),
                event.period_start.as_str(),
                event.kind.as_str(),
                event.revision
            ),
            ("sub_8812", "2026-10-01", "renewal_notice_t72", 2)
        );
        assert_eq!(event.at, at);
        assert_eq!(event.published_by, PublishedBy::Sender);
        // Never the customer's address or template data.
        let detail = event.to_detail();
        assert!(!detail.contains("ada@example.com") && !detail.contains("Coffee Box"), "{detail}");
        match event.outcome {
            OutcomeKind::Sent => {
                assert_eq!(event.message_id.as_deref(), Some("0100-abc"));
                assert_eq!(event.hours_before_charge, Some(72.0));
                assert_eq!(event.charge_at, Some(t("2026-10-01T09:00:00Z")));
                assert_eq!(event.config_version.as_deref(), Some("sha256:ab12"));
                assert_eq!(event.jurisdiction.as_deref(), Some("US-CA"));
            }
            OutcomeKind::Missed => {
                let reason = event.reason.as_deref().unwrap_or_default();
                assert!(reason.contains("2026-09-30T09:00:00"), "{reason}");
                assert_eq!(event.config_version.as_deref(), Some("sha256:ab12"));
            }
            OutcomeKind::Rejected => {
                assert_eq!(event.reason.as_deref(), Some("MessageRejected: bad address"));
                assert_eq!(event.message_id, None);
            }
            OutcomeKind::Withdrawn => {
                assert_eq!(event.reason.as_deref(), Some("cancelled at period end"));
                assert_eq!(
                    (event.charge_at, event.hours_before_charge, event.config_version),
                    (None, None, None)
                );
            }
            OutcomeKind::WithdrawTooLate => {
                let reason = event.reason.as_deref().unwrap_or_default();
                assert!(reason.contains("already sent"), "{reason}");
            }
            OutcomeKind::Bounced | OutcomeKind::Complained => {
                panic!("the sender never publishes {}", event.outcome)
            }
        }
    }
    assert_eq!(
        published,
        [
            OutcomeKind::Sent,
            OutcomeKind::Missed,
            OutcomeKind::Rejected,
            OutcomeKind::Withdrawn,
            OutcomeKind::WithdrawTooLate
        ]
    );
}

#[test]
fn a_repeated_withdraw_is_published_again_and_says_so() {
    let m = message(WITHDRAW);
    let delivery = Delivery { key: Some(key_of(&m)), outcome: Outcome::Withdrawn { already: true } };
    let event =
        OutcomeEvent::for_delivery(&delivery, &m, Utc::now(), None).unwrap_or_else(|| panic!("published"));
    assert_eq!(event.reason.as_deref(), Some("cancelled at period end (already withdrawn)"));
}

#[test]
fn no_key_no_event() {
    let m = message(JOB);
    let delivery = Delivery { key: None, outcome: Outcome::Sent { message_id: "m".into() } };
    assert!(OutcomeEvent::for_delivery(&delivery, &m, Utc::now(), None).is_none());
}

#[test]
fn the_detail_is_the_documented_schema() {
    let m = message(JOB);
    let delivery =
        Delivery { key: Some(key_of(&m)), outcome: Outcome::Sent { message_id: "0100-abc".into() } };
    let event = OutcomeEvent::for_delivery(&delivery, &m, t("2026-09-28T10:30:00Z"), None)
        .unwrap_or_else(|| panic!("published"));
    let detail: serde_json::Value =
        serde_json::from_str(&event.to_detail()).unwrap_or_else(|e| panic!("{e}"));
    let mut fields: Vec<&str> =
        detail.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "at",
            "charge_at",
            "hours_before_charge",
            "jurisdiction",
            "kind",
            "message_id",
            "notice_key",
            "outcome",
            "period_start",
            "published_by",
            "revision",
            "schema_version",
            "subscription_id"
        ]
    );
    assert_eq!(detail["outcome"], "sent");
    assert_eq!(detail["published_by"], "sender");
    assert_eq!(detail["hours_before_charge"], 70.5);
    let back: OutcomeEvent = serde_json::from_value(detail).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, event);
}

fn row(state: RowState) -> LedgerRow {
    let m = message(JOB);
    let Message::Send(job) = &m else { panic!("a job") };
    let req =
        ClaimRequest::for_job(job, key_of(&m), t("2026-09-28T09:00:00Z")).with_rendered(RenderedNotice {
            config_version: "sha256:cafe".into(),
            template: "renewal_notice_t72/default".into(),
            rendered_digest: "00".into(),
        });
    let mut row = req.to_row(state, None);
    // A committed row keeps the time of its claim (just before its one send).
    if matches!(state, RowState::Sent | RowState::Rejected) {
        row.claimed_at = Some(req.at);
    }
    row.updated_at = t("2026-09-28T09:00:01Z");
    row
}

#[test]
fn a_row_stands_for_its_outcomes() {
    for state in RowState::ALL {
        let events = OutcomeEvent::from_row(&row(state));
        let kinds: Vec<OutcomeKind> = events.iter().map(|e| e.outcome).collect();
        let expected: &[OutcomeKind] = match state {
            RowState::Sent => &[OutcomeKind::Sent],
            RowState::Missed => &[OutcomeKind::Missed],
            RowState::Rejected => &[OutcomeKind::Rejected],
            RowState::Withdrawn => &[OutcomeKind::Withdrawn],
            RowState::Claimed | RowState::Released | RowState::Alias => &[],
        };
        assert_eq!(kinds, expected, "{state}");
        for e in events {
            assert_eq!(e.published_by, PublishedBy::Ledger);
            assert_eq!(e.config_version.as_deref(), Some("sha256:cafe"));
        }
    }
    let mut sent = row(RowState::Sent);
    sent.message_id = Some("0100-abc".into());
    sent.delivery_status = Some(DeliveryStatus::Bounced);
    sent.updated_at = t("2026-09-28T09:05:00Z");
    let events = OutcomeEvent::from_row(&sent);
    assert_eq!(
        events.iter().map(|e| e.outcome).collect::<Vec<_>>(),
        [OutcomeKind::Sent, OutcomeKind::Bounced]
    );
    assert_eq!(events[0].at, t("2026-09-28T09:00:00Z"), "sent at the claim");
    assert_eq!(events[0].hours_before_charge, Some(72.0));
    assert_eq!(events[1].at, t("2026-09-28T09:05:00Z"));
    // A row learned from provider events has no identity: nothing the business could match.
    let mut learned = sent.clone();
    learned.subscription_id.clear();
    assert!(OutcomeEvent::from_row(&learned).is_empty());
    // A tombstone carries its withdraw's detail and no charge.
    let m = message(WITHDRAW);
    let Message::Withdraw(w) = &m else { panic!("a withdraw") };
    let tomb =
        WithdrawRequest::new(w, key_of(&m), notice_ledger::ledger::Origin::Worker, "producer", Utc::now())
            .to_row();
    let events = OutcomeEvent::from_row(&tomb);
    assert_eq!(events.len(), 1);
    assert!(events[0].reason.as_deref().unwrap_or_default().contains("cancelled at period end"));
    assert_eq!(events[0].charge_at, None);
}

#[test]
fn bounces_and_complaints_are_published_from_evidence_with_the_row() {
    let mut sent = row(RowState::Sent);
    sent.message_id = Some("0100-abc".into());
    for (status, expected) in [
        (DeliveryStatus::Bounced, Some(OutcomeKind::Bounced)),
        (DeliveryStatus::Complained, Some(OutcomeKind::Complained)),
        (DeliveryStatus::Delivered, None),
        (DeliveryStatus::Accepted, None),
        (DeliveryStatus::NotDelivered, None),
    ] {
        let ev = ProviderEvidence {
            key: sent.key.clone(),
            message_id: "0100-abc".into(),
            status,
            at: t("2026-09-28T09:10:00Z"),
        };
        let event = OutcomeEvent::for_evidence(&sent, &ev);
        assert_eq!(event.as_ref().map(|e| e.outcome), expected, "{status:?}");
        if let Some(event) = event {
            assert_eq!(event.published_by, PublishedBy::Reconciler);
            assert_eq!(event.subscription_id, "sub_8812");
            assert_eq!(event.message_id.as_deref(), Some("0100-abc"));
            assert_eq!(event.at, t("2026-09-28T09:10:00Z"));
        }
    }
}

fn events(n: usize) -> Vec<OutcomeEvent> {
    (0..n)
        .map(|i| {
            let mut r = row(RowState::Sent);
            r.subscription_id = format!("sub_{i}");
            OutcomeEvent::from_row(&r).remove(0)
        })
        .collect()
}

#[tokio::test]
async fn a_publish_retries_only_the_entries_that_failed_once() {
    let bus = FaultyPublisher::new(RecordingPublisher::default(), [PublishFault::RefuseEntries(vec![1, 3])]);
    let report = publish_bounded(&bus, events(4), Duration::from_secs(1)).await;
    assert_eq!((report.published, report.failed.len()), (4, 0));
    let calls = bus.inner().calls();
    assert_eq!(calls.len(), 2);
    let retried: Vec<&str> = calls[1].iter().map(|e| e.subscription_id.as_str()).collect();
    assert_eq!(retried, ["sub_1", "sub_3"], "only the refused entries are sent again");
}

#[tokio::test]
async fn a_publish_gives_up_after_one_retry() {
    let bus = FaultyPublisher::always(RecordingPublisher::default(), PublishFault::Unavailable);
    let report = publish_bounded(&bus, events(3), Duration::from_secs(1)).await;
    assert_eq!((report.published, report.failed.len(), bus.attempts()), (0, 3, 2));
    assert!(matches!(report.failed[0].1, PublishError::Unavailable(_)));
}

#[tokio::test]
async fn a_hanging_bus_costs_the_budget_and_no_more() {
    let bus = FaultyPublisher::new(RecordingPublisher::default(), [PublishFault::Hang]);
    let started = tokio::time::Instant::now();
    let report = publish_bounded(&bus, events(2), Duration::from_millis(300)).await;
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(2), "{took:?}");
    assert_eq!((report.published, report.failed.len()), (0, 2));
}

/// The reconciler's half of the rule: only a bounce or a complaint on the notice's own message
/// (the row updated, or its claim resolved by it) is one of the notice's outcomes.
#[test]
fn only_a_bounce_or_complaint_on_the_notices_own_message_is_an_outcome() {
    use notice_ledger::ledger::EvidenceEffect;
    let effects = [
        (EvidenceEffect::Updated, true),
        (EvidenceEffect::Resolved, true),
        (EvidenceEffect::Learned, false),
        (EvidenceEffect::DuplicateSend { first: "a".into(), second: "b".into() }, false),
        (EvidenceEffect::SentAfterWithdraw, false),
        (EvidenceEffect::KeptWithdrawn, false),
    ];
    let statuses = [
        (DeliveryStatus::Bounced, true),
        (DeliveryStatus::Complained, true),
        (DeliveryStatus::Accepted, false),
        (DeliveryStatus::Delivered, false),
        (DeliveryStatus::Delayed, false),
        (DeliveryStatus::Engaged, false),
        (DeliveryStatus::NotDelivered, false),
    ];
    for (effect, own) in &effects {
        for (status, outcome) in statuses {
            assert_eq!(evidence_published(effect, status), *own && outcome, "{effect:?} {status:?}");
        }
    }
}

/// Issue 49: an outcome event names the obligation rule that owed the notice — on the live path
/// (the sender's `sent`, `missed`, `rejected`, from the job), from the row (`noticectl outcomes
/// republish`, the reconciler's bounce), and not at all where the job named none or for a
/// withdraw (which names no rule).
#[test]
fn the_event_names_the_obligation_rule_where_the_job_had_one() {
    let owed = JOB.replace(
        r#""jurisdiction":"US-CA","#,
        r#""jurisdiction":"US-CA","obligation":"US-CA/ca-annual-term","#,
    );
    let m = message(&owed);
    let at = t("2026-09-28T10:30:00Z");
    for outcome in [
        Outcome::Sent { message_id: "0100-abc".into() },
        Outcome::Missed { closed_at: t("2026-09-30T09:00:00Z") },
        Outcome::Rejected { reason: "MessageRejected".into() },
    ] {
        let delivery = Delivery { key: Some(key_of(&m)), outcome };
        let event =
            OutcomeEvent::for_delivery(&delivery, &m, at, None).unwrap_or_else(|| panic!("published"));
        assert_eq!(event.obligation.as_deref(), Some("US-CA/ca-annual-term"));
        let detail: serde_json::Value =
            serde_json::from_str(&event.to_detail()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(detail["obligation"], "US-CA/ca-annual-term");
    }
    // No rule on the job: the field is left out of the detail, not null.
    let plain = message(JOB);
    let delivery = Delivery { key: Some(key_of(&plain)), outcome: Outcome::Sent { message_id: "m".into() } };
    let event =
        OutcomeEvent::for_delivery(&delivery, &plain, at, None).unwrap_or_else(|| panic!("published"));
    let detail: serde_json::Value =
        serde_json::from_str(&event.to_detail()).unwrap_or_else(|e| panic!("{e}"));
    assert!(detail.get("obligation").is_none(), "{detail}");
    // A withdraw names none.
    let w = message(WITHDRAW);
    let delivery = Delivery { key: Some(key_of(&w)), outcome: Outcome::Withdrawn { already: false } };
    let event = OutcomeEvent::for_delivery(&delivery, &w, at, None).unwrap_or_else(|| panic!("published"));
    assert_eq!(event.obligation, None);
    // From the row: the rule stored at claim, on the sent event and on the bounce after it.
    let mut sent = row(RowState::Sent);
    sent.obligation = Some("US-CO/co-anniversary".into());
    sent.delivery_status = Some(DeliveryStatus::Bounced);
    let events = OutcomeEvent::from_row(&sent);
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e.obligation.as_deref() == Some("US-CO/co-anniversary")), "{events:?}");
}
