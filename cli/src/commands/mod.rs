//! One module per `noticectl` subcommand: its arguments and its `run`. The proof tools
//! (`simulate`, `verify`) are not operations on a ledger or a queue: they live in `notice-proof`.

pub(crate) mod backfill;
pub(crate) mod capacity;
pub(crate) mod config;
pub(crate) mod enqueue;
pub(crate) mod evidence;
pub(crate) mod intake;
pub(crate) mod key;
mod key_rotation;
pub(crate) mod ledger;
pub(crate) mod limits;
pub(crate) mod link;
pub(crate) mod obligations;
pub(crate) mod outcomes;
pub(crate) mod parked;
pub(crate) mod quarantine;
pub(crate) mod replay;
pub(crate) mod send;
pub(crate) mod show;
pub(crate) mod smoke;
pub(crate) mod validate;
pub(crate) mod windows;
pub(crate) mod withdraw;

mod census;
mod scheduler;
