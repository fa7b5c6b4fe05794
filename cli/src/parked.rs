//! `noticectl enqueue` and `noticectl parked`: putting one job on the reminder queue — or, when its
//! window opens more than 12 h from now, straight into the same one-time schedule the sender
//! would make (named by the notice key, so a later park by the sender collapses into it) — and
//! looking at or cancelling parked jobs.

use std::process::ExitCode;

use chrono::Utc;
use notice_ledger::park::{ParkRequest, Parked, Parker};
use notice_ledger::retry::{self, Deferral};
use notice_ledger::{Job, NoticeKey, NoticeSecret, WindowDecision};
use notice_scheduler::{ParkedSchedule, SchedulerParker};

use crate::replay::confirm;

/// Where parked jobs live: the deployment's schedule group and the role Scheduler assumes.
#[derive(clap::Args, Debug)]
pub struct SchedulerArgs {
    /// EventBridge Scheduler group of parked jobs (the stack output `ParkedJobsGroupName`).
    #[arg(long, env = "NOTICE_SCHEDULE_GROUP")]
    pub schedule_group: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct EnqueueArgs {
    /// The job body (JSON), or @FILE to read it from a file.
    job: String,
    #[arg(long, env = "NOTICE_QUEUE_URL")]
    queue_url: String,
    #[command(flatten)]
    scheduler: SchedulerArgs,
    /// Role Scheduler assumes to put a parked job back on the queue (needed to park).
    #[arg(long, env = "NOTICE_SCHEDULER_ROLE_ARN")]
    scheduler_role_arn: Option<String>,
    /// Where Scheduler puts a parked job it could not deliver.
    #[arg(long, env = "NOTICE_SCHEDULE_DEAD_LETTER_ARN")]
    schedule_dead_letter_arn: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct ParkedArgs {
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
        /// The notice key (= the schedule name).
        key: String,
        /// Show what would be deleted, delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// Skip the confirmation prompt.
        #[arg(long)]
        yes: bool,
    },
}

async fn scheduler_client() -> aws_sdk_scheduler::Client {
    aws_sdk_scheduler::Client::new(&notice_setup::aws::load_sdk_config().await)
}

fn group(args: &SchedulerArgs) -> Result<&str, String> {
    args.schedule_group.as_deref().filter(|g| !g.trim().is_empty()).ok_or_else(|| {
        "no schedule group: pass --schedule-group or set NOTICE_SCHEDULE_GROUP (stack output ParkedJobsGroupName)"
            .to_owned()
    })
}

pub async fn enqueue(args: EnqueueArgs) -> Result<ExitCode, String> {
    let body = match args.job.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?,
        None => args.job.clone(),
    };
    // Refuse here what the sender would dead-letter later.
    let job = Job::parse(&body).map_err(|e| e.to_string())?;
    let body = job.to_value().to_string();
    let policy = notice_setup::config::windows_from_env().map_err(|e| e.to_string())?;
    let now = Utc::now();
    if let WindowDecision::Defer { until } = policy.decide(&job, now) {
        if let Deferral::Park { at } = retry::deferral(until, now) {
            match (&args.scheduler.schedule_group, &args.scheduler_role_arn) {
                (Some(group), Some(role)) => return park(&args, &job, &body, group, role, at).await,
                _ => eprintln!(
                    "noticectl: the window opens {until}; enqueueing (the sender parks it). Pass \
                     --schedule-group and --scheduler-role-arn to park it here."
                ),
            }
        }
    }
    let sqs = crate::queue::client().await;
    let out = sqs
        .send_message()
        .queue_url(&args.queue_url)
        .message_body(body)
        .send()
        .await
        .map_err(|e| format!("not enqueued: {}", aws_sdk_sqs::error::DisplayErrorContext(&e)))?;
    println!("enqueued {} (message {})", job.identity.key_material(), out.message_id().unwrap_or("?"));
    Ok(ExitCode::SUCCESS)
}

