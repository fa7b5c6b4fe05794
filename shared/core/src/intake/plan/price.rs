//! Price changes: one notice per announced new amount, exactly once across redeliveries and
//! reorderings ([`revision::price_change`]); the customer's facts read from the billing system.

use super::{period_of, too_many, IntakePlanner, Kinds, MAX_REVISIONS};
use crate::intake::revision::{self, PriceChoice};
use crate::intake::{Customer, IntakeDecision, LookupError, PriceChange, Refused, Renewal, Subscription};
use crate::ledger::RowReader;
use crate::policy::Occasion;

use super::PlanError;

impl IntakePlanner {
    /// The kinds some rule owes `on: price_change` or `on: trial_conversion`: announcements a
    /// later content supersedes while they wait, so their tombstones do not all end the period,
    /// and a cancellation withdraws their first revision without a row whatever tombstones come
    /// before it ([`revision::withdraw_pending`]) — where the pending notice sits.
    pub(super) fn announced_kinds(&self) -> Vec<&str> {
        match &self.kinds {
            Kinds::Stated(_) => Vec::new(),
            Kinds::Obligations(o, _) => o
                .rules()
                .filter(|(_, r)| matches!(r.on, Occasion::PriceChange | Occasion::TrialConversion))
                .map(|(_, r)| r.kind.as_str())
                .collect(),
        }
    }

    /// Whether the obligations owe notices of a price change in some jurisdiction: then the
    /// customer facts must be readable (a deployment without that rule never looks them up).
    pub fn announces_price_changes(&self) -> bool {
        match &self.kinds {
            Kinds::Stated(_) => false,
            Kinds::Obligations(o, _) => o.rules().any(|(_, r)| r.on == Occasion::PriceChange),
        }
    }

    /// A price change: when some obligation speaks for price changes, the subscription as it
    /// stands now is read from the billing system (is the event stale? which amount is in force?),
    /// then the customer's facts; the obligations decide the kinds for the customer's
    /// jurisdiction, and [`revision::price_change`] decides each kind's messages.
    pub(super) async fn plan_price_change(
        &self,
        event_type: &str,
        change: &PriceChange,
        ledger: &dyn RowReader,
    ) -> Result<Vec<IntakeDecision>, PlanError> {
        if !self.announces_price_changes() {
            return Ok(vec![IntakeDecision::Ignore {
                reason:
                    "no obligation rule is `on: price_change`: the configuration owes no price-change notice"
                        .into(),
            }]);
        }
        let now = self.subscription_now(event_type, change).await?;
        if let Some(reason) = overtaken(now.as_ref(), change) {
            return Ok(vec![IntakeDecision::Ignore { reason }]);
        }
        let in_force = in_force(now.as_ref(), change);
        let renewal = self.price_renewal(event_type, change).await?;
        let owed = self.owed(event_type, &renewal)?;
        if owed.is_empty() {
            return Ok(vec![IntakeDecision::Ignore {
                reason: format!(
                    "no obligation rule speaks for a price change in {}: the configuration owes no notice",
                    renewal.jurisdiction.as_deref().unwrap_or("no jurisdiction")
                ),
            }]);
        }
        // A change back to the amount in force owes no notice; it names itself (its old and new
        // amounts) so that its own tombstone tells a redelivery that it is done.
        let back = (in_force == Some(change.amount_minor)).then(|| {
            format!(
                "the price went back from {} to {} {}, the amount in force, before the change was announced",
                change.previous_minor, change.amount_minor, change.currency
            )
        });
        let mut out = Vec::new();
        for owed in owed {
            let kind = owed.kind.as_str();
            if let Some(rule) = &owed.rule {
                tracing::info!(
                    kind,
                    rule,
                    change_back = back.is_some(),
                    in_force,
                    "price-change notice owed"
                );
            }
            let job = self.owed_job(event_type, &owed, &renewal, 0)?;
            let digest = job.content_digest();
            let period_start = period_of(&job);
            let at = (renewal.subscription_id.as_str(), period_start.as_str(), kind);
            let scanned = self.scan(event_type, at, ledger).await?;
            let choice = revision::price_change(&scanned, &digest, back.as_deref())
                .ok_or_else(|| too_many(event_type))?;
            let withdraw = |revisions: Vec<u64>, reason: &str| -> Result<Vec<IntakeDecision>, Refused> {
                revisions
                    .into_iter()
                    .map(|r| self.withdrawal(event_type, at, r, reason).map(IntakeDecision::Withdraw))
                    .collect()
            };
            match choice {
                PriceChoice::Reuse(revision) => {
                    out.push(IntakeDecision::Send(self.owed_job(event_type, &owed, &renewal, revision)?));
                }
                PriceChoice::Withdraw(revisions) => {
                    if revisions.iter().any(|r| *r >= MAX_REVISIONS) {
                        return Err(too_many(event_type));
                    }
                    out.extend(withdraw(revisions, back.as_deref().unwrap_or("the price went back"))?);
                }
                PriceChoice::WentBack(revision) => out.push(IntakeDecision::Ignore {
                    reason: format!(
                        "the {kind} notice for period {period_start} is already withdrawn (revision {revision}): the price went back"
                    ),
                }),
                PriceChoice::Mint { revision, superseded } => {
                    if revision >= MAX_REVISIONS {
                        return Err(too_many(event_type));
                    }
                    let reason =
                        format!("{}: the price changed again", revision::superseded_mark(revision, &digest));
                    out.extend(withdraw(superseded, &reason)?);
                    out.push(IntakeDecision::Send(self.owed_job(event_type, &owed, &renewal, revision)?));
                }
            }
        }
        Ok(out)
    }

