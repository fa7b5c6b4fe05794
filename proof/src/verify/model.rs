//! The bounded world, its transitions and its invariants.
//!
//! World: 1–3 notices (A; A', its revision bump; B, another subscriber at the same domain), each
//! with its own SQS messages — A has `--deliveries` of them (the first enqueued at the start, the
//! others — broker duplicate, producer re-enqueue — whenever), A' and B one each — plus one replay
//! message per notice that only an operator release enqueues. `--workers` workers take messages one
//! at a time. A coarse clock moves from before the window to inside it to after it.
//!
//! Transitions, any of them enabled in any order:
//! * the clock moves on; a further message is enqueued; an idle worker receives a visible message;
//! * a dead worker's message becomes visible again (with `in_flight_redelivery`, a live worker's
//!   too: another worker may receive it while the first still runs it);
//! * a worker takes its next step — the real sender's next port call, answered every way the
//!   ledger (applied, refused, an error — with the write applied too under `Faults::Ambiguous`) or
//!   the provider (accepted,
//!   not accepted, rejected, unknown with or without the message out) can answer it — or, once the
//!   sender has finished, acks or retries by the queue action `QueuePolicy::action` gives its outcome;
//! * a worker crashes (before any step, or after its last and before the ack);
//! * the reconciler applies a Send / Delivery / Bounce / Reject event of any accepted message, any
//!   number of times (or never), through the real evidence rules;
//! * an operator releases an open claim (and replays the notice);
//! * once a notice is settled, the ledger's TTL deletes rows [`rules::expires`] allows.
//!
//! The files, each importing only from the ones before it: `state` (one state, one transition,
//! the invariants' names) → `rules` (the model, its rows, its calls into the real rules) → `trace`
//! (steps in words) → `invariants` → `symmetry` → `moves` (the transitions: the workers' steps) →
//! `actors` (the reconciler, the operator, the TTL).
//!
//! [`rules::expires`]: notice_ledger::ledger::rules::expires

mod actors;
mod invariants;
mod moves;
mod rules;
mod state;
mod symmetry;
mod trace;

pub(super) use rules::Model;
pub(super) use state::{Invariant, State, Succ, Violation};
