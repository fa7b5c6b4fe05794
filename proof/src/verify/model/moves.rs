//! The transitions: every way the world can move on from a state.

use notice_ledger::ledger::rules::Verdict;
use notice_ledger::ledger::RowState;

use super::invariants::backwards;
use super::rules::{Model, Probe};
use super::state::{
    bit, broken, Attempt, Batch, Invariant, Job, Label, Msg, Role, Row, Sent, SlotInfo, State, Succ,
    Violation, NOT_NEEDED, TOO_LATE, WITHDRAWN,
};
use super::symmetry::canonical;
use crate::verify::args::Faults;
use crate::verify::error::VerifyError;
use crate::verify::sender::BatchCtx;
use crate::verify::world::{Answer, Answers, Phase, QueueAction, Step, MAX_BATCH, MAX_SENDS};

impl Model {
    // ── successors ──

    pub(in crate::verify) fn successors(
        &mut self,
        s: &State,
        out: &mut Vec<Succ>,
    ) -> Result<(), VerifyError> {
        out.clear();
        let n_slots = self.slots.len();
        if let Some(phase) = s.phase.next() {
            let mut n = s.clone();
            n.phase = phase;
            self.push(out, s, Label::Tick(phase), n, None, false);
        }
        // Further messages of a notice are interchangeable: only the first pending one is enqueued.
        for notice in 0..self.bounds.notices {
            let next = (0..n_slots).find(|&i| {
                let info = self.slots[i];
                info.notice == notice && info.role == Role::Extra && s.queue[i] == Msg::Pending
            });
            if let Some(i) = next {
                let mut n = s.clone();
                n.queue[i] = Msg::Visible;
                self.push(out, s, Label::Enqueue { slot: i as u8 }, n, None, false);
            }
        }
        // The producer's withdraw, whenever it comes.
        for i in 0..n_slots {
            if self.slots[i].role == Role::Withdraw && s.queue[i] == Msg::Pending {
                let mut n = s.clone();
                n.queue[i] = Msg::Visible;
                self.push(out, s, Label::Enqueue { slot: i as u8 }, n, None, false);
            }
        }
        // Idle workers are interchangeable: the first one receives.
        let idle = (0..usize::from(self.bounds.workers)).find(|&w| s.workers[w].is_none());
        for i in 0..n_slots {
            match s.queue[i] {
                Msg::Visible => {
                    if let Some(w) = idle {
                        self.receive(out, s, w, i, None)?;
                        // With the batch path, the same receive may bring any other visible message
                        // along, the two records run in either order after the batch's prefetch.
                        if usize::from(self.bounds.batch) >= MAX_BATCH {
                            for j in (0..n_slots).filter(|&j| j != i && s.queue[j] == Msg::Visible) {
                                // A mutant's per-delivery keys give each message its own sender:
                                // a batch is one sender's.
                                if self.slots[j].variant == self.slots[i].variant {
                                    self.receive(out, s, w, i, Some(j))?;
                                }
                            }
                        }
                    }
                }
                Msg::InFlight(_) if !self.bounds.in_flight_redelivery => {}
                Msg::InFlight(_) | Msg::Orphan => {
                    let mut n = s.clone();
                    n.queue[i] = Msg::Visible;
                    self.push(out, s, Label::Expire { slot: i as u8 }, n, None, false);
                }
                // A schedule fires when the window may be open (a park's wake-up is never before
                // it); the model's coarse clock has nothing finer.
                Msg::Parked(_) | Msg::HiddenLong if s.phase != Phase::Early => {
                    let mut n = s.clone();
                    n.queue[i] = Msg::Visible;
                    self.push(out, s, Label::Wake { slot: i as u8 }, n, None, false);
                }
                Msg::Parked(_) | Msg::HiddenLong => {}
                Msg::Pending | Msg::Gone | Msg::DeadLetter => {}
            }
            let drop = match s.queue[i] {
                Msg::Parked(_) if self.rules.park_expires() => Some("the schedule's TTL expired"),
                Msg::HiddenLong => Some("the queue's retention ran out while it was hidden"),
                _ => None,
            };
            if let Some(why) = drop {
                let mut n = s.clone();
                n.queue[i] = Msg::Gone;
                self.push(out, s, Label::Drop { slot: i as u8, why }, n, None, false);
            }
        }
        for w in 0..usize::from(self.bounds.workers) {
            let Some(job) = s.workers[w] else { continue };
            let info = self.slot(job.slot)?;
            let withdraw = info.role == Role::Withdraw;
            let batch = job.batch.map(|b| BatchCtx { mate: b.mate.map(Batch::body), answers: b.answers });
            let step = self.core.step(job.variant, info.notice, withdraw, job.now, job.answers, batch)?;
            // A crash between any two steps: the job is gone, its message (and its batch's record
            // still to run) comes back by visibility.
            let mut n = s.clone();
            n.workers[w] = None;
            for slot in std::iter::once(job.slot).chain(job.batch.and_then(|b| b.next)) {
                if n.queue[usize::from(slot)] == Msg::InFlight(w as u8) {
                    n.queue[usize::from(slot)] = Msg::Orphan;
                }
            }
            self.push(out, s, Label::Crash { worker: w as u8, before: step.name() }, n, None, false);
            match step {
                Step::Done { outcome, queue, key } => {
                    // A job holding a claim ends `ledger_unavailable` only when its release failed.
                    let failed_release = outcome == "ledger_unavailable" && job.token.is_some();
                    let queue = if (outcome == "in_flight" && self.rules.acks_held_in_flight())
                        || (failed_release && self.rules.acks_failed_release())
                    {
                        QueueAction::Ack
                    } else if queue == QueueAction::Park && !self.bounds.parking {
                        // The world before parking was modelled: a park simply comes back.
                        QueueAction::Retry
                    } else if queue == QueueAction::Park && self.rules.hides_long_waits() {
                        QueueAction::HideLong
                    } else {
                        queue
                    };
                    self.finish(out, s, w, job, (outcome, key), queue)?
                }
                _ => {
                    if self.rules.acks_before_commit() && step.is_post_send_write() && !job.acked {
                        self.early_ack(out, s, w, job);
                    }
                    self.call(out, s, w, job, info, step)?;
                }
            }
        }
        self.events(out, s)?;
        self.operator(out, s)?;
        self.ttl(out, s)?;
        Ok(())
    }

