//! Mutants: one switch each that perturbs how the model uses the project's real rules, so the
//! checker has something it must catch. None is a separate model: each wraps a real rule
//! ([`permits`], [`expires`]), the provider's answer the real sender sees, the key the real sender
//! derives, when the queue acks, or how the sender's ports are wired ([`Wiring`]: the gate-path
//! mutants, by port wrappers — the core is not changed), or what the ledger port's batch read may
//! answer (the stale batch read: a row as it was before its latest write).

use notice_ledger::ledger::rules::{self, Verdict, Write};
use notice_ledger::ledger::{LedgerRow, RowState};
use serde::Serialize;

use super::args::Bounds;
use super::wrappers::Wiring;

/// A deliberate bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Mutant {
    /// The queue deletes the message as soon as the send returns, before the commit / release.
    AckBeforeCommit,
    /// An unknown outcome (5xx, timeout) is treated as "not accepted": the claim is released.
    ReleaseUnknown,
    /// The SDK's retry policy stays on: an unknown outcome is silently sent a second time.
    SdkRetry,
    /// The key includes the delivery (SQS message id / attempt), not just the business fact.
    KeyPerDelivery,
    /// The claim is an unconditional put: it overwrites whatever row is there.
    UnconditionalClaim,
    /// The ledger's TTL covers open claims too.
    TtlExpiresOpenClaim,
    /// A delivery held by a claim whose sender may still run is acked (as if suppressed).
    AckHeldInFlight,
    /// A release that failed is taken for "the claim stays": quarantined and acked.
    AckFailedRelease,
    /// The token is taken after the claim; with no token left the claim is released.
    TokenAfterClaim,
    /// The dedupe read before the token is skipped.
    SkipPreRead,
    /// A dedupe read that failed is taken for "no row".
    FailedReadIsFree,
    /// A withdraw's tombstone is written over an open claim too.
    WithdrawOverwritesClaim,
    /// Any provider event (Delivery, Bounce, …) moves a tombstone to sent, uncounted.
    EventLeavesWithdrawn,
    /// A parked job's schedule (or the queue holding it) has a TTL: it may expire before it fires.
    ParkWithTtl,
    /// A wait longer than the queue can hold is hidden on the queue instead of parked: the queue's
    /// retention may drop it before it comes back.
    HideTooLong,
    /// The batch read may miss the latest write to a row (`BatchGetItem` without `ConsistentRead`,
    /// or a prefetch kept from an earlier batch): a released claim still reads as held.
    StaleBatchRead,
    /// While the secret rotates, a first write under the newer version goes without its alias.
    RotationWithoutAlias,
    /// An alias is written over whatever row the older key holds.
    AliasOverwritesRow,
    /// The ledger's TTL covers aliases: one may expire while its notice's claim is still open.
    AliasExpires,
    /// The quarantine view write is skipped: a claim made off the view stays off it, however it
    /// ends (an unknown send, a held delivery acked).
    SkipQuarantineView,
}

impl Mutant {
    pub(crate) const ALL: [Mutant; 20] = [
        Mutant::AckBeforeCommit,
        Mutant::ReleaseUnknown,
        Mutant::SdkRetry,
        Mutant::KeyPerDelivery,
        Mutant::UnconditionalClaim,
        Mutant::TtlExpiresOpenClaim,
        Mutant::AckHeldInFlight,
        Mutant::AckFailedRelease,
        Mutant::TokenAfterClaim,
        Mutant::SkipPreRead,
        Mutant::FailedReadIsFree,
        Mutant::WithdrawOverwritesClaim,
        Mutant::EventLeavesWithdrawn,
        Mutant::ParkWithTtl,
        Mutant::HideTooLong,
        Mutant::StaleBatchRead,
        Mutant::RotationWithoutAlias,
        Mutant::AliasOverwritesRow,
        Mutant::AliasExpires,
        Mutant::SkipQuarantineView,
    ];

    /// Whether the mutant lives on the rate-gate path (read → token → claim): a world without a
    /// gate cannot run it.
    pub(crate) fn needs_gate(self) -> bool {
        matches!(self, Mutant::TokenAfterClaim | Mutant::SkipPreRead | Mutant::FailedReadIsFree)
    }

    /// Whether the mutant is about withdraw: a world without withdraw messages cannot run it.
    pub(crate) fn needs_withdraw(self) -> bool {
        matches!(self, Mutant::WithdrawOverwritesClaim | Mutant::EventLeavesWithdrawn)
    }

    /// Whether the mutant needs an operator release: in the real rules only a claim an operator
    /// released after its message went out lets a provider event meet a tombstone; and only an
    /// operator releases an old claim, the one a stale batch read can take for settled (a claim
    /// its own sender released was young moments before: read stale, it is `in_flight` and comes
    /// back).
    ///
    /// An alias the TTL deleted matters only once its notice's open claim is released and
    /// replayed: no other message of a settled notice comes.
    pub(crate) fn needs_release(self) -> bool {
        matches!(self, Mutant::EventLeavesWithdrawn | Mutant::StaleBatchRead | Mutant::AliasExpires)
    }

