//! The behaviour every ledger adapter must share, written once over `Arc<dyn Ledger>` and run
//! against each adapter by [`ledger_suite_tests!`](crate::ledger_suite_tests).
//!
//! Each case gets a fresh, empty ledger. Times are whole seconds, so the precision an adapter
//! stores (nanoseconds, microseconds, milliseconds) never decides a result.
//!
//! Adapters may differ in one place, and the suite accepts both answers: repeating a transition
//! whose result already stands (a retry after a lost reply) is `Ok` for DynamoDB and PostgreSQL and
//! a `Conflict` for memory and SQLite. Either way the row must be unchanged.
//!
//! The cases live in six files: `claims` (claim → commit: minting, token-guarded commits,
//! release, missed windows, revisions, reads), `resolution` (the quarantine view, provider
//! evidence, operator actions, backfill), `rules` (every write from every starting row, against
//! the core's one definition of the transition rules), `withdraws` (tombstones: what they hold
//! off, evidence over them, racing a claim), `buckets` (the per-domain rate buckets each store
//! keeps beside its rows: compare-and-set, burst and refill, racing senders), `rotation` (alias
//! rows while two key secret versions are active), `updated_rows` (the operator's read of the
//! rows written in a time range, page by page) and `evidence` (the
//! charge time, jurisdiction and rendered-notice evidence a row keeps for an audit). The key
//! check each store keeps beside its rows is one case here,
//! [`the_first_key_check_recorded_is_the_one_every_opening_reads`].

mod buckets;
mod claims;
mod evidence;
mod resolution;
mod rotation;
mod rules;
mod updated_rows;
mod withdraws;

pub use buckets::{
    bucket_writes_apply_only_under_their_condition, buckets_admit_the_burst_then_refill_at_the_rate,
    racing_gates_never_admit_more_than_the_burst, racing_takes_of_many_tokens_share_the_burst_exactly,
};

pub use claims::{
    a_claim_recognises_its_own_token, commits_are_conditional_on_the_claim_token,
    concurrent_claims_mint_exactly_once, get_many_answers_in_the_callers_order,
    missed_windows_are_recorded_once, released_keys_can_be_claimed_again, revisions_are_distinct_keys,
};
pub use evidence::{
    charge_time_and_jurisdiction_are_kept_as_evidence, the_obligation_rule_is_kept_as_evidence,
    the_rendered_notice_is_kept_as_evidence,
};
pub use resolution::{
    a_batch_of_evidence_applies_each_keys_events_in_order, backfill_never_overwrites,
    claims_made_off_the_view_are_listed_when_put_on, concurrent_evidence_loses_nothing,
    keys_are_found_by_prefix, open_claims_lists_old_claims_oldest_first_within_the_limit,
    operator_actions_only_touch_open_claims, provider_evidence_resolves_learns_and_detects_duplicates,
};
pub use rotation::{
    aliases_keep_a_notice_claimable_under_one_key, claims_under_two_versions_racing_mint_once,
};
pub use rules::every_write_obeys_the_transition_rules;
pub use updated_rows::rows_are_read_by_the_time_of_their_last_write;
pub use withdraws::{
    a_claim_and_a_withdraw_racing_on_one_key_exclude_each_other,
    a_tombstone_holds_off_every_claim_and_only_a_send_event_moves_it,
};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use notice_ledger::keycheck::{KeyCheck, KeyCheckStore};
use notice_ledger::ledger::{
    Claim, ClaimOutcome, ClaimRequest, ClaimToken, DeliveryStatus, Ledger, LedgerRow, Origin,
    ProviderEvidence, WithdrawRequest,
};
use notice_ledger::rate::BucketStore;
use notice_ledger::{LedgerError, NoticeKey};

