//! One module per `noticectl` subcommand: its arguments and its `run`. `simulate` lives apart
//! (`crate::simulate`): it is a model, not an operation on a ledger or a queue.

pub(crate) mod backfill;
pub(crate) mod capacity;
pub(crate) mod enqueue;
pub(crate) mod key;
pub(crate) mod ledger;
pub(crate) mod limits;
pub(crate) mod parked;
pub(crate) mod quarantine;
pub(crate) mod replay;
pub(crate) mod send;
pub(crate) mod show;

mod census;
mod scheduler;
