//! The planner and a free trial's conversion: planned ahead from the subscription's own event
//! under the trial's length, the same notice from the upcoming invoice at the trial's end, the
//! old end's notice withdrawn when the end moves, and a cancellation during the trial withdrawing
//! it — with the in-memory ledger and stand-in billing records.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

use notice_ledger::identity::NoticeSecret;
use notice_ledger::intake::*;
use notice_ledger::keyring::KeyRing;
use notice_ledger::ledger::{ClaimRequest, Origin, RowState, WithdrawRequest};
use notice_ledger::locale::TimeZone;
use notice_ledger::policy::{Occasion, Term, WindowPolicy};
use notice_testkit::MemoryLedger;

/// California's trial rules as in the US example (over 31 days: the trial-conversion notice, 3–21
/// days ahead; 31 days or less: the merchant's 72 h reminder), its renewal rules, a default
/// reminder for every trial elsewhere, and a state (Vermont, for the test's sake) that speaks only
/// of long trials.
const TRIALS: &str = r#"{
  "kinds": {
    "renewal_notice_t72": { "opens_hours_before": 72, "closes_hours_before": 24 },
    "annual_renewal": { "opens_hours_before": 1080, "closes_hours_before": 360 },
    "trial_conversion": { "opens_hours_before": 504, "closes_hours_before": 72 }
  },
  "obligations": {
    "default": [
      { "rule": "reminder", "on": "renewal", "kind": "renewal_notice_t72" },
      { "rule": "trial-reminder", "on": "trial_conversion", "kind": "renewal_notice_t72" }
    ],
    "jurisdictions": {
      "US-CA": [
        { "rule": "ca-annual", "on": "renewal", "term_months_at_least": 12, "kind": "annual_renewal" },
        { "rule": "ca-shorter", "on": "renewal", "term_months_below": 12, "kind": "renewal_notice_t72" },
        { "rule": "ca-long-trial", "on": "trial_conversion", "trial_days_over": 31, "kind": "trial_conversion" },
        { "rule": "ca-short-trial", "on": "trial_conversion", "trial_days_at_most": 31, "kind": "renewal_notice_t72" }
      ],
      "US-VT": [
        { "rule": "vt-long-trial", "on": "trial_conversion", "trial_days_over": 31, "kind": "trial_conversion" }
      ]
    }
  }
}"#;

/// Renewals only: no rule speaks of trials.
const RENEWALS_ONLY: &str = r#"{
  "kinds": { "renewal_notice_t72": { "opens_hours_before": 72, "closes_hours_before": 24 } },
  "obligations": { "default": [ { "rule": "reminder", "on": "renewal", "kind": "renewal_notice_t72" } ] }
}"#;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
}

/// The trial's end: 1 October 2026, 00:00 in Los Angeles (the billing zone).
fn trial_end() -> DateTime<Utc> {
    at("2026-10-01T07:00:00Z")
}

/// Customers by id, counting lookups (an unknown id is `NotFound`).
#[derive(Default)]
struct Customers {
    known: HashMap<String, Customer>,
    lookups: AtomicUsize,
}

#[async_trait]
impl CustomerSource for Customers {
    async fn customer(&self, id: &str) -> Result<Customer, LookupError> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        self.known
            .get(id)
            .cloned()
            .ok_or_else(|| LookupError::NotFound { id: id.into(), reason: "deleted".into() })
    }
}

/// Subscription records by id, counting lookups.
#[derive(Default)]
struct Records {
    known: HashMap<String, Subscription>,
    lookups: AtomicUsize,
}

#[async_trait]
impl SubscriptionSource for Records {
    async fn subscription(&self, id: &str) -> Result<Subscription, LookupError> {
        self.lookups.fetch_add(1, Ordering::Relaxed);
        self.known.get(id).cloned().ok_or_else(|| LookupError::NotFound {
            id: id.to_owned(),
            reason: "Stripe has no such object".into(),
        })
    }
}

