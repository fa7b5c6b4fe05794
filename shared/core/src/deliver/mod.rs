//! The send path, on one screen:
//!
//! ```text
//! parse + validate ─▶ window ─▶ render ─▶ ledger read ─▶ rate token ─▶ CLAIM (committed) ─▶ SEND (one attempt) ─▶ COMMIT ─▶ outcome ─▶ ack
//! ```
//!
//! Dedupe decides before the rate: a key that is already sent, in flight or decided is suppressed
//! (and acked) even when its domain's bucket is empty, and spends no token. Only a job the ledger
//! would let claim takes one, before claiming; without a token it comes back when one is due
//! (`rate_limited`) having claimed nothing — so no claim is ever handed back for want of a token.
//!
//! Crash windows, and why each is safe:
//! 1. before the claim commits: no row, nothing sent — the redelivery starts over.
//! 2. after the claim, before the send: row `claimed`, nothing sent — redeliveries are suppressed;
//!    the claim ages into quarantine and is resolved by an operator (no provider event will come).
//! 3. after the send, before the commit: row `claimed`, message out — redeliveries are suppressed;
//!    the provider's Send event resolves the claim (reconciler).
//! 4. after the commit, before the ack: row `sent` — the redelivery is suppressed.
//!
//! From inside the worker 2 and 3 look the same, so an uncommitted claim is never released here —
//! except when the provider itself said "not accepted".
//!
//! A claim younger than [`SendBudget::claim_lifetime`] may still be running (a duplicate receive,
//! a visibility timeout expiring mid-send), and its claimer may yet release it: a delivery held by
//! it is not acked but comes back once the claimer has finished or died (`in_flight`). Acking it
//! could leave a released row and no message to send it. Likewise a release that failed is
//! retried, not acked: it may have landed.
//!
//! A withdraw message (`"action": "withdraw"`) takes the other door of the same key: one
//! conditional write of a `withdrawn` tombstone where a claim could be written (no row, or a
//! released one). Claim and tombstone exclude each other, so for every key either the notice was
//! claimed first (and the withdraw is answered `withdraw_too_late`) or the tombstone was, and no
//! copy of the job is ever sent. A withdraw that meets a claim still in flight waits for it, like
//! a duplicate delivery: its sender may yet release it.
//!
//! While the key secret rotates, a notice lives under one key: `place.rs` decides which, and the
//! first write there carries aliases at the older versions' keys ([`crate::keyring`]).
//!
//! Files: this one holds the algorithm and [`NoticeSender`]; `outcome.rs` how a job can end (and
//! the send budget); `batch.rs` the reads and tokens a whole SQS batch shares; `place.rs` which
//! key a notice lives under while two secret versions are active.

mod batch;
mod outcome;
mod place;

pub use batch::Prefetched;
pub use outcome::{Delivery, Mode, Outcome, SendBudget};
pub use place::{locate, Placement};

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tracing::{debug, error, info, warn};

pub use crate::admission::Notices;
use crate::admission::{Admitted, AdmittedJob, Cause, Judgement, Refused, Why};
use crate::clock::{Clock, SystemClock};
use crate::identity::NoticeKey;
use crate::job::{Job, Withdrawal};
use crate::keyring::KeyRing;
use crate::ledger::rules::{permits, withdraw_answer, Verdict, WithdrawAnswer, Write};
use crate::ledger::{
    Claim, ClaimLedger, ClaimOutcome, ClaimRequest, LedgerRow, Origin, RowState, WithdrawRequest,
};
use crate::mailer::{Mailer, NotAccepted, SendResult};
use crate::metrics::Metrics;
use crate::policy::{WindowDecision, WindowPolicy};
use crate::rate::{Admission, RateGate, RateScope, TokenRequest};
use crate::render::Renderer;