    /// Whether the mutant needs two deliveries of a notice at once (two messages, or one received
    /// again while its worker runs): an alias over a real row needs a sender on the older version
    /// writing that row after a switched one placed the notice.
    pub(crate) fn needs_two_at_once(self) -> bool {
        matches!(self, Mutant::AliasOverwritesRow)
    }

    /// Whether the mutant needs in-flight redelivery: acking a delivery held by a claim still in
    /// flight loses the notice only when that delivery is the claimer's own message, received
    /// again while its worker runs (the claimer's retry then finds it deleted). Any other held
    /// delivery is one copy among several, and the claimer's own message comes back.
    pub(crate) fn needs_in_flight_redelivery(self) -> bool {
        matches!(self, Mutant::AckHeldInFlight)
    }

    /// Whether the mutant is about parking: a world with `--parking off` cannot run it.
    pub(crate) fn needs_parking(self) -> bool {
        matches!(self, Mutant::ParkWithTtl | Mutant::HideTooLong)
    }

    /// Whether the mutant is about the batch path: a world where each job reads alone (`--batch 1`)
    /// never makes the batch read it perturbs.
    pub(crate) fn needs_batch(self) -> bool {
        matches!(self, Mutant::StaleBatchRead)
    }

    /// Whether the mutant is about the key secret's rotation: a world with one version never
    /// writes an alias. (`key-includes-delivery` gives each delivery a sender of its own, which a
    /// rotation world gives each secret version instead.)
    pub(crate) fn needs_rotation(self) -> bool {
        matches!(self, Mutant::RotationWithoutAlias | Mutant::AliasOverwritesRow | Mutant::AliasExpires)
    }

    /// Whether a world of these bounds can run the mutant.
    pub(crate) fn runs_in(self, bounds: &Bounds) -> bool {
        (bounds.rotation || !self.needs_rotation())
            && !(bounds.rotation && self == Mutant::KeyPerDelivery)
            && (bounds.deliveries > 1 || bounds.in_flight_redelivery || !self.needs_two_at_once())
            && (bounds.batch > 1 || !self.needs_batch())
            && (bounds.in_flight_redelivery || !self.needs_in_flight_redelivery())
            && (bounds.parking || !self.needs_parking())
            && (bounds.rate_gate || !self.needs_gate())
            && (bounds.withdraws > 0 || !self.needs_withdraw())
            && (bounds.releases > 0 || !self.needs_release())
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mutant::AckBeforeCommit => "ack-before-commit",
            Mutant::ReleaseUnknown => "release-unknown-outcome",
            Mutant::SdkRetry => "sdk-retry-second-send",
            Mutant::KeyPerDelivery => "key-includes-delivery",
            Mutant::UnconditionalClaim => "unconditional-claim-write",
            Mutant::TtlExpiresOpenClaim => "ttl-expires-open-claim",
            Mutant::AckHeldInFlight => "ack-held-in-flight",
            Mutant::AckFailedRelease => "ack-failed-release",
            Mutant::TokenAfterClaim => "token-after-claim",
            Mutant::SkipPreRead => "skip-pre-read",
            Mutant::FailedReadIsFree => "failed-pre-read-is-free",
            Mutant::WithdrawOverwritesClaim => "withdraw-overwrites-claim",
            Mutant::EventLeavesWithdrawn => "event-leaves-withdrawn",
            Mutant::ParkWithTtl => "park-with-ttl",
            Mutant::HideTooLong => "hide-too-long",
            Mutant::StaleBatchRead => "stale-batch-read",
            Mutant::RotationWithoutAlias => "rotation-without-alias",
            Mutant::AliasOverwritesRow => "alias-overwrites-row",
            Mutant::AliasExpires => "alias-expires",
            Mutant::SkipQuarantineView => "skip-quarantine-view",
        }
    }

    pub(crate) fn what(self) -> &'static str {
        match self {
            Mutant::AckBeforeCommit => "the message is acked when the send returns, before the commit",
            Mutant::ReleaseUnknown => "an unknown send outcome releases the claim",
            Mutant::SdkRetry => "the SDK retries an unknown SendEmail: two attempts per claim",
            Mutant::KeyPerDelivery => "the notice key includes the delivery (message id / attempt)",
            Mutant::UnconditionalClaim => "the claim write ignores the existing row",
            Mutant::TtlExpiresOpenClaim => "TTL may delete an open claim",
            Mutant::AckHeldInFlight => "a delivery held by a claim still in flight is acked",
            Mutant::AckFailedRelease => "a failed release is taken for a kept claim: quarantined and acked",
            Mutant::TokenAfterClaim => {
                "the token is taken after the claim, and the claim released when no token is left"
            }
            Mutant::SkipPreRead => "the ledger read before the token is skipped",
            Mutant::WithdrawOverwritesClaim => "a withdraw writes its tombstone over an open claim",
            Mutant::EventLeavesWithdrawn => {
                "a provider event other than Send moves a row out of withdrawn (as sent, uncounted)"
            }
            Mutant::FailedReadIsFree => "a failed ledger read before the token is taken for \"no row\"",
            Mutant::ParkWithTtl => "a parked job may expire (a schedule or retention TTL) before it fires",
            Mutant::HideTooLong => {
                "a wait longer than the queue holds is hidden instead of parked, and may be dropped by retention"
            }
            Mutant::StaleBatchRead => {
                "the batch read may miss the latest write (no ConsistentRead, or kept from an earlier batch): a released claim reads as held"
            }
            Mutant::RotationWithoutAlias => {
                "while the secret rotates, a first write under the newer version puts no alias at the older key"
            }
            Mutant::AliasOverwritesRow => "an alias is written over whatever row the older key holds",
            Mutant::AliasExpires => "the TTL may delete an alias while its notice's claim is still open",
            Mutant::SkipQuarantineView => {
                "a claim made off the quarantine view is never put on it (an unknown send, a held delivery acked)"
            }
        }
    }
}