fn customer(jurisdiction: &str) -> Customer {
    Customer {
        email: Some("ada@example.com".into()),
        locale: Some("en-US".into()),
        jurisdiction: Some(jurisdiction.into()),
    }
}

fn customers(jurisdiction: &str) -> Arc<Customers> {
    let known = [("cus_ada".to_owned(), customer(jurisdiction))].into_iter().collect();
    Arc::new(Customers { known, ..Customers::default() })
}

/// A trial of `days` days ending at [`trial_end`], on an annual price of 299.00.
fn trial(days: i64) -> Trial {
    Trial {
        subscription_id: "sub_trial".into(),
        customer_id: "cus_ada".into(),
        starts_at: trial_end() - Duration::days(days),
        ends_at: trial_end(),
        amount_minor: 29900,
        currency: "USD".into(),
        plan_name: Some("Coffee Box".into()),
        term: Term::parse("year", 1),
        started_at: Some(trial_end() - Duration::days(days)),
    }
}

fn created(t: Trial) -> BillingFact {
    BillingFact::TrialConversion(TrialConversion {
        subscription_id: t.subscription_id.clone(),
        trial: Some(t),
        previous_end: None,
    })
}

fn policy(text: &str) -> WindowPolicy {
    WindowPolicy::from_json(text).unwrap()
}

fn planner(text: &str, customers: Arc<Customers>) -> IntakePlanner {
    IntakePlanner::with_kinds(
        Kinds::from_policy(&policy(text), None).unwrap(),
        TimeZone::parse("America/Los_Angeles").unwrap(),
        KeyRing::from(NoticeSecret::new("the-first-secret-of-the-ledger").unwrap()),
        Arc::new(notice_texts::Icu),
    )
    .with_customers(customers)
}

/// (kind, period_start, revision, rule) of each send.
fn sends(decisions: &[IntakeDecision]) -> Vec<(String, String, u64, Option<String>)> {
    decisions
        .iter()
        .filter_map(|d| match d {
            IntakeDecision::Send(job) => Some((
                job.identity.kind().as_str().to_owned(),
                job.identity.period_start().format("%Y-%m-%d").to_string(),
                job.identity.revision(),
                job.obligation.clone(),
            )),
            _ => None,
        })
        .collect()
}

/// (kind, period_start, revision) of each withdraw.
fn withdraws(decisions: &[IntakeDecision]) -> Vec<(String, String, u64)> {
    decisions
        .iter()
        .filter_map(|d| match d {
            IntakeDecision::Withdraw(w) => Some((
                w.identity.kind().as_str().to_owned(),
                w.identity.period_start().format("%Y-%m-%d").to_string(),
                w.identity.revision(),
            )),
            _ => None,
        })
        .collect()
}

/// The one send among `decisions`.
fn the_send(decisions: &[IntakeDecision]) -> &notice_ledger::job::Job {
    let mut jobs = decisions.iter().filter_map(|d| match d {
        IntakeDecision::Send(job) => Some(job),
        _ => None,
    });
    let job = jobs.next().expect("a send");
    assert!(jobs.next().is_none(), "one send: {decisions:?}");
    job
}

/// What the sender leaves while the trial's notice waits for its window: the withdraws' tombstones
/// land, the sends are parked without a row.
fn park(p: &IntakePlanner, ledger: &MemoryLedger, decisions: &[IntakeDecision]) {
    let withdraws: Vec<IntakeDecision> =
        decisions.iter().filter(|d| matches!(d, IntakeDecision::Withdraw(_))).cloned().collect();
    deliver(p, ledger, &withdraws);
}

/// What the sender leaves after it took each message: a tombstone for a withdraw, a `sent` row
/// for a send.
fn deliver(p: &IntakePlanner, ledger: &MemoryLedger, decisions: &[IntakeDecision]) {
    for d in decisions {
        match d {
            IntakeDecision::Withdraw(w) => {
                let key = p.keys().key(&w.identity);
                ledger.insert(WithdrawRequest::new(w, key, Origin::Worker, "sender", Utc::now()).to_row());
            }
            IntakeDecision::Send(job) => {
                let key = p.keys().key(&job.identity);
                ledger.insert(ClaimRequest::for_job(job, key, Utc::now()).to_row(RowState::Sent, None));
            }
            IntakeDecision::Ignore { .. } => {}
        }
    }
}

