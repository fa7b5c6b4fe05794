//! One table of good and bad lines through every entry point that judges a message — `validate`,
//! `send`, `replay --dry-run`, `withdraw --from --dry-run`, `enqueue` — under one configuration
//! (`--config`, the example configuration with one English template that prints `seats`), at one
//! instant: each must give every line the same verdict (ok / deferred / missed / invalid /
//! render_failed) and, for a refused line, the same field and reason. They all ask the core's one
//! admission; before it, `withdraw` answered "withdrawn" for a misspelled kind, `replay --dry-run`
//! counted refused lines as new and `validate` passed a job that `send` refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

const NOW: &str = "2027-01-01T00:00:00Z";

fn now() -> chrono::DateTime<chrono::Utc> {
    NOW.parse().unwrap()
}

/// `NOW` + `hours`, RFC 3339.
fn at(hours: i64) -> String {
    (now() + chrono::Duration::hours(hours)).to_rfc3339()
}

fn noticectl(dir: &Path, args: &[&str]) -> Output {
    noticectl_with(dir, args, &[])
}

/// [`noticectl`] with `env` set on top of the cleaned environment.
fn noticectl_with(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .env("NOTICE_OPERATOR", "ops-test")
        .current_dir(dir)
        .env_remove("NOTICE_KEY_SECRET")
        .env_remove("NOTICE_KEY_SECRET_ARN")
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_STATE_DIR")
        .env_remove("NOTICE_MODE")
        .env_remove("NOTICE_CONFIG")
        .env_remove("NOTICE_WINDOWS")
        .env_remove("NOTICE_WINDOWS_FILE")
        .env_remove("NOTICE_RATE_LIMITS")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("run noticectl")
}

/// The example configuration, its English body printing `{{ seats }}` (declared in the manifest's
/// preview variables, so the configuration checks).
fn config(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/notices-de");
    let out = dir.join("config");
    std::fs::create_dir_all(out.join("templates")).unwrap();
    for f in ["manifest.json", "windows.json"] {
        std::fs::copy(src.join(f), out.join(f)).unwrap();
    }
    for entry in std::fs::read_dir(src.join("templates")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), out.join("templates").join(entry.file_name())).unwrap();
    }
    let body = out.join("templates/en.body.txt");
    let text = std::fs::read_to_string(&body).unwrap();
    std::fs::write(&body, text.replace("Thank you", "Seats: {{ seats }}.\n\nThank you")).unwrap();
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    manifest["variables"]["seats"] = json!(3);
    std::fs::write(out.join("manifest.json"), manifest.to_string()).unwrap();
    out
}

/// A job every field of which is good: a monthly reminder whose window (72 h to 24 h before the
/// charge) is open at `NOW`.
fn good(sub: &str) -> Value {
    json!({"subscription_id": sub, "period_start": "2027-01-03", "kind": "renewal_notice_t72",
        "email": format!("{sub}@example.com"), "charge_at": at(48),
        "template_data": {"plan_name": "Coffee Box", "amount": {"minor": 2900, "currency": "EUR"}}})
}

/// A California annual renewal (45 to 15 days before, plan, amount, date and link required).
fn annual(sub: &str, charge_in_days: i64) -> Value {
    let mut v = good(sub);
    v["kind"] = "annual_renewal".into();
    v["jurisdiction"] = "US-CA".into();
    v["charge_at"] = at(charge_in_days * 24).into();
    v
}

fn with(mut v: Value, path: &[&str], value: Value) -> Value {
    let mut at = &mut v;
    for p in &path[..path.len() - 1] {
        at = &mut at[*p];
    }
    at[path[path.len() - 1]] = value;
    v
}

fn without(mut v: Value, path: &[&str]) -> Value {
    let mut at = &mut v;
    for p in &path[..path.len() - 1] {
        at = &mut at[*p];
    }
    at.as_object_mut().unwrap().remove(path[path.len() - 1]);
    v
}

fn withdraw(sub: &str, kind: &str) -> Value {
    json!({"action": "withdraw", "subscription_id": sub, "period_start": "2027-01-03", "kind": kind})
}

