//! The revision rule: which revision a billing fact's notice gets, decided from the ledger's own
//! rows and their content digests — never from a counter, an event id or an arrival order.
//!
//! The intake reads, for one (subscription, period, kind), the rows of revisions 0, 1, 2, … up
//! to and including the first revision that has no row. Then, for the content `D` it is about to
//! announce (the job's [`content_digest`](crate::job::Job::content_digest), the very digest the sender
//! stores on the row it claims):
//!
//! 1. a revision whose row carries `D` → **that revision** (reuse): the notice with this content
//!    exists, and the ledger suppresses the copy — a redelivered or reordered webhook mints none;
//! 2. else, a `withdrawn` row → **nothing**: the period's notice was withdrawn (the subscription
//!    ends with it), and a renewal event that arrives after its cancellation must not revive it;
//! 3. else → **the first revision without a row** (mint): the first notice of the period, or one
//!    corrected notice per distinct announced amount. Earlier revisions whose row is `released`
//!    (claimable again by a retry of their old job) are withdrawn alongside, so the old terms
//!    cannot go out after the new ones.
//!
//! A job is only ever minted at the first revision without a row, so the revisions with rows are
//! contiguous from 0, and the scan can stop at the first gap. Its one race — two different
//! contents planned before either is claimed — is stated in [`crate::intake`]'s header.

use crate::ledger::{LedgerRow, RowState};

/// The rows of one revision of a notice, under every active secret version (aliases left out:
/// they only point at the row under the current version, which is read too).
#[derive(Clone, Debug, PartialEq)]
pub struct RevisionRows {
    pub revision: u64,
    pub rows: Vec<LedgerRow>,
}

impl RevisionRows {
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn has_digest(&self, digest: &str) -> bool {
        self.rows.iter().any(|r| r.content_digest.as_deref() == Some(digest))
    }

    fn has_state(&self, state: RowState) -> bool {
        self.rows.iter().any(|r| r.state == state)
    }

    /// Whether this revision's tombstone was left by the intake moving the notice on to
    /// `revision` with content `digest` ([`superseded_mark`] in its withdraw reason).
    fn superseded_to(&self, revision: u64, digest: &str) -> bool {
        let mark = superseded_mark(revision, digest);
        self.rows
            .iter()
            .any(|r| r.state == RowState::Withdrawn && r.detail.as_deref().is_some_and(|d| d.contains(&mark)))
    }
}

/// What the intake writes into the reason of the withdraw that supersedes a pending price-change
/// notice: the revision the change moved to and its content digest. The tombstone keeps the
/// reason (its `detail`), so a redelivery of the same change that comes after the tombstone
/// landed, while the new notice still waits without a row, finds where its notice already is —
/// the pending notice's body cannot be read from the ledger, only this mark.
pub fn superseded_mark(revision: u64, digest: &str) -> String {
    format!("{SUPERSEDED}{revision} (content {digest})")
}

const SUPERSEDED: &str = "superseded by revision ";

/// What the intake writes into the reason of the withdraw of a trial's old end when the trial's
/// end moves. Like a supersession, it does not end the notice's period for good: the trial may
/// move back, and its end's notice is then owed again ([`announcement`]).
pub fn trial_moved(old: &str, new: &str) -> String {
    format!("{TRIAL_MOVED}{old} to {new}")
}

const TRIAL_MOVED: &str = "the trial's end moved from ";

/// Whether `row` is a tombstone that ends its period's notice: withdrawn for a reason other than
/// a newer announcement ([`superseded_mark`]) or a moved trial ([`trial_moved`]) — a cancellation,
/// an operator's withdraw, a trial that ended early.
fn ends_period(row: &LedgerRow) -> bool {
    row.state == RowState::Withdrawn
        && !row.detail.as_deref().is_some_and(|d| d.contains(SUPERSEDED) || d.contains(TRIAL_MOVED))
}

/// What the rule decides for a send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RevisionChoice {
    /// This content is already the notice at this revision.
    Reuse(u64),
    /// The period's notice was withdrawn at this revision: nothing to send.
    Withdrawn(u64),
    /// A new notice at `revision`; `superseded`: earlier revisions to withdraw (their rows are
    /// `released`, so a retry of their old job could still claim them).
    Mint { revision: u64, superseded: Vec<u64> },
    /// A reminder planned ahead was already told (claimed, sent or decided) at this revision with
    /// other content: it is not planned again ([`reminder`]).
    Told(u64),
}

/// What the rule decides for a cancellation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WithdrawChoice {
    /// Withdraw these revisions: the first without a row (whatever job may be queued or parked for
    /// it) and every `released` one.
    Withdraw(Vec<u64>),
    /// A tombstone is already there: nothing more to do.
    AlreadyWithdrawn(u64),
}

/// The first revision without a row, if the scan reached one.
pub fn first_gap(scanned: &[RevisionRows]) -> Option<u64> {
    scanned.iter().find(|r| r.is_empty()).map(|r| r.revision)
}

