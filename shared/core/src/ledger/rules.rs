//! The ledger's transition rules, as one pure function: which write a row permits.
//!
//! Public so that every adapter, in whatever crate, obeys the one table — the memory ledger
//! (`notice_testkit`) by calling [`permits`], the durable ones by encoding the same conditions in
//! their single atomic write (DynamoDB condition expressions, PostgreSQL `WHERE` clauses, SQLite
//! `ON CONFLICT … WHERE`) — and the shared adapter suite checks each of them against it:
//!
//! | write | permitted on |
//! |---|---|
//! | claim, record missed | no row, or a `released` row (a `claimed` row with the writer's own token is its own claim) |
//! | withdraw | no row, or a `released` row (a `withdrawn` row is already withdrawn) |
//! | commit sent / rejected, release (worker) | a `claimed` row holding the writer's claim token |
//! | operator release / resolve | any `claimed` row |
//! | backfill | no row |
//! | alias (beside a first write under the current secret version) | no row, or an `alias` row |
//!
//! Nothing ever moves a decided row (`sent`, `rejected`, `missed`, `withdrawn`) back; only provider
//! evidence moves a row forward to `sent` ([`super::apply_to_row`]) — out of `withdrawn` only a
//! `Send` event. Ledgers with a TTL let it delete only
//! rows [`expires`] allows.

use super::{ClaimToken, LedgerRow, RowState};

/// A write the ledger is asked to make.
#[derive(Clone, Copy, Debug)]
pub enum Write<'a> {
    /// A worker's claim (or its record of a missed window) with its fresh token.
    Claim { token: &'a ClaimToken },
    /// A worker leaving `claimed`: commit sent, commit rejected, release.
    Commit { token: &'a ClaimToken },
    /// An operator's audited resolution of an open claim.
    Operator,
    /// A backfilled row for a notice sent before enforcement.
    Backfill,
    /// A withdraw's tombstone.
    Withdraw,
    /// An alias at a notice's key under an older secret version, written atomically with the
    /// notice's first row under the current one ([`crate::keyring`]).
    Alias,
}

/// What the existing row says about a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Write it.
    Apply,
    /// Already done by this same writer (a retried request): report success, write nothing.
    AlreadyOwn,
    /// Refused: the row holds the key.
    Refuse,
}

/// The one definition of which write a row permits.
pub fn permits(existing: Option<&LedgerRow>, write: Write<'_>) -> Verdict {
    let state = existing.map(|r| r.state);
    let holds = |token: &ClaimToken| existing.is_some_and(|r| r.claim_token.as_ref() == Some(token));
    match write {
        Write::Claim { token } => match state {
            None | Some(RowState::Released) => Verdict::Apply,
            Some(RowState::Claimed) if holds(token) => Verdict::AlreadyOwn,
            Some(_) => Verdict::Refuse,
        },
        Write::Commit { token } => match state {
            Some(RowState::Claimed) if holds(token) => Verdict::Apply,
            _ => Verdict::Refuse,
        },
        Write::Operator => match state {
            Some(RowState::Claimed) => Verdict::Apply,
            _ => Verdict::Refuse,
        },
        Write::Backfill => match state {
            None => Verdict::Apply,
            Some(_) => Verdict::Refuse,
        },
        Write::Withdraw => match state {
            None | Some(RowState::Released) => Verdict::Apply,
            Some(RowState::Withdrawn) => Verdict::AlreadyOwn,
            Some(_) => Verdict::Refuse,
        },
        // An alias over an alias is the same marker; over any other row the notice already lives
        // under the older key (even a released row: its next claim belongs there).
        Write::Alias => match state {
            None | Some(RowState::Alias) => Verdict::Apply,
            Some(_) => Verdict::Refuse,
        },
    }
}

/// How a withdraw is answered, by the row it found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WithdrawAnswer {
    /// No row, or a released one: the tombstone is (or would be) written.
    Withdraw,
    /// A tombstone is already there: nothing to write, answered as withdrawn.
    AlreadyWithdrawn,
    /// Claimed or sent: the notice went out or may have (`withdraw_too_late`) — the producer must
    /// know. (The sender first waits out a claim that may still be in flight: it may be released.)
    TooLate,
    /// Missed or rejected: it never went out and never will; nothing to withdraw.
    NeverSent,
    /// An alias: the notice lives under a newer secret version's key, which this process does not
    /// hold — it cannot answer until it learns that version (retried, never acked).
    Elsewhere,
}

/// The one definition of a withdraw's answer, consistent with [`permits`]`(_, Write::Withdraw)`.
pub fn withdraw_answer(existing: Option<&LedgerRow>) -> WithdrawAnswer {
    match existing.map(|r| r.state) {
        None | Some(RowState::Released) => WithdrawAnswer::Withdraw,
        Some(RowState::Withdrawn) => WithdrawAnswer::AlreadyWithdrawn,
        Some(RowState::Claimed | RowState::Sent) => WithdrawAnswer::TooLate,
        Some(RowState::Missed | RowState::Rejected) => WithdrawAnswer::NeverSent,
        Some(RowState::Alias) => WithdrawAnswer::Elsewhere,
    }
}

