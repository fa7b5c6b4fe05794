//! Notice identity and key derivation.
//!
//! The key is the only thing the ledger deduplicates on, so it must depend on the business fact
//! alone (subscription, billing period, notice kind, revision) — never on a message id, attempt,
//! timestamp or host — and it must be byte-identical to the reference formula so ledgers written
//! by other-language workers agree:
//!
//! `hex(HMAC-SHA256(secret, subscription_id + "|" + period_start + "|" + kind + "|" + revision))`

use std::fmt;

use chrono::NaiveDate;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::InvalidJob;

/// Longest accepted `subscription_id`, in bytes. Generous, but bounded so a key input is bounded.
pub const MAX_SUBSCRIPTION_ID_BYTES: usize = 256;
/// Longest accepted `kind`.
pub const MAX_KIND_LEN: usize = 64;
/// Largest accepted `revision`: 2^53 − 1, the largest integer every JSON parser (JavaScript's
/// included) reads exactly — a producer or worker in another language must derive the same key.
pub const MAX_REVISION: u64 = (1 << 53) - 1;

/// The HMAC secret. Never printed: `Debug` is redacted and there is no `Display`.
#[derive(Clone)]
pub struct NoticeSecret(Vec<u8>);

/// Shortest secret an entry point accepts from configuration. A short HMAC key can be guessed from
/// a handful of published notice keys; 16 bytes is the floor, 32 random bytes the recommendation.
pub const MIN_SECRET_BYTES: usize = 16;

impl NoticeSecret {
    /// Rejects an empty secret: an empty HMAC key would make keys guessable. Any other length is
    /// taken, so published key vectors can be recomputed; configuration goes through
    /// [`NoticeSecret::configured`].
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, InvalidSecret> {
        let bytes = bytes.into();
        if bytes.is_empty() {
            return Err(InvalidSecret::Empty);
        }
        Ok(Self(bytes))
    }

    /// A secret from configuration (environment, secret store, local file): blank or shorter than
    /// [`MIN_SECRET_BYTES`] is refused — a failed fetch often leaves an empty or placeholder value,
    /// and keys derived from it would never match the deployment's.
    pub fn configured(value: impl Into<Vec<u8>>) -> Result<Self, InvalidSecret> {
        let bytes = value.into();
        if bytes.is_empty() {
            return Err(InvalidSecret::Empty);
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(InvalidSecret::Blank);
        }
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(InvalidSecret::TooShort { len: bytes.len() });
        }
        Ok(Self(bytes))
    }

    /// A secret for another purpose derived from this one, so one configured secret can serve
    /// several uses without any of them revealing the others.
    pub fn derive_subkey(&self, purpose: &str) -> Self {
        Self(hmac_hex(&self.0, purpose.as_bytes()).into_bytes())
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for NoticeSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NoticeSecret(<redacted>)")
    }
}

/// Why a secret is refused (the message never contains the secret).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidSecret {
    #[error("is empty")]
    Empty,
    #[error("is blank (whitespace only)")]
    Blank,
    #[error("is {len} bytes; at least {MIN_SECRET_BYTES} are required")]
    TooShort { len: usize },
}

/// A notice kind such as `renewal_notice_t72`: `[a-z0-9_]{1,64}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Kind(String);

