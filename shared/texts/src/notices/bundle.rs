//! A notice configuration as files: read from a directory, packed into one immutable object whose
//! SHA-256 is its version, and unpacked again. Why one canonical object rather than a directory
//! tree in S3: the version must name *exactly* what was checked — one digest over one object
//! cannot be half-updated, and a sender verifies it in one read.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The published object's format tag; a loader refuses any other.
pub const FORMAT: &str = "notice-config/1";
/// Largest bundle accepted (all files together). Texts for a few kinds in a few languages are tens
/// of kilobytes; anything near this is a mistake (an image, a build directory) and would slow
/// every cold start.
pub const MAX_BUNDLE_BYTES: usize = 1024 * 1024;
/// Most files accepted in one bundle.
pub const MAX_FILES: usize = 2000;

/// The manifest's file name.
pub const MANIFEST: &str = "manifest.json";
/// The windows policy's file name.
pub const WINDOWS: &str = "windows.json";
/// The folder holding the templates.
pub const TEMPLATES: &str = "templates/";

/// What is wrong with a bundle as files: the file it concerns (when there is one) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{reason}", file.as_deref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct BundleError {
    pub file: Option<String>,
    pub reason: String,
}

impl BundleError {
    pub fn new(file: Option<&str>, reason: impl Into<String>) -> Self {
        Self { file: file.map(str::to_owned), reason: reason.into() }
    }
}

/// A configuration's version: `sha256:<hex>` of its published object. Two bundles with the same
/// files have the same version wherever they were packed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigVersion(String);

