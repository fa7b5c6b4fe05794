//! The bounded world's vocabulary, shared by the scripted ports, the real sender under the model
//! and the model itself: its size limits, its clock, what a port call can be answered, a job's
//! next step, and the numbers the model hands out as message ids and claim tokens.

use chrono::{DateTime, TimeZone, Utc};
use notice_ledger::ledger::{ClaimToken, DeliveryStatus, RowState};

use super::error::VerifyError;

/// Most workers, messages, notice keys, accepted messages and notices a world holds.
pub(super) const MAX_WORKERS: usize = 3;
pub(super) const MAX_SLOTS: usize = 8;
pub(super) const MAX_KEYS: usize = 8;
pub(super) const MAX_SENDS: usize = 8;
pub(super) const MAX_NOTICES: usize = 3;

/// Most port calls one job makes (read, token, claim, send, commit — and, while the key secret
/// rotates, the placement's read of the older key first; a held claim put on the quarantine view).
pub(super) const MAX_CALLS: usize = 7;

/// Most records one receive hands a worker (an SQS batch, as the sender Lambda gets it).
pub(super) const MAX_BATCH: usize = 2;

/// The world's clock, coarse: where `now` stands relative to every notice's send window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Phase {
    Early,
    Open,
    Closed,
}

impl Phase {
    /// The instant the real window policy is asked about (charge 2026-10-04T09:00Z: the default
    /// window opens 2026-10-01T09:00Z and closes 2026-10-03T09:00Z).
    pub(super) fn at(self) -> DateTime<Utc> {
        let (d, h) = match self {
            Phase::Early => (1, 6),
            Phase::Open => (2, 9),
            Phase::Closed => (3, 12),
        };
        Utc.with_ymd_and_hms(2026, 10, d, h, 0, 0).single().unwrap_or(DateTime::<Utc>::MIN_UTC)
    }

    pub(super) fn next(self) -> Option<Phase> {
        match self {
            Phase::Early => Some(Phase::Open),
            Phase::Open => Some(Phase::Closed),
            Phase::Closed => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Phase::Early => "before the window",
            Phase::Open => "inside the window",
            Phase::Closed => "after the window",
        }
    }
}

/// What a port call was answered. The sender sees the matching real value (built by the ports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Answer {
    /// read (before the token): no row, or one a claim may overwrite (released).
    Free,
    /// token: granted.
    Admitted,
    /// token: the bucket has no room; come back when one is due.
    Limited,
    /// token: the bucket store failed (the take may or may not have been applied).
    GateFailed,
    /// claim: this attempt owns the key.
    Minted,
    /// read / claim / record missed: the key is held; the sender reads the row's state and content digest
    /// (`digest`: whose notice's content, `None` for a row learned from provider events) and, for
    /// an open claim, its age: `young` — younger than the stale cut-off (its claimer may still run).
    Held { state: RowState, digest: Option<u8>, young: bool },
    /// record missed: the missed row was written.
    Recorded,
    /// Any ledger call: an error (the write may or may not have been applied).
    Failed,
    /// commit / release: the row is no longer held by this claim.
    Refused,
    /// commit / release: written; withdraw: the tombstone written.
    Written,
    /// send: accepted, with this message id.
    Accepted(u8),
    /// send: the provider said it did not accept the message (throttled).
    NotAccepted,
    /// send: refused permanently.
    Rejected,
    /// send: no answer that can be trusted.
    Unknown,
}

impl Answer {
    pub(super) fn describe(self) -> String {
        match self {
            Answer::Free => "free (no row, or released)".into(),
            Answer::Admitted => "token granted".into(),
            Answer::Limited => "limited (no token)".into(),
            Answer::GateFailed => "rate bucket error".into(),
            Answer::Minted => "minted".into(),
            Answer::Held { state: RowState::Claimed, young: true, .. } => "held (claimed, young)".into(),
            Answer::Held { state: RowState::Claimed, young: false, .. } => "held (claimed, stale)".into(),
            Answer::Held { state, .. } => format!("held ({state})"),
            Answer::Recorded => "recorded".into(),
            Answer::Failed => "ledger error".into(),
            Answer::Refused => "refused (not held by this claim)".into(),
            Answer::Written => "written".into(),
            Answer::Accepted(m) => format!("accepted as m{m}"),
            Answer::NotAccepted => "not accepted (throttled)".into(),
            Answer::Rejected => "rejected".into(),
            Answer::Unknown => "unknown (5xx / timeout)".into(),
        }
    }
}