    /// The subscription as the billing system states it now (`GET /v1/subscriptions/{id}` with
    /// its latest invoice, for Stripe), when a subscription source is configured: its price tells
    /// a stale event, its latest invoice the amount in force. An unknown subscription is refused,
    /// an unreachable one decides nothing (the webhook is retried). Without a source: `None`, and
    /// the event alone decides (a change back is then announced like any change).
    async fn subscription_now(
        &self,
        event_type: &str,
        change: &PriceChange,
    ) -> Result<Option<Subscription>, PlanError> {
        let Some(source) = &self.subscriptions else { return Ok(None) };
        match source.priced_subscription(&change.subscription_id).await {
            Ok(found) => Ok(Some(found)),
            Err(LookupError::NotFound { id, reason }) => {
                Err(Refused::new(event_type, "subscription", format!("{id}: {reason}")).into())
            }
            Err(e) => Err(PlanError::Lookup(e)),
        }
    }

    /// The notice's facts: the change's amount and date with the customer's e-mail, language and
    /// address read from the billing system (an unknown customer or one without an e-mail address
    /// is refused, naming the field).
    async fn price_renewal(&self, event_type: &str, change: &PriceChange) -> Result<Renewal, PlanError> {
        let (email, customer) = self
            .customer_facts(
                event_type,
                &change.customer_id,
                "the obligations owe price-change notices, and their customer facts come from the billing system",
            )
            .await?;
        Ok(Renewal {
            occasion: Occasion::PriceChange,
            subscription_id: change.subscription_id.clone(),
            period_start_at: change.period_start_at,
            charge_at: change.charge_at,
            amount_minor: change.amount_minor,
            currency: change.currency.clone(),
            email,
            locale: customer.locale,
            jurisdiction: customer.jurisdiction,
            plan_name: change.plan_name.clone(),
            term: change.term,
            trial_days: None,
            started_at: None,
        })
    }
}

impl IntakePlanner {
    /// A customer's e-mail address and facts, read from the billing system by `customer_id`: an
    /// unknown customer or one without an e-mail address is refused, naming the field; no source
    /// configured, or one that cannot be asked, decides nothing (`why`: what needs the lookup).
    pub(super) async fn customer_facts(
        &self,
        event_type: &str,
        customer_id: &str,
        why: &'static str,
    ) -> Result<(String, Customer), PlanError> {
        let customers = self.customers.as_ref().ok_or(PlanError::Lookup(LookupError::NotConfigured(why)))?;
        let customer = match customers.customer(customer_id).await {
            Ok(c) => c,
            Err(LookupError::NotFound { id, reason }) => {
                return Err(Refused::new(event_type, "customer", format!("{id}: {reason}")).into())
            }
            Err(e) => return Err(PlanError::Lookup(e)),
        };
        let email = customer.email.clone().filter(|e| !e.trim().is_empty()).ok_or_else(|| {
            Refused::new(
                event_type,
                "customer.email",
                "is missing: the customer has no e-mail address on file",
            )
        })?;
        Ok((email, customer))
    }
}

/// Why `change` was overtaken, when the subscription's price now is another amount: an event
/// delivered late (Stripe's order is not guaranteed) after a later change moved the price on,
/// whose own event plans its notice. Planning this one would announce an amount the customer
/// will not pay.
fn overtaken(now: Option<&Subscription>, change: &PriceChange) -> Option<String> {
    let price = now?.price.as_ref()?;
    (price.minor != change.amount_minor || price.currency != change.currency).then(|| {
        format!(
            "superseded: the subscription is now at {} {}, not {} {}; the event of that change plans its notice",
            price.minor, price.currency, change.amount_minor, change.currency
        )
    })
}

/// The amount the customer pays in the current period, in the change's currency: as the event
/// states it, else as the subscription record does (its latest invoice); `None` when neither can.
fn in_force(now: Option<&Subscription>, change: &PriceChange) -> Option<i64> {
    change.in_force_minor.or_else(|| {
        now.and_then(|s| s.in_force.as_ref()).filter(|a| a.currency == change.currency).map(|a| a.minor)
    })
}
