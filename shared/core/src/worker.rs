//! The one worker: a batch of received messages → a typed result per message. What the sender
//! Lambda ships and what the capacity model runs, so the model measures the handler that ships
//! and not a copy of its wiring. A host only supplies its queue ([`QueuedMessage`] for each
//! record) and turns the results into its answer (batch-item failures, metrics).
//!
//! ```text
//! admit each body once ─▶ the batch's one ledger read and tokens ─▶ per record: deliver ─▶ queue action carried out ─▶ outcome event
//! ```
//!
//! What can go wrong, and why it is still safe — each step's own statement holds
//! (`admission.rs`, `deliver/mod.rs`, `deliver/batch.rs`, `queue/carry.rs`); the worker adds only
//! the order: a record's queue action is carried out after its delivery has committed, and its
//! outcome event is built after both, so an event never announces what the ledger does not hold.
//! A record without a body cannot be judged: it is dead-lettered. A batch read that fails leaves
//! each record to read its own row.
//!
//! [`Worker::work`] is its three stages in order — [`Worker::admit`], [`Worker::prefetch`], then
//! [`Worker::record`] for each record — and they are public for the one host that must step them
//! apart: the model check runs each record of a batch as a process of its own (so it explores
//! every order of their port calls, with a crash between any two) and keeps of a finished record
//! nothing but its end, which one `work` future over the whole batch would hand back only once
//! every record is done.

use std::time::Instant;

use futures::StreamExt;
use tracing::{info, warn, Instrument};

use crate::admission::{Admitted, Judgement};
use crate::deliver::{Dedupe, DeliverContext, Delivery, NoticeSender, Outcome};
use crate::job::Message;
use crate::metrics::Metrics;
use crate::outcomes::{published_as, OutcomeEvent};
use crate::park::Parker;
use crate::queue::{dead_letter, Carried, Executor, QueueAction, QueuePolicy, QueuedMessage, Receive};

/// Everything the records of one batch share: the sender, the deployment's queue policy and
/// parker, the invocation's deadline.
pub struct Worker<'a> {
    pub sender: &'a NoticeSender,
    pub policy: &'a QueuePolicy,
    pub parker: Option<&'a dyn Parker>,
    /// When the invocation ends (`None`: only the send timeout bounds a send).
    pub deadline: Option<Instant>,
    /// Records worked at once.
    pub concurrency: usize,
    /// Whether outcome events are wanted (a bus is configured): built only then.
    pub events: bool,
}

/// One received record, as its host hands it over.
pub struct Record<'r> {
    pub message: &'r dyn QueuedMessage,
    /// The queue's id of the message (the span's `message_id`).
    pub message_id: &'r str,
    /// How many times the queue has handed it out (SQS `ApproximateReceiveCount`).
    pub receive_count: u32,
    /// A number in [0, 1) spreading this record's waits (the host's randomness).
    pub jitter: f64,
    /// The counters its notice counts into (a replay batch's own, or the sender's).
    pub metrics: &'r Metrics,
}

/// What became of one record.
pub struct Worked {
    /// `None`: the record had no body to deliver.
    pub delivery: Option<Delivery>,
    pub carried: Carried,
    /// Its outcome event, when events are wanted and the outcome is one the business hears of.
    pub event: Option<OutcomeEvent>,
}

/// A batch's records admitted at one instant: what its prefetch and each record's delivery judge.
pub struct Admissions {
    pub at: chrono::DateTime<chrono::Utc>,
    /// Each record's judgement, in the records' order (`None`: the record had no body).
    pub judged: Vec<Option<Judgement>>,
}

