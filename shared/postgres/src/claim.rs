//! The worker's path: the claim statement (or a missed window's record, or a withdraw's
//! tombstone) with its aliases in one transaction, and the transitions out of `claimed` guarded
//! by the claim token.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tracing::debug;

use notice_ledger::ledger::{
    Claim, ClaimLedger, ClaimOutcome, ClaimRequest, LedgerRow, RowState, WithdrawRequest,
};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

use crate::rows::to_micros;
use crate::sql::{CLAIM, PUT_ALIAS, TRANSITION, WITHDRAW};
use crate::PostgresLedger;

impl PostgresLedger {
    /// Inserts `req` as a worker row in `state` or takes over a `released` row, then — when that
    /// wrote nothing — reads the row that holds the key, all in one committed transaction.
    /// `Ok(None)` means written.
    async fn write_claimable(
        &self,
        req: &ClaimRequest,
        state: RowState,
        detail: Option<&str>,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        let at = to_micros(req.at);
        let claimed_at = (state == RowState::Claimed).then_some(at);
        let revision = req.revision.to_string();
        let charge_at = req.charge_at.map(to_micros);
        let rendered = req.rendered.as_ref();
        let params: [&(dyn ToSql + Sync); 17] = [
            &req.key.as_str(),
            &state.as_str(),
            &req.token.as_str(),
            &req.subscription_id,
            &req.period_start,
            &req.kind,
            &revision,
            &req.content_digest,
            &claimed_at,
            &at,
            &detail,
            &charge_at,
            &req.jurisdiction,
            &rendered.map(|r| r.config_version.as_str()),
            &rendered.map(|r| r.template.as_str()),
            &rendered.map(|r| r.rendered_digest.as_str()),
            &req.obligation,
        ];
        let aliases = (!req.aliases.is_empty())
            .then(|| (req.aliases.as_slice(), req.to_row(state, detail.map(str::to_owned))));
        self.insert_or_held(&req.key, CLAIM, &params, aliases).await
    }

    /// Runs a conditional insert (`… ON CONFLICT … WHERE … RETURNING`) and — when it wrote nothing —
    /// reads the row that refused it, in one committed transaction. `Ok(None)` means written.
    ///
    /// With `aliases` (a first write under the current secret version while older ones are
    /// active), the same transaction first puts an alias at each older key — inserted, or over an
    /// alias, locking the row either way; any other row there is returned instead and nothing is
    /// written (the notice lives under that key).
    async fn insert_or_held(
        &self,
        key: &NoticeKey,
        statement: &str,
        params: &[&(dyn ToSql + Sync)],
        aliases: Option<(&[NoticeKey], LedgerRow)>,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.pg("claim", e))?;
        if let Some((aliases, row)) = &aliases {
            for alias in *aliases {
                if let Some(held) = self.put_alias(&tx, &LedgerRow::alias_at(alias, row)).await? {
                    return Ok(Some(held)); // dropped: rolled back
                }
            }
        }
        let stmt = tx.prepare_cached(statement).await.map_err(|e| self.pg("claim", e))?;
        let written = tx.query_opt(&stmt, params).await.map_err(|e| self.pg("claim", e))?;
        let existing = if written.is_some() {
            None
        } else {
            // Our statement locked the conflicting row, so this reads the version that refused us.
            let row = self.select_row(&tx, key, false).await?.ok_or_else(|| {
                LedgerError::Corrupt(format!(
                    "{}: conflicting row vanished inside a transaction",
                    key.prefix()
                ))
            })?;
            Some(row)
        };
        tx.commit().await.map_err(|e| self.pg("claim", e))?;
        Ok(existing)
    }

    /// Puts an alias row unless its key holds another kind of row, which is returned (locked).
    async fn put_alias(
        &self,
        tx: &impl GenericClient,
        alias: &LedgerRow,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        let stmt = tx.prepare_cached(PUT_ALIAS).await.map_err(|e| self.pg("alias", e))?;
        let revision = alias.revision.to_string();
        let updated_at = to_micros(alias.updated_at);
        let params: [&(dyn ToSql + Sync); 8] = [
            &alias.key.as_str(),
            &alias.origin.as_str(),
            &alias.subscription_id,
            &alias.period_start,
            &alias.kind,
            &revision,
            &updated_at,
            &alias.detail,
        ];
        if tx.query_opt(&stmt, &params).await.map_err(|e| self.pg("alias", e))?.is_some() {
            return Ok(None);
        }
        self.select_row(tx, &alias.key, true).await
    }

    /// A worker transition: `claimed` with this claim's token → `to`. A repeat of a transition that
    /// already stands (same token, state and result: a retry after a lost reply) is not a conflict.
    async fn transition(
        &self,
        claim: &Claim,
        to: RowState,
        at: DateTime<Utc>,
        message_id: Option<&str>,
        detail: Option<&str>,
    ) -> Result<(), LedgerError> {
        let at = to_micros(at);
        let client = self.client().await?;
        let stmt = client.prepare_cached(TRANSITION).await.map_err(|e| self.pg("commit", e))?;
        let changed = client
            .execute(
                &stmt,
                &[&to.as_str(), &at, &message_id, &detail, &claim.key.as_str(), &claim.token.as_str()],
            )
            .await
            .map_err(|e| self.pg("commit", e))?;
        if changed == 1 {
            return Ok(());
        }
        match self.select_row(&client, &claim.key, false).await? {
            Some(row)
                if row.state == to
                    && row.claim_token.as_ref() == Some(&claim.token)
                    && message_id.is_none_or(|id| row.message_id.as_deref() == Some(id))
                    && detail.is_none_or(|d| row.detail.as_deref() == Some(d)) =>
            {
                debug!(key = claim.key.prefix(), state = %to, "transition already applied (retried request)");
                Ok(())
            }
            Some(row) => Err(LedgerError::not_held(claim.key.prefix(), Some(row.state.as_str()))),
            None => Err(LedgerError::not_held(claim.key.prefix(), Some("no row"))),
        }
    }
}

