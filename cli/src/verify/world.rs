//! The real core under the model: the project's own [`NoticeSender::deliver`], run one port call at
//! a time.
//!
//! A worker's state in the model is its job plus the answers its port calls got so far. To take
//! the next step the model runs the real `deliver` future with scripted ports that hand back those
//! answers, until it makes a call nobody has answered yet: that call is the worker's next step (or
//! the future finishes, and its [`Outcome`] and [`Outcome::disposition`] are the job's end). The
//! sender is deterministic given its answers, so each distinct history is run once and remembered.
//! Nothing of the algorithm is re-stated here: window, render, claim, send, commit, release and
//! the outcome mapping are the sender's own code.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use notice_ledger::ledger::{
    Claim, ClaimLedger, ClaimOutcome, ClaimRequest, ClaimToken, DeliveryStatus, LedgerRow, Origin, RowReader,
    RowState,
};
use notice_ledger::links::ManageLinks;
use notice_ledger::mailer::{Mailer, NotAccepted, OutgoingMail, SendResult};
use notice_ledger::render::Renderer;
use notice_ledger::{
    Job, LedgerError, NoticeKey, NoticeSecret, NoticeSender, Outcome, QueuePolicy, Receive, SendBudget,
    WindowDecision, WindowPolicy,
};

use super::VerifyError;

/// Most port calls one job makes (claim, send, commit).
pub(super) const MAX_CALLS: usize = 4;

/// The notices of the bounded world, in the order `--notices` adds them.
const NOTICES: [(&str, &str, u64, &str, &str); 3] = [
    ("A", "sub_8812", 0, "ada@example.com", "29.00 USD"),
    // A corrected notice: same subscription, period and kind, revision bumped, other content.
    ("A'", "sub_8812", 1, "ada@example.com", "24.00 USD"),
    // Another subscriber at the same recipient domain.
    ("B", "sub_9001", 0, "bob@example.com", "29.00 USD"),
];

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
    /// claim: this attempt owns the key.
    Minted,
    /// claim / record missed: the key is held; the sender reads the row's state and content digest
    /// (`digest`: whose notice's content, `None` for a row learned from provider events) and, for
    /// an open claim, its age: `young` — younger than the stale cut-off (its claimer may still run).
    Held { state: RowState, digest: Option<u8>, young: bool },
    /// record missed: the missed row was written.
    Recorded,
    /// Any ledger call: an error (the write may or may not have been applied).
    Failed,
    /// commit / release: the row is no longer held by this claim.
    Refused,
    /// commit / release: written.
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

/// The answers one job got, in call order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Answers {
    len: u8,
    items: [Option<Answer>; MAX_CALLS],
}

impl Answers {
    pub(super) fn with(mut self, answer: Answer) -> Result<Self, VerifyError> {
        let slot = self
            .items
            .get_mut(usize::from(self.len))
            .ok_or_else(|| VerifyError::Bound(format!("a job made more than {MAX_CALLS} port calls")))?;
        *slot = Some(answer);
        self.len += 1;
        Ok(self)
    }

    fn to_vec(self) -> Vec<Answer> {
        self.items.iter().flatten().copied().collect()
    }
}

/// What the queue does with a finished job's message (the core's queue policy, coarsened: the
/// model has no clock finer than [`Phase`], so "hidden", "backing off" and "parked" are one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum QueueAction {
    Ack,
    Retry,
    DeadLetter,
}

/// A job's next step: the port call its sender is waiting on, or its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Claim { key: u8 },
    RecordMissed { key: u8 },
    Send { key: u8 },
    CommitSent { key: u8, message: u8 },
    CommitRejected { key: u8 },
    Release { key: u8 },
    Done { outcome: &'static str, queue: QueueAction },
}

impl Step {
    pub(super) fn name(self) -> &'static str {
        match self {
            Step::Claim { .. } => "claim",
            Step::RecordMissed { .. } => "record missed",
            Step::Send { .. } => "send",
            Step::CommitSent { .. } => "commit sent",
            Step::CommitRejected { .. } => "commit rejected",
            Step::Release { .. } => "release",
            Step::Done { .. } => "ack/retry",
        }
    }

    /// A ledger write that settles what the send established: what "ack before commit" skips.
    pub(super) fn is_post_send_write(self) -> bool {
        matches!(self, Step::CommitSent { .. } | Step::CommitRejected { .. } | Step::Release { .. })
    }
}

/// A call the sender made that has no answer yet.
#[derive(Debug)]
enum Call {
    Claim(NoticeKey),
    RecordMissed(NoticeKey),
    Send(NoticeKey),
    CommitSent(NoticeKey, String),
    CommitRejected(NoticeKey),
    Release(NoticeKey),
}

