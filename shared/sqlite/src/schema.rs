//! The ledger file's schema and how a file is opened: private permissions, WAL mode despite a
//! concurrent opener, and the columns added since the first schema (no migration step).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};

use notice_ledger::LedgerError;

use crate::{rate, sql};

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS notices (
    notice_key      TEXT PRIMARY KEY,
    state           TEXT NOT NULL,
    origin          TEXT NOT NULL,
    claim_token     TEXT,
    subscription_id TEXT NOT NULL,
    period_start    TEXT NOT NULL,
    kind            TEXT NOT NULL,
    revision        INTEGER NOT NULL,
    content_digest  TEXT,
    claimed_at_ms   INTEGER,
    updated_at_ms   INTEGER NOT NULL,
    message_id      TEXT,
    detail          TEXT,
    delivery_status TEXT,
    -- JSON array of further provider message ids: duplicates that really went out.
    duplicate_message_ids TEXT NOT NULL DEFAULT '[]'
);
-- The quarantine view reads only open claims (a partial index, like the DynamoDB sparse GSI).
CREATE INDEX IF NOT EXISTS notices_open_claims ON notices (claimed_at_ms) WHERE state = 'claimed';
-- Facts about the ledger itself, by name (`key_check`: the key secret's check); never a notice.
CREATE TABLE IF NOT EXISTS ledger_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
";

/// Columns added after the first schema, with their types: [`create_schema`] adds any a
/// file lacks when it is opened, so an older ledger file needs no migration step. Evidence: the
/// charge a notice announced (epoch ms) and the jurisdiction it was judged in; what rendered the
/// message ([`RenderedNotice`]: configuration version, template, digest — all three or none); the
/// obligation rule that owed the notice (`US-CA/ca-annual-term`).
pub(crate) const ADDED_COLUMNS: &[(&str, &str)] = &[
    ("charge_at_ms", "INTEGER"),
    ("jurisdiction", "TEXT"),
    ("config_version", "TEXT"),
    ("template", "TEXT"),
    ("rendered_digest", "TEXT"),
    ("obligation", "TEXT"),
];

/// Creates `path` (if missing) and sets it to 0600 exactly: a creation mode alone is filtered by the
/// umask. An in-memory or special path (`:memory:`) is left alone.
pub(crate) fn private_file(path: &Path) -> std::io::Result<()> {
    if path.as_os_str() == ":memory:" {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        options.open(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    #[cfg(not(unix))]
    options.open(path)?;
    Ok(())
}

/// How long one statement waits for another process's lock before it fails: the busy timeout,
/// and the bound on [`wal_mode`]'s retries.
pub(crate) const BUSY_WAIT: Duration = Duration::from_secs(10);

/// Puts the file in WAL mode, retrying while another process holds it. Turning a new file to WAL
/// needs it to itself, and SQLite answers "database is locked" at once instead of calling the
/// busy handler, so two `noticectl` processes started together on a new file failed to open it.
pub(crate) fn wal_mode(conn: &Connection) -> Result<(), LedgerError> {
    let deadline = std::time::Instant::now() + BUSY_WAIT;
    loop {
        // A file SQLite cannot put in WAL mode (an in-memory one) keeps the mode it has, as before.
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Ok(()) => return Ok(()),
            Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(sql(e)),
        }
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Creates the tables and adds the [`ADDED_COLUMNS`] a file lacks, so an older ledger file needs
/// no migration step. One `BEGIN IMMEDIATE` transaction: it takes the write lock first (waiting
/// in the busy handler), so two processes opening one file at once neither fail on a lock
/// upgrade nor both add a column (the second sees it and adds nothing).
pub(crate) fn create_schema(conn: &mut Connection) -> Result<(), LedgerError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
    tx.execute_batch(SCHEMA).map_err(sql)?;
    tx.execute_batch(rate::SCHEMA).map_err(sql)?;
    let present: Vec<String> = {
        let mut stmt = tx.prepare("SELECT name FROM pragma_table_info('notices')").map_err(sql)?;
        let names = stmt.query_map([], |r| r.get(0)).map_err(sql)?;
        names.collect::<Result<_, _>>().map_err(sql)?
    };
    for (name, kind) in ADDED_COLUMNS {
        if !present.iter().any(|p| p == name) {
            tx.execute_batch(&format!("ALTER TABLE notices ADD COLUMN {name} {kind}")).map_err(sql)?;
        }
    }
    tx.commit().map_err(sql)
}
