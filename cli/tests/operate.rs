//! `noticectl replay`, `backfill` and `enqueue` against the emulator (DynamoDB ledger, SQS queue),
//! reached the way an operator reaches AWS: through the standard AWS_* environment.

use std::path::Path;
use std::process::{Command, Output};

use chrono::Utc;
use notice_dynamodb::ledger::DynamoLedger;
use notice_e2e::{start_moto, Moto};
use notice_ledger::ledger::ClaimLedger;
use notice_ledger::ledger::RowReader;
use notice_ledger::ledger::{ClaimOutcome, ClaimRequest, RowState};
use notice_ledger::{Job, NoticeSecret};

const TABLE: &str = "notices";
const SECRET: &str = "operate-secret-0123456789";

fn job(i: usize) -> String {
    serde_json::json!({"subscription_id": format!("sub_{i}"), "period_start": "2026-12-01", "kind": "renewal_notice_t72",
        "email": format!("c{i}@example.com"), "charge_at": "2026-12-04T09:00:00Z"})
    .to_string()
}

fn noticectl(moto: &Moto, dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir)
        .envs(moto.env_vars())
        .env("NOTICE_KEY_SECRET", SECRET)
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_QUEUE_URL")
        .env_remove("NOTICE_EVENTS_QUEUE_URL")
        .env_remove("NOTICE_EVENTS_DLQ_URL")
        .env_remove("NOTICE_SCHEDULE_GROUP")
        .env_remove("NOTICE_SCHEDULER_ROLE_ARN")
        .args(args)
        .output()
        .expect("run noticectl")
}

