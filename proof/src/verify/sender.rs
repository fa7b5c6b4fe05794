//! The real core under the model: the sender Lambda's own worker ([`Worker`]) over the project's
//! [`NoticeSender`], run one port call at a time.
//!
//! A worker's state in the model is its job plus the answers its port calls got so far. To take
//! the next step the model runs the real worker with scripted ports that hand back those answers,
//! until it makes a call nobody has answered yet: that call is the worker's next step (or the
//! record is done, and its [`Outcome`](notice_ledger::Outcome) and the queue action the worker carried out are the job's
//! end). The worker is deterministic given its answers, so each distinct history is run once and
//! remembered. Nothing of the algorithm is re-stated here: admission, window, render, claim, send,
//! commit, release, the outcome mapping and the queue action are the worker's own code.
//!
//! Each record runs as the worker's stages run it ([`Worker::admit`], [`Worker::prefetch`],
//! [`Worker::record`]), a record of a batch (`--batch 2`) as a process of its own: the batch's
//! prefetch over the bodies of the whole batch first — its one ledger read and its one token
//! take, each a step of the worker — then the record with the [`Prefetched`] it returned, which
//! answers the record's dedupe read and token from the batch. The model explores the records in
//! either order, with a crash between any two steps — what `Worker::work` runs with concurrency 1;
//! one `work` future over the whole batch could not be stepped record by record (it hands back a
//! record's end only once every record is done, and the model keeps of a finished record nothing
//! but its end). Outside the batch path (`--batch 1`) a record runs with no prefetch, as a record
//! of a batch whose read failed (or of a sender without a rate gate) does.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use notice_ledger::job::Withdrawal;
use notice_ledger::keyring::KeyRing;
use notice_ledger::ledger::{ClaimLedger, ClaimRequest, LedgerRow, Origin, RowState, WithdrawRequest};
use notice_ledger::links::ManageLinks;
use notice_ledger::rate::RateGate;
use notice_ledger::worker::{Record, Worker};
use notice_ledger::{
    Job, NoticeKey, NoticeSecret, NoticeSender, Prefetched, QueuePolicy, SendBudget, WindowDecision,
    WindowPolicy,
};
use notice_texts::Renderer;

use super::error::VerifyError;
use super::fast_hash::FastMap;
use super::ports::{
    lock, Call, Facts, ModelMessage, ModelParker, PhaseClock, Script, ScriptedGate, ScriptedLedger,
    ScriptedMailer, Shared,
};
use super::world::{parse_message_id, token, Answers, Phase, QueueAction, Step, MAX_BATCH, MAX_KEYS};
use super::wrappers::{AdmitAll, WiredLedger, Wiring};

/// The notices of the bounded world, in the order `--notices` adds them.
const NOTICES: [(&str, &str, u64, &str, i64); 3] = [
    ("A", "sub_8812", 0, "ada@example.com", 2900),
    // A corrected notice: same subscription, period and kind, revision bumped, other content.
    ("A'", "sub_8812", 1, "ada@example.com", 2400),
    // Another subscriber at the same recipient domain.
    ("B", "sub_9001", 0, "bob@example.com", 2900),
];

/// One notice of the world.
pub(super) struct Notice {
    pub(super) name: &'static str,
    pub(super) job: Job,
    pub(super) digest: String,
    /// Its message bodies as the queue carries them: the job, and a withdraw of it.
    body: String,
    withdraw_body: String,
}

/// A message body of the world: (notice, a withdraw message of it).
pub(super) type Body = (u8, bool);

/// The batch a record was received in: the other record's body (`None`: a batch of one), whether
/// that record's message was received before, and the answers the batch's prefetch got so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct BatchCtx {
    pub(super) mate: Option<Body>,
    pub(super) mate_again: bool,
    pub(super) answers: Answers,
}

/// A record as the queue hands it over: its body, and whether its message was received before
/// (then `ApproximateReceiveCount` 2, else 1: what decides whether the worker reads it first).
type Received = (Body, bool);