#[derive(Default)]
struct Script {
    answers: Vec<Answer>,
    next: usize,
    call: Option<Call>,
    /// A call the model cannot answer, or an answer of the wrong kind for a call.
    unexpected: Option<String>,
}

type Shared = Arc<Mutex<Script>>;

fn lock(script: &Mutex<Script>) -> MutexGuard<'_, Script> {
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

/// Records a call the model has no answer for; the sender then waits forever.
async fn unexpected<T>(script: &Mutex<Script>, what: String) -> T {
    lock(script).unexpected.get_or_insert(what);
    std::future::pending().await
}

/// The stored facts of one notice a held row reports to the sender.
#[derive(Clone)]
struct Facts {
    digests: Arc<Vec<String>>,
}

/// The ledger port, answering from the script.
struct ScriptedLedger {
    script: Shared,
    facts: Facts,
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
            claim_token: None,
            subscription_id: String::new(),
            period_start: String::new(),
            kind: String::new(),
            revision: 0,
            content_digest: digest.and_then(|n| self.facts.digests.get(usize::from(n)).cloned()),
            claimed_at: (state == RowState::Claimed).then_some(claimed_at),
            updated_at: epoch(),
            message_id: None,
            detail: None,
            delivery_status: None,
            duplicate_message_ids: Vec::new(),
        }
    }

    async fn write(&self, call: Call, what: &str) -> Result<(), LedgerError> {
        match take(&self.script, call) {
            None => std::future::pending().await,
            Some(Answer::Written) => Ok(()),
            Some(Answer::Refused) => Err(LedgerError::Conflict("not held by this claim".into())),
            Some(Answer::Failed) => Err(LedgerError::Unavailable("ledger write failed".into())),
            Some(other) => unexpected(&self.script, format!("{what} answered {other:?}")).await,
        }
    }
}

#[async_trait]
impl RowReader for ScriptedLedger {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        unexpected(&self.script, format!("get {} (shadow mode is not modelled)", key.prefix())).await
    }
}

#[async_trait]
impl ClaimLedger for ScriptedLedger {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        match take(&self.script, Call::Claim(req.key.clone())) {
            None => std::future::pending().await,
            Some(Answer::Minted) => Ok(ClaimOutcome::Minted(Claim {
                key: req.key.clone(),
                token: req.token.clone(),
                claimed_at: req.at,
            })),
            Some(Answer::Held { state, digest, young }) => {
                Ok(ClaimOutcome::Held(self.held(&req.key, state, digest, young)))
            }
            Some(Answer::Failed) => Err(LedgerError::Unavailable("ledger write failed".into())),
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

