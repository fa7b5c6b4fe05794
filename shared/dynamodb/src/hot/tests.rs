use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::json;

use super::*;

fn response(status: u16, headers: &[(&'static str, &'static str)], body: &str) -> Response {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.insert(*name, HeaderValue::from_static(value));
    }
    Response {
        status: StatusCode::from_u16(status).unwrap_or(StatusCode::IM_A_TEAPOT),
        headers: map,
        body: Bytes::from(body.to_owned()),
    }
}

fn sample_item() -> Item {
    HashMap::from([
        ("notice_key".to_owned(), AttributeValue::S("ab12".into())),
        ("revision".to_owned(), AttributeValue::N("3".into())),
        ("dups".to_owned(), AttributeValue::L(vec![AttributeValue::S("m1".into())])),
        ("gone".to_owned(), AttributeValue::Null(true)),
        ("flag".to_owned(), AttributeValue::Bool(false)),
        (
            "nested".to_owned(),
            AttributeValue::M(HashMap::from([("x".to_owned(), AttributeValue::Ns(vec!["1".into()]))])),
        ),
        ("raw".to_owned(), AttributeValue::B(Blob::new(b"hi".to_vec()))),
        ("tags".to_owned(), AttributeValue::Ss(vec!["a".into(), "b".into()])),
    ])
}