#[async_trait]
impl ClaimLedger for PostgresLedger {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        let minted = |claimed_at| {
            ClaimOutcome::Minted(Claim { key: req.key.clone(), token: req.token.clone(), claimed_at })
        };
        match self.write_claimable(req, RowState::Claimed, None).await? {
            None => Ok(minted(to_micros(req.at))),
            // Our own claim, written by an earlier attempt of this same request.
            Some(held)
                if held.state == RowState::Claimed && held.claim_token.as_ref() == Some(&req.token) =>
            {
                Ok(minted(held.claimed_at.unwrap_or_else(|| to_micros(req.at))))
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
        self.transition(claim, RowState::Sent, at, Some(message_id), None).await
    }
    async fn commit_rejected(
        &self,
        claim: &Claim,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.transition(claim, RowState::Rejected, at, None, Some(reason)).await
    }
    async fn release(&self, claim: &Claim, reason: &str, at: DateTime<Utc>) -> Result<(), LedgerError> {
        self.transition(claim, RowState::Released, at, None, Some(reason)).await
    }
    /// Nothing to write: the partial index `notices_open_claims` lists every open claim.
    async fn put_on_quarantine_view(&self, _claim: &Claim) -> Result<(), LedgerError> {
        Ok(())
    }
    async fn record_missed(
        &self,
        req: &ClaimRequest,
        reason: &str,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        self.write_claimable(req, RowState::Missed, Some(reason)).await
    }
    async fn withdraw(&self, req: &WithdrawRequest) -> Result<Option<LedgerRow>, LedgerError> {
        let revision = req.revision.to_string();
        let at = to_micros(req.at);
        let params: [&(dyn ToSql + Sync); 8] = [
            &req.key.as_str(),
            &req.origin.as_str(),
            &req.subscription_id,
            &req.period_start,
            &req.kind,
            &revision,
            &at,
            &req.detail,
        ];
        let aliases = (!req.aliases.is_empty()).then(|| (req.aliases.as_slice(), req.to_row()));
        self.insert_or_held(&req.key, WITHDRAW, &params, aliases).await
    }
}
