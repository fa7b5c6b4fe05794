//! `Stripe-Signature` verification, exactly as Stripe's own libraries do it (stripe-node's
//! `webhooks.constructEvent`, stripe-python's `WebhookSignature.verify_header`):
//!
//! - the header is `t=<unix seconds>,v1=<hex>,v1=<hex>,…` (other schemes, such as `v0`, are
//!   ignored); without a `t` or without any `v1` it is malformed;
//! - the signed payload is `"{t}.{raw body}"` — the bytes as they arrived, never a re-serialised
//!   body (any whitespace or key-order change breaks the signature, by design);
//! - the signature is hex(HMAC-SHA256(endpoint secret, signed payload)), the secret being the
//!   whole `whsec_…` string as Stripe shows it;
//! - **every** `v1` value is tried: while an endpoint secret is being rolled, Stripe signs each
//!   event with the old and the new secret, one `v1` each;
//! - comparison is constant-time (`hmac`'s `verify_slice`, `subtle` underneath);
//! - a signature older than the tolerance (default 300 s) is refused after it matched — a replay
//!   of a captured request is refused even though its signature is genuine.
//!
//! A deployment may hold several endpoint secrets at once (its own rotation, see docs/intake.md):
//! each is tried against each `v1`.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Stripe's default tolerance, in seconds.
pub const DEFAULT_TOLERANCE_SECS: u64 = 300;
/// Most endpoint secrets one deployment holds at once (a rotation needs two).
pub const MAX_SECRETS: usize = 4;
/// Shortest secret accepted: Stripe's are `whsec_` and 32 characters.
const MIN_SECRET_BYTES: usize = 16;

/// The endpoint signing secrets (`whsec_…`). Never printed: `Debug` shows only how many.
#[derive(Clone)]
pub struct SigningSecrets(Vec<Vec<u8>>);

impl fmt::Debug for SigningSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningSecrets({} secret{})", self.0.len(), if self.0.len() == 1 { "" } else { "s" })
    }
}

/// Why a configured secret value is refused (never quoting it).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidSigningSecret {
    #[error("is empty or blank")]
    Empty,
    #[error("holds {0} secrets; at most {MAX_SECRETS} are accepted")]
    TooMany(usize),
    #[error("secret {0} is shorter than {MIN_SECRET_BYTES} bytes (Stripe's are `whsec_` and 32 characters)")]
    TooShort(usize),
    #[error("secret {0} is a Stripe API key (`sk_`, `rk_`, `pk_`), not an endpoint signing secret (`whsec_…`, shown on the webhook endpoint's page)")]
    ApiKey(usize),
}

impl SigningSecrets {
    /// One secret, or several separated by whitespace or commas (a rotation: the old and the new).
    pub fn parse(value: &str) -> Result<Self, InvalidSigningSecret> {
        let secrets: Vec<&str> =
            value.split(|c: char| c.is_whitespace() || c == ',').filter(|s| !s.is_empty()).collect();
        if secrets.is_empty() {
            return Err(InvalidSigningSecret::Empty);
        }
        if secrets.len() > MAX_SECRETS {
            return Err(InvalidSigningSecret::TooMany(secrets.len()));
        }
        for (i, s) in secrets.iter().enumerate() {
            if ["sk_", "rk_", "pk_"].iter().any(|p| s.starts_with(p)) {
                return Err(InvalidSigningSecret::ApiKey(i + 1));
            }
            if s.len() < MIN_SECRET_BYTES {
                return Err(InvalidSigningSecret::TooShort(i + 1));
            }
        }
        Ok(Self(secrets.into_iter().map(|s| s.as_bytes().to_vec()).collect()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Why a request's signature is refused. The request is answered 400 and nothing is enqueued.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("no Stripe-Signature header")]
    MissingHeader,
    #[error("Stripe-Signature is malformed: {0}")]
    Malformed(&'static str),
    #[error(
        "no v1 signature matches the payload under the configured endpoint secret (another endpoint's \
         secret, a rolled secret not yet configured, or a body changed on the way)"
    )]
    NoMatch,
    #[error(
        "the signature is {age_secs} s old; at most {tolerance_secs} s are accepted (a replayed request?)"
    )]
    OutsideTolerance { age_secs: i64, tolerance_secs: u64 },
}

impl SignatureError {
    /// A short label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::MissingHeader => "missing",
            Self::Malformed(_) => "malformed",
            Self::NoMatch => "no_match",
            Self::OutsideTolerance { .. } => "expired",
        }
    }
}

/// The parts of a `Stripe-Signature` header that matter.
#[derive(Debug, PartialEq, Eq)]
struct Header<'a> {
    timestamp: i64,
    v1: Vec<&'a str>,
}

