//! DynamoDB ledger: the production adapter, one item per notice key.
//!
//! Every write is a single conditional request, so DynamoDB itself arbitrates races: a claim is
//! one `PutItem` guarded by "no row, or a released row" (during a key rotation, one
//! `TransactWriteItems` with its aliases), and every transition out of `claimed` is an
//! `UpdateItem` guarded by the claim token. Every write goes through one path, the lean client in
//! `hot`, which retries like the SDK's standard policy, so a write whose first response was lost
//! can come back as a failed condition; each write reads the item DynamoDB returns with the
//! failure (`ReturnValuesOnConditionCheckFailure::ALL_OLD`) and recognises its own earlier write
//! instead of reporting a conflict. Single reads go through it too; only the operator-pace
//! queries and scans (the quarantine view, the key and time scans) use the SDK client.
//!
//! Open claims on the quarantine view carry `open_shard` (the key's first hex character) and
//! `open_since` (claim time, epoch ms), the keys of the sparse GSI `open_claims`; every transition
//! out of `claimed` removes them, so the quarantine view queries 16 small partitions and never
//! scans the table. A claim made off the view (`ClaimRequest::on_quarantine_view` false: the
//! sender Lambda's) has neither until `put_on_quarantine_view` gives them, so a notice claimed,
//! sent and committed costs two writes and no index write.
//! `expires_at` (epoch seconds) is the table's TTL: last write plus the retention period, set only
//! once a row leaves `claimed` — an open claim never expires, however long it waits for a human.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use chrono::{DateTime, Utc};
use futures::future::try_join_all;

use notice_awshttp::fault::sdk_fault;
use notice_ledger::ledger::{LedgerRow, QuarantineView, RowReader, RowState};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

use crate::expr::Expr;
use crate::hot::{HotFailure, HotWrites};
use crate::item::{attr, get_key, item_to_row, row_to_item, s, Item};
use crate::DynamoClient;

/// The sparse GSI over open claims.
pub const OPEN_CLAIMS_INDEX: &str = "open_claims";
/// `open_shard` values: a notice key is uniformly distributed hex, so its first character spreads
/// open claims evenly over 16 index partitions.
const SHARDS: [&str; 16] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f"];
/// Default TTL: a little over a year, so a yearly renewal's previous notice is still on record.
const DEFAULT_RETENTION_DAYS: u32 = 400;
/// BatchGetItem's per-request key limit.
const BATCH_GET_MAX: usize = 100;
/// Rounds of `UnprocessedKeys` retries before giving up.
const BATCH_GET_ATTEMPTS: u32 = 8;

/// The DynamoDB ledger.
#[derive(Clone, Debug)]
pub struct DynamoLedger {
    /// The SDK client: the operator-pace queries and scans only.
    client: aws_sdk_dynamodb::Client,
    /// The lean client: every write, every single read and the batch read.
    lean: HotWrites,
    table: String,
    retention: chrono::Duration,
}

/// How a conditional write failed.
enum WriteFailure {
    /// The condition did not hold; the item as it was, when DynamoDB returned it.
    Condition(Option<Item>),
    Other(LedgerError),
}

mod claim;
mod evidence;
mod operator;
mod reads;

impl DynamoLedger {
    /// A ledger over `table`, keeping rows for 400 days after their last write.
    pub fn new(client: impl Into<DynamoClient>, table: impl Into<String>) -> Self {
        let client = client.into();
        Self {
            client: client.sdk().clone(),
            lean: client.lean().clone(),
            table: table.into(),
            retention: chrono::Duration::days(DEFAULT_RETENTION_DAYS.into()),
        }
    }

