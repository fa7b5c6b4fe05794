//! SQLite ledger: the embedded default for local runs — a real file, safe for several processes.
//!
//! The claim is the seed design's `insert … on conflict … returning`: one statement that either
//! inserts (or takes over a `released` row) and returns the new token, or returns nothing because
//! someone holds the key. WAL mode plus a busy timeout lets two processes share one file; every
//! write runs in `BEGIN IMMEDIATE`, so SQLite serialises writers and a claim is durable on commit.

/// The service this adapter is, as an operator knows it: named in every typed failure.
pub const SERVICE: &str = "SQLite";

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use notice_ledger::{Fault, LedgerError};

mod claim;
mod evidence;
mod keycheck;
mod operator;
pub mod rate;
mod rows;
mod schema;

pub use keycheck::SqliteKeyCheck;
pub use rate::SqliteBuckets;

use schema::{create_schema, private_file, wal_mode, BUSY_WAIT};

#[derive(Clone)]
pub struct SqliteLedger {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
}

impl SqliteLedger {
    /// Opens (creating if needed) the ledger file. The file holds subscription ids and states:
    /// it is made 0600 before SQLite opens it (its -wal and -shm files take the same mode), so
    /// other local users cannot read it whatever the umask.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, LedgerError> {
        let path = path.as_ref().to_path_buf();
        private_file(&path).map_err(|e| LedgerError::unavailable(format!("{}: {e}", path.display())))?;
        let mut conn = Connection::open(&path)
            .map_err(|e| LedgerError::unavailable(format!("{}: {e}", path.display())))?;
        conn.busy_timeout(BUSY_WAIT).map_err(sql)?;
        wal_mode(&conn)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(sql)?;
        create_schema(&mut conn)?;
        Ok(Self { conn: Arc::new(Mutex::new(conn)), path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs a blocking database call off the async runtime.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, LedgerError> + Send + 'static,
    ) -> Result<T, LedgerError> {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut guard)
        })
        .await
        .map_err(|e| LedgerError::unavailable(format!("ledger task failed: {e}")))?
    }
}

/// A driver error, its fault from SQLite's result code: another process holding the file is
/// [`Fault::Busy`]; anything else is [`Fault::Other`].
fn sql(e: rusqlite::Error) -> LedgerError {
    let fault = match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => Fault::Busy,
        _ => Fault::Other,
    };
    LedgerError::faulted(crate::SERVICE, fault, format!("sqlite: {e}"))
}

#[cfg(test)]
mod upgrade_tests;

#[cfg(test)]
mod open_race_tests;

#[cfg(test)]
mod fault_tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_file_another_process_holds_is_busy() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ledger.db");
        drop(SqliteLedger::open(&path).expect("open"));
        let holder = Connection::open(&path).expect("holder");
        holder.execute_batch("BEGIN EXCLUSIVE").expect("lock");
        let other = Connection::open(&path).expect("other");
        other.busy_timeout(Duration::ZERO).expect("no wait");
        let Err(e) = other.execute_batch("BEGIN IMMEDIATE") else { panic!("the file is locked") };
        assert_eq!(sql(e).fault(), Some(&Fault::Busy));
    }
}