impl Worker<'_> {
    /// Works a batch: every record's result, in the records' order.
    pub async fn work(&self, records: &[Record<'_>]) -> Vec<Worked> {
        let admissions = self.admit(records);
        let prefetched = self.prefetch(records, &admissions).await;
        futures::stream::iter(records.iter().zip(&admissions.judged))
            .map(|(record, judged)| self.record(record, judged.as_ref(), prefetched.as_ref()))
            .buffered(self.concurrency.max(1))
            .collect()
            .await
    }

    /// The first stage: each body admitted once, all at one instant (the core's one admission).
    pub fn admit(&self, records: &[Record<'_>]) -> Admissions {
        let at = self.sender.now();
        let judged = records
            .iter()
            .map(|r| Some(r.message.body()).filter(|b| !b.is_empty()).map(|b| self.sender.admit(b, at)))
            .collect();
        Admissions { at, judged }
    }

    /// The second stage: one dedupe read and one token take for the whole batch instead of one
    /// per record (`None`: no read to share, or it failed — each record then reads its own row).
    /// Only the rows of records received before or replayed are read ([`Dedupe::for_record`]);
    /// a first delivery's claim decides.
    pub async fn prefetch(
        &self,
        records: &[Record<'_>],
        admissions: &Admissions,
    ) -> Option<crate::Prefetched> {
        let judged = records.iter().zip(&admissions.judged).filter_map(|(record, judged)| {
            let dedupe = Dedupe::for_record(record.receive_count, record.message.replay_batch());
            judged.as_ref().map(|j| (j, dedupe))
        });
        self.sender.prefetch_admitted(judged, admissions.at).await
    }

    /// The third stage, one record in a span of its own: deliver, carry out the queue action, the
    /// outcome event. `judged`: its admission (`None`: it had no body); `prefetched`: its batch's.
    pub async fn record(
        &self,
        record: &Record<'_>,
        judged: Option<&Judgement>,
        prefetched: Option<&crate::Prefetched>,
    ) -> Worked {
        let message = record.message;
        // Every field of this span is printed on every line inside it: what the lines need and no
        // more. The outcome is the `processed` line's own field (not repeated in the span), and a
        // record outside a replay batch prints no `replay_batch` at all.
        let span = tracing::info_span!(
            "notice",
            message_id = %record.message_id,
            receive_count = record.receive_count,
            replay_batch = tracing::field::Empty,
            notice_key = tracing::field::Empty,
        );
        if let Some(batch) = message.replay_batch() {
            span.record("replay_batch", batch);
        }
        async move {
            let Some(judged) = judged else {
                warn!("record has no body");
                let disposition = dead_letter(message, "record has no body").await;
                let carried = Carried { action: QueueAction::DeadLetter, disposition, refused: None };
                return Worked { delivery: None, carried, event: None };
            };
            let ctx = DeliverContext::at(self.sender.now())
                .with_deadline(self.deadline)
                .counting_into(record.metrics)
                .with_prefetched(prefetched);
            let delivery = self.sender.deliver(judged, ctx).await;
            let span = tracing::Span::current();
            if let Some(key) = &delivery.key {
                span.record("notice_key", key.as_str());
            }
            let now = self.sender.now();
            let receive = Receive {
                key: delivery.key.as_ref(),
                count: record.receive_count,
                now,
                jitter: record.jitter,
            };
            let notices = self.sender.notices();
            let executor = Executor {
                policy: self.policy,
                parker: self.parker,
                metrics: record.metrics,
                cldr: notices.texts.as_ref(),
            };
            let carried = executor.carry_out(message, &delivery, &receive).await;
            // The one line per message: its outcome, what the queue was told and, once sent, the
            // provider's message id (what the reconciler's events and SES's logs are matched on).
            let sent_as = match &delivery.outcome {
                Outcome::Sent { message_id } => Some(message_id.as_str()),
                _ => None,
            };
            info!(
                outcome = delivery.outcome.label(),
                queue = carried.action.label(),
                message_id = sent_as,
                "processed"
            );
            let event = self.event(judged, &delivery, now);
            Worked { delivery: Some(delivery), carried, event }
        }
        .instrument(span)
        .await
    }

    /// The outcome event of one delivery, when events are wanted and its outcome is published
    /// ([`published_as`], the core's one rule of which evidence becomes an event). The
    /// configuration version is the one in force, which a host changes only between batches.
    fn event(
        &self,
        judged: &Judgement,
        delivery: &Delivery,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Option<OutcomeEvent> {
        if !self.events {
            return None;
        }
        published_as(&delivery.outcome)?;
        let message = match judged.as_ref().ok()? {
            Admitted::Send(admitted) => Message::Send(admitted.job.clone()),
            Admitted::Withdraw(withdrawal) => Message::Withdraw(withdrawal.clone()),
        };
        let version = self.sender.notices().texts.version();
        OutcomeEvent::for_delivery(delivery, &message, at, Some(&version))
    }
}
