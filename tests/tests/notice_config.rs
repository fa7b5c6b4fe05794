//! The published notice configuration on the emulator, as a deployed sender meets it: published
//! and pointed at with the operator's path, loaded and checked at start through the lean reader,
//! switched by a running sender after a new publish (the claim rows say which version each notice
//! went out under), and every way the pointer or the object can be wrong refusing the start — never
//! the built-in texts instead. A version that fails to load at a refresh leaves the current one in
//! force and is counted.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use chrono::Utc;
use notice_configstore::{point, publish, ConfigLocation};
use notice_e2e::sender_app::{self, app_with, batch, invoke, key_of, settings};
use notice_ledger::ledger::RowReader;
use notice_sender::SenderApp;
use notice_setup::notices::{load_published, ConfigSpec, ConfigWatch};
use notice_texts::notices::{Bundle, ConfigVersion};
use serde_json::{json, Value};

const BUCKET: &str = "acme-notice-config";
const PARAMETER: &str = "/notice-ledger/notice-config";

fn example() -> PathBuf {
    notice_e2e::workspace_root().join("examples/notices-de")
}

/// The example with its German shared subject replaced: a second version.
fn second_version() -> Bundle {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&example(), dir.path());
    std::fs::write(
        dir.path().join("templates/de.subject.txt"),
        "Erinnerung: Ihr Abo verlängert sich am {{ charge_date }}\n",
    )
    .expect("write");
    Bundle::from_dir(dir.path()).expect("bundle")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("templates")).expect("mkdir");
    for f in ["manifest.json", "windows.json"] {
        std::fs::copy(from.join(f), to.join(f)).expect("copy");
    }
    for e in std::fs::read_dir(from.join("templates")).expect("read templates") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join("templates").join(e.file_name())).expect("copy");
    }
}

async fn bucket(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let s3 =
        aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(sdk).force_path_style(true).build());
    s3.create_bucket().bucket(BUCKET).send().await.expect("bucket");
    s3
}

async fn publish_and_point(sdk: &aws_config::SdkConfig, bundle: &Bundle) -> ConfigLocation {
    let version = bundle.version();
    let location = publish(sdk, BUCKET, &bundle.to_published(), version.hex()).await.expect("publish");
    point(sdk, PARAMETER, &location).await.expect("point");
    location
}

fn german_job(sub: &str) -> Value {
    json!({"subscription_id": sub, "period_start": "2026-12-01", "kind": "renewal_notice_t72",
        "email": format!("{sub}@example.de"), "charge_at": (Utc::now() + chrono::Duration::hours(48)).to_rfc3339(),
        "locale": "de-DE", "time_zone": "Europe/Berlin",
        "template_data": {"plan_name": "Kaffee-Abo", "amount": {"minor": 2900, "currency": "EUR"}}})
}

/// A sender over the harness's queue and ledger, with the published configuration it loaded.
async fn sender(env: &sender_app::Env, sdk: &aws_config::SdkConfig) -> (SenderApp, ConfigVersion) {
    let spec = ConfigSpec::Parameter(PARAMETER.into());
    let (config, location) = load_published(sdk, &spec).await.expect("the published version loads");
    let version = config.version().clone();
    let mut s = settings(env, false);
    s.send.policy = config.policy().clone();
    s.send.renderer = Arc::new(s.send.renderer.with_config(Arc::new(config)));
    // Every batch looks the pointer up again (a deployed sender: NOTICE_CONFIG_REFRESH_SECS).
    let watch = ConfigWatch::new(sdk, spec, location, Duration::ZERO).expect("watch");
    (app_with(env, s, None).await.with_config_watch(Some(watch)), version)
}

async fn rendered_version(env: &sender_app::Env, body: &Value) -> String {
    let row = sender_app::ledger(env).await.get(&key_of(body)).await.expect("read").expect("a row");
    row.rendered.expect("the claim records the rendering").config_version
}

