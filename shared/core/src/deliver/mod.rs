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
//! Files: this one holds [`NoticeSender`] and the one way in; `send.rs` the algorithm (claim →
//! send → commit, with the dedupe and the token before the claim); `withdraw.rs` the tombstone;
//! `outcome.rs` how a job can end (and the send budget); `batch.rs` the reads and tokens a whole
//! SQS batch shares; `place.rs` which key a notice lives under while two secret versions are
//! active.

mod batch;
mod outcome;
mod place;
mod send;
mod withdraw;

pub use batch::{Dedupe, Prefetched};
pub use outcome::{Delivery, Mode, Outcome, SendBudget};
pub use place::{locate, Placement};

use std::sync::{Arc, RwLock};
use std::time::Instant;

use chrono::{DateTime, Utc};
use tracing::{error, warn};

pub use crate::admission::Notices;
use crate::admission::{Admitted, AdmittedJob, Cause, Judgement, Refused, Why};
use crate::clock::{Clock, SystemClock};
use crate::identity::NoticeKey;
use crate::job::{Job, Withdrawal};
use crate::keyring::KeyRing;
use crate::ledger::ClaimLedger;
use crate::mailer::Mailer;
use crate::metrics::Metrics;
use crate::policy::WindowPolicy;
use crate::rate::RateGate;
use crate::render::Texts;

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
    /// Whether a message this sender does not finish comes back (a queue's redelivery): then
    /// its claims are made off the quarantine view, and whoever finds one left open puts it on
    /// ([`NoticeSender::redelivered_by_queue`]).
    redelivered: bool,
}

impl NoticeSender {
    /// A sender over these ports: enforce mode, the default [`SendBudget`], no rate gate, its own
    /// metrics.
    pub fn new(
        ledger: Arc<dyn ClaimLedger>,
        mailer: Arc<dyn Mailer>,
        texts: Arc<dyn Texts>,
        policy: WindowPolicy,
        keys: impl Into<KeyRing>,
    ) -> Self {
        Self {
            ledger,
            mailer,
            notices: RwLock::new(Arc::new(Notices { texts, policy })),
            keys: keys.into(),
            mode: Mode::Enforce,
            budget: SendBudget::default(),
            metrics: Arc::new(Metrics::default()),
            rate_gate: None,
            clock: Arc::new(SystemClock),
            redelivered: false,
        }
    }

    /// For hosts whose queue gives an unfinished message back (the sender Lambda, and the models
    /// that run it): claims are made off the quarantine view, so a notice claimed, sent and
    /// committed writes no index entry. A claim can then stay open unlisted only until its
    /// message's next delivery, which finds it held and puts it on the view before anything
    /// acks that message; a sender that leaves its own claim open (an unknown send, a lost
    /// commit) puts it on first. Without this (`noticectl send` reads files: nothing comes back)
    /// every claim is listed as it is made.
    pub fn redelivered_by_queue(mut self) -> Self {
        self.redelivered = true;
        self
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
        let texts = Arc::clone(&self.notices().texts);
        self.switch(texts, policy);
        self
    }

    /// Puts another configuration in force for every delivery that starts from now on (one in
    /// flight finishes under the one it started with).
    pub fn switch(&self, texts: Arc<dyn Texts>, policy: WindowPolicy) {
        let next = Arc::new(Notices { texts, policy });
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
