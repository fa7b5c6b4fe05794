//! The DynamoDB adapters: the production ledger ([`ledger`]), the shared per-domain send rate
//! buckets ([`rate`]) and the key check ([`keycheck`]), all kept in the ledger table.

/// The service this adapter is, as an operator knows it: named in every typed failure.
pub const SERVICE: &str = "DynamoDB";

mod expr;
pub mod hot;
mod item;
pub mod keycheck;
pub mod ledger;
pub mod rate;

pub use keycheck::DynamoKeyCheck;
pub use ledger::DynamoLedger;
pub use rate::DynamoBuckets;

/// The ledger table's two clients, built together from one SDK configuration
/// (`notice_setup::aws::dynamodb_client`): the lean client ([`hot`]) is the one path for every
/// write (claims, transitions, the alias transaction, token takes, the key check, operator
/// transitions, backfill) and for the reads on a send path; the SDK client serves only the
/// operator-pace queries and scans (the quarantine view, the key and time scans), which are not
/// worth a second implementation.
#[derive(Clone, Debug)]
pub struct DynamoClient {
    sdk: aws_sdk_dynamodb::Client,
    lean: hot::HotWrites,
}

impl DynamoClient {
    /// Both clients; build them from the same configuration (region, credentials, endpoint).
    pub fn new(sdk: aws_sdk_dynamodb::Client, lean: hot::HotWrites) -> Self {
        Self { sdk, lean }
    }

    /// The SDK client: queries and scans only.
    pub fn sdk(&self) -> &aws_sdk_dynamodb::Client {
        &self.sdk
    }

    /// The lean client: every write, and the send path's reads.
    pub fn lean(&self) -> &hot::HotWrites {
        &self.lean
    }
}
