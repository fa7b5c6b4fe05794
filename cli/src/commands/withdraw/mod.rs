//! `noticectl withdraw`: the operator's door to the withdraw message — a `withdrawn` tombstone
//! for one notice (`--subscription-id … --period-start … --kind …`) or for a file of them
//! (`--from FILE`), so that no copy of the job still queued, parked or replayed is ever sent.
//!
//! Every key is read first and the plan printed (would withdraw / already withdrawn / too late /
//! not needed); `--dry-run` stops there. The write is the sender's own conditional write
//! ([`ClaimLedger::withdraw`]): where the row changed between the read and the write, the write's
//! answer is the one reported. A notice already claimed or sent cannot be withdrawn — it went out
//! or may have — and the operator is told so with exit 1, so the producer can be told.
//!
//! [`ClaimLedger::withdraw`]: notice_ledger::ledger::ClaimLedger::withdraw

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use chrono::{DateTime, Utc};
use notice_ledger::deliver::locate;
use notice_ledger::job::Withdrawal;
use notice_ledger::keyring::KeyRing;
use notice_ledger::ledger::rules::{withdraw_answer, WithdrawAnswer};
use notice_ledger::ledger::{Ledger, LedgerRow, Origin, RowState, WithdrawRequest};
use notice_ledger::{NoticeSecret, Notices};
use serde_json::Value;

use crate::exit::Exit;
use crate::ledger_target::{LedgerArg, LedgerTarget};
use crate::local::StateDir;
use crate::notices_arg::ConfigArg;
use crate::operator::OperatorArg;
use crate::terminal::{confirm, escape};

mod bulk;

use bulk::bulk;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Exit status:
  0  every notice is withdrawn, was already withdrawn, or needs no withdraw (missed or rejected:
     never sent)
  1  too late for at least one notice: it is claimed or sent, so it went out or may have — tell
     its producer; also an invalid line in --from
  2  could not run (bad arguments, secret or ledger unreachable, a write failed: run it again,
     a withdraw is safe to repeat)
  3  the confirmation was declined, or refused (no terminal and no --yes): nothing written
A dry run exits as the real run would (1 when a notice is already too late).")]
pub(crate) struct WithdrawArgs {
    /// The notice's subscription (with --period-start and --kind; or use --from).
    #[arg(long, required_unless_present = "from", conflicts_with = "from")]
    subscription_id: Option<String>,
    /// The notice's billing period start, YYYY-MM-DD.
    #[arg(long, required_unless_present = "from", conflicts_with = "from")]
    period_start: Option<String>,
    /// The notice kind, e.g. renewal_notice_t72.
    #[arg(long, required_unless_present = "from", conflicts_with = "from")]
    kind: Option<String>,
    /// The notice's revision.
    #[arg(long, default_value_t = 0, conflicts_with = "from")]
    revision: u64,
    /// Why (one line, recorded on the tombstone); with --from, for the lines that carry none.
    #[arg(long)]
    reason: Option<String>,
    /// JSON Lines of notices to withdraw: one object per line with subscription_id, period_start,
    /// kind, optional revision and reason (`action` absent or "withdraw").
    #[arg(long, value_name = "FILE")]
    from: Option<PathBuf>,
    #[command(flatten)]
    ledger: LedgerArg,
    #[command(flatten)]
    config: ConfigArg,
    #[command(flatten)]
    operator: OperatorArg,
    /// Only read the ledger and print what would happen; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Skip the confirmation prompt.
    #[arg(long)]
    yes: bool,
    /// Withdraw writes in flight at once (with --from).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
    concurrency: u16,
}

pub(crate) async fn run(state_dir: PathBuf, args: WithdrawArgs) -> anyhow::Result<ExitCode> {
    if let Some(reason) = &args.reason {
        check_reason(reason)?;
    }
    // A withdraw is judged under the sender's configuration, by the core's one admission: a kind
    // the policy does not list is refused, never answered "withdrawn" while the real notice goes
    // out. Loaded before anything is opened, so a refused withdraw leaves nothing behind. The
    // manage links play no part in a withdraw.
    let who = args.operator.who()?;
    let notices = args.config.notices(&KeyRing::from(NoticeSecret::new("noticectl withdraw: no links")?))?;
    let named = match &args.from {
        Some(_) => None,
        None => Some(named_withdrawal(&args, &notices)?),
    };
    let state = StateDir::open(&state_dir)?;
    let target = args.ledger.target(&state.root)?;
    // A local random secret would derive keys the deployment never used: every notice would look
    // withdrawable while the real ones still go out.
    if !target.is_local() && notice_setup::secret::source_from_env()?.is_none() {
        anyhow::bail!(
            "withdrawing in {} needs the deployment's key secret: set NOTICE_KEY_SECRET or \
             NOTICE_KEY_SECRET_ARN (a local secret would derive other keys)",
            target.describe()
        );
    }
    let secret = state.secret().await?;
    let ledger = target.open_checked(&secret, false).await?.0.ledger;
    match (args.from.clone(), named) {
        (_, Some(withdrawal)) => single(&args, withdrawal, &target, ledger.as_ref(), &secret, &who).await,
        (Some(from), None) => bulk(&from, &args, &notices, &target, ledger, &secret, &who).await,
        (None, None) => anyhow::bail!("--subscription-id, --period-start and --kind, or --from FILE"),
    }
}

