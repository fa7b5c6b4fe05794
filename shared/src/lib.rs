//! notice-ledger core: send every renewal reminder exactly once and inside its legal window.
//!
//! The algorithm ([`deliver`]) is plain Rust over two ports, [`ledger::Ledger`] and
//! [`mailer::Mailer`]; AWS, SQLite and file adapters implement them. Nothing here knows about
//! Lambda.

#[cfg(feature = "aws-core")]
pub mod aws;
pub mod config;
pub mod deliver;
pub mod error;
pub mod events;
pub mod faults;
pub mod identity;
pub mod job;
pub mod ledger;
pub mod links;
pub mod mailer;
pub mod metrics;
pub mod park;
pub mod policy;
pub mod rate;
pub mod render;
pub mod retry;
#[cfg(feature = "scheduler")]
pub mod scheduler;

pub use deliver::{Delivery, Disposition, Mode, NoticeSender, Outcome, SendBudget};
pub use error::{ConfigError, InvalidJob, LedgerError};
pub use identity::{Identity, Kind, NoticeKey, NoticeSecret};
pub use job::Job;
pub use policy::{WindowDecision, WindowPolicy};
