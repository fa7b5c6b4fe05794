//! PostgreSQL ledger: the seed design's own store, shared with workers written in other languages.
//!
//! One row per notice key in table `notices` (schema: [`MIGRATION`]). The claim is the seed
//! design's statement — `INSERT … ON CONFLICT (notice_key) DO UPDATE … WHERE notices.state =
//! 'released' RETURNING claim_token` — committed before anything is sent. When it returns nothing,
//! someone holds the key; the conflicting row stays locked by our statement until the transaction
//! ends, so the `SELECT` that follows reads exactly the row that refused us. Every transition out
//! of `claimed` is an `UPDATE … WHERE state = 'claimed' AND claim_token = $token`, so a slow worker
//! whose claim was released and re-minted cannot overwrite the new owner.
//!
//! Storage choices:
//! - timestamps are `timestamptz` (microseconds): operators can query them directly
//!   (`now() - claimed_at > interval '15 minutes'`). Times are truncated to microseconds before
//!   they are written, so a row read back compares equal to what was meant.
//! - `revision` is `numeric(20,0)`: PostgreSQL has no unsigned 64-bit integer, and every `u64`
//!   revision (up to 18446744073709551615) is a valid notice revision.
//! - the quarantine view reads a partial index over open claims (`WHERE state = 'claimed'`).
//!
//! Connections come from a small pool; TLS (rustls, always verifying the server certificate) is
//! used when the URL asks for it with `sslmode=require` (or `verify-ca`/`verify-full`).

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Timelike, Utc};
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};
use tracing::debug;

use notice_ledger::ledger::{
    apply_to_row, learned_row, release_detail, resolve_detail, Claim, ClaimOutcome, ClaimRequest, ClaimToken,
    EvidenceEffect, Ledger, LedgerRow, Origin, ProviderEvidence, RowState,
};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

/// The schema, version 1. Idempotent: safe to run on every deploy and from several processes at
/// once when run through [`PostgresLedger::migrate`] (which serialises runs with an advisory lock).
///
/// The `CHECK`s are there for workers in other languages sharing the table: a key in upper-case
/// hex or an unknown state would silently defeat deduplication, so the database refuses them.
pub const MIGRATION: &str = r"
CREATE TABLE IF NOT EXISTS notices (
    notice_key      text PRIMARY KEY CHECK (notice_key ~ '^[0-9a-f]{64}$'),
    state           text NOT NULL CHECK (state IN ('claimed', 'sent', 'rejected', 'missed', 'released')),
    origin          text NOT NULL CHECK (origin IN ('worker', 'backfill', 'provider_events', 'operator')),
    claim_token     text,
    subscription_id text NOT NULL,
    period_start    text NOT NULL,
    kind            text NOT NULL,
    revision        numeric(20, 0) NOT NULL CHECK (revision BETWEEN 0 AND 18446744073709551615),
    content_digest  text,
    claimed_at      timestamptz,
    updated_at      timestamptz NOT NULL,
    message_id      text,
    detail          text,
    delivery_status text,
    -- Further provider message ids seen for this key: each one is a duplicate that really went out.
    duplicate_message_ids text[] NOT NULL DEFAULT '{}'
);
-- The quarantine view reads only open claims, oldest first (like the DynamoDB sparse GSI).
CREATE INDEX IF NOT EXISTS notices_open_claims ON notices (claimed_at, notice_key) WHERE state = 'claimed';
";

/// Advisory lock key that serialises concurrent [`PostgresLedger::migrate`] runs
/// (`CREATE … IF NOT EXISTS` alone can still collide when two run at the same instant).
const MIGRATION_LOCK: i64 = 0x6e6f_7469_6365_0001;

/// Connections per ledger handle: enough for a sender's concurrent jobs, small enough that many
/// Lambda instances do not exhaust the server's `max_connections`.
pub const DEFAULT_POOL_SIZE: usize = 8;
/// Longest wait for a connection (new or pooled) before the operation reports the ledger unavailable.
const POOL_TIMEOUT: Duration = Duration::from_secs(10);
/// Applied when the URL sets no `connect_timeout`: an unreachable server must fail, not hang a send.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Read-modify-write rounds for provider evidence before reporting contention.
const EVIDENCE_ATTEMPTS: u32 = 3;

