//! `noticectl key rotate` and `noticectl key retire VERSION`: the key secret's versions, changed
//! by an operator with a plan, a dry run and a confirmation (docs/security.md, "Rotating the key
//! secret").
//!
//! Rotate adds a new random version and makes it current; the old one stays active, so senders
//! on either side of the switch never claim one notice twice (alias rows, `notice_ledger::keyring`).
//! Retire stops honouring an old version on the send path once nothing can be decided under it any
//! more: no open claim, and no notice under it whose charge is still ahead (a replay of its job
//! would otherwise be keyed under the current version, find nothing and be sent again).
//!
//! Where the secret is written: the Secrets Manager secret `NOTICE_KEY_SECRET_ARN` names, or the
//! state directory's local secret. A `NOTICE_KEY_SECRET` value cannot be written back: refused.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use chrono::Utc;
use notice_ledger::keycheck::KeyCheck;
use notice_ledger::keyring::{parse_version, version_name, KeyRing};
use notice_ledger::ledger::{Ledger, LedgerRow, RowState};
use notice_ledger::NoticeSecret;
use notice_setup::secret::SecretSource;

use crate::exit::Exit;
use crate::ledger_target::LedgerArg;
use crate::local::StateDir;
use crate::terminal::{confirm, progress};

#[derive(clap::Args, Debug)]
pub(crate) struct RotateArgs {
    #[command(flatten)]
    ledger: LedgerArg,
    /// Print the plan and check the ledger; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Skip the confirmation prompt.
    #[arg(long)]
    yes: bool,
}

#[derive(clap::Args, Debug)]
pub(crate) struct RetireArgs {
    /// The version to retire (`v1`, `v2`, …): an older active one, never the current.
    version: String,
    #[command(flatten)]
    ledger: LedgerArg,
    /// Check and print what blocks the retirement; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Skip the confirmation prompt.
    #[arg(long)]
    yes: bool,
}

/// Where the ring is kept, so it can be written back.
enum Store {
    SecretsManager(String),
    Local(std::path::PathBuf),
}

impl Store {
    fn describe(&self) -> String {
        match self {
            Store::SecretsManager(id) => format!("Secrets Manager secret {id}"),
            Store::Local(path) => format!("local secret {}", path.display()),
        }
    }

    async fn write(&self, ring: &KeyRing) -> anyhow::Result<()> {
        match self {
            Store::SecretsManager(id) => {
                let sdk = notice_setup::aws::load_sdk_config().await;
                Ok(notice_setup::secret::store(&sdk, id, ring).await?)
            }
            Store::Local(path) => {
                let tmp = path.with_extension("rotating");
                write_private(&tmp, &ring.to_stored())?;
                std::fs::rename(&tmp, path).with_context(|| path.display().to_string())
            }
        }
    }
}

/// Writes `text` to a new file that only its owner can read (the secret's own mode).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).with_context(|| path.display().to_string())?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    Ok(())
}

/// The ring and where to write it back.
async fn ring_and_store(state_dir: &Path) -> anyhow::Result<(KeyRing, Store)> {
    let store = match notice_setup::secret::source_from_env()? {
        Some(SecretSource::SecretsManager(id)) => Store::SecretsManager(id),
        Some(SecretSource::Value(_)) => anyhow::bail!(
            "the key secret comes from NOTICE_KEY_SECRET, a value noticectl cannot write back: rotate the \
             secret where it is kept (set NOTICE_KEY_SECRET_ARN to the Secrets Manager secret the stack reads)"
        ),
        None => Store::Local(state_dir.join("secret")),
    };
    let ring = StateDir::open(state_dir)?.secret().await?;
    Ok((ring, store))
}

pub(crate) async fn rotate(state_dir: &Path, args: RotateArgs) -> anyhow::Result<ExitCode> {
    let (ring, store) = ring_and_store(state_dir).await?;
    let state = StateDir::open(state_dir)?;
    let target = args.ledger.target(&state.root)?;
    // Every version held must be the one the ledger's keys were made with before a new one joins.
    let (opened, _) = target.open_checked(&ring, false).await?;
    let next = ring.rotated(random_secret()?);
    let new = next.current();
    println!("key secret in {} · ledger {}", store.describe(), target.describe());
    println!("  now:   {}", ring.describe());
    println!("  after: {}", next.describe());
    println!(
        "  notices the ledger has never seen are keyed under {} (`{}-…`); every notice already under an \
         older active version stays there, and the first write of each new one puts an alias at its older \
         keys, so senders still on {} never claim it again",
        version_name(new.version()),
        version_name(new.version()),
        version_name(ring.current().version())
    );
    if args.dry_run {
        println!("dry run: nothing written");
        return Ok(Exit::Ok.into());
    }
    if !args.yes && !confirm(&format!("Add key secret {} and make it current?", version_name(new.version())))?
    {
        println!("nothing rotated");
        return Ok(Exit::SafetyStop.into());
    }
    // The ledger learns the new version's check first: a sender that reads the new secret then
    // finds its check waiting, never a missing one it would record from an unverified secret.
    let check = KeyCheck::of_version(new.secret(), new.version());
    let held = opened.key_checks.record_key_check(&check).await.context("recording the new key check")?;
    if held != check {
        anyhow::bail!(
            "the ledger already holds another check for {} ({held}): a rotation was started with another \
             secret; nothing written to the secret",
            version_name(new.version())
        );
    }
    store.write(&next).await?;
    println!("rotated: {} is current ({check}); {}", version_name(new.version()), next.describe());
    println!(
        "senders pick it up at their next cold start; to switch every sender now, update the sender \
         function's configuration (a new environment reads the new secret). Retire {} with `noticectl \
         key retire {}` once it says nothing is left under it.",
        version_name(ring.current().version()),
        version_name(ring.current().version())
    );
    Ok(Exit::Ok.into())
}

