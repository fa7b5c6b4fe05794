//! The sender Lambda's real handler, with real SDK clients, against moto (DynamoDB, SQS, SES v2)
//! and — for provider faults — a local HTTP stub standing in for SES.

use chrono::Utc;
use notice_e2e::amz_target;
use notice_e2e::sender_app::*;
use notice_e2e::{start_ses_stub, SesStub, StubReply};
use notice_ledger::ledger::RowReader;
use notice_ledger::ledger::RowState;
use notice_ledger::Mode;
use notice_sender::SenderApp;
use notice_setup::aws;
use serde_json::{json, Value};

fn tag<'a>(request: &'a Value, name: &str) -> Option<&'a str> {
    request["EmailTags"].as_array()?.iter().find(|t| t["Name"] == name)?["Value"].as_str()
}

#[tokio::test]
async fn duplicates_inside_one_batch_send_once_with_tags_and_configuration_set() {
    let env = env().await;
    let app = app(&env).await;
    let a = job("sub_a", 0);
    let b = job("sub_b", 0);
    let event = batch(&env, &[a.to_string(), a.to_string(), b.to_string(), a.to_string()]).await;
    let all = ids(&event);
    let copies_of_a = [all[0].clone(), all[1].clone(), all[3].clone()];
    let resp = invoke(&app, event.clone()).await;
    // The copies of `a` that met its claim while its send was in flight are not acked (that send
    // could still release the claim): they come back a minute later, find it sent, and are acked.
    let held = failed_ids(&resp);
    assert_eq!(held.len(), 2, "{resp:?}");
    assert!(held.iter().all(|id| copies_of_a.contains(id)), "{held:?}");
    let again = invoke(&app, only(&event, &held)).await;
    assert!(again.batch_item_failures.is_empty(), "{again:?}");

    let sends = env.moto.recorded_send_email_requests().await;
    assert_eq!(sends.len(), 2, "{sends:#?}");
    assert_eq!(env.moto.sent_messages().await.len(), 2);
    for body in [&a, &b] {
        let key = key_of(body);
        let request = sends
            .iter()
            .find(|s| tag(s, "notice_key") == Some(key.as_str()))
            .expect("each SendEmail carries the notice_key tag of its notice");
        assert_eq!(tag(request, "kind"), Some("renewal_notice_t72"));
        assert_eq!(request["ConfigurationSetName"], CONFIG_SET);
        assert_eq!(request["Destination"]["ToAddresses"][0], body["email"]);
        let headers = request["Content"]["Simple"]["Headers"].as_array().expect("headers");
        assert!(headers.iter().any(|h| h["Name"] == "X-Notice-Key" && h["Value"] == key.as_str()));
    }
    let row = ledger(&env).await.get(&key_of(&a)).await.unwrap().unwrap();
    assert_eq!(row.state, RowState::Sent);
    assert!(row.message_id.is_some(), "the SES message id is stored on the row");
    assert_eq!(state(&env, &key_of(&b)).await, Some(RowState::Sent));
}

#[tokio::test]
async fn replay_of_a_whole_batch_sends_nothing_and_acks_everything() {
    let env = env().await;
    let app = app(&env).await;
    let bodies: Vec<String> = (0..5).map(|i| job(&format!("sub_{i}"), 0).to_string()).collect();
    let first = invoke(&app, batch(&env, &bodies).await).await;
    assert!(first.batch_item_failures.is_empty());
    let replay = invoke(&app, batch(&env, &bodies).await).await;
    assert!(replay.batch_item_failures.is_empty(), "suppressed duplicates are acked");
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), 5);
}

#[tokio::test]
async fn a_revision_is_a_second_notice() {
    let env = env().await;
    let app = app(&env).await;
    invoke(&app, batch(&env, &[job("sub_r", 0).to_string()]).await).await;
    invoke(&app, batch(&env, &[job("sub_r", 0).to_string(), job("sub_r", 1).to_string()]).await).await;
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), 2);
    assert_eq!(state(&env, &key_of(&job("sub_r", 1))).await, Some(RowState::Sent));
}

