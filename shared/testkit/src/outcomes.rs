//! Outcome publishers for tests: one that records every call, and one that fails, refuses
//! entries or hangs on a script — so a test can show that a failing bus never fails a send.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;

use notice_ledger::outcomes::{OutcomeEvent, OutcomeKind, OutcomePublisher, PublishError};

/// Accepts every event and remembers each call's batch.
#[derive(Default)]
pub struct RecordingPublisher {
    calls: Mutex<Vec<Vec<OutcomeEvent>>>,
}

impl RecordingPublisher {
    /// Every call's batch, in order.
    pub fn calls(&self) -> Vec<Vec<OutcomeEvent>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Every event published, in order.
    pub fn events(&self) -> Vec<OutcomeEvent> {
        self.calls().into_iter().flatten().collect()
    }

    /// The outcomes published, in order.
    pub fn outcomes(&self) -> Vec<OutcomeKind> {
        self.events().iter().map(|e| e.outcome).collect()
    }
}

#[async_trait]
impl OutcomePublisher for RecordingPublisher {
    async fn publish(&self, events: &[OutcomeEvent]) -> Vec<Result<(), PublishError>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).push(events.to_vec());
        events.iter().map(|_| Ok(())).collect()
    }
}

/// What the faulty publisher does on one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublishFault {
    /// Pass through to the inner publisher.
    Pass,
    /// Fail every entry without publishing (the bus unreachable).
    Unavailable,
    /// Refuse the entries at these positions of the call's batch, publish the others.
    RefuseEntries(Vec<usize>),
    /// Never answer (a bus that hangs).
    Hang,
}

/// A publisher that plays a script of faults, one per call, then passes through.
pub struct FaultyPublisher<P> {
    inner: P,
    script: Mutex<VecDeque<PublishFault>>,
    attempts: Mutex<usize>,
}

impl<P: OutcomePublisher> FaultyPublisher<P> {
    pub fn new(inner: P, script: impl IntoIterator<Item = PublishFault>) -> Self {
        Self { inner, script: Mutex::new(script.into_iter().collect()), attempts: Mutex::new(0) }
    }

    /// A publisher whose every call fails.
    pub fn always(inner: P, fault: PublishFault) -> Self {
        Self::new(inner, std::iter::repeat_n(fault, 64))
    }

    /// Calls made to this publisher, faulty or not.
    pub fn attempts(&self) -> usize {
        *self.attempts.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }
}

#[async_trait]
impl<P: OutcomePublisher> OutcomePublisher for FaultyPublisher<P> {
    async fn publish(&self, events: &[OutcomeEvent]) -> Vec<Result<(), PublishError>> {
        *self.attempts.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        let fault =
            self.script.lock().unwrap_or_else(|p| p.into_inner()).pop_front().unwrap_or(PublishFault::Pass);
        match fault {
            PublishFault::Pass => self.inner.publish(events).await,
            PublishFault::Unavailable => {
                events.iter().map(|_| Err(PublishError::Unavailable("injected outage".into()))).collect()
            }
            PublishFault::RefuseEntries(positions) => {
                let pass: Vec<OutcomeEvent> = events
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !positions.contains(i))
                    .map(|(_, e)| e.clone())
                    .collect();
                let mut passed = self.inner.publish(&pass).await.into_iter();
                (0..events.len())
                    .map(|i| {
                        if positions.contains(&i) {
                            Err(PublishError::Refused {
                                code: "InternalFailure".into(),
                                message: "injected refusal".into(),
                            })
                        } else {
                            passed.next().unwrap_or(Err(PublishError::Unavailable("no answer".into())))
                        }
                    })
                    .collect()
            }
            PublishFault::Hang => std::future::pending().await,
        }
    }
}
