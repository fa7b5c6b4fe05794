//! The model: the bounded world with its rules — how it is built from the bounds, how its compact
//! rows stand for real ones, and every call into the project's rules.
//!
//! The rules are pure functions of the row they read, so each distinct input is computed once by the
//! real function and looked up after that: the search stays on the real rules and spends its time
//! on states, not on re-building rows.

use std::cell::RefCell;

use notice_ledger::ledger::rules::{self, Verdict, Write};
use notice_ledger::ledger::{
    apply_to_row, learned_row, DeliveryStatus, EvidenceEffect, LedgerRow, Origin, ProviderEvidence,
    QuarantineView, RowState,
};
use notice_testkit::MemoryLedger;

use super::state::{bit, Msg, Role, Row, SlotInfo, State};
use crate::verify::args::Bounds;
use crate::verify::error::VerifyError;
use crate::verify::fast_hash::FastMap;
use crate::verify::mutants::Rules;
use crate::verify::sender::Core;
use crate::verify::world::{
    epoch, message_id, parse_message_id, parse_token, token, Phase, EVENTS, MAX_BATCH, MAX_KEYS, MAX_NOTICES,
    MAX_SENDS, MAX_SLOTS, MAX_WORKERS,
};

/// The world with its rules.
pub(in crate::verify) struct Model {
    pub(in crate::verify) core: Core,
    pub(super) rules: Rules,
    pub(super) bounds: Bounds,
    pub(super) slots: Vec<SlotInfo>,
    /// The notice each key belongs to.
    pub(super) key_notice: Vec<u8>,
    /// Each notice's keys, oldest secret version first (one unless the world rotates the secret).
    pub(super) notice_keys: Vec<Vec<u8>>,
    /// Groups of interchangeable messages (the duplicates of one notice, all claiming one key).
    pub(super) twins: Vec<Vec<usize>>,
    pub(super) calls: Calls,
}

impl Model {
    /// The world `bounds` describes, under `rules`; refused if `rules` has a mutant the world
    /// cannot run ([`Mutant::runs_in`](crate::verify::mutants::Mutant::runs_in)).
    pub(in crate::verify) fn new(bounds: Bounds, rules: Rules) -> Result<Self, VerifyError> {
        if rules.mutant.is_some_and(|m| !m.runs_in(&bounds)) {
            return Err(VerifyError::Bound("this mutant needs --rate-gate on (a withdraw mutant --withdraws 1, a parking mutant --parking on, a batch mutant --batch 2; see `Mutant::runs_in`)".into()));
        }
        Self::build(bounds, rules)
    }

    /// [`Model::new`] without the mutant check: a test shows with it that a world which cannot
    /// run a mutant indeed cannot tell it from the real rules.
    pub(in crate::verify) fn build(bounds: Bounds, rules: Rules) -> Result<Self, VerifyError> {
        let bad = |what: String| Err(VerifyError::Bound(what));
        if !(1..=MAX_WORKERS).contains(&usize::from(bounds.workers)) {
            return bad(format!("--workers must be 1 to {MAX_WORKERS}"));
        }
        if !(1..=MAX_NOTICES).contains(&usize::from(bounds.notices)) {
            return bad(format!("--notices must be 1 to {MAX_NOTICES}"));
        }
        if !(1..=MAX_BATCH).contains(&usize::from(bounds.batch)) {
            return bad(format!("--batch must be 1 to {MAX_BATCH}"));
        }
        let mut plan = Vec::new();
        for notice in 0..bounds.notices {
            let copies = if notice == 0 { bounds.deliveries } else { 1 };
            for i in 0..copies {
                plan.push((notice, if i == 0 { Role::Original } else { Role::Extra }));
            }
            if bounds.releases > 0 {
                plan.push((notice, Role::Replay));
            }
            if notice == 0 && bounds.withdraws > 0 {
                plan.push((notice, Role::Withdraw));
            }
        }
        if bounds.deliveries == 0 || plan.len() > MAX_SLOTS {
            return bad(format!(
                "--deliveries must be at least 1 and the world at most {MAX_SLOTS} messages"
            ));
        }
        let variants = if rules.key_per_delivery() { plan.len() } else { 1 };
        if bounds.rotation && rules.key_per_delivery() {
            return bad("a rotation world runs one sender per secret version, not one per delivery".into());
        }
        let mut core = Core::new(
            usize::from(bounds.notices),
            variants,
            bounds.rate_gate,
            rules.wiring(),
            bounds.rotation,
        )?;
        let mut slots = Vec::with_capacity(plan.len());
        let mut key_notice = Vec::new();
        for (i, (notice, role)) in plan.into_iter().enumerate() {
            let variant = if rules.key_per_delivery() { u8::try_from(i).unwrap_or(u8::MAX) } else { 0 };
            let key = core.key_of(variant, notice)?;
            if usize::from(key) == key_notice.len() {
                key_notice.push(notice);
            }
            slots.push(SlotInfo { notice, role, key, variant });
        }
        // Each notice's keys, oldest version first: the one its messages name, then (rotating)
        // its key under the newer version.
        let mut notice_keys: Vec<Vec<u8>> = (0..bounds.notices)
            .map(|n| slots.iter().filter(|s| s.notice == n).map(|s| s.key).take(1).collect())
            .collect();
        if bounds.rotation {
            for (notice, keys) in (0..bounds.notices).zip(notice_keys.iter_mut()) {
                let key = core.key_of(1, notice)?;
                if usize::from(key) == key_notice.len() {
                    key_notice.push(notice);
                }
                keys.push(key);
            }
        }
        let mut twins = Vec::new();
        if !rules.key_per_delivery() {
            for notice in 0..bounds.notices {
                let group: Vec<usize> = (0..slots.len())
                    .filter(|&i| slots[i].notice == notice && slots[i].role == Role::Extra)
                    .collect();
                if group.len() > 1 {
                    twins.push(group);
                }
            }
        }
        Ok(Self { core, rules, bounds, slots, key_notice, notice_keys, twins, calls: Calls::default() })
    }

