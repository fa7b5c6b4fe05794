//! Putting jobs on the reminder queue: `SendMessageBatch` (10 a call) at a bounded rate, with the
//! `replay_batch` attribute the sender logs (never part of a key). Failed entries are retried a
//! few times, then reported — never silently dropped. A failure of the call itself (SQS
//! unreachable, no credentials, access denied, throttled after retries) stops the run: every
//! later batch would fail the same way.

use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use notice_sqs::{Message, Producer, MAX_BATCH};

use crate::failure::{classify, Cause, Done};

/// One job body to enqueue, with the label it is reported under.
pub struct Outgoing {
    pub origin: String,
    pub body: String,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct EnqueueReport {
    pub sent: usize,
    /// (origin, error) of entries that could not be enqueued after retries.
    pub failed: Vec<(String, String)>,
}

const MAX_ATTEMPTS: u32 = 4;

pub async fn client() -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(&notice_setup::aws::load_sdk_config().await)
}

/// Sends `jobs` in batches of 10, at most `per_second` messages a second, and none before its
/// instant in `not_before` (from the start; a batch waits for its last job's). Entries SQS refuses
/// are in the report; a call that fails as a whole (after retries, or at once when SQS cannot be
/// used at all) ends the run with an error whose [`Done`] context says how many went out before.
pub async fn enqueue(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    jobs: &[Outgoing],
    batch_id: Option<&str>,
    per_second: u32,
    not_before: Option<&[Duration]>,
    progress: &ProgressBar,
) -> anyhow::Result<EnqueueReport> {
    let mut report = EnqueueReport::default();
    let per_second = f64::from(per_second.max(1));
    let started = Instant::now();
    let mut submitted = 0usize;
    for chunk in jobs.chunks(MAX_BATCH) {
        // Pace by the total so far: after n messages, at least n / rate seconds have passed.
        let planned =
            not_before.and_then(|at| at.get(submitted + chunk.len() - 1)).copied().unwrap_or_default();
        let due = Duration::from_secs_f64(submitted as f64 / per_second).max(planned);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        submitted += chunk.len();
        let mut pending: Vec<(usize, &Outgoing)> = chunk.iter().enumerate().collect();
        let mut attempt = 0;
        while !pending.is_empty() {
            attempt += 1;
            match send_batch(sqs, queue_url, &pending, batch_id).await {
                Ok(failed_ids) => {
                    let before = pending.len();
                    let failed: Vec<(usize, &Outgoing, String)> = pending
                        .iter()
                        .filter_map(|(i, job)| {
                            failed_ids.iter().find(|(id, _)| *id == *i).map(|(_, e)| (*i, *job, e.clone()))
                        })
                        .collect();
                    report.sent += before - failed.len();
                    progress.inc((before - failed.len()) as u64);
                    if attempt >= MAX_ATTEMPTS {
                        for (_, job, e) in failed {
                            report.failed.push((job.origin.clone(), e));
                            progress.inc(1);
                        }
                        break;
                    }
                    pending = failed.into_iter().map(|(i, job, _)| (i, job)).collect();
                }
                Err(e) if attempt >= MAX_ATTEMPTS || hopeless(&e) => {
                    let batch = batch_id.map(|b| format!(" as replay batch {b}")).unwrap_or_default();
                    return Err(e.context(Done(format!(
                        "{} of {} message(s) enqueued{batch} before it stopped; running it again is safe \
                         (the ledger refuses what was already sent)",
                        report.sent,
                        jobs.len()
                    ))));
                }
                Err(_) => {}
            }
            if !pending.is_empty() {
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
        }
    }
    Ok(report)
}

/// A failure no retry mends: SQS unreachable, no or bad credentials, access denied. Throttling
/// is retried.
fn hopeless(e: &anyhow::Error) -> bool {
    classify(e).is_some_and(|f| f.cause != Cause::Throttled)
}

/// One `SendMessageBatch`; returns the entries SQS did not take, by position, with the reason.
async fn send_batch(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    entries: &[(usize, &Outgoing)],
    batch_id: Option<&str>,
) -> anyhow::Result<Vec<(usize, String)>> {
    let messages: Vec<(usize, Message<'_>)> = entries
        .iter()
        .map(|(i, job)| (*i, Message { replay_batch: batch_id, ..Message::body(&job.body) }))
        .collect();
    Producer::new(sqs.clone(), queue_url)
        .send_batch(&messages)
        .await
        .map_err(|e| anyhow::Error::new(e).context(format!("SQS SendMessageBatch to {queue_url}")))
}
