//! SQLite ledger: the embedded default for local runs — a real file, safe for several processes.
//!
//! The claim is the seed design's `insert … on conflict … returning`: one statement that either
//! inserts (or takes over a `released` row) and returns the new token, or returns nothing because
//! someone holds the key. WAL mode plus a busy timeout lets two processes share one file; every
//! write runs in `BEGIN IMMEDIATE`, so SQLite serialises writers and a claim is durable on commit.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

use notice_ledger::keycheck::{stored_name, KeyCheck, KeyCheckStore};
use notice_ledger::ledger::rules::{permits, Verdict, Write};
use notice_ledger::ledger::{
    apply_to_row, learned_row, release_detail, resolve_detail, Claim, ClaimLedger, ClaimOutcome,
    ClaimRequest, ClaimToken, EvidenceEffect, EvidenceLedger, LedgerRow, OperatorLedger, Origin,
    ProviderEvidence, QuarantineView, RenderedNotice, RowReader, RowState, WithdrawRequest,
};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

pub mod rate;

pub use rate::SqliteBuckets;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS notices (
    notice_key      TEXT PRIMARY KEY,
    state           TEXT NOT NULL,
    origin          TEXT NOT NULL,
    claim_token     TEXT,
    subscription_id TEXT NOT NULL,
    period_start    TEXT NOT NULL,
    kind            TEXT NOT NULL,
    revision        INTEGER NOT NULL,
    content_digest  TEXT,
    claimed_at_ms   INTEGER,
    updated_at_ms   INTEGER NOT NULL,
    message_id      TEXT,
    detail          TEXT,
    delivery_status TEXT,
    -- JSON array of further provider message ids: duplicates that really went out.
    duplicate_message_ids TEXT NOT NULL DEFAULT '[]'
);
-- The quarantine view reads only open claims (a partial index, like the DynamoDB sparse GSI).
CREATE INDEX IF NOT EXISTS notices_open_claims ON notices (claimed_at_ms) WHERE state = 'claimed';
-- Facts about the ledger itself, by name (`key_check`: the key secret's check); never a notice.
CREATE TABLE IF NOT EXISTS ledger_meta (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
";

/// Columns added after the first schema, with their types: [`create_schema`] adds any a
/// file lacks when it is opened, so an older ledger file needs no migration step. Evidence: the
/// charge a notice announced (epoch ms) and the jurisdiction it was judged in; what rendered the
/// message ([`RenderedNotice`]: configuration version, template, digest — all three or none).
const ADDED_COLUMNS: &[(&str, &str)] = &[
    ("charge_at_ms", "INTEGER"),
    ("jurisdiction", "TEXT"),
    ("config_version", "TEXT"),
    ("template", "TEXT"),
    ("rendered_digest", "TEXT"),
];

const COLUMNS: &str =
    "notice_key, state, origin, claim_token, subscription_id, period_start, kind, revision, \
                       content_digest, claimed_at_ms, updated_at_ms, message_id, detail, delivery_status, duplicate_message_ids, \
                       charge_at_ms, jurisdiction, config_version, template, rendered_digest";

/// Creates `path` (if missing) and sets it to 0600 exactly: a creation mode alone is filtered by the
/// umask. An in-memory or special path (`:memory:`) is left alone.
fn private_file(path: &Path) -> std::io::Result<()> {
    if path.as_os_str() == ":memory:" {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        options.open(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    #[cfg(not(unix))]
    options.open(path)?;
    Ok(())
}

#[derive(Clone)]
pub struct SqliteLedger {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
}

impl SqliteLedger {
    /// Opens (creating if needed) the ledger file. The file holds subscription ids and states:
    /// it is made 0600 before SQLite opens it (its -wal and -shm files take the same mode), so
    /// other local users cannot read it whatever the umask.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, LedgerError> {
        let path = path.as_ref().to_path_buf();
        private_file(&path).map_err(|e| LedgerError::Unavailable(format!("{}: {e}", path.display())))?;
        let mut conn = Connection::open(&path)
            .map_err(|e| LedgerError::Unavailable(format!("{}: {e}", path.display())))?;
        conn.busy_timeout(BUSY_WAIT).map_err(sql)?;
        wal_mode(&conn)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(sql)?;
        create_schema(&mut conn)?;
        Ok(Self { conn: Arc::new(Mutex::new(conn)), path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs a blocking database call off the async runtime.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, LedgerError> + Send + 'static,
    ) -> Result<T, LedgerError> {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut guard)
        })
        .await
        .map_err(|e| LedgerError::Unavailable(format!("ledger task failed: {e}")))?
    }

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

/// How long one statement waits for another process's lock before it fails: the busy timeout,
/// and the bound on [`wal_mode`]'s retries.
const BUSY_WAIT: Duration = Duration::from_secs(10);

/// Puts the file in WAL mode, retrying while another process holds it. Turning a new file to WAL
/// needs it to itself, and SQLite answers "database is locked" at once instead of calling the
/// busy handler, so two `noticectl` processes started together on a new file failed to open it.
fn wal_mode(conn: &Connection) -> Result<(), LedgerError> {
    let deadline = std::time::Instant::now() + BUSY_WAIT;
    loop {
        // A file SQLite cannot put in WAL mode (an in-memory one) keeps the mode it has, as before.
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Ok(()) => return Ok(()),
            Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(sql(e)),
        }
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Creates the tables and adds the [`ADDED_COLUMNS`] a file lacks, so an older ledger file needs
/// no migration step. One `BEGIN IMMEDIATE` transaction: it takes the write lock first (waiting
/// in the busy handler), so two processes opening one file at once neither fail on a lock
/// upgrade nor both add a column (the second sees it and adds nothing).
fn create_schema(conn: &mut Connection) -> Result<(), LedgerError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
    tx.execute_batch(SCHEMA).map_err(sql)?;
    tx.execute_batch(rate::SCHEMA).map_err(sql)?;
    let present: Vec<String> = {
        let mut stmt = tx.prepare("SELECT name FROM pragma_table_info('notices')").map_err(sql)?;
        let names = stmt.query_map([], |r| r.get(0)).map_err(sql)?;
        names.collect::<Result<_, _>>().map_err(sql)?
    };
    for (name, kind) in ADDED_COLUMNS {
        if !present.iter().any(|p| p == name) {
            tx.execute_batch(&format!("ALTER TABLE notices ADD COLUMN {name} {kind}")).map_err(sql)?;
        }
    }
    tx.commit().map_err(sql)
}

fn sql(e: rusqlite::Error) -> LedgerError {
    LedgerError::Unavailable(format!("sqlite: {e}"))
}

fn ts(ms: i64) -> Result<DateTime<Utc>, LedgerError> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .ok_or_else(|| LedgerError::Corrupt(format!("timestamp {ms} out of range")))
}

fn read_row(row: &Row<'_>) -> rusqlite::Result<Result<LedgerRow, LedgerError>> {
    let key: String = row.get(0)?;
    let state: String = row.get(1)?;
    let origin: String = row.get(2)?;
    let token: Option<String> = row.get(3)?;
    let revision: i64 = row.get(7)?;
    let claimed_at: Option<i64> = row.get(9)?;
    let updated_at: i64 = row.get(10)?;
    let delivery_status: Option<String> = row.get(13)?;
    let duplicates: String = row.get(14)?;
    let charge_at: Option<i64> = row.get(15)?;
    let build = || -> Result<LedgerRow, LedgerError> {
        Ok(LedgerRow {
            key: NoticeKey::parse(&key).map_err(|e| LedgerError::Corrupt(e.to_string()))?,
            state: state.parse()?,
            origin: origin.parse()?,
            claim_token: token.map(ClaimToken::from_stored),
            subscription_id: row.get(4).map_err(sql)?,
            period_start: row.get(5).map_err(sql)?,
            kind: row.get(6).map_err(sql)?,
            revision: u64::try_from(revision)
                .map_err(|_| LedgerError::Corrupt(format!("revision {revision}")))?,
            content_digest: row.get(8).map_err(sql)?,
            claimed_at: claimed_at.map(ts).transpose()?,
            updated_at: ts(updated_at)?,
            message_id: row.get(11).map_err(sql)?,
            detail: row.get(12).map_err(sql)?,
            delivery_status: delivery_status.as_deref().map(str::parse).transpose()?,
            duplicate_message_ids: serde_json::from_str(&duplicates)
                .map_err(|e| LedgerError::Corrupt(format!("duplicate_message_ids: {e}")))?,
            charge_at: charge_at.map(ts).transpose()?,
            jurisdiction: row.get(16).map_err(sql)?,
            rendered: RenderedNotice::from_stored(
                row.get(17).map_err(sql)?,
                row.get(18).map_err(sql)?,
                row.get(19).map_err(sql)?,
            )?,
        })
    };
    Ok(build())
}

fn select_row(conn: &Connection, key: &str) -> Result<Option<LedgerRow>, LedgerError> {
    conn.query_row(&format!("SELECT {COLUMNS} FROM notices WHERE notice_key = ?1"), [key], read_row)
        .optional()
        .map_err(sql)?
        .transpose()
}

/// The first row at an alias key that refuses an alias ([`Write::Alias`]): the notice already
/// lives under that older secret version's key. Inside the write's transaction.
fn alias_refused(conn: &Connection, aliases: &[NoticeKey]) -> Result<Option<LedgerRow>, LedgerError> {
    for key in aliases {
        if let Some(row) = select_row(conn, key.as_str())? {
            if permits(Some(&row), Write::Alias) == Verdict::Refuse {
                return Ok(Some(row));
            }
        }
    }
    Ok(None)
}

/// The aliases of `row` (a first write under the current secret version), in its transaction.
fn put_aliases(conn: &Connection, aliases: &[NoticeKey], row: &LedgerRow) -> Result<(), LedgerError> {
    aliases.iter().try_for_each(|key| write_row(conn, &LedgerRow::alias_at(key, row)))
}

/// Writes a whole row (insert or replace): only for read-modify-write inside a transaction.
fn write_row(conn: &Connection, row: &LedgerRow) -> Result<(), LedgerError> {
    conn.execute(
        &format!("INSERT OR REPLACE INTO notices ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)"),
        params![
            row.key.as_str(),
            row.state.as_str(),
            row.origin.as_str(),
            row.claim_token.as_ref().map(ClaimToken::as_str),
            row.subscription_id,
            row.period_start,
            row.kind,
            i64::try_from(row.revision).map_err(|_| LedgerError::Corrupt("revision too large".into()))?,
            row.content_digest,
            row.claimed_at.map(|t| t.timestamp_millis()),
            row.updated_at.timestamp_millis(),
            row.message_id,
            row.detail,
            row.delivery_status.map(|d| d.as_str()),
            serde_json::to_string(&row.duplicate_message_ids).map_err(|e| LedgerError::Corrupt(e.to_string()))?,
            row.charge_at.map(|t| t.timestamp_millis()),
            row.jurisdiction,
            row.rendered.as_ref().map(|r| &r.config_version),
            row.rendered.as_ref().map(|r| &r.template),
            row.rendered.as_ref().map(|r| &r.rendered_digest),
        ],
    )
    .map_err(sql)?;
    Ok(())
}

/// Updates an open claim with `set`; any other state is a conflict.
fn update_open_claim(
    conn: &Connection,
    key: &NoticeKey,
    set: &str,
    values: &[&dyn rusqlite::ToSql],
) -> Result<(), LedgerError> {
    let mut params: Vec<&dyn rusqlite::ToSql> = values.to_vec();
    let key_str = key.as_str();
    params.push(&key_str);
    let n = params.len();
    let changed = conn
        .execute(
            &format!("UPDATE notices SET {set} WHERE notice_key = ?{n} AND state = 'claimed'"),
            params.as_slice(),
        )
        .map_err(sql)?;
    if changed == 1 {
        return Ok(());
    }
    match select_row(conn, key.as_str())? {
        Some(row) => {
            Err(LedgerError::Conflict(format!("{} is {}, not an open claim", key.prefix(), row.state)))
        }
        None => Err(LedgerError::Conflict(format!("{} has no ledger row", key.prefix()))),
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
                                  charge_at_ms, jurisdiction, config_version, template, rendered_digest)
             VALUES (?1, ?2, 'worker', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, ?11, ?12, ?13, ?14, ?15, ?16)
             ON CONFLICT (notice_key) DO UPDATE SET
                 state = excluded.state, origin = excluded.origin, claim_token = excluded.claim_token,
                 content_digest = excluded.content_digest, claimed_at_ms = excluded.claimed_at_ms,
                 updated_at_ms = excluded.updated_at_ms, message_id = NULL, detail = excluded.detail,
                 charge_at_ms = excluded.charge_at_ms, jurisdiction = excluded.jurisdiction,
                 config_version = excluded.config_version, template = excluded.template,
                 rendered_digest = excluded.rendered_digest
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
                 config_version = NULL, template = NULL, rendered_digest = NULL
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
impl RowReader for SqliteLedger {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        let key = key.as_str().to_owned();
        self.with(move |conn| select_row(conn, &key)).await
    }
    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        let keys: Vec<String> = keys.iter().map(|k| k.as_str().to_owned()).collect();
        self.with(move |conn| {
            let mut out = Vec::new();
            for key in &keys {
                if let Some(row) = select_row(conn, key)? {
                    out.push(row);
                }
            }
            Ok(out)
        })
        .await
    }
}

#[async_trait]
impl QuarantineView for SqliteLedger {
    async fn open_claims(
        &self,
        claimed_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<LedgerRow>, LedgerError> {
        let before = claimed_before.timestamp_millis();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(move |conn| {
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT {COLUMNS} FROM notices WHERE state = 'claimed' AND claimed_at_ms < ?1
                     ORDER BY claimed_at_ms LIMIT ?2"
                ))
                .map_err(sql)?;
            let rows = stmt.query_map(params![before, limit], read_row).map_err(sql)?;
            rows.map(|r| r.map_err(sql)?).collect()
        })
        .await
    }
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

#[async_trait]
impl EvidenceLedger for SqliteLedger {
    async fn apply_evidence(&self, ev: &ProviderEvidence) -> Result<EvidenceEffect, LedgerError> {
        let ev = ev.clone();
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            let (row, effect) = match select_row(&tx, ev.key.as_str())? {
                None => (learned_row(&ev), EvidenceEffect::Learned),
                Some(mut row) => {
                    let effect = apply_to_row(&mut row, &ev);
                    (row, effect)
                }
            };
            write_row(&tx, &row)?;
            tx.commit().map_err(sql)?;
            Ok(effect)
        })
        .await
    }
}

