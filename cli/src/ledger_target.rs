//! Which ledger a command works on: `--ledger sqlite:PATH` (default: the state directory's
//! `ledger.db`), `--ledger dynamodb:TABLE` (the deployed ledger, through the standard AWS
//! environment: AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL…) or `--ledger postgres://…`
//! (`postgresql://…` too; a PostgreSQL ledger whose schema `noticectl ledger init` created).
//! Every command also reads the choice from `NOTICE_LEDGER_URL`.

use std::path::PathBuf;
use std::sync::Arc;

use notice_ledger::ledger::dynamodb::DynamoLedger;
use notice_ledger::ledger::postgres::{self, PostgresLedger};
use notice_ledger::ledger::sqlite::SqliteLedger;
use notice_ledger::ledger::Ledger;

#[derive(Clone, PartialEq, Eq)]
pub enum LedgerTarget {
    Sqlite(PathBuf),
    DynamoDb(String),
    /// The full URL (it may carry a password: shown only through [`LedgerTarget::describe`]).
    Postgres(String),
}

impl std::fmt::Debug for LedgerTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl LedgerTarget {
    /// `--ledger` when given, else the state directory's SQLite ledger.
    pub fn resolve(arg: Option<&str>, state_dir: &std::path::Path) -> Result<Self, String> {
        match arg {
            Some(value) => Self::parse(value),
            None => Ok(Self::Sqlite(crate::local::ledger_path(state_dir))),
        }
    }

    pub fn parse(value: &str) -> Result<Self, String> {
        if let Some(path) = value.strip_prefix("sqlite:") {
            return if path.is_empty() {
                Err("sqlite: needs a path".into())
            } else {
                Ok(Self::Sqlite(path.into()))
            };
        }
        if let Some(table) = value.strip_prefix("dynamodb:") {
            return if table.is_empty() {
                Err("dynamodb: needs a table name".into())
            } else {
                Ok(Self::DynamoDb(table.into()))
            };
        }
        if postgres::is_postgres_url(value) {
            return Ok(Self::Postgres(value.to_owned()));
        }
        // Not echoed: a mistyped database URL may still carry a password.
        Err("unknown ledger: use sqlite:PATH, dynamodb:TABLE or postgres://USER@HOST/DB".into())
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Sqlite(p) => format!("sqlite:{}", p.display()),
            Self::DynamoDb(t) => format!("dynamodb:{t}"),
            Self::Postgres(url) => postgres::redacted(url),
        }
    }

    pub async fn open(&self) -> Result<Opened, String> {
        match self {
            Self::Sqlite(path) => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
                }
                let ledger = SqliteLedger::open(path).map_err(|e| e.to_string())?;
                Ok(Opened { ledger: Arc::new(ledger) })
            }
            Self::DynamoDb(table) => {
                let config = notice_ledger::aws::load_sdk_config().await;
                let ledger =
                    Arc::new(DynamoLedger::new(notice_ledger::aws::dynamodb_client(&config), table.clone()));
                Ok(Opened { ledger })
            }
            Self::Postgres(url) => {
                let ledger = PostgresLedger::connect(url).await.map_err(|e| e.to_string())?;
                Ok(Opened { ledger: Arc::new(ledger) })
            }
        }
    }
}

/// An open ledger.
pub struct Opened {
    pub ledger: Arc<dyn Ledger>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_urls_select_the_postgres_ledger_and_never_show_the_password() {
        for url in
            ["postgres://ada:hunter2@db:5432/notices", "postgresql://ada:hunter2@db/notices?sslmode=require"]
        {
            let target = LedgerTarget::parse(url).expect("postgres URL");
            assert_eq!(target, LedgerTarget::Postgres(url.to_owned()));
            assert!(!target.describe().contains("hunter2"), "{}", target.describe());
            assert!(!format!("{target:?}").contains("hunter2"));
            assert!(target.describe().starts_with("postgres://ada@db"), "{}", target.describe());
        }
        let err = LedgerTarget::parse("mysql://ada:hunter2@db/notices").expect_err("unknown scheme");
        assert!(!err.contains("hunter2"), "{err}");
        assert_eq!(LedgerTarget::parse("dynamodb:t"), Ok(LedgerTarget::DynamoDb("t".into())));
    }
}
