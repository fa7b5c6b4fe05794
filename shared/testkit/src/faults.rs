//! Fault-injecting adapters: wrap a real ledger or mailer and fail, hang or slow down at a chosen
//! step. "Hang" stands for a crash: the test drops the pending future, so nothing after that step
//! ever runs — exactly what a dead worker leaves behind.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use notice_ledger::error::LedgerError;
use notice_ledger::identity::NoticeKey;
use notice_ledger::ledger::{
    Applied, Claim, ClaimLedger, ClaimOutcome, ClaimRequest, EvidenceLedger, Ledger, LedgerRow,
    OperatorLedger, ProviderEvidence, QuarantineView, RowPage, RowReader, WithdrawRequest,
};
use notice_ledger::mailer::{Mailer, NotAccepted, OutgoingMail, SendResult};

/// What the faulty mailer does on one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MailFault {
    /// Pass through to the inner mailer.
    Pass,
    /// Answer "not accepted" without sending.
    NotAccepted(NotAccepted),
    /// Answer "rejected" without sending.
    Rejected,
    /// Send through the inner mailer, then answer "unknown" (the 5xx-after-accept case).
    SendThenUnknown,
    /// Answer "unknown" without sending (the 5xx-before-accept case).
    Unknown,
    /// Wait, then pass through.
    Slow(Duration),
    /// Never return, without sending: the worker dies before the send.
    HangBeforeSend,
    /// Send, then never return: the worker dies after the send, before the commit.
    HangAfterSend,
}

/// A mailer that plays a script of faults, one per call, then passes through.
pub struct FaultyMailer<M> {
    inner: M,
    script: Mutex<VecDeque<MailFault>>,
    attempts: AtomicUsize,
}

impl<M: Mailer> FaultyMailer<M> {
    pub fn new(inner: M, script: impl IntoIterator<Item = MailFault>) -> Self {
        Self { inner, script: Mutex::new(script.into_iter().collect()), attempts: AtomicUsize::new(0) }
    }

    /// Calls made to this mailer, faulty or not.
    pub fn attempts(&self) -> usize {
        self.attempts.load(Ordering::SeqCst)
    }

    pub fn inner(&self) -> &M {
        &self.inner
    }

    fn next(&self) -> MailFault {
        self.script.lock().unwrap_or_else(|p| p.into_inner()).pop_front().unwrap_or(MailFault::Pass)
    }
}

#[async_trait]
impl<M: Mailer> Mailer for FaultyMailer<M> {
    async fn send(&self, mail: &OutgoingMail) -> SendResult {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        match self.next() {
            MailFault::Pass => self.inner.send(mail).await,
            MailFault::NotAccepted(class) => SendResult::NotAccepted { class, reason: "injected".into() },
            MailFault::Rejected => SendResult::Rejected { reason: "injected rejection".into() },
            MailFault::Unknown => SendResult::Unknown { reason: "injected 500".into() },
            MailFault::SendThenUnknown => {
                let _ = self.inner.send(mail).await;
                SendResult::Unknown { reason: "injected 500 after accept".into() }
            }
            MailFault::Slow(d) => {
                tokio::time::sleep(d).await;
                self.inner.send(mail).await
            }
            MailFault::HangBeforeSend => std::future::pending().await,
            MailFault::HangAfterSend => {
                let _ = self.inner.send(mail).await;
                std::future::pending().await
            }
        }
    }
}

/// Which ledger step misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LedgerFault {
    /// Every call fails: the ledger is unreachable.
    Down,
    /// The claim write fails before reaching the ledger.
    ClaimFails,
    /// The claim is written but its answer is lost; the caller sees an error.
    ClaimAnswerLost,
    /// Commit and release fail (the claim stays).
    CommitFails,
    /// The claim commits, then the caller never hears back: the worker dies right after claiming.
    HangAfterClaim,
    /// A release is written but its answer is lost; the caller sees an error.
    ReleaseAnswerLost,
}

/// A ledger that injects one kind of fault (switchable at run time) and counts calls.
pub struct FaultyLedger<L> {
    inner: L,
    fault: Mutex<Option<LedgerFault>>,
    calls: AtomicUsize,
    writes: AtomicUsize,
}

impl<L: Ledger> FaultyLedger<L> {
    pub fn new(inner: L, fault: Option<LedgerFault>) -> Self {
        Self { inner, fault: Mutex::new(fault), calls: AtomicUsize::new(0), writes: AtomicUsize::new(0) }
    }

    pub fn set_fault(&self, fault: Option<LedgerFault>) {
        *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = fault;
    }

    /// Every call made (reads and writes).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Write calls made (claim, commit, release, missed).
    pub fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    pub fn inner(&self) -> &L {
        &self.inner
    }

    fn fault(&self) -> Option<LedgerFault> {
        *self.fault.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn enter(&self, write: bool) -> Result<(), LedgerError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if write {
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
        if self.fault() == Some(LedgerFault::Down) {
            return Err(LedgerError::unavailable("injected: ledger unreachable"));
        }
        Ok(())
    }

    fn commit_gate(&self) -> Result<(), LedgerError> {
        self.enter(true)?;
        if self.fault() == Some(LedgerFault::CommitFails) {
            return Err(LedgerError::unavailable("injected: commit failed"));
        }
        Ok(())
    }
}

#[async_trait]
impl<L: Ledger> RowReader for FaultyLedger<L> {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        self.enter(false)?;
        self.inner.get(key).await
    }

