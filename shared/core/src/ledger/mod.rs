//! The ledger port: a durable record of which notice keys are claimed, sent or decided.
//!
//! Every write is conditional. A claim is the only door to a send, and it is only opened for a key
//! with no row or a row an operator (or the provider's refusal) explicitly released. Commit and
//! release are conditional on the claim token, so a slow worker whose claim was released and
//! re-minted by someone else cannot overwrite the new owner.
//!
//! A file per concern, every name reachable from here (`notice_ledger::ledger::…`):
//! `row` (the row, its states, the claim and withdraw requests), `ports` (the traits an adapter
//! implements), [`rules`] (which write a row permits), `evidence` (what provider events do to a
//! row), `detail` (the audit text a row stores). The in-memory adapter for tests, simulations and
//! benchmarks is `notice_testkit::MemoryLedger`, which decides every write by [`rules::permits`].

mod detail;
mod evidence;
mod ports;
mod row;
pub mod rules;

pub use detail::{bounded_text, release_detail, resolve_detail, withdraw_detail, MAX_REASON_CHARS};
pub use evidence::{
    apply_in_order, apply_to_current, apply_to_row, learned_row, positions_by_key, Applied, EvidenceEffect,
    ProviderEvidence, EVENT_CLOCK_SKEW_SECS, MAX_DUPLICATE_IDS, MAX_MESSAGE_ID_LEN,
};
pub use ports::{
    in_batch_order, prefix_end, ClaimLedger, EvidenceLedger, Ledger, OperatorLedger, QuarantineView, RowPage,
    RowReader,
};
pub use row::{
    Claim, ClaimOutcome, ClaimRequest, ClaimToken, DeliveryStatus, LedgerRow, Origin, RenderedNotice,
    RowState, WithdrawRequest,
};

/// Lets tests keep a handle on an adapter they also hand to the sender.
mod shared;
