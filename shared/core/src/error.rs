//! Error types shared by the core.

use std::fmt;

/// A job body that cannot be sent, with the field that is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid job: field `{field}` {reason}")]
pub struct InvalidJob {
    /// The JSON field at fault (`body` when the whole body is unreadable).
    pub field: &'static str,
    pub reason: String,
}

impl InvalidJob {
    pub fn new(field: &'static str, reason: impl Into<String>) -> Self {
        Self { field, reason: reason.into() }
    }
}

/// A ledger that could not be reached or answered something unexpected. Nothing about the claim
/// may be assumed from it: the caller must neither send nor ack.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("ledger unavailable: {0}")]
    Unavailable(String),
    /// A conditional write found the row in a state this caller did not expect (for example a
    /// commit whose claim token no longer matches).
    #[error("ledger condition failed: {0}")]
    Conflict(String),
    #[error("ledger row is malformed: {0}")]
    Corrupt(String),
}

impl LedgerError {
    pub fn unavailable(err: impl fmt::Display) -> Self {
        Self::Unavailable(err.to_string())
    }

    /// A worker's commit or release whose condition failed: the claim on `key` (its log prefix) is
    /// not this caller's any more — the row was decided, re-claimed under another token, or is
    /// gone. `found` is what the adapter saw instead when it read the row (a state, or `no row`);
    /// `None` when it did not read it. The one wording every ledger adapter uses.
    pub fn not_held(key: &str, found: Option<&str>) -> Self {
        match found {
            Some(found) => Self::Conflict(format!("{key} is not held by this claim (found: {found})")),
            None => Self::Conflict(format!("{key} is not held by this claim")),
        }
    }
}

/// Configuration the process cannot run with. Raised at start-up, never per message.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("missing required setting {0}")]
    Missing(&'static str),
    #[error("invalid setting {name}: {reason}")]
    Invalid { name: &'static str, reason: String },
    /// A dependency the start needs did not answer (the ledger, a configuration store): not a
    /// wrong setting, and retried by the next start.
    #[error("{what} unavailable at start-up: {reason}")]
    Unavailable { what: &'static str, reason: String },
}
