//! The key check in DynamoDB: one item in the ledger table under key `meta#key_check` (never a
//! 64-hex notice key), its attribute `key_check` holding the stored form `<version>:<64 hex>`.
//! It has no `state`, no open-claims index keys and no `expires_at`, so it is never an open claim
//! and never expires; the key scan skips it like the `rate#…` items (its key is no notice key).
//!
//! Recording is one `PutItem` conditioned on `attribute_not_exists(notice_key)`: of two senders
//! starting at once on an empty table, DynamoDB applies the first and refuses the second, which
//! then reads the first's check back (strongly consistent). Both go through the lean client
//! ([`crate::hot`]), the table's one write path.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;

use crate::hot::{HotFailure, HotWrites};

use notice_ledger::keycheck::{KeyCheck, KeyCheckStore};
use notice_ledger::{Fault, LedgerError};

/// Key of the first secret version's key check item; `#` cannot occur in a notice key. Later
/// versions' checks sit beside it (`meta#key_check#v2`, …).
pub const KEY_CHECK_ITEM_KEY: &str = "meta#key_check";

/// The item key of secret version `version`'s check.
pub fn item_key(version: u32) -> String {
    if version <= 1 {
        KEY_CHECK_ITEM_KEY.to_owned()
    } else {
        format!("{KEY_CHECK_ITEM_KEY}#{}", notice_ledger::keyring::version_name(version))
    }
}
const KEY: &str = "notice_key";
const VALUE: &str = "key_check";

/// The key check in the ledger table.
#[derive(Clone, Debug)]
pub struct DynamoKeyCheck {
    lean: HotWrites,
    table: String,
}

impl DynamoKeyCheck {
    /// Read and written once per start, never on a send path.
    pub fn new(client: impl Into<crate::DynamoClient>, table: impl Into<String>) -> Self {
        Self { lean: client.into().lean().clone(), table: table.into() }
    }

    fn unavailable(&self, fault: Fault, op: &str, text: &str) -> LedgerError {
        LedgerError::faulted(
            crate::SERVICE,
            fault,
            format!("DynamoDB key check {op} on {}: {text}", self.table),
        )
    }

    fn key(version: u32) -> HashMap<String, AttributeValue> {
        HashMap::from([(KEY.to_owned(), AttributeValue::S(item_key(version)))])
    }
}

#[async_trait]
impl KeyCheckStore for DynamoKeyCheck {
    async fn key_check_of(&self, version: u32) -> Result<Option<KeyCheck>, LedgerError> {
        let item = match self.lean.get_item(&self.table, &Self::key(version)).await {
            Ok(item) => item,
            Err(HotFailure::Other(fault, text)) => return Err(self.unavailable(fault, "GetItem", &text)),
            Err(HotFailure::Condition(_)) => {
                return Err(self.unavailable(Fault::Other, "GetItem", "unexpected condition failure"))
            }
        };
        let Some(item) = item else { return Ok(None) };
        match item.get(VALUE) {
            Some(AttributeValue::S(stored)) => KeyCheck::parse(stored).map(Some),
            _ => Err(LedgerError::Corrupt(format!("{KEY_CHECK_ITEM_KEY} item without a string {VALUE}"))),
        }
    }

    async fn record_key_check(&self, check: &KeyCheck) -> Result<KeyCheck, LedgerError> {
        let mut item = Self::key(check.version_number());
        item.insert(VALUE.to_owned(), AttributeValue::S(check.to_stored()));
        let names = HashMap::from([("#k".to_owned(), KEY.to_owned())]);
        let written =
            self.lean.put_item(&self.table, &item, "attribute_not_exists(#k)", &names, &HashMap::new()).await;
        match written {
            Ok(()) => Ok(check.clone()),
            // Another sender recorded its check first: read it back (consistently) and compare.
            Err(HotFailure::Condition(_)) => {
                self.key_check_of(check.version_number()).await?.ok_or_else(|| {
                    LedgerError::Corrupt(format!("{KEY_CHECK_ITEM_KEY} refused a write yet cannot be read"))
                })
            }
            Err(HotFailure::Other(fault, text)) => Err(self.unavailable(fault, "PutItem", &text)),
        }
    }
}