#[tokio::test]
async fn two_invocations_racing_on_one_batch_send_each_notice_once() {
    let env = env().await;
    let (app1, app2) = (app(&env).await, app(&env).await);
    let bodies: Vec<String> = (0..8).map(|i| job(&format!("sub_race_{i}"), 0).to_string()).collect();
    let event = batch(&env, &bodies).await;
    let (r1, r2) = tokio::join!(invoke(&app1, event.clone()), invoke(&app2, event.clone()));
    let sends = env.moto.recorded_send_email_requests().await;
    assert_eq!(sends.len(), 8, "{} sends for 8 notices", sends.len());
    // A record whose notice the other invocation was still sending comes back; then it is acked.
    let (mut held, held2) = (failed_ids(&r1), failed_ids(&r2));
    assert!(held.iter().all(|id| !held2.contains(id)), "one of the two invocations sent each notice");
    held.extend(held2);
    let again = invoke(&app1, only(&event, &held)).await;
    assert!(again.batch_item_failures.is_empty(), "{again:?}");
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), 8);
}

#[tokio::test]
async fn bad_input_fails_only_its_own_records() {
    let env = env().await;
    let app = app(&env).await;
    let mut bad = job("sub_bad", 0);
    bad["period_start"] = json!("2026-02-30");
    let event = batch(&env, &[bad.to_string(), "not json at all".into(), job("sub_ok", 0).to_string()]).await;
    let all = ids(&event);
    let resp = invoke(&app, event).await;
    let mut failed = failed_ids(&resp);
    failed.sort();
    let mut expected = vec![all[0].clone(), all[1].clone()];
    expected.sort();
    assert_eq!(failed, expected, "the two bad records fail; the good one is acked");
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), 1);
}

#[tokio::test]
async fn bad_input_goes_straight_to_the_dead_letter_queue_when_configured() {
    let env = env().await;
    let app = app_with(&env, settings(&env, true), None).await;
    let mut bad = job("sub_bad", 0);
    bad["kind"] = json!("Renewal Notice");
    let resp = invoke(&app, batch(&env, &[bad.to_string()]).await).await;
    assert!(resp.batch_item_failures.is_empty(), "dead-lettered records are acked");
    let reasons = dead_letter_reasons(&env).await;
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains("kind"), "{reasons:?}");
}

#[tokio::test]
async fn early_jobs_come_back_later_and_late_jobs_are_recorded_not_sent() {
    let env = env().await;
    let app = app(&env).await;
    let early = job_charged("sub_early", 0, Utc::now() + chrono::Duration::days(10));
    let late = job_charged("sub_late", 0, Utc::now() + chrono::Duration::hours(2));
    let event = batch(&env, &[early.to_string(), late.to_string()]).await;
    let all = ids(&event);
    let resp = invoke(&app, event).await;
    assert_eq!(failed_ids(&resp), vec![all[0].clone()], "only the early job stays on the queue");
    assert_eq!(state(&env, &key_of(&early)).await, None, "an early job is not claimed");
    assert_eq!(state(&env, &key_of(&late)).await, Some(RowState::Missed));
    assert!(env.moto.recorded_send_email_requests().await.is_empty());
    // The early job's visibility was pushed out (up to 12 h): it is not receivable now.
    let again = env.moto.sqs().await.receive_message().queue_url(&env.queue_url).send().await.unwrap();
    assert!(again.messages().is_empty(), "the deferred message is hidden until its window opens");
}

#[tokio::test]
async fn dynamodb_unreachable_sends_nothing_and_acks_nothing() {
    let env = env().await;
    let sdk = env.moto.sdk_config().await;
    let dead = sdk.to_builder().endpoint_url("http://127.0.0.1:1").build();
    let settings = settings(&env, false);
    let timeout = settings.send.send_timeout;
    let app = SenderApp::new(
        settings,
        aws::dynamodb_client(&dead),
        aws::sesv2_client(&sdk, timeout),
        env.moto.sqs().await,
    )
    .expect("a DynamoDB ledger");
    let event = batch(&env, &[job("sub_x", 0).to_string(), job("sub_y", 0).to_string()]).await;
    let all = ids(&event);
    let resp = invoke(&app, event).await;
    let mut failed = failed_ids(&resp);
    failed.sort();
    let mut expected = all.clone();
    expected.sort();
    assert_eq!(failed, expected);
    assert!(env.moto.recorded_send_email_requests().await.is_empty());
}

async fn stub_app(env: &Env, stub: &SesStub) -> SenderApp {
    app_with(env, settings(env, false), Some(stub.endpoint())).await
}

