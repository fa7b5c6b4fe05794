//! The notice configuration store against moto: the operator publishes and points through the
//! SDK, the sender reads through the lean client, and every way the pointer or the object can be
//! wrong comes back as its own error naming the culprit.

use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_ssm::types::ParameterType;
use notice_awshttp::AwsHttp;
use notice_configstore::{
    point, publish, sha256_hex, ConfigLocation, ConfigStore, StoreError, DEFAULT_TIMEOUT,
};
use notice_e2e::{start_moto, Moto, REGION};

const BUCKET: &str = "notice-config-bucket";
const PARAMETER: &str = "/notice-ledger/config";

struct Stage {
    moto: Moto,
    sdk: aws_config::SdkConfig,
    store: ConfigStore,
}

/// A moto server with the bucket, and the sender's reader built as the Lambda builds it.
async fn stage() -> Stage {
    let moto = start_moto().await;
    let sdk = moto.sdk_config().await;
    let s3 =
        aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&sdk).force_path_style(true).build());
    s3.create_bucket().bucket(BUCKET).send().await.expect("bucket");
    let http = AwsHttp::new(sdk.credentials_provider(), Duration::from_secs(3));
    let store = ConfigStore::new(
        http,
        Some(REGION),
        false,
        false,
        Some(moto.endpoint()),
        Some(moto.endpoint()),
        DEFAULT_TIMEOUT,
    )
    .expect("the emulator is a usable endpoint");
    Stage { moto, sdk, store }
}

fn config(text: &str) -> (Vec<u8>, String) {
    let bytes = format!(r#"{{"texts":{{"renewal_notice_t72":"{text}"}}}}"#).into_bytes();
    let hex = sha256_hex(&bytes);
    (bytes, hex)
}

async fn raw_pointer(stage: &Stage, value: &str) {
    aws_sdk_ssm::Client::new(&stage.sdk)
        .put_parameter()
        .name(PARAMETER)
        .value(value)
        .r#type(ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .expect("put parameter");
}

#[tokio::test]
async fn a_published_version_reaches_the_sender_byte_for_byte() {
    let stage = stage().await;
    let (bytes, hex) = config("v1");
    let loc = publish(&stage.sdk, BUCKET, &bytes, &hex).await.expect("publish");
    assert_eq!(loc.to_string(), format!("s3://{BUCKET}/notice-config/{hex}.json"));
    assert_eq!(
        point(&stage.sdk, PARAMETER, &loc).await.expect("point"),
        None,
        "first pointer: nothing before"
    );

    let read = stage.store.read_pointer(PARAMETER).await.expect("read pointer");
    assert_eq!(read, loc);
    assert_eq!(stage.store.fetch(&read).await.expect("fetch"), bytes, "{}", stage.moto.log());

    // Moving the pointer reports where it was.
    let (bytes2, hex2) = config("v2");
    let loc2 = publish(&stage.sdk, BUCKET, &bytes2, &hex2).await.expect("publish v2");
    assert_eq!(point(&stage.sdk, PARAMETER, &loc2).await.expect("point v2"), Some(loc));
    assert_eq!(stage.store.read_pointer(PARAMETER).await.expect("read pointer"), loc2);
}

#[tokio::test]
async fn publishing_the_same_version_twice_is_fine_but_never_rewrites_it() {
    let stage = stage().await;
    let (bytes, hex) = config("same");
    let first = publish(&stage.sdk, BUCKET, &bytes, &hex).await.expect("publish");
    let again = publish(&stage.sdk, BUCKET, &bytes, &hex).await.expect("publish the same version again");
    assert_eq!(first, again);
    // Bytes that are not the version named are refused before anything is written.
    let err = publish(&stage.sdk, BUCKET, b"other bytes", &hex).await.expect_err("wrong bytes for the name");
    assert!(matches!(err, StoreError::DigestMismatch { .. }), "{err}");
    assert_eq!(stage.store.fetch(&first).await.expect("fetch"), bytes);
}

#[tokio::test]
async fn a_pointer_to_a_missing_object_is_reported_missing() {
    let stage = stage().await;
    let (_, hex) = config("never published");
    let loc = ConfigLocation::published(BUCKET, &hex).expect("location");
    raw_pointer(&stage, &loc.to_string()).await;
    let read = stage.store.read_pointer(PARAMETER).await.expect("read pointer");
    let err = stage.store.fetch(&read).await.expect_err("nothing there");
    assert!(matches!(err, StoreError::ObjectMissing { .. }), "{err:?}");
    assert!(err.to_string().contains(&loc.to_string()), "{err}");
    // The operator cannot point at it either.
    let err = point(&stage.sdk, PARAMETER, &loc).await.expect_err("point refuses a missing object");
    assert!(matches!(err, StoreError::ObjectMissing { .. }), "{err:?}");
}

#[tokio::test]
async fn a_corrupted_object_is_a_digest_mismatch() {
    let stage = stage().await;
    let (_, hex) = config("the real one");
    let loc = ConfigLocation::published(BUCKET, &hex).expect("location");
    // Someone uploads other bytes under a valid version name, bypassing `publish`.
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&stage.sdk).force_path_style(true).build(),
    );
    s3.put_object()
        .bucket(BUCKET)
        .key(loc.key())
        .body(ByteStream::from_static(b"{\"tampered\":true}"))
        .send()
        .await
        .expect("raw put");
    let err = stage.store.fetch(&loc).await.expect_err("wrong bytes");
    match &err {
        StoreError::DigestMismatch { location, actual } => {
            assert_eq!((location, actual.as_str()), (&loc, sha256_hex(b"{\"tampered\":true}").as_str()))
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains(&loc.to_string()), "{err}");
    let err = point(&stage.sdk, PARAMETER, &loc).await.expect_err("point refuses a corrupted object");
    assert!(matches!(err, StoreError::DigestMismatch { .. }), "{err:?}");
}

#[tokio::test]
async fn a_missing_parameter_is_reported_missing() {
    let stage = stage().await;
    let err = stage.store.read_pointer("/notice-ledger/nothing-here").await.expect_err("no parameter");
    assert!(matches!(err, StoreError::ParameterMissing { .. }), "{err:?}");
    assert!(err.to_string().contains("/notice-ledger/nothing-here"), "{err}");
}

#[tokio::test]
async fn a_malformed_pointer_is_a_parse_error_naming_the_parameter() {
    let stage = stage().await;
    raw_pointer(&stage, "s3://notice-config-bucket/notice-config/latest.json").await;
    let err = stage.store.read_pointer(PARAMETER).await.expect_err("not a version name");
    assert!(matches!(err, StoreError::BadPointer { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(PARAMETER) && text.contains("latest.json"), "{text}");
}
