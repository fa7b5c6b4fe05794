//! Outcomes back to the business, end to end on the emulator: the sender and the reconciler put
//! each notice's outcome on an EventBridge bus (moto delivers it through a rule to a queue the
//! test reads), one `PutEvents` per batch — and a bus that fails or hangs never fails, delays
//! past its budget or changes a send.

use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::SqsEvent;
use chrono::Utc;
use lambda_runtime::{Context, LambdaEvent};
use notice_e2e::amz_target;
use notice_e2e::outcome_bus::ObservedBus;
use notice_e2e::sender_app::{self, app, batch, env, job, job_charged, key_of, state, Env};
use notice_e2e::ses_events::ses_events_for_sends;
use notice_ledger::ledger::RowState;
use notice_ledger::outcomes::{OutcomeEvent, OutcomeKind, OutcomePublisher, PublishedBy};
use notice_reconciler::{handle_sqs_with_outcomes, OutcomeSink, ReconcilerApp};
use notice_sender::{handle_batch, SenderApp};
use notice_testkit::outcomes::{FaultyPublisher, PublishFault, RecordingPublisher};
use serde_json::{json, Value};

/// The real EventBridge adapter, pointed at the emulator.
async fn eventbridge(env: &Env, bus: &str) -> Arc<dyn OutcomePublisher> {
    let sdk = env.moto.sdk_config().await;
    Arc::new(notice_setup::aws::eventbridge_publisher(&sdk, bus).unwrap_or_else(|e| panic!("{e}")))
}

fn details(events: &[Value]) -> Vec<OutcomeEvent> {
    let mut out: Vec<OutcomeEvent> = events
        .iter()
        .map(|e| {
            assert_eq!(
                (e["source"].as_str(), e["detail-type"].as_str()),
                (Some("notice-ledger"), Some("Notice Outcome"))
            );
            serde_json::from_value(e["detail"].clone()).unwrap_or_else(|err| panic!("{err}: {e}"))
        })
        .collect();
    out.sort_by_key(|e| e.outcome);
    out
}

fn withdraw(sub: &str) -> Value {
    json!({"action": "withdraw", "subscription_id": sub, "period_start": "2026-12-01",
        "kind": "renewal_notice_t72", "revision": 0, "reason": "cancelled at period end"})
}

async fn put_events_calls(env: &Env) -> usize {
    env.moto.recorded_requests().await.iter().filter(|r| amz_target(r) == Some("AWSEvents.PutEvents")).count()
}

