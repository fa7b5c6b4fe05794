//! The planner: a billing fact and the ledger's rows → the messages to enqueue.
//!
//! This file holds what every fact shares (the kinds owed, a job's body, the ledger scan) and
//! the renewal; each fact with its own rules has its own file: [`price`] (price changes),
//! [`cancel`] (cancellations), [`anniversary`] (reminders planned ahead of their renewal) and
//! [`trial`] (a trial's conversion, planned from the subscription's own events).

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::revision::{self, RevisionChoice, RevisionRows};
use super::{BillingFact, CustomerSource, IntakeDecision, LookupError, Refused, Renewal, SubscriptionSource};
use crate::error::{ConfigError, LedgerError};
use crate::identity::{Identity, Kind, NoticeKey};
use crate::job::{Job, Withdrawal, MAX_WITHDRAW_REASON_CHARS};
use crate::keyring::KeyRing;
use crate::ledger::{RowReader, RowState};
use crate::locale::{Cldr, Locale, Money, TimeZone};
use crate::policy::{Contract, Obligations, Occasion, RuleScope, Window, WindowPolicy};

mod anniversary;
mod cancel;
mod price;
mod trial;

use anniversary::is_first_renewal;
#[cfg(test)]
pub(super) use anniversary::next_renewal;
use trial::Upcoming;

/// Revisions read per ledger round (one `BatchGetItem` on DynamoDB: keys × active versions).
const PAGE: u64 = 8;
/// Most revisions one notice may have. Each is a distinct amount announced for one period; a
/// period with more is a billing system (or an attacker with the signing secret) gone wrong, and
/// the intake refuses rather than reading the ledger without end.
pub const MAX_REVISIONS: u64 = 64;

/// Why a fact could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The fact does not make a valid message (a field the job contract refuses).
    #[error(transparent)]
    Refused(#[from] Refused),
    /// The ledger could not be read: nothing was decided; the webhook must be retried.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    /// The customer's facts could not be read from the billing system (unreachable, timed out,
    /// denied, or no lookup configured): nothing was decided; the webhook must be retried.
    #[error("customer lookup failed: {0}")]
    Lookup(LookupError),
}

/// Which kinds a fact's notices are: the policy's obligations, or the one kind a deployment
/// without obligations states (`NOTICE_INTAKE_KIND`).
#[derive(Clone, Debug)]
pub enum Kinds {
    Stated(Kind),
    /// The obligations, and the widest window of a kind an anniversary rule owes (`None`: no
    /// anniversary rule): how far ahead its reminders are planned ([`anniversary`]).
    Obligations(Obligations, Option<Window>),
}

/// The variable that states the one kind of a deployment without obligations.
pub const STATED_KIND_VAR: &str = "NOTICE_INTAKE_KIND";

impl Kinds {
    /// The kinds under `policy`: its obligations when it has any (then a stated kind is refused:
    /// one place decides), else the stated kind, which is required.
    pub fn from_policy(policy: &WindowPolicy, stated: Option<Kind>) -> Result<Self, ConfigError> {
        let invalid = |reason: String| ConfigError::Invalid { name: STATED_KIND_VAR, reason };
        match (policy.obligations().is_empty(), stated) {
            (true, Some(kind)) => {
                policy.check_kind(kind.as_str()).map_err(|e| invalid(e.to_string()))?;
                Ok(Self::Stated(kind))
            }
            (true, None) => Err(ConfigError::Missing(
                "NOTICE_INTAKE_KIND (the notice configuration's policy has no `obligations` to choose kinds)",
            )),
            (false, Some(kind)) => Err(invalid(format!(
                "is set to {kind:?} but the notice configuration's policy has `obligations`, which choose \
                 the kind of every notice: unset it (a kind for every contract is a `default` rule)"
            ))),
            (false, None) => Ok(Self::Obligations(policy.obligations().clone(), anniversary_window(policy))),
        }
    }

    /// For the start-up line: the stated kind, or how many rules decide.
    pub fn describe(&self) -> String {
        match self {
            Kinds::Stated(kind) => format!("{kind} (stated)"),
            Kinds::Obligations(o, _) => format!("{} obligation rules", o.rules().count()),
        }
    }

