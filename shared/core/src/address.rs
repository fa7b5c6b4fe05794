//! Mail addresses: exactly one mailbox per job, checked by a maintained RFC 5322 parser.
//!
//! A recipient is one bare addr-spec (`local@domain`): no display name, angle brackets, groups,
//! lists, comments, whitespace, control or invisible/bidi characters. The local part is ASCII —
//! SES does not speak SMTPUTF8, so a non-ASCII local part could never be delivered. The domain is
//! DNS labels with at least one dot; internationalised domains are accepted as U-labels or
//! punycode and stored as punycode (A-labels, lower case), the form SES needs.
//!
//! The sender (`--from`, `NOTICE_FROM`) may carry a display name (`Billing <billing@example.com>`);
//! its address part obeys the same rules, and the name may hold no control characters.

use email_address::{EmailAddress, Options};

/// Longest accepted address (RFC 5321 path limit).
pub const MAX_ADDRESS_LEN: usize = 254;
/// Longest accepted display name of the sender.
pub const MAX_DISPLAY_NAME_LEN: usize = 128;

/// Why a value is not one acceptable mailbox (the caller names the field).
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum AddressError {
    #[error("must be at most {MAX_ADDRESS_LEN} bytes")]
    TooLong,
    #[error("must be one bare address (local@domain): no display name, brackets, lists or separators")]
    NotBare,
    #[error("must not contain whitespace, control or invisible characters")]
    Invisible,
    #[error("is not an e-mail address: {0}")]
    Grammar(String),
    #[error("local part must be ASCII (the provider cannot deliver SMTPUTF8 addresses)")]
    NonAsciiLocal,
    #[error("domain {0:?} is not a valid DNS name with a dot")]
    Domain(String),
    #[error("display name must be at most {MAX_DISPLAY_NAME_LEN} characters without control characters")]
    DisplayName,
}

/// A recipient: one bare addr-spec, returned normalised (domain as lower-case A-labels).
pub fn parse_recipient(value: &str) -> Result<String, AddressError> {
    if value.len() > MAX_ADDRESS_LEN {
        return Err(AddressError::TooLong);
    }
    if value.chars().any(is_hidden) {
        return Err(AddressError::Invisible);
    }
    // Separators and brackets are what turn one value into several recipients or a display form.
    if value.chars().any(|c| matches!(c, ',' | ';' | '<' | '>' | '(' | ')' | '"' | ':' | '[' | ']')) {
        return Err(AddressError::NotBare);
    }
    let options = Options { minimum_sub_domains: 2, ..Options::default() }
        .without_domain_literal()
        .without_display_text();
    let parsed =
        EmailAddress::parse_with_options(value, options).map_err(|e| AddressError::Grammar(e.to_string()))?;
    let local = parsed.local_part();
    if !local.is_ascii() {
        return Err(AddressError::NonAsciiLocal);
    }
    let domain = dns_domain(parsed.domain())?;
    Ok(format!("{local}@{domain}"))
}

/// The From mailbox: an optional display name and one checked address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sender {
    pub name: Option<String>,
    pub address: String,
}

/// A sender: `addr-spec` or `Display Name <addr-spec>` (a quoted name loses its quotes).
pub fn parse_sender(value: &str) -> Result<Sender, AddressError> {
    let value = value.trim();
    match value.rsplit_once('<') {
        None => Ok(Sender { name: None, address: parse_recipient(value)? }),
        Some((name, rest)) => {
            let addr = rest.strip_suffix('>').ok_or(AddressError::NotBare)?;
            let address = parse_recipient(addr)?;
            let name = name.trim();
            let name = name.strip_prefix('"').and_then(|n| n.strip_suffix('"')).unwrap_or(name).trim();
            if name.chars().count() > MAX_DISPLAY_NAME_LEN
                || name.chars().any(|c| c.is_control() || is_hidden(c) && c != ' ')
                || name.contains(['<', '>', '"'])
            {
                return Err(AddressError::DisplayName);
            }
            Ok(Sender { name: (!name.is_empty()).then(|| name.to_owned()), address })
        }
    }
}

/// The domain as lower-case A-labels, each a valid DNS label, at least two labels.
fn dns_domain(domain: &str) -> Result<String, AddressError> {
    let bad = || AddressError::Domain(domain.to_owned());
    // UTS 46 with the STD3 rules (letters, digits, hyphen) and DNS length checks.
    let ascii = idna::domain_to_ascii_strict(domain).map_err(|_| bad())?;
    let labels: Vec<&str> = ascii.split('.').collect();
    if labels.len() < 2 || ascii.len() > 253 {
        return Err(bad());
    }
    for label in &labels {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return Err(bad());
        }
    }
    // A numeric top-level label is an IP address in disguise, not a mail domain.
    if labels.last().is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit())) {
        return Err(bad());
    }
    Ok(ascii)
}