const COLUMNS: &str = "notice_key, state, origin, claim_token, subscription_id, period_start, kind, \
                       revision::text, content_digest, claimed_at, updated_at, message_id, detail, \
                       delivery_status, duplicate_message_ids";

const SELECT_ONE: &str =
    "SELECT notice_key, state, origin, claim_token, subscription_id, period_start, kind, \
                          revision::text, content_digest, claimed_at, updated_at, message_id, detail, \
                          delivery_status, duplicate_message_ids FROM notices WHERE notice_key = $1";

/// The quarantine view: open claims claimed before `$1` (timestamptz), oldest first, at most `$2`
/// (bigint). Served by the partial index `notices_open_claims`, so it never reads decided rows.
pub const QUARANTINE_QUERY: &str = "SELECT notice_key, state, origin, claim_token, subscription_id, \
     period_start, kind, revision::text, content_digest, claimed_at, updated_at, message_id, detail, \
     delivery_status, duplicate_message_ids FROM notices WHERE state = 'claimed' AND claimed_at < $1 \
     ORDER BY claimed_at, notice_key LIMIT $2";

/// Inserts a worker row (`claimed` or `missed`), or takes over a `released` one. Returns the
/// token only when it wrote.
const CLAIM: &str = "
INSERT INTO notices (notice_key, state, origin, claim_token, subscription_id, period_start, kind,
                     revision, content_digest, claimed_at, updated_at, message_id, detail)
VALUES ($1, $2, 'worker', $3, $4, $5, $6, $7::text::numeric, $8, $9, $10, NULL, $11)
ON CONFLICT (notice_key) DO UPDATE SET
    state = excluded.state, origin = excluded.origin, claim_token = excluded.claim_token,
    content_digest = excluded.content_digest, claimed_at = excluded.claimed_at,
    updated_at = excluded.updated_at, message_id = NULL, detail = excluded.detail
WHERE notices.state = 'released'
RETURNING claim_token";

/// Inserts a whole row unless the key exists (backfill, learned rows).
const INSERT_ROW: &str = "
INSERT INTO notices (notice_key, state, origin, claim_token, subscription_id, period_start, kind,
                     revision, content_digest, claimed_at, updated_at, message_id, detail,
                     delivery_status, duplicate_message_ids)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::text::numeric, $9, $10, $11, $12, $13, $14, $15)
ON CONFLICT (notice_key) DO NOTHING";

/// Rewrites the fields provider evidence may change (inside the transaction that locked the row).
const UPDATE_EVIDENCE: &str = "
UPDATE notices SET state = $2, message_id = $3, delivery_status = $4, updated_at = $5,
                   duplicate_message_ids = $6
WHERE notice_key = $1";

/// A worker transition out of its own claim.
const TRANSITION: &str = "
UPDATE notices SET state = $1, updated_at = $2,
                   message_id = COALESCE($3, message_id), detail = COALESCE($4, detail)
WHERE notice_key = $5 AND state = 'claimed' AND claim_token = $6";

/// An operator transition out of any open claim.
const OPERATOR: &str = "
UPDATE notices SET state = $1, origin = $6, updated_at = $2,
                   message_id = COALESCE($3, message_id), detail = $4
WHERE notice_key = $5 AND state = 'claimed'";

/// The PostgreSQL ledger: a pool of connections to one database.
#[derive(Clone)]
pub struct PostgresLedger {
    pool: Pool,
    /// `postgres://user@host:port/db` — for messages; never carries the password.
    target: String,
}

impl std::fmt::Debug for PostgresLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresLedger").field("target", &self.target).finish_non_exhaustive()
    }
}

impl PostgresLedger {
    /// Connects to the database at `url` (`postgres://` or `postgresql://`, libpq style) with a
    /// pool of [`DEFAULT_POOL_SIZE`] connections, and checks that the server answers.
    ///
    /// TLS: `sslmode=require`, `verify-ca` or `verify-full` connect over TLS and verify the server
    /// certificate against the system roots plus `sslrootcert=PATH` (a PEM bundle, e.g. the RDS CA
    /// bundle) — stricter than libpq's `require`, on purpose: a ledger reachable through a forged
    /// certificate can be made to approve duplicate sends. Any other `sslmode` (or none) is plain.
    ///
    /// Does not create the schema: run [`PostgresLedger::migrate`] (`noticectl ledger init`) once.
    pub async fn connect(url: &str) -> Result<Self, LedgerError> {
        Self::connect_with_pool_size(url, DEFAULT_POOL_SIZE).await
    }