/// (body, verdict, field at fault).
fn table() -> Vec<(String, &'static str, Option<&'static str>)> {
    let s = |v: Value| v.to_string();
    let ok = |v: Value| (s(v), "ok", None);
    let bad = |v: Value, field: &'static str| (s(v), "invalid", Some(field));
    vec![
        ok(good("s01")),
        (s(with(good("s02"), &["charge_at"], at(5 * 24).into())), "deferred", None),
        (s(with(good("s03"), &["charge_at"], at(12).into())), "missed", None),
        bad(with(good("s04"), &["kind"], "renewal_notice_t27".into()), "kind"),
        bad(with(good("s05"), &["kind"], "anual_renewal".into()), "kind"),
        bad(with(good("s06"), &["kind"], "Annual".into()), "kind"),
        ok(annual("s07", 30)),
        bad(without(annual("s08", 30), &["template_data", "amount"]), "template_data"),
        bad(without(annual("s09", 30), &["template_data", "plan_name"]), "template_data"),
        bad(
            with(annual("s10", 30), &["template_data", "amount"], "290.00 USD".into()),
            "template_data.amount",
        ),
        bad(
            with(good("s11"), &["template_data", "amount"], json!({"minor": 2900, "currency": "eur"})),
            "template_data.amount",
        ),
        bad(
            with(good("s12"), &["template_data", "amount"], json!({"minor": -1, "currency": "EUR"})),
            "template_data.amount",
        ),
        bad(
            without(
                with(with(good("s13"), &["kind"], "price_change".into()), &["charge_at"], at(240).into()),
                &["template_data", "amount"],
            ),
            "template_data",
        ),
        ok(with(with(good("s14"), &["kind"], "price_change".into()), &["charge_at"], at(240).into())),
        (s(with(good("s15"), &["locale"], "en".into())), "render_failed", Some("template")),
        ok(with(with(good("s16"), &["locale"], "en".into()), &["template_data", "seats"], json!(4))),
        bad(with(good("s17"), &["email"], "not-an-address".into()), "email"),
        bad(with(good("s18"), &["charge_at"], "2027-01-03".into()), "charge_at"),
        bad(with(good("s19"), &["period_start"], "2027-02-30".into()), "period_start"),
        bad(without(good("s20"), &["subscription_id"]), "subscription_id"),
        bad(with(good("s21"), &["revision"], json!(-1)), "revision"),
        bad(with(good("s22"), &["jurisdiction"], "US CA".into()), "jurisdiction"),
        ok(with(annual("s23", 30), &["jurisdiction"], "us-ca".into())),
        bad(with(good("s24"), &["locale"], "en US".into()), "locale"),
        bad(with(good("s25"), &["time_zone"], "Europe/Atlantis".into()), "time_zone"),
        bad(with(good("s26"), &["template_data"], json!([1])), "template_data"),
        ("{not json".to_owned(), "invalid", Some("body")),
        ("[1, 2]".to_owned(), "invalid", Some("body")),
        bad(with(good("s29"), &["action"], "cancel".into()), "action"),
        ok(withdraw("s30", "annual_renewal")),
        bad(withdraw("s31", "anual_renewal"), "kind"),
        bad(without(withdraw("s32", "x"), &["kind"]), "kind"),
        bad(with(withdraw("s33", "annual_renewal"), &["reason"], "two\nlines".into()), "reason"),
        (s(annual("s34", 60)), "deferred", None),
        (s(annual("s35", 10)), "missed", None),
        ok(with(
            with(annual("s36", 10), &["kind"], "trial_conversion".into()),
            &["charge_at"],
            at(240).into(),
        )),
    ]
}

/// What one entry point said of one line: the verdict, and the field and reason of a refusal.
#[derive(Debug, Clone, PartialEq)]
struct Said {
    verdict: String,
    field: Option<String>,
    reason: Option<String>,
}

