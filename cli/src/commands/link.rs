//! `noticectl link verify URL`: whether a manage (cancel) link is one the sender made, under the
//! link secret the sender uses — so an operator can answer "is this link genuine?" and check the
//! merchant's web app against the same formula (docs/security.md, *Manage links*).
//!
//! The verdicts are the exit-code contract: valid 0; a well-formed link whose token does not
//! verify 1 (tampered, or made under another secret: both look the same, by design of an HMAC);
//! a malformed link 2, naming what is wrong. The link is parsed before any secret is read, and no
//! secret is ever printed: the source is named, and a derived secret by its key secret's
//! identifier (the one the ledger's key check and the sender's start-up log show).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use notice_ledger::keycheck::KeyCheck;
use notice_ledger::links::ManageLinks;
use notice_ledger::Identity;

use crate::exit::Exit;
use crate::local::StateDir;
use crate::terminal::escape;

/// The variable that replaces the derived link secret (`notice_setup::config::links_from_env`).
const LINK_SECRET_VAR: &str = "NOTICE_LINK_SECRET";
/// Hex characters of a token, as `ManageLinks::token` writes it.
const TOKEN_HEX_LEN: usize = 32;

#[derive(Args, Debug)]
pub(crate) struct LinkArgs {
    #[command(subcommand)]
    command: LinkCommand,
}

#[derive(Subcommand, Debug)]
enum LinkCommand {
    /// Verify a manage link's token (s, p, t) under the sender's link secret (NOTICE_LINK_SECRET, else derived from the key secret): exit 0 valid, 1 does not verify, 2 malformed.
    Verify(VerifyArgs),
}

#[derive(Args, Debug)]
struct VerifyArgs {
    /// The link as mailed (quote it in the shell: it holds '&').
    url: String,
    /// One JSON object on stdout: verdict, subscription_id, period_start, link_secret, or problem.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn run(state_dir: PathBuf, args: LinkArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        LinkCommand::Verify(verify) => run_verify(&state_dir, verify).await,
    }
}

async fn run_verify(state_dir: &Path, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let link = match ParsedLink::parse(&args.url) {
        Ok(link) => link,
        Err(problem) => {
            if args.json {
                println!("{}", serde_json::json!({"verdict": "malformed", "problem": problem.to_string()}));
            } else {
                eprintln!("noticectl: link verify: malformed link: {}", escape(&problem.to_string()));
            }
            return Ok(Exit::Unusable.into());
        }
    };
    let (links, source) = link_secret(state_dir).await?;
    let valid = links.verify(&link.subscription_id, &link.period_start, &link.token);
    let subscription = escape(&link.subscription_id);
    if args.json {
        let doc = serde_json::json!({
            "verdict": if valid { "valid" } else { "invalid" },
            "subscription_id": link.subscription_id,
            "period_start": link.period_start,
            "link_secret": source.name(),
            "key_secret": source.key_identifier(),
        });
        println!("{doc}");
    } else if valid {
        println!(
            "valid: subscription \"{subscription}\", period {} (link secret: {})",
            link.period_start,
            source.describe()
        );
    } else {
        println!(
            "invalid: the token does not verify under this secret: tampered, or another secret \
             (subscription \"{subscription}\", period {}; link secret: {})",
            link.period_start,
            source.describe()
        );
    }
    Ok(Exit::attention_if(!valid).into())
}

/// Where the link secret came from; never the secret itself.
enum SecretSource {
    /// `NOTICE_LINK_SECRET`.
    LinkSecretVar,
    /// Derived from the key secret, shown by its key-check identifier.
    DerivedFromKey(KeyCheck),
}

impl SecretSource {
    fn name(&self) -> &'static str {
        match self {
            Self::LinkSecretVar => LINK_SECRET_VAR,
            Self::DerivedFromKey(_) => "derived from the key secret",
        }
    }

    fn key_identifier(&self) -> Option<String> {
        match self {
            Self::LinkSecretVar => None,
            Self::DerivedFromKey(check) => Some(check.identifier()),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::LinkSecretVar => LINK_SECRET_VAR.to_owned(),
            Self::DerivedFromKey(check) => format!("derived from key secret {check}"),
        }
    }
}

