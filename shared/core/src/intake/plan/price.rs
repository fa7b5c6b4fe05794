//! Price changes: one notice per announced new amount, exactly once across redeliveries and
//! reorderings ([`revision::price_change`]); the customer's facts read from the billing system.

use super::{period_of, too_many, IntakePlanner, Kinds, MAX_REVISIONS};
use crate::intake::revision::{self, PriceChoice};
use crate::intake::{IntakeDecision, LookupError, PriceChange, Refused, Renewal};
use crate::ledger::RowReader;
use crate::policy::Occasion;

use super::PlanError;

impl IntakePlanner {
    /// The kinds some rule owes `on: price_change`.
    pub(super) fn price_change_kinds(&self) -> Vec<&str> {
        match &self.kinds {
            Kinds::Stated(_) => Vec::new(),
            Kinds::Obligations(o) => o
                .rules()
                .filter(|(_, r)| r.on == Occasion::PriceChange)
                .map(|(_, r)| r.kind.as_str())
                .collect(),
        }
    }

    /// Whether the obligations owe notices of a price change in some jurisdiction: then the
    /// customer facts must be readable (a deployment without that rule never looks them up).
    pub fn announces_price_changes(&self) -> bool {
        match &self.kinds {
            Kinds::Stated(_) => false,
            Kinds::Obligations(o) => o.rules().any(|(_, r)| r.on == Occasion::PriceChange),
        }
    }

    /// A price change: when some obligation speaks for price changes, the customer's facts are
    /// read from the billing system, the obligations decide the kinds for the customer's
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
        let customers = self.customers.as_ref().ok_or(PlanError::Lookup(LookupError::NotConfigured(
            "the obligations owe price-change notices, and their customer facts come from the billing system",
        )))?;
        let customer = match customers.customer(&change.customer_id).await {
            Ok(c) => c,
            Err(LookupError::NotFound { id, reason }) => {
                return Err(Refused::new(event_type, "customer", format!("{id}: {reason}")).into())
            }
            Err(e) => return Err(PlanError::Lookup(e)),
        };
        let email = customer.email.filter(|e| !e.trim().is_empty()).ok_or_else(|| {
            Refused::new(
                event_type,
                "customer.email",
                "is missing: the customer has no e-mail address on file",
            )
        })?;
        let renewal = Renewal {
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
        };
        let owed = self.owed(event_type, &renewal)?;
        if owed.is_empty() {
            return Ok(vec![IntakeDecision::Ignore {
                reason: format!(
                    "no obligation rule speaks for a price change in {}: the configuration owes no notice",
                    renewal.jurisdiction.as_deref().unwrap_or("no jurisdiction")
                ),
            }]);
        }
        let change_back = change.in_force_minor == Some(change.amount_minor);
        let mut out = Vec::new();
        for owed in owed {
            let kind = owed.kind.as_str();
            if let Some(rule) = &owed.rule {
                tracing::info!(kind, rule, change_back, "price-change notice owed");
            }
            let job = self.owed_job(event_type, &owed, &renewal, 0)?;
            let digest = job.content_digest();
            let period_start = period_of(&job);
            let at = (renewal.subscription_id.as_str(), period_start.as_str(), kind);
            let scanned = self.scan(event_type, at, ledger).await?;
            let choice =
                revision::price_change(&scanned, &digest, change_back).ok_or_else(|| too_many(event_type))?;
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
                    out.extend(withdraw(revisions, "the price went back before the change was announced")?);
                }
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
}
