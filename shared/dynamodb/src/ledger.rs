//! DynamoDB ledger: the production adapter, one item per notice key.
//!
//! Every write is a single conditional request, so DynamoDB itself arbitrates races: a claim is
//! one `PutItem` guarded by "no row, or a released row", and every transition out of `claimed` is
//! an `UpdateItem` guarded by the claim token. The SDK retries these writes (its retries stay on),
//! so a write whose first response was lost can come back as a failed condition; each write reads
//! the item DynamoDB returns with the failure (`ReturnValuesOnConditionCheckFailure::ALL_OLD`) and
//! recognises its own earlier write instead of reporting a conflict.
//!
//! Open claims carry `open_shard` (the key's first hex character) and `open_since` (claim time,
//! epoch ms), the keys of the sparse GSI `open_claims`; every transition out of `claimed` removes
//! them, so the quarantine view queries 16 small partitions and never scans the table.
//! `expires_at` (epoch seconds) is the table's TTL: last write plus the retention period, set only
//! once a row leaves `claimed` — an open claim never expires, however long it waits for a human.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::error::{DisplayErrorContext, SdkError};
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, ReturnValuesOnConditionCheckFailure, Select,
};
use chrono::{DateTime, TimeZone, Utc};
use futures::future::try_join_all;
use tracing::{debug, warn};

use notice_ledger::ledger::{
    apply_to_row, learned_row, release_detail, resolve_detail, Claim, ClaimOutcome, ClaimRequest, ClaimToken,
    DeliveryStatus, EvidenceEffect, Ledger, LedgerRow, Origin, ProviderEvidence, RowState,
};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

/// Item attribute names: the table schema (`template.yaml` declares the key ones).
mod attr {
    pub const KEY: &str = "notice_key";
    pub const STATE: &str = "state";
    pub const ORIGIN: &str = "origin";
    pub const CLAIM_TOKEN: &str = "claim_token";
    pub const SUBSCRIPTION_ID: &str = "subscription_id";
    pub const PERIOD_START: &str = "period_start";
    pub const KIND: &str = "kind";
    pub const REVISION: &str = "revision";
    pub const CONTENT_DIGEST: &str = "content_digest";
    pub const CLAIMED_AT: &str = "claimed_at";
    pub const UPDATED_AT: &str = "updated_at";
    pub const MESSAGE_ID: &str = "message_id";
    pub const DETAIL: &str = "detail";
    pub const DELIVERY_STATUS: &str = "delivery_status";
    pub const DUPLICATES: &str = "duplicate_message_ids";
    pub const EXPIRES_AT: &str = "expires_at";
    pub const OPEN_SHARD: &str = "open_shard";
    pub const OPEN_SINCE: &str = "open_since";
}

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
/// Read-modify-write rounds for provider evidence before reporting contention.
const EVIDENCE_ATTEMPTS: u32 = 5;

/// `claim`/`record_missed` may write only where no row exists or the row was released.
const CLAIMABLE: &str = "attribute_not_exists(#notice_key) OR #state = :released";

type Item = HashMap<String, AttributeValue>;

/// The DynamoDB ledger.
#[derive(Clone, Debug)]
pub struct DynamoLedger {
    client: aws_sdk_dynamodb::Client,
    table: String,
    retention: chrono::Duration,
}

/// How a conditional write failed.
enum WriteFailure {
    /// The condition did not hold; the item as it was, when DynamoDB returned it.
    Condition(Option<Item>),
    Other(LedgerError),
}

