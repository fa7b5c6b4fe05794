//! The batch path's prefetch: the batch's one ledger read of its records' keys and its one
//! token take for the keys that read found claimable, before the records run one by one.

use notice_ledger::ledger::rules::Verdict;
use notice_ledger::ledger::RowState;

use crate::verify::args::Faults;
use crate::verify::error::VerifyError;
use crate::verify::model::rules::{Model, Probe};
use crate::verify::model::state::{bit, broken, Batch, Invariant, Job, Label, Row, State, Succ};
use crate::verify::world::{Answer, Step, MAX_BATCH};

impl Model {
    /// The batch's one ledger read: each key answered from its row as it stands (a strongly
    /// consistent read), every combination of the keys' answers, or the whole read failing.
    pub(super) fn batch_read(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        job: Job,
        step: Step,
        keys: [Option<u8>; MAX_BATCH],
    ) -> Result<(), VerifyError> {
        let t = self.fresh_token(s)?;
        // (the answers so far, the keys decided when read)
        let mut combos: Vec<(Vec<Answer>, u8)> = vec![(Vec::new(), 0)];
        let mut read = 0u8;
        for key in keys.iter().flatten().copied() {
            let row = s.rows[usize::from(key)];
            let decided = self.verdict(key, row, Probe::Read(t))? == Verdict::Refuse;
            let mut options = Vec::new();
            match row.filter(|_| decided) {
                Some(r) => {
                    for &young in self.claim_ages(s, row) {
                        options.push(Answer::Held { state: r.state, digest: r.notice, young });
                    }
                }
                None => options.push(Answer::Free),
            }
            if self.rules.batch_read_misses_release() {
                options.extend(self.before_release(s, row));
            }
            read |= bit(key);
            let d = if decided { bit(key) } else { 0 };
            combos = combos
                .into_iter()
                .flat_map(|(so_far, decided)| {
                    options.iter().map(move |o| {
                        let mut answers = so_far.clone();
                        answers.push(*o);
                        (answers, decided | d)
                    })
                })
                .collect();
        }
        let mut branches: Vec<(Vec<Answer>, u8, u8)> =
            combos.into_iter().map(|(answers, decided)| (answers, read, decided)).collect();
        if self.bounds.ledger_faults != Faults::Off {
            // The records then read their own rows.
            branches.push((vec![Answer::Failed], 0, 0));
        }
        for (answers, read, decided) in branches {
            let mut j = job;
            let mut batch =
                j.batch.ok_or_else(|| VerifyError::Unexpected("a batch read outside a batch".into()))?;
            let mut shown = [None; MAX_BATCH];
            for (i, a) in answers.iter().enumerate() {
                batch.answers = batch.answers.with(*a)?;
                if let Some(slot) = shown.get_mut(i) {
                    *slot = Some(*a);
                }
            }
            batch.read |= read;
            batch.decided |= decided;
            j.batch = Some(batch);
            let mut n = s.clone();
            n.workers[w] = Some(j);
            let label = Label::Prefetch { worker: w as u8, step, answers: shown, applied: false };
            self.push(out, s, label, n, None, false);
        }
        Ok(())
    }

    /// What a read that misses the row's latest write answers (the stale-batch-read mutant): a
    /// released row as the claim it released — as young as a claim whose own sender released it
    /// (a sender runs shorter than a claim's lifetime, and the read lags the release by moments),
    /// young or old when an operator released it.
    fn before_release(&self, s: &State, row: Option<Row>) -> Vec<Answer> {
        let Some(r) = row.filter(|r| r.state == RowState::Released && r.token.is_some()) else {
            return Vec::new();
        };
        let operator = notice_ledger::ledger::Origin::ALL
            .iter()
            .position(|o| *o == notice_ledger::ledger::Origin::Operator)
            .is_some_and(|i| usize::from(r.origin) == i);
        let claimed = Row { state: RowState::Claimed, ..r };
        let ages: &[bool] = if operator { self.claim_ages(s, Some(claimed)) } else { &[true] };
        ages.iter().map(|&young| Answer::Held { state: RowState::Claimed, digest: r.notice, young }).collect()
    }