    /// [`PostgresLedger::connect`] with `size` pooled connections (at least one).
    pub async fn connect_with_pool_size(url: &str, size: usize) -> Result<Self, LedgerError> {
        let options = ConnectOptions::parse(url)?;
        let mut config = tokio_postgres::Config::from_str(&options.url)
            .map_err(|e| LedgerError::Unavailable(format!("invalid PostgreSQL URL: {}", error_chain(&e))))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("notice-ledger");
        }
        let target = describe(&config);
        let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = match &options.tls {
            None => {
                config.ssl_mode(SslMode::Disable);
                Manager::from_config(config, NoTls, manager_config)
            }
            Some(roots) => {
                config.ssl_mode(SslMode::Require);
                Manager::from_config(config, tls_connector(roots)?, manager_config)
            }
        };
        let pool = Pool::builder(manager)
            .max_size(size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_TIMEOUT))
            .create_timeout(Some(POOL_TIMEOUT))
            .recycle_timeout(Some(POOL_TIMEOUT))
            .build()
            .map_err(|e| LedgerError::Unavailable(format!("PostgreSQL pool for {target}: {e}")))?;
        let ledger = Self { pool, target };
        // Fail at start-up, not on the first message, when the server is unreachable or refuses us.
        let client = ledger.client().await?;
        client.simple_query("SELECT 1").await.map_err(|e| ledger.pg("connection check", e))?;
        debug!(target = %ledger.target, tls = options.tls.is_some(), "PostgreSQL ledger connected");
        Ok(ledger)
    }

    /// Creates the schema ([`MIGRATION`]) if it is missing. Idempotent; concurrent runs wait for
    /// each other.
    pub async fn migrate(&self) -> Result<(), LedgerError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.pg("migrate", e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(|e| self.pg("migrate", e))?;
        tx.batch_execute(MIGRATION).await.map_err(|e| self.pg("migrate", e))?;
        tx.commit().await.map_err(|e| self.pg("migrate", e))
    }

    /// `postgres://user@host:port/db` of this ledger (no password), for logs and operator output.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// Open claims claimed before `claimed_before`: how many, and when the oldest was claimed.
    /// One query over the partial index, cheap enough for a reporter on every tick.
    pub async fn count_open_claims(
        &self,
        claimed_before: DateTime<Utc>,
    ) -> Result<(usize, Option<DateTime<Utc>>), LedgerError> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(*), min(claimed_at) FROM notices WHERE state = 'claimed' AND claimed_at < $1",
                &[&claimed_before],
            )
            .await
            .map_err(|e| self.pg("count open claims", e))?;
        let count: i64 = row.try_get(0).map_err(|e| self.pg("count open claims", e))?;
        let oldest: Option<DateTime<Utc>> = row.try_get(1).map_err(|e| self.pg("count open claims", e))?;
        Ok((usize::try_from(count).unwrap_or(usize::MAX), oldest))
    }

    async fn client(&self) -> Result<deadpool_postgres::Client, LedgerError> {
        self.pool.get().await.map_err(|e| {
            let detail = match &e {
                deadpool_postgres::PoolError::Backend(inner) => error_chain(inner),
                other => other.to_string(),
            };
            LedgerError::Unavailable(format!("PostgreSQL {}: cannot get a connection: {detail}", self.target))
        })
    }

    fn pg(&self, op: &str, e: tokio_postgres::Error) -> LedgerError {
        if let Some(db) = e.as_db_error() {
            if *db.code() == SqlState::UNDEFINED_TABLE {
                return LedgerError::Unavailable(format!(
                    "PostgreSQL {op} on {}: table `notices` does not exist — run \
                     `noticectl ledger init --postgres URL` once",
                    self.target
                ));
            }
            return LedgerError::Unavailable(format!(
                "PostgreSQL {op} on {}: {} (SQLSTATE {})",
                self.target,
                db.message(),
                db.code().code()
            ));
        }
        LedgerError::Unavailable(format!("PostgreSQL {op} on {}: {}", self.target, error_chain(&e)))
    }

    async fn select_row(
        &self,
        client: &impl GenericClient,
        key: &NoticeKey,
        lock: bool,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        let sql = if lock { format!("{SELECT_ONE} FOR UPDATE") } else { SELECT_ONE.to_owned() };
        let stmt = client.prepare_cached(&sql).await.map_err(|e| self.pg("read", e))?;
        let row = client.query_opt(&stmt, &[&key.as_str()]).await.map_err(|e| self.pg("read", e))?;
        row.as_ref().map(read_row).transpose()
    }

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
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.pg("claim", e))?;
        let stmt = tx.prepare_cached(CLAIM).await.map_err(|e| self.pg("claim", e))?;
        let params: [&(dyn ToSql + Sync); 11] = [
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
        ];
        let written = tx.query_opt(&stmt, &params).await.map_err(|e| self.pg("claim", e))?;
        let existing = if written.is_some() {
            None
        } else {
            // Our statement locked the conflicting row, so this reads the version that refused us.
            let row = self.select_row(&tx, &req.key, false).await?.ok_or_else(|| {
                LedgerError::Corrupt(format!(
                    "{}: conflicting row vanished inside a transaction",
                    req.key.prefix()
                ))
            })?;
            Some(row)
        };
        tx.commit().await.map_err(|e| self.pg("claim", e))?;
        Ok(existing)
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
            Some(row) => Err(LedgerError::Conflict(format!(
                "{} is {} and not held by this claim",
                claim.key.prefix(),
                row.state
            ))),
            None => Err(LedgerError::Conflict(format!("{} has no ledger row", claim.key.prefix()))),
        }
    }

    /// An operator transition: any open claim → `to`, origin `operator`. Anything else conflicts.
    async fn operator_transition(
        &self,
        key: &NoticeKey,
        to: RowState,
        at: DateTime<Utc>,
        message_id: Option<&str>,
        detail: String,
    ) -> Result<(), LedgerError> {
        let at = to_micros(at);
        let client = self.client().await?;
        let stmt = client.prepare_cached(OPERATOR).await.map_err(|e| self.pg("operator update", e))?;
        let changed = client
            .execute(
                &stmt,
                &[&to.as_str(), &at, &message_id, &detail, &key.as_str(), &Origin::Operator.as_str()],
            )
            .await
            .map_err(|e| self.pg("operator update", e))?;
        if changed == 1 {
            return Ok(());
        }
        match self.select_row(&client, key, false).await? {
            Some(row) => {
                Err(LedgerError::Conflict(format!("{} is {}, not an open claim", key.prefix(), row.state)))
            }
            None => Err(LedgerError::Conflict(format!("{} has no ledger row", key.prefix()))),
        }
    }

    /// `INSERT … ON CONFLICT DO NOTHING` of a whole row; whether it wrote.
    async fn insert_row(&self, client: &impl GenericClient, row: &LedgerRow) -> Result<bool, LedgerError> {
        let revision = row.revision.to_string();
        let claimed_at = row.claimed_at.map(to_micros);
        let updated_at = to_micros(row.updated_at);
        let stmt = client.prepare_cached(INSERT_ROW).await.map_err(|e| self.pg("insert", e))?;
        let params: [&(dyn ToSql + Sync); 15] = [
            &row.key.as_str(),
            &row.state.as_str(),
            &row.origin.as_str(),
            &row.claim_token.as_ref().map(ClaimToken::as_str),
            &row.subscription_id,
            &row.period_start,
            &row.kind,
            &revision,
            &row.content_digest,
            &claimed_at,
            &updated_at,
            &row.message_id,
            &row.detail,
            &row.delivery_status.map(|d| d.as_str()),
            &row.duplicate_message_ids,
        ];
        let n = client.execute(&stmt, &params).await.map_err(|e| self.pg("insert", e))?;
        Ok(n == 1)
    }

    /// One read-lock-modify-write round of provider evidence; `None` when a concurrent writer
    /// created the row first (the caller reads again).
    async fn evidence_round(&self, ev: &ProviderEvidence) -> Result<Option<EvidenceEffect>, LedgerError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.pg("apply evidence", e))?;
        let effect = match self.select_row(&tx, &ev.key, true).await? {
            None => {
                if !self.insert_row(&tx, &learned_row(ev)).await? {
                    return Ok(None); // dropped transaction rolls back
                }
                EvidenceEffect::Learned
            }
            Some(read) => {
                let mut row = read.clone();
                let effect = apply_to_row(&mut row, ev);
                if row != read {
                    let stmt =
                        tx.prepare_cached(UPDATE_EVIDENCE).await.map_err(|e| self.pg("apply evidence", e))?;
                    tx.execute(
                        &stmt,
                        &[
                            &row.key.as_str(),
                            &row.state.as_str(),
                            &row.message_id,
                            &row.delivery_status.map(|d| d.as_str()),
                            &row.updated_at,
                            &row.duplicate_message_ids,
                        ],
                    )
                    .await
                    .map_err(|e| self.pg("apply evidence", e))?;
                }
                effect
            }
        };
        tx.commit().await.map_err(|e| self.pg("apply evidence", e))?;
        Ok(Some(effect))
    }
}

