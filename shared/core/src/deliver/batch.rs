//! The ledger and rate work a whole SQS batch shares: one read for all its rows, one token take
//! per (domain, shard) and one for the account — instead of a read and a token write per record.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use tracing::warn;

use super::{Mode, NoticeSender, Placement};
use crate::admission::{Admitted, Judgement};
use crate::identity::NoticeKey;
use crate::job::Job;
use crate::ledger::rules::{permits, Verdict, Write};
use crate::ledger::LedgerRow;
use crate::policy::WindowDecision;
use crate::rate::{Admission, TokenRequest};

/// Whether the ledger would let a claim write over `row` (no other claim, sent or decided row).
fn claimable(row: &LedgerRow) -> bool {
    let nobody = crate::ledger::ClaimToken::from_stored(String::new());
    permits(Some(row), Write::Claim { token: &nobody }) != Verdict::Refuse
}

/// Whether a record's row is read before its token, or its conditional claim alone decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dedupe {
    /// A first delivery from a producer: almost always a notice the ledger has never seen, so a
    /// read would only confirm "no row" at the price of a read unit on every notice. Its claim
    /// decides; a duplicate among them costs its refused conditional write and a token spent
    /// without a send (never one too many), as when two workers both read "free".
    ClaimDecides,
    /// A message the queue handed out before, or an operator's replay: likely a notice already
    /// decided, so its row is read first and a decided key takes no token.
    ReadFirst,
}

impl Dedupe {
    /// The one rule: a record received before (`receive_count` > 1) or carrying a replay batch is
    /// read first; any other record's claim decides. `replay_batch` as
    /// [`QueuedMessage::replay_batch`](crate::queue::QueuedMessage::replay_batch) answers it
    /// (never empty).
    pub fn for_record(receive_count: u32, replay_batch: Option<&str>) -> Self {
        if receive_count > 1 || replay_batch.is_some() {
            Dedupe::ReadFirst
        } else {
            Dedupe::ClaimDecides
        }
    }
}

/// The dedupe reads of a batch's records, made in one call ([`NoticeSender::prefetch`]) instead of
/// one per record. A key it holds is answered from here; any other key is read as usual.
#[derive(Debug, Default)]
pub struct Prefetched {
    /// Every key answered, with its row: read (`None`: no row), or left to its claim
    /// ([`Dedupe::ClaimDecides`]: `None`, as a read made before another worker's claim answers).
    rows: HashMap<NoticeKey, Option<LedgerRow>>,
    /// Tokens taken for the batch, one per key the ledger would let claim.
    admissions: HashMap<NoticeKey, Admission>,
}

impl Prefetched {
    /// `None`: this key was not read in the batch.
    pub(super) fn row(&self, key: &NoticeKey) -> Option<Option<LedgerRow>> {
        self.rows.get(key).cloned()
    }

    /// The batch's token for this key, if it took one.
    pub(super) fn admission(&self, key: &NoticeKey) -> Option<Admission> {
        self.admissions.get(key).copied()
    }

    /// Keys the batch took a token for (admitted or limited).
    pub fn planned_tokens(&self) -> usize {
        self.admissions.len()
    }

    /// How many keys the batch answers: those it read and those it left to their claim
    /// ([`Dedupe::ClaimDecides`]), so a batch of first deliveries is not empty though it read
    /// nothing.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl NoticeSender {
    /// The ledger and rate work of a whole batch, done once instead of per record: the rows of its
    /// valid, in-window jobs in one ledger call (DynamoDB: `BatchGetItem`, strongly consistent,
    /// unprocessed keys retried), then the tokens of the keys the ledger would let claim in one
    /// write per (domain, shard) and one for the account ([`RateGate::admit_batch`]).
    ///
    /// The read is the same dedupe read each record would make — only earlier, which any read
    /// before a conditional claim already allows for; a token taken here for a record that then
    /// ends otherwise is spent without a send, never one too many. `None` when the path makes no
    /// read (no rate gate) or the read failed: each record then reads its own row and takes its
    /// own token, and reports a failure as usual.
    pub async fn prefetch(&self, bodies: &[&str], now: DateTime<Utc>) -> Option<Prefetched> {
        self.rate_gate.as_ref()?;
        let notices = self.notices();
        let judged: Vec<Judgement> = bodies.iter().map(|body| notices.admit(body, now)).collect();
        self.prefetch_admitted(judged.iter().map(|j| (j, Dedupe::ReadFirst)), now).await
    }