impl DynamoLedger {
    /// A ledger over `table`, keeping rows for 400 days after their last write.
    pub fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>) -> Self {
        Self { client, table: table.into(), retention: chrono::Duration::days(DEFAULT_RETENTION_DAYS.into()) }
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

    fn unavailable(&self, op: &str, err: impl std::error::Error) -> LedgerError {
        LedgerError::Unavailable(format!("DynamoDB {op} on {}: {}", self.table, DisplayErrorContext(err)))
    }

    fn key_item(key: &NoticeKey) -> Item {
        HashMap::from([(attr::KEY.to_owned(), s(key.as_str()))])
    }

    /// Conditional `PutItem` of a whole row.
    async fn put_row(&self, row: &LedgerRow, condition: Expr) -> Result<(), WriteFailure> {
        let item = row_to_item(row, self.expires_at(row.updated_at));
        let (names, values) = condition.parts();
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition.text)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| self.put_failure(e))
    }

    fn put_failure(
        &self,
        err: SdkError<PutItemError, aws_sdk_dynamodb::config::http::HttpResponse>,
    ) -> WriteFailure {
        match err.as_service_error() {
            Some(PutItemError::ConditionalCheckFailedException(e)) => {
                WriteFailure::Condition(e.item().cloned())
            }
            _ => WriteFailure::Other(self.unavailable("PutItem", err)),
        }
    }

    fn update_failure(
        &self,
        err: SdkError<UpdateItemError, aws_sdk_dynamodb::config::http::HttpResponse>,
    ) -> WriteFailure {
        match err.as_service_error() {
            Some(UpdateItemError::ConditionalCheckFailedException(e)) => {
                WriteFailure::Condition(e.item().cloned())
            }
            _ => WriteFailure::Other(self.unavailable("UpdateItem", err)),
        }
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

    /// Claim-style write (`claim`, `record_missed`): the row from `req`, if the key is claimable.
    /// `Ok(None)` means written; `Ok(Some(row))` is the row that held the key.
    async fn put_if_claimable(&self, row: &LedgerRow) -> Result<Option<LedgerRow>, LedgerError> {
        let mut cond = Expr::new(CLAIMABLE);
        cond.name(attr::KEY).name(attr::STATE).value(":released", s(RowState::Released.as_str()));
        match self.put_row(row, cond).await {
            Ok(()) => Ok(None),
            Err(WriteFailure::Other(e)) => Err(e),
            Err(WriteFailure::Condition(old)) => {
                if old.is_none() {
                    warn!(key = row.key.prefix(), "condition failure without the old item; reading it back");
                }
                match self.conflicting_row(&row.key, old).await? {
                    Some(existing) => Ok(Some(existing)),
                    // Vanished between the write and the read (TTL): nothing holds the key now,
                    // but nothing was written either; the caller's redelivery will try again.
                    None => Err(LedgerError::Unavailable(format!(
                        "{} changed during the write; try again",
                        row.key.prefix()
                    ))),
                }
            }
        }
    }

    /// `UpdateItem` that moves a row out of `claimed` (dropping it from the open-claims index).
    /// `guard` adds to the `#state = :claimed` condition; `replayed` recognises the result of this
    /// same write already applied (an SDK retry after a lost response) so it is not a conflict.
    #[allow(clippy::too_many_arguments)]
    async fn leave_claimed(
        &self,
        key: &NoticeKey,
        to: RowState,
        at: DateTime<Utc>,
        set: &[(&'static str, AttributeValue)],
        token_guard: Option<&ClaimToken>,
        replayed: impl Fn(&LedgerRow) -> bool,
        conflict: impl Fn(&LedgerRow) -> String,
    ) -> Result<(), LedgerError> {
        let mut e = Expr::new(String::new());
        let mut sets = vec![
            format!("{} = :to", e.name_of(attr::STATE)),
            format!("{} = :at", e.name_of(attr::UPDATED_AT)),
            format!("{} = :exp", e.name_of(attr::EXPIRES_AT)),
        ];
        e.value(":to", s(to.as_str()))
            .value(":at", n(at.timestamp_millis()))
            .value(":exp", n(self.expires_at(at)));
        for (i, (name, value)) in set.iter().enumerate() {
            let placeholder = format!(":v{i}");
            sets.push(format!("{} = {placeholder}", e.name_of(name)));
            e.value(&placeholder, value.clone());
        }
        let update = format!(
            "SET {} REMOVE {}, {}",
            sets.join(", "),
            e.name_of(attr::OPEN_SHARD),
            e.name_of(attr::OPEN_SINCE)
        );
        let mut condition = format!("{} = :claimed", e.name_of(attr::STATE));
        e.value(":claimed", s(RowState::Claimed.as_str()));
        if let Some(token) = token_guard {
            condition.push_str(&format!(" AND {} = :token", e.name_of(attr::CLAIM_TOKEN)));
            e.value(":token", s(token.as_str()));
        }
        let (names, values) = e.parts();
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key_item(key)))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result.map_err(|err| self.update_failure(err)) {
            Ok(_) => Ok(()),
            Err(WriteFailure::Other(e)) => Err(e),
            Err(WriteFailure::Condition(old)) => match self.conflicting_row(key, old).await? {
                Some(row) if replayed(&row) => {
                    debug!(key = key.prefix(), state = %to, "write already applied (retried request)");
                    Ok(())
                }
                Some(row) => Err(LedgerError::Conflict(conflict(&row))),
                None => Err(LedgerError::Conflict(format!("{} has no ledger row", key.prefix()))),
            },
        }
    }

    /// A worker transition: `claimed` with this claim's token → `to`.
    async fn transition(
        &self,
        claim: &Claim,
        to: RowState,
        at: DateTime<Utc>,
        set: &[(&'static str, AttributeValue)],
        same_result: impl Fn(&LedgerRow) -> bool,
    ) -> Result<(), LedgerError> {
        let replayed = |row: &LedgerRow| {
            row.state == to && row.claim_token.as_ref() == Some(&claim.token) && same_result(row)
        };
        let conflict =
            |row: &LedgerRow| format!("{} is {} and not held by this claim", claim.key.prefix(), row.state);
        self.leave_claimed(&claim.key, to, at, set, Some(&claim.token), replayed, conflict).await
    }

    /// An operator transition: any open claim → `to`, origin `operator`.
    async fn operator_transition(
        &self,
        key: &NoticeKey,
        to: RowState,
        at: DateTime<Utc>,
        detail: String,
        message_id: Option<&str>,
    ) -> Result<(), LedgerError> {
        let mut set = vec![(attr::ORIGIN, s(Origin::Operator.as_str())), (attr::DETAIL, s(&detail))];
        if let Some(id) = message_id {
            set.push((attr::MESSAGE_ID, s(id)));
        }
        let replayed = |row: &LedgerRow| {
            row.state == to
                && row.origin == Origin::Operator
                && row.detail.as_deref() == Some(detail.as_str())
                && message_id.is_none_or(|id| row.message_id.as_deref() == Some(id))
        };
        let conflict = |row: &LedgerRow| format!("{} is {}, not an open claim", key.prefix(), row.state);
        self.leave_claimed(key, to, at, &set, None, replayed, conflict).await
    }

    /// One BatchGetItem chunk (≤ 100 distinct keys), retrying `UnprocessedKeys` with backoff.
    async fn get_chunk(&self, keys: &[&NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        let mut pending: Vec<Item> = keys.iter().map(|k| Self::key_item(k)).collect();
        let mut rows = Vec::with_capacity(keys.len());
        let mut delay = Duration::from_millis(50);
        for attempt in 1..=BATCH_GET_ATTEMPTS {
            let request = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut pending)))
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
            if let Some(items) = out.responses().and_then(|r| r.get(&self.table)) {
                for item in items {
                    rows.push(item_to_row(item)?);
                }
            }
            pending = out
                .unprocessed_keys()
                .and_then(|u| u.get(&self.table))
                .map(|k| k.keys().to_vec())
                .unwrap_or_default();
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
    async fn open_in_shard(&self, shard: &str, before: i64, limit: usize) -> Result<Vec<Item>, LedgerError> {
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
    async fn count_shard(
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

    /// The guard for writing back a row read for evidence: the fields evidence reads and
    /// changes are still what was read.
    fn unchanged_since_read(row: &LedgerRow) -> Expr {
        let mut e = Expr::new(String::new());
        let mut parts = vec![
            format!("{} = :r_state", e.name_of(attr::STATE)),
            format!("{} = :r_updated", e.name_of(attr::UPDATED_AT)),
        ];
        e.value(":r_state", s(row.state.as_str())).value(":r_updated", n(row.updated_at.timestamp_millis()));
        let optional: [(&str, Option<&str>); 3] = [
            (attr::MESSAGE_ID, row.message_id.as_deref()),
            (attr::CLAIM_TOKEN, row.claim_token.as_ref().map(ClaimToken::as_str)),
            (attr::DELIVERY_STATUS, row.delivery_status.map(DeliveryStatus::as_str)),
        ];
        for (i, (name, value)) in optional.into_iter().enumerate() {
            let placeholder = e.name_of(name);
            parts.push(match value {
                Some(v) => {
                    e.value(&format!(":r_opt{i}"), s(v));
                    format!("{placeholder} = :r_opt{i}")
                }
                None => format!("attribute_not_exists({placeholder})"),
            });
        }
        let dups = e.name_of(attr::DUPLICATES);
        e.value(":r_dups", n(row.duplicate_message_ids.len()));
        parts.push(if row.duplicate_message_ids.is_empty() {
            format!("(attribute_not_exists({dups}) OR size({dups}) = :r_dups)")
        } else {
            format!("size({dups}) = :r_dups")
        });
        e.text = parts.join(" AND ");
        e
    }
}

const SHARD_CONDITION: &str = "#open_shard = :shard AND #open_since < :before";

fn shard_condition(shard: &str, before: i64) -> Expr {
    let mut e = Expr::new(SHARD_CONDITION);
    e.name(attr::OPEN_SHARD).name(attr::OPEN_SINCE).value(":shard", s(shard)).value(":before", n(before));
    e
}

#[async_trait]
impl Ledger for DynamoLedger {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        let row = req.to_row(RowState::Claimed, None);
        let minted = |claimed_at| {
            ClaimOutcome::Minted(Claim { key: req.key.clone(), token: req.token.clone(), claimed_at })
        };
        match self.put_if_claimable(&row).await? {
            None => Ok(minted(to_millis(req.at))),
            // Our own claim, written by an SDK retry whose first response was lost.
            Some(held)
                if held.state == RowState::Claimed && held.claim_token.as_ref() == Some(&req.token) =>
            {
                debug!(key = req.key.prefix(), "claim already written by this attempt");
                Ok(minted(held.claimed_at.unwrap_or(req.at)))
            }
            Some(held) => Ok(ClaimOutcome::Held(held)),
        }
    }

    async fn commit_sent(
        &self,
        claim: &Claim,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.transition(claim, RowState::Sent, at, &[(attr::MESSAGE_ID, s(message_id))], |row| {
            row.message_id.as_deref() == Some(message_id)
        })
        .await
    }

    async fn commit_rejected(
        &self,
        claim: &Claim,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.transition(claim, RowState::Rejected, at, &[(attr::DETAIL, s(reason))], |row| {
            row.detail.as_deref() == Some(reason)
        })
        .await
    }

    async fn release(&self, claim: &Claim, reason: &str, at: DateTime<Utc>) -> Result<(), LedgerError> {
        self.transition(claim, RowState::Released, at, &[(attr::DETAIL, s(reason))], |row| {
            row.detail.as_deref() == Some(reason)
        })
        .await
    }

    async fn record_missed(
        &self,
        req: &ClaimRequest,
        reason: &str,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        self.put_if_claimable(&req.to_row(RowState::Missed, Some(reason.to_owned()))).await
    }

    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(Self::key_item(key)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.unavailable("GetItem", e))?;
        out.item().map(item_to_row).transpose()
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

    async fn apply_evidence(&self, ev: &ProviderEvidence) -> Result<EvidenceEffect, LedgerError> {
        // Compare rows at the precision they are stored at, so re-applying an event is a no-op.
        let ev = &ProviderEvidence { at: to_millis(ev.at), ..ev.clone() };
        let mut current = self.get(&ev.key).await?;
        for attempt in 1..=EVIDENCE_ATTEMPTS {
            let (row, effect, guard) = match &current {
                None => {
                    let mut guard = Expr::new("attribute_not_exists(#notice_key)");
                    guard.name(attr::KEY);
                    (learned_row(ev), EvidenceEffect::Learned, guard)
                }
                Some(read) => {
                    let mut row = read.clone();
                    let effect = apply_to_row(&mut row, ev);
                    if row == *read {
                        return Ok(effect); // already known: nothing to write
                    }
                    (row, effect, Self::unchanged_since_read(read))
                }
            };
            match self.put_row(&row, guard).await {
                Ok(()) => return Ok(effect),
                Err(WriteFailure::Other(e)) => return Err(e),
                Err(WriteFailure::Condition(old)) => {
                    current = match old {
                        Some(item) => Some(item_to_row(&item)?),
                        None => self.get(&ev.key).await?,
                    };
                    // Our own write, replayed by an SDK retry (or the same event applied by a
                    // concurrent reconciler): the row already says what we meant to write.
                    if current.as_ref() == Some(&row) {
                        return Ok(effect);
                    }
                    debug!(key = ev.key.prefix(), attempt, "row changed while applying evidence; retrying");
                }
            }
        }
        Err(LedgerError::Unavailable(format!(
            "{} kept changing while applying provider evidence ({EVIDENCE_ATTEMPTS} attempts)",
            ev.key.prefix()
        )))
    }

    async fn operator_release(
        &self,
        key: &NoticeKey,
        who: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.operator_transition(key, RowState::Released, at, release_detail(who, reason, at), None).await
    }

    async fn operator_resolve_sent(
        &self,
        key: &NoticeKey,
        message_id: &str,
        who: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.operator_transition(key, RowState::Sent, at, resolve_detail(who, at), Some(message_id)).await
    }

    async fn backfill(&self, row: &LedgerRow) -> Result<bool, LedgerError> {
        let mut guard = Expr::new("attribute_not_exists(#notice_key)");
        guard.name(attr::KEY);
        match self.put_row(row, guard).await {
            Ok(()) => Ok(true),
            Err(WriteFailure::Condition(_)) => Ok(false),
            Err(WriteFailure::Other(e)) => Err(e),
        }
    }
}

/// An expression with its attribute-name and value placeholders (`state` is a reserved word, so
/// names always go through `#placeholders`).
struct Expr {
    text: String,
    names: HashMap<String, String>,
    values: Item,
}

impl Expr {
    fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), names: HashMap::new(), values: HashMap::new() }
    }

    fn name(&mut self, attribute: &str) -> &mut Self {
        self.name_of(attribute);
        self
    }

    /// Registers `#attribute` and returns it.
    fn name_of(&mut self, attribute: &str) -> String {
        let placeholder = format!("#{attribute}");
        self.names.insert(placeholder.clone(), attribute.to_owned());
        placeholder
    }

    fn value(&mut self, placeholder: &str, value: AttributeValue) -> &mut Self {
        self.values.insert(placeholder.to_owned(), value);
        self
    }

    /// The maps as the SDK wants them: DynamoDB rejects an empty map, so empty means absent.
    fn parts(&self) -> (Option<HashMap<String, String>>, Option<Item>) {
        (
            (!self.names.is_empty()).then(|| self.names.clone()),
            (!self.values.is_empty()).then(|| self.values.clone()),
        )
    }
}

