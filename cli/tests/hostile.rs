//! `noticectl` against a hostile producer and a careless operator: one mailbox per job, standard
//! MIME in the outbox, no silent secret fallback, line-by-line input errors, private local state.

use std::path::Path;
use std::process::{Command, Output};

const NOW: &str = "2026-12-02T12:00:00Z";
const SECRET: &str = "a-deployment-secret-of-32-bytes!";

fn job(sub: &str, email: &str, data: serde_json::Value) -> String {
    serde_json::json!({"subscription_id": sub, "period_start": "2026-12-01", "kind": "renewal_notice_t72",
        "email": email, "charge_at": "2026-12-04T09:00:00Z", "template_data": data})
    .to_string()
}

fn noticectl(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noticectl"));
    cmd.current_dir(dir)
        .env_remove("NOTICE_KEY_SECRET")
        .env_remove("NOTICE_KEY_SECRET_ARN")
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_STATE_DIR")
        .env_remove("NOTICE_MODE")
        .env_remove("NOTICE_FROM")
        .env_remove("NOTICE_RATE_LIMITS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args).output().expect("run noticectl")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn emls(dir: &Path) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(dir.join(".notices/outbox")) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "eml"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn an_empty_blank_or_short_secret_is_an_error_never_a_fallback() {
    let cases: [(&str, &str, &str); 5] = [
        ("NOTICE_KEY_SECRET", "", "empty"),
        ("NOTICE_KEY_SECRET", "  \t ", "blank"),
        ("NOTICE_KEY_SECRET", "s3cret", "at least 16"),
        ("NOTICE_KEY_SECRET_ARN", "", "NOTICE_KEY_SECRET_ARN"),
        ("NOTICE_KEY_SECRET_ARN", "   ", "NOTICE_KEY_SECRET_ARN"),
    ];
    for (var, value, words) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("jobs.jsonl"), job("sub_1", "ada@example.com", serde_json::json!({})))
            .unwrap();
        for args in [
            &["send", "jobs.jsonl", "--now", NOW][..],
            &[
                "key",
                "--subscription-id",
                "sub_1",
                "--period-start",
                "2026-12-01",
                "--kind",
                "renewal_notice_t72",
            ][..],
        ] {
            let out = noticectl(dir.path(), args, &[(var, value)]);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(2), "{var}={value:?} {args:?}: {err}");
            assert!(err.contains(var) && err.contains(words), "{var}={value:?}: {err}");
            assert!(!err.contains("created a random local secret"), "{err}");
            assert!(!dir.path().join(".notices/secret").exists(), "fell back to a local secret");
            assert!(emls(dir.path()).is_empty());
        }
    }
    // Both variables at once is ambiguous, not "pick one".
    let dir = tempfile::tempdir().unwrap();
    let out = noticectl(
        dir.path(),
        &["key", "--subscription-id", "s", "--period-start", "2026-12-01", "--kind", "k"],
        &[("NOTICE_KEY_SECRET", SECRET), ("NOTICE_KEY_SECRET_ARN", "arn:aws:secretsmanager:x")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("only one"), "{}", stderr(&out));
}

#[test]
fn a_bom_a_bad_byte_and_an_oversized_line_cost_only_their_own_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(job("sub_1", "a@example.com", serde_json::json!({})).as_bytes());
    bytes.extend_from_slice(b"\n{\"subscription_id\":\"\xff\xfe\"}\n");
    let big = job("sub_big", "b@example.com", serde_json::json!({"plan_name": "x".repeat(1100 * 1024)}));
    bytes.extend_from_slice(big.as_bytes());
    bytes.push(b'\n');
    bytes.extend_from_slice(job("sub_4", "d@example.com", serde_json::json!({})).as_bytes());
    bytes.push(b'\n');
    std::fs::write(dir.path().join("jobs.jsonl"), bytes).unwrap();

    let out = noticectl(dir.path(), &["send", "jobs.jsonl", "--now", NOW], &[("NOTICE_KEY_SECRET", SECRET)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", stderr(&out));
    assert_eq!(emls(dir.path()).len(), 2, "lines 1 and 4 are sent\n{stdout}");
    let line = |n: &str| stdout.lines().find(|l| l.starts_with(n)).unwrap_or_default().to_owned();
    assert!(line("line 1 ").contains("sent"), "{stdout}");
    assert!(line("line 2 ").contains("invalid") && line("line 2 ").contains("UTF-8"), "{stdout}");
    assert!(line("line 3 ").contains("invalid") && line("line 3 ").contains("bytes"), "{stdout}");
    assert!(line("line 4 ").contains("sent"), "{stdout}");
}

#[test]
fn hostile_addresses_and_from_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        job("sub_1", "victim@example.com,attacker@evil.example", serde_json::json!({})),
        job("sub_2", "Victim <victim@example.com>", serde_json::json!({})),
        job("sub_3", "a@-b.com", serde_json::json!({})),
        job("sub_4", "vic\u{200B}tim@example.com", serde_json::json!({})),
    ];
    std::fs::write(dir.path().join("jobs.jsonl"), lines.join("\n")).unwrap();
    let out = noticectl(dir.path(), &["send", "jobs.jsonl", "--now", NOW], &[("NOTICE_KEY_SECRET", SECRET)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("line ") && l.contains("invalid") && l.contains("email"))
            .count(),
        4,
        "{stdout}"
    );
    assert!(emls(dir.path()).is_empty());

    let out = noticectl(
        dir.path(),
        &["send", "jobs.jsonl", "--now", NOW, "--from", "billing@example.com\r\nBcc: spy@evil.example"],
        &[("NOTICE_KEY_SECRET", SECRET)],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--from"), "{}", stderr(&out));
}