    async fn record_missed(&self, req: &ClaimRequest, _: &str) -> Result<Option<LedgerRow>, LedgerError> {
        match take(&self.script, Call::RecordMissed(req.key.clone())) {
            None => std::future::pending().await,
            Some(Answer::Recorded) => Ok(None),
            Some(Answer::Held { state, digest, young }) => {
                Ok(Some(self.held(&req.key, state, digest, young)))
            }
            Some(Answer::Failed) => Err(LedgerError::Unavailable("ledger write failed".into())),
            Some(other) => unexpected(&self.script, format!("record missed answered {other:?}")).await,
        }
    }
}

/// The mailer port, answering from the script. The provider's side (what really went out) is the
/// model's; the sender only sees what the SDK call returned.
struct ScriptedMailer {
    script: Shared,
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

/// One notice of the world.
pub(super) struct Notice {
    pub(super) name: &'static str,
    pub(super) job: Job,
    pub(super) digest: String,
}

type MemoKey = (u8, u8, Phase, Answers);

/// The real sender, its inputs, and every history it has been run on.
pub(super) struct Core {
    pub(super) notices: Vec<Notice>,
    pub(super) policy: WindowPolicy,
    /// One sender per key variant: index 0 holds the real secret; with per-delivery keys (a mutant)
    /// delivery `i` uses sender `i`.
    senders: Vec<Arc<NoticeSender>>,
    script: Shared,
    keys: Vec<NoticeKey>,
    key_ids: HashMap<NoticeKey, u8>,
    memo: HashMap<MemoKey, Step>,
    runtime: tokio::runtime::Runtime,
}

impl Core {
    /// `variants` senders: the first with the real key secret, the others with one derived per
    /// delivery (used only by the per-delivery key mutant).
    pub(super) fn new(notices: usize, variants: usize) -> Result<Self, VerifyError> {
        let setup = |e: &dyn std::fmt::Display| VerifyError::Setup(e.to_string());
        let secret = NoticeSecret::new("verify-notice-key-secret").map_err(|e| setup(&e))?;
        let links = NoticeSecret::new("verify-links-secret").map_err(|e| setup(&e))?;
        let mut list = Vec::new();
        for (name, sub, revision, email, amount) in NOTICES.iter().take(notices) {
            let body = serde_json::json!({
                "subscription_id": sub, "period_start": "2026-10-01", "kind": "renewal_notice_t72",
                "revision": revision, "email": email, "charge_at": "2026-10-04T09:00:00Z",
                "template_data": {"plan_name": "Coffee Box", "amount": amount},
            });
            let job = Job::parse(&body.to_string()).map_err(|e| setup(&e))?;
            let digest = job.content_digest();
            list.push(Notice { name, job, digest });
        }
        let script: Shared = Arc::default();
        let facts = Facts { digests: Arc::new(list.iter().map(|n| n.digest.clone()).collect()) };
        let policy = WindowPolicy::default();
        let renderer = Arc::new(Renderer::new(ManageLinks::new("https://billing.example.com/manage", links)));
        let senders = (0..variants.max(1))
            .map(|v| {
                let secret =
                    if v == 0 { secret.clone() } else { secret.derive_subkey(&format!("delivery-{v}")) };
                Arc::new(
                    NoticeSender::new(
                        Arc::new(ScriptedLedger { script: script.clone(), facts: facts.clone() }),
                        Arc::new(ScriptedMailer { script: script.clone() }),
                        renderer.clone(),
                        policy.clone(),
                        secret,
                    )
                    // The model decides when a send times out (it answers "unknown"); the real timer
                    // never fires.
                    .with_budget(SendBudget {
                        send_timeout: std::time::Duration::from_secs(7 * 86_400),
                        ..SendBudget::default()
                    }),
                )
            })
            .collect();
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_time().build().map_err(|e| setup(&e))?;
        Ok(Self {
            notices: list,
            policy,
            senders,
            script,
            keys: Vec::new(),
            key_ids: HashMap::new(),
            memo: HashMap::new(),
            runtime,
        })
    }

    /// The key id of the key sender `variant` derives for `notice` (what its jobs claim).
    pub(super) fn key_of(&mut self, variant: u8, notice: u8) -> Result<u8, VerifyError> {
        let key = {
            let sender = self.sender(variant)?;
            sender.key(&self.notice(notice)?.job)
        };
        self.intern(key)
    }

    pub(super) fn key(&self, id: u8) -> Result<&NoticeKey, VerifyError> {
        self.keys.get(usize::from(id)).ok_or_else(|| VerifyError::Corrupt(format!("no key number {id}")))
    }

    pub(super) fn notice(&self, n: u8) -> Result<&Notice, VerifyError> {
        self.notices.get(usize::from(n)).ok_or_else(|| VerifyError::Corrupt(format!("no notice number {n}")))
    }

    fn sender(&self, variant: u8) -> Result<&Arc<NoticeSender>, VerifyError> {
        self.senders
            .get(usize::from(variant))
            .ok_or_else(|| VerifyError::Corrupt(format!("no sender variant {variant}")))
    }

    /// Whether the real window policy lets a job of `notice` send at `now`.
    pub(super) fn in_window(&self, notice: u8, now: Phase) -> Result<bool, VerifyError> {
        let job = &self.notice(notice)?.job;
        Ok(matches!(self.policy.decide(job, now.at()), WindowDecision::Send { .. }))
    }

    fn intern(&mut self, key: NoticeKey) -> Result<u8, VerifyError> {
        if let Some(id) = self.key_ids.get(&key) {
            return Ok(*id);
        }
        let id = u8::try_from(self.keys.len())
            .ok()
            .filter(|id| usize::from(*id) < super::model::MAX_KEYS)
            .ok_or_else(|| VerifyError::Bound(format!("more than {} notice keys", super::model::MAX_KEYS)))?;
        self.keys.push(key.clone());
        self.key_ids.insert(key, id);
        Ok(id)
    }

    /// The next step of a job of `notice`, received at `now` by sender `variant`, whose port calls
    /// got `answers` so far.
    pub(super) fn step(
        &mut self,
        variant: u8,
        notice: u8,
        now: Phase,
        answers: Answers,
    ) -> Result<Step, VerifyError> {
        let memo_key = (variant, notice, now, answers);
        if let Some(step) = self.memo.get(&memo_key) {
            return Ok(*step);
        }
        let step = self.run(variant, notice, now, answers)?;
        self.memo.insert(memo_key, step);
        Ok(step)
    }