#[test]
fn items_round_trip_through_dynamodb_json() {
    let item = sample_item();
    let json = serde_json::to_value(ItemJson(&item)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(json["notice_key"], json!({"S": "ab12"}));
    assert_eq!(json["revision"], json!({"N": "3"}));
    assert_eq!(json["dups"], json!({"L": [{"S": "m1"}]}));
    assert_eq!(json["gone"], json!({"NULL": true}));
    assert_eq!(json["raw"], json!({"B": "aGk="}));
    assert_eq!(item_from_json(&json), Ok(item));
}

#[test]
fn malformed_items_are_errors() {
    assert!(item_from_json(&json!({"a": {"S": 1}})).is_err());
    assert!(item_from_json(&json!({"a": {"S": "x", "N": "1"}})).is_err());
    assert!(item_from_json(&json!({"a": {"Q": "x"}})).is_err());
    assert!(item_from_json(&json!(["a"])).is_err());
}

#[test]
fn put_item_body_is_the_protocol_shape() {
    let item = HashMap::from([("k".to_owned(), AttributeValue::S("v".into()))]);
    let names = HashMap::from([("#s".to_owned(), "state".to_owned())]);
    let values = HashMap::from([(":r".to_owned(), AttributeValue::S("released".into()))]);
    let body = PutItem {
        table_name: "t",
        item: ItemJson(&item),
        condition_expression: "#s = :r",
        expression_attribute_names: Some(&names),
        expression_attribute_values: Some(ItemJson(&values)),
        return_values_on_condition_check_failure: "ALL_OLD",
    };
    assert_eq!(
        serde_json::to_value(&body).unwrap_or_else(|e| panic!("{e}")),
        json!({"TableName": "t", "Item": {"k": {"S": "v"}}, "ConditionExpression": "#s = :r",
            "ExpressionAttributeNames": {"#s": "state"}, "ExpressionAttributeValues": {":r": {"S": "released"}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"})
    );
    let empty = HashMap::new();
    let body = UpdateItem {
        table_name: "t",
        key: ItemJson(&item),
        update_expression: "SET a = b",
        condition_expression: "c",
        expression_attribute_names: (!empty.is_empty()).then_some(&empty),
        expression_attribute_values: None,
        return_values: None,
        return_values_on_condition_check_failure: "ALL_OLD",
    };
    let json = serde_json::to_value(&body).unwrap_or_else(|e| panic!("{e}"));
    assert!(json.get("ExpressionAttributeNames").is_none(), "DynamoDB rejects empty maps: {json}");
    assert!(json.get("ReturnValues").is_none(), "{json}");
    assert_eq!(json["Key"], json!({"k": {"S": "v"}}));
    let returning = UpdateItem { return_values: Some("UPDATED_NEW"), ..body };
    let json = serde_json::to_value(&returning).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(json["ReturnValues"], "UPDATED_NEW");
}

#[test]
fn success_applies() {
    assert!(classify(&response(200, &[], "{}")).failure.is_none());
}

#[test]
fn failed_condition_returns_the_held_item() {
    let body = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed","Item":{"notice_key":{"S":"ab12"},"state":{"S":"claimed"}}}"#;
    let v = classify(&response(400, &[], body));
    assert!(!v.retry);
    let Some(HotFailure::Condition(Some(item))) = v.failure else { panic!("{v:?}") };
    assert_eq!(item.get("state"), Some(&AttributeValue::S("claimed".into())));
    // Without ALL_OLD honoured: the condition failed, no item.
    let body = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException"}"#;
    assert!(matches!(classify(&response(400, &[], body)).failure, Some(HotFailure::Condition(None))));
}

#[test]
fn throttling_and_server_errors_retry() {
    let body = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow"}"#;
    let v = classify(&response(400, &[], body));
    assert!(v.retry && v.throttled, "{v:?}");
    let v =
        classify(&response(400, &[], r#"{"__type":"com.amazon.coral.availability#ThrottlingException"}"#));
    assert!(v.retry && v.throttled, "{v:?}");
    let v = classify(&response(500, &[], r#"{"__type":"com.amazon.coral.service#InternalFailure"}"#));
    assert!(v.retry && !v.throttled, "{v:?}");
    let v = classify(&response(503, &[], "<html>unavailable</html>"));
    assert!(v.retry, "an unreadable 5xx is transient: {v:?}");
}

#[test]
fn client_errors_do_not_retry() {
    let body = r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"bad expression"}"#;
    let v = classify(&response(400, &[], body));
    assert!(!v.retry, "{v:?}");
    let Some(HotFailure::Other(_, text)) = v.failure else { panic!("{v:?}") };
    assert!(text.contains("ValidationException") && text.contains("bad expression"), "{text}");
    let v = classify(&response(
        400,
        &[],
        r#"{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException"}"#,
    ));
    assert!(!v.retry, "{v:?}");
    let v = classify(&response(403, &[("x-amzn-ErrorType", "AccessDeniedException:")], "garbage"));
    assert!(!v.retry, "{v:?}");
    let Some(HotFailure::Other(_, text)) = v.failure else { panic!("{v:?}") };
    assert!(text.contains("AccessDeniedException"), "{text}");
}

/// A server answering each request (one per connection, as moto does) with the next reply;
/// returns its address and the request count.
async fn scripted(replies: Vec<&'static str>) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        for reply in replies {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let mut buf = vec![0u8; 65536];
            let mut got = Vec::new();
            // Headers, then the Content-Length body.
            loop {
                let n = socket.read(&mut buf).await.unwrap_or(0);
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text
                        .lines()
                        .find_map(|l| {
                            l.strip_prefix("content-length: ").and_then(|v| v.trim().parse::<usize>().ok())
                        })
                        .unwrap_or(0);
                    if got.len() >= end + 4 + len {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            seen.fetch_add(1, Ordering::SeqCst);
            let head = format!(
                "HTTP/1.1 {}\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                reply.split_once('|').map_or("200 OK", |(h, _)| h),
                reply.split_once('|').map_or(reply, |(_, b)| b).len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(reply.split_once('|').map_or(reply, |(_, b)| b).as_bytes()).await;
        }
    });
    (format!("http://{addr}"), count)
}

fn hot_at(endpoint: &str, attempts: u32) -> HotWrites {
    let creds = aws_credential_types::Credentials::new("AKID", "secret", Some("token".into()), None, "test");
    let http = AwsHttp::new(
        Some(aws_credential_types::provider::SharedCredentialsProvider::new(creds)),
        Duration::from_secs(3),
    );
    HotWrites::new(http, Some("us-east-1"), false, false, Some(endpoint))
        .unwrap_or_else(|e| panic!("{e}"))
        .with_retries(attempts, Duration::from_millis(5))
}

fn one_item() -> Item {
    HashMap::from([("notice_key".to_owned(), AttributeValue::S("ab".into()))])
}

#[tokio::test]
async fn server_errors_are_retried_until_one_applies() {
    let (endpoint, count) = scripted(vec![
        "500 Internal Server Error|{\"__type\":\"com.amazon.coral.service#InternalFailure\"}",
        "400 Bad Request|{\"__type\":\"com.amazonaws.dynamodb.v20120810#ThrottlingException\"}",
        "200 OK|{}",
    ])
    .await;
    let hot = hot_at(&endpoint, 3);
    let result =
        hot.put_item("t", &one_item(), "attribute_not_exists(#k)", &HashMap::new(), &HashMap::new()).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn retries_stop_at_max_attempts_and_a_failed_condition_is_final() {
    let (endpoint, count) =
        scripted(vec!["503 Service Unavailable|{}", "503 Service Unavailable|{}", "200 OK|{}"]).await;
    let result = hot_at(&endpoint, 2)
        .update_item("t", &one_item(), "SET a = :a", "b", &HashMap::new(), &HashMap::new())
        .await;
    assert!(matches!(result, Err(HotFailure::Other(_, ref t)) if t.contains("503")), "{result:?}");
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 2);

    let ccf = "400 Bad Request|{\"__type\":\"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException\",\"Item\":{\"notice_key\":{\"S\":\"ab\"}}}";
    let (endpoint, count) = scripted(vec![ccf, "200 OK|{}"]).await;
    let result = hot_at(&endpoint, 3).put_item("t", &one_item(), "c", &HashMap::new(), &HashMap::new()).await;
    assert!(
        matches!(result, Err(HotFailure::Condition(Some(ref item))) if item == &one_item()),
        "{result:?}"
    );
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn backoff_is_bounded_and_grows() {
    let http = AwsHttp::new(None, Duration::from_secs(3));
    let hot = HotWrites::new(http, Some("us-east-1"), false, false, None)
        .unwrap_or_else(|e| panic!("{e}"))
        .with_retries(5, Duration::from_millis(100));
    for attempt in 1..=40 {
        assert!(hot.backoff(attempt) <= MAX_BACKOFF);
    }
    assert!(hot.backoff(1) <= Duration::from_millis(100));
}

#[test]
fn endpoints_resolve_like_the_sdk() {
    let http = AwsHttp::new(None, Duration::from_secs(3));
    let regional =
        HotWrites::new(http.clone(), Some("eu-west-1"), false, false, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        regional.endpoint().map(ToString::to_string).as_deref(),
        Some("https://dynamodb.eu-west-1.amazonaws.com/")
    );
    let fips =
        HotWrites::new(http.clone(), Some("us-east-1"), true, false, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fips.endpoint().and_then(|u| u.host()), Some("dynamodb-fips.us-east-1.amazonaws.com"));
    let local = HotWrites::new(http.clone(), Some("us-east-1"), false, false, Some("http://127.0.0.1:5000"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(local.endpoint().map(ToString::to_string).as_deref(), Some("http://127.0.0.1:5000/"));
    assert!(HotWrites::new(http, None, false, false, None).is_err(), "no region, no endpoint");
}

#[test]
fn batch_get_body_and_answer_are_the_protocol_shape() {
    let keys = vec![one_item()];
    let body = BatchGetItem {
        request_items: HashMap::from([("notices", KeysJson { keys: &keys, consistent_read: true })]),
    };
    let json = serde_json::to_value(&body).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        json,
        json!({"RequestItems": {"notices": {"Keys": [{"notice_key": {"S": "ab"}}], "ConsistentRead": true}}})
    );
    let answer = json!({"Responses": {"notices": [{"notice_key": {"S": "ab"}, "state": {"S": "sent"}}]},
                        "UnprocessedKeys": {"notices": {"Keys": [{"notice_key": {"S": "cd"}}], "ConsistentRead": true}}});
    let (found, unprocessed) =
        batch_get_answer(answer.to_string().as_bytes(), "notices").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].get("state"), Some(&AttributeValue::S("sent".into())));
    assert_eq!(unprocessed, vec![HashMap::from([("notice_key".to_owned(), AttributeValue::S("cd".into()))])]);
    let (found, unprocessed) =
        batch_get_answer(br#"{"Responses":{"notices":[]},"UnprocessedKeys":{}}"#, "notices")
            .unwrap_or_else(|e| panic!("{e}"));
    assert!(found.is_empty() && unprocessed.is_empty());
    assert!(batch_get_answer(br#"{"Responses":{"notices":{}}}"#, "notices").is_err(), "not a list");
    assert!(batch_get_answer(b"<html>", "notices").is_err());
}

#[tokio::test]
async fn a_throttled_batch_read_is_retried() {
    let found = "200 OK|{\"Responses\":{\"t\":[{\"notice_key\":{\"S\":\"ab\"}}]},\"UnprocessedKeys\":{}}";
    let (endpoint, count) = scripted(vec![
        "400 Bad Request|{\"__type\":\"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException\"}",
        found,
    ])
    .await;
    let (items, unprocessed) =
        hot_at(&endpoint, 3).batch_get_item("t", &[one_item()]).await.unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!((items, unprocessed.len()), (vec![one_item()], 0));
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[test]
fn transaction_body_is_the_protocol_shape() {
    let names = HashMap::from([("#s".to_owned(), "state".to_owned())]);
    let values = HashMap::from([(":a".to_owned(), AttributeValue::S("alias".into()))]);
    let (none, no_values) = (HashMap::new(), Item::new());
    let puts = [
        TransactPut {
            item: one_item(),
            condition: "attribute_not_exists(#k)",
            names: &none,
            values: &no_values,
        },
        TransactPut { item: one_item(), condition: "#s = :a", names: &names, values: &values },
    ];
    let body = TransactWriteItems {
        transact_items: puts
            .iter()
            .map(|put| TransactItem { put: TransactPutJson { table_name: "t", put } })
            .collect(),
        client_request_token: "tok",
    };
    let json = serde_json::to_value(&body).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        json,
        json!({"TransactItems": [
            {"Put": {"TableName": "t", "Item": {"notice_key": {"S": "ab"}},
                     "ConditionExpression": "attribute_not_exists(#k)",
                     "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
            {"Put": {"TableName": "t", "Item": {"notice_key": {"S": "ab"}}, "ConditionExpression": "#s = :a",
                     "ExpressionAttributeNames": {"#s": "state"},
                     "ExpressionAttributeValues": {":a": {"S": "alias"}},
                     "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}],
            "ClientRequestToken": "tok"})
    );
}

/// What DynamoDB answers a cancelled transaction: a reason per action, in the request's order;
/// the one whose condition failed carries the item it was checked against.
const CANCELLED_ON_THE_ALIAS: &str = r#"{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]","CancellationReasons":[{"Code":"None"},{"Code":"ConditionalCheckFailed","Message":"The conditional request failed","Item":{"notice_key":{"S":"ab"},"state":{"S":"sent"}}}]}"#;

#[test]
fn cancellation_reasons_say_which_action_failed_its_condition() {
    let Some(Ok((reasons, message))) = cancellation(CANCELLED_ON_THE_ALIAS.as_bytes()) else {
        panic!("not read as a cancellation")
    };
    assert!(message.contains("[None, ConditionalCheckFailed]"), "{message}");
    assert_eq!(reasons.len(), 2);
    assert_eq!((reasons[0].code.as_deref(), reasons[0].item.as_ref()), (Some("None"), None));
    assert_eq!(reasons[1].code.as_deref(), Some("ConditionalCheckFailed"));
    let held = reasons[1].item.as_ref().unwrap_or_else(|| panic!("no item"));
    assert_eq!(held.get("state"), Some(&AttributeValue::S("sent".into())));
    // Another error is no cancellation; a malformed one is an error, never "no reasons".
    let other = br#"{"__type":"com.amazonaws.dynamodb.v20120810#ValidationException"}"#;
    assert!(cancellation(other).is_none());
    assert!(cancellation(b"").is_none());
    let bad = br#"{"__type":"x#TransactionCanceledException","CancellationReasons":{"Code":"None"}}"#;
    assert!(matches!(cancellation(bad), Some(Err(_))));
}

#[tokio::test]
async fn a_cancelled_transaction_is_final_and_answers_its_reasons() {
    let reply: &'static str = Box::leak(format!("400 Bad Request|{CANCELLED_ON_THE_ALIAS}").into_boxed_str());
    let (endpoint, count) = scripted(vec![reply, "200 OK|{}"]).await;
    let (none, no_values) = (HashMap::new(), Item::new());
    let puts = [
        TransactPut { item: one_item(), condition: "a", names: &none, values: &no_values },
        TransactPut { item: one_item(), condition: "b", names: &none, values: &no_values },
    ];
    let result = hot_at(&endpoint, 3).transact_put_items("t", &puts).await;
    let Err(TransactFailure::Cancelled { reasons, .. }) = result else { panic!("{result:?}") };
    assert_eq!(
        reasons.iter().map(|r| r.code.as_deref()).collect::<Vec<_>>(),
        [Some("None"), Some("ConditionalCheckFailed")]
    );
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1, "never retried");

    // A server error is retried; the answer that applies ends it.
    let (endpoint, count) = scripted(vec!["500 Internal Server Error|{}", "200 OK|{}"]).await;
    assert!(hot_at(&endpoint, 3).transact_put_items("t", &puts).await.is_ok());
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_single_read_answers_the_item_or_none() {
    let (endpoint, _) = scripted(vec![
        "200 OK|{\"Item\":{\"notice_key\":{\"S\":\"ab\"}}}",
        "200 OK|{}",
        "400 Bad Request|{\"__type\":\"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException\"}",
    ])
    .await;
    let hot = hot_at(&endpoint, 1);
    assert_eq!(hot.get_item("t", &one_item()).await.unwrap_or_else(|e| panic!("{e:?}")), Some(one_item()));
    assert_eq!(hot.get_item("t", &one_item()).await.unwrap_or_else(|e| panic!("{e:?}")), None);
    let failed = hot.get_item("t", &one_item()).await;
    assert!(
        matches!(failed, Err(HotFailure::Other(_, ref t)) if t.contains("ResourceNotFound")),
        "{failed:?}"
    );
}

#[tokio::test]
async fn an_unusable_client_fails_every_call_with_its_reason() {
    let http = AwsHttp::new(None, Duration::from_secs(3));
    let Err(e) = HotWrites::new(http.clone(), None, false, false, None) else { panic!("no region resolved") };
    let hot = HotWrites::unusable(http, &e);
    assert_eq!(hot.endpoint(), None);
    let result = hot.put_item("t", &one_item(), "c", &HashMap::new(), &HashMap::new()).await;
    assert!(matches!(result, Err(HotFailure::Other(_, ref t)) if t.contains("no region")), "{result:?}");
    let result = hot.transact_put_items("t", &[]).await;
    assert!(matches!(result, Err(TransactFailure::Other(_, ref t)) if t.contains("no region")), "{result:?}");
}

/// The fault comes from the typed answer: the error code, the transport's I/O error kind, the
/// operation refused — never from the message's words.
#[tokio::test]
async fn a_failure_carries_its_fault() {
    let (endpoint, _) = scripted(vec![
        "400 Bad Request|{\"__type\":\"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException\",\"message\":\"slow\"}",
        "400 Bad Request|{\"__type\":\"com.amazon.coral.service#AccessDeniedException\",\"message\":\"no\"}",
        "400 Bad Request|{\"__type\":\"com.amazon.coral.service#ExpiredTokenException\",\"message\":\"old\"}",
    ])
    .await;
    let hot = hot_at(&endpoint, 1);
    let throttled = hot.get_item("t", &one_item()).await;
    assert!(matches!(throttled, Err(HotFailure::Other(Fault::Throttled, _))), "{throttled:?}");
    let denied = hot.get_item("t", &one_item()).await;
    let action = Some("dynamodb:GetItem".to_owned());
    assert!(
        matches!(denied, Err(HotFailure::Other(Fault::Denied { action: ref a }, _)) if *a == action),
        "{denied:?}"
    );
    let expired = hot.get_item("t", &one_item()).await;
    assert!(matches!(expired, Err(HotFailure::Other(Fault::ExpiredCredentials, _))), "{expired:?}");

    // Nothing listens on port 1: the connection is refused.
    let closed = hot_at("http://127.0.0.1:1", 1);
    let refused = closed.get_item("t", &one_item()).await;
    assert!(
        matches!(refused, Err(HotFailure::Other(Fault::Unreachable("connection refused"), _))),
        "{refused:?}"
    );
}