/// Whitespace, controls and the invisible or direction-changing characters that make one address
/// display as another (zero-width, bidi overrides and isolates, soft hyphen, BOM, tag characters).
fn is_hidden(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
            | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
            | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}' | '\u{E0000}'..='\u{E0FFF}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_plain_and_international_domains() {
        assert_eq!(parse_recipient("ada@example.com").unwrap(), "ada@example.com");
        assert_eq!(
            parse_recipient("ada+renewals@Mail.Example.COM").unwrap(),
            "ada+renewals@mail.example.com"
        );
        assert_eq!(
            parse_recipient("o'brien.x_y@sub.example.co.uk").unwrap(),
            "o'brien.x_y@sub.example.co.uk"
        );
        assert_eq!(parse_recipient("ada@bücher.de").unwrap(), "ada@xn--bcher-kva.de");
        assert_eq!(parse_recipient("ada@xn--bcher-kva.de").unwrap(), "ada@xn--bcher-kva.de");
    }

    #[test]
    fn refuses_everything_that_is_not_one_bare_mailbox() {
        let refused = [
            "victim@example.com,attacker@evil.example",
            "victim@example.com;attacker@evil.example",
            "Victim <victim@example.com>",
            "<victim@example.com>",
            "\"Victim\" victim@example.com",
            "victim@example.com (comment)",
            "group: a@example.com;",
            "a@-b.com",
            "a@b-.com",
            "a@b..com",
            "a@.b.com",
            "a@b.com.",
            "a@localhost",
            "a@[127.0.0.1]",
            "a@127.0.0.1",
            "a@exa_mple.com",
            "a\u{200B}@example.com",
            "a@exam\u{200B}ple.com",
            "a@example.com\u{202E}",
            "\u{FEFF}a@example.com",
            "a@exam\u{00AD}ple.com",
            "a @example.com",
            "a@example.com\r\nBcc: x@evil.example",
            "a\0@example.com",
            "jörg@example.com",
            "@example.com",
            "a@",
            "a",
            "",
        ];
        for value in refused {
            assert!(parse_recipient(value).is_err(), "accepted {value:?}");
        }
        let long = format!("{}@example.com", "a".repeat(250));
        assert_eq!(parse_recipient(&long), Err(AddressError::TooLong));
    }

    #[test]
    fn sender_may_have_a_display_name_but_no_injection() {
        assert_eq!(
            parse_sender("billing@example.com"),
            Ok(Sender { name: None, address: "billing@example.com".into() })
        );
        assert_eq!(
            parse_sender("\"Billing Team\" <billing@example.com>"),
            Ok(Sender { name: Some("Billing Team".into()), address: "billing@example.com".into() })
        );
        assert!(parse_sender("Billing\r\nBcc: x@evil.example <billing@example.com>").is_err());
        assert!(parse_sender("Billing <billing@example.com>\r\nBcc: x@evil.example").is_err());
        assert!(parse_sender("Billing <a@example.com, b@example.com>").is_err());
        assert!(parse_sender("Billing <billing@example.com").is_err());
    }

    proptest! {
        /// Any accepted value is exactly one mailbox: one `@`, no separator, and stable under a
        /// second parse.
        #[test]
        fn accepted_values_are_one_normalised_mailbox(s in "\\PC{0,40}") {
            if let Ok(addr) = parse_recipient(&s) {
                prop_assert_eq!(addr.matches('@').count(), 1);
                prop_assert!(!addr.contains([',', ';', '<', '>', ' ']));
                prop_assert!(addr.is_ascii());
                prop_assert_eq!(parse_recipient(&addr), Ok(addr.clone()));
            }
        }

        /// Joining two valid addresses with any separator never yields an accepted value.
        #[test]
        fn two_addresses_never_pass(
            a in "[a-z]{1,8}@[a-z]{1,8}\\.com",
            b in "[a-z]{1,8}@[a-z]{1,8}\\.org",
            sep in prop::sample::select(vec![",", ";", " ", ", ", "\n", "\t", "\u{200B}", "\r\n"]),
        ) {
            prop_assert!(parse_recipient(&a).is_ok());
            let joined = format!("{a}{sep}{b}");
            prop_assert!(parse_recipient(&joined).is_err());
        }

        /// Generated well-formed addresses are accepted, lower-cased in the domain.
        #[test]
        fn well_formed_addresses_pass(
            local in "[A-Za-z0-9][A-Za-z0-9._+-]{0,20}[A-Za-z0-9]",
            labels in prop::collection::vec("[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", 1..4),
            tld in "[a-z]{2,6}",
        ) {
            prop_assume!(!local.contains(".."));
            // `ab--…` labels are reserved for A-labels (IDNA2008) and refused unless valid punycode.
            prop_assume!(!labels.iter().any(|l| l.get(2..4) == Some("--")));
            let addr = format!("{local}@{}.{tld}", labels.join("."));
            prop_assert_eq!(parse_recipient(&addr), Ok(addr.clone()));
        }
    }
}
