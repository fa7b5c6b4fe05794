//! The worker's path: claim (or take over a released row), the transitions out of `claimed`
//! guarded by the claim token, a missed window's record and a withdraw's tombstone — each one
//! `BEGIN IMMEDIATE` transaction, aliases included.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use notice_ledger::ledger::{
    Claim, ClaimLedger, ClaimOutcome, ClaimRequest, LedgerRow, RowState, WithdrawRequest,
};
use notice_ledger::LedgerError;

use crate::rows::{alias_refused, put_aliases, select_row};
use crate::{sql, SqliteLedger};

impl SqliteLedger {
    async fn transition(
        &self,
        claim: &Claim,
        to: RowState,
        at: DateTime<Utc>,
        message_id: Option<String>,
        detail: Option<String>,
    ) -> Result<(), LedgerError> {
        let key = claim.key.as_str().to_owned();
        let token = claim.token.as_str().to_owned();
        let prefix = claim.key.prefix().to_owned();
        self.with(move |conn| {
            let changed = conn
                .execute(
                    "UPDATE notices SET state = ?1, updated_at_ms = ?2,
                         message_id = COALESCE(?3, message_id), detail = COALESCE(?4, detail)
                     WHERE notice_key = ?5 AND state = 'claimed' AND claim_token = ?6",
                    params![to.as_str(), at.timestamp_millis(), message_id, detail, key, token],
                )
                .map_err(sql)?;
            if changed == 1 {
                Ok(())
            } else {
                Err(LedgerError::not_held(&prefix, None))
            }
        })
        .await
    }
}

/// Inserts `req` as a row in `state`, or takes over a `released` row. Returns whether it wrote.
fn insert_or_take_released(
    conn: &Connection,
    req: &ClaimRequest,
    state: RowState,
    detail: Option<&str>,
) -> Result<bool, LedgerError> {
    let claimed_at = (state == RowState::Claimed).then(|| req.at.timestamp_millis());
    let written: Option<String> = conn
        .query_row(
            "INSERT INTO notices (notice_key, state, origin, claim_token, subscription_id, period_start, kind,
                                  revision, content_digest, claimed_at_ms, updated_at_ms, message_id, detail,
                                  charge_at_ms, jurisdiction, config_version, template, rendered_digest,
                                  obligation)
             VALUES (?1, ?2, 'worker', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, ?11, ?12, ?13, ?14, ?15, ?16, ?17)
             ON CONFLICT (notice_key) DO UPDATE SET
                 state = excluded.state, origin = excluded.origin, claim_token = excluded.claim_token,
                 content_digest = excluded.content_digest, claimed_at_ms = excluded.claimed_at_ms,
                 updated_at_ms = excluded.updated_at_ms, message_id = NULL, detail = excluded.detail,
                 charge_at_ms = excluded.charge_at_ms, jurisdiction = excluded.jurisdiction,
                 config_version = excluded.config_version, template = excluded.template,
                 rendered_digest = excluded.rendered_digest, obligation = excluded.obligation
             WHERE notices.state = 'released'
             RETURNING claim_token",
            params![
                req.key.as_str(),
                state.as_str(),
                req.token.as_str(),
                req.subscription_id,
                req.period_start,
                req.kind,
                i64::try_from(req.revision).map_err(|_| LedgerError::Corrupt("revision too large".into()))?,
                req.content_digest,
                claimed_at,
                req.at.timestamp_millis(),
                detail,
                req.charge_at.map(|t| t.timestamp_millis()),
                req.jurisdiction,
                req.rendered.as_ref().map(|r| &r.config_version),
                req.rendered.as_ref().map(|r| &r.template),
                req.rendered.as_ref().map(|r| &r.rendered_digest),
                req.obligation,
            ],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    Ok(written.is_some())
}