const CREATED: &str = "customer.subscription.created";

#[tokio::test]
async fn a_sixty_day_trial_in_california_owes_the_trial_conversion_notice_at_its_end() {
    let source = customers("US-CA");
    let p = planner(TRIALS, source.clone());
    assert!(p.tells_trials_apart());
    let ledger = MemoryLedger::new();
    let decisions = p.plan(CREATED, &created(trial(60)), &ledger).await.unwrap();
    // Minted one past the first revision without a row, which is withdrawn: a later amount is
    // minted past this one in turn, never under the identity where this one is parked.
    assert_eq!(
        sends(&decisions),
        [("trial_conversion".into(), "2026-10-01".into(), 1, Some("US-CA/ca-long-trial".into()))]
    );
    assert_eq!(withdraws(&decisions), [("trial_conversion".into(), "2026-10-01".into(), 0)]);
    let job = the_send(&decisions);
    // Charged at the trial's end, for the annual price, told to the customer read from the
    // billing system.
    assert_eq!(job.charge_at, trial_end());
    assert_eq!(job.template_data["amount"]["minor"], 29900);
    assert_eq!(job.email, "ada@example.com");
    assert_eq!(source.lookups.load(Ordering::Relaxed), 1);
    // Its window: California's 3 to 21 days before the conversion — opening 10 September, so the
    // sender parks it until then.
    let window = policy(TRIALS).effective(Some("trial_conversion"), Some("US-CA")).window;
    assert_eq!((window.opens_hours_before, window.closes_hours_before), (504, 72));
    // Redelivered after it was sent (or a later `updated` event of the same trial): the same
    // body at the same revision, which the ledger suppresses.
    deliver(&p, &ledger, &decisions);
    let again = p.plan("customer.subscription.updated", &created(trial(60)), &ledger).await.unwrap();
    assert_eq!(sends(&again), sends(&decisions));
    assert_eq!(again.len(), 1, "nothing withdrawn again: {again:?}");
}

#[tokio::test]
async fn a_fourteen_day_trial_gets_the_short_trial_reminder_not_the_trial_notice() {
    let p = planner(TRIALS, customers("US-CA"));
    let decisions = p.plan(CREATED, &created(trial(14)), &MemoryLedger::new()).await.unwrap();
    assert_eq!(
        sends(&decisions),
        [("renewal_notice_t72".into(), "2026-10-01".into(), 1, Some("US-CA/ca-short-trial".into()))]
    );
    // A trial of 31 days and an hour is over 31 days.
    let t = Trial { starts_at: trial_end() - Duration::days(31) - Duration::hours(1), ..trial(31) };
    assert_eq!(t.days(), Some(32));
    assert_eq!(trial(31).days(), Some(31));
    let decisions = p.plan(CREATED, &created(t), &MemoryLedger::new()).await.unwrap();
    assert_eq!(sends(&decisions)[0].0, "trial_conversion");
    // Elsewhere, the default's reminder.
    let p = planner(TRIALS, customers("US-TX"));
    let decisions = p.plan(CREATED, &created(trial(60)), &MemoryLedger::new()).await.unwrap();
    assert_eq!(sends(&decisions)[0].3.as_deref(), Some("default/trial-reminder"));
}

#[tokio::test]
async fn a_trial_no_rule_of_its_state_holds_for_is_refused_with_its_facts() {
    let p = planner(TRIALS, customers("US-VT"));
    let err = p.plan(CREATED, &created(trial(14)), &MemoryLedger::new()).await.unwrap_err();
    let PlanError::Refused(refused) = err else { panic!("refused: {err:?}") };
    assert_eq!(refused.field, "obligations");
    assert!(refused.reason.contains("a trial conversion in US-VT"), "{refused}");
    assert!(refused.reason.contains("trial 14 days"), "{refused}");
}