#[tokio::test]
async fn ses_500_is_one_attempt_and_the_claim_stays() {
    let env = env().await;
    let stub = start_ses_stub(vec![StubReply::Status500]).await;
    let app = stub_app(&env, &stub).await;
    let body = job("sub_500", 0);
    let resp = invoke(&app, batch(&env, &[body.to_string()]).await).await;
    assert!(resp.batch_item_failures.is_empty(), "a quarantined claim is acked: a retry cannot know more");
    assert_eq!(stub.requests(), 1, "exactly one HTTP attempt: the SDK must not retry SendEmail");
    assert_eq!(state(&env, &key_of(&body)).await, Some(RowState::Claimed));
    // Redelivery: suppressed by the open claim, no second attempt.
    invoke(&app, batch(&env, &[body.to_string()]).await).await;
    assert_eq!(stub.requests(), 1);
}

#[tokio::test]
async fn ses_connection_reset_is_unknown_and_quarantined() {
    let env = env().await;
    let stub = start_ses_stub(vec![StubReply::CloseConnection]).await;
    let app = stub_app(&env, &stub).await;
    let body = job("sub_reset", 0);
    invoke(&app, batch(&env, &[body.to_string()]).await).await;
    assert_eq!(stub.requests(), 1);
    assert_eq!(state(&env, &key_of(&body)).await, Some(RowState::Claimed));
}

#[tokio::test]
async fn ses_429_releases_and_a_later_delivery_sends_once() {
    let env = env().await;
    let stub = start_ses_stub(vec![StubReply::Throttle429, StubReply::accept("stub-message-1")]).await;
    let app = stub_app(&env, &stub).await;
    let body = job("sub_429", 0);
    let event = batch(&env, &[body.to_string()]).await;
    let resp = invoke(&app, event.clone()).await;
    assert_eq!(failed_ids(&resp), ids(&event), "a throttled send is retried later");
    assert_eq!(state(&env, &key_of(&body)).await, Some(RowState::Released));
    assert_eq!(stub.requests(), 1);
    let resp = invoke(&app, event).await;
    assert!(resp.batch_item_failures.is_empty());
    let row = ledger(&env).await.get(&key_of(&body)).await.unwrap().unwrap();
    assert_eq!((row.state, row.message_id.as_deref()), (RowState::Sent, Some("stub-message-1")));
    invoke(&app, batch(&env, &[body.to_string()]).await).await;
    assert_eq!(stub.requests(), 2, "sent once after the release, never again");
}

#[tokio::test]
async fn ses_message_rejected_is_recorded_and_not_retried() {
    let env = env().await;
    let stub =
        start_ses_stub(vec![StubReply::message_rejected("Message contains content that is not allowed.")])
            .await;
    let app = stub_app(&env, &stub).await;
    let body = job("sub_rej", 0);
    let resp = invoke(&app, batch(&env, &[body.to_string()]).await).await;
    assert!(resp.batch_item_failures.is_empty());
    assert_eq!(state(&env, &key_of(&body)).await, Some(RowState::Rejected));
    invoke(&app, batch(&env, &[body.to_string()]).await).await;
    assert_eq!(stub.requests(), 1);
}

#[tokio::test]
async fn two_dynamodb_writes_per_notice_and_only_the_claim_before_the_send() {
    let env = env().await;
    let app = app(&env).await;
    invoke(&app, batch(&env, &[job("sub_w", 0).to_string()]).await).await;
    let ops: Vec<String> = env
        .moto
        .recorded_requests()
        .await
        .iter()
        .filter_map(|r| amz_target(r)?.strip_prefix("DynamoDB_20120810.").map(str::to_owned))
        .collect();
    assert_eq!(ops, ["PutItem", "UpdateItem"], "claim then commit, nothing else: {ops:?}");
}

#[tokio::test]
async fn shadow_mode_records_claims_but_never_blocks_a_send() {
    let env = env().await;
    let mut shadow = settings(&env, false);
    shadow.send.mode = Mode::Shadow;
    let app = app_with(&env, shadow, None).await;
    let body = job("sub_shadow", 0);
    for _ in 0..2 {
        let resp = invoke(&app, batch(&env, &[body.to_string()]).await).await;
        assert!(resp.batch_item_failures.is_empty());
    }
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), 2, "shadow mode never suppresses");
    assert_eq!(
        state(&env, &key_of(&body)).await,
        Some(RowState::Sent),
        "but the ledger learns what enforce would do"
    );
}

