//! The worker's ports under the model: a ledger, a rate gate and a mailer that answer each call
//! from a script (the answers a worker's port calls got so far), and record the first call nobody
//! has answered yet — the worker's next step; a clock the model sets to a job's phase; and a
//! queue message and a parker that answer at once — what the queue then does with the message is
//! the model's own move (`model/moves/finish.rs`), taken by the action the worker carried out.

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use notice_ledger::ledger::{
    Claim, ClaimLedger, ClaimOutcome, ClaimRequest, ClaimToken, LedgerRow, Origin, RowReader, RowState,
    WithdrawRequest,
};
use notice_ledger::mailer::{Mailer, NotAccepted, OutgoingMail, SendResult};
use notice_ledger::park::{ParkError, ParkRequest, Parked, Parker};
use notice_ledger::queue::{QueueError, QueuedMessage};
use notice_ledger::rate::{Admission, BucketError, RateGate, RateScope, TokenRequest};
use notice_ledger::{LedgerError, NoticeKey};

use super::world::{epoch, message_id, Answer, Phase};

/// A call the sender made that has no answer yet.
#[derive(Debug)]
pub(super) enum Call {
    Read(NoticeKey),
    /// The batch read: these keys' rows in one call.
    ReadMany(Vec<NoticeKey>),
    /// A token take, one token per request (the gate is asked by domain and shard seed: the model
    /// knows the job's key, and a batch's keys by their seeds).
    Token(Vec<u64>),
    /// A claim, with the keys its write also puts an alias at (a first write while the key
    /// secret rotates).
    Claim(NoticeKey, Vec<NoticeKey>, bool),
    RecordMissed(NoticeKey, Vec<NoticeKey>),
    Send(NoticeKey),
    CommitSent(NoticeKey, String),
    CommitRejected(NoticeKey),
    Release(NoticeKey),
    Withdraw(NoticeKey, Vec<NoticeKey>),
    /// An open claim put on the quarantine view.
    List(NoticeKey),
}

impl Call {
    /// The key the call names (a token take names none).
    pub(super) fn key(&self) -> Option<&NoticeKey> {
        match self {
            Call::Token(_) | Call::ReadMany(_) => None,
            Call::Read(k)
            | Call::Claim(k, _, _)
            | Call::List(k)
            | Call::RecordMissed(k, _)
            | Call::Send(k)
            | Call::CommitSent(k, _)
            | Call::CommitRejected(k)
            | Call::Release(k)
            | Call::Withdraw(k, _) => Some(k),
        }
    }
}

#[derive(Default)]
pub(super) struct Script {
    pub(super) answers: Vec<Answer>,
    pub(super) next: usize,
    pub(super) call: Option<Call>,
    /// A call the model cannot answer, or an answer of the wrong kind for a call.
    pub(super) unexpected: Option<String>,
}

pub(super) type Shared = Arc<Mutex<Script>>;

pub(super) fn lock(script: &Mutex<Script>) -> MutexGuard<'_, Script> {
    script.lock().unwrap_or_else(|p| p.into_inner())
}

/// The next scripted answer, or `None` after recording `call` as the one the sender waits on.
fn take(script: &Mutex<Script>, call: Call) -> Option<Answer> {
    let mut s = lock(script);
    match s.answers.get(s.next).copied() {
        Some(answer) => {
            s.next += 1;
            Some(answer)
        }
        None => {
            s.call = Some(call);
            None
        }
    }
}

/// The next scripted answers of a call that is answered once per item (`n` of them: a batch
/// read's keys, a batch take's requests) or once for all when it fails; `None` after recording
/// `call` as the one the sender waits on. `Err`: the script holds too few answers for the call.
fn take_many(script: &Mutex<Script>, n: usize, call: Call) -> Option<Result<Vec<Answer>, String>> {
    let mut s = lock(script);
    let at = s.next;
    let Some(first) = s.answers.get(at).copied() else {
        s.call = Some(call);
        return None;
    };
    if matches!(first, Answer::Failed | Answer::GateFailed) {
        s.next += 1;
        return Some(Ok(vec![first]));
    }
    match s.answers.get(at..at + n) {
        Some(items) => {
            let items = items.to_vec();
            s.next += n;
            Some(Ok(items))
        }
        None => Some(Err(format!("{call:?} has {} of its {n} answers", s.answers.len() - at))),
    }
}

/// Records a call the model has no answer for; the sender then waits forever.
async fn unexpected<T>(script: &Mutex<Script>, what: String) -> T {
    lock(script).unexpected.get_or_insert(what);
    std::future::pending().await
}

/// The stored facts of one notice a held row reports to the sender.
#[derive(Clone)]
pub(super) struct Facts {
    pub(super) digests: Arc<Vec<String>>,
}

/// The ledger port, answering from the script.
pub(super) struct ScriptedLedger {
    pub(super) script: Shared,
    pub(super) facts: Facts,
}