#[async_trait]
impl Ledger for PostgresLedger {
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

    async fn record_missed(
        &self,
        req: &ClaimRequest,
        reason: &str,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        self.write_claimable(req, RowState::Missed, Some(reason)).await
    }

    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        let client = self.client().await?;
        self.select_row(&client, key, false).await
    }

    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let wanted: Vec<&str> = keys.iter().map(NoticeKey::as_str).collect();
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(&format!("SELECT {COLUMNS} FROM notices WHERE notice_key = ANY($1)"))
            .await
            .map_err(|e| self.pg("read many", e))?;
        let rows = client.query(&stmt, &[&wanted]).await.map_err(|e| self.pg("read many", e))?;
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for row in &rows {
            let row = read_row(row)?;
            found.insert(row.key.clone(), row);
        }
        // Answer in the caller's order, each key once, like the other adapters.
        Ok(keys.iter().filter_map(|k| found.remove(k)).collect())
    }

    async fn count_open_claims(
        &self,
        claimed_before: DateTime<Utc>,
    ) -> Result<(usize, Option<DateTime<Utc>>), LedgerError> {
        PostgresLedger::count_open_claims(self, claimed_before).await
    }

    async fn open_claims(
        &self,
        claimed_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<LedgerRow>, LedgerError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let stmt = client.prepare_cached(QUARANTINE_QUERY).await.map_err(|e| self.pg("open claims", e))?;
        let rows =
            client.query(&stmt, &[&claimed_before, &limit]).await.map_err(|e| self.pg("open claims", e))?;
        rows.iter().map(read_row).collect()
    }

    async fn apply_evidence(&self, ev: &ProviderEvidence) -> Result<EvidenceEffect, LedgerError> {
        // Compare rows at the precision they are stored at, so re-applying an event is a no-op.
        let ev = ProviderEvidence { at: to_micros(ev.at), ..ev.clone() };
        for attempt in 1..=EVIDENCE_ATTEMPTS {
            if let Some(effect) = self.evidence_round(&ev).await? {
                return Ok(effect);
            }
            debug!(
                key = ev.key.prefix(),
                attempt, "row created concurrently while applying evidence; retrying"
            );
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
        let at = to_micros(at);
        self.operator_transition(key, RowState::Released, at, None, release_detail(who, reason, at)).await
    }

    async fn operator_resolve_sent(
        &self,
        key: &NoticeKey,
        message_id: &str,
        who: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        let at = to_micros(at);
        self.operator_transition(key, RowState::Sent, at, Some(message_id), resolve_detail(who, at)).await
    }

    async fn backfill(&self, row: &LedgerRow) -> Result<bool, LedgerError> {
        let client = self.client().await?;
        self.insert_row(&client, row).await
    }
}

