//! Stable cancel/manage links.
//!
//! The token depends on (subscription_id, period_start) only, under its own secret: every resend and
//! every revision of a notice carries the same link, so a corrected notice never invalidates the
//! link the customer already has, and a link leak does not reveal notice keys.

use crate::identity::{hmac_hex, Identity, NoticeSecret};

/// Hex characters of the HMAC kept in the link (128 bits).
const TOKEN_HEX_LEN: usize = 32;

#[derive(Clone)]
pub struct ManageLinks {
    base_url: String,
    secret: NoticeSecret,
}

impl ManageLinks {
    pub fn new(base_url: impl Into<String>, secret: NoticeSecret) -> Self {
        Self { base_url: base_url.into(), secret }
    }

    /// The token for a subscription period.
    pub fn token(&self, subscription_id: &str, period_start: &str) -> String {
        let message = format!("manage|{subscription_id}|{period_start}");
        let mut full = hmac_hex(self.secret.bytes(), message.as_bytes());
        full.truncate(TOKEN_HEX_LEN);
        full
    }

    /// Checks a token from a link in constant time.
    pub fn verify(&self, subscription_id: &str, period_start: &str, token: &str) -> bool {
        let expected = self.token(subscription_id, period_start);
        expected.len() == token.len()
            && expected.bytes().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }

    pub fn url_for(&self, identity: &Identity) -> String {
        let period = identity.period_start().format("%Y-%m-%d").to_string();
        let token = self.token(identity.subscription_id(), &period);
        let sep = if self.base_url.contains('?') { '&' } else { '?' };
        format!("{}{sep}s={}&p={period}&t={token}", self.base_url, percent_encode(identity.subscription_id()))
    }
}

fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> ManageLinks {
        ManageLinks::new("https://billing.example.com/manage", NoticeSecret::new("link-secret").unwrap())
    }

    #[test]
    fn same_link_for_every_revision() {
        let r0 = Identity::new("sub 1/ü", "2026-10-01", "renewal_notice_t72", 0).unwrap();
        let r1 = Identity::new("sub 1/ü", "2026-10-01", "renewal_notice_t72", 1).unwrap();
        let other_kind = Identity::new("sub 1/ü", "2026-10-01", "renewal_notice_t24", 0).unwrap();
        assert_eq!(links().url_for(&r0), links().url_for(&r1));
        assert_eq!(links().url_for(&r0), links().url_for(&other_kind));
        assert!(links()
            .url_for(&r0)
            .starts_with("https://billing.example.com/manage?s=sub%201%2F%C3%BC&p=2026-10-01&t="));
    }

    #[test]
    fn tampered_token_fails() {
        let l = links();
        let token = l.token("sub_1", "2026-10-01");
        assert!(l.verify("sub_1", "2026-10-01", &token));
        let mut tampered = token.clone().into_bytes();
        tampered[0] = if tampered[0] == b'0' { b'1' } else { b'0' };
        assert!(!l.verify("sub_1", "2026-10-01", &String::from_utf8(tampered).unwrap()));
        assert!(!l.verify("sub_2", "2026-10-01", &token));
        assert!(!l.verify("sub_1", "2026-11-01", &token));
        assert!(!l.verify("sub_1", "2026-10-01", &token[..31]));
        let other = ManageLinks::new("https://x", NoticeSecret::new("other").unwrap());
        assert!(!other.verify("sub_1", "2026-10-01", &token));
    }
}