impl ScriptedLedger {
    fn held(&self, key: &NoticeKey, state: RowState, digest: Option<u8>, young: bool) -> LedgerRow {
        // The sender judges a claim's age against the `now` it read: a claim stamped at the latest
        // instant of the model's clock is young at every phase, one from long before it stale.
        let claimed_at =
            if young { Phase::Closed.at() } else { Phase::Early.at() - chrono::Duration::days(30) };
        LedgerRow {
            key: key.clone(),
            state,
            origin: Origin::Worker,
            // Whose claim it is stays the model's: the sender only hands it back with a quarantine
            // view write, which the model applies to the key's open claim ([`Call::List`]).
            claim_token: (state == RowState::Claimed).then(|| ClaimToken::from_stored("held")),
            subscription_id: String::new(),
            period_start: String::new(),
            kind: String::new(),
            revision: 0,
            content_digest: digest.and_then(|n| self.facts.digests.get(usize::from(n)).cloned()),
            claimed_at: (state == RowState::Claimed).then_some(claimed_at),
            on_quarantine_view: false,
            updated_at: epoch(),
            message_id: None,
            detail: None,
            delivery_status: None,
            duplicate_message_ids: Vec::new(),
            charge_at: None,
            jurisdiction: None,
            rendered: None,
            obligation: None,
        }
    }

    async fn write(&self, call: Call, what: &str) -> Result<(), LedgerError> {
        match take(&self.script, call) {
            None => std::future::pending().await,
            Some(Answer::Written) => Ok(()),
            Some(Answer::Refused) => Err(LedgerError::Conflict("not held by this claim".into())),
            Some(Answer::Failed) => Err(LedgerError::unavailable("ledger write failed")),
            Some(other) => unexpected(&self.script, format!("{what} answered {other:?}")).await,
        }
    }
}

#[async_trait]
impl RowReader for ScriptedLedger {
    /// The dedupe read before the token: the row as it stands (a row a claim may overwrite —
    /// released — reads as none: the sender treats both alike).
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        match take(&self.script, Call::Read(key.clone())) {
            None => std::future::pending().await,
            Some(Answer::Free) => Ok(None),
            Some(Answer::Held { state, digest, young }) => Ok(Some(self.held(key, state, digest, young))),
            Some(Answer::Failed) => Err(LedgerError::unavailable("ledger read failed")),
            Some(other) => unexpected(&self.script, format!("read answered {other:?}")).await,
        }
    }

    /// The batch read: one call for all of a batch's keys, each answered as the single read is.
    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let answers = match take_many(&self.script, keys.len(), Call::ReadMany(keys.to_vec())) {
            None => std::future::pending().await,
            Some(Err(what)) => return unexpected(&self.script, what).await,
            Some(Ok(answers)) => answers,
        };
        if answers == [Answer::Failed] {
            return Err(LedgerError::unavailable("batch ledger read failed"));
        }
        let mut rows = Vec::new();
        for (key, answer) in keys.iter().zip(answers) {
            match answer {
                Answer::Free => {}
                Answer::Held { state, digest, young } => rows.push(self.held(key, state, digest, young)),
                other => return unexpected(&self.script, format!("batch read answered {other:?}")).await,
            }
        }
        Ok(rows)
    }
}

#[async_trait]
impl ClaimLedger for ScriptedLedger {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        match take(&self.script, Call::Claim(req.key.clone(), req.aliases.clone(), req.on_quarantine_view)) {
            None => std::future::pending().await,
            Some(Answer::Minted) => Ok(ClaimOutcome::Minted(Claim {
                key: req.key.clone(),
                token: req.token.clone(),
                claimed_at: req.at,
            })),
            Some(Answer::Held { state, digest, young }) => {
                Ok(ClaimOutcome::Held(self.held(&req.key, state, digest, young)))
            }
            Some(Answer::Failed) => Err(LedgerError::unavailable("ledger write failed")),
            Some(other) => unexpected(&self.script, format!("claim answered {other:?}")).await,
        }
    }

    async fn commit_sent(
        &self,
        claim: &Claim,
        message_id: &str,
        _: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.write(Call::CommitSent(claim.key.clone(), message_id.to_owned()), "commit sent").await
    }

    async fn commit_rejected(&self, claim: &Claim, _: &str, _: DateTime<Utc>) -> Result<(), LedgerError> {
        self.write(Call::CommitRejected(claim.key.clone()), "commit rejected").await
    }

    async fn release(&self, claim: &Claim, _: &str, _: DateTime<Utc>) -> Result<(), LedgerError> {
        self.write(Call::Release(claim.key.clone()), "release").await
    }

    async fn put_on_quarantine_view(&self, claim: &Claim) -> Result<(), LedgerError> {
        self.write(Call::List(claim.key.clone()), "quarantine view").await
    }

    async fn record_missed(&self, req: &ClaimRequest, _: &str) -> Result<Option<LedgerRow>, LedgerError> {
        match take(&self.script, Call::RecordMissed(req.key.clone(), req.aliases.clone())) {
            None => std::future::pending().await,
            Some(Answer::Recorded) => Ok(None),
            Some(Answer::Held { state, digest, young }) => {
                Ok(Some(self.held(&req.key, state, digest, young)))
            }
            Some(Answer::Failed) => Err(LedgerError::unavailable("ledger write failed")),
            Some(other) => unexpected(&self.script, format!("record missed answered {other:?}")).await,
        }
    }

    async fn withdraw(&self, req: &WithdrawRequest) -> Result<Option<LedgerRow>, LedgerError> {
        match take(&self.script, Call::Withdraw(req.key.clone(), req.aliases.clone())) {
            None => std::future::pending().await,
            Some(Answer::Written) => Ok(None),
            Some(Answer::Held { state, digest, young }) => {
                Ok(Some(self.held(&req.key, state, digest, young)))
            }
            Some(Answer::Failed) => Err(LedgerError::unavailable("ledger write failed")),
            Some(other) => unexpected(&self.script, format!("withdraw answered {other:?}")).await,
        }
    }
}

