//! Jobs enqueued weeks ahead: the sender parks them in EventBridge Scheduler (moto) instead of
//! hopping on the queue, and the parked body, once back in its window, takes the normal path.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use lambda_runtime::{Context, LambdaEvent};
use notice_e2e::amz_target;
use notice_e2e::sender_app::*;
use notice_e2e::{start_ses_stub, SesStub, StubReply};
use notice_ledger::ledger::RowState;
use notice_ledger::park::Parker;
use notice_ledger::policy::WindowPolicy;
use notice_ledger::rate::RateLimits;
use notice_ledger::QueuePolicy;
use notice_scheduler::{at_expression, parse_at_expression, SchedulerParker};
use notice_sender::handle_batch;
use notice_sender::SenderApp;
use serde_json::{json, Value};

const GROUP: &str = "notice-parked";
const ROLE: &str = "arn:aws:iam::123456789012:role/notice-scheduler-to-queue";
const QUEUE_ARN: &str = "arn:aws:sqs:us-east-1:123456789012:reminders";

async fn parking_env() -> Env {
    let env = env().await;
    env.moto.create_schedule_group(GROUP).await;
    env
}

fn parker(client: aws_sdk_scheduler::Client) -> Option<Arc<dyn Parker>> {
    Some(Arc::new(SchedulerParker::new(client, GROUP, ROLE)))
}

async fn parking_app(env: &Env) -> SenderApp {
    app(env).await.with_parker(parker(env.moto.scheduler().await))
}

/// A job charged 30 days from now: its window opens in 27 days.
fn thirty_days_ahead(sub: &str) -> Value {
    job_charged(sub, 0, Utc::now() + Duration::days(30))
}

async fn schedules(env: &Env) -> Vec<String> {
    let out = env.moto.scheduler().await.list_schedules().group_name(GROUP).send().await.unwrap();
    out.schedules().iter().filter_map(|s| s.name().map(str::to_owned)).collect()
}

async fn schedule(env: &Env, name: &str) -> aws_sdk_scheduler::operation::get_schedule::GetScheduleOutput {
    env.moto.scheduler().await.get_schedule().group_name(GROUP).name(name).send().await.unwrap()
}

fn opening(body: &Value) -> DateTime<Utc> {
    let charge =
        DateTime::parse_from_rfc3339(body["charge_at"].as_str().unwrap()).unwrap().with_timezone(&Utc);
    QueuePolicy::parking().park_time(charge - Duration::hours(72), Some(charge - Duration::hours(24)), None)
}

#[tokio::test]
async fn a_job_thirty_days_ahead_is_parked_once_acked_and_touches_neither_ledger_nor_ses() {
    let env = parking_env().await;
    let app = parking_app(&env).await;
    let body = thirty_days_ahead("sub_park");
    let key = key_of(&body);

    let resp = invoke(&app, batch(&env, &[body.to_string()]).await).await;
    assert!(resp.batch_item_failures.is_empty(), "a parked job is acked: {resp:?}");
    assert_eq!(schedules(&env).await, vec![key.as_str().to_owned()], "one schedule, named by the key");

    let parked = schedule(&env, key.as_str()).await;
    assert_eq!(parked.schedule_expression(), Some(at_expression(opening(&body)).as_str()));
    assert!(parked.schedule_expression().is_some_and(|e| e.ends_with(":00)")), "rounded to the minute");
    assert_eq!(parked.schedule_expression_timezone(), Some("UTC"));
    assert_eq!(parked.action_after_completion().map(|a| a.as_str()), Some("DELETE"));
    assert_eq!(parked.flexible_time_window().map(|w| w.mode().as_str()), Some("OFF"));
    let target = parked.target().expect("target");
    assert_eq!(target.arn(), QUEUE_ARN, "back to the queue the job came from");
    assert_eq!(target.role_arn(), ROLE);
    assert_eq!(target.input(), Some(body.to_string().as_str()), "the job's own body, unchanged");

    assert_eq!(state(&env, &key).await, None, "parking writes no ledger row");
    assert!(env.moto.recorded_send_email_requests().await.is_empty(), "and sends nothing");

    // The producer (or a replay) delivers the same job again: still one schedule, acked.
    let again = invoke(&app, batch(&env, &[body.to_string(), body.to_string()]).await).await;
    assert!(again.batch_item_failures.is_empty(), "{again:?}");
    assert_eq!(schedules(&env).await.len(), 1);
}