    pub(in crate::verify) fn initial(&self) -> State {
        let mut queue = [Msg::Gone; MAX_SLOTS];
        for (q, slot) in queue.iter_mut().zip(&self.slots) {
            *q = if slot.role == Role::Original { Msg::Visible } else { Msg::Pending };
        }
        State {
            phase: Phase::Early,
            queue,
            workers: [None; MAX_WORKERS],
            rows: [None; MAX_KEYS],
            retired: 0,
            sends: [None; MAX_SENDS],
            detected: 0,
            released: [0; MAX_NOTICES],
            withdraw_answers: 0,
            paged: false,
        }
    }

    pub(super) fn slot(&self, slot: u8) -> Result<SlotInfo, VerifyError> {
        self.slots
            .get(usize::from(slot))
            .copied()
            .ok_or_else(|| VerifyError::Corrupt(format!("no message {slot}")))
    }

    /// The key `notice` lives at and its row: the oldest key holding a row of it other than an
    /// alias, else one whose decided row the TTL deleted, else its newest key — the real placement's rule ([`Placement::decide`]), read off
    /// the whole ledger. Without rotation, its one key.
    ///
    /// [`Placement::decide`]: notice_ledger::deliver::Placement::decide
    pub(super) fn home(&self, s: &State, notice: u8) -> Result<(u8, Option<Row>), VerifyError> {
        let keys = self
            .notice_keys
            .get(usize::from(notice))
            .ok_or_else(|| VerifyError::Corrupt(format!("no keys of notice {notice}")))?;
        let lives =
            keys.iter().find(|&&k| s.rows[usize::from(k)].is_some_and(|r| r.state != RowState::Alias));
        // A decided row the TTL deleted: the notice lived there.
        let retired = keys.iter().find(|&&k| s.retired & bit(k) != 0);
        let key = lives
            .or(retired)
            .or(keys.last())
            .copied()
            .ok_or_else(|| VerifyError::Corrupt(format!("notice {notice} has no key")))?;
        Ok((key, s.rows[usize::from(key)]))
    }

    pub(super) fn notice_of_key(&self, key: u8) -> Result<u8, VerifyError> {
        self.key_notice.get(usize::from(key)).copied().ok_or_else(|| {
            VerifyError::Unexpected(format!(
                "the sender used key {key}, which no message of the world claims"
            ))
        })
    }

    // ── rows: compact ↔ real ──

    /// The real row a compact one stands for, for the real rules to read.
    fn real(&self, row: &Row, key: u8) -> Result<LedgerRow, VerifyError> {
        let origin = *Origin::ALL
            .get(usize::from(row.origin))
            .ok_or_else(|| VerifyError::Corrupt(format!("origin {}", row.origin)))?;
        let mut real = LedgerRow {
            key: self.core.key(key)?.clone(),
            state: row.state,
            origin,
            claim_token: row.token.map(token),
            subscription_id: String::new(),
            period_start: String::new(),
            kind: String::new(),
            revision: 0,
            content_digest: None,
            claimed_at: row.claimed_at.then(epoch),
            on_quarantine_view: row.listed,
            updated_at: epoch(),
            message_id: row.message.map(message_id),
            detail: None,
            delivery_status: row.status,
            duplicate_message_ids: (0..8u8)
                .filter(|m| row.duplicates & bit(*m) != 0)
                .map(message_id)
                .collect(),
            charge_at: None,
            jurisdiction: None,
            rendered: None,
            obligation: None,
        };
        if let Some(n) = row.notice {
            let notice = self.core.notice(n)?;
            let id = &notice.job.identity;
            real.subscription_id = id.subscription_id().to_owned();
            real.period_start = id.period_start().format("%Y-%m-%d").to_string();
            real.kind = id.kind().as_str().to_owned();
            real.revision = id.revision();
            real.content_digest = Some(notice.digest.clone());
        }
        Ok(real)
    }