// ── Rows ──

fn read_row(row: &Row) -> Result<LedgerRow, LedgerError> {
    fn col<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, idx: usize) -> Result<T, LedgerError> {
        row.try_get(idx).map_err(|e| {
            let name = row.columns().get(idx).map_or("?", |c| c.name());
            LedgerError::Corrupt(format!("column `{name}`: {}", error_chain(&e)))
        })
    }
    let key: String = col(row, 0)?;
    let state: String = col(row, 1)?;
    let origin: String = col(row, 2)?;
    let revision: String = col(row, 7)?;
    let delivery_status: Option<String> = col(row, 13)?;
    Ok(LedgerRow {
        key: NoticeKey::parse(&key).map_err(|e| LedgerError::Corrupt(format!("column `notice_key`: {e}")))?,
        state: state.parse()?,
        origin: origin.parse()?,
        claim_token: col::<Option<String>>(row, 3)?.map(ClaimToken::from_stored),
        subscription_id: col(row, 4)?,
        period_start: col(row, 5)?,
        kind: col(row, 6)?,
        revision: revision
            .parse()
            .map_err(|_| LedgerError::Corrupt(format!("column `revision`: {revision:?} is not a u64")))?,
        content_digest: col(row, 8)?,
        claimed_at: col(row, 9)?,
        updated_at: col(row, 10)?,
        message_id: col(row, 11)?,
        detail: col(row, 12)?,
        delivery_status: delivery_status.as_deref().map(str::parse).transpose()?,
        duplicate_message_ids: col(row, 14)?,
    })
}