#[tokio::test]
async fn a_six_hour_wait_parks_at_the_opening_instead_of_hiding_on_the_queue() {
    let env = parking_env().await;
    let app = parking_app(&env).await;
    let body = job_charged("sub_six_hours", 0, Utc::now() + Duration::hours(78)); // opens in 6 h
    let resp = invoke(&app, batch(&env, &[body.to_string()]).await).await;
    assert!(resp.batch_item_failures.is_empty(), "parked, so acked: {resp:?}");
    let key = key_of(&body);
    assert_eq!(schedules(&env).await, vec![key.as_str().to_owned()]);
    let parked = schedule(&env, key.as_str()).await;
    assert_eq!(parked.schedule_expression(), Some(at_expression(opening(&body)).as_str()));
}

#[tokio::test]
async fn a_ten_minute_wait_hides_on_the_queue_not_in_the_scheduler() {
    let env = parking_env().await;
    let app = parking_app(&env).await;
    let charge = Utc::now() + Duration::hours(72) + Duration::minutes(10); // opens in 10 min
    let body = job_charged("sub_soon", 0, charge);
    let event = batch(&env, &[body.to_string()]).await;
    let resp = invoke(&app, event.clone()).await;
    assert_eq!(failed_ids(&resp), ids(&event), "kept on the queue, hidden until the window opens");
    assert!(schedules(&env).await.is_empty(), "no schedule for a 10-minute wait");
    let again = env.moto.sqs().await.receive_message().queue_url(&env.queue_url).send().await.unwrap();
    assert!(again.messages().is_empty(), "hidden, not immediately visible");
}

#[tokio::test]
async fn from_the_tenth_receive_on_a_wait_is_a_new_delayed_message_and_the_old_one_is_acked() {
    let env = parking_env().await;
    let app = parking_app(&env).await;
    let charge = Utc::now() + Duration::hours(72) + Duration::minutes(10); // opens in 10 min
    for (sub, count, requeues) in [("sub_ninth", "9", 0), ("sub_tenth", "10", 1)] {
        env.moto.start_recording().await;
        let body = job_charged(sub, 0, charge);
        let mut event = batch(&env, &[body.to_string()]).await;
        event.records[0].attributes.insert("ApproximateReceiveCount".into(), count.into());
        let resp = invoke(&app, event.clone()).await;
        let again = requeued(&env).await;
        assert_eq!(again.len(), requeues, "receive {count}: {again:?}");
        if requeues == 0 {
            assert_eq!(failed_ids(&resp), ids(&event), "receive 9: hidden on the same message");
            continue;
        }
        assert!(resp.batch_item_failures.is_empty(), "receive 10: the old message is acked: {resp:?}");
        let (queue_url, sent_body, delay, _) = &again[0];
        assert_eq!((queue_url, sent_body), (&env.queue_url, &body.to_string()));
        assert!((540..=600).contains(delay), "delayed until the window opens: {delay}");
        assert!(schedules(&env).await.is_empty(), "a 10-minute wait is never parked");
    }
}

