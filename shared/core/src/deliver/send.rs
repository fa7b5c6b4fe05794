//! Claim (committed) → one send → commit: the path of an admitted job under the key it lives at,
//! with the dedupe and the rate token before the claim (see the module above for the crash
//! windows each step leaves, and why each is safe).

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tracing::{debug, error, info, warn};

use super::{refused_outcome, Mode, NoticeSender, Outcome, Placement, Prefetched, ALIAS_WAIT, REPLACE_WAIT};
use crate::admission::{AdmittedJob, Refused, Why};
use crate::identity::NoticeKey;
use crate::job::Job;
use crate::ledger::rules::{permits, Verdict, Write};
use crate::ledger::{Claim, ClaimLedger, ClaimOutcome, ClaimRequest, LedgerRow, RowState};
use crate::mailer::{NotAccepted, SendResult};
use crate::metrics::Metrics;
use crate::policy::WindowDecision;
use crate::rate::{Admission, RateScope, TokenRequest};

impl NoticeSender {
    /// An admitted job under the key it lives at: claim (committed) → one send → commit.
    pub(super) async fn run(
        &self,
        admitted: &AdmittedJob,
        placed: &Placement,
        now: DateTime<Utc>,
        deadline: Option<Instant>,
        m: &Metrics,
        prefetched: Option<&Prefetched>,
    ) -> Outcome {
        // ── ADMITTED ── the policy (a known kind, the content its law requires), the window and
        // the render were judged by the one admission before this: a refused message never gets
        // here, so nothing is claimed for it.
        let job = &admitted.job;
        let decision = admitted.window;
        if let WindowDecision::Defer { until, closes_at } = decision {
            // Early jobs are turned away before any ledger work (or digest) is spent on them.
            Metrics::incr(&m.deferred);
            return Outcome::Deferred { until, closes_at };
        }
        self.note_unlisted_jurisdiction(job, m);
        let key = &placed.key;
        let mut req = ClaimRequest::for_job(job, key.clone(), now).with_aliases(placed.aliases.clone());
        req.on_quarantine_view = !self.redelivered;
        if let WindowDecision::Missed { closed_at } = decision {
            return self.record_missed(&req, closed_at, m).await;
        }

        // Rendered by the admission, before any claim: a template error never leaves a claim
        // behind. Addressed here to the key the notice lives under; the claim records which
        // configuration, texts and rendering went out.
        let Some(draft) = &admitted.draft else {
            // The admission drafts every job that may be sent; only a missed one has none.
            return refused_outcome(
                &Refused {
                    why: Why::Render("admitted without its rendering".into()),
                    identity: None,
                    withdraw: false,
                },
                m,
            );
        };
        let rendered = draft.clone().addressed(key);
        let (mail, req) = (rendered.mail, req.with_rendered(rendered.record));

        let Some(send_timeout) = self.send_timeout(deadline) else {
            return Outcome::NoTimeLeft;
        };
        let held_in_shadow = match self.dedupe_then_rate(job, &req, now, m, prefetched).await {
            ControlFlow::Continue(held_in_shadow) => held_in_shadow,
            ControlFlow::Break(outcome) => return outcome,
        };

        // ── CLAIM ── committed before anything leaves. Crash after this line: window 2.
        let claim_started = Instant::now();
        let claim = if held_in_shadow {
            None // shadow: already counted as "would suppress"; send anyway, without a claim
        } else {
            match self.claim(&req, m).await {
                ControlFlow::Continue(claim) => claim,
                ControlFlow::Break(outcome) => return outcome,
            }
        };

        // ── SEND ── exactly one attempt. Crash after this line: window 3.
        let result = match tokio::time::timeout(send_timeout, self.mailer.send(&mail)).await {
            Ok(result) => result,
            Err(_) => SendResult::Unknown {
                reason: format!("send did not answer within {} ms", send_timeout.as_millis()),
            },
        };

        let Some(claim) = claim else {
            return self.shadow_result(result, &req).await;
        };

        // ── COMMIT ── Crash after this line: window 4 (ack lost, redelivery suppressed).
        let outcome = self.commit(&claim, result, m).await;
        if matches!(outcome, Outcome::Sent { .. }) {
            m.observe_claim_to_commit(claim_started.elapsed().as_secs_f64() * 1000.0);
        }
        outcome
    }