/// Writes a withdraw's tombstone where a claim could be written (no row, or a `released` one):
/// no claim token, no content digest. Returns whether it wrote.
fn insert_tombstone(conn: &Connection, req: &WithdrawRequest) -> Result<bool, LedgerError> {
    let written: Option<String> = conn
        .query_row(
            "INSERT INTO notices (notice_key, state, origin, claim_token, subscription_id, period_start, kind,
                                  revision, content_digest, claimed_at_ms, updated_at_ms, message_id, detail)
             VALUES (?1, 'withdrawn', ?2, NULL, ?3, ?4, ?5, ?6, NULL, NULL, ?7, NULL, ?8)
             ON CONFLICT (notice_key) DO UPDATE SET
                 state = excluded.state, origin = excluded.origin, claim_token = NULL,
                 content_digest = NULL, claimed_at_ms = NULL, updated_at_ms = excluded.updated_at_ms,
                 message_id = NULL, detail = excluded.detail, charge_at_ms = NULL, jurisdiction = NULL,
                 config_version = NULL, template = NULL, rendered_digest = NULL, obligation = NULL
             WHERE notices.state = 'released'
             RETURNING notice_key",
            params![
                req.key.as_str(),
                req.origin.as_str(),
                req.subscription_id,
                req.period_start,
                req.kind,
                i64::try_from(req.revision).map_err(|_| LedgerError::Corrupt("revision too large".into()))?,
                req.at.timestamp_millis(),
                req.detail,
            ],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    Ok(written.is_some())
}

#[async_trait]
impl ClaimLedger for SqliteLedger {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        let req = req.clone();
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            if let Some(held) = alias_refused(&tx, &req.aliases)? {
                return Ok(ClaimOutcome::Held(held));
            }
            let outcome = if insert_or_take_released(&tx, &req, RowState::Claimed, None)? {
                put_aliases(&tx, &req.aliases, &req.to_row(RowState::Claimed, None))?;
                ClaimOutcome::Minted(Claim {
                    key: req.key.clone(),
                    token: req.token.clone(),
                    claimed_at: req.at,
                })
            } else {
                let row = select_row(&tx, req.key.as_str())?.ok_or_else(|| {
                    LedgerError::Corrupt("conflicting row vanished inside a transaction".into())
                })?;
                if row.state == RowState::Claimed && row.claim_token.as_ref() == Some(&req.token) {
                    ClaimOutcome::Minted(Claim {
                        key: req.key.clone(),
                        token: req.token.clone(),
                        claimed_at: row.claimed_at.unwrap_or(req.at),
                    })
                } else {
                    ClaimOutcome::Held(row)
                }
            };
            tx.commit().map_err(sql)?;
            Ok(outcome)
        })
        .await
    }
    async fn commit_sent(
        &self,
        claim: &Claim,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.transition(claim, RowState::Sent, at, Some(message_id.to_owned()), None).await
    }
    async fn commit_rejected(
        &self,
        claim: &Claim,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.transition(claim, RowState::Rejected, at, None, Some(reason.to_owned())).await
    }
    async fn release(&self, claim: &Claim, reason: &str, at: DateTime<Utc>) -> Result<(), LedgerError> {
        self.transition(claim, RowState::Released, at, None, Some(reason.to_owned())).await
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
        let req = req.clone();
        let reason = reason.to_owned();
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            if let Some(held) = alias_refused(&tx, &req.aliases)? {
                return Ok(Some(held));
            }
            let existing = if insert_or_take_released(&tx, &req, RowState::Missed, Some(&reason))? {
                put_aliases(&tx, &req.aliases, &req.to_row(RowState::Missed, Some(reason.clone())))?;
                None
            } else {
                select_row(&tx, req.key.as_str())?
            };
            tx.commit().map_err(sql)?;
            Ok(existing)
        })
        .await
    }
    async fn withdraw(&self, req: &WithdrawRequest) -> Result<Option<LedgerRow>, LedgerError> {
        let req = req.clone();
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            if let Some(held) = alias_refused(&tx, &req.aliases)? {
                return Ok(Some(held));
            }
            let existing = if insert_tombstone(&tx, &req)? {
                put_aliases(&tx, &req.aliases, &req.to_row())?;
                None
            } else {
                select_row(&tx, req.key.as_str())?
            };
            tx.commit().map_err(sql)?;
            Ok(existing)
        })
        .await
    }
}