/// `invalid job: field `F` REASON` → (F, REASON); a render failure's text is its reason.
fn refusal(detail: &str) -> (Option<String>, Option<String>) {
    match detail.split_once("field `").and_then(|(_, rest)| rest.split_once("` ")) {
        Some((field, reason)) => (Some(field.to_owned()), Some(reason.to_owned())),
        None => (Some("template".to_owned()), Some(detail.to_owned())),
    }
}

fn write_table(dir: &Path, rows: &[(String, &str, Option<&str>)]) -> PathBuf {
    let path = dir.join("table.jsonl");
    let text: String = rows.iter().map(|(body, _, _)| format!("{body}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn every_entry_point_gives_every_line_the_same_verdict_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let config = config.to_str().unwrap();
    let rows = table();
    assert!(rows.len() >= 30);
    let file = write_table(dir.path(), &rows);
    let file = file.to_str().unwrap();
    let origin = |i: usize| format!("line {}", i + 1);

    // validate: the reference every other entry point is held to, itself held to the table.
    let out = noticectl(dir.path(), &["validate", file, "--config", config, "--now", NOW, "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let mut validate: BTreeMap<String, Said> = BTreeMap::new();
    for m in report["messages"].as_array().unwrap() {
        let said = Said {
            verdict: m["status"].as_str().unwrap().to_owned(),
            field: m["field"].as_str().map(str::to_owned),
            reason: m["reason"].as_str().map(str::to_owned),
        };
        validate.insert(m["origin"].as_str().unwrap().to_owned(), said);
    }
    for (i, (body, verdict, field)) in rows.iter().enumerate() {
        let said = &validate[&origin(i)];
        assert_eq!(
            (said.verdict.as_str(), said.field.as_deref()),
            (*verdict, *field),
            "validate, {}: {body}\n{said:?}",
            origin(i)
        );
    }
    assert!(validate.values().any(|s| s.reason.as_deref().is_some_and(|r| r.contains("did you mean"))));
    assert_eq!(out.status.code(), Some(1), "refused and missed lines need attention");
    assert!(!dir.path().join(".notices").exists(), "validate writes nothing");

    // send, on the local ledger and outbox: sent / withdrawn stand for validate's ok.
    let out = noticectl(dir.path(), &["send", file, "--config", config, "--now", NOW]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut send: BTreeMap<String, Said> = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("line ")) {
        let (origin, rest) = line.split_at(16.min(line.len()));
        let mut words = rest.split_whitespace();
        let (_key, label) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let detail = words.collect::<Vec<_>>().join(" ");
        let verdict = match label {
            "sent" | "withdrawn" => "ok",
            other => other,
        };
        let (field, reason) =
            if matches!(verdict, "invalid" | "render_failed") { refusal(&detail) } else { (None, None) };
        send.entry(origin.trim().to_owned()).or_insert(Said { verdict: verdict.to_owned(), field, reason });
    }
    for (i, _) in rows.iter().enumerate() {
        let (v, s) = (&validate[&origin(i)], &send[&origin(i)]);
        assert_eq!((&s.verdict, &s.field), (&v.verdict, &v.field), "send, {}\n{text}", origin(i));
        if let (Some(vr), Some(sr)) = (&v.reason, &s.reason) {
            assert!(sr.contains(vr.as_str()) || vr.contains(sr.as_str()), "send, {}: {sr} / {vr}", origin(i));
        }
    }

    // replay --dry-run, on a fresh state directory: the refused lines are listed as invalid with
    // the same reason, and every admitted job is new.
    let replay_dir = tempfile::tempdir().unwrap();
    let out = noticectl(replay_dir.path(), &["replay", "--from", file, "--config", config, "--dry-run"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let listed: BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("line "))
        .filter_map(|l| l.split_once(": "))
        .map(|(n, e)| (format!("line {n}"), e.to_owned()))
        .collect();
    let mut new_jobs = 0;
    for (i, (_, verdict, _)) in rows.iter().enumerate() {
        let v = &validate[&origin(i)];
        match listed.get(&origin(i)) {
            Some(e) => {
                assert!(matches!(*verdict, "invalid" | "render_failed"), "replay refused {}: {e}", origin(i));
                assert_eq!(refusal(e).0, v.field, "replay, {}: {e}", origin(i));
                assert!(e.contains(v.reason.as_deref().unwrap()), "replay, {}: {e}", origin(i));
            }
            None => {
                assert!(
                    !matches!(*verdict, "invalid" | "render_failed"),
                    "replay let {} through\n{text}",
                    origin(i)
                );
                if !rows[i].0.contains("\"withdraw\"") {
                    new_jobs += 1;
                }
            }
        }
    }
    let refused = rows.iter().filter(|(_, v, _)| matches!(*v, "invalid" | "render_failed")).count();
    assert!(text.contains(&format!("· {refused} invalid ·")), "{text}");
    assert!(text.contains(&format!("new: {new_jobs}")), "{text}");

    // withdraw --from --dry-run over the withdraw lines: the same verdicts.
    let withdraws: Vec<(String, &str, Option<&str>)> =
        rows.iter().filter(|(b, _, _)| b.contains("\"withdraw\"")).cloned().collect();
    assert_eq!(withdraws.len(), 4);
    let wfile = dir.path().join("withdraws.jsonl");
    std::fs::write(&wfile, withdraws.iter().map(|(b, _, _)| format!("{b}\n")).collect::<String>()).unwrap();
    let withdraw_dir = tempfile::tempdir().unwrap();
    let out = noticectl(
        withdraw_dir.path(),
        &["withdraw", "--from", wfile.to_str().unwrap(), "--config", config, "--dry-run"],
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    for (i, (_, verdict, field)) in withdraws.iter().enumerate() {
        let line = text.lines().find(|l| l.trim_start().starts_with(&format!("line {}: ", i + 1)));
        match (verdict, line) {
            (&"ok", None) => {}
            (&"invalid", Some(l)) => assert_eq!(refusal(l).0.as_deref(), *field, "withdraw: {l}"),
            other => panic!("withdraw line {}: {other:?}\n{text}", i + 1),
        }
    }
    assert!(text.contains("would withdraw") && text.contains("invalid lines"), "{text}");

    // enqueue refuses each refused line before any queue is called, with the same reason.
    for (i, (body, verdict, _)) in rows.iter().enumerate() {
        if !matches!(*verdict, "invalid" | "render_failed") {
            continue;
        }
        let v = &validate[&origin(i)];
        let out = noticectl(
            dir.path(),
            &["enqueue", body, "--config", config, "--queue-url", "http://127.0.0.1:9/q"],
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_ne!(out.status.code(), Some(0), "enqueue, {}: {err}", origin(i));
        assert!(err.contains(&format!("not enqueued: {verdict}")), "enqueue, {}: {err}", origin(i));
        // One body, not a file: a body that is not JSON is not "line N" of anything.
        let reason = v.reason.as_deref().unwrap();
        let reason = reason.strip_prefix(&format!("{} ", origin(i))).unwrap_or(reason);
        assert!(err.contains(reason), "enqueue, {}: {err}", origin(i));
    }
}

#[test]
fn a_withdraw_of_a_misspelled_kind_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let withdraw = [
        "withdraw",
        "--subscription-id",
        "sub_1",
        "--period-start",
        "2027-01-20",
        "--kind",
        "anual_renewal",
        "--yes",
    ];
    let flagged: Vec<&str> = withdraw.iter().copied().chain(["--config", config.to_str().unwrap()]).collect();
    let out = noticectl(dir.path(), &flagged);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(!stdout.contains("withdrawn"), "{stdout}");
    assert!(stderr.contains("--kind") && stderr.contains(r#"did you mean "annual_renewal"?"#), "{stderr}");
    assert!(!dir.path().join(".notices").exists(), "a refused withdraw leaves nothing behind");

    // NOTICE_CONFIG is taken the same way as --config.
    let out = noticectl_with(dir.path(), &withdraw, &[("NOTICE_CONFIG", config.as_path())]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(r#"did you mean "annual_renewal"?"#), "{stderr}");
    assert!(!dir.path().join(".notices").exists(), "a refused withdraw leaves nothing behind");
}
