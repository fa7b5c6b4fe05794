//! The harness itself: these fail (never skip) when the emulator cannot be started.

use aws_sdk_dynamodb::types::{KeyType, ProjectionType};
use aws_sdk_sesv2::config::retry::RetryConfig;
use aws_sdk_sesv2::types::{Body, Content, Destination, EmailContent, Message, MessageTag};
use notice_e2e::{start_moto, start_ses_stub, workspace_root, StubReply};

fn simple_email(subject: &str) -> EmailContent {
    EmailContent::builder()
        .simple(
            Message::builder()
                .subject(Content::builder().data(subject).build().expect("subject"))
                .body(
                    Body::builder()
                        .text(Content::builder().data("Your plan renews soon.").build().expect("text"))
                        .build(),
                )
                .build(),
        )
        .build()
}

#[tokio::test]
async fn moto_starts_and_answers_its_api() {
    let moto = start_moto().await;
    assert!(moto.endpoint().starts_with("http://127.0.0.1:"));
    let resp = notice_e2e::http_request(moto.endpoint(), "GET", "/moto-api/", b"")
        .await
        .expect("moto-api reachable");
    assert_eq!(resp.status, 200);
    assert!(workspace_root().join("template.yaml").is_file());
}

/// moto checks no signatures; the harness's front does, as AWS would (`tests/moto_serial.py`), so
/// the sender's own signed requests are held to it. A wrong secret must be refused.
#[tokio::test]
async fn requests_signed_with_a_wrong_secret_are_refused() {
    let moto = start_moto().await;
    let good = moto.sdk_config().await;
    moto.dynamodb().await.list_tables().send().await.expect("the right secret is accepted");
    let wrong = good
        .to_builder()
        .credentials_provider(aws_sdk_dynamodb::config::SharedCredentialsProvider::new(
            aws_sdk_dynamodb::config::Credentials::new("test", "not-the-secret", None, None, "wrong"),
        ))
        .build();
    let err = aws_sdk_dynamodb::Client::new(&wrong).list_tables().send().await.expect_err("refused");
    let text = format!("{}", aws_sdk_dynamodb::error::DisplayErrorContext(&err));
    assert!(text.contains("InvalidSignatureException"), "{text}");
}

#[tokio::test]
async fn ledger_table_follows_template() {
    let moto = start_moto().await;
    moto.create_ledger_table("notices").await;
    let table = moto
        .dynamodb()
        .await
        .describe_table()
        .table_name("notices")
        .send()
        .await
        .expect("describe table")
        .table
        .expect("table description");

    let keys: Vec<_> =
        table.key_schema().iter().map(|k| (k.attribute_name().to_owned(), k.key_type().clone())).collect();
    assert_eq!(keys, vec![("notice_key".to_owned(), KeyType::Hash)]);

    let gsis = table.global_secondary_indexes();
    assert_eq!(gsis.len(), 1, "exactly one GSI: {gsis:?}");
    let open = &gsis[0];
    assert_eq!(open.index_name(), Some("open_claims"));
    let index_keys: Vec<_> =
        open.key_schema().iter().map(|k| (k.attribute_name().to_owned(), k.key_type().clone())).collect();
    assert_eq!(
        index_keys,
        vec![("open_shard".to_owned(), KeyType::Hash), ("open_since".to_owned(), KeyType::Range)]
    );
    assert_eq!(open.projection().and_then(|p| p.projection_type()), Some(&ProjectionType::All));
    let mut defs: Vec<_> = table
        .attribute_definitions()
        .iter()
        .map(|d| format!("{}:{}", d.attribute_name(), d.attribute_type().as_str()))
        .collect();
    defs.sort();
    assert_eq!(defs, ["notice_key:S", "open_shard:S", "open_since:N"]);

    let ttl = moto
        .dynamodb()
        .await
        .describe_time_to_live()
        .table_name("notices")
        .send()
        .await
        .expect("describe ttl");
    assert_eq!(ttl.time_to_live_description().and_then(|d| d.attribute_name()), Some("expires_at"));
}