#[async_trait]
impl OperatorLedger for SqliteLedger {
    async fn operator_release(
        &self,
        key: &NoticeKey,
        who: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        let key = key.clone();
        let detail = release_detail(who, reason, at);
        self.with(move |conn| {
            update_open_claim(
                conn,
                &key,
                "state = 'released', origin = ?1, detail = ?2, updated_at_ms = ?3",
                &[&Origin::Operator.as_str(), &detail, &at.timestamp_millis()],
            )
        })
        .await
    }
    async fn operator_resolve_sent(
        &self,
        key: &NoticeKey,
        message_id: &str,
        who: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        let key = key.clone();
        let message_id = message_id.to_owned();
        let detail = resolve_detail(who, at);
        self.with(move |conn| {
            update_open_claim(
                conn,
                &key,
                "state = 'sent', origin = ?1, message_id = ?2, detail = ?3, updated_at_ms = ?4",
                &[&Origin::Operator.as_str(), &message_id, &detail, &at.timestamp_millis()],
            )
        })
        .await
    }
    async fn backfill(&self, row: &LedgerRow) -> Result<bool, LedgerError> {
        let row = row.clone();
        self.with(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
            let wrote = if select_row(&tx, row.key.as_str())?.is_some() {
                false
            } else {
                write_row(&tx, &row)?;
                true
            };
            tx.commit().map_err(sql)?;
            Ok(wrote)
        })
        .await
    }

    async fn keys_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<NoticeKey>, LedgerError> {
        let (from, to) = (prefix.to_owned(), notice_ledger::ledger::prefix_end(prefix));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.with(move |conn| {
            let mut stmt = conn
                .prepare("SELECT notice_key FROM notices WHERE notice_key >= ?1 AND notice_key < ?2 ORDER BY notice_key LIMIT ?3")
                .map_err(sql)?;
            let keys = stmt.query_map(params![from, to, limit], |r| r.get::<_, String>(0)).map_err(sql)?;
            keys.map(|k| {
                let k = k.map_err(sql)?;
                NoticeKey::parse(&k).map_err(|e| LedgerError::Corrupt(format!("notice_key {k:?}: {e}")))
            })
            .collect()
        })
        .await
    }

    /// Rows by key after the cursor, filtered on `updated_at_ms` (no index on it: a table read,
    /// at an operator's pace).
    async fn rows_updated_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<notice_ledger::ledger::RowPage, LedgerError> {
        let (since, until) = (since.timestamp_millis(), until.timestamp_millis());
        let after = cursor.unwrap_or("").to_owned();
        // One row more than asked: whether another page follows.
        let ask = i64::try_from(limit).unwrap_or(i64::MAX - 1).saturating_add(1);
        let mut rows: Vec<LedgerRow> = self
            .with(move |conn| {
                let mut stmt = conn
                    .prepare(&format!(
                        "SELECT {COLUMNS} FROM notices WHERE updated_at_ms >= ?1 AND updated_at_ms < ?2
                         AND notice_key > ?3 ORDER BY notice_key LIMIT ?4"
                    ))
                    .map_err(sql)?;
                let rows = stmt.query_map(params![since, until, after, ask], read_row).map_err(sql)?;
                rows.map(|r| r.map_err(sql)?).collect()
            })
            .await?;
        let next = (rows.len() > limit).then(|| {
            rows.truncate(limit);
            rows.last().map(|r| r.key.as_str().to_owned())
        });
        Ok(notice_ledger::ledger::RowPage { rows, next: next.flatten() })
    }
}