/// The sender: ports plus configuration. Cheap to share (`Arc`) across concurrent jobs. Made by
/// [`NoticeSender::new`] (the ports and the send policy), refined with the `with_*` methods.
pub struct NoticeSender {
    /// Only the claim → commit port: the send path cannot resolve or release claims it does not hold.
    ledger: Arc<dyn ClaimLedger>,
    mailer: Arc<dyn Mailer>,
    /// The texts and the policy in force, swapped whole when a new configuration version is loaded
    /// ([`NoticeSender::switch`]); each delivery takes one snapshot, so a notice is judged and
    /// rendered under one version.
    notices: RwLock<Arc<Notices>>,
    /// The key secret's versions: the current one keys new notices; older active ones are read
    /// and aliased ([`crate::keyring`]). One version alone is the send path without rotation.
    keys: KeyRing,
    mode: Mode,
    budget: SendBudget,
    metrics: Arc<Metrics>,
    /// Shared per-domain send rate, taken after the dedupe read and before the claim (`None`: no limit).
    rate_gate: Option<Arc<dyn RateGate>>,
    /// The time of the writes that follow a send ([`crate::clock`]).
    clock: Arc<dyn Clock>,
}

impl NoticeSender {
    /// A sender over these ports: enforce mode, the default [`SendBudget`], no rate gate, its own
    /// metrics.
    pub fn new(
        ledger: Arc<dyn ClaimLedger>,
        mailer: Arc<dyn Mailer>,
        renderer: Arc<Renderer>,
        policy: WindowPolicy,
        keys: impl Into<KeyRing>,
    ) -> Self {
        Self {
            ledger,
            mailer,
            notices: RwLock::new(Arc::new(Notices { renderer, policy })),
            keys: keys.into(),
            mode: Mode::Enforce,
            budget: SendBudget::default(),
            metrics: Arc::new(Metrics::default()),
            rate_gate: None,
            clock: Arc::new(SystemClock),
        }
    }

    /// Stamps the writes that follow a send with `clock` (default: the wall clock).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The sender's clock: what its caller reads "now" from, so a rehearsal judges and stamps at
    /// one instant.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    pub fn with_budget(mut self, budget: SendBudget) -> Self {
        self.budget = budget;
        self
    }

    pub fn with_policy(self, policy: WindowPolicy) -> Self {
        let renderer = Arc::clone(&self.notices().renderer);
        self.switch(renderer, policy);
        self
    }

    /// Puts another configuration in force for every delivery that starts from now on (one in
    /// flight finishes under the one it started with).
    pub fn switch(&self, renderer: Arc<Renderer>, policy: WindowPolicy) {
        let next = Arc::new(Notices { renderer, policy });
        match self.notices.write() {
            Ok(mut current) => *current = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }

    /// The configuration in force now.
    pub fn notices(&self) -> Arc<Notices> {
        match self.notices.read() {
            Ok(current) => Arc::clone(&current),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Counts into `metrics` (shared with whoever publishes them).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Paces sends through `gate` (`None`: no limit).
    pub fn with_rate_gate(mut self, gate: Option<Arc<dyn RateGate>>) -> Self {
        self.rate_gate = gate;
        self
    }

    /// The counters the send path increments.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The notice key of `job` under this sender's current secret version (which never leaves it
    /// otherwise). While a rotation is in progress the notice may live under an older version's
    /// key instead: [`NoticeSender::deliver`]'s [`Delivery`] names the key it used.
    pub fn key(&self, job: &Job) -> NoticeKey {
        self.keys.key(&job.identity)
    }

    /// The key secret's versions this sender holds (numbers only leave through `describe`).
    pub fn key_ring(&self) -> &KeyRing {
        &self.keys
    }
}

/// How one delivery runs: the instant it is judged at, the invocation's deadline, the counters it
/// counts into, and the reads its batch already made ([`NoticeSender::prefetch`]).
#[derive(Clone, Copy, Debug)]
pub struct DeliverContext<'a> {
    pub now: DateTime<Utc>,
    /// When the invocation ends (`None`: only the send timeout bounds a send).
    pub deadline: Option<Instant>,
    /// Counters to count into instead of the sender's own — a replay batch's notices are reported
    /// on their own (the sender Lambda's EMF records).
    pub metrics: Option<&'a Metrics>,
    pub prefetched: Option<&'a Prefetched>,
}

impl<'a> DeliverContext<'a> {
    /// A delivery judged at `now`, no deadline, the sender's own counters, nothing prefetched.
    pub fn at(now: DateTime<Utc>) -> Self {
        Self { now, deadline: None, metrics: None, prefetched: None }
    }

    pub fn with_deadline(self, deadline: Option<Instant>) -> Self {
        Self { deadline, ..self }
    }

    pub fn counting_into(self, metrics: &'a Metrics) -> Self {
        Self { metrics: Some(metrics), ..self }
    }

    pub fn with_prefetched(self, prefetched: Option<&'a Prefetched>) -> Self {
        Self { prefetched, ..self }
    }
}

/// What is delivered: a message body as it came off the queue (a job or a withdraw, admitted
/// here), a job already validated (the model check, tools), or a message the caller already
/// admitted ([`NoticeSender::admit`]: the sender Lambda admits each record once, for its batch's
/// prefetch and its delivery alike).
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    Body(&'a str),
    Job(&'a Job),
    Admitted(&'a Judgement),
}

impl<'a> From<&'a Judgement> for Input<'a> {
    fn from(admission: &'a Judgement) -> Self {
        Input::Admitted(admission)
    }
}

impl<'a> From<&'a str> for Input<'a> {
    fn from(body: &'a str) -> Self {
        Input::Body(body)
    }
}

impl<'a> From<&'a String> for Input<'a> {
    fn from(body: &'a String) -> Self {
        Input::Body(body)
    }
}

