//! `notice-local-stack`: the emulator set up the way `template.yaml` deploys it, for running the
//! Lambdas locally (`cargo lambda watch` / `cargo lambda invoke`) or pointing `noticectl` at it.
//!
//! Starts moto, creates the ledger table from template.yaml, the reminder queue and its DLQ, the
//! schedule group for parked jobs, verifies the From identity, writes a fresh copy of
//! `events/sender-valid.json` whose jobs are inside their send window today, prints the
//! environment to use, and runs until Ctrl-C or SIGTERM — then stops its emulator. While it runs,
//! it keeps `target/local-stack/ses-events.json` up to date: SES's Send and Delivery events for the
//! mail the emulator accepted, under the message ids SES returned, for the reconciler.

use std::time::Duration;

use chrono::Utc;
use notice_e2e::ses_events::ses_events_for_sends;
use notice_e2e::{launch_moto, workspace_root, Moto};
use serde_json::Value;

const TABLE: &str = "notices";
const FROM: &str = "billing@example.com";
/// As template.yaml's `ParkedJobsGroup`; moto records schedules but never fires them.
const SCHEDULE_GROUP: &str = "notice-parked";

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Before anything is printed: a SIGTERM that comes right after the exports (a script that
    // read them and stops the stack) must find the handler, or the default action kills the
    // process and leaves the emulator running.
    let stop = Stop::install();
    let moto = match launch_moto().await {
        Ok(moto) => moto,
        Err(e) => {
            eprintln!("notice-local-stack: {}", e.lines().next().unwrap_or("the emulator did not start"));
            return std::process::ExitCode::from(2);
        }
    };
    moto.create_ledger_table(TABLE).await;
    let queue = moto.create_queue("reminders").await;
    let dlq = moto.create_queue("reminders-dlq").await;
    moto.verify_email_identity(FROM).await;
    moto.create_configuration_set("notice-events").await;
    moto.create_schedule_group(SCHEDULE_GROUP).await;
    moto.start_recording().await;

    let root = workspace_root();
    let out_dir = root.join("target/local-stack");
    let event_path = out_dir.join("sender-valid.json");
    let written = std::fs::create_dir_all(&out_dir)
        .map_err(|e| e.to_string())
        .and_then(|()| fresh_event(&root.join("events/sender-valid.json")))
        .and_then(|event| std::fs::write(&event_path, event).map_err(|e| e.to_string()));
    if let Err(e) = written {
        eprintln!("notice-local-stack: could not write {}: {e}", event_path.display());
    }

    for (k, v) in moto.env_vars() {
        println!("export {k}={v}");
    }
    println!("export NOTICE_TABLE={TABLE}");
    // A function on this machine: the example manage link and the built-in texts are allowed.
    println!("export NOTICE_ENVIRONMENT=local");
    println!("export NOTICE_FROM={FROM}");
    println!("export NOTICE_CONFIGURATION_SET=notice-events");
    println!("export NOTICE_KEY_SECRET=local-demo-secret");
    println!("export NOTICE_QUEUE_URL={queue}");
    println!("export NOTICE_DEAD_LETTER_QUEUE_URL={dlq}");
    println!("export NOTICE_SCHEDULE_GROUP={SCHEDULE_GROUP}");
    println!("export NOTICE_SCHEDULER_ROLE_ARN=arn:aws:iam::123456789012:role/notice-scheduler-to-queue");
    eprintln!(
        "\nnotice-local-stack: moto at {ep} (Ctrl-C stops it)\n\
         1. paste the exports above into another shell (or: eval \"$(cargo run -q -p notice-e2e --bin notice-local-stack)\" in the background)\n\
         2. cargo lambda watch   and   cargo lambda invoke notice-sender --data-file {event}\n\
         3. mail requests:  curl -s {ep}/moto-api/data.json | python3 -m json.tool | grep -A8 '\"Message\"'\n\
         4. ledger row:     cargo run -q -p noticectl -- show <KEY> --ledger dynamodb:{TABLE}\n\
         5. SES events:     cargo lambda invoke notice-reconciler --data-file {ses} (kept up to date)",
        ep = moto.endpoint(),
        event = event_path.display(),
        ses = out_dir.join("ses-events.json").display(),
    );
    let ses_path = out_dir.join("ses-events.json");
    tokio::select! {
        () = stop.wait() => {}
        () = keep_ses_events(&moto, &ses_path) => {}
    }
    eprintln!("notice-local-stack: stopping the emulator");
    drop(moto);
    std::process::ExitCode::SUCCESS
}

/// Ctrl-C, SIGTERM (`kill`) or SIGHUP (the terminal closed): the emulator goes with this process.
/// Installed when made, so a signal that arrives before [`Stop::wait`] is polled is kept.
struct Stop {
    signals: Option<[tokio::signal::unix::Signal; 3]>,
}

impl Stop {
    fn install() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        let signals = (|| {
            Some([
                signal(SignalKind::interrupt()).ok()?,
                signal(SignalKind::terminate()).ok()?,
                signal(SignalKind::hangup()).ok()?,
            ])
        })();
        Self { signals }
    }

    async fn wait(self) {
        let Some([mut int, mut term, mut hup]) = self.signals else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
    }
}

/// Rewrites `path` with SES's events for every message the emulator accepted, once a second.
async fn keep_ses_events(moto: &Moto, path: &std::path::Path) {
    let mut written = usize::MAX;
    loop {
        let events =
            ses_events_for_sends(&moto.sent_messages().await, &moto.recorded_send_email_requests().await);
        let count = events["Records"].as_array().map_or(0, Vec::len);
        if count != written {
            match serde_json::to_string_pretty(&events).map(|text| std::fs::write(path, text)) {
                Ok(Ok(())) => written = count,
                Ok(Err(e)) => eprintln!("notice-local-stack: could not write {}: {e}", path.display()),
                Err(e) => eprintln!("notice-local-stack: {e}"),
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The sample event with every job's charge moved to 48 h from now, so it is inside its window.
fn fresh_event(sample: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(sample).map_err(|e| format!("{}: {e}", sample.display()))?;
    let mut event: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let charge_at = (Utc::now() + chrono::Duration::hours(48)).to_rfc3339();
    if let Some(records) = event.get_mut("Records").and_then(Value::as_array_mut) {
        for record in records {
            let Some(body) = record.get("body").and_then(Value::as_str) else { continue };
            let Ok(mut job) = serde_json::from_str::<Value>(body) else { continue };
            job["charge_at"] = Value::String(charge_at.clone());
            record["body"] = Value::String(job.to_string());
        }
    }
    serde_json::to_string_pretty(&event).map_err(|e| e.to_string())
}