#[tokio::test]
async fn a_rate_limited_job_whose_token_is_twenty_minutes_away_parks() {
    let env = parking_env().await;
    let mut settings = settings(&env, false);
    // One token per 20 minutes for every domain, burst 1: the second job's token is 20 min away.
    settings.send.rate_limits =
        RateLimits::parse(r#"{"default": {"per_second": 0.000833333, "burst": 1}}"#).unwrap();
    let app = app_with(&env, settings, None).await.with_parker(parker(env.moto.scheduler().await));
    let first = job("sub_token_a", 0);
    let second = job("sub_token_b", 0);
    let resp = invoke(&app, batch(&env, &[first.to_string()]).await).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), 1, "the burst's one token");

    let before = Utc::now();
    let resp = invoke(&app, batch(&env, &[second.to_string()]).await).await;
    assert!(resp.batch_item_failures.is_empty(), "parked until its token, so acked: {resp:?}");
    let key = key_of(&second);
    assert_eq!(schedules(&env).await, vec![key.as_str().to_owned()], "parked under its notice key");
    let fires =
        parse_at_expression(schedule(&env, key.as_str()).await.schedule_expression().unwrap()).unwrap();
    assert!(
        fires >= before + Duration::minutes(19) && fires <= before + Duration::minutes(23),
        "back when the token is due (20 min, plus jitter, rounded up to the minute): {fires}"
    );
    assert_eq!(state(&env, &key).await, None, "a rate-limited job leaves no claim");
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), 1, "and sends nothing");
}

/// A Scheduler that refuses every CreateSchedule with `error_type` (HTTP `status`): the scripted
/// stand-in for the quotas moto does not enforce.
async fn refusing_scheduler(env: &Env, status: u16, error_type: &str) -> (SesStub, SenderApp) {
    let stub = start_ses_stub(vec![StubReply::Reject {
        status,
        error_type: error_type.into(),
        message: "Rate exceeded".into(),
    }])
    .await;
    let sdk = env.moto.sdk_config().await.to_builder().endpoint_url(stub.endpoint()).build();
    let app = app(env).await.with_parker(parker(aws_sdk_scheduler::Client::new(&sdk)));
    (stub, app)
}

/// The SQS `SendMessage` requests with a delay (the harness's own enqueues have none): the jobs the
/// sender put back on the queue, as `(QueueUrl, MessageBody, DelaySeconds, MessageAttributes)`.
async fn requeued(env: &Env) -> Vec<(String, String, i64, Value)> {
    let recorded = env.moto.recorded_requests().await;
    recorded
        .iter()
        .filter(|r| amz_target(r) == Some("AmazonSQS.SendMessage"))
        .filter_map(|r| serde_json::from_str::<Value>(r["body_text"].as_str()?).ok())
        .filter(|b| b["DelaySeconds"].as_i64().is_some_and(|d| d > 0))
        .map(|b| {
            let text = |f: &str| b[f].as_str().unwrap_or_default().to_owned();
            (
                text("QueueUrl"),
                text("MessageBody"),
                b["DelaySeconds"].as_i64().unwrap_or(0),
                b["MessageAttributes"].clone(),
            )
        })
        .collect()
}