    /// How long a row outlives its last write before DynamoDB's TTL may delete it.
    pub fn with_retention(mut self, days: u32) -> Self {
        self.retention = chrono::Duration::days(days.into());
        self
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    /// Open claims claimed before `claimed_before`: how many, and when the oldest was claimed.
    /// Cheap enough for a reporter on every tick: a `COUNT` query per shard, plus one `Limit 1`
    /// query reading only `open_since` per shard that has any.
    pub async fn count_open_claims(
        &self,
        claimed_before: DateTime<Utc>,
    ) -> Result<(usize, Option<DateTime<Utc>>), LedgerError> {
        let before = claimed_before.timestamp_millis();
        let per_shard = try_join_all(SHARDS.iter().map(|shard| self.count_shard(shard, before))).await?;
        let count = per_shard.iter().map(|(n, _)| n).sum();
        let oldest = per_shard.iter().filter_map(|(_, oldest)| *oldest).min();
        Ok((count, oldest))
    }

    /// Epoch seconds at which a row written now (about a row last updated at `at`) may expire.
    fn expires_at(&self, at: DateTime<Utc>) -> i64 {
        (at.max(Utc::now()) + self.retention).timestamp()
    }

    /// An SDK call's failure, its fault read from the SDK's typed error: the service's error code,
    /// a timeout, missing credentials, or the I/O error under a dispatch failure.
    fn unavailable<E, R>(&self, op: &str, err: SdkError<E, R>) -> LedgerError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug + 'static,
    {
        let fault = sdk_fault(&err, &format!("dynamodb:{op}"));
        LedgerError::faulted(
            crate::SERVICE,
            fault,
            format!("DynamoDB {op} on {}: {}", self.table, DisplayErrorContext(err)),
        )
    }

    /// A hot write's failure as the SDK path reports it.
    fn hot_failure(&self, op: &str, failure: HotFailure) -> WriteFailure {
        match failure {
            HotFailure::Condition(item) => WriteFailure::Condition(item),
            HotFailure::Other(fault, text) => WriteFailure::Other(LedgerError::faulted(
                crate::SERVICE,
                fault,
                format!("DynamoDB {op} on {}: {text}", self.table),
            )),
        }
    }

    fn key_item(key: &NoticeKey) -> Item {
        HashMap::from([(attr::KEY.to_owned(), s(key.as_str()))])
    }

    /// Conditional `PutItem` of a whole row.
    async fn put_row(&self, row: &LedgerRow, condition: Expr) -> Result<(), WriteFailure> {
        let item = row_to_item(row, self.expires_at(row.updated_at));
        self.lean
            .put_item(&self.table, &item, &condition.text, &condition.names, &condition.values)
            .await
            .map_err(|f| self.hot_failure("PutItem", f))
    }

    /// The row a failed condition was checked against: from the error when DynamoDB returned it,
    /// else read back (consistently).
    async fn conflicting_row(
        &self,
        key: &NoticeKey,
        old: Option<Item>,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        match old {
            Some(item) => item_to_row(&item).map(Some),
            None => self.get(key).await,
        }
    }
}

#[async_trait]
impl RowReader for DynamoLedger {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        let item = self.lean.get_item(&self.table, &Self::key_item(key)).await.map_err(|f| match f {
            HotFailure::Other(fault, text) => LedgerError::faulted(
                crate::SERVICE,
                fault,
                format!("DynamoDB GetItem on {}: {text}", self.table),
            ),
            HotFailure::Condition(_) => LedgerError::unavailable(format!(
                "DynamoDB GetItem on {}: unexpected condition failure",
                self.table
            )),
        })?;
        item.as_ref().map(item_to_row).transpose()
    }
    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        // BatchGetItem refuses a request naming the same key twice.
        let mut seen = HashSet::new();
        let distinct: Vec<&NoticeKey> = keys.iter().filter(|k| seen.insert(*k)).collect();
        let mut found = HashMap::with_capacity(distinct.len());
        for chunk in distinct.chunks(BATCH_GET_MAX) {
            for row in self.get_chunk(chunk).await? {
                found.insert(row.key.clone(), row);
            }
        }
        // Answer in the caller's order, like the other adapters.
        Ok(distinct.into_iter().filter_map(|k| found.remove(k)).collect())
    }
}

#[async_trait]
impl QuarantineView for DynamoLedger {
    async fn count_open_claims(
        &self,
        claimed_before: DateTime<Utc>,
    ) -> Result<(usize, Option<DateTime<Utc>>), LedgerError> {
        DynamoLedger::count_open_claims(self, claimed_before).await
    }
    async fn open_claims(
        &self,
        claimed_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<LedgerRow>, LedgerError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let before = claimed_before.timestamp_millis();
        let shards =
            try_join_all(SHARDS.iter().map(|shard| self.open_in_shard(shard, before, limit))).await?;
        let items: Vec<Item> = shards.into_iter().flatten().collect();
        let mut rows = if items.iter().all(|item| item.contains_key(attr::STATE)) {
            items.iter().map(item_to_row).collect::<Result<Vec<_>, _>>()?
        } else {
            // The index projects only keys: read the rows themselves, and keep those still open.
            let keys = items.iter().map(get_key).collect::<Result<Vec<_>, _>>()?;
            self.get_many(&keys)
                .await?
                .into_iter()
                .filter(|r| r.state == RowState::Claimed && r.claimed_at.is_some_and(|t| t < claimed_before))
                .collect()
        };
        rows.sort_by(|a, b| a.claimed_at.cmp(&b.claimed_at).then_with(|| a.key.cmp(&b.key)));
        rows.truncate(limit);
        Ok(rows)
    }
}

#[cfg(test)]
mod tests;
