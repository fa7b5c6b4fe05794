//! The worker's path: the claim (or a missed window's record, or a withdraw's tombstone) as one
//! conditional put — a transaction with its aliases during a key rotation — and the transitions
//! out of `claimed` guarded by the claim token, each recognising its own retried write.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use tracing::{debug, warn};

use notice_ledger::ledger::{
    Claim, ClaimLedger, ClaimOutcome, ClaimRequest, ClaimToken, LedgerRow, RowState, WithdrawRequest,
};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

use super::{DynamoLedger, WriteFailure};
use crate::expr::Expr;
use crate::hot::{TransactFailure, TransactPut};
use crate::item::{attr, n, open_shard, row_to_item, s, to_millis};

/// `claim`/`record_missed` may write only where no row exists or the row was released.
pub(super) const CLAIMABLE: &str = "attribute_not_exists(#notice_key) OR #state = :released";
/// An alias may be put only where no row exists or an alias stands.
const ALIASABLE: &str = "attribute_not_exists(#notice_key) OR #state = :alias";

impl DynamoLedger {
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
                    None => Err(LedgerError::unavailable(format!(
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
            Err(TransactFailure::Other(fault, text)) => {
                return Err(LedgerError::faulted(
                    crate::SERVICE,
                    fault,
                    format!("DynamoDB TransactWriteItems on {}: {text}", self.table),
                ))
            }
            Err(TransactFailure::Cancelled { reasons, message }) => (reasons, message),
        };
        // The reasons come in the actions' order: this key's row first, then each alias.
        let keys: Vec<&NoticeKey> = std::iter::once(&row.key).chain(aliases).collect();
        for (key, reason) in keys.iter().zip(reasons) {
            if reason.code.as_deref() == Some("ConditionalCheckFailed") {
                return match self.conflicting_row(key, reason.item).await? {
                    Some(existing) => Ok(Some(existing)),
                    None => Err(LedgerError::unavailable(format!(
                        "{} changed during the write; try again",
                        key.prefix()
                    ))),
                };
            }
        }
        Err(LedgerError::unavailable(format!(
            "DynamoDB TransactWriteItems on {} cancelled: {message}",
            self.table
        )))
    }

    /// `UpdateItem` that moves a row out of `claimed` (dropping it from the open-claims index).
    /// `guard` adds to the `#state = :claimed` condition; `replayed` recognises the result of this
    /// same write already applied (an SDK retry after a lost response) so it is not a conflict;
    /// `conflict` words the error for the row found instead (`None`: no row).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn leave_claimed(
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
    /// One `UpdateItem` that gives the row the open-claims index keys, guarded by the claim's
    /// state and token: the only index write a notice ever costs, and only when its claim may
    /// stay open. A failed condition means the row has moved on: nothing to watch.
    async fn put_on_quarantine_view(&self, claim: &Claim) -> Result<(), LedgerError> {
        let mut e = Expr::new(String::new());
        let update =
            format!("SET {} = :shard, {} = :since", e.name_of(attr::OPEN_SHARD), e.name_of(attr::OPEN_SINCE));
        let condition =
            format!("{} = :claimed AND {} = :token", e.name_of(attr::STATE), e.name_of(attr::CLAIM_TOKEN));
        e.value(":shard", s(open_shard(&claim.key)))
            .value(":since", n(claim.claimed_at.timestamp_millis()))
            .value(":claimed", s(RowState::Claimed.as_str()))
            .value(":token", s(claim.token.as_str()));
        let result = self
            .lean
            .update_item(&self.table, &Self::key_item(&claim.key), &update, &condition, &e.names, &e.values)
            .await
            .map_err(|f| self.hot_failure("UpdateItem", f));
        match result {
            Ok(()) | Err(WriteFailure::Condition(_)) => Ok(()),
            Err(WriteFailure::Other(e)) => Err(e),
        }
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
