//! The `verify` command line, and the size of the world it asks for.

use serde::Serialize;

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct VerifyArgs {
    /// Workers taking messages concurrently.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=3))]
    workers: u8,
    /// Messages of notice A: the original plus broker duplicates / re-enqueues, enqueued whenever.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=4))]
    deliveries: u8,
    /// Notices: 1 = A; 2 adds A' (A's revision bump); 3 adds B (another subscriber, same domain).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=3))]
    notices: u8,
    /// Operator releases of an open claim in a run, each followed by a replay (0 or 1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=1))]
    releases: u8,
    /// Withdraw messages of notice A (0 or 1), enqueued at any time: before, during or after its
    /// deliveries. Off by default: it multiplies the world about ninefold.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=1))]
    withdraws: u8,
    /// How ledger calls may fail: `off`; `clean` (a failed write was not applied — the adapters
    /// recognise a write of their own retried after a lost response); `ambiguous` (a write may be
    /// applied and still answer an error).
    #[arg(long, value_enum, default_value = "ambiguous")]
    ledger_faults: Faults,
    /// A message may also come back while its worker still runs it (visibility expiring mid-job, a
    /// standard queue's duplicate receive). `false`: it comes back only after its worker died.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    in_flight_redelivery: bool,
    /// A delete with a stale receipt may still delete the message (SQS: "might not be deleted").
    #[arg(long)]
    stale_deletes: bool,
    /// The senders run with a rate gate, as deployed by default (`on`): each job reads its row,
    /// then takes a token (granted, limited, or failing like a ledger call), then claims. `off`:
    /// no gate, no read — the world before issue 26.
    #[arg(long, value_enum, default_value = "on")]
    rate_gate: Switch,
    /// Parking as its own queue action (`on`): a long wait (a job deferred before its window)
    /// takes the message off the queue into a schedule named by the notice key, which brings the
    /// body back later — in any order with its copies. `off`: every wait simply comes back (the
    /// world before parking was modelled, to the state).
    #[arg(long, value_enum, default_value = "on")]
    parking: Switch,
    /// Check the real rules only, not the mutants.
    #[arg(long)]
    pub(super) no_mutants: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

impl VerifyArgs {
    pub(super) fn bounds(&self) -> Bounds {
        Bounds {
            workers: self.workers,
            deliveries: self.deliveries,
            notices: self.notices,
            releases: self.releases,
            withdraws: self.withdraws,
            ledger_faults: self.ledger_faults,
            in_flight_redelivery: self.in_flight_redelivery,
            stale_deletes: self.stale_deletes,
            rate_gate: self.rate_gate == Switch::On,
            parking: self.parking == Switch::On,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Switch {
    On,
    Off,
}

/// The size of the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(super) struct Bounds {
    pub(super) workers: u8,
    /// Messages of notice A (original plus duplicates / re-enqueues).
    pub(super) deliveries: u8,
    pub(super) notices: u8,
    /// Operator releases in the whole run (each followed by a replay of the notice).
    pub(super) releases: u8,
    /// Withdraw messages of notice A.
    pub(super) withdraws: u8,
    /// How ledger calls may fail.
    pub(super) ledger_faults: Faults,
    /// A message may come back while its worker still runs it (visibility expiring mid-job, or a
    /// standard queue delivering it twice): two jobs of one message at once.
    pub(super) in_flight_redelivery: bool,
    /// A delete with a stale receipt may still delete the message (SQS: "might not be deleted").
    pub(super) stale_deletes: bool,
    /// The senders run with a rate gate (the dedupe read and the token before the claim).
    pub(super) rate_gate: bool,
    /// A park is its own queue action (the message leaves the queue for its key's schedule).
    pub(super) parking: bool,
}

/// How ledger calls may fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub(super) enum Faults {
    /// Every call succeeds.
    Off,
    /// A call may fail; a failed write was not applied. What the adapters give: a write whose
    /// response was lost is retried by the SDK and recognised as their own (DynamoDB: `ALL_OLD`).
    Clean,
    /// Also: a write was applied but the caller gets an error (its response and every SDK retry lost).
    Ambiguous,
}
