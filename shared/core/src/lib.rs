//! notice-ledger core: send every renewal reminder exactly once and inside its legal window.
//!
//! The algorithm ([`deliver`]) is plain Rust over small ports — [`ledger::Ledger`],
//! [`mailer::Mailer`], [`park::Parker`], [`rate::RateGate`]; adapters in sibling crates implement
//! them. Nothing here knows about Lambda, AWS, SQL or the environment.
//!
//! # Layout
//!
//! ```text
//! cli/, functions/*           entry points: thin, pick adapters through notice_setup
//! shared/setup                reads NOTICE_*, one ledger-URL grammar, builds AWS clients
//! shared/{dynamodb,postgres,sqlite,ses,scheduler}   one crate per adapter
//! shared/core (this crate)    domain + ports + local adapters
//! shared/texts                the notice texts: the notice configuration, rendering, locales (minijinja,
//!                             ICU4X); implements this crate's `render::Texts` and `locale::Cldr`
//! shared/rate                 notice_rate: limits, GCRA, the gate, providers; imports nothing of this crate
//! shared/testkit              notice_testkit: the memory ledger, fault-injecting and outcome doubles,
//!                             over this crate's public ports (tests, benches/ and proof/ only)
//! ```
//!
//! In this crate: [`identity`] (notice keys), [`job`] (validated input), [`admission`] (the one
//! admission every entry point judges a message by: schema, policy, window, render), [`intake`] (billing
//! webhooks → jobs and withdraws, with the revision rule), [`jurisdiction`] (ISO 3166 codes), [`policy`] (send
//! windows), [`locale`] (the customer's language, zone and money as a job carries them, and the
//! [`locale::Cldr`] port that checks them), [`render`] (the [`render::Texts`] port: what the
//! admission and the sender need from the notice texts, which the texts crate implements) +
//! [`links`] (the message), [`deliver`] (claim → send → commit, with its
//! crash windows), [`queue`] (the one outcome → queue action table: hide, back off, park, delete), [`metrics`], [`error`], [`text`] (numbers for people); ports
//! with their local adapters: [`ledger`], [`mailer`] (+ `mailer::outbox`),
//! [`park`], [`rate`] (`notice_rate` re-exported), [`outcomes`] (each notice's outcome as an event for
//! the business). The test doubles of these ports (the memory ledger, fault-injecting ledger and
//! mailer, outcome publishers) are `notice_testkit`'s, built on this crate's public API only.

pub mod address;
pub mod admission;
pub mod clock;
pub mod deliver;
pub mod error;
pub mod identity;
pub mod intake;
pub mod job;
pub mod jurisdiction;
pub mod keycheck;
pub mod keyring;
pub mod ledger;
pub mod links;
pub mod locale;
pub mod mailer;
pub mod metrics;
pub mod outcomes;
pub mod park;
pub mod policy;
pub mod queue;
pub mod rate;
pub mod render;
pub mod text;
pub mod worker;

pub use admission::{Admitted, Judgement, Notices, Refused};
pub use deliver::{
    Dedupe, DeliverContext, Delivery, Input, Mode, NoticeSender, Outcome, Prefetched, SendBudget,
};
pub use error::{ConfigError, DependencyError, Fault, InvalidJob, LedgerError, UNNAMED_LEDGER};
pub use identity::{Identity, Kind, NoticeKey, NoticeSecret};
pub use job::Job;
pub use policy::{WindowDecision, WindowPolicy};
pub use queue::{QueueAction, QueuePolicy, Receive};