#[tokio::test]
async fn a_trial_whose_end_moves_withdraws_the_old_ends_notice_and_plans_the_new() {
    let p = planner(TRIALS, customers("US-CA"));
    let ledger = MemoryLedger::new();
    let first = p.plan(CREATED, &created(trial(60)), &ledger).await.unwrap();
    deliver(&p, &ledger, &first);
    let later = trial_end() + Duration::days(30);
    let moved = BillingFact::TrialConversion(TrialConversion {
        subscription_id: "sub_trial".into(),
        trial: Some(Trial { ends_at: later, ..trial(60) }),
        previous_end: Some(trial_end()),
    });
    let decisions = p.plan("customer.subscription.updated", &moved, &ledger).await.unwrap();
    // The period at the old end will not open: every kind the rules can owe there is withdrawn —
    // a kind a trial rule owes at its first revision without a row and the one past it (where a
    // notice would sit whose superseded revision's tombstone had not landed yet); then the new
    // end's notice, minted past its own first revision.
    let w = |k: &str, period: &str, r: u64| (k.to_owned(), period.to_owned(), r);
    assert_eq!(
        withdraws(&decisions),
        [
            w("annual_renewal", "2026-10-01", 0),
            w("renewal_notice_t72", "2026-10-01", 0),
            w("renewal_notice_t72", "2026-10-01", 1),
            w("trial_conversion", "2026-10-01", 2),
            w("trial_conversion", "2026-10-01", 3),
            w("trial_conversion", "2026-10-31", 0),
        ]
    );
    assert_eq!(
        sends(&decisions),
        [("trial_conversion".into(), "2026-10-31".into(), 1, Some("US-CA/ca-long-trial".into()))]
    );

    // Ended early: the old end's notice withdrawn, nothing planned ahead of the charge that ended it.
    let ended = BillingFact::TrialConversion(TrialConversion {
        subscription_id: "sub_trial".into(),
        trial: None,
        previous_end: Some(later),
    });
    let decisions = p.plan("customer.subscription.updated", &ended, &MemoryLedger::new()).await.unwrap();
    assert!(sends(&decisions).is_empty());
    assert!(withdraws(&decisions).iter().any(|w| *w == ("trial_conversion".into(), "2026-10-31".into(), 1)));
}

#[tokio::test]
async fn a_cancellation_during_the_trial_withdraws_its_notice() {
    let p = planner(TRIALS, customers("US-CA"));
    let ledger = MemoryLedger::new();
    let planned = p.plan(CREATED, &created(trial(60)), &ledger).await.unwrap();
    park(&p, &ledger, &planned);
    // Stripe's cancellation during a trial: the current period's end is the trial's end.
    let cancelled = BillingFact::Cancellation(Cancellation {
        subscription_id: "sub_trial".into(),
        period_start_at: trial_end(),
        reason: "stripe customer.subscription.deleted".into(),
        term: Term::parse("year", 1),
        started_at: None,
    });
    let decisions = p.plan("customer.subscription.deleted", &cancelled, &ledger).await.unwrap();
    assert!(withdraws(&decisions).contains(&("trial_conversion".into(), "2026-10-01".into(), 1)));
    // The tombstone is where the parked notice will meet it: its very identity.
    let job = the_send(&planned);
    let same =
        decisions.iter().any(|d| matches!(d, IntakeDecision::Withdraw(w) if w.identity == job.identity));
    assert!(same, "{decisions:?}");
    // Cancelled seconds after it was created, before the tombstone of revision 0 landed: the
    // parked notice at revision 1 is withdrawn all the same.
    let quick = p.plan("customer.subscription.deleted", &cancelled, &MemoryLedger::new()).await.unwrap();
    let hits = quick.iter().any(|d| matches!(d, IntakeDecision::Withdraw(w) if w.identity == job.identity));
    assert!(hits, "{quick:?}");
    // A redelivery of the trial's event after the tombstone landed plans nothing.
    deliver(&p, &ledger, &decisions);
    let again = p.plan(CREATED, &created(trial(60)), &ledger).await.unwrap();
    assert!(sends(&again).is_empty(), "{again:?}");
}

