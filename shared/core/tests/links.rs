//! The manage-link vectors (`tests/vectors/manage_links.json`) against [`ManageLinks`] and
//! [`NoticeSecret::derive_subkey`], so the file a merchant's web app is tested with can never drift
//! from what the sender mails.
//!
//! The file is generated from the cases below by the Rust code itself, never by hand:
//!
//! ```text
//! NOTICE_UPDATE_VECTORS=1 cargo test -p notice_ledger --test links
//! ```
//!
//! Without the variable the test regenerates the document and requires the committed file to be
//! byte-identical. A second, independent computation (the documented formula spelled out here with
//! the `hmac` crate and a percent-encoder of its own) pins the formula itself: regenerating the
//! file after a change to `links.rs` would not hide the change, this check would fail.

use hmac::{Hmac, Mac};
use notice_ledger::links::ManageLinks;
use notice_ledger::{Identity, NoticeSecret};
use serde::Serialize;
use sha2::Sha256;

/// The label the link secret is derived under when `NOTICE_LINK_SECRET` is unset
/// (`notice_setup::config::links_from_env`).
const LINK_LABEL: &str = "notice-ledger/manage-link/v1";

const VECTORS_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/manage_links.json");

const BASE: &str = "https://billing.example.com/manage";
const SECRET: &str = "local-demo-secret-0123456789abcdef";

/// One case: the inputs only; everything else in a vector is computed.
struct Case {
    key_secret: &'static str,
    /// `NOTICE_LINK_SECRET`, when the deployment sets one (it then replaces the derived secret).
    link_secret_env: Option<&'static str>,
    subscription_id: String,
    period_start: &'static str,
    base_url: &'static str,
}

fn case(subscription_id: impl Into<String>, period_start: &'static str) -> Case {
    Case {
        key_secret: SECRET,
        link_secret_env: None,
        subscription_id: subscription_id.into(),
        period_start,
        base_url: BASE,
    }
}

/// The cases, awkward ones included: every character a URL treats specially, non-ASCII, ids at
/// the 256-byte limit, base URLs that already carry a query, secrets longer than a SHA-256 block
/// and not ASCII, and the `NOTICE_LINK_SECRET` case.
fn cases() -> Vec<Case> {
    vec![
        case("sub_8812", "2026-10-01"),
        case("sub_8812", "2026-11-01"),
        case("sub 1/ü", "2026-10-01"),
        case("a/b c&d+e%f=g?h#i", "2026-10-01"),
        case("already%20encoded%2F", "2026-10-01"),
        case("AZaz09-._~", "2026-10-01"),
        case("!*'()", "2026-10-01"),
        case("cus_Ünïcødé-42", "2027-02-28"),
        case("订阅-9001", "2026-12-31"),
        case("sub with spaces and émoji 🎉", "2028-02-29"),
        case("x".repeat(256), "2026-10-01"),
        case("é".repeat(128), "2026-10-01"),
        case(format!("{}/& +%", "s".repeat(251)), "2026-10-01"),
        Case { base_url: "https://billing.example.com/account?tab=plan&lang=de", ..case("sub_8812", "2026-10-01") },
        Case { base_url: "https://billing.example.com/manage?", ..case("sub_8812", "2026-10-01") },
        Case {
            key_secret: "a much longer secret value that exceeds the sha-256 block size of sixty-four bytes, forcing the key to be hashed",
            ..case("sub_1", "2026-01-01")
        },
        Case { key_secret: "ключ-ключ-ключ-ключ", ..case("sub_1", "2026-01-01") },
        Case { link_secret_env: Some("merchant-web-app-link-secret-2026"), ..case("sub_8812", "2026-10-01") },
        Case { link_secret_env: Some("merchant-web-app-link-secret-2027"), ..case("sub_8812", "2026-10-01") },
        Case { link_secret_env: Some("merchant-web-app-link-secret-2027"), ..case("a/b c&d+e%f=g?h#i", "2026-10-01") },
    ]
}

