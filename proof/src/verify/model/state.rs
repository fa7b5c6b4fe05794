//! One state of the bounded world and one transition out of it: where each message is, what each
//! worker's job got so far, the ledger's rows (as much of them as the rules read), what the
//! provider accepted — and the invariants every state must keep.

use notice_ledger::ledger::{DeliveryStatus, RowState};
use serde::Serialize;

use crate::verify::world::{
    Answer, Answers, Phase, QueueAction, Step, MAX_BATCH, MAX_CALLS, MAX_KEYS, MAX_NOTICES, MAX_SENDS,
    MAX_SLOTS, MAX_WORKERS,
};

/// Where one SQS message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Msg {
    /// Not enqueued (yet).
    Pending,
    Visible,
    /// Visible again after a receive (its visibility expired, or it was hidden and came back):
    /// its next receive is a redelivery (`ApproximateReceiveCount` > 1), which the sender reads
    /// before taking a token. A parked job fires as a new message: [`Msg::Visible`].
    Returned,
    /// Received by this worker, whose job holds the current receipt.
    InFlight(u8),
    /// Received by a worker that crashed: back when the visibility timeout expires.
    Orphan,
    Gone,
    DeadLetter,
    /// Off the queue in the schedule named by this key (one per key): back on the queue when it
    /// fires.
    Parked(u8),
    /// Hidden on the queue for longer than the queue keeps a message (hide-too-long mutant).
    HiddenLong,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Original,
    Extra,
    Replay,
    /// A withdraw message of the notice (`"action": "withdraw"`).
    Withdraw,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct SlotInfo {
    pub(super) notice: u8,
    pub(super) role: Role,
    /// The key this message's jobs claim.
    pub(super) key: u8,
    /// The sender (key variant) its jobs run on (in a rotation world, each receive chooses).
    pub(super) variant: u8,
}

/// One ledger row, as much of it as the rules read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Row {
    pub(super) state: RowState,
    pub(super) origin: u8,
    pub(super) token: Option<u8>,
    /// Whose identity and content the row holds (`None`: learned from provider events).
    pub(super) notice: Option<u8>,
    pub(super) claimed_at: bool,
    /// An open claim on the quarantine view (`LedgerRow::on_quarantine_view`).
    pub(super) listed: bool,
    pub(super) message: Option<u8>,
    pub(super) duplicates: u8,
    pub(super) status: Option<DeliveryStatus>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Job {
    pub(super) slot: u8,
    /// The sender (key variant) running it: the message's own, or in a rotation world the
    /// version the receiving worker holds (0: the old secret alone, 1: both, the new current).
    pub(super) variant: u8,
    pub(super) now: Phase,
    pub(super) token: Option<u8>,
    pub(super) answers: Answers,
    /// Its message was received before ([`Msg::Returned`]): a redelivery, read first.
    pub(super) again: bool,
    /// The queue already deleted its message (ack-before-commit mutant).
    pub(super) acked: bool,
    /// Whether the ledger had already decided the key (a claim would be refused) when this job
    /// read it; `None` before a read (or without one: a record answered by its batch's read
    /// finds it in [`Batch::decided`]).
    pub(super) read_decided: Option<bool>,
    /// The batch path (`--batch 2`): the batch this job's record came in, whose prefetch it runs
    /// first (`None`: the job reads and takes its token alone).
    pub(super) batch: Option<Batch>,
}

/// What a worker's batch shares: the prefetch's answers, what its read found, and the record
/// still to run. Its records run one after the other, each as a [`Job`] of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Batch {
    /// The batch's record still to run after this one: its message, held by this worker.
    pub(super) next: Option<u8>,
    /// The body of the batch's other record ([`Batch::body_code`]), one of the bodies the
    /// prefetch reads for (`None`: a batch of one).
    pub(super) mate: Option<u8>,
    /// The other record's message was received before (a redelivery, read first).
    pub(super) mate_again: bool,
    /// The prefetch's port calls' answers so far: the read's (one a key, or one failure), then
    /// the token take's (one a key, or one failure).
    pub(super) answers: Answers,
    /// Keys the batch read answered (it did not fail).
    pub(super) read: u8,
    /// Of those, the ones the ledger had already decided when the batch read them.
    pub(super) decided: u8,
}

impl Batch {
    /// A body (notice, withdraw) as one number.
    pub(super) fn body_code(notice: u8, withdraw: bool) -> u8 {
        notice << 1 | u8::from(withdraw)
    }

    pub(super) fn body(code: u8) -> (u8, bool) {
        (code >> 1, code & 1 == 1)
    }

    /// Whether the batch read answered `key`, and if so whether the key was decided then.
    pub(super) fn decided_at_read(self, key: u8) -> Option<bool> {
        (self.read & bit(key) != 0).then_some(self.decided & bit(key) != 0)
    }
}