pub(crate) async fn retire(state_dir: &Path, args: RetireArgs) -> anyhow::Result<ExitCode> {
    let version = parse_version(&args.version)
        .with_context(|| format!("{:?} is not a version (v1, v2, …)", args.version))?;
    let (ring, store) = ring_and_store(state_dir).await?;
    let Some(next) = ring.retiring(version) else {
        anyhow::bail!(
            "{} is not an older active version of this key secret ({}): only those can be retired",
            version_name(version),
            ring.describe()
        );
    };
    let state = StateDir::open(state_dir)?;
    let target = args.ledger.target(&state.root)?;
    let (opened, _) = target.open_checked(&ring, false).await?;
    let blockers = blockers(opened.ledger.as_ref(), version).await?;
    println!("key secret in {} · ledger {}", store.describe(), target.describe());
    println!("  now:   {}", ring.describe());
    println!("  after: {}", next.describe());
    println!(
        "  rows under {}: {} · open claims: {} · charge still ahead: {} · charge unknown: {}",
        version_name(version),
        blockers.rows,
        blockers.open.len(),
        blockers.ahead.len(),
        blockers.unknown.len()
    );
    for (what, rows) in [
        ("open claim", &blockers.open),
        ("charge ahead", &blockers.ahead),
        ("charge unknown", &blockers.unknown),
    ] {
        for row in rows.iter().take(10) {
            println!(
                "    {what}: {} ({}, charge {})",
                row.key.prefix(),
                row.state,
                row.charge_at.map_or("unknown".into(), |c| c.to_rfc3339())
            );
        }
    }
    if blockers.blocking() {
        println!(
            "not retirable yet: a replay of a job under {} would be keyed under the current version, find \
             nothing and be sent again (resolve open claims; wait until the last charge has passed, {})",
            version_name(version),
            blockers.ahead.iter().filter_map(|r| r.charge_at).max().map_or("—".into(), |c| c.to_rfc3339())
        );
        return Ok(Exit::Attention.into());
    }
    println!("retirable: nothing can be decided under {} any more", version_name(version));
    if args.dry_run {
        println!("dry run: nothing written");
        return Ok(Exit::Ok.into());
    }
    if !args.yes && !confirm(&format!("Retire key secret {}?", version_name(version)))? {
        println!("nothing retired");
        return Ok(Exit::SafetyStop.into());
    }
    store.write(&next).await?;
    println!(
        "retired {}: senders stop reading and aliasing it at their next cold start; it stays in the secret \
         for `noticectl evidence`",
        version_name(version)
    );
    Ok(Exit::Ok.into())
}

/// What keeps a version from being retired.
#[derive(Default)]
struct Blockers {
    rows: usize,
    open: Vec<LedgerRow>,
    ahead: Vec<LedgerRow>,
    unknown: Vec<LedgerRow>,
}

impl Blockers {
    fn blocking(&self) -> bool {
        !(self.open.is_empty() && self.ahead.is_empty() && self.unknown.is_empty())
    }
}

/// Every row keyed under `version` (aliases aside: they point at newer keys), judged. Reads the
/// whole key space through the operator port (a scan on DynamoDB: at an operator's pace).
async fn blockers(ledger: &dyn Ledger, version: u32) -> anyhow::Result<Blockers> {
    let prefix = if version == 1 { String::new() } else { format!("{}-", version_name(version)) };
    let keys = ledger.keys_with_prefix(&prefix, usize::MAX).await.context("listing the ledger's keys")?;
    let keys: Vec<_> = keys.into_iter().filter(|k| k.version() == version).collect();
    let now = Utc::now();
    let bar = progress(keys.len(), "checking");
    let mut found = Blockers::default();
    for chunk in keys.chunks(100) {
        for row in ledger.get_many(chunk).await.context("ledger lookup failed")? {
            bar.inc(1);
            if row.state == RowState::Alias {
                continue;
            }
            found.rows += 1;
            if row.state == RowState::Claimed {
                found.open.push(row);
            } else if row.charge_at.is_some_and(|c| c > now) {
                found.ahead.push(row);
            } else if row.charge_at.is_none() && !period_long_past(&row, now) {
                // A tombstone (or a backfilled row) names no charge: judged by its billing period.
                found.unknown.push(row);
            }
        }
    }
    bar.finish_and_clear();
    Ok(found)
}

/// How long after a period's first day a notice for it can still be in its window, when the row
/// names no charge: a charge falls on or a few days after the period's start, and every window
/// closes before the charge — 60 days covers a delayed charge with margin.
const PERIOD_MARGIN_DAYS: i64 = 60;

/// Whether `row`'s billing period began more than [`PERIOD_MARGIN_DAYS`] ago (so no job of it can
/// be sent any more); an unreadable period counts as not past.
fn period_long_past(row: &LedgerRow, now: chrono::DateTime<Utc>) -> bool {
    chrono::NaiveDate::parse_from_str(&row.period_start, "%Y-%m-%d")
        .is_ok_and(|start| start + chrono::Duration::days(PERIOD_MARGIN_DAYS) < now.date_naive())
}

/// A new version's secret: the local secret's generator, checked as configuration is.
fn random_secret() -> anyhow::Result<NoticeSecret> {
    Ok(NoticeSecret::configured(crate::local::random_secret())?)
}
