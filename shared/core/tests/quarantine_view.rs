//! The quarantine view when the sender's queue redelivers: claims are made off it, and whoever
//! learns that one may stay open puts it on before its message is acked. Told over the memory
//! ledger, whose view lists only what was put on it (as DynamoDB's sparse index does), with
//! fault-injecting adapters for the writes that fail.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use notice_ledger::ledger::{QuarantineView, RowReader, RowState};
use notice_ledger::links::ManageLinks;
use notice_ledger::{DeliverContext, Job, NoticeSecret, NoticeSender, Outcome, SendBudget, WindowPolicy};
use notice_testkit::faults::{FaultyLedger, FaultyMailer, LedgerFault, MailFault, RecordingMailer};
use notice_testkit::MemoryLedger;
use notice_texts::Renderer;

const JOB: &str = r#"{"subscription_id":"sub_8812","period_start":"2026-10-01","kind":"renewal_notice_t72",
  "email":"ada@example.com","charge_at":"2026-10-04T09:00:00Z","template_data":{"plan_name":"Coffee Box"}}"#;

fn now() -> DateTime<Utc> {
    "2026-10-02T00:00:00Z".parse().unwrap()
}

struct World {
    ledger: Arc<FaultyLedger<MemoryLedger>>,
    mailer: Arc<FaultyMailer<RecordingMailer>>,
    sender: NoticeSender,
}

impl World {
    fn new(script: Vec<MailFault>, redelivered: bool) -> Self {
        let ledger = Arc::new(FaultyLedger::new(MemoryLedger::new(), None));
        let mailer = Arc::new(FaultyMailer::new(RecordingMailer::default(), script));
        let sender = NoticeSender::new(
            ledger.clone(),
            mailer.clone(),
            Arc::new(Renderer::builtin(ManageLinks::new(
                "https://billing.example.com/manage",
                NoticeSecret::new("links").unwrap(),
            ))),
            WindowPolicy::default(),
            NoticeSecret::new("test-secret").unwrap(),
        )
        .with_budget(SendBudget {
            send_timeout: Duration::from_millis(500),
            min_time_left: Duration::from_secs(2),
            ..SendBudget::default()
        });
        let sender = if redelivered { sender.redelivered_by_queue() } else { sender };
        Self { ledger, mailer, sender }
    }

    async fn deliver_at(&self, at: DateTime<Utc>) -> Outcome {
        self.sender.deliver(JOB, DeliverContext::at(at)).await.outcome
    }

    async fn row(&self) -> notice_ledger::ledger::LedgerRow {
        let key = self.sender.key(&Job::parse(JOB, &notice_texts::Icu).unwrap());
        self.ledger.inner().get(&key).await.unwrap().unwrap()
    }

    async fn listed(&self) -> usize {
        self.ledger.inner().open_claims(now() + chrono::Duration::days(30), 10).await.unwrap().len()
    }

    /// Runs a delivery that never finishes (the worker dies in it) and drops it.
    async fn crash(&self) {
        let run = self.sender.deliver(JOB, DeliverContext::at(now()));
        assert!(tokio::time::timeout(Duration::from_millis(300), run).await.is_err(), "expected a hang");
    }
}

#[tokio::test]
async fn a_notice_sent_and_committed_never_touches_the_view() {
    let w = World::new(vec![], true);
    assert!(matches!(w.deliver_at(now()).await, Outcome::Sent { .. }));
    let row = w.row().await;
    assert_eq!(row.state, RowState::Sent);
    assert!(!row.on_quarantine_view);
}

#[tokio::test]
async fn a_dead_workers_claim_is_put_on_the_view_by_the_next_delivery_before_any_ack() {
    let w = World::new(vec![MailFault::HangBeforeSend], true);
    w.crash().await;
    let row = w.row().await;
    assert_eq!(row.state, RowState::Claimed);
    assert!(!row.on_quarantine_view, "claimed off the view");
    assert_eq!(w.listed().await, 0);
    // The message comes back while the claim may still be in flight: listed, and handed back.
    assert!(matches!(w.deliver_at(now()).await, Outcome::InFlight { withdraw: false, .. }));
    assert!(w.row().await.on_quarantine_view);
    assert_eq!(w.listed().await, 1, "on the reporter's view before the claim is stale");
    // Stale later: acked as suppressed, still listed, nothing sent.
    let later = w.deliver_at(now() + chrono::Duration::minutes(10)).await;
    assert_eq!(later, Outcome::Suppressed { state: RowState::Claimed });
    assert_eq!(w.listed().await, 1);
    assert_eq!(w.mailer.inner().sent().len(), 0);
}

#[tokio::test]
async fn an_unknown_send_lists_its_own_claim_before_it_is_acked() {
    let w = World::new(vec![MailFault::SendThenUnknown], true);
    assert!(matches!(w.deliver_at(now()).await, Outcome::Quarantined { .. }));
    let row = w.row().await;
    assert_eq!((row.state, row.on_quarantine_view), (RowState::Claimed, true));
    assert_eq!(w.listed().await, 1);
}

#[tokio::test]
async fn a_failed_view_write_is_retried_never_acked_and_the_redelivery_lists_the_claim() {
    let w = World::new(vec![], true);
    // The commit after an accepted send fails, and so does the view write: not acked.
    w.ledger.set_fault(Some(LedgerFault::CommitFails));
    let first = w.deliver_at(now()).await;
    assert!(matches!(first, Outcome::LedgerUnavailable(_)), "{first:?}");
    assert_eq!(w.mailer.inner().sent().len(), 1);
    assert!(!w.row().await.on_quarantine_view);
    // The ledger is back; the message returns and finds the claim held: listed, nothing re-sent.
    w.ledger.set_fault(None);
    assert!(matches!(w.deliver_at(now()).await, Outcome::InFlight { .. }));
    assert!(w.row().await.on_quarantine_view);
    assert_eq!(w.mailer.inner().sent().len(), 1);
}

#[tokio::test]
async fn a_held_claim_whose_view_write_fails_is_handed_back_not_acked() {
    let w = World::new(vec![MailFault::HangBeforeSend], true);
    w.crash().await;
    w.ledger.set_fault(Some(LedgerFault::CommitFails));
    let stale = w.deliver_at(now() + chrono::Duration::minutes(10)).await;
    assert!(
        matches!(stale, Outcome::LedgerUnavailable(_)),
        "never suppressed over an unlisted claim: {stale:?}"
    );
    assert_eq!(w.listed().await, 0);
}

#[tokio::test]
async fn a_host_without_redelivery_claims_on_the_view() {
    let w = World::new(vec![MailFault::HangBeforeSend], false);
    w.crash().await;
    let row = w.row().await;
    assert_eq!((row.state, row.on_quarantine_view), (RowState::Claimed, true));
    assert_eq!(w.listed().await, 1, "nothing would come back to list it");
}
