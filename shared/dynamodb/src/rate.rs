//! The per-domain rate buckets in DynamoDB: one item per recipient domain in the ledger table,
//! under key `rate#<domain>` (never a 64-hex notice key, never in the open-claims index), holding
//! the GCRA state `tat_us` (the account's bucket is `rate#@account`). A take of k tokens is one
//! conditional `UpdateItem` whose condition
//! DynamoDB evaluates when it applies the write, so concurrent senders queue on the item instead
//! of failing each other:
//!
//! * busy bucket (TAT ≥ now): `SET tat_us = tat_us + k·interval` if `now ≤ tat_us ≤ now +
//!   (burst − k)·interval` — any number of senders add their k intervals, each admitted while
//!   the room lasts;
//! * idle bucket (TAT < now, or no item): `SET tat_us = now + k·interval` if the item is absent or
//!   `tat_us < now`.
//!
//! A write fails its condition only when the bucket is full or crossed between idle and busy;
//! the failure returns the item (`ReturnValuesOnConditionCheckFailure=ALL_OLD`), so the retry is
//! computed from the current TAT and costs no read.
//! Items expire (TTL `expires_at`) a day after their bucket would be full again: an idle domain
//! leaves nothing behind, and a missing bucket is a full one.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};

use notice_ledger::rate::{Applied, BucketState, BucketStore};
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
    /// The lean client for the token writes (one per batch and domain), when the caller has one.
    hot: Option<crate::hot::HotWrites>,
    table: String,
}

impl DynamoBuckets {
    /// Token writes go through the lean client when `client` carries one (the Lambdas'), reads
    /// through the SDK.
    pub fn new(client: impl Into<crate::DynamoClient>, table: impl Into<String>) -> Self {
        let client = client.into();
        Self { client: client.sdk, hot: client.hot, table: table.into() }
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

impl DynamoBuckets {
    /// One conditional `UpdateItem` of the bucket; a refused condition returns the item.
    async fn update(
        &self,
        bucket: &str,
        now_us: i64,
        highest_tat_us: i64,
        update: &str,
        condition: &str,
        values: &[(&str, i64)],
    ) -> Result<Applied, LedgerError> {
        let n = |v: i64| AttributeValue::N(v.to_string());
        // Expires a day after the bucket would be full again: never while its TAT is ahead (a
        // missing bucket is a full one).
        let expires = highest_tat_us / 1_000_000 + 86_400;
        if let Some(hot) = &self.hot {
            let key: std::collections::HashMap<String, AttributeValue> =
                [(KEY.to_owned(), Self::key(bucket))].into();
            let names = [("#t", TAT), ("#e", EXPIRES), ("#u", UPDATED)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            let mut attrs: std::collections::HashMap<String, AttributeValue> = [
                (":now".to_owned(), n(now_us)),
                (":exp".to_owned(), n(expires)),
                (":upd".to_owned(), n(chrono::Utc::now().timestamp_millis())),
            ]
            .into();
            attrs.extend(values.iter().map(|(name, value)| ((*name).to_owned(), n(*value))));
            return match hot.update_item_returning(&self.table, &key, update, condition, &names, &attrs).await
            {
                Ok(item) => Ok(Applied::Done(state_of(&item)?)),
                Err(crate::hot::HotFailure::Condition(Some(item))) => {
                    Ok(Applied::Refused(Some(state_of(&item)?)))
                }
                Err(crate::hot::HotFailure::Condition(None)) => {
                    Ok(Applied::Refused(self.load(bucket).await?))
                }
                Err(crate::hot::HotFailure::Other(e)) => {
                    Err(LedgerError::Unavailable(format!("rate bucket UpdateItem: {e}")))
                }
            };
        }
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, Self::key(bucket))
            .update_expression(update)
            .condition_expression(condition)
            .expression_attribute_names("#t", TAT)
            .expression_attribute_names("#e", EXPIRES)
            .expression_attribute_names("#u", UPDATED)
            .expression_attribute_values(":now", n(now_us))
            .expression_attribute_values(":exp", n(expires))
            .expression_attribute_values(":upd", n(chrono::Utc::now().timestamp_millis()))
            .return_values(ReturnValue::UpdatedNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        for (name, value) in values {
            request = request.expression_attribute_values(*name, n(*value));
        }
        match request.send().await {
            Ok(out) => match out.attributes() {
                Some(item) => Ok(Applied::Done(state_of(item)?)),
                None => Err(LedgerError::Corrupt("rate bucket UpdateItem returned no attributes".into())),
            },
            Err(SdkError::ServiceError(e)) => match e.err() {
                UpdateItemError::ConditionalCheckFailedException(c) => match c.item() {
                    Some(item) => Ok(Applied::Refused(Some(state_of(item)?))),
                    // No item came back: it did not exist, or this endpoint does not return it.
                    None => Ok(Applied::Refused(self.load(bucket).await?)),
                },
                _ => Err(Self::unavailable("UpdateItem", SdkError::ServiceError(e))),
            },
            Err(e) => Err(Self::unavailable("UpdateItem", e)),
        }
    }
}

#[async_trait]
impl BucketStore for DynamoBuckets {
    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, LedgerError> {
        self.update(
            bucket,
            now_us,
            max_us.saturating_add(add_us),
            "SET #t = #t + :add, #e = :exp, #u = :upd",
            "#t >= :now AND #t <= :max",
            &[(":add", add_us), (":max", max_us)],
        )
        .await
    }

    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, LedgerError> {
        self.update(
            bucket,
            now_us,
            tat_us,
            "SET #t = :new, #e = :exp, #u = :upd",
            "attribute_not_exists(#t) OR #t < :now",
            &[(":new", tat_us)],
        )
        .await
    }

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
}