    /// The compact row of a real one the rules wrote.
    fn compact(&self, row: &LedgerRow) -> Result<Row, VerifyError> {
        let mut duplicates = 0u8;
        for id in &row.duplicate_message_ids {
            duplicates |= bit(parse_message_id(id)?);
        }
        Ok(Row {
            state: row.state,
            origin: Origin::ALL
                .iter()
                .position(|o| *o == row.origin)
                .and_then(|i| u8::try_from(i).ok())
                .unwrap_or(0),
            token: row.claim_token.as_ref().map(parse_token).transpose()?,
            notice: row.content_digest.as_deref().map(|d| self.core.notice_of_digest(d)).transpose()?,
            claimed_at: row.claimed_at.is_some(),
            listed: row.state == RowState::Claimed && row.on_quarantine_view,
            message: row.message_id.as_deref().map(parse_message_id).transpose()?,
            duplicates,
            status: row.delivery_status,
        })
    }
}

/// A write the ledger is asked to make, by the model's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Probe {
    /// The dedupe read: would a claim with this token be refused? The row is read as stored, so
    /// the real rule decides (never a mutant's).
    Read(u8),
    Claim(u8),
    Commit(u8),
    Operator,
    Withdraw,
    /// An alias beside a first write under the newer secret version.
    Alias,
}

/// What applying one provider event did.
#[derive(Clone, Copy, Debug)]
pub(super) struct Applied {
    pub(super) row: Row,
    pub(super) effect: &'static str,
    /// The message id reported as a duplicate send.
    pub(super) duplicate: Option<u8>,
}

type Cache<K, V> = RefCell<FastMap<K, V>>;

/// Inputs by the model's numbers: key, row, and the write / message, event / notice, phase, token.
#[derive(Default)]
pub(super) struct Calls {
    verdicts: Cache<(u8, Option<Row>, Probe), Verdict>,
    evidence: Cache<(u8, Option<Row>, u8, u8), Applied>,
    written: Cache<(u8, u8, Phase, u8, RowState, bool), Row>,
    on_view: Cache<(u8, Row), bool>,
    tombstones: Cache<(u8, u8, Phase), Row>,
    aliases: Cache<(u8, u8, Row), Row>,
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
                Probe::Read(t) => rules::permits(existing.as_ref(), Write::Claim { token: &token(t) }),
                Probe::Claim(t) => self.rules.permits(existing.as_ref(), Write::Claim { token: &token(t) }),
                Probe::Commit(t) => self.rules.permits(existing.as_ref(), Write::Commit { token: &token(t) }),
                Probe::Operator => self.rules.permits(existing.as_ref(), Write::Operator),
                Probe::Withdraw => self.rules.permits(existing.as_ref(), Write::Withdraw),
                Probe::Alias => self.rules.permits(existing.as_ref(), Write::Alias),
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
                Some(r)
                    if r.state == RowState::Withdrawn
                        && status != DeliveryStatus::Accepted
                        && self.rules.any_event_leaves_withdrawn() =>
                {
                    // Mutant: a Delivery / Bounce / Reject event moves the tombstone as if it were
                    // an open claim — sent, and nothing counted.
                    let mut real = self.real(&r, key)?;
                    real.state = RowState::Sent;
                    real.message_id = Some(ev.message_id.clone());
                    real.delivery_status = Some(status);
                    (real, EvidenceEffect::Updated)
                }
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
                EvidenceEffect::SentAfterWithdraw => ("SentAfterWithdraw", None),
                EvidenceEffect::KeptWithdrawn => ("kept withdrawn", None),
                EvidenceEffect::DuplicateSend { second, .. } => {
                    ("DuplicateSendsDetected", Some(parse_message_id(second)?))
                }
            };
            Ok(Applied { row: self.compact(&real)?, effect, duplicate })
        })
    }

    /// The row a claim (`Claimed`) or a recorded miss (`Missed`) with token `t` writes, on the
    /// quarantine view or not as the sender's request asked (`listed`): the real request's own
    /// `to_row`.
    pub(super) fn written(
        &self,
        notice: u8,
        key: u8,
        now: Phase,
        t: u8,
        (state, listed): (RowState, bool),
    ) -> Result<Row, VerifyError> {
        remember(&self.calls.written, (notice, key, now, t, state, listed), || {
            self.compact(&self.core.written_row(notice, key, now, t, (state, listed))?)
        })
    }

    /// The tombstone a withdraw message of `notice` writes: the real request's own `to_row`.
    pub(super) fn tombstone(&self, notice: u8, key: u8, now: Phase) -> Result<Row, VerifyError> {
        remember(&self.calls.tombstones, (notice, key, now), || {
            self.compact(&self.core.tombstone_row(notice, key, now)?)
        })
    }

    /// The alias at `alias` (the notice's key under the older secret version) that a first write
    /// of `row` at `key` puts there: the real `LedgerRow::alias_at`.
    pub(super) fn alias_row(&self, alias: u8, key: u8, row: Row) -> Result<Row, VerifyError> {
        remember(&self.calls.aliases, (alias, key, row), || {
            let written = self.real(&row, key)?;
            self.compact(&LedgerRow::alias_at(self.core.key(alias)?, &written))
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
