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

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::config::SslMode;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::NoTls;
use tracing::debug;

use notice_ledger::keycheck::{stored_name, KeyCheck, KeyCheckStore};
use notice_ledger::ledger::{
    apply_to_row, learned_row, release_detail, resolve_detail, Claim, ClaimLedger, ClaimOutcome,
    ClaimRequest, ClaimToken, EvidenceEffect, EvidenceLedger, LedgerRow, OperatorLedger, Origin,
    ProviderEvidence, QuarantineView, RowReader, RowState, WithdrawRequest,
};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

mod connect;
pub mod rate;
mod rows;
mod sql;

pub use rate::PostgresBuckets;

pub use connect::{is_postgres_url, redacted};
pub use sql::{MIGRATION, QUARANTINE_QUERY};

use connect::{describe, tls_connector, ConnectOptions};
use rows::{error_chain, read_row, to_micros};
use sql::*;

/// Connections per ledger handle: enough for a sender's concurrent jobs, small enough that many
/// Lambda instances do not exhaust the server's `max_connections`.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// Longest wait for a connection (new or pooled) before the operation reports the ledger unavailable.
const POOL_TIMEOUT: Duration = Duration::from_secs(10);

/// Applied when the URL sets no `connect_timeout`: an unreachable server must fail, not hang a send.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Read-modify-write rounds for provider evidence before reporting contention.
const EVIDENCE_ATTEMPTS: u32 = 3;

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
            if *db.code() == SqlState::UNDEFINED_COLUMN {
                return LedgerError::Unavailable(format!(
                    "PostgreSQL {op} on {}: {} — the schema predates this version: run \
                     `noticectl ledger init --postgres URL` again (it only adds the missing columns)",
                    self.target,
                    db.message()
                ));
            }
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
        let charge_at = req.charge_at.map(to_micros);
        let rendered = req.rendered.as_ref();
        let params: [&(dyn ToSql + Sync); 16] = [
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
        let charge_at = row.charge_at.map(to_micros);
        let stmt = client.prepare_cached(INSERT_ROW).await.map_err(|e| self.pg("insert", e))?;
        let rendered = row.rendered.as_ref();
        let params: [&(dyn ToSql + Sync); 20] = [
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
            &charge_at,
            &row.jurisdiction,
            &rendered.map(|r| r.config_version.as_str()),
            &rendered.map(|r| r.template.as_str()),
            &rendered.map(|r| r.rendered_digest.as_str()),
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
                            &row.detail,
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
impl RowReader for PostgresLedger {
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
}

#[async_trait]
impl QuarantineView for PostgresLedger {
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

#[async_trait]
impl EvidenceLedger for PostgresLedger {
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
}

#[async_trait]
impl OperatorLedger for PostgresLedger {
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

    async fn keys_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<NoticeKey>, LedgerError> {
        let (from, to) = (prefix.to_owned(), notice_ledger::ledger::prefix_end(prefix));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT notice_key FROM notices WHERE notice_key >= $1 AND notice_key < $2 ORDER BY notice_key LIMIT $3",
                &[&from, &to, &limit],
            )
            .await
            .map_err(|e| self.pg("read keys by prefix", e))?;
        rows.iter()
            .map(|r| {
                let k: String = r.get(0);
                NoticeKey::parse(&k).map_err(|e| LedgerError::Corrupt(format!("notice_key {k:?}: {e}")))
            })
            .collect()
    }

    /// Rows by key after the cursor, filtered on `updated_at` (no index on it: a read of the
    /// table's rows, at an operator's pace).
    async fn rows_updated_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<notice_ledger::ledger::RowPage, LedgerError> {
        let after = cursor.unwrap_or("").to_owned();
        // One row more than asked: whether another page follows.
        let ask = i64::try_from(limit).unwrap_or(i64::MAX - 1).saturating_add(1);
        let client = self.client().await?;
        let found = client
            .query(
                format!(
                    "SELECT {COLUMNS} FROM notices WHERE updated_at >= $1 AND updated_at < $2 \
                     AND notice_key > $3 ORDER BY notice_key LIMIT $4"
                )
                .as_str(),
                &[&since, &until, &after, &ask],
            )
            .await
            .map_err(|e| self.pg("read rows by update time", e))?;
        let mut rows = found.iter().map(read_row).collect::<Result<Vec<_>, _>>()?;
        let next = (rows.len() > limit).then(|| {
            rows.truncate(limit);
            rows.last().map(|r| r.key.as_str().to_owned())
        });
        Ok(notice_ledger::ledger::RowPage { rows, next: next.flatten() })
    }
}

/// The key check kept in this ledger database's `ledger_meta` table (created by the same
/// migration as `notices`, i.e. `noticectl ledger init`; shares the ledger's connection pool).
#[derive(Clone, Debug)]
pub struct PostgresKeyCheck {
    ledger: PostgresLedger,
}

impl PostgresLedger {
    /// The key check kept next to this ledger's `notices` table.
    pub fn key_checks(&self) -> PostgresKeyCheck {
        PostgresKeyCheck { ledger: self.clone() }
    }
}

impl PostgresKeyCheck {
    fn pg(&self, op: &str, e: tokio_postgres::Error) -> LedgerError {
        if e.as_db_error().is_some_and(|db| *db.code() == SqlState::UNDEFINED_TABLE) {
            return LedgerError::Unavailable(format!(
                "PostgreSQL key check {op} on {}: table `ledger_meta` does not exist — run \
                 `noticectl ledger init --postgres URL` (it is idempotent)",
                self.ledger.target
            ));
        }
        self.ledger.pg(&format!("key check {op}"), e)
    }

    async fn held(&self, client: &impl GenericClient, version: u32) -> Result<Option<KeyCheck>, LedgerError> {
        let name = stored_name(version);
        let row = client.query_opt(SELECT_KEY_CHECK, &[&name]).await.map_err(|e| self.pg("read", e))?;
        row.map(|r| r.try_get::<_, String>(0).map_err(|e| self.pg("read", e)))
            .transpose()?
            .map(|stored| KeyCheck::parse(&stored))
            .transpose()
    }
}

#[async_trait]
impl KeyCheckStore for PostgresKeyCheck {
    async fn key_check_of(&self, version: u32) -> Result<Option<KeyCheck>, LedgerError> {
        let client = self.ledger.client().await?;
        self.held(&client, version).await
    }

    /// `INSERT … ON CONFLICT (name) DO NOTHING`, then the row: a racing first writer's insert
    /// makes ours wait for its commit and do nothing, so both read the first check.
    async fn record_key_check(&self, check: &KeyCheck) -> Result<KeyCheck, LedgerError> {
        let client = self.ledger.client().await?;
        let name = stored_name(check.version_number());
        client
            .execute(INSERT_KEY_CHECK, &[&name, &check.to_stored()])
            .await
            .map_err(|e| self.pg("write", e))?;
        self.held(&client, check.version_number())
            .await?
            .ok_or_else(|| LedgerError::Corrupt("the key check vanished after it was recorded".into()))
    }
}