    /// [`NoticeSender::prefetch`] of a batch already admitted ([`NoticeSender::admit`]): what the
    /// sender Lambda does, each record admitted once for this and for its delivery. Only the keys
    /// of records to [`Dedupe::ReadFirst`] are read (no call when there is none); a key a record
    /// of each kind brings is read. While the key secret rotates every key is read: where a
    /// notice lives is found from the rows.
    pub async fn prefetch_admitted<'j>(
        &self,
        judged: impl IntoIterator<Item = (&'j Judgement, Dedupe)>,
        now: DateTime<Utc>,
    ) -> Option<Prefetched> {
        let gate = self.rate_gate.as_ref()?;
        let rotating = self.keys.rotating();
        let mut jobs: Vec<(NoticeKey, &Job, Dedupe)> = judged
            .into_iter()
            .filter_map(|(judgement, dedupe)| match judgement {
                // Only jobs in their window take a token; withdraws take none, and a refused
                // message is reported per record.
                Ok(Admitted::Send(admitted)) if matches!(admitted.window, WindowDecision::Send { .. }) => {
                    Some((&admitted.job, if rotating { Dedupe::ReadFirst } else { dedupe }))
                }
                _ => None,
            })
            .map(|(job, dedupe)| (self.keys.key(&job.identity), job, dedupe))
            .collect();
        // One entry a key, reading it when any of its records asks for a read.
        jobs.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.2.cmp(&a.2)));
        jobs.dedup_by(|a, b| a.0 == b.0);
        if jobs.is_empty() {
            return None;
        }
        // While a rotation is in progress a notice may live under an older version's key: read
        // those too, in the same call, and take the token for the key it lives at.
        let mut keys: Vec<NoticeKey> = Vec::with_capacity(jobs.len());
        for (key, job, _) in jobs.iter().filter(|(_, _, dedupe)| *dedupe == Dedupe::ReadFirst) {
            keys.push(key.clone());
            keys.extend(self.keys.older_keys(&job.identity));
        }
        let found = if keys.is_empty() {
            Vec::new()
        } else {
            match self.ledger.get_many(&keys).await {
                Ok(found) => found,
                Err(e) => {
                    warn!(error = %e, "batch ledger read failed: each record reads its own row");
                    return None;
                }
            }
        };
        // Keys left to their claim answer "no row", as a read made just before another worker's
        // claim would: the claim's conditional write is what refuses a decided key.
        let mut rows: HashMap<NoticeKey, Option<LedgerRow>> =
            keys.into_iter().chain(jobs.iter().map(|(key, _, _)| key.clone())).map(|k| (k, None)).collect();
        for row in found {
            rows.insert(row.key.clone(), Some(row));
        }
        if rotating {
            for (key, job, _) in jobs.iter_mut() {
                *key = Placement::of(&self.keys, &job.identity, |k| rows.get(k).cloned().flatten()).key;
            }
        }
        // Tokens for the keys that would claim (in shadow mode every key sends, so every key).
        let wanting: Vec<&(NoticeKey, &Job, Dedupe)> = jobs
            .iter()
            .filter(|(key, _, _)| {
                let row = rows.get(key).and_then(|r| r.as_ref());
                self.mode == Mode::Shadow || row.is_none_or(claimable)
            })
            .collect();
        let requests: Vec<TokenRequest> = wanting
            .iter()
            .map(|(key, job, _)| TokenRequest { domain: job.recipient_domain(), shard_seed: key.seed(1) })
            .collect();
        let admissions = match gate.admit_batch(&requests, now).await {
            Ok(answers) => wanting.iter().map(|(key, _, _)| key.clone()).zip(answers).collect(),
            Err(e) => {
                warn!(error = %e, "batch token take failed: each record takes its own");
                HashMap::new()
            }
        };
        Some(Prefetched { rows, admissions })
    }
}
