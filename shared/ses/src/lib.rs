//! The SES v2 adapters: the mailer ([`mailer`]: one attempt per claim, correlation by the
//! `notice_key` tag) and SES event parsing for the reconciler ([`events`]).

pub mod events;
#[cfg(feature = "mailer")]
pub mod mailer;

#[cfg(feature = "mailer")]
pub use mailer::SesMailer;
