//! `noticectl parked`: look at or cancel jobs parked in EventBridge Scheduler until their window
//! opens (by the sender or by `enqueue`).

use std::process::ExitCode;

use notice_ledger::Job;
use notice_scheduler::{ParkedSchedule, SchedulerParker};

use super::scheduler::{self, SchedulerArgs};
use crate::exit::Exit;
use crate::key_arg::KeyArg;
use crate::terminal::confirm;

#[derive(clap::Args, Debug)]
pub(crate) struct ParkedArgs {
    #[command(flatten)]
    scheduler: SchedulerArgs,
    #[command(subcommand)]
    command: ParkedCommand,
}

#[derive(clap::Subcommand, Debug)]
enum ParkedCommand {
    /// List parked jobs: key, when it returns to the queue, where to.
    List {
        /// Read the details (fire time, target) of at most this many; all are counted.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Delete one parked job: it will not come back to the queue (and is not sent) unless enqueued again.
    Cancel {
        /// The notice key (= the schedule name), or a unique prefix of at least 12 hex characters
        /// with or without its `vN-`.
        #[arg(value_parser = KeyArg::parse)]
        key: KeyArg,
        /// Show what would be deleted, delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// Skip the confirmation prompt.
        #[arg(long)]
        yes: bool,
    },
}

pub(crate) async fn run(args: ParkedArgs) -> anyhow::Result<ExitCode> {
    let group = scheduler::group(&args.scheduler)?;
    // Listing and cancelling pass no role: the parker's role is only used to create schedules.
    let parker = SchedulerParker::new(scheduler::client().await, group, "");
    match args.command {
        ParkedCommand::List { limit } => list(&parker, limit).await,
        ParkedCommand::Cancel { key, dry_run, yes } => cancel(&parker, &key, dry_run, yes).await,
    }
}

async fn list(parker: &SchedulerParker, limit: usize) -> anyhow::Result<ExitCode> {
    let mut names = parker.list().await?;
    names.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    println!("{} parked job(s) in schedule group {}", names.len(), parker.group());
    for (name, _) in names.iter().take(limit) {
        match parker.get(name).await? {
            Some(s) => println!("{}", describe(&s)),
            None => println!("{name}  (fired or cancelled since the listing)"),
        }
    }
    if names.len() > limit {
        println!("… and {} more (raise --limit to see them)", names.len() - limit);
    }
    Ok(Exit::Ok.into())
}

fn describe(s: &ParkedSchedule) -> String {
    let notice = s
        .body
        .as_deref()
        .and_then(|b| Job::parse(b, &notice_texts::Icu).ok())
        .map(|j| j.identity.key_material())
        .unwrap_or_else(|| "(unreadable body)".into());
    format!(
        "{}  fires {}  → {}  {}",
        s.name,
        s.expression.as_deref().unwrap_or("?"),
        s.target_arn.as_deref().unwrap_or("?"),
        notice
    )
}

async fn cancel(
    parker: &SchedulerParker,
    key: &KeyArg,
    dry_run: bool,
    yes: bool,
) -> anyhow::Result<ExitCode> {
    let key = match key.full() {
        Some(key) => key.clone(),
        None => {
            let names = parker.list().await?;
            key.resolve(names.iter().map(|(name, _)| name), &format!("parked job in {}", parker.group()))?
        }
    };
    let Some(schedule) = parker.get(key.as_str()).await? else {
        println!("{key}: nothing parked under this key in {}", parker.group());
        return Ok(Exit::Attention.into());
    };
    println!("would delete: {}", describe(&schedule));
    println!("this notice then never comes back to the queue, and is not sent unless enqueued again");
    if dry_run {
        println!("dry run: nothing deleted");
        return Ok(Exit::Ok.into());
    }
    if !yes && !confirm("Delete this parked job?")? {
        println!("not deleted");
        return Ok(Exit::SafetyStop.into());
    }
    if parker.cancel(key.as_str()).await? {
        println!("cancelled {key}");
        Ok(Exit::Ok.into())
    } else {
        println!("{key}: already gone (fired or cancelled meanwhile)");
        Ok(Exit::Attention.into())
    }
}
