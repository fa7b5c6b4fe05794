//! Stripe, as the intake reads it: [`signature`] verifies a webhook's `Stripe-Signature` the way
//! Stripe's own libraries do, and [`events`] maps Stripe's event shapes (across the API versions
//! that moved fields) onto the core's billing facts ([`notice_ledger::intake::BillingMapping`]), and
//! [`api`] reads the customer records a price change's notice needs from Stripe's API
//! ([`notice_ledger::intake::CustomerSource`]) and the subscription's start an anniversary
//! reminder needs ([`notice_ledger::intake::SubscriptionSource`]).
//! Nothing Stripe-shaped crosses into the core; nothing here touches a ledger, a queue or AWS.

pub mod api;
pub mod events;
pub mod signature;

pub use api::{ApiKey, StripeApi};
pub use events::StripeMapping;
pub use signature::{sign, verify, SignatureError, SigningSecrets, DEFAULT_TOLERANCE_SECS};