/// The rules one run of the model uses: the project's own, or with one mutant switched on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    pub(crate) mutant: Option<Mutant>,
}

impl Rules {
    pub(crate) fn real() -> Self {
        Self { mutant: None }
    }

    pub(crate) fn with(mutant: Mutant) -> Self {
        Self { mutant: Some(mutant) }
    }

    fn is(self, m: Mutant) -> bool {
        self.mutant == Some(m)
    }

    /// [`rules::permits`], the ledger's transition rule.
    pub(crate) fn permits(self, existing: Option<&LedgerRow>, write: Write<'_>) -> Verdict {
        match write {
            Write::Claim { .. } if self.is(Mutant::UnconditionalClaim) => Verdict::Apply,
            Write::Alias if self.is(Mutant::AliasOverwritesRow) => Verdict::Apply,
            Write::Withdraw
                if self.is(Mutant::WithdrawOverwritesClaim)
                    && existing.is_some_and(|r| r.state == RowState::Claimed) =>
            {
                Verdict::Apply
            }
            _ => rules::permits(existing, write),
        }
    }

    /// [`rules::expires`], which rows the ledger's TTL may delete.
    pub(crate) fn expires(self, state: RowState) -> bool {
        self.is(Mutant::TtlExpiresOpenClaim)
            || (self.is(Mutant::AliasExpires) && state == RowState::Alias)
            || rules::expires(state)
    }

    /// Whether the queue acks a job as soon as its send returns.
    pub(crate) fn acks_before_commit(self) -> bool {
        self.is(Mutant::AckBeforeCommit)
    }

    /// Whether the sender sees an unknown outcome as "not accepted".
    pub(crate) fn unknown_reads_as_not_accepted(self) -> bool {
        self.is(Mutant::ReleaseUnknown)
    }

    /// SendEmail attempts per send call: one, or two when the SDK retries an unknown outcome.
    pub(crate) fn attempts_per_send(self) -> usize {
        if self.is(Mutant::SdkRetry) {
            2
        } else {
            1
        }
    }

    /// Whether a job that ended `in_flight` is acked instead of retried.
    pub(crate) fn acks_held_in_flight(self) -> bool {
        self.is(Mutant::AckHeldInFlight)
    }

    /// Whether a job whose release failed is acked instead of retried.
    pub(crate) fn acks_failed_release(self) -> bool {
        self.is(Mutant::AckFailedRelease)
    }

    /// How the sender's ports are wired (the gate-path mutants rewire them).
    pub(crate) fn wiring(self) -> Wiring {
        match self.mutant {
            Some(Mutant::TokenAfterClaim) => Wiring::TokenAfterClaim,
            Some(Mutant::SkipPreRead) => Wiring::SkipRead,
            Some(Mutant::FailedReadIsFree) => Wiring::FailedReadIsFree,
            Some(Mutant::RotationWithoutAlias) => Wiring::NoAliases,
            Some(Mutant::SkipQuarantineView) => Wiring::NoQuarantineView,
            _ => Wiring::Real,
        }
    }

    /// Whether any provider event moves a tombstone (not just a Send).
    pub(crate) fn any_event_leaves_withdrawn(self) -> bool {
        self.is(Mutant::EventLeavesWithdrawn)
    }

    /// Whether a parked job may be dropped before its schedule fires.
    pub(crate) fn park_expires(self) -> bool {
        self.is(Mutant::ParkWithTtl)
    }

    /// Whether a long wait is hidden on the queue instead of parked.
    pub(crate) fn hides_long_waits(self) -> bool {
        self.is(Mutant::HideTooLong)
    }

    /// Whether the batch read may answer a released row as the claim it released.
    pub(crate) fn batch_read_misses_release(self) -> bool {
        self.is(Mutant::StaleBatchRead)
    }

    /// Whether each delivery derives its own key.
    pub(crate) fn key_per_delivery(self) -> bool {
        self.is(Mutant::KeyPerDelivery)
    }
}
