//! Folding the provider's evidence into a row: the one definition of what a Send, Delivery,
//! Bounce or Reject event does to a row, shared by every adapter that can read-modify-write, and
//! the bounds that keep a forged or flooded event stream from growing a row.

use chrono::{DateTime, Utc};

use super::detail::{bounded_text, MAX_REASON_CHARS};
use super::row::{DeliveryStatus, LedgerRow, Origin, RowState};
use crate::identity::NoticeKey;

/// Evidence from the provider's event stream that a message for `key` went out (or was refused
/// after acceptance).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderEvidence {
    pub key: NoticeKey,
    pub message_id: String,
    pub status: DeliveryStatus,
    pub at: DateTime<Utc>,
}

/// Duplicate message ids a row keeps. Each one is a real second send (and is counted in
/// `DuplicateSendsDetected` as it is seen); a few prove it, and a forged or flooded event stream
/// cannot grow a row towards DynamoDB's 400 KB item limit.
pub const MAX_DUPLICATE_IDS: usize = 5;
/// Longest provider message id accepted from an event (SES ids are about 60 characters).
pub const MAX_MESSAGE_ID_LEN: usize = 256;
/// How far past its receive time an event's own timestamp may lie. Clocks differ a little; an event
/// dated further ahead is clamped, so it cannot push `updated_at` (and the row's expiry) out.
pub const EVENT_CLOCK_SKEW_SECS: i64 = 300;

impl ProviderEvidence {
    /// Evidence as the ledger may store it: the message id checked (printable ASCII, bounded) and
    /// the event time clamped to `received_at` plus [`EVENT_CLOCK_SKEW_SECS`].
    pub fn bounded(
        key: NoticeKey,
        message_id: &str,
        status: DeliveryStatus,
        at: DateTime<Utc>,
        received_at: DateTime<Utc>,
    ) -> Result<Self, String> {
        if message_id.is_empty() || message_id.len() > MAX_MESSAGE_ID_LEN {
            return Err(format!(
                "message id must be 1 to {MAX_MESSAGE_ID_LEN} bytes, got {}",
                message_id.len()
            ));
        }
        if !message_id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("message id must be printable ASCII without spaces".into());
        }
        let latest = received_at + chrono::Duration::seconds(EVENT_CLOCK_SKEW_SECS);
        Ok(Self { key, message_id: message_id.to_owned(), status, at: at.min(latest) })
    }
}

/// What applying provider evidence did to the row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvidenceEffect {
    /// A `claimed` (or `released`) row became `sent`: a quarantined claim closed by evidence.
    Resolved,
    /// No row existed: a `sent` row learned from provider events was created.
    Learned,
    /// The row already knew this message; its delivery status moved forward (or stayed).
    Updated,
    /// A second, different message id for the key: a duplicate really went out.
    DuplicateSend { first: String, second: String },
    /// A `Send` event for a `withdrawn` key: the notice went out after all (its job was claimed and
    /// sent before the tombstone, by a path the ledger did not see — a restored table, a second
    /// sender on another ledger). The row becomes `sent`; `SentAfterWithdraw` counts it.
    SentAfterWithdraw,
    /// Any other event for a `withdrawn` key: nothing changes — only a `Send` event proves the
    /// notice went out, and one follows for every message SES accepted.
    KeptWithdrawn,
}

/// Evidence applied: what it did, and the row as it stands right after it — what the reconciler
/// builds a bounce's or complaint's outcome event from, without reading the row again.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    pub effect: EvidenceEffect,
    pub row: LedgerRow,
}

/// Applies `ev` to the row as it stands (`None`: no row), leaving `current` as the row after it:
/// a learned row when there was none, else [`apply_to_row`].
pub fn apply_to_current(current: &mut Option<LedgerRow>, ev: &ProviderEvidence) -> Applied {
    let (effect, row) = match current.take() {
        None => (EvidenceEffect::Learned, learned_row(ev)),
        Some(mut row) => (apply_to_row(&mut row, ev), row),
    };
    *current = Some(row.clone());
    Applied { effect, row }
}

