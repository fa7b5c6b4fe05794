//! `noticectl link verify` (issue 36, item 3): a link the sender mailed verifies under the secret
//! it was made with, and only under that one; a tampered link does not (exit 1); a malformed one is
//! named (exit 2). The links come from a real local `send` (its .eml outbox) and from the published
//! vectors (shared/core/tests/vectors/manage_links.json), so the command, the sender and the
//! reference scripts agree on one formula.

use std::path::Path;
use std::process::{Command, Output};

const KEY_SECRET: &str = "the-deployment-secret-0123456789";
const OTHER_SECRET: &str = "another-secret-entirely-98765";
const LINK_SECRET: &str = "merchant-web-app-link-secret-2026";
const SUBSCRIPTION: &str = "sub a/b&c+ü %";

fn noticectl(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_noticectl"));
    cmd.current_dir(dir);
    for var in [
        "NOTICE_KEY_SECRET",
        "NOTICE_KEY_SECRET_ARN",
        "NOTICE_LINK_SECRET",
        "NOTICE_MANAGE_URL",
        "NOTICE_STATE_DIR",
        "NOTICE_LEDGER_URL",
        "NOTICE_CONFIG",
        "NOTICE_WINDOWS",
        "NOTICE_WINDOWS_FILE",
        "NOTICE_TEMPLATE_DIR",
        "NOTICE_MODE",
        "AWS_LAMBDA_FUNCTION_NAME",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied()).args(args).output().expect("run noticectl")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// No output ever holds a secret.
fn assert_no_secret(o: &Output) {
    let t = text(o);
    for secret in [KEY_SECRET, OTHER_SECRET, LINK_SECRET] {
        assert!(!t.contains(secret), "a secret printed: {t}");
    }
}

fn verify(dir: &Path, env: &[(&str, &str)], url: &str) -> Output {
    let out = noticectl(dir, env, &["link", "verify", url]);
    assert_no_secret(&out);
    out
}

/// Sends one notice for [`SUBSCRIPTION`] into the local outbox and returns the manage link of its
/// text part (quoted-printable decoded), as the customer's mail client shows it.
fn send_and_read_link(dir: &Path, env: &[(&str, &str)]) -> String {
    let job = serde_json::json!({"subscription_id": SUBSCRIPTION, "period_start": "2026-12-01",
        "kind": "renewal_notice_t72", "email": "k@example.com", "charge_at": "2026-12-04T09:00:00Z",
        "template_data": {"plan_name": "Pro", "amount": {"minor": 900, "currency": "USD"}}});
    std::fs::write(dir.join("jobs.jsonl"), format!("{job}\n")).unwrap();
    let sent = noticectl(dir, env, &["send", "jobs.jsonl", "--now", "2026-12-02T12:00:00Z"]);
    assert_eq!(sent.status.code(), Some(0), "{}", text(&sent));
    let outbox = dir.join(".notices/outbox");
    let eml = std::fs::read_dir(&outbox)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "eml"))
        .expect("an .eml in the outbox");
    let decoded = quoted_printable_decode(&std::fs::read_to_string(eml).unwrap());
    let start = decoded.find("https://").expect("a link in the notice");
    let link: String = decoded[start..].chars().take_while(|c| !c.is_whitespace()).collect();
    assert!(link.contains("&t="), "{link}");
    link
}

