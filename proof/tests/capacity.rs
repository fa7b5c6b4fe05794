//! `notice-proof capacity --replay-alone` as an operator runs it: a 40 000-notice replay to
//! gmail.com, the only traffic, with the defaults a deployment gets (the built-in provider
//! limits over SES's starting 14 sends a second). It must drain at the google provider's rate —
//! half the account's 90 % of `MaxSendRate`, 6.3/s — without one throttled DynamoDB write, and
//! send every notice exactly once: paced by provider, as `noticectl replay` enqueues it by
//! default, and within a tolerance when it is enqueued all at once.

use std::process::Command;

use serde_json::Value;

/// Notices in the replay, and the bucket they share.
const REPLAY: f64 = 40_000.0;
const GOOGLE_PER_SEC: f64 = 6.3;
/// The built-in provider burst: 5 s of its rate, rounded down.
const GOOGLE_BURST: f64 = 31.0;
/// How much slower than the bucket itself the replay may drain. Limited jobs wait on the queue
/// for the bucket (hidden, backing off with their receives) rather than in a sender, and a batch
/// of 25 asks for more than the bucket holds, so tokens go unused between a refill and the next
/// receive: 18.7 % measured with the template's batches (25, 1 s window), 9.5 % with batches of
/// 10 and no window (docs/capacity.md, *A replay to one provider*).
const DRAIN_TOLERANCE: f64 = 0.25;

/// How much slower than the bucket the paced replay may drain: its last ten wait for their
/// `SendMessageBatch`, and the window for their batch (0.07 % measured).
const PACED_TOLERANCE: f64 = 0.01;

/// The replay alone: 40 000 to gmail.com at the run's start, `extra` added.
fn replay(minutes: &str, extra: &[&str]) -> Value {
    let base =
        ["--replay", "40000", "--replay-alone", "--replay-domain", "gmail.com", "--replay-at-secs", "0"];
    capacity(&[&base[..], &["--minutes", minutes], extra].concat())
}

fn capacity(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_notice-proof"))
        .arg("capacity")
        .args(args)
        .arg("--json")
        .output()
        .unwrap_or_else(|e| panic!("run notice-proof capacity: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn a_replay_of_forty_thousand_to_gmail_drains_at_the_providers_rate_without_a_throttled_write() {
    let r = replay("140", &[]);
    let n = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
    assert_eq!(n(&r["notices"]), REPLAY, "the replay is the only traffic");
    assert_eq!(n(&r["sent_once"]), REPLAY, "every notice sent: {r:#}");
    assert_eq!((n(&r["duplicates"]), n(&r["lost"]), n(&r["missed"])), (0.0, 0.0, 0.0), "{r:#}");
    assert_eq!(n(&r["dynamodb"]["throttled_calls"]), 0.0, "no throttled DynamoDB write: {r:#}");
    assert_eq!(n(&r["ses_throttled"]), 0.0);
    assert_eq!(r["replay_bucket"], "provider:google");
    assert!((n(&r["replay_bucket_per_sec"]) - GOOGLE_PER_SEC).abs() < 1e-9, "{r:#}");
    // The burst goes at once, the rest at the provider's rate: never faster, and at most the
    // tolerance slower.
    let drain = n(&r["replay_drain_secs"]);
    let at_rate = (REPLAY - GOOGLE_BURST) / GOOGLE_PER_SEC;
    assert!(drain >= at_rate * 0.99, "faster than the bucket allows: {drain} s against {at_rate} s");
    assert!(
        drain <= at_rate * (1.0 + DRAIN_TOLERANCE),
        "drained in {drain:.0} s, {:.1} % over the {at_rate:.0} s the provider's rate takes",
        (drain / at_rate - 1.0) * 100.0
    );
}

/// `noticectl replay` paces a provider's jobs at its bucket's rate by default (`--pace
/// providers`): nearly every job finds its token on its first receive, so the replay drains at
/// the provider's rate, none late, at about the calls per notice of ordinary traffic.
#[test]
fn the_same_replay_paced_by_provider_drains_at_the_rate_none_late() {
    let r = replay("120", &["--replay-per-sec", "6.3"]);
    let n = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
    assert_eq!(n(&r["sent_once"]), REPLAY, "every notice sent: {r:#}");
    assert_eq!((n(&r["duplicates"]), n(&r["lost"]), n(&r["late"])), (0.0, 0.0, 0.0), "{r:#}");
    assert_eq!(n(&r["dynamodb"]["throttled_calls"]), 0.0, "{r:#}");
    let drain = n(&r["replay_drain_secs"]);
    // The last ten go in a `SendMessageBatch` at (40 000 − 10) / 6.3 s.
    let at_rate = (REPLAY - 10.0) / GOOGLE_PER_SEC;
    assert!(
        (at_rate..=at_rate * (1.0 + PACED_TOLERANCE)).contains(&drain),
        "paced: drained in {drain:.0} s against the rate's {at_rate:.0} s"
    );
    assert!(n(&r["dynamodb"]["calls_per_sent_notice"]) < 2.5, "{r:#}");
}
