//! The deployment's EventBridge Scheduler group of parked jobs, shared by `enqueue` (which parks
//! into it) and `parked` (which lists and cancels what is in it).

/// Where parked jobs live: the deployment's schedule group and the role Scheduler assumes.
#[derive(clap::Args, Debug)]
pub(super) struct SchedulerArgs {
    /// EventBridge Scheduler group of parked jobs (the stack output `ParkedJobsGroupName`).
    /// Global: `parked list --schedule-group G` and `parked --schedule-group G list` both work.
    #[arg(long, env = "NOTICE_SCHEDULE_GROUP", global = true)]
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    /// The order an operator types first (the subcommand, then its flags) is accepted, and so is
    /// the group before the subcommand.
    #[test]
    fn the_group_goes_before_or_after_the_subcommand() {
        for args in [
            ["noticectl", "parked", "list", "--schedule-group", "g"],
            ["noticectl", "parked", "--schedule-group", "g", "list"],
        ] {
            let parsed = crate::Cli::try_parse_from(args);
            assert!(parsed.is_ok(), "{args:?}: {:?}", parsed.err());
        }
    }
}
