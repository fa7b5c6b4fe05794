//! `noticectl quarantine`: look at claims that never got their commit, and close them — by
//! evidence (`resolve --sent`) or by an explicit, audited release that allows a resend.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use chrono::Utc;
use notice_ledger::ledger::{LedgerRow, RowState};
use notice_ledger::NoticeKey;

use crate::ledger_target::LedgerTarget;
use crate::terminal::ask;

#[derive(clap::Args, Debug)]
pub(crate) struct QuarantineArgs {
    /// sqlite:PATH (default: <state-dir>/ledger.db) or dynamodb:TABLE.
    #[arg(long, env = "NOTICE_LEDGER_URL", global = true, hide_env_values = true)]
    ledger: Option<String>,
    #[command(subcommand)]
    command: QuarantineCommand,
}

#[derive(clap::Subcommand, Debug)]
enum QuarantineCommand {
    /// List open claims older than a cut-off (default NOTICE_STALE_AFTER_SECS, 15 min).
    List {
        /// Age, e.g. 900s, 15m, 2h, 1d.
        #[arg(long, value_parser = parse_age)]
        older_than: Option<Duration>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// One JSON object per claim instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Record that a quarantined claim was in fact sent (message id from the provider's logs).
    Resolve {
        key: String,
        /// The claim was sent (the only resolution this command records).
        #[arg(long, required = true)]
        sent: bool,
        #[arg(long)]
        message_id: String,
        /// Who is acting (default $USER).
        #[arg(long)]
        by: Option<String>,
    },
    /// Release a claim so the notice may be sent again. Only for claims you have established were
    /// never sent: the next redelivery or replay WILL send.
    Release {
        key: String,
        #[arg(long)]
        reason: String,
        /// Who is acting (default $USER).
        #[arg(long)]
        by: Option<String>,
        /// Skip the confirmation prompt.
        #[arg(long)]
        yes: bool,
        /// Show what would be released, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `900`, `900s`, `15m`, `2h`, `1d`.
fn parse_age(value: &str) -> Result<Duration, String> {
    let value = value.trim();
    let (digits, unit) = value.split_at(value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len()));
    let n: u64 = digits.parse().map_err(|_| format!("{value:?}: want a number with s, m, h or d"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => return Err(format!("{value:?}: unknown unit {unit:?} (use s, m, h or d)")),
    };
    Ok(Duration::from_secs(secs))
}

fn operator(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .unwrap_or_else(|| "unknown-operator".into())
}

pub(crate) async fn run(state_dir: PathBuf, args: QuarantineArgs) -> Result<ExitCode, String> {
    let target = LedgerTarget::resolve(args.ledger.as_deref(), &state_dir)?;
    let ledger = target.open().await?.ledger;
    match args.command {
        QuarantineCommand::List { older_than, limit, json } => {
            let age = match older_than {
                Some(age) => age,
                None => notice_setup::config::stale_after_from_env().map_err(|e| e.to_string())?,
            };
            let now = Utc::now();
            let cut = now - chrono::Duration::from_std(age).map_err(|e| e.to_string())?;
            let rows = ledger.open_claims(cut, limit).await.map_err(|e| e.to_string())?;
            for row in &rows {
                let age_s = row.claimed_at.map(|t| (now - t).num_seconds()).unwrap_or(0);
                if json {
                    println!(
                        "{}",
                        serde_json::json!({"notice_key": row.key.as_str(), "subscription_id": row.subscription_id,
                            "period_start": row.period_start, "kind": row.kind, "revision": row.revision,
                            "claimed_at": row.claimed_at.map(|t| t.to_rfc3339()), "age_seconds": age_s})
                    );
                } else {
                    println!(
                        "{}  {:<20} {:<10} {:<22} rev {:<3} claimed {} ({})",
                        row.key,
                        row.subscription_id,
                        row.period_start,
                        row.kind,
                        row.revision,
                        row.claimed_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
                        human_age(age_s)
                    );
                }
            }
            let (total, oldest) = ledger.count_open_claims(cut).await.map_err(|e| e.to_string())?;
            let shown = if total > rows.len() {
                format!(" (showing the oldest {}; raise --limit)", rows.len())
            } else {
                String::new()
            };
            let oldest = oldest
                .map(|t| format!(", oldest {} old", human_age((now - t).num_seconds())))
                .unwrap_or_default();
            eprintln!(
                "{total} quarantined claim(s) older than {}{oldest}{shown} in {}",
                human_age(age.as_secs() as i64),
                target.describe()
            );
            Ok(ExitCode::SUCCESS)
        }
        QuarantineCommand::Resolve { key, sent: _, message_id, by } => {
            let key = NoticeKey::parse(&key).map_err(|e| e.to_string())?;
            let who = operator(by);
            ledger
                .operator_resolve_sent(&key, &message_id, &who, Utc::now())
                .await
                .map_err(|e| format!("not resolved: {e}"))?;
            println!("resolved {key} as sent (message {message_id}) by {who}");
            Ok(ExitCode::SUCCESS)
        }
        QuarantineCommand::Release { key, reason, by, yes, dry_run } => {
            let key = NoticeKey::parse(&key).map_err(|e| e.to_string())?;
            if reason.trim().is_empty() {
                return Err("--reason must say why (it is recorded on the row)".into());
            }
            let row = ledger
                .get(&key)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("{key} has no ledger row"))?;
            if row.state != RowState::Claimed {
                return Err(format!(
                    "refusing: {key} is {}, not an open claim — only open claims can be released",
                    row.state
                ));
            }
            describe(&row);
            if dry_run {
                println!("dry run: would release {key}; nothing changed");
                return Ok(ExitCode::SUCCESS);
            }
            if !yes && !confirm(&key)? {
                println!("not released");
                return Ok(ExitCode::from(1));
            }
            let who = operator(by);
            ledger
                .operator_release(&key, &who, &reason, Utc::now())
                .await
                .map_err(|e| format!("not released: {e}"))?;
            println!("released {key} by {who}: {reason}\nThe next delivery of this notice will send it.");
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn describe(row: &LedgerRow) {
    println!(
        "claim {}\n  subscription {}  period {}  kind {}  revision {}\n  claimed at {}",
        row.key,
        row.subscription_id,
        row.period_start,
        row.kind,
        row.revision,
        row.claimed_at.map(|t| t.to_rfc3339()).unwrap_or_default()
    );
}

/// A release allows a resend, so the operator types the verb itself rather than `yes`.
fn confirm(key: &NoticeKey) -> Result<bool, String> {
    ask(
        &format!("Release {}? The notice may then be sent again. Type 'release' to confirm: ", key.prefix()),
        "release",
        "refusing to release without confirmation",
    )
}

fn human_age(secs: i64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse() {
        assert_eq!(parse_age("900").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_age("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_age("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_age("1d").unwrap(), Duration::from_secs(86_400));
        assert!(parse_age("15 minutes").is_err());
        assert!(parse_age("m").is_err());
    }
}
