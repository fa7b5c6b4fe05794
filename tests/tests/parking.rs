//! Jobs enqueued weeks ahead: the sender parks them in EventBridge Scheduler (moto) instead of
//! hopping on the queue, and the parked body, once back in its window, takes the normal path.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use notice_e2e::sender_app::*;
use notice_ledger::ledger::RowState;
use notice_ledger::park::Parker;
use notice_ledger::policy::WindowPolicy;
use notice_ledger::retry::{deferral, Deferral};
use notice_scheduler::{at_expression, SchedulerParker};
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
    match deferral(charge - Duration::hours(72), Utc::now()) {
        Deferral::Park { at } => at,
        other => panic!("a 30-day job must park, not {other:?}"),
    }
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
async fn a_job_whose_window_opens_within_twelve_hours_waits_on_the_queue_not_in_the_scheduler() {
    let env = parking_env().await;
    let app = parking_app(&env).await;
    let body = job_charged("sub_soon", 0, Utc::now() + Duration::hours(78)); // opens in 6 h
    let event = batch(&env, &[body.to_string()]).await;
    let resp = invoke(&app, event.clone()).await;
    assert_eq!(failed_ids(&resp), ids(&event), "kept on the queue, hidden until the window opens");
    assert!(schedules(&env).await.is_empty(), "no schedule for a 6-hour wait");
    let again = env.moto.sqs().await.receive_message().queue_url(&env.queue_url).send().await.unwrap();
    assert!(again.messages().is_empty(), "hidden, not immediately visible");
}

#[tokio::test]
async fn scheduler_unreachable_keeps_the_message_on_the_queue() {
    let env = parking_env().await;
    let dead = env.moto.sdk_config().await.to_builder().endpoint_url("http://127.0.0.1:1").build();
    let app = app(&env).await.with_parker(parker(aws_sdk_scheduler::Client::new(&dead)));
    let body = thirty_days_ahead("sub_unreachable");
    let event = batch(&env, &[body.to_string()]).await;
    let resp = invoke(&app, event.clone()).await;
    assert_eq!(failed_ids(&resp), ids(&event), "not parked ⇒ not acked: nothing is lost");
    assert!(schedules(&env).await.is_empty());
    assert_eq!(state(&env, &key_of(&body)).await, None);
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
    settings.policy = WindowPolicy::from_json(
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
