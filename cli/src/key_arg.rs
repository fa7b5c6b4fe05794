//! A notice key on the command line: all 64 hex characters, or a unique prefix of at least
//! [`MIN_PREFIX`] — the prefix every output line shows. A prefix is resolved against what the
//! command can act on (open claims, parked jobs); an ambiguous one lists its candidates.

use notice_ledger::NoticeKey;

/// Shortest accepted prefix: the 12 characters `NoticeKey::prefix` prints.
pub(crate) const MIN_PREFIX: usize = 12;
/// Candidates an ambiguous prefix lists.
const MAX_CANDIDATES: usize = 5;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KeyArg {
    Full(NoticeKey),
    /// 12 to 63 lower-case hex characters.
    Prefix(String),
}

impl KeyArg {
    /// The clap value parser: a bad value is a usage error naming the rule.
    pub(crate) fn parse(value: &str) -> Result<Self, String> {
        let text = value.trim().to_ascii_lowercase();
        let shown = crate::terminal::escape(&value.chars().take(80).collect::<String>());
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_hexdigit()) || text.len() > 64 {
            return Err(format!(
                "{shown:?} is not a notice key: give its 64 hex characters, or a unique prefix of at \
                 least {MIN_PREFIX}"
            ));
        }
        if text.len() < MIN_PREFIX {
            return Err(format!(
                "{shown:?} is {} hex character(s): a key prefix needs at least {MIN_PREFIX} (the prefix \
                 every output line shows), or give all 64",
                text.len()
            ));
        }
        if text.len() == 64 {
            return NoticeKey::parse(&text).map(KeyArg::Full).map_err(|e| e.to_string());
        }
        Ok(KeyArg::Prefix(text))
    }

    /// The whole key, when it was given whole.
    pub(crate) fn full(&self) -> Option<&NoticeKey> {
        match self {
            KeyArg::Full(key) => Some(key),
            KeyArg::Prefix(_) => None,
        }
    }

    /// The one key among `candidates` this names; `what` says what they are ("open claim in X").
    /// No match and an ambiguous prefix (its candidates listed, at most five) are errors.
    pub(crate) fn resolve<S: AsRef<str>>(
        &self,
        candidates: impl IntoIterator<Item = S>,
        what: &str,
    ) -> anyhow::Result<NoticeKey> {
        let prefix = match self {
            KeyArg::Full(key) => return Ok(key.clone()),
            KeyArg::Prefix(prefix) => prefix,
        };
        let mut matches: Vec<String> = candidates
            .into_iter()
            .filter(|c| c.as_ref().starts_with(prefix.as_str()))
            .map(|c| c.as_ref().to_owned())
            .collect();
        matches.sort();
        matches.dedup();
        match matches.as_slice() {
            [] => anyhow::bail!("no {what} has a key starting with {prefix}"),
            [one] => Ok(NoticeKey::parse(one)?),
            many => {
                let shown: Vec<&str> = many.iter().take(MAX_CANDIDATES).map(String::as_str).collect();
                let more = match many.len().saturating_sub(MAX_CANDIDATES) {
                    0 => String::new(),
                    n => format!(" … and {n} more"),
                };
                anyhow::bail!(
                    "the key prefix {prefix} is ambiguous: {} {what}s match ({}{more}); give more characters",
                    many.len(),
                    shown.join(", ")
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_or_a_prefix_of_at_least_twelve_hex_characters() {
        let whole = "a".repeat(64);
        assert_eq!(KeyArg::parse(&whole).unwrap().full().map(NoticeKey::as_str), Some(whole.as_str()));
        assert_eq!(KeyArg::parse(" ABCDEF012345 ").unwrap(), KeyArg::Prefix("abcdef012345".into()));
        let short = KeyArg::parse("abcdef01234").unwrap_err();
        assert!(short.contains("at least 12") && short.contains("11 hex"), "{short}");
        assert!(KeyArg::parse("xyz").unwrap_err().contains("not a notice key"));
        assert!(KeyArg::parse(&"a".repeat(65)).unwrap_err().contains("not a notice key"));
        assert!(KeyArg::parse("").is_err());
    }

    #[test]
    fn a_prefix_resolves_to_one_candidate_or_names_them() {
        let a = format!("abcdef012345{}", "1".repeat(52));
        let b = format!("abcdef012345{}", "2".repeat(52));
        let c = format!("ffffff012345{}", "3".repeat(52));
        let prefix = KeyArg::parse("abcdef0123451").unwrap();
        assert_eq!(prefix.resolve([&a, &b, &c], "claim").unwrap().as_str(), a);
        let none = KeyArg::parse("000000000000").unwrap().resolve([&a, &b], "open claim").unwrap_err();
        assert_eq!(none.to_string(), "no open claim has a key starting with 000000000000");
        let both = KeyArg::parse("abcdef012345").unwrap().resolve([&a, &b, &c], "claim").unwrap_err();
        let text = both.to_string();
        assert!(
            text.contains("ambiguous: 2 claims match") && text.contains(&a) && text.contains(&b),
            "{text}"
        );
        assert!(!text.contains(&c), "{text}");
        // At most five candidates are listed.
        let many: Vec<String> = (0..8).map(|i| format!("abcdef012345{i}{}", "0".repeat(51))).collect();
        let text =
            KeyArg::parse("abcdef012345").unwrap().resolve(&many, "parked job").unwrap_err().to_string();
        assert!(text.contains("8 parked jobs match") && text.contains("… and 3 more"), "{text}");
        assert_eq!(text.matches("abcdef012345").count(), 6, "the prefix and five candidates: {text}");
    }
}