    /// Whether `key` counts as decided when `job` (or its batch) takes a token for it: as the
    /// job's own read or its batch's read found it; `false` when only a first delivery of the
    /// batch brought it and nobody read it (its claim decides: a token spent on it is one the
    /// claim may waste, never one too many); with no read, as the ledger stands now.
    pub(super) fn decided_before_token(&self, s: &State, job: Job, key: u8) -> Result<bool, VerifyError> {
        if let Some(d) = job.read_decided.or_else(|| job.batch.and_then(|b| b.decided_at_read(key))) {
            return Ok(d);
        }
        if self.first_delivery_keys(job)? & bit(key) != 0 {
            return Ok(false);
        }
        let t = self.fresh_token(s)?;
        Ok(self.verdict(key, s.rows[usize::from(key)], Probe::Read(t))? == Verdict::Refuse)
    }

    /// The keys of the batch's records that are first deliveries, less any key a redelivered
    /// record of the batch also brings: the keys the sender may leave to their claims unread.
    fn first_delivery_keys(&self, job: Job) -> Result<u8, VerifyError> {
        let Some(batch) = job.batch else { return Ok(0) };
        let of_notice = |notice: u8| {
            self.slots.iter().filter(|i| i.notice == notice).fold(0u8, |keys, i| keys | bit(i.key))
        };
        let own = of_notice(self.slot(job.slot)?.notice);
        let mate = batch.mate.map_or(0, |code| of_notice(Batch::body(code).0));
        let (mut first, mut again) = (0u8, 0u8);
        for (keys, was_again) in [(own, job.again), (mate, batch.mate_again)] {
            if was_again {
                again |= keys;
            } else {
                first |= keys;
            }
        }
        Ok(first & !again)
    }

    /// The batch's one token take, for the keys its read found claimable: each granted or
    /// limited, or the whole take failing (with or without its tokens spent).
    pub(super) fn batch_token(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        job: Job,
        step: Step,
        keys: [Option<u8>; MAX_BATCH],
    ) -> Result<(), VerifyError> {
        let batch =
            job.batch.ok_or_else(|| VerifyError::Unexpected("a batch take outside a batch".into()))?;
        let mut decided = Vec::with_capacity(MAX_BATCH);
        for key in keys.iter().flatten().copied() {
            decided.push((key, self.decided_before_token(s, job, key)?));
        }
        // (the answers, the keys whose token was spent)
        let mut branches: Vec<(Vec<Answer>, Vec<u8>)> = vec![(Vec::new(), Vec::new())];
        for &(key, _) in &decided {
            branches = branches
                .into_iter()
                .flat_map(|(answers, spent)| {
                    [(Answer::Admitted, true), (Answer::Limited, false)].into_iter().map(move |(a, took)| {
                        let mut answers = answers.clone();
                        answers.push(a);
                        let mut spent = spent.clone();
                        if took {
                            spent.push(key);
                        }
                        (answers, spent)
                    })
                })
                .collect();
        }
        if self.bounds.ledger_faults != Faults::Off {
            branches.push((vec![Answer::GateFailed], Vec::new()));
        }
        if self.bounds.ledger_faults == Faults::Ambiguous {
            branches.push((vec![Answer::GateFailed], decided.iter().map(|(k, _)| *k).collect()));
        }
        for (answers, spent) in branches {
            let mut b = batch;
            let mut shown = [None; MAX_BATCH];
            for (i, a) in answers.iter().enumerate() {
                b.answers = b.answers.with(*a)?;
                if let Some(slot) = shown.get_mut(i) {
                    *slot = Some(*a);
                }
            }
            let mut j = job;
            j.batch = Some(b);
            let mut n = s.clone();
            n.workers[w] = Some(j);
            let on_decided = spent.iter().find(|k| decided.iter().any(|(d, was)| d == *k && *was));
            let v = match on_decided {
                Some(&key) => broken(
                    Invariant::NoTokenOnDecided,
                    format!(
                        "the batch of {} spent a token on {}, which the ledger had already decided when it was read",
                        self.slot_role(job.slot),
                        self.key_name(key)
                    ),
                ),
                None => None,
            };
            let applied = !spent.is_empty();
            let label = Label::Prefetch { worker: w as u8, step, answers: shown, applied };
            self.push(out, s, label, n, v, false);
        }
        Ok(())
    }
}
