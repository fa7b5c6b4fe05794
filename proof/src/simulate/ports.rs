//! The simulation's side of the core's ports: its clock, a received message of its queue, its
//! schedules — each recording what the core asked, for the run to apply in simulated time.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use notice_ledger::park::{ParkError, ParkRequest, Parked, Parker};
use notice_ledger::queue::{QueueError, QueuedMessage};
use notice_ledger::NoticeKey;

/// The real sender's clock on simulated time: set by the run before each poll of a delivery, so
/// the sender judges, stamps and waits at the simulated instant.
#[derive(Clone)]
pub(super) struct SimClock(Arc<Mutex<DateTime<Utc>>>);

impl SimClock {
    pub(super) fn new(at: DateTime<Utc>) -> Self {
        Self(Arc::new(Mutex::new(at)))
    }

    pub(super) fn set(&self, at: DateTime<Utc>) {
        *lock(&self.0) = at;
    }
}

impl notice_ledger::clock::Clock for SimClock {
    fn now(&self) -> DateTime<Utc> {
        *lock(&self.0)
    }
}

/// What the core asked of a simulated message, applied by the run afterwards.
pub(super) enum SimCall {
    Hide(Duration),
    Requeue(Duration),
    DeadLetter,
}

/// A received message of the simulated queue, as the core's [`QueuedMessage`] port: its calls
/// are recorded (the simulation's queue calls never fail) and applied by the run once the job's
/// queue action is carried out.
pub(super) struct SimMessage {
    pub(super) body: Arc<str>,
    pub(super) received_at: DateTime<Utc>,
    calls: Mutex<Vec<SimCall>>,
}

impl SimMessage {
    pub(super) fn new(body: Arc<str>, received_at: DateTime<Utc>) -> Self {
        Self { body, received_at, calls: Mutex::default() }
    }

    /// The calls made so far, in order, taken.
    pub(super) fn take_calls(&self) -> Vec<SimCall> {
        std::mem::take(&mut *lock(&self.calls))
    }
}

#[async_trait]
impl QueuedMessage for SimMessage {
    fn body(&self) -> &str {
        &self.body
    }
    fn queue_arn(&self) -> Option<&str> {
        Some("arn:aws:sqs:us-east-1:123456789012:simulated-reminders")
    }
    fn replay_batch(&self) -> Option<&str> {
        None
    }
    fn received_at(&self) -> DateTime<Utc> {
        self.received_at
    }
    async fn hide(&self, wait: Duration) -> Result<(), QueueError> {
        lock(&self.calls).push(SimCall::Hide(wait));
        Ok(())
    }
    async fn requeue(&self, delay: Duration) -> Result<(), QueueError> {
        lock(&self.calls).push(SimCall::Requeue(delay));
        Ok(())
    }
    async fn dead_letter(&self, _reason: &str) -> Result<(), QueueError> {
        lock(&self.calls).push(SimCall::DeadLetter);
        Ok(())
    }
}

/// The simulation's schedules as the core's [`Parker`], seen from one job: one schedule per
/// notice, never refused; a park of a parked notice finds it (with its body and fire time).
/// `existing` is the notice's schedule as the run holds it, set before each poll of the job.
pub(super) struct SimParker {
    body: Arc<str>,
    existing: Mutex<Option<DateTime<Utc>>>,
    parked: Mutex<Option<DateTime<Utc>>>,
}

impl SimParker {
    pub(super) fn new(body: Arc<str>, existing: Option<DateTime<Utc>>) -> Self {
        Self { body, existing: Mutex::new(existing), parked: Mutex::default() }
    }

    /// The notice's schedule as the run holds it now (when it fires, if there is one).
    pub(super) fn set_existing(&self, existing: Option<DateTime<Utc>>) {
        *lock(&self.existing) = existing;
    }

    pub(super) fn existing(&self) -> Option<DateTime<Utc>> {
        *lock(&self.existing)
    }

    /// The schedule this job created (when it fires), taken.
    pub(super) fn take_parked(&self) -> Option<DateTime<Utc>> {
        lock(&self.parked).take()
    }
}

#[async_trait]
impl Parker for SimParker {
    async fn park(&self, req: &ParkRequest<'_>) -> Result<Parked, ParkError> {
        if let Some(at) = self.existing() {
            return Ok(Parked::AlreadyParked { body: Some(self.body.to_string()), at: Some(at) });
        }
        *lock(&self.parked) = Some(req.at);
        Ok(Parked::Scheduled)
    }
    async fn unpark(&self, _key: &NoticeKey) -> Result<bool, ParkError> {
        Ok(false)
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One job's message and its view of the schedules, shared by the core's worker (through the
/// ports) and the run (which applies what they recorded).
pub(super) struct JobPorts {
    pub(super) message: Arc<SimMessage>,
    pub(super) parker: Arc<SimParker>,
}

impl JobPorts {
    pub(super) fn new(body: Arc<str>, received_at: DateTime<Utc>, existing: Option<DateTime<Utc>>) -> Self {
        Self {
            message: Arc::new(SimMessage::new(Arc::clone(&body), received_at)),
            parker: Arc::new(SimParker::new(body, existing)),
        }
    }
}
