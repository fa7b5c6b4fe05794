//! DynamoDB ledger adapter (in progress).