/// The link secret exactly as the sender resolves it: `NOTICE_LINK_SECRET` when set (empty counts
/// as unset, short or blank is refused), else derived from the key secret by
/// `notice_setup::config::links_from_env` itself. The key secret is noticectl's usual one
/// (`NOTICE_KEY_SECRET` / `NOTICE_KEY_SECRET_ARN`, else the state directory's) — but a local secret
/// is never created here: a new random one would make every link "invalid" and say nothing.
async fn link_secret(state_dir: &Path) -> anyhow::Result<(ManageLinks, SecretSource)> {
    if let Some(value) = notice_setup::config::optional(LINK_SECRET_VAR) {
        let secret = notice_setup::secret::checked(LINK_SECRET_VAR, value)?;
        return Ok((ManageLinks::new(String::new(), secret), SecretSource::LinkSecretVar));
    }
    let configured = notice_setup::secret::source_from_env()?.is_some();
    let local = state_dir.join("secret");
    if !configured && !local.exists() {
        anyhow::bail!(
            "link verify: no secret to verify against: set {LINK_SECRET_VAR}, or NOTICE_KEY_SECRET / \
             NOTICE_KEY_SECRET_ARN (the link secret is derived from it), or use the --state-dir whose \
             local secret sent the link ({} does not exist)",
            local.display()
        );
    }
    let key_secret = StateDir::open(state_dir)?.secret().await?;
    let links = notice_setup::config::links_from_env(&key_secret)?;
    // The link secret is derived from the first key secret version ([`notice_setup::config::links_from_env`]).
    let first = key_secret.version(1).unwrap_or_else(|| key_secret.current());
    Ok((links, SecretSource::DerivedFromKey(KeyCheck::of_version(first.secret(), first.version()))))
}

/// The three parameters of a manage link, decoded and checked the way the sender wrote them.
#[derive(Debug, PartialEq, Eq)]
struct ParsedLink {
    subscription_id: String,
    period_start: String,
    token: String,
}