/// `at` at the microsecond precision `timestamptz` stores.
fn to_micros(at: DateTime<Utc>) -> DateTime<Utc> {
    at.with_nanosecond(at.nanosecond() / 1_000 * 1_000).unwrap_or(at)
}

/// An error and its sources on one line (tokio-postgres puts the useful part in the source).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let part = inner.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = inner.source();
    }
    text
}

// ── Connection options ──

/// What `connect` takes from the URL beyond what tokio-postgres understands.
#[derive(Debug, PartialEq, Eq)]
struct ConnectOptions {
    /// The URL as tokio-postgres accepts it (`sslmode` normalised, `sslrootcert` removed).
    url: String,
    /// `Some(extra roots)` when TLS is required.
    tls: Option<TlsRoots>,
}

#[derive(Debug, PartialEq, Eq)]
struct TlsRoots {
    /// `sslrootcert=PATH`: a PEM file of CA certificates trusted besides the system roots.
    extra_pem: Option<PathBuf>,
}

impl ConnectOptions {
    /// Splits libpq TLS parameters tokio-postgres does not know (`sslrootcert`, `sslmode=verify-*`)
    /// out of `url`. Never echoes the URL in errors: it may carry a password.
    fn parse(url: &str) -> Result<Self, LedgerError> {
        if !is_postgres_url(url) {
            return Err(LedgerError::Unavailable(
                "a PostgreSQL URL starts with postgres:// or postgresql://".into(),
            ));
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        let mut tls = false;
        let mut extra_pem = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "sslmode" => match value {
                    "disable" | "allow" | "prefer" => tls = false,
                    "require" | "verify-ca" | "verify-full" => tls = true,
                    other => {
                        return Err(LedgerError::Unavailable(format!(
                            "invalid PostgreSQL URL: sslmode={other} (use disable or require/verify-full)"
                        )))
                    }
                },
                "sslrootcert" => extra_pem = Some(PathBuf::from(percent_decode(value)?)),
                _ => kept.push(pair),
            }
        }
        let url = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
        Ok(Self { url, tls: tls.then_some(TlsRoots { extra_pem }) })
    }
}

/// `url` as it may be shown to people and logs: `postgres://user@host:port/db`, without the
/// password or query parameters (which may carry one).
pub fn redacted(url: &str) -> String {
    ConnectOptions::parse(url)
        .ok()
        .and_then(|o| tokio_postgres::Config::from_str(&o.url).ok())
        .map_or_else(|| "postgres://<unparseable URL>".to_owned(), |c| describe(&c))
}

/// Whether `url` names a PostgreSQL database (`postgres://…` or `postgresql://…`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

fn percent_decode(value: &str) -> Result<String, LedgerError> {
    let bad =
        || LedgerError::Unavailable("invalid PostgreSQL URL: bad percent-encoding in sslrootcert".into());
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// `postgres://user@host:port/db`, never the password.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().map(|u| format!("{u}@")).unwrap_or_default();
    let db = config.get_dbname().unwrap_or("");
    format!("postgres://{user}{host}:{port}/{db}")
}