// ── Row ↔ item ──

fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The item for `row`. Open claims get the GSI keys and never an expiry (TTL must not delete a
/// claim nobody has resolved); every other state gets `expires_at` and never the GSI keys.
pub fn row_to_item(row: &LedgerRow, expires_at: i64) -> Item {
    let mut item = HashMap::from([
        (attr::KEY.to_owned(), s(row.key.as_str())),
        (attr::STATE.to_owned(), s(row.state.as_str())),
        (attr::ORIGIN.to_owned(), s(row.origin.as_str())),
        (attr::SUBSCRIPTION_ID.to_owned(), s(&row.subscription_id)),
        (attr::PERIOD_START.to_owned(), s(&row.period_start)),
        (attr::KIND.to_owned(), s(&row.kind)),
        (attr::REVISION.to_owned(), n(row.revision)),
        (attr::UPDATED_AT.to_owned(), n(row.updated_at.timestamp_millis())),
        (
            attr::DUPLICATES.to_owned(),
            AttributeValue::L(row.duplicate_message_ids.iter().map(|id| s(id)).collect()),
        ),
    ]);
    let optional = [
        (attr::CLAIM_TOKEN, row.claim_token.as_ref().map(|t| s(t.as_str()))),
        (attr::CONTENT_DIGEST, row.content_digest.as_deref().map(s)),
        (attr::CLAIMED_AT, row.claimed_at.map(|t| n(t.timestamp_millis()))),
        (attr::MESSAGE_ID, row.message_id.as_deref().map(s)),
        (attr::DETAIL, row.detail.as_deref().map(s)),
        (attr::DELIVERY_STATUS, row.delivery_status.map(|d| s(d.as_str()))),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            item.insert(name.to_owned(), value);
        }
    }
    if row.state == RowState::Claimed {
        let since = row.claimed_at.unwrap_or(row.updated_at);
        item.insert(attr::OPEN_SHARD.to_owned(), s(open_shard(&row.key)));
        item.insert(attr::OPEN_SINCE.to_owned(), n(since.timestamp_millis()));
    } else {
        item.insert(attr::EXPIRES_AT.to_owned(), n(expires_at));
    }
    item
}