#[tokio::test]
async fn queues_can_be_created() {
    let moto = start_moto().await;
    let url = moto.create_queue("reminders").await;
    assert!(url.ends_with("/reminders"), "queue url {url}");
}

#[tokio::test]
async fn sesv2_send_is_recorded_with_tags_and_configuration_set() {
    let moto = start_moto().await;
    moto.verify_email_identity("billing@example.com").await;
    moto.create_configuration_set("notice-events").await;
    moto.start_recording().await;

    let out = moto
        .sesv2()
        .await
        .send_email()
        .from_email_address("billing@example.com")
        .destination(Destination::builder().to_addresses("ada@example.com").build())
        .content(simple_email("Your Coffee Box renews on 4 December"))
        .email_tags(
            MessageTag::builder()
                .name("notice_key")
                .value("e2ad6e31e416bca7da293084f79399c22577b04a1704b31a6279d73948d14dca")
                .build()
                .expect("tag"),
        )
        .email_tags(MessageTag::builder().name("kind").value("renewal_notice_t72").build().expect("tag"))
        .configuration_set_name("notice-events")
        .send()
        .await
        .expect("moto accepts a send from a verified identity");
    let message_id = out.message_id().expect("message id").to_owned();

    let recorded = moto.recorded_send_email_requests().await;
    assert_eq!(recorded.len(), 1, "{recorded:#?}");
    let req = &recorded[0];
    assert_eq!(req["ConfigurationSetName"], "notice-events");
    assert_eq!(req["FromEmailAddress"], "billing@example.com");
    assert_eq!(req["Destination"]["ToAddresses"][0], "ada@example.com");
    let tags = req["EmailTags"].as_array().expect("EmailTags");
    assert!(tags.iter().any(|t| t["Name"] == "notice_key"
        && t["Value"] == "e2ad6e31e416bca7da293084f79399c22577b04a1704b31a6279d73948d14dca"));
    assert!(tags.iter().any(|t| t["Name"] == "kind" && t["Value"] == "renewal_notice_t72"));

    let sent = moto.sent_messages().await;
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0]["id"], message_id.as_str());
    assert_eq!(sent[0]["destinations"]["ToAddresses"][0], "ada@example.com");
}

#[tokio::test]
async fn moto_rejects_sends_from_unverified_identities() {
    let moto = start_moto().await;
    moto.start_recording().await;
    let err = moto
        .sesv2()
        .await
        .send_email()
        .from_email_address("nobody@example.net")
        .destination(Destination::builder().to_addresses("ada@example.com").build())
        .content(simple_email("x"))
        .send()
        .await
        .expect_err("unverified From must be refused");
    assert!(err.as_service_error().is_some_and(|e| e.is_message_rejected()), "{err:?}");
    // The refused request is still in the recording; nothing was stored as sent.
    assert_eq!(moto.recorded_send_email_requests().await.len(), 1);
    assert!(moto.sent_messages().await.is_empty());
}

