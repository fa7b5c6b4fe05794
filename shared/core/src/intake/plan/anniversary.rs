//! Anniversary reminders (Colorado: 25–40 days before a renewal that crosses a 12-month
//! anniversary): which rules count anniversaries, the subscription's start read where an event
//! lacks it, and the renewals ahead of this one whose reminders its event plans — one grid for
//! the planner and the cancellation ([`periods_ahead`]), so a withdraw finds what was planned.
//!
//! How far ahead depends on the term. When one term is longer than the window's closing edge
//! (monthly and longer under 25–40 days), the renewal one term ahead: its reminder's window
//! closes after this renewal's event comes. A shorter term (weekly, daily) would find the window
//! closed by then, so every renewal's event plans the reminders of the renewals up to the
//! window's opening plus one term after it: at least one of those events comes before the window
//! opens, and the sender parks what it plans until then. The many plans of one reminder share
//! its identity (subscription, the crossing renewal's period, kind, revision) and its body, so the
//! ledger and the parking refuse every copy after the first; a cancellation withdraws the
//! reminder of every crossing renewal in the same range after the cancelled period. A later
//! event whose invoice states another amount (a proration, a credit) plans another body: once the
//! reminder was claimed, it is not planned again ([`revision::reminder`](crate::intake::revision::reminder)).

use chrono::{DateTime, Duration, Utc};

use super::{IntakePlanner, Kinds, OwedKind, PlanError};
use crate::intake::{LookupError, Refused, Renewal};
use crate::policy::{Contract, Holds, Occasion, Term, Window};

/// Most periods one event plans anniversary reminders for: a daily term under a 40-day window
/// needs 41; a policy with a window of years would otherwise walk without end.
const MOST_AHEAD: usize = 400;

impl IntakePlanner {
    /// Whether some obligation rule counts anniversaries (Colorado's 12-month reminder): then the
    /// subscription's start must be readable from the billing system, since its events do not
    /// state it.
    pub fn counts_anniversaries(&self) -> bool {
        match &self.kinds {
            Kinds::Stated(_) => false,
            Kinds::Obligations(o, _) => o.rules().any(|(_, r)| r.anniversary_months.is_some()),
        }
    }

    /// The kinds some anniversary rule owes, each once (two jurisdictions' rules may owe one
    /// kind): a cancellation withdraws them one renewal further.
    pub(super) fn anniversary_kinds(&self) -> Vec<&str> {
        let mut kinds: Vec<&str> = match &self.kinds {
            Kinds::Stated(_) => Vec::new(),
            Kinds::Obligations(o, _) => o
                .rules()
                .filter(|(_, r)| r.anniversary_months.is_some())
                .map(|(_, r)| r.kind.as_str())
                .collect(),
        };
        kinds.sort_unstable();
        kinds.dedup();
        kinds
    }

    /// The anniversary reminders the renewal *after* `renewal` owes (`next`: that renewal, one
    /// term later): the rules are those that speak for `renewal`'s contract, the anniversary is
    /// judged at `next`'s charge.
    pub(super) fn anniversaries_ahead(
        &self,
        event_type: &str,
        next: &Renewal,
    ) -> Result<Vec<OwedKind>, Refused> {
        let Kinds::Obligations(obligations, _) = &self.kinds else { return Ok(Vec::new()) };
        let jurisdiction = next.jurisdiction.as_deref().and_then(|j| crate::jurisdiction::normalise(j).ok());
        let contract = Contract {
            term: next.term,
            started_at: next.started_at,
            charge_at: Some(next.period_start_at),
            ..Contract::new(next.occasion, jurisdiction.as_deref())
        };
        let (scope, candidates) = obligations.candidates(contract.occasion, contract.jurisdiction.as_deref());
        let mut out: Vec<OwedKind> = Vec::new();
        for rule in candidates.into_iter().filter(|r| r.anniversary_months.is_some()) {
            match rule.holds(&contract) {
                Holds::Yes if out.iter().any(|o| o.kind == rule.kind) => {}
                Holds::Yes => {
                    let id = crate::policy::Owed { kind: &rule.kind, rule, scope }.rule_id();
                    out.push(OwedKind { kind: rule.kind.clone(), rule: Some(id), anniversary: true });
                }
                Holds::No => {}
                Holds::Needs(fact) => {
                    let reason = format!(
                        "rule `{}` needs {}, which the billing event does not state ({})",
                        rule.name,
                        fact.phrase(),
                        contract.describe()
                    );
                    return Err(Refused::new(event_type, "obligations", reason));
                }
            }
        }
        Ok(out)
    }

