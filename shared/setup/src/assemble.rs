//! One assembly of a sender for every entry point that sends — the sender Lambda, `noticectl send`
//! and the capacity model: configuration and opened ports in; the [`NoticeSender`] with its rate
//! gate and send budget, and the queue policy that goes with its parker, out. Built in one place,
//! a budget, a gate's clock or a parking flag cannot differ between what ships and what is
//! measured, and "parks long waits" is true exactly when there is somewhere to park them. The
//! gate's MX lookups (`"rollup": "mx"`) are the system resolver's, made here too.

use std::sync::Arc;
use std::time::Duration;

use notice_dns::{MxResolver, NoResolver};
use notice_ledger::ledger::ClaimLedger;
use notice_ledger::mailer::redirect::RedirectMailer;
use notice_ledger::mailer::Mailer;
use notice_ledger::park::Parker;
use notice_ledger::rate::{BucketGate, BucketStore, MxLookup, RateGate, RateLimits, Rollup};
use notice_ledger::{Mode, NoticeSender, QueuePolicy, SendBudget, WindowPolicy};
use notice_texts::Renderer;
use tracing::{error, info, warn};

/// How the rate gate tells time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateClock {
    /// The real clock at the moment of admission, whatever instant a caller passes (a deployed
    /// sender, and `noticectl send --now`, whose pinned instant is for send windows only).
    Wall,
    /// The instant each caller passes (a model in simulated time).
    Callers,
}

/// What a sender is configured with, besides its ports.
pub struct SendConfig {
    pub secret: notice_ledger::keyring::KeyRing,
    pub mode: Mode,
    pub policy: WindowPolicy,
    pub renderer: Arc<Renderer>,
    /// The one send attempt's limit; no claim is made with less than twice this left.
    pub send_timeout: Duration,
    /// `NOTICE_CLAIM_LIFETIME_SECS`: the longest a live sender holds a claim.
    pub claim_lifetime: Duration,
    /// The shared send rate (`None`: not paced).
    pub rate_limits: Option<RateLimits>,
    /// `NOTICE_PARK_SPREAD_SECS`.
    pub park_spread: Duration,
    pub gate_clock: GateClock,
    /// `NOTICE_REDIRECT_ALL_MAIL_TO` (non-production stacks only): every notice goes to this one
    /// address instead of its customer.
    pub redirect_all_mail_to: Option<String>,
}

/// The ports a sender runs over, as its entry point opened them.
pub struct SenderPorts {
    /// Only the claim → commit port: the send path cannot resolve or release claims it does not hold.
    pub ledger: Arc<dyn ClaimLedger>,
    /// The rate buckets, kept beside the ledger.
    pub buckets: Arc<dyn BucketStore>,
    pub mailer: Arc<dyn Mailer>,
    /// Where waits over 15 minutes park (`None`: they hide on the queue).
    pub parker: Option<Arc<dyn Parker>>,
}

/// An assembled sender, its queue policy and its parker.
pub struct Assembled {
    pub sender: NoticeSender,
    pub queue_policy: QueuePolicy,
    pub parker: Option<Arc<dyn Parker>>,
}

/// Assembles a sender (see the module's header).
pub fn assemble(config: SendConfig, ports: SenderPorts) -> Assembled {
    match &config.rate_limits {
        Some(limits) => info!(limits = %limits.describe(), "send rate"),
        None => warn!("NOTICE_RATE_LIMITS is off: sends to one domain are not paced"),
    }
    let budget = SendBudget {
        send_timeout: config.send_timeout,
        min_time_left: config.send_timeout * 2,
        claim_lifetime: config.claim_lifetime,
    };
    let mailer: Arc<dyn Mailer> = match config.redirect_all_mail_to {
        Some(to) => {
            warn!(to = %to, "NOTICE_REDIRECT_ALL_MAIL_TO: every notice goes to this one address, none to a customer");
            Arc::new(RedirectMailer::new(ports.mailer, to))
        }
        None => ports.mailer,
    };
    let sender = NoticeSender::new(ports.ledger, mailer, config.renderer, config.policy, config.secret)
        .with_mode(config.mode)
        .with_budget(budget);
    let gate = config.rate_limits.map(|limits| {
        let rollup = limits.rollup();
        let gate = BucketGate::new(ports.buckets, limits);
        let gate = match config.gate_clock {
            GateClock::Wall => gate.on_wall_clock(),
            GateClock::Callers => gate,
        };
        // The sender's own counters: `MxRollupFallbacks` is published with its other metrics.
        let gate = match rollup {
            Some(rollup) => gate.with_mx_rollup(mx_lookup(rollup), Arc::clone(sender.metrics())),
            None => gate,
        };
        Arc::new(gate) as Arc<dyn RateGate>
    });
    let sender = sender.with_rate_gate(gate);
    let queue_policy = queue_policy(ports.parker.as_ref(), config.park_spread);
    Assembled { sender, queue_policy, parker: ports.parker }
}

/// The MX rollup's lookup: the system's resolver (`/etc/resolv.conf`). One that cannot be
/// configured does not stop the sender — the rollup is pacing, not correctness — but it is logged
/// as an error, and every domain the rollup would place rides the tail counted as
/// `MxRollupFallbacks`, so the metric, not silence, tells.
fn mx_lookup(rollup: Rollup) -> Arc<dyn MxLookup> {
    match rollup {
        Rollup::Mx => match MxResolver::from_system() {
            Ok(resolver) => {
                info!(
                    bound_ms = notice_ledger::rate::MX_LOOKUP_BOUND.as_millis() as u64,
                    "MX rollup: domains in no provider are looked up by their MX hosts (system resolver)"
                );
                Arc::new(resolver)
            }
            Err(e) => {
                error!(error = %e, "MX rollup on, but no DNS resolver: the domains it would place ride the account bucket, counted as MxRollupFallbacks");
                Arc::new(NoResolver::new(e.to_string()))
            }
        },
    }
}

/// The queue policy that goes with `parker`: long waits park exactly when there is a parker.
pub fn queue_policy(parker: Option<&Arc<dyn Parker>>, park_spread: Duration) -> QueuePolicy {
    QueuePolicy { parking: parker.is_some(), park_spread }
}