/// A rustls connector trusting the system roots plus `roots.extra_pem`.
fn tls_connector(roots: &TlsRoots) -> Result<tokio_postgres_rustls::MakeRustlsConnect, LedgerError> {
    let tls_err = |what: String| LedgerError::Unavailable(format!("PostgreSQL TLS: {what}"));
    let mut store = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    let (added, _ignored) = store.add_parsable_certificates(native.certs);
    if !native.errors.is_empty() {
        debug!(errors = native.errors.len(), added, "some system root certificates could not be loaded");
    }
    if let Some(path) = &roots.extra_pem {
        use rustls::pki_types::pem::PemObject;
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
            .map_err(|e| tls_err(format!("sslrootcert {}: {e}", path.display())))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_err(format!("sslrootcert {}: {e}", path.display())))?;
        if certs.is_empty() {
            return Err(tls_err(format!("sslrootcert {} holds no PEM certificate", path.display())));
        }
        for cert in certs {
            store.add(cert).map_err(|e| tls_err(format!("sslrootcert {}: {e}", path.display())))?;
        }
    }
    if store.is_empty() {
        return Err(tls_err(
            "no trusted root certificates: install the system CA bundle or set sslrootcert=PATH".into(),
        ));
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(e.to_string()))?
        .with_root_certificates(store)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_unless_tls_is_required() {
        let o = ConnectOptions::parse("postgres://u:pw@db:5432/notices").expect("parse");
        assert_eq!(o, ConnectOptions { url: "postgres://u:pw@db:5432/notices".into(), tls: None });
        let o = ConnectOptions::parse("postgresql://db/n?sslmode=prefer&application_name=x").expect("parse");
        assert_eq!(o.url, "postgresql://db/n?application_name=x");
        assert_eq!(o.tls, None);
    }

    #[test]
    fn tls_modes_and_root_certificates() {
        let o = ConnectOptions::parse("postgres://db/n?sslmode=require").expect("parse");
        assert_eq!(o.url, "postgres://db/n");
        assert_eq!(o.tls, Some(TlsRoots { extra_pem: None }));
        let o = ConnectOptions::parse(
            "postgres://db/n?sslmode=verify-full&sslrootcert=%2Fopt%2Frds%20ca.pem&connect_timeout=5",
        )
        .expect("parse");
        assert_eq!(o.url, "postgres://db/n?connect_timeout=5");
        assert_eq!(o.tls, Some(TlsRoots { extra_pem: Some(PathBuf::from("/opt/rds ca.pem")) }));
    }

    #[test]
    fn bad_urls_are_refused_without_echoing_them() {
        for url in ["mysql://u:hunter2@db/n", "postgres://u:hunter2@db/n?sslmode=sometimes"] {
            match ConnectOptions::parse(url) {
                Err(LedgerError::Unavailable(msg)) => assert!(!msg.contains("hunter2"), "{msg}"),
                other => panic!("{url}: {other:?}"),
            }
        }
        assert!(ConnectOptions::parse("postgres://db/n?sslmode=require&sslrootcert=%zz").is_err());
    }

    #[test]
    fn redacted_urls_keep_where_but_not_the_secret() {
        assert_eq!(
            redacted("postgresql://ada:hunter2@db:6543/ledger?sslmode=require&password=hunter2"),
            "postgres://ada@db:6543/ledger"
        );
        assert!(!redacted("postgres://ada:hunter2@db/x?sslmode=bogus").contains("hunter2"));
    }

    #[test]
    fn descriptions_never_carry_the_password() {
        let config: tokio_postgres::Config =
            "postgres://ada:hunter2@db.internal:6543/ledger".parse().expect("url");
        assert_eq!(describe(&config), "postgres://ada@db.internal:6543/ledger");
    }

    #[test]
    fn times_are_kept_to_the_microsecond() {
        let at = DateTime::parse_from_rfc3339("2026-10-01T09:00:00.123456789Z").expect("time").to_utc();
        assert_eq!(to_micros(at).to_rfc3339(), "2026-10-01T09:00:00.123456+00:00");
    }
}
