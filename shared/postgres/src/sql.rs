//! The SQL the ledger runs: schema, claim, transitions, quarantine view.

/// The schema, version 1. Idempotent: safe to run on every deploy and from several processes at
/// once when run through [`PostgresLedger::migrate`] (which serialises runs with an advisory lock).
///
/// The `CHECK`s are there for workers in other languages sharing the table: a key in upper-case
/// hex or an unknown state would silently defeat deduplication, so the database refuses them.
pub const MIGRATION: &str = r"
CREATE TABLE IF NOT EXISTS notices (
    notice_key      text PRIMARY KEY CHECK (notice_key ~ '^([0-9a-f]{64}|v[1-9][0-9]{0,5}-[0-9a-f]{56})$'),
    state           text NOT NULL CHECK (state IN ('claimed', 'sent', 'rejected', 'missed', 'released', 'withdrawn', 'alias')),
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
-- Tables made before withdraw or key rotation existed: let the state check admit `withdrawn` and
-- `alias`, and the key check keys under a later secret version (`v2-` and 56 hex characters) —
-- once each; a check is only rebuilt, and the table re-validated, while it lacks them.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'notices'::regclass AND conname = 'notices_state_check'
                     AND pg_get_constraintdef(oid) LIKE '%alias%') THEN
        ALTER TABLE notices DROP CONSTRAINT IF EXISTS notices_state_check;
        ALTER TABLE notices ADD CONSTRAINT notices_state_check
            CHECK (state IN ('claimed', 'sent', 'rejected', 'missed', 'released', 'withdrawn', 'alias'));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'notices'::regclass AND conname = 'notices_notice_key_check'
                     AND pg_get_constraintdef(oid) LIKE '%{56}%') THEN
        ALTER TABLE notices DROP CONSTRAINT IF EXISTS notices_notice_key_check;
        ALTER TABLE notices ADD CONSTRAINT notices_notice_key_check
            CHECK (notice_key ~ '^([0-9a-f]{64}|v[1-9][0-9]{0,5}-[0-9a-f]{56})$');
    END IF;
END $$;
-- Per-recipient-domain send rate shared by every sender (GCRA: theoretical arrival time of the
-- next send, microseconds since the epoch); one conditional write per admitted send.
CREATE TABLE IF NOT EXISTS rate_buckets (
    domain     text PRIMARY KEY CHECK (domain <> ''),
    tat_us     bigint NOT NULL,
    updated_at timestamptz NOT NULL
);
-- Facts about the ledger itself, by name, beside its rows and never a notice: `key_check` holds
-- the key secret's check (`<version>:<64 hex>`), written once by the first sender.
CREATE TABLE IF NOT EXISTS ledger_meta (
    name  text PRIMARY KEY CHECK (name <> ''),
    value text NOT NULL
);
-- Evidence: the charge a notice announced and the jurisdiction it was judged in. Added by
-- ALTER so that re-running `ledger init` brings a table made by an earlier version up to date;
-- rows written before stay NULL.
ALTER TABLE notices ADD COLUMN IF NOT EXISTS charge_at timestamptz;
ALTER TABLE notices ADD COLUMN IF NOT EXISTS jurisdiction text;
-- Evidence of what was sent: the notice configuration's version, the template used
-- (`<kind>/<locale>`) and the hex SHA-256 of the rendered message. Written together or not at
-- all (the CHECK keeps other-language workers to that; the adapter reads a partial row as
-- corrupt); rows written before, or without them, stay NULL.
ALTER TABLE notices ADD COLUMN IF NOT EXISTS config_version text;
ALTER TABLE notices ADD COLUMN IF NOT EXISTS template text;
ALTER TABLE notices ADD COLUMN IF NOT EXISTS rendered_digest text;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'notices'::regclass AND conname = 'notices_rendered_check') THEN
        ALTER TABLE notices ADD CONSTRAINT notices_rendered_check CHECK (
            (config_version IS NULL) = (template IS NULL) AND (template IS NULL) = (rendered_digest IS NULL));
    END IF;
END $$;
-- Evidence of why: the obligation rule that owed the notice (`US-CA/ca-annual-term`), from the
-- job. Rows written before, and a producer's own jobs, stay NULL.
ALTER TABLE notices ADD COLUMN IF NOT EXISTS obligation text;
";

/// A secret version's key check row in `ledger_meta` (`key_check`, `key_check/v2`, …).
pub(crate) const SELECT_KEY_CHECK: &str = "SELECT value FROM ledger_meta WHERE name = $1";
/// Records a version's key check unless one is held (the first writer wins; the loser reads it back).
pub(crate) const INSERT_KEY_CHECK: &str =
    "INSERT INTO ledger_meta (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING";

/// Advisory lock key that serialises concurrent [`PostgresLedger::migrate`] runs
/// (`CREATE … IF NOT EXISTS` alone can still collide when two run at the same instant).
pub(crate) const MIGRATION_LOCK: i64 = 0x6e6f_7469_6365_0001;

pub(crate) const COLUMNS: &str =
    "notice_key, state, origin, claim_token, subscription_id, period_start, kind, \
                       revision::text, content_digest, claimed_at, updated_at, message_id, detail, \
                       delivery_status, duplicate_message_ids, charge_at, jurisdiction, \
                       config_version, template, rendered_digest, obligation";

