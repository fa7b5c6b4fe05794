//! A bucket store that could not be used ([`BucketError`], with the typed [`Fault`] its adapter
//! read). The core converts it where it crosses into its own error (`LedgerError`), kind for kind
//! and word for word; `NOTICE_RATE_LIMITS` that cannot be used is [`crate::limits::LimitsError`].

/// Why a store could not be used, as the adapter read it from its driver's or SDK's typed error
/// (an error code, an SQLSTATE, an I/O error kind), never from message text: callers decide the
/// next step and the exit code from it, and only fall back to the text where it is `Other`.
/// (The core re-exports it as `notice_ledger::Fault`: the ledger's faults and the buckets' are one.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// No connection: refused, reset, no route, timed out connecting — the reason in a few words.
    Unreachable(&'static str),
    /// Connected, but no complete answer within the bound.
    TimedOut,
    /// The service refused for rate (throttling, provisioned throughput exceeded).
    Throttled,
    /// Another writer holds the store (SQLite: the file is locked); a later attempt may pass.
    Busy,
    NoCredentials,
    ExpiredCredentials,
    /// Credentials the service does not know (bad key id or signature).
    BadCredentials,
    /// The caller may not do this (an IAM denial, a refused database login); with the action
    /// (`dynamodb:BatchGetItem`) when the adapter knows it.
    Denied {
        action: Option<String>,
    },
    /// Anything else; the detail says what.
    Other,
}

impl Fault {
    /// The fault an I/O error of `kind` means while connecting, when it is one of the usual
    /// ones (the reasons an operator acts on differently); `None` otherwise.
    pub fn unreachable(kind: std::io::ErrorKind) -> Option<Self> {
        use std::io::ErrorKind;
        let why = match kind {
            ErrorKind::ConnectionRefused => "connection refused",
            ErrorKind::ConnectionReset => "connection reset",
            ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable => "no route to host",
            ErrorKind::TimedOut => "timed out connecting",
            _ => return None,
        };
        Some(Self::Unreachable(why))
    }

    /// [`Fault::unreachable`] of the first I/O error among `err` and its sources: where drivers
    /// and HTTP clients keep the operating system's answer to a connection attempt.
    pub fn unreachable_in(err: &(dyn std::error::Error + 'static)) -> Option<Self> {
        let mut source = Some(err);
        while let Some(cause) = source {
            if let Some(io) = cause.downcast_ref::<std::io::Error>() {
                return Self::unreachable(io.kind());
            }
            source = cause.source();
        }
        None
    }
}

/// A bucket store ([`crate::BucketStore`]) that could not be used or answered something
/// unexpected: no token may be assumed from it. The buckets live in the ledger's store, so the
/// kinds — and the words — are the ledger's; the core converts each into the same `LedgerError`
/// variant and back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BucketError {
    /// The store could not be used: `service` is the store (`DynamoDB`, `PostgreSQL`, `SQLite`),
    /// `fault` is why, as the adapter's typed error said; `detail` is the message for people.
    #[error("ledger unavailable: {detail}")]
    Unavailable { service: &'static str, fault: Fault, detail: String },
    /// A conditional write the store answered in a way no bucket write expects.
    #[error("ledger condition failed: {0}")]
    Conflict(String),
    /// A stored bucket the store cannot read (no numeric TAT).
    #[error("ledger row is malformed: {0}")]
    Corrupt(String),
}

impl BucketError {
    /// Why the store was unavailable; `None` for a conflict or a corrupt bucket.
    pub fn fault(&self) -> Option<&Fault> {
        match self {
            Self::Unavailable { fault, .. } => Some(fault),
            Self::Conflict(_) | Self::Corrupt(_) => None,
        }
    }

    /// The store that was unavailable; `None` for a conflict or a corrupt bucket.
    pub fn service(&self) -> Option<&'static str> {
        match self {
            Self::Unavailable { service, .. } => Some(service),
            Self::Conflict(_) | Self::Corrupt(_) => None,
        }
    }
}