impl Answer {
    /// The answer as one byte (never 0: that is "no answer"), so a job's history is a few bytes
    /// of the state. `None`: a number past what a byte holds here (the model's bounds keep them in).
    fn code(self) -> Option<u8> {
        Some(match self {
            Answer::Free => 1,
            Answer::Admitted => 2,
            Answer::Limited => 3,
            Answer::GateFailed => 4,
            Answer::Minted => 5,
            Answer::Recorded => 6,
            Answer::Failed => 7,
            Answer::Refused => 8,
            Answer::Written => 9,
            Answer::NotAccepted => 10,
            Answer::Rejected => 11,
            Answer::Unknown => 12,
            Answer::Accepted(m) if m < 16 => 16 + m,
            Answer::Held { state, digest, young } => {
                let state = u8::try_from(RowState::ALL.iter().position(|s| *s == state)?).ok()?;
                let digest = match digest {
                    None => 0,
                    Some(d) if d < 3 => d + 1,
                    Some(_) => return None,
                };
                (state < 16).then_some(64 + ((state * 4 + digest) * 2 + u8::from(young)))?
            }
            Answer::Accepted(_) => return None,
        })
    }

    fn from_code(code: u8) -> Option<Answer> {
        Some(match code {
            1 => Answer::Free,
            2 => Answer::Admitted,
            3 => Answer::Limited,
            4 => Answer::GateFailed,
            5 => Answer::Minted,
            6 => Answer::Recorded,
            7 => Answer::Failed,
            8 => Answer::Refused,
            9 => Answer::Written,
            10 => Answer::NotAccepted,
            11 => Answer::Rejected,
            12 => Answer::Unknown,
            16..=31 => Answer::Accepted(code - 16),
            64.. => {
                let held = code - 64;
                let digest = (held / 2) % 4;
                Answer::Held {
                    state: *RowState::ALL.get(usize::from(held / 8))?,
                    digest: digest.checked_sub(1),
                    young: held % 2 == 1,
                }
            }
            _ => return None,
        })
    }
}

/// The answers one job got, in call order, one byte each ([`Answer::code`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Answers {
    len: u8,
    codes: [u8; MAX_CALLS],
}

impl Answers {
    pub(super) fn with(mut self, answer: Answer) -> Result<Self, VerifyError> {
        let code = answer
            .code()
            .ok_or_else(|| VerifyError::Bound(format!("{answer:?} is past what the model numbers")))?;
        let slot = self
            .codes
            .get_mut(usize::from(self.len))
            .ok_or_else(|| VerifyError::Bound(format!("a job made more than {MAX_CALLS} port calls")))?;
        *slot = code;
        self.len += 1;
        Ok(self)
    }

    /// Every slot, answered or not (the answered ones first: `len` is their count).
    pub(super) fn items(self) -> [Option<Answer>; MAX_CALLS] {
        self.codes.map(Answer::from_code)
    }

    /// Every slot's byte (0: not answered), as the state's fingerprint reads them.
    pub(super) fn codes(self) -> [u8; MAX_CALLS] {
        self.codes
    }

    pub(super) fn to_vec(self) -> Vec<Answer> {
        self.items().iter().flatten().copied().collect()
    }

    pub(super) fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The job's token take was refused or failed: it has no token.
    pub(super) fn without_token(self) -> bool {
        self.items().iter().flatten().any(|a| matches!(a, Answer::Limited | Answer::GateFailed))
    }
}

/// What the queue does with a finished job's message (the core's queue policy, coarsened: the
/// model has no clock finer than [`Phase`], so "hidden" and "backing off" are one; a park is its
/// own action unless the world runs with `--parking off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum QueueAction {
    Ack,
    Retry,
    /// Off the queue into the key's schedule, which brings the same body back later.
    Park,
    /// Hidden on the queue for longer than the queue holds a message (the hide-too-long mutant).
    HideLong,
    DeadLetter,
}

