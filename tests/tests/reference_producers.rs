//! The reference producers (`examples/producers/python`, `examples/producers/node`) against the
//! emulator's SQS: every message they enqueue is accepted by the sender's own parser
//! (`notice_ledger::job::Message`), names the notice the billing facts describe, and carries the
//! key each producer logged — `NoticeKey::derive` for the same secret. Both languages build the
//! same messages from the same facts, and both refuse a bad `period_start` without sending anything.
//!
//! Loud on purpose: a missing Python, Node.js, boto3 or `@aws-sdk/client-sqs` (or one that is not
//! the pinned version) fails the test with the fix (`./scripts/test.sh` installs them all), never
//! skips it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use notice_e2e::{start_moto, workspace_root, Moto};
use notice_ledger::identity::{Identity, NoticeKey, NoticeSecret};
use notice_ledger::job::Message;
use serde_json::Value;
use tokio::process::Command;

/// At least 16 bytes, as a configured secret must be (the producers refuse shorter ones too).
const SECRET: &str = "reference-producer-secret-0123456789";

/// (subscription_id, period_start, kind, revision)
type ExpectedIdentity = (&'static str, &'static str, &'static str, u64);

/// Billing facts, one per line, and the identity each must be keyed on. Extra fields a webhook
/// carries (event id, attempt) must never reach the message.
const FACTS: &[(&str, ExpectedIdentity)] = &[
    (
        r#"{"subscription_id":"sub_8812","kind":"renewal_notice_t72","period_start":"2026-10-01","charge_at":"2026-10-01T09:00:00Z","email":"ada@example.com","jurisdiction":"us-ca","plan_name":"Coffee Box","amount":{"minor":2900,"currency":"USD"},"webhook_event_id":"evt_1Q2w3E","attempt":3}"#,
        ("sub_8812", "2026-10-01", "renewal_notice_t72", 0),
    ),
    // An instant from the billing system, read in the zone it keeps its days in: 06:30 UTC is
    // still 30 September in Los Angeles (the UTC date would be 1 October: another key).
    (
        r#"{"subscription_id":"sub_9031","kind":"renewal_notice_t72","period_start_at":"2026-10-01T06:30:00Z","billing_time_zone":"America/Los_Angeles","charge_at":"2026-10-01T06:30:00Z","email":"grace@example.com","locale":"en-US","time_zone":"America/Los_Angeles","plan_name":"Tea Club","amount":{"minor":1850,"currency":"USD"}}"#,
        ("sub_9031", "2026-09-30", "renewal_notice_t72", 0),
    ),
    // Non-ASCII id, an offset charge time, a deliberate revision, the anchor-31st February period.
    (
        r#"{"subscription_id":"abo_Müller_東京","kind":"price_change","period_start":"2027-02-28","charge_at":"2027-02-28T08:00:00+01:00","email":"linus@example.org","revision":2,"locale":"de-DE","time_zone":"Europe/Berlin","plan_name":"Snack Crate","amount":{"minor":2400,"currency":"EUR"}}"#,
        ("abo_Müller_東京", "2027-02-28", "price_change", 2),
    ),
    (
        r#"{"action":"withdraw","subscription_id":"sub_8812","period_start":"2026-10-01","kind":"renewal_notice_t72","revision":0,"reason":"subscription cancelled","webhook_event_id":"evt_9Z8x"}"#,
        ("sub_8812", "2026-10-01", "renewal_notice_t72", 0),
    ),
];

/// A good line, then a timestamp where the period's date belongs, then a date that does not exist.
const BAD_FACTS: &str = concat!(
    r#"{"subscription_id":"sub_1","kind":"renewal_notice_t72","period_start":"2026-10-01","charge_at":"2026-10-01T09:00:00Z","email":"a@example.com"}"#,
    "\n",
    r#"{"subscription_id":"sub_2","kind":"renewal_notice_t72","period_start":"2026-10-01T00:00:00-07:00","charge_at":"2026-10-01T09:00:00Z","email":"b@example.com"}"#,
    "\n",
    r#"{"subscription_id":"sub_3","kind":"renewal_notice_t72","period_start":"2026-02-30","charge_at":"2026-10-01T09:00:00Z","email":"c@example.com"}"#,
    "\n",
);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Lang {
    Python,
    Node,
}

fn producers_dir() -> PathBuf {
    workspace_root().join("examples/producers")
}

/// The Python the suite runs the producer with: env `MOTO_PYTHON` (where scripts/test.sh installs
/// the emulator and the producer's pinned boto3), else `<root>/.venv/bin/python`.
fn python() -> PathBuf {
    let path = match std::env::var_os("MOTO_PYTHON") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => workspace_root().join(".venv/bin/python"),
    };
    assert!(
        path.is_file(),
        "no Python at {} for the reference producer — run ./scripts/test.sh (it creates .venv and installs \
         tests/requirements.txt and examples/producers/python/requirements.txt), or point MOTO_PYTHON at one",
        path.display()
    );
    path
}

