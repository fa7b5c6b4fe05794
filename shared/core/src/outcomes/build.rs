//! Where an outcome event comes from: the sender's [`Outcome`] with the message it delivered,
//! the reconciler's evidence with the row it applied it to, or a ledger row on its own.

use chrono::{DateTime, Utc};

use super::{OutcomeEvent, OutcomeKind, PublishedBy, SCHEMA_VERSION};
use crate::deliver::{Delivery, Outcome};
use crate::job::Message;
use crate::ledger::{DeliveryStatus, EvidenceEffect, LedgerRow, ProviderEvidence, RowState};

/// Which of the sender's outcomes the business hears about — the one table.
///
/// | outcome | event |
/// |---|---|
/// | `Sent` | `sent` |
/// | `Missed` | `missed` |
/// | `Withdrawn` (also a repeated withdraw: at least once) | `withdrawn` |
/// | `WithdrawTooLate` | `withdraw_too_late` |
/// | `Rejected` | `rejected` |
/// | anything else | none |
///
/// None for the rest, because none is a notice's outcome: `Suppressed` (a duplicate of one
/// already published), `InFlight`, `Deferred`, `RateLimited`, `Released`, `NoTimeLeft`,
/// `LedgerUnavailable` (it comes back and ends later), `Quarantined` (unknown until provider
/// evidence or an operator resolves it), `PayloadConflict`, `Invalid`, `RenderFailed` (the
/// producer's error, dead-lettered and paged), `ShadowSent` (shadow mode answers to another
/// sender), `WithdrawNotNeeded` (its `missed` or `rejected` event went out when it was recorded).
pub fn published_as(outcome: &Outcome) -> Option<OutcomeKind> {
    match outcome {
        Outcome::Sent { .. } => Some(OutcomeKind::Sent),
        Outcome::Missed { .. } => Some(OutcomeKind::Missed),
        Outcome::Withdrawn { .. } => Some(OutcomeKind::Withdrawn),
        Outcome::WithdrawTooLate { .. } => Some(OutcomeKind::WithdrawTooLate),
        Outcome::Rejected { .. } => Some(OutcomeKind::Rejected),
        Outcome::Suppressed { .. }
        | Outcome::InFlight { .. }
        | Outcome::Deferred { .. }
        | Outcome::RateLimited { .. }
        | Outcome::Released { .. }
        | Outcome::Quarantined { .. }
        | Outcome::PayloadConflict { .. }
        | Outcome::ShadowSent { .. }
        | Outcome::Invalid(_)
        | Outcome::RenderFailed(_)
        | Outcome::LedgerUnavailable(_)
        | Outcome::NoTimeLeft
        | Outcome::WithdrawNotNeeded { .. } => None,
    }
}

/// Whether provider evidence the reconciler applied is one of the notice's outcomes — the other
/// half of [`published_as`]'s rule, for the reconciler: a bounce or a complaint on the notice's own
/// message (the row updated, or its claim resolved by it). On a duplicate's message (a second
/// message id) or a withdrawn row's it is not the notice's; a send, a delivery or a delay is no
/// outcome the business acts on (`sent` was published by the sender, or is evidence only).
pub fn evidence_published(effect: &EvidenceEffect, status: DeliveryStatus) -> bool {
    matches!(effect, EvidenceEffect::Updated | EvidenceEffect::Resolved)
        && matches!(status, DeliveryStatus::Bounced | DeliveryStatus::Complained)
}

/// `charge_at - at` in hours, rounded to two decimals.
pub fn hours_before(charge_at: DateTime<Utc>, at: DateTime<Utc>) -> f64 {
    let secs = (charge_at - at).num_seconds() as f64;
    (secs / 36.0).round() / 100.0
}

