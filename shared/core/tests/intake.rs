//! The intake's planner against the ledger's own rows: revisions, withdraws, obligations and price
//! changes, with the in-memory ledger.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use notice_ledger::error::LedgerError;
use notice_ledger::identity::{Kind, NoticeKey, NoticeSecret};
use notice_ledger::intake::revision::{self, RevisionChoice, RevisionRows, WithdrawChoice};
use notice_ledger::intake::*;
use notice_ledger::job::Job;
use notice_ledger::keyring::KeyRing;
use notice_ledger::ledger::{ClaimRequest, LedgerRow, Origin, RowReader, RowState, WithdrawRequest};
use notice_ledger::locale::TimeZone;
use notice_ledger::policy::{Occasion, Term};
use notice_testkit::MemoryLedger;

/// The stated kind of the planner these tests use.
const K: &str = "renewal_notice_t72";
const S1: &str = "the-first-secret-of-the-ledger";
const S2: &str = "the-second-secret-of-the-ledger";

fn planner_with(keys: KeyRing) -> IntakePlanner {
    IntakePlanner::new(
        Kind::parse("renewal_notice_t72").unwrap(),
        TimeZone::parse("America/Los_Angeles").unwrap(),
        keys,
        std::sync::Arc::new(notice_texts::Icu),
    )
}

