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

/// The dedupe reads of a batch's records, made in one call ([`NoticeSender::prefetch`]) instead of
/// one per record. A key it holds is answered from here; any other key is read as usual.
#[derive(Debug, Default)]
pub struct Prefetched {
    /// Every key read, with its row (`None`: no row).
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

    /// How many keys the batch read covered.
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
        self.prefetch_admitted(&judged, now).await
    }

    /// [`NoticeSender::prefetch`] of a batch already admitted ([`NoticeSender::admit`]): what the
    /// sender Lambda does, each record admitted once for this and for its delivery.
    pub async fn prefetch_admitted<'j>(
        &self,
        judged: impl IntoIterator<Item = &'j Judgement>,
        now: DateTime<Utc>,
    ) -> Option<Prefetched> {
        let gate = self.rate_gate.as_ref()?;
        let mut jobs: Vec<(NoticeKey, &Job)> = judged
            .into_iter()
            .filter_map(|judgement| match judgement {
                // Only jobs in their window take a token; withdraws take none, and a refused
                // message is reported per record.
                Ok(Admitted::Send(admitted)) if matches!(admitted.window, WindowDecision::Send { .. }) => {
                    Some(&admitted.job)
                }
                _ => None,
            })
            .map(|job| (self.keys.key(&job.identity), job))
            .collect();
        jobs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        jobs.dedup_by(|a, b| a.0 == b.0);
        if jobs.is_empty() {
            return None;
        }
        // While a rotation is in progress a notice may live under an older version's key: read
        // those too, in the same call, and take the token for the key it lives at.
        let mut keys: Vec<NoticeKey> = Vec::with_capacity(jobs.len());
        for (key, job) in &jobs {
            keys.push(key.clone());
            keys.extend(self.keys.older_keys(&job.identity));
        }
        let found = match self.ledger.get_many(&keys).await {
            Ok(found) => found,
            Err(e) => {
                warn!(error = %e, "batch ledger read failed: each record reads its own row");
                return None;
            }
        };
        let mut rows: HashMap<NoticeKey, Option<LedgerRow>> = keys.into_iter().map(|k| (k, None)).collect();
        for row in found {
            rows.insert(row.key.clone(), Some(row));
        }
        if self.keys.rotating() {
            for (key, job) in jobs.iter_mut() {
                *key = Placement::of(&self.keys, &job.identity, |k| rows.get(k).cloned().flatten()).key;
            }
        }
        // Tokens for the keys that would claim (in shadow mode every key sends, so every key).
        let wanting: Vec<&(NoticeKey, &Job)> = jobs
            .iter()
            .filter(|(key, _)| {
                let row = rows.get(key).and_then(|r| r.as_ref());
                self.mode == Mode::Shadow || row.is_none_or(claimable)
            })
            .collect();
        let requests: Vec<TokenRequest> = wanting
            .iter()
            .map(|(key, job)| TokenRequest { domain: job.recipient_domain(), shard_seed: key.seed(1) })
            .collect();
        let admissions = match gate.admit_batch(&requests, now).await {
            Ok(answers) => wanting.iter().map(|(key, _)| key.clone()).zip(answers).collect(),
            Err(e) => {
                warn!(error = %e, "batch token take failed: each record takes its own");
                HashMap::new()
            }
        };
        Some(Prefetched { rows, admissions })
    }
}
