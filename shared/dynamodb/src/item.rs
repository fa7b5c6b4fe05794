//! Row ↔ item: the table schema as attribute names and the conversions both ways.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, TimeZone, Utc};
use notice_ledger::ledger::rules::expires;
use notice_ledger::ledger::{ClaimToken, LedgerRow, RenderedNotice, RowState};
use notice_ledger::{LedgerError, NoticeKey};

pub(crate) type Item = HashMap<String, AttributeValue>;

/// Item attribute names: the table schema (`template.yaml` declares the key ones).
pub(crate) mod attr {
    pub const KEY: &str = "notice_key";
    pub const STATE: &str = "state";
    pub const ORIGIN: &str = "origin";
    pub const CLAIM_TOKEN: &str = "claim_token";
    pub const SUBSCRIPTION_ID: &str = "subscription_id";
    pub const PERIOD_START: &str = "period_start";
    pub const KIND: &str = "kind";
    pub const REVISION: &str = "revision";
    pub const CONTENT_DIGEST: &str = "content_digest";
    pub const CLAIMED_AT: &str = "claimed_at";
    pub const UPDATED_AT: &str = "updated_at";
    pub const MESSAGE_ID: &str = "message_id";
    pub const DETAIL: &str = "detail";
    pub const DELIVERY_STATUS: &str = "delivery_status";
    pub const DUPLICATES: &str = "duplicate_message_ids";
    pub const EXPIRES_AT: &str = "expires_at";
    pub const OPEN_SHARD: &str = "open_shard";
    pub const OPEN_SINCE: &str = "open_since";
    /// Evidence, optional (rows written before it was stored lack them): the charge time (epoch
    /// ms) and the jurisdiction the notice was judged in.
    pub const CHARGE_AT: &str = "charge_at";
    pub const JURISDICTION: &str = "jurisdiction";
    /// Evidence of what was sent, optional and written together or not at all (an item with some
    /// but not all of them is corrupt): the notice configuration's version, the template used
    /// (`<kind>/<locale>`) and the hex SHA-256 of the rendered message.
    pub const CONFIG_VERSION: &str = "config_version";
    pub const TEMPLATE: &str = "template";
    pub const RENDERED_DIGEST: &str = "rendered_digest";
    /// Evidence of why, optional: the obligation rule that owed the notice (`US-CA/ca-annual-term`).
    pub const OBLIGATION: &str = "obligation";
}

pub(crate) fn s(value: &str) -> AttributeValue {
    AttributeValue::S(value.to_owned())
}

pub(crate) fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The item for `row`. Open claims get the GSI keys when they are on the quarantine view
/// ([`LedgerRow::on_quarantine_view`]), and never an expiry (TTL must not delete a
/// claim nobody has resolved); aliases neither (never expired, never on the quarantine view: see
/// [`expires`]); every other state gets `expires_at` and never the GSI keys.
pub fn row_to_item(row: &LedgerRow, expires_at: i64) -> Item {
    let mut item = HashMap::from([
        (attr::KEY.to_owned(), s(row.key.as_str())),
        (attr::STATE.to_owned(), s(row.state.as_str())),
        (attr::ORIGIN.to_owned(), s(row.origin.as_str())),
        (attr::SUBSCRIPTION_ID.to_owned(), s(&row.subscription_id)),
        (attr::PERIOD_START.to_owned(), s(&row.period_start)),
        (attr::KIND.to_owned(), s(&row.kind)),
        (attr::REVISION.to_owned(), n(row.revision)),
        (attr::UPDATED_AT.to_owned(), n(row.updated_at.timestamp_millis())),
        (
            attr::DUPLICATES.to_owned(),
            AttributeValue::L(row.duplicate_message_ids.iter().map(|id| s(id)).collect()),
        ),
    ]);
    let optional = [
        (attr::CLAIM_TOKEN, row.claim_token.as_ref().map(|t| s(t.as_str()))),
        (attr::CONTENT_DIGEST, row.content_digest.as_deref().map(s)),
        (attr::CLAIMED_AT, row.claimed_at.map(|t| n(t.timestamp_millis()))),
        (attr::MESSAGE_ID, row.message_id.as_deref().map(s)),
        (attr::DETAIL, row.detail.as_deref().map(s)),
        (attr::DELIVERY_STATUS, row.delivery_status.map(|d| s(d.as_str()))),
        (attr::CHARGE_AT, row.charge_at.map(|t| n(t.timestamp_millis()))),
        (attr::JURISDICTION, row.jurisdiction.as_deref().map(s)),
        (attr::CONFIG_VERSION, row.rendered.as_ref().map(|r| s(&r.config_version))),
        (attr::TEMPLATE, row.rendered.as_ref().map(|r| s(&r.template))),
        (attr::RENDERED_DIGEST, row.rendered.as_ref().map(|r| s(&r.rendered_digest))),
        (attr::OBLIGATION, row.obligation.as_deref().map(s)),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            item.insert(name.to_owned(), value);
        }
    }
    if expires(row.state) {
        item.insert(attr::EXPIRES_AT.to_owned(), n(expires_at));
    } else if row.state == RowState::Claimed && row.on_quarantine_view {
        let since = row.claimed_at.unwrap_or(row.updated_at);
        item.insert(attr::OPEN_SHARD.to_owned(), s(open_shard(&row.key)));
        item.insert(attr::OPEN_SINCE.to_owned(), n(since.timestamp_millis()));
    }
    item
}

