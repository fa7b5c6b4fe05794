//! Cancellations: the period's notice of every kind withdrawn, and the anniversary reminders
//! planned ahead withdrawn for the periods after it that an event could have planned them for
//! ([`periods_ahead`]: the next one; for a weekly or daily term every crossing renewal up to the
//! window's opening plus one term on).

use super::anniversary::{is_short, periods_ahead};
use super::{too_many, IntakePlanner, Kinds, PlanError};
use crate::identity::Identity;
use crate::intake::revision::{self, WithdrawChoice};
use crate::intake::{Cancellation, IntakeDecision, LookupError, Refused};
use crate::ledger::RowReader;

impl IntakePlanner {
    /// A cancellation withdraws the period's notice of every kind the deployment can send: the
    /// event does not say which ones were owed, and a tombstone where none was owed costs one row.
    /// The anniversary kinds are withdrawn for the periods after it too: their reminders for
    /// those renewals were planned ahead and may be parked already.
    pub(super) async fn plan_cancellation(
        &self,
        event_type: &str,
        cancellation: &Cancellation,
        ledger: &dyn RowReader,
    ) -> Result<Vec<IntakeDecision>, PlanError> {
        let period_start = self
            .period_start(cancellation.period_start_at)
            .map_err(|e| Refused::new(event_type, "period_start", e))?;
        let mut out = Vec::new();
        let announced_kinds = self.announced_kinds();
        let mut periods = vec![(period_start.clone(), self.kinds.all())];
        if !self.anniversary_kinds().is_empty() {
            periods.extend(self.periods_after(event_type, cancellation).await?);
        }
        for (period_start, kinds) in periods {
            self.withdraw_period(
                event_type,
                cancellation,
                &period_start,
                kinds,
                &announced_kinds,
                ledger,
                &mut out,
            )
            .await?;
        }
        Ok(out)
    }

    /// The periods after the cancelled one whose anniversary reminders were planned ahead, each
    /// with the kinds to withdraw there ([`periods_ahead`], the planner's own grid): the term from
    /// the event, else from the billing system's record; neither → refused naming the term (a
    /// reminder left standing would tell a cancelled customer of a renewal that will not happen).
    /// For a short term the start is read too where the event lacks it, so only the crossing
    /// renewals are withdrawn; unknown, every period in the range is.
    async fn periods_after(
        &self,
        event_type: &str,
        cancellation: &Cancellation,
    ) -> Result<Vec<(String, Vec<&str>)>, PlanError> {
        let Kinds::Obligations(_, Some(window)) = &self.kinds else { return Ok(Vec::new()) };
        let period = cancellation.period_start_at;
        let (mut term, mut started) = (cancellation.term, cancellation.started_at);
        // Only a missing term, or a short term's missing start, is worth a lookup: a longer
        // term's next period is one term on without the start.
        let wanted = term.is_none_or(|t| started.is_none() && is_short(t, period, *window));
        if let Some(source) = self.subscriptions.as_ref().filter(|_| wanted) {
            match source.subscription(&cancellation.subscription_id).await {
                Ok(found) => {
                    term = term.or(found.term);
                    started = started.or(found.started_at);
                }
                Err(LookupError::NotFound { .. }) => {}
                Err(e) => return Err(PlanError::Lookup(e)),
            }
        }
        let refused = |reason: String| Refused::new(event_type, "term", reason);
        let term = term.ok_or_else(|| {
            refused(
                "is not stated and cannot be read: the anniversary reminder planned for the renewal \
                 after this one cannot be found to withdraw"
                    .into(),
            )
        })?;
        let ahead = periods_ahead(term, started, period, *window);
        if ahead.is_empty() {
            return Err(refused(format!("{term} after {period} is out of range")).into());
        }
        let short = is_short(term, period, *window);
        let mut out = Vec::new();
        for at in ahead {
            let kinds = self.anniversary_kinds_at(term, started, at, short);
            if !kinds.is_empty() {
                let start = self.period_start(at).map_err(|e| Refused::new(event_type, "period_start", e))?;
                out.push((start, kinds));
            }
        }
        Ok(out)
    }

    /// Withdraws the notices of `kinds` for one period of a cancelled subscription.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn withdraw_period(
        &self,
        event_type: &str,
        cancellation: &Cancellation,
        period_start: &str,
        kinds: Vec<&str>,
        announced_kinds: &[&str],
        ledger: &dyn RowReader,
        out: &mut Vec<IntakeDecision>,
    ) -> Result<(), PlanError> {
        let subscription_id = cancellation.subscription_id.as_str();
        for kind in kinds {
            // Validates the identity before the ledger is read (a bad id is refused, not looked up).
            Identity::new(subscription_id, period_start, kind, 0)
                .map_err(|e| Refused::new(event_type, e.field, e.reason))?;
            let at = (subscription_id, period_start, kind);
            let scanned = self.scan(event_type, at, ledger).await?;
            // An announced kind's tombstones (a price change's, a trial conversion's) do not all
            // end its period (a pending notice may sit past a superseded one, without a row): its
            // first revision without a row is always withdrawn.
            let choice = if announced_kinds.contains(&kind) {
                revision::withdraw_pending(&scanned, &cancellation.reason)
            } else {
                revision::withdraw(&scanned)
            };
            match choice.ok_or_else(|| too_many(event_type))? {
                WithdrawChoice::AlreadyWithdrawn(revision) => out.push(IntakeDecision::Ignore {
                    reason: format!(
                        "the {kind} notice for period {period_start} is already withdrawn (revision {revision})"
                    ),
                }),
                WithdrawChoice::Withdraw(revisions) => {
                    for r in revisions {
                        let w = self.withdrawal(event_type, at, r, &cancellation.reason)?;
                        out.push(IntakeDecision::Withdraw(w));
                    }
                }
            }
        }
        Ok(())
    }
}
