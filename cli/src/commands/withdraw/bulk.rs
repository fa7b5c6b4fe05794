//! `noticectl withdraw --from FILE`: every line read and admitted first, every key looked up in
//! one pass, the census printed, then the tombstones written a few at once and the writes'
//! answers reported in file order.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use notice_ledger::deliver::Placement;
use notice_ledger::job::Withdrawal;
use notice_ledger::keyring::KeyRing;
use notice_ledger::ledger::{ClaimLedger, Ledger, LedgerRow, Origin, RowState, WithdrawRequest};
use notice_ledger::{InvalidJob, NoticeKey, Notices};
use serde_json::Value;

use super::{Answer, WithdrawArgs};
use crate::exit::Exit;
use crate::input::{read_items, InputItem};
use crate::ledger_target::LedgerTarget;
use crate::terminal::{confirm, escape, progress};

/// One distinct, valid line of `--from`.
struct Target {
    origin: String,
    withdrawal: Withdrawal,
    /// Where the notice lives (its current key until the lookup placed it), and the aliases a
    /// tombstone there carries while the key secret rotates.
    key: NoticeKey,
    aliases: Vec<NoticeKey>,
}

/// How many keys ended (or would end) each way.
#[derive(Default)]
struct Counts {
    withdrawn: usize,
    /// Of `withdrawn`: over a released row (a claim given up).
    over_released: usize,
    already: usize,
    not_needed: BTreeMap<RowState, usize>,
    /// Origin, key and the row's state and time.
    too_late: Vec<(String, NoticeKey, RowState, DateTime<Utc>)>,
}

impl Counts {
    fn add(&mut self, target: &Target, answer: Answer, released: bool) {
        match answer {
            Answer::Withdrawn => {
                self.withdrawn += 1;
                if released {
                    self.over_released += 1;
                }
            }
            Answer::Already => self.already += 1,
            Answer::NotNeeded(state) => *self.not_needed.entry(state).or_default() += 1,
            Answer::TooLate { state, since } => {
                self.too_late.push((target.origin.clone(), target.key.clone(), state, since))
            }
        }
    }

    fn print(&self, withdrawn_label: &str, invalid: usize, repeated: usize) {
        let released = if self.over_released > 0 {
            format!("  ({} over a released claim)", self.over_released)
        } else {
            String::new()
        };
        let not_needed: usize = self.not_needed.values().sum();
        let states: Vec<String> = self.not_needed.iter().map(|(s, n)| format!("{s} {n}")).collect();
        let not_needed_states =
            if states.is_empty() { String::new() } else { format!("  ({})", states.join(", ")) };
        println!("  {withdrawn_label:<18} {:>6}{released}", self.withdrawn);
        println!("  {:<18} {:>6}", "already withdrawn", self.already);
        println!("  {:<18} {:>6}  (claimed or sent: went out or may have)", "too late", self.too_late.len());
        println!("  {:<18} {:>6}{not_needed_states}", "not needed", not_needed);
        println!("  {:<18} {:>6}", "invalid lines", invalid);
        println!("  {:<18} {:>6}", "repeated in file", repeated);
    }

    /// Every too-late key, so the operator can tell the producer which notices went out.
    fn print_too_late(&self) {
        if self.too_late.is_empty() {
            return;
        }
        println!("too late — these went out or may have; tell their producer:");
        for (origin, key, state, since) in &self.too_late {
            println!("  {origin:<10} {}  {state} since {}", key.prefix(), since.to_rfc3339());
        }
    }
}

/// One line of `--from` as a withdraw: `action` absent or `withdraw`, the identity, an optional
/// reason (else `default_reason`).
fn parse_line(item: &InputItem, default_reason: Option<&str>) -> Result<Withdrawal, String> {
    if let Some(problem) = &item.unreadable {
        return Err(problem.clone());
    }
    let named = |e: InvalidJob| format!("field `{}` {}", e.field, e.reason);
    let mut value: Value =
        serde_json::from_str(&item.body).map_err(|e| format!("field `body` is not valid JSON: {e}"))?;
    if let Some(obj) = value.as_object_mut() {
        match obj.get("action") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "withdraw" => {}
            Some(Value::String(s)) if s == "send" => {
                return Err(named(InvalidJob::new(
                    "action",
                    "is `send`: a withdraw file holds withdraws (`action` absent or `withdraw`)",
                )))
            }
            Some(_) => return Err(named(InvalidJob::new("action", "must be `withdraw` (or absent)"))),
        }
        if let (None | Some(Value::Null), Some(reason)) = (obj.get("reason"), default_reason) {
            obj.insert("reason".into(), Value::String(reason.to_owned()));
        }
    }
    Withdrawal::from_value(&value).map_err(named)
}