/// The row stored in `item`; anything malformed is `Corrupt`, naming the attribute.
pub fn item_to_row(item: &Item) -> Result<LedgerRow, LedgerError> {
    let duplicates = match item.get(attr::DUPLICATES) {
        None => Vec::new(),
        Some(AttributeValue::L(list)) => list
            .iter()
            .map(|v| match v {
                AttributeValue::S(id) => Ok(id.clone()),
                _ => Err(corrupt(attr::DUPLICATES, "holds a non-string element")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(corrupt(attr::DUPLICATES, "is not a list")),
    };
    let revision = get_n(item, attr::REVISION)?;
    Ok(LedgerRow {
        key: get_key(item)?,
        state: get_s(item, attr::STATE)?.parse().map_err(|e| corrupt(attr::STATE, e))?,
        origin: get_s(item, attr::ORIGIN)?.parse().map_err(|e| corrupt(attr::ORIGIN, e))?,
        claim_token: opt_s(item, attr::CLAIM_TOKEN)?.map(ClaimToken::from_stored),
        subscription_id: get_s(item, attr::SUBSCRIPTION_ID)?.to_owned(),
        period_start: get_s(item, attr::PERIOD_START)?.to_owned(),
        kind: get_s(item, attr::KIND)?.to_owned(),
        revision: u64::try_from(revision).map_err(|_| corrupt(attr::REVISION, "is negative"))?,
        content_digest: opt_s(item, attr::CONTENT_DIGEST)?.map(str::to_owned),
        claimed_at: opt_time(item, attr::CLAIMED_AT)?,
        on_quarantine_view: item.contains_key(attr::OPEN_SINCE),
        updated_at: get_time(item, attr::UPDATED_AT)?,
        message_id: opt_s(item, attr::MESSAGE_ID)?.map(str::to_owned),
        detail: opt_s(item, attr::DETAIL)?.map(str::to_owned),
        delivery_status: opt_s(item, attr::DELIVERY_STATUS)?
            .map(|v| v.parse().map_err(|e| corrupt(attr::DELIVERY_STATUS, e)))
            .transpose()?,
        duplicate_message_ids: duplicates,
        charge_at: opt_time(item, attr::CHARGE_AT)?,
        jurisdiction: opt_s(item, attr::JURISDICTION)?.map(str::to_owned),
        rendered: opt_rendered(item)?,
        obligation: opt_s(item, attr::OBLIGATION)?.map(str::to_owned),
    })
}

/// The rendered-notice evidence: all three attributes, or none.
fn opt_rendered(item: &Item) -> Result<Option<RenderedNotice>, LedgerError> {
    let text = |name| Ok::<_, LedgerError>(opt_s(item, name)?.map(str::to_owned));
    RenderedNotice::from_stored(
        text(attr::CONFIG_VERSION)?,
        text(attr::TEMPLATE)?,
        text(attr::RENDERED_DIGEST)?,
    )
}

/// `at` at the millisecond precision items store.
pub(crate) fn to_millis(at: DateTime<Utc>) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(at.timestamp_millis()).single().unwrap_or(at)
}

/// The index shard of a key: its first hex character (after a secret version's `vN-`).
pub(crate) fn open_shard(key: &NoticeKey) -> &str {
    key.first_hex()
}

pub(crate) fn corrupt(attribute: &str, problem: impl std::fmt::Display) -> LedgerError {
    LedgerError::Corrupt(format!("attribute `{attribute}` {problem}"))
}

pub(crate) fn get_key(item: &Item) -> Result<NoticeKey, LedgerError> {
    NoticeKey::parse(get_s(item, attr::KEY)?).map_err(|e| corrupt(attr::KEY, e))
}

pub(crate) fn opt_s<'a>(item: &'a Item, name: &str) -> Result<Option<&'a str>, LedgerError> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::S(v)) => Ok(Some(v)),
        Some(_) => Err(corrupt(name, "is not a string")),
    }
}

pub(crate) fn get_s<'a>(item: &'a Item, name: &str) -> Result<&'a str, LedgerError> {
    opt_s(item, name)?.ok_or_else(|| corrupt(name, "is missing"))
}

pub(crate) fn opt_n(item: &Item, name: &str) -> Result<Option<i64>, LedgerError> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::N(v)) => {
            v.parse().map(Some).map_err(|_| corrupt(name, format!("is not an integer: {v:?}")))
        }
        Some(_) => Err(corrupt(name, "is not a number")),
    }
}

pub(crate) fn get_n(item: &Item, name: &str) -> Result<i64, LedgerError> {
    opt_n(item, name)?.ok_or_else(|| corrupt(name, "is missing"))
}

pub(crate) fn opt_time(item: &Item, name: &str) -> Result<Option<DateTime<Utc>>, LedgerError> {
    opt_n(item, name)?
        .map(|ms| Utc.timestamp_millis_opt(ms).single().ok_or_else(|| corrupt(name, "is out of range")))
        .transpose()
}

pub(crate) fn get_time(item: &Item, name: &str) -> Result<DateTime<Utc>, LedgerError> {
    opt_time(item, name)?.ok_or_else(|| corrupt(name, "is missing"))
}
