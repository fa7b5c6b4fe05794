//! Counting a file of jobs against the ledger — the dry run that `replay` and `backfill` both do
//! before they change anything.
//!
//! Every key of the file is derived and looked up (DynamoDB `BatchGetItem`, 100 keys a call, or
//! the SQLite file); what comes back says how many jobs are new, how many the ledger already
//! decided, and which lines are not jobs at all.

use notice_ledger::deliver::Placement;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use chrono::Utc;
use notice_ledger::job::Withdrawal;
use notice_ledger::keyring::KeyRing;
use notice_ledger::ledger::{Ledger, LedgerRow, RowState};
use notice_ledger::{Admitted, InvalidJob, Job, NoticeKey, NoticeSecret, Refused};

use crate::input::read_items;
use crate::ledger_target::{LedgerArg, LedgerTarget};
use crate::local::StateDir;
use crate::notices_arg::ConfigArg;
use crate::terminal::progress;

/// What a file of jobs amounts to against the ledger.
#[derive(Debug, Default)]
pub(super) struct Census {
    pub(super) jobs: usize,
    pub(super) invalid: Vec<(String, String)>,
    pub(super) repeated_in_file: usize,
    pub(super) in_ledger: BTreeMap<RowState, usize>,
    /// Distinct valid jobs the ledger has no row for (or only a released one): these would send.
    /// A `withdrawn` key is never among them: it counts in `in_ledger`.
    pub(super) new: Vec<(String, Job, NoticeKey)>,
    /// How many of `new` have a released row (a replay sends them; a backfill leaves them).
    pub(super) released_in_new: usize,
    /// Distinct withdraws (`"action": "withdraw"`): a replay passes them through as they are (a
    /// tombstone can only stop a send), a backfill skips them.
    pub(super) withdraws: Vec<(String, Withdrawal)>,
    /// Lines that are withdraws, repeats included: not send jobs, so not in the verdict's count.
    pub(super) withdraw_lines: usize,
}

impl Census {
    fn summary(&self) -> String {
        let states: Vec<String> = self.in_ledger.iter().map(|(s, n)| format!("{s} {n}")).collect();
        let withdraws = match self.withdraws.len() {
            0 => String::new(),
            n => format!(" · withdraws: {n}"),
        };
        format!(
            "{} job(s) · {} invalid · {} repeated in file · in ledger: {} · new: {}{withdraws}",
            self.jobs,
            self.invalid.len(),
            self.repeated_in_file,
            if states.is_empty() { "none".into() } else { states.join(", ") },
            self.new.len()
        )
    }

    /// The counts, then every line that is not a valid job: what both commands show first.
    pub(super) fn print_summary(&self, target: &LedgerTarget) {
        println!("{} (ledger {})", self.summary(), target.describe());
        if let Some(n) = self.in_ledger.get(&RowState::Withdrawn) {
            println!("  withdrawn {n}: never enqueued or backfilled — these notices must not go out");
        }
        if !self.withdraws.is_empty() {
            println!(
                "  withdraws {}: passed through as withdraws by a replay (each writes a tombstone), never backfilled",
                self.withdraws.len()
            );
        }
        for (origin, error) in &self.invalid {
            println!("  {origin}: {error}");
        }
    }

    /// The plain-language verdict an operator reads at 02:00. "Stop" when nothing is new, or when
    /// the new jobs are fewer than `stop_below_percent` of the valid ones: a large backlog that
    /// was almost all delivered already, where the few unknown keys are more likely a mistake
    /// (wrong file, wrong secret, wrong ledger) than notices owed.
    pub(super) fn verdict(&self, stop_below_percent: f64) -> Verdict {
        let valid = self.jobs - self.invalid.len() - self.withdraw_lines;
        let new = self.new.len();
        let withdraws = self.withdraws.len();
        if valid == 0 && withdraws > 0 {
            Verdict { stop: false, text: format!("no send jobs: {withdraws} withdraw(s) would be enqueued") }
        } else if new == 0 {
            Verdict::stop(format!(
                "0 new of {valid}: stop — this backlog was already delivered (or decided); nothing to replay"
            ))
        } else if (new as f64) * 100.0 < stop_below_percent * valid as f64 {
            Verdict::stop(format!("{new} new of {valid}: stop — almost all of this backlog was already delivered (under {stop_below_percent}% new); replay only if you expected exactly these {new} (--force)"))
        } else {
            let and = if withdraws > 0 { format!(", with {withdraws} withdraw(s)") } else { String::new() };
            Verdict { stop: false, text: format!("{new} new of {valid} would be enqueued{and}") }
        }
    }
}

