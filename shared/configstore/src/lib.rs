//! Where the published notice configuration lives, and how it is read and published.
//!
//! A notice configuration (texts + policy) is published as ONE immutable object whose name is
//! the SHA-256 of its bytes (`s3://<bucket>/notice-config/<hex>.json`), and one SSM parameter
//! (String) holds the pointer to the version in force. Switching versions is one parameter write
//! (atomic); an object is never rewritten, so a reader that fetched a name has exactly the bytes
//! that name promises, and checks it.
//!
//! # Layout
//! - [`location`]: [`ConfigLocation`], the parsed pointer value.
//! - [`read`]: [`ConfigStore`], the sender's read path over the lean SigV4 client
//!   ([`notice_awshttp`]) — the S3 and SSM SDK crates would add megabytes to a Lambda that must
//!   stay under 10 MB, and it needs two calls.
//! - `publish` (feature `publish`, the operator CLI only): write an object, move the pointer,
//!   through the AWS SDK.
//!
//! # What can go wrong, and why it is still safe
//! - The pointer names a missing object, or one the role may not read: the reader reports it and
//!   keeps the version it has; nothing half-loaded is used.
//! - The object's bytes are not the version its name says (a hand upload, a corrupted copy):
//!   [`StoreError::DigestMismatch`] — the reader never uses it.
//! - Two operators publish the same version at once: same name = same bytes; the second write is
//!   refused by S3 (`If-None-Match: *`) and `publish` confirms the stored bytes are the ones it
//!   meant.
//! - Two operators point at different versions at once: the last write wins, as with any single
//!   parameter; each sees the pointer it replaced.

pub mod location;
#[cfg(feature = "publish")]
pub mod publish;
pub mod read;

pub use location::{ConfigLocation, LocationError, PUBLISH_PREFIX};
#[cfg(feature = "publish")]
pub use publish::{point, publish};
pub use read::{ConfigStore, DEFAULT_TIMEOUT};

use sha2::{Digest, Sha256};

/// The largest configuration accepted: texts for every kind and locale fit in a fraction of it,
/// and a reader must not let a wrong pointer fill a small Lambda's memory.
pub const MAX_CONFIG_BYTES: usize = 2 * 1024 * 1024;

/// Why the pointer or the object could not be read or written. Every message is one line and
/// names the parameter or the object.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not a notice configuration location: {0}")]
    BadLocation(#[from] LocationError),
    #[error("SSM parameter {parameter} does not point at a notice configuration: {source}")]
    BadPointer { parameter: String, source: LocationError },
    #[error("SSM parameter {parameter} does not exist")]
    ParameterMissing { parameter: String },
    #[error("access to SSM parameter {parameter} was denied: {message}")]
    ParameterDenied { parameter: String, message: String },
    #[error("notice configuration {location} does not exist ({code})")]
    ObjectMissing { location: ConfigLocation, code: String },
    /// S3 also answers 403 for a missing object when the role may not list the bucket.
    #[error("access to notice configuration {location} was denied (or it is missing and the role may not list the bucket): {message}")]
    ObjectDenied { location: ConfigLocation, message: String },
    #[error("notice configuration {location} is not the version its name says: its bytes hash to {actual}")]
    DigestMismatch { location: ConfigLocation, actual: String },
    #[error("notice configuration {location} is larger than {limit} bytes")]
    TooLarge { location: ConfigLocation, limit: usize },
    #[error("{what} is unreachable: {reason}")]
    Unreachable { what: String, reason: String },
    #[error("{what} cannot be reached from here (configuration): {reason}")]
    NotConfigured { what: String, reason: String },
    #[error("{what}: unexpected answer (HTTP {status}, {code}): {message}")]
    Unexpected { what: String, status: u16, code: String, message: String },
}

/// The lowercase hex SHA-256 of `bytes`: what a location's file name must be.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `text` on one line with runs of whitespace collapsed: AWS messages may contain line breaks,
/// and every error here is one log line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