    /// Runs the real `deliver` with `answers` scripted, up to its first unanswered call.
    fn run(&mut self, variant: u8, notice: u8, now: Phase, answers: Answers) -> Result<Step, VerifyError> {
        let sender = Arc::clone(self.sender(variant)?);
        let job = self.notice(notice)?.job.clone();
        *lock(&self.script) = Script { answers: answers.to_vec(), ..Script::default() };
        let mut delivery = Box::pin(async move { sender.deliver(&job, now.at(), None).await });
        let polled = {
            // The sender's send timeout needs a timer to register with; it never fires.
            let _runtime = self.runtime.enter();
            delivery.as_mut().poll(&mut Context::from_waker(Waker::noop()))
        };
        drop(delivery);
        let script = std::mem::take(&mut *lock(&self.script));
        if let Some(what) = script.unexpected {
            return Err(VerifyError::Unexpected(what));
        }
        if script.next != script.answers.len() {
            return Err(VerifyError::Unexpected(format!(
                "the sender finished after {} of {} scripted answers",
                script.next,
                script.answers.len()
            )));
        }
        match (polled, script.call) {
            (Poll::Ready(delivery), None) => {
                let queue = queue_action(&delivery.outcome, delivery.key.as_ref(), now.at());
                Ok(Step::Done { outcome: delivery.outcome.label(), queue })
            }
            (Poll::Pending, Some(call)) => self.step_for(call),
            (Poll::Ready(_), Some(call)) => {
                Err(VerifyError::Unexpected(format!("the sender finished while waiting on {call:?}")))
            }
            (Poll::Pending, None) => {
                Err(VerifyError::Unexpected("the sender waited on something other than its ports".into()))
            }
        }
    }

    fn step_for(&mut self, call: Call) -> Result<Step, VerifyError> {
        Ok(match call {
            Call::Claim(key) => Step::Claim { key: self.intern(key)? },
            Call::RecordMissed(key) => Step::RecordMissed { key: self.intern(key)? },
            Call::Send(key) => Step::Send { key: self.intern(key)? },
            Call::CommitSent(key, id) => {
                Step::CommitSent { key: self.intern(key)?, message: parse_message_id(&id)? }
            }
            Call::CommitRejected(key) => Step::CommitRejected { key: self.intern(key)? },
            Call::Release(key) => Step::Release { key: self.intern(key)? },
        })
    }

    /// The row a claim (or a recorded miss) by a job of `notice` writes: the real request's own row.
    pub(super) fn written_row(
        &self,
        notice: u8,
        key: u8,
        now: Phase,
        t: u8,
        state: RowState,
    ) -> Result<LedgerRow, VerifyError> {
        let job = &self.notice(notice)?.job;
        let mut req = ClaimRequest::for_job(job, self.key(key)?.clone(), now.at());
        req.token = token(t);
        let detail = (state == RowState::Missed).then(|| "send window closed".to_owned());
        Ok(req.to_row(state, detail))
    }

    /// The notice whose content `digest` is.
    pub(super) fn notice_of_digest(&self, digest: &str) -> Result<u8, VerifyError> {
        self.notices
            .iter()
            .position(|n| n.digest == digest)
            .and_then(|i| u8::try_from(i).ok())
            .ok_or_else(|| VerifyError::Corrupt("a row holds content of no notice".into()))
    }
}

/// The shipped queue policy's action ([`notice_ledger::queue`]), coarsened to what the model
/// tells apart: the message stays (hidden, backing off or parked — each comes back) or goes.
fn queue_action(outcome: &Outcome, key: Option<&NoticeKey>, now: DateTime<Utc>) -> QueueAction {
    let receive = Receive { key, count: 1, now, jitter: 0.0 };
    match QueuePolicy::parking().action(outcome, &receive) {
        notice_ledger::QueueAction::Delete => QueueAction::Ack,
        notice_ledger::QueueAction::Hide(_)
        | notice_ledger::QueueAction::Backoff(_)
        | notice_ledger::QueueAction::Park { .. } => QueueAction::Retry,
        notice_ledger::QueueAction::DeadLetter => QueueAction::DeadLetter,
    }
}

/// A delivery status as the model names the reconciler's events (the SES event types of
/// `notice_ses::events::status_for`).
pub(super) const EVENTS: [(&str, DeliveryStatus); 4] = [
    ("Send", DeliveryStatus::Accepted),
    ("Delivery", DeliveryStatus::Delivered),
    ("Bounce", DeliveryStatus::Bounced),
    ("Reject", DeliveryStatus::NotDelivered),
];