    /// Worker `w` receives message `i` — alone, or in a batch with `next`, which runs after it.
    fn receive(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        i: usize,
        next: Option<usize>,
    ) -> Result<(), VerifyError> {
        // A worker holds one version of the key secret: the message's own sender, or while the
        // secret rotates either version — a fleet mid-switch, in any mix, for the whole run.
        let variants: &[u8] = if self.bounds.rotation { &[0, 1] } else { &[self.slots[i].variant] };
        for &variant in variants {
            self.receive_as(out, s, w, i, next, variant)?;
        }
        Ok(())
    }

    /// [`Model::receive`] by a worker running sender `variant`.
    fn receive_as(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        i: usize,
        next: Option<usize>,
        variant: u8,
    ) -> Result<(), VerifyError> {
        let mut n = s.clone();
        n.queue[i] = Msg::InFlight(w as u8);
        let batch = if usize::from(self.bounds.batch) >= MAX_BATCH {
            let mate = match next {
                Some(j) => {
                    n.queue[j] = Msg::InFlight(w as u8);
                    Some(self.body_code(j as u8)?)
                }
                None => None,
            };
            let next = next.map(|j| j as u8);
            Some(Batch { next, mate, answers: Answers::default(), read: 0, decided: 0 })
        } else {
            None
        };
        let job = Job {
            slot: i as u8,
            variant,
            now: s.phase,
            token: None,
            answers: Answers::default(),
            acked: false,
            read_decided: None,
            batch,
        };
        n.workers[w] = Some(job);
        let label = Label::Receive {
            worker: w as u8,
            slot: i as u8,
            next: next.map(|j| j as u8),
            now: s.phase,
            variant,
        };
        self.push(out, s, label, n, None, false);
        Ok(())
    }

    /// The body message `slot` carries, as [`Batch::mate`] names it.
    fn body_code(&self, slot: u8) -> Result<u8, VerifyError> {
        let info = self.slot(slot)?;
        Ok(Batch::body_code(info.notice, info.role == Role::Withdraw))
    }

