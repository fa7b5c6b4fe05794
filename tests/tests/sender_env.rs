//! The sender built the way the Lambda builds it: from environment variables only. In its own
//! test binary because it changes the process environment.

use aws_lambda_events::event::sqs::SqsEvent;
use chrono::Utc;
use lambda_runtime::{Context, LambdaEvent};
use notice_e2e::start_moto;
use notice_sender::SenderApp;
use serde_json::json;

const REQUIRED: [&str; 3] = ["NOTICE_TABLE", "NOTICE_KEY_SECRET", "NOTICE_FROM"];

#[tokio::test]
async fn configured_only_through_the_environment_and_refusing_to_start_without_it() {
    let moto = start_moto().await;
    moto.create_ledger_table("env-notices").await;
    moto.verify_email_identity("billing@example.com").await;
    moto.start_recording().await;
    for (k, v) in moto.env_vars() {
        std::env::set_var(k, v);
    }
    std::env::set_var("NOTICE_TABLE", "env-notices");
    std::env::set_var("NOTICE_KEY_SECRET", "env-secret-0123456789");
    std::env::set_var("NOTICE_FROM", "billing@example.com");
    std::env::set_var("NOTICE_CONFIGURATION_SET", "notice-events");

    let app = SenderApp::from_env().await.expect("starts with every required setting");
    let body = json!({"subscription_id": "sub_env", "period_start": "2026-12-01", "kind": "renewal_notice_t72",
        "email": "ada@example.com", "charge_at": (Utc::now() + chrono::Duration::hours(48)).to_rfc3339()});
    let event: SqsEvent =
        serde_json::from_value(json!({"Records": [{"messageId": "m-1", "receiptHandle": "r",
        "body": body.to_string(), "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:reminders", "awsRegion": "us-east-1"}]}))
        .unwrap();
    let resp = notice_sender::handle(&app, LambdaEvent::new(event, Context::default())).await.unwrap();
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    assert_eq!(moto.recorded_send_email_requests().await.len(), 1, "AWS_ENDPOINT_URL reached the emulator");

    for missing in REQUIRED {
        let saved = std::env::var(missing).unwrap();
        std::env::remove_var(missing);
        let err = SenderApp::from_env().await.err().expect("refuses to start");
        assert!(err.to_string().contains(missing), "{err}");
        std::env::set_var(missing, saved);
    }
    std::env::set_var("NOTICE_MODE", "enforcing");
    let err = SenderApp::from_env().await.err().expect("refuses a bad mode");
    assert!(err.to_string().contains("NOTICE_MODE"), "{err}");
    std::env::remove_var("NOTICE_MODE");
    std::env::set_var("NOTICE_WINDOWS", r#"{"jurisdiction_floors_hours":{"BR":80}}"#);
    let err = SenderApp::from_env().await.err().expect("refuses an empty window");
    assert!(err.to_string().contains("empty"), "{err}");
    // A jurisdiction no job can carry would never apply: refused at start-up, naming its path.
    std::env::set_var("NOTICE_WINDOWS", r#"{"jurisdictions":{"us-ca":{"closes_at_least_hours_before":30}}}"#);
    let err = SenderApp::from_env().await.err().expect("refuses a lower-case jurisdiction").to_string();
    assert!(err.contains("`jurisdictions.us-ca`") && err.contains("`US-CA`"), "{err}");
    std::env::remove_var("NOTICE_WINDOWS");
    // A claim lifetime shorter than a send, or past the quarantine cut-off, would misjudge claims.
    for (lifetime, words) in [("5", "NOTICE_SEND_TIMEOUT_SECS"), ("1000", "NOTICE_STALE_AFTER_SECS")] {
        std::env::set_var("NOTICE_CLAIM_LIFETIME_SECS", lifetime);
        let err = SenderApp::from_env().await.err().expect("refuses a bad claim lifetime").to_string();
        assert!(err.contains("NOTICE_CLAIM_LIFETIME_SECS") && err.contains(words), "{lifetime}: {err}");
    }
    std::env::remove_var("NOTICE_CLAIM_LIFETIME_SECS");

    // A secret that a failed fetch left empty, blank or short is refused, never used.
    let saved = std::env::var("NOTICE_KEY_SECRET").unwrap();
    for (value, words) in [("", "empty"), ("   ", "blank"), ("short", "at least 16")] {
        std::env::set_var("NOTICE_KEY_SECRET", value);
        let err = SenderApp::from_env().await.err().expect("refuses a bad secret").to_string();
        assert!(err.contains("NOTICE_KEY_SECRET") && err.contains(words), "{value:?}: {err}");
    }
    // A From with a line break would smuggle a header into every message.
    std::env::set_var("NOTICE_KEY_SECRET", &saved);
    std::env::set_var("NOTICE_FROM", "billing@example.com\r\nBcc: spy@evil.example");
    let err = SenderApp::from_env().await.err().expect("refuses a bad From").to_string();
    assert!(err.contains("NOTICE_FROM"), "{err}");
    std::env::set_var("NOTICE_FROM", "Billing <billing@example.com>");

    // The secret from Secrets Manager (NOTICE_KEY_SECRET_ARN), read once at start: the same keys.
    let secrets = aws_sdk_secretsmanager::Client::new(&moto.sdk_config().await);
    let arn = secrets
        .create_secret()
        .name("notice-ledger/key-secret")
        .secret_string(&saved)
        .send()
        .await
        .unwrap()
        .arn
        .unwrap();
    let blank_arn =
        secrets.create_secret().name("blank").secret_string("  ").send().await.unwrap().arn.unwrap();
    std::env::remove_var("NOTICE_KEY_SECRET");
    std::env::set_var("NOTICE_KEY_SECRET_ARN", &blank_arn);
    let err = SenderApp::from_env().await.err().expect("refuses a blank stored secret").to_string();
    assert!(err.contains("NOTICE_KEY_SECRET_ARN") && err.contains("blank"), "{err}");
    std::env::set_var(
        "NOTICE_KEY_SECRET_ARN",
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing",
    );
    let err = SenderApp::from_env().await.err().expect("refuses a missing secret").to_string();
    assert!(err.contains("NOTICE_KEY_SECRET_ARN"), "{err}");
    std::env::set_var("NOTICE_KEY_SECRET_ARN", &arn);
    let app = SenderApp::from_env().await.expect("starts with the secret from Secrets Manager");
    let loaded = notice_ledger::NoticeSecret::new(saved.clone()).unwrap();
    assert!(!format!("{loaded:?}").contains(&saved), "the secret never prints");
    let expected = notice_ledger::Job::from_value(&body, &notice_texts::Icu)
        .unwrap()
        .key(&notice_ledger::NoticeSecret::new(saved.clone()).unwrap());
    assert_eq!(
        app.sender().key(&notice_ledger::Job::from_value(&body, &notice_texts::Icu).unwrap()),
        expected
    );
    std::env::remove_var("NOTICE_KEY_SECRET_ARN");
    std::env::set_var("NOTICE_KEY_SECRET", &saved);

    // A redirect to one address is refused on a production stack (NOTICE_ENVIRONMENT unset means
    // production) and on an unknown environment; on a staging stack every notice goes there.
    std::env::set_var("NOTICE_REDIRECT_ALL_MAIL_TO", "success@simulator.amazonses.com");
    let err = SenderApp::from_env().await.err().expect("refuses a redirect in production").to_string();
    assert!(
        err.contains("NOTICE_REDIRECT_ALL_MAIL_TO") && err.contains("NOTICE_ENVIRONMENT=staging"),
        "{err}"
    );
    std::env::set_var("NOTICE_ENVIRONMENT", "prod");
    let err = SenderApp::from_env().await.err().expect("refuses an unknown environment").to_string();
    assert!(err.contains("NOTICE_ENVIRONMENT"), "{err}");
    std::env::set_var("NOTICE_ENVIRONMENT", "staging");
    let staging = SenderApp::from_env().await.expect("a staging stack may redirect");
    let mut redirected = body.clone();
    redirected["subscription_id"] = json!("sub_staging");
    let event: SqsEvent =
        serde_json::from_value(json!({"Records": [{"messageId": "m-2", "receiptHandle": "r",
        "body": redirected.to_string(), "attributes": {}, "messageAttributes": {}, "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:reminders", "awsRegion": "us-east-1"}]}))
        .unwrap();
    let resp = notice_sender::handle(&staging, LambdaEvent::new(event, Context::default())).await.unwrap();
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    let sends = moto.recorded_send_email_requests().await;
    let last = sends.last().expect("a send");
    assert_eq!(last["Destination"]["ToAddresses"], json!(["success@simulator.amazonses.com"]), "{last:#}");
    std::env::remove_var("NOTICE_REDIRECT_ALL_MAIL_TO");
    std::env::remove_var("NOTICE_ENVIRONMENT");
}