/// The lines of `--from`, read and admitted.
struct FileLines {
    lines: usize,
    /// The distinct valid lines, in file order.
    targets: Vec<Target>,
    /// Origin and problem of each invalid line.
    invalid: Vec<(String, String)>,
    /// Valid lines whose notice an earlier line already names.
    repeated: usize,
}

pub(super) async fn bulk(
    from: &Path,
    args: &WithdrawArgs,
    notices: &Notices,
    target: &LedgerTarget,
    ledger: Arc<dyn Ledger>,
    secret: &KeyRing,
    who: &str,
) -> anyhow::Result<ExitCode> {
    let mut file = read_lines(from, args.reason.as_deref(), notices, secret)?;
    let rows = look_up(&mut file.targets, ledger.as_ref(), secret).await?;
    let mut planned = Counts::default();
    for t in &file.targets {
        let row = rows.get(&t.key);
        planned.add(t, Answer::predicted(row), row.is_some());
    }

    println!(
        "withdraw census: {} line(s), {} distinct notice(s) (ledger {})",
        file.lines,
        file.targets.len(),
        target.describe()
    );
    planned.print("would withdraw", file.invalid.len(), file.repeated);
    for (origin, problem) in &file.invalid {
        println!("  {origin}: {problem}");
    }
    planned.print_too_late();
    let bad_input = !file.invalid.is_empty();
    let census_code =
        if bad_input || !planned.too_late.is_empty() { Exit::Attention.into() } else { Exit::Ok.into() };
    if args.dry_run {
        println!("dry run: nothing written");
        return Ok(census_code);
    }
    // Only keys the census found withdrawable are written: a decided row stays decided, and a
    // claimed one is refused by the same condition (withdraw again if its claim is released).
    let to_write: Vec<&Target> =
        file.targets.iter().filter(|t| Answer::predicted(rows.get(&t.key)) == Answer::Withdrawn).collect();
    if to_write.is_empty() {
        println!("nothing to write");
        return Ok(census_code);
    }
    if !args.yes
        && !confirm(&format!(
            "Withdraw {} notice(s) in {}? No copy of them will be sent after this.",
            to_write.len(),
            target.describe()
        ))?
    {
        println!("nothing withdrawn");
        return Ok(Exit::SafetyStop.into());
    }
    let answers = write(&to_write, &ledger, who, args.concurrency).await?;
    Ok(report_done(&file, &rows, answers, who))
}

/// Every line of `from` parsed and admitted as the sender admits a withdraw message; a notice
/// named twice is written once.
fn read_lines(
    from: &Path,
    default_reason: Option<&str>,
    notices: &Notices,
    secret: &KeyRing,
) -> anyhow::Result<FileLines> {
    let items = read_items(from)?;
    let mut file = FileLines { lines: items.len(), targets: Vec::new(), invalid: Vec::new(), repeated: 0 };
    let mut seen = HashSet::new();
    for item in &items {
        let admitted = parse_line(item, default_reason).and_then(|w| {
            notices.admit_withdraw(w).map_err(|r| format!("field `{}` {}", r.field(), r.reason()))
        });
        match admitted {
            Err(problem) => file.invalid.push((item.origin.clone(), escape(&problem))),
            Ok(withdrawal) => {
                let key = secret.key(&withdrawal.identity);
                if seen.insert(key.clone()) {
                    file.targets.push(Target {
                        origin: item.origin.clone(),
                        withdrawal,
                        key,
                        aliases: Vec::new(),
                    });
                } else {
                    file.repeated += 1;
                }
            }
        }
    }
    Ok(file)
}