async fn park(
    args: &EnqueueArgs,
    job: &Job,
    body: &str,
    group: &str,
    role: &str,
    at: chrono::DateTime<Utc>,
) -> Result<ExitCode, String> {
    // The schedule is named by the notice key, so it must be the deployment's key: a local secret
    // would name a schedule the sender never finds, and the job would be parked twice.
    let secret = std::env::var("NOTICE_KEY_SECRET")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .ok_or("parking needs the deployment's NOTICE_KEY_SECRET: the schedule is named by the notice key")?;
    let secret = NoticeSecret::new(secret).map_err(|e| format!("NOTICE_KEY_SECRET: {e}"))?;
    let key = job.key(&secret);
    let sqs = crate::queue::client().await;
    let queue_arn = sqs
        .get_queue_attributes()
        .queue_url(&args.queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| format!("cannot read the queue's ARN: {}", aws_sdk_sqs::error::DisplayErrorContext(&e)))?
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn).cloned())
        .ok_or("the queue did not report its ARN")?;
    let parker = SchedulerParker::new(scheduler_client().await, group, role)
        .with_dead_letter(args.schedule_dead_letter_arn.clone());
    let request = ParkRequest { key: &key, at, body, queue_arn: &queue_arn, replay_batch: None };
    match parker.park(&request).await.map_err(|e| format!("not parked: {e}"))? {
        Parked::Scheduled => println!("parked {key} until {at} (schedule group {group})"),
        Parked::AlreadyParked { .. } => println!("already parked: {key} (schedule group {group})"),
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn run(args: ParkedArgs) -> Result<ExitCode, String> {
    let group = group(&args.scheduler)?;
    // Listing and cancelling pass no role: the parker's role is only used to create schedules.
    let parker = SchedulerParker::new(scheduler_client().await, group, "");
    match args.command {
        ParkedCommand::List { limit } => list(&parker, limit).await,
        ParkedCommand::Cancel { key, dry_run, yes } => cancel(&parker, &key, dry_run, yes).await,
    }
}

async fn list(parker: &SchedulerParker, limit: usize) -> Result<ExitCode, String> {
    let mut names = parker.list().await.map_err(|e| e.to_string())?;
    names.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    println!("{} parked job(s) in schedule group {}", names.len(), parker.group());
    for (name, _) in names.iter().take(limit) {
        match parker.get(name).await.map_err(|e| e.to_string())? {
            Some(s) => println!("{}", describe(&s)),
            None => println!("{name}  (fired or cancelled since the listing)"),
        }
    }
    if names.len() > limit {
        println!("… and {} more (raise --limit to see them)", names.len() - limit);
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(s: &ParkedSchedule) -> String {
    let notice = s
        .body
        .as_deref()
        .and_then(|b| Job::parse(b).ok())
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

async fn cancel(parker: &SchedulerParker, key: &str, dry_run: bool, yes: bool) -> Result<ExitCode, String> {
    let key = NoticeKey::parse(key).map_err(|e| e.to_string())?;
    let Some(schedule) = parker.get(key.as_str()).await.map_err(|e| e.to_string())? else {
        println!("{key}: nothing parked under this key in {}", parker.group());
        return Ok(ExitCode::from(1));
    };
    println!("would delete: {}", describe(&schedule));
    println!("this notice then never comes back to the queue, and is not sent unless enqueued again");
    if dry_run {
        println!("dry run: nothing deleted");
        return Ok(ExitCode::SUCCESS);
    }
    if !yes && !confirm("Delete this parked job?")? {
        println!("not deleted");
        return Ok(ExitCode::from(1));
    }
    if parker.cancel(key.as_str()).await.map_err(|e| e.to_string())? {
        println!("cancelled {key}");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{key}: already gone (fired or cancelled meanwhile)");
        Ok(ExitCode::from(1))
    }
}