fn parse_header(header: &str) -> Result<Header<'_>, SignatureError> {
    let mut timestamp = None;
    let mut v1 = Vec::new();
    for item in header.split(',') {
        let Some((key, value)) = item.trim().split_once('=') else { continue };
        match key {
            "t" => {
                if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(SignatureError::Malformed("`t` is not a Unix timestamp"));
                }
                timestamp = Some(
                    value.parse().map_err(|_| SignatureError::Malformed("`t` is not a Unix timestamp"))?,
                );
            }
            "v1" => v1.push(value),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed("no timestamp `t=`"))?;
    if v1.is_empty() {
        return Err(SignatureError::Malformed("no `v1=` signature"));
    }
    Ok(Header { timestamp, v1 })
}

/// Verifies `header` over the raw `body` at `now` (Unix seconds) with a tolerance of
/// `tolerance_secs` (0: no age check, as in Stripe's libraries).
pub fn verify(
    header: Option<&str>,
    body: &[u8],
    secrets: &SigningSecrets,
    tolerance_secs: u64,
    now: i64,
) -> Result<(), SignatureError> {
    let header = parse_header(header.ok_or(SignatureError::MissingHeader)?)?;
    let signatures: Vec<Vec<u8>> = header.v1.iter().filter_map(|s| hex::decode(s).ok()).collect();
    let timestamp = header.timestamp.to_string();
    let matched = secrets.0.iter().any(|secret| {
        let Ok(mut mac) = HmacSha256::new_from_slice(secret) else { return false };
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        signatures.iter().any(|sig| mac.clone().verify_slice(sig).is_ok())
    });
    if !matched {
        return Err(SignatureError::NoMatch);
    }
    let age_secs = now.saturating_sub(header.timestamp);
    if tolerance_secs > 0 && age_secs > i64::try_from(tolerance_secs).unwrap_or(i64::MAX) {
        return Err(SignatureError::OutsideTolerance { age_secs, tolerance_secs });
    }
    Ok(())
}

/// The `Stripe-Signature` value Stripe would send for `body` at `timestamp` under `secret`
/// (`t=…,v1=…`): for tests, fixtures and local runs (`stripe trigger` is the real thing).
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    format!("t={timestamp},v1={}", signature_hex(secret, timestamp, body))
}

