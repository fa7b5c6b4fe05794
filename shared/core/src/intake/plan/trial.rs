//! Trials: the notice of a free trial's conversion (California: a trial over 31 days is told 3–21
//! days before it converts), planned ahead from the subscription's own event and parked until its
//! window opens — a billing system's upcoming invoice comes a few days before the charge, and
//! does not say that a trial ends with it.
//!
//! One identity, whichever event plans it: the subscription, the period the first charge pays
//! for (the trial's end, as a date in the billing system's zone) and the kind the rule owes. Its
//! content comes from the subscription's record in every path (the charge at the trial's end, the
//! amount per period of its items, the customer's facts read by id), so the subscription's
//! events — created, updated, redelivered — and the upcoming invoice at the trial's end (whose
//! subscription is read, see [`IntakePlanner::trial_ending_at`]) build the same body, and the
//! ledger sends it once.
//!
//! What can go wrong, and why it is still safe:
//! - *The amount (or the term) changes during the trial*, while the notice is parked without a
//!   row: the new content is minted one revision past the parked one, which is withdrawn
//!   ([`revision::announcement`]) — the parked old amount meets a tombstone, and the customer is
//!   told the amount they will be charged, once. Had the old amount already been sent, the new
//!   one is sent as a corrected notice.
//! - *An event comes late* (Stripe does not order them), after a later change: it is held against
//!   the subscription as it stands now, and one whose trial no longer is the subscription's (its
//!   amount, term or end moved on, or the trial is over) plans nothing — the later change's event
//!   planned its notice. Without a subscription source nothing tells it; the ledger still sends
//!   each content once.
//! - *The trial's end moves* (extended, or ended early): the period at the old end will not open,
//!   so every kind of notice for it is withdrawn, as a cancellation withdraws them; the new end's
//!   notice is planned under its own identity. A notice already sent for the old end is answered
//!   `withdraw_too_late` by the sender. The withdraw says the trial moved
//!   ([`revision::trial_moved`]), so the trial moving back plans the old end's notice again.
//! - *The subscription is cancelled during its trial*: the cancellation's period is the current
//!   period's end, which during a trial is the trial's end — the period this plan used — so the
//!   cancellation withdraws it like any notice.
//! - *The upcoming invoice comes after the trial moved* (events are not ordered): the record's
//!   trial ends elsewhere, so the invoice is stale and plans nothing; the change's own event
//!   planned the notice for the new end.
//! - *The record cannot be read*: nothing is decided and the webhook is answered with an error,
//!   so the billing system retries; an unknown subscription is refused, naming it.

use super::{IntakePlanner, Kinds, PlanError};
use crate::intake::revision;
use crate::intake::{
    Cancellation, IntakeDecision, LookupError, Refused, Renewal, Subscription, SubscriptionSource, Trial,
    TrialConversion,
};
use crate::ledger::RowReader;
use crate::policy::Occasion;

/// What an upcoming renewal is, once its subscription's trial is known.
pub(super) enum Upcoming {
    /// A renewal (the subscription's start and term filled in from its record when it was read).
    Renewal(Renewal),
    /// The first charge after this trial: planned as its conversion.
    Trial(Trial),
    /// The subscription is in a trial that ends elsewhere: nothing to plan, for this reason.
    Stale(String),
}

impl IntakePlanner {
    /// Whether some obligation rule is `on: trial_conversion`: then a subscription's trial is read
    /// from the billing system (the subscription's record and its customer), and an upcoming
    /// invoice's subscription is read where such a rule speaks for the customer's jurisdiction.
    pub fn tells_trials_apart(&self) -> bool {
        match &self.kinds {
            Kinds::Stated(_) => false,
            Kinds::Obligations(o, _) => o.rules().any(|(_, r)| r.on == Occasion::TrialConversion),
        }
    }