/// Why a link is not one the sender could have made (exit 2).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
enum Malformed {
    #[error("no query string: a manage link ends in ?s=…&p=…&t=…")]
    NoQuery,
    #[error("missing parameter {}{}", .missing.join(", "), html_hint(.html_escaped))]
    Missing { missing: Vec<&'static str>, html_escaped: bool },
    #[error("parameter {0} appears more than once")]
    Repeated(&'static str),
    #[error("parameter {name} {problem}")]
    Bad { name: &'static str, problem: String },
}

/// A link copied from an HTML part's source keeps `&amp;` between its parameters: say so, since
/// "missing parameter p" alone would puzzle whoever pasted it.
fn html_hint(html_escaped: &bool) -> &'static str {
    if *html_escaped {
        " (the link holds `&amp;`: it was copied from HTML source; use it as a browser shows it)"
    } else {
        ""
    }
}

impl ParsedLink {
    /// Reads `s`, `p` and `t` from the query (form decoding: `%XX` and `+` as a space, as web
    /// frameworks read it; the sender never writes a literal `+`). Other parameters — the base
    /// URL's own — are ignored; a repeated `s`, `p` or `t` is refused, since which copy a web
    /// framework keeps differs.
    fn parse(url: &str) -> Result<Self, Malformed> {
        let url = url.trim();
        let without_fragment = url.split_once('#').map_or(url, |(before, _)| before);
        let (_, query) = without_fragment.split_once('?').ok_or(Malformed::NoQuery)?;
        let mut found: [Option<String>; 3] = [None, None, None];
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (raw_name, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
            let Ok(name) = form_decode(raw_name) else { continue };
            let Some(slot) = PARAMETERS.iter().position(|p| *p == name) else { continue };
            let parameter = PARAMETERS[slot];
            if found[slot].is_some() {
                return Err(Malformed::Repeated(parameter));
            }
            let value =
                form_decode(raw_value).map_err(|problem| Malformed::Bad { name: parameter, problem })?;
            found[slot] = Some(value);
        }
        let [s, p, t] = found;
        let (Some(subscription_id), Some(period_start), Some(token)) = (s.clone(), p.clone(), t.clone())
        else {
            let missing = [&s, &p, &t]
                .iter()
                .zip(PARAMETERS)
                .filter(|(value, _)| value.is_none())
                .map(|(_, name)| name)
                .collect();
            return Err(Malformed::Missing { missing, html_escaped: query.contains("&amp;") });
        };
        // The sender's own validation of the two identity fields (it never links anything else).
        if let Err(e) = Identity::new(&subscription_id, &period_start, "renewal_notice_t72", 0) {
            let name = if e.field == "period_start" { "p" } else { "s" };
            return Err(Malformed::Bad { name, problem: format!("({}) {}", e.field, e.reason) });
        }
        if token.len() != TOKEN_HEX_LEN {
            return Err(Malformed::Bad {
                name: "t",
                problem: format!(
                    "must be {TOKEN_HEX_LEN} lower-case hex characters; it is {} characters long",
                    token.chars().count()
                ),
            });
        }
        if !token.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(Malformed::Bad {
                name: "t",
                problem: format!("must be {TOKEN_HEX_LEN} lower-case hex characters (0-9, a-f)"),
            });
        }
        Ok(Self { subscription_id, period_start, token })
    }
}

/// The parameters of a manage link, in the order the sender writes them.
const PARAMETERS: [&str; 3] = ["s", "p", "t"];

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a byte; the bytes must be
/// UTF-8. A `%` not followed by two hex digits is an error, not a literal.
fn form_decode(raw: &str) -> Result<String, String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
                let byte = hex
                    .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                let Some(byte) = byte else {
                    return Err(format!("has a `%` at byte {i} not followed by two hex digits"));
                };
                out.push(byte);
                i += 2;
            }
            _ => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| "is not UTF-8 once percent-decoded".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "7122288a42a916d610b0672192f09960";

    fn parse(url: &str) -> Result<ParsedLink, Malformed> {
        ParsedLink::parse(url)
    }

    #[test]
    fn reads_the_three_parameters_as_the_sender_encodes_them() {
        let link = parse(&format!(
            "https://b.example/account?tab=plan&s=a%2Fb%20c%26d%2Be%25f&p=2026-10-01&t={TOKEN}#x"
        ))
        .unwrap();
        assert_eq!(link.subscription_id, "a/b c&d+e%f");
        assert_eq!(link.period_start, "2026-10-01");
        assert_eq!(link.token, TOKEN);
        // Form decoding: `+` is a space (the sender never writes one), names are decoded too.
        assert_eq!(parse(&format!("x?%73=a+b&p=2026-10-01&t={TOKEN}")).unwrap().subscription_id, "a b");
        // An empty pair (a base URL ending in `?`) is skipped.
        assert!(parse(&format!("x?&s=a&p=2026-10-01&t={TOKEN}")).is_ok());
    }

    #[test]
    fn names_what_is_wrong() {
        assert_eq!(parse("https://b.example/manage").unwrap_err(), Malformed::NoQuery);
        assert_eq!(
            parse("https://b.example/manage?s=a").unwrap_err(),
            Malformed::Missing { missing: vec!["p", "t"], html_escaped: false }
        );
        let html = parse(&format!("x?s=a&amp;p=2026-10-01&amp;t={TOKEN}")).unwrap_err();
        assert!(html.to_string().contains("missing parameter p, t (the link holds `&amp;`"), "{html}");
        assert_eq!(
            parse(&format!("x?s=a&s=b&p=2026-10-01&t={TOKEN}")).unwrap_err(),
            Malformed::Repeated("s")
        );
        let cases = [
            (format!("x?s=a&p=2026-02-30&t={TOKEN}"), "p", "not a real calendar date"),
            (format!("x?s=a&p=20261001&t={TOKEN}"), "p", "YYYY-MM-DD"),
            (format!("x?s=&p=2026-10-01&t={TOKEN}"), "s", "must not be empty"),
            (format!("x?s=a%7Cb&p=2026-10-01&t={TOKEN}"), "s", "'|'"),
            (format!("x?s=a%0Ab&p=2026-10-01&t={TOKEN}"), "s", "control"),
            (format!("x?s=a%FF&p=2026-10-01&t={TOKEN}"), "s", "not UTF-8"),
            (format!("x?s=a%2&p=2026-10-01&t={TOKEN}"), "s", "two hex digits"),
            (format!("x?s=a%zz1&p=2026-10-01&t={TOKEN}"), "s", "two hex digits"),
            (format!("x?s={}&p=2026-10-01&t={TOKEN}", "x".repeat(257)), "s", "at most 256 bytes"),
            (format!("x?s=a&p=2026-10-01&t={}", &TOKEN[..31]), "t", "31 characters"),
            (format!("x?s=a&p=2026-10-01&t={TOKEN}0"), "t", "33 characters"),
            (format!("x?s=a&p=2026-10-01&t={}", TOKEN.to_uppercase()), "t", "lower-case hex"),
            (format!("x?s=a&p=2026-10-01&t={}g", &TOKEN[..31]), "t", "lower-case hex"),
        ];
        for (url, name, words) in cases {
            match parse(&url) {
                Err(e @ Malformed::Bad { name: n, .. }) if n == name => {
                    assert!(e.to_string().contains(words), "{url}: {e}");
                    assert!(e.to_string().starts_with(&format!("parameter {name} ")), "{e}");
                }
                other => panic!("{url}: expected parameter {name} bad, got {other:?}"),
            }
        }
    }
}