/// The ledger's rows of every target, read 100 keys at a time, and each target placed where its
/// notice lives.
async fn look_up(
    targets: &mut [Target],
    ledger: &dyn Ledger,
    secret: &KeyRing,
) -> anyhow::Result<BTreeMap<NoticeKey, LedgerRow>> {
    let bar = progress(targets.len(), "looking up");
    let mut rows: BTreeMap<NoticeKey, LedgerRow> = BTreeMap::new();
    for chunk in targets.chunks(100) {
        // While the key secret rotates, a notice may live under an older version's key.
        let keys: Vec<NoticeKey> =
            chunk.iter().flat_map(|t| secret.active_keys(&t.withdrawal.identity)).collect();
        for row in ledger.get_many(&keys).await.context("ledger lookup failed")? {
            rows.insert(row.key.clone(), row);
        }
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    for t in targets.iter_mut() {
        let placed = Placement::of(secret, &t.withdrawal.identity, |k| rows.get(k).cloned());
        (t.key, t.aliases) = (placed.key, placed.aliases);
    }
    Ok(rows)
}

/// The tombstones of `to_write`, `concurrency` writes in flight: each key's answer. The ledger
/// itself failing stops the run with an error saying how far it got.
async fn write(
    to_write: &[&Target],
    ledger: &Arc<dyn Ledger>,
    who: &str,
    concurrency: u16,
) -> anyhow::Result<BTreeMap<NoticeKey, anyhow::Result<Answer>>> {
    let now = Utc::now();
    let bar = progress(to_write.len(), "withdrawing");
    let mut results = futures::stream::iter(to_write.iter().map(|t| {
        let ledger = Arc::clone(ledger);
        let req = WithdrawRequest::new(&t.withdrawal, t.key.clone(), Origin::Operator, who, now)
            .with_aliases(t.aliases.clone());
        async move { (*t, ledger.withdraw(&req).await) }
    }))
    .buffer_unordered(usize::from(concurrency));
    let mut answers: BTreeMap<NoticeKey, anyhow::Result<Answer>> = BTreeMap::new();
    // The ledger itself failing (unreachable, no credentials, denied) stops the run: every write
    // after it would fail the same way.
    let mut stopped = None;
    while let Some((t, result)) = results.next().await {
        bar.inc(1);
        let answer = result.map_err(anyhow::Error::from).and_then(|row| Answer::of(row.as_ref()));
        match answer {
            Err(e) if crate::failure::classify(&e).is_some() => {
                stopped = Some(e);
                break;
            }
            answer => answers.insert(t.key.clone(), answer),
        };
    }
    bar.finish_and_clear();
    drop(results);
    if let Some(e) = stopped {
        let withdrawn = answers.values().filter(|a| matches!(a, Ok(Answer::Withdrawn))).count();
        return Err(e.context(crate::failure::Done(format!(
            "{withdrawn} of {} withdrawn before it stopped; run the same command again, a withdraw is safe to repeat",
            to_write.len()
        ))));
    }
    Ok(answers)
}

/// The run's report, in file order: the census's answers for the keys not written, the writes'
/// for the rest, and the keys a write failed for.
fn report_done(
    file: &FileLines,
    rows: &BTreeMap<NoticeKey, LedgerRow>,
    mut answers: BTreeMap<NoticeKey, anyhow::Result<Answer>>,
    who: &str,
) -> ExitCode {
    let mut done = Counts::default();
    let mut changed = 0usize;
    let mut failed = Vec::new();
    for t in &file.targets {
        let row = rows.get(&t.key);
        match answers.remove(&t.key) {
            None => done.add(t, Answer::predicted(row), row.is_some()),
            Some(Ok(answer)) => {
                if answer != Answer::Withdrawn {
                    changed += 1;
                }
                done.add(t, answer, row.is_some());
            }
            Some(Err(e)) => failed.push((t.origin.clone(), t.key.prefix().to_owned(), format!("{e:#}"))),
        }
    }

    println!("withdraw done by {}:", escape(who));
    done.print("withdrawn", file.invalid.len(), file.repeated);
    if changed > 0 {
        println!("  {changed} key(s) changed between the census and the write: the counts above are the writes' answers");
    }
    done.print_too_late();
    if !failed.is_empty() {
        println!(
            "NOT withdrawn ({} — a ledger error; run the same command again, a withdraw is safe to repeat):",
            failed.len()
        );
        for (origin, prefix, error) in failed.iter().take(20) {
            println!("  {origin:<10} {prefix}  {}", escape(error));
        }
        if failed.len() > 20 {
            println!("  … and {} more", failed.len() - 20);
        }
        return Exit::Unusable.into();
    }
    if !file.invalid.is_empty() || !done.too_late.is_empty() {
        Exit::Attention.into()
    } else {
        Exit::Ok.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(body: &str) -> InputItem {
        crate::input::parse_items(body).remove(0)
    }

    #[test]
    fn a_withdraw_line_names_its_bad_field_and_takes_the_default_reason() {
        let ok = item(r#"{"subscription_id":"s","period_start":"2026-12-01","kind":"k"}"#);
        let w = parse_line(&ok, Some("cancelled")).unwrap();
        assert_eq!(w.reason.as_deref(), Some("cancelled"));
        let own = item(
            r#"{"action":"withdraw","subscription_id":"s","period_start":"2026-12-01","kind":"k","reason":"paused"}"#,
        );
        assert_eq!(parse_line(&own, Some("cancelled")).unwrap().reason.as_deref(), Some("paused"));
        for (body, field) in [
            (r#"{"action":"send","subscription_id":"s","period_start":"2026-12-01","kind":"k"}"#, "`action`"),
            (r#"{"action":7,"subscription_id":"s","period_start":"2026-12-01","kind":"k"}"#, "`action`"),
            (r#"{"subscription_id":"s","period_start":"Dec 1","kind":"k"}"#, "`period_start`"),
            (r#"{"period_start":"2026-12-01","kind":"k"}"#, "`subscription_id`"),
            (r#"[1,2]"#, "`body`"),
        ] {
            let problem = parse_line(&item(body), None).unwrap_err();
            assert!(problem.contains(field), "{body}: {problem}");
        }
        assert!(parse_line(&item("{not json"), None).unwrap_err().contains("line 1"));
    }
}
