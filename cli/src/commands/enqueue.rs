//! `noticectl enqueue`: put one job on the reminder queue — or, when the queue policy would park
//! it (its window opens more than 15 minutes from now), straight into the same one-time schedule the sender would make (named by the
//! notice key, so a later park by the sender collapses into it).

use std::process::ExitCode;

use anyhow::Context;
use chrono::Utc;
use notice_ledger::job::Withdrawal;
use notice_ledger::keyring::KeyRing;
use notice_ledger::park::{ParkRequest, Parked, Parker};
use notice_ledger::{Admitted, Job, NoticeSecret, Outcome, QueueAction, QueuePolicy, WindowDecision};
use notice_scheduler::SchedulerParker;

use super::scheduler::{self, SchedulerArgs};

use crate::exit::Exit;

#[derive(clap::Args, Debug)]
pub(crate) struct EnqueueArgs {
    /// The job body (JSON), or @FILE to read it from a file; a withdraw (`"action": "withdraw"`)
    /// is enqueued as it is.
    job: String,
    #[arg(long, env = "NOTICE_QUEUE_URL")]
    queue_url: String,
    #[command(flatten)]
    scheduler: SchedulerArgs,
    #[command(flatten)]
    config: crate::notices_arg::ConfigArg,
    /// Role Scheduler assumes to put a parked job back on the queue (needed to park).
    #[arg(long, env = "NOTICE_SCHEDULER_ROLE_ARN")]
    scheduler_role_arn: Option<String>,
    /// Where Scheduler puts a parked job it could not deliver.
    #[arg(long, env = "NOTICE_SCHEDULE_DEAD_LETTER_ARN")]
    schedule_dead_letter_arn: Option<String>,
}

pub(crate) async fn run(args: EnqueueArgs) -> anyhow::Result<ExitCode> {
    let body = match args.job.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).with_context(|| path.to_owned())?,
        None => args.job.clone(),
    };
    // Refuse here what the sender would refuse later, by the core's one admission under the
    // sender's configuration (the manage links play no part). A withdraw goes straight on the
    // queue: it has no window to wait for, and the sender writes its tombstone.
    let notices = args.config.notices(&KeyRing::from(NoticeSecret::new("noticectl enqueue: no links")?))?;
    let now = Utc::now();
    let admitted = match notices.admit(&body, now) {
        Ok(Admitted::Send(admitted)) => admitted,
        Ok(Admitted::Withdraw(withdrawal)) => return enqueue_withdraw(&args.queue_url, &withdrawal).await,
        Err(refused) => anyhow::bail!("not enqueued: {}: {refused}", refused.label()),
    };
    let job = &admitted.job;
    let body = job.to_value().to_string();
    if let WindowDecision::Missed { closed_at } = admitted.window {
        eprintln!(
            "noticectl: the window closed {closed_at}; enqueueing anyway — the sender records it `missed` and \
             never sends it"
        );
    }
    if let WindowDecision::Defer { until, closes_at } = admitted.window {
        let queue = QueuePolicy { parking: true, park_spread: notice_setup::config::park_spread_from_env()? };
        let deferred = Outcome::Deferred { until, closes_at };
        if let QueueAction::Park { .. } = queue.action_once(&deferred, now) {
            match (&args.scheduler.schedule_group, &args.scheduler_role_arn) {
                (Some(group), Some(role)) => {
                    let wake = Wake { queue, until, closes_at };
                    return park(&args, job, &body, group, role, wake).await;
                }
                _ => eprintln!(
                    "noticectl: the window opens {until}; enqueueing (the sender parks it). Pass \
                     --schedule-group and --scheduler-role-arn to park it here."
                ),
            }
        }
    }
    let message_id = send(&args.queue_url, &body).await?;
    println!("enqueued {} (message {message_id})", job.identity.key_material());
    Ok(Exit::Ok.into())
}

async fn enqueue_withdraw(queue_url: &str, withdrawal: &Withdrawal) -> anyhow::Result<ExitCode> {
    let message_id = send(queue_url, &withdrawal.to_value().to_string()).await?;
    println!("enqueued withdraw of {} (message {message_id})", withdrawal.identity.key_material());
    Ok(Exit::Ok.into())
}

/// One `SendMessage` of `body` to `queue_url`; the message id SQS gave it (`?` if none came back).
async fn send(queue_url: &str, body: &str) -> anyhow::Result<String> {
    let queue = notice_sqs::Producer::new(crate::queue::client().await, queue_url);
    let id = queue.send(notice_sqs::Message::body(body)).await.map_err(|e| {
        anyhow::Error::new(e).context(format!("not enqueued (SQS SendMessage to {queue_url})"))
    })?;
    Ok(if id.is_empty() { "?".to_owned() } else { id })
}

/// When a parked job wakes: the sender's park time for the same key (spread included).
struct Wake {
    queue: QueuePolicy,
    until: chrono::DateTime<Utc>,
    closes_at: chrono::DateTime<Utc>,
}

async fn park(
    args: &EnqueueArgs,
    job: &Job,
    body: &str,
    group: &str,
    role: &str,
    wake: Wake,
) -> anyhow::Result<ExitCode> {
    // The schedule is named by the notice key, so it must be the deployment's key: a local secret
    // would name a schedule the sender never finds, and the job would be parked twice.
    let need = "parking needs the deployment's NOTICE_KEY_SECRET or NOTICE_KEY_SECRET_ARN (the schedule is named by the notice key)";
    let sdk = notice_setup::aws::load_sdk_config().await;
    let secret = notice_setup::secret::resolve(&sdk)
        .await
        .context(need)?
        .with_context(|| format!("{need}: neither is set"))?;
    let key = secret.key(&job.identity);
    let at = wake.queue.park_time(wake.until, Some(wake.closes_at), Some(&key));
    let sqs = crate::queue::client().await;
    let queue_arn = sqs
        .get_queue_attributes()
        .queue_url(&args.queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| {
            anyhow::Error::new(notice_sqs::queue_error("GetQueueAttributes", &e))
                .context("cannot read the queue's ARN (SQS GetQueueAttributes)")
        })?
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn).cloned())
        .context("the queue did not report its ARN")?;
    let parker = SchedulerParker::new(scheduler::client().await, group, role)
        .with_dead_letter(args.schedule_dead_letter_arn.clone());
    let request = ParkRequest { key: &key, at, body, queue_arn: &queue_arn, replay_batch: None };
    match parker.park(&request).await.context("not parked")? {
        Parked::Scheduled => println!("parked {key} until {at} (schedule group {group})"),
        Parked::AlreadyParked { .. } => println!("already parked: {key} (schedule group {group})"),
    }
    Ok(Exit::Ok.into())
}
