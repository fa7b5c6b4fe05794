//! The `verify` command line, and the size of the world it asks for.

use serde::Serialize;

/// The world flags: with none of them, `verify` runs the default run ([`DEFAULT_RUN`]); with any,
/// the one world they describe (each flag it leaves out at its default below).
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct VerifyArgs {
    /// Workers taking messages concurrently [default: 2].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=3))]
    workers: Option<u8>,
    /// Messages of notice A: the original plus broker duplicates / re-enqueues, enqueued whenever
    /// [default: 2].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=4))]
    deliveries: Option<u8>,
    /// Notices: 1 = A; 2 adds A' (A's revision bump); 3 adds B (another subscriber, same domain)
    /// [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=3))]
    notices: Option<u8>,
    /// Operator releases of an open claim in a run, each followed by a replay (0 or 1) [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=1))]
    releases: Option<u8>,
    /// Withdraw messages of notice A (0 or 1), enqueued at any time: before, during or after its
    /// deliveries [default: 0; a withdraw multiplies a world about ninefold, so the default run
    /// checks it in worlds of its own].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=1))]
    withdraws: Option<u8>,
    /// How ledger calls may fail: `off`; `clean` (a failed write was not applied — the adapters
    /// recognise a write of their own retried after a lost response); `ambiguous` (a write may be
    /// applied and still answer an error) [default: ambiguous].
    #[arg(long, value_enum)]
    ledger_faults: Option<Faults>,
    /// A message may also come back while its worker still runs it (visibility expiring mid-job, a
    /// standard queue's duplicate receive). `false`: it comes back only after its worker died
    /// [default: true].
    #[arg(long, action = clap::ArgAction::Set)]
    in_flight_redelivery: Option<bool>,
    /// A delete with a stale receipt may still delete the message (SQS: "might not be deleted").
    #[arg(long)]
    stale_deletes: bool,
    /// The senders run with a rate gate, as deployed by default (`on`): each job reads its row,
    /// then takes a token (granted, limited, or failing like a ledger call), then claims. `off`:
    /// no gate, no read — the world before the gate was modelled [default: on].
    #[arg(long, value_enum)]
    rate_gate: Option<Switch>,
    /// Parking as its own queue action (`on`): a long wait (a job deferred before its window)
    /// takes the message off the queue into a schedule named by the notice key, which brings the
    /// body back later — in any order with its copies. `off`: every wait simply comes back (the
    /// world before parking was modelled, to the state) [default: on].
    #[arg(long, value_enum)]
    parking: Option<Switch>,
    /// Records a worker may receive at once. 2: the batch path, as the sender Lambda runs an SQS
    /// batch — a receive brings one or two visible messages; the worker runs the batch's one
    /// prefetch (one ledger read for all its keys, then one token take for those it found
    /// claimable), then delivers each record in turn with it. 1: each job reads its row and takes
    /// its token alone (the world before the batch path was modelled, to the state) [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=2))]
    batch: Option<u8>,
    /// The key secret mid-rotation (`on`): two versions active, and every receive taken by a
    /// worker holding `v1` alone (not switched yet) or `v1` and `v2` with `v2` current (switched),
    /// in any mix for the whole run — each places the notice with the real `NoticeSender::place`
    /// (a switched worker's read of the `v1` key, then its first write under `v2` carrying an
    /// alias at the `v1` key in the same atomic write). `off`: one version (the world before
    /// rotation was modelled, to the state) [default: off].
    #[arg(long, value_enum)]
    rotation: Option<Switch>,
    /// Check the real rules only, not the mutants.
    #[arg(long)]
    pub(super) no_mutants: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

/// The default run: named worlds, one after the other, each a variation of [`Bounds::DEFAULT`].
/// Together they cover the deliveries with the operator's release and replay; the producer's
/// withdraw racing two deliveries on two workers; a withdraw together with a release only with one
/// worker (with two, the three together outgrow the run's time and memory budget); the batch
/// path; and the key secret mid-rotation, in two worlds. A world added here is checked by `verify` with every mutant it can run; the test
/// `the_default_run_is_its_named_worlds_and_any_flag_is_one_world` and docs/proof.md name them.
pub(super) const DEFAULT_RUN: &[(&str, Bounds)] = &[
    ("deliveries", Bounds::DEFAULT),
    ("withdraw", Bounds { withdraws: 1, releases: 0, ..Bounds::DEFAULT }),
    ("withdraw-release", Bounds { withdraws: 1, workers: 1, ..Bounds::DEFAULT }),
    // The sender Lambda's batch path: A's original and the operator's replay of it, each alone or
    // both in one batch (one prefetch, then each record), beside a second worker. Without
    // in-flight redelivery: with it (and the release) the world is 65.8 M states, past the
    // run's budget; the other worlds check in-flight redelivery.
    ("batch", Bounds { batch: 2, deliveries: 1, in_flight_redelivery: false, ..Bounds::DEFAULT }),
    // The key secret mid-rotation: A's original and a duplicate (an old job replayed after the
    // switch, a job parked before it and fired after it), each received by a worker on either side
    // of the switch, racing on two workers. Without the release: with it the world is 36.2 M
    // states, past the run's budget; the next world has it.
    ("rotation", Bounds { rotation: true, releases: 0, ..Bounds::DEFAULT }),
    // … and the operator's release and replay of a notice placed under either version, with one
    // message of A (without in-flight redelivery: the same reason).
    (
        "rotation-release",
        Bounds { rotation: true, deliveries: 1, in_flight_redelivery: false, ..Bounds::DEFAULT },
    ),
];

impl VerifyArgs {
    /// The worlds to check, by name: the default run, or the one world the flags describe.
    pub(super) fn worlds(&self) -> Vec<(&'static str, Bounds)> {
        let given = self.workers.is_some()
            || self.deliveries.is_some()
            || self.notices.is_some()
            || self.releases.is_some()
            || self.withdraws.is_some()
            || self.ledger_faults.is_some()
            || self.in_flight_redelivery.is_some()
            || self.stale_deletes
            || self.rate_gate.is_some()
            || self.parking.is_some()
            || self.batch.is_some()
            || self.rotation.is_some();
        if !given {
            return DEFAULT_RUN.to_vec();
        }
        let d = Bounds::DEFAULT;
        let world = Bounds {
            workers: self.workers.unwrap_or(d.workers),
            deliveries: self.deliveries.unwrap_or(d.deliveries),
            notices: self.notices.unwrap_or(d.notices),
            releases: self.releases.unwrap_or(d.releases),
            withdraws: self.withdraws.unwrap_or(d.withdraws),
            ledger_faults: self.ledger_faults.unwrap_or(d.ledger_faults),
            in_flight_redelivery: self.in_flight_redelivery.unwrap_or(d.in_flight_redelivery),
            stale_deletes: self.stale_deletes,
            rate_gate: self.rate_gate.map_or(d.rate_gate, |g| g == Switch::On),
            parking: self.parking.map_or(d.parking, |p| p == Switch::On),
            batch: self.batch.unwrap_or(d.batch),
            rotation: self.rotation.map_or(d.rotation, |r| r == Switch::On),
        };
        vec![("custom", world)]
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
    /// Records a receive may bring (2: the batch path, one prefetch for the batch).
    pub(super) batch: u8,
    /// The key secret mid-rotation: each receive by a worker on either side of the switch.
    pub(super) rotation: bool,
}

impl Bounds {
    /// Each flag at its default.
    pub(super) const DEFAULT: Bounds = Bounds {
        workers: 2,
        deliveries: 2,
        notices: 1,
        releases: 1,
        withdraws: 0,
        ledger_faults: Faults::Ambiguous,
        in_flight_redelivery: true,
        stale_deletes: false,
        rate_gate: true,
        parking: true,
        batch: 1,
        rotation: false,
    };
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