/// The upcoming invoice at the trial's end, as the Stripe mapping reads it: a renewal, whose
/// invoice states another charge time and amount (tax, the payment attempt an hour later).
fn upcoming() -> Renewal {
    Renewal {
        occasion: Occasion::Renewal,
        subscription_id: "sub_trial".into(),
        period_start_at: trial_end(),
        charge_at: trial_end() + Duration::hours(1),
        amount_minor: 32000,
        currency: "USD".into(),
        email: "ada@example.com".into(),
        locale: None,
        jurisdiction: Some("US-CA".into()),
        plan_name: None,
        term: Term::parse("year", 1),
        trial_days: None,
        started_at: None,
    }
}

fn records(trial: Option<Result<Trial, Refused>>) -> Arc<Records> {
    let record = Subscription { trial, term: Term::parse("year", 1), ..Subscription::default() };
    Arc::new(Records {
        known: [("sub_trial".to_owned(), record)].into_iter().collect(),
        ..Records::default()
    })
}

#[tokio::test]
async fn the_upcoming_invoice_at_the_trials_end_is_the_same_notice_as_the_subscriptions_event() {
    let source = records(Some(Ok(trial(60))));
    let p = planner(TRIALS, customers("US-CA")).with_subscriptions(source.clone());
    let ledger = MemoryLedger::new();
    let from_invoice = p.plan("invoice.upcoming", &BillingFact::Renewal(upcoming()), &ledger).await.unwrap();
    assert_eq!(source.lookups.load(Ordering::Relaxed), 1);
    assert_eq!(
        sends(&from_invoice),
        [("trial_conversion".into(), "2026-10-01".into(), 1, Some("US-CA/ca-long-trial".into()))]
    );
    // Whichever comes first, the other plans the very same body: sent once.
    let from_event = p.plan(CREATED, &created(trial(60)), &ledger).await.unwrap();
    assert_eq!(from_event, from_invoice);
    assert_eq!(source.lookups.load(Ordering::Relaxed), 2, "the event is held against the record");
    deliver(&p, &ledger, &from_invoice);
    let again = p.plan("invoice.upcoming", &BillingFact::Renewal(upcoming()), &ledger).await.unwrap();
    assert_eq!(sends(&again), sends(&from_invoice), "reused, not a second revision");
    assert_eq!(again.len(), 1, "{again:?}");

    // The trial now ends elsewhere (the invoice is stale): nothing planned.
    let moved = Trial { ends_at: trial_end() + Duration::days(30), ..trial(60) };
    let p = planner(TRIALS, customers("US-CA")).with_subscriptions(records(Some(Ok(moved))));
    let stale = p.plan("invoice.upcoming", &BillingFact::Renewal(upcoming()), &ledger).await.unwrap();
    assert!(matches!(&stale[..], [IntakeDecision::Ignore { reason }] if reason.contains("now ends at")));

    // Not in a trial: the renewal it states.
    let p = planner(TRIALS, customers("US-CA")).with_subscriptions(records(None));
    let renewal = p.plan("invoice.upcoming", &BillingFact::Renewal(upcoming()), &ledger).await.unwrap();
    assert_eq!(sends(&renewal)[0].0, "annual_renewal");

    // Trialing, but the record's amount cannot be read: refused, naming the field.
    let unreadable = Refused::new("subscription", "items.data[0].price.unit_amount", "is missing");
    let p = planner(TRIALS, customers("US-CA")).with_subscriptions(records(Some(Err(unreadable))));
    let err = p.plan("invoice.upcoming", &BillingFact::Renewal(upcoming()), &ledger).await.unwrap_err();
    let PlanError::Refused(refused) = err else { panic!("refused: {err:?}") };
    assert_eq!(refused.field, "subscription.items.data[0].price.unit_amount");
}

