//! `noticectl backfill`: record notices delivered before enforcement began as sent, so turning
//! enforcement on does not send them again. Never overwrites a row the ledger already has. Only
//! for notices known to be delivered: a backfilled row of an unsent notice means it is never sent.

use crate::ledger_target::LedgerArg;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use chrono::Utc;
use notice_ledger::ledger::{LedgerRow, Origin, RowState};
use notice_ledger::{Job, NoticeKey};

use super::census::census;
use crate::exit::Exit;
use crate::failure::Done;
use crate::terminal::progress;

#[derive(clap::Args, Debug)]
pub(crate) struct BackfillArgs {
    /// Jobs for notices already DELIVERED before enforcement began (not queued, not in flight).
    #[arg(long = "from")]
    from: PathBuf,
    #[command(flatten)]
    ledger: LedgerArg,
    #[command(flatten)]
    config: crate::notices_arg::ConfigArg,
    /// Only count what would be written.
    #[arg(long)]
    dry_run: bool,
}

pub(crate) async fn run(state_dir: PathBuf, args: BackfillArgs) -> anyhow::Result<ExitCode> {
    let (census, target, ledger) = census(&state_dir, &args.from, &args.ledger, &args.config).await?;
    census.print_summary(&target);
    if args.dry_run {
        println!(
            "dry run: would backfill {} row(s); nothing written ({} released row(s) are left to a replay)",
            census.new.len() - census.released_in_new,
            census.released_in_new
        );
        // A dry run exits as the real run would.
        return Ok(Exit::attention_if(!census.invalid.is_empty()).into());
    }
    let now = Utc::now();
    let bar = progress(census.new.len(), "backfilling");
    let (mut written, mut existing) = (0usize, 0usize);
    for (_, job, key) in &census.new {
        let row = backfill_row(job, key, now);
        let answer = ledger.backfill(&row).await.map_err(anyhow::Error::from).with_context(|| {
            Done(format!(
                "backfill stopped after {written} of {} row(s) written ({existing} already there); running it \
                 again is safe (it never overwrites)",
                census.new.len()
            ))
        })?;
        if answer {
            written += 1;
        } else {
            existing += 1;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let already: usize = census.in_ledger.values().sum::<usize>() + existing;
    println!("backfilled {written} row(s) as sent; {already} already in the ledger (left as they were)");
    if !census.invalid.is_empty() {
        let lines: Vec<&str> = census.invalid.iter().map(|(origin, _)| origin.as_str()).collect();
        println!(
            "needs attention: {} invalid line(s), not backfilled (see above): {}",
            lines.len(),
            lines.join(", ")
        );
    }
    Ok(Exit::attention_if(!census.invalid.is_empty()).into())
}

/// A `sent` row for a notice delivered before enforcement began. It carries the content digest so
/// a later job with other content for the same key is flagged as a payload conflict.
fn backfill_row(job: &Job, key: &NoticeKey, now: chrono::DateTime<Utc>) -> LedgerRow {
    LedgerRow {
        key: key.clone(),
        state: RowState::Sent,
        origin: Origin::Backfill,
        claim_token: None,
        subscription_id: job.identity.subscription_id().to_owned(),
        period_start: job.identity.period_start().format("%Y-%m-%d").to_string(),
        kind: job.identity.kind().as_str().to_owned(),
        revision: job.identity.revision(),
        content_digest: Some(job.content_digest()),
        claimed_at: None,
        on_quarantine_view: false,
        updated_at: now,
        message_id: None,
        detail: Some("backfilled: delivered before enforcement".into()),
        delivery_status: None,
        duplicate_message_ids: Vec::new(),
        charge_at: Some(job.charge_at),
        jurisdiction: job.jurisdiction.clone(),
        rendered: None,
        obligation: None,
    }
}