async fn delayed_messages(env: &Env) -> String {
    let attrs = env
        .moto
        .sqs()
        .await
        .get_queue_attributes()
        .queue_url(&env.queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .unwrap();
    let delayed = aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed;
    attrs.attributes().and_then(|a| a.get(&delayed)).cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_refused_park_requeues_the_job_delayed_acks_the_old_message_and_counts_parking_refused() {
    let env = parking_env().await;
    let refusals =
        [(429, "ThrottlingException", "throttled"), (402, "ServiceQuotaExceededException", "quota")];
    for (n, (status, error_type, reason)) in refusals.into_iter().enumerate() {
        env.moto.start_recording().await; // a fresh recording per refusal
        let (stub, app) = refusing_scheduler(&env, status, error_type).await;
        let body = thirty_days_ahead(&format!("sub_refused_{reason}"));
        let event = batch_from(&env, &[body.to_string()], Some("replay-refused")).await;
        let (resp, docs) = handle_batch(&app, LambdaEvent::new(event.clone(), Context::default())).await;
        assert!(stub.requests() >= 1, "{reason}: CreateSchedule was tried");
        let again = requeued(&env).await;
        assert_eq!(again.len(), 1, "{reason}: the job went back on the queue once: {again:?}");
        let (queue_url, sent_body, delay, attributes) = &again[0];
        assert_eq!(queue_url, &env.queue_url, "{reason}: to the queue it came from");
        assert_eq!(sent_body, &body.to_string(), "{reason}: with its body unchanged");
        assert!((450..=900).contains(delay), "{reason}: delayed 7.5 to 15 minutes: {delay}");
        assert_eq!(
            attributes["replay_batch"]["StringValue"], "replay-refused",
            "{reason}: its replay batch kept"
        );
        assert!(
            resp.batch_item_failures.is_empty(),
            "{reason}: the old message is acked only because the new one exists: {resp:?}"
        );
        let waiting = (n + 1).to_string(); // this refusal's, and the one before it
        assert_eq!(delayed_messages(&env).await, waiting, "{reason}: the new message waits on the queue");
        let requeued: u64 = docs.iter().filter_map(|d| d.get("RequeuedJobs")?.as_u64()).sum();
        assert_eq!(requeued, 1, "{reason}: counted as RequeuedJobs: {docs:?}");
        let refused: Vec<&Value> = docs.iter().filter(|d| d.get("ParkingRefused").is_some()).collect();
        assert_eq!(refused.len(), 1, "{reason}: one refusal document: {docs:?}");
        assert_eq!(refused[0]["ParkingRefused"], 1);
        assert_eq!(refused[0]["Reason"], reason);
        assert_eq!(
            refused[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Function"], ["Function", "Reason"]])
        );
        assert_eq!(state(&env, &key_of(&body)).await, None, "{reason}: nothing claimed");
        assert!(docs.iter().all(|d| d.get("ParkedJobs").is_none_or(|p| p == 0)), "{reason}: nothing parked");
    }
}

#[tokio::test]
async fn scheduler_unreachable_requeues_the_job() {
    let env = parking_env().await;
    let dead = env.moto.sdk_config().await.to_builder().endpoint_url("http://127.0.0.1:1").build();
    let app = app(&env).await.with_parker(parker(aws_sdk_scheduler::Client::new(&dead)));
    let body = thirty_days_ahead("sub_unreachable");
    let resp = invoke(&app, batch(&env, &[body.to_string()]).await).await;
    assert!(resp.batch_item_failures.is_empty(), "acked once the job is back on the queue: {resp:?}");
    assert_eq!(requeued(&env).await.len(), 1);
    assert!(schedules(&env).await.is_empty());
    assert_eq!(state(&env, &key_of(&body)).await, None);
}

#[tokio::test]
async fn a_refused_park_that_cannot_requeue_keeps_the_message() {
    let env = parking_env().await;
    let (_stub, app) = refusing_scheduler(&env, 402, "ServiceQuotaExceededException").await;
    // SQS unreachable for the sender: neither the new message nor the visibility change gets through.
    let dead = env.moto.sdk_config().await.to_builder().endpoint_url("http://127.0.0.1:1").build();
    let app = app.with_sqs(aws_sdk_sqs::Client::new(&dead));
    let body = thirty_days_ahead("sub_no_requeue");
    let event = batch(&env, &[body.to_string()]).await;
    let resp = invoke(&app, event.clone()).await;
    assert_eq!(failed_ids(&resp), ids(&event), "no park and no new message ⇒ not acked: nothing is lost");
    assert!(requeued(&env).await.is_empty());
}

#[tokio::test]
async fn the_parked_body_sends_once_when_its_window_opens_and_duplicates_are_suppressed() {
    let env = parking_env().await;
    let body = thirty_days_ahead("sub_fire");
    invoke(&parking_app(&env).await, batch(&env, &[body.to_string()]).await).await;
    let fired =
        schedule(&env, key_of(&body).as_str()).await.target().and_then(|t| t.input()).unwrap().to_owned();

    // 27 days later the schedule puts `fired` back on the queue. Time cannot pass here, so the
    // sender that receives it runs a policy under which this kind's window is open today.
    let mut settings = settings(&env, false);
    settings.send.policy = WindowPolicy::from_json(
        r#"{"kinds":{"renewal_notice_t72":{"opens_hours_before":800,"closes_hours_before":24}}}"#,
    )
    .unwrap();
    let in_window = app_with(&env, settings, None).await.with_parker(parker(env.moto.scheduler().await));
    let event = batch(&env, &[fired.clone(), fired.clone(), body.to_string()]).await;
    let resp = invoke(&in_window, event.clone()).await;
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), 1, "sent once");
    // Copies that met the claim while its send was in flight come back; then they are acked.
    let again = invoke(&in_window, only(&event, &failed_ids(&resp))).await;
    assert!(again.batch_item_failures.is_empty(), "{again:?}");
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), 1, "both copies suppressed");
    assert_eq!(state(&env, &key_of(&body)).await, Some(RowState::Sent));
    invoke(&in_window, batch(&env, &[fired]).await).await;
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), 1, "a late duplicate is suppressed too");
}