/// Whether a row in `state` may carry a TTL expiry (DynamoDB's `expires_at`). An open claim never
/// expires: deleting a claim nobody resolved would reopen the key under a message that may have
/// gone out, and take the claim off the quarantine view. Nor does an alias: it is written with
/// its notice's first row under the newer secret version, and that row may stay an open claim
/// for longer than any retention period — an alias expiring before it would let a sender still on
/// the older version claim the older key and send the notice a second time, unseen as a
/// duplicate (the model check's `alias-expires` mutant). Aliases are small and written only while
/// a rotation is in progress.
pub fn expires(state: RowState) -> bool {
    !matches!(state, RowState::Claimed | RowState::Alias)
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::identity::NoticeKey;
    use crate::ledger::Origin;

    fn row(state: RowState, token: &str) -> LedgerRow {
        LedgerRow {
            key: NoticeKey::parse(&"a".repeat(64)).unwrap(),
            state,
            origin: Origin::Worker,
            claim_token: Some(ClaimToken::from_stored(token)),
            subscription_id: "s".into(),
            period_start: "2026-10-01".into(),
            kind: "k".into(),
            revision: 0,
            content_digest: None,
            claimed_at: None,
            on_quarantine_view: false,
            updated_at: Utc::now(),
            message_id: None,
            detail: None,
            delivery_status: None,
            duplicate_message_ids: Vec::new(),
            charge_at: None,
            jurisdiction: None,
            rendered: None,
            obligation: None,
        }
    }

    #[test]
    fn the_table() {
        let mine = ClaimToken::from_stored("mine");
        let (claim, commit) = (Write::Claim { token: &mine }, Write::Commit { token: &mine });
        use RowState::*;
        use Verdict::*;
        assert_eq!(permits(None, claim), Apply);
        assert_eq!(permits(Some(&row(Released, "x")), claim), Apply);
        assert_eq!(permits(Some(&row(Claimed, "mine")), claim), AlreadyOwn);
        assert_eq!(permits(Some(&row(Claimed, "theirs")), claim), Refuse);
        for decided in [Sent, Rejected, Missed] {
            assert_eq!(permits(Some(&row(decided, "mine")), claim), Refuse, "{decided} never reopens");
            assert_eq!(permits(Some(&row(decided, "mine")), commit), Refuse);
            assert_eq!(permits(Some(&row(decided, "mine")), Write::Operator), Refuse);
            assert_eq!(permits(Some(&row(decided, "mine")), Write::Backfill), Refuse);
        }
        assert_eq!(permits(Some(&row(Claimed, "mine")), commit), Apply);
        assert_eq!(permits(Some(&row(Claimed, "theirs")), commit), Refuse, "a stale worker cannot commit");
        assert_eq!(permits(Some(&row(Released, "mine")), commit), Refuse);
        assert_eq!(permits(None, commit), Refuse);
        assert_eq!(permits(Some(&row(Claimed, "theirs")), Write::Operator), Apply);
        assert_eq!(permits(Some(&row(Released, "x")), Write::Operator), Refuse);
        assert_eq!(permits(None, Write::Backfill), Apply);
        assert_eq!(permits(Some(&row(Released, "x")), Write::Backfill), Refuse, "backfill never overwrites");
        assert!(!expires(Claimed), "an open claim never expires");
        assert!(!expires(Alias), "an alias lives as long as its notice's open claim may");
        assert!([Sent, Rejected, Missed, Released, Withdrawn].into_iter().all(expires));
        // A tombstone is decided: nothing claims, commits, resolves or backfills over it.
        let tomb = row(Withdrawn, "");
        for write in [claim, commit, Write::Operator, Write::Backfill] {
            assert_eq!(permits(Some(&tomb), write), Refuse, "{write:?} over a tombstone");
        }
    }

    #[test]
    fn a_withdraw_writes_where_a_claim_could_and_its_answer_agrees() {
        use RowState::*;
        assert_eq!(permits(None, Write::Withdraw), Verdict::Apply);
        assert_eq!(withdraw_answer(None), WithdrawAnswer::Withdraw);
        let mine = ClaimToken::from_stored("mine");
        for state in RowState::ALL {
            let existing = row(state, "mine");
            let verdict = permits(Some(&existing), Write::Withdraw);
            let answer = withdraw_answer(Some(&existing));
            let expected = match state {
                Released => (Verdict::Apply, WithdrawAnswer::Withdraw),
                Withdrawn => (Verdict::AlreadyOwn, WithdrawAnswer::AlreadyWithdrawn),
                Claimed | Sent => (Verdict::Refuse, WithdrawAnswer::TooLate),
                Missed | Rejected => (Verdict::Refuse, WithdrawAnswer::NeverSent),
                Alias => (Verdict::Refuse, WithdrawAnswer::Elsewhere),
            };
            assert_eq!((verdict, answer), expected, "{state}");
            // Where a withdraw may write, so may a claim — and the other way round: the two race
            // for the same key under one condition, so exactly one of them wins.
            let claimable = permits(Some(&existing), Write::Claim { token: &mine }) == Verdict::Apply;
            assert_eq!(claimable, verdict == Verdict::Apply, "{state}");
            // An alias goes only where nothing but an alias stands: over any real row — even a
            // released one, whose next claim belongs under its own key — the notice lives there.
            let aliasable = permits(Some(&existing), Write::Alias) == Verdict::Apply;
            assert_eq!(aliasable, state == Alias, "{state}");
            // Nothing writes over an alias but another alias.
            if state == Alias {
                for write in
                    [Write::Claim { token: &mine }, Write::Withdraw, Write::Backfill, Write::Operator]
                {
                    assert_eq!(permits(Some(&existing), write), Verdict::Refuse, "{write:?}");
                }
            }
        }
        assert_eq!(permits(None, Write::Alias), Verdict::Apply);
    }
}