/// A message the provider accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Sent {
    pub(super) notice: u8,
    pub(super) key: u8,
    /// The reconciler has applied one of its events.
    pub(super) seen: bool,
}

/// One state of the world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::verify) struct State {
    pub(super) phase: Phase,
    pub(super) queue: [Msg; MAX_SLOTS],
    pub(super) workers: [Option<Job>; MAX_WORKERS],
    pub(super) rows: [Option<Row>; MAX_KEYS],
    /// Keys whose decided row the TTL deleted (after the retention period).
    pub(super) retired: u8,
    /// Provider acceptances, by message id.
    pub(super) sends: [Option<Sent>; MAX_SENDS],
    /// Message ids the reconciler reported as a duplicate send (`DuplicateSendsDetected`).
    pub(super) detected: u8,
    /// Operator releases, per notice.
    pub(super) released: [u8; MAX_NOTICES],
    /// How withdraw jobs were answered (bits: [`WITHDRAWN`], [`TOO_LATE`], [`NOT_NEEDED`]).
    pub(super) withdraw_answers: u8,
    /// The reconciler counted `SentAfterWithdraw` (it pages): a tombstone turned out sent.
    pub(super) paged: bool,
}

/// The state packed into 20 words for its fingerprint: every field at its own bits and full
/// width, so distinct states give distinct words. By hand because the derived `Hash` writes about
/// a hundred words a state, and fingerprints were a third of the search's instructions.
impl std::hash::Hash for State {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // 11 bits a message, 4 a word.
        for four in self.queue.chunks(4) {
            h.write_u64(four.iter().fold(0, |w, q| w << 11 | msg(*q)));
        }
        for job in &self.workers {
            let [a, b] = job.map_or([0, 0], packed_job);
            h.write_u64(a);
            h.write_u64(b);
            // Only a batched job writes these (its first word says so): a world without batches
            // hashes as it always did.
            if let Some(batch) = job.and_then(|j| j.batch) {
                for word in packed_batch(batch) {
                    h.write_u64(word);
                }
            }
        }
        for row in &self.rows {
            h.write_u64(row.map_or(0, packed_row));
        }
        // 18 bits an accepted message, 3 a word.
        for three in self.sends.chunks(3) {
            h.write_u64(three.iter().fold(0, |w, x| {
                w << 18
                    | x.map_or(0, |x| {
                        1 << 17 | u64::from(x.notice) << 9 | u64::from(x.key) << 1 | u64::from(x.seen)
                    })
            }));
        }
        let released = self.released.iter().fold(0, |w, r| w << 8 | u64::from(*r));
        h.write_u64(
            (self.phase as u64) << 58
                | u64::from(self.paged) << 57
                | u64::from(self.retired) << 48
                | u64::from(self.detected) << 40
                | u64::from(self.withdraw_answers) << 32
                | released,
        );
    }
}

/// An optional small number: 9 bits.
fn opt(v: Option<u8>) -> u64 {
    v.map_or(0, |v| 1 << 8 | u64::from(v))
}

fn msg(q: Msg) -> u64 {
    let (tag, worker) = match q {
        Msg::Pending => (0, 0),
        Msg::Visible => (1, 0),
        Msg::Returned => (1, 1),
        Msg::InFlight(w) => (2, w),
        Msg::Orphan => (3, 0),
        Msg::Gone => (4, 0),
        Msg::DeadLetter => (5, 0),
        Msg::Parked(key) => (6, key),
        Msg::HiddenLong => (7, 0),
    };
    tag << 8 | u64::from(worker)
}

/// Answers in one word: up to eight (a byte each).
fn packed_answers(answers: Answers, range: std::ops::Range<usize>) -> u64 {
    answers.codes().get(range).unwrap_or_default().iter().fold(0, |w, a| w << 8 | u64::from(*a))
}

/// A job in two words: its fields and two answers, then three answers.
fn packed_job(j: Job) -> [u64; 2] {
    let fields = 1 << 29
        | u64::from(j.slot) << 21
        | (j.now as u64) << 19
        | opt(j.token) << 10
        | u64::from(j.acked) << 9
        | u64::from(j.variant & 0x3f) << 3
        | u64::from(j.batch.is_some()) << 2
        | u64::from(j.read_decided.map_or(2, u8::from));
    // Five answers take 40 bits of the second word: `again` at its top.
    [
        fields << 34 | packed_answers(j.answers, 0..2),
        packed_answers(j.answers, 2..MAX_CALLS) | u64::from(j.again) << 63,
    ]
}

/// A job's batch in three words: its fields, then its prefetch's answers.
fn packed_batch(b: Batch) -> [u64; 3] {
    let fields = u64::from(b.mate_again) << 50
        | opt(b.next) << 34
        | opt(b.mate) << 16
        | u64::from(b.read) << 8
        | u64::from(b.decided);
    [fields, packed_answers(b.answers, 0..2), packed_answers(b.answers, 2..MAX_CALLS)]
}