#[tokio::test]
async fn a_replay_batch_survives_parking_through_the_universal_send_message_target() {
    let env = parking_env().await;
    let app = parking_app(&env).await;
    let body = thirty_days_ahead("sub_replayed");
    let resp = invoke(&app, batch_from(&env, &[body.to_string()], Some("replay-2026-11-30")).await).await;
    assert!(resp.batch_item_failures.is_empty(), "{resp:?}");
    let parked = schedule(&env, key_of(&body).as_str()).await;
    let target = parked.target().expect("target");
    assert_eq!(target.arn(), "arn:aws:scheduler:::aws-sdk:sqs:sendMessage");
    let input: Value = serde_json::from_str(target.input().unwrap()).unwrap();
    assert_eq!(input["QueueUrl"], "https://sqs.us-east-1.amazonaws.com/123456789012/reminders");
    assert_eq!(input["MessageBody"], body.to_string(), "the body is still unchanged");
    assert_eq!(
        input["MessageAttributes"]["replay_batch"],
        json!({"DataType": "String", "StringValue": "replay-2026-11-30"})
    );
}

#[tokio::test]
async fn the_same_notice_parked_with_different_content_is_a_payload_conflict() {
    let env = parking_env().await;
    let app =
        app_with(&env, settings(&env, true), None).await.with_parker(parker(env.moto.scheduler().await));
    let body = thirty_days_ahead("sub_changed");
    invoke(&app, batch(&env, &[body.to_string()]).await).await;
    let mut changed = body.clone();
    changed["email"] = json!("someone-else@example.com");
    let resp = invoke(&app, batch(&env, &[changed.to_string()]).await).await;
    assert!(resp.batch_item_failures.is_empty(), "dead-lettered, so acked");
    let reasons = dead_letter_reasons(&env).await;
    assert!(reasons.len() == 1 && reasons[0].contains("payload conflict"), "{reasons:?}");
    let kept = schedule(&env, key_of(&body).as_str()).await;
    assert_eq!(
        kept.target().and_then(|t| t.input()),
        Some(body.to_string().as_str()),
        "the first parking stands"
    );
}

#[tokio::test]
async fn a_schedule_by_the_key_that_has_already_fired_is_no_parking() {
    let env = parking_env().await;
    let app = parking_app(&env).await;
    let body = thirty_days_ahead("sub_fired_already");
    let key = key_of(&body);
    // The schedule that brought an earlier copy back still exists: Scheduler deletes it only
    // after delivering. Its time has passed, so it holds nothing.
    let window = aws_sdk_scheduler::types::FlexibleTimeWindow::builder()
        .mode(aws_sdk_scheduler::types::FlexibleTimeWindowMode::Off)
        .build()
        .unwrap();
    let target = aws_sdk_scheduler::types::Target::builder()
        .arn(QUEUE_ARN)
        .role_arn(ROLE)
        .input(body.to_string())
        .build()
        .unwrap();
    env.moto
        .scheduler()
        .await
        .create_schedule()
        .name(key.as_str())
        .group_name(GROUP)
        .schedule_expression(at_expression(Utc::now() - Duration::minutes(1)))
        .flexible_time_window(window)
        .target(target)
        .send()
        .await
        .unwrap();
    let event = batch(&env, &[body.to_string()]).await;
    let resp = invoke(&app, event.clone()).await;
    assert_eq!(failed_ids(&resp), ids(&event), "not acked: a fired schedule will not bring it back");
}