    /// `renewal` with the subscription's start filled in when an anniversary rule could speak for
    /// it and the event does not state it: read from the billing system (`GET
    /// /v1/subscriptions/{id}` for Stripe). Without a subscription source it is left unstated, and
    /// the rule that needs it refuses the event, naming the fact — never a guessed start.
    pub(super) async fn with_start(&self, event_type: &str, renewal: &Renewal) -> Result<Renewal, PlanError> {
        let mut renewal = renewal.clone();
        let Kinds::Obligations(obligations, _) = &self.kinds else { return Ok(renewal) };
        let jurisdiction =
            renewal.jurisdiction.as_deref().and_then(|j| crate::jurisdiction::normalise(j).ok());
        let (_, candidates) = obligations.candidates(renewal.occasion, jurisdiction.as_deref());
        let needs = candidates.iter().any(|r| r.anniversary_months.is_some());
        if !needs || renewal.started_at.is_some() {
            return Ok(renewal);
        }
        let Some(source) = &self.subscriptions else { return Ok(renewal) };
        match source.subscription(&renewal.subscription_id).await {
            Ok(found) => {
                renewal.started_at = found.started_at;
                renewal.term = renewal.term.or(found.term);
                Ok(renewal)
            }
            Err(LookupError::NotFound { id, reason }) => {
                Err(Refused::new(event_type, "subscription", format!("{id}: {reason}")).into())
            }
            Err(e) => Err(PlanError::Lookup(e)),
        }
    }
}

/// Whether `renewal` is the subscription's first: no charge before it whose event could have
/// planned its anniversary reminder (the term before its period is the subscription's start).
pub(super) fn is_first_renewal(renewal: &Renewal) -> bool {
    match (renewal.term, renewal.started_at) {
        (Some(term), Some(started)) => {
            term.before(renewal.period_start_at).is_some_and(|prev| prev <= started)
        }
        _ => false,
    }
}

impl IntakePlanner {
    /// The renewals ahead of `renewal` whose anniversary reminders its event plans (see the
    /// module's header): none without an anniversary rule or a term.
    pub(super) fn renewals_ahead(&self, renewal: &Renewal) -> Vec<Renewal> {
        let Kinds::Obligations(_, Some(window)) = &self.kinds else { return Vec::new() };
        let Some(term) = renewal.term else { return Vec::new() };
        periods_ahead(term, renewal.started_at, renewal.period_start_at, *window)
            .into_iter()
            .filter_map(|period| renewal_at(renewal, period))
            .collect()
    }

    /// The kinds whose reminder for the renewal opening at `period` a cancellation withdraws: for
    /// a short term (see [`is_short`]) only those an anniversary rule may owe there (the start
    /// unknown: all of them, since a rule needing it cannot say no); else every anniversary kind,
    /// as one renewal ahead was always planned.
    pub(super) fn anniversary_kinds_at(
        &self,
        term: Term,
        started: Option<DateTime<Utc>>,
        period: DateTime<Utc>,
        short: bool,
    ) -> Vec<&str> {
        let Kinds::Obligations(o, _) = &self.kinds else { return Vec::new() };
        if !short {
            return self.anniversary_kinds();
        }
        let contract = Contract {
            term: Some(term),
            started_at: started,
            charge_at: Some(period),
            ..Contract::new(Occasion::Renewal, None)
        };
        let mut kinds: Vec<&str> = o
            .rules()
            .filter(|(_, r)| r.anniversary_months.is_some() && r.holds(&contract) != Holds::No)
            .map(|(_, r)| r.kind.as_str())
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        kinds
    }
}

