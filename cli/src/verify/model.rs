//! The bounded world, its transitions and its invariants.
//!
//! World: 1–3 notices (A; A', its revision bump; B, another subscriber at the same domain), each
//! with its own SQS messages — A has `--deliveries` of them (the first enqueued at the start, the
//! others — broker duplicate, producer re-enqueue — whenever), A' and B one each — plus one replay
//! message per notice that only an operator release enqueues. `--workers` workers take messages one
//! at a time. A coarse clock moves from before the window to inside it to after it.
//!
//! Transitions, any of them enabled in any order:
//! * the clock moves on; a further message is enqueued; an idle worker receives a visible message;
//! * a dead worker's message becomes visible again (with `in_flight_redelivery`, a live worker's
//!   too: another worker may receive it while the first still runs it);
//! * a worker takes its next step — the real sender's next port call, answered every way the
//!   ledger (applied, refused, an error — with the write applied too under `Faults::Ambiguous`) or
//!   the provider (accepted,
//!   not accepted, rejected, unknown with or without the message out) can answer it — or, once the
//!   sender has finished, acks or retries by [`Outcome::disposition`](notice_ledger::Outcome);
//! * a worker crashes (before any step, or after its last and before the ack);
//! * the reconciler applies a Send / Delivery / Bounce / Reject event of any accepted message, any
//!   number of times (or never), through the real evidence rules;
//! * an operator releases an open claim (and replays the notice);
//! * once a notice is settled, the ledger's TTL deletes rows [`rules::expires`] allows.
//!
//! [`rules::expires`]: notice_ledger::ledger::rules::expires

mod calls;
mod moves;
mod trace;

use notice_ledger::ledger::{DeliveryStatus, LedgerRow, Origin, RowState};
use serde::Serialize;

use super::mutants::Rules;
use super::world::{
    epoch, message_id, parse_message_id, parse_token, token, Answer, Answers, Core, Phase, QueueAction, Step,
};
use super::VerifyError;
use trace::list;

pub(super) const MAX_WORKERS: usize = 3;
pub(super) const MAX_SLOTS: usize = 8;
pub(super) const MAX_KEYS: usize = 8;
pub(super) const MAX_SENDS: usize = 8;
pub(super) const MAX_NOTICES: usize = 3;

/// The size of the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Bounds {
    pub(crate) workers: u8,
    /// Messages of notice A (original plus duplicates / re-enqueues).
    pub(crate) deliveries: u8,
    pub(crate) notices: u8,
    /// Operator releases in the whole run (each followed by a replay of the notice).
    pub(crate) releases: u8,
    /// How ledger calls may fail.
    pub(crate) ledger_faults: Faults,
    /// A message may come back while its worker still runs it (visibility expiring mid-job, or a
    /// standard queue delivering it twice): two jobs of one message at once.
    pub(crate) in_flight_redelivery: bool,
    /// A delete with a stale receipt may still delete the message (SQS: "might not be deleted").
    pub(crate) stale_deletes: bool,
}

/// How ledger calls may fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Faults {
    /// Every call succeeds.
    Off,
    /// A call may fail; a failed write was not applied. What the adapters give: a write whose
    /// response was lost is retried by the SDK and recognised as their own (DynamoDB: `ALL_OLD`).
    Clean,
    /// Also: a write was applied but the caller gets an error (its response and every SDK retry lost).
    Ambiguous,
}

/// Where one SQS message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Msg {
    /// Not enqueued (yet).
    Pending,
    Visible,
    /// Received by this worker, whose job holds the current receipt.
    InFlight(u8),
    /// Received by a worker that crashed: back when the visibility timeout expires.
    Orphan,
    Gone,
    DeadLetter,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Original,
    Extra,
    Replay,
}

#[derive(Clone, Copy, Debug)]
struct SlotInfo {
    notice: u8,
    role: Role,
    /// The key this message's jobs claim.
    key: u8,
    /// The sender (key variant) its jobs run on.
    variant: u8,
}

/// One ledger row, as much of it as the rules read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Row {
    state: RowState,
    origin: u8,
    token: Option<u8>,
    /// Whose identity and content the row holds (`None`: learned from provider events).
    notice: Option<u8>,
    claimed_at: bool,
    message: Option<u8>,
    duplicates: u8,
    status: Option<DeliveryStatus>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Job {
    slot: u8,
    now: Phase,
    token: Option<u8>,
    answers: Answers,
    /// The queue already deleted its message (ack-before-commit mutant).
    acked: bool,
}