#[tokio::test]
async fn a_running_sender_switches_to_a_newly_published_version() {
    let env = sender_app::env().await;
    let sdk = env.moto.sdk_config().await;
    bucket(&sdk).await;
    let first = Bundle::from_dir(&example()).expect("example");
    publish_and_point(&sdk, &first).await;
    let (app, loaded) = sender(&env, &sdk).await;
    assert_eq!(loaded, first.version());

    let one = german_job("sub_v1");
    invoke(&app, batch(&env, &[one.to_string()]).await).await;
    assert_eq!(rendered_version(&env, &one).await, first.version().to_string());

    let second = second_version();
    publish_and_point(&sdk, &second).await;
    let two = german_job("sub_v2");
    invoke(&app, batch(&env, &[two.to_string()]).await).await;
    assert_eq!(rendered_version(&env, &two).await, second.version().to_string());

    let sent = env.moto.recorded_send_email_requests().await;
    let subjects: Vec<String> = sent
        .iter()
        .filter_map(|r| r.pointer("/Content/Simple/Subject/Data").and_then(Value::as_str).map(str::to_owned))
        .collect();
    assert!(subjects.iter().any(|s| s.starts_with("Ihr Abo „Kaffee-Abo“")), "{subjects:?}");
    assert!(subjects.iter().any(|s| s.starts_with("Erinnerung:")), "{subjects:?}");

    // A pointer to an object that is not what its name says: the current version stays, counted.
    let fake = format!("notice-config/{}.json", "ab".repeat(32));
    let s3 =
        aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&sdk).force_path_style(true).build());
    s3.put_object().bucket(BUCKET).key(&fake).body(ByteStream::from_static(b"{}")).send().await.expect("put");
    aws_sdk_ssm::Client::new(&sdk)
        .put_parameter()
        .name(PARAMETER)
        .value(format!("s3://{BUCKET}/{fake}"))
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .expect("point at the fake");
    let three = german_job("sub_v3");
    let event = batch(&env, &[three.to_string()]).await;
    let (_, documents) = notice_sender::handle_batch(
        &app,
        lambda_runtime::LambdaEvent::new(event, lambda_runtime::Context::default()),
    )
    .await;
    assert_eq!(
        rendered_version(&env, &three).await,
        second.version().to_string(),
        "the current version stays"
    );
    let failed: u64 =
        documents.iter().filter_map(|d| d.get("ConfigRefreshFailed").and_then(Value::as_u64)).sum();
    assert_eq!(failed, 1, "{documents:?}");
}

#[tokio::test]
async fn a_start_refuses_a_missing_corrupted_or_unchecked_version() {
    let moto = notice_e2e::start_moto().await;
    let sdk = moto.sdk_config().await;
    let s3 = bucket(&sdk).await;
    let spec = ConfigSpec::Parameter(PARAMETER.into());

    let missing = load_published(&sdk, &spec).await.expect_err("no parameter yet");
    assert!(missing.to_string().contains(PARAMETER), "{missing}");

    // The object under a version's name, but other bytes.
    let good = Bundle::from_dir(&example()).expect("example");
    let location = publish_and_point(&sdk, &good).await;
    let mut bytes = good.to_published();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    s3.put_object()
        .bucket(BUCKET)
        .key(location.key())
        .body(ByteStream::from(bytes))
        .send()
        .await
        .expect("overwrite behind publish's back");
    let corrupted = load_published(&sdk, &spec).await.expect_err("digest mismatch");
    assert!(corrupted.to_string().contains("not the version"), "{corrupted}");

    // A version whose digest is right but whose texts fail the check (published by hand).
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&example(), dir.path());
    std::fs::write(dir.path().join("templates/de.body.txt"), "Hallo {{ kunde }}\n{{ manage_url }}\n")
        .expect("write");
    let broken = Bundle::from_dir(dir.path()).expect("bundle");
    let hex = broken.version().hex().to_owned();
    let key = format!("notice-config/{hex}.json");
    s3.put_object()
        .bucket(BUCKET)
        .key(&key)
        .body(ByteStream::from(broken.to_published()))
        .send()
        .await
        .expect("put");
    let object = ConfigSpec::Object(format!("s3://{BUCKET}/{key}"));
    let unchecked = load_published(&sdk, &object).await.expect_err("fails its check");
    let text = unchecked.to_string();
    assert!(
        text.contains("fails its check") && text.contains("templates/de.body.txt") && text.contains("kunde"),
        "{text}"
    );
}
