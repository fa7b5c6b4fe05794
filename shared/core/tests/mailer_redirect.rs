//! A staging stack's redirect: every message to the one address, its key and content kept.

use notice_ledger::identity::{Identity, NoticeSecret};
use notice_ledger::mailer::redirect::RedirectMailer;
use notice_ledger::mailer::{Mailer, OutgoingMail, SendResult};
use notice_testkit::faults::RecordingMailer;
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
