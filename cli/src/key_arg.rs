//! A notice key on the command line, in any form a command prints it: the whole key (64 hex
//! characters under secret version 1, `vN-` and 56 under a later version `N`), or a unique
//! prefix of at least [`MIN_PREFIX`] hex characters — the prefix every output line shows
//! (`cb71fd120bea`, `v2-cb71fd120bea`). Without its `vN-` a prefix names a key of any version
//! whose hex part starts with it; with it, only a key of that version. A prefix is resolved
//! against what the command can act on (ledger rows, open claims, parked jobs); an ambiguous one
//! lists its candidates.

use notice_ledger::identity::VERSIONED_HEX_LEN;
use notice_ledger::keyring::{parse_version, version_name};
use notice_ledger::NoticeKey;

use crate::exit::NotFound;

/// Shortest accepted prefix: the 12 hex characters `NoticeKey::prefix` prints (after a `vN-`).
const MIN_PREFIX: usize = 12;
/// Hex characters of a whole key under secret version 1.
const BARE_HEX_LEN: usize = 64;
/// Candidates an ambiguous prefix lists.
const MAX_CANDIDATES: usize = 5;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KeyArg {
    /// A whole key, exactly as `NoticeKey::parse` takes it.
    Full(NoticeKey),
    /// The start of a key's hex part: at least 12 lower-case hex characters, short of a whole
    /// key; `version` when the argument named its `vN-` (then only keys of that version match).
    Prefix { version: Option<u32>, hex: String },
}