/// The rate gate, answering from the script: every take may be granted, limited or fail.
pub(super) struct ScriptedGate {
    pub(super) script: Shared,
}

#[async_trait]
impl RateGate for ScriptedGate {
    async fn admit_batch(
        &self,
        requests: &[TokenRequest],
        now: DateTime<Utc>,
    ) -> Result<Vec<Admission>, BucketError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let seeds = requests.iter().map(|r| r.shard_seed).collect();
        let answers = match take_many(&self.script, requests.len(), Call::Token(seeds)) {
            None => std::future::pending().await,
            Some(Err(what)) => return unexpected(&self.script, what).await,
            Some(Ok(answers)) => answers,
        };
        let mut admissions = Vec::with_capacity(answers.len());
        for answer in answers {
            admissions.push(match answer {
                Answer::Admitted => Admission::Admitted,
                // Due soon: the queue hides the message (the model's clock is coarser than a token).
                Answer::Limited => Admission::Limited {
                    retry_at: now + chrono::Duration::seconds(1),
                    scope: RateScope::Domain,
                },
                Answer::GateFailed => {
                    return Err(LedgerError::unavailable("rate bucket write failed").into());
                }
                other => return unexpected(&self.script, format!("token take answered {other:?}")).await,
            });
        }
        Ok(admissions)
    }
}

/// The mailer port, answering from the script. The provider's side (what really went out) is the
/// model's; the sender only sees what the SDK call returned.
pub(super) struct ScriptedMailer {
    pub(super) script: Shared,
}

#[async_trait]
impl Mailer for ScriptedMailer {
    async fn send(&self, mail: &OutgoingMail) -> SendResult {
        match take(&self.script, Call::Send(mail.key.clone())) {
            None => std::future::pending().await,
            Some(Answer::Accepted(m)) => SendResult::Accepted { message_id: message_id(m) },
            Some(Answer::NotAccepted) => {
                SendResult::NotAccepted { class: NotAccepted::Throttled, reason: "throttled".into() }
            }
            Some(Answer::Rejected) => SendResult::Rejected { reason: "MessageRejected".into() },
            Some(Answer::Unknown) => SendResult::Unknown { reason: "500 after the request was sent".into() },
            Some(other) => unexpected(&self.script, format!("send answered {other:?}")).await,
        }
    }
}

/// The senders' clock: the phase of the job being run, set by the model before each run, so the
/// worker admits, delivers and picks the queue action at the job's `now`.
#[derive(Clone, Default)]
pub(super) struct PhaseClock(Arc<Mutex<Option<DateTime<Utc>>>>);

impl PhaseClock {
    pub(super) fn set(&self, phase: Phase) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(phase.at());
    }
}

impl notice_ledger::clock::Clock for PhaseClock {
    fn now(&self) -> DateTime<Utc> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).unwrap_or_else(epoch)
    }
}

/// A received message as the worker's queue port sees it: every call answered at once (the
/// model's queue moves are its own, by the queue action the worker reports).
pub(super) struct ModelMessage {
    pub(super) body: String,
    pub(super) received_at: DateTime<Utc>,
}

#[async_trait]
impl QueuedMessage for ModelMessage {
    fn body(&self) -> &str {
        &self.body
    }
    fn queue_arn(&self) -> Option<&str> {
        Some("arn:aws:sqs:us-east-1:123456789012:verify-reminders")
    }
    fn replay_batch(&self) -> Option<&str> {
        None
    }
    fn received_at(&self) -> DateTime<Utc> {
        self.received_at
    }
    async fn hide(&self, _: std::time::Duration) -> Result<(), QueueError> {
        Ok(())
    }
    async fn requeue(&self, _: std::time::Duration) -> Result<(), QueueError> {
        Ok(())
    }
    async fn dead_letter(&self, _: &str) -> Result<(), QueueError> {
        Ok(())
    }
}

/// The parker, answering at once: every park schedules (whether the key's schedule already
/// exists is the model's `park` move), every unpark finds none.
pub(super) struct ModelParker;

#[async_trait]
impl Parker for ModelParker {
    async fn park(&self, _: &ParkRequest<'_>) -> Result<Parked, ParkError> {
        Ok(Parked::Scheduled)
    }
    async fn unpark(&self, _: &NoticeKey) -> Result<bool, ParkError> {
        Ok(false)
    }
}