    /// Every kind a notice of this deployment can have: what a cancellation withdraws.
    fn all(&self) -> Vec<&str> {
        match self {
            Kinds::Stated(kind) => vec![kind.as_str()],
            Kinds::Obligations(o, _) => o.kinds(),
        }
    }
}

/// The widest window of the kinds anniversary rules owe, in their rules' jurisdictions: its
/// opening says how far ahead a short term's reminder is planned, its closing which terms are
/// short (see [`anniversary`]).
fn anniversary_window(policy: &WindowPolicy) -> Option<Window> {
    policy
        .obligations()
        .rules()
        .filter(|(_, r)| r.anniversary_months.is_some())
        .map(|(scope, r)| {
            let jurisdiction = match scope {
                RuleScope::Default => None,
                RuleScope::Jurisdiction(j) => Some(j),
            };
            policy.effective(Some(&r.kind), jurisdiction).window
        })
        .reduce(|a, b| Window {
            opens_hours_before: a.opens_hours_before.max(b.opens_hours_before),
            closes_hours_before: a.closes_hours_before.max(b.closes_hours_before),
        })
}

/// One notice a renewal owes: its kind and the rule that owes it (`None`: the stated kind).
struct OwedKind {
    kind: String,
    rule: Option<String>,
    /// Owed by an anniversary rule: planned ahead of its renewal (see [`IntakePlanner::plan`]).
    anniversary: bool,
}

/// Plans the messages for billing facts: which kinds are owed, the billing system's time zone,
/// the key ring (to find a notice's rows under every active secret version), and the checks a
/// job is parsed with (the texts crate's `Icu`: the customer's locale and the amount).
pub struct IntakePlanner {
    kinds: Kinds,
    billing_zone: TimeZone,
    keys: KeyRing,
    cldr: Arc<dyn Cldr>,
    /// Where a price change's customer facts are read (`None`: price changes cannot be planned).
    customers: Option<Arc<dyn CustomerSource>>,
    /// Where a subscription's start (and term) are read when an anniversary rule needs them and
    /// the event does not state them (`None`: such an event is refused, naming the fact).
    subscriptions: Option<Arc<dyn SubscriptionSource>>,
}

impl IntakePlanner {
    /// A planner that gives every notice `kind` (a deployment without obligations).
    pub fn new(kind: Kind, billing_zone: TimeZone, keys: KeyRing, cldr: Arc<dyn Cldr>) -> Self {
        Self::with_kinds(Kinds::Stated(kind), billing_zone, keys, cldr)
    }

    pub fn with_kinds(kinds: Kinds, billing_zone: TimeZone, keys: KeyRing, cldr: Arc<dyn Cldr>) -> Self {
        Self { kinds, billing_zone, keys, cldr, customers: None, subscriptions: None }
    }

    /// The same, reading a subscription's start (and term) from `subscriptions` when an
    /// anniversary rule needs it and the event lacks it.
    pub fn with_subscriptions(mut self, subscriptions: Arc<dyn SubscriptionSource>) -> Self {
        self.subscriptions = Some(subscriptions);
        self
    }

    /// The same, reading a price change's customer facts from `customers`.
    pub fn with_customers(mut self, customers: Arc<dyn CustomerSource>) -> Self {
        self.customers = Some(customers);
        self
    }

    pub fn kinds(&self) -> &Kinds {
        &self.kinds
    }

    pub fn billing_zone(&self) -> &TimeZone {
        &self.billing_zone
    }

    pub fn keys(&self) -> &KeyRing {
        &self.keys
    }

    /// The date `at` falls on in the billing system's zone: the notice's `period_start`. One
    /// fixed zone for every path, never the host's (docs/job.md, "Time zones").
    pub fn period_start(&self, at: DateTime<Utc>) -> Result<String, String> {
        let tz = jiff::tz::db()
            .get(self.billing_zone.as_str())
            .map_err(|e| format!("time zone {}: {e}", self.billing_zone))?;
        let ts = jiff::Timestamp::from_second(at.timestamp()).map_err(|e| format!("instant {at}: {e}"))?;
        Ok(tz.to_datetime(ts).date().to_string())
    }

    /// The job of kind `kind` announcing `renewal` at `revision`, validated as the sender will
    /// validate it (no obligation rule named: a stated kind's job).
    pub fn job(
        &self,
        event_type: &str,
        kind: &str,
        renewal: &Renewal,
        revision: u64,
    ) -> Result<Job, Refused> {
        self.owed_job(
            event_type,
            &OwedKind { kind: kind.to_owned(), rule: None, anniversary: false },
            renewal,
            revision,
        )
    }