impl ConfigVersion {
    fn of(bytes: &[u8]) -> Self {
        Self(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    /// Reads a version as written in a pointer or on a ledger row.
    pub fn parse(s: &str) -> Result<Self, String> {
        let hex = s.strip_prefix("sha256:").ok_or_else(|| format!("{s:?} is not `sha256:<64 hex>`"))?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(format!("{s:?} is not `sha256:<64 lower-case hex>`"));
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The hex digest alone (object names in S3).
    pub fn hex(&self) -> &str {
        self.0.trim_start_matches("sha256:")
    }

    /// The first 12 hex characters, as people quote it.
    pub fn short(&self) -> &str {
        let hex = self.hex();
        &hex[..hex.len().min(12)]
    }
}

impl fmt::Display for ConfigVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A bundle's files by path (`manifest.json`, `windows.json`, `templates/<name>`), all UTF-8.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bundle {
    files: BTreeMap<String, String>,
}

impl Bundle {
    /// A bundle from files in memory (the built-in one, tests).
    pub fn from_files<I, P, C>(files: I) -> Result<Self, BundleError>
    where
        I: IntoIterator<Item = (P, C)>,
        P: Into<String>,
        C: Into<String>,
    {
        let bundle = Self { files: files.into_iter().map(|(p, c)| (p.into(), c.into())).collect() };
        bundle.check_shape()?;
        Ok(bundle)
    }

    /// Reads `dir`: `manifest.json`, `windows.json` and every file under `templates/`. Other files
    /// are refused (a `window.json` typo must not leave the policy out), except dotfiles and a
    /// `README.md`, which people keep beside their texts.
    pub fn from_dir(dir: &Path) -> Result<Self, BundleError> {
        let mut files = BTreeMap::new();
        let top = read_dir(dir)?;
        for (name, path, is_dir) in top {
            if name.starts_with('.') || name == "README.md" {
                continue;
            }
            if is_dir && name == TEMPLATES.trim_end_matches('/') {
                for (tname, tpath, tdir) in read_dir(&path)? {
                    if tname.starts_with('.') {
                        continue;
                    }
                    let rel = format!("{TEMPLATES}{tname}");
                    if tdir {
                        return Err(BundleError::new(Some(&rel), "templates/ holds files only, no folders"));
                    }
                    files.insert(rel.clone(), read_text(&tpath, &rel)?);
                }
            } else if !is_dir && (name == MANIFEST || name == WINDOWS) {
                files.insert(name.clone(), read_text(&path, &name)?);
            } else {
                return Err(BundleError::new(
                    Some(&name),
                    format!(
                        "not part of a notice configuration (expected {MANIFEST}, {WINDOWS} and {TEMPLATES})"
                    ),
                ));
            }
        }
        let bundle = Self { files };
        bundle.check_shape()?;
        Ok(bundle)
    }

    /// The published object: canonical JSON (keys sorted, no spaces), so the same files always
    /// pack to the same bytes and the same version.
    pub fn to_published(&self) -> Vec<u8> {
        let files: Map<String, Value> =
            self.files.iter().map(|(p, c)| (p.clone(), Value::String(c.clone()))).collect();
        let doc = serde_json::json!({ "format": FORMAT, "files": files });
        doc.to_string().into_bytes()
    }

    /// This bundle's version (the SHA-256 of [`Bundle::to_published`]).
    pub fn version(&self) -> ConfigVersion {
        ConfigVersion::of(&self.to_published())
    }

    /// Unpacks a published object and checks it is the version it was fetched as: a pointer to
    /// `expected` must never load anything else, whatever the store returned.
    pub fn from_published(bytes: &[u8], expected: &ConfigVersion) -> Result<Self, BundleError> {
        let found = ConfigVersion::of(bytes);
        if &found != expected {
            return Err(BundleError::new(
                None,
                format!("the object's digest is {found}, not {expected}: corrupted or replaced; refusing it"),
            ));
        }
        if bytes.len() > MAX_BUNDLE_BYTES + 64 * 1024 {
            return Err(BundleError::new(
                None,
                format!("is {} bytes; at most {MAX_BUNDLE_BYTES}", bytes.len()),
            ));
        }
        let doc: Value = serde_json::from_slice(bytes)
            .map_err(|e| BundleError::new(None, format!("is not a published notice configuration: {e}")))?;
        if doc.get("format").and_then(Value::as_str) != Some(FORMAT) {
            return Err(BundleError::new(None, format!("is not in format {FORMAT}")));
        }
        let Some(files) = doc.get("files").and_then(Value::as_object) else {
            return Err(BundleError::new(None, "has no `files` object"));
        };
        let mut out = BTreeMap::new();
        for (path, content) in files {
            let Some(text) = content.as_str() else {
                return Err(BundleError::new(Some(path), "is not text"));
            };
            out.insert(path.clone(), text.to_owned());
        }
        let bundle = Self { files: out };
        bundle.check_shape()?;
        // The canonical form must be what was published: otherwise two objects could claim one version.
        if bundle.to_published() != bytes {
            return Err(BundleError::new(None, "is not in canonical form"));
        }
        Ok(bundle)
    }

    pub fn get(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(String::as_str)
    }

    /// Every file, by path.
    pub fn files(&self) -> impl Iterator<Item = (&str, &str)> {
        self.files.iter().map(|(p, c)| (p.as_str(), c.as_str()))
    }

    /// The templates, by their name inside `templates/`.
    pub fn templates(&self) -> impl Iterator<Item = (&str, &str)> {
        self.files.iter().filter_map(|(p, c)| p.strip_prefix(TEMPLATES).map(|n| (n, c.as_str())))
    }

    /// Sizes, counts and paths: what any bundle must be, before its contents are read.
    fn check_shape(&self) -> Result<(), BundleError> {
        if self.files.len() > MAX_FILES {
            return Err(BundleError::new(
                None,
                format!("has {} files; at most {MAX_FILES}", self.files.len()),
            ));
        }
        let total: usize = self.files.iter().map(|(p, c)| p.len() + c.len()).sum();
        if total > MAX_BUNDLE_BYTES {
            return Err(BundleError::new(None, format!("is {total} bytes; at most {MAX_BUNDLE_BYTES}")));
        }
        for path in self.files.keys() {
            let ok = path == MANIFEST
                || path == WINDOWS
                || path.strip_prefix(TEMPLATES).is_some_and(|n| {
                    !n.is_empty()
                        && n.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
                });
            if !ok {
                return Err(BundleError::new(
                    Some(path),
                    "is not a bundle path (manifest.json, windows.json, templates/<letters, digits, . _ ->)",
                ));
            }
        }
        for required in [MANIFEST, WINDOWS] {
            if !self.files.contains_key(required) {
                return Err(BundleError::new(Some(required), "is missing"));
            }
        }
        Ok(())
    }
}

fn read_dir(dir: &Path) -> Result<Vec<(String, std::path::PathBuf, bool)>, BundleError> {
    let shown = dir.display().to_string();
    let entries = std::fs::read_dir(dir).map_err(|e| BundleError::new(Some(&shown), e.to_string()))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| BundleError::new(Some(&shown), e.to_string()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        out.push((name, entry.path(), is_dir));
    }
    out.sort();
    Ok(out)
}

fn read_text(path: &Path, shown: &str) -> Result<String, BundleError> {
    let bytes = std::fs::read(path).map_err(|e| BundleError::new(Some(shown), e.to_string()))?;
    if bytes.len() > MAX_BUNDLE_BYTES {
        return Err(BundleError::new(
            Some(shown),
            format!("is {} bytes; at most {MAX_BUNDLE_BYTES}", bytes.len()),
        ));
    }
    String::from_utf8(bytes).map_err(|_| BundleError::new(Some(shown), "is not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Bundle {
        Bundle::from_files([
            (MANIFEST, r#"{"name":"t","default_locale":"en"}"#),
            (WINDOWS, "{}"),
            ("templates/en.subject.txt", "Hi"),
        ])
        .unwrap()
    }

    #[test]
    fn published_round_trip_keeps_the_version() {
        let b = sample();
        let bytes = b.to_published();
        let v = b.version();
        assert!(v.as_str().starts_with("sha256:") && v.hex().len() == 64);
        assert_eq!(Bundle::from_published(&bytes, &v).unwrap(), b);
        assert_eq!(ConfigVersion::parse(v.as_str()).unwrap(), v);
    }

    #[test]
    fn a_changed_byte_is_refused() {
        let b = sample();
        let v = b.version();
        let mut bytes = b.to_published();
        let at = bytes.len() - 5;
        bytes[at] ^= 1;
        let e = Bundle::from_published(&bytes, &v).unwrap_err();
        assert!(e.reason.contains("corrupted or replaced"), "{e}");
    }

    #[test]
    fn non_canonical_bytes_are_refused_even_with_their_own_digest() {
        let b = sample();
        let pretty =
            serde_json::to_vec_pretty(&serde_json::from_slice::<Value>(&b.to_published()).unwrap()).unwrap();
        let v = ConfigVersion::of(&pretty);
        assert!(Bundle::from_published(&pretty, &v).unwrap_err().reason.contains("canonical"));
    }

    #[test]
    fn directory_reading_refuses_strays_and_needs_both_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("templates")).unwrap();
        std::fs::write(dir.path().join(MANIFEST), "{}").unwrap();
        let e = Bundle::from_dir(dir.path()).unwrap_err();
        assert_eq!(e.file.as_deref(), Some(WINDOWS));
        std::fs::write(dir.path().join("window.json"), "{}").unwrap();
        let e = Bundle::from_dir(dir.path()).unwrap_err();
        assert_eq!(e.file.as_deref(), Some("window.json"));
        std::fs::rename(dir.path().join("window.json"), dir.path().join(WINDOWS)).unwrap();
        std::fs::write(dir.path().join("README.md"), "notes").unwrap();
        std::fs::write(dir.path().join("templates/en.body.txt"), "x").unwrap();
        let b = Bundle::from_dir(dir.path()).unwrap();
        assert_eq!(b.templates().map(|(n, _)| n).collect::<Vec<_>>(), ["en.body.txt"]);
        std::fs::write(dir.path().join("templates/bad name.txt"), "x").unwrap();
        assert!(Bundle::from_dir(dir.path()).is_err());
    }

    #[test]
    fn versions_parse_strictly() {
        assert!(ConfigVersion::parse("sha256:abc").is_err());
        assert!(ConfigVersion::parse(&format!("sha256:{}", "A".repeat(64))).is_err());
        assert!(ConfigVersion::parse(&format!("md5:{}", "a".repeat(64))).is_err());
    }
}