/// hex(HMAC-SHA256(secret, "{timestamp}.{body}")).
pub fn signature_hex(secret: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let mut mac = match HmacSha256::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        Err(_) => return String::new(),
    };
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_test_secret_0123456789abcdef";
    const OTHER: &str = "whsec_other_secret_0123456789abcdef";
    const BODY: &[u8] = br#"{"id":"evt_1","type":"invoice.upcoming"}"#;
    const NOW: i64 = 1_767_225_600;

    fn secrets(s: &str) -> SigningSecrets {
        SigningSecrets::parse(s).unwrap()
    }

    /// Stripe's documented algorithm, written out independently of [`signature_hex`]: HMAC-SHA256
    /// from its definition (RFC 2104) over `t.payload`, so the two cannot share a mistake.
    fn reference_signature(secret: &str, t: i64, body: &[u8]) -> String {
        use sha2::Digest;
        let mut key = secret.as_bytes().to_vec();
        if key.len() > 64 {
            key = Sha256::digest(&key).to_vec();
        }
        key.resize(64, 0);
        let ipad: Vec<u8> = key.iter().map(|b| b ^ 0x36).collect();
        let opad: Vec<u8> = key.iter().map(|b| b ^ 0x5c).collect();
        let mut payload = format!("{t}.").into_bytes();
        payload.extend_from_slice(body);
        let inner = Sha256::digest([ipad, payload].concat());
        hex::encode(Sha256::digest([opad, inner.to_vec()].concat()))
    }

    #[test]
    fn a_valid_signature_passes_and_matches_the_documented_algorithm() {
        let header = sign(SECRET, NOW - 10, BODY);
        assert_eq!(header, format!("t={},v1={}", NOW - 10, reference_signature(SECRET, NOW - 10, BODY)));
        assert_eq!(verify(Some(&header), BODY, &secrets(SECRET), 300, NOW), Ok(()));
        // Other schemes beside v1 (Stripe's test-mode v0) are ignored; spaces are tolerated.
        let with_v0 = format!("t={}, v1={}, v0=deadbeef", NOW, signature_hex(SECRET, NOW, BODY));
        assert_eq!(verify(Some(&with_v0), BODY, &secrets(SECRET), 300, NOW), Ok(()));
    }

    #[test]
    fn an_old_signature_is_refused_and_a_zero_tolerance_checks_no_age() {
        let header = sign(SECRET, NOW - 301, BODY);
        assert_eq!(
            verify(Some(&header), BODY, &secrets(SECRET), 300, NOW),
            Err(SignatureError::OutsideTolerance { age_secs: 301, tolerance_secs: 300 })
        );
        assert_eq!(verify(Some(&sign(SECRET, NOW - 300, BODY)), BODY, &secrets(SECRET), 300, NOW), Ok(()));
        assert_eq!(verify(Some(&header), BODY, &secrets(SECRET), 0, NOW), Ok(()));
        // An old signature under the wrong secret says "no match", not "expired": nothing is
        // revealed about a request that was never authentic.
        assert_eq!(
            verify(Some(&sign(OTHER, NOW - 999, BODY)), BODY, &secrets(SECRET), 300, NOW),
            Err(SignatureError::NoMatch)
        );
    }

    #[test]
    fn a_tampered_body_or_timestamp_or_another_secret_is_refused() {
        let header = sign(SECRET, NOW, BODY);
        let tampered = br#"{"id":"evt_1","type":"invoice.upcoming" }"#;
        assert_eq!(verify(Some(&header), tampered, &secrets(SECRET), 300, NOW), Err(SignatureError::NoMatch));
        let moved = header.replacen(&format!("t={NOW}"), &format!("t={}", NOW + 1), 1);
        assert_eq!(verify(Some(&moved), BODY, &secrets(SECRET), 300, NOW), Err(SignatureError::NoMatch));
        assert_eq!(
            verify(Some(&sign(OTHER, NOW, BODY)), BODY, &secrets(SECRET), 300, NOW),
            Err(SignatureError::NoMatch)
        );
        // A truncated or non-hex signature is simply no match.
        let sig = signature_hex(SECRET, NOW, BODY);
        for bad in [&sig[..62], "zz", ""] {
            let header = format!("t={NOW},v1={bad}");
            assert_eq!(verify(Some(&header), BODY, &secrets(SECRET), 300, NOW), Err(SignatureError::NoMatch));
        }
    }

    #[test]
    fn every_v1_is_tried_during_a_roll_and_every_configured_secret_too() {
        // Stripe signs with the old and the new secret while the endpoint's secret is rolled.
        let two =
            format!("t={NOW},v1={},v1={}", signature_hex(OTHER, NOW, BODY), signature_hex(SECRET, NOW, BODY));
        assert_eq!(verify(Some(&two), BODY, &secrets(SECRET), 300, NOW), Ok(()));
        assert_eq!(verify(Some(&two), BODY, &secrets(OTHER), 300, NOW), Ok(()));
        let neither = "whsec_neither_secret_0123456789abcdef";
        assert_eq!(verify(Some(&two), BODY, &secrets(neither), 300, NOW), Err(SignatureError::NoMatch));
        // Our side's rotation: two configured secrets, the request signed with the second.
        let ours = secrets(&format!("{neither}\n{SECRET}"));
        assert_eq!(ours.len(), 2);
        assert_eq!(verify(Some(&sign(SECRET, NOW, BODY)), BODY, &ours, 300, NOW), Ok(()));
    }

    #[test]
    fn a_missing_or_malformed_header_is_refused() {
        let s = secrets(SECRET);
        assert_eq!(verify(None, BODY, &s, 300, NOW), Err(SignatureError::MissingHeader));
        let sig = signature_hex(SECRET, NOW, BODY);
        for (header, want) in [
            (String::new(), "no timestamp"),
            (format!("v1={sig}"), "no timestamp"),
            (format!("t={NOW}"), "no `v1=`"),
            (format!("t={NOW},v0={sig}"), "no `v1=`"),
            (format!("t=abc,v1={sig}"), "not a Unix timestamp"),
            (format!("t=-5,v1={sig}"), "not a Unix timestamp"),
            ("garbage".to_owned(), "no timestamp"),
        ] {
            let e = verify(Some(&header), BODY, &s, 300, NOW).unwrap_err();
            assert!(matches!(e, SignatureError::Malformed(_)), "{header}: {e}");
            assert!(e.to_string().contains(want), "{header}: {e}");
            assert_eq!(e.label(), "malformed");
        }
    }

    #[test]
    fn configured_secrets_are_checked_and_never_printed() {
        for (value, want) in [
            ("", InvalidSigningSecret::Empty),
            (" \n, ", InvalidSigningSecret::Empty),
            ("whsec_short", InvalidSigningSecret::TooShort(1)),
            ("sk_live_0123456789abcdefghij", InvalidSigningSecret::ApiKey(1)),
            (
                "a1234567890123456 b1234567890123456 c1234567890123456 d1234567890123456 e1234567890123456",
                InvalidSigningSecret::TooMany(5),
            ),
        ] {
            assert_eq!(SigningSecrets::parse(value).unwrap_err(), want, "{value}");
        }
        let s = secrets(SECRET);
        assert_eq!(format!("{s:?}"), "SigningSecrets(1 secret)");
        assert!(!format!("{s:?}").contains("whsec"));
    }
}
