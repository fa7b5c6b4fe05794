//! The per-domain rate buckets in DynamoDB: one item per recipient domain in the ledger table,
//! under key `rate#<domain>` (never a 64-hex notice key, never in the open-claims index), holding
//! the GCRA state `tat_us`. A take of k tokens is one conditional `UpdateItem` whose condition
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
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};

use notice_ledger::rate::{grant, BucketState, BucketStore, Limit, Swap, Taken};
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

/// Conditional-increment rounds per take: each failed round returns the current TAT, so a second
/// round is exact unless the bucket crossed between idle and busy again meanwhile.
const TAKE_ATTEMPTS: u32 = 4;

impl DynamoBuckets {
    /// One conditional increment of k tokens, computed for `known`. `Ok(Ok(state))`: taken;
    /// `Ok(Err(current))`: the condition failed and the bucket holds `current`.
    async fn increment(
        &self,
        domain: &str,
        k: u32,
        now_us: i64,
        limit: &Limit,
        known: Option<BucketState>,
    ) -> Result<Result<BucketState, Option<BucketState>>, LedgerError> {
        let interval = limit.interval_us();
        let add = i64::from(k).saturating_mul(interval);
        let n = |v: i64| AttributeValue::N(v.to_string());
        let ceiling = now_us.saturating_add(i64::from(limit.burst).saturating_mul(interval));
        // Expires a day after the bucket would be full again (TAT is at most `ceiling` after this).
        let expires = ceiling / 1_000_000 + 86_400;
        let busy = known.is_some_and(|s| s.tat_us >= now_us);
        let update = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(KEY, Self::key(domain))
            .expression_attribute_names("#t", TAT)
            .expression_attribute_names("#e", EXPIRES)
            .expression_attribute_names("#u", UPDATED)
            .expression_attribute_values(":now", n(now_us))
            .expression_attribute_values(":exp", n(expires))
            .expression_attribute_values(":upd", n(chrono::Utc::now().timestamp_millis()))
            .return_values(ReturnValue::UpdatedNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        let update = if busy {
            update
                .update_expression("SET #t = #t + :add, #e = :exp, #u = :upd")
                .condition_expression("#t >= :now AND #t <= :max")
                .expression_attribute_values(":add", n(add))
                .expression_attribute_values(":max", n(ceiling.saturating_sub(add)))
        } else {
            update
                .update_expression("SET #t = :new, #e = :exp, #u = :upd")
                .condition_expression("attribute_not_exists(#t) OR #t < :now")
                .expression_attribute_values(":new", n(now_us.saturating_add(add)))
        };
        match update.send().await {
            Ok(out) => match out.attributes() {
                Some(item) => Ok(Ok(state_of(item)?)),
                None => Err(LedgerError::Corrupt("rate bucket UpdateItem returned no attributes".into())),
            },
            Err(SdkError::ServiceError(e)) => match e.err() {
                UpdateItemError::ConditionalCheckFailedException(c) => match c.item() {
                    Some(item) => Ok(Err(Some(state_of(item)?))),
                    // No item came back: it did not exist, or this endpoint does not return it.
                    None => Ok(Err(self.load(domain).await?)),
                },
                _ => Err(Self::unavailable("UpdateItem", SdkError::ServiceError(e))),
            },
            Err(e) => Err(Self::unavailable("UpdateItem", e)),
        }
    }
}

#[async_trait]
impl BucketStore for DynamoBuckets {
    async fn take(
        &self,
        domain: &str,
        want: u32,
        now_us: i64,
        limit: &Limit,
        hint: Option<BucketState>,
    ) -> Result<Taken, LedgerError> {
        let mut known = hint;
        let mut conflicts = 0;
        for _ in 0..TAKE_ATTEMPTS {
            // A remembered state only under-estimates TAT: no room by it is no room at all.
            let k = grant(known, now_us, want, limit).granted;
            if k == 0 {
                return Ok(Taken { granted: 0, state: known, conflicts });
            }
            match self.increment(domain, k, now_us, limit, known).await? {
                Ok(state) => return Ok(Taken { granted: k, state: Some(state), conflicts }),
                Err(current) => {
                    conflicts += 1;
                    known = current;
                }
            }
        }
        Ok(Taken { granted: 0, state: known, conflicts })
    }

    fn takes_atomically(&self) -> bool {
        true
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
