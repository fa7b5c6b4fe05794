//! `noticectl validate FILE`: every job and withdraw in a file judged by the core's one admission,
//! exactly as the sender judges it — the message schema, the windows policy (known kinds,
//! required content), the window at `--now` (open, opens at T, closed: `missed`) and the templates,
//! rendered strictly — with the window each job gets and the policy field each side came from. It
//! touches no ledger, no outbox and no AWS: a producer's output can be checked before it is
//! enqueued, and each line's verdict is the one `send` would give it short of the ledger.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use chrono::{DateTime, SecondsFormat, Utc};
use notice_ledger::keyring::KeyRing;
use notice_ledger::policy::Side;
use notice_ledger::{Admitted, InvalidJob, NoticeSecret, Notices, Refused, WindowDecision};
use notice_setup::notices::ConfigSpec;
use serde::Serialize;

use super::windows::{hours_and_days, PolicyArg};
use crate::input::{read_items, InputItem};
use crate::notices_arg::ConfigArg;
use crate::terminal::escape;

#[derive(clap::Args, Debug)]
pub(crate) struct ValidateArgs {
    /// JSON Lines of job and withdraw bodies, a Lambda SQS event, or one pretty-printed message;
    /// `-` reads standard input.
    #[arg(value_name = "FILE")]
    input: PathBuf,
    #[command(flatten)]
    policy: PolicyArg,
    #[command(flatten)]
    config: ConfigArg,
    /// Judge the windows at this instant — YYYY-MM-DD (midnight UTC), YYYY-MM-DDTHH:MM (UTC) or
    /// RFC 3339 — as `send --now` does; default: now.
    #[arg(long, value_parser = crate::clock::parse_now)]
    now: Option<DateTime<Utc>>,
    /// Print one JSON object instead of a line per message.
    #[arg(long)]
    json: bool,
}

/// The window a valid job gets.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct WindowOf {
    opens_at: DateTime<Utc>,
    closes_at: DateTime<Utc>,
    opens_hours_before: u32,
    closes_hours_before: u32,
    /// The policy field that set each side.
    opens_from: String,
    closes_from: String,
}

