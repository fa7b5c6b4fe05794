//! `noticectl outcomes republish` against the emulator: the DynamoDB ledger's rows of a time range
//! counted by outcome (dry run), then their outcome events put on an EventBridge bus and read back
//! through a rule's queue — reached the way an operator reaches AWS, through the AWS_* environment.

use std::path::Path;
use std::process::{Command, Output};

use chrono::{DateTime, Utc};
use notice_dynamodb::ledger::DynamoLedger;
use notice_e2e::outcome_bus::ObservedBus;
use notice_e2e::{start_moto, Moto};
use notice_ledger::job::{Message, Withdrawal};
use notice_ledger::ledger::{ClaimLedger, ClaimOutcome, ClaimRequest, Origin, WithdrawRequest};
use notice_ledger::outcomes::{OutcomeEvent, OutcomeKind, PublishedBy};
use notice_ledger::{Job, NoticeSecret};

const TABLE: &str = "notices";
const SECRET: &str = "outcomes-secret-0123456789";

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn job(sub: &str) -> Job {
    Job::parse(
        &serde_json::json!({"subscription_id": sub, "period_start": "2026-10-01", "kind": "renewal_notice_t72",
            "email": format!("{sub}@example.com"), "charge_at": "2026-10-01T09:00:00Z"})
        .to_string(),
        &notice_texts::Icu,
    )
    .unwrap()
}

fn noticectl(moto: &Moto, dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir)
        .envs(moto.env_vars())
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_OUTCOME_BUS")
        .env_remove("NOTICE_KEY_SECRET")
        .args(args)
        .output()
        .expect("run noticectl")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Two sent notices, one missed, one withdrawn and one open claim written on 2026-09-28; one sent
/// the week before (outside the range).
async fn seeded() -> (Moto, tempfile::TempDir) {
    let moto = start_moto().await;
    moto.create_ledger_table(TABLE).await;
    let ledger = DynamoLedger::new(notice_setup::aws::dynamodb_client(&moto.sdk_config().await), TABLE);
    let secret = NoticeSecret::new(SECRET).unwrap();
    let day = t("2026-09-28T09:00:00Z");
    for (sub, at) in [("sub_a", day), ("sub_b", day), ("sub_old", t("2026-09-20T09:00:00Z"))] {
        let j = job(sub);
        let ClaimOutcome::Minted(claim) =
            ledger.claim(&ClaimRequest::for_job(&j, j.key(&secret), at)).await.unwrap()
        else {
            panic!("seed claim")
        };
        ledger.commit_sent(&claim, &format!("ses-{sub}"), at + chrono::Duration::seconds(1)).await.unwrap();
    }
    let missed = job("sub_missed");
    let req = ClaimRequest::for_job(&missed, missed.key(&secret), day);
    assert!(ledger.record_missed(&req, "send window closed").await.unwrap().is_none());
    let open = job("sub_open");
    ledger.claim(&ClaimRequest::for_job(&open, open.key(&secret), day)).await.unwrap();
    let Message::Withdraw(w): Message = Message::parse(
        r#"{"action":"withdraw","subscription_id":"sub_w","period_start":"2026-10-01","kind":"renewal_notice_t72","reason":"cancelled"}"#,
        &notice_texts::Icu,
    )
    .unwrap() else {
        panic!("a withdraw")
    };
    let w: Withdrawal = w;
    let req = WithdrawRequest::new(&w, w.key(&secret), Origin::Worker, "producer", day);
    assert!(ledger.withdraw(&req).await.unwrap().is_none());
    (moto, tempfile::tempdir().unwrap())
}

