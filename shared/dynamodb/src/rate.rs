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
//!
//! Takes and reads go through the lean client ([`crate::hot`]), the ledger's one write path.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;

use notice_ledger::rate::{Applied, BucketError, BucketState, BucketStore};
use notice_ledger::LedgerError;

use crate::hot::{HotFailure, HotWrites};

/// Key prefix of bucket items; `#` cannot occur in a notice key or a domain name.
pub const BUCKET_KEY_PREFIX: &str = "rate#";
const KEY: &str = "notice_key";
const TAT: &str = "tat_us";
const EXPIRES: &str = "expires_at";
const UPDATED: &str = "updated_at";

/// Buckets in the ledger table.
#[derive(Clone)]
pub struct DynamoBuckets {
    /// The lean client: the token writes (one per batch and bucket) and the reads.
    lean: HotWrites,
    table: String,
}

impl DynamoBuckets {
    pub fn new(client: impl Into<crate::DynamoClient>, table: impl Into<String>) -> Self {
        Self { lean: client.into().lean().clone(), table: table.into() }
    }

    fn key(bucket: &str) -> HashMap<String, AttributeValue> {
        HashMap::from([(KEY.to_owned(), AttributeValue::S(format!("{BUCKET_KEY_PREFIX}{bucket}")))])
    }

    fn unavailable(op: &str, failure: HotFailure) -> BucketError {
        match failure {
            HotFailure::Other(fault, text) => {
                LedgerError::faulted(crate::SERVICE, fault, format!("rate bucket {op}: {text}"))
            }
            HotFailure::Condition(_) => {
                LedgerError::unavailable(format!("rate bucket {op}: unexpected condition failure"))
            }
        }
        .into()
    }
}

fn state_of(item: &HashMap<String, AttributeValue>) -> Result<BucketState, BucketError> {
    item.get(TAT)
        .and_then(|v| v.as_n().ok())
        .and_then(|n| n.parse::<i64>().ok())
        .map(|tat_us| BucketState { tat_us })
        .ok_or_else(|| BucketError::Corrupt(format!("rate bucket item without a numeric {TAT}")))
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
    ) -> Result<Applied, BucketError> {
        let n = |v: i64| AttributeValue::N(v.to_string());
        // Expires a day after the bucket would be full again: never while its TAT is ahead (a
        // missing bucket is a full one).
        let expires = highest_tat_us / 1_000_000 + 86_400;
        let names = [("#t", TAT), ("#e", EXPIRES), ("#u", UPDATED)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let mut attrs: HashMap<String, AttributeValue> = [
            (":now".to_owned(), n(now_us)),
            (":exp".to_owned(), n(expires)),
            (":upd".to_owned(), n(chrono::Utc::now().timestamp_millis())),
        ]
        .into();
        attrs.extend(values.iter().map(|(name, value)| ((*name).to_owned(), n(*value))));
        match self
            .lean
            .update_item_returning(&self.table, &Self::key(bucket), update, condition, &names, &attrs)
            .await
        {
            Ok(item) => Ok(Applied::Done(state_of(&item)?)),
            Err(HotFailure::Condition(Some(item))) => Ok(Applied::Refused(Some(state_of(&item)?))),
            // No item came back: it did not exist, or this endpoint does not return it.
            Err(HotFailure::Condition(None)) => Ok(Applied::Refused(self.load(bucket).await?)),
            Err(failure) => Err(Self::unavailable("UpdateItem", failure)),
        }
    }
}

#[async_trait]
impl BucketStore for DynamoBuckets {
    async fn add(&self, bucket: &str, add_us: i64, now_us: i64, max_us: i64) -> Result<Applied, BucketError> {
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

    async fn reset(&self, bucket: &str, tat_us: i64, now_us: i64) -> Result<Applied, BucketError> {
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

    async fn load(&self, bucket: &str) -> Result<Option<BucketState>, BucketError> {
        let item = self
            .lean
            .get_item(&self.table, &Self::key(bucket))
            .await
            .map_err(|f| Self::unavailable("GetItem", f))?;
        item.as_ref().map(state_of).transpose()
    }
}