fn stdout(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

async fn seeded() -> (Moto, DynamoLedger, tempfile::TempDir) {
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    let ledger = DynamoLedger::new(notice_setup::aws::dynamodb_client(&moto.sdk_config().await), TABLE);
    let secret = NoticeSecret::new(SECRET).unwrap();
    // Jobs 0..6 were sent, 6 is an open claim, 7 was released: 8..10 are new.
    for i in 0..8 {
        let parsed = Job::parse(&job(i), &notice_texts::Icu).unwrap();
        let req = ClaimRequest::for_job(&parsed, parsed.key(&secret), Utc::now());
        let ClaimOutcome::Minted(claim) = ledger.claim(&req).await.unwrap() else { panic!("seed claim") };
        match i {
            0..=5 => ledger.commit_sent(&claim, &format!("ses-{i}"), Utc::now()).await.unwrap(),
            6 => {}
            _ => ledger.release(&claim, "throttled", Utc::now()).await.unwrap(),
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..10).map(job).chain(["{broken".to_owned(), job(0)]).collect();
    std::fs::write(dir.path().join("backlog.jsonl"), lines.join("\n")).unwrap();
    (moto, ledger, dir)
}

#[tokio::test]
async fn replay_dry_run_counts_against_the_ledger_and_enqueue_sends_only_new_jobs() {
    let (moto, _ledger, dir) = seeded().await;
    let queue = moto.create_queue("reminders").await;
    let ledger_arg = format!("dynamodb:{TABLE}");

    let dry = noticectl(
        &moto,
        dir.path(),
        &["replay", "--from", "backlog.jsonl", "--ledger", &ledger_arg, "--dry-run"],
    );
    let out = stdout(&dry);
    assert_eq!(
        dry.status.code(),
        Some(1),
        "the backlog's invalid line needs attention, as in the real run: {out}"
    );
    assert!(
        out.contains("12 job(s) · 1 invalid · 1 repeated in file · in ledger: claimed 1, sent 6 · new: 3"),
        "{out}"
    );
    assert!(out.contains("3 new of 11"), "{out}");
    assert!(out.contains("nothing enqueued"), "{out}");

    let refused = noticectl(
        &moto,
        dir.path(),
        &["replay", "--from", "backlog.jsonl", "--ledger", &ledger_arg, "--queue-url", &queue],
    );
    assert_eq!(refused.status.code(), Some(3), "no confirmation without a terminal: {}", stdout(&refused));

    let sqs = moto.sqs().await;
    let none = sqs.receive_message().queue_url(&queue).send().await.unwrap();
    assert!(none.messages().is_empty(), "a refused replay enqueues nothing");

    let run = noticectl(
        &moto,
        dir.path(),
        &[
            "replay",
            "--from",
            "backlog.jsonl",
            "--ledger",
            &ledger_arg,
            "--queue-url",
            &queue,
            "--yes",
            "--batch-id",
            "b-42",
        ],
    );
    let out = stdout(&run);
    assert_eq!(run.status.code(), Some(1), "enqueued, but the invalid line needs attention: {out}");
    assert!(out.contains("enqueued 3 of 3 as replay batch b-42"), "{out}");
    assert!(out.contains("needs attention: 1 invalid line(s), not enqueued (see above): line 11"), "{out}");

    let mut bodies = Vec::new();
    for m in drain_messages(&moto, &queue).await {
        let batch = m.message_attributes().and_then(|a| a.get("replay_batch")).and_then(|v| v.string_value());
        assert_eq!(batch, Some("b-42"));
        bodies.push(
            Job::parse(m.body().unwrap(), &notice_texts::Icu).unwrap().identity.subscription_id().to_owned(),
        );
    }
    bodies.sort();
    assert_eq!(bodies, ["sub_7", "sub_8", "sub_9"], "only the released and the unseen jobs");
}

#[tokio::test]
async fn backfill_writes_only_missing_rows_and_is_idempotent() {
    let (moto, ledger, dir) = seeded().await;
    let ledger_arg = format!("dynamodb:{TABLE}");
    let dry = noticectl(
        &moto,
        dir.path(),
        &["backfill", "--from", "backlog.jsonl", "--ledger", &ledger_arg, "--dry-run"],
    );
    assert!(stdout(&dry).contains("would backfill 2 row(s)"), "{}", stdout(&dry));

    let first =
        noticectl(&moto, dir.path(), &["backfill", "--from", "backlog.jsonl", "--ledger", &ledger_arg]);
    assert!(stdout(&first).contains("backfilled 2 row(s) as sent"), "{}", stdout(&first));
    let second =
        noticectl(&moto, dir.path(), &["backfill", "--from", "backlog.jsonl", "--ledger", &ledger_arg]);
    assert!(stdout(&second).contains("backfilled 0 row(s) as sent"), "{}", stdout(&second));

    let secret = NoticeSecret::new(SECRET).unwrap();
    let key = |i| Job::parse(&job(i), &notice_texts::Icu).unwrap().key(&secret);
    let row8 = ledger.get(&key(8)).await.unwrap().unwrap();
    assert_eq!((row8.state, row8.origin.as_str()), (RowState::Sent, "backfill"));
    assert_eq!(
        ledger.get(&key(6)).await.unwrap().unwrap().state,
        RowState::Claimed,
        "an open claim is never overwritten"
    );
    assert_eq!(ledger.get(&key(0)).await.unwrap().unwrap().message_id.as_deref(), Some("ses-0"));
}

#[tokio::test]
async fn enqueue_validates_then_sends_one_job() {
    let moto = start_moto().await;
    let queue = moto.create_queue("reminders").await;
    let dir = tempfile::tempdir().unwrap();
    let bad = noticectl(&moto, dir.path(), &["enqueue", "--queue-url", &queue, r#"{"subscription_id":"s"}"#]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stdout(&bad).contains("period_start"), "{}", stdout(&bad));
    let ok = noticectl(&moto, dir.path(), &["enqueue", "--queue-url", &queue, &job(1)]);
    assert!(ok.status.success(), "{}", stdout(&ok));
    let got =
        moto.sqs().await.receive_message().queue_url(&queue).max_number_of_messages(10).send().await.unwrap();
    assert_eq!(got.messages().len(), 1);

    // A withdraw is passed through as a withdraw, by `enqueue` and by `replay`.
    let withdraw = |sub: &str| {
        serde_json::json!({"action": "withdraw", "subscription_id": sub, "period_start": "2026-12-01",
            "kind": "renewal_notice_t72", "reason": "cancelled"})
        .to_string()
    };
    let one = noticectl(&moto, dir.path(), &["enqueue", "--queue-url", &queue, &withdraw("sub_w1")]);
    assert!(one.status.success() && stdout(&one).contains("enqueued withdraw of sub_w1"), "{}", stdout(&one));
    std::fs::write(dir.path().join("mixed.jsonl"), [job(2), withdraw("sub_w2")].join("\n")).unwrap();
    let replay =
        noticectl(&moto, dir.path(), &["replay", "--from", "mixed.jsonl", "--queue-url", &queue, "--yes"]);
    assert!(replay.status.success(), "{}", stdout(&replay));
    assert!(stdout(&replay).contains("enqueued 2 of 2"), "{}", stdout(&replay));
    let bodies: Vec<serde_json::Value> =
        drain(&moto, &queue).await.iter().map(|b| serde_json::from_str(b).unwrap()).collect();
    let withdrawn: Vec<&str> = bodies
        .iter()
        .filter(|b| b["action"] == "withdraw")
        .map(|b| b["subscription_id"].as_str().unwrap())
        .collect();
    assert_eq!(withdrawn.len(), 2, "{bodies:?}");
    assert!(withdrawn.contains(&"sub_w1") && withdrawn.contains(&"sub_w2"), "{bodies:?}");
    assert!(
        bodies.iter().any(|b| b["subscription_id"] == "sub_2" && b.get("action").is_none()),
        "{bodies:?}"
    );
}

#[tokio::test]
async fn enqueue_parks_a_far_future_job_where_the_sender_would_and_parked_cancel_deletes_it() {
    let moto = start_moto().await;
    let queue = moto.create_queue("reminders").await;
    moto.create_schedule_group("parked").await;
    let dir = tempfile::tempdir().unwrap();
    let charge = (Utc::now() + chrono::Duration::days(30)).to_rfc3339();
    let body = serde_json::json!({"subscription_id": "sub_far", "period_start": "2026-12-01",
        "kind": "renewal_notice_t72", "email": "far@example.com", "charge_at": charge})
    .to_string();
    let parsed = Job::parse(&body, &notice_texts::Icu).unwrap();
    let key = parsed.key(&NoticeSecret::new(SECRET).unwrap());
    let role = "arn:aws:iam::123456789012:role/parking";
    let enqueue =
        ["enqueue", "--queue-url", &queue, "--schedule-group", "parked", "--scheduler-role-arn", role, &body];

    let first = noticectl(&moto, dir.path(), &enqueue);
    assert!(
        first.status.success() && stdout(&first).contains(&format!("parked {key}")),
        "{}",
        stdout(&first)
    );
    let again = noticectl(&moto, dir.path(), &enqueue);
    assert!(stdout(&again).contains("already parked"), "{}", stdout(&again));
    let on_queue = moto.sqs().await.receive_message().queue_url(&queue).send().await.unwrap();
    assert!(on_queue.messages().is_empty(), "a parked job is not on the queue");
    let schedule =
        moto.scheduler().await.get_schedule().group_name("parked").name(key.as_str()).send().await.unwrap();
    let target = schedule.target().unwrap();
    assert_eq!(target.arn(), "arn:aws:sqs:us-east-1:123456789012:reminders");
    assert_eq!(target.role_arn(), role);
    assert_eq!(
        Job::parse(target.input().unwrap(), &notice_texts::Icu).unwrap().content_digest(),
        parsed.content_digest()
    );

    let list = noticectl(&moto, dir.path(), &["parked", "--schedule-group", "parked", "list"]);
    assert!(
        stdout(&list).contains("1 parked job(s)") && stdout(&list).contains(key.as_str()),
        "{}",
        stdout(&list)
    );

    let cancel = ["parked", "--schedule-group", "parked", "cancel", key.as_str()];
    let dry = noticectl(&moto, dir.path(), &[&cancel[..], &["--dry-run"]].concat());
    assert!(dry.status.success() && stdout(&dry).contains("nothing deleted"), "{}", stdout(&dry));
    // The 12-character prefix the listing shows names the same parked job.
    let by_prefix = noticectl(
        &moto,
        dir.path(),
        &["parked", "--schedule-group", "parked", "cancel", key.prefix(), "--dry-run"],
    );
    assert!(
        by_prefix.status.success() && stdout(&by_prefix).contains(&format!("would delete: {key}")),
        "{}",
        stdout(&by_prefix)
    );
    let unconfirmed = noticectl(&moto, dir.path(), &cancel);
    assert_eq!(unconfirmed.status.code(), Some(3), "no terminal, no --yes: refused");
    let listed = moto.scheduler().await.list_schedules().group_name("parked").send().await.unwrap();
    assert_eq!(listed.schedules().len(), 1, "still parked after a dry run and a refusal");
    let done = noticectl(&moto, dir.path(), &[&cancel[..], &["--yes"]].concat());
    assert!(done.status.success() && stdout(&done).contains("cancelled"), "{}", stdout(&done));
    let listed = moto.scheduler().await.list_schedules().group_name("parked").send().await.unwrap();
    assert!(listed.schedules().is_empty());
    let gone = noticectl(&moto, dir.path(), &cancel);
    assert_eq!(gone.status.code(), Some(1), "{}", stdout(&gone));
}

#[tokio::test]
async fn backfill_into_dynamodb_keeps_rows_for_notice_retention_days_like_the_lambdas() {
    let (moto, _ledger, dir) = seeded().await;
    let ledger_arg = format!("dynamodb:{TABLE}");
    let out = Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir.path())
        .envs(moto.env_vars())
        .env("NOTICE_KEY_SECRET", SECRET)
        .env("NOTICE_RETENTION_DAYS", "60")
        .args(["backfill", "--from", "backlog.jsonl", "--ledger", &ledger_arg])
        .output()
        .expect("run noticectl");
    assert!(stdout(&out).contains("backfilled 2 row(s) as sent"), "{}", stdout(&out));
    let key = Job::parse(&job(8), &notice_texts::Icu).unwrap().key(&NoticeSecret::new(SECRET).unwrap());
    let item = moto
        .dynamodb()
        .await
        .get_item()
        .table_name(TABLE)
        .key("notice_key", aws_sdk_dynamodb::types::AttributeValue::S(key.as_str().to_owned()))
        .send()
        .await
        .unwrap();
    let expires: i64 =
        item.item().and_then(|i| i.get("expires_at")).and_then(|v| v.as_n().ok()).unwrap().parse().unwrap();
    let want = (Utc::now() + chrono::Duration::days(60)).timestamp();
    assert!(
        (expires - want).abs() < 120,
        "NOTICE_RETENTION_DAYS=60 must give ~60 days, got {expires} vs {want}"
    );

    let refused = Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir.path())
        .envs(moto.env_vars())
        .env("NOTICE_KEY_SECRET", SECRET)
        .env("NOTICE_RETENTION_DAYS", "7")
        .args(["backfill", "--from", "backlog.jsonl", "--ledger", &ledger_arg])
        .output()
        .expect("run noticectl");
    assert_eq!(refused.status.code(), Some(2), "a retention under 30 days is refused: {}", stdout(&refused));
}

/// Receives every message on `queue` (deleting none): their bodies.
async fn drain(moto: &Moto, queue: &str) -> Vec<String> {
    drain_messages(moto, queue).await.iter().filter_map(|m| m.body().map(str::to_owned)).collect()
}

/// Every message on the queue, with its message attributes and `SentTimestamp`.
async fn drain_messages(moto: &Moto, queue: &str) -> Vec<aws_sdk_sqs::types::Message> {
    let sqs = moto.sqs().await;
    let mut all = Vec::new();
    loop {
        let got = sqs
            .receive_message()
            .queue_url(queue)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::SentTimestamp)
            .send()
            .await
            .unwrap();
        if got.messages().is_empty() {
            return all;
        }
        all.extend(got.messages().iter().cloned());
    }
}

/// The seed's sentence, measured: a replay of a mostly-delivered backlog (1 new of 41) enqueues
/// nothing unless forced — `--yes` only skips the prompt — and with `--force` only the new job.
#[tokio::test]
async fn replay_of_a_mostly_delivered_backlog_stops_unless_forced() {
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    let queue = moto.create_queue("reminders").await;
    let ledger = DynamoLedger::new(notice_setup::aws::dynamodb_client(&moto.sdk_config().await), TABLE);
    let secret = NoticeSecret::new(SECRET).unwrap();
    for i in 0..40 {
        let parsed = Job::parse(&job(i), &notice_texts::Icu).unwrap();
        let req = ClaimRequest::for_job(&parsed, parsed.key(&secret), Utc::now());
        let ClaimOutcome::Minted(claim) = ledger.claim(&req).await.unwrap() else { panic!("seed claim") };
        ledger.commit_sent(&claim, &format!("ses-{i}"), Utc::now()).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..41).map(job).collect();
    std::fs::write(dir.path().join("backlog.jsonl"), lines.join("\n")).unwrap();
    let ledger_arg = format!("dynamodb:{TABLE}");
    let replay = |extra: &[&str]| {
        let mut args =
            vec!["replay", "--from", "backlog.jsonl", "--ledger", &ledger_arg, "--queue-url", &queue];
        args.extend_from_slice(extra);
        noticectl(&moto, dir.path(), &args)
    };

    let stopped = replay(&["--yes"]);
    let out = stdout(&stopped);
    assert_eq!(stopped.status.code(), Some(3), "stop verdict: exit 3 even with --yes: {out}");
    assert!(out.contains("1 new of 41: stop") && out.contains("refusing to enqueue"), "{out}");
    assert!(drain(&moto, &queue).await.is_empty(), "a stopped replay enqueues nothing");

    let unconfirmed = replay(&["--force"]);
    assert_eq!(
        unconfirmed.status.code(),
        Some(3),
        "--force does not skip the prompt: {}",
        stdout(&unconfirmed)
    );
    assert!(drain(&moto, &queue).await.is_empty());

    let looser = replay(&["--stop-below", "1", "--dry-run"]);
    assert!(stdout(&looser).contains("1 new of 41 would be enqueued"), "{}", stdout(&looser));

    let forced = replay(&["--force", "--yes", "--batch-id", "b-forced"]);
    let out = stdout(&forced);
    assert!(forced.status.success(), "{out}");
    assert!(out.contains("enqueued 1 of 1 as replay batch b-forced"), "{out}");
    let bodies = drain(&moto, &queue).await;
    assert_eq!(bodies.len(), 1, "only the new job");
    assert_eq!(Job::parse(&bodies[0], &notice_texts::Icu).unwrap().identity.subscription_id(), "sub_40");
    eprintln!("measured: replay of 41 jobs (40 delivered): without --force 0 enqueued (exit 3); with --force 1 enqueued");
}

/// `quarantine release` waits for the SES event queue and its DLQ: an event there may prove the
/// claim was sent.
#[tokio::test]
async fn quarantine_release_refuses_while_ses_events_are_queued_or_dead_lettered() {
    let (moto, ledger, dir) = seeded().await;
    let events = moto.create_queue("ses-events").await;
    let dlq = moto.create_queue("ses-events-dlq").await;
    let secret = NoticeSecret::new(SECRET).unwrap();
    let key = Job::parse(&job(6), &notice_texts::Icu).unwrap().key(&secret); // the seeded open claim
    let ledger_arg = format!("dynamodb:{TABLE}");
    let release = |extra: &[&str]| {
        let mut args = vec![
            "quarantine",
            "release",
            key.as_str(),
            "--reason",
            "no SES send event",
            "--yes",
            "--ledger",
            &ledger_arg,
        ];
        args.extend_from_slice(extra);
        noticectl(&moto, dir.path(), &args)
    };
    let with_queues = ["--events-queue-url", events.as_str(), "--events-dlq-url", dlq.as_str()];
    let sqs = moto.sqs().await;

    let unknown = release(&[]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stdout(&unknown).contains("cannot be checked"), "{}", stdout(&unknown));

    sqs.send_message().queue_url(&events).message_body("{}").send().await.unwrap();
    let backlog = release(&with_queues);
    assert_eq!(backlog.status.code(), Some(3), "a safety stop");
    assert!(stdout(&backlog).contains("SES event queue still holds 1 waiting"), "{}", stdout(&backlog));

    // Being processed (in flight) still counts: the reconciler has not applied it yet.
    let got = sqs.receive_message().queue_url(&events).send().await.unwrap();
    let in_flight = release(&with_queues);
    assert!(stdout(&in_flight).contains("1 in flight"), "{}", stdout(&in_flight));
    let receipt = got.messages()[0].receipt_handle().unwrap();
    sqs.delete_message().queue_url(&events).receipt_handle(receipt).send().await.unwrap();

    sqs.send_message().queue_url(&dlq).message_body("{}").send().await.unwrap();
    let dead = release(&with_queues);
    assert_eq!(dead.status.code(), Some(3), "a safety stop");
    assert!(stdout(&dead).contains("dead-letter queue holds 1"), "{}", stdout(&dead));
    assert_eq!(ledger.get(&key).await.unwrap().unwrap().state, RowState::Claimed, "nothing released yet");

    let forced = release(&[&with_queues[..], &["--force"]].concat());
    assert!(forced.status.success(), "{}", stdout(&forced));
    assert!(stdout(&forced).contains("--force: releasing although"), "{}", stdout(&forced));
    assert_eq!(ledger.get(&key).await.unwrap().unwrap().state, RowState::Released);
}

#[tokio::test]
async fn quarantine_release_goes_ahead_when_the_ses_event_queues_are_empty() {
    let (moto, ledger, dir) = seeded().await;
    let events = moto.create_queue("ses-events").await;
    let dlq = moto.create_queue("ses-events-dlq").await;
    let key = Job::parse(&job(6), &notice_texts::Icu).unwrap().key(&NoticeSecret::new(SECRET).unwrap());
    let ledger_arg = format!("dynamodb:{TABLE}");
    let out = Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir.path())
        .envs(moto.env_vars())
        .env("NOTICE_KEY_SECRET", SECRET)
        .env("NOTICE_EVENTS_QUEUE_URL", &events)
        .env("NOTICE_EVENTS_DLQ_URL", &dlq)
        .args([
            "quarantine",
            "release",
            key.as_str(),
            "--reason",
            "checked",
            "--yes",
            "--ledger",
            &ledger_arg,
        ])
        .output()
        .expect("run noticectl");
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("are empty"), "{}", stdout(&out));
    assert_eq!(ledger.get(&key).await.unwrap().unwrap().state, RowState::Released);
}

