//! The deployment's EventBridge Scheduler group of parked jobs, shared by `enqueue` (which parks
//! into it) and `parked` (which lists and cancels what is in it).

/// Where parked jobs live: the deployment's schedule group and the role Scheduler assumes.
#[derive(clap::Args, Debug)]
pub(super) struct SchedulerArgs {
    /// EventBridge Scheduler group of parked jobs (the stack output `ParkedJobsGroupName`).
    #[arg(long, env = "NOTICE_SCHEDULE_GROUP")]
    pub(super) schedule_group: Option<String>,
}

pub(super) async fn client() -> aws_sdk_scheduler::Client {
    aws_sdk_scheduler::Client::new(&notice_setup::aws::load_sdk_config().await)
}

/// The group, or an error that says where to find it: an empty name would list nothing.
pub(super) fn group(args: &SchedulerArgs) -> anyhow::Result<&str> {
    args.schedule_group.as_deref().filter(|g| !g.trim().is_empty()).ok_or_else(|| {
        anyhow::anyhow!(
            "no schedule group: pass --schedule-group or set NOTICE_SCHEDULE_GROUP (stack output ParkedJobsGroupName)"
        )
    })
}
