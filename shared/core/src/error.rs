//! Error types shared by the core.

use std::fmt;

use notice_rate::{BucketError, LimitsError, RATE_LIMITS_VAR};

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

/// Why a ledger (or its rate buckets) could not be used, as the adapter read it from its driver's
/// or SDK's typed error: one enum for both, kept with the buckets in `notice_rate` (which imports
/// nothing of the protocol) and named here at its old path.
pub use notice_rate::Fault;

/// The service an untyped ledger failure is put down to: the ledger, whichever store it is.
pub const UNNAMED_LEDGER: &str = "ledger";

/// A ledger that could not be reached or answered something unexpected. Nothing about the claim
/// may be assumed from it: the caller must neither send nor ack.
#[derive(Clone, Debug, thiserror::Error)]
pub enum LedgerError {
    /// The ledger could not be used: `service` is the store (`DynamoDB`, `PostgreSQL`, `SQLite`),
    /// `fault` is why, as the adapter's typed error said; `detail` is the message for people.
    #[error("ledger unavailable: {detail}")]
    Unavailable { service: &'static str, fault: Fault, detail: String },
    /// A conditional write found the row in a state this caller did not expect (for example a
    /// commit whose claim token no longer matches).
    #[error("ledger condition failed: {0}")]
    Conflict(String),
    #[error("ledger row is malformed: {0}")]
    Corrupt(String),
}

impl LedgerError {
    /// An unavailable ledger whose cause is not typed ([`Fault::Other`]) in a store it does not
    /// name ([`UNNAMED_LEDGER`]).
    pub fn unavailable(err: impl fmt::Display) -> Self {
        Self::Unavailable { service: UNNAMED_LEDGER, fault: Fault::Other, detail: err.to_string() }
    }

    /// An unavailable ledger in `service` for the typed reason `fault`.
    pub fn faulted(service: &'static str, fault: Fault, err: impl fmt::Display) -> Self {
        Self::Unavailable { service, fault, detail: err.to_string() }
    }

    /// Why the ledger was unavailable; `None` for a conflict or a corrupt row.
    pub fn fault(&self) -> Option<&Fault> {
        match self {
            Self::Unavailable { fault, .. } => Some(fault),
            Self::Conflict(_) | Self::Corrupt(_) => None,
        }
    }

    /// The store that was unavailable; `None` for a conflict or a corrupt row.
    pub fn service(&self) -> Option<&'static str> {
        match self {
            Self::Unavailable { service, .. } => Some(service),
            Self::Conflict(_) | Self::Corrupt(_) => None,
        }
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

/// A bucket store's error is the ledger's, kind for kind and word for word: a gate's caller sees
/// the `LedgerError` it always saw.
impl From<BucketError> for LedgerError {
    fn from(e: BucketError) -> Self {
        match e {
            BucketError::Unavailable { service, fault, detail } => {
                Self::Unavailable { service, fault, detail }
            }
            BucketError::Conflict(detail) => Self::Conflict(detail),
            BucketError::Corrupt(detail) => Self::Corrupt(detail),
        }
    }
}

/// A ledger adapter's error where it answers for the buckets kept in its store (their one
/// classification of the driver's typed error).
impl From<LedgerError> for BucketError {
    fn from(e: LedgerError) -> Self {
        match e {
            LedgerError::Unavailable { service, fault, detail } => {
                Self::Unavailable { service, fault, detail }
            }
            LedgerError::Conflict(detail) => Self::Conflict(detail),
            LedgerError::Corrupt(detail) => Self::Corrupt(detail),
        }
    }
}

/// A dependency other than the ledger that could not be used (a secret store): which service,
/// why — the kind its adapter read from the typed error — and the message for people.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct DependencyError {
    /// The service, as an operator knows it (`Secrets Manager`).
    pub service: &'static str,
    pub fault: Fault,
    pub detail: String,
}

impl DependencyError {
    pub fn new(service: &'static str, fault: Fault, detail: impl Into<String>) -> Self {
        Self { service, fault, detail: detail.into() }
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
    /// The ledger a setting names could not be opened: worded as that setting's error, with the
    /// ledger's error kept whole so a caller can tell an unreachable store by its kind.
    #[error("invalid setting {name}: {error}")]
    Ledger { name: &'static str, error: LedgerError },
    /// The secret store a setting names could not be read or written, its error kept whole.
    #[error("invalid setting {name}: {error}")]
    Dependency { name: &'static str, error: DependencyError },
}

/// `NOTICE_RATE_LIMITS` that cannot be used is the setting's error, as it always was.
impl From<LimitsError> for ConfigError {
    fn from(e: LimitsError) -> Self {
        Self::Invalid { name: RATE_LIMITS_VAR, reason: e.reason }
    }
}

impl ConfigError {
    /// The service that failed and why, when a typed dependency error is inside.
    pub fn dependency(&self) -> Option<(&'static str, &Fault)> {
        match self {
            Self::Ledger { error, .. } => error.service().zip(error.fault()),
            Self::Dependency { error, .. } => Some((error.service, &error.fault)),
            Self::Missing(_) | Self::Invalid { .. } | Self::Unavailable { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_error_is_the_ledger_error_it_always_was_kind_and_words() {
        let fault = Fault::Denied { action: Some("dynamodb:UpdateItem".into()) };
        let bucket =
            BucketError::Unavailable { service: "DynamoDB", fault: fault.clone(), detail: "no".into() };
        let words = bucket.to_string();
        let ledger = LedgerError::from(bucket.clone());
        assert_eq!(
            (ledger.to_string(), ledger.service(), ledger.fault()),
            (words, Some("DynamoDB"), Some(&fault))
        );
        assert_eq!(BucketError::from(ledger), bucket, "and back");
        for bucket in [BucketError::Conflict("c".into()), BucketError::Corrupt("no tat_us".into())] {
            let ledger = LedgerError::from(bucket.clone());
            assert_eq!((ledger.to_string(), ledger.fault()), (bucket.to_string(), None));
            assert_eq!(BucketError::from(ledger), bucket);
        }
    }

    #[test]
    fn bad_rate_limits_are_the_setting_s_invalid_value() {
        let limits = LimitsError { reason: "rollup: true is not a rollup".into() };
        let words = limits.to_string();
        let config = ConfigError::from(limits);
        assert!(
            matches!(&config, ConfigError::Invalid { name: "NOTICE_RATE_LIMITS", reason } if reason == "rollup: true is not a rollup")
        );
        assert_eq!(config.to_string(), words);
    }
}