/// A message the provider accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Sent {
    notice: u8,
    key: u8,
    /// The reconciler has applied one of its events.
    seen: bool,
}

/// One state of the world.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct State {
    phase: Phase,
    queue: [Msg; MAX_SLOTS],
    workers: [Option<Job>; MAX_WORKERS],
    rows: [Option<Row>; MAX_KEYS],
    /// Keys whose decided row the TTL deleted (after the retention period).
    retired: u8,
    /// Provider acceptances, by message id.
    sends: [Option<Sent>; MAX_SENDS],
    /// Message ids the reconciler reported as a duplicate send (`DuplicateSendsDetected`).
    detected: u8,
    /// Operator releases, per notice.
    released: [u8; MAX_NOTICES],
}

/// What the provider did with one SendEmail attempt.
#[derive(Clone, Copy, Debug)]
pub(super) enum Attempt {
    Accepted(u8),
    /// Accepted, but the answer never arrived (timeout / 5xx after the send).
    TimedOut(u8),
    /// 5xx before anything went out.
    Failed,
    NotAccepted,
    Rejected,
}

/// One transition, for the trace.
#[derive(Clone, Copy, Debug)]
pub(super) enum Label {
    Tick(Phase),
    Enqueue { slot: u8 },
    Receive { worker: u8, slot: u8, now: Phase },
    Expire { slot: u8 },
    Crash { worker: u8, before: &'static str },
    Call { worker: u8, step: Step, answer: Answer, applied: bool, attempts: [Option<Attempt>; 2] },
    Finish { worker: u8, slot: u8, outcome: &'static str, queue: QueueAction, effect: &'static str },
    EarlyAck { worker: u8, slot: u8 },
    Event { message: u8, event: u8, effect: &'static str },
    OperatorRelease { key: u8, replay: Option<u8> },
    Ttl { key: u8, state: RowState },
}

/// The properties checked in every state (or on every transition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Invariant {
    OneAcceptance,
    DuplicatesDetected,
    AckAfterDurable,
    NoSilentEnd,
    NeverBackwards,
    InsideWindow,
}

impl Invariant {
    pub(crate) const ALL: [Invariant; 6] = [
        Invariant::OneAcceptance,
        Invariant::DuplicatesDetected,
        Invariant::AckAfterDurable,
        Invariant::NoSilentEnd,
        Invariant::NeverBackwards,
        Invariant::InsideWindow,
    ];

    pub(crate) fn statement(self) -> &'static str {
        match self {
            Invariant::OneAcceptance => {
                "at most one provider acceptance per notice, plus one per explicit operator release"
            }
            Invariant::DuplicatesDetected => {
                "every extra acceptance is detected (DuplicateSendsDetected) once its events arrive"
            }
            Invariant::AckAfterDurable => "nothing is acked before its ledger state is durable",
            Invariant::NoSilentEnd => {
                "every job ends sent, rejected, missed, or quarantined with the claim on the reporter's view"
            }
            Invariant::NeverBackwards => "a key never moves backwards (e.g. sent → claimed, claim → no row)",
            Invariant::InsideWindow => "nothing is sent outside its window",
        }
    }
}

/// A broken invariant.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Violation {
    pub(crate) invariant: Invariant,
    pub(crate) detail: String,
}

fn broken(invariant: Invariant, detail: impl Into<String>) -> Option<Violation> {
    Some(Violation { invariant, detail: detail.into() })
}

/// A successor state and how it was reached.
pub(super) struct Succ {
    pub(super) label: Label,
    pub(super) next: State,
    pub(super) broken: Option<Violation>,
    /// Where each worker of the previous state went in `next` (states keep workers sorted).
    pub(super) renumbered: [u8; MAX_WORKERS],
    /// Where each message went in `next` (interchangeable duplicates are kept sorted).
    pub(super) moved: [u8; MAX_SLOTS],
}

/// The world with its rules.
pub(super) struct Model {
    core: Core,
    rules: Rules,
    bounds: Bounds,
    slots: Vec<SlotInfo>,
    /// The notice each key belongs to.
    key_notice: Vec<u8>,
    /// Groups of interchangeable messages (the duplicates of one notice, all claiming one key).
    twins: Vec<Vec<usize>>,
    calls: calls::Calls,
}

const fn bit(i: u8) -> u8 {
    1 << i
}