/// (sender variant, the record, the job's clock, its answers so far, its batch)
type MemoKey = (u8, Received, Phase, Answers, Option<BatchCtx>);

/// (sender variant, the batch's records in order, its clock, the prefetch's answers)
type PrefetchKey = (u8, [Option<Received>; MAX_BATCH], Phase, Answers);

/// The receive count a record is handed over with.
fn receive_count(again: bool) -> u32 {
    if again {
        2
    } else {
        1
    }
}

/// The real sender, its inputs, and every history it has been run on.
pub(super) struct Core {
    pub(super) notices: Vec<Notice>,
    pub(super) policy: WindowPolicy,
    /// One sender per key variant: index 0 holds the real secret; with per-delivery keys (a mutant)
    /// delivery `i` uses sender `i`.
    senders: Vec<Arc<NoticeSender>>,
    script: Shared,
    /// The senders' clock, set to a job's phase before it runs.
    clock: PhaseClock,
    keys: Vec<NoticeKey>,
    key_ids: HashMap<NoticeKey, u8>,
    memo: FastMap<MemoKey, Step>,
    /// Every finished prefetch, by its inputs: what the batch's records are delivered with.
    prefetched: FastMap<PrefetchKey, Option<Arc<Prefetched>>>,
    runtime: tokio::runtime::Runtime,
}

/// The world's notices, the first `notices` of [`NOTICES`], each with its message bodies.
fn world_notices(notices: usize) -> Result<Vec<Notice>, VerifyError> {
    let setup = |e: &dyn std::fmt::Display| VerifyError::Setup(e.to_string());
    let mut list = Vec::new();
    for (name, sub, revision, email, amount) in NOTICES.iter().take(notices) {
        let body = serde_json::json!({
            "subscription_id": sub, "period_start": "2026-10-01", "kind": "renewal_notice_t72",
            "revision": revision, "email": email, "charge_at": "2026-10-04T09:00:00Z",
            "template_data": {"plan_name": "Coffee Box", "amount": {"minor": amount, "currency": "USD"}},
        });
        let job = Job::parse(&body.to_string(), &notice_texts::Icu).map_err(|e| setup(&e))?;
        let digest = job.content_digest();
        let mut withdraw = body.clone();
        withdraw["action"] = serde_json::json!("withdraw");
        list.push(Notice { name, job, digest, body: body.to_string(), withdraw_body: withdraw.to_string() });
    }
    Ok(list)
}

/// The scripted ports one sender is built on: the ledger and the rate gate the script answers,
/// and the script the mailer answers from.
struct Ports {
    ledger: Arc<dyn ClaimLedger>,
    gate: Arc<dyn RateGate>,
    script: Shared,
    clock: PhaseClock,
}

/// One real sender on the scripted ports, holding `keys`: with a rate gate if `gate` (as
/// deployed by default), its ports as shipped or rewired for a gate-path mutant by `wiring`.
fn scripted_sender(
    ports: Ports,
    (gate, wiring): (bool, Wiring),
    renderer: Arc<Renderer>,
    policy: WindowPolicy,
    keys: KeyRing,
) -> Arc<NoticeSender> {
    let ledger: Arc<dyn ClaimLedger> = match wiring {
        Wiring::Real => ports.ledger,
        _ => Arc::new(WiredLedger { inner: ports.ledger, gate: ports.gate.clone(), wiring }),
    };
    let rate_gate: Option<Arc<dyn RateGate>> = match (gate, wiring) {
        (false, _) => None,
        (true, Wiring::TokenAfterClaim) => Some(Arc::new(AdmitAll)),
        (true, _) => Some(ports.gate),
    };
    Arc::new(
        NoticeSender::new(ledger, Arc::new(ScriptedMailer { script: ports.script }), renderer, policy, keys)
            // As shipped: the queue redelivers, so claims are made off the quarantine view and the
            // model checks that none is acked while it is off.
            .redelivered_by_queue()
            // The model decides when a send times out (it answers "unknown"); the real timer
            // never fires.
            .with_budget(SendBudget {
                send_timeout: std::time::Duration::from_secs(7 * 86_400),
                ..SendBudget::default()
            })
            .with_rate_gate(rate_gate)
            .with_clock(Arc::new(ports.clock)),
    )
}

