//! Where a notice lives while the key secret rotates ([`crate::keyring`]): under the oldest
//! active version's key that already holds a row of it, else under the current version's key —
//! and then its first write carries an alias at every older active key, so a sender that does not
//! hold the current version yet finds the old key taken instead of claiming it a second time.
//!
//! With one active version (no rotation) a notice lives under its one key, and nothing is read
//! here: the send path is what it was.

use tracing::info;

use super::{NoticeSender, Prefetched};
use crate::error::LedgerError;
use crate::identity::{Identity, NoticeKey};
use crate::keyring::KeyRing;
use crate::ledger::{LedgerRow, RowReader, RowState};

/// A notice's key, and the aliases its first write must carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    pub key: NoticeKey,
    pub aliases: Vec<NoticeKey>,
}

impl Placement {
    /// [`Placement::decide`] for `identity` under `keys`, its older keys' rows taken from `row_of`
    /// (a batch lookup's answer: every key of [`KeyRing::active_keys`] read).
    pub fn of(keys: &KeyRing, identity: &Identity, row_of: impl Fn(&NoticeKey) -> Option<LedgerRow>) -> Self {
        let older = keys.older_keys(identity).into_iter().map(|k| {
            let row = row_of(&k);
            (k, row)
        });
        Self::decide(keys.key(identity), older.collect())
    }

    /// The one decision: `older` is each older active key (oldest first) with its row.
    pub fn decide(current: NoticeKey, older: Vec<(NoticeKey, Option<LedgerRow>)>) -> Self {
        let lives_at = older
            .iter()
            .find(|(_, row)| row.as_ref().is_some_and(|r| r.state != RowState::Alias))
            .map(|(key, _)| key.clone());
        match lives_at {
            // Its aliases (if any) were written with that row's first write.
            Some(key) => Self { key, aliases: Vec::new() },
            None => Self { key: current, aliases: older.into_iter().map(|(key, _)| key).collect() },
        }
    }
}

/// Where `identity`'s notice lives under `keys`, and its row there: the placement a sender would
/// make (reading the older keys only while a rotation is in progress), for tools that read the
/// ledger by identity (`noticectl withdraw`, `replay`'s census, `key`).
pub async fn locate(
    keys: &KeyRing,
    ledger: &dyn RowReader,
    identity: &Identity,
) -> Result<(Placement, Option<LedgerRow>), LedgerError> {
    let current = keys.key(identity);
    let older = keys.older_keys(identity);
    let mut wanted = older.clone();
    wanted.push(current.clone());
    let rows = ledger.get_many(&wanted).await?;
    let row_of = |k: &NoticeKey| rows.iter().find(|r| &r.key == k).cloned();
    let placement = Placement::decide(current, older.iter().map(|k| (k.clone(), row_of(k))).collect());
    let row = row_of(&placement.key);
    Ok((placement, row))
}

impl NoticeSender {
    /// Where `identity`'s notice lives now: its current key when no rotation is in progress;
    /// otherwise decided from the rows of its older keys (the batch's read when it covered them).
    pub(super) async fn place(
        &self,
        identity: &Identity,
        prefetched: Option<&Prefetched>,
    ) -> Result<Placement, LedgerError> {
        let current = self.keys.key(identity);
        let older_keys = self.keys.older_keys(identity);
        if older_keys.is_empty() {
            return Ok(Placement { key: current, aliases: Vec::new() });
        }
        let mut older: Vec<(NoticeKey, Option<Option<LedgerRow>>)> =
            older_keys.into_iter().map(|k| (k.clone(), prefetched.and_then(|p| p.row(&k)))).collect();
        let unread: Vec<NoticeKey> =
            older.iter().filter(|(_, r)| r.is_none()).map(|(k, _)| k.clone()).collect();
        if !unread.is_empty() {
            let found = self.ledger.get_many(&unread).await?;
            for (key, row) in older.iter_mut().filter(|(_, r)| r.is_none()) {
                *row = Some(found.iter().find(|r| &r.key == key).cloned());
            }
        }
        let placement =
            Placement::decide(current, older.into_iter().map(|(k, r)| (k, r.flatten())).collect());
        if placement.aliases.is_empty() {
            info!(key = placement.key.prefix(), "the notice lives under an older secret version's key");
        }
        Ok(placement)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{ClaimRequest, ClaimToken};

    fn key(c: char) -> NoticeKey {
        NoticeKey::parse(&c.to_string().repeat(64)).unwrap()
    }

    fn row(k: &NoticeKey, state: RowState) -> LedgerRow {
        let job = crate::job::Job::from_value(
            &serde_json::json!({"subscription_id":"s","period_start":"2026-10-01",
            "kind":"k","email":"a@example.com","charge_at":"2026-10-04T09:00:00Z"}),
            &crate::locale::SimpleTags,
        )
        .unwrap();
        let mut row = ClaimRequest::for_job(&job, k.clone(), chrono::Utc::now()).to_row(state, None);
        row.claim_token = Some(ClaimToken::from_stored("t"));
        row
    }

    #[test]
    fn the_oldest_real_row_wins_aliases_do_not_count() {
        let (k1, k2, k3) = (key('1'), key('2'), key('3'));
        // Nothing anywhere: the current key, aliased at every older one.
        let p = Placement::decide(k3.clone(), vec![(k1.clone(), None), (k2.clone(), None)]);
        assert_eq!(p, Placement { key: k3.clone(), aliases: vec![k1.clone(), k2.clone()] });
        // Aliases only: the same.
        let p = Placement::decide(
            k3.clone(),
            vec![(k1.clone(), Some(row(&k1, RowState::Alias))), (k2.clone(), None)],
        );
        assert_eq!(p.key, k3);
        // A real row under v2 (aliased at v1): the notice lives at v2.
        for state in [RowState::Sent, RowState::Released, RowState::Withdrawn, RowState::Claimed] {
            let p = Placement::decide(
                k3.clone(),
                vec![(k1.clone(), Some(row(&k1, RowState::Alias))), (k2.clone(), Some(row(&k2, state)))],
            );
            assert_eq!(p, Placement { key: k2.clone(), aliases: vec![] }, "{state}");
        }
        // A real row under v1 wins over one under v2 (which a race cannot write: its alias fails).
        let p = Placement::decide(
            k3,
            vec![(k1.clone(), Some(row(&k1, RowState::Sent))), (k2.clone(), Some(row(&k2, RowState::Sent)))],
        );
        assert_eq!(p.key, k1);
    }
}