/// The rule for a send of content `digest` over a scan that reached its first gap (`None` when
/// it did not: the caller reads further).
pub fn choose(scanned: &[RevisionRows], digest: &str) -> Option<RevisionChoice> {
    let gap = first_gap(scanned)?;
    let before_gap = scanned.iter().filter(|r| r.revision < gap);
    if let Some(found) = before_gap.clone().find(|r| r.has_digest(digest)) {
        return Some(RevisionChoice::Reuse(found.revision));
    }
    if let Some(found) = before_gap.clone().find(|r| r.has_state(RowState::Withdrawn)) {
        return Some(RevisionChoice::Withdrawn(found.revision));
    }
    let superseded = before_gap.filter(|r| r.has_state(RowState::Released)).map(|r| r.revision).collect();
    Some(RevisionChoice::Mint { revision: gap, superseded })
}

/// The rule for a cancellation over a scan that reached its first gap (`None` otherwise).
pub fn withdraw(scanned: &[RevisionRows]) -> Option<WithdrawChoice> {
    let gap = first_gap(scanned)?;
    let before_gap = scanned.iter().filter(|r| r.revision < gap);
    if let Some(found) = before_gap.clone().find(|r| r.has_state(RowState::Withdrawn)) {
        return Some(WithdrawChoice::AlreadyWithdrawn(found.revision));
    }
    Some(WithdrawChoice::Withdraw(pending_from(scanned, gap)))
}

/// The rule for a cancellation of an announced notice (a price change's, a trial conversion's:
/// [`price_change`], [`announcement`]): the first revision without a row (where a pending notice
/// sits), the one after it, and every `released` one, whatever tombstones come before — withdrawn
/// rows there are superseded amounts, not the end of the period. The one after the gap is where
/// the pending notice sits when the supersession's tombstone its plan sent to the gap has not
/// landed yet (a trial created and cancelled within seconds): withdrawing it costs one row and
/// leaves no notice standing. `None` when the scan did not reach its first gap.
///
/// A cancellation delivered again finds its own tombstone just before the gap (`reason` in its
/// detail) and withdraws nothing more: without that, every redelivery would write one more
/// tombstone and spend one more of the period's revisions.
pub fn withdraw_pending(scanned: &[RevisionRows], reason: &str) -> Option<WithdrawChoice> {
    let gap = first_gap(scanned)?;
    let own = |r: &LedgerRow| {
        r.state == RowState::Withdrawn
            && r.detail.as_deref().is_some_and(|d| d.ends_with(&format!(": {reason}")))
    };
    if let Some(before) = gap.checked_sub(1).and_then(|b| scanned.iter().find(|r| r.revision == b)) {
        if before.rows.iter().any(own) {
            return Some(WithdrawChoice::AlreadyWithdrawn(before.revision));
        }
    }
    let mut revisions = pending_from(scanned, gap);
    revisions.push(gap + 1);
    Some(WithdrawChoice::Withdraw(revisions))
}

/// What the rule decides for a price change (see [`price_change`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PriceChoice {
    /// This new amount is already the notice at this revision: the same body again.
    Reuse(u64),
    /// Withdraw these revisions (where a pending notice may sit, and every `released` one) and
    /// announce nothing: the price went back before anything was told.
    Withdraw(Vec<u64>),
    /// This change back's own tombstone is already at this revision: nothing more to do.
    WentBack(u64),
    /// Withdraw `superseded` and announce the new amount at `revision`.
    Mint { revision: u64, superseded: Vec<u64> },
}

/// The rule for a price-change notice of content `digest` — one notice per announced new amount.
///
/// It differs from [`choose`] in three places, both because a price can change several times
/// within one period while its notice waits (parked for weeks) without a row:
///
/// - a `withdrawn` row does not end the period: it is a superseded or withdrawn announcement, and
///   a later new amount is still owed;
/// - only the latest revision with a row is reused: an amount announced, superseded and then
///   restored is announced again, never left behind the amount that superseded it;
/// - a new amount never shares a revision with an earlier one still waiting: the notice that may
///   be pending sits at the first revision without a row (every notice is minted there), so that
///   revision is withdrawn and the new amount is minted one past it. The tombstone suppresses the
///   old amount whenever its job arrives; a withdraw that finds it already claimed is answered
///   `withdraw_too_late` and the new amount still goes out (the customer was told the old one).
///
/// A change back (`back`: the new amount is the one in force; its withdraw reason) before anything
/// was told withdraws the pending notice and mints nothing. The pending notice sits at the first
/// revision without a row — or one past it, when the tombstone its change sent to that revision has
/// not landed yet (the two events came seconds apart) — so both are withdrawn. A change back
/// delivered again finds its own tombstone (`back` in its detail) just before the first revision
/// without a row and withdraws nothing more. Once something was claimed or sent, the customer was
/// told another amount, so the one in force is announced like any change.
///
/// `None` when the scan did not reach its first gap.
pub fn price_change(scanned: &[RevisionRows], digest: &str, back: Option<&str>) -> Option<PriceChoice> {
    let gap = first_gap(scanned)?;
    if let Some(revision) = announced_at(scanned, gap, digest) {
        return Some(PriceChoice::Reuse(revision));
    }
    let told = scanned
        .iter()
        .filter(|r| r.revision < gap)
        .any(|r| r.has_state(RowState::Claimed) || r.has_state(RowState::Sent));
    let mut superseded = pending_from(scanned, gap);
    match back {
        Some(reason) if !told => {
            let own = |r: &LedgerRow| {
                r.state == RowState::Withdrawn
                    && r.detail.as_deref().is_some_and(|d| d.ends_with(&format!(": {reason}")))
            };
            let before = gap.checked_sub(1).and_then(|b| scanned.iter().find(|r| r.revision == b));
            if let Some(before) = before.filter(|b| b.rows.iter().any(own)) {
                return Some(PriceChoice::WentBack(before.revision));
            }
            superseded.push(gap + 1);
            Some(PriceChoice::Withdraw(superseded))
        }
        _ => Some(PriceChoice::Mint { revision: gap + 1, superseded }),
    }
}

