//! `noticectl show KEY`: one notice's ledger row as JSON; exit 1 when there is none, so scripts
//! can tell "never seen" from an error.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::exit::Exit;
use crate::key_arg::KeyArg;
use crate::ledger_target::LedgerArg;
use crate::local::StateDir;

#[derive(clap::Args, Debug)]
pub(crate) struct ShowArgs {
    /// The notice key as printed: whole (64 hex characters, or `vN-` and 56), or a unique prefix of
    /// at least 12 hex characters with or without its `vN-` (as every output line shows it); an
    /// ambiguous prefix lists its candidates. On DynamoDB a prefix scans the table (without its
    /// `vN-`, once per version of the key secret).
    #[arg(value_parser = KeyArg::parse)]
    key: KeyArg,
    #[command(flatten)]
    ledger: LedgerArg,
}

pub(crate) async fn run(state_dir: PathBuf, args: ShowArgs) -> anyhow::Result<ExitCode> {
    let target = args.ledger.target(&state_dir)?;
    let ledger = target.open().await?.ledger;
    let key = match &args.key {
        KeyArg::Full(key) => key.clone(),
        KeyArg::Prefix { version, .. } => {
            let versions = match version {
                Some(_) => Vec::new(),
                None => held_versions(&state_dir).await?,
            };
            let mut found = Vec::new();
            for prefix in args.key.ledger_prefixes(versions) {
                // Six are enough to tell "one" from "ambiguous" and to list five candidates.
                found.extend(ledger.keys_with_prefix(&prefix, 6).await?);
            }
            args.key.resolve(found.iter().map(|k| k.as_str()), "ledger row")?
        }
    };
    match ledger.get(&key).await? {
        None => {
            println!("{key}: no ledger row in {}", target.describe());
            Ok(Exit::Attention.into())
        }
        Some(row) => {
            let doc = serde_json::json!({
                "notice_key": row.key.as_str(), "state": row.state.as_str(), "origin": row.origin.as_str(),
                "subscription_id": row.subscription_id, "period_start": row.period_start, "kind": row.kind,
                "revision": row.revision, "claimed_at": row.claimed_at.map(|t| t.to_rfc3339()),
                "updated_at": row.updated_at.to_rfc3339(), "message_id": row.message_id, "detail": row.detail,
                "delivery_status": row.delivery_status.map(|d| d.as_str()),
                "duplicate_message_ids": row.duplicate_message_ids,
                "charge_at": row.charge_at.map(|t| t.to_rfc3339()), "jurisdiction": row.jurisdiction,
                "config_version": row.rendered.as_ref().map(|r| &r.config_version),
                "template": row.rendered.as_ref().map(|r| &r.template),
                "rendered_digest": row.rendered.as_ref().map(|r| &r.rendered_digest),
                "obligation": row.obligation,
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
            Ok(Exit::Ok.into())
        }
    }
}

/// The key secret versions a prefix without its `vN-` may name a key under: every version the
/// secret holds (retired ones too — `evidence` still prints their keys). Read only where a secret
/// exists (NOTICE_KEY_SECRET or NOTICE_KEY_SECRET_ARN, else the state directory's own), so `show`
/// never creates one; with none, nothing here was keyed under a later version than v1.
async fn held_versions(state_dir: &Path) -> anyhow::Result<Vec<u32>> {
    let configured = notice_setup::secret::source_from_env()?.is_some();
    if !configured && !state_dir.join("secret").exists() {
        return Ok(vec![1]);
    }
    let ring = StateDir::open(state_dir)?.secret().await?;
    Ok(ring.all().map(|v| v.version()).collect())
}