/// `withdraw` on the deployed ledger (DynamoDB), then a real replay of a backlog holding the
/// withdrawn notice: the census counts it `withdrawn`, the queue gets only the new job, and a
/// withdraw of a sent notice is too late (exit 1) and leaves it sent.
#[tokio::test]
async fn a_withdrawn_key_in_dynamodb_is_never_replayed_and_a_sent_one_is_too_late() {
    let (moto, ledger, dir) = seeded().await;
    let queue = moto.create_queue("reminders").await;
    let ledger_arg = format!("dynamodb:{TABLE}");
    let secret = NoticeSecret::new(SECRET).unwrap();
    let key = |i| Job::parse(&job(i), &notice_texts::Icu).unwrap().key(&secret);
    let withdraw = |sub: &str, extra: &[&str]| {
        let mut args = vec![
            "withdraw",
            "--subscription-id",
            sub,
            "--period-start",
            "2026-12-01",
            "--kind",
            "renewal_notice_t72",
            "--ledger",
            &ledger_arg,
        ];
        args.extend_from_slice(extra);
        noticectl(&moto, dir.path(), &args)
    };

    let dry = withdraw("sub_8", &["--dry-run"]);
    assert!(dry.status.success() && stdout(&dry).contains("would withdraw"), "{}", stdout(&dry));
    assert!(ledger.get(&key(8)).await.unwrap().is_none(), "a dry run writes nothing");
    let done = withdraw("sub_8", &["--yes", "--reason", "cancelled", "--by", "ops"]);
    assert!(done.status.success(), "{}", stdout(&done));
    let row = ledger.get(&key(8)).await.unwrap().unwrap();
    assert_eq!((row.state, row.origin.as_str()), (RowState::Withdrawn, "operator"));

    let late = withdraw("sub_0", &["--yes"]);
    assert_eq!(late.status.code(), Some(1), "{}", stdout(&late));
    assert!(stdout(&late).contains("too late: the notice is sent since"), "{}", stdout(&late));
    assert_eq!(ledger.get(&key(0)).await.unwrap().unwrap().state, RowState::Sent);

    let run = noticectl(
        &moto,
        dir.path(),
        &["replay", "--from", "backlog.jsonl", "--ledger", &ledger_arg, "--queue-url", &queue, "--yes"],
    );
    let out = stdout(&run);
    assert_eq!(run.status.code(), Some(1), "the invalid line needs attention: {out}");
    assert!(
        out.contains(
            "12 job(s) · 1 invalid · 1 repeated in file · in ledger: claimed 1, sent 6, withdrawn 1 · new: 2"
        ),
        "{out}"
    );
    assert!(out.contains("withdrawn 1: never enqueued"), "{out}");
    assert!(out.contains("enqueued 2 of 2"), "{out}");
    let mut subs: Vec<String> = drain(&moto, &queue)
        .await
        .iter()
        .map(|b| Job::parse(b, &notice_texts::Icu).unwrap().identity.subscription_id().to_owned())
        .collect();
    subs.sort();
    assert_eq!(subs, ["sub_7", "sub_9"], "the withdrawn sub_8 is not enqueued");
}

