//! The wiring layer: the only crate that reads `NOTICE_*` settings and builds AWS clients, and
//! the one place an entry point's ledger is chosen from `NOTICE_LEDGER_URL` ([`ledger_url`]).
//! Entry points (`functions/*`, `cli/`) sit on top; the adapters and the core sit below. The notice
//! configuration and the sender's assembly ([`notices`], [`assemble`], the sender's settings) come
//! with the `texts` feature: only what renders or admits links `notice_texts`.

#[cfg(feature = "texts")]
pub mod assemble;
pub mod aws;
pub mod config;
pub mod exit;
#[cfg(feature = "dynamodb")]
pub mod ledger_url;
pub mod logs;
#[cfg(feature = "texts")]
pub mod notices;
pub mod secret;
#[cfg(feature = "dynamodb")]
pub mod settings;
