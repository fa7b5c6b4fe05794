//! `noticectl windows`: the effective send window of every configured kind in every configured
//! jurisdiction, worked out exactly as the sender does ([`WindowPolicy::effective`]), with the
//! configuration field each side came from — so a policy can be reviewed before it is deployed.
//! No ledger, no AWS calls.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use chrono::{DateTime, Utc};
use notice_ledger::jurisdiction;
use notice_ledger::policy::{Effective, OtherKinds, Side};
use notice_ledger::{Kind, WindowPolicy};
use serde::Serialize;

use crate::exit::Exit;
use crate::terminal::{escape, table};

#[derive(clap::Args, Debug)]
pub(crate) struct WindowsArgs {
    #[command(flatten)]
    policy: PolicyArg,
    #[command(flatten)]
    config: crate::notices_arg::ConfigArg,
    /// Only this kind (repeatable); default: every kind the policy names, then "other kinds".
    #[arg(long = "kind", value_name = "KIND")]
    kinds: Vec<String>,
    /// Only this jurisdiction (repeatable); default: none, then every jurisdiction the policy bounds.
    #[arg(long = "jurisdiction", value_name = "J")]
    jurisdictions: Vec<String>,
    /// Also give each window as instants, for a charge at this time (RFC 3339).
    #[arg(long, value_name = "TIME")]
    charge_at: Option<String>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// `--windows FILE`, declared once for the commands that judge notices by the policy.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct PolicyArg {
    /// The send-window policy (JSON, as a configuration's windows.json holds it); default: the
    /// windows.json of the configuration directory in NOTICE_CONFIG, else NOTICE_WINDOWS, then
    /// NOTICE_WINDOWS_FILE, else the built-in window (opens 72 h, closes 24 h before the charge).
    #[arg(long = "windows", value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
}

impl PolicyArg {
    /// The policy, checked as the sender checks it at start-up, and where it came from.
    pub(crate) fn load(&self) -> anyhow::Result<(WindowPolicy, String)> {
        if let Some(path) = &self.file {
            return Ok((read_policy(path)?, format!("--windows {}", path.display())));
        }
        let spec = notice_setup::notices::ConfigSpec::from_env()?;
        let source = if spec != notice_setup::notices::ConfigSpec::Builtin {
            format!("the windows.json of {} (NOTICE_CONFIG)", spec.describe())
        } else if std::env::var_os("NOTICE_WINDOWS").is_some() {
            "NOTICE_WINDOWS".to_owned()
        } else if let Some(path) = std::env::var_os("NOTICE_WINDOWS_FILE") {
            format!("NOTICE_WINDOWS_FILE ({})", Path::new(&path).display())
        } else {
            "the built-in default (NOTICE_WINDOWS unset)".to_owned()
        };
        Ok((notice_setup::notices::windows_from_env()?, source))
    }
}

fn read_policy(path: &Path) -> anyhow::Result<WindowPolicy> {
    let text = std::fs::read_to_string(path).with_context(|| format!("--windows {}", path.display()))?;
    WindowPolicy::from_json(&text).with_context(|| format!("--windows {}", path.display()))
}

/// One (kind, jurisdiction) row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct WindowView {
    /// `null`: a kind the policy does not list (it gets `default`).
    pub(crate) kind: Option<String>,
    /// `null`: a job without a jurisdiction (or with one the policy does not bound).
    pub(crate) jurisdiction: Option<String>,
    pub(crate) opens_hours_before: u32,
    pub(crate) closes_hours_before: u32,
    pub(crate) opens_days_before: f64,
    pub(crate) closes_days_before: f64,
    /// The configuration field that set each side.
    pub(crate) opens_from: String,
    pub(crate) closes_from: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) opens_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) closes_at: Option<DateTime<Utc>>,
}