pub(crate) const SELECT_ONE: &str =
    "SELECT notice_key, state, origin, claim_token, subscription_id, period_start, kind, \
                          revision::text, content_digest, claimed_at, updated_at, message_id, detail, \
                          delivery_status, duplicate_message_ids, charge_at, jurisdiction, \
                          config_version, template, rendered_digest, obligation FROM notices \
                          WHERE notice_key = $1";

/// The quarantine view: open claims claimed before `$1` (timestamptz), oldest first, at most `$2`
/// (bigint). Served by the partial index `notices_open_claims`, so it never reads decided rows.
pub const QUARANTINE_QUERY: &str = "SELECT notice_key, state, origin, claim_token, subscription_id, \
     period_start, kind, revision::text, content_digest, claimed_at, updated_at, message_id, detail, \
     delivery_status, duplicate_message_ids, charge_at, jurisdiction, config_version, template, \
     rendered_digest, obligation FROM notices WHERE state = 'claimed' \
     AND claimed_at < $1 \
     ORDER BY claimed_at, notice_key LIMIT $2";

/// Inserts a worker row (`claimed` or `missed`), or takes over a `released` one. Returns the
/// token only when it wrote.
pub(crate) const CLAIM: &str = "
INSERT INTO notices (notice_key, state, origin, claim_token, subscription_id, period_start, kind,
                     revision, content_digest, claimed_at, updated_at, message_id, detail,
                     charge_at, jurisdiction, config_version, template, rendered_digest, obligation)
VALUES ($1, $2, 'worker', $3, $4, $5, $6, $7::text::numeric, $8, $9, $10, NULL, $11, $12, $13, $14, $15,
        $16, $17)
ON CONFLICT (notice_key) DO UPDATE SET
    state = excluded.state, origin = excluded.origin, claim_token = excluded.claim_token,
    content_digest = excluded.content_digest, claimed_at = excluded.claimed_at,
    updated_at = excluded.updated_at, message_id = NULL, detail = excluded.detail,
    charge_at = excluded.charge_at, jurisdiction = excluded.jurisdiction,
    config_version = excluded.config_version, template = excluded.template,
    rendered_digest = excluded.rendered_digest, obligation = excluded.obligation
WHERE notices.state = 'released'
RETURNING claim_token";

/// Writes a withdraw's tombstone where a claim could be written (no row, or a `released` one): no
/// claim token, no content digest. Returns the key only when it wrote.
pub(crate) const WITHDRAW: &str = "
INSERT INTO notices (notice_key, state, origin, claim_token, subscription_id, period_start, kind,
                     revision, content_digest, claimed_at, updated_at, message_id, detail)
VALUES ($1, 'withdrawn', $2, NULL, $3, $4, $5, $6::text::numeric, NULL, NULL, $7, NULL, $8)
ON CONFLICT (notice_key) DO UPDATE SET
    state = excluded.state, origin = excluded.origin, claim_token = NULL, content_digest = NULL,
    claimed_at = NULL, updated_at = excluded.updated_at, message_id = NULL, detail = excluded.detail,
    charge_at = NULL, jurisdiction = NULL, config_version = NULL, template = NULL, rendered_digest = NULL,
    obligation = NULL
WHERE notices.state = 'released'
RETURNING notice_key";

/// Puts an alias at a notice's key under an older secret version: inserted, or rewritten over an
/// alias (`DO UPDATE` locks the row either way). Returns the key only when it wrote; any other row
/// there holds the notice.
pub(crate) const PUT_ALIAS: &str = "
INSERT INTO notices (notice_key, state, origin, claim_token, subscription_id, period_start, kind,
                     revision, content_digest, claimed_at, updated_at, message_id, detail)
VALUES ($1, 'alias', $2, NULL, $3, $4, $5, $6::text::numeric, NULL, NULL, $7, NULL, $8)
ON CONFLICT (notice_key) DO UPDATE SET updated_at = excluded.updated_at
WHERE notices.state = 'alias'
RETURNING notice_key";

/// Inserts a whole row unless the key exists (backfill, learned rows).
pub(crate) const INSERT_ROW: &str = "
INSERT INTO notices (notice_key, state, origin, claim_token, subscription_id, period_start, kind,
                     revision, content_digest, claimed_at, updated_at, message_id, detail,
                     delivery_status, duplicate_message_ids, charge_at, jurisdiction, config_version,
                     template, rendered_digest, obligation)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::text::numeric, $9, $10, $11, $12, $13, $14, $15, $16, $17,
        $18, $19, $20, $21)
ON CONFLICT (notice_key) DO NOTHING";

/// Rewrites the fields provider evidence may change (inside the transaction that locked the row).
pub(crate) const UPDATE_EVIDENCE: &str = "
UPDATE notices SET state = $2, message_id = $3, delivery_status = $4, updated_at = $5,
                   duplicate_message_ids = $6, detail = $7
WHERE notice_key = $1";

/// A worker transition out of its own claim.
pub(crate) const TRANSITION: &str = "
UPDATE notices SET state = $1, updated_at = $2,
                   message_id = COALESCE($3, message_id), detail = COALESCE($4, detail)
WHERE notice_key = $5 AND state = 'claimed' AND claim_token = $6";

/// An operator transition out of any open claim.
pub(crate) const OPERATOR: &str = "
UPDATE notices SET state = $1, origin = $6, updated_at = $2,
                   message_id = COALESCE($3, message_id), detail = $4
WHERE notice_key = $5 AND state = 'claimed'";