impl Model {
    pub(super) fn new(bounds: Bounds, rules: Rules) -> Result<Self, VerifyError> {
        let bad = |what: String| Err(VerifyError::Bound(what));
        if !(1..=MAX_WORKERS).contains(&usize::from(bounds.workers)) {
            return bad(format!("--workers must be 1 to {MAX_WORKERS}"));
        }
        if !(1..=MAX_NOTICES).contains(&usize::from(bounds.notices)) {
            return bad(format!("--notices must be 1 to {MAX_NOTICES}"));
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
        }
        if bounds.deliveries == 0 || plan.len() > MAX_SLOTS {
            return bad(format!(
                "--deliveries must be at least 1 and the world at most {MAX_SLOTS} messages"
            ));
        }
        let variants = if rules.key_per_delivery() { plan.len() } else { 1 };
        let mut core = Core::new(usize::from(bounds.notices), variants)?;
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
        Ok(Self { core, rules, bounds, slots, key_notice, twins, calls: calls::Calls::default() })
    }

    pub(super) fn initial(&self) -> State {
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
        }
    }

    fn slot(&self, slot: u8) -> Result<SlotInfo, VerifyError> {
        self.slots
            .get(usize::from(slot))
            .copied()
            .ok_or_else(|| VerifyError::Corrupt(format!("no message {slot}")))
    }

    fn notice_of_key(&self, key: u8) -> Result<u8, VerifyError> {
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
            updated_at: epoch(),
            message_id: row.message.map(message_id),
            detail: None,
            delivery_status: row.status,
            duplicate_message_ids: (0..8u8)
                .filter(|m| row.duplicates & bit(*m) != 0)
                .map(message_id)
                .collect(),
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
            message: row.message_id.as_deref().map(parse_message_id).transpose()?,
            duplicates,
            status: row.delivery_status,
        })
    }

    /// A claim token no row and no job holds: what `ClaimToken::random` gives in practice.
    fn fresh_token(&self, s: &State) -> Result<u8, VerifyError> {
        let used = |t: u8| {
            s.rows.iter().flatten().any(|r| r.token == Some(t))
                || s.workers.iter().flatten().any(|j| j.token == Some(t))
        };
        (0..u8::MAX).find(|t| !used(*t)).ok_or_else(|| VerifyError::Bound("claim tokens".into()))
    }

    /// No message of `notice` is on the queue or in a worker, and none can be enqueued but a replay.
    fn settled(&self, s: &State, notice: u8) -> bool {
        self.quiet(s, notice)
            && self
                .slots
                .iter()
                .zip(&s.queue)
                .all(|(info, q)| info.notice != notice || info.role == Role::Replay || *q != Msg::Pending)
    }

    /// No message of `notice` is visible, in flight, or in a worker.
    fn quiet(&self, s: &State, notice: u8) -> bool {
        let on_queue = self.slots.iter().zip(&s.queue).any(|(info, q)| {
            info.notice == notice && matches!(q, Msg::Visible | Msg::InFlight(_) | Msg::Orphan)
        });
        let in_worker = s
            .workers
            .iter()
            .flatten()
            .any(|j| self.slots.get(usize::from(j.slot)).is_some_and(|i| i.notice == notice));
        !on_queue && !in_worker
    }

    // ── invariants on states ──

    pub(super) fn check(&self, s: &State) -> Result<Option<Violation>, VerifyError> {
        for notice in 0..self.bounds.notices {
            let ids: Vec<u8> = (0..MAX_SENDS as u8)
                .filter(|m| s.sends[usize::from(*m)].is_some_and(|x| x.notice == notice))
                .collect();
            let accepted = ids.len();
            let released = usize::from(s.released[usize::from(notice)]);
            let name = self.notice_name(notice);
            if accepted > 1 + released {
                return Ok(broken(
                    Invariant::OneAcceptance,
                    format!("notice {name}: {accepted} messages accepted ({}) after {released} operator release(s)", list(&ids)),
                ));
            }
            let all_seen = ids.iter().all(|m| s.sends[usize::from(*m)].is_some_and(|x| x.seen));
            let detected = ids.iter().filter(|m| s.detected & bit(**m) != 0).count();
            if accepted > 1 && all_seen && detected + 1 < accepted {
                return Ok(broken(
                    Invariant::DuplicatesDetected,
                    format!("notice {name}: {accepted} messages accepted ({}), every one's events applied, {detected} duplicate(s) detected", list(&ids)),
                ));
            }
            if self.quiet(s, notice) {
                if let Some(v) = self.ended(s, notice)? {
                    return Ok(Some(v));
                }
            }
        }
        Ok(None)
    }

    /// Every message of a quiet notice ended sent, rejected, missed or quarantined on the reporter's view.
    fn ended(&self, s: &State, notice: u8) -> Result<Option<Violation>, VerifyError> {
        for (i, info) in self.slots.iter().enumerate() {
            if info.notice != notice || s.queue[i] != Msg::Gone {
                continue;
            }
            let row = s.rows[usize::from(info.key)];
            let fine = match row.map(|r| r.state) {
                Some(RowState::Sent | RowState::Rejected | RowState::Missed) => true,
                Some(RowState::Claimed) => row.map_or(Ok(false), |r| self.on_quarantine_view(info.key, r))?,
                None => s.retired & bit(info.key) != 0,
                Some(RowState::Released) => false,
            };
            if !fine {
                let what = row.map_or("no ledger row".to_owned(), |r| format!("its row {}", r.state));
                let detail =
                    format!("{} was acked and nothing will bring it back: {what}", self.slot_role(i as u8));
                return Ok(broken(Invariant::NoSilentEnd, detail));
            }
        }
        Ok(None)
    }
}

