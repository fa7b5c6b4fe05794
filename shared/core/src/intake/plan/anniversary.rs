//! Anniversary reminders (Colorado: 25–40 days before a renewal that crosses a 12-month
//! anniversary): which rules count anniversaries, the subscription's start read where an event
//! lacks it, and the renewal after this one — one grid for the planner and the cancellation, so
//! a withdraw finds what was planned.

use chrono::{DateTime, Utc};

use super::{IntakePlanner, Kinds, OwedKind, PlanError};
use crate::intake::{LookupError, Refused, Renewal};
use crate::policy::{Contract, Holds, Term};

impl IntakePlanner {
    /// Whether some obligation rule counts anniversaries (Colorado's 12-month reminder): then the
    /// subscription's start must be readable from the billing system, since its events do not
    /// state it.
    pub fn counts_anniversaries(&self) -> bool {
        match &self.kinds {
            Kinds::Stated(_) => false,
            Kinds::Obligations(o) => o.rules().any(|(_, r)| r.anniversary_months.is_some()),
        }
    }

    /// The kinds some anniversary rule owes, each once (two jurisdictions' rules may owe one
    /// kind): a cancellation withdraws them one renewal further.
    pub(super) fn anniversary_kinds(&self) -> Vec<&str> {
        let mut kinds: Vec<&str> = match &self.kinds {
            Kinds::Stated(_) => Vec::new(),
            Kinds::Obligations(o) => o
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
        let Kinds::Obligations(obligations) = &self.kinds else { return Ok(Vec::new()) };
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
        let Kinds::Obligations(obligations) = &self.kinds else { return Ok(renewal) };
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

/// The renewal one term after `renewal`: its period one term later — on the subscription's own
/// grid when its period lies on it (anchored on the 31st: 31 March after 28 February) — charged
/// as long after its period opens as this one, with the same amount and customer facts as in force
/// now (a price change is announced by its own notice).
pub(in crate::intake) fn next_renewal(renewal: &Renewal) -> Option<Renewal> {
    let period = renewal.period_start_at;
    let next = next_period(renewal.term?, renewal.started_at, period)?;
    let charge_at = next.checked_add_signed(renewal.charge_at.signed_duration_since(period))?;
    Some(Renewal { period_start_at: next, charge_at, ..renewal.clone() })
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
