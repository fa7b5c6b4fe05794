//! The JSON bodies of the calls and of their answers, as DynamoDB's protocol (`awsJson1_0`)
//! defines them: items and attribute values as typed one-key objects, serialised straight from the
//! SDK's `AttributeValue` and read back into it.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use serde::ser::{Error as _, SerializeMap};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::{CancellationReason, TransactPut};
use crate::item::Item;

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct PutItem<'a> {
    pub(super) table_name: &'a str,
    pub(super) item: ItemJson<'a>,
    pub(super) condition_expression: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) expression_attribute_names: Option<&'a HashMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) expression_attribute_values: Option<ItemJson<'a>>,
    pub(super) return_values_on_condition_check_failure: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct UpdateItem<'a> {
    pub(super) table_name: &'a str,
    pub(super) key: ItemJson<'a>,
    pub(super) update_expression: &'a str,
    pub(super) condition_expression: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) expression_attribute_names: Option<&'a HashMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) expression_attribute_values: Option<ItemJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) return_values: Option<&'static str>,
    pub(super) return_values_on_condition_check_failure: &'static str,
}

impl<'a> UpdateItem<'a> {
    /// The request body; empty name or value maps are left out (DynamoDB rejects them). On a
    /// failed condition DynamoDB returns the item it held (`ALL_OLD`).
    pub(super) fn new(
        table_name: &'a str,
        key: &'a Item,
        update_expression: &'a str,
        condition_expression: &'a str,
        names: &'a HashMap<String, String>,
        values: &'a Item,
        return_values: Option<&'static str>,
    ) -> Self {
        Self {
            table_name,
            key: ItemJson(key),
            update_expression,
            condition_expression,
            expression_attribute_names: (!names.is_empty()).then_some(names),
            expression_attribute_values: (!values.is_empty()).then_some(ItemJson(values)),
            return_values,
            return_values_on_condition_check_failure: "ALL_OLD",
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct BatchGetItem<'a> {
    pub(super) request_items: HashMap<&'a str, KeysJson<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct KeysJson<'a> {
    #[serde(serialize_with = "items_json")]
    pub(super) keys: &'a [Item],
    pub(super) consistent_read: bool,
}

pub(super) fn items_json<S: Serializer>(items: &&[Item], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(items.iter().map(ItemJson))
}

/// A `BatchGetItem` answer for `table`: (items found, keys left unprocessed).
pub(super) fn batch_get_answer(answer: &[u8], table: &str) -> Result<(Vec<Item>, Vec<Item>), String> {
    let parsed: Value = serde_json::from_slice(answer).map_err(|e| e.to_string())?;
    let list = |v: Option<&Value>| -> Result<Vec<Item>, String> {
        match v {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items.iter().map(item_from_json).collect(),
            Some(_) => Err("a list of items is not a list".into()),
        }
    };
    let found = list(parsed.get("Responses").and_then(|r| r.get(table)))?;
    let unprocessed =
        list(parsed.get("UnprocessedKeys").and_then(|u| u.get(table)).and_then(|t| t.get("Keys")))?;
    Ok((found, unprocessed))
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct GetItem<'a> {
    pub(super) table_name: &'a str,
    pub(super) key: ItemJson<'a>,
    pub(super) consistent_read: bool,
}

/// A `GetItem` answer: the item, or `None` (an absent key answers `{}`).
pub(super) fn get_answer(answer: &[u8]) -> Result<Option<Item>, String> {
    let parsed: Value = serde_json::from_slice(answer).map_err(|e| e.to_string())?;
    match parsed.get("Item") {
        None | Some(Value::Null) => Ok(None),
        Some(item) => item_from_json(item).map(Some),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct TransactWriteItems<'a> {
    pub(super) transact_items: Vec<TransactItem<'a>>,
    pub(super) client_request_token: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct TransactItem<'a> {
    pub(super) put: TransactPutJson<'a>,
}

/// A transaction's `Put`: as `PutItem`'s body, the table named in each action.
pub(super) struct TransactPutJson<'a> {
    pub(super) table_name: &'a str,
    pub(super) put: &'a TransactPut<'a>,
}

impl Serialize for TransactPutJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let put = self.put;
        PutItem {
            table_name: self.table_name,
            item: ItemJson(&put.item),
            condition_expression: put.condition,
            expression_attribute_names: (!put.names.is_empty()).then_some(put.names),
            expression_attribute_values: (!put.values.is_empty()).then_some(ItemJson(put.values)),
            return_values_on_condition_check_failure: "ALL_OLD",
        }
        .serialize(serializer)
    }
}

/// A `TransactionCanceledException` answer's reasons and message; `None` when the answer is
/// another error. The reasons come in the request's order, one per action.
#[allow(clippy::type_complexity)]
pub(super) fn cancellation(answer: &[u8]) -> Option<Result<(Vec<CancellationReason>, String), String>> {
    let parsed: Value = serde_json::from_slice(answer).ok()?;
    let kind = parsed.get("__type").and_then(Value::as_str)?;
    if kind.rsplit('#').next() != Some("TransactionCanceledException") {
        return None;
    }
    let message = parsed
        .get("message")
        .or_else(|| parsed.get("Message"))
        .and_then(Value::as_str)
        .unwrap_or("no reason given")
        .to_owned();
    let reasons = match parsed.get("CancellationReasons") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .map(|r| {
                let code = r.get("Code").and_then(Value::as_str).map(str::to_owned);
                let item = match r.get("Item") {
                    None | Some(Value::Null) => None,
                    Some(item) => Some(item_from_json(item)?),
                };
                Ok(CancellationReason { code, item })
            })
            .collect::<Result<Vec<_>, String>>(),
        Some(_) => Err("CancellationReasons is not a list".to_owned()),
    };
    Some(reasons.map(|r| (r, message)))
}

