//! The one admission: a raw message body, the notice configuration in force and an instant → the
//! typed message with everything the sender needs from it, or the refusal naming the field, what
//! is wrong and, where there is one, the closest valid value.
//!
//! Every entry point judges a message here and nowhere else — the sender (each record and its
//! batch's prefetch), `noticectl send | validate | replay | enqueue | withdraw | backfill` and the
//! intake — so a producer's check, an operator's dry run and the worker cannot disagree: a
//! withdraw of a misspelled kind is refused like a job of it, and `validate` answers what `send`
//! would.
//!
//! In order, each step only for what passed the one before:
//!
//! ```text
//! schema (job.rs) ─▶ policy: known kind, required content ─▶ window at `now` ─▶ render (strict)
//! ```
//!
//! 1. schema: JSON, the fields, the identity, the address, the money object (`job.rs`);
//! 2. policy: a kind the policy lists (a withdraw's too), the content its law requires;
//! 3. the window at `now`: open, opens at T (deferred), or closed (missed: recorded, never sent);
//! 4. render, strictly, under the configuration's texts — every job that may still be sent, early
//!    ones included, so a template the job cannot fill is found when the job arrives, not at the
//!    opening of its window when nobody can fix it in time. A missed job is not rendered: it is
//!    never sent.
//!
//! Pure: no port is called, nothing is written. The ledger decides the rest (sent before,
//! withdrawn, held) and only the sender asks it.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::error::InvalidJob;
use crate::identity::Identity;
use crate::job::{Job, Message, Withdrawal};
use crate::policy::{Refusal, WindowDecision, WindowPolicy};
use crate::render::{Draft, Texts};

/// The texts and the policy a message is judged and rendered under: one configuration version.
/// The texts are a port ([`Texts`]): the texts crate's `Renderer` in every entry point.
pub struct Notices {
    pub texts: Arc<dyn Texts>,
    pub policy: WindowPolicy,
}

/// A message the admission let through.
#[derive(Clone, Debug, PartialEq)]
pub enum Admitted {
    Send(Box<AdmittedJob>),
    Withdraw(Withdrawal),
}

impl Admitted {
    pub fn identity(&self) -> &Identity {
        match self {
            Admitted::Send(job) => &job.job.identity,
            Admitted::Withdraw(w) => &w.identity,
        }
    }
}

/// A job the sender may work on, judged at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmittedJob {
    pub job: Job,
    /// Its window at the admission's instant.
    pub window: WindowDecision,
    /// The notice as it would go out (`None` for a missed job: it is never sent).
    pub draft: Option<Draft>,
}

/// The answer of one admission.
pub type Judgement = Result<Admitted, Refused>;

/// What an admission refuses: why, and the notice it is about when the body named one (so its
/// log line and its answer carry the notice key).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct Refused {
    pub why: Why,
    pub identity: Option<Identity>,
    /// A withdraw message was refused (its kind), not a job.
    pub withdraw: bool,
}

/// Why a message is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Why {
    /// Bad input: the schema, or the policy (unknown kind, missing required content).
    #[error("{invalid}")]
    Invalid { invalid: InvalidJob, cause: Cause },
    /// The configuration's texts cannot be filled from this job (a variable a template prints
    /// that the job does not carry, texts missing for its kind).
    #[error("{0}")]
    Render(String),
}

/// Why a message is invalid, for the metrics (`InvalidJobs`, and `UnknownKind` or
/// `MissingRequiredContent`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    Schema,
    UnknownKind,
    MissingContent,
}

impl Refused {
    fn about(identity: &Identity, why: impl Into<Why>) -> Self {
        Self { why: why.into(), identity: Some(identity.clone()), withdraw: false }
    }

    /// The verdict every entry point prints: `invalid` or `render_failed`.
    pub fn label(&self) -> &'static str {
        match self.why {
            Why::Invalid { .. } => "invalid",
            Why::Render(_) => "render_failed",
        }
    }

    /// The field at fault (`template` for a render failure).
    pub fn field(&self) -> &'static str {
        match &self.why {
            Why::Invalid { invalid, .. } => invalid.field,
            Why::Render(_) => "template",
        }
    }

    /// Why, without the field.
    pub fn reason(&self) -> &str {
        match &self.why {
            Why::Invalid { invalid, .. } => &invalid.reason,
            Why::Render(reason) => reason,
        }
    }

    /// The refusal as bad input (a render failure names the template as its field).
    pub fn as_invalid(&self) -> InvalidJob {
        match &self.why {
            Why::Invalid { invalid, .. } => invalid.clone(),
            Why::Render(reason) => InvalidJob::new("template", reason.clone()),
        }
    }
}

impl From<InvalidJob> for Refused {
    fn from(invalid: InvalidJob) -> Self {
        Refused { why: Why::Invalid { invalid, cause: Cause::Schema }, identity: None, withdraw: false }
    }
}

impl From<Refusal> for Why {
    fn from(refusal: Refusal) -> Self {
        let cause = match refusal {
            Refusal::UnknownKind(_) => Cause::UnknownKind,
            Refusal::MissingContent(_) => Cause::MissingContent,
        };
        Why::Invalid { invalid: refusal.into(), cause }
    }
}

impl Notices {
    /// The admission of one message body (see the module's header).
    pub fn admit(&self, body: &str, now: DateTime<Utc>) -> Judgement {
        self.admit_message(Message::parse(body, self.texts.as_ref())?, now)
    }

    /// [`Notices::admit`] of a message already parsed (`noticectl withdraw`'s flags, the intake's
    /// plan).
    pub fn admit_message(&self, message: Message, now: DateTime<Utc>) -> Judgement {
        match message {
            Message::Send(job) => self.admit_job(job, now).map(|j| Admitted::Send(Box::new(j))),
            Message::Withdraw(w) => self.admit_withdraw(w).map(Admitted::Withdraw),
        }
    }

    /// A job: the policy, its window at `now`, its draft.
    pub fn admit_job(&self, job: Job, now: DateTime<Utc>) -> Result<AdmittedJob, Refused> {
        self.policy
            .admit(&job, || self.texts.variables(&job))
            .map_err(|refusal| Refused::about(&job.identity, refusal))?;
        let window = self.policy.decide(&job, now);
        let draft = match window {
            WindowDecision::Missed { .. } => None,
            WindowDecision::Send { .. } | WindowDecision::Defer { .. } => Some(
                self.texts
                    .draft(&job)
                    .map_err(|e| Refused::about(&job.identity, Why::Render(e.to_string())))?,
            ),
        };
        Ok(AdmittedJob { job, window, draft })
    }

    /// A withdraw: its kind must be one the policy lists, as a job's must — a withdraw of a
    /// misspelled kind would otherwise leave a tombstone nobody reads while the real notice goes
    /// out.
    pub fn admit_withdraw(&self, withdrawal: Withdrawal) -> Result<Withdrawal, Refused> {
        match self.policy.check_kind(withdrawal.identity.kind().as_str()) {
            Ok(()) => Ok(withdrawal),
            Err(unknown) => Err(Refused {
                withdraw: true,
                ..Refused::about(&withdrawal.identity, Refusal::UnknownKind(unknown))
            }),
        }
    }
}

// Its tests judge under the example configuration, so they live with the texts
// (shared/texts/tests/admission.rs).
