//! The DynamoDB adapters: the production ledger ([`ledger`]), the shared per-domain send rate
//! buckets ([`rate`]) and the key check ([`keycheck`]), all kept in the ledger table.

mod expr;
pub mod hot;
mod item;
pub mod keycheck;
pub mod ledger;
pub mod rate;

pub use keycheck::DynamoKeyCheck;
pub use ledger::DynamoLedger;
pub use rate::DynamoBuckets;

/// The SDK client, and the lean client for the ledger's conditional writes when configured
/// ([`hot`]): the adapters take both, so every caller of `notice_setup::aws::dynamodb_client`
/// gets the same write path.
#[derive(Clone, Debug)]
pub struct DynamoClient {
    pub sdk: aws_sdk_dynamodb::Client,
    pub hot: Option<hot::HotWrites>,
}

impl From<aws_sdk_dynamodb::Client> for DynamoClient {
    /// Everything through the SDK.
    fn from(sdk: aws_sdk_dynamodb::Client) -> Self {
        Self { sdk, hot: None }
    }
}