    /// A jurisdiction the windows policy does not name: counted; the kind's own window applies.
    fn note_unlisted_jurisdiction(&self, job: &Job, m: &Metrics) {
        let notices = self.notices();
        if let Some(j) = job.jurisdiction.as_deref().filter(|j| !notices.policy.names_jurisdiction(j)) {
            m.count_unlisted_jurisdiction(j);
            // Debug, not info: it is counted (`UnlistedJurisdiction`, by `Jurisdiction`) in every
            // invocation's metrics, and the row keeps the jurisdiction and the configuration version
            // the window was judged under. At info it was a line on every such notice, a third of
            // the sender's log volume on a common case.
            debug!(
                jurisdiction = j,
                "jurisdiction not named by the windows policy: the kind's own window applies"
            );
        }
    }

    /// ── DEDUPE, then RATE ── a key the ledger already holds is decided without a token; only a
    /// job that would send takes one, and takes it *before* its claim, so a job without a token
    /// leaves no claim behind. (Releasing a fresh claim instead would race a duplicate delivery
    /// that saw the claim, was suppressed and acked the message: then nobody sends.) Two workers
    /// that both read "free" may both take a token; one claim wins — a token wasted, never one
    /// too many. Continues with whether shadow mode sends over a row that holds the key; breaks
    /// with the outcome when the job ends here. Without a rate gate the claim alone dedupes.
    async fn dedupe_then_rate(
        &self,
        job: &Job,
        req: &ClaimRequest,
        now: DateTime<Utc>,
        m: &Metrics,
        prefetched: Option<&Prefetched>,
    ) -> ControlFlow<Outcome, bool> {
        if self.rate_gate.is_none() {
            return ControlFlow::Continue(false);
        }
        let key = &req.key;
        let mut held_in_shadow = false;
        let read = match prefetched.and_then(|p| p.row(key)) {
            Some(row) => Ok(row),
            None => self.ledger.get(key).await,
        };
        match read {
            Ok(Some(row)) if permits(Some(&row), Write::Claim { token: &req.token }) == Verdict::Refuse => {
                if let Some(outcome) = self.refused(req, &row, m).await {
                    return ControlFlow::Break(outcome);
                }
                held_in_shadow = true;
            }
            Ok(_) => {}
            Err(e) => {
                Metrics::incr(&m.ledger_errors);
                error!(error = %e, "ledger read failed");
                if self.mode == Mode::Enforce {
                    return ControlFlow::Break(Outcome::LedgerUnavailable(e.to_string()));
                }
            }
        }
        match self.take_token(job, key, now, m, prefetched).await {
            Some(outcome) => ControlFlow::Break(outcome),
            None => ControlFlow::Continue(held_in_shadow),
        }
    }

    /// The claim's conditional write. Continues with our claim (`None` in shadow mode when the
    /// key is held or the ledger failed: send anyway, without a claim of ours); breaks with the
    /// outcome of a key the ledger holds or cannot be reached for.
    async fn claim(&self, req: &ClaimRequest, m: &Metrics) -> ControlFlow<Outcome, Option<Claim>> {
        match self.ledger.claim(req).await {
            Ok(ClaimOutcome::Minted(claim)) => {
                Metrics::incr(&m.claims_minted);
                ControlFlow::Continue(Some(claim))
            }
            Ok(ClaimOutcome::Held(row)) => match self.refused(req, &row, m).await {
                Some(outcome) => ControlFlow::Break(outcome),
                None => ControlFlow::Continue(None),
            },
            Err(e) => {
                Metrics::incr(&m.ledger_errors);
                error!(error = %e, "claim failed");
                if self.mode == Mode::Enforce {
                    return ControlFlow::Break(Outcome::LedgerUnavailable(e.to_string()));
                }
                ControlFlow::Continue(None)
            }
        }
    }