/// A row in one word (57 bits).
fn packed_row(r: Row) -> u64 {
    1 << 56
        | (r.state as u64) << 53
        | u64::from(r.origin) << 45
        | opt(r.token) << 36
        | opt(r.notice) << 27
        | u64::from(r.claimed_at) << 26
        | opt(r.message) << 17
        | u64::from(r.duplicates) << 9
        | r.status.map_or(0, |s| 1 << 8 | s as u64)
}

/// A withdraw job ended `withdrawn`.
pub(super) const WITHDRAWN: u8 = 1;
/// A withdraw job ended `withdraw_too_late`.
pub(super) const TOO_LATE: u8 = 2;
/// A withdraw job ended `withdraw_not_needed`.
pub(super) const NOT_NEEDED: u8 = 4;

/// What the provider did with one SendEmail attempt.
#[derive(Clone, Copy, Debug)]
pub(in crate::verify) enum Attempt {
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
pub(in crate::verify) enum Label {
    Tick(Phase),
    Enqueue {
        slot: u8,
    },
    Receive {
        worker: u8,
        slot: u8,
        /// The batch's second record (a batch of two; it runs after `slot`).
        next: Option<u8>,
        now: Phase,
        /// The sender (key variant) the receiving worker runs.
        variant: u8,
    },
    Expire {
        slot: u8,
    },
    Crash {
        worker: u8,
        before: &'static str,
    },
    Call {
        worker: u8,
        step: Step,
        answer: Answer,
        applied: bool,
        attempts: [Option<Attempt>; 2],
    },
    /// A step of the batch's prefetch: one answer a key (or one failure).
    Prefetch {
        worker: u8,
        step: Step,
        answers: [Option<Answer>; MAX_BATCH],
        applied: bool,
    },
    Finish {
        worker: u8,
        slot: u8,
        outcome: &'static str,
        queue: QueueAction,
        effect: &'static str,
    },
    EarlyAck {
        worker: u8,
        slot: u8,
    },
    Event {
        message: u8,
        event: u8,
        effect: &'static str,
    },
    OperatorRelease {
        key: u8,
        replay: Option<u8>,
    },
    Ttl {
        key: u8,
        state: RowState,
    },
    /// A parked message's schedule fires (or a long-hidden one comes back): a new delivery.
    Wake {
        slot: u8,
    },
    /// A parked or long-hidden message is dropped before it comes back (a TTL, the retention).
    Drop {
        slot: u8,
        why: &'static str,
    },
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
    NoTokenOnDecided,
    LimitedLeavesNoClaim,
    WithdrawnNotSent,
    WithdrawAnswered,
    SentAfterWithdrawPaged,
}

impl Invariant {
    pub(crate) const ALL: [Invariant; 11] = [
        Invariant::OneAcceptance,
        Invariant::DuplicatesDetected,
        Invariant::AckAfterDurable,
        Invariant::NoSilentEnd,
        Invariant::NeverBackwards,
        Invariant::InsideWindow,
        Invariant::NoTokenOnDecided,
        Invariant::LimitedLeavesNoClaim,
        Invariant::WithdrawnNotSent,
        Invariant::WithdrawAnswered,
        Invariant::SentAfterWithdrawPaged,
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
            Invariant::NoTokenOnDecided => {
                "no token is spent on a key the ledger had already decided when the job read it"
            }
            Invariant::WithdrawnNotSent => {
                "a withdrawn notice is never sent: once a withdraw is answered withdrawn, no acceptance beyond those an operator release declared unsent"
            }
            Invariant::SentAfterWithdrawPaged => {
                "a notice answered withdrawn that turns out sent is paged (SentAfterWithdraw): only a Send event moves a tombstone"
            }
            Invariant::WithdrawAnswered => {
                "every withdraw is answered (withdrawn, too late, or not needed) before its message is acked"
            }
            Invariant::LimitedLeavesNoClaim => {
                "a job without a token (limited, or the take failed) leaves no claim"
            }
        }
    }
}

/// A broken invariant.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Violation {
    pub(crate) invariant: Invariant,
    pub(crate) detail: String,
}

pub(super) fn broken(invariant: Invariant, detail: impl Into<String>) -> Option<Violation> {
    Some(Violation { invariant, detail: detail.into() })
}

/// A successor state and how it was reached.
pub(in crate::verify) struct Succ {
    pub(in crate::verify) label: Label,
    pub(in crate::verify) next: State,
    pub(in crate::verify) broken: Option<Violation>,
    /// Where each worker of the previous state went in `next` (states keep workers sorted).
    pub(in crate::verify) renumbered: [u8; MAX_WORKERS],
    /// Where each message went in `next` (interchangeable duplicates are kept sorted).
    pub(in crate::verify) moved: [u8; MAX_SLOTS],
}

pub(super) const fn bit(i: u8) -> u8 {
    1 << i
}
