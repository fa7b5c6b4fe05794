//! `noticectl key`: prints the notice key of one notice, so an operator can find its ledger row,
//! its parked schedule or its log lines without running a send.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::exit::Exit;
use crate::ledger_target::LedgerArg;
use crate::local::StateDir;

#[derive(clap::Args, Debug)]
pub(crate) struct KeyArgs {
    #[arg(long)]
    subscription_id: String,
    #[arg(long)]
    period_start: String,
    #[arg(long)]
    kind: String,
    #[arg(long, default_value_t = 0)]
    revision: u64,
    #[command(flatten)]
    ledger: LedgerArg,
}

pub(crate) async fn run(state_dir: PathBuf, args: KeyArgs) -> anyhow::Result<ExitCode> {
    let state = StateDir::open(&state_dir)?;
    let secret = state.secret().await?;
    // With a ledger named (or the local one present), the secret is checked against it first: a
    // key made with another secret names no notice there.
    if args.ledger.url.is_some() || crate::local::ledger_path(&state.root).exists() {
        args.ledger.target(&state.root)?.open_checked(&secret, false).await?;
    }
    let identity =
        notice_ledger::Identity::new(&args.subscription_id, &args.period_start, &args.kind, args.revision)?;
    println!("{}", identity.derive_key(&secret));
    Ok(Exit::Ok.into())
}