#[derive(Serialize)]
struct Document {
    formula: &'static str,
    link_secret: &'static str,
    url: &'static str,
    verify: &'static str,
    generated_with: &'static str,
    checked_by: &'static str,
    vectors: Vec<Vector>,
}

#[derive(Serialize)]
struct Vector {
    key_secret: String,
    derived_link_secret: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    link_secret_env: Option<String>,
    subscription_id: String,
    period_start: String,
    base_url: String,
    token: String,
    url: String,
}

fn secret(value: &str) -> NoticeSecret {
    NoticeSecret::new(value).unwrap_or_else(|e| panic!("a case's secret {e}"))
}

/// The document as the Rust code computes it: `derive_subkey` for the link secret, `ManageLinks`
/// for the token and the URL.
fn generate() -> Document {
    let vectors = cases()
        .into_iter()
        .map(|c| {
            let key_secret = secret(c.key_secret);
            let derived = key_secret.derive_subkey(LINK_LABEL);
            let derived_text = independent_hmac_hex(c.key_secret.as_bytes(), LINK_LABEL.as_bytes());
            // `derive_subkey` keeps its bytes private: it is the hex text above exactly when both
            // make the same token (HMAC-SHA256 is a PRF; a different key agreeing is 2^-128).
            assert_eq!(
                ManageLinks::new(BASE, derived.clone()).token(&c.subscription_id, c.period_start),
                ManageLinks::new(BASE, secret(&derived_text)).token(&c.subscription_id, c.period_start),
                "derive_subkey is not hex(HMAC-SHA256(key_secret, {LINK_LABEL:?}))"
            );
            let in_effect = match c.link_secret_env {
                Some(env) => secret(env),
                None => derived,
            };
            let links = ManageLinks::new(c.base_url, in_effect);
            let identity = Identity::new(&c.subscription_id, c.period_start, "renewal_notice_t72", 0)
                .unwrap_or_else(|e| panic!("case {:?}: {e}", c.subscription_id));
            Vector {
                key_secret: c.key_secret.to_owned(),
                derived_link_secret: derived_text,
                link_secret_env: c.link_secret_env.map(str::to_owned),
                token: links.token(&c.subscription_id, c.period_start),
                url: links.url_for(&identity),
                subscription_id: c.subscription_id,
                period_start: c.period_start.to_owned(),
                base_url: c.base_url.to_owned(),
            }
        })
        .collect();
    Document {
        formula: "token = first 32 hex characters of hex(HMAC-SHA256(link_secret, 'manage|' + subscription_id + '|' + period_start)), UTF-8, lower-case hex",
        link_secret: "NOTICE_LINK_SECRET (link_secret_env) when set; else derived_link_secret = the UTF-8 bytes of hex(HMAC-SHA256(key_secret, 'notice-ledger/manage-link/v1'))",
        url: "base_url + ('&' if base_url contains '?' else '?') + 's=' + pct(subscription_id) + '&p=' + period_start + '&t=' + token; pct keeps A-Z a-z 0-9 - . _ ~ and writes every other UTF-8 byte as %XX (upper-case hex)",
        verify: "read s, p and t from the query (each exactly once), recompute the token under the link secret and compare in constant time",
        generated_with: "the Rust implementation (shared/core/tests/links.rs: NOTICE_UPDATE_VECTORS=1 cargo test -p notice_ledger --test links); the test fails when this file differs",
        checked_by: "scripts/link_vectors.py (Python hmac) and scripts/link-vectors.mjs (Node.js node:crypto)",
        vectors,
    }
}

fn render(doc: &Document) -> String {
    let mut text = serde_json::to_string_pretty(doc).unwrap_or_else(|e| panic!("serialise vectors: {e}"));
    text.push('\n');
    text
}

