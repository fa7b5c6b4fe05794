//! The ledger's multi-item reads: batched gets and the open-claims index, shard by shard.

use std::time::Duration;

use aws_sdk_dynamodb::types::{KeysAndAttributes, Select};
use chrono::{DateTime, Utc};
use notice_ledger::ledger::LedgerRow;
use notice_ledger::{LedgerError, NoticeKey};
use tracing::warn;

use super::{DynamoLedger, BATCH_GET_ATTEMPTS, OPEN_CLAIMS_INDEX};
use crate::expr::Expr;
use crate::hot::HotFailure;
use crate::item::{attr, get_time, item_to_row, n, s, Item};

impl DynamoLedger {
    /// One BatchGetItem chunk (≤ 100 distinct keys), retrying `UnprocessedKeys` with backoff.
    /// Through the lean client when there is one (the sender's batch read), else the SDK.
    pub(super) async fn get_chunk(&self, keys: &[&NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        let mut pending: Vec<Item> = keys.iter().map(|k| Self::key_item(k)).collect();
        let mut rows = Vec::with_capacity(keys.len());
        let mut delay = Duration::from_millis(50);
        for attempt in 1..=BATCH_GET_ATTEMPTS {
            let (items, unprocessed) = self.batch_get_round(std::mem::take(&mut pending)).await?;
            for item in &items {
                rows.push(item_to_row(item)?);
            }
            pending = unprocessed;
            if pending.is_empty() {
                return Ok(rows);
            }
            if attempt < BATCH_GET_ATTEMPTS {
                warn!(
                    unprocessed = pending.len(),
                    attempt, "BatchGetItem left keys unprocessed; backing off"
                );
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        }
        Err(LedgerError::Unavailable(format!(
            "DynamoDB BatchGetItem on {}: {} keys still unprocessed after {BATCH_GET_ATTEMPTS} attempts",
            self.table,
            pending.len()
        )))
    }

    /// One `BatchGetItem` request: (items found, keys left unprocessed).
    async fn batch_get_round(&self, keys: Vec<Item>) -> Result<(Vec<Item>, Vec<Item>), LedgerError> {
        if let Some(hot) = &self.hot {
            return hot.batch_get_item(&self.table, &keys).await.map_err(|f| match f {
                HotFailure::Condition(_) => LedgerError::Unavailable(format!(
                    "DynamoDB BatchGetItem on {}: unexpected condition failure",
                    self.table
                )),
                HotFailure::Other(text) => {
                    LedgerError::Unavailable(format!("DynamoDB BatchGetItem on {}: {text}", self.table))
                }
            });
        }
        let request = KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .consistent_read(true)
            .build()
            .map_err(|e| self.unavailable("BatchGetItem", e))?;
        let out = self
            .client
            .batch_get_item()
            .request_items(&self.table, request)
            .send()
            .await
            .map_err(|e| self.unavailable("BatchGetItem", e))?;
        let found = out.responses().and_then(|r| r.get(&self.table)).cloned().unwrap_or_default();
        let unprocessed = out
            .unprocessed_keys()
            .and_then(|u| u.get(&self.table))
            .map(|k| k.keys().to_vec())
            .unwrap_or_default();
        Ok((found, unprocessed))
    }

    /// A query of one shard of the open-claims index for claims opened before `before` (epoch ms).
    fn shard_query(
        &self,
        shard: &str,
        before: i64,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        let (names, values) = shard_condition(shard, before).parts();
        self.client
            .query()
            .table_name(&self.table)
            .index_name(OPEN_CLAIMS_INDEX)
            .key_condition_expression(SHARD_CONDITION)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
    }

    /// Oldest open claims in one shard, at most `limit`, paginating as needed.
    pub(super) async fn open_in_shard(
        &self,
        shard: &str,
        before: i64,
        limit: usize,
    ) -> Result<Vec<Item>, LedgerError> {
        let mut items = Vec::new();
        let mut start: Option<Item> = None;
        let page = i32::try_from(limit).unwrap_or(i32::MAX);
        loop {
            let out = self
                .shard_query(shard, before)
                .scan_index_forward(true)
                .limit(page)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| self.unavailable("Query", e))?;
            items.extend(out.items().iter().cloned());
            match out.last_evaluated_key() {
                Some(last) if items.len() < limit => start = Some(last.clone()),
                _ => break,
            }
        }
        items.truncate(limit);
        Ok(items)
    }

    /// (count, oldest `open_since`) of one shard's open claims before the cut.
    pub(super) async fn count_shard(
        &self,
        shard: &str,
        before: i64,
    ) -> Result<(usize, Option<DateTime<Utc>>), LedgerError> {
        let mut count = 0usize;
        let mut start: Option<Item> = None;
        loop {
            let out = self
                .shard_query(shard, before)
                .select(Select::Count)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| self.unavailable("Query", e))?;
            count += usize::try_from(out.count()).unwrap_or(0);
            match out.last_evaluated_key() {
                Some(last) => start = Some(last.clone()),
                None => break,
            }
        }
        if count == 0 {
            return Ok((0, None));
        }
        let out = self
            .shard_query(shard, before)
            .projection_expression("#open_since")
            .scan_index_forward(true)
            .limit(1)
            .send()
            .await
            .map_err(|e| self.unavailable("Query", e))?;
        let oldest = match out.items().first() {
            Some(item) => Some(get_time(item, attr::OPEN_SINCE)?),
            None => None,
        };
        Ok((count, oldest))
    }
}

const SHARD_CONDITION: &str = "#open_shard = :shard AND #open_since < :before";

fn shard_condition(shard: &str, before: i64) -> Expr {
    let mut e = Expr::new(SHARD_CONDITION);
    e.name(attr::OPEN_SHARD).name(attr::OPEN_SINCE).value(":shard", s(shard)).value(":before", n(before));
    e
}
