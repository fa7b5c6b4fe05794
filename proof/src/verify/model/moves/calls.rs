//! The sender's next port call, answered every way the ledger (applied, refused, an error — with
//! the write applied too under `Faults::Ambiguous`) or the provider (accepted, not accepted,
//! rejected, unknown with or without the message out) can answer it: one successor per answer.

use notice_ledger::ledger::rules::Verdict;
use notice_ledger::ledger::RowState;

use crate::verify::args::Faults;
use crate::verify::error::VerifyError;
use crate::verify::model::rules::{Model, Probe};
use crate::verify::model::state::{broken, Attempt, Invariant, Job, Label, Row, Sent, SlotInfo, State, Succ};
use crate::verify::world::{Answer, Step};

impl Model {
    /// The worker's next port call, answered every way it can be.
    pub(super) fn call(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        job: Job,
        info: SlotInfo,
        step: Step,
    ) -> Result<(), VerifyError> {
        match step {
            Step::Read { key } => self.read_call(out, s, w, job, step, key),
            Step::Place { key } => self.place_call(out, s, w, job, step, key),
            Step::Token { key } => self.token_call(out, s, w, job, step, key),
            Step::Claim { key, alias, .. } | Step::RecordMissed { key, alias } => {
                self.claim_call(out, s, w, (job, info), step, (key, alias))
            }
            Step::Send { key } => self.send_call(out, s, w, (job, info), step, key),
            Step::CommitSent { key, .. } | Step::CommitRejected { key } | Step::Release { key } => {
                self.commit_call(out, s, w, job, step, key)
            }
            Step::Withdraw { key, alias } => self.withdraw_call(out, s, w, (job, info), step, (key, alias)),
            Step::List { key } => self.list_call(out, s, w, step, key),
            Step::BatchRead { keys } => self.batch_read(out, s, w, job, step, keys),
            Step::BatchToken { keys } => self.batch_token(out, s, w, job, step, keys),
            Step::Done { .. } => Ok(()),
        }
    }

    /// The job's own read of `key`: its row as it stands, if the ledger has decided it.
    fn read_call(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        job: Job,
        step: Step,
        key: u8,
    ) -> Result<(), VerifyError> {
        let faults = self.bounds.ledger_faults != Faults::Off;
        let row = s.rows[usize::from(key)];
        let t = self.fresh_token(s)?;
        let decided = self.verdict(key, row, Probe::Read(t))? == Verdict::Refuse;
        for answer in self.read_answers(s, row.filter(|_| decided), faults) {
            let mut n = s.clone();
            let mut j = job;
            j.answers = j.answers.with(answer)?;
            // Implied by a held or free answer; a failed read hides it from the job.
            j.read_decided = Some(decided);
            n.workers[w] = Some(j);
            let label = Label::Call { worker: w as u8, step, answer, applied: false, attempts: [None; 2] };
            self.push(out, s, label, n, None, false);
        }
        Ok(())
    }

    /// The placement read of the older version's `key`.
    fn place_call(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        job: Job,
        step: Step,
        key: u8,
    ) -> Result<(), VerifyError> {
        let faults = self.bounds.ledger_faults != Faults::Off;
        // Where the notice lives: the older version's row as it stands — any row, a
        // released or an alias one too (the placement tells them apart), or none.
        for answer in self.read_answers(s, s.rows[usize::from(key)], faults) {
            let mut n = s.clone();
            let mut j = job;
            j.answers = j.answers.with(answer)?;
            n.workers[w] = Some(j);
            let label = Label::Call { worker: w as u8, step, answer, applied: false, attempts: [None; 2] };
            self.push(out, s, label, n, None, false);
        }
        Ok(())
    }