    /// Takes a token for the recipient's domain (the batch's, when it took one for this key);
    /// `None` means "send". Without one the job is deferred until a token is due — nothing
    /// claimed, nothing sent. Shadow mode never blocks on a gate error.
    async fn take_token(
        &self,
        job: &Job,
        key: &NoticeKey,
        now: DateTime<Utc>,
        m: &Metrics,
        prefetched: Option<&Prefetched>,
    ) -> Option<Outcome> {
        let gate = self.rate_gate.as_ref()?;
        let admitted = match prefetched.and_then(|p| p.admission(key)) {
            Some(planned) => Ok(planned),
            None => {
                let request = TokenRequest { domain: job.recipient_domain(), shard_seed: key.seed(1) };
                let answer = gate.admit_batch(std::slice::from_ref(&request), now).await;
                answer.map(|mut a| a.pop().unwrap_or(Admission::Admitted))
            }
        };
        m.token_write_conflicts.fetch_add(gate.take_conflicts(), std::sync::atomic::Ordering::Relaxed);
        match admitted {
            Ok(Admission::Admitted) => None,
            Ok(Admission::Limited { retry_at, scope }) => {
                Metrics::incr(&m.rate_limited);
                if scope == RateScope::Account {
                    Metrics::incr(&m.rate_limited_by_account);
                }
                info!(until = %retry_at, scope = scope.as_str(), "over the send rate: deferred, nothing claimed or sent");
                Some(Outcome::RateLimited { until: retry_at })
            }
            Err(e) => {
                Metrics::incr(&m.ledger_errors);
                error!(error = %e, "rate bucket unavailable");
                (self.mode == Mode::Enforce).then(|| Outcome::LedgerUnavailable(e.to_string()))
            }
        }
    }

    /// The send's result, written to the claim: sent, released (the provider said "not
    /// accepted": nothing went out) or rejected; anything uncertain quarantines the claim.
    async fn commit(&self, claim: &Claim, result: SendResult, m: &Metrics) -> Outcome {
        let now = self.clock.now();
        match result {
            SendResult::Accepted { message_id } => self.commit_sent(claim, message_id, now, m).await,
            SendResult::NotAccepted { class, reason } => self.release(claim, class, reason, now, m).await,
            SendResult::Rejected { reason } => {
                warn!(%reason, "provider rejected the message");
                let bounded = crate::ledger::bounded_text(&reason, crate::ledger::MAX_REASON_CHARS);
                match self.ledger.commit_rejected(claim, &bounded, now).await {
                    Ok(()) => {
                        Metrics::incr(&m.rejected);
                        Outcome::Rejected { reason }
                    }
                    Err(e) => {
                        self.quarantine(claim, format!("rejected ({reason}) but commit failed: {e}"), None, m)
                            .await
                    }
                }
            }
            SendResult::Unknown { reason } => {
                self.quarantine(claim, format!("send outcome unknown: {reason}"), None, m).await
            }
        }
    }

    async fn commit_sent(
        &self,
        claim: &Claim,
        message_id: String,
        now: DateTime<Utc>,
        m: &Metrics,
    ) -> Outcome {
        match self.ledger.commit_sent(claim, &message_id, now).await {
            Ok(()) => {
                Metrics::incr(&m.sent);
                // Debug: the caller's one line per message carries the outcome and this
                // message id (the sender's `processed`; noticectl prints its own line).
                debug!(message_id = %message_id, "sent");
                Outcome::Sent { message_id }
            }
            Err(e) => {
                // The message is out; the claim stays and the provider's Send event resolves it.
                Metrics::incr(&m.ledger_errors);
                error!(message_id = %message_id, error = %e, "sent but commit failed: claim left for the reconciler");
                self.quarantine(claim, format!("commit failed after send: {e}"), Some(message_id), m).await
            }
        }
    }