/// Just enough quoted-printable (RFC 2045) for the outbox's text part: soft breaks and `=XX`.
fn quoted_printable_decode(text: &str) -> String {
    let joined = text.replace("=\r\n", "").replace("=\n", "");
    let bytes = joined.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'=', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

/// The link with its token's last hex digit changed.
fn tampered(link: &str) -> String {
    let last = if link.ends_with('0') { '1' } else { '0' };
    format!("{}{last}", &link[..link.len() - 1])
}

#[test]
fn a_link_the_sender_mailed_verifies_under_its_secret_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("NOTICE_KEY_SECRET", KEY_SECRET),
        ("NOTICE_MANAGE_URL", "https://shop.example.net/account?tab=plan"),
    ];
    let link = send_and_read_link(dir.path(), &env);
    assert!(link.starts_with("https://shop.example.net/account?tab=plan&s=sub%20a%2Fb%26c%2B%C3%BC%20%25&p="));

    let ok = verify(dir.path(), &env, &link);
    let t = text(&ok);
    assert_eq!(ok.status.code(), Some(0), "{t}");
    assert!(t.starts_with(&format!("valid: subscription \"{SUBSCRIPTION}\", period 2026-12-01")), "{t}");
    let key_id =
        notice_ledger::keycheck::KeyCheck::of(&notice_ledger::NoticeSecret::new(KEY_SECRET).unwrap());
    assert!(
        t.contains(&format!("derived from key secret {key_id}")),
        "names the key secret's identifier: {t}"
    );

    let json = noticectl(dir.path(), &env, &["link", "verify", "--json", &link]);
    assert_eq!(json.status.code(), Some(0), "{}", text(&json));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON object");
    assert_eq!(doc["verdict"], "valid");
    assert_eq!(doc["subscription_id"], SUBSCRIPTION);
    assert_eq!(doc["period_start"], "2026-12-01");
    assert_eq!(doc["key_secret"], key_id.identifier());

    for (what, out) in [
        ("a changed token", verify(dir.path(), &env, &tampered(&link))),
        ("another key secret", verify(dir.path(), &[("NOTICE_KEY_SECRET", OTHER_SECRET)], &link)),
        ("another subscription", verify(dir.path(), &env, &link.replace("s=sub%20a", "s=sub%20b"))),
        ("another period", verify(dir.path(), &env, &link.replace("p=2026-12-01", "p=2027-12-01"))),
        (
            "NOTICE_LINK_SECRET instead of the derived one",
            verify(dir.path(), &[("NOTICE_LINK_SECRET", LINK_SECRET)], &link),
        ),
    ] {
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{what}: {t}");
        assert!(t.contains("does not verify under this secret: tampered, or another secret"), "{what}: {t}");
    }
    let json = noticectl(dir.path(), &env, &["link", "verify", "--json", &tampered(&link)]);
    assert_eq!(json.status.code(), Some(1));
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&json.stdout).unwrap()["verdict"], "invalid");
}

#[test]
fn the_local_secret_and_notice_link_secret_are_honoured_as_the_sender_honours_them() {
    // No key secret configured: the state directory's own, as `send` used it.
    let local = tempfile::tempdir().unwrap();
    let link = send_and_read_link(local.path(), &[]);
    let ok = verify(local.path(), &[], &link);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok));

    // NOTICE_LINK_SECRET replaces the derived secret, in the sender and in the check alike.
    let dir = tempfile::tempdir().unwrap();
    let env = [("NOTICE_KEY_SECRET", KEY_SECRET), ("NOTICE_LINK_SECRET", LINK_SECRET)];
    let link = send_and_read_link(dir.path(), &env);
    let ok = verify(dir.path(), &env, &link);
    let t = text(&ok);
    assert_eq!(ok.status.code(), Some(0), "{t}");
    assert!(t.contains("(link secret: NOTICE_LINK_SECRET)"), "{t}");
    let derived = verify(dir.path(), &[("NOTICE_KEY_SECRET", KEY_SECRET)], &link);
    assert_eq!(derived.status.code(), Some(1), "the derived secret does not verify it: {}", text(&derived));
    // Empty counts as unset (the sender's rule): the derived secret, which does not verify it.
    let empty = verify(dir.path(), &[("NOTICE_KEY_SECRET", KEY_SECRET), ("NOTICE_LINK_SECRET", "")], &link);
    assert_eq!(empty.status.code(), Some(1), "{}", text(&empty));
    // A short one is a configuration error, as at the sender's start.
    let short = verify(dir.path(), &[("NOTICE_LINK_SECRET", "short")], &link);
    let t = text(&short);
    assert_eq!(short.status.code(), Some(2), "{t}");
    assert!(t.contains("NOTICE_LINK_SECRET") && t.contains("at least 16"), "{t}");
}

