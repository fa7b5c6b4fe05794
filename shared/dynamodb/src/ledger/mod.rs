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
//! Open claims carry `open_shard` (the key's first hex character) and `open_since` (claim time,
//! epoch ms), the keys of the sparse GSI `open_claims`; every transition out of `claimed` removes
//! them, so the quarantine view queries 16 small partitions and never scans the table.
//! `expires_at` (epoch seconds) is the table's TTL: last write plus the retention period, set only
//! once a row leaves `claimed` — an open claim never expires, however long it waits for a human.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use futures::future::try_join_all;
use tracing::{debug, warn};

use notice_ledger::ledger::{
    apply_to_row, learned_row, release_detail, resolve_detail, Claim, ClaimLedger, ClaimOutcome,
    ClaimRequest, ClaimToken, DeliveryStatus, EvidenceEffect, EvidenceLedger, LedgerRow, OperatorLedger,
    Origin, ProviderEvidence, QuarantineView, RowReader, RowState, WithdrawRequest,
};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

use crate::expr::Expr;
use crate::hot::{HotFailure, HotWrites, TransactFailure, TransactPut};
use crate::item::{attr, get_key, item_to_row, n, row_to_item, s, to_millis, Item};
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
/// Read-modify-write rounds for provider evidence before reporting contention.
const EVIDENCE_ATTEMPTS: u32 = 5;

