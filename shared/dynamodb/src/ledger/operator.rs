//! The operator's path: resolving an open claim by hand (release, or record it as sent), backfill
//! of whole rows, and the key and update-time scans, at an operator's pace.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use notice_ledger::ledger::{release_detail, resolve_detail, LedgerRow, OperatorLedger, Origin, RowState};
use notice_ledger::LedgerError;
use notice_ledger::NoticeKey;

use super::{DynamoLedger, WriteFailure};
use crate::expr::Expr;
use crate::item::{attr, s};

impl DynamoLedger {
    /// An operator transition: any open claim → `to`, origin `operator`.
    async fn operator_transition(
        &self,
        key: &NoticeKey,
        to: RowState,
        at: DateTime<Utc>,
        detail: String,
        message_id: Option<&str>,
    ) -> Result<(), LedgerError> {
        let mut set = vec![(attr::ORIGIN, s(Origin::Operator.as_str())), (attr::DETAIL, s(&detail))];
        if let Some(id) = message_id {
            set.push((attr::MESSAGE_ID, s(id)));
        }
        let replayed = |row: &LedgerRow| {
            row.state == to
                && row.origin == Origin::Operator
                && row.detail.as_deref() == Some(detail.as_str())
                && message_id.is_none_or(|id| row.message_id.as_deref() == Some(id))
        };
        let conflict = |row: Option<&LedgerRow>| {
            LedgerError::Conflict(match row {
                Some(row) => format!("{} is {}, not an open claim", key.prefix(), row.state),
                None => format!("{} has no ledger row", key.prefix()),
            })
        };
        self.leave_claimed(key, to, at, &set, None, replayed, conflict).await
    }
}

#[async_trait]
impl OperatorLedger for DynamoLedger {
    async fn operator_release(
        &self,
        key: &NoticeKey,
        who: &str,
        reason: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.operator_transition(key, RowState::Released, at, release_detail(who, reason, at), None).await
    }
    async fn operator_resolve_sent(
        &self,
        key: &NoticeKey,
        message_id: &str,
        who: &str,
        at: DateTime<Utc>,
    ) -> Result<(), LedgerError> {
        self.operator_transition(key, RowState::Sent, at, resolve_detail(who, at), Some(message_id)).await
    }
    async fn backfill(&self, row: &LedgerRow) -> Result<bool, LedgerError> {
        let mut guard = Expr::new("attribute_not_exists(#notice_key)");
        guard.name(attr::KEY);
        match self.put_row(row, guard).await {
            Ok(()) => Ok(true),
            Err(WriteFailure::Condition(_)) => Ok(false),
            Err(WriteFailure::Other(e)) => Err(e),
        }
    }

    /// A `Scan` filtered on the key's prefix, page by page: DynamoDB has no range over a partition
    /// key, so this reads the whole table (at an operator's pace, never on a send path).
    async fn keys_with_prefix(&self, prefix: &str, limit: usize) -> Result<Vec<NoticeKey>, LedgerError> {
        use aws_sdk_dynamodb::types::AttributeValue;
        let mut keys = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("begins_with(notice_key, :prefix)")
                .expression_attribute_values(":prefix", AttributeValue::S(prefix.to_owned()))
                .projection_expression("notice_key")
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| self.unavailable("Scan", e))?;
            for item in out.items() {
                if let Some(AttributeValue::S(k)) = item.get("notice_key") {
                    // Items of other kinds (rate buckets, the key check) share the table under
                    // other key shapes: none parses as a notice key.
                    if let Ok(key) = NoticeKey::parse(k) {
                        keys.push(key);
                    }
                }
            }
            match out.last_evaluated_key() {
                Some(last) if keys.len() < limit => start = Some(last.clone()),
                _ => break,
            }
        }
        keys.sort();
        keys.truncate(limit);
        Ok(keys)
    }

    async fn rows_updated_between(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<notice_ledger::ledger::RowPage, LedgerError> {
        self.scan_updated_between(since, until, cursor, limit).await
    }
}