impl Core {
    /// `variants` senders: the first with the real key secret, the others with one derived per
    /// delivery (used only by the per-delivery key mutant). `gate`: the senders run with a rate
    /// gate (as deployed by default), so they read the row and take a token before claiming;
    /// `wiring`: the ports as shipped, or rewired for a gate-path mutant.
    ///
    /// `rotation`: the key secret is being rotated — two senders, variant 0 holding `v1` alone
    /// (not switched yet) and variant 1 holding `v1` and `v2`, `v2` current (switched), each
    /// deciding where a notice lives with its own real `NoticeSender::place`.
    pub(super) fn new(
        notices: usize,
        variants: usize,
        gate: bool,
        wiring: Wiring,
        rotation: bool,
    ) -> Result<Self, VerifyError> {
        let setup = |e: &dyn std::fmt::Display| VerifyError::Setup(e.to_string());
        let secret = NoticeSecret::new("verify-notice-key-secret").map_err(|e| setup(&e))?;
        let links = NoticeSecret::new("verify-links-secret").map_err(|e| setup(&e))?;
        let list = world_notices(notices)?;
        let script: Shared = Arc::default();
        let clock = PhaseClock::default();
        let facts = Facts { digests: Arc::new(list.iter().map(|n| n.digest.clone()).collect()) };
        let policy = WindowPolicy::default();
        let renderer =
            Arc::new(Renderer::builtin(ManageLinks::new("https://billing.example.com/manage", links)));
        let scripted_gate: Arc<dyn RateGate> = Arc::new(ScriptedGate { script: script.clone() });
        let v1 = KeyRing::from(secret.clone());
        let rotated = v1.rotated(secret.derive_subkey("verify-rotation-v2"));
        let variants = if rotation { 2 } else { variants.max(1) };
        let senders = (0..variants)
            .map(|v| {
                let keys = match (rotation, v) {
                    (_, 0) => v1.clone(),
                    (true, _) => rotated.clone(),
                    (false, v) => KeyRing::from(secret.derive_subkey(&format!("delivery-{v}"))),
                };
                let ledger: Arc<dyn ClaimLedger> =
                    Arc::new(ScriptedLedger { script: script.clone(), facts: facts.clone() });
                let ports = Ports {
                    ledger,
                    gate: scripted_gate.clone(),
                    script: script.clone(),
                    clock: clock.clone(),
                };
                scripted_sender(ports, (gate, wiring), renderer.clone(), policy.clone(), keys)
            })
            .collect();
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_time().build().map_err(|e| setup(&e))?;
        Ok(Self {
            notices: list,
            policy,
            senders,
            script,
            clock,
            keys: Vec::new(),
            key_ids: HashMap::new(),
            memo: FastMap::default(),
            prefetched: FastMap::default(),
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

    /// The message body `body` names, as the queue carries it.
    fn body(&self, (notice, withdraw): Body) -> Result<String, VerifyError> {
        let n = self.notice(notice)?;
        Ok(if withdraw { n.withdraw_body.clone() } else { n.body.clone() })
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
            .filter(|id| usize::from(*id) < MAX_KEYS)
            .ok_or_else(|| VerifyError::Bound(format!("more than {} notice keys", MAX_KEYS)))?;
        self.keys.push(key.clone());
        self.key_ids.insert(key, id);
        Ok(id)
    }

    /// The next step of a job of `body` (received before when `again`), received at `now` by
    /// sender `variant`, whose port calls got `answers` so far — in `batch`, when it came in one:
    /// then the batch's prefetch first.
    pub(super) fn step(
        &mut self,
        variant: u8,
        body: Body,
        again: bool,
        now: Phase,
        answers: Answers,
        batch: Option<BatchCtx>,
    ) -> Result<Step, VerifyError> {
        let memo_key = (variant, (body, again), now, answers, batch);
        if let Some(step) = self.memo.get(&memo_key) {
            return Ok(*step);
        }
        let step = self.run(variant, (body, again), now, answers, batch)?;
        self.memo.insert(memo_key, step);
        Ok(step)
    }

    /// Runs the real worker's record stage with `answers` scripted, up to its first unanswered
    /// call (in a batch, the worker's prefetch before it, with the batch's answers).
    fn run(
        &mut self,
        variant: u8,
        record: Received,
        now: Phase,
        answers: Answers,
        batch: Option<BatchCtx>,
    ) -> Result<Step, VerifyError> {
        let ((notice, withdraw), again) = record;
        let prefetched = match batch {
            None => None,
            Some(batch) => match self.prefetch(variant, record, batch, now)? {
                Ok(prefetched) => prefetched,
                Err(_) if !answers.is_empty() => {
                    return Err(VerifyError::Unexpected(
                        "a record made port calls before its batch's prefetch finished".into(),
                    ));
                }
                Err(step) => return Ok(step),
            },
        };
        let sender = Arc::clone(self.sender(variant)?);
        let job_key = sender.key(&self.notice(notice)?.job);
        let message = ModelMessage { body: self.body((notice, withdraw))?, received_at: now.at() };
        self.clock.set(now);
        *lock(&self.script) = Script { answers: answers.to_vec(), ..Script::default() };
        let mut delivery = Box::pin(async move {
            let record = Record {
                message: &message,
                message_id: "",
                receive_count: receive_count(again),
                jitter: 0.0,
                metrics: sender.metrics(),
            };
            let worker = model_worker(&sender);
            let admitted = worker.admit(std::slice::from_ref(&record));
            let judged = admitted.judged.first().and_then(Option::as_ref);
            worker.record(&record, judged, prefetched.as_deref()).await
        });
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
            (Poll::Ready(worked), None) => {
                let delivery = worked.delivery.ok_or_else(|| {
                    VerifyError::Unexpected("the worker found a record without a body".into())
                })?;
                let queue = coarse(worked.carried.action);
                let key = delivery.key.map(|k| self.intern(k)).transpose()?;
                Ok(Step::Done { outcome: delivery.outcome.label(), queue, key })
            }
            (Poll::Pending, Some(call)) => self.step_for(call, job_key),
            (Poll::Ready(_), Some(call)) => {
                Err(VerifyError::Unexpected(format!("the worker finished while waiting on {call:?}")))
            }
            (Poll::Pending, None) => {
                Err(VerifyError::Unexpected("the sender waited on something other than its ports".into()))
            }
        }
    }

    /// The batch's prefetch (the worker's admission and prefetch over the bodies of every record
    /// of the batch) run with its answers so far: what it returned (remembered), or the step it
    /// waits on.
    #[allow(clippy::type_complexity)]
    fn prefetch(
        &mut self,
        variant: u8,
        record: Received,
        batch: BatchCtx,
        now: Phase,
    ) -> Result<Result<Option<Arc<Prefetched>>, Step>, VerifyError> {
        let mut bodies = [Some(record), batch.mate.map(|mate| (mate, batch.mate_again))];
        bodies.sort();
        let memo_key = (variant, bodies, now, batch.answers);
        if let Some(done) = self.prefetched.get(&memo_key) {
            return Ok(Ok(done.clone()));
        }
        let sender = Arc::clone(self.sender(variant)?);
        let mut messages = Vec::with_capacity(MAX_BATCH);
        for &(body, again) in bodies.iter().flatten() {
            messages.push((ModelMessage { body: self.body(body)?, received_at: now.at() }, again));
        }
        self.clock.set(now);
        *lock(&self.script) = Script { answers: batch.answers.to_vec(), ..Script::default() };
        let mut prefetch = Box::pin(async move {
            let metrics = sender.metrics();
            let records: Vec<Record<'_>> = messages
                .iter()
                .map(|(message, again)| Record {
                    message,
                    message_id: "",
                    receive_count: receive_count(*again),
                    jitter: 0.0,
                    metrics,
                })
                .collect();
            let worker = model_worker(&sender);
            worker.prefetch(&records, &worker.admit(&records)).await
        });
        let polled = {
            let _runtime = self.runtime.enter();
            prefetch.as_mut().poll(&mut Context::from_waker(Waker::noop()))
        };
        drop(prefetch);
        let script = std::mem::take(&mut *lock(&self.script));
        if let Some(what) = script.unexpected {
            return Err(VerifyError::Unexpected(what));
        }
        match (polled, script.call) {
            (Poll::Ready(prefetched), None) => {
                if script.next != script.answers.len() {
                    return Err(VerifyError::Unexpected(format!(
                        "the prefetch finished after {} of {} scripted answers",
                        script.next,
                        script.answers.len()
                    )));
                }
                let prefetched = prefetched.map(Arc::new);
                self.prefetched.insert(memo_key, prefetched.clone());
                Ok(Ok(prefetched))
            }
            (Poll::Pending, Some(Call::ReadMany(keys))) => {
                let keys = self.batch_keys(keys.into_iter().map(Ok))?;
                Ok(Err(Step::BatchRead { keys }))
            }
            (Poll::Pending, Some(Call::Token(seeds))) => {
                // The gate is asked by domain and shard seed: the batch's keys, by their seeds.
                let mut candidates = Vec::with_capacity(MAX_BATCH);
                for &((notice, _), _) in bodies.iter().flatten() {
                    candidates.push(self.sender(variant)?.key(&self.notice(notice)?.job));
                }
                let keys = self.batch_keys(seeds.into_iter().map(|seed| {
                    candidates.iter().find(|k| k.seed(1) == seed).cloned().ok_or_else(|| {
                        VerifyError::Unexpected("the batch took a token for a key of no record".into())
                    })
                }))?;
                Ok(Err(Step::BatchToken { keys }))
            }
            (Poll::Pending, Some(call)) => {
                Err(VerifyError::Unexpected(format!("the prefetch made a call it never makes: {call:?}")))
            }
            (Poll::Ready(_), Some(call)) => {
                Err(VerifyError::Unexpected(format!("the prefetch finished while waiting on {call:?}")))
            }
            (Poll::Pending, None) => {
                Err(VerifyError::Unexpected("the prefetch waited on something other than its ports".into()))
            }
        }
    }

    /// Key ids of a batch call's keys, in the call's order.
    fn batch_keys(
        &mut self,
        keys: impl Iterator<Item = Result<NoticeKey, VerifyError>>,
    ) -> Result<[Option<u8>; MAX_BATCH], VerifyError> {
        let mut ids = [None; MAX_BATCH];
        for (i, key) in keys.enumerate() {
            let id = self.intern(key?)?;
            *ids.get_mut(i).ok_or_else(|| {
                VerifyError::Bound(format!("a batch call over more than {MAX_BATCH} keys"))
            })? = Some(id);
        }
        Ok(ids)
    }

    fn step_for(&mut self, call: Call, job_key: NoticeKey) -> Result<Step, VerifyError> {
        // The gate is asked by domain: a token take is the job's own key's.
        let key = self.intern(call.key().cloned().unwrap_or(job_key))?;
        Ok(match call {
            Call::Read(_) => Step::Read { key },
            Call::Token(_) => Step::Token { key },
            // A record's own read of several keys: where its notice lives while the secret rotates
            // (the older version's key; the model's rotation has two versions).
            Call::ReadMany(keys) => match keys.as_slice() {
                [older] => Step::Place { key: self.intern(older.clone())? },
                _ => {
                    return Err(VerifyError::Unexpected(format!(
                        "a record read {} keys of its own (the model rotates between two versions)",
                        keys.len()
                    )));
                }
            },
            Call::Claim(_, aliases, listed) => Step::Claim { key, alias: self.alias(&aliases)?, listed },
            Call::RecordMissed(_, aliases) => Step::RecordMissed { key, alias: self.alias(&aliases)? },
            Call::Send(_) => Step::Send { key },
            Call::CommitSent(_, id) => Step::CommitSent { key, message: parse_message_id(&id)? },
            Call::CommitRejected(_) => Step::CommitRejected { key },
            Call::Release(_) => Step::Release { key },
            Call::Withdraw(_, aliases) => Step::Withdraw { key, alias: self.alias(&aliases)? },
            Call::List(_) => Step::List { key },
        })
    }

    /// The one alias a write carries (the model rotates between two versions), by key id.
    fn alias(&mut self, aliases: &[NoticeKey]) -> Result<Option<u8>, VerifyError> {
        match aliases {
            [] => Ok(None),
            [older] => Ok(Some(self.intern(older.clone())?)),
            more => Err(VerifyError::Unexpected(format!("a write with {} aliases", more.len()))),
        }
    }

    /// The row a claim (or a recorded miss) by a job of `notice` writes: the real request's own row.
    pub(super) fn written_row(
        &self,
        notice: u8,
        key: u8,
        now: Phase,
        t: u8,
        (state, listed): (RowState, bool),
    ) -> Result<LedgerRow, VerifyError> {
        let job = &self.notice(notice)?.job;
        let mut req = ClaimRequest::for_job(job, self.key(key)?.clone(), now.at());
        req.token = token(t);
        req.on_quarantine_view = listed;
        let detail = (state == RowState::Missed).then(|| "send window closed".to_owned());
        Ok(req.to_row(state, detail))
    }

    /// The tombstone a withdraw message of `notice` writes at `now`: the real request's own row.
    pub(super) fn tombstone_row(&self, notice: u8, key: u8, now: Phase) -> Result<LedgerRow, VerifyError> {
        let identity = self.notice(notice)?.job.identity.clone();
        let withdrawal = Withdrawal { identity, reason: None };
        let req =
            WithdrawRequest::new(&withdrawal, self.key(key)?.clone(), Origin::Worker, "producer", now.at());
        Ok(req.to_row())
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

/// The worker the model runs: the deployed queue policy with parking configured, a parker that
/// answers at once, one record at a time (the model interleaves the records itself), no outcome
/// events (they change nothing the model checks).
fn model_worker(sender: &NoticeSender) -> Worker<'_> {
    const PARKING: QueuePolicy = QueuePolicy { parking: true, park_spread: std::time::Duration::ZERO };
    Worker {
        sender,
        policy: &PARKING,
        parker: Some(&ModelParker),
        deadline: None,
        concurrency: 1,
        events: false,
    }
}

/// The queue action the worker carried out ([`notice_ledger::queue`]), coarsened to what the model
/// tells apart: the message stays (hidden or backing off — it comes back), parks (the model
/// decides, by `--parking`, whether that is its own action), or goes.
fn coarse(action: notice_ledger::QueueAction) -> QueueAction {
    match action {
        notice_ledger::QueueAction::Delete => QueueAction::Ack,
        // Never a requeue here (the first receive); one would come back too, as a new message.
        notice_ledger::QueueAction::Hide(_)
        | notice_ledger::QueueAction::Backoff(_)
        | notice_ledger::QueueAction::Requeue(_) => QueueAction::Retry,
        notice_ledger::QueueAction::Park { .. } => QueueAction::Park,
        notice_ledger::QueueAction::DeadLetter => QueueAction::DeadLetter,
    }
}
