//! notice-ledger's notice texts: what a customer reads, in their language.
//!
//! The core (`notice_ledger`) decides whether and when a notice goes out; this crate says what it
//! says. It implements the core's two ports for the texts — [`render::Texts`] (the admission's
//! strict render, the sender's message, the version recorded as evidence) and [`locale::Cldr`]
//! (a job's locale and amount, checked against CLDR) — and only what renders links it, so the
//! reconciler and the reporter link no template engine and no ICU4X data.
//!
//! # Layout
//!
//! ```text
//! notices/        the notice configuration: bundle (files → one content-addressed version),
//!                 manifest, config (compiled templates, the policy, which texts answer a kind
//!                 and locale), problem (a mistake named with its file and line)
//! config_check    the whole check of a configuration, templates rendered with sample jobs
//! render          Renderer: a job → subject, text, HTML (minijinja, strict); the core's `Texts`
//! locale          Icu (the core's `Cldr`), dates and money as the customer reads them (ICU4X)
//! ```
//!
//! Entry points hand the core a [`Renderer`] (as `Arc<dyn Texts>`) and parse jobs with [`Icu`].

pub mod config_check;
pub mod locale;
pub mod notices;
pub mod render;

pub use locale::Icu;
pub use notices::{Bundle, NoticeConfig, Problem};
pub use render::Renderer;