/// The key check kept in this ledger file's `ledger_meta` table (shares the ledger's connection).
#[derive(Clone)]
pub struct SqliteKeyCheck {
    ledger: SqliteLedger,
}

impl SqliteLedger {
    /// The key check kept in this ledger's file (its table is created on open).
    pub fn key_checks(&self) -> SqliteKeyCheck {
        SqliteKeyCheck { ledger: self.clone() }
    }
}

fn stored_key_check(conn: &Connection, version: u32) -> Result<Option<KeyCheck>, LedgerError> {
    conn.query_row("SELECT value FROM ledger_meta WHERE name = ?1", [stored_name(version)], |r| {
        r.get::<_, String>(0)
    })
    .optional()
    .map_err(sql)?
    .map(|stored| KeyCheck::parse(&stored))
    .transpose()
}

#[async_trait]
impl KeyCheckStore for SqliteKeyCheck {
    async fn key_check_of(&self, version: u32) -> Result<Option<KeyCheck>, LedgerError> {
        self.ledger.with(move |conn| stored_key_check(conn, version)).await
    }

    /// `INSERT … ON CONFLICT DO NOTHING` and the read back in one `BEGIN IMMEDIATE`: of two
    /// processes recording at once, the first writer's check is what both return.
    async fn record_key_check(&self, check: &KeyCheck) -> Result<KeyCheck, LedgerError> {
        let stored = check.to_stored();
        let (version, name) = (check.version_number(), stored_name(check.version_number()));
        self.ledger
            .with(move |conn| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)?;
                tx.execute(
                    "INSERT INTO ledger_meta (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
                    params![name, stored],
                )
                .map_err(sql)?;
                let held = stored_key_check(&tx, version)?
                    .ok_or_else(|| LedgerError::Corrupt("key check vanished inside a transaction".into()))?;
                tx.commit().map_err(sql)?;
                Ok(held)
            })
            .await
    }
}