/// A job's next step: the port call its sender is waiting on, or its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// The ledger read before the token (only with a rate gate).
    Read {
        key: u8,
    },
    /// The rate gate's token take.
    Token {
        key: u8,
    },
    /// While the key secret rotates (`--rotation on`): the read of the notice's key under the
    /// older version, which decides where the notice lives (`NoticeSender::place`).
    Place {
        key: u8,
    },
    /// A claim of `key`; `alias`: the older version's key its write also puts an alias at.
    Claim {
        key: u8,
        alias: Option<u8>,
        /// Made on the quarantine view (`ClaimRequest::on_quarantine_view`).
        listed: bool,
    },
    RecordMissed {
        key: u8,
        alias: Option<u8>,
    },
    Send {
        key: u8,
    },
    CommitSent {
        key: u8,
        message: u8,
    },
    CommitRejected {
        key: u8,
    },
    Release {
        key: u8,
    },
    /// A withdraw message's one write: the tombstone (and its alias, as a claim's).
    Withdraw {
        key: u8,
        alias: Option<u8>,
    },
    /// `key`'s open claim put on the quarantine view.
    List {
        key: u8,
    },
    /// The batch's one ledger read (`NoticeSender::prefetch`): the rows of these keys, in the
    /// order the sender asked for them.
    BatchRead {
        keys: [Option<u8>; MAX_BATCH],
    },
    /// The batch's one token take, for these keys (the ones the batch read found claimable).
    BatchToken {
        keys: [Option<u8>; MAX_BATCH],
    },
    /// `key`: the key the sender reported (a park's schedule is named by it).
    Done {
        outcome: &'static str,
        queue: QueueAction,
        key: Option<u8>,
    },
}

impl Step {
    pub(super) fn name(self) -> &'static str {
        match self {
            Step::Read { .. } => "read",
            Step::Place { .. } => "placement read",
            Step::Token { .. } => "take token",
            Step::Claim { .. } => "claim",
            Step::RecordMissed { .. } => "record missed",
            Step::Send { .. } => "send",
            Step::CommitSent { .. } => "commit sent",
            Step::CommitRejected { .. } => "commit rejected",
            Step::Release { .. } => "release",
            Step::Withdraw { .. } => "withdraw",
            Step::List { .. } => "quarantine view",
            Step::BatchRead { .. } => "batch read",
            Step::BatchToken { .. } => "batch token take",
            Step::Done { .. } => "ack/retry",
        }
    }

    /// A ledger write that settles what the send established: what "ack before commit" skips.
    pub(super) fn is_post_send_write(self) -> bool {
        matches!(self, Step::CommitSent { .. } | Step::CommitRejected { .. } | Step::Release { .. })
    }
}

/// The provider message id the model hands out as number `m`.
pub(super) fn message_id(m: u8) -> String {
    format!("m{m}")
}

pub(super) fn parse_message_id(id: &str) -> Result<u8, VerifyError> {
    id.strip_prefix('m')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| VerifyError::Corrupt(format!("message id {id:?} was not handed out by the model")))
}

/// The claim token the model mints as number `t`.
pub(super) fn token(t: u8) -> ClaimToken {
    ClaimToken::from_stored(format!("t{t}"))
}

pub(super) fn parse_token(token: &ClaimToken) -> Result<u8, VerifyError> {
    token.as_str().strip_prefix('t').and_then(|n| n.parse().ok()).ok_or_else(|| {
        VerifyError::Corrupt(format!("claim token {:?} was not minted by the model", token.as_str()))
    })
}

/// One fixed instant for every timestamp the model does not reason about.
pub(super) fn epoch() -> DateTime<Utc> {
    Phase::Open.at()
}

/// A delivery status as the model names the reconciler's events (the SES event types of
/// `notice_ses::events::status_for`).
pub(super) const EVENTS: [(&str, DeliveryStatus); 4] = [
    ("Send", DeliveryStatus::Accepted),
    ("Delivery", DeliveryStatus::Delivered),
    ("Bounce", DeliveryStatus::Bounced),
    ("Reject", DeliveryStatus::NotDelivered),
];
