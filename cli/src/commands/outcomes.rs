//! `noticectl outcomes republish`: put the outcome events of the ledger's rows written in a time
//! range back on the business's EventBridge bus — after a publish failure (`OutcomePublishFailed`),
//! a bus that was down, or a new consumer that needs the history. The ledger is the source of
//! truth; the events are rebuilt from its rows ([`OutcomeEvent::from_row`], `published_by:
//! "ledger"`), so consumers that dedupe on `notice_key` + `outcome` see each outcome once.
//!
//! The range is read first and counted by outcome (`--dry-run` stops there); the publish asks
//! for confirmation unless `--yes`. On DynamoDB the read is a filtered `Scan` of the whole table
//! (read capacity in proportion to the table): take a range at a time. A `withdraw_too_late`
//! leaves no row of its own and cannot be re-published.
//!
//! Exit codes (docs/operations.md): 0 done (or dry run), 1 some events not published (listed),
//! 2 usage, ledger or bus unreachable (nothing published), 3 confirmation refused.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use notice_ledger::outcomes::{publish_bounded, OutcomeEvent, OutcomeKind, OutcomePublisher};

use crate::clock::parse_now;
use crate::exit::Exit;
use crate::ledger_target::LedgerArg;
use crate::terminal::{confirm, escape, progress, table};

/// Rows asked for per ledger page.
const PAGE: usize = 500;
/// Events per publish: one `PutEvents` call.
const CHUNK: usize = 10;
/// One chunk's publish budget, retry included (an operator waits longer than a Lambda).
const CHUNK_BUDGET: Duration = Duration::from_secs(10);

#[derive(clap::Args, Debug)]
pub(crate) struct OutcomesArgs {
    #[command(subcommand)]
    command: OutcomesCommand,
}

#[derive(clap::Subcommand, Debug)]
enum OutcomesCommand {
    /// Re-publish the outcome events of the rows written in [--since, --until): counts by outcome,
    /// then (unless --dry-run) the events onto --bus after confirmation.
    Republish(RepublishArgs),
}

#[derive(clap::Args, Debug)]
struct RepublishArgs {
    /// Start of the range (rows last written at or after it): YYYY-MM-DD, YYYY-MM-DDTHH:MM (UTC) or RFC 3339.
    #[arg(long, value_parser = parse_now)]
    since: DateTime<Utc>,
    /// End of the range, exclusive (default: now).
    #[arg(long, value_parser = parse_now)]
    until: Option<DateTime<Utc>>,
    #[command(flatten)]
    ledger: LedgerArg,
    /// The EventBridge bus (name or ARN); required unless --dry-run.
    #[arg(long, env = "NOTICE_OUTCOME_BUS")]
    bus: Option<String>,
    /// Only read and count: publish nothing.
    #[arg(long)]
    dry_run: bool,
    /// Skip the confirmation prompt.
    #[arg(long)]
    yes: bool,
}

pub(crate) async fn run(state_dir: PathBuf, args: OutcomesArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        OutcomesCommand::Republish(args) => republish(state_dir, args).await,
    }
}

async fn republish(state_dir: PathBuf, args: RepublishArgs) -> anyhow::Result<ExitCode> {
    let until = args.until.unwrap_or_else(Utc::now);
    if args.since >= until {
        bail!("--since ({}) must be before --until ({})", args.since.to_rfc3339(), until.to_rfc3339());
    }
    let target = args.ledger.target(&state_dir)?;
    let ledger = target.open().await?.ledger;
    let (rows, events) = read_range(ledger.as_ref(), args.since, until).await?;
    println!(
        "{} row(s) written in [{}, {}) in {}: {} outcome event(s)",
        rows,
        args.since.to_rfc3339(),
        until.to_rfc3339(),
        target.describe(),
        events.len()
    );
    print!("{}", counts_table(&events));
    if args.dry_run {
        println!("dry run: nothing published");
        return Ok(Exit::Ok.into());
    }
    if events.is_empty() {
        println!("nothing to publish");
        return Ok(Exit::Ok.into());
    }
    let bus = args.bus.context("--bus (or NOTICE_OUTCOME_BUS) is required to publish")?;
    if !args.yes && !confirm(&format!("Publish {} outcome event(s) to the bus {bus}?", events.len()))? {
        println!("nothing published");
        return Ok(Exit::SafetyStop.into());
    }
    let sdk = notice_setup::aws::load_sdk_config().await;
    let publisher = notice_setup::aws::eventbridge_publisher(&sdk, &bus)?;
    let total = events.len();
    let (published, failed) = publish_all(&publisher, events).await;
    if published == 0 {
        let first = failed.first().map(|(_, _, e)| e.as_str()).unwrap_or("no answer");
        bail!("EventBridge bus {bus}: nothing published ({total} event(s) failed; first: {first})");
    }
    println!("published {published} of {total} outcome event(s) to {bus}");
    if !failed.is_empty() {
        println!(
            "needs attention: {} event(s) NOT published (run the command again for this range):",
            failed.len()
        );
        for (key, outcome, error) in &failed {
            println!("  {} {outcome}: {}", &key[..key.len().min(12)], escape(error));
        }
    }
    Ok(Exit::attention_if(!failed.is_empty()).into())
}

/// Every row written in the range, page by page (a progress line per page on a terminal): how
/// many rows, and the events they stand for.
async fn read_range(
    ledger: &dyn notice_ledger::ledger::Ledger,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> anyhow::Result<(usize, Vec<OutcomeEvent>)> {
    let bar = progress(0, "reading the ledger");
    let mut cursor: Option<String> = None;
    let mut rows = 0usize;
    let mut events = Vec::new();
    loop {
        let page = ledger.rows_updated_between(since, until, cursor.as_deref(), PAGE).await?;
        rows += page.rows.len();
        bar.inc_length(page.rows.len() as u64);
        bar.inc(page.rows.len() as u64);
        events.extend(page.rows.iter().flat_map(OutcomeEvent::from_row));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    bar.finish_and_clear();
    Ok((rows, events))
}

/// Counts by outcome, every outcome listed (zeros too: a dry run shows what the range holds).
fn counts_table(events: &[OutcomeEvent]) -> String {
    let mut counts: BTreeMap<OutcomeKind, usize> = OutcomeKind::ALL.iter().map(|k| (*k, 0)).collect();
    for e in events {
        *counts.entry(e.outcome).or_default() += 1;
    }
    let rows: Vec<Vec<String>> = counts
        .iter()
        .filter(|(k, _)| **k != OutcomeKind::WithdrawTooLate)
        .map(|(k, n)| vec![k.as_str().to_owned(), n.to_string()])
        .collect();
    table(&["outcome", "events"], &rows)
}

/// Publishes `events` ten at a time with a progress bar: (published, failures as key, outcome,
/// error).
async fn publish_all(
    publisher: &dyn OutcomePublisher,
    events: Vec<OutcomeEvent>,
) -> (usize, Vec<(String, String, String)>) {
    let bar = progress(events.len(), "publishing");
    let mut published = 0;
    let mut failed = Vec::new();
    let mut events = events.into_iter().peekable();
    while events.peek().is_some() {
        let chunk: Vec<OutcomeEvent> = events.by_ref().take(CHUNK).collect();
        let n = chunk.len() as u64;
        let report = publish_bounded(publisher, chunk, CHUNK_BUDGET).await;
        published += report.published;
        failed.extend(
            report
                .failed
                .into_iter()
                .map(|(e, err)| (e.notice_key, e.outcome.as_str().to_owned(), err.to_string())),
        );
        bar.inc(n);
    }
    bar.finish_and_clear();
    (published, failed)
}