#[test]
fn manage_links_vectors_match_the_committed_file() {
    let generated = render(&generate());
    if std::env::var_os("NOTICE_UPDATE_VECTORS").is_some() {
        std::fs::write(VECTORS_PATH, &generated).unwrap_or_else(|e| panic!("write {VECTORS_PATH}: {e}"));
        return;
    }
    let committed =
        std::fs::read_to_string(VECTORS_PATH).unwrap_or_else(|e| panic!("read {VECTORS_PATH}: {e}"));
    assert!(
        committed == generated,
        "{VECTORS_PATH} differs from what ManageLinks computes; regenerate it with \
         NOTICE_UPDATE_VECTORS=1 cargo test -p notice_ledger --test links (and review the diff)"
    );
}

#[test]
fn manage_links_vectors_follow_the_documented_formula() {
    let doc = generate();
    assert!(doc.vectors.len() >= 20);
    for v in &doc.vectors {
        let in_effect = v.link_secret_env.as_deref().unwrap_or(&v.derived_link_secret);
        let message = format!("manage|{}|{}", v.subscription_id, v.period_start);
        let token = &independent_hmac_hex(in_effect.as_bytes(), message.as_bytes())[..32];
        assert_eq!(v.token, token, "token of {:?}", v.subscription_id);
        let sep = if v.base_url.contains('?') { '&' } else { '?' };
        let url = format!(
            "{}{sep}s={}&p={}&t={token}",
            v.base_url,
            independent_percent_encode(&v.subscription_id),
            v.period_start
        );
        assert_eq!(v.url, url);
        let links = ManageLinks::new(&v.base_url, secret(in_effect));
        assert!(links.verify(&v.subscription_id, &v.period_start, &v.token));
        // Every revision and kind of the notice carries the same link.
        let other = Identity::new(&v.subscription_id, &v.period_start, "annual_t30d", 7)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(links.url_for(&other), v.url);
    }
}

#[test]
fn manage_links_vectors_cover_the_awkward_cases() {
    let doc = generate();
    let subs: Vec<&str> = doc.vectors.iter().map(|v| v.subscription_id.as_str()).collect();
    for c in ['/', ' ', '&', '+', '%', '=', '?', '#', 'ü', '订', '🎉', '~', '*'] {
        assert!(subs.iter().any(|s| s.contains(c)), "no vector's subscription id holds {c:?}");
    }
    assert!(subs.iter().any(|s| s.len() == notice_ledger::identity::MAX_SUBSCRIPTION_ID_BYTES));
    assert!(doc.vectors.iter().any(|v| v.base_url.contains('?') && !v.base_url.ends_with('?')));
    assert!(doc.vectors.iter().filter(|v| v.link_secret_env.is_some()).count() >= 2);
    assert!(doc.vectors.iter().any(|v| v.key_secret.len() > 64));
    assert!(doc.vectors.iter().any(|v| !v.key_secret.is_ascii()));
}

/// The rotation story the docs tell: a new `NOTICE_LINK_SECRET` makes a new token for the same
/// period, so the old link only verifies under the previous secret.
#[test]
fn manage_links_under_a_new_secret_reject_the_old_token() {
    let doc = generate();
    let (old, new) = match doc.vectors.iter().filter(|v| v.link_secret_env.is_some()).collect::<Vec<_>>()[..]
    {
        [old, new, ..] => (old, new),
        _ => panic!("two NOTICE_LINK_SECRET vectors expected"),
    };
    assert_eq!((&old.subscription_id, &old.period_start), (&new.subscription_id, &new.period_start));
    assert_ne!(old.token, new.token);
    let new_links = ManageLinks::new(BASE, secret(new.link_secret_env.as_deref().unwrap_or_default()));
    assert!(!new_links.verify(&old.subscription_id, &old.period_start, &old.token));
}

fn independent_hmac_hex(key: &[u8], message: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap_or_else(|e| panic!("{e}"));
    mac.update(message);
    hex::encode(mac.finalize().into_bytes())
}

/// RFC 3986 unreserved characters kept, every other UTF-8 byte as `%XX` (upper case).
fn independent_percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