    /// The rate gate's token take for `key`: granted, limited, or failing (with its token spent,
    /// under `Faults::Ambiguous`).
    fn token_call(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        job: Job,
        step: Step,
        key: u8,
    ) -> Result<(), VerifyError> {
        let decided = self.decided_before_token(s, job, key)?;
        // (answer, whether a token was spent)
        let mut answers = vec![(Answer::Admitted, true), (Answer::Limited, false)];
        if self.bounds.ledger_faults != Faults::Off {
            answers.push((Answer::GateFailed, false));
        }
        if self.bounds.ledger_faults == Faults::Ambiguous {
            answers.push((Answer::GateFailed, true));
        }
        for (answer, spent) in answers {
            let mut n = s.clone();
            let mut j = job;
            j.answers = j.answers.with(answer)?;
            n.workers[w] = Some(j);
            let v = if spent && decided {
                broken(
                    Invariant::NoTokenOnDecided,
                    format!(
                        "{} spent a token on {}, which the ledger had already decided when it was read",
                        self.slot_role(job.slot),
                        self.key_name(key)
                    ),
                )
            } else {
                None
            };
            let label = Label::Call { worker: w as u8, step, answer, applied: spent, attempts: [None; 2] };
            self.push(out, s, label, n, v, false);
        }
        Ok(())
    }

    /// The claim (or the missed record) of `key`, with an alias at the older key if the sender
    /// writes one: minted or recorded, refused with the row it reports, or failing.
    fn claim_call(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        (job, info): (Job, SlotInfo),
        step: Step,
        (key, alias): (u8, Option<u8>),
    ) -> Result<(), VerifyError> {
        let ambiguous = self.bounds.ledger_faults == Faults::Ambiguous;
        // (answer, the row written if any, whether the job now holds the claim)
        let mut branches: Vec<(Answer, Option<Option<Row>>, bool)> = Vec::new();
        let t = self.fresh_token(s)?;
        let verdict = self.verdict(key, s.rows[usize::from(key)], Probe::Claim(t))?;
        let row = s.rows[usize::from(key)];
        let held = row.map(|r| Answer::Held { state: r.state, digest: r.notice, young: false });
        let missed = matches!(step, Step::RecordMissed { .. });
        let listed = matches!(step, Step::Claim { listed: true, .. });
        // Written with an alias: the whole write is refused, reporting the older key's row,
        // when that row takes no alias (the notice already lives there).
        let alias_refused = self.alias_refused(s, alias)?;
        // (the refusal, the row it reports, whose age the sender judges)
        let refused = match (verdict, held) {
            // The memory ledger's reading: a refused claim reports the row; its own token
            // (a retried write) is its claim; anything else writes.
            (Verdict::Refuse, Some(h)) => Some((h, row)),
            (Verdict::AlreadyOwn, Some(h)) if missed => Some((h, row)),
            (Verdict::AlreadyOwn, Some(_)) => {
                branches.push((Answer::Minted, None, true));
                None
            }
            _ => match (alias_refused, alias) {
                (Some(h), Some(a)) => Some((h, s.rows[usize::from(a)])),
                _ => {
                    let state = if missed { RowState::Missed } else { RowState::Claimed };
                    let written = Some(Some(self.written(info.notice, key, job.now, t, (state, listed))?));
                    let ok = if missed { Answer::Recorded } else { Answer::Minted };
                    branches.push((ok, written, !missed));
                    if ambiguous {
                        branches.push((Answer::Failed, written, false));
                    }
                    None
                }
            },
        };
        if let Some((h, reported)) = refused {
            for &age in self.claim_ages(s, reported) {
                let h = match h {
                    Answer::Held { state, digest, .. } => Answer::Held { state, digest, young: age },
                    other => other,
                };
                branches.push((h, None, false));
            }
        }
        if self.bounds.ledger_faults != Faults::Off {
            branches.push((Answer::Failed, None, false));
        }
        self.written_answers(
            out,
            s,
            w,
            step,
            (key, alias),
            branches.into_iter().map(|(a, row, owns)| (a, row, owns.then_some(t))),
        )
    }