#[tokio::test]
async fn ses_stub_follows_its_script_and_counts() {
    let stub = start_ses_stub(vec![
        StubReply::Status500,
        StubReply::Throttle429,
        StubReply::accept("0100019a-stub-000001"),
    ])
    .await;
    let moto_free_config = aws_sdk_sesv2::Config::builder()
        .behavior_version(aws_sdk_sesv2::config::BehaviorVersion::latest())
        .region(aws_sdk_sesv2::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sesv2::config::Credentials::new("test", "test", None, None, "static"))
        .endpoint_url(stub.endpoint())
        .retry_config(RetryConfig::disabled())
        .build();
    let client = aws_sdk_sesv2::Client::from_conf(moto_free_config);
    let send = || {
        client
            .send_email()
            .from_email_address("billing@example.com")
            .destination(Destination::builder().to_addresses("ada@example.com").build())
            .content(simple_email("Renewal"))
            .email_tags(MessageTag::builder().name("notice_key").value("abc123").build().expect("tag"))
            .send()
    };

    let first = send().await.expect_err("500 first");
    let first_service = first.as_service_error().expect("500 parsed as a service error");
    assert!(first_service.meta().code() == Some("InternalFailure"), "{first:?}");
    assert_eq!(first.raw_response().map(|r| r.status().as_u16()), Some(500));
    assert_eq!(stub.requests(), 1);

    let second = send().await.expect_err("429 second");
    assert!(
        second.as_service_error().is_some_and(|e| e.is_too_many_requests_exception()),
        "429 must parse as the modeled TooManyRequestsException: {second:?}"
    );
    assert_eq!(stub.requests(), 2);

    let third = send().await.expect("accept third");
    assert_eq!(third.message_id(), Some("0100019a-stub-000001"));
    assert_eq!(stub.requests(), 3);

    // The script's last entry repeats.
    let fourth = send().await.expect("accept again");
    assert_eq!(fourth.message_id(), Some("0100019a-stub-000001"));
    assert_eq!(stub.requests(), 4);

    let bodies = stub.bodies();
    assert_eq!(bodies.len(), 4);
    let body: serde_json::Value = serde_json::from_str(&bodies[0]).expect("JSON body");
    assert_eq!(body["EmailTags"][0]["Value"], "abc123");
    assert!(stub.received().iter().all(|r| r.method == "POST" && r.path == "/v2/email/outbound-emails"));
}

#[tokio::test]
async fn ses_stub_hang_and_close_leave_the_outcome_unknown() {
    let stub = start_ses_stub(vec![StubReply::Hang, StubReply::CloseConnection]).await;
    let config = aws_sdk_sesv2::Config::builder()
        .behavior_version(aws_sdk_sesv2::config::BehaviorVersion::latest())
        .region(aws_sdk_sesv2::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sesv2::config::Credentials::new("test", "test", None, None, "static"))
        .endpoint_url(stub.endpoint())
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            aws_sdk_sesv2::config::timeout::TimeoutConfig::builder()
                .operation_attempt_timeout(std::time::Duration::from_millis(300))
                .build(),
        )
        .build();
    let client = aws_sdk_sesv2::Client::from_conf(config);
    let send = || {
        client
            .send_email()
            .from_email_address("billing@example.com")
            .destination(Destination::builder().to_addresses("ada@example.com").build())
            .content(simple_email("Renewal"))
            .send()
    };
    let hung = send().await.expect_err("hang times out");
    assert!(hung.as_service_error().is_none(), "{hung:?}");
    let closed = send().await.expect_err("closed connection");
    assert!(closed.as_service_error().is_none(), "{closed:?}");
    assert_eq!(stub.requests(), 2);
}

/// `notice-local-stack` without its emulator says so in one line and exits 2 (no panic, no
/// backtrace); started, it stops its emulator when it is told to stop (SIGTERM, as `kill` sends).
#[tokio::test]
async fn the_local_stack_reports_a_missing_emulator_in_one_line_and_stops_its_emulator() {
    let bin = env!("CARGO_BIN_EXE_notice-local-stack");
    let out = tokio::process::Command::new(bin)
        .env("MOTO_PYTHON", "/nonexistent/python")
        .output()
        .await
        .expect("run notice-local-stack");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("/nonexistent/python") && !stderr.contains("panicked"), "{stderr}");

    let mut child = tokio::process::Command::new(bin)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start notice-local-stack");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let mut endpoint = None;
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(url) = line.strip_prefix("export AWS_ENDPOINT_URL=") {
            endpoint = Some(url.to_owned());
        }
        if line.starts_with("export NOTICE_SCHEDULER_ROLE_ARN=") {
            break;
        }
    }
    let endpoint = endpoint.expect("the stack prints AWS_ENDPOINT_URL");
    let port: u16 = endpoint.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port");
    assert!(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok(), "the emulator answers");
    let pid = child.id().expect("a pid");
    let killed = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().expect("kill");
    assert!(killed.success());
    let status =
        tokio::time::timeout(std::time::Duration::from_secs(20), child.wait()).await.expect("it stops");
    assert!(status.expect("exit status").success());
    let mut gone = false;
    for _ in 0..50 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(gone, "the emulator on port {port} stopped with the stack");
}