impl WindowView {
    pub(crate) fn new(
        kind: Option<&str>,
        jurisdiction: Option<&str>,
        e: &Effective<'_>,
        charge_at: Option<DateTime<Utc>>,
    ) -> Self {
        let w = e.window;
        Self {
            kind: kind.map(str::to_owned),
            jurisdiction: jurisdiction.map(str::to_owned),
            opens_hours_before: w.opens_hours_before,
            closes_hours_before: w.closes_hours_before,
            opens_days_before: f64::from(w.opens_hours_before) / 24.0,
            closes_days_before: f64::from(w.closes_hours_before) / 24.0,
            opens_from: e.opens_from.path(Side::Opens),
            closes_from: e.closes_from.path(Side::Closes),
            opens_at: charge_at.map(|c| w.opens_at(c)),
            closes_at: charge_at.map(|c| w.closes_at(c)),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct Note {
    path: String,
    description: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct WindowsReport {
    source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    charge_at: Option<DateTime<Utc>>,
    windows: Vec<WindowView>,
    /// What a job of a kind the policy does not list gets.
    other_kinds: &'static str,
    notes: Vec<Note>,
}

/// `1080 h (45 d)`, `60 h (2.5 d)`.
pub(crate) fn hours_and_days(hours: u32) -> String {
    if hours.is_multiple_of(24) {
        format!("{hours} h ({} d)", hours / 24)
    } else {
        format!("{hours} h ({:.1} d)", f64::from(hours) / 24.0)
    }
}

fn render(r: &WindowsReport) -> String {
    let mut out = format!("send windows from {}, before the charge (no ledger, no AWS calls)\n\n", r.source);
    let with_instants = r.charge_at.is_some();
    let mut header = vec!["kind", "jurisdiction", "opens", "closes"];
    if with_instants {
        header.extend(["opens at", "closes at"]);
    }
    header.extend(["opens from", "closes from"]);
    let rows: Vec<Vec<String>> = r
        .windows
        .iter()
        .map(|w| {
            let mut cells = vec![
                w.kind.clone().unwrap_or_else(|| "(other kinds)".to_owned()),
                w.jurisdiction.clone().unwrap_or_else(|| "(none)".to_owned()),
                hours_and_days(w.opens_hours_before),
                hours_and_days(w.closes_hours_before),
            ];
            if with_instants {
                let instant = |t: Option<DateTime<Utc>>| t.map_or_else(|| "-".to_owned(), |t| t.to_rfc3339());
                cells.extend([instant(w.opens_at), instant(w.closes_at)]);
            }
            cells.extend([w.opens_from.clone(), w.closes_from.clone()]);
            cells
        })
        .collect();
    out.push_str(&table(&header, &rows));
    if let Some(c) = r.charge_at {
        out.push_str(&format!(
            "\ninstants for a charge at {}; opens inclusive, closes exclusive\n",
            c.to_rfc3339()
        ));
    }
    out.push_str(&format!("\nother kinds: {}\n", r.other_kinds));
    if !r.notes.is_empty() {
        out.push_str("\nnotes in the policy:\n");
        for n in &r.notes {
            let at = if n.path.is_empty() { "(top)" } else { n.path.as_str() };
            out.push_str(&format!("  {at}: {}\n", escape(&n.description)));
        }
    }
    out
}

/// The policy `--windows` or `--config` names (else the environment's), and where it came from:
/// what `windows` and `obligations` review.
pub(crate) fn policy_of(
    policy: &PolicyArg,
    config: &crate::notices_arg::ConfigArg,
) -> anyhow::Result<(WindowPolicy, String)> {
    match (&policy.file, &config.dir) {
        (Some(_), Some(_)) => anyhow::bail!(
            "--windows and --config both name a policy: a configuration directory carries its own \
             windows.json; give one of them"
        ),
        (None, Some(_)) => {
            let links = notice_ledger::NoticeSecret::new("noticectl windows: no links")?;
            Ok((config.notices(&links.into())?.policy, format!("the windows.json of {}", config.describe()?)))
        }
        _ => policy.load(),
    }
}

pub(crate) fn run(args: WindowsArgs) -> anyhow::Result<ExitCode> {
    let (policy, source) = policy_of(&args.policy, &args.config)?;
    let charge_at = args
        .charge_at
        .as_deref()
        .map(|t| {
            DateTime::parse_from_rfc3339(t)
                .map(|t| t.with_timezone(&Utc))
                .with_context(|| format!("--charge-at {t:?} is not an RFC 3339 time"))
        })
        .transpose()?;
    for k in &args.kinds {
        Kind::parse(k).with_context(|| format!("--kind {k:?}"))?;
    }
    let refuses_others = policy.other_kinds() == OtherKinds::Refuse;
    for k in &args.kinds {
        policy.check_kind(k).with_context(|| format!("--kind {k:?}: the sender refuses this kind"))?;
    }
    let kinds: Vec<Option<&str>> = if args.kinds.is_empty() {
        // "Other kinds" only where the policy gives them a window: otherwise they are refused.
        let others = (!refuses_others).then_some(None);
        policy.kinds().into_iter().map(Some).chain(others).collect()
    } else {
        args.kinds.iter().map(|k| Some(k.as_str())).collect()
    };
    // As jobs are read: any case, kept in upper case; anything else is not a jurisdiction.
    let requested: Vec<String> = args
        .jurisdictions
        .iter()
        .map(|j| jurisdiction::normalise(j).with_context(|| format!("--jurisdiction {j:?}")))
        .collect::<anyhow::Result<_>>()?;
    let jurisdictions: Vec<Option<&str>> = if requested.is_empty() {
        std::iter::once(None).chain(policy.jurisdictions().into_iter().map(Some)).collect()
    } else {
        requested.iter().map(|j| Some(j.as_str())).collect()
    };
    let mut windows = Vec::new();
    for kind in &kinds {
        for j in &jurisdictions {
            windows.push(WindowView::new(*kind, *j, &policy.effective(*kind, *j), charge_at));
        }
    }
    let notes = policy
        .descriptions()
        .iter()
        .map(|(path, description)| Note { path: path.clone(), description: description.clone() })
        .collect();
    let other_kinds = if refuses_others {
        "refused as invalid: the policy lists its kinds (\"other_kinds\": \"default\" gives them `default`)"
    } else {
        "the `default` window"
    };
    let report = WindowsReport { source, charge_at, windows, other_kinds, notes };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(Exit::Ok.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_read_as_days_too() {
        assert_eq!(hours_and_days(1080), "1080 h (45 d)");
        assert_eq!(hours_and_days(60), "60 h (2.5 d)");
        assert_eq!(hours_and_days(0), "0 h (0 d)");
    }
}