    /// The job of an owed kind: as [`IntakePlanner::job`], naming the rule that owes it
    /// (`obligation`), so the claim row records why the customer was told.
    fn owed_job(
        &self,
        event_type: &str,
        owed: &OwedKind,
        renewal: &Renewal,
        revision: u64,
    ) -> Result<Job, Refused> {
        let kind = owed.kind.as_str();
        let refused = |field: &str, reason: String| Refused::new(event_type, field, reason);
        let period_start =
            self.period_start(renewal.period_start_at).map_err(|e| refused("period_start", e))?;
        let amount = json!({"minor": renewal.amount_minor, "currency": renewal.currency});
        Money::from_value(&amount, self.cldr.as_ref()).map_err(|e| refused("amount", e))?;
        let mut template_data = Map::new();
        template_data.insert("amount".into(), amount);
        if let Some(plan) = renewal.plan_name.as_deref().filter(|p| !p.trim().is_empty()) {
            template_data.insert("plan_name".into(), Value::String(plan.to_owned()));
        }
        let mut body = json!({
            "subscription_id": renewal.subscription_id,
            "period_start": period_start,
            "kind": kind,
            "revision": revision,
            "email": renewal.email,
            "charge_at": renewal.charge_at.to_rfc3339(),
            "template_data": template_data,
        });
        if let Some(obj) = body.as_object_mut() {
            if let Some(locale) = renewal.locale.as_deref() {
                match Locale::parse(locale, self.cldr.as_ref()) {
                    Ok(l) => {
                        obj.insert("locale".into(), Value::String(l.as_str().to_owned()));
                    }
                    // A language tag the billing system accepted but BCP 47 does not: the notice
                    // goes out in the default language rather than not at all.
                    Err(e) => tracing::warn!(locale, error = %e, "customer locale left out"),
                }
            }
            if let Some(j) = renewal.jurisdiction.as_deref() {
                match crate::jurisdiction::normalise(j) {
                    Ok(j) => {
                        obj.insert("jurisdiction".into(), Value::String(j));
                    }
                    Err(e) => tracing::warn!(jurisdiction = j, error = %e, "customer jurisdiction left out"),
                }
            }
            if let Some(rule) = &owed.rule {
                obj.insert("obligation".into(), Value::String(rule.clone()));
            }
        }
        Job::from_value(&body, self.cldr.as_ref()).map_err(|e| refused(e.field, e.reason))
    }

    /// The messages for one fact: at most one send or a few withdraws, chosen from the ledger's
    /// rows for the notice ([`revision`]); an unhandled fact is one `Ignore`.
    pub async fn plan(
        &self,
        event_type: &str,
        fact: &BillingFact,
        ledger: &dyn RowReader,
    ) -> Result<Vec<IntakeDecision>, PlanError> {
        match fact {
            BillingFact::Renewal(renewal) => match self.trial_ending_at(event_type, renewal).await? {
                Upcoming::Renewal(renewal) => self.plan_renewal(event_type, &renewal, ledger).await,
                Upcoming::Trial(trial) => self.plan_trial_conversion(event_type, &trial, ledger).await,
                Upcoming::Stale(reason) => Ok(vec![IntakeDecision::Ignore { reason }]),
            },
            BillingFact::TrialConversion(t) => self.plan_trial(event_type, t, ledger).await,
            BillingFact::Cancellation(c) => self.plan_cancellation(event_type, c, ledger).await,
            BillingFact::PriceChange(change) => self.plan_price_change(event_type, change, ledger).await,
            BillingFact::Unhandled { reason, .. } => {
                Ok(vec![IntakeDecision::Ignore { reason: reason.clone() }])
            }
        }
    }

