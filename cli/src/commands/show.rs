//! `noticectl show KEY`: one notice's ledger row as JSON; exit 1 when there is none, so scripts
//! can tell "never seen" from an error.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::ledger_target::LedgerTarget;

#[derive(clap::Args, Debug)]
pub(crate) struct ShowArgs {
    /// The notice key (64 hex characters).
    key: String,
    /// sqlite:PATH (default: <state-dir>/ledger.db) or dynamodb:TABLE.
    #[arg(long, env = "NOTICE_LEDGER_URL", hide_env_values = true)]
    ledger: Option<String>,
}

pub(crate) async fn run(state_dir: PathBuf, args: ShowArgs) -> Result<ExitCode, String> {
    let key = notice_ledger::NoticeKey::parse(&args.key).map_err(|e| e.to_string())?;
    let target = LedgerTarget::resolve(args.ledger.as_deref(), &state_dir)?;
    let ledger = target.open().await?.ledger;
    match ledger.get(&key).await.map_err(|e| e.to_string())? {
        None => {
            println!("{key}: no ledger row in {}", target.describe());
            Ok(ExitCode::from(1))
        }
        Some(row) => {
            let doc = serde_json::json!({
                "notice_key": row.key.as_str(), "state": row.state.as_str(), "origin": row.origin.as_str(),
                "subscription_id": row.subscription_id, "period_start": row.period_start, "kind": row.kind,
                "revision": row.revision, "claimed_at": row.claimed_at.map(|t| t.to_rfc3339()),
                "updated_at": row.updated_at.to_rfc3339(), "message_id": row.message_id, "detail": row.detail,
                "delivery_status": row.delivery_status.map(|d| d.as_str()),
                "duplicate_message_ids": row.duplicate_message_ids,
            });
            println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
            Ok(ExitCode::SUCCESS)
        }
    }
}
