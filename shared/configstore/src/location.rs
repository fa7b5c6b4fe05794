//! Where one published notice configuration lives: `s3://<bucket>/<prefix>/<64 hex>.json`.
//!
//! The file name *is* the version (the SHA-256 of the object's bytes), so a location names
//! exactly one content; the reader checks the bytes against it. Keys are limited to characters
//! that need no percent-encoding, so the path that is signed is the path that is sent (S3 signs
//! the path as sent; an encoding mismatch would be refused as a bad signature, far from its
//! cause).

use std::fmt;
use std::str::FromStr;

/// The folder `publish` writes into.
pub const PUBLISH_PREFIX: &str = "notice-config";

const SCHEME: &str = "s3://";
const HEX_LEN: usize = 64;
const SUFFIX: &str = ".json";

/// A valid pointer target: a bucket and a key whose file name is `<64 lowercase hex>.json`.
/// Only made by parsing or by [`ConfigLocation::published`], so it is always well formed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConfigLocation {
    bucket: String,
    key: String,
}

/// What is wrong with a would-be location; each message names the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    #[error("{value:?} does not start with `s3://`")]
    NotS3 { value: String },
    #[error("{value:?} names no object: expected s3://<bucket>/<path>/<64 hex>.json")]
    NoKey { value: String },
    #[error("bucket name {bucket:?} is not a valid S3 bucket name: {reason}")]
    Bucket { bucket: String, reason: &'static str },
    #[error("file name {name:?} is not `<64 lowercase hex digits>.json` (the SHA-256 of its bytes)")]
    FileName { name: String },
    #[error("path segment {segment:?} of key {key:?} {reason}")]
    Prefix { key: String, segment: String, reason: &'static str },
}

impl ConfigLocation {
    /// Where `publish` puts version `version_hex` in `bucket`: `notice-config/<hex>.json`.
    pub fn published(bucket: &str, version_hex: &str) -> Result<Self, LocationError> {
        Self::from_parts(bucket, &format!("{PUBLISH_PREFIX}/{version_hex}{SUFFIX}"))
    }

    fn from_parts(bucket: &str, key: &str) -> Result<Self, LocationError> {
        check_bucket(bucket)?;
        let (prefix, name) = match key.rsplit_once('/') {
            Some((prefix, name)) => (Some(prefix), name),
            None => (None, key),
        };
        let hex = name.strip_suffix(SUFFIX).unwrap_or("");
        let lower_hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
        if hex.len() != HEX_LEN || !hex.chars().all(lower_hex) {
            return Err(LocationError::FileName { name: name.to_owned() });
        }
        for segment in prefix.into_iter().flat_map(|p| p.split('/')) {
            let fail =
                |reason| LocationError::Prefix { key: key.to_owned(), segment: segment.to_owned(), reason };
            if segment.is_empty() {
                return Err(fail("is empty (a doubled or leading `/`)"));
            }
            if segment == "." || segment == ".." {
                return Err(fail("is a relative path step"));
            }
            if !segment.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
                return Err(fail("has a character other than letters, digits, `-`, `_` and `.`"));
            }
        }
        Ok(Self { bucket: bucket.to_owned(), key: key.to_owned() })
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// The version the object must have: the 64 hex digits of its file name (without
    /// `sha256:`).
    pub fn version_hex(&self) -> &str {
        let name_start = self.key.len() - HEX_LEN - SUFFIX.len();
        &self.key[name_start..self.key.len() - SUFFIX.len()]
    }
}

/// The rules S3 enforces for new general-purpose buckets, so a typo is caught here rather than
/// as an unexplained 404 or a host that does not resolve.
fn check_bucket(bucket: &str) -> Result<(), LocationError> {
    let fail = |reason| Err(LocationError::Bucket { bucket: bucket.to_owned(), reason });
    if !(3..=63).contains(&bucket.len()) {
        return fail("it must be 3 to 63 characters long");
    }
    if !bucket.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.') {
        return fail("only lowercase letters, digits, `-` and `.` are allowed");
    }
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edge_ok(bucket.chars().next()) || !edge_ok(bucket.chars().last()) {
        return fail("it must begin and end with a letter or digit");
    }
    if bucket.contains("..") {
        return fail("it must not contain `..`");
    }
    Ok(())
}

impl FromStr for ConfigLocation {
    type Err = LocationError;

    /// Surrounding whitespace is ignored (a value pasted with its trailing newline is still
    /// the same location); anything else must be exact.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let trimmed = value.trim();
        let rest =
            trimmed.strip_prefix(SCHEME).ok_or_else(|| LocationError::NotS3 { value: value.to_owned() })?;
        let (bucket, key) =
            rest.split_once('/').ok_or_else(|| LocationError::NoKey { value: value.to_owned() })?;
        if key.is_empty() {
            return Err(LocationError::NoKey { value: value.to_owned() });
        }
        Self::from_parts(bucket, key)
    }
}

impl fmt::Display for ConfigLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.bucket, self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn parse(value: &str) -> Result<ConfigLocation, LocationError> {
        value.parse()
    }

    #[test]
    fn a_published_location_round_trips_through_its_text() {
        let loc = ConfigLocation::published("notice-bucket", HEX).unwrap_or_else(|e| panic!("{e}"));
        let text = loc.to_string();
        assert_eq!(text, format!("s3://notice-bucket/notice-config/{HEX}.json"));
        assert_eq!(parse(&text), Ok(loc.clone()));
        assert_eq!(
            (loc.bucket(), loc.key(), loc.version_hex()),
            ("notice-bucket", &*format!("notice-config/{HEX}.json"), HEX)
        );
    }

    #[test]
    fn any_plain_prefix_or_none_is_accepted() {
        for key in [format!("{HEX}.json"), format!("a/b.c/d_e-f/{HEX}.json")] {
            let loc = parse(&format!("s3://my.bucket-1/{key}")).unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!((loc.key(), loc.version_hex()), (key.as_str(), HEX));
        }
        assert!(
            parse(&format!("  s3://bkt/notice-config/{HEX}.json\n")).is_ok(),
            "a trailing newline is not a new location"
        );
    }

    #[test]
    fn each_wrong_part_is_named() {
        let cases = [
            (format!("https://bkt/notice-config/{HEX}.json"), "does not start with `s3://`"),
            ("s3://bkt".to_owned(), "names no object"),
            ("s3://bkt/".to_owned(), "names no object"),
            (format!("s3://Bkt/{HEX}.json"), "bucket name \"Bkt\""),
            (format!("s3://b/{HEX}.json"), "3 to 63"),
            (format!("s3://-bkt/{HEX}.json"), "begin and end"),
            (format!("s3://b..kt/{HEX}.json"), "`..`"),
            ("s3://bkt/notice-config/abc.json".to_owned(), "file name \"abc.json\""),
            (format!("s3://bkt/notice-config/{}.json", HEX.to_uppercase()), "lowercase hex"),
            (format!("s3://bkt/notice-config/{HEX}.yaml"), "file name"),
            (format!("s3://bkt/notice-config/sha256:{HEX}.json"), "file name"),
            (format!("s3://bkt//{HEX}.json"), "is empty"),
            (format!("s3://bkt/a/../{HEX}.json"), "relative path step"),
            (format!("s3://bkt/a b/{HEX}.json"), "segment \"a b\""),
            (format!("s3://bkt/caf%C3%A9/{HEX}.json"), "other than letters"),
        ];
        for (value, words) in cases {
            let err = parse(&value).err().unwrap_or_else(|| panic!("{value} must be refused")).to_string();
            assert!(err.contains(words), "{value}: {err}");
        }
    }
}