/// Runs every suite case as its own `#[tokio::test]` in the invoking module. `$fixture` is an
/// async fn returning a [`SuiteFixture`] over a fresh, empty ledger.
#[macro_export]
macro_rules! ledger_suite_tests {
    ($fixture:path) => {
        $crate::ledger_suite_tests!(@cases $fixture;
            concurrent_claims_mint_exactly_once,
            a_claim_recognises_its_own_token,
            commits_are_conditional_on_the_claim_token,
            released_keys_can_be_claimed_again,
            missed_windows_are_recorded_once,
            open_claims_lists_old_claims_oldest_first_within_the_limit,
            claims_made_off_the_view_are_listed_when_put_on,
            revisions_are_distinct_keys,
            provider_evidence_resolves_learns_and_detects_duplicates,
            concurrent_evidence_loses_nothing,
            a_batch_of_evidence_applies_each_keys_events_in_order,
            operator_actions_only_touch_open_claims,
            backfill_never_overwrites,
            keys_are_found_by_prefix,
            get_many_answers_in_the_callers_order,
            every_write_obeys_the_transition_rules,
            charge_time_and_jurisdiction_are_kept_as_evidence,
            the_rendered_notice_is_kept_as_evidence,
            the_obligation_rule_is_kept_as_evidence,
            a_tombstone_holds_off_every_claim_and_only_a_send_event_moves_it,
            a_claim_and_a_withdraw_racing_on_one_key_exclude_each_other,
            aliases_keep_a_notice_claimable_under_one_key,
            claims_under_two_versions_racing_mint_once,
            rows_are_read_by_the_time_of_their_last_write,
        );
        $crate::ledger_suite_tests!(@bucket_cases $fixture;
            bucket_writes_apply_only_under_their_condition,
            buckets_admit_the_burst_then_refill_at_the_rate,
            racing_gates_never_admit_more_than_the_burst,
            racing_takes_of_many_tokens_share_the_burst_exactly,
        );
        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn the_first_key_check_recorded_is_the_one_every_opening_reads() {
            let fixture = $fixture().await;
            let (first, reopened) = fixture.key_checks();
            $crate::ledger_suite::the_first_key_check_recorded_is_the_one_every_opening_reads(first, reopened)
                .await;
        }
    };
    (@cases $fixture:path; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let fixture = $fixture().await;
                $crate::ledger_suite::$case(fixture.ledger()).await;
            }
        )*
    };
    (@bucket_cases $fixture:path; $($case:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let fixture = $fixture().await;
                $crate::ledger_suite::$case(fixture.buckets()).await;
            }
        )*
    };
}

/// A fresh ledger, the rate buckets its store keeps, plus whatever must stay alive while they are
/// used (emulator, temp dir, …).
pub struct SuiteFixture {
    ledger: Arc<dyn Ledger>,
    buckets: Arc<dyn BucketStore>,
    /// The key check through this ledger's handle, and through a second opening of the same store.
    key_checks: Option<(Arc<dyn KeyCheckStore>, Arc<dyn KeyCheckStore>)>,
    _keep: Box<dyn std::any::Any + Send + Sync>,
}

impl SuiteFixture {
    pub fn new(
        ledger: Arc<dyn Ledger>,
        buckets: Arc<dyn BucketStore>,
        keep: impl std::any::Any + Send + Sync,
    ) -> Self {
        Self { ledger, buckets, key_checks: None, _keep: Box::new(keep) }
    }

    /// The store's key check: `first` through this fixture's ledger, `reopened` through a second
    /// opening of the same store (another process, a restart).
    pub fn with_key_checks(
        mut self,
        first: Arc<dyn KeyCheckStore>,
        reopened: Arc<dyn KeyCheckStore>,
    ) -> Self {
        self.key_checks = Some((first, reopened));
        self
    }

    pub fn key_checks(&self) -> (Arc<dyn KeyCheckStore>, Arc<dyn KeyCheckStore>) {
        self.key_checks
            .clone()
            .unwrap_or_else(|| panic!("this fixture keeps no key check: use with_key_checks"))
    }

    pub fn ledger(&self) -> Arc<dyn Ledger> {
        Arc::clone(&self.ledger)
    }

    pub fn buckets(&self) -> Arc<dyn BucketStore> {
        Arc::clone(&self.buckets)
    }
}

// ── the key check ──

/// Two senders start at once on an empty ledger with different secrets: the store keeps exactly
/// one check, both are told which, and no later opening or recording ever replaces it.
pub async fn the_first_key_check_recorded_is_the_one_every_opening_reads(
    first: Arc<dyn KeyCheckStore>,
    reopened: Arc<dyn KeyCheckStore>,
) {
    let check = |c: char| {
        KeyCheck::parse(&format!("v1:{}", c.to_string().repeat(64))).unwrap_or_else(|e| panic!("{e}"))
    };
    let (a, b) = (check('a'), check('b'));
    assert_eq!(
        first.key_check().await.unwrap_or_else(|e| panic!("read: {e}")),
        None,
        "a fresh ledger holds no check"
    );
    assert_eq!(reopened.key_check().await.unwrap_or_else(|e| panic!("read: {e}")), None);

    let (held_a, held_b) = tokio::join!(first.record_key_check(&a), reopened.record_key_check(&b));
    let (held_a, held_b) = (
        held_a.unwrap_or_else(|e| panic!("record a: {e}")),
        held_b.unwrap_or_else(|e| panic!("record b: {e}")),
    );
    assert_eq!(held_a, held_b, "racing first starts must agree on one check");
    let winner = held_a;
    assert!(winner == a || winner == b, "{winner:?} is neither recorded check");
    let loser = if winner == a { b } else { a };

    for store in [&first, &reopened] {
        assert_eq!(store.key_check().await.unwrap_or_else(|e| panic!("read: {e}")), Some(winner.clone()));
        assert_eq!(
            store.record_key_check(&loser).await.unwrap_or_else(|e| panic!("record again: {e}")),
            winner,
            "a later record returns the first check and never replaces it"
        );
    }
    assert_eq!(first.key_check().await.unwrap_or_else(|e| panic!("read: {e}")), Some(winner));
}