    /// One call, like the adapters' batch reads.
    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        self.enter(false)?;
        self.inner.get_many(keys).await
    }
}

#[async_trait]
impl<L: Ledger> QuarantineView for FaultyLedger<L> {
    async fn count_open_claims(
        &self,
        claimed_before: DateTime<Utc>,
    ) -> Result<(usize, Option<DateTime<Utc>>), LedgerError> {
        self.enter(false)?;
        self.inner.count_open_claims(claimed_before).await
    }
    async fn open_claims(
        &self,
        claimed_before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<LedgerRow>, LedgerError> {
        self.enter(false)?;
        self.inner.open_claims(claimed_before, limit).await
    }
}

#[async_trait]
impl<L: Ledger> ClaimLedger for FaultyLedger<L> {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        self.enter(true)?;
        match self.fault() {
            Some(LedgerFault::ClaimFails) => Err(LedgerError::unavailable("injected: claim write failed")),
            Some(LedgerFault::ClaimAnswerLost) => {
                self.inner.claim(req).await?;
                Err(LedgerError::unavailable("injected: claim answer lost"))
            }
            Some(LedgerFault::HangAfterClaim) => {
                self.inner.claim(req).await?;
                std::future::pending().await
            }
            _ => self.inner.claim(req).await,
        }
    }
    async fn commit_sent(
        &self,
        claim: &Claim,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.commit_gate()?;
        self.inner.commit_sent(claim, message_id, at).await
    }
    async fn commit_rejected(
        &self,
        claim: &Claim,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.commit_gate()?;
        self.inner.commit_rejected(claim, reason, at).await
    }
    async fn release(&self, claim: &Claim, reason: &str, at: DateTime<Utc>) -> Result<(), LedgerError> {
        self.commit_gate()?;
        self.inner.release(claim, reason, at).await?;
        if self.fault() == Some(LedgerFault::ReleaseAnswerLost) {
            return Err(LedgerError::unavailable("injected: release answer lost"));
        }
        Ok(())
    }
    async fn put_on_quarantine_view(&self, claim: &Claim) -> Result<(), LedgerError> {
        self.commit_gate()?;
        self.inner.put_on_quarantine_view(claim).await
    }
    async fn record_missed(
        &self,
        req: &ClaimRequest,
        reason: &str,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        self.enter(true)?;
        self.inner.record_missed(req, reason).await
    }
    async fn withdraw(&self, req: &WithdrawRequest) -> Result<Option<LedgerRow>, LedgerError> {
        self.enter(true)?;
        self.inner.withdraw(req).await
    }
}

#[async_trait]
impl<L: Ledger> EvidenceLedger for FaultyLedger<L> {
    async fn apply_evidence(&self, evidence: &ProviderEvidence) -> Result<Applied, LedgerError> {
        self.enter(true)?;
        self.inner.apply_evidence(evidence).await
    }

    /// One call, like the adapters' batch evidence (a `Down` ledger fails every item).
    async fn apply_evidence_batch(&self, evidence: &[ProviderEvidence]) -> Vec<Result<Applied, LedgerError>> {
        match self.enter(true) {
            Ok(()) => self.inner.apply_evidence_batch(evidence).await,
            Err(e) => evidence.iter().map(|_| Err(e.clone())).collect(),
        }
    }
}

#[async_trait]
impl<L: Ledger> OperatorLedger for FaultyLedger<L> {
    async fn operator_release(
        &self,
        key: &NoticeKey,
        who: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.enter(true)?;
        self.inner.operator_release(key, who, reason, at).await
    }
    async fn operator_resolve_sent(
        &self,
        key: &NoticeKey,
        message_id: &str,
        who: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.enter(true)?;
        self.inner.operator_resolve_sent(key, message_id, who, at).await
    }
    async fn backfill(&self, row: &LedgerRow) -> Result<bool, LedgerError> {
        self.enter(true)?;
        self.inner.backfill(row).await
    }

    async fn keys_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<NoticeKey>, LedgerError> {
        self.enter(false)?;
        self.inner.keys_with_prefix(prefix, limit).await
    }

    async fn rows_updated_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<RowPage, LedgerError> {
        self.enter(false)?;
        self.inner.rows_updated_between(since, until, cursor, limit).await
    }
}

/// A mailer that accepts everything and remembers what it was given (no I/O).
#[derive(Default)]
pub struct RecordingMailer {
    sent: Mutex<Vec<OutgoingMail>>,
}

impl RecordingMailer {
    pub fn sent(&self) -> Vec<OutgoingMail> {
        self.sent.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl Mailer for RecordingMailer {
    async fn send(&self, mail: &OutgoingMail) -> SendResult {
        let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        sent.push(mail.clone());
        SendResult::Accepted { message_id: format!("rec-{}-{}", mail.key.prefix(), sent.len()) }
    }
}