    /// The send of `key`'s notice: everything the provider can do with it, each accepted
    /// message on the provider's record (and judged against the notice's window).
    fn send_call(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        (job, info): (Job, SlotInfo),
        step: Step,
        key: u8,
    ) -> Result<(), VerifyError> {
        for attempts in self.provider_answers(s)? {
            let mut n = s.clone();
            let mut v = None;
            let mut last = None;
            for a in attempts.iter().flatten() {
                if let Attempt::Accepted(m) | Attempt::TimedOut(m) = *a {
                    n.sends[usize::from(m)] = Some(Sent { notice: info.notice, key, seen: false });
                    if v.is_none() && !self.core.in_window(info.notice, job.now)? {
                        v = broken(
                            Invariant::InsideWindow,
                            format!(
                                "m{m} of notice {} was accepted for a job received {}",
                                self.notice_name(info.notice),
                                job.now.name()
                            ),
                        );
                    }
                }
                last = Some(*a);
            }
            let answer = match last {
                Some(Attempt::Accepted(m)) => Answer::Accepted(m),
                Some(Attempt::NotAccepted) => Answer::NotAccepted,
                Some(Attempt::Rejected) => Answer::Rejected,
                _ if self.rules.unknown_reads_as_not_accepted() => Answer::NotAccepted,
                _ => Answer::Unknown,
            };
            let mut j = job;
            j.answers = j.answers.with(answer)?;
            n.workers[w] = Some(j);
            let label = Label::Call { worker: w as u8, step, answer, applied: false, attempts };
            self.push(out, s, label, n, v, false);
        }
        Ok(())
    }

    /// A write under the job's own claim of `key` — the commit of a sent or a rejected send, or
    /// the claim's release: written, refused, or failing.
    fn commit_call(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        job: Job,
        step: Step,
        key: u8,
    ) -> Result<(), VerifyError> {
        let t = job
            .token
            .ok_or_else(|| VerifyError::Unexpected(format!("{} without a claim of its own", step.name())))?;
        let verdict = self.verdict(key, s.rows[usize::from(key)], Probe::Commit(t))?;
        let mut answers: Vec<(Answer, Option<Row>)> = Vec::new();
        match (verdict, s.rows[usize::from(key)]) {
            (Verdict::Apply, Some(mut row)) => {
                match step {
                    Step::CommitSent { message, .. } => {
                        row.state = RowState::Sent;
                        row.message = Some(message);
                    }
                    Step::CommitRejected { .. } => row.state = RowState::Rejected,
                    _ => row.state = RowState::Released,
                }
                answers.push((Answer::Written, Some(row)));
                if self.bounds.ledger_faults == Faults::Ambiguous {
                    answers.push((Answer::Failed, Some(row)));
                }
            }
            _ => answers.push((Answer::Refused, None)),
        }
        if self.bounds.ledger_faults != Faults::Off {
            answers.push((Answer::Failed, None));
        }
        let branches = answers.into_iter().map(|(answer, row)| (answer, row.map(Some), None));
        self.written_answers(out, s, w, step, (key, None), branches)
    }

    /// `key`'s open claim put on the quarantine view: written (listed, if the key still has an
    /// open claim), or failing (applied or not under `Faults::Ambiguous`). The real write is
    /// guarded by the claim's token; the model lists whichever claim the key holds then, so a
    /// claim released and claimed again in between is listed too. That can only list more than
    /// the real write does, never less: the release and the claim in between are each a move the
    /// search also takes without this write, so an unlisted claim it hides is found on that path.
    fn list_call(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        step: Step,
        key: u8,
    ) -> Result<(), VerifyError> {
        let listed = s.rows[usize::from(key)]
            .filter(|r| r.state == RowState::Claimed && !r.listed)
            .map(|r| Row { listed: true, ..r });
        let mut answers: Vec<(Answer, Option<Option<Row>>, Option<u8>)> =
            vec![(Answer::Written, listed.map(Some), None)];
        if self.bounds.ledger_faults == Faults::Ambiguous && listed.is_some() {
            answers.push((Answer::Failed, listed.map(Some), None));
        }
        if self.bounds.ledger_faults != Faults::Off {
            answers.push((Answer::Failed, None, None));
        }
        self.written_answers(out, s, w, step, (key, None), answers)
    }