/// The withdraw message for `body`'s notice.
fn withdraw_of(body: &Value) -> Value {
    json!({"action": "withdraw", "subscription_id": body["subscription_id"], "period_start": body["period_start"],
           "kind": body["kind"], "revision": body["revision"], "reason": "subscription cancelled"})
}

#[tokio::test]
async fn a_withdraw_deletes_the_parked_job_and_the_parked_body_is_suppressed_when_it_fires() {
    let env = parking_env().await;
    let app = parking_app(&env).await;
    let body = thirty_days_ahead("sub_cancelled");
    let key = key_of(&body);
    invoke(&app, batch(&env, &[body.to_string()]).await).await;
    let fired = schedule(&env, key.as_str()).await.target().and_then(|t| t.input()).unwrap().to_owned();

    let (resp, docs) =
        handle_batch(&app, lambda_event(batch(&env, &[withdraw_of(&body).to_string()]).await)).await;
    assert!(resp.batch_item_failures.is_empty(), "a withdraw is acked: {resp:?}");
    assert_eq!(docs[0]["NoticesWithdrawn"], 1, "{docs:?}");
    assert_eq!(state(&env, &key).await, Some(RowState::Withdrawn), "the tombstone");
    assert!(schedules(&env).await.is_empty(), "the parked job is deleted");

    // Had the delete failed (or the schedule fired first), the parked body comes back in its
    // window: the tombstone suppresses it.
    let mut settings = settings(&env, false);
    settings.send.policy = WindowPolicy::from_json(
        r#"{"kinds":{"renewal_notice_t72":{"opens_hours_before":800,"closes_hours_before":24}}}"#,
    )
    .unwrap();
    let in_window = app_with(&env, settings, None).await.with_parker(parker(env.moto.scheduler().await));
    let resp = invoke(&in_window, batch(&env, &[fired, body.to_string()]).await).await;
    assert!(resp.batch_item_failures.is_empty(), "suppressed copies are acked: {resp:?}");
    assert!(env.moto.recorded_send_email_requests().await.is_empty(), "nothing sent");
    assert_eq!(state(&env, &key).await, Some(RowState::Withdrawn));

    // A second withdraw, with no schedule left to delete: acked.
    let again = invoke(&app, batch(&env, &[withdraw_of(&body).to_string()]).await).await;
    assert!(again.batch_item_failures.is_empty(), "{again:?}");
}

#[tokio::test]
async fn a_withdraw_of_a_sent_notice_is_too_late_and_bad_withdraws_are_dead_lettered() {
    let env = parking_env().await;
    let mut settings = settings(&env, true);
    settings.send.rate_limits = Some(RateLimits::builtin());
    let app = app_with(&env, settings, None).await.with_parker(parker(env.moto.scheduler().await));
    let body = job("sub_sent", 0);
    invoke(&app, batch(&env, &[body.to_string()]).await).await;
    assert_eq!(env.moto.recorded_send_email_requests().await.len(), 1);

    let (resp, docs) =
        handle_batch(&app, lambda_event(batch(&env, &[withdraw_of(&body).to_string()]).await)).await;
    assert!(resp.batch_item_failures.is_empty(), "acked, not retried: {resp:?}");
    assert_eq!(docs[0]["WithdrawTooLate"], 1, "{docs:?}");
    assert_eq!(state(&env, &key_of(&body)).await, Some(RowState::Sent), "the row stays sent");

    let mut no_kind = withdraw_of(&body);
    no_kind.as_object_mut().unwrap().remove("kind");
    let mut bad_action = withdraw_of(&body);
    bad_action["action"] = json!("cancel");
    let resp = invoke(&app, batch(&env, &[no_kind.to_string(), bad_action.to_string()]).await).await;
    assert!(resp.batch_item_failures.is_empty(), "dead-lettered straight away: {resp:?}");
    let reasons = dead_letter_reasons(&env).await;
    assert!(reasons.iter().any(|r| r.contains("`kind`")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("`action`")), "{reasons:?}");
}

fn lambda_event(
    event: aws_lambda_events::event::sqs::SqsEvent,
) -> LambdaEvent<aws_lambda_events::event::sqs::SqsEvent> {
    LambdaEvent::new(event, Context::default())
}