impl<'a> From<&'a Job> for Input<'a> {
    fn from(job: &'a Job) -> Self {
        Input::Job(job)
    }
}

impl NoticeSender {
    /// The admission of one message body under the configuration in force now (the core's one
    /// admission, [`crate::admission`]).
    pub fn admit(&self, body: &str, now: DateTime<Utc>) -> Judgement {
        self.notices().admit(body, now)
    }

    /// The one way in: a message body — a job or a withdraw, admitted here — a validated job, or
    /// a message already admitted, delivered under `ctx`.
    pub async fn deliver<'i>(&self, input: impl Into<Input<'i>>, ctx: DeliverContext<'_>) -> Delivery {
        let DeliverContext { now, deadline, metrics, prefetched } = ctx;
        let metrics = metrics.unwrap_or(&self.metrics);
        let owned: Judgement;
        let admission = match input.into() {
            Input::Admitted(admission) => admission,
            Input::Body(body) => {
                owned = self.admit(body, now);
                &owned
            }
            Input::Job(job) => {
                owned = self.notices().admit_job(job.clone(), now).map(|j| Admitted::Send(Box::new(j)));
                &owned
            }
        };
        match admission {
            Ok(Admitted::Send(job)) => self.run_placed(job, now, deadline, metrics, prefetched).await,
            Ok(Admitted::Withdraw(withdrawal)) => {
                self.withdraw_placed(withdrawal, now, metrics, prefetched).await
            }
            Err(refused) => Delivery {
                key: refused.identity.as_ref().map(|identity| self.keys.key(identity)),
                outcome: refused_outcome(refused, metrics),
            },
        }
    }

    /// A withdraw already parsed (the model check): admitted, then the tombstone, or why there is
    /// none.
    pub async fn withdraw(&self, withdrawal: &Withdrawal, now: DateTime<Utc>) -> Delivery {
        let admission = self.notices().admit_withdraw(withdrawal.clone()).map(Admitted::Withdraw);
        self.deliver(&admission, DeliverContext::at(now)).await
    }

    /// A job under the key its notice lives at ([`NoticeSender::place`]).
    async fn run_placed(
        &self,
        admitted: &AdmittedJob,
        now: DateTime<Utc>,
        deadline: Option<Instant>,
        m: &Metrics,
        prefetched: Option<&Prefetched>,
    ) -> Delivery {
        match self.place(&admitted.job.identity, prefetched).await {
            Ok(placed) => {
                let outcome = self.run(admitted, &placed, now, deadline, m, prefetched).await;
                Delivery { key: Some(placed.key), outcome }
            }
            Err(e) => Delivery { key: Some(self.key(&admitted.job)), outcome: self.read_failed(e, m) },
        }
    }

    /// A withdraw under the key its notice lives at ([`NoticeSender::place`]).
    async fn withdraw_placed(
        &self,
        withdrawal: &Withdrawal,
        now: DateTime<Utc>,
        m: &Metrics,
        prefetched: Option<&Prefetched>,
    ) -> Delivery {
        match self.place(&withdrawal.identity, prefetched).await {
            Ok(placed) => {
                let outcome = self.withdraw_key(withdrawal, &placed, now, m).await;
                Delivery { key: Some(placed.key), outcome }
            }
            Err(e) => {
                Delivery { key: Some(self.keys.key(&withdrawal.identity)), outcome: self.read_failed(e, m) }
            }
        }
    }

    /// A ledger read the placement needed failed: retried, like any ledger failure.
    fn read_failed(&self, e: crate::error::LedgerError, m: &Metrics) -> Outcome {
        Metrics::incr(&m.ledger_errors);
        error!(error = %e, "ledger read failed");
        Outcome::LedgerUnavailable(e.to_string())
    }

    async fn withdraw_key(
        &self,
        withdrawal: &Withdrawal,
        placed: &Placement,
        now: DateTime<Utc>,
        m: &Metrics,
    ) -> Outcome {
        let req = WithdrawRequest::new(withdrawal, placed.key.clone(), Origin::Worker, "producer", now)
            .with_aliases(placed.aliases.clone());
        let held = match self.ledger.withdraw(&req).await {
            Ok(None) => {
                Metrics::incr(&m.withdrawn);
                info!("withdrawn: tombstone written; no copy of this notice will be sent");
                return Outcome::Withdrawn { already: false };
            }
            Ok(Some(row)) => row,
            Err(e) => {
                Metrics::incr(&m.ledger_errors);
                error!(error = %e, "withdraw failed: retried");
                return Outcome::LedgerUnavailable(e.to_string());
            }
        };
        match withdraw_answer(Some(&held)) {
            WithdrawAnswer::AlreadyWithdrawn => {
                info!("already withdrawn");
                Outcome::Withdrawn { already: true }
            }
            WithdrawAnswer::NeverSent => {
                info!(state = %held.state, "nothing to withdraw: the notice was never sent and never will be");
                Outcome::WithdrawNotNeeded { state: held.state }
            }
            WithdrawAnswer::Elsewhere => {
                let until = now + ALIAS_WAIT;
                info!(until = %until, "the notice lives under a newer secret version's key this sender does not hold yet: back after its key refresh");
                Outcome::InFlight { until, withdraw: true }
            }
            WithdrawAnswer::TooLate => {
                if let Some(until) = self.in_flight_until(&held, now) {
                    // The queue policy hides a withdraw's wait and never parks it (see `queue.rs`).
                    info!(until = %until, "withdraw meets a claim that may still be in flight: back when its sender is done");
                    return Outcome::InFlight { until, withdraw: true };
                }
                Metrics::incr(&m.withdraw_too_late);
                warn!(state = %held.state, since = %held.updated_at, "withdraw too late: the notice went out or may have");
                Outcome::WithdrawTooLate { state: held.state, at: held.updated_at }
            }
            // The ledger refused a write its own rule permits: a ledger fault, retried.
            // Only the alias can refuse a withdraw over a released row (see `placed_stale`).
            WithdrawAnswer::Withdraw if held.state == RowState::Released => self.placed_stale(now, true),
            WithdrawAnswer::Withdraw => {
                Metrics::incr(&m.ledger_errors);
                error!(state = %held.state, "ledger refused a withdraw its row permits");
                Outcome::LedgerUnavailable(format!("ledger refused a withdraw over a {} row", held.state))
            }
        }
    }

    async fn run(
        &self,
        admitted: &AdmittedJob,
        placed: &Placement,
        now: DateTime<Utc>,
        deadline: Option<Instant>,
        m: &Metrics,
        prefetched: Option<&Prefetched>,
    ) -> Outcome {
        // ── ADMITTED ── the policy (a known kind, the content its law requires), the window and
        // the render were judged by the one admission before this: a refused message never gets
        // here, so nothing is claimed for it.
        let job = &admitted.job;
        let notices = self.notices();
        let decision = admitted.window;
        if let WindowDecision::Defer { until, closes_at } = decision {
            // Early jobs are turned away before any ledger work (or digest) is spent on them.
            Metrics::incr(&m.deferred);
            return Outcome::Deferred { until, closes_at };
        }
        if let Some(j) = job.jurisdiction.as_deref().filter(|j| !notices.policy.names_jurisdiction(j)) {
            m.count_unlisted_jurisdiction(j);
            // Debug, not info: it is counted (`UnlistedJurisdiction`, by `Jurisdiction`) in every
            // invocation's metrics, and the row keeps the jurisdiction and the configuration version
            // the window was judged under. At info it was a line on every such notice, a third of
            // the sender's log volume on a common case.
            debug!(
                jurisdiction = j,
                "jurisdiction not named by the windows policy: the kind's own window applies"
            );
        }
        let key = &placed.key;
        let req = ClaimRequest::for_job(job, key.clone(), now).with_aliases(placed.aliases.clone());
        if let WindowDecision::Missed { closed_at } = decision {
            return self.record_missed(&req, closed_at, m).await;
        }

        // Rendered by the admission, before any claim: a template error never leaves a claim
        // behind. Addressed here to the key the notice lives under; the claim records which
        // configuration, texts and rendering went out.
        let Some(draft) = &admitted.draft else {
            // The admission drafts every job that may be sent; only a missed one has none.
            return refused_outcome(
                &Refused {
                    why: Why::Render("admitted without its rendering".into()),
                    identity: None,
                    withdraw: false,
                },
                m,
            );
        };
        let rendered = draft.clone().addressed(key);
        let (mail, req) = (rendered.mail, req.with_rendered(rendered.record));

        let send_timeout = match self.send_timeout(deadline) {
            Some(t) => t,
            None => return Outcome::NoTimeLeft,
        };

        // ── DEDUPE, then RATE ── a key the ledger already holds is decided without a token; only a
        // job that would send takes one, and takes it *before* its claim, so a job without a token
        // leaves no claim behind. (Releasing a fresh claim instead would race a duplicate delivery
        // that saw the claim, was suppressed and acked the message: then nobody sends.) Two workers
        // that both read "free" may both take a token; one claim wins — a token wasted, never one
        // too many.
        let mut held_in_shadow = false;
        if self.rate_gate.is_some() {
            let read = match prefetched.and_then(|p| p.row(key)) {
                Some(row) => Ok(row),
                None => self.ledger.get(key).await,
            };
            match read {
                Ok(Some(row))
                    if permits(Some(&row), Write::Claim { token: &req.token }) == Verdict::Refuse =>
                {
                    if let Some(outcome) = self.refused(&req, &row, m) {
                        return outcome;
                    }
                    held_in_shadow = true;
                }
                Ok(_) => {}
                Err(e) => {
                    Metrics::incr(&m.ledger_errors);
                    error!(error = %e, "ledger read failed");
                    if self.mode == Mode::Enforce {
                        return Outcome::LedgerUnavailable(e.to_string());
                    }
                }
            }
            if let Some(outcome) = self.take_token(job, key, now, m, prefetched).await {
                return outcome;
            }
        }

        // ── CLAIM ── committed before anything leaves. Crash after this line: window 2.
        let claim_started = Instant::now();
        let claim = if held_in_shadow {
            None // shadow: already counted as "would suppress"; send anyway, without a claim
        } else {
            match self.ledger.claim(&req).await {
                Ok(ClaimOutcome::Minted(claim)) => {
                    Metrics::incr(&m.claims_minted);
                    Some(claim)
                }
                Ok(ClaimOutcome::Held(row)) => {
                    if let Some(outcome) = self.refused(&req, &row, m) {
                        return outcome;
                    }
                    None // shadow: send anyway, without a claim of ours
                }
                Err(e) => {
                    Metrics::incr(&m.ledger_errors);
                    error!(error = %e, "claim failed");
                    if self.mode == Mode::Enforce {
                        return Outcome::LedgerUnavailable(e.to_string());
                    }
                    None
                }
            }
        };

        // ── SEND ── exactly one attempt. Crash after this line: window 3.
        let result = match tokio::time::timeout(send_timeout, self.mailer.send(&mail)).await {
            Ok(result) => result,
            Err(_) => SendResult::Unknown {
                reason: format!("send did not answer within {} ms", send_timeout.as_millis()),
            },
        };

        let Some(claim) = claim else {
            return self.shadow_result(result, &req).await;
        };

        // ── COMMIT ── Crash after this line: window 4 (ack lost, redelivery suppressed).
        let outcome = self.commit(&claim, result, m).await;
        if matches!(outcome, Outcome::Sent { .. }) {
            m.observe_claim_to_commit(claim_started.elapsed().as_secs_f64() * 1000.0);
        }
        outcome
    }

    /// Takes a token for the recipient's domain (the batch's, when it took one for this key);
    /// `None` means "send". Without one the job is deferred until a token is due — nothing
    /// claimed, nothing sent. Shadow mode never blocks on a gate error.
    async fn take_token(
        &self,
        job: &Job,
        key: &NoticeKey,
        now: DateTime<Utc>,
        m: &Metrics,
        prefetched: Option<&Prefetched>,
    ) -> Option<Outcome> {
        let gate = self.rate_gate.as_ref()?;
        let admitted = match prefetched.and_then(|p| p.admission(key)) {
            Some(planned) => Ok(planned),
            None => {
                let request = TokenRequest { domain: job.recipient_domain(), shard_seed: key.seed(1) };
                let answer = gate.admit_batch(std::slice::from_ref(&request), now).await;
                answer.map(|mut a| a.pop().unwrap_or(Admission::Admitted))
            }
        };
        m.token_write_conflicts.fetch_add(gate.take_conflicts(), std::sync::atomic::Ordering::Relaxed);
        match admitted {
            Ok(Admission::Admitted) => None,
            Ok(Admission::Limited { retry_at, scope }) => {
                Metrics::incr(&m.rate_limited);
                if scope == RateScope::Account {
                    Metrics::incr(&m.rate_limited_by_account);
                }
                info!(until = %retry_at, scope = scope.as_str(), "over the send rate: deferred, nothing claimed or sent");
                Some(Outcome::RateLimited { until: retry_at })
            }
            Err(e) => {
                Metrics::incr(&m.ledger_errors);
                error!(error = %e, "rate bucket unavailable");
                (self.mode == Mode::Enforce).then(|| Outcome::LedgerUnavailable(e.to_string()))
            }
        }
    }

    async fn commit(&self, claim: &Claim, result: SendResult, m: &Metrics) -> Outcome {
        let now = self.clock.now();
        match result {
            SendResult::Accepted { message_id } => {
                match self.ledger.commit_sent(claim, &message_id, now).await {
                    Ok(()) => {
                        Metrics::incr(&m.sent);
                        // Debug: the caller's one line per message carries the outcome and this
                        // message id (the sender's `processed`; noticectl prints its own line).
                        debug!(message_id = %message_id, "sent");
                        Outcome::Sent { message_id }
                    }
                    Err(e) => {
                        // The message is out; the claim stays and the provider's Send event resolves it.
                        Metrics::incr(&m.ledger_errors);
                        Metrics::incr(&m.quarantined);
                        error!(message_id = %message_id, error = %e, "sent but commit failed: claim left for the reconciler");
                        Outcome::Quarantined {
                            reason: format!("commit failed after send: {e}"),
                            message_id: Some(message_id),
                        }
                    }
                }
            }
            SendResult::NotAccepted { class, reason } => {
                if class == NotAccepted::Configuration {
                    Metrics::incr(&m.configuration_errors);
                    error!(%reason, "provider configuration error: nothing is being sent until it is fixed");
                } else {
                    warn!(%class, %reason, "provider did not accept the message");
                }
                match self.ledger.release(claim, &format!("{class}: {reason}"), now).await {
                    Ok(()) => {
                        Metrics::incr(&m.released);
                        Outcome::Released { class, reason }
                    }
                    // Nothing went out, but the release may have landed: acking could leave a
                    // released row and no message. Retried: the redelivery finds the row released
                    // (and sends) or still claimed (in flight, then quarantined).
                    Err(e) => {
                        Metrics::incr(&m.ledger_errors);
                        error!(%reason, error = %e, "not accepted and the release failed: retried");
                        Outcome::LedgerUnavailable(format!(
                            "not accepted ({reason}) and the release failed: {e}"
                        ))
                    }
                }
            }
            SendResult::Rejected { reason } => {
                warn!(%reason, "provider rejected the message");
                match self
                    .ledger
                    .commit_rejected(
                        claim,
                        &crate::ledger::bounded_text(&reason, crate::ledger::MAX_REASON_CHARS),
                        now,
                    )
                    .await
                {
                    Ok(()) => {
                        Metrics::incr(&m.rejected);
                        Outcome::Rejected { reason }
                    }
                    Err(e) => self.quarantine(format!("rejected ({reason}) but commit failed: {e}"), m),
                }
            }
            SendResult::Unknown { reason } => self.quarantine(format!("send outcome unknown: {reason}"), m),
        }
    }

    fn quarantine(&self, reason: String, m: &Metrics) -> Outcome {
        Metrics::incr(&m.quarantined);
        error!(%reason, "claim quarantined: outcome unknown, resolve from provider events");
        Outcome::Quarantined { reason, message_id: None }
    }

    /// The key already has a row. `None` means "send anyway" (shadow mode only).
    fn refused(&self, req: &ClaimRequest, row: &LedgerRow, m: &Metrics) -> Option<Outcome> {
        let conflict = row.content_digest.as_deref().is_some_and(|d| d != req.content_digest);
        if conflict {
            Metrics::incr(&m.payload_conflicts);
            error!(state = %row.state, "payload conflict: same notice key, different content; bump `revision` for a corrected notice");
        }
        if self.mode == Mode::Shadow {
            Metrics::incr(&m.shadow_would_suppress);
            info!(state = %row.state, "shadow: enforce mode would suppress this send");
            return None;
        }
        if conflict {
            return Some(Outcome::PayloadConflict { state: row.state });
        }
        Some(self.held(row, req.at, m))
    }

    /// A delivery the ledger turned away: acked, unless the claim holding it may still be running
    /// — or the row is an alias: the notice lives under a newer secret version's key that this
    /// sender does not hold yet, so it cannot tell what happened there (back after its refresh).
    fn held(&self, row: &LedgerRow, now: DateTime<Utc>, m: &Metrics) -> Outcome {
        if row.state == RowState::Released {
            return self.placed_stale(now, false);
        }
        if row.state == RowState::Alias {
            let until = now + ALIAS_WAIT;
            info!(until = %until, "the notice lives under a newer secret version's key this sender does not hold yet: back after its key refresh");
            return Outcome::InFlight { until, withdraw: false };
        }
        Metrics::incr(&m.duplicates_suppressed);
        if let Some(until) = self.in_flight_until(row, now) {
            info!(until = %until, "held by a claim that may still be in flight: back when its sender is done");
            return Outcome::InFlight { until, withdraw: false };
        }
        info!(state = %row.state, "duplicate suppressed");
        Outcome::Suppressed { state: row.state }
    }

    /// A first write under the current key refused for its alias by a *released* row at an older
    /// version's key (nothing else refuses a claim, a missed record or a withdraw with a released
    /// row): since this delivery placed the notice, a sender on the older version claimed the
    /// older key and released it. The notice lives there now and may still be sent — back at
    /// once to place it again, never acked as if decided.
    fn placed_stale(&self, now: DateTime<Utc>, withdraw: bool) -> Outcome {
        let until = now + REPLACE_WAIT;
        info!(until = %until, "the notice moved to an older secret version's key since it was placed: placed again");
        Outcome::InFlight { until, withdraw }
    }

    /// When the sender of an open claim younger than `claim_lifetime` is surely gone (a claim
    /// stamped in the future by a skewed clock counts as young). `None`: decided, older, or no
    /// claim time to judge by.
    fn in_flight_until(&self, row: &LedgerRow, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if row.state != RowState::Claimed {
            return None;
        }
        let gone_at = row.claimed_at? + chrono::Duration::from_std(self.budget.claim_lifetime).ok()?;
        (now < gone_at).then(|| gone_at + chrono::Duration::seconds(1))
    }

    async fn shadow_result(&self, result: SendResult, req: &ClaimRequest) -> Outcome {
        let would_suppress = match self.ledger.get(&req.key).await {
            Ok(Some(row)) if row.claim_token.as_ref() != Some(&req.token) => Some(row.state),
            _ => None,
        };
        let message_id = match result {
            SendResult::Accepted { message_id } => Some(message_id),
            other => {
                warn!(result = ?other, "shadow: send not accepted");
                None
            }
        };
        Outcome::ShadowSent { message_id, would_suppress }
    }

    async fn record_missed(&self, req: &ClaimRequest, closed_at: DateTime<Utc>, m: &Metrics) -> Outcome {
        let reason = format!("send window closed at {}", closed_at.to_rfc3339());
        match self.ledger.record_missed(req, &reason).await {
            Ok(None) => {
                Metrics::incr(&m.missed_window);
                error!(closed_at = %closed_at, "missed the send window: recorded, not sent");
                Outcome::Missed { closed_at }
            }
            Ok(Some(row)) => self.held(&row, req.at, m),
            Err(e) => {
                Metrics::incr(&m.ledger_errors);
                error!(error = %e, "could not record missed window");
                Outcome::LedgerUnavailable(e.to_string())
            }
        }
    }

    fn send_timeout(&self, deadline: Option<Instant>) -> Option<Duration> {
        let Some(deadline) = deadline else {
            return Some(self.budget.send_timeout);
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left < self.budget.min_time_left {
            warn!(left_ms = left.as_millis() as u64, "too little time left to start a send");
            return None;
        }
        Some(self.budget.send_timeout.min(left / 2))
    }
}