    /// The producer's withdraw of `key` (with an alias at the older key if the sender writes
    /// one): a tombstone written, refused with the row it reports, or failing.
    fn withdraw_call(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        (job, info): (Job, SlotInfo),
        step: Step,
        (key, alias): (u8, Option<u8>),
    ) -> Result<(), VerifyError> {
        let row = s.rows[usize::from(key)];
        let verdict = self.verdict(key, row, Probe::Withdraw)?;
        let alias_refused = self.alias_refused(s, alias)?;
        // (answer, the row written if any)
        let mut answers: Vec<(Answer, Option<Row>)> = Vec::new();
        match (verdict, row) {
            (Verdict::Apply, _) if alias_refused.is_some() => {
                let older = alias.and_then(|a| s.rows[usize::from(a)]);
                for &young in self.claim_ages(s, older) {
                    if let Some(Answer::Held { state, digest, .. }) = alias_refused {
                        answers.push((Answer::Held { state, digest, young }, None));
                    }
                }
            }
            (Verdict::Apply, _) => {
                let tombstone = self.tombstone(info.notice, key, job.now)?;
                answers.push((Answer::Written, Some(tombstone)));
                if self.bounds.ledger_faults == Faults::Ambiguous {
                    answers.push((Answer::Failed, Some(tombstone)));
                }
            }
            (_, Some(r)) => {
                for &young in self.claim_ages(s, row) {
                    answers.push((Answer::Held { state: r.state, digest: r.notice, young }, None));
                }
            }
            (_, None) => {
                return Err(VerifyError::Unexpected("a withdraw refused over no row".into()));
            }
        }
        if self.bounds.ledger_faults != Faults::Off {
            answers.push((Answer::Failed, None));
        }
        let branches = answers.into_iter().map(|(answer, row)| (answer, row.map(Some), None));
        self.written_answers(out, s, w, step, (key, alias), branches)
    }

    /// One successor per answer to a ledger write of `key`: the answer, the row left on the key if
    /// the write was applied, and the claim token the job holds from then on, if it got one. A
    /// write applied with an alias (`alias`: the older version's key) puts the alias there in the
    /// same atomic write.
    fn written_answers(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        step: Step,
        (key, alias): (u8, Option<u8>),
        branches: impl IntoIterator<Item = (Answer, Option<Option<Row>>, Option<u8>)>,
    ) -> Result<(), VerifyError> {
        let job = s.workers[w].ok_or_else(|| VerifyError::Unexpected(format!("worker {w} has no job")))?;
        for (answer, write, owns) in branches {
            let mut n = s.clone();
            if let Some(row) = write {
                if let (Some(a), Some(written)) = (alias, row) {
                    n.rows[usize::from(a)] = Some(self.alias_row(a, key, written)?);
                }
                n.rows[usize::from(key)] = row;
            }
            let mut j = job;
            j.answers = j.answers.with(answer)?;
            if owns.is_some() {
                j.token = owns;
            }
            n.workers[w] = Some(j);
            let label =
                Label::Call { worker: w as u8, step, answer, applied: write.is_some(), attempts: [None; 2] };
            self.push(out, s, label, n, None, false);
        }
        Ok(())
    }

    /// How a write carrying an alias at `alias` is refused for the alias's sake: the older key's
    /// row as the ledger reports it (`None`: no alias, or the older key takes one).
    fn alias_refused(&self, s: &State, alias: Option<u8>) -> Result<Option<Answer>, VerifyError> {
        let Some(a) = alias else { return Ok(None) };
        let row = s.rows[usize::from(a)];
        if self.verdict(a, row, Probe::Alias)? != Verdict::Refuse {
            return Ok(None);
        }
        Ok(row.map(|r| Answer::Held { state: r.state, digest: r.notice, young: false }))
    }
}