/// `--reason` by the withdraw message's own rule (one line, bounded), naming the flag.
fn check_reason(reason: &str) -> anyhow::Result<()> {
    let probe = serde_json::json!({"subscription_id": "s", "period_start": "2000-01-01", "kind": "k",
        "reason": reason});
    match Withdrawal::from_value(&probe) {
        Ok(_) => Ok(()),
        Err(e) => anyhow::bail!("--reason {}", e.reason),
    }
}

/// An alias answered: the notice lives under a secret version this process does not hold.
const ELSEWHERE: &str = "cannot tell: the notice lives under a newer key secret version than this secret \
     (an alias row); run with the deployment's current secret (NOTICE_KEY_SECRET_ARN)";

/// What the ledger's row says a withdraw would do, in the operator's words.
fn plan_text(row: Option<&LedgerRow>) -> String {
    match (withdraw_answer(row), row) {
        (WithdrawAnswer::Withdraw, Some(row)) => format!(
            "would withdraw: the row is {} since {} (a claim given up): a withdrawn tombstone replaces it",
            row.state,
            row.updated_at.to_rfc3339()
        ),
        (WithdrawAnswer::Withdraw, None) => {
            "would withdraw: no ledger row yet; a withdrawn tombstone is written".into()
        }
        (WithdrawAnswer::AlreadyWithdrawn, row) => format!("already withdrawn{}", row_since(row)),
        (WithdrawAnswer::TooLate, row) => format!("too late: {}", too_late_text(row)),
        (WithdrawAnswer::NeverSent, row) => format!(
            "not needed: the notice is {} — it was never sent and never will be",
            row.map_or("decided".into(), |r| r.state.to_string())
        ),
        (WithdrawAnswer::Elsewhere, _) => ELSEWHERE.into(),
    }
}

fn row_since(row: Option<&LedgerRow>) -> String {
    match row {
        Some(row) => {
            let detail = row.detail.as_deref().map(|d| format!(" ({})", escape(d))).unwrap_or_default();
            format!(" since {}{detail}", row.updated_at.to_rfc3339())
        }
        None => String::new(),
    }
}

fn too_late_text(row: Option<&LedgerRow>) -> String {
    match row {
        Some(row) if row.state == RowState::Claimed => format!(
            "the notice is claimed since {} — it may be going out now; tell its producer (if the claim \
             is released later, withdraw again)",
            row.claimed_at.unwrap_or(row.updated_at).to_rfc3339()
        ),
        Some(row) => format!(
            "the notice is {} since {} — it went out; tell its producer",
            row.state,
            row.updated_at.to_rfc3339()
        ),
        None => "the notice went out or may have; tell its producer".into(),
    }
}

/// One notice, named by its identity on the command line.
/// The notice the flags name, admitted as the sender would admit its withdraw message (the error
/// names the flag at fault).
fn named_withdrawal(args: &WithdrawArgs, notices: &Notices) -> anyhow::Result<Withdrawal> {
    let mut body = serde_json::json!({
        "subscription_id": args.subscription_id, "period_start": args.period_start, "kind": args.kind,
        "revision": args.revision,
    });
    if let (Some(obj), Some(reason)) = (body.as_object_mut(), &args.reason) {
        obj.insert("reason".into(), Value::String(reason.clone()));
    }
    let flag = |field: &str, reason: &str| anyhow::anyhow!("--{} {reason}", field.replace('_', "-"));
    let withdrawal = Withdrawal::from_value(&body).map_err(|e| flag(e.field, &e.reason))?;
    notices.admit_withdraw(withdrawal).map_err(|r| flag(r.field(), r.reason()))
}