/// The rule for a notice planned **ahead** of its window from facts that may still change before
/// it is sent — a trial's conversion, planned weeks ahead from the subscription's own event and
/// parked without a row, whose amount or plan can change during the trial. One notice per
/// announced content, as [`price_change`] decides it (the latest revision with this content is
/// reused; a new content is minted one past the first revision without a row, which is withdrawn
/// with every `released` one, so the parked old content meets a tombstone), with one difference:
/// a tombstone that ends the period (a cancellation, not a supersession or a moved trial) ends it
/// here too, so an event delivered after the cancellation revives nothing.
///
/// A content is never minted where another may be parked: without this rule, two contents
/// planned before either is claimed would share one identity, and the second would be refused as
/// a payload conflict while the first told the customer the old amount.
///
/// `None` when the scan did not reach its first gap.
pub fn announcement(scanned: &[RevisionRows], digest: &str) -> Option<RevisionChoice> {
    let gap = first_gap(scanned)?;
    if let Some(revision) = announced_at(scanned, gap, digest) {
        return Some(RevisionChoice::Reuse(revision));
    }
    let before_gap = scanned.iter().filter(|r| r.revision < gap);
    if let Some(ended) = before_gap.clone().find(|r| r.rows.iter().any(ends_period)) {
        return Some(RevisionChoice::Withdrawn(ended.revision));
    }
    Some(RevisionChoice::Mint { revision: gap + 1, superseded: pending_from(scanned, gap) })
}

/// Where an announcement ([`price_change`], [`announcement`]) of content `digest` already is,
/// over a scan whose first revision without a row is `gap`:
/// - the latest revision with a row, when it carries this content — only the latest: an older
///   revision with it was superseded by another content since, and reusing it would leave the
///   newer one standing;
/// - else the gap itself, when the tombstone just before it says its supersession moved this very
///   content there: the same change delivered again after its withdraw landed and before its
///   notice (waiting at the gap, parked or queued) was claimed — the same body at the same
///   revision, never a second withdraw and mint, which, racing the claim, could announce it twice.
fn announced_at(scanned: &[RevisionRows], gap: u64, digest: &str) -> Option<u64> {
    let latest = scanned.iter().rfind(|r| r.revision < gap);
    if let Some(latest) = latest.filter(|r| r.has_digest(digest)) {
        return Some(latest.revision);
    }
    scanned.iter().any(|r| r.revision + 1 == gap && r.superseded_to(gap, digest)).then_some(gap)
}

/// The revisions a new announcement or a cancellation withdraws over a scan whose first revision
/// without a row is `gap`: every `released` one (a retry of its old job could still claim it) and
/// the gap, where a notice planned before may wait without a row.
fn pending_from(scanned: &[RevisionRows], gap: u64) -> Vec<u64> {
    let mut revisions: Vec<u64> = scanned
        .iter()
        .filter(|r| r.revision < gap && r.has_state(RowState::Released))
        .map(|r| r.revision)
        .collect();
    revisions.push(gap);
    revisions
}

/// The rule for a reminder planned **ahead** of its renewal by the events of the renewals before
/// it (an anniversary reminder: for a weekly or daily term, every renewal's event within its lead
/// plans it). Each of those events states the charge it comes before, so their contents can
/// differ — a proration, a credit, a tax change on one invoice — and the reminder is told once and
/// not planned again (a price change is announced by its own notice): [`choose`], except that
/// where it would mint a new content past a revision already claimed, sent or decided (any row
/// but `released` or `withdrawn`), that revision stands and nothing is minted. Without this, the
/// next week's invoice after the reminder went out would send a second one.
///
/// `None` when the scan did not reach its first gap.
pub fn reminder(scanned: &[RevisionRows], digest: &str) -> Option<RevisionChoice> {
    let choice = choose(scanned, digest)?;
    if !matches!(choice, RevisionChoice::Mint { .. }) {
        return Some(choice);
    }
    let decided = |row: &LedgerRow| !matches!(row.state, RowState::Released | RowState::Withdrawn);
    match scanned.iter().find(|r| r.rows.iter().any(decided)) {
        Some(told) => Some(RevisionChoice::Told(told.revision)),
        None => Some(choice),
    }
}