/// Evidence for one key, applied in order to the row as read (`None`: no row): each event sees
/// the row as the events before it left it. The last answer's row is the one to write back
/// (when it differs from what was read); an empty `evidence` answers nothing.
pub fn apply_in_order<'a>(
    read: Option<LedgerRow>,
    evidence: impl IntoIterator<Item = &'a ProviderEvidence>,
) -> Vec<Applied> {
    let mut current = read;
    evidence.into_iter().map(|ev| apply_to_current(&mut current, ev)).collect()
}

/// The positions of `evidence` grouped by key, each group in the order given, groups in the order
/// their keys first appear: what a batch applies concurrently (one group per key) and in order
/// (within a group).
pub fn positions_by_key(evidence: &[ProviderEvidence]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of: std::collections::HashMap<&NoticeKey, usize> = std::collections::HashMap::new();
    for (i, ev) in evidence.iter().enumerate() {
        let g = *group_of.entry(&ev.key).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(i);
    }
    groups
}

/// A `sent` row for a key the ledger had never seen (e.g. restored from an older backup).
pub fn learned_row(ev: &ProviderEvidence) -> LedgerRow {
    LedgerRow {
        key: ev.key.clone(),
        state: RowState::Sent,
        origin: Origin::ProviderEvents,
        claim_token: None,
        subscription_id: String::new(),
        period_start: String::new(),
        kind: String::new(),
        revision: 0,
        content_digest: None,
        claimed_at: None,
        on_quarantine_view: false,
        updated_at: ev.at,
        message_id: Some(ev.message_id.clone()),
        detail: Some("learned from provider events".into()),
        delivery_status: Some(ev.status),
        duplicate_message_ids: Vec::new(),
        charge_at: None,
        jurisdiction: None,
        rendered: None,
        obligation: None,
    }
}

/// Applies evidence to an existing row in place: the one definition of the evidence rules,
/// shared by every adapter that can read-modify-write. A row it moves out of `claimed` leaves the
/// quarantine view, as every store reads it back ([`LedgerRow::on_quarantine_view`]), so the row
/// answered ([`Applied`]) is the row stored.
pub fn apply_to_row(row: &mut LedgerRow, ev: &ProviderEvidence) -> EvidenceEffect {
    let effect = fold_into_row(row, ev);
    if row.state != RowState::Claimed {
        row.on_quarantine_view = false;
    }
    effect
}

fn fold_into_row(row: &mut LedgerRow, ev: &ProviderEvidence) -> EvidenceEffect {
    if row.state == RowState::Withdrawn {
        if ev.status != DeliveryStatus::Accepted {
            return EvidenceEffect::KeptWithdrawn;
        }
        row.state = RowState::Sent;
        row.message_id = Some(ev.message_id.clone());
        row.delivery_status = Some(ev.status);
        row.updated_at = row.updated_at.max(ev.at);
        let was = row.detail.take().unwrap_or_default();
        row.detail = Some(bounded_text(&format!("sent after it was {was}"), MAX_REASON_CHARS));
        return EvidenceEffect::SentAfterWithdraw;
    }
    let effect = match row.message_id.as_deref() {
        Some(first) if first != ev.message_id => {
            let first = first.to_owned();
            if row.duplicate_message_ids.len() < MAX_DUPLICATE_IDS
                && !row.duplicate_message_ids.contains(&ev.message_id)
            {
                row.duplicate_message_ids.push(ev.message_id.clone());
            }
            return EvidenceEffect::DuplicateSend { first, second: ev.message_id.clone() };
        }
        Some(_) if row.state == RowState::Sent => EvidenceEffect::Updated,
        _ => {
            row.message_id = Some(ev.message_id.clone());
            if row.state == RowState::Sent {
                EvidenceEffect::Updated
            } else {
                row.state = RowState::Sent;
                EvidenceEffect::Resolved
            }
        }
    };
    row.delivery_status = Some(DeliveryStatus::advance(row.delivery_status, ev.status));
    row.updated_at = row.updated_at.max(ev.at);
    effect
}
