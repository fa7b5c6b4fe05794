//! Which ledger a command works on: `--ledger sqlite:PATH` (default: the state directory's
//! `ledger.db`) or `--ledger dynamodb:TABLE` (the deployed ledger, through the standard AWS
//! environment: AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL…).

use std::path::PathBuf;
use std::sync::Arc;

use notice_ledger::ledger::dynamodb::DynamoLedger;
use notice_ledger::ledger::sqlite::SqliteLedger;
use notice_ledger::ledger::Ledger;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LedgerTarget {
    Sqlite(PathBuf),
    DynamoDb(String),
}

impl LedgerTarget {
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
        Err(format!("unknown ledger {value:?}: use sqlite:PATH or dynamodb:TABLE"))
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Sqlite(p) => format!("sqlite:{}", p.display()),
            Self::DynamoDb(t) => format!("dynamodb:{t}"),
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
        }
    }
}

/// An open ledger.
pub struct Opened {
    pub ledger: Arc<dyn Ledger>,
}
