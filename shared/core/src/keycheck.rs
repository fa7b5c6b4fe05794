//! The key check: proof, kept in the ledger, of which key secret its notice keys were derived
//! with — so a process holding another secret refuses instead of answering confidently from keys
//! that name no notice (`evidence` reporting "no notices" for a customer who was notified, a replay
//! of a whole backlog looking new).
//!
//! The ledger holds a version and a check value: an HMAC-SHA256 of a fixed label under the secret
//! (never the secret, nor anything a key could be derived from). The first twelve hex characters
//! of the check are the secret's identifier in logs and evidence. The sender records the check at
//! its first start on a ledger (and a local `noticectl send` on its own); every other entry point
//! that derives keys verifies its secret against it before its first read or write.

use std::fmt;

use async_trait::async_trait;

use crate::error::LedgerError;
use crate::identity::{hmac_hex, NoticeSecret};

/// The label the check value is an HMAC of. Part of the ledger's stored data: never change it.
pub const KEY_CHECK_LABEL: &str = "notice-ledger/key-check/v1";
/// The secret version today's keys belong to (the key formula has no version of its own yet).
pub const CURRENT_VERSION: &str = "v1";
/// Hex characters of the check shown as the secret's identifier.
const FINGERPRINT_LEN: usize = 12;

/// A secret's version and check value, as the ledger stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyCheck {
    version: String,
    check: String,
}

impl KeyCheck {
    /// The check of `secret` as version 1 ([`CURRENT_VERSION`]): a deployment before rotation.
    pub fn of(secret: &NoticeSecret) -> Self {
        Self::of_version(secret, 1)
    }

    /// The check of one secret version ([`crate::keyring`]).
    pub fn of_version(secret: &NoticeSecret, version: u32) -> Self {
        Self {
            version: crate::keyring::version_name(version.max(1)),
            check: hmac_hex(secret.bytes(), KEY_CHECK_LABEL.as_bytes()),
        }
    }

    /// The version's number (`v2` → 2; 1 for anything unreadable, as stored checks are `v1`).
    pub fn version_number(&self) -> u32 {
        crate::keyring::parse_version(&self.version).unwrap_or(1)
    }

    /// Reads the stored form `<version>:<64 hex>` back; anything else is a corrupt ledger item.
    pub fn parse(stored: &str) -> Result<Self, LedgerError> {
        let corrupt = || LedgerError::Corrupt(format!("key check {stored:?} is not `<version>:<64 hex>`"));
        let (version, check) = stored.split_once(':').ok_or_else(corrupt)?;
        let version_ok = !version.is_empty()
            && version.len() <= 16
            && version.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let check_ok =
            check.len() == 64 && check.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !version_ok || !check_ok {
            return Err(corrupt());
        }
        Ok(Self { version: version.to_owned(), check: check.to_owned() })
    }

    /// The stored form, `<version>:<64 hex>`.
    pub fn to_stored(&self) -> String {
        format!("{}:{}", self.version, self.check)
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    /// The secret's identifier: version and the check's first hex characters (`v1·a1b2c3d4e5f6`).
    /// Safe to log: it is a MAC of a fixed label, not the secret and not a key.
    pub fn identifier(&self) -> String {
        format!("{}·{}", self.version, &self.check[..FINGERPRINT_LEN.min(self.check.len())])
    }
}

impl fmt::Display for KeyCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.identifier())
    }
}

/// Where a ledger keeps its key check (beside its rows, under a name no notice key can take).
#[async_trait]
pub trait KeyCheckStore: Send + Sync {
    /// The check the ledger holds for secret version `version`, if any (one item per version:
    /// version 1's where it always was, later ones beside it).
    async fn key_check_of(&self, version: u32) -> Result<Option<KeyCheck>, LedgerError>;

    /// The first version's check: every ledger's before rotation.
    async fn key_check(&self) -> Result<Option<KeyCheck>, LedgerError> {
        self.key_check_of(1).await
    }

    /// Records `check` (under its version) unless the ledger holds one for that version already
    /// (a conditional write: of two racing first starts, the first wins); returns what the ledger
    /// holds afterwards.
    async fn record_key_check(&self, check: &KeyCheck) -> Result<KeyCheck, LedgerError>;
}

/// The name a version's check is kept under in a ledger's metadata: `key_check` for version 1
/// (where it always was), `key_check/v2` and so on after it.
pub fn stored_name(version: u32) -> String {
    if version <= 1 {
        "key_check".to_owned()
    } else {
        format!("key_check/{}", crate::keyring::version_name(version))
    }
}

/// What [`check_secret`] established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyCheckOutcome {
    /// The ledger's check matches the secret.
    Verified(KeyCheck),
    /// The ledger held no check; this secret's was recorded.
    Recorded(KeyCheck),
    /// The ledger holds no check and this caller does not record one (a ledger from before key
    /// checks, not yet opened by a sender): the secret could not be verified.
    Unchecked(KeyCheck),
}

impl KeyCheckOutcome {
    /// This secret's check, whatever the outcome.
    pub fn ours(&self) -> &KeyCheck {
        match self {
            Self::Verified(k) | Self::Recorded(k) | Self::Unchecked(k) => k,
        }
    }
}