// ── helpers ──

/// A fresh key whose first hex character is `shard`; unique across the test binary.
pub fn key_in(shard: u8) -> NoticeKey {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    NoticeKey::parse(&format!("{:x}{:063x}", shard % 16, n)).unwrap_or_else(|e| panic!("test key: {e}"))
}

/// A fresh key, spread over all shards.
pub fn fresh_key() -> NoticeKey {
    static SHARD: AtomicU64 = AtomicU64::new(0);
    key_in((SHARD.fetch_add(1, Ordering::Relaxed) % 16) as u8)
}

/// A fixed instant plus `secs` (whole seconds: every adapter stores them exactly).
pub fn t(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + secs, 0).single().unwrap_or_else(|| panic!("time {secs}"))
}

/// A producer's withdraw of `key` at `at`.
pub fn withdraw_request(key: &NoticeKey, at: DateTime<Utc>) -> WithdrawRequest {
    WithdrawRequest {
        key: key.clone(),
        subscription_id: "sub_8812".into(),
        period_start: "2026-10-01".into(),
        kind: "renewal_notice_t72".into(),
        revision: 0,
        origin: Origin::Worker,
        detail: notice_ledger::ledger::withdraw_detail("suite", Some("cancelled"), at),
        at,
        aliases: Vec::new(),
    }
}

/// A worker's claim request for `key` at `at`, with a fresh token.
pub fn request(key: &NoticeKey, at: DateTime<Utc>) -> ClaimRequest {
    ClaimRequest {
        key: key.clone(),
        token: ClaimToken::random(),
        subscription_id: "sub_8812".into(),
        period_start: "2026-10-01".into(),
        kind: "renewal_notice_t72".into(),
        revision: 0,
        content_digest: "digest-1".into(),
        at,
        charge_at: Some(at + chrono::Duration::hours(72)),
        jurisdiction: Some("US-CA".into()),
        rendered: None,
        obligation: None,
        aliases: Vec::new(),
        on_quarantine_view: true,
    }
}

pub fn evidence(
    key: &NoticeKey,
    message_id: &str,
    status: DeliveryStatus,
    at: DateTime<Utc>,
) -> ProviderEvidence {
    ProviderEvidence { key: key.clone(), message_id: message_id.into(), status, at }
}

pub fn is_conflict<T: std::fmt::Debug>(result: &Result<T, LedgerError>) -> bool {
    matches!(result, Err(LedgerError::Conflict(_)))
}

/// The stored row, which must exist.
pub async fn row(ledger: &dyn Ledger, key: &NoticeKey) -> LedgerRow {
    ledger
        .get(key)
        .await
        .unwrap_or_else(|e| panic!("get {}: {e}", key.prefix()))
        .unwrap_or_else(|| panic!("{} has no row", key.prefix()))
}

/// Claims `req`, which must mint.
pub async fn mint(ledger: &dyn Ledger, req: &ClaimRequest) -> Claim {
    match ledger.claim(req).await {
        Ok(ClaimOutcome::Minted(claim)) => claim,
        other => panic!("expected a fresh claim of {}, got {other:?}", req.key.prefix()),
    }
}

/// Claims `req`, which must be held off; returns the row that holds it.
pub async fn held(ledger: &dyn Ledger, req: &ClaimRequest) -> LedgerRow {
    match ledger.claim(req).await {
        Ok(ClaimOutcome::Held(row)) => row,
        other => panic!("expected {} to be held, got {other:?}", req.key.prefix()),
    }
}

/// The claim that holds `key`, as its owner knows it.
async fn own_claim(ledger: &dyn Ledger, key: &NoticeKey) -> Claim {
    let stored = row(ledger, key).await;
    Claim {
        key: key.clone(),
        token: stored.claim_token.unwrap_or_else(|| panic!("{} is claimed without a token", key.prefix())),
        claimed_at: stored.claimed_at.unwrap_or_else(|| panic!("{} is claimed without a time", key.prefix())),
    }
}

/// A repeat of a transition that already happened: `Ok` (recognised retry) or `Conflict`, and
/// the row must not change either way.
async fn assert_repeat_changes_nothing(
    ledger: &dyn Ledger,
    key: &NoticeKey,
    what: &str,
    result: Result<(), LedgerError>,
    before: &LedgerRow,
) {
    assert!(matches!(result, Ok(()) | Err(LedgerError::Conflict(_))), "{what}: {result:?}");
    assert_eq!(&row(ledger, key).await, before, "{what} changed the row");
}
