//! notice-ledger's test doubles: the ports of the core (`notice_ledger`) played in memory, or with
//! a fault at a chosen step. Only tests, benchmarks and `notice-proof` (the model check, the
//! simulation, the capacity model) link this crate; no Lambda and not `noticectl` does.
//!
//! # Layout
//!
//! - [`memory`]: [`MemoryLedger`], the in-memory ledger — the same conditions as the durable
//!   adapters, decided by the core's one rule table (`notice_ledger::ledger::rules`), so a test or a
//!   simulation against it runs the real protocol in microseconds.
//! - [`faults`]: a ledger and a mailer that fail, hang or slow down at a chosen step
//!   ([`faults::FaultyLedger`], [`faults::FaultyMailer`]), and a mailer that records what it was
//!   given ([`faults::RecordingMailer`]).
//! - [`outcomes`]: outcome publishers that record every call or fail on a script
//!   ([`outcomes::RecordingPublisher`], [`outcomes::FaultyPublisher`]).
//!
//! It also switches on `notice_rate`'s `testing` feature: the in-process rate buckets
//! (`notice_ledger::rate::BucketGate::in_memory`, `MemoryBuckets`) come with this crate.

pub mod faults;
pub mod memory;
pub mod outcomes;

pub use memory::MemoryLedger;