/// How long a delivery whose placement went stale waits before it places the notice again: a
/// moment — the older key's row is there to read.
pub const REPLACE_WAIT: chrono::Duration = chrono::Duration::seconds(1);

/// How long a delivery that met an alias it cannot follow waits: at least the key ring's refresh
/// interval, after which this environment holds the version the alias was written under.
pub const ALIAS_WAIT: chrono::Duration = chrono::Duration::minutes(5);

/// A message the admission refuses: counted (`InvalidJobs`, and `UnknownKind` or
/// `MissingRequiredContent`; `RenderFailed`), logged with the reason, answered as invalid input
/// or a render failure — nothing claimed or sent, dead-lettered with the reason.
fn refused_outcome(refused: &Refused, m: &Metrics) -> Outcome {
    match &refused.why {
        Why::Invalid { invalid, cause } => {
            Metrics::incr(&m.invalid_jobs);
            match cause {
                Cause::Schema => {
                    warn!(field = invalid.field, error = %invalid, "invalid job");
                    return Outcome::Invalid(invalid.clone());
                }
                Cause::UnknownKind => Metrics::incr(&m.unknown_kind),
                Cause::MissingContent => Metrics::incr(&m.missing_content),
            }
            warn!(field = invalid.field, error = %invalid, "refused by the windows policy: nothing claimed or sent");
            Outcome::Invalid(invalid.clone())
        }
        Why::Render(reason) => {
            // It pages: a notice that cannot be rendered is a notice the customer will not get.
            Metrics::incr(&m.render_failed);
            error!(error = %reason, "render failed");
            Outcome::RenderFailed(reason.clone())
        }
    }
}