/// A replay is paced by the senders' own buckets: each provider's jobs at its bucket's rate, all
/// of them at the account's, so nearly every job finds its token on its first receive
/// (docs/operations.md, *Replaying a backlog*). MaxSendRate 20/s: the account 18/s, google 9/s.
#[tokio::test]
async fn a_replay_is_paced_by_provider_and_the_tail_does_not_wait_behind_it() {
    let moto = start_moto().await;
    let queue = moto.create_queue("paced").await;
    let dir = tempfile::tempdir().unwrap();
    let line = |i: usize, domain: &str| {
        serde_json::json!({"subscription_id": format!("sub_{i}"), "period_start": "2026-12-01", "kind": "renewal_notice_t72",
            "email": format!("c{i}@{domain}"), "charge_at": "2026-12-04T09:00:00Z"})
        .to_string()
    };
    let mut lines: Vec<String> = (0..28).map(|i| line(i, "gmail.com")).collect();
    lines.extend((28..32).map(|i| line(i, &format!("tail{i}.example"))));
    std::fs::write(dir.path().join("backlog.jsonl"), lines.join("\n") + "\n").unwrap();
    let run = noticectl(
        &moto,
        dir.path(),
        &["replay", "--from", "backlog.jsonl", "--queue-url", &queue, "--yes", "--max-send-rate", "20"],
    );
    let out = stdout(&run);
    assert!(run.status.success(), "{out}");
    assert!(out.contains("pacing at the senders' buckets, about 3.0 s in all"), "{out}");
    assert!(out.contains("account: 18/s"), "{out}");
    assert!(out.contains("provider:google: 28 job(s) at 9/s, the last at 3.0 s"), "{out}");
    assert!(
        out.contains("other domains: 4 job(s) at the account's and --rate's, the last at 0.4 s"),
        "{out}"
    );
    assert!(out.contains("enqueued 32 of 32"), "{out}");

    // The queue saw them over the plan's 3 s (27 / 9 s between the first and the last gmail.com
    // job), the tail among the first.
    let sent: Vec<(u64, String)> = drain_messages(&moto, &queue)
        .await
        .iter()
        .map(|m| {
            let at = m
                .attributes()
                .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::SentTimestamp))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap();
            (at, Job::parse(m.body().unwrap(), &notice_texts::Icu).unwrap().recipient_domain())
        })
        .collect();
    assert_eq!(sent.len(), 32);
    let span = |of: &dyn Fn(&str) -> bool| {
        let at: Vec<u64> = sent.iter().filter(|(_, d)| of(d)).map(|(t, _)| *t).collect();
        at.iter().max().unwrap() - at.iter().min().unwrap()
    };
    assert!(span(&|d| d == "gmail.com") >= 2_000, "paced at 9/s: {sent:?}");
    assert!(span(&|d| d != "gmail.com") < 2_000, "the tail goes at once: {sent:?}");
}
