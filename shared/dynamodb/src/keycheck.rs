//! The key check in DynamoDB: one item in the ledger table under key `meta#key_check` (never a
//! 64-hex notice key), its attribute `key_check` holding the stored form `<version>:<64 hex>`.
//! It has no `state`, no open-claims index keys and no `expires_at`, so it is never an open claim
//! and never expires; the key scan skips it like the `rate#…` items (its key is no notice key).
//!
//! Recording is one `PutItem` conditioned on `attribute_not_exists(notice_key)`: of two senders
//! starting at once on an empty table, DynamoDB applies the first and refuses the second, which
//! then reads the first's check back (strongly consistent).

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::AttributeValue;

use notice_ledger::keycheck::{KeyCheck, KeyCheckStore};
use notice_ledger::LedgerError;

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
    client: aws_sdk_dynamodb::Client,
    table: String,
}

impl DynamoKeyCheck {
    /// Reads and the one write go through the SDK (once per start, never on a send path).
    pub fn new(client: impl Into<crate::DynamoClient>, table: impl Into<String>) -> Self {
        Self { client: client.into().sdk, table: table.into() }
    }

    fn unavailable(&self, op: &str, e: impl std::error::Error) -> LedgerError {
        LedgerError::Unavailable(format!(
            "DynamoDB key check {op} on {}: {}",
            self.table,
            DisplayErrorContext(e)
        ))
    }
}

#[async_trait]
impl KeyCheckStore for DynamoKeyCheck {
    async fn key_check_of(&self, version: u32) -> Result<Option<KeyCheck>, LedgerError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, AttributeValue::S(item_key(version)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.unavailable("GetItem", e))?;
        let Some(item) = out.item() else { return Ok(None) };
        match item.get(VALUE) {
            Some(AttributeValue::S(stored)) => KeyCheck::parse(stored).map(Some),
            _ => Err(LedgerError::Corrupt(format!("{KEY_CHECK_ITEM_KEY} item without a string {VALUE}"))),
        }
    }

    async fn record_key_check(&self, check: &KeyCheck) -> Result<KeyCheck, LedgerError> {
        let written = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(KEY, AttributeValue::S(item_key(check.version_number())))
            .item(VALUE, AttributeValue::S(check.to_stored()))
            .condition_expression("attribute_not_exists(#k)")
            .expression_attribute_names("#k", KEY)
            .send()
            .await;
        match written {
            Ok(_) => Ok(check.clone()),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), PutItemError::ConditionalCheckFailedException(_)) =>
            {
                self.key_check_of(check.version_number()).await?.ok_or_else(|| {
                    LedgerError::Corrupt(format!("{KEY_CHECK_ITEM_KEY} refused a write yet cannot be read"))
                })
            }
            Err(e) => Err(self.unavailable("PutItem", e)),
        }
    }
}