#[test]
fn every_published_vector_verifies_under_its_secret() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/core/tests/vectors/manage_links.json");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let vectors = doc["vectors"].as_array().expect("vectors");
    assert!(vectors.len() >= 20);
    let dir = tempfile::tempdir().unwrap();
    for v in vectors {
        let (url, key_secret) = (v["url"].as_str().unwrap(), v["key_secret"].as_str().unwrap());
        let mut env = vec![("NOTICE_KEY_SECRET", key_secret)];
        if let Some(link_secret) = v.get("link_secret_env").and_then(|s| s.as_str()) {
            // Without NOTICE_LINK_SECRET the derived secret is used, and it is not this one.
            let derived = noticectl(dir.path(), &env, &["link", "verify", url]);
            assert_eq!(derived.status.code(), Some(1), "{url}: {}", text(&derived));
            env.push(("NOTICE_LINK_SECRET", link_secret));
        }
        let out = noticectl(dir.path(), &env, &["link", "verify", "--json", url]);
        assert_eq!(out.status.code(), Some(0), "{url}: {}", text(&out));
        let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got["subscription_id"], v["subscription_id"], "{url}");
        assert_eq!(got["period_start"], v["period_start"], "{url}");
        assert!(!text(&out).contains(key_secret));
    }
}

#[test]
fn a_malformed_link_exits_2_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("NOTICE_KEY_SECRET", KEY_SECRET)];
    let good = "https://billing.example.com/manage?s=sub_1&p=2026-10-01&t=7122288a42a916d610b0672192f09960";
    let cases = [
        ("https://billing.example.com/manage", "no query string"),
        ("https://billing.example.com/manage?s=sub_1&p=2026-10-01", "missing parameter t"),
        ("https://billing.example.com/manage?t=7122288a42a916d610b0672192f09960", "missing parameter s, p"),
        (
            "https://billing.example.com/manage?s=sub_1&amp;p=2026-10-01&amp;t=7122288a42a916d610b0672192f09960",
            "copied from HTML source",
        ),
        (&good.replace("2026-10-01", "2026-02-30"), "parameter p (period_start) is not a real calendar date"),
        (&good.replace("2026-10-01", "1.10.2026"), "parameter p (period_start) must be a date in YYYY-MM-DD"),
        (&good.replace("&t=7", "&t=x"), "parameter t must be 32 lower-case hex characters (0-9, a-f)"),
        (&good.replace("960", "96"), "parameter t must be 32 lower-case hex characters; it is 31 characters long"),
        (&good.replace("s=sub_1", "s="), "parameter s (subscription_id) must not be empty"),
        (&good.replace("s=sub_1", "s=sub%7C1"), "parameter s (subscription_id) must not contain '|'"),
        (&good.replace("s=sub_1", "s=sub%E2"), "parameter s is not UTF-8"),
        (&good.replace("s=sub_1", "s=sub%2"), "parameter s has a `%`"),
        (&format!("{good}&s=sub_2"), "parameter s appears more than once"),
    ];
    for (url, words) in cases {
        let out = verify(dir.path(), &env, url);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(2), "{url}: {t}");
        assert!(t.contains("malformed link") && t.contains(words), "{url}: expected {words:?} in {t}");
    }
    let json = noticectl(dir.path(), &env, &["link", "verify", "--json", "https://x.example/m?s=a"]);
    assert_eq!(json.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON on stdout");
    assert_eq!(doc["verdict"], "malformed");
    assert_eq!(doc["problem"], "missing parameter p, t");
    // The untouched link is well formed: vector 0's, made under another key secret, so here it is
    // "invalid" (1), not "malformed".
    assert_eq!(verify(dir.path(), &env, good).status.code(), Some(1));
}

#[test]
fn without_any_secret_it_says_so_and_creates_none() {
    let dir = tempfile::tempdir().unwrap();
    let out =
        verify(dir.path(), &[], "https://b.example/m?s=a&p=2026-10-01&t=7122288a42a916d610b0672192f09960");
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(t.contains("no secret to verify against") && t.contains("NOTICE_LINK_SECRET"), "{t}");
    assert!(!dir.path().join(".notices/secret").exists(), "a random secret would verify nothing");
}
