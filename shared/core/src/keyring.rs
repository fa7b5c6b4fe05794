//! Secret versions: the key secret can be rotated without any notice becoming claimable twice.
//!
//! A deployment holds a ring of secret versions (`v1`, `v2`, …). The newest *active* one is
//! current: every notice the ledger has never seen is keyed under it. Older active versions are
//! still honoured: a notice whose row already lives under one of their keys stays there, and every
//! first write under the current key also writes an **alias** row at each older active key, in
//! the same atomic write, under the claim rule. A sender that has not yet learned the new version
//! claims under the old key with its ordinary conditional write — which the alias makes fail — so
//! whichever side writes first, the notice is claimable under exactly one key (docs/security.md,
//! "Rotating the key secret", and the model check's rotation world).
//!
//! Retired versions are no longer honoured on the send path (no reads, no aliases) but are kept
//! for evidence: `noticectl evidence` still finds a notice keyed under them. A version may be
//! retired only when nothing can be decided under it any more (`noticectl key retire` checks).
//!
//! The secret's stored form: a plain value is version 1 alone (every deployment before rotation);
//! a JSON object `{"current": "v2", "versions": {"v1": "…", "v2": "…"}, "retired": ["v1"]}` is a
//! ring.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use crate::identity::{hmac_hex, parse_version_number, Identity, InvalidSecret, NoticeKey, NoticeSecret};

/// One version of the key secret.
#[derive(Clone, Debug)]
pub struct VersionedSecret {
    version: u32,
    secret: NoticeSecret,
}

impl VersionedSecret {
    pub fn new(version: u32, secret: NoticeSecret) -> Self {
        Self { version: version.max(1), secret }
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn secret(&self) -> &NoticeSecret {
        &self.secret
    }

    /// `identity`'s key under this version: today's formula for `v1`, `vN-` and 56 hex characters
    /// of the same HMAC for later versions ([`NoticeKey`]).
    pub fn key(&self, identity: &Identity) -> NoticeKey {
        if self.version == 1 {
            return identity.derive_key(&self.secret);
        }
        NoticeKey::versioned(self.version, &hmac_hex(self.secret.bytes(), identity.key_material().as_bytes()))
    }
}

/// The versions a process holds: the current one, the older ones still honoured, the retired ones
/// kept for evidence. Never printed with a secret: `Debug` shows version numbers only.
#[derive(Clone)]
pub struct KeyRing {
    current: VersionedSecret,
    /// Older active versions, oldest first.
    older: Vec<VersionedSecret>,
    /// Retired versions, oldest first: evidence only.
    retired: Vec<VersionedSecret>,
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyRing({})", self.describe())
    }
}

impl From<NoticeSecret> for KeyRing {
    /// A single secret is version 1, current, alone: every deployment before rotation.
    fn from(secret: NoticeSecret) -> Self {
        Self { current: VersionedSecret::new(1, secret), older: Vec::new(), retired: Vec::new() }
    }
}