/// One message's verdict.
#[derive(Clone, Debug, PartialEq, Serialize)]
struct Verdict {
    origin: String,
    line: usize,
    /// `ok` (its window is open), `deferred` (it opens later), `missed` (it closed: recorded,
    /// never sent), `invalid` or `render_failed` — the admission's verdict, as `send` prints it.
    status: &'static str,
    /// `send` or `withdraw` (`null` when the body is not readable as either).
    #[serde(skip_serializing_if = "Option::is_none")]
    action: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jurisdiction: Option<String>,
    /// For an invalid message: the field at fault and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<WindowOf>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
struct Summary {
    messages: usize,
    ok: usize,
    deferred: usize,
    missed: usize,
    invalid: usize,
    jobs: usize,
    withdraws: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct Report {
    source: String,
    policy: String,
    messages: Vec<Verdict>,
    summary: Summary,
}

/// Judges each item by the core's one admission, at one instant.
struct Checker {
    notices: Notices,
    now: DateTime<Utc>,
}

impl Checker {
    fn verdict(&self, item: &InputItem) -> Verdict {
        let mut v = Verdict {
            origin: item.origin.clone(),
            line: item.line,
            status: "ok",
            action: None,
            kind: None,
            jurisdiction: None,
            field: None,
            reason: None,
            window: None,
        };
        let judged = match &item.unreadable {
            Some(problem) => Err(Refused::from(InvalidJob::new("body", problem.clone()))),
            None => self.notices.admit(&item.body, self.now),
        };
        let job = match judged {
            Err(refused) => {
                v.kind = refused.identity.as_ref().map(|i| i.kind().as_str().to_owned());
                v.action =
                    refused.identity.as_ref().map(|_| if refused.withdraw { "withdraw" } else { "send" });
                v.status = refused.label();
                v.field = Some(refused.field());
                v.reason = Some(refused.reason().to_owned());
                return v;
            }
            Ok(Admitted::Withdraw(w)) => {
                v.action = Some("withdraw");
                v.kind = Some(w.identity.kind().as_str().to_owned());
                return v;
            }
            Ok(Admitted::Send(admitted)) => admitted,
        };
        let job_ = &job.job;
        v.action = Some("send");
        v.kind = Some(job_.identity.kind().as_str().to_owned());
        v.jurisdiction = job_.jurisdiction.clone();
        v.status = match job.window {
            WindowDecision::Send { .. } => "ok",
            WindowDecision::Defer { .. } => "deferred",
            WindowDecision::Missed { .. } => "missed",
        };
        let policy = &self.notices.policy;
        let e = policy.effective(Some(job_.identity.kind().as_str()), job_.jurisdiction.as_deref());
        v.window = Some(WindowOf {
            opens_at: e.window.opens_at(job_.charge_at),
            closes_at: e.window.closes_at(job_.charge_at),
            opens_hours_before: e.window.opens_hours_before,
            closes_hours_before: e.window.closes_hours_before,
            opens_from: e.opens_from.path(Side::Opens),
            closes_from: e.closes_from.path(Side::Closes),
        });
        v
    }
}

fn summarise(messages: &[Verdict]) -> Summary {
    let mut s = Summary { messages: messages.len(), ..Summary::default() };
    for m in messages {
        match m.status {
            "ok" | "deferred" | "missed" => {
                match m.status {
                    "deferred" => s.deferred += 1,
                    "missed" => s.missed += 1,
                    _ => s.ok += 1,
                }
                match m.action {
                    Some("withdraw") => s.withdraws += 1,
                    _ => s.jobs += 1,
                }
            }
            _ => s.invalid += 1,
        }
    }
    s
}

/// `7 messages: 5 ok (4 jobs, 1 withdraw), 2 invalid`, with `deferred` and `missed` named when
/// there are any (a deferred job is fine: it is sent when its window opens; a missed one never is).
fn summary_line(s: &Summary) -> String {
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut windows = String::new();
    for (n, what) in [(s.deferred, "deferred"), (s.missed, "missed")] {
        if n > 0 {
            windows.push_str(&format!(", {n} {what}"));
        }
    }
    format!(
        "{}: {} ok{windows} ({}, {}), {} invalid",
        plural(s.messages, "message", "messages"),
        s.ok,
        plural(s.jobs, "job", "jobs"),
        plural(s.withdraws, "withdraw", "withdraws"),
        s.invalid
    )
}

/// One line per message (two for a valid job: its window, then where each side came from), then
/// the summary.
fn render(r: &Report) -> String {
    let mut out = String::new();
    for m in &r.messages {
        let head = format!("{:<16} {:<13}", m.origin, m.status);
        match (&m.window, m.field, &m.reason) {
            (Some(w), _, _) => {
                let at = |t: &DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
                let what = [m.action.map(str::to_owned), m.kind.clone(), m.jurisdiction.clone()];
                let what: Vec<String> = what.into_iter().flatten().collect();
                out.push_str(&format!(
                    "{head} {} · window {} → {}\n{:<30} {} → {} before the charge, from {} and {}\n",
                    escape(&what.join(" ")),
                    at(&w.opens_at),
                    at(&w.closes_at),
                    "",
                    hours_and_days(w.opens_hours_before),
                    hours_and_days(w.closes_hours_before),
                    w.opens_from,
                    w.closes_from
                ));
            }
            (None, Some(field), Some(reason)) => {
                out.push_str(&format!("{head} field `{field}` {}\n", escape(reason)));
            }
            _ => {
                let what = [m.action, m.kind.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(" ");
                out.push_str(&format!("{head} {}\n", escape(&what)));
            }
        }
    }
    out.push_str(&summary_line(&r.summary));
    out.push('\n');
    out
}

pub(crate) fn run(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    // Keys only feed the manage link of a rendering: validation needs no real secret.
    let links = KeyRing::from(NoticeSecret::new("noticectl validate: keys are not shown")?);
    let (notices, policy_source) = match (&args.policy.file, &args.config.dir) {
        (Some(_), Some(_)) => anyhow::bail!(
            "--windows and --config both name a policy: a configuration directory carries its own \
             windows.json; give one of them"
        ),
        (Some(path), None) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("--windows {}", path.display()))?;
            let notices = crate::notices_arg::builtin_with_policy(&text, &links)
                .with_context(|| format!("--windows {}", path.display()))?;
            (notices, format!("--windows {} (the built-in texts)", path.display()))
        }
        (None, _) => {
            let source = if args.config.dir.is_none() && args.config.spec()? == ConfigSpec::Builtin {
                args.policy.load()?.1
            } else {
                args.config.describe()?
            };
            (args.config.notices(&links)?, source)
        }
    };
    let items = read_items(&args.input)?;
    let now = args.now.unwrap_or_else(Utc::now);
    let checker = Checker { notices, now };
    let messages: Vec<Verdict> = items.iter().map(|item| checker.verdict(item)).collect();
    let summary = summarise(&messages);
    let source = if args.input.as_os_str() == "-" {
        "standard input".to_owned()
    } else {
        args.input.display().to_string()
    };
    let report = Report { source, policy: policy_source, messages, summary };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        eprintln!(
            "noticectl: validating {} against {} at {} (no ledger, no outbox, no AWS calls)",
            report.source,
            report.policy,
            now.to_rfc3339_opts(SecondsFormat::Secs, true)
        );
        print!("{}", render(&report));
    }
    // What `send` lists as needing attention: a refused line, and a missed window.
    Ok(if report.summary.invalid > 0 || report.summary.missed > 0 {
        crate::exit::Exit::Attention.into()
    } else {
        crate::exit::Exit::Ok.into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_jobs_withdraws_and_invalid_lines() {
        let s = Summary { messages: 7, ok: 5, deferred: 0, missed: 0, invalid: 2, jobs: 4, withdraws: 1 };
        assert_eq!(summary_line(&s), "7 messages: 5 ok (4 jobs, 1 withdraw), 2 invalid");
        let one = Summary { messages: 1, ok: 1, deferred: 0, missed: 0, invalid: 0, jobs: 1, withdraws: 0 };
        assert_eq!(summary_line(&one), "1 message: 1 ok (1 job, 0 withdraws), 0 invalid");
        let later = Summary { messages: 4, ok: 1, deferred: 2, missed: 1, invalid: 0, jobs: 4, withdraws: 0 };
        assert_eq!(
            summary_line(&later),
            "4 messages: 1 ok, 2 deferred, 1 missed (4 jobs, 0 withdraws), 0 invalid"
        );
    }
}
