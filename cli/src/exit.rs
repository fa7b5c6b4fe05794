//! The exit-code contract of `noticectl` ([`Exit`], shared with `notice-proof` in
//! `notice_setup::exit`; the table is docs/operations.md, *Exit codes*), and the error that ends a
//! command as a safety stop.

pub(crate) use notice_setup::exit::Exit;

/// An error that is a safety stop ([`Exit::SafetyStop`]), not a failure: the command refused to
/// change anything. `main` prints it as it is and exits 3.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SafetyStop(pub(crate) String);

/// An error that means "nothing found" ([`Exit::Attention`]): a key prefix that names no row, a
/// claim that is not open. The table's row 1, whichever form of the key was given — a full key
/// without a row and a prefix that matches none must not exit differently.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct NotFound(pub(crate) String);
