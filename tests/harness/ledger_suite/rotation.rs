//! Key rotation: while two secret versions are active, a first write under the current
//! version's key carries an alias at the older version's key, in one atomic write, so a notice is
//! claimable under exactly one key whichever side writes first (notice_ledger::keyring).

use std::sync::Arc;

use notice_ledger::ledger::{ClaimOutcome, Ledger, RowState};
use notice_ledger::NoticeKey;

use super::{fresh_key, held, mint, request, row, t, withdraw_request};

/// A key of the form a later secret version derives (`v2-` and 56 hex characters).
fn v2_key() -> NoticeKey {
    let hex = fresh_key();
    // The suite's fresh keys differ in their last characters: keep those.
    NoticeKey::parse(&format!("v2-{}", &hex.as_str()[8..])).unwrap_or_else(|e| panic!("{e}"))
}

/// What each write does beside an alias, and what an alias holds off.
pub async fn aliases_keep_a_notice_claimable_under_one_key(ledger: Arc<dyn Ledger>) {
    let l = &*ledger;
    // A first claim under v2 puts an alias at the v1 key; a claim under v1 alone is held off by it.
    let (old, new) = (fresh_key(), v2_key());
    let claim = mint(l, &request(&new, t(0)).with_aliases(vec![old.clone()])).await;
    let alias = row(l, &old).await;
    assert_eq!(alias.state, RowState::Alias);
    assert_eq!((alias.claim_token.as_ref(), alias.content_digest.as_ref()), (None, None));
    assert_eq!(row(l, &new).await.state, RowState::Claimed);
    assert_eq!(held(l, &request(&old, t(1))).await, alias, "a v1-only claim is held off by the alias");
    assert_eq!(l.withdraw(&withdraw_request(&old, t(1))).await.expect("withdraw"), Some(alias.clone()));
    assert_eq!(l.record_missed(&request(&old, t(1)), "late").await.expect("missed"), Some(alias.clone()));
    // The claim under v2 is an ordinary claim: released, it is claimed again, its alias rewritten.
    l.release(&claim, "throttled", t(2)).await.expect("release");
    mint(l, &request(&new, t(3)).with_aliases(vec![old.clone()])).await;
    assert_eq!(row(l, &old).await.state, RowState::Alias);
    let open = l.open_claims(t(100), 1000).await.expect("open claims");
    assert!(open.iter().any(|r| r.key == new), "a v2 claim is on the quarantine view");
    assert!(open.iter().all(|r| r.key != old), "an alias never is");

    // A notice already decided under v1 lives there: the v2 write is refused whole.
    for (i, state) in [RowState::Sent, RowState::Released, RowState::Withdrawn].into_iter().enumerate() {
        let (old, new) = (fresh_key(), v2_key());
        let at = t(10 * i as i64);
        match state {
            RowState::Withdrawn => {
                assert_eq!(l.withdraw(&withdraw_request(&old, at)).await.expect("w"), None)
            }
            _ => {
                let claim = mint(l, &request(&old, at)).await;
                match state {
                    RowState::Sent => l.commit_sent(&claim, "m-1", at).await.expect("commit"),
                    _ => l.release(&claim, "throttled", at).await.expect("release"),
                }
            }
        }
        let existing = row(l, &old).await;
        assert_eq!(existing.state, state);
        assert_eq!(held(l, &request(&new, at).with_aliases(vec![old.clone()])).await, existing, "{state}");
        let w =
            l.withdraw(&withdraw_request(&new, at).with_aliases(vec![old.clone()])).await.expect("withdraw");
        assert_eq!(w, Some(existing.clone()), "{state}");
        let m = l
            .record_missed(&request(&new, at).with_aliases(vec![old.clone()]), "late")
            .await
            .expect("missed");
        assert_eq!(m, Some(existing.clone()), "{state}");
        assert_eq!(l.get(&new).await.expect("read"), None, "{state}: nothing written under v2");
        assert_eq!(row(l, &old).await, existing, "{state}: the v1 row unchanged");
    }

    // A tombstone and a missed record under v2 carry their aliases too.
    let (old, new) = (fresh_key(), v2_key());
    assert_eq!(
        l.withdraw(&withdraw_request(&new, t(50)).with_aliases(vec![old.clone()])).await.expect("w"),
        None
    );
    assert_eq!(row(l, &old).await.state, RowState::Alias);
    assert_eq!(row(l, &new).await.state, RowState::Withdrawn);
    assert_eq!(held(l, &request(&old, t(51))).await.state, RowState::Alias);
    let (old, new) = (fresh_key(), v2_key());
    assert_eq!(
        l.record_missed(&request(&new, t(60)).with_aliases(vec![old.clone()]), "late").await.expect("m"),
        None
    );
    assert_eq!(row(l, &old).await.state, RowState::Alias);
    assert_eq!(row(l, &new).await.state, RowState::Missed);
}

/// A sender on v1 alone and a sender on v2 claiming one notice at once, many times over, in
/// both spawn orders: exactly one claim is minted each time.
pub async fn claims_under_two_versions_racing_mint_once(ledger: Arc<dyn Ledger>) {
    let (mut v1_won, mut v2_won) = (0, 0);
    for i in 0..32 {
        let (old, new) = (fresh_key(), v2_key());
        let v1 = request(&old, t(i));
        let v2 = request(&new, t(i)).with_aliases(vec![old.clone()]);
        let (l1, l2) = (Arc::clone(&ledger), Arc::clone(&ledger));
        let (a, b) = if i % 2 == 0 {
            let a = tokio::spawn(async move { l1.claim(&v1).await });
            let b = tokio::spawn(async move { l2.claim(&v2).await });
            (a, b)
        } else {
            let b = tokio::spawn(async move { l2.claim(&v2).await });
            let a = tokio::spawn(async move { l1.claim(&v1).await });
            (a, b)
        };
        let a = a.await.expect("v1 task").expect("v1 claim");
        let b = b.await.expect("v2 task").expect("v2 claim");
        match (a, b) {
            (ClaimOutcome::Minted(_), ClaimOutcome::Held(holder)) => {
                assert_eq!(holder.key, old, "the v2 claim saw the v1 row");
                assert_eq!(ledger.get(&new).await.expect("read"), None);
                v1_won += 1;
            }
            (ClaimOutcome::Held(holder), ClaimOutcome::Minted(_)) => {
                assert_eq!(
                    (holder.key, holder.state),
                    (old.clone(), RowState::Alias),
                    "the v1 claim saw the alias"
                );
                v2_won += 1;
            }
            (a, b) => panic!("both or neither won: {a:?} / {b:?}"),
        }
    }
    assert_eq!(v1_won + v2_won, 32);
}