/// Why a secret may not be used on a ledger.
#[derive(Debug, thiserror::Error)]
pub enum KeyCheckError {
    #[error(
        "the key secret ({ours}) is not the one this ledger's notice keys were made with ({stored}): \
         every key it derives would name no notice, so nothing is read or written; use the \
         deployment's secret (NOTICE_KEY_SECRET_ARN, or NOTICE_KEY_SECRET)"
    )]
    Mismatch { ours: KeyCheck, stored: KeyCheck },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// Verifies `secret` against the ledger's key check; with `record`, a ledger without one gets
/// this secret's (the sender's first start, a local `send`).
pub async fn check_secret(
    store: &dyn KeyCheckStore,
    secret: &NoticeSecret,
    record: bool,
) -> Result<KeyCheckOutcome, KeyCheckError> {
    check_version(store, secret, 1, record).await
}

/// Verifies every version `ring` holds against the ledger's checks (with `record`, a version the
/// ledger has no check for gets this one's) and answers for the current version. A version whose
/// check differs is refused like a wrong secret: its keys would name no notice.
pub async fn check_ring(
    store: &dyn KeyCheckStore,
    ring: &crate::keyring::KeyRing,
    record: bool,
) -> Result<KeyCheckOutcome, KeyCheckError> {
    let mut current = None;
    for version in ring.all() {
        let outcome = check_version(store, version.secret(), version.version(), record).await?;
        if version.version() == ring.current().version() {
            current = Some(outcome);
        }
    }
    // `all()` always holds the current version.
    current.ok_or_else(|| {
        KeyCheckError::Ledger(LedgerError::Corrupt("the key ring has no current version".into()))
    })
}

/// [`check_secret`] for one secret version.
pub async fn check_version(
    store: &dyn KeyCheckStore,
    secret: &NoticeSecret,
    version: u32,
    record: bool,
) -> Result<KeyCheckOutcome, KeyCheckError> {
    let ours = KeyCheck::of_version(secret, version);
    let stored = match store.key_check_of(version).await? {
        Some(stored) => stored,
        None if record => {
            let stored = store.record_key_check(&ours).await?;
            if stored == ours {
                return Ok(KeyCheckOutcome::Recorded(ours));
            }
            stored
        }
        None => return Ok(KeyCheckOutcome::Unchecked(ours)),
    };
    if stored == ours {
        Ok(KeyCheckOutcome::Verified(ours))
    } else {
        Err(KeyCheckError::Mismatch { ours, stored })
    }
}

/// A key check kept in memory (the memory ledger's, and tests').
#[derive(Default)]
pub struct MemoryKeyCheck(std::sync::Mutex<std::collections::BTreeMap<u32, KeyCheck>>);

#[async_trait]
impl KeyCheckStore for MemoryKeyCheck {
    async fn key_check_of(&self, version: u32) -> Result<Option<KeyCheck>, LedgerError> {
        Ok(self.0.lock().unwrap_or_else(|p| p.into_inner()).get(&version).cloned())
    }

    async fn record_key_check(&self, check: &KeyCheck) -> Result<KeyCheck, LedgerError> {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        Ok(held.entry(check.version_number()).or_insert_with(|| check.clone()).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(s: &str) -> NoticeSecret {
        NoticeSecret::new(s).unwrap()
    }

    #[test]
    fn the_check_is_stable_and_never_the_secret() {
        let a = KeyCheck::of(&secret("the-deployment-secret"));
        assert_eq!(a, KeyCheck::of(&secret("the-deployment-secret")));
        assert_ne!(a, KeyCheck::of(&secret("another-secret")));
        assert!(!a.to_stored().contains("the-deployment-secret"));
        assert_eq!(KeyCheck::parse(&a.to_stored()).unwrap(), a);
        assert!(a.identifier().starts_with("v1·") && a.identifier().len() == "v1·".len() + 12);
        for bad in ["", "v1", "v1:abc", "V1:".to_owned().as_str(), &format!("v1:{}", "G".repeat(64))] {
            assert!(KeyCheck::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn record_verify_and_refuse() {
        let store = MemoryKeyCheck::default();
        let (right, wrong) = (secret("right-secret"), secret("wrong-secret"));
        assert!(matches!(check_secret(&store, &right, false).await.unwrap(), KeyCheckOutcome::Unchecked(_)));
        assert!(matches!(check_secret(&store, &right, true).await.unwrap(), KeyCheckOutcome::Recorded(_)));
        assert!(matches!(check_secret(&store, &right, false).await.unwrap(), KeyCheckOutcome::Verified(_)));
        let e = check_secret(&store, &wrong, true).await.unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&KeyCheck::of(&right).identifier()), "{text}");
        assert!(!text.contains("wrong-secret") && !text.contains("right-secret"), "{text}");
        // Recording never replaces the first check.
        assert_eq!(store.record_key_check(&KeyCheck::of(&wrong)).await.unwrap(), KeyCheck::of(&right));
    }
}