/// What the census says to do with a backlog.
#[derive(Debug, PartialEq)]
pub(super) struct Verdict {
    /// Replaying is refused unless forced.
    pub(super) stop: bool,
    pub(super) text: String,
}

impl Verdict {
    fn stop(text: String) -> Self {
        Self { stop: true, text }
    }
}

/// Counts the jobs in `from` against the ledger `ledger` names, and returns the ledger open for
/// the write that may follow.
///
/// Each line is judged by the core's one admission under `config` (as `send` and the sender judge
/// it, at this instant): a line the sender would refuse is invalid here, never counted as new.
pub(super) async fn census(
    state_dir: &Path,
    from: &Path,
    ledger: &LedgerArg,
    config: &ConfigArg,
) -> anyhow::Result<(Census, LedgerTarget, Arc<dyn Ledger>)> {
    // Before anything is opened: a configuration that cannot be used leaves nothing behind. The
    // manage links play no part in a census.
    let notices = config.notices(&KeyRing::from(NoticeSecret::new("noticectl census: no links")?))?;
    let now = Utc::now();
    let items = read_items(from)?;
    let state = StateDir::open(state_dir)?;
    let secret = state.secret().await?;
    let target = ledger.target(&state.root)?;
    let ledger = target.open_checked(&secret, false).await?.0.ledger;

    let mut census = Census { jobs: items.len(), ..Census::default() };
    let mut seen = HashSet::new();
    let mut seen_withdraws = HashSet::new();
    let mut candidates = Vec::new();
    for item in items {
        let judged = match &item.unreadable {
            Some(problem) => Err(Refused::from(InvalidJob::new("body", problem.clone()))),
            None => notices.admit(&item.body, now),
        };
        match judged {
            Err(refused) => census.invalid.push((item.origin, crate::terminal::escape(&refused.to_string()))),
            Ok(Admitted::Withdraw(withdrawal)) => {
                census.withdraw_lines += 1;
                if seen_withdraws.insert(secret.key(&withdrawal.identity)) {
                    census.withdraws.push((item.origin, withdrawal));
                } else {
                    census.repeated_in_file += 1;
                }
            }
            Ok(Admitted::Send(admitted)) => {
                let job = admitted.job;
                let key = secret.key(&job.identity);
                if seen.insert(key.clone()) {
                    candidates.push((item.origin, job, key));
                } else {
                    census.repeated_in_file += 1;
                }
            }
        }
    }
    let bar = progress(candidates.len(), "looking up");
    let mut rows: BTreeMap<NoticeKey, LedgerRow> = BTreeMap::new();
    for chunk in candidates.chunks(100) {
        // While the key secret rotates, a notice may live under an older version's key.
        let keys: Vec<NoticeKey> =
            chunk.iter().flat_map(|(_, job, _)| secret.active_keys(&job.identity)).collect();
        for row in ledger.get_many(&keys).await.context("ledger lookup failed")? {
            rows.insert(row.key.clone(), row);
        }
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    for (origin, job, _) in candidates {
        let key = Placement::of(&secret, &job.identity, |k| rows.get(k).cloned()).key;
        match rows.get(&key).map(|r| r.state) {
            None => census.new.push((origin, job, key)),
            Some(RowState::Released) => {
                census.released_in_new += 1;
                census.new.push((origin, job, key));
            }
            Some(state) => *census.in_ledger.entry(state).or_default() += 1,
        }
    }
    Ok((census, target, ledger))
}
