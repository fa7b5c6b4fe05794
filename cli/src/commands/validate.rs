//! `noticectl validate FILE`: every job and withdraw in a file checked exactly as the sender checks
//! it — the message schema, the windows policy (known kinds, required content) and the templates —
//! with the window each valid job gets and the policy field each side came from. It touches no
//! ledger, no outbox and no AWS: a producer's output can be checked before it is enqueued.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use chrono::{DateTime, SecondsFormat, Utc};
use notice_ledger::job::Message;
use notice_ledger::policy::Side;
use notice_ledger::render::Renderer;
use notice_ledger::{InvalidJob, NoticeSecret, WindowPolicy};
use serde::Serialize;

use super::windows::{hours_and_days, PolicyArg};
use crate::input::{read_items, InputItem};
use crate::terminal::escape;

#[derive(clap::Args, Debug)]
pub(crate) struct ValidateArgs {
    /// JSON Lines of job and withdraw bodies, a Lambda SQS event, or one pretty-printed message;
    /// `-` reads standard input.
    #[arg(value_name = "FILE")]
    input: PathBuf,
    #[command(flatten)]
    policy: PolicyArg,
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
    /// `ok` or `invalid`.
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

/// Checks each item as the sender would, short of the ledger: parse, policy, render.
struct Checker {
    policy: WindowPolicy,
    renderer: Arc<Renderer>,
    /// Keys only feed the render (the manage link); validation needs no real secret.
    secret: NoticeSecret,
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
        let message = match &item.unreadable {
            Some(problem) => Err(InvalidJob::new("body", problem.clone())),
            None => Message::parse(&item.body),
        };
        let message = match message {
            Ok(m) => m,
            Err(e) => return invalid(v, e),
        };
        v.kind = Some(message.identity().kind().as_str().to_owned());
        let job = match message {
            Message::Withdraw(w) => {
                v.action = Some("withdraw");
                return match self.policy.check_kind(w.identity.kind().as_str()) {
                    Ok(()) => v,
                    Err(e) => invalid(v, e.into()),
                };
            }
            Message::Send(job) => job,
        };
        v.action = Some("send");
        v.jurisdiction = job.jurisdiction.clone();
        if let Err(refusal) = self.policy.admit(&job, || self.renderer.variables(&job)) {
            return invalid(v, refusal.into());
        }
        if let Err(e) = self.renderer.render(&job, &job.key(&self.secret)) {
            return invalid(v, InvalidJob::new("template_data", e.to_string()));
        }
        let e = self.policy.effective(Some(job.identity.kind().as_str()), job.jurisdiction.as_deref());
        v.window = Some(WindowOf {
            opens_at: e.window.opens_at(job.charge_at),
            closes_at: e.window.closes_at(job.charge_at),
            opens_hours_before: e.window.opens_hours_before,
            closes_hours_before: e.window.closes_hours_before,
            opens_from: e.opens_from.path(Side::Opens),
            closes_from: e.closes_from.path(Side::Closes),
        });
        v
    }
}

fn invalid(mut v: Verdict, e: InvalidJob) -> Verdict {
    v.status = "invalid";
    v.field = Some(e.field);
    v.reason = Some(e.reason);
    v
}

fn summarise(messages: &[Verdict]) -> Summary {
    let mut s = Summary { messages: messages.len(), ..Summary::default() };
    for m in messages {
        if m.status == "ok" {
            s.ok += 1;
            match m.action {
                Some("withdraw") => s.withdraws += 1,
                _ => s.jobs += 1,
            }
        } else {
            s.invalid += 1;
        }
    }
    s
}

/// `7 message(s): 5 ok (4 jobs, 1 withdraw), 2 invalid`.
fn summary_line(s: &Summary) -> String {
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{}: {} ok ({}, {}), {} invalid",
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
        let head = format!("{:<16} {:<8}", m.origin, m.status);
        match (&m.window, m.field, &m.reason) {
            (Some(w), _, _) => {
                let at = |t: &DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
                let what = [m.action.map(str::to_owned), m.kind.clone(), m.jurisdiction.clone()];
                let what: Vec<String> = what.into_iter().flatten().collect();
                out.push_str(&format!(
                    "{head} {} · window {} → {}\n{:<25} {} → {} before the charge, from {} and {}\n",
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
    let (policy, policy_source) = args.policy.load()?;
    let items = read_items(&args.input)?;
    let secret = NoticeSecret::new("noticectl validate: keys are not shown")?;
    let (renderer, _) = notice_setup::notices::notices_from_env(&secret.clone().into())?;
    let checker = Checker { policy, renderer, secret };
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
            "noticectl: validating {} against the policy from {} (no ledger, no outbox, no AWS calls)",
            report.source, report.policy
        );
        print!("{}", render(&report));
    }
    Ok(if report.summary.invalid > 0 {
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
        let s = Summary { messages: 7, ok: 5, invalid: 2, jobs: 4, withdraws: 1 };
        assert_eq!(summary_line(&s), "7 messages: 5 ok (4 jobs, 1 withdraw), 2 invalid");
        let one = Summary { messages: 1, ok: 1, invalid: 0, jobs: 1, withdraws: 0 };
        assert_eq!(summary_line(&one), "1 message: 1 ok (1 job, 0 withdraws), 0 invalid");
    }
}