/// `name==version` pins of a requirements file.
fn pins(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (name, version) = l
                .split_once("==")
                .unwrap_or_else(|| panic!("{}: `{l}` is not pinned (name==version)", path.display()));
            (name.trim().to_owned(), version.trim().to_owned())
        })
        .collect()
}

async fn output(mut command: Command, what: &str) -> Output {
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let run = command.output();
    match tokio::time::timeout(std::time::Duration::from_secs(60), run).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => panic!("cannot run {what}: {e} — run ./scripts/test.sh, which installs it"),
        Err(_) => panic!("{what} did not finish within 60 s"),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The producer's SDK is the pinned one, installed where the producer looks for it.
async fn assert_pinned(lang: Lang) {
    match lang {
        Lang::Python => {
            let wanted = pins(&producers_dir().join("python/requirements.txt"));
            let mut command = Command::new(python());
            command.arg("-c").arg("import boto3, botocore; print(boto3.__version__, botocore.__version__)");
            let out = output(command, "python -c 'import boto3'").await;
            assert!(
                out.status.success(),
                "boto3 is not installed for the reference producer ({}) — run ./scripts/test.sh (it installs \
                 examples/producers/python/requirements.txt into .venv):\n{}",
                python().display(),
                text(&out.stderr)
            );
            let got = text(&out.stdout);
            let mut got = got.split_whitespace();
            for name in ["boto3", "botocore"] {
                let version = got.next().unwrap_or_default();
                assert_eq!(
                    Some(&version.to_owned()),
                    wanted.get(name),
                    "{name} {version} is installed, examples/producers/python/requirements.txt pins another — \
                     run ./scripts/test.sh"
                );
            }
        }
        Lang::Node => {
            let dir = producers_dir().join("node");
            let package: Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join("package.json"))
                    .expect("examples/producers/node/package.json"),
            )
            .expect("package.json is JSON");
            let wanted =
                package["dependencies"]["@aws-sdk/client-sqs"].as_str().expect("the SDK is a dependency");
            assert!(
                wanted.chars().all(|c| c.is_ascii_digit() || c == '.'),
                "pin an exact version, not `{wanted}`"
            );
            let installed = dir.join("node_modules/@aws-sdk/client-sqs/package.json");
            let text = std::fs::read_to_string(&installed).unwrap_or_else(|e| {
                panic!(
                    "@aws-sdk/client-sqs is not installed for the reference producer ({}: {e}) — run \
                     `npm ci --prefix examples/producers/node` (./scripts/test.sh does)",
                    installed.display()
                )
            });
            let got: Value = serde_json::from_str(&text).expect("the SDK's package.json");
            assert_eq!(
                got["version"].as_str(),
                Some(wanted),
                "installed @aws-sdk/client-sqs differs from the pin — run `npm ci --prefix examples/producers/node`"
            );
        }
    }
}