    /// The kinds `renewal` owes: the stated one, or the obligations' answer for its contract.
    fn owed(&self, event_type: &str, renewal: &Renewal) -> Result<Vec<OwedKind>, Refused> {
        let obligations = match &self.kinds {
            Kinds::Stated(kind) => {
                return Ok(vec![OwedKind { kind: kind.as_str().to_owned(), rule: None, anniversary: false }])
            }
            Kinds::Obligations(obligations, _) => obligations,
        };
        let jurisdiction =
            renewal.jurisdiction.as_deref().and_then(|j| crate::jurisdiction::normalise(j).ok());
        let contract = Contract {
            term: renewal.term,
            trial_days: renewal.trial_days,
            started_at: renewal.started_at,
            charge_at: Some(renewal.period_start_at),
            ..Contract::new(renewal.occasion, jurisdiction.as_deref())
        };
        let owed = obligations
            .owed(&contract)
            .map_err(|e| Refused::new(event_type, "obligations", e.to_string()))?;
        Ok(owed
            .iter()
            .map(|o| OwedKind {
                kind: o.kind.to_owned(),
                rule: Some(o.rule_id()),
                anniversary: o.rule.anniversary_months.is_some(),
            })
            .collect())
    }

    /// A renewal's notices. An anniversary reminder (Colorado: 25–40 days before a renewal that
    /// crosses a 12-month anniversary) is planned **ahead**: the event of the charge before it
    /// plans it, and the sender parks it until its window opens — a billing system's
    /// upcoming-renewal event comes a few days before each charge, which for a monthly plan is
    /// always too late for such a window. For a term no longer than the window's closing edge
    /// (weekly, daily) one renewal ahead is too late as well: every renewal's event within the
    /// window's opening plus one term before it plans it, each the same body, so the ledger sends
    /// it once ([`anniversary`]). Its own event plans it only when there was no charge before it
    /// to plan it from (the first renewal: an annual plan's first anniversary).
    async fn plan_renewal(
        &self,
        event_type: &str,
        renewal: &Renewal,
        ledger: &dyn RowReader,
    ) -> Result<Vec<IntakeDecision>, PlanError> {
        let renewal = &self.with_start(event_type, renewal).await?;
        let owed = self.owed(event_type, renewal)?;
        if owed.is_empty() {
            return Ok(vec![IntakeDecision::Ignore {
                reason: format!(
                    "no obligation rule speaks for {} in {}: the configuration owes no notice",
                    renewal.occasion.phrase(),
                    renewal.jurisdiction.as_deref().unwrap_or("no jurisdiction")
                ),
            }]);
        }
        let first = is_first_renewal(renewal);
        let mut out = Vec::new();
        for owed in owed {
            if owed.anniversary && !first {
                tracing::info!(
                    kind = owed.kind,
                    rule = owed.rule,
                    "anniversary reminder: planned from the renewal before"
                );
                continue;
            }
            if let Some(rule) = &owed.rule {
                tracing::info!(kind = owed.kind, rule, "notice owed");
            }
            out.extend(self.plan_kind(event_type, &owed, renewal, ledger).await?);
        }
        for next in self.renewals_ahead(renewal) {
            for owed in self.anniversaries_ahead(event_type, &next)? {
                tracing::info!(kind = owed.kind, rule = owed.rule, charge_at = %next.charge_at, "anniversary reminder owed for the next renewal");
                out.extend(self.plan_kind(event_type, &owed, &next, ledger).await?);
            }
        }
        Ok(out)
    }