    /// An upcoming renewal's occasion: when a rule `on: trial_conversion` speaks for its
    /// jurisdiction, the subscription's record is read (Stripe: `GET /v1/subscriptions/{id}`), and
    /// a trial ending at this renewal's period makes it that trial's conversion. Without such a
    /// rule nothing is read (no lookup per invoice), nor without a subscription source (the
    /// invoice is then a renewal, as it states).
    pub(super) async fn trial_ending_at(
        &self,
        event_type: &str,
        renewal: &Renewal,
    ) -> Result<Upcoming, PlanError> {
        let unchanged = || Ok(Upcoming::Renewal(renewal.clone()));
        let Kinds::Obligations(obligations, _) = &self.kinds else { return unchanged() };
        if renewal.occasion != Occasion::Renewal {
            return unchanged();
        }
        let jurisdiction =
            renewal.jurisdiction.as_deref().and_then(|j| crate::jurisdiction::normalise(j).ok());
        let (_, rules) = obligations.candidates(Occasion::TrialConversion, jurisdiction.as_deref());
        if rules.is_empty() {
            return unchanged();
        }
        let Some(source) = &self.subscriptions else { return unchanged() };
        let (found, trial) = read_trial(event_type, source.as_ref(), &renewal.subscription_id).await?;
        match trial {
            None => {
                // The record was read anyway: an anniversary rule needs no second lookup.
                let mut renewal = renewal.clone();
                renewal.started_at = renewal.started_at.or(found.started_at);
                renewal.term = renewal.term.or(found.term);
                Ok(Upcoming::Renewal(renewal))
            }
            Some(trial) if trial.ends_at == renewal.period_start_at => Ok(Upcoming::Trial(trial)),
            Some(trial) => Ok(Upcoming::Stale(format!(
                "the subscription is in a trial that now ends at {}, not at this invoice's period start {}: \
                 the event that moved the trial planned the notice of its end",
                trial.ends_at.to_rfc3339(),
                renewal.period_start_at.to_rfc3339()
            ))),
        }
    }

    /// A subscription's trial, from its own event: what was planned for an end the trial no longer
    /// has is withdrawn, and the conversion at its end is planned (when a rule is on trial
    /// conversions; without one, the upcoming invoice at its end plans a renewal's notice).
    ///
    /// The event is first held against the subscription as the billing system states it now
    /// ([`IntakePlanner::trial_now`]): Stripe does not order its events, and an event delivered
    /// after a later change (a new amount, a moved end) would announce what the customer will not
    /// be charged — the later change's own event plans its notice, so this one plans nothing.
    pub(super) async fn plan_trial(
        &self,
        event_type: &str,
        change: &TrialConversion,
        ledger: &dyn RowReader,
    ) -> Result<Vec<IntakeDecision>, PlanError> {
        let period = |at| self.period_start(at).map_err(|e| Refused::new(event_type, "trial_end", e));
        let now = self.trial_now(event_type, change).await?;
        let mut out = Vec::new();
        if let Some(old_end) = change.previous_end {
            let old = period(old_end)?;
            let new = change.trial.as_ref().map(|t| period(t.ends_at)).transpose()?;
            // The trial has moved back to the old end since: its notice is owed there again.
            let back_there = match &now {
                Some(Some(t)) => period(t.ends_at)? == old,
                _ => false,
            };
            if new.as_ref() != Some(&old) && !back_there {
                let reason = match &new {
                    Some(new) => revision::trial_moved(&old, new),
                    None => format!("the trial that was to end on {old} ended early"),
                };
                let gone = Cancellation {
                    subscription_id: change.subscription_id.clone(),
                    period_start_at: old_end,
                    reason,
                    term: None,
                    started_at: None,
                };
                let announced_kinds = self.announced_kinds();
                self.withdraw_period(
                    event_type,
                    &gone,
                    &old,
                    self.kinds.all(),
                    &announced_kinds,
                    ledger,
                    &mut out,
                )
                .await?;
            }
        }
        match &change.trial {
            Some(trial) if self.tells_trials_apart() => match overtaken(now.as_ref(), trial) {
                Some(reason) => out.push(IntakeDecision::Ignore { reason }),
                None => out.extend(self.plan_trial_conversion(event_type, trial, ledger).await?),
            },
            Some(_) => out.push(IntakeDecision::Ignore {
                reason: "no obligation rule is `on: trial_conversion`: the first charge after the trial is \
                         announced from its upcoming invoice, as a renewal"
                    .into(),
            }),
            None if out.is_empty() => {
                out.push(IntakeDecision::Ignore { reason: "the subscription is not in a trial".into() })
            }
            None => {}
        }
        Ok(out)
    }

    /// The subscription's trial as the billing system states it now (Stripe:
    /// `GET /v1/subscriptions/{id}`, read the way the event is read): `Some(None)` when it is no
    /// longer in one. Asked only when it decides something — a trial rule and a trial to plan, or
    /// an old end to withdraw — and a subscription source is configured (`None` otherwise: the
    /// event alone decides, and an event delivered late may announce an overtaken amount; the
    /// ledger still sends each content once). An unknown subscription is refused, naming it; a
    /// record whose trial cannot be read is refused, naming the field; an unreachable source
    /// decides nothing (the webhook is retried).
    async fn trial_now(
        &self,
        event_type: &str,
        change: &TrialConversion,
    ) -> Result<Option<Option<Trial>>, PlanError> {
        let wanted = change.previous_end.is_some() || (change.trial.is_some() && self.tells_trials_apart());
        let Some(source) = self.subscriptions.as_ref().filter(|_| wanted) else { return Ok(None) };
        let (_, trial) = read_trial(event_type, source.as_ref(), &change.subscription_id).await?;
        Ok(Some(trial))
    }