#[tokio::test]
async fn without_a_trial_rule_an_upcoming_invoice_reads_nothing_from_the_billing_system() {
    let source = records(Some(Ok(trial(60))));
    let p = planner(RENEWALS_ONLY, customers("US-CA")).with_subscriptions(source.clone());
    assert!(!p.tells_trials_apart());
    let decisions = p.plan("invoice.upcoming", &BillingFact::Renewal(upcoming()), &MemoryLedger::new()).await;
    assert_eq!(sends(&decisions.unwrap())[0].0, "renewal_notice_t72");
    assert_eq!(source.lookups.load(Ordering::Relaxed), 0, "no lookup per invoice");
    // The subscription's own trial event owes nothing then: its invoice announces the charge.
    let decisions = p.plan(CREATED, &created(trial(60)), &MemoryLedger::new()).await.unwrap();
    assert!(matches!(&decisions[..], [IntakeDecision::Ignore { .. }]), "{decisions:?}");
}

/// A planner for a subscription whose record stands at `now` (its trial, or none).
fn standing(now: Option<Trial>) -> IntakePlanner {
    planner(TRIALS, customers("US-CA")).with_subscriptions(records(now.map(Ok)))
}

fn priced(minor: i64) -> Trial {
    Trial { amount_minor: minor, ..trial(60) }
}

fn updated(t: Trial) -> BillingFact {
    BillingFact::TrialConversion(TrialConversion {
        subscription_id: t.subscription_id.clone(),
        trial: Some(t),
        previous_end: None,
    })
}

const UPDATED: &str = "customer.subscription.updated";