async fn run(app: &SenderApp, event: SqsEvent) -> (Vec<String>, Vec<Value>) {
    let (response, emf) = handle_batch(app, LambdaEvent::new(event, Context::default())).await;
    (sender_app::failed_ids(&response), emf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sender_publishes_each_batchs_outcomes_in_one_call() {
    let env = env().await;
    let observed = ObservedBus::create(&env.moto, "billing-outcomes").await;
    let app = app(&env).await.with_outcomes(Some(eventbridge(&env, &observed.bus).await));

    let mut sent = job("sub_sent", 0);
    sent["jurisdiction"] = json!("US-CA");
    // A planner's job names the rule that owed it (issue 49): the event on the bus names it too.
    sent["obligation"] = json!("US-CA/ca-annual-term");
    // The window (72 h → 24 h before the charge) closed already: missed.
    let missed = job_charged("sub_missed", 0, Utc::now() + chrono::Duration::hours(2));
    let withdrawn = withdraw("sub_withdrawn");
    let calls_before = put_events_calls(&env).await;
    let bodies = [sent.to_string(), missed.to_string(), withdrawn.to_string()];
    let (failed, _) = run(&app, batch(&env, &bodies).await).await;
    assert!(failed.is_empty(), "every record is acked: {failed:?}");
    assert_eq!(put_events_calls(&env).await - calls_before, 1, "one PutEvents for the batch");

    let events = details(&observed.all_events(&env.moto, 3).await);
    let outcomes: Vec<OutcomeKind> = events.iter().map(|e| e.outcome).collect();
    assert_eq!(outcomes, [OutcomeKind::Sent, OutcomeKind::Missed, OutcomeKind::Withdrawn]);
    let s = &events[0];
    assert_eq!(s.notice_key, key_of(&sent).as_str());
    assert_eq!(
        (s.subscription_id.as_str(), s.period_start.as_str(), s.revision),
        ("sub_sent", "2026-12-01", 0)
    );
    assert!(s.message_id.as_deref().is_some_and(|m| !m.is_empty()), "{s:?}");
    let hours = s.hours_before_charge.unwrap_or_default();
    assert!((47.9..=48.01).contains(&hours), "{hours}");
    assert_eq!(s.jurisdiction.as_deref(), Some("US-CA"));
    assert_eq!(s.obligation.as_deref(), Some("US-CA/ca-annual-term"), "the rule, through EventBridge");
    assert_eq!(events[1].obligation, None, "a job that named no rule: left out");
    let in_force = app.sender().notices().texts.version();
    assert_eq!(s.config_version.as_deref(), Some(in_force.as_str()), "the version it was judged under");
    assert_eq!(s.published_by, PublishedBy::Sender);
    assert!(events[1].reason.as_deref().unwrap_or_default().contains("send window closed"));
    assert_eq!(events[2].reason.as_deref(), Some("cancelled at period end"));
    assert_eq!(state(&env, &key_of(&sent)).await, Some(RowState::Sent));

    // A redelivered duplicate is suppressed (no event); a withdraw of the sent notice is too late.
    let (failed, _) =
        run(&app, batch(&env, &[sent.to_string(), withdraw("sub_sent").to_string()]).await).await;
    assert!(failed.is_empty(), "{failed:?}");
    let events = details(&observed.all_events(&env.moto, 1).await);
    assert_eq!(events.iter().map(|e| e.outcome).collect::<Vec<_>>(), [OutcomeKind::WithdrawTooLate]);
    assert_eq!(events[0].notice_key, key_of(&sent).as_str());
    // Never the customer's address.
    let raw = serde_json::to_string(&events).unwrap_or_default();
    assert!(!raw.contains("@example.com"), "{raw}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_bus_never_fails_a_send_and_is_counted() {
    let env = env().await;
    let bus = Arc::new(FaultyPublisher::always(RecordingPublisher::default(), PublishFault::Unavailable));
    let app = app(&env).await.with_outcomes(Some(bus.clone() as Arc<dyn OutcomePublisher>));
    let body = job("sub_failing_bus", 0);
    let (failed, emf) = run(&app, batch(&env, &[body.to_string()]).await).await;
    assert!(failed.is_empty(), "the send is acked as the queue policy says: {failed:?}");
    assert_eq!(state(&env, &key_of(&body)).await, Some(RowState::Sent), "the ledger has the outcome");
    assert_eq!(env.moto.sent_messages().await.len(), 1, "sent once");
    assert_eq!(bus.attempts(), 2, "one call and one retry of the failed entry");
    assert_eq!(emf[0]["OutcomePublishFailed"], 1, "{}", emf[0]);
    assert!(emf[0].get("OutcomesPublished").is_none(), "nothing published, nothing counted: {}", emf[0]);
    assert_eq!(emf[0]["NoticesSent"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_bus_costs_at_most_the_publish_budget() {
    let env = env().await;
    let bus = Arc::new(FaultyPublisher::new(RecordingPublisher::default(), [PublishFault::Hang]));
    let app = app(&env).await.with_outcomes(Some(bus as Arc<dyn OutcomePublisher>));
    let body = job("sub_hanging_bus", 0);
    let event = batch(&env, &[body.to_string()]).await;
    let started = Instant::now();
    let (failed, emf) = run(&app, event).await;
    let took = started.elapsed();
    assert!(failed.is_empty(), "{failed:?}");
    assert!(took < Duration::from_secs(8), "the publish is bounded (2 s budget): {took:?}");
    assert_eq!(emf[0]["OutcomePublishFailed"], 1);
    assert_eq!(state(&env, &key_of(&body)).await, Some(RowState::Sent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_publishes_bounces_and_complaints_with_the_notices_identity() {
    let env = env().await;
    let observed = ObservedBus::create(&env.moto, "billing-outcomes").await;
    // Sent without a bus: only the reconciler's events reach it.
    let sender = app(&env).await;
    let mut bounced = job("sub_bounce", 0);
    bounced["email"] = json!("bounce@simulator.amazonses.com");
    let mut complained = job("sub_complaint", 0);
    complained["email"] = json!("complaint@simulator.amazonses.com");
    let delivered = job("sub_delivered", 0);
    let bodies = [bounced.to_string(), complained.to_string(), delivered.to_string()];
    let (failed, _) = run(&sender, batch(&env, &bodies).await).await;
    assert!(failed.is_empty(), "{failed:?}");
    let ses =
        ses_events_for_sends(&env.moto.sent_messages().await, &env.moto.recorded_send_email_requests().await);
    let ses: SqsEvent = serde_json::from_value(ses).unwrap_or_else(|e| panic!("{e}"));
    let ledger = Arc::new(sender_app::ledger(&env).await);
    let reconciler = ReconcilerApp { ledger: ledger.clone() };

    // The bus down: every event applied, nothing fails, both outcome events counted as failed.
    let down = Arc::new(FaultyPublisher::always(RecordingPublisher::default(), PublishFault::Unavailable));
    let sink = OutcomeSink { publisher: down };
    let (response, tally) = handle_sqs_with_outcomes(&reconciler, Some(&sink), ses.clone()).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!((tally.outcomes_published, tally.outcome_publish_failed), (0, 2), "{tally:?}");
    assert!(observed.all_events(&env.moto, 0).await.is_empty());

    // The same events again (SES delivers at least once), the bus up: a bounced and a complained.
    let sink = OutcomeSink { publisher: eventbridge(&env, &observed.bus).await };
    let (response, tally) = handle_sqs_with_outcomes(&reconciler, Some(&sink), ses).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!((tally.outcomes_published, tally.outcome_publish_failed), (2, 0), "{tally:?}");
    let events = details(&observed.all_events(&env.moto, 2).await);
    assert_eq!(
        events.iter().map(|e| e.outcome).collect::<Vec<_>>(),
        [OutcomeKind::Bounced, OutcomeKind::Complained]
    );
    assert_eq!(events[0].subscription_id, "sub_bounce");
    assert_eq!(events[0].notice_key, key_of(&bounced).as_str());
    assert_eq!(events[1].subscription_id, "sub_complaint");
    for e in &events {
        assert_eq!(e.published_by, PublishedBy::Reconciler);
        assert!(e.message_id.is_some() && e.charge_at.is_some() && e.hours_before_charge.is_some(), "{e:?}");
    }
}

/// The Lambdas as deployed: configured from the environment only. `NOTICE_OUTCOME_BUS` set, the
/// sender's events reach the bus and the reconciler has a sink; unset, neither publishes. (The
/// other tests here build their clients explicitly and read no environment.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bus_is_configured_through_the_environment_and_optional() {
    let env = env().await;
    let observed = ObservedBus::create(&env.moto, "env-outcomes").await;
    for (k, v) in env.moto.env_vars() {
        std::env::set_var(k, v);
    }
    std::env::set_var("NOTICE_TABLE", sender_app::TABLE);
    std::env::set_var("NOTICE_KEY_SECRET", sender_app::SECRET);
    std::env::set_var("NOTICE_FROM", sender_app::FROM);
    std::env::set_var("NOTICE_CONFIGURATION_SET", sender_app::CONFIG_SET);
    std::env::set_var("NOTICE_RATE_LIMITS", "off");

    std::env::remove_var("NOTICE_OUTCOME_BUS");
    let quiet = SenderApp::from_env().await.unwrap_or_else(|e| panic!("starts without a bus: {e}"));
    let (_, sink) = ReconcilerApp::from_env_with_outcomes().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(sink.is_none(), "no bus, no sink");
    let (failed, emf) = run(&quiet, batch(&env, &[job("sub_env_quiet", 0).to_string()]).await).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert!(emf[0].get("OutcomesPublished").is_none(), "no bus, nothing counted: {}", emf[0]);

    std::env::set_var("NOTICE_OUTCOME_BUS", &observed.bus);
    let app = SenderApp::from_env().await.unwrap_or_else(|e| panic!("starts with a bus: {e}"));
    let (_, sink) = ReconcilerApp::from_env_with_outcomes().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(sink.is_some(), "the reconciler publishes too");
    let body = job("sub_env", 0);
    let (failed, emf) = run(&app, batch(&env, &[body.to_string()]).await).await;
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(emf[0]["OutcomesPublished"], 1, "{}", emf[0]);
    let events = details(&observed.all_events(&env.moto, 1).await);
    assert_eq!(events.len(), 1, "only the second sender published: {events:?}");
    assert_eq!(
        (events[0].outcome, events[0].notice_key.as_str()),
        (OutcomeKind::Sent, key_of(&body).as_str())
    );
}