async fn single(
    args: &WithdrawArgs,
    withdrawal: Withdrawal,
    target: &LedgerTarget,
    ledger: &dyn Ledger,
    secret: &KeyRing,
    who: &str,
) -> anyhow::Result<ExitCode> {
    let identity = &withdrawal.identity;
    let (placed, row) = locate(secret, ledger, identity).await.context("ledger read failed")?;
    let key = placed.key.clone();
    println!("notice {key}");
    println!(
        "  subscription {}  period {}  kind {}  revision {}  (ledger {})",
        escape(identity.subscription_id()),
        identity.period_start().format("%Y-%m-%d"),
        identity.kind().as_str(),
        identity.revision(),
        target.describe()
    );
    println!("{}", plan_text(row.as_ref()));
    match withdraw_answer(row.as_ref()) {
        WithdrawAnswer::Withdraw => {}
        WithdrawAnswer::AlreadyWithdrawn | WithdrawAnswer::NeverSent => {
            println!("nothing to write");
            return Ok(Exit::Ok.into());
        }
        WithdrawAnswer::TooLate | WithdrawAnswer::Elsewhere => return Ok(Exit::Attention.into()),
    }
    if args.dry_run {
        println!("dry run: nothing written");
        return Ok(Exit::Ok.into());
    }
    if !args.yes
        && !confirm(&format!(
            "Withdraw notice {} in {}? No copy of it will be sent after this.",
            key.prefix(),
            target.describe()
        ))?
    {
        println!("nothing withdrawn");
        return Ok(Exit::SafetyStop.into());
    }
    let req = WithdrawRequest::new(&withdrawal, key.clone(), Origin::Operator, who, Utc::now())
        .with_aliases(placed.aliases);
    let written = ledger.withdraw(&req).await.context("not withdrawn (a withdraw is safe to repeat)")?;
    let answer = Answer::of(written.as_ref())?;
    match answer {
        Answer::Withdrawn => {
            println!("withdrawn {key} by {}: no copy of this notice will be sent", escape(who))
        }
        Answer::Already => println!("already withdrawn meanwhile{}", row_since(written.as_ref())),
        Answer::TooLate { .. } => {
            println!("changed since the read — too late: {}", too_late_text(written.as_ref()))
        }
        Answer::NotNeeded(state) => {
            println!("changed since the read — not needed: the notice is {state}, never sent")
        }
    }
    Ok(answer.exit_code())
}

/// The answer one withdraw write gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Withdrawn,
    Already,
    TooLate { state: RowState, since: DateTime<Utc> },
    NotNeeded(RowState),
}

impl Answer {
    /// From [`ClaimLedger::withdraw`]'s result: `None` is the tombstone written, a row the one
    /// that refused it. A row the rules would have let the withdraw overwrite is a ledger fault.
    ///
    /// [`ClaimLedger::withdraw`]: notice_ledger::ledger::ClaimLedger::withdraw
    fn of(refused_by: Option<&LedgerRow>) -> anyhow::Result<Self> {
        let Some(row) = refused_by else { return Ok(Answer::Withdrawn) };
        Ok(match withdraw_answer(Some(row)) {
            WithdrawAnswer::AlreadyWithdrawn => Answer::Already,
            WithdrawAnswer::TooLate => Answer::TooLate {
                state: row.state,
                since: if row.state == RowState::Claimed {
                    row.claimed_at.unwrap_or(row.updated_at)
                } else {
                    row.updated_at
                },
            },
            WithdrawAnswer::NeverSent => Answer::NotNeeded(row.state),
            WithdrawAnswer::Elsewhere => anyhow::bail!("{ELSEWHERE}"),
            WithdrawAnswer::Withdraw => {
                anyhow::bail!("the ledger refused a withdraw over a {} row (a ledger fault)", row.state)
            }
        })
    }

    /// What the census read predicts the write will answer.
    fn predicted(row: Option<&LedgerRow>) -> Self {
        match row {
            None => Answer::Withdrawn,
            Some(row) => Answer::of(Some(row)).unwrap_or(Answer::Withdrawn),
        }
    }

    fn exit_code(self) -> ExitCode {
        match self {
            Answer::TooLate { .. } => Exit::Attention.into(),
            _ => Exit::Ok.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_follow_the_message_rule() {
        assert!(check_reason("customer cancelled").is_ok());
        assert!(check_reason("two\nlines").is_err());
        assert!(check_reason(&"x".repeat(notice_ledger::job::MAX_WITHDRAW_REASON_CHARS + 1)).is_err());
    }
}