/// Under the example policy (docs/windows/us-ca-arl.json): a misspelled kind charged in two days
/// and a California annual notice without the amount §17602 requires go to the dead-letter queue
/// with their reasons — no row, nothing sent — while a complete one is sent; the metrics say so,
/// and a notice from a jurisdiction the policy does not name is counted by jurisdiction.
#[tokio::test]
async fn an_unknown_kind_and_missing_required_content_are_dead_lettered_unclaimed() {
    use lambda_runtime::{Context, LambdaEvent};
    let env = env().await;
    let mut settings = settings(&env, true);
    settings.send.policy =
        notice_ledger::WindowPolicy::from_json(include_str!("../../docs/windows/us-ca-arl.json")).unwrap();
    let app = app_with(&env, settings, None).await;
    let in_30_days = Utc::now() + chrono::Duration::days(30);
    let mut typo = job("sub_typo", 0);
    typo["kind"] = json!("annual_renewl");
    typo["jurisdiction"] = json!("US-CA");
    let mut bare = job_charged("sub_bare", 0, in_30_days);
    bare["kind"] = json!("annual_renewal");
    bare["jurisdiction"] = json!("us-ca");
    bare["template_data"] = json!({"plan_name": "Coffee Box"});
    let mut complete = bare.clone();
    complete["subscription_id"] = json!("sub_complete");
    complete["template_data"]["amount"] = json!({"minor": 29000, "currency": "USD"});
    let mut french = job("sub_fr", 0);
    french["jurisdiction"] = json!("fr");
    let bodies = [&typo, &bare, &complete, &french].map(|b| b.to_string());
    let event = batch(&env, &bodies).await;
    let (resp, documents) =
        notice_sender::handle_batch(&app, LambdaEvent::new(event, Context::default())).await;
    assert!(resp.batch_item_failures.is_empty(), "dead-lettered and sent records are acked: {resp:?}");

    let mut reasons = dead_letter_reasons(&env).await;
    reasons.sort();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[0].contains(
            r#"field `kind` names an unknown kind "annual_renewl" (did you mean "annual_renewal"?)"#
        ),
        "{reasons:?}"
    );
    assert!(
        reasons[1].contains(r#"has no "amount""#)
            && reasons[1].contains("annual_renewal in US-CA")
            && reasons[1].contains("jurisdictions.US-CA.kinds.annual_renewal.requires"),
        "{reasons:?}"
    );
    assert_eq!(state(&env, &key_of(&typo)).await, None, "nothing claimed");
    assert_eq!(state(&env, &key_of(&bare)).await, None, "nothing claimed");
    assert_eq!(state(&env, &key_of(&complete)).await, Some(RowState::Sent));
    assert_eq!(state(&env, &key_of(&french)).await, Some(RowState::Sent));
    let sends = env.moto.recorded_send_email_requests().await;
    assert_eq!(sends.len(), 2, "only the complete notice and the French one: {sends:#?}");

    let totals = &documents[0];
    assert_eq!(
        (totals["UnknownKind"].as_u64(), totals["MissingRequiredContent"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(totals["InvalidJobs"], 2);
    let unlisted: Vec<&Value> =
        documents.iter().filter(|d| d.get("UnlistedJurisdiction").is_some()).collect();
    assert_eq!(unlisted.len(), 1, "{documents:#?}");
    assert_eq!(
        (unlisted[0]["Jurisdiction"].as_str(), unlisted[0]["UnlistedJurisdiction"].as_u64()),
        (Some("FR"), Some(1))
    );
}

/// Without a Scheduler a long wait hides on the queue — for what SQS accepts: its 12 hours count
/// from the receive, so a hide of 43 200 s asked for after the receive is refused outright (the job
/// would come back after the queue's own visibility timeout). The queue here hides for 1 s by
/// default, so a refused hide shows within two seconds.
#[tokio::test]
async fn a_long_wait_without_a_scheduler_hides_for_what_sqs_accepts() {
    let env = env().await;
    let short = env
        .moto
        .sqs()
        .await
        .create_queue()
        .queue_name("reminders-short-visibility")
        .attributes(aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout, "1")
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_owned();
    let env = Env { queue_url: short, ..env };
    let app = app(&env).await;
    let early = job_charged("sub_two_days", 0, Utc::now() + chrono::Duration::days(5));
    let resp = invoke(&app, batch(&env, &[early.to_string()]).await).await;
    assert_eq!(resp.batch_item_failures.len(), 1, "the early job stays on the queue");
    let hides: Vec<Value> = env
        .moto
        .recorded_requests()
        .await
        .into_iter()
        .filter(|r| amz_target(r).is_some_and(|t| t.ends_with("ChangeMessageVisibility")))
        .collect();
    assert_eq!(hides.len(), 1, "{hides:#?}");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let sqs = env.moto.sqs().await;
    let again = sqs.receive_message().queue_url(&env.queue_url).send().await.unwrap();
    assert!(again.messages().is_empty(), "the hide was accepted: the job is still hidden");
}
