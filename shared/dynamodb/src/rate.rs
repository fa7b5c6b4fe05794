//! The per-domain rate buckets in DynamoDB: one item per recipient domain in the ledger table,
//! under key `rate#<domain>` (never a 64-hex notice key, never in the open-claims index), holding
//! the GCRA state `tat_us`. Each admission is one conditional `PutItem` on the value it was
//! computed from (`attribute_not_exists` for a new bucket); a lost race returns the winning item
//! with the failure (`ReturnValuesOnConditionCheckFailure=ALL_OLD`), so a retry costs no read.
//! Items expire (TTL `expires_at`) a day after their bucket would be full again: an idle domain
//! leaves nothing behind, and a missing bucket is a full one.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};

use notice_ledger::rate::{BucketState, BucketStore, Swap};
use notice_ledger::LedgerError;

/// Key prefix of bucket items; `#` cannot occur in a notice key or a domain name.
pub const BUCKET_KEY_PREFIX: &str = "rate#";
const KEY: &str = "notice_key";
const TAT: &str = "tat_us";
const EXPIRES: &str = "expires_at";
const UPDATED: &str = "updated_at";

/// Buckets in the ledger table.
#[derive(Clone)]
pub struct DynamoBuckets {
    client: aws_sdk_dynamodb::Client,
    table: String,
}

impl DynamoBuckets {
    /// Buckets go through the SDK client (they are off the claim, send, commit path by default).
    pub fn new(client: impl Into<crate::DynamoClient>, table: impl Into<String>) -> Self {
        Self { client: client.into().sdk, table: table.into() }
    }

    fn key(domain: &str) -> AttributeValue {
        AttributeValue::S(format!("{BUCKET_KEY_PREFIX}{domain}"))
    }

    fn unavailable(op: &str, e: impl std::error::Error) -> LedgerError {
        LedgerError::Unavailable(format!("rate bucket {op}: {}", DisplayErrorContext(e)))
    }
}

fn state_of(item: &std::collections::HashMap<String, AttributeValue>) -> Result<BucketState, LedgerError> {
    item.get(TAT)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse::<i64>().ok())
        .map(|tat_us| BucketState { tat_us })
        .ok_or_else(|| LedgerError::Corrupt(format!("rate bucket item without a numeric {TAT}")))
}

#[async_trait]
impl BucketStore for DynamoBuckets {
    async fn load(&self, domain: &str) -> Result<Option<BucketState>, LedgerError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(KEY, Self::key(domain))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| Self::unavailable("GetItem", e))?;
        out.item().map(state_of).transpose()
    }

    async fn swap(
        &self,
        domain: &str,
        expected: Option<BucketState>,
        new: BucketState,
    ) -> Result<Swap, LedgerError> {
        let now = chrono::Utc::now();
        let expires = new.tat_us / 1_000_000 + 86_400;
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(KEY, Self::key(domain))
            .item(TAT, AttributeValue::N(new.tat_us.to_string()))
            .item(EXPIRES, AttributeValue::N(expires.to_string()))
            .item(UPDATED, AttributeValue::N(now.timestamp_millis().to_string()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        put = match expected {
            None => {
                put.condition_expression("attribute_not_exists(#k)").expression_attribute_names("#k", KEY)
            }
            Some(old) => put
                .condition_expression("#t = :old")
                .expression_attribute_names("#t", TAT)
                .expression_attribute_values(":old", AttributeValue::N(old.tat_us.to_string())),
        };
        match put.send().await {
            Ok(_) => Ok(Swap::Done),
            Err(SdkError::ServiceError(e)) => match e.err() {
                PutItemError::ConditionalCheckFailedException(c) => match c.item() {
                    Some(item) => Ok(Swap::Conflict(Some(state_of(item)?))),
                    // No item came back: it did not exist, or this endpoint does not return it.
                    None => Ok(Swap::Conflict(self.load(domain).await?)),
                },
                _ => Err(Self::unavailable("PutItem", SdkError::ServiceError(e))),
            },
            Err(e) => Err(Self::unavailable("PutItem", e)),
        }
    }
}
