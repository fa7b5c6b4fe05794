//! The key check kept in the ledger file's `ledger_meta` table, beside the rows it guards.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use notice_ledger::keycheck::{stored_name, KeyCheck, KeyCheckStore};
use notice_ledger::LedgerError;

use crate::{sql, SqliteLedger};

/// The key check kept in this ledger file's `ledger_meta` table (shares the ledger's connection).
#[derive(Clone)]
pub struct SqliteKeyCheck {
    ledger: SqliteLedger,
}

impl SqliteLedger {
    /// The key check kept in this ledger's file (its table is created on open).
    pub fn key_checks(&self) -> SqliteKeyCheck {
        SqliteKeyCheck { ledger: self.clone() }
    }
}

fn stored_key_check(conn: &Connection, version: u32) -> Result<Option<KeyCheck>, LedgerError> {
    conn.query_row("SELECT value FROM ledger_meta WHERE name = ?1", [stored_name(version)], |r| {
        r.get::<_, String>(0)
    })
    .optional()
    .map_err(sql)?
    .map(|stored| KeyCheck::parse(&stored))
    .transpose()
}

#[async_trait]
impl KeyCheckStore for SqliteKeyCheck {
    async fn key_check_of(&self, version: u32) -> Result<Option<KeyCheck>, LedgerError> {
        self.ledger.with(move |conn| stored_key_check(conn, version)).await
    }

    /// `INSERT … ON CONFLICT DO NOTHING` and the read back in one `BEGIN IMMEDIATE`: of two
    /// processes recording at once, the first writer's check is what both return.
    async fn record_key_check(&self, check: &KeyCheck) -> Result<KeyCheck, LedgerError> {
        let stored = check.to_stored();
        let (version, name) = (check.version_number(), stored_name(check.version_number()));
        self.ledger
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
                tx.execute(
                    "INSERT INTO ledger_meta (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
                    params![name, stored],
                )
                .map_err(sql)?;
                let held = stored_key_check(&tx, version)?
                    .ok_or_else(|| LedgerError::Corrupt("key check vanished inside a transaction".into()))?;
                tx.commit().map_err(sql)?;
                Ok(held)
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notice_ledger::ledger::OperatorLedger;

    fn check(c: char) -> KeyCheck {
        KeyCheck::parse(&format!("v1:{}", c.to_string().repeat(64))).unwrap()
    }

    #[tokio::test]
    async fn the_first_key_check_stays_across_reopening_and_a_corrupt_one_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let store = SqliteLedger::open(&path).unwrap().key_checks();
        assert_eq!(store.key_check().await.unwrap(), None);
        assert_eq!(store.record_key_check(&check('a')).await.unwrap(), check('a'));
        assert_eq!(store.key_check().await.unwrap(), Some(check('a')));
        // A second process with another secret gets the first check back, never its own.
        let reopened = SqliteLedger::open(&path).unwrap().key_checks();
        assert_eq!(reopened.key_check().await.unwrap(), Some(check('a')));
        assert_eq!(reopened.record_key_check(&check('b')).await.unwrap(), check('a'));
        assert_eq!(store.key_check().await.unwrap(), Some(check('a')));
        // The check is no notice row: the key scan does not see it.
        assert!(reopened.ledger.keys_with_prefix("", 10).await.unwrap().is_empty());

        let conn = Connection::open(&path).unwrap();
        conn.execute("UPDATE ledger_meta SET value = 'v1:not-hex' WHERE name = 'key_check'", []).unwrap();
        assert!(matches!(store.key_check().await, Err(LedgerError::Corrupt(_))));
        assert!(matches!(store.record_key_check(&check('a')).await, Err(LedgerError::Corrupt(_))));
    }

    #[tokio::test]
    async fn a_file_from_before_key_checks_gets_the_table_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        drop(SqliteLedger::open(&path).unwrap());
        Connection::open(&path).unwrap().execute_batch("DROP TABLE ledger_meta").unwrap();
        let store = SqliteLedger::open(&path).unwrap().key_checks();
        assert_eq!(store.key_check().await.unwrap(), None);
        assert_eq!(store.record_key_check(&check('c')).await.unwrap(), check('c'));
    }
}