impl KeyArg {
    /// The clap value parser: a bad value is a usage error naming the rule.
    pub(crate) fn parse(value: &str) -> Result<Self, String> {
        let text = value.trim().to_ascii_lowercase();
        let shown = crate::terminal::escape(&value.chars().take(80).collect::<String>());
        let not_a_key = || {
            format!(
                "{shown:?} is not a notice key: give it as printed — its 64 hex characters (or `vN-` and \
                 its 56), or a unique prefix of at least {MIN_PREFIX} hex characters, with or without \
                 its `vN-`"
            )
        };
        let (version, hex, whole) = match text.split_once('-') {
            None => (None, text.as_str(), BARE_HEX_LEN),
            Some((name, hex)) => match parse_version(name) {
                Some(1) => {
                    return Err(format!(
                        "{shown:?} is not a notice key: keys under secret version v1 have no `v1-`; give \
                         the hex characters alone"
                    ))
                }
                Some(n) => (Some(n), hex, VERSIONED_HEX_LEN),
                None => return Err(not_a_key()),
            },
        };
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(not_a_key());
        }
        if hex.len() > whole {
            return Err(match version {
                None => not_a_key(),
                Some(n) => format!(
                    "{shown:?} is not a notice key: after `{}-` a key has {VERSIONED_HEX_LEN} hex \
                     characters, this has {}",
                    version_name(n),
                    hex.len()
                ),
            });
        }
        if hex.len() < MIN_PREFIX {
            return Err(format!(
                "{shown:?} is {} hex character(s): a key prefix needs at least {MIN_PREFIX} (the prefix \
                 every output line shows), or give the whole key",
                hex.len()
            ));
        }
        if hex.len() == whole {
            return NoticeKey::parse(&text).map(KeyArg::Full).map_err(|e| e.to_string());
        }
        Ok(KeyArg::Prefix { version, hex: hex.to_owned() })
    }

    /// The whole key, when it was given whole.
    pub(crate) fn full(&self) -> Option<&NoticeKey> {
        match self {
            KeyArg::Full(key) => Some(key),
            KeyArg::Prefix { .. } => None,
        }
    }

    /// What to ask a ledger's prefix search (`keys_with_prefix`, which compares the stored key's
    /// text) for this prefix: with its `vN-`, that form alone; without, the bare hex (version 1)
    /// and `vN-` + the hex for each later version in `versions` the hex can start a key of.
    /// Nothing for a whole key (read it directly).
    pub(crate) fn ledger_prefixes(&self, versions: impl IntoIterator<Item = u32>) -> Vec<String> {
        match self {
            KeyArg::Full(_) => Vec::new(),
            KeyArg::Prefix { version: Some(n), hex } => vec![format!("{}-{hex}", version_name(*n))],
            KeyArg::Prefix { version: None, hex } => {
                let mut later: Vec<u32> = versions.into_iter().filter(|n| *n >= 2).collect();
                later.sort_unstable();
                later.dedup();
                let mut prefixes = vec![hex.clone()];
                // A later version's key has 56 hex characters: a longer prefix is version 1's.
                if hex.len() <= VERSIONED_HEX_LEN {
                    prefixes.extend(later.into_iter().map(|n| format!("{}-{hex}", version_name(n))));
                }
                prefixes
            }
        }
    }

    /// Whether `key` (a key's text: bare hex, or `vN-` and hex) is one this argument names.
    fn names(&self, key: &str) -> bool {
        match self {
            KeyArg::Full(full) => full.as_str() == key,
            KeyArg::Prefix { version, hex } => {
                split_version(key).is_some_and(|(their_version, their_hex)| {
                    version.is_none_or(|want| want == their_version) && their_hex.starts_with(hex.as_str())
                })
            }
        }
    }

    /// The prefix as the argument gave it (normalised), for messages.
    fn shown(&self) -> String {
        match self {
            KeyArg::Full(key) => key.as_str().to_owned(),
            KeyArg::Prefix { version: Some(n), hex } => format!("{}-{hex}", version_name(*n)),
            KeyArg::Prefix { version: None, hex } => hex.clone(),
        }
    }

    /// The one key among `candidates` this names; `what` says what they are ("open claim in X").
    /// No match and an ambiguous prefix (its candidates listed, at most five) are errors.
    pub(crate) fn resolve<S: AsRef<str>>(
        &self,
        candidates: impl IntoIterator<Item = S>,
        what: &str,
    ) -> anyhow::Result<NoticeKey> {
        if let KeyArg::Full(key) = self {
            return Ok(key.clone());
        }
        let prefix = self.shown();
        let mut matches: Vec<String> = candidates
            .into_iter()
            .filter(|c| self.names(c.as_ref()))
            .map(|c| c.as_ref().to_owned())
            .collect();
        matches.sort();
        matches.dedup();
        match matches.as_slice() {
            [] => Err(NotFound(format!("no {what} has a key starting with {prefix}")).into()),
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

/// A key's text as (secret version, hex part): `v2-ab…` is (2, `ab…`), bare hex is (1, itself);
/// `None` for a `vN-` that names no version.
fn split_version(key: &str) -> Option<(u32, &str)> {
    match key.split_once('-') {
        None => Some((1, key)),
        Some((name, hex)) => parse_version(name).map(|n| (n, hex)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(version: Option<u32>, hex: &str) -> KeyArg {
        KeyArg::Prefix { version, hex: hex.into() }
    }

    #[test]
    fn a_key_or_a_prefix_of_at_least_twelve_hex_characters() {
        let whole = "a".repeat(64);
        assert_eq!(KeyArg::parse(&whole).unwrap().full().map(NoticeKey::as_str), Some(whole.as_str()));
        assert_eq!(KeyArg::parse(" ABCDEF012345 ").unwrap(), prefix(None, "abcdef012345"));
        let short = KeyArg::parse("abcdef01234").unwrap_err();
        assert!(short.contains("at least 12") && short.contains("11 hex"), "{short}");
        assert!(KeyArg::parse("xyz").unwrap_err().contains("not a notice key"));
        assert!(KeyArg::parse(&"a".repeat(65)).unwrap_err().contains("not a notice key"));
        assert!(KeyArg::parse("").is_err());
    }

    #[test]
    fn a_later_versions_key_is_taken_as_printed_with_or_without_its_version() {
        let hex = format!("cb71fd120bea{}", "7".repeat(44));
        let whole = format!("v2-{hex}");
        // The whole key: exactly what `NoticeKey::parse` takes.
        let full = KeyArg::parse(&whole).unwrap();
        assert_eq!(full.full(), Some(&NoticeKey::parse(&whole).unwrap()));
        assert_eq!(KeyArg::parse(&whole.to_uppercase()).unwrap(), full);
        // The printed prefix, with and without its version; the hex part alone is a prefix.
        assert_eq!(KeyArg::parse("v2-cb71fd120bea").unwrap(), prefix(Some(2), "cb71fd120bea"));
        assert_eq!(KeyArg::parse(" V12-CB71FD120BEA7 ").unwrap(), prefix(Some(12), "cb71fd120bea7"));
        assert_eq!(KeyArg::parse("cb71fd120bea").unwrap(), prefix(None, "cb71fd120bea"));
        assert_eq!(KeyArg::parse(&hex).unwrap(), prefix(None, &hex));
        // Each wrong shape names what is wrong.
        let short = KeyArg::parse("v2-cb71fd120be").unwrap_err();
        assert!(short.contains("11 hex") && short.contains("at least 12"), "{short}");
        let long = KeyArg::parse(&format!("{whole}0")).unwrap_err();
        assert!(long.contains("after `v2-` a key has 56 hex characters, this has 57"), "{long}");
        let v1 = KeyArg::parse(&format!("v1-{}", "a".repeat(64))).unwrap_err();
        assert!(v1.contains("no `v1-`"), "{v1}");
        for bad in ["v0-cb71fd120bea", "v02-cb71fd120bea", "vx-cb71fd120bea", "-cb71fd120bea", "v2-", "v2"] {
            let err = KeyArg::parse(bad).unwrap_err();
            assert!(err.contains("is not a notice key") && err.contains("`vN-`"), "{bad}: {err}");
        }
        assert!(KeyArg::parse("v2-cb71fd120bea-00").unwrap_err().contains("not a notice key"));
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

    #[test]
    fn a_prefix_names_versioned_keys_by_their_hex_and_its_version_when_given() {
        let v1 = format!("abcdef012345{}", "1".repeat(52));
        let v2 = format!("v2-abcdef012345{}", "2".repeat(44));
        let v3 = format!("v3-cb71fd120bea{}", "3".repeat(44));
        let keys = [&v1, &v2, &v3];
        let resolve = |arg: &str| KeyArg::parse(arg).unwrap().resolve(keys, "ledger row");
        // A bare prefix matches the hex part of a key under any version.
        assert_eq!(resolve("cb71fd120bea").unwrap().as_str(), v3);
        assert_eq!(resolve(&v3[3..]).unwrap().as_str(), v3, "the whole hex part without its v3-");
        assert_eq!(resolve("abcdef0123452").unwrap().as_str(), v2);
        // With its version, only a key of that version.
        assert_eq!(resolve("v3-cb71fd120bea").unwrap().as_str(), v3);
        assert_eq!(resolve("v2-abcdef012345").unwrap().as_str(), v2);
        let other = resolve("v2-cb71fd120bea").unwrap_err().to_string();
        assert_eq!(other, "no ledger row has a key starting with v2-cb71fd120bea");
        // The same hex start under two versions: ambiguous without the version, both listed.
        let both = resolve("abcdef012345").unwrap_err().to_string();
        assert!(
            both.contains("abcdef012345 is ambiguous: 2 ledger rows match")
                && both.contains(&v1)
                && both.contains(&v2),
            "{both}"
        );
        // A candidate whose `vN-` names no version matches nothing.
        let odd = format!("vx-cb71fd120bea{}", "3".repeat(44));
        let none = KeyArg::parse("cb71fd120bea").unwrap().resolve([&odd], "parked job").unwrap_err();
        assert!(none.to_string().starts_with("no parked job has"), "{none}");
    }

    #[test]
    fn a_bare_prefix_is_searched_under_every_later_version_given() {
        let bare = KeyArg::parse("cb71fd120bea").unwrap();
        assert_eq!(
            bare.ledger_prefixes([1, 3, 2, 3]),
            ["cb71fd120bea", "v2-cb71fd120bea", "v3-cb71fd120bea"]
        );
        assert_eq!(bare.ledger_prefixes([1]), ["cb71fd120bea"]);
        let versioned = KeyArg::parse("v2-cb71fd120bea").unwrap();
        assert_eq!(versioned.ledger_prefixes([1, 2, 3]), ["v2-cb71fd120bea"]);
        // Longer than a later version's hex part: only version 1 can have it.
        let long = KeyArg::parse(&"c".repeat(57)).unwrap();
        assert_eq!(long.ledger_prefixes([1, 2]), ["c".repeat(57)]);
        assert!(KeyArg::parse(&"c".repeat(64)).unwrap().ledger_prefixes([1, 2]).is_empty());
    }
}