impl Kind {
    pub fn parse(value: &str) -> Result<Self, InvalidJob> {
        if value.is_empty() || value.len() > MAX_KIND_LEN {
            return Err(InvalidJob::new("kind", "must be 1 to 64 characters of [a-z0-9_]"));
        }
        if !value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
            return Err(InvalidJob::new("kind", "must contain only [a-z0-9_]"));
        }
        Ok(Self(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The business fact a notice is about. Only constructed through validation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    subscription_id: String,
    period_start: NaiveDate,
    kind: Kind,
    revision: u64,
}

impl Identity {
    /// Validates every identity field, naming the first one that is wrong.
    pub fn new(
        subscription_id: &str,
        period_start: &str,
        kind: &str,
        revision: u64,
    ) -> Result<Self, InvalidJob> {
        validate_identity_text("subscription_id", subscription_id, MAX_SUBSCRIPTION_ID_BYTES)?;
        let period_start = parse_period_start(period_start)?;
        let kind = Kind::parse(kind)?;
        if revision > MAX_REVISION {
            return Err(InvalidJob::new("revision", format!("must be at most {MAX_REVISION}")));
        }
        Ok(Self { subscription_id: subscription_id.to_owned(), period_start, kind, revision })
    }

    pub fn subscription_id(&self) -> &str {
        &self.subscription_id
    }
    pub fn period_start(&self) -> NaiveDate {
        self.period_start
    }
    pub fn kind(&self) -> &Kind {
        &self.kind
    }
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The exact bytes that are HMACed. `|` cannot occur inside a field, so the join is unambiguous.
    pub fn key_material(&self) -> String {
        format!(
            "{}|{}|{}|{}",
            self.subscription_id,
            self.period_start.format("%Y-%m-%d"),
            self.kind,
            self.revision
        )
    }

    pub fn derive_key(&self, secret: &NoticeSecret) -> NoticeKey {
        NoticeKey::derive(secret, self)
    }
}

fn validate_identity_text(field: &'static str, value: &str, max: usize) -> Result<(), InvalidJob> {
    if value.is_empty() {
        return Err(InvalidJob::new(field, "must not be empty"));
    }
    if value.len() > max {
        return Err(InvalidJob::new(field, format!("must be at most {max} bytes")));
    }
    if value.contains('|') {
        return Err(InvalidJob::new(field, "must not contain '|'"));
    }
    if value.chars().any(char::is_control) {
        return Err(InvalidJob::new(field, "must not contain control characters"));
    }
    Ok(())
}

/// `YYYY-MM-DD` and nothing else: no time, no offset, no week dates, a real calendar day.
fn parse_period_start(value: &str) -> Result<NaiveDate, InvalidJob> {
    let shape_ok = value.len() == 10
        && value.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    if !shape_ok {
        return Err(InvalidJob::new("period_start", "must be a date in YYYY-MM-DD form"));
    }
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .map_err(|_| InvalidJob::new("period_start", "is not a real calendar date"))
}

/// A derived notice key. Under the first secret version: 64 lowercase hex characters, exactly the
/// reference formula (today's keys, vectors and foreign workers stay valid). Under version `N ≥ 2`
/// ([`crate::keyring`]): `vN-` and the first 56 hex characters of the same HMAC under that
/// version's secret — a `v` never occurs in hex, so the two shapes cannot be confused, and at most
/// 64 characters keep a key usable as an EventBridge Scheduler name and an SES tag.
///
/// Made by [`NoticeKey::derive`] (and [`crate::keyring::KeyRing`]); [`NoticeKey::parse`] only
/// accepts a key that was derived elsewhere (an operator pasting it, a ledger row, an SES tag) and
/// checks its shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NoticeKey(String);

impl NoticeKey {
    pub fn derive(secret: &NoticeSecret, identity: &Identity) -> Self {
        Self(hmac_hex(&secret.0, identity.key_material().as_bytes()))
    }

    pub fn parse(value: &str) -> Result<Self, InvalidKey> {
        let hex =
            |h: &str, len: usize| h.len() == len && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let versioned = || {
            let (version, rest) = value.strip_prefix('v')?.split_once('-')?;
            let n = parse_version_number(version)?;
            (n >= 2 && hex(rest, VERSIONED_HEX_LEN)).then_some(())
        };
        if hex(value, 64) || versioned().is_some() {
            Ok(Self(value.to_owned()))
        } else {
            Err(InvalidKey(value.chars().take(80).collect()))
        }
    }

    /// A key under secret version `version` (≥ 2) from the HMAC's hex: `vN-` and its first 56
    /// characters. Version 1 is the bare hex ([`NoticeKey::derive`]).
    pub(crate) fn versioned(version: u32, hmac_hex: &str) -> Self {
        if version <= 1 {
            return Self(hmac_hex.to_owned());
        }
        Self(format!("v{version}-{}", &hmac_hex[..VERSIONED_HEX_LEN.min(hmac_hex.len())]))
    }

    /// The secret version this key was derived under: 1 for a bare hex key.
    pub fn version(&self) -> u32 {
        self.0
            .strip_prefix('v')
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(n, _)| parse_version_number(n))
            .unwrap_or(1)
    }

    /// The key's hex part (the whole key under version 1).
    fn hex(&self) -> &str {
        self.0.split_once('-').map_or(self.0.as_str(), |(_, hex)| hex)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// First 12 hex characters (after a version's `vN-`): enough to tell keys apart in logs and
    /// terminal output.
    pub fn prefix(&self) -> &str {
        let version_len = self.0.len() - self.hex().len();
        &self.0[..version_len + 12]
    }

    /// The key's first hex character (after a version's `vN-`): uniformly spread, for sharding.
    pub fn first_hex(&self) -> &str {
        &self.hex()[..1]
    }

    /// A stable, uniformly spread number from the key: 64 of its bits, from lane 0–3 (lanes are
    /// independent, so the park spread and a domain's shard do not pick alike).
    pub fn seed(&self, lane: usize) -> u64 {
        let hex = self.hex();
        // Four 16-character lanes spread over the hex part: 0/16/32/48 of 64, 0/13/26/40 of 56.
        let at = (lane % 4) * (hex.len().saturating_sub(16)) / 3;
        hex.get(at..at + 16).and_then(|h| u64::from_str_radix(h, 16).ok()).unwrap_or(0)
    }
}

impl fmt::Display for NoticeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("not a notice key (want 64 lowercase hex characters, or `vN-` and 56 of them): {0:?}")]
pub struct InvalidKey(String);

/// Hex characters of the HMAC a key under secret version ≥ 2 keeps (224 bits).
pub const VERSIONED_HEX_LEN: usize = 56;

/// A secret version's number as written in a key or a secret (`2` in `v2-…`): decimal, no
/// leading zero, at most six digits.
pub(crate) fn parse_version_number(text: &str) -> Option<u32> {
    let ok = !text.is_empty()
        && text.len() <= 6
        && text.bytes().all(|b| b.is_ascii_digit())
        && !text.starts_with('0');
    ok.then(|| text.parse().ok()).flatten()
}

pub(crate) fn hmac_hex(secret: &[u8], message: &[u8]) -> String {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for HMAC.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    mac.update(message);
    hex::encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_matches_reference_formula() {
        // Reference: python3 -c 'import hmac,hashlib;print(hmac.new(b"s3cret",
        //   b"sub_8812|2026-10-01|renewal_notice_t72|0",hashlib.sha256).hexdigest())'
        let secret = NoticeSecret::new("s3cret").unwrap();
        let id = Identity::new("sub_8812", "2026-10-01", "renewal_notice_t72", 0).unwrap();
        assert_eq!(id.key_material(), "sub_8812|2026-10-01|renewal_notice_t72|0");
        let key = id.derive_key(&secret);
        assert_eq!(key.as_str(), "8261943c7cd1cb3b2140e681a6c4563a38d536465d6f40ec181451d8192dda44");
        assert_eq!(NoticeKey::parse(key.as_str()).unwrap(), key);
    }

    #[test]
    fn revision_changes_key() {
        let secret = NoticeSecret::new("s").unwrap();
        let a = Identity::new("sub", "2026-10-01", "k", 0).unwrap().derive_key(&secret);
        let b = Identity::new("sub", "2026-10-01", "k", 1).unwrap().derive_key(&secret);
        assert_ne!(a, b);
    }

    #[test]
    fn secret_is_redacted() {
        let secret = NoticeSecret::new("hunter2").unwrap();
        assert!(!format!("{secret:?}").contains("hunter2"));
        assert!(NoticeSecret::new("").is_err());
    }

    #[test]
    fn period_start_is_strict() {
        for bad in
            ["2026-1-01", "2026-02-30", "2026-10-01T00:00:00Z", "20261001", " 2026-10-01", "2026-13-01"]
        {
            let err = Identity::new("s", bad, "k", 0).unwrap_err();
            assert_eq!(err.field, "period_start", "{bad}");
        }
        assert!(Identity::new("s", "2024-02-29", "k", 0).is_ok());
    }

    #[test]
    fn identity_fields_reject_separator_and_controls() {
        assert_eq!(Identity::new("a|b", "2026-10-01", "k", 0).unwrap_err().field, "subscription_id");
        assert_eq!(Identity::new("a\nb", "2026-10-01", "k", 0).unwrap_err().field, "subscription_id");
        assert_eq!(Identity::new("", "2026-10-01", "k", 0).unwrap_err().field, "subscription_id");
        assert_eq!(Identity::new("s", "2026-10-01", "K", 0).unwrap_err().field, "kind");
        assert_eq!(Identity::new("s", "2026-10-01", "", 0).unwrap_err().field, "kind");
        assert_eq!(Identity::new("s", "2026-10-01", &"k".repeat(65), 0).unwrap_err().field, "kind");
        assert_eq!(Identity::new("s", "2026-10-01", "k", MAX_REVISION + 1).unwrap_err().field, "revision");
        assert!(Identity::new("s", "2026-10-01", "k", MAX_REVISION).is_ok());
        let long = "x".repeat(MAX_SUBSCRIPTION_ID_BYTES + 1);
        assert_eq!(Identity::new(&long, "2026-10-01", "k", 0).unwrap_err().field, "subscription_id");
    }
}
