//! A staging stack's safety net: every notice goes to one address (e.g. SES's mailbox simulator)
//! instead of its customer, whatever the jobs say — so a test stack fed with real-looking jobs, or
//! a copy of production's, can never mail a real customer. The ledger, the key, the window and the
//! tags are those of the real notice; only the recipient changes. Refused at start-up unless the
//! deployment says it is not production (`shared/setup`).

use async_trait::async_trait;

use super::{Mailer, OutgoingMail, SendResult};

/// Sends through `inner`, every message to `to`.
pub struct RedirectMailer<M> {
    inner: M,
    to: String,
}

impl<M: Mailer> RedirectMailer<M> {
    pub fn new(inner: M, to: impl Into<String>) -> Self {
        Self { inner, to: to.into() }
    }
}

#[async_trait]
impl<M: Mailer> Mailer for RedirectMailer<M> {
    async fn send(&self, mail: &OutgoingMail) -> SendResult {
        let redirected = OutgoingMail { to: self.to.clone(), ..mail.clone() };
        self.inner.send(&redirected).await
    }
}
