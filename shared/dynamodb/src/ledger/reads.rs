//! The ledger's multi-item reads: batched gets and the open-claims index, shard by shard.

use std::time::Duration;

use aws_sdk_dynamodb::types::Select;
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
        Err(LedgerError::unavailable(format!(
            "DynamoDB BatchGetItem on {}: {} keys still unprocessed after {BATCH_GET_ATTEMPTS} attempts",
            self.table,
            pending.len()
        )))
    }

    /// One `BatchGetItem` request: (items found, keys left unprocessed).
    async fn batch_get_round(&self, keys: Vec<Item>) -> Result<(Vec<Item>, Vec<Item>), LedgerError> {
        self.lean.batch_get_item(&self.table, &keys).await.map_err(|f| match f {
            HotFailure::Condition(_) => LedgerError::unavailable(format!(
                "DynamoDB BatchGetItem on {}: unexpected condition failure",
                self.table
            )),
            HotFailure::Other(fault, text) => LedgerError::faulted(
                crate::SERVICE,
                fault,
                format!("DynamoDB BatchGetItem on {}: {text}", self.table),
            ),
        })
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

impl DynamoLedger {
    /// [`notice_ledger::ledger::OperatorLedger::rows_updated_between`]: one page of a `Scan`
    /// filtered on `updated_at` (epoch ms). DynamoDB has no index on it, so this reads the whole
    /// table — read capacity in proportion to the table, at an operator's pace, never on a send
    /// path. `Limit` bounds the items *read* per page, before the filter: a page may hold fewer
    /// rows than `limit` (even none) while `next` is set. Items of other kinds that share the
    /// table (rate buckets, the key check) have no `state` and are filtered out.
    pub(super) async fn scan_updated_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<notice_ledger::ledger::RowPage, LedgerError> {
        let mut filter = Expr::new(SCAN_UPDATED);
        filter
            .name(attr::UPDATED_AT)
            .name(attr::STATE)
            .value(":since", n(since.timestamp_millis()))
            .value(":until", n(until.timestamp_millis()));
        let (names, values) = filter.parts();
        let start = cursor.map(|c| Item::from([(attr::KEY.to_owned(), s(c))]));
        let out = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression(filter.text.as_str())
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.unavailable("Scan", e))?;
        let mut rows = Vec::with_capacity(out.items().len());
        for item in out.items() {
            rows.push(item_to_row(item)?);
        }
        let next = match out.last_evaluated_key().and_then(|k| k.get(attr::KEY)) {
            Some(aws_sdk_dynamodb::types::AttributeValue::S(key)) => Some(key.clone()),
            _ => None,
        };
        Ok(notice_ledger::ledger::RowPage { rows, next })
    }
}

/// The filter of [`DynamoLedger::scan_updated_between`].
const SCAN_UPDATED: &str = "#updated_at >= :since AND #updated_at < :until AND attribute_exists(#state)";

const SHARD_CONDITION: &str = "#open_shard = :shard AND #open_since < :before";

fn shard_condition(shard: &str, before: i64) -> Expr {
    let mut e = Expr::new(SHARD_CONDITION);
    e.name(attr::OPEN_SHARD).name(attr::OPEN_SINCE).value(":shard", s(shard)).value(":before", n(before));
    e
}