/// A transition that moves a row backwards: a decided row reopened or changed, an open claim taken
/// over by another token or deleted. Deleting a decided row is retention, allowed only to the TTL.
fn backwards(before: &State, after: &State, ttl: bool, model: &Model) -> Option<Violation> {
    for (key, (b, a)) in before.rows.iter().zip(&after.rows).enumerate() {
        let (Some(b), a) = (b, a) else { continue };
        let ok = match a {
            None => ttl && b.state != RowState::Claimed,
            Some(a) => match b.state {
                RowState::Sent => a.state == RowState::Sent && a.message == b.message,
                RowState::Rejected | RowState::Missed => a.state == b.state || a.state == RowState::Sent,
                RowState::Claimed => a.state != RowState::Claimed || a.token == b.token,
                RowState::Released => true,
            },
        };
        if !ok {
            let to = a.map_or("no row".to_owned(), |a| match (a.state, a.token) {
                (RowState::Claimed, Some(t)) => format!("claimed t{t}"),
                (state, _) => state.to_string(),
            });
            let from = match (b.state, b.token) {
                (RowState::Claimed, Some(t)) => format!("claimed t{t}"),
                (state, _) => state.to_string(),
            };
            return broken(
                Invariant::NeverBackwards,
                format!("{} moved {from} → {to}", model.key_name(key as u8)),
            );
        }
    }
    None
}

impl Model {
    /// Duplicates of one notice are interchangeable: sort each group by what happens to it (its
    /// queue state and the jobs holding it), and renumber the jobs. Returns where each message went.
    fn canonical_messages(&self, s: &mut State) -> [u8; MAX_SLOTS] {
        let mut moved: [u8; MAX_SLOTS] = std::array::from_fn(|i| i as u8);
        for group in &self.twins {
            let signature = |i: usize| {
                let kind = match s.queue[i] {
                    Msg::Pending => 0,
                    Msg::Visible => 1,
                    Msg::InFlight(_) => 2,
                    Msg::Orphan => 3,
                    Msg::Gone => 4,
                    Msg::DeadLetter => 5,
                };
                let mut jobs =
                    s.workers.map(|j| j.filter(|j| usize::from(j.slot) == i).map(|j| Job { slot: 0, ..j }));
                jobs.sort();
                (kind, jobs)
            };
            let mut order = group.clone();
            order.sort_by_key(|&i| signature(i));
            if order == *group {
                continue;
            }
            let old = s.queue;
            for (&to, &from) in group.iter().zip(&order) {
                s.queue[to] = old[from];
                moved[from] = to as u8;
            }
            for job in s.workers.iter_mut().flatten() {
                job.slot = moved[usize::from(job.slot)];
            }
        }
        moved
    }
}

/// Workers are interchangeable: sort them, and renumber the messages they hold. Returns where each
/// worker went (for traces, which keep calling a worker by one name).
fn canonical(s: &mut State, workers: usize) -> [u8; MAX_WORKERS] {
    let mut renumber = [0, 1, 2];
    let mut order: Vec<usize> = (0..workers).collect();
    order.sort_by_key(|&i| s.workers[i]);
    if order.iter().enumerate().all(|(new, old)| new == *old) {
        return renumber;
    }
    let old = s.workers;
    for (new, &i) in order.iter().enumerate() {
        s.workers[new] = old[i];
        renumber[i] = new as u8;
    }
    for q in s.queue.iter_mut() {
        if let Msg::InFlight(w) = q {
            *q = Msg::InFlight(renumber[usize::from(*w)]);
        }
    }
    renumber
}