/// Whether one renewal ahead is too late for `window` under `term`: one term after `period` is no
/// longer than the window's closing edge, so the next renewal's reminder window closes no later
/// than the charge at `period`, and an event that comes days before that charge finds it closed
/// (weekly and daily plans under Colorado's 25–40 days).
pub(super) fn is_short(term: Term, period: DateTime<Utc>, window: Window) -> bool {
    term.after(period).is_some_and(|next| {
        next.signed_duration_since(period) <= Duration::hours(i64::from(window.closes_hours_before))
    })
}

/// The periods after the one opening at `period`, on the subscription's grid (`started` + n ×
/// `term`), whose anniversary reminders the event of `period`'s renewal plans and a cancellation
/// of it withdraws: the next one; for a short term ([`is_short`]) every one up to the window's
/// opening plus one term after `period`. One function for the planner and the cancellation, so a
/// withdraw names the period that was planned.
pub(super) fn periods_ahead(
    term: Term,
    started: Option<DateTime<Utc>>,
    period: DateTime<Utc>,
    window: Window,
) -> Vec<DateTime<Utc>> {
    let Some(next) = next_period(term, started, period) else { return Vec::new() };
    if !is_short(term, period, window) {
        return vec![next];
    }
    let one_term = next.signed_duration_since(period);
    let Some(until) = period
        .checked_add_signed(Duration::hours(i64::from(window.opens_hours_before)))
        .and_then(|at| at.checked_add_signed(one_term))
    else {
        return vec![next];
    };
    let mut out = Vec::new();
    let mut at = Some(next);
    while let Some(p) = at.filter(|p| *p <= until && out.len() < MOST_AHEAD) {
        out.push(p);
        at = next_period(term, started, p);
    }
    out
}

/// The renewal one term after `renewal`: its period one term later — on the subscription's own
/// grid when its period lies on it (anchored on the 31st: 31 March after 28 February) — charged
/// as long after its period opens as this one, with the same amount and customer facts as in force
/// now (a price change is announced by its own notice).
#[cfg(test)]
pub(in crate::intake) fn next_renewal(renewal: &Renewal) -> Option<Renewal> {
    renewal_at(renewal, next_period(renewal.term?, renewal.started_at, renewal.period_start_at)?)
}

/// `renewal` moved to the period opening at `period`: charged as long after it opens, with the
/// same amount and customer facts — a renewal, also after a trial's conversion.
fn renewal_at(renewal: &Renewal, period: DateTime<Utc>) -> Option<Renewal> {
    let charge_at =
        period.checked_add_signed(renewal.charge_at.signed_duration_since(renewal.period_start_at))?;
    // A renewal, whatever the occasion of the charge before it (a trial's conversion).
    Some(Renewal { occasion: Occasion::Renewal, period_start_at: period, charge_at, ..renewal.clone() })
}

/// The period after the one opening at `period`: on the subscription's own grid when `period` lies
/// on it (the k-th term after `started` is `period`: the next is the (k+1)-th), else one term on.
/// One computation for the planner and the cancellation, so a withdraw finds what was planned.
pub(super) fn next_period(
    term: Term,
    started: Option<DateTime<Utc>>,
    period: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let on_grid = started.and_then(|started| {
        // Bounded: a century of the shortest term.
        (1..=5_300u32).find_map(|k| match term.times_after(started, k) {
            Some(at) if at == period => Some(term.times_after(started, k + 1)),
            Some(at) if at > period => Some(None),
            None => Some(None),
            _ => None,
        })
    });
    match on_grid {
        Some(Some(next)) => Some(next),
        _ => term.after(period),
    }
}
