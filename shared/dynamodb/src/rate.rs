//! The shared rate gate in DynamoDB: one counter item per (domain, window) in the ledger table,
//! under keys `rate#<domain>#<window>` that cannot collide with 64-hex notice keys. One
//! conditional `UpdateItem` per admission (`ADD` below the limit), so concurrent senders can
//! never admit more than the limit; items expire a day after their window.

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};

use notice_ledger::rate::{Admission, RateGate, RateLimits};
use notice_ledger::LedgerError;

pub struct DynamoRateGate {
    client: aws_sdk_dynamodb::Client,
    table: String,
    limits: RateLimits,
}

impl DynamoRateGate {
    pub fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>, limits: RateLimits) -> Self {
        Self { client, table: table.into(), limits }
    }
}

#[async_trait]
impl RateGate for DynamoRateGate {
    async fn admit(&self, domain: &str, now: DateTime<Utc>) -> Result<Admission, LedgerError> {
        let (index, end) = self.limits.window(now);
        let limit = self.limits.limit_for(domain);
        if limit == 0 {
            return Ok(Admission::Limited { retry_at: self.limits.retry_at(end) });
        }
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("notice_key", AttributeValue::S(format!("rate#{domain}#{index}")))
            .update_expression("ADD #count :one SET expires_at = :expires")
            .condition_expression("attribute_not_exists(#count) OR #count < :limit")
            .expression_attribute_names("#count", "admitted")
            .expression_attribute_values(":one", AttributeValue::N("1".into()))
            .expression_attribute_values(":limit", AttributeValue::N(limit.to_string()))
            .expression_attribute_values(
                ":expires",
                AttributeValue::N((end.timestamp() + 86_400).to_string()),
            )
            .send()
            .await;
        match result {
            Ok(_) => Ok(Admission::Admitted),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(Admission::Limited { retry_at: self.limits.retry_at(end) })
            }
            Err(e) => Err(LedgerError::Unavailable(format!("rate gate: {}", DisplayErrorContext(&e)))),
        }
    }
}
