//! What the world can answer a call with: a read's answers, a claim's age as a finder sees it,
//! a fresh claim token, and everything the provider can do with one send.

use notice_ledger::ledger::RowState;

use crate::verify::error::VerifyError;
use crate::verify::model::rules::Model;
use crate::verify::model::state::{Attempt, Row, State};
use crate::verify::world::{Answer, MAX_SENDS};

impl Model {
    /// Every answer a read of `row` can get: held (young or old, for an open claim), or free when
    /// there is none to report — and, with ledger faults, the read failing.
    pub(super) fn read_answers(&self, s: &State, row: Option<Row>, faults: bool) -> Vec<Answer> {
        let mut answers = match row {
            Some(r) => self
                .claim_ages(s, row)
                .iter()
                .map(|&young| Answer::Held { state: r.state, digest: r.notice, young })
                .collect(),
            None => vec![Answer::Free],
        };
        if faults {
            answers.push(Answer::Failed);
        }
        answers
    }

    /// A claim token no row and no job holds: what `ClaimToken::random` gives in practice.
    pub(super) fn fresh_token(&self, s: &State) -> Result<u8, VerifyError> {
        let used = |t: u8| {
            s.rows.iter().flatten().any(|r| r.token == Some(t))
                || s.workers.iter().flatten().any(|j| j.token == Some(t))
        };
        (0..u8::MAX).find(|t| !used(*t)).ok_or_else(|| VerifyError::Bound("claim tokens".into()))
    }

    /// How old an open claim can look to a job that finds it: young while its claimer still runs
    /// (the stale cut-off outlasts any invocation: `NOTICE_STALE_AFTER_SECS` > the function
    /// timeout), young or stale once it is dead; decided rows have no age that matters.
    pub(super) fn claim_ages(&self, s: &State, row: Option<Row>) -> &'static [bool] {
        let Some(row) = row.filter(|r| r.state == RowState::Claimed) else { return &[false] };
        let claimer_runs = row.token.is_some_and(|t| s.workers.iter().flatten().any(|j| j.token == Some(t)));
        if claimer_runs {
            &[true]
        } else {
            &[true, false]
        }
    }

    /// Everything the provider can do with one send call: one attempt, or two when the SDK retries
    /// an unknown outcome (mutant). Accepted messages get the next free message ids.
    pub(super) fn provider_answers(&self, s: &State) -> Result<Vec<[Option<Attempt>; 2]>, VerifyError> {
        let first_free = s.sends.iter().position(Option::is_none);
        let ids = |skip: usize| -> Result<u8, VerifyError> {
            first_free
                .map(|f| f + skip)
                .filter(|i| *i < MAX_SENDS)
                .and_then(|i| u8::try_from(i).ok())
                .ok_or_else(|| VerifyError::Bound(format!("more than {MAX_SENDS} accepted messages")))
        };
        let one = |skip: usize| -> Result<Vec<Attempt>, VerifyError> {
            Ok(vec![
                Attempt::Accepted(ids(skip)?),
                Attempt::NotAccepted,
                Attempt::Rejected,
                Attempt::Failed,
                Attempt::TimedOut(ids(skip)?),
            ])
        };
        let mut all = Vec::new();
        for first in one(0)? {
            all.push([Some(first), None]);
            let unknown = matches!(first, Attempt::Failed | Attempt::TimedOut(_));
            if unknown && self.rules.attempts_per_send() > 1 {
                let skip = usize::from(matches!(first, Attempt::TimedOut(_)));
                for second in one(skip)? {
                    all.push([Some(first), Some(second)]);
                }
            }
        }
        Ok(all)
    }
}