/// Runs one producer with `args`, reaching moto through the standard AWS variables only.
async fn run(lang: Lang, moto: &Moto, args: &[&str]) -> Output {
    let (mut command, what) = match lang {
        Lang::Python => {
            let mut c = Command::new(python());
            c.arg(producers_dir().join("python/notice_producer.py"));
            (c, "the Python reference producer")
        }
        Lang::Node => {
            let mut c = Command::new(std::env::var_os("NODE").unwrap_or_else(|| "node".into()));
            c.arg(producers_dir().join("node/notice-producer.mjs"));
            (c, "node (Node.js 20 or later) for the Node.js reference producer")
        }
    };
    command.args(args);
    for (k, v) in moto.env_vars() {
        command.env(k, v);
    }
    // Nothing from this machine's AWS set-up may redirect or re-credential the producers.
    let nowhere = std::env::temp_dir().join("notice-e2e-no-aws-config");
    command
        .env("AWS_CONFIG_FILE", &nowhere)
        .env("AWS_SHARED_CREDENTIALS_FILE", &nowhere)
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_ENDPOINT_URL_SQS")
        .env_remove("REMINDER_QUEUE_URL")
        .env("NOTICE_KEY_SECRET", SECRET);
    output(command, what).await
}

/// Every message on the queue (moto answers at once; a few rounds collect them all).
async fn drain(moto: &Moto, queue_url: &str, expected: usize) -> Vec<(String, String)> {
    let sqs = moto.sqs().await;
    let mut got = Vec::new();
    for _ in 0..20 {
        let out = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(600)
            .send()
            .await
            .unwrap_or_else(|e| panic!("ReceiveMessage: {e:?}"));
        let batch = out.messages();
        if batch.is_empty() && got.len() >= expected {
            break;
        }
        for m in batch {
            got.push((
                m.message_id().expect("a message id").to_owned(),
                m.body().expect("a body").to_owned(),
            ));
        }
    }
    got
}