/// The row stored in `item`; anything malformed is `Corrupt`, naming the attribute.
pub fn item_to_row(item: &Item) -> Result<LedgerRow, LedgerError> {
    let duplicates = match item.get(attr::DUPLICATES) {
        None => Vec::new(),
        Some(AttributeValue::L(list)) => list
            .iter()
            .map(|v| match v {
                AttributeValue::S(id) => Ok(id.clone()),
                _ => Err(corrupt(attr::DUPLICATES, "holds a non-string element")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(corrupt(attr::DUPLICATES, "is not a list")),
    };
    let revision = get_n(item, attr::REVISION)?;
    Ok(LedgerRow {
        key: get_key(item)?,
        state: get_s(item, attr::STATE)?.parse().map_err(|e| corrupt(attr::STATE, e))?,
        origin: get_s(item, attr::ORIGIN)?.parse().map_err(|e| corrupt(attr::ORIGIN, e))?,
        claim_token: opt_s(item, attr::CLAIM_TOKEN)?.map(ClaimToken::from_stored),
        subscription_id: get_s(item, attr::SUBSCRIPTION_ID)?.to_owned(),
        period_start: get_s(item, attr::PERIOD_START)?.to_owned(),
        kind: get_s(item, attr::KIND)?.to_owned(),
        revision: u64::try_from(revision).map_err(|_| corrupt(attr::REVISION, "is negative"))?,
        content_digest: opt_s(item, attr::CONTENT_DIGEST)?.map(str::to_owned),
        claimed_at: opt_time(item, attr::CLAIMED_AT)?,
        updated_at: get_time(item, attr::UPDATED_AT)?,
        message_id: opt_s(item, attr::MESSAGE_ID)?.map(str::to_owned),
        detail: opt_s(item, attr::DETAIL)?.map(str::to_owned),
        delivery_status: opt_s(item, attr::DELIVERY_STATUS)?
            .map(|v| v.parse().map_err(|e| corrupt(attr::DELIVERY_STATUS, e)))
            .transpose()?,
        duplicate_message_ids: duplicates,
    })
}

/// `at` at the millisecond precision items store.
fn to_millis(at: DateTime<Utc>) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(at.timestamp_millis()).single().unwrap_or(at)
}

/// The index shard of a key: its first hex character.
fn open_shard(key: &NoticeKey) -> &str {
    key.as_str().get(..1).unwrap_or("0")
}

fn corrupt(attribute: &str, problem: impl std::fmt::Display) -> LedgerError {
    LedgerError::Corrupt(format!("attribute `{attribute}` {problem}"))
}

fn get_key(item: &Item) -> Result<NoticeKey, LedgerError> {
    NoticeKey::parse(get_s(item, attr::KEY)?).map_err(|e| corrupt(attr::KEY, e))
}

fn opt_s<'a>(item: &'a Item, name: &str) -> Result<Option<&'a str>, LedgerError> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::S(v)) => Ok(Some(v)),
        Some(_) => Err(corrupt(name, "is not a string")),
    }
}