/// Why a stored secret is not a usable ring (never contains a secret value).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidRing {
    #[error("is not a key ring: {0} (a plain value is version v1; a ring is {{\"current\": \"v2\", \"versions\": {{\"v1\": \"…\", \"v2\": \"…\"}}, \"retired\": []}})")]
    Shape(String),
    #[error("names version {0:?}: versions are v1, v2, … (no leading zero)")]
    Version(String),
    #[error("version {version} {problem}")]
    Secret { version: String, problem: InvalidSecret },
    #[error("current version {0} is not among its versions")]
    NoCurrent(String),
    #[error("current version {0} is retired: a retired version never keys a new notice")]
    CurrentRetired(String),
    #[error("retires {0}, which it does not hold")]
    RetiredUnknown(String),
    #[error("version {older} is active and newer than the current {current}: the newest active version is the current one")]
    NewerThanCurrent { older: String, current: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredRing {
    current: String,
    versions: BTreeMap<String, String>,
    #[serde(default)]
    retired: Vec<String>,
}

/// `v2` → 2.
pub fn parse_version(text: &str) -> Option<u32> {
    text.strip_prefix('v').and_then(parse_version_number)
}

/// 2 → `v2`.
pub fn version_name(version: u32) -> String {
    format!("v{version}")
}

impl KeyRing {
    /// The ring a stored secret value holds: a JSON object in the ring's form, or any other value
    /// as version 1 alone (checked as [`NoticeSecret::configured`]). A value that starts with `{`
    /// must be a ring: a typo in it is an error, never a plain secret that happens to be JSON.
    pub fn from_stored(value: &str) -> Result<Self, InvalidRing> {
        if !value.trim_start().starts_with('{') {
            let secret = NoticeSecret::configured(value)
                .map_err(|problem| InvalidRing::Secret { version: "v1".into(), problem })?;
            return Ok(Self::from(secret));
        }
        let stored: StoredRing = serde_json::from_str(value).map_err(|e| {
            // serde's message names the field and position, never the value.
            InvalidRing::Shape(e.to_string())
        })?;
        let mut all = BTreeMap::new();
        for (name, secret) in &stored.versions {
            let version = parse_version(name).ok_or_else(|| InvalidRing::Version(name.clone()))?;
            let secret = NoticeSecret::configured(secret.as_str())
                .map_err(|problem| InvalidRing::Secret { version: name.clone(), problem })?;
            all.insert(version, VersionedSecret::new(version, secret));
        }
        let current =
            parse_version(&stored.current).ok_or_else(|| InvalidRing::Version(stored.current.clone()))?;
        let mut retired_versions = Vec::new();
        for name in &stored.retired {
            let version = parse_version(name).ok_or_else(|| InvalidRing::Version(name.clone()))?;
            if !all.contains_key(&version) {
                return Err(InvalidRing::RetiredUnknown(name.clone()));
            }
            if version == current {
                return Err(InvalidRing::CurrentRetired(stored.current.clone()));
            }
            retired_versions.push(version);
        }
        let current = all.remove(&current).ok_or_else(|| InvalidRing::NoCurrent(stored.current.clone()))?;
        let (mut older, mut retired) = (Vec::new(), Vec::new());
        for (version, secret) in all {
            if retired_versions.contains(&version) {
                retired.push(secret);
            } else if version > current.version {
                return Err(InvalidRing::NewerThanCurrent {
                    older: version_name(version),
                    current: version_name(current.version),
                });
            } else {
                older.push(secret);
            }
        }
        Ok(Self { current, older, retired })
    }

    /// The stored form of this ring (what `noticectl key rotate` writes to the secret).
    pub fn to_stored(&self) -> String {
        let versions: BTreeMap<String, String> = self
            .all()
            .map(|v| (version_name(v.version), String::from_utf8_lossy(v.secret.bytes()).into_owned()))
            .collect();
        serde_json::json!({
            "current": version_name(self.current.version),
            "versions": versions,
            "retired": self.retired.iter().map(|v| version_name(v.version)).collect::<Vec<_>>(),
        })
        .to_string()
    }

    /// A new ring with `secret` as the next version, current; every version held stays as it is.
    pub fn rotated(&self, secret: NoticeSecret) -> Self {
        let next = self.all().map(|v| v.version).max().unwrap_or(1) + 1;
        let mut older = self.older.clone();
        older.push(self.current.clone());
        Self { current: VersionedSecret::new(next, secret), older, retired: self.retired.clone() }
    }

    /// A new ring with `version` retired; `None` when it is not an older active version.
    pub fn retiring(&self, version: u32) -> Option<Self> {
        let at = self.older.iter().position(|v| v.version == version)?;
        let mut ring = self.clone();
        let secret = ring.older.remove(at);
        ring.retired.push(secret);
        ring.retired.sort_by_key(|v| v.version);
        Some(ring)
    }

    pub fn current(&self) -> &VersionedSecret {
        &self.current
    }

    /// Older versions still honoured on the send path, oldest first.
    pub fn older(&self) -> &[VersionedSecret] {
        &self.older
    }

    pub fn retired(&self) -> &[VersionedSecret] {
        &self.retired
    }

    /// Every version held, oldest first.
    pub fn all(&self) -> impl Iterator<Item = &VersionedSecret> {
        let mut all: Vec<&VersionedSecret> =
            self.older.iter().chain(self.retired.iter()).chain(std::iter::once(&self.current)).collect();
        all.sort_by_key(|v| v.version);
        all.into_iter()
    }

    /// Active versions (older ones and the current), oldest first.
    pub fn active(&self) -> impl Iterator<Item = &VersionedSecret> {
        self.older.iter().chain(std::iter::once(&self.current))
    }

    /// The version with this number, whatever its state.
    pub fn version(&self, version: u32) -> Option<&VersionedSecret> {
        self.all().find(|v| v.version == version)
    }

    /// `identity`'s key under the current version.
    pub fn key(&self, identity: &Identity) -> NoticeKey {
        self.current.key(identity)
    }

    /// `identity`'s keys under the older active versions, oldest first: where its row may already
    /// live, and where a first write under the current key puts its aliases.
    pub fn older_keys(&self, identity: &Identity) -> Vec<NoticeKey> {
        self.older.iter().map(|v| v.key(identity)).collect()
    }

    /// `identity`'s keys under every active version, oldest first, the current last: what a
    /// lookup by identity reads while a rotation is in progress.
    pub fn active_keys(&self, identity: &Identity) -> Vec<NoticeKey> {
        self.active().map(|v| v.key(identity)).collect()
    }

    /// `identity`'s keys under every version held, oldest first (evidence).
    pub fn all_keys(&self, identity: &Identity) -> Vec<NoticeKey> {
        self.all().map(|v| v.key(identity)).collect()
    }

    /// Whether more than one version is active (a rotation in progress).
    pub fn rotating(&self) -> bool {
        !self.older.is_empty()
    }

    /// `v2 (current), v1 (active), v0 (retired)`: versions only, never a value.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("{} current", version_name(self.current.version))];
        parts.extend(self.older.iter().rev().map(|v| format!("{} active", version_name(v.version))));
        parts.extend(self.retired.iter().rev().map(|v| format!("{} retired", version_name(v.version))));
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(text: &str) -> Result<KeyRing, InvalidRing> {
        KeyRing::from_stored(text)
    }

    const S1: &str = "the-first-secret-of-the-ledger";
    const S2: &str = "the-second-secret-of-the-ledger";

    #[test]
    fn a_plain_value_is_version_one_and_keys_as_today() {
        let r = ring(S1).unwrap();
        assert_eq!(r.current().version(), 1);
        assert!(!r.rotating());
        let id = Identity::new("sub_8812", "2026-10-01", "renewal_notice_t72", 0).unwrap();
        let secret = NoticeSecret::new(S1).unwrap();
        assert_eq!(r.key(&id), id.derive_key(&secret));
        assert_eq!(r.key(&id).version(), 1);
    }

    #[test]
    fn a_later_version_keys_with_its_prefix_and_56_hex() {
        let id = Identity::new("sub_8812", "2026-10-01", "renewal_notice_t72", 0).unwrap();
        let v2 = VersionedSecret::new(2, NoticeSecret::new(S2).unwrap());
        let key = v2.key(&id);
        let full = id.derive_key(&NoticeSecret::new(S2).unwrap());
        assert_eq!(key.as_str(), format!("v2-{}", &full.as_str()[..56]));
        assert_eq!(key.as_str().len(), 59);
        assert_eq!(key.version(), 2);
        assert_eq!(NoticeKey::parse(key.as_str()).unwrap(), key);
        assert_eq!(key.prefix(), &key.as_str()[..15]);
        assert_eq!(key.first_hex(), &full.as_str()[..1]);
        for bad in [
            "v1-".to_owned() + &"a".repeat(56),
            "v02-".to_owned() + &"a".repeat(56),
            "v2-".to_owned() + &"a".repeat(64),
            "v2".to_owned() + &"a".repeat(56),
        ] {
            assert!(NoticeKey::parse(&bad).is_err(), "{bad}");
        }
        assert!(key.seed(3) != 0 && key.seed(0) != key.seed(3));
    }

    #[test]
    fn a_stored_ring_round_trips_and_its_rules_hold() {
        let text = format!(r#"{{"current":"v2","versions":{{"v1":"{S1}","v2":"{S2}"}}}}"#);
        let r = ring(&text).unwrap();
        assert_eq!(r.current().version(), 2);
        assert_eq!(r.older().iter().map(|v| v.version()).collect::<Vec<_>>(), vec![1]);
        assert_eq!(r.describe(), "v2 current, v1 active");
        assert!(!format!("{r:?}").contains(S1));
        let again = ring(&r.to_stored()).unwrap();
        assert_eq!(again.describe(), r.describe());
        let retired = r.retiring(1).unwrap();
        assert_eq!(retired.describe(), "v2 current, v1 retired");
        assert!(retired.older().is_empty() && !retired.rotating());
        assert_eq!(ring(&retired.to_stored()).unwrap().describe(), "v2 current, v1 retired");
        let third = retired.rotated(NoticeSecret::new("a-third-secret-value").unwrap());
        assert_eq!(third.describe(), "v3 current, v2 active, v1 retired");

        let cases: [(String, &str); 7] = [
            (r#"{"current":"v2","versions":{"v1":"x"}"#.into(), "not a key ring"),
            (format!(r#"{{"current":"v3","versions":{{"v1":"{S1}"}}}}"#), "not among"),
            (
                format!(r#"{{"current":"v1","versions":{{"v1":"{S1}","v2":"{S2}"}}}}"#),
                "newer than the current",
            ),
            (format!(r#"{{"current":"v1","versions":{{"v1":"{S1}"}},"retired":["v1"]}}"#), "is retired"),
            (format!(r#"{{"current":"v1","versions":{{"v1":"{S1}"}},"retired":["v4"]}}"#), "does not hold"),
            (format!(r#"{{"current":"v01","versions":{{"v1":"{S1}"}}}}"#), "names version"),
            (r#"{"current":"v1","versions":{"v1":"short"}}"#.into(), "version v1 is 5 bytes"),
        ];
        for (text, want) in cases {
            let e = ring(&text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains(S1) && !e.contains(S2), "{e}");
        }
    }
}
