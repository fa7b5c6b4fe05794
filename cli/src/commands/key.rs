//! `noticectl key`: prints the notice key of one notice, so an operator can find its ledger row,
//! its parked schedule or its log lines without running a send — the key it lives under (while
//! the secret rotates, an older version's key may hold its row), else the current version's;
//! `key rotate` and `key retire` change the key secret's versions (`key_rotation.rs`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::exit::Exit;
use crate::ledger_target::LedgerArg;
use crate::local::StateDir;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct KeyArgs {
    #[command(subcommand)]
    action: Option<KeyAction>,
    #[arg(long, required = true)]
    subscription_id: Option<String>,
    #[arg(long, required = true)]
    period_start: Option<String>,
    #[arg(long, required = true)]
    kind: Option<String>,
    #[arg(long, default_value_t = 0)]
    revision: u64,
    #[command(flatten)]
    ledger: LedgerArg,
}

#[derive(clap::Subcommand, Debug)]
enum KeyAction {
    /// Add a new random key secret version and make it current; the old one stays active (plan, --dry-run, confirmation). Writes the Secrets Manager secret NOTICE_KEY_SECRET_ARN names, or the local secret.
    Rotate(super::key_rotation::RotateArgs),
    /// Stop honouring an old key secret version once nothing can be decided under it (checks the ledger; exit 1 with what blocks it).
    Retire(super::key_rotation::RetireArgs),
}

pub(crate) async fn run(state_dir: PathBuf, args: KeyArgs) -> anyhow::Result<ExitCode> {
    match args.action {
        Some(KeyAction::Rotate(rotate)) => return super::key_rotation::rotate(&state_dir, rotate).await,
        Some(KeyAction::Retire(retire)) => return super::key_rotation::retire(&state_dir, retire).await,
        None => {}
    }
    let (Some(subscription_id), Some(period_start), Some(kind)) =
        (args.subscription_id, args.period_start, args.kind)
    else {
        anyhow::bail!("--subscription-id, --period-start and --kind name the notice");
    };
    let identity = notice_ledger::Identity::new(&subscription_id, &period_start, &kind, args.revision)?;
    // Not created: with the secret in the environment and no local ledger, printing a key
    // leaves nothing behind.
    let state = StateDir::at(&state_dir);
    let secret = state.secret().await?;
    // With a ledger named (or the local one present), the secret is checked against it first: a
    // key made with another secret names no notice there.
    let opened = if args.ledger.url.is_some() || crate::local::ledger_path(&state.root).exists() {
        Some(args.ledger.target(&state.root)?.open_checked(&secret, false).await?.0)
    } else {
        None
    };
    // Where a sender would place it: under the oldest active version's key that holds its row,
    // else the current version's.
    let key = match opened {
        Some(opened) => {
            let (placed, _) = notice_ledger::deliver::locate(&secret, opened.ledger.as_ref(), &identity)
                .await
                .context("ledger read failed")?;
            placed.key
        }
        None => secret.key(&identity),
    };
    println!("{key}");
    Ok(Exit::Ok.into())
}
