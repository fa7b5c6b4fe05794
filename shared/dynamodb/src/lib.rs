//! The DynamoDB adapters: the production ledger ([`ledger`]) and the shared per-domain send
//! rate buckets ([`rate`]), both kept in the ledger table.

mod expr;
mod item;
pub mod ledger;
pub mod rate;

pub use ledger::DynamoLedger;
pub use rate::DynamoBuckets;