const RANGE: [&str; 4] = ["--since", "2026-09-28", "--until", "2026-09-29"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_counts_then_the_range_is_published_and_observed() {
    let (moto, dir) = seeded().await;
    let observed = ObservedBus::create(&moto, "billing-outcomes").await;
    let ledger = format!("dynamodb:{TABLE}");
    let args = |extra: &[&'static str]| -> Vec<String> {
        let mut v: Vec<String> =
            ["outcomes", "republish", "--ledger", &ledger].iter().map(|s| s.to_string()).collect();
        v.extend(RANGE.iter().chain(extra).map(|s| s.to_string()));
        v
    };

    let dry =
        noticectl(&moto, dir.path(), &args(&["--dry-run"]).iter().map(String::as_str).collect::<Vec<_>>());
    let out = text(&dry);
    assert_eq!(dry.status.code(), Some(0), "{out}");
    assert!(out.contains("5 row(s) written in"), "{out}");
    assert!(out.contains("4 outcome event(s)"), "{out}");
    let count = |name: &str| {
        out.lines().find_map(|l| {
            let mut cells = l.split_whitespace();
            (cells.next() == Some(name)).then(|| cells.next().unwrap_or("").to_owned())
        })
    };
    assert_eq!(count("sent").as_deref(), Some("2"), "{out}");
    assert_eq!(count("missed").as_deref(), Some("1"), "{out}");
    assert_eq!(count("withdrawn").as_deref(), Some("1"), "{out}");
    assert_eq!(count("rejected").as_deref(), Some("0"), "{out}");
    assert!(out.contains("dry run: nothing published"), "{out}");
    assert!(observed.all_events(&moto, 0).await.is_empty(), "a dry run publishes nothing");

    // Without a terminal and without --yes: refused, nothing published (exit 3).
    let bus_args = args(&["--bus", "billing-outcomes"]);
    let refused = noticectl(&moto, dir.path(), &bus_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(refused.status.code(), Some(3), "{}", text(&refused));
    assert!(observed.all_events(&moto, 0).await.is_empty());

    let real = args(&["--bus", "billing-outcomes", "--yes"]);
    let done = noticectl(&moto, dir.path(), &real.iter().map(String::as_str).collect::<Vec<_>>());
    let out = text(&done);
    assert_eq!(done.status.code(), Some(0), "{out}");
    assert!(out.contains("published 4 of 4 outcome event(s) to billing-outcomes"), "{out}");
    let mut events: Vec<OutcomeEvent> = observed
        .all_events(&moto, 4)
        .await
        .iter()
        .map(|e| serde_json::from_value(e["detail"].clone()).unwrap())
        .collect();
    events.sort_by(|a, b| (a.outcome, &a.subscription_id).cmp(&(b.outcome, &b.subscription_id)));
    let seen: Vec<(OutcomeKind, &str)> =
        events.iter().map(|e| (e.outcome, e.subscription_id.as_str())).collect();
    assert_eq!(
        seen,
        [
            (OutcomeKind::Sent, "sub_a"),
            (OutcomeKind::Sent, "sub_b"),
            (OutcomeKind::Missed, "sub_missed"),
            (OutcomeKind::Withdrawn, "sub_w")
        ]
    );
    assert!(events.iter().all(|e| e.published_by == PublishedBy::Ledger));
    assert_eq!(events[0].message_id.as_deref(), Some("ses-sub_a"));
    assert_eq!(events[0].hours_before_charge, Some(72.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_range_or_a_missing_bus_is_a_usage_error_and_an_unreachable_bus_publishes_nothing() {
    let (moto, dir) = seeded().await;
    let ledger = format!("dynamodb:{TABLE}");
    let backwards = noticectl(
        &moto,
        dir.path(),
        &["outcomes", "republish", "--ledger", &ledger, "--since", "2026-09-29", "--until", "2026-09-28"],
    );
    assert_eq!(backwards.status.code(), Some(2), "{}", text(&backwards));
    assert!(text(&backwards).contains("--since"), "{}", text(&backwards));

    let mut no_bus = vec!["outcomes", "republish", "--ledger", &ledger, "--yes"];
    no_bus.extend(RANGE);
    let out = noticectl(&moto, dir.path(), &no_bus);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--bus"), "{}", text(&out));

    // A bus that does not exist: EventBridge refuses every entry, nothing is published.
    let mut missing = vec!["outcomes", "republish", "--ledger", &ledger, "--yes", "--bus", "no-such-bus"];
    missing.extend(RANGE);
    let out = noticectl(&moto, dir.path(), &missing);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("nothing published"), "{}", text(&out));
}
