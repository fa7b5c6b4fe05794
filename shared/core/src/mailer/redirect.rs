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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::RecordingMailer;
    use crate::identity::{Identity, NoticeSecret};
    use std::sync::Arc;

    #[tokio::test]
    async fn every_message_goes_to_the_one_address_and_keeps_its_key() {
        let recorded = Arc::new(RecordingMailer::default());
        let mailer = RedirectMailer::new(Arc::clone(&recorded), "success@simulator.amazonses.com");
        let identity = Identity::new("sub_1", "2026-10-01", "renewal_notice_t72", 0).unwrap();
        let key = identity.derive_key(&NoticeSecret::new("k").unwrap());
        let mail = OutgoingMail {
            key: key.clone(),
            kind: "renewal_notice_t72".into(),
            to: "customer@example.com".into(),
            subject: "s".into(),
            text: "t".into(),
            html: "h".into(),
            language: "en".into(),
        };
        assert!(matches!(mailer.send(&mail).await, SendResult::Accepted { .. }));
        let sent = recorded.sent();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].to, "success@simulator.amazonses.com");
        assert_eq!((sent[0].key.clone(), sent[0].subject.as_str()), (key, "s"));
    }
}