/// An item as DynamoDB's JSON: `{"name": {"S": "…"}, …}`.
pub(super) struct ItemJson<'a>(pub(super) &'a Item);

impl Serialize for ItemJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            map.serialize_entry(name, &ValueJson(value))?;
        }
        map.end()
    }
}

/// One attribute value as DynamoDB's JSON: a one-key object naming its type.
pub(super) struct ValueJson<'a>(pub(super) &'a AttributeValue);

impl Serialize for ValueJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let b64 = |b: &Blob| aws_smithy_types::base64::encode(b.as_ref());
        let mut map = serializer.serialize_map(Some(1))?;
        match self.0 {
            AttributeValue::S(s) => map.serialize_entry("S", s)?,
            AttributeValue::N(n) => map.serialize_entry("N", n)?,
            AttributeValue::Bool(b) => map.serialize_entry("BOOL", b)?,
            AttributeValue::Null(b) => map.serialize_entry("NULL", b)?,
            AttributeValue::B(b) => map.serialize_entry("B", &b64(b))?,
            AttributeValue::Ss(v) => map.serialize_entry("SS", v)?,
            AttributeValue::Ns(v) => map.serialize_entry("NS", v)?,
            AttributeValue::Bs(v) => map.serialize_entry("BS", &v.iter().map(b64).collect::<Vec<_>>())?,
            AttributeValue::L(v) => map.serialize_entry("L", &v.iter().map(ValueJson).collect::<Vec<_>>())?,
            AttributeValue::M(m) => map.serialize_entry("M", &ItemJson(m))?,
            _ => return Err(S::Error::custom("an attribute value of a type this client does not know")),
        }
        map.end()
    }
}

/// An item from DynamoDB's JSON.
pub(super) fn item_from_json(value: &Value) -> Result<Item, String> {
    let object = value.as_object().ok_or("an item is not an object")?;
    object.iter().map(|(name, v)| Ok((name.clone(), value_from_json(v)?))).collect()
}

pub(super) fn value_from_json(value: &Value) -> Result<AttributeValue, String> {
    let (kind, inner) = value
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
        .ok_or("an attribute value is not a one-key object")?;
    let text = |v: &Value| v.as_str().map(str::to_owned).ok_or(format!("{kind} value is not a string"));
    let texts = |v: &Value| -> Result<Vec<String>, String> {
        v.as_array().ok_or(format!("{kind} value is not a list"))?.iter().map(text).collect()
    };
    let blob = |v: &Value| -> Result<Blob, String> {
        let s = v.as_str().ok_or(format!("{kind} value is not a string"))?;
        aws_smithy_types::base64::decode(s).map(Blob::new).map_err(|e| format!("{kind}: {e}"))
    };
    let flag = || inner.as_bool().ok_or(format!("{kind} value is not a boolean"));
    Ok(match kind.as_str() {
        "S" => AttributeValue::S(text(inner)?),
        "N" => AttributeValue::N(text(inner)?),
        "BOOL" => AttributeValue::Bool(flag()?),
        "NULL" => AttributeValue::Null(flag()?),
        "B" => AttributeValue::B(blob(inner)?),
        "SS" => AttributeValue::Ss(texts(inner)?),
        "NS" => AttributeValue::Ns(texts(inner)?),
        "BS" => AttributeValue::Bs(
            inner.as_array().ok_or("BS value is not a list")?.iter().map(blob).collect::<Result<_, _>>()?,
        ),
        "L" => AttributeValue::L(
            inner
                .as_array()
                .ok_or("L value is not a list")?
                .iter()
                .map(value_from_json)
                .collect::<Result<_, _>>()?,
        ),
        "M" => AttributeValue::M(item_from_json(inner)?),
        other => return Err(format!("unknown attribute type {other:?}")),
    })
}