fn lines(out: &[u8]) -> Vec<Value> {
    text(out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line: {l}: {e}")))
        .collect()
}

#[tokio::test]
async fn reference_producers_enqueue_messages_the_sender_accepts_under_the_rust_key() {
    for lang in [Lang::Python, Lang::Node] {
        assert_pinned(lang).await;
    }
    let moto = start_moto().await;
    let secret = NoticeSecret::configured(SECRET.as_bytes().to_vec()).expect("a valid secret");
    let dir = tempfile::tempdir().expect("tempdir");
    let facts = dir.path().join("facts.jsonl");
    let body: String = FACTS.iter().map(|(line, _)| format!("{line}\n")).collect();
    std::fs::write(&facts, body).expect("write facts");
    let facts = facts.to_str().expect("utf-8 path");

    // line number → (language → parsed message), to compare the two languages.
    let mut parsed: BTreeMap<usize, BTreeMap<Lang, Message>> = BTreeMap::new();
    for (lang, queue) in [(Lang::Python, "reminders-python"), (Lang::Node, "reminders-node")] {
        let queue_url = moto.create_queue(queue).await;
        let out = run(lang, &moto, &["send", facts, "--queue-url", &queue_url]).await;
        assert!(
            out.status.success(),
            "{lang:?} producer failed ({}):\nstdout: {}\nstderr: {}\nmoto: {}",
            out.status,
            text(&out.stdout),
            text(&out.stderr),
            moto.log()
        );
        let records = lines(&out.stdout);
        assert_eq!(records.len(), FACTS.len(), "{lang:?}: one record per line: {records:?}");
        let by_id: BTreeMap<&str, &Value> =
            records.iter().map(|r| (r["message_id"].as_str().expect("message_id"), r)).collect();

        let received = drain(&moto, &queue_url, FACTS.len()).await;
        assert_eq!(received.len(), FACTS.len(), "{lang:?}: every message on the queue once: {received:?}");
        for (message_id, body) in received {
            let record = by_id
                .get(message_id.as_str())
                .unwrap_or_else(|| panic!("{lang:?}: message {message_id} is not in the producer's log"));
            let line = usize::try_from(record["line"].as_u64().expect("line")).expect("line fits");
            let (_, (subscription_id, period_start, kind, revision)) = FACTS[line - 1];

            let message = Message::parse(&body, &notice_texts::Icu)
                .unwrap_or_else(|e| panic!("{lang:?} line {line}: the sender refuses the body: {e}\n{body}"));
            let expected =
                Identity::new(subscription_id, period_start, kind, revision).expect("expected identity");
            assert_eq!(
                message.identity(),
                &expected,
                "{lang:?} line {line}: keyed on another notice\n{body}"
            );
            let key = NoticeKey::derive(&secret, message.identity());
            assert_eq!(
                record["notice_key"].as_str(),
                Some(key.as_str()),
                "{lang:?} line {line}: the key the producer logged is not the sender's"
            );
            assert_eq!(record["action"], if line == 4 { "withdraw" } else { "send" });
            assert!(
                !body.contains("evt_") && !body.contains("attempt"),
                "{lang:?}: webhook fields leaked: {body}"
            );
            match (&message, line) {
                (Message::Send(job), 1) => {
                    assert_eq!(job.jurisdiction.as_deref(), Some("US-CA"));
                    assert_eq!(
                        job.template_data["amount"],
                        serde_json::json!({"minor": 2900, "currency": "USD"})
                    );
                }
                (Message::Send(job), 3) => {
                    assert_eq!(job.charge_at.to_rfc3339(), "2027-02-28T07:00:00+00:00")
                }
                (Message::Withdraw(w), 4) => assert_eq!(w.reason.as_deref(), Some("subscription cancelled")),
                (Message::Send(_), 2) => {}
                (other, _) => panic!("{lang:?} line {line}: unexpected message {other:?}"),
            }
            parsed.entry(line).or_default().insert(lang, message);
        }
    }
    for (line, by_lang) in &parsed {
        assert_eq!(
            by_lang.get(&Lang::Python),
            by_lang.get(&Lang::Node),
            "line {line}: Python and Node.js built different messages from the same facts"
        );
    }

    // The shipped example facts are valid for both, and both print the same bodies.
    let example = producers_dir().join("facts.example.jsonl");
    let example = example.to_str().expect("utf-8 path");
    let mut bodies = Vec::new();
    for lang in [Lang::Python, Lang::Node] {
        let out = run(lang, &moto, &["send", example, "--dry-run"]).await;
        assert!(out.status.success(), "{lang:?} --dry-run of the example: {}", text(&out.stderr));
        let these: Vec<Message> = text(&out.stdout)
            .lines()
            .map(|l| {
                Message::parse(l, &notice_texts::Icu)
                    .unwrap_or_else(|e| panic!("{lang:?}: example line refused: {e}\n{l}"))
            })
            .collect();
        assert!(!these.is_empty());
        bodies.push(these);
    }
    assert_eq!(bodies[0], bodies[1], "the example's messages differ between Python and Node.js");
}

#[tokio::test]
async fn reference_producers_refuse_a_bad_period_start_and_send_nothing() {
    for lang in [Lang::Python, Lang::Node] {
        assert_pinned(lang).await;
    }
    let moto = start_moto().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let facts = dir.path().join("bad.jsonl");
    std::fs::write(&facts, BAD_FACTS).expect("write facts");
    let facts = facts.to_str().expect("utf-8 path");

    for (lang, queue) in [(Lang::Python, "bad-python"), (Lang::Node, "bad-node")] {
        let queue_url = moto.create_queue(queue).await;
        for dry_run in [false, true] {
            let mut args = vec!["send", facts, "--queue-url", &queue_url];
            if dry_run {
                args.push("--dry-run");
            }
            let out = run(lang, &moto, &args).await;
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{lang:?} (dry run {dry_run}) must refuse: {stderr}");
            assert!(out.stdout.is_empty(), "{lang:?}: nothing is printed as sent: {}", text(&out.stdout));
            for (line, why) in [(2, "YYYY-MM-DD"), (3, "not a real calendar date")] {
                assert!(
                    stderr.lines().any(|l| l.contains(&format!("line {line}:"))
                        && l.contains("`period_start`")
                        && l.contains(why)),
                    "{lang:?}: line {line} must be refused naming `period_start` ({why}):\n{stderr}"
                );
            }
            assert!(!stderr.contains("line 1:"), "{lang:?}: the good line is not an error:\n{stderr}");
        }
        // The good first line was not sent either: one bad line and nothing goes out.
        let left = drain(&moto, &queue_url, 0).await;
        assert!(left.is_empty(), "{lang:?} sent messages despite refusing the file: {left:?}");
    }
}