    /// What worker runs after `job` ends: its batch's next record, with the batch's prefetch
    /// (`None`: the worker is idle).
    fn next_record(&self, job: Job) -> Result<Option<Job>, VerifyError> {
        let Some(batch) = job.batch else { return Ok(None) };
        let Some(next) = batch.next else { return Ok(None) };
        let batch = Batch { next: None, mate: Some(self.body_code(job.slot)?), ..batch };
        Ok(Some(Job {
            slot: next,
            variant: job.variant,
            now: job.now,
            token: None,
            answers: Answers::default(),
            acked: false,
            read_decided: None,
            batch: Some(batch),
        }))
    }

    /// Canonical form (workers sorted), the backwards check, and the successor itself.
    pub(super) fn push(
        &self,
        out: &mut Vec<Succ>,
        before: &State,
        label: Label,
        mut next: State,
        broken: Option<Violation>,
        ttl: bool,
    ) {
        let broken = broken.or_else(|| backwards(before, &next, ttl, self));
        let moved = self.canonical_messages(&mut next);
        let renumbered = canonical(&mut next, usize::from(self.bounds.workers));
        out.push(Succ { label, next, broken, renumbered, moved });
    }

    fn finish(
        &self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        job: Job,
        (outcome, key): (&'static str, Option<u8>),
        queue: QueueAction,
    ) -> Result<(), VerifyError> {
        let slot = usize::from(job.slot);
        let current = s.queue[slot] == Msg::InFlight(w as u8);
        let mut n = s.clone();
        // The worker goes on with its batch's next record, if any, with the same prefetch.
        n.workers[w] = self.next_record(job)?;
        n.withdraw_answers |= match outcome {
            "withdrawn" => WITHDRAWN,
            "withdraw_too_late" => TOO_LATE,
            "withdraw_not_needed" => NOT_NEEDED,
            _ => 0,
        };
        let label = |effect| Label::Finish { worker: w as u8, slot: job.slot, outcome, queue, effect };
        if let Some(v) = self.left_claim(s, job)? {
            // The job's own claim outlives it although it got no token.
            self.push(out, s, label("its claim left behind"), n, Some(v), false);
            return Ok(());
        }
        match queue {
            QueueAction::Ack if job.acked => self.push(out, s, label("already deleted"), n, None, false),
            QueueAction::Ack if current => {
                n.queue[slot] = Msg::Gone;
                self.push(out, s, label("deleted"), n, None, false);
            }
            QueueAction::Ack => {
                let gone = matches!(s.queue[slot], Msg::Gone | Msg::DeadLetter);
                if self.bounds.stale_deletes && !gone {
                    let mut deleted = n.clone();
                    deleted.queue[slot] = Msg::Gone;
                    self.push(out, s, label("stale receipt, deleted anyway"), deleted, None, false);
                }
                self.push(out, s, label("stale receipt, not deleted"), n, None, false);
            }
            QueueAction::Retry if current => {
                n.queue[slot] = Msg::Visible;
                self.push(out, s, label("visible again"), n, None, false);
            }
            QueueAction::Retry => self.push(out, s, label("stale receipt, ignored"), n, None, false),
            QueueAction::Park if current => {
                // One schedule per key, named by the key the sender reported: a second park finds
                // it ("already parked") and acks its copy only while that schedule has not fired.
                let key = key.unwrap_or(self.slot(job.slot)?.key);
                let scheduled = (0..self.slots.len()).any(|i| i != slot && s.queue[i] == Msg::Parked(key));
                if scheduled {
                    n.queue[slot] = Msg::Gone;
                    self.push(out, s, label("already parked: deleted"), n, None, false);
                } else {
                    n.queue[slot] = Msg::Parked(key);
                    self.push(
                        out,
                        s,
                        label("parked: off the queue until its schedule fires"),
                        n,
                        None,
                        false,
                    );
                }
            }
            QueueAction::HideLong if current => {
                n.queue[slot] = Msg::HiddenLong;
                self.push(out, s, label("hidden past the queue's bound"), n, None, false);
            }
            QueueAction::Park | QueueAction::HideLong => {
                self.push(out, s, label("stale receipt, ignored"), n, None, false)
            }
            QueueAction::DeadLetter => {
                if current {
                    n.queue[slot] = Msg::DeadLetter;
                }
                let v = broken(
                    Invariant::NoSilentEnd,
                    format!("{} was dead-lettered ({outcome})", self.slot_role(job.slot)),
                );
                self.push(out, s, label("dead-lettered"), n, v, false);
            }
        }
        Ok(())
    }

    /// A job that got no token (limited, or the take failed) and ends with its own claim still on
    /// the key.
    fn left_claim(&self, s: &State, job: Job) -> Result<Option<Violation>, VerifyError> {
        let (Some(t), true) = (job.token, job.answers.without_token()) else { return Ok(None) };
        // Tokens are unique: the key holding claim `t` is the job's (whichever version it was).
        let Some(key) = (0..s.rows.len())
            .find(|&k| s.rows[k].is_some_and(|r| r.state == RowState::Claimed && r.token == Some(t)))
        else {
            return Ok(None);
        };
        let key = key as u8;
        Ok(broken(
            Invariant::LimitedLeavesNoClaim,
            format!(
                "{} got no token and ends with its claim t{t} still on {}",
                self.slot_role(job.slot),
                self.key_name(key)
            ),
        ))
    }

    fn early_ack(&self, out: &mut Vec<Succ>, s: &State, w: usize, job: Job) {
        let slot = usize::from(job.slot);
        let mut n = s.clone();
        if n.queue[slot] == Msg::InFlight(w as u8) {
            n.queue[slot] = Msg::Gone;
        }
        if let Some(j) = n.workers[w].as_mut() {
            j.acked = true;
        }
        let v = broken(
            Invariant::AckAfterDurable,
            format!(
                "{} was acked while its job still had the commit of its send result to write",
                self.slot_role(job.slot)
            ),
        );
        self.push(out, s, Label::EarlyAck { worker: w as u8, slot: job.slot }, n, v, false);
    }

    /// The worker's next port call, answered every way it can be.
    fn call(
        &mut self,
        out: &mut Vec<Succ>,
        s: &State,
        w: usize,
        job: Job,
        info: SlotInfo,
        step: Step,
    ) -> Result<(), VerifyError> {
        let faults = self.bounds.ledger_faults != Faults::Off;
        let ambiguous = self.bounds.ledger_faults == Faults::Ambiguous;
        // (answer, the row written if any, whether the job now holds the claim)
        let mut branches: Vec<(Answer, Option<Option<Row>>, bool)> = Vec::new();
        match step {
            Step::Read { key } => {
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
                    let label =
                        Label::Call { worker: w as u8, step, answer, applied: false, attempts: [None; 2] };
                    self.push(out, s, label, n, None, false);
                }
            }
            Step::Place { key } => {
                // Where the notice lives: the older version's row as it stands — any row, a
                // released or an alias one too (the placement tells them apart), or none.
                for answer in self.read_answers(s, s.rows[usize::from(key)], faults) {
                    let mut n = s.clone();
                    let mut j = job;
                    j.answers = j.answers.with(answer)?;
                    n.workers[w] = Some(j);
                    let label =
                        Label::Call { worker: w as u8, step, answer, applied: false, attempts: [None; 2] };
                    self.push(out, s, label, n, None, false);
                }
            }
            Step::Token { key } => {
                // Decided when the job read it (itself, or its batch's read answered it), or,
                // with no read, now.
                let read = job.read_decided.or_else(|| job.batch.and_then(|b| b.decided_at_read(key)));
                let decided = match read {
                    Some(d) => d,
                    None => {
                        let t = self.fresh_token(s)?;
                        self.verdict(key, s.rows[usize::from(key)], Probe::Read(t))? == Verdict::Refuse
                    }
                };
                // (answer, whether a token was spent)
                let mut answers = vec![(Answer::Admitted, true), (Answer::Limited, false)];
                if faults {
                    answers.push((Answer::GateFailed, false));
                }
                if ambiguous {
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
                    let label =
                        Label::Call { worker: w as u8, step, answer, applied: spent, attempts: [None; 2] };
                    self.push(out, s, label, n, v, false);
                }
            }
            Step::Claim { key, alias } | Step::RecordMissed { key, alias } => {
                let t = self.fresh_token(s)?;
                let verdict = self.verdict(key, s.rows[usize::from(key)], Probe::Claim(t))?;
                let row = s.rows[usize::from(key)];
                let held = row.map(|r| Answer::Held { state: r.state, digest: r.notice, young: false });
                let missed = matches!(step, Step::RecordMissed { .. });
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
                            let written = Some(Some(self.written(info.notice, key, job.now, t, state)?));
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
                if faults {
                    branches.push((Answer::Failed, None, false));
                }
                self.written_answers(
                    out,
                    s,
                    w,
                    step,
                    (key, alias),
                    branches.into_iter().map(|(a, row, owns)| (a, row, owns.then_some(t))),
                )?;
            }
            Step::Send { key } => {
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
            }
            Step::CommitSent { key, .. } | Step::CommitRejected { key } | Step::Release { key } => {
                let t = job.token.ok_or_else(|| {
                    VerifyError::Unexpected(format!("{} without a claim of its own", step.name()))
                })?;
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
                        if ambiguous {
                            answers.push((Answer::Failed, Some(row)));
                        }
                    }
                    _ => answers.push((Answer::Refused, None)),
                }
                if faults {
                    answers.push((Answer::Failed, None));
                }
                let branches = answers.into_iter().map(|(answer, row)| (answer, row.map(Some), None));
                self.written_answers(out, s, w, step, (key, None), branches)?;
            }
            Step::Withdraw { key, alias } => {
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
                        if ambiguous {
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
                if faults {
                    answers.push((Answer::Failed, None));
                }
                let branches = answers.into_iter().map(|(answer, row)| (answer, row.map(Some), None));
                self.written_answers(out, s, w, step, (key, alias), branches)?;
            }
            Step::BatchRead { keys } => self.batch_read(out, s, w, job, step, keys)?,
            Step::BatchToken { keys } => self.batch_token(out, s, w, job, step, keys)?,
            Step::Done { .. } => {}
        }
        Ok(())
    }

    /// The batch's one ledger read: each key answered from its row as it stands (a strongly
    /// consistent read), every combination of the keys' answers, or the whole read failing.
    fn batch_read(
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

    /// The batch's one token take, for the keys its read found claimable: each granted or
    /// limited, or the whole take failing (with or without its tokens spent).
    fn batch_token(
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
        // Each key's: decided when the batch read it (or, with no read, now).
        let mut decided = Vec::with_capacity(MAX_BATCH);
        for key in keys.iter().flatten().copied() {
            let d = match batch.decided_at_read(key) {
                Some(d) => d,
                None => {
                    let t = self.fresh_token(s)?;
                    self.verdict(key, s.rows[usize::from(key)], Probe::Read(t))? == Verdict::Refuse
                }
            };
            decided.push((key, d));
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

    /// Every answer a read of `row` can get: held (young or old, for an open claim), or free when
    /// there is none to report — and, with ledger faults, the read failing.
    fn read_answers(&self, s: &State, row: Option<Row>, faults: bool) -> Vec<Answer> {
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
    fn fresh_token(&self, s: &State) -> Result<u8, VerifyError> {
        let used = |t: u8| {
            s.rows.iter().flatten().any(|r| r.token == Some(t))
                || s.workers.iter().flatten().any(|j| j.token == Some(t))
        };
        (0..u8::MAX).find(|t| !used(*t)).ok_or_else(|| VerifyError::Bound("claim tokens".into()))
    }

    /// How old an open claim can look to a job that finds it: young while its claimer still runs
    /// (the stale cut-off outlasts any invocation: `NOTICE_STALE_AFTER_SECS` > the function
    /// timeout), young or stale once it is dead; decided rows have no age that matters.
    fn claim_ages(&self, s: &State, row: Option<Row>) -> &'static [bool] {
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
    fn provider_answers(&self, s: &State) -> Result<Vec<[Option<Attempt>; 2]>, VerifyError> {
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