/// Every `.eml` parses with Python's `email` package in strict mode, addresses exactly one
/// recipient, and keeps every header line within RFC 5322's 998 octets — whatever the data held.
#[test]
fn hostile_template_data_still_makes_standard_mail() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        job("sub_1", "ada@example.com", serde_json::json!({"plan_name": "Tea\u{0}\u{1b}[2J\u{7f} Box"})),
        job("sub_2", "bob@example.com", serde_json::json!({"plan_name": "Box\r\nBcc: spy@evil.example"})),
        job("sub_3", "cy@example.com", serde_json::json!({"plan_name": "Überraschungsbox ☕ ".repeat(400)})),
        job("sub_4", "dee@bücher.de", serde_json::json!({"plan_name": "x".repeat(8000)})),
    ];
    std::fs::write(dir.path().join("jobs.jsonl"), lines.join("\n")).unwrap();
    let out = noticectl(
        dir.path(),
        &["send", "jobs.jsonl", "--now", NOW, "--from", "Billing Team <billing@example.com>"],
        &[("NOTICE_KEY_SECRET", SECRET)],
    );
    assert_eq!(out.status.code(), Some(0), "{}\n{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    let files = emls(dir.path());
    assert_eq!(files.len(), 4);
    for file in &files {
        let raw = std::fs::read(file).unwrap();
        for line in raw.split(|b| *b == b'\n') {
            assert!(line.len() <= 998, "{}: a line of {} bytes", file.display(), line.len());
        }
    }
    let script = r#"
import email, email.policy, sys
for path in sys.argv[1:]:
    with open(path, 'rb') as f:
        msg = email.message_from_binary_file(f, policy=email.policy.strict)
    to = msg.get_all('To')
    assert to is not None and len(to) == 1, (path, to)
    assert len(to[0].addresses) == 1, (path, to[0].addresses)
    assert msg.get('Bcc') is None and msg.get('Cc') is None, path
    subject = str(msg['Subject'])
    assert len(subject) <= 250, (path, len(subject))
    assert not any(ord(c) < 32 or ord(c) == 127 for c in subject), (path, subject)
    assert msg['X-Notice-Key'] and len(str(msg['X-Notice-Key'])) == 64, path
    assert msg.is_multipart() and {p.get_content_type() for p in msg.iter_parts()} == {'text/plain', 'text/html'}, path
    print(to[0].addresses[0].addr_spec)
"#;
    let parsed = Command::new("python3").arg("-c").arg(script).args(&files).output().expect("python3");
    let stdout = String::from_utf8_lossy(&parsed.stdout);
    assert!(parsed.status.success(), "{}\n{}", stdout, String::from_utf8_lossy(&parsed.stderr));
    let mut recipients: Vec<&str> = stdout.lines().collect();
    recipients.sort_unstable();
    assert_eq!(recipients, ["ada@example.com", "bob@example.com", "cy@example.com", "dee@xn--bcher-kva.de"]);
}

#[cfg(unix)]
#[test]
fn local_state_is_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jobs.jsonl"), job("sub_1", "ada@example.com", serde_json::json!({})))
        .unwrap();
    let out = Command::new("sh")
        .current_dir(dir.path())
        .arg("-c")
        .arg(format!("umask 000; exec {} send jobs.jsonl --now {NOW}", env!("CARGO_BIN_EXE_noticectl")))
        .env_remove("NOTICE_KEY_SECRET")
        .env_remove("NOTICE_KEY_SECRET_ARN")
        .env_remove("NOTICE_LEDGER_URL")
        .env_remove("NOTICE_STATE_DIR")
        .env_remove("NOTICE_RATE_LIMITS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let state = dir.path().join(".notices");
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("outbox")), 0o700);
    assert_eq!(mode(&state.join("ledger.db")), 0o600);
    assert_eq!(mode(&state.join("secret")), 0o600);
    for eml in emls(dir.path()) {
        assert_eq!(mode(&eml), 0o600, "{}", eml.display());
    }
    for side in ["ledger.db-wal", "ledger.db-shm"] {
        let p = state.join(side);
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{side}");
        }
    }
}