    /// The messages for one owed kind of `renewal` (see [`revision`]).
    async fn plan_kind(
        &self,
        event_type: &str,
        owed: &OwedKind,
        renewal: &Renewal,
        ledger: &dyn RowReader,
    ) -> Result<Vec<IntakeDecision>, PlanError> {
        let kind = owed.kind.as_str();
        let job = self.owed_job(event_type, owed, renewal, 0)?;
        let digest = job.content_digest();
        let (subscription_id, period_start) = (renewal.subscription_id.as_str(), period_of(&job));
        let at = (subscription_id, period_start.as_str(), kind);
        let scanned = self.scan(event_type, at, ledger).await?;
        // A trial's conversion is planned weeks ahead and its amount may change while it is
        // parked: one notice per announced content ([`revision::announcement`]). An anniversary
        // reminder is planned by the events of the charges before it, whose amounts may differ:
        // told once ([`revision::reminder`]). Every other notice is planned from its charge's own
        // event: [`revision::choose`].
        let choice = if renewal.occasion == Occasion::TrialConversion {
            revision::announcement(&scanned, &digest)
        } else if owed.anniversary {
            revision::reminder(&scanned, &digest)
        } else {
            revision::choose(&scanned, &digest)
        };
        Ok(match choice.ok_or_else(|| too_many(event_type))? {
            RevisionChoice::Reuse(revision) => {
                vec![IntakeDecision::Send(self.owed_job(event_type, owed, renewal, revision)?)]
            }
            RevisionChoice::Withdrawn(revision) => vec![IntakeDecision::Ignore {
                reason: format!(
                    "the {kind} notice for period {period_start} was withdrawn (revision {revision}): the subscription ends with it"
                ),
            }],
            RevisionChoice::Told(revision) => vec![IntakeDecision::Ignore {
                reason: format!(
                    "the {kind} reminder for period {period_start} was already told (revision {revision}): a reminder planned ahead is not planned again"
                ),
            }],
            RevisionChoice::Mint { revision, .. } if revision >= MAX_REVISIONS => return Err(too_many(event_type)),
            RevisionChoice::Mint { revision, superseded } => {
                let mut out = Vec::with_capacity(superseded.len() + 1);
                for old in superseded {
                    let reason = format!(
                        "{}: the announced terms changed",
                        revision::superseded_mark(revision, &digest)
                    );
                    out.push(IntakeDecision::Withdraw(self.withdrawal(event_type, at, old, &reason)?));
                }
                out.push(IntakeDecision::Send(self.owed_job(event_type, owed, renewal, revision)?));
                out
            }
        })
    }

    fn withdrawal(
        &self,
        event_type: &str,
        (subscription_id, period_start, kind): Notice<'_>,
        revision: u64,
        reason: &str,
    ) -> Result<Withdrawal, Refused> {
        let reason: String =
            reason.chars().filter(|c| !c.is_control()).take(MAX_WITHDRAW_REASON_CHARS).collect();
        let body = json!({
            "action": "withdraw",
            "subscription_id": subscription_id,
            "period_start": period_start,
            "kind": kind,
            "revision": revision,
            "reason": reason,
        });
        Withdrawal::from_value(&body).map_err(|e| Refused::new(event_type, e.field, e.reason))
    }

    /// The rows of revisions 0, 1, … of the notice, a page at a time, up to the first revision
    /// without a row (or [`MAX_REVISIONS`]).
    async fn scan(
        &self,
        event_type: &str,
        (subscription_id, period_start, kind): Notice<'_>,
        ledger: &dyn RowReader,
    ) -> Result<Vec<RevisionRows>, PlanError> {
        let mut scanned: Vec<RevisionRows> = Vec::new();
        let mut from = 0;
        while from < MAX_REVISIONS {
            let to = (from + PAGE).min(MAX_REVISIONS);
            let mut revision_of: HashMap<NoticeKey, u64> = HashMap::new();
            for revision in from..to {
                let identity = Identity::new(subscription_id, period_start, kind, revision)
                    .map_err(|e| Refused::new(event_type, e.field, e.reason))?;
                for key in self.keys.active_keys(&identity) {
                    revision_of.insert(key, revision);
                }
            }
            let keys: Vec<NoticeKey> = revision_of.keys().cloned().collect();
            let rows = ledger.get_many(&keys).await?;
            let mut page: Vec<RevisionRows> =
                (from..to).map(|revision| RevisionRows { revision, rows: Vec::new() }).collect();
            for row in rows.into_iter().filter(|r| r.state != RowState::Alias) {
                if let Some(revision) = revision_of.get(&row.key) {
                    if let Some(slot) = usize::try_from(revision - from).ok().and_then(|i| page.get_mut(i)) {
                        slot.rows.push(row);
                    }
                }
            }
            let reached_gap = page.iter().any(RevisionRows::is_empty);
            scanned.extend(page);
            if reached_gap {
                break;
            }
            from = to;
        }
        Ok(scanned)
    }
}

/// A notice's identity but its revision: (subscription, period, kind).
type Notice<'a> = (&'a str, &'a str, &'a str);

fn period_of(job: &Job) -> String {
    job.identity.period_start().format("%Y-%m-%d").to_string()
}

fn too_many(event_type: &str) -> PlanError {
    PlanError::Refused(Refused::new(
        event_type,
        "revision",
        format!(
            "would exceed {MAX_REVISIONS}: this period already has {MAX_REVISIONS} notices with different content"
        ),
    ))
}