fn planner() -> IntakePlanner {
    planner_with(KeyRing::from(NoticeSecret::new(S1).unwrap()))
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

fn renewal(amount_minor: i64) -> Renewal {
    Renewal {
        subscription_id: "sub_8812".into(),
        // 1 Oct 2026, 00:00 in Los Angeles.
        period_start_at: at("2026-10-01T07:00:00Z"),
        charge_at: at("2026-10-01T08:00:00Z"),
        amount_minor,
        currency: "USD".into(),
        email: "ada@example.com".into(),
        locale: Some("fr-CA".into()),
        jurisdiction: Some("US-CA".into()),
        plan_name: Some("Coffee Box".into()),
        occasion: Occasion::Renewal,
        term: Term::parse("month", 1),
        trial_days: None,
        started_at: None,
    }
}

fn cancellation() -> BillingFact {
    BillingFact::Cancellation(Cancellation {
        subscription_id: "sub_8812".into(),
        period_start_at: at("2026-10-01T07:00:00Z"),
        reason: "stripe customer.subscription.deleted".into(),
        term: Term::parse("month", 1),
        started_at: None,
    })
}

/// The row the sender leaves when it claimed (and sent) `job`.
fn sent_row(p: &IntakePlanner, job: &Job) -> LedgerRow {
    let key = p.keys().key(&job.identity);
    ClaimRequest::for_job(job, key, Utc::now()).to_row(RowState::Sent, None)
}

async fn plan(p: &IntakePlanner, fact: &BillingFact, ledger: &dyn RowReader) -> Vec<IntakeDecision> {
    p.plan("invoice.upcoming", fact, ledger).await.unwrap()
}

fn sends(decisions: &[IntakeDecision]) -> Vec<(u64, i64)> {
    decisions
        .iter()
        .filter_map(|d| match d {
            IntakeDecision::Send(job) => {
                Some((job.identity.revision(), job.template_data["amount"]["minor"].as_i64().unwrap()))
            }
            _ => None,
        })
        .collect()
}

fn withdraws(decisions: &[IntakeDecision]) -> Vec<u64> {
    decisions
        .iter()
        .filter_map(|d| match d {
            IntakeDecision::Withdraw(w) => Some(w.identity.revision()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_period_is_the_date_in_the_billing_zone_and_the_job_carries_the_facts() {
    let p = planner();
    assert_eq!(p.period_start(at("2026-10-01T06:30:00Z")).unwrap(), "2026-09-30");
    assert_eq!(p.period_start(at("2026-10-01T07:00:00Z")).unwrap(), "2026-10-01");
    let job = p.job("invoice.upcoming", K, &renewal(2900), 0).unwrap();
    let body = job.to_value();
    assert_eq!(body["period_start"], "2026-10-01");
    assert_eq!(body["kind"], "renewal_notice_t72");
    assert_eq!(body["charge_at"], "2026-10-01T08:00:00+00:00");
    assert_eq!(body["locale"], "fr-CA");
    assert_eq!(body["jurisdiction"], "US-CA");
    assert_eq!(body["template_data"]["amount"], serde_json::json!({"minor": 2900, "currency": "USD"}));
    assert_eq!(body["template_data"]["plan_name"], "Coffee Box");
    // The same facts, the same body: a redelivery is the same message.
    assert_eq!(p.job("invoice.upcoming", K, &renewal(2900), 0).unwrap().to_value(), body);
}

#[test]
fn what_the_job_contract_refuses_is_refused_naming_the_field_and_odd_extras_are_left_out() {
    let p = planner();
    let mut bad_email = renewal(2900);
    bad_email.email = "not-an-address".into();
    assert_eq!(p.job("invoice.upcoming", K, &bad_email, 0).unwrap_err().field, "email");
    let mut bad_currency = renewal(2900);
    bad_currency.currency = "XYZ".into();
    let e = p.job("invoice.upcoming", K, &bad_currency, 0).unwrap_err();
    assert_eq!(e.field, "amount");
    assert!(e.to_string().starts_with("invoice.upcoming: field `amount`"), "{e}");
    let mut pipe = renewal(2900);
    pipe.subscription_id = "sub|1".into();
    assert_eq!(p.job("invoice.upcoming", K, &pipe, 0).unwrap_err().field, "subscription_id");
    let mut odd = renewal(2900);
    odd.locale = Some("not a locale".into());
    odd.jurisdiction = Some("California".into());
    let body = p.job("invoice.upcoming", K, &odd, 0).unwrap().to_value();
    assert!(body.get("locale").is_none() && body.get("jurisdiction").is_none(), "{body}");
}

#[tokio::test]
async fn one_notice_per_distinct_amount_whatever_the_order_of_redeliveries() {
    let p = planner();
    let ledger = MemoryLedger::new();
    let (a, b, c) = (
        BillingFact::Renewal(renewal(2900)),
        BillingFact::Renewal(renewal(3900)),
        BillingFact::Renewal(renewal(4900)),
    );

    // First announcement: revision 0. Redelivered before the sender ran: still revision 0.
    assert_eq!(sends(&plan(&p, &a, &ledger).await), vec![(0, 2900)]);
    assert_eq!(sends(&plan(&p, &a, &ledger).await), vec![(0, 2900)]);
    let Some(IntakeDecision::Send(first)) = plan(&p, &a, &ledger).await.pop() else { panic!("a send") };
    ledger.insert(sent_row(&p, &first));

    // Redelivered after the notice went out: revision 0 again (the ledger suppresses it).
    assert_eq!(sends(&plan(&p, &a, &ledger).await), vec![(0, 2900)]);
    // A new amount: one corrected notice, revision 1 — as often as it is delivered.
    assert_eq!(sends(&plan(&p, &b, &ledger).await), vec![(1, 3900)]);
    assert_eq!(sends(&plan(&p, &b, &ledger).await), vec![(1, 3900)]);
    let Some(IntakeDecision::Send(second)) = plan(&p, &b, &ledger).await.pop() else { panic!("a send") };
    ledger.insert(sent_row(&p, &second));
    assert_eq!(sends(&plan(&p, &b, &ledger).await), vec![(1, 3900)]);
    // The old amount, delivered late (out of order): its own revision, never a third notice.
    assert_eq!(sends(&plan(&p, &a, &ledger).await), vec![(0, 2900)]);
    // A third amount: revision 2.
    assert_eq!(sends(&plan(&p, &c, &ledger).await), vec![(2, 4900)]);
    assert!(plan(&p, &c, &ledger).await.iter().all(|d| !matches!(d, IntakeDecision::Withdraw(_))));
}

#[tokio::test]
async fn a_withdrawn_period_stays_withdrawn_and_a_cancellation_guards_what_may_be_queued() {
    let p = planner();
    let ledger = MemoryLedger::new();
    // Cancellation first (out of order): withdraw revision 0, where the job will be keyed.
    let decisions = plan(&p, &cancellation(), &ledger).await;
    assert_eq!(withdraws(&decisions), vec![0]);
    let IntakeDecision::Withdraw(w) = &decisions[0] else { panic!("a withdraw") };
    assert_eq!(w.reason.as_deref(), Some("stripe customer.subscription.deleted"));
    let key = p.keys().key(&w.identity);
    ledger.insert(WithdrawRequest::new(w, key, Origin::Worker, "sender", Utc::now()).to_row());
    // The renewal event arrives after it: nothing is minted, whatever the amount.
    for amount in [2900, 3900] {
        let decisions = plan(&p, &BillingFact::Renewal(renewal(amount)), &ledger).await;
        assert!(
            matches!(decisions.as_slice(), [IntakeDecision::Ignore { reason }] if reason.contains("withdrawn"))
        );
    }
    // The cancellation again: already withdrawn.
    assert!(matches!(plan(&p, &cancellation(), &ledger).await.as_slice(), [IntakeDecision::Ignore { .. }]));

    // A period whose notice went out: the cancellation guards the next revision (a corrected
    // notice that may be queued), never the sent one.
    let ledger = MemoryLedger::new();
    let first = p.job("invoice.upcoming", K, &renewal(2900), 0).unwrap();
    ledger.insert(sent_row(&p, &first));
    assert_eq!(withdraws(&plan(&p, &cancellation(), &ledger).await), vec![1]);
}

#[tokio::test]
async fn a_released_older_revision_is_withdrawn_when_the_terms_change() {
    let p = planner();
    let ledger = MemoryLedger::new();
    let first = p.job("invoice.upcoming", K, &renewal(2900), 0).unwrap();
    ledger.insert(sent_row(&p, &first).tap_state(RowState::Released));
    let decisions = plan(&p, &BillingFact::Renewal(renewal(3900)), &ledger).await;
    assert_eq!(withdraws(&decisions), vec![0]);
    assert_eq!(sends(&decisions), vec![(1, 3900)]);
    // The withdraw comes first: the old terms are stopped before the new ones are announced.
    assert!(matches!(decisions[0], IntakeDecision::Withdraw(_)));
    // A cancellation withdraws the released one and the next.
    assert_eq!(withdraws(&plan(&p, &cancellation(), &ledger).await), vec![0, 1]);
}

#[tokio::test]
async fn rows_under_an_older_secret_version_count_and_aliases_do_not() {
    let ring = KeyRing::from_stored(&format!(r#"{{"current":"v2","versions":{{"v1":"{S1}","v2":"{S2}"}}}}"#))
        .unwrap();
    let p = planner_with(ring.clone());
    let ledger = MemoryLedger::new();
    let first = p.job("invoice.upcoming", K, &renewal(2900), 0).unwrap();
    // Revision 0 lives under v1 (claimed before the rotation).
    let old_key = ring.older_keys(&first.identity).remove(0);
    ledger.insert(ClaimRequest::for_job(&first, old_key, Utc::now()).to_row(RowState::Sent, None));
    assert_eq!(sends(&plan(&p, &BillingFact::Renewal(renewal(2900)), &ledger).await), vec![(0, 2900)]);
    assert_eq!(sends(&plan(&p, &BillingFact::Renewal(renewal(3900)), &ledger).await), vec![(1, 3900)]);

    // Revision 1 under v2 with an alias at its v1 key: the alias is no second notice.
    let second = p.job("invoice.upcoming", K, &renewal(3900), 1).unwrap();
    let row = sent_row(&p, &second);
    let alias_key = ring.older_keys(&second.identity).remove(0);
    ledger.insert(LedgerRow::alias_at(&alias_key, &row));
    ledger.insert(row);
    assert_eq!(sends(&plan(&p, &BillingFact::Renewal(renewal(3900)), &ledger).await), vec![(1, 3900)]);
    assert_eq!(sends(&plan(&p, &BillingFact::Renewal(renewal(4900)), &ledger).await), vec![(2, 4900)]);
}

#[tokio::test]
async fn the_scan_reads_past_a_page_and_stops_at_the_cap() {
    let p = planner();
    let ledger = MemoryLedger::new();
    for revision in 0..11 {
        let job = p
            .job("invoice.upcoming", K, &renewal(1000 + i64::try_from(revision).unwrap()), revision)
            .unwrap();
        ledger.insert(sent_row(&p, &job));
    }
    assert_eq!(sends(&plan(&p, &BillingFact::Renewal(renewal(1003)), &ledger).await), vec![(3, 1003)]);
    assert_eq!(sends(&plan(&p, &BillingFact::Renewal(renewal(9999)), &ledger).await), vec![(11, 9999)]);

    for revision in 11..MAX_REVISIONS {
        let job = p
            .job("invoice.upcoming", K, &renewal(1000 + i64::try_from(revision).unwrap()), revision)
            .unwrap();
        ledger.insert(sent_row(&p, &job));
    }
    let e = p.plan("invoice.upcoming", &BillingFact::Renewal(renewal(9999)), &ledger).await.unwrap_err();
    assert!(matches!(&e, PlanError::Refused(r) if r.field == "revision"), "{e}");
}

struct Unreachable;

#[async_trait]
impl RowReader for Unreachable {
    async fn get(&self, _key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        Err(LedgerError::unavailable("connection reset"))
    }
}

#[tokio::test]
async fn an_unreadable_ledger_decides_nothing() {
    let p = planner();
    for fact in [BillingFact::Renewal(renewal(2900)), cancellation()] {
        let e = p.plan("invoice.upcoming", &fact, &Unreachable).await.unwrap_err();
        assert!(matches!(e, PlanError::Ledger(_)), "{e}");
    }
    // An unhandled event never reads the ledger.
    let ignored =
        BillingFact::Unhandled { event_type: "charge.succeeded".into(), reason: "not mapped".into() };
    assert!(matches!(
        p.plan("charge.succeeded", &ignored, &Unreachable).await.unwrap().as_slice(),
        [IntakeDecision::Ignore { .. }]
    ));
}

#[test]
fn the_rule_needs_the_gap_before_it_decides() {
    let row = |revision: u64, state: RowState, digest: Option<&str>| {
        let job = planner().job("x", K, &renewal(1), revision).unwrap();
        let mut r = sent_row(&planner(), &job);
        r.state = state;
        r.content_digest = digest.map(str::to_owned);
        r
    };
    let full = vec![RevisionRows { revision: 0, rows: vec![row(0, RowState::Sent, Some("a"))] }];
    assert_eq!(revision::choose(&full, "a"), None, "no gap read yet: undecided");
    assert_eq!(revision::withdraw(&full), None);
    let mut with_gap = full.clone();
    with_gap.push(RevisionRows { revision: 1, rows: vec![] });
    assert_eq!(revision::choose(&with_gap, "a"), Some(RevisionChoice::Reuse(0)));
    assert_eq!(
        revision::choose(&with_gap, "b"),
        Some(RevisionChoice::Mint { revision: 1, superseded: vec![] })
    );
    assert_eq!(revision::withdraw(&with_gap), Some(WithdrawChoice::Withdraw(vec![1])));
    let withdrawn = vec![
        RevisionRows { revision: 0, rows: vec![row(0, RowState::Withdrawn, None)] },
        RevisionRows { revision: 1, rows: vec![] },
    ];
    assert_eq!(revision::choose(&withdrawn, "a"), Some(RevisionChoice::Withdrawn(0)));
    assert_eq!(revision::withdraw(&withdrawn), Some(WithdrawChoice::AlreadyWithdrawn(0)));
    // Missed and rejected rows keep their content: the same content is reused (and suppressed).
    let missed = vec![
        RevisionRows { revision: 0, rows: vec![row(0, RowState::Missed, Some("a"))] },
        RevisionRows { revision: 1, rows: vec![] },
    ];
    assert_eq!(revision::choose(&missed, "a"), Some(RevisionChoice::Reuse(0)));
}

trait TapState {
    fn tap_state(self, state: RowState) -> Self;
}

impl TapState for LedgerRow {
    fn tap_state(mut self, state: RowState) -> Self {
        self.state = state;
        self
    }
}

#[test]
fn decisions_say_what_they_enqueue() {
    let p = planner();
    let job = p.job("invoice.upcoming", K, &renewal(2900), 0).unwrap();
    let send = IntakeDecision::Send(job.clone());
    assert_eq!(send.action(), "send");
    assert_eq!(send.message(), Some(job.to_value()));
    let ignore = IntakeDecision::Ignore { reason: "x".into() };
    assert_eq!((ignore.action(), ignore.message()), ("ignore", None));
}

/// California's annual-term rule and its shorter-term rule, Colorado's anniversary reminder, and a
/// default reminder.
const OBLIGED: &str = r#"{
  "kinds": {
    "renewal_notice_t72": { "opens_hours_before": 72, "closes_hours_before": 24 },
    "annual_renewal": { "opens_hours_before": 1080, "closes_hours_before": 360 },
    "anniversary_reminder": { "opens_hours_before": 960, "closes_hours_before": 600 }
  },
  "obligations": {
    "default": [ { "rule": "reminder", "on": "renewal", "kind": "renewal_notice_t72" } ],
    "jurisdictions": {
      "US-CA": [
        { "rule": "ca-annual", "on": "renewal", "term_months_at_least": 12, "kind": "annual_renewal" },
        { "rule": "ca-shorter", "on": "renewal", "term_months_below": 12, "kind": "renewal_notice_t72" }
      ],
      "US-CO": [
        { "rule": "co-reminder", "on": "renewal", "kind": "renewal_notice_t72" },
        { "rule": "co-anniversary", "on": "renewal", "anniversary_months": 12, "kind": "anniversary_reminder" }
      ]
    }
  }
}"#;

fn obliged() -> IntakePlanner {
    let policy = notice_ledger::policy::WindowPolicy::from_json(OBLIGED).unwrap();
    IntakePlanner::with_kinds(
        Kinds::from_policy(&policy, None).unwrap(),
        TimeZone::parse("America/Los_Angeles").unwrap(),
        KeyRing::from(NoticeSecret::new(S1).unwrap()),
        std::sync::Arc::new(notice_texts::Icu),
    )
}

fn kinds_sent(decisions: &[IntakeDecision]) -> Vec<String> {
    decisions
        .iter()
        .filter_map(|d| match d {
            IntakeDecision::Send(job) => Some(job.identity.kind().as_str().to_owned()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_obligations_choose_each_contracts_kind() {
    let p = obliged();
    let ledger = MemoryLedger::new();
    let annual = Renewal { term: Term::parse("year", 1), ..renewal(29900) };
    let decisions = plan(&p, &BillingFact::Renewal(annual), &ledger).await;
    assert_eq!(kinds_sent(&decisions), ["annual_renewal"]);
    // The job names the rule that owes it, for the claim row and `noticectl evidence`.
    let IntakeDecision::Send(job) = &decisions[0] else { panic!("a send") };
    assert_eq!(job.obligation.as_deref(), Some("US-CA/ca-annual"));
    assert_eq!(job.to_value()["obligation"], "US-CA/ca-annual");
    let monthly = renewal(2900);
    assert_eq!(kinds_sent(&plan(&p, &BillingFact::Renewal(monthly), &ledger).await), ["renewal_notice_t72"]);
    let texan =
        Renewal { jurisdiction: Some("US-TX".into()), term: Term::parse("year", 1), ..renewal(29900) };
    assert_eq!(kinds_sent(&plan(&p, &BillingFact::Renewal(texan), &ledger).await), ["renewal_notice_t72"]);
    // Colorado, monthly, at the charge before the first anniversary: the reminder before that
    // charge and, planned a renewal ahead, the anniversary reminder of the next one (see below).
    let colorado = Renewal {
        jurisdiction: Some("US-CO".into()),
        started_at: Some(at("2025-10-01T07:00:00Z")),
        period_start_at: at("2026-09-01T07:00:00Z"),
        charge_at: at("2026-09-01T08:00:00Z"),
        ..renewal(2900)
    };
    let decisions = plan(&p, &BillingFact::Renewal(colorado), &ledger).await;
    assert_eq!(kinds_sent(&decisions), ["renewal_notice_t72", "anniversary_reminder"]);
}

/// A Colorado subscription that began on 1 October 2025 (Los Angeles), monthly unless stated.
fn colorado(period: &str, term: &str) -> Renewal {
    let period_start_at = at(period);
    Renewal {
        jurisdiction: Some("US-CO".into()),
        started_at: Some(at("2025-10-01T07:00:00Z")),
        period_start_at,
        charge_at: period_start_at + chrono::Duration::hours(1),
        term: Term::parse(term, 1),
        ..renewal(2900)
    }
}

/// (kind, period_start, charge_at, obligation) of each job planned.
fn planned(decisions: &[IntakeDecision]) -> Vec<(String, String, String, String)> {
    decisions
        .iter()
        .filter_map(|d| match d {
            IntakeDecision::Send(job) => Some((
                job.identity.kind().as_str().to_owned(),
                job.identity.period_start().to_string(),
                job.charge_at.to_rfc3339(),
                job.obligation.clone().unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

/// Colorado's 12-month reminder is owed 25–40 days before the renewal that crosses the
/// anniversary; Stripe's upcoming-invoice event for *that* charge comes days before it — too late
/// for a monthly plan. So the event of the charge before plans it (the sender parks it until its
/// window opens), each redelivery plans the same body, and the anniversary charge's own event
/// plans only its ordinary reminder.
#[tokio::test]
async fn an_anniversary_reminder_is_planned_from_the_renewal_before_it() {
    let p = obliged();
    let ledger = MemoryLedger::new();
    let september = plan(&p, &BillingFact::Renewal(colorado("2026-09-01T07:00:00Z", "month")), &ledger).await;
    let rows = planned(&september);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].0, "renewal_notice_t72");
    assert_eq!(rows[0].3, "US-CO/co-reminder");
    assert_eq!(
        rows[1],
        (
            "anniversary_reminder".to_owned(),
            "2026-10-01".to_owned(),
            "2026-10-01T08:00:00+00:00".to_owned(),
            "US-CO/co-anniversary".to_owned()
        ),
        "the next renewal's reminder, with the amount in force now"
    );
    let IntakeDecision::Send(reminder) = &september[1] else { panic!("a send") };
    assert_eq!(reminder.template_data["amount"]["minor"], 2900);
    let again = plan(&p, &BillingFact::Renewal(colorado("2026-09-01T07:00:00Z", "month")), &ledger).await;
    assert_eq!(again, september, "a redelivery plans the very same bodies");

    // The anniversary charge's own event: its reminder was planned already; the next charge
    // crosses no anniversary.
    let october = plan(&p, &BillingFact::Renewal(colorado("2026-10-01T07:00:00Z", "month")), &ledger).await;
    assert_eq!(kinds_sent(&october), ["renewal_notice_t72"]);
    let august = plan(&p, &BillingFact::Renewal(colorado("2026-08-01T07:00:00Z", "month")), &ledger).await;
    assert_eq!(kinds_sent(&august), ["renewal_notice_t72"]);
    // A year on, the same again.
    let next_year = plan(&p, &BillingFact::Renewal(colorado("2027-09-01T07:00:00Z", "month")), &ledger).await;
    assert_eq!(planned(&next_year)[1].1, "2027-10-01");
}

/// An annual plan's first renewal is its first anniversary, and no charge came before it whose
/// event could have planned the reminder: its own event plans it (in time when the upcoming-renewal
/// event comes 45 days ahead) — and, a renewal ahead, the next year's.
#[tokio::test]
async fn an_annual_plans_first_anniversary_is_planned_from_its_own_event_and_the_next_ahead() {
    let p = obliged();
    let ledger = MemoryLedger::new();
    let first = plan(&p, &BillingFact::Renewal(colorado("2026-10-01T07:00:00Z", "year")), &ledger).await;
    let rows: Vec<(String, String)> = planned(&first).into_iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(
        rows,
        [
            ("renewal_notice_t72".to_owned(), "2026-10-01".to_owned()),
            ("anniversary_reminder".to_owned(), "2026-10-01".to_owned()),
            ("anniversary_reminder".to_owned(), "2027-10-01".to_owned()),
        ]
    );
    let second = plan(&p, &BillingFact::Renewal(colorado("2027-10-01T07:00:00Z", "year")), &ledger).await;
    let rows: Vec<(String, String)> = planned(&second).into_iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(
        rows,
        [
            ("renewal_notice_t72".to_owned(), "2027-10-01".to_owned()),
            ("anniversary_reminder".to_owned(), "2028-10-01".to_owned()),
        ],
        "the second anniversary's reminder was planned by the first renewal's event"
    );
}

/// Subscription records by id, counting lookups; `sub_down` unreachable, others not found.
#[derive(Default)]
struct Subscriptions {
    known: std::collections::HashMap<String, Subscription>,
    lookups: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl SubscriptionSource for Subscriptions {
    async fn subscription(&self, id: &str) -> Result<Subscription, LookupError> {
        self.lookups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if id == "sub_down" {
            return Err(LookupError::Failed {
                service: "Stripe API",
                fault: notice_ledger::error::Fault::Unreachable("no connection"),
                detail: "connection refused".into(),
            });
        }
        self.known.get(id).cloned().ok_or_else(|| LookupError::NotFound {
            id: id.to_owned(),
            reason: "Stripe has no such object".into(),
        })
    }
}

/// The event does not state when the subscription began (Stripe's upcoming invoice never does):
/// it is read from the subscription record — only where an anniversary rule could speak — and
/// an unreadable record decides nothing (retried), an unknown one is refused naming it.
#[tokio::test]
async fn the_start_is_read_from_the_subscription_record_only_where_an_anniversary_rule_speaks() {
    let mut known = std::collections::HashMap::new();
    let record = Subscription {
        started_at: Some(at("2025-10-01T07:00:00Z")),
        term: Term::parse("month", 1),
        ..Subscription::default()
    };
    known.insert("sub_8812".to_owned(), record);
    let source = Arc::new(Subscriptions { known, ..Default::default() });
    let p = obliged().with_subscriptions(source.clone());
    assert!(p.counts_anniversaries());
    let ledger = MemoryLedger::new();
    let unstated = Renewal { started_at: None, ..colorado("2026-09-01T07:00:00Z", "month") };
    let decisions = plan(&p, &BillingFact::Renewal(unstated.clone()), &ledger).await;
    assert_eq!(kinds_sent(&decisions), ["renewal_notice_t72", "anniversary_reminder"]);
    assert_eq!(source.lookups.load(std::sync::atomic::Ordering::Relaxed), 1);
    // California speaks of no anniversary: nothing looked up.
    plan(&p, &BillingFact::Renewal(renewal(2900)), &ledger).await;
    assert_eq!(source.lookups.load(std::sync::atomic::Ordering::Relaxed), 1);

    let down = Renewal { subscription_id: "sub_down".into(), ..unstated.clone() };
    let err = p.plan("invoice.upcoming", &BillingFact::Renewal(down), &ledger).await.unwrap_err();
    assert!(matches!(err, PlanError::Lookup(LookupError::Failed { .. })), "{err:?}");
    let gone = Renewal { subscription_id: "sub_gone".into(), ..unstated.clone() };
    let err = p.plan("invoice.upcoming", &BillingFact::Renewal(gone), &ledger).await.unwrap_err();
    let PlanError::Refused(refused) = err else { panic!("refused expected") };
    assert_eq!(refused.field, "subscription");

    // No subscription source: refused, naming the fact — never a guessed start.
    let err = obliged().plan("invoice.upcoming", &BillingFact::Renewal(unstated), &ledger).await.unwrap_err();
    let PlanError::Refused(refused) = err else { panic!("refused expected") };
    assert!(refused.reason.contains("co-anniversary") && refused.reason.contains("start"), "{refused}");
}

#[tokio::test]
async fn a_contract_the_obligations_cannot_place_is_refused_with_its_facts() {
    let p = obliged();
    let ledger = MemoryLedger::new();
    let unstated = Renewal { term: None, ..renewal(2900) };
    let err = p.plan("invoice.upcoming", &BillingFact::Renewal(unstated), &ledger).await.unwrap_err();
    let PlanError::Refused(refused) = err else { panic!("refused expected") };
    assert_eq!(refused.field, "obligations");
    assert!(refused.reason.contains("rule `ca-annual` needs the term"), "{}", refused.reason);
    assert!(refused.reason.contains("a renewal in US-CA, term not stated"), "{}", refused.reason);
}

#[tokio::test]
async fn a_cancellation_withdraws_every_kind_the_obligations_can_owe() {
    let p = obliged();
    let ledger = MemoryLedger::new();
    let decisions = plan(&p, &cancellation(), &ledger).await;
    let kinds: Vec<&str> = decisions
        .iter()
        .filter_map(|d| match d {
            IntakeDecision::Withdraw(w) => Some(w.identity.kind().as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        ["anniversary_reminder", "annual_renewal", "renewal_notice_t72", "anniversary_reminder"]
    );
    // The last: the anniversary reminder planned a renewal ahead, one term after the period.
    let IntakeDecision::Withdraw(ahead) = &decisions[3] else { panic!("a withdraw") };
    assert_eq!(ahead.identity.period_start().to_string(), "2026-11-01");
    // Delivered again: every tombstone is found, nothing more is withdrawn.
    deliver(&p, &ledger, &decisions);
    let again = plan(&p, &cancellation(), &ledger).await;
    assert!(again.iter().all(|d| matches!(d, IntakeDecision::Ignore { .. })), "{again:?}");
    // Without the term (and no record to read it from), the reminder ahead cannot be found: refused.
    let BillingFact::Cancellation(c) = cancellation() else { unreachable!() };
    let untermed = BillingFact::Cancellation(Cancellation { term: None, ..c });
    let err = p.plan("customer.subscription.deleted", &untermed, &MemoryLedger::new()).await.unwrap_err();
    let PlanError::Refused(refused) = err else { panic!("refused expected") };
    assert_eq!(refused.field, "term");
}

#[test]
fn obligations_and_a_stated_kind_exclude_each_other() {
    let obliged = notice_ledger::policy::WindowPolicy::from_json(OBLIGED).unwrap();
    let stated = Some(Kind::parse(K).unwrap());
    let err = Kinds::from_policy(&obliged, stated.clone()).unwrap_err().to_string();
    assert!(err.contains("NOTICE_INTAKE_KIND") && err.contains("obligations"), "{err}");
    let plain = notice_ledger::policy::WindowPolicy::default();
    assert!(matches!(Kinds::from_policy(&plain, stated), Ok(Kinds::Stated(_))));
    let err = Kinds::from_policy(&plain, None).unwrap_err().to_string();
    assert!(err.contains("NOTICE_INTAKE_KIND"), "{err}");
}

// --- Price changes -------------------------------------------------------------------------

/// California's price-change rule; a renewal reminder everywhere.
const PRICED: &str = r#"{
  "kinds": {
    "renewal_notice_t72": { "opens_hours_before": 72, "closes_hours_before": 24 },
    "price_change": { "opens_hours_before": 720, "closes_hours_before": 168 }
  },
  "obligations": {
    "default": [ { "rule": "reminder", "on": "renewal", "kind": "renewal_notice_t72" } ],
    "jurisdictions": {
      "US-CA": [
        { "rule": "ca-reminder", "on": "renewal", "kind": "renewal_notice_t72" },
        { "rule": "ca-price-change", "on": "price_change", "kind": "price_change" }
      ]
    }
  }
}"#;

/// Customers by id, counting lookups; an id not in the map is `NotFound`, `cus_down` unreachable.
#[derive(Default)]
struct Customers {
    known: std::collections::HashMap<String, Customer>,
    lookups: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl CustomerSource for Customers {
    async fn customer(&self, id: &str) -> Result<Customer, LookupError> {
        self.lookups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if id == "cus_down" {
            return Err(LookupError::Failed {
                service: "Stripe",
                fault: notice_ledger::Fault::TimedOut,
                detail: "no answer within 5 s".into(),
            });
        }
        self.known
            .get(id)
            .cloned()
            .ok_or_else(|| LookupError::NotFound { id: id.into(), reason: "deleted".into() })
    }
}

fn ada(jurisdiction: &str) -> Customer {
    Customer {
        email: Some("ada@example.com".into()),
        locale: Some("en-US".into()),
        jurisdiction: Some(jurisdiction.into()),
    }
}

fn priced_with(customers: Arc<Customers>) -> IntakePlanner {
    let policy = notice_ledger::policy::WindowPolicy::from_json(PRICED).unwrap();
    IntakePlanner::with_kinds(
        Kinds::from_policy(&policy, None).unwrap(),
        TimeZone::parse("America/Los_Angeles").unwrap(),
        KeyRing::from(NoticeSecret::new(S1).unwrap()),
        std::sync::Arc::new(notice_texts::Icu),
    )
    .with_customers(customers)
}

fn customers(pairs: &[(&str, Customer)]) -> Arc<Customers> {
    Arc::new(Customers {
        known: pairs.iter().map(|(id, c)| ((*id).to_owned(), c.clone())).collect(),
        ..Customers::default()
    })
}

fn price_change(previous_minor: i64, amount_minor: i64) -> PriceChange {
    PriceChange {
        subscription_id: "sub_8812".into(),
        customer_id: "cus_ada".into(),
        period_start_at: at("2026-10-01T07:00:00Z"),
        charge_at: at("2026-10-01T07:00:00Z"),
        previous_minor,
        amount_minor,
        currency: "USD".into(),
        plan_name: Some("Coffee Box".into()),
        term: Term::parse("month", 1),
        in_force_minor: None,
    }
}

async fn plan_price(p: &IntakePlanner, change: &PriceChange, ledger: &dyn RowReader) -> Vec<IntakeDecision> {
    p.plan("customer.subscription.updated", &BillingFact::PriceChange(change.clone()), ledger).await.unwrap()
}

/// What the sender leaves after it took each message of `decisions`: a tombstone for a withdraw,
/// a `sent` row for a send.
fn deliver(p: &IntakePlanner, ledger: &MemoryLedger, decisions: &[IntakeDecision]) {
    for d in decisions {
        match d {
            IntakeDecision::Withdraw(w) => {
                let key = p.keys().key(&w.identity);
                ledger.insert(WithdrawRequest::new(w, key, Origin::Worker, "sender", Utc::now()).to_row());
            }
            IntakeDecision::Send(job) => ledger.insert(sent_row(p, job)),
            IntakeDecision::Ignore { .. } => {}
        }
    }
}

#[tokio::test]
async fn a_price_change_is_one_notice_with_the_customers_facts_and_a_redelivery_is_the_same_body() {
    let source = customers(&[("cus_ada", ada("US-CA"))]);
    let p = priced_with(source.clone());
    let ledger = MemoryLedger::new();
    let first = plan_price(&p, &price_change(2900, 3900), &ledger).await;
    // The revision a pending notice would sit at is guarded; the new amount is one past it.
    assert_eq!(withdraws(&first), vec![0]);
    assert_eq!(sends(&first), vec![(1, 3900)]);
    let IntakeDecision::Send(job) = &first[1] else { panic!("a send") };
    let body = job.to_value();
    assert_eq!(body["kind"], "price_change");
    assert_eq!(body["email"], "ada@example.com");
    assert_eq!(body["locale"], "en-US");
    assert_eq!(body["jurisdiction"], "US-CA");
    assert_eq!(body["period_start"], "2026-10-01");
    assert_eq!(body["charge_at"], "2026-10-01T07:00:00+00:00");
    assert_eq!(body["obligation"], "US-CA/ca-price-change");
    // Redelivered before the sender ran: the very same messages.
    assert_eq!(plan_price(&p, &price_change(2900, 3900), &ledger).await, first);
    // The sender took them and sent: a redelivery (and the same amount reached from another old
    // one, delivered late) is that notice again, suppressed by the ledger as a copy.
    deliver(&p, &ledger, &first);
    assert_eq!(plan_price(&p, &price_change(2900, 3900), &ledger).await, vec![first[1].clone()]);
    assert_eq!(plan_price(&p, &price_change(3400, 3900), &ledger).await, vec![first[1].clone()]);
    assert!(source.lookups.load(std::sync::atomic::Ordering::Relaxed) >= 4, "looked up, not guessed");
}

#[tokio::test]
async fn two_different_new_amounts_are_two_revisions_and_the_older_is_withdrawn_if_still_pending() {
    let p = priced_with(customers(&[("cus_ada", ada("US-CA"))]));
    let ledger = MemoryLedger::new();
    let b = plan_price(&p, &price_change(2900, 3900), &ledger).await;
    deliver(&p, &ledger, &b[..1]); // the tombstone lands; the notice for 39.00 waits (parked)
    let c = plan_price(&p, &price_change(3900, 4900), &ledger).await;
    // 39.00 is still pending at revision 1: withdrawn there; 49.00 one past it.
    assert_eq!(withdraws(&c), vec![1]);
    assert_eq!(sends(&c), vec![(2, 4900)]);
    deliver(&p, &ledger, &c);
    // The notice for 39.00 went out after all (claimed before its withdraw): a third amount is
    // still its own revision.
    let ledger = MemoryLedger::new();
    deliver(&p, &ledger, &b);
    let c = plan_price(&p, &price_change(3900, 4900), &ledger).await;
    assert_eq!(withdraws(&c), vec![2]);
    assert_eq!(sends(&c), vec![(3, 4900)]);
}

/// Stripe redelivers a change after the intake's withdraw landed but before the new notice
/// (parked for weeks) was claimed: the same body at the same revision, never a second withdraw and
/// mint — the second mint would be sent beside the first whenever the withdraw of the first came
/// too late.
#[tokio::test]
async fn a_redelivery_after_the_tombstone_landed_is_the_same_notice_not_a_second_one() {
    let p = priced_with(customers(&[("cus_ada", ada("US-CA"))]));
    let ledger = MemoryLedger::new();
    let first = plan_price(&p, &price_change(2900, 3900), &ledger).await;
    deliver(&p, &ledger, &first[..1]); // the tombstone at 0 lands; 39.00 waits at 1
    let again = plan_price(&p, &price_change(2900, 3900), &ledger).await;
    assert_eq!(again, vec![first[1].clone()], "the waiting notice's own body, nothing withdrawn");
    // Another amount is still a change: 39.00 withdrawn at 1, 49.00 at 2; and its redelivery
    // after that tombstone is again the same body.
    let other = plan_price(&p, &price_change(3900, 4900), &ledger).await;
    assert_eq!((withdraws(&other), sends(&other)), (vec![1], vec![(2, 4900)]));
    deliver(&p, &ledger, &other[..1]);
    assert_eq!(plan_price(&p, &price_change(3900, 4900), &ledger).await, vec![other[1].clone()]);
}

#[tokio::test]
async fn a_change_back_before_anything_was_told_withdraws_and_after_is_announced() {
    let p = priced_with(customers(&[("cus_ada", ada("US-CA"))]));
    let ledger = MemoryLedger::new();
    let b = plan_price(&p, &price_change(2900, 3900), &ledger).await;
    deliver(&p, &ledger, &b[..1]);
    // Back to 29.00, the amount in force, while 39.00 waits: withdrawn, nothing announced.
    let back = PriceChange { in_force_minor: Some(2900), ..price_change(3900, 2900) };
    let decisions = plan_price(&p, &back, &ledger).await;
    assert_eq!(withdraws(&decisions), vec![1, 2]);
    assert!(sends(&decisions).is_empty(), "{decisions:?}");
    let IntakeDecision::Withdraw(w) = &decisions[0] else { panic!("a withdraw") };
    assert!(w.reason.as_deref().unwrap_or("").contains("went back"));
    // The same change back after 39.00 was sent: nothing can be undone, 29.00 is announced.
    let ledger = MemoryLedger::new();
    deliver(&p, &ledger, &b);
    let decisions = plan_price(&p, &back, &ledger).await;
    assert_eq!(sends(&decisions), vec![(3, 2900)]);
    // A change back whose amount in force is not stated, by the event or the subscription
    // record, is announced like any change.
    let ledger = MemoryLedger::new();
    deliver(&p, &ledger, &b[..1]);
    assert_eq!(sends(&plan_price(&p, &price_change(3900, 2900), &ledger).await), vec![(2, 2900)]);
}

#[tokio::test]
async fn an_amount_restored_after_another_superseded_it_is_announced_again() {
    let p = priced_with(customers(&[("cus_ada", ada("US-CA"))]));
    let ledger = MemoryLedger::new();
    let b = plan_price(&p, &price_change(2900, 3900), &ledger).await;
    deliver(&p, &ledger, &b); // 39.00 sent at revision 1
    let c = plan_price(&p, &price_change(3900, 4900), &ledger).await;
    deliver(&p, &ledger, &c[..1]); // 49.00 pending at 3, revision 2 withdrawn
    let again = plan_price(&p, &price_change(4900, 3900), &ledger).await;
    // Not the sent revision 1 (that would leave 49.00 standing): 49.00 withdrawn, 39.00 anew.
    assert_eq!(withdraws(&again), vec![3]);
    assert_eq!(sends(&again), vec![(4, 3900)]);
}

#[tokio::test]
async fn a_price_change_without_a_rule_looks_nothing_up_and_a_lookup_failure_decides_nothing() {
    let source = customers(&[("cus_ada", ada("US-TX"))]);
    let ledger = MemoryLedger::new();
    // A stated kind (no obligations): price changes are not announced, nothing looked up.
    let stated = planner_with(KeyRing::from(NoticeSecret::new(S1).unwrap())).with_customers(source.clone());
    let d = plan_price(&stated, &price_change(2900, 3900), &ledger).await;
    assert!(matches!(d.as_slice(), [IntakeDecision::Ignore { reason }] if reason.contains("price_change")));
    assert_eq!(source.lookups.load(std::sync::atomic::Ordering::Relaxed), 0);
    // Texas has no price-change rule: looked up, then nothing owed.
    let p = priced_with(source.clone());
    let d = plan_price(&p, &price_change(2900, 3900), &ledger).await;
    assert!(matches!(d.as_slice(), [IntakeDecision::Ignore { reason }] if reason.contains("US-TX")), "{d:?}");
    // Unreachable billing system: an error to retry, never a notice without its facts.
    let down = PriceChange { customer_id: "cus_down".into(), ..price_change(2900, 3900) };
    let err = p.plan("customer.subscription.updated", &BillingFact::PriceChange(down), &ledger).await;
    assert!(matches!(
        err,
        Err(PlanError::Lookup(LookupError::Failed { fault: notice_ledger::Fault::TimedOut, .. }))
    ));
    // A deleted customer: refused, naming the field.
    let gone = PriceChange { customer_id: "cus_gone".into(), ..price_change(2900, 3900) };
    let err = p.plan("customer.subscription.updated", &BillingFact::PriceChange(gone), &ledger).await;
    assert!(matches!(err, Err(PlanError::Refused(ref r)) if r.field == "customer"), "{err:?}");
    // No e-mail on file: refused.
    let p = priced_with(customers(&[("cus_ada", Customer { email: None, ..ada("US-CA") })]));
    let err = p
        .plan("customer.subscription.updated", &BillingFact::PriceChange(price_change(2900, 3900)), &ledger)
        .await;
    assert!(matches!(err, Err(PlanError::Refused(ref r)) if r.field == "customer.email"), "{err:?}");
    // No customer source at all: an error, never a guess.
    let policy = notice_ledger::policy::WindowPolicy::from_json(PRICED).unwrap();
    let bare = IntakePlanner::with_kinds(
        Kinds::from_policy(&policy, None).unwrap(),
        TimeZone::parse("America/Los_Angeles").unwrap(),
        KeyRing::from(NoticeSecret::new(S1).unwrap()),
        std::sync::Arc::new(notice_texts::Icu),
    );
    assert!(bare.announces_price_changes());
    let err = bare
        .plan("customer.subscription.updated", &BillingFact::PriceChange(price_change(2900, 3900)), &ledger)
        .await;
    assert!(matches!(err, Err(PlanError::Lookup(LookupError::NotConfigured(_)))), "{err:?}");
}

/// The subscription record as Stripe would answer now: its price `now` and the amount the
/// current period was billed at.
fn stands_at(now: i64, in_force: i64) -> Arc<Subscriptions> {
    let usd = |minor| Some(notice_ledger::intake::Amount { minor, currency: "USD".into() });
    let record = Subscription { price: usd(now), in_force: usd(in_force), ..Subscription::default() };
    Arc::new(Subscriptions {
        known: [("sub_8812".to_owned(), record)].into_iter().collect(),
        ..Subscriptions::default()
    })
}

/// The planner with the customer and the subscription record as it stands.
fn priced_at(now: i64, in_force: i64) -> IntakePlanner {
    priced_with(customers(&[("cus_ada", ada("US-CA"))])).with_subscriptions(stands_at(now, in_force))
}

/// Issue 49, item 3: a change back (29.00 → 39.00, then back to 29.00, which the current period
/// was billed at) before anything was sent withdraws the pending notice and announces nothing —
/// whether the sender ran between the two events or not, whatever their order and however often
/// each is delivered.
#[tokio::test]
async fn a_change_back_to_the_amount_in_force_only_withdraws_in_any_order() {
    let (at_b, at_a) = (priced_at(3900, 2900), priced_at(2900, 2900));
    let back = price_change(3900, 2900);
    let only_withdraws = |d: &[IntakeDecision]| {
        assert!(sends(d).is_empty(), "nothing announced: {d:?}");
        withdraws(d)
    };

    // In order, the sender ran between them: 39.00 waits at 1 and is withdrawn (and the revision
    // past the gap, where it would sit had its tombstone not landed).
    let ledger = MemoryLedger::new();
    let b = plan_price(&at_b, &price_change(2900, 3900), &ledger).await;
    assert_eq!((withdraws(&b), sends(&b)), (vec![0], vec![(1, 3900)]));
    deliver(&at_b, &ledger, &b[..1]);
    let undo = plan_price(&at_a, &back, &ledger).await;
    assert_eq!(only_withdraws(&undo), vec![1, 2]);
    let IntakeDecision::Withdraw(w) = &undo[0] else { panic!("a withdraw") };
    let reason = w.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("went back from 3900 to 2900 USD, the amount in force"), "{reason}");
    // Redelivered before the tombstones landed: the same messages; after: nothing more.
    assert_eq!(plan_price(&at_a, &back, &ledger).await, undo);
    deliver(&at_a, &ledger, &undo);
    let again = plan_price(&at_a, &back, &ledger).await;
    assert!(matches!(again.as_slice(), [IntakeDecision::Ignore { reason }] if reason.contains("went back")));
    // The first change delivered again now: overtaken (the subscription is at 29.00), nothing.
    let late = plan_price(&at_a, &price_change(2900, 3900), &ledger).await;
    assert!(matches!(late.as_slice(), [IntakeDecision::Ignore { reason }] if reason.contains("superseded")));

    // In order, both planned before the sender ran: 39.00 will sit at 1 (its tombstone at 0 not
    // yet landed), and the change back withdraws it there.
    let ledger = MemoryLedger::new();
    let b = plan_price(&at_b, &price_change(2900, 3900), &ledger).await;
    let undo = plan_price(&at_a, &back, &ledger).await;
    assert_eq!(only_withdraws(&undo), vec![0, 1]);
    assert_eq!(sends(&b), vec![(1, 3900)], "the notice the change back withdraws");

    // Reordered: the change back first (the record already at 29.00), the change to 39.00 after.
    let ledger = MemoryLedger::new();
    let undo = plan_price(&at_a, &back, &ledger).await;
    assert_eq!(only_withdraws(&undo), vec![0, 1]);
    for _ in 0..2 {
        let late = plan_price(&at_a, &price_change(2900, 3900), &ledger).await;
        assert!(matches!(late.as_slice(), [IntakeDecision::Ignore { .. }]), "{late:?}");
        deliver(&at_a, &ledger, &undo);
    }

    // Not a change back: the amount in force is 29.00, the price moved 39.00 → 34.00.
    let ledger = MemoryLedger::new();
    let c = plan_price(&priced_at(3400, 2900), &price_change(3900, 3400), &ledger).await;
    assert_eq!(sends(&c), vec![(1, 3400)]);
    // The subscription cannot be read: nothing decided (retried); unknown: refused naming it.
    let down = PriceChange { subscription_id: "sub_down".into(), ..back.clone() };
    let err = at_a.plan("customer.subscription.updated", &BillingFact::PriceChange(down), &ledger).await;
    assert!(matches!(err, Err(PlanError::Lookup(LookupError::Failed { .. }))), "{err:?}");
    let gone = PriceChange { subscription_id: "sub_gone".into(), ..back };
    let err = at_a.plan("customer.subscription.updated", &BillingFact::PriceChange(gone), &ledger).await;
    assert!(matches!(err, Err(PlanError::Refused(ref r)) if r.field == "subscription"), "{err:?}");
}

#[test]
fn the_price_change_rule_needs_the_gap_and_reuses_only_the_latest_revision() {
    use revision::PriceChoice;
    assert_eq!(revision::price_change(&[], "d", None), None);
    let empty = [RevisionRows { revision: 0, rows: Vec::new() }];
    assert_eq!(
        revision::price_change(&empty, "d", None),
        Some(PriceChoice::Mint { revision: 1, superseded: vec![0] })
    );
    // A change back: the gap and the revision past it (where a pending notice sits until the
    // tombstone its change sent to the gap lands).
    assert_eq!(revision::price_change(&empty, "d", Some("back")), Some(PriceChoice::Withdraw(vec![0, 1])));
}

#[test]
fn the_announcement_rule_mints_past_a_parked_notice_and_a_cancellation_ends_it() {
    let row = |revision: u64, state: RowState, digest: Option<&str>, detail: &str| {
        let job = planner().job("x", K, &renewal(1), revision).unwrap();
        let mut r = sent_row(&planner(), &job);
        r.state = state;
        r.content_digest = digest.map(str::to_owned);
        r.detail = Some(detail.to_owned());
        r
    };
    let rows = |list: Vec<(u64, LedgerRow)>, gap: u64| {
        let mut scanned: Vec<RevisionRows> =
            list.into_iter().map(|(revision, r)| RevisionRows { revision, rows: vec![r] }).collect();
        scanned.push(RevisionRows { revision: gap, rows: Vec::new() });
        scanned
    };
    assert_eq!(revision::announcement(&[], "a"), None, "no gap read yet: undecided");
    // The first announcement: minted one past the gap, the gap withdrawn (nothing can sit there
    // yet, but the rule cannot know).
    let empty = rows(vec![], 0);
    assert_eq!(
        revision::announcement(&empty, "a"),
        Some(RevisionChoice::Mint { revision: 1, superseded: vec![0] })
    );
    // Its content again once the tombstone landed and while it is parked: reused, not re-minted.
    let mark =
        format!("withdrawn by sender: {}: the announced terms changed", revision::superseded_mark(1, "a"));
    let parked = rows(vec![(0, row(0, RowState::Withdrawn, None, &mark))], 1);
    assert_eq!(revision::announcement(&parked, "a"), Some(RevisionChoice::Reuse(1)));
    // Another content while the first is parked: past it, and the parked one withdrawn.
    assert_eq!(
        revision::announcement(&parked, "b"),
        Some(RevisionChoice::Mint { revision: 2, superseded: vec![1] })
    );
    // Sent: the latest revision with the content is reused; another content is a corrected notice.
    let sent = rows(
        vec![(0, row(0, RowState::Withdrawn, None, &mark)), (1, row(1, RowState::Sent, Some("a"), "sent"))],
        2,
    );
    assert_eq!(revision::announcement(&sent, "a"), Some(RevisionChoice::Reuse(1)));
    assert_eq!(
        revision::announcement(&sent, "b"),
        Some(RevisionChoice::Mint { revision: 3, superseded: vec![2] })
    );
    // A moved trial's tombstone does not end the period (the trial may move back); a
    // cancellation's does, whatever content comes after it.
    let moved = format!("withdrawn by sender: {}", revision::trial_moved("2026-10-01", "2026-10-31"));
    let moved = rows(vec![(0, row(0, RowState::Withdrawn, None, &moved))], 1);
    assert_eq!(
        revision::announcement(&moved, "a"),
        Some(RevisionChoice::Mint { revision: 2, superseded: vec![1] })
    );
    let cancelled = rows(
        vec![
            (0, row(0, RowState::Withdrawn, None, &mark)),
            (
                1,
                row(
                    1,
                    RowState::Withdrawn,
                    None,
                    "withdrawn by sender: stripe customer.subscription.deleted",
                ),
            ),
        ],
        2,
    );
    assert_eq!(revision::announcement(&cancelled, "b"), Some(RevisionChoice::Withdrawn(1)));
    // The cancellation's own rule: the gap and the revision past it, whatever tombstones come
    // before; its own tombstone just before the gap ends a redelivery.
    assert_eq!(revision::withdraw_pending(&parked, "x"), Some(WithdrawChoice::Withdraw(vec![1, 2])));
    assert_eq!(
        revision::withdraw_pending(&cancelled, "stripe customer.subscription.deleted"),
        Some(WithdrawChoice::AlreadyWithdrawn(1))
    );
}

#[tokio::test]
async fn a_cancellation_withdraws_a_pending_price_change_behind_its_tombstone() {
    let p = priced_with(customers(&[("cus_ada", ada("US-CA"))]));
    let ledger = MemoryLedger::new();
    let b = plan_price(&p, &price_change(2900, 3900), &ledger).await;
    deliver(&p, &ledger, &b[..1]); // revision 0 tombstoned; 39.00 pending at revision 1
    let decisions = plan(&p, &cancellation(), &ledger).await;
    let price: Vec<u64> = decisions
        .iter()
        .filter_map(|d| match d {
            IntakeDecision::Withdraw(w) if w.identity.kind().as_str() == "price_change" => {
                Some(w.identity.revision())
            }
            _ => None,
        })
        .collect();
    // The pending notice's revision, and the one past it (where it would sit had the tombstone
    // of revision 0 not landed yet).
    assert_eq!(price, vec![1, 2], "{decisions:?}");
    // Delivered again once its tombstones landed: nothing more is withdrawn (no tombstone per
    // redelivery, no revision spent on it).
    deliver(&p, &ledger, &decisions);
    let again = plan(&p, &cancellation(), &ledger).await;
    assert!(again.iter().all(|d| matches!(d, IntakeDecision::Ignore { .. })), "{again:?}");
}

/// A cancellation finds the anniversary reminder planned ahead on the same grid the planner used:
/// anchored on the 31st, the period after 28 February opens 31 March, not 28 March.
#[tokio::test]
async fn a_cancellation_withdraws_the_reminder_ahead_on_the_subscriptions_grid() {
    let p = obliged();
    let ledger = MemoryLedger::new();
    let cancelled = BillingFact::Cancellation(Cancellation {
        subscription_id: "sub_8812".into(),
        period_start_at: at("2027-02-28T10:00:00Z"),
        reason: "stripe customer.subscription.deleted".into(),
        term: Term::parse("month", 1),
        started_at: Some(at("2026-01-31T10:00:00Z")),
    });
    let decisions = plan(&p, &cancelled, &ledger).await;
    let IntakeDecision::Withdraw(ahead) = decisions.last().unwrap() else { panic!("a withdraw") };
    assert_eq!(ahead.identity.kind().as_str(), "anniversary_reminder");
    assert_eq!(ahead.identity.period_start().to_string(), "2027-03-31");
}

/// (kind, period_start) of each withdraw.
fn withdrawn(decisions: &[IntakeDecision]) -> Vec<(String, String)> {
    decisions
        .iter()
        .filter_map(|d| match d {
            IntakeDecision::Withdraw(w) => {
                Some((w.identity.kind().as_str().to_owned(), w.identity.period_start().to_string()))
            }
            _ => None,
        })
        .collect()
}

/// The anniversary reminder each plan in `decisions` holds (at most one).
fn reminder(decisions: &[IntakeDecision]) -> Option<Job> {
    decisions.iter().find_map(|d| match d {
        IntakeDecision::Send(job) if job.identity.kind().as_str() == "anniversary_reminder" => {
            Some(job.clone())
        }
        _ => None,
    })
}

/// A weekly Coloradan who began on 1 October 2025: the 53rd renewal (7 October 2026) is the first
/// past the anniversary. Its reminder is owed 25–40 days before it, and each weekly
/// upcoming-renewal event comes days before its own charge — one renewal ahead (a week) is always
/// too late. So every renewal's event within the window's opening plus one term (47 days) before
/// the crossing renewal plans the same reminder: the first of them before the window opens, so
/// the sender parks it; each later one is the same body under the same key, so the ledger sends
/// it once. An event further ahead owes nothing yet; the crossing renewal's own plans only its
/// ordinary reminder.
#[tokio::test]
async fn a_weekly_plans_anniversary_reminder_is_planned_from_every_renewal_within_its_lead() {
    let p = obliged();
    let ledger = MemoryLedger::new();
    let weekly = |period: &str| BillingFact::Renewal(colorado(period, "week"));
    // 19 August: 49 days before the crossing renewal, past the lead: only its own reminder.
    let far = plan(&p, &weekly("2026-08-19T07:00:00Z"), &ledger).await;
    assert_eq!(kinds_sent(&far), ["renewal_notice_t72"]);
    // 26 August, 42 days before: the reminder for 7 October, with the amount in force now.
    let first = plan(&p, &weekly("2026-08-26T07:00:00Z"), &ledger).await;
    assert_eq!(
        planned(&first)[1],
        (
            "anniversary_reminder".to_owned(),
            "2026-10-07".to_owned(),
            "2026-10-07T08:00:00+00:00".to_owned(),
            "US-CO/co-anniversary".to_owned()
        )
    );
    let job = reminder(&first).expect("the reminder");
    assert_eq!(job.template_data["amount"]["minor"], 2900);
    // Every later week's event, before and after the sender claimed it: the very same notice.
    for (i, period) in
        ["2026-09-02", "2026-09-09", "2026-09-16", "2026-09-23", "2026-09-30"].into_iter().enumerate()
    {
        let decisions = plan(&p, &weekly(&format!("{period}T07:00:00Z")), &ledger).await;
        assert_eq!(kinds_sent(&decisions), ["renewal_notice_t72", "anniversary_reminder"], "{period}");
        assert_eq!(reminder(&decisions), Some(job.clone()), "{period}: one identity, one body");
        if i == 1 {
            ledger.insert(sent_row(&p, &job));
        }
    }
    // The crossing renewal's own event: its reminder was planned; nothing crosses after it.
    let own = plan(&p, &weekly("2026-10-07T07:00:00Z"), &ledger).await;
    assert_eq!(kinds_sent(&own), ["renewal_notice_t72"]);
    let after = plan(&p, &weekly("2026-10-14T07:00:00Z"), &ledger).await;
    assert_eq!(kinds_sent(&after), ["renewal_notice_t72"]);
}

/// A weekly plan's later invoices state their own charges: one with another amount (a proration,
/// a credit) after the reminder went out plans nothing more for it — a reminder planned ahead is
/// told once — while the week's own reminder is planned as ever.
#[tokio::test]
async fn a_weekly_invoice_with_another_amount_does_not_tell_the_anniversary_reminder_again() {
    let p = obliged();
    let ledger = MemoryLedger::new();
    let weekly = |period: &str, minor: i64| {
        let mut renewal = colorado(period, "week");
        renewal.amount_minor = minor;
        BillingFact::Renewal(renewal)
    };
    let first = plan(&p, &weekly("2026-08-26T07:00:00Z", 2900), &ledger).await;
    let job = reminder(&first).expect("the reminder");
    ledger.insert(sent_row(&p, &job));
    let credited = plan(&p, &weekly("2026-09-09T07:00:00Z", 2150), &ledger).await;
    assert_eq!(kinds_sent(&credited), ["renewal_notice_t72"], "{credited:?}");
    assert!(
        credited.iter().any(|d| matches!(d, IntakeDecision::Ignore { reason }
            if reason.contains("already told (revision 0)"))),
        "{credited:?}"
    );
    // The same amount again: the very same notice, suppressed by the ledger.
    let same = plan(&p, &weekly("2026-09-16T07:00:00Z", 2900), &ledger).await;
    assert_eq!(reminder(&same), Some(job));
}

#[test]
fn the_reminder_rule_keeps_what_was_told() {
    let row = |state: RowState, digest: &str| {
        let job = planner().job("x", K, &renewal(1), 0).unwrap();
        let mut r = sent_row(&planner(), &job);
        r.state = state;
        r.content_digest = Some(digest.to_owned());
        r
    };
    let with = |state: RowState| {
        vec![
            RevisionRows { revision: 0, rows: vec![row(state, "a")] },
            RevisionRows { revision: 1, rows: vec![] },
        ]
    };
    assert_eq!(revision::reminder(&[], "a"), None, "no gap read yet: undecided");
    for state in [RowState::Claimed, RowState::Sent, RowState::Missed, RowState::Rejected] {
        assert_eq!(revision::reminder(&with(state), "a"), Some(RevisionChoice::Reuse(0)), "{state:?}");
        assert_eq!(revision::reminder(&with(state), "b"), Some(RevisionChoice::Told(0)), "{state:?}");
    }
    // Released (claimable again) or nothing yet: as the renewal rule decides.
    assert_eq!(
        revision::reminder(&with(RowState::Released), "b"),
        Some(RevisionChoice::Mint { revision: 1, superseded: vec![0] })
    );
    assert_eq!(revision::reminder(&with(RowState::Withdrawn), "b"), Some(RevisionChoice::Withdrawn(0)));
    let empty = [RevisionRows { revision: 0, rows: vec![] }];
    assert_eq!(
        revision::reminder(&empty, "b"),
        Some(RevisionChoice::Mint { revision: 0, superseded: vec![] })
    );
}

/// The same for a daily plan: the anniversary (1 October 2026) falls on a renewal, which crosses
/// it; every day's event from 41 days before plans its reminder, the day before that none.
#[tokio::test]
async fn a_daily_plans_anniversary_reminder_is_planned_from_every_renewal_within_its_lead() {
    let p = obliged();
    let ledger = MemoryLedger::new();
    let daily = |period: &str| BillingFact::Renewal(colorado(period, "day"));
    let far = plan(&p, &daily("2026-08-20T07:00:00Z"), &ledger).await;
    assert_eq!(kinds_sent(&far), ["renewal_notice_t72"]);
    let first = plan(&p, &daily("2026-08-21T07:00:00Z"), &ledger).await;
    let job = reminder(&first).expect("the reminder");
    assert_eq!(job.identity.period_start().to_string(), "2026-10-01");
    assert_eq!(job.charge_at, at("2026-10-01T08:00:00Z"));
    let mut day = at("2026-08-22T07:00:00Z");
    while day < at("2026-10-01T07:00:00Z") {
        let decisions = plan(&p, &BillingFact::Renewal(colorado(&day.to_rfc3339(), "day")), &ledger).await;
        assert_eq!(reminder(&decisions), Some(job.clone()), "{day}");
        day += chrono::Duration::days(1);
    }
    let own = plan(&p, &daily("2026-10-01T07:00:00Z"), &ledger).await;
    assert_eq!(kinds_sent(&own), ["renewal_notice_t72"]);
    // Cancelled with the period of 20 September: of the 41 days after it, only the crossing
    // renewal's reminder is withdrawn — the notice that was planned.
    let cancelled = BillingFact::Cancellation(Cancellation {
        subscription_id: "sub_8812".into(),
        period_start_at: at("2026-09-20T07:00:00Z"),
        reason: "stripe customer.subscription.deleted".into(),
        term: Term::parse("day", 1),
        started_at: Some(at("2025-10-01T07:00:00Z")),
    });
    let decisions = plan(&p, &cancelled, &MemoryLedger::new()).await;
    let ahead = withdrawn(&decisions).split_off(3);
    assert_eq!(ahead, [("anniversary_reminder".to_owned(), "2026-10-01".to_owned())]);
    let IntakeDecision::Withdraw(w) = decisions.last().unwrap() else { panic!("a withdraw") };
    assert_eq!(w.identity, job.identity);
}

/// A weekly Coloradan cancels with the period of 16 September: its notices are withdrawn, and so
/// is the anniversary reminder planned for the crossing renewal (7 October) — the period the
/// planner named, found on the same grid; the weeks around it cross nothing and are left alone.
/// Without the start (no record to read it from), every week in the range is withdrawn.
#[tokio::test]
async fn a_cancellation_withdraws_a_weekly_plans_reminder_for_the_crossing_renewal() {
    let p = obliged();
    let ledger = MemoryLedger::new();
    let planned_from =
        plan(&p, &BillingFact::Renewal(colorado("2026-09-09T07:00:00Z", "week")), &ledger).await;
    let job = reminder(&planned_from).expect("the reminder");
    let cancelled = Cancellation {
        subscription_id: "sub_8812".into(),
        period_start_at: at("2026-09-16T07:00:00Z"),
        reason: "stripe customer.subscription.deleted".into(),
        term: Term::parse("week", 1),
        started_at: Some(at("2025-10-01T07:00:00Z")),
    };
    let decisions = plan(&p, &BillingFact::Cancellation(cancelled.clone()), &ledger).await;
    let pair = |k: &str, d: &str| (k.to_owned(), d.to_owned());
    assert_eq!(
        withdrawn(&decisions),
        [
            pair("anniversary_reminder", "2026-09-16"),
            pair("annual_renewal", "2026-09-16"),
            pair("renewal_notice_t72", "2026-09-16"),
            pair("anniversary_reminder", "2026-10-07"),
        ]
    );
    let IntakeDecision::Withdraw(w) = decisions.last().unwrap() else { panic!("a withdraw") };
    assert_eq!(w.identity, job.identity, "the withdraw names the notice that was planned");
    // Delivered, then the reminder planned again by a late event: the tombstone holds.
    deliver(&p, &ledger, &decisions);
    let late = plan(&p, &BillingFact::Renewal(colorado("2026-09-09T07:00:00Z", "week")), &ledger).await;
    assert_eq!(reminder(&late), None, "{late:?}");

    let unstarted = Cancellation { started_at: None, ..cancelled };
    let decisions = plan(&p, &BillingFact::Cancellation(unstarted), &MemoryLedger::new()).await;
    let ahead: Vec<String> = withdrawn(&decisions).into_iter().skip(3).map(|(_, d)| d).collect();
    assert_eq!(ahead, ["2026-09-23", "2026-09-30", "2026-10-07", "2026-10-14", "2026-10-21", "2026-10-28"]);
}