impl OutcomeEvent {
    /// The event for one delivery of `message` that ended at `at`, or `None` when its outcome is
    /// not published ([`published_as`]) or it has no key. `config_version`: the notice
    /// configuration version the sender judged and rendered it under (kept for `sent`, `missed`
    /// and `rejected`: a withdraw is judged under none).
    pub fn for_delivery(
        delivery: &Delivery,
        message: &Message,
        at: DateTime<Utc>,
        config_version: Option<&str>,
    ) -> Option<Self> {
        let outcome = published_as(&delivery.outcome)?;
        let key = delivery.key.as_ref()?;
        let identity = message.identity();
        let (charge_at, jurisdiction, obligation) = match message {
            Message::Send(job) => (Some(job.charge_at), job.jurisdiction.clone(), job.obligation.clone()),
            Message::Withdraw(_) => (None, None, None),
        };
        let (reason, message_id) = match &delivery.outcome {
            Outcome::Sent { message_id } => (None, Some(message_id.clone())),
            Outcome::Missed { closed_at } => {
                (Some(format!("send window closed at {}", closed_at.to_rfc3339())), None)
            }
            Outcome::Rejected { reason } => (Some(reason.clone()), None),
            Outcome::Withdrawn { already } => {
                let why = match message {
                    Message::Withdraw(w) => w.reason.clone(),
                    Message::Send(_) => None,
                };
                let why = match (why, *already) {
                    (Some(why), true) => Some(format!("{why} (already withdrawn)")),
                    (None, true) => Some("already withdrawn".into()),
                    (why, false) => why,
                };
                (why, None)
            }
            Outcome::WithdrawTooLate { state, at } => {
                (Some(format!("the notice was already {state} at {}", at.to_rfc3339())), None)
            }
            _ => (None, None),
        };
        let judged = matches!(outcome, OutcomeKind::Sent | OutcomeKind::Missed | OutcomeKind::Rejected);
        Some(Self {
            schema_version: SCHEMA_VERSION,
            notice_key: key.as_str().to_owned(),
            subscription_id: identity.subscription_id().to_owned(),
            period_start: identity.period_start().format("%Y-%m-%d").to_string(),
            kind: identity.kind().as_str().to_owned(),
            revision: identity.revision(),
            outcome,
            at,
            charge_at,
            hours_before_charge: charge_at.map(|c| hours_before(c, at)),
            reason,
            message_id,
            config_version: config_version.filter(|_| judged).map(str::to_owned),
            jurisdiction,
            obligation,
            published_by: PublishedBy::Sender,
        })
    }

    /// The event for provider evidence the reconciler applied to `row` (the row as it reads
    /// after): `bounced` or `complained`, else `None` — as for a row with no identity (learned
    /// from provider events), which the business could not match to anything.
    pub fn for_evidence(row: &LedgerRow, evidence: &ProviderEvidence) -> Option<Self> {
        let outcome = match evidence.status {
            DeliveryStatus::Bounced => OutcomeKind::Bounced,
            DeliveryStatus::Complained => OutcomeKind::Complained,
            _ => return None,
        };
        let mut event = Self::of_row(row, outcome, evidence.at, None, PublishedBy::Reconciler)?;
        event.message_id = Some(evidence.message_id.clone());
        Some(event)
    }

    /// Every outcome event a ledger row stands for (`noticectl outcomes republish`): `sent`
    /// (plus `bounced` or `complained` when the row's delivery status says so), `missed`,
    /// `rejected`, `withdrawn`. None for open claims, released rows, aliases and rows without an
    /// identity. A `withdraw_too_late` leaves no row of its own: it cannot be re-published.
    pub fn from_row(row: &LedgerRow) -> Vec<Self> {
        let sent_at = row.claimed_at.unwrap_or(row.updated_at);
        let mut events = Vec::new();
        let mut push = |kind, at, reason: Option<String>| {
            if let Some(e) = Self::of_row(row, kind, at, reason, PublishedBy::Ledger) {
                events.push(e);
            }
        };
        match row.state {
            RowState::Sent => {
                push(OutcomeKind::Sent, sent_at, None);
                match row.delivery_status {
                    Some(DeliveryStatus::Bounced) => push(OutcomeKind::Bounced, row.updated_at, None),
                    Some(DeliveryStatus::Complained) => push(OutcomeKind::Complained, row.updated_at, None),
                    _ => {}
                }
            }
            RowState::Missed => push(OutcomeKind::Missed, row.updated_at, row.detail.clone()),
            RowState::Rejected => push(OutcomeKind::Rejected, sent_at, row.detail.clone()),
            RowState::Withdrawn => push(OutcomeKind::Withdrawn, row.updated_at, row.detail.clone()),
            RowState::Claimed | RowState::Released | RowState::Alias => {}
        }
        events
    }

    /// An event of `outcome` for `row` at `at`; `None` when the row has no identity.
    fn of_row(
        row: &LedgerRow,
        outcome: OutcomeKind,
        at: DateTime<Utc>,
        reason: Option<String>,
        by: PublishedBy,
    ) -> Option<Self> {
        if row.subscription_id.is_empty() {
            return None;
        }
        Some(Self {
            schema_version: SCHEMA_VERSION,
            notice_key: row.key.as_str().to_owned(),
            subscription_id: row.subscription_id.clone(),
            period_start: row.period_start.clone(),
            kind: row.kind.clone(),
            revision: row.revision,
            outcome,
            at,
            charge_at: row.charge_at,
            hours_before_charge: row.charge_at.map(|c| hours_before(c, at)),
            reason,
            message_id: row.message_id.clone(),
            config_version: row.rendered.as_ref().map(|r| r.config_version.clone()),
            jurisdiction: row.jurisdiction.clone(),
            obligation: row.obligation.clone(),
            published_by: by,
        })
    }
}
