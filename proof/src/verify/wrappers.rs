//! Port wrappers that rewire the real sender for the mutants that change *what it does* on the
//! rate-gate path, without a line of the core changed: the sender keeps calling its ports in its
//! own order, and the wrapper around the scripted ports turns that order into the mutant's.
//!
//! * [`Wiring::SkipRead`]: the dedupe read answers "no row" without asking the ledger (a batch's
//!   read too: no rows).
//! * [`Wiring::FailedReadIsFree`]: a read that failed answers "no row" (a batch read that failed:
//!   no rows).
//! * [`Wiring::TokenAfterClaim`]: the gate the sender sees admits everything; the ledger takes the
//!   token *after* its claim is minted and, when no token is left (limited, or the take failed),
//!   releases the claim and answers an error (the sender retries: `ledger_unavailable`).
//! * [`Wiring::NoAliases`]: a first write under the newer secret version goes without its alias
//!   at the older key (an adapter that drops `ClaimRequest::aliases`, or a plain put instead of
//!   the transaction).
//! * [`Wiring::NoQuarantineView`]: putting an open claim on the quarantine view answers "done"
//!   without a write (an adapter whose `put_on_quarantine_view` does nothing, over an index that
//!   lists only what it is given).

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use notice_ledger::ledger::{
    Claim, ClaimLedger, ClaimOutcome, ClaimRequest, LedgerRow, RowReader, WithdrawRequest,
};
use notice_ledger::rate::{Admission, BucketError, RateGate, TokenRequest};
use notice_ledger::{LedgerError, NoticeKey};

/// How the sender's ports are wired: as shipped, or for one of the gate-path mutants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wiring {
    Real,
    SkipRead,
    FailedReadIsFree,
    TokenAfterClaim,
    NoAliases,
    /// The quarantine view write answers "done" without asking the ledger.
    NoQuarantineView,
}

/// A ledger port wrapped for a mutant (with [`Wiring::Real`], a plain pass-through).
pub(super) struct WiredLedger {
    pub(super) inner: Arc<dyn ClaimLedger>,
    /// The scripted gate, for the token taken after the claim.
    pub(super) gate: Arc<dyn RateGate>,
    pub(super) wiring: Wiring,
}

#[async_trait]
impl RowReader for WiredLedger {
    async fn get(&self, key: &NoticeKey) -> Result<Option<LedgerRow>, LedgerError> {
        match self.wiring {
            Wiring::SkipRead => Ok(None),
            Wiring::FailedReadIsFree => Ok(self.inner.get(key).await.unwrap_or(None)),
            Wiring::Real | Wiring::TokenAfterClaim | Wiring::NoAliases | Wiring::NoQuarantineView => {
                self.inner.get(key).await
            }
        }
    }

    /// The batch read, one call as the adapters make it (not the trait's default of one read a
    /// key), rewired like the single read.
    async fn get_many(&self, keys: &[NoticeKey]) -> Result<Vec<LedgerRow>, LedgerError> {
        match self.wiring {
            Wiring::SkipRead => Ok(Vec::new()),
            Wiring::FailedReadIsFree => Ok(self.inner.get_many(keys).await.unwrap_or_default()),
            Wiring::Real | Wiring::TokenAfterClaim | Wiring::NoAliases | Wiring::NoQuarantineView => {
                self.inner.get_many(keys).await
            }
        }
    }
}

#[async_trait]
impl ClaimLedger for WiredLedger {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimOutcome, LedgerError> {
        if self.wiring == Wiring::NoAliases {
            return self.inner.claim(&ClaimRequest { aliases: Vec::new(), ..req.clone() }).await;
        }
        let outcome = self.inner.claim(req).await?;
        let ClaimOutcome::Minted(claim) = &outcome else { return Ok(outcome) };
        if self.wiring != Wiring::TokenAfterClaim {
            return Ok(outcome);
        }
        let request = TokenRequest { domain: req.key.prefix().to_owned(), shard_seed: 0 };
        match self.gate.admit_batch(std::slice::from_ref(&request), req.at).await {
            Ok(a) if a.first() == Some(&Admission::Admitted) => Ok(outcome),
            _ => {
                // No token left for the claim just written: hand it back.
                let released = self.inner.release(claim, "no token after the claim", req.at).await;
                Err(LedgerError::unavailable(format!(
                    "no token after the claim; release {}",
                    if released.is_ok() { "written" } else { "failed" }
                )))
            }
        }
    }

    async fn commit_sent(
        &self,
        claim: &Claim,
        message_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.inner.commit_sent(claim, message_id, at).await
    }

    async fn commit_rejected(
        &self,
        claim: &Claim,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.inner.commit_rejected(claim, reason, at).await
    }

    async fn release(&self, claim: &Claim, reason: &str, at: DateTime<Utc>) -> Result<(), LedgerError> {
        self.inner.release(claim, reason, at).await
    }

    async fn put_on_quarantine_view(&self, claim: &Claim) -> Result<(), LedgerError> {
        if self.wiring == Wiring::NoQuarantineView {
            return Ok(());
        }
        self.inner.put_on_quarantine_view(claim).await
    }

    async fn record_missed(
        &self,
        req: &ClaimRequest,
        reason: &str,
    ) -> Result<Option<LedgerRow>, LedgerError> {
        if self.wiring == Wiring::NoAliases {
            return self
                .inner
                .record_missed(&ClaimRequest { aliases: Vec::new(), ..req.clone() }, reason)
                .await;
        }
        self.inner.record_missed(req, reason).await
    }

    async fn withdraw(&self, req: &WithdrawRequest) -> Result<Option<LedgerRow>, LedgerError> {
        if self.wiring == Wiring::NoAliases {
            return self.inner.withdraw(&WithdrawRequest { aliases: Vec::new(), ..req.clone() }).await;
        }
        self.inner.withdraw(req).await
    }
}

/// The gate the sender sees under [`Wiring::TokenAfterClaim`]: it admits at once, without a port
/// call (the real take is the ledger wrapper's, after the claim).
pub(super) struct AdmitAll;

#[async_trait]
impl RateGate for AdmitAll {
    async fn admit_batch(
        &self,
        requests: &[TokenRequest],
        _: DateTime<Utc>,
    ) -> Result<Vec<Admission>, BucketError> {
        Ok(vec![Admission::Admitted; requests.len()])
    }
}