    /// The notices `trial`'s conversion owes, with the customer's facts read from the billing
    /// system: charged at the trial's end, the period that charge pays for opening there.
    pub(super) async fn plan_trial_conversion(
        &self,
        event_type: &str,
        trial: &Trial,
        ledger: &dyn RowReader,
    ) -> Result<Vec<IntakeDecision>, PlanError> {
        let trial_days = trial.days().ok_or_else(|| {
            Refused::new(
                event_type,
                "trial_end",
                format!(
                    "{} is before the trial's start {}",
                    trial.ends_at.to_rfc3339(),
                    trial.starts_at.to_rfc3339()
                ),
            )
        })?;
        let (email, customer) = self
            .customer_facts(
                event_type,
                &trial.customer_id,
                "the obligations owe trial-conversion notices, and their customer facts come from the billing system",
            )
            .await?;
        let renewal = Renewal {
            occasion: Occasion::TrialConversion,
            subscription_id: trial.subscription_id.clone(),
            period_start_at: trial.ends_at,
            charge_at: trial.ends_at,
            amount_minor: trial.amount_minor,
            currency: trial.currency.clone(),
            email,
            locale: customer.locale,
            jurisdiction: customer.jurisdiction,
            plan_name: trial.plan_name.clone(),
            term: trial.term,
            trial_days: Some(trial_days),
            started_at: trial.started_at,
        };
        tracing::info!(
            subscription_id = trial.subscription_id,
            trial_days,
            trial_end = %trial.ends_at,
            "trial conversion"
        );
        self.plan_renewal(event_type, &renewal, ledger).await
    }
}

/// Subscription `id`'s record and its trial (`None`: not in one), read from `source`: an unknown
/// subscription is refused, naming it; a trialing record whose trial cannot be read is refused,
/// naming the field; an unreachable source decides nothing (the webhook is retried).
async fn read_trial(
    event_type: &str,
    source: &dyn SubscriptionSource,
    id: &str,
) -> Result<(Subscription, Option<Trial>), PlanError> {
    let mut found = match source.subscription(id).await {
        Ok(found) => found,
        Err(LookupError::NotFound { id, reason }) => {
            return Err(Refused::new(event_type, "subscription", format!("{id}: {reason}")).into())
        }
        Err(e) => return Err(PlanError::Lookup(e)),
    };
    let trial = match found.trial.take() {
        None => None,
        Some(Ok(trial)) => Some(trial),
        Some(Err(unreadable)) => {
            return Err(Refused::new(
                event_type,
                format!("subscription.{}", unreadable.field),
                format!("{} (the subscription is in a trial)", unreadable.reason),
            )
            .into())
        }
    };
    Ok((found, trial))
}

/// Why the trial an event states was overtaken, when the subscription as it stands now (`now`,
/// when it was read) is no longer in it, or its trial ends elsewhere or converts to another amount
/// or term: the event that made that change plans its notice. `None`: the event is current (or
/// nothing was read to tell). Only these facts are compared — numbers and instants that read the
/// same under every API version the intake accepts; a plan's name may be rendered differently by
/// an older webhook version than by the pinned API read, and a difference there would silence
/// every trial's notice.
fn overtaken(now: Option<&Option<Trial>>, stated: &Trial) -> Option<String> {
    let Some(now) = now? else {
        return Some(
            "superseded: the subscription is no longer in a trial; the event that ended it planned what it owes"
                .into(),
        );
    };
    if now.ends_at != stated.ends_at {
        return Some(format!(
            "superseded: the trial now ends at {}, not {}; the event that moved it plans its notice",
            now.ends_at.to_rfc3339(),
            stated.ends_at.to_rfc3339()
        ));
    }
    let describe = |t: &Trial| {
        let term = t.term.map_or("no term".to_owned(), |t| t.to_string());
        format!("{} {} per {term}", t.amount_minor, t.currency)
    };
    (now.amount_minor != stated.amount_minor || now.currency != stated.currency || now.term != stated.term)
        .then(|| {
            format!(
                "superseded: the trial now converts at {}, not {}; the event of that change plans its notice",
                describe(now),
                describe(stated)
            )
        })
}
