//! Every call into the project's rules, remembered by its (compact) input.
//!
//! The rules are pure functions of the row they read, so each distinct input is computed once by the
//! real function and looked up after that: the search stays on the real rules and spends its time
//! on states, not on re-building rows.

use std::cell::RefCell;
use std::collections::HashMap;

use notice_ledger::ledger::memory::MemoryLedger;
use notice_ledger::ledger::rules::{Verdict, Write};
use notice_ledger::ledger::{
    apply_to_row, learned_row, EvidenceEffect, ProviderEvidence, QuarantineView, RowState,
};

use super::super::world::{epoch, message_id, parse_message_id, token, Phase, EVENTS};
use super::super::VerifyError;
use super::{Model, Row};

/// A write the ledger is asked to make, by the model's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Probe {
    Claim(u8),
    Commit(u8),
    Operator,
}

/// What applying one provider event did.
#[derive(Clone, Copy, Debug)]
pub(super) struct Applied {
    pub(super) row: Row,
    pub(super) effect: &'static str,
    /// The message id reported as a duplicate send.
    pub(super) duplicate: Option<u8>,
}

type Cache<K, V> = RefCell<HashMap<K, V>>;

/// Inputs by the model's numbers: key, row, and the write / message, event / notice, phase, token.
#[derive(Default)]
pub(super) struct Calls {
    verdicts: Cache<(u8, Option<Row>, Probe), Verdict>,
    evidence: Cache<(u8, Option<Row>, u8, u8), Applied>,
    written: Cache<(u8, u8, Phase, u8, RowState), Row>,
    on_view: Cache<(u8, Row), bool>,
}

fn remember<K: std::hash::Hash + Eq, V: Copy>(
    cache: &Cache<K, V>,
    key: K,
    compute: impl FnOnce() -> Result<V, VerifyError>,
) -> Result<V, VerifyError> {
    if let Some(v) = cache.borrow().get(&key) {
        return Ok(*v);
    }
    let v = compute()?;
    cache.borrow_mut().insert(key, v);
    Ok(v)
}

impl Model {
    /// [`rules::permits`](notice_ledger::ledger::rules::permits) (through the mutant switch) on
    /// the row `row` of `key`.
    pub(super) fn verdict(&self, key: u8, row: Option<Row>, probe: Probe) -> Result<Verdict, VerifyError> {
        remember(&self.calls.verdicts, (key, row, probe), || {
            let existing = row.map(|r| self.real(&r, key)).transpose()?;
            Ok(match probe {
                Probe::Claim(t) => self.rules.permits(existing.as_ref(), Write::Claim { token: &token(t) }),
                Probe::Commit(t) => self.rules.permits(existing.as_ref(), Write::Commit { token: &token(t) }),
                Probe::Operator => self.rules.permits(existing.as_ref(), Write::Operator),
            })
        })
    }

    /// The reconciler applying event `event` of message `m` to `row` of `key`: the real
    /// `learned_row` / `apply_to_row`, as every evidence adapter does.
    pub(super) fn apply_event(
        &self,
        key: u8,
        row: Option<Row>,
        m: u8,
        event: u8,
    ) -> Result<Applied, VerifyError> {
        remember(&self.calls.evidence, (key, row, m, event), || {
            let status = EVENTS
                .get(usize::from(event))
                .map(|e| e.1)
                .ok_or_else(|| VerifyError::Corrupt(format!("event {event}")))?;
            let ev = ProviderEvidence {
                key: self.core.key(key)?.clone(),
                message_id: message_id(m),
                status,
                at: epoch(),
            };
            let (real, effect) = match row {
                None => (learned_row(&ev), EvidenceEffect::Learned),
                Some(r) => {
                    let mut real = self.real(&r, key)?;
                    let effect = apply_to_row(&mut real, &ev);
                    (real, effect)
                }
            };
            let (effect, duplicate) = match &effect {
                EvidenceEffect::Resolved => ("resolved", None),
                EvidenceEffect::Learned => ("learned", None),
                EvidenceEffect::Updated => ("updated", None),
                EvidenceEffect::DuplicateSend { second, .. } => {
                    ("DuplicateSendsDetected", Some(parse_message_id(second)?))
                }
            };
            Ok(Applied { row: self.compact(&real)?, effect, duplicate })
        })
    }

    /// The row a claim (`Claimed`) or a recorded miss (`Missed`) with token `t` writes: the real
    /// request's own `to_row`.
    pub(super) fn written(
        &self,
        notice: u8,
        key: u8,
        now: Phase,
        t: u8,
        state: RowState,
    ) -> Result<Row, VerifyError> {
        remember(&self.calls.written, (notice, key, now, t, state), || {
            self.compact(&self.core.written_row(notice, key, now, t, state)?)
        })
    }

    /// Whether the reporter's quarantine view (the memory ledger's `open_claims`) lists `row` of `key`.
    pub(super) fn on_quarantine_view(&self, key: u8, row: Row) -> Result<bool, VerifyError> {
        remember(&self.calls.on_view, (key, row), || {
            let real = self.real(&row, key)?;
            let wanted = real.key.clone();
            let ledger = MemoryLedger::new();
            ledger.insert(real);
            let later = Phase::Closed.at() + chrono::Duration::days(30);
            // The memory ledger answers at once: a future that is not ready is a model error.
            let open = futures::FutureExt::now_or_never(ledger.open_claims(later, usize::MAX))
                .ok_or_else(|| VerifyError::Unexpected("the memory ledger did not answer at once".into()))?
                .map_err(|e| VerifyError::Unexpected(e.to_string()))?;
            Ok(open.iter().any(|r| r.key == wanted))
        })
    }
}