    /// The provider did not accept the message: nothing went out, so the claim is released.
    async fn release(
        &self,
        claim: &Claim,
        class: NotAccepted,
        reason: String,
        now: DateTime<Utc>,
        m: &Metrics,
    ) -> Outcome {
        if class == NotAccepted::Configuration {
            Metrics::incr(&m.configuration_errors);
            error!(%reason, "provider configuration error: nothing is being sent until it is fixed");
        } else {
            warn!(%class, %reason, "provider did not accept the message");
        }
        match self.ledger.release(claim, &format!("{class}: {reason}"), now).await {
            Ok(()) => {
                Metrics::incr(&m.released);
                Outcome::Released { class, reason }
            }
            // Nothing went out, but the release may have landed: acking could leave a
            // released row and no message. Retried: the redelivery finds the row released
            // (and sends) or still claimed (in flight, then quarantined).
            Err(e) => {
                Metrics::incr(&m.ledger_errors);
                error!(%reason, error = %e, "not accepted and the release failed: retried");
                Outcome::LedgerUnavailable(format!("not accepted ({reason}) and the release failed: {e}"))
            }
        }
    }

    /// Our own claim stays open: on the quarantine view first (when it was made off it), then
    /// acked as quarantined. If that write fails the message is retried instead: its next
    /// delivery finds the claim held and puts it on the view ([`NoticeSender::watch`]).
    async fn quarantine(
        &self,
        claim: &Claim,
        reason: String,
        message_id: Option<String>,
        m: &Metrics,
    ) -> Outcome {
        Metrics::incr(&m.quarantined);
        error!(%reason, "claim quarantined: outcome unknown, resolve from provider events");
        if self.redelivered {
            if let Err(failed) = self.put_on_view(claim, m).await {
                return Outcome::LedgerUnavailable(format!("{reason}; {failed}"));
            }
        }
        Outcome::Quarantined { reason, message_id }
    }

    /// The one write that lists an open claim, for our own claim and a held one alike; its
    /// failure is counted and logged here and answered as the text of the retry's reason.
    async fn put_on_view(&self, claim: &Claim, m: &Metrics) -> Result<(), String> {
        self.ledger.put_on_quarantine_view(claim).await.map_err(|e| {
            Metrics::incr(&m.ledger_errors);
            error!(error = %e, "could not put the claim on the quarantine view: retried, the next delivery puts it there");
            format!("the quarantine view write failed: {e}")
        })
    }

    /// A claim another delivery holds goes on the quarantine view before this message is acked or
    /// handed back: if its sender is gone, this row is the only trace, and a claim made off the
    /// view is listed by nobody else. Nothing to write for any other row or one listed already.
    /// `Err` with the outcome when the write failed: the message is retried, never acked over an
    /// unlisted claim.
    pub(super) async fn watch(&self, row: &LedgerRow, m: &Metrics) -> Result<(), Outcome> {
        if row.state != RowState::Claimed || row.on_quarantine_view {
            return Ok(());
        }
        let Some(token) = row.claim_token.clone() else {
            Metrics::incr(&m.ledger_errors);
            error!("an open claim without a claim token: retried");
            return Err(Outcome::LedgerUnavailable("an open claim without a claim token".into()));
        };
        let claim =
            Claim { key: row.key.clone(), token, claimed_at: row.claimed_at.unwrap_or(row.updated_at) };
        self.put_on_view(&claim, m).await.map_err(Outcome::LedgerUnavailable)
    }

    /// The key already has a row. `None` means "send anyway" (shadow mode only).
    async fn refused(&self, req: &ClaimRequest, row: &LedgerRow, m: &Metrics) -> Option<Outcome> {
        let conflict = row.content_digest.as_deref().is_some_and(|d| d != req.content_digest);
        if conflict {
            Metrics::incr(&m.payload_conflicts);
            error!(state = %row.state, "payload conflict: same notice key, different content; bump `revision` for a corrected notice");
        }
        if self.mode == Mode::Shadow {
            Metrics::incr(&m.shadow_would_suppress);
            info!(state = %row.state, "shadow: enforce mode would suppress this send");
            return None;
        }
        if conflict {
            return Some(Outcome::PayloadConflict { state: row.state });
        }
        if let Err(outcome) = self.watch(row, m).await {
            return Some(outcome);
        }
        Some(self.held(row, req.at, m))
    }