/// An annual Californian on a 60-day trial at 299.00, the price raised to 399.00 while the notice
/// is parked weeks ahead of its window: the parked 299.00 meets a tombstone and the customer is
/// told 399.00 — once, whatever is delivered again or late.
#[tokio::test]
async fn an_amount_changed_during_the_trial_is_told_once_at_the_new_amount() {
    let ledger = MemoryLedger::new();
    let first = standing(Some(priced(29900))).plan(CREATED, &created(priced(29900)), &ledger).await.unwrap();
    park(&standing(None), &ledger, &first);
    let old = the_send(&first).clone();

    let at_399 = standing(Some(priced(39900)));
    let raised = at_399.plan(UPDATED, &updated(priced(39900)), &ledger).await.unwrap();
    let new = the_send(&raised).clone();
    assert_eq!(new.template_data["amount"]["minor"], 39900);
    assert_eq!(new.identity.revision(), old.identity.revision() + 1);
    // The parked 299.00 is withdrawn at its very identity: it meets the tombstone at the sender.
    let withdrawn: Vec<_> = raised
        .iter()
        .filter_map(|d| match d {
            IntakeDecision::Withdraw(w) => Some(w.identity.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(withdrawn, std::slice::from_ref(&old.identity));
    park(&at_399, &ledger, &raised);

    // The created event delivered again (or late): the trial no longer converts at 299.00.
    let late = at_399.plan(CREATED, &created(priced(29900)), &ledger).await.unwrap();
    assert!(
        matches!(&late[..], [IntakeDecision::Ignore { reason }] if reason.contains("now converts at 39900 USD")),
        "{late:?}"
    );
    // The change delivered again, and the upcoming invoice at the trial's end: the same notice.
    let again = at_399.plan(UPDATED, &updated(priced(39900)), &ledger).await.unwrap();
    assert_eq!(again, [IntakeDecision::Send(new.clone())]);
    let invoice = at_399.plan("invoice.upcoming", &BillingFact::Renewal(upcoming()), &ledger).await.unwrap();
    assert_eq!(invoice, [IntakeDecision::Send(new.clone())]);

    // Back to 299.00 before anything was told: 299.00 again, past the parked 399.00.
    let at_299 = standing(Some(priced(29900)));
    let back = at_299.plan(UPDATED, &updated(priced(29900)), &ledger).await.unwrap();
    assert_eq!(the_send(&back).template_data["amount"]["minor"], 29900);
    assert_eq!(the_send(&back).identity.revision(), new.identity.revision() + 1);
    assert!(back.iter().any(|d| matches!(d, IntakeDecision::Withdraw(w) if w.identity == new.identity)));

    // Once it was sent, a change is a corrected notice (the customer was told the old amount).
    deliver(&at_299, &ledger, &back);
    let told = the_send(&back).identity.revision();
    let corrected = at_399.plan(UPDATED, &updated(priced(39900)), &ledger).await.unwrap();
    assert_eq!(the_send(&corrected).identity.revision(), told + 2);
    assert_eq!(withdraws(&corrected), [("trial_conversion".into(), "2026-10-01".into(), told + 1)]);
}

/// Stripe does not order its events: a trial's end moved and moved back, each event delivered
/// again after the other, plans the notice at the end the trial has.
#[tokio::test]
async fn a_late_event_of_a_trial_that_moved_on_plans_nothing_and_a_trial_moved_back_is_told_again() {
    let ledger = MemoryLedger::new();
    let later = trial_end() + Duration::days(30);
    let at_b = Trial { ends_at: later, ..trial(60) };
    let first = standing(Some(trial(60))).plan(CREATED, &created(trial(60)), &ledger).await.unwrap();
    park(&standing(None), &ledger, &first);
    let move_to_b = BillingFact::TrialConversion(TrialConversion {
        subscription_id: "sub_trial".into(),
        trial: Some(at_b.clone()),
        previous_end: Some(trial_end()),
    });
    let moved = standing(Some(at_b.clone())).plan(UPDATED, &move_to_b, &ledger).await.unwrap();
    assert_eq!(the_send(&moved).identity.period_start().format("%Y-%m-%d").to_string(), "2026-10-31");
    park(&standing(None), &ledger, &moved);

    // Moved back to 1 October; the move to 31 October delivered again afterwards: it neither
    // withdraws the end the trial has nor plans the one it no longer has.
    let at_a = standing(Some(trial(60)));
    let stale = at_a.plan(UPDATED, &move_to_b, &ledger).await.unwrap();
    assert!(
        matches!(&stale[..], [IntakeDecision::Ignore { reason }] if reason.contains("now ends at")),
        "{stale:?}"
    );
    // The move back itself: 31 October withdrawn, 1 October told again (its tombstones were a
    // supersession and a move, which do not end the period).
    let move_back = BillingFact::TrialConversion(TrialConversion {
        subscription_id: "sub_trial".into(),
        trial: Some(trial(60)),
        previous_end: Some(later),
    });
    let back = at_a.plan(UPDATED, &move_back, &ledger).await.unwrap();
    let job = the_send(&back);
    assert_eq!(job.identity.period_start().format("%Y-%m-%d").to_string(), "2026-10-01");
    assert_eq!(job.charge_at, trial_end());
    assert!(withdraws(&back).iter().any(|w| w.1 == "2026-10-31"), "{back:?}");

    // The trial is over (the record is no longer trialing): the created event plans nothing.
    let over = standing(None).plan(CREATED, &created(trial(60)), &MemoryLedger::new()).await.unwrap();
    assert!(
        matches!(&over[..], [IntakeDecision::Ignore { reason }] if reason.contains("no longer in a trial")),
        "{over:?}"
    );
    // A subscription the billing system does not know: refused, naming it.
    let down = planner(TRIALS, customers("US-CA")).with_subscriptions(Arc::new(Records::default()));
    let err = down.plan(CREATED, &created(trial(60)), &MemoryLedger::new()).await.unwrap_err();
    assert!(matches!(err, PlanError::Refused(ref r) if r.field == "subscription"), "{err:?}");
}