/// `claim`/`record_missed` may write only where no row exists or the row was released.
const CLAIMABLE: &str = "attribute_not_exists(#notice_key) OR #state = :released";
/// An alias may be put only where no row exists or an alias stands.
const ALIASABLE: &str = "attribute_not_exists(#notice_key) OR #state = :alias";

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

    fn unavailable(&self, op: &str, err: impl std::error::Error) -> LedgerError {
        LedgerError::Unavailable(format!("DynamoDB {op} on {}: {}", self.table, DisplayErrorContext(err)))
    }

    /// A hot write's failure as the SDK path reports it.
    fn hot_failure(&self, op: &str, failure: HotFailure) -> WriteFailure {
        match failure {
            HotFailure::Condition(item) => WriteFailure::Condition(item),
            HotFailure::Other(text) => WriteFailure::Other(LedgerError::Unavailable(format!(
                "DynamoDB {op} on {}: {text}",
                self.table
            ))),
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

    /// A claim-style write with its aliases, if any: one conditional put without a rotation in
    /// progress, a transaction with one.
    async fn first_write(
        &self,
        row: &LedgerRow,
        aliases: &[NoticeKey],
    ) -> Result<Option<LedgerRow>, LedgerError> {
        if aliases.is_empty() {
            self.put_if_claimable(row).await
        } else {
            self.put_with_aliases(row, aliases).await
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

    /// A first write under the current secret version while older ones are active: the row
    /// (claim rule) and an alias at each older key (no row there, or an alias) in one
    /// `TransactWriteItems`, so a sender still on the old version — whose claim is the ordinary
    /// conditional put at the old key — and this write cannot both succeed. `Ok(None)` means
    /// written; `Ok(Some(row))` is the row that refused: this key's, or an older key's (the notice
    /// lives there). Only while a rotation is in progress; otherwise [`Self::put_if_claimable`].
    async fn put_with_aliases(
        &self,
        row: &LedgerRow,
        aliases: &[NoticeKey],
    ) -> Result<Option<LedgerRow>, LedgerError> {
        let mut claimable = Expr::new(CLAIMABLE);
        claimable.name(attr::KEY).name(attr::STATE).value(":released", s(RowState::Released.as_str()));
        let mut aliasable = Expr::new(ALIASABLE);
        aliasable.name(attr::KEY).name(attr::STATE).value(":alias", s(RowState::Alias.as_str()));
        let alias_rows: Vec<LedgerRow> =
            aliases.iter().map(|alias| LedgerRow::alias_at(alias, row)).collect();
        let puts: Vec<TransactPut<'_>> = std::iter::once((row, &claimable))
            .chain(alias_rows.iter().map(|alias| (alias, &aliasable)))
            .map(|(row, cond)| TransactPut {
                item: row_to_item(row, self.expires_at(row.updated_at)),
                condition: &cond.text,
                names: &cond.names,
                values: &cond.values,
            })
            .collect();
        let (reasons, message) = match self.lean.transact_put_items(&self.table, &puts).await {
            Ok(()) => return Ok(None),
            Err(TransactFailure::Other(text)) => {
                return Err(LedgerError::Unavailable(format!(
                    "DynamoDB TransactWriteItems on {}: {text}",
                    self.table
                )))
            }
            Err(TransactFailure::Cancelled { reasons, message }) => (reasons, message),
        };
        // The reasons come in the actions' order: this key's row first, then each alias.
        let keys: Vec<&NoticeKey> = std::iter::once(&row.key).chain(aliases).collect();
        for (key, reason) in keys.iter().zip(reasons) {
            if reason.code.as_deref() == Some("ConditionalCheckFailed") {
                return match self.conflicting_row(key, reason.item).await? {
                    Some(existing) => Ok(Some(existing)),
                    None => Err(LedgerError::Unavailable(format!(
                        "{} changed during the write; try again",
                        key.prefix()
                    ))),
                };
            }
        }
        Err(LedgerError::Unavailable(format!(
            "DynamoDB TransactWriteItems on {} cancelled: {message}",
            self.table
        )))
    }

    /// `UpdateItem` that moves a row out of `claimed` (dropping it from the open-claims index).
    /// `guard` adds to the `#state = :claimed` condition; `replayed` recognises the result of this
    /// same write already applied (an SDK retry after a lost response) so it is not a conflict;
    /// `conflict` words the error for the row found instead (`None`: no row).
    #[allow(clippy::too_many_arguments)]
    async fn leave_claimed(
        &self,
        key: &NoticeKey,
        to: RowState,
        at: DateTime<Utc>,
        set: &[(&'static str, AttributeValue)],
        token_guard: Option<&ClaimToken>,
        replayed: impl Fn(&LedgerRow) -> bool,
        conflict: impl Fn(Option<&LedgerRow>) -> LedgerError,
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
        let result = self
            .lean
            .update_item(&self.table, &Self::key_item(key), &update, &condition, &e.names, &e.values)
            .await
            .map_err(|f| self.hot_failure("UpdateItem", f));
        match result {
            Ok(()) => Ok(()),
            Err(WriteFailure::Other(e)) => Err(e),
            Err(WriteFailure::Condition(old)) => match self.conflicting_row(key, old).await? {
                Some(row) if replayed(&row) => {
                    debug!(key = key.prefix(), state = %to, "write already applied (retried request)");
                    Ok(())
                }
                row => Err(conflict(row.as_ref())),
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
        let conflict = |row: Option<&LedgerRow>| {
            LedgerError::not_held(claim.key.prefix(), Some(row.map_or("no row", |r| r.state.as_str())))
        };
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
        let conflict = |row: Option<&LedgerRow>| {
            LedgerError::Conflict(match row {
                Some(row) => format!("{} is {}, not an open claim", key.prefix(), row.state),
                None => format!("{} has no ledger row", key.prefix()),
            })
        };
        self.leave_claimed(key, to, at, &set, None, replayed, conflict).await
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

#[async_trait]
impl RowReader for DynamoLedger {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        let item = self.lean.get_item(&self.table, &Self::key_item(key)).await.map_err(|f| match f {
            HotFailure::Other(text) => {
                LedgerError::Unavailable(format!("DynamoDB GetItem on {}: {text}", self.table))
            }
            HotFailure::Condition(_) => LedgerError::Unavailable(format!(
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

#[async_trait]
impl ClaimLedger for DynamoLedger {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        let row = req.to_row(RowState::Claimed, None);
        let minted = |claimed_at| {
            ClaimOutcome::Minted(Claim { key: req.key.clone(), token: req.token.clone(), claimed_at })
        };
        match self.first_write(&row, &req.aliases).await? {
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
        self.first_write(&req.to_row(RowState::Missed, Some(reason.to_owned())), &req.aliases).await
    }
    async fn withdraw(&self, req: &WithdrawRequest) -> Result<Option<LedgerRow>, LedgerError> {
        self.first_write(&req.to_row(), &req.aliases).await
    }
}

#[async_trait]
impl EvidenceLedger for DynamoLedger {
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
}

#[async_trait]
impl OperatorLedger for DynamoLedger {
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

    /// A `Scan` filtered on the key's prefix, page by page: DynamoDB has no range over a partition
    /// key, so this reads the whole table (at an operator's pace, never on a send path).
    async fn keys_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<NoticeKey>, LedgerError> {
        use aws_sdk_dynamodb::types::AttributeValue;
        let mut keys = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("begins_with(notice_key, :prefix)")
                .expression_attribute_values(":prefix", AttributeValue::S(prefix.to_owned()))
                .projection_expression("notice_key")
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| self.unavailable("Scan", e))?;
            for item in out.items() {
                if let Some(AttributeValue::S(k)) = item.get("notice_key") {
                    // Items of other kinds (rate buckets, the key check) share the table under
                    // other key shapes: none parses as a notice key.
                    if let Ok(key) = NoticeKey::parse(k) {
                        keys.push(key);
                    }
                }
            }
            match out.last_evaluated_key() {
                Some(last) if keys.len() < limit => start = Some(last.clone()),
                _ => break,
            }
        }
        keys.sort();
        keys.truncate(limit);
        Ok(keys)
    }

    async fn rows_updated_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<notice_ledger::ledger::RowPage, LedgerError> {
        self.scan_updated_between(since, until, cursor, limit).await
    }
}

#[cfg(test)]
mod tests;