    /// A delivery the ledger turned away: acked, unless the claim holding it may still be running
    /// — or the row is an alias: the notice lives under a newer secret version's key that this
    /// sender does not hold yet, so it cannot tell what happened there (back after its refresh).
    pub(super) fn held(&self, row: &LedgerRow, now: DateTime<Utc>, m: &Metrics) -> Outcome {
        if row.state == RowState::Released {
            return self.placed_stale(now, false);
        }
        if row.state == RowState::Alias {
            let until = now + ALIAS_WAIT;
            info!(until = %until, "the notice lives under a newer secret version's key this sender does not hold yet: back after its key refresh");
            return Outcome::InFlight { until, withdraw: false };
        }
        Metrics::incr(&m.duplicates_suppressed);
        if let Some(until) = self.in_flight_until(row, now) {
            info!(until = %until, "held by a claim that may still be in flight: back when its sender is done");
            return Outcome::InFlight { until, withdraw: false };
        }
        info!(state = %row.state, "duplicate suppressed");
        Outcome::Suppressed { state: row.state }
    }

    /// A first write under the current key refused for its alias by a *released* row at an older
    /// version's key (nothing else refuses a claim, a missed record or a withdraw with a released
    /// row): since this delivery placed the notice, a sender on the older version claimed the
    /// older key and released it. The notice lives there now and may still be sent — back at
    /// once to place it again, never acked as if decided.
    pub(super) fn placed_stale(&self, now: DateTime<Utc>, withdraw: bool) -> Outcome {
        let until = now + REPLACE_WAIT;
        info!(until = %until, "the notice moved to an older secret version's key since it was placed: placed again");
        Outcome::InFlight { until, withdraw }
    }

    /// When the sender of an open claim younger than `claim_lifetime` is surely gone (a claim
    /// stamped in the future by a skewed clock counts as young). `None`: decided, older, or no
    /// claim time to judge by.
    pub(super) fn in_flight_until(&self, row: &LedgerRow, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if row.state != RowState::Claimed {
            return None;
        }
        let gone_at = row.claimed_at? + chrono::Duration::from_std(self.budget.claim_lifetime).ok()?;
        (now < gone_at).then(|| gone_at + chrono::Duration::seconds(1))
    }

    async fn shadow_result(&self, result: SendResult, req: &ClaimRequest) -> Outcome {
        let would_suppress = match self.ledger.get(&req.key).await {
            Ok(Some(row)) if row.claim_token.as_ref() != Some(&req.token) => Some(row.state),
            _ => None,
        };
        let message_id = match result {
            SendResult::Accepted { message_id } => Some(message_id),
            other => {
                warn!(result = ?other, "shadow: send not accepted");
                None
            }
        };
        Outcome::ShadowSent { message_id, would_suppress }
    }

    async fn record_missed(&self, req: &ClaimRequest, closed_at: DateTime<Utc>, m: &Metrics) -> Outcome {
        let reason = format!("send window closed at {}", closed_at.to_rfc3339());
        match self.ledger.record_missed(req, &reason).await {
            Ok(None) => {
                Metrics::incr(&m.missed_window);
                error!(closed_at = %closed_at, "missed the send window: recorded, not sent");
                Outcome::Missed { closed_at }
            }
            Ok(Some(row)) => match self.watch(&row, m).await {
                Ok(()) => self.held(&row, req.at, m),
                Err(outcome) => outcome,
            },
            Err(e) => {
                Metrics::incr(&m.ledger_errors);
                error!(error = %e, "could not record missed window");
                Outcome::LedgerUnavailable(e.to_string())
            }
        }
    }

    fn send_timeout(&self, deadline: Option<Instant>) -> Option<Duration> {
        let Some(deadline) = deadline else {
            return Some(self.budget.send_timeout);
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left < self.budget.min_time_left {
            warn!(left_ms = left.as_millis() as u64, "too little time left to start a send");
            return None;
        }
        Some(self.budget.send_timeout.min(left / 2))
    }
}