fn get_s<'a>(item: &'a Item, name: &str) -> Result<&'a str, LedgerError> {
    opt_s(item, name)?.ok_or_else(|| corrupt(name, "is missing"))
}

fn opt_n(item: &Item, name: &str) -> Result<Option<i64>, LedgerError> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::N(v)) => {
            v.parse().map(Some).map_err(|_| corrupt(name, format!("is not an integer: {v:?}")))
        }
        Some(_) => Err(corrupt(name, "is not a number")),
    }
}

fn get_n(item: &Item, name: &str) -> Result<i64, LedgerError> {
    opt_n(item, name)?.ok_or_else(|| corrupt(name, "is missing"))
}

fn opt_time(item: &Item, name: &str) -> Result<Option<DateTime<Utc>>, LedgerError> {
    opt_n(item, name)?
        .map(|ms| Utc.timestamp_millis_opt(ms).single().ok_or_else(|| corrupt(name, "is out of range")))
        .transpose()
}

fn get_time(item: &Item, name: &str) -> Result<DateTime<Utc>, LedgerError> {
    opt_time(item, name)?.ok_or_else(|| corrupt(name, "is missing"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: char) -> NoticeKey {
        NoticeKey::parse(&c.to_string().repeat(64)).expect("valid key")
    }

    fn at(ms: i64) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(ms).single().expect("valid time")
    }

    fn claimed_row() -> LedgerRow {
        LedgerRow {
            key: key('c'),
            state: RowState::Claimed,
            origin: Origin::Worker,
            claim_token: Some(ClaimToken::from_stored("tok")),
            subscription_id: "sub_8812".into(),
            period_start: "2026-10-01".into(),
            kind: "renewal_notice_t72".into(),
            revision: 3,
            content_digest: Some("digest".into()),
            claimed_at: Some(at(1_700_000_000_123)),
            updated_at: at(1_700_000_000_123),
            message_id: None,
            detail: None,
            delivery_status: None,
            duplicate_message_ids: Vec::new(),
        }
    }

    #[test]
    fn claimed_row_round_trips_with_index_keys() {
        let row = claimed_row();
        let item = row_to_item(&row, 42);
        assert_eq!(item.get(attr::OPEN_SHARD), Some(&s("c")));
        assert_eq!(item.get(attr::OPEN_SINCE), Some(&n(1_700_000_000_123i64)));
        assert!(!item.contains_key(attr::EXPIRES_AT), "an open claim must never expire");
        assert_eq!(item_to_row(&item).expect("round trip"), row);
    }

    #[test]
    fn decided_rows_leave_the_index_and_round_trip() {
        let mut row = claimed_row();
        row.state = RowState::Sent;
        row.message_id = Some("0100-abc".into());
        row.delivery_status = Some(DeliveryStatus::Delivered);
        row.duplicate_message_ids = vec!["0100-def".into()];
        row.detail = Some("note".into());
        let item = row_to_item(&row, 1);
        assert_eq!(item.get(attr::EXPIRES_AT), Some(&n(1)));
        assert!(!item.contains_key(attr::OPEN_SHARD));
        assert!(!item.contains_key(attr::OPEN_SINCE));
        assert_eq!(item_to_row(&item).expect("round trip"), row);
    }

    #[test]
    fn learned_row_round_trips() {
        let ev = ProviderEvidence {
            key: key('0'),
            message_id: "m".into(),
            status: DeliveryStatus::Accepted,
            at: at(5),
        };
        let row = learned_row(&ev);
        assert_eq!(item_to_row(&row_to_item(&row, 1)).expect("round trip"), row);
    }

    #[test]
    fn malformed_items_name_the_attribute() {
        let good = row_to_item(&claimed_row(), 1);
        let cases: [(&str, Option<AttributeValue>); 7] = [
            (attr::STATE, Some(s("pending"))),
            (attr::STATE, None),
            (attr::REVISION, Some(s("3"))),
            (attr::REVISION, Some(n(-1))),
            (attr::UPDATED_AT, Some(n("soon"))),
            (attr::KEY, Some(s("not-a-key"))),
            (attr::DUPLICATES, Some(AttributeValue::L(vec![n(1)]))),
        ];
        for (name, value) in cases {
            let mut item = good.clone();
            match value {
                Some(v) => item.insert(name.to_owned(), v),
                None => item.remove(name),
            };
            match item_to_row(&item) {
                Err(LedgerError::Corrupt(msg)) => assert!(msg.contains(name), "{msg} should name {name}"),
                other => panic!("{name}: expected Corrupt, got {other:?}"),
            }
        }
    }

    #[test]
    fn expression_maps_are_absent_when_empty() {
        let e = Expr::new("attribute_not_exists(x)");
        assert_eq!(e.parts(), (None, None));
        let mut e = Expr::new(CLAIMABLE);
        e.name(attr::KEY).name(attr::STATE).value(":released", s("released"));
        let (names, values) = e.parts();
        assert_eq!(names.map(|m| m.len()), Some(2));
        assert_eq!(values.map(|m| m.len()), Some(1));
    }

    #[test]
    fn evidence_guard_pins_what_evidence_changes() {
        let mut row = claimed_row();
        row.duplicate_message_ids = vec!["a".into()];
        let guard = DynamoLedger::unchanged_since_read(&row);
        for name in [attr::STATE, attr::UPDATED_AT, attr::MESSAGE_ID, attr::CLAIM_TOKEN, attr::DUPLICATES] {
            assert!(guard.text.contains(&format!("#{name}")), "{} lacks {name}", guard.text);
        }
        assert!(guard.text.contains("attribute_not_exists(#message_id)"));
        assert!(guard.text.contains("size(#duplicate_message_ids) = :r_dups"));
        // Every placeholder used is defined.
        for (placeholder, _) in guard.values.iter() {
            assert!(guard.text.contains(placeholder.as_str()), "{placeholder} unused");
        }
    }

    #[test]
    fn shards_cover_every_key_prefix() {
        for c in "0123456789abcdef".chars() {
            assert!(SHARDS.contains(&open_shard(&key(c))));
        }
    }
}