#[cfg(test)]
mod upgrade_tests;

#[cfg(test)]
mod open_race_tests;

#[cfg(test)]
mod key_check_tests {
    use super::*;

    fn check(c: char) -> KeyCheck {
        KeyCheck::parse(&format!("v1:{}", c.to_string().repeat(64))).unwrap()
    }

    #[tokio::test]
    async fn the_first_key_check_stays_across_reopening_and_a_corrupt_one_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let store = SqliteLedger::open(&path).unwrap().key_checks();
        assert_eq!(store.key_check().await.unwrap(), None);
        assert_eq!(store.record_key_check(&check('a')).await.unwrap(), check('a'));
        assert_eq!(store.key_check().await.unwrap(), Some(check('a')));
        // A second process with another secret gets the first check back, never its own.
        let reopened = SqliteLedger::open(&path).unwrap().key_checks();
        assert_eq!(reopened.key_check().await.unwrap(), Some(check('a')));
        assert_eq!(reopened.record_key_check(&check('b')).await.unwrap(), check('a'));
        assert_eq!(store.key_check().await.unwrap(), Some(check('a')));
        // The check is no notice row: the key scan does not see it.
        assert!(reopened.ledger.keys_with_prefix("", 10).await.unwrap().is_empty());

        let conn = Connection::open(&path).unwrap();
        conn.execute("UPDATE ledger_meta SET value = 'v1:not-hex' WHERE name = 'key_check'", []).unwrap();
        assert!(matches!(store.key_check().await, Err(LedgerError::Corrupt(_))));
        assert!(matches!(store.record_key_check(&check('a')).await, Err(LedgerError::Corrupt(_))));
    }

    #[tokio::test]
    async fn a_file_from_before_key_checks_gets_the_table_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        drop(SqliteLedger::open(&path).unwrap());
        Connection::open(&path).unwrap().execute_batch("DROP TABLE ledger_meta").unwrap();
        let store = SqliteLedger::open(&path).unwrap().key_checks();
        assert_eq!(store.key_check().await.unwrap(), None);
        assert_eq!(store.record_key_check(&check('c')).await.unwrap(), check('c'));
    }
}
