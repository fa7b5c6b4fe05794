//! Trace lines: each step in words, with the ledger rows and the provider's record after it.

use notice_ledger::ledger::RowState;

use super::rules::Model;
use super::state::{bit, Attempt, Label, Role, State};
use crate::verify::world::{Answer, QueueAction, Step, EVENTS, MAX_BATCH, MAX_SENDS};

impl Model {
    // ── names for traces ──

    pub(super) fn notice_name(&self, notice: u8) -> &'static str {
        self.core.notice(notice).map(|n| n.name).unwrap_or("?")
    }

    pub(super) fn slot_name(&self, slot: u8) -> String {
        let Ok(info) = self.slot(slot) else { return format!("message {slot}") };
        let role = match info.role {
            Role::Original => "original",
            Role::Extra => "duplicate",
            Role::Replay => "replay",
            Role::Withdraw => "withdraw",
        };
        format!("msg{} ({role} of {})", slot + 1, self.notice_name(info.notice))
    }

    /// A message by its role only (violation details are computed before the trace names it).
    pub(super) fn slot_role(&self, slot: u8) -> String {
        let Ok(info) = self.slot(slot) else { return format!("message {slot}") };
        let notice = self.notice_name(info.notice);
        match info.role {
            Role::Original => format!("the original message of {notice}"),
            Role::Extra => format!("a duplicate message of {notice}"),
            Role::Replay => format!("the operator's replay of {notice}"),
            Role::Withdraw => format!("the withdraw message of {notice}"),
        }
    }

    /// The secret versions a worker running sender `variant` holds, while the world rotates them.
    fn holds(&self, variant: u8) -> &'static str {
        match (self.bounds.rotation, variant) {
            (false, _) => "",
            (true, 0) => " (holding v1 only)",
            (true, _) => " (holding v1 and v2, v2 current)",
        }
    }

    pub(super) fn key_name(&self, key: u8) -> String {
        let prefix = self.core.key(key).map(|k| k.prefix().to_owned()).unwrap_or_default();
        format!("key {}…", &prefix[..prefix.len().min(8)])
    }

    /// One trace line: what happened, then the ledger rows and the provider's record after it.
    /// `workers`, `messages`: the name each worker and message index of the state before `label`
    /// goes by in the trace (states keep interchangeable ones sorted, traces keep their names).
    pub(in crate::verify) fn describe(
        &self,
        label: &Label,
        after: &State,
        workers: &[u8],
        messages: &[u8],
    ) -> String {
        let w = |w: &u8| format!("worker {}", workers.get(usize::from(*w)).copied().unwrap_or(*w) + 1);
        let m = |m: &u8| self.slot_name(messages.get(usize::from(*m)).copied().unwrap_or(*m));
        let what = match label {
            Label::Tick(p) => format!("clock: now {}", p.name()),
            Label::Enqueue { slot } => format!("enqueue {}", m(slot)),
            Label::Receive { worker, slot, next: None, now, variant } => {
                format!("{}{} receives {} ({})", w(worker), self.holds(*variant), m(slot), now.name())
            }
            Label::Receive { worker, slot, next: Some(next), now, variant } => {
                format!(
                    "{}{} receives {} and {} in one batch, to run in that order ({})",
                    w(worker),
                    self.holds(*variant),
                    m(slot),
                    m(next),
                    now.name()
                )
            }
            Label::Expire { slot } => {
                format!("visibility of {} expires: visible again", m(slot))
            }
            Label::Crash { worker, before } => format!("{} crashes before {before}", w(worker)),
            Label::Call { worker, step, answer, applied, attempts } => {
                self.call_line(w(worker), step, *answer, *applied, attempts)
            }
            Label::Prefetch { worker, step, answers, applied } => {
                self.prefetch_line(w(worker), step, answers, *applied)
            }
            Label::Finish { worker, slot, outcome, queue, effect } => {
                let q = match queue {
                    QueueAction::Ack => "ack",
                    QueueAction::Retry => "retry",
                    QueueAction::Park => "park",
                    QueueAction::HideLong => "hide (longer than the queue keeps it)",
                    QueueAction::DeadLetter => "dead-letter",
                };
                format!("{} ends {outcome} → {q} {}: {effect}", w(worker), m(slot))
            }
            Label::EarlyAck { worker, slot } => {
                format!("{} acks {} before its commit", w(worker), m(slot))
            }
            Label::Event { message, event, effect } => {
                let name = EVENTS.get(usize::from(*event)).map_or("?", |e| e.0);
                format!("reconciler applies {name} event of m{message}: {effect}")
            }
            Label::OperatorRelease { key, replay } => {
                let replay = replay.map_or(String::new(), |r| format!(", replays {}", m(&r)));
                format!("operator releases the open claim on {}{replay}", self.key_name(*key))
            }
            Label::Ttl { key, state } => format!("TTL deletes the {state} row of {}", self.key_name(*key)),
            Label::Wake { slot } => {
                format!("{} comes back on the queue (its schedule fires): visible", m(slot))
            }
            Label::Drop { slot, why } => format!("{} is dropped before it comes back: {why}", m(slot)),
        };
        format!("{what}  [{}]", self.summary(after))
    }

    /// A port call's line: the call and its key, what the provider did with a send, and what the
    /// sender saw.
    fn call_line(
        &self,
        worker: String,
        step: &Step,
        answer: Answer,
        applied: bool,
        attempts: &[Option<Attempt>; 2],
    ) -> String {
        let key = match step {
            Step::Claim { key, alias: Some(a), .. }
            | Step::RecordMissed { key, alias: Some(a) }
            | Step::Withdraw { key, alias: Some(a) } => {
                format!("{} (alias at {})", self.key_name(*key), self.key_name(*a))
            }
            Step::Read { key }
            | Step::Place { key }
            | Step::Token { key }
            | Step::Claim { key, .. }
            | Step::RecordMissed { key, .. }
            | Step::Send { key }
            | Step::CommitSent { key, .. }
            | Step::CommitRejected { key }
            | Step::Release { key }
            | Step::List { key }
            | Step::Withdraw { key, .. } => self.key_name(*key),
            Step::BatchRead { .. } | Step::BatchToken { .. } | Step::Done { .. } => String::new(),
        };
        let provider: Vec<String> = attempts
            .iter()
            .flatten()
            .map(|a| match a {
                Attempt::Accepted(m) => format!("provider accepts m{m}"),
                Attempt::TimedOut(m) => format!("provider accepts m{m}, answer times out"),
                Attempt::Failed => "provider 5xx, nothing sent".into(),
                Attempt::NotAccepted => "provider throttles".into(),
                Attempt::Rejected => "provider rejects".into(),
            })
            .collect();
        let mut line = format!("{worker} {} {key}", step.name());
        if let Step::CommitSent { message, .. } = step {
            line.push_str(&format!(" m{message}"));
        }
        if !provider.is_empty() {
            line.push_str(&format!(": {}", provider.join("; then SDK retry: ")));
        }
        line.push_str(&format!(" → sender sees {}", answer.describe()));
        if answer == Answer::Failed && applied {
            line.push_str(" (the write was applied)");
        }
        if answer == Answer::GateFailed && applied {
            line.push_str(" (the take was applied: a token spent)");
        }
        line
    }

    /// A batch prefetch's line: the batch's keys and what the sender saw for each.
    fn prefetch_line(
        &self,
        worker: String,
        step: &Step,
        answers: &[Option<Answer>; MAX_BATCH],
        applied: bool,
    ) -> String {
        let keys = match step {
            Step::BatchRead { keys } | Step::BatchToken { keys } => *keys,
            _ => [None; MAX_BATCH],
        };
        let keys: Vec<String> = keys.iter().flatten().map(|k| self.key_name(*k)).collect();
        let seen: Vec<String> = answers.iter().flatten().map(|a| a.describe()).collect();
        let mut line =
            format!("{worker} {} {} → sender sees {}", step.name(), keys.join(", "), seen.join(", "));
        if applied && answers.iter().flatten().any(|a| *a == Answer::GateFailed) {
            line.push_str(" (the take was applied: tokens spent)");
        }
        line
    }

    fn summary(&self, s: &State) -> String {
        let mut parts = Vec::new();
        for key in 0..self.key_notice.len() as u8 {
            let text = match s.rows[usize::from(key)] {
                None => "none".to_owned(),
                Some(r) => {
                    let mut t = r.state.to_string();
                    if let Some(tok) = r.token.filter(|_| r.state == RowState::Claimed) {
                        t.push_str(&format!(" t{tok}"));
                    }
                    if let Some(m) = r.message {
                        t.push_str(&format!(" m{m}"));
                    }
                    if r.duplicates != 0 {
                        t.push_str(&format!(
                            " dup {}",
                            list(&(0..8).filter(|m| r.duplicates & bit(*m) != 0).collect::<Vec<_>>())
                        ));
                    }
                    t
                }
            };
            parts.push(format!("{}: {text}", self.key_name(key)));
        }
        let sent: Vec<u8> = (0..MAX_SENDS as u8).filter(|m| s.sends[usize::from(*m)].is_some()).collect();
        if !sent.is_empty() {
            parts.push(format!("accepted: {}", list(&sent)));
        }
        parts.join("; ")
    }
}

pub(super) fn list(ids: &[u8]) -> String {
    ids.iter().map(|m| format!("m{m}")).collect::<Vec<_>>().join(", ")
}
