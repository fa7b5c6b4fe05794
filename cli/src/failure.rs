//! AWS and database failures, classified once: an error chain becomes one line with the cause
//! and the next step ("DynamoDB unreachable at http://127.0.0.1:1 (connection refused) — check
//! AWS_ENDPOINT_URL / the network; nothing was written"), exit code 2. The SDK's debug form is
//! printed only with `-v`.
//!
//! A ledger error carries its cause as a kind ([`Fault`]), which the adapter read from the
//! driver's or SDK's typed error; that kind decides. Errors that carry no kind yet (SQS,
//! EventBridge Scheduler, Secrets Manager, and a ledger error whose fault is `Other`) are still
//! recognised by the words the SDK, the lean AWS client, hyper and tokio-postgres use.

use std::fmt;

use notice_ledger::{Fault, LedgerError};

use crate::exit::{Exit, SafetyStop};

/// What was done before a dependency failure stopped a command that writes; attached as the
/// outermost context of the error (`err.context(Done(…))`). Without it the line says
/// "nothing was written".
#[derive(Debug)]
pub(crate) struct Done(pub(crate) String);

impl fmt::Display for Done {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a dependency could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    NoCredentials,
    ExpiredToken,
    /// Credentials the service does not know (bad key id or signature).
    BadCredentials,
    /// With the action (`dynamodb:BatchGetItem`) when the message names it.
    AccessDenied(Option<String>),
    /// Connection refused, DNS, timed out, no route: the reason in a few words.
    Unreachable(&'static str),
    Throttled,
}

/// A dependency failure: which service, why, and where (the endpoint or redacted URL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) service: &'static str,
    pub(crate) cause: Cause,
    pub(crate) at: Option<String>,
}

/// The dependency failure `err`'s chain describes, if it is one.
pub(crate) fn classify(err: &anyhow::Error) -> Option<Failure> {
    let text = format!("{err:#}");
    let typed = err.chain().find_map(|e| e.downcast_ref::<LedgerError>()).and_then(LedgerError::fault);
    match typed.and_then(|fault| cause_of(fault, &text)) {
        Some(cause) => {
            let service = service(&text.to_lowercase());
            Some(Failure { service, cause, at: location(service, &text) })
        }
        None => classify_text(&text),
    }
}

/// The cause a ledger's typed fault names; `None` for the kinds this line has no wording of its
/// own for (a timeout, a busy file, anything else), which go by the text as before.
fn cause_of(fault: &Fault, text: &str) -> Option<Cause> {
    Some(match fault {
        Fault::Unreachable(why) => Cause::Unreachable(why),
        Fault::Throttled => Cause::Throttled,
        Fault::NoCredentials => Cause::NoCredentials,
        Fault::ExpiredCredentials => Cause::ExpiredToken,
        Fault::BadCredentials => Cause::BadCredentials,
        Fault::Denied { action: named } => Cause::AccessDenied(named.clone().or_else(|| action(text))),
        Fault::TimedOut | Fault::Busy | Fault::Other => return None,
    })
}

fn classify_text(text: &str) -> Option<Failure> {
    let lower = text.to_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    let service = service(&lower);
    let cause = if has(&["expiredtoken", "token included in the request is expired", "token has expired"])
        || (lower.contains("token") && lower.contains("expired"))
    {
        Cause::ExpiredToken
    } else if has(&[
        "no aws credentials",
        "credentialsnotloaded",
        "credentials not loaded",
        "no credentials",
        "error occurred while loading credentials",
        "failed to load credentials",
        "unable to locate credentials",
        "no providers in chain provided credentials",
    ]) {
        Cause::NoCredentials
    } else if has(&[
        "invalidclienttokenid",
        "unrecognizedclient",
        "security token included in the request is invalid",
        "signaturedoesnotmatch",
    ]) {
        Cause::BadCredentials
    } else if has(&[
        "accessdenied",
        "access denied",
        "not authorized to perform",
        "unauthorizedoperation",
        "password authentication failed",
        "no pg_hba.conf entry",
    ]) {
        Cause::AccessDenied(action(text))
    } else if has(&[
        "throttl",
        "provisionedthroughputexceeded",
        "requestlimitexceeded",
        "too many requests",
        "slowdown",
        "rate exceeded",
    ]) {
        Cause::Throttled
    } else if has(&["connection refused"]) {
        Cause::Unreachable("connection refused")
    } else if has(&[
        "dns error",
        "failed to lookup address",
        "name or service not known",
        "no such host",
        "nodename nor servname",
        "temporary failure in name resolution",
    ]) {
        Cause::Unreachable("DNS: host not found")
    } else if has(&["network is unreachable", "no route to host", "host is unreachable"]) {
        Cause::Unreachable("no route to host")
    } else if has(&["connection reset"]) {
        Cause::Unreachable("connection reset")
    } else if (lower.contains("connect") || lower.contains("dispatch failure"))
        && has(&["timed out", "timeout"])
    {
        Cause::Unreachable("timed out connecting")
    } else if has(&[
        "could not connect",
        "tcp connect error",
        "error connecting to server",
        "cannot get a connection",
        "dispatch failure",
    ]) {
        Cause::Unreachable("cannot connect")
    } else {
        return None;
    };
    Some(Failure { service, cause, at: location(service, text) })
}

/// Where `service` was called: the PostgreSQL URL the message names, or the endpoint the SDK was
/// pointed at.
fn location(service: &str, text: &str) -> Option<String> {
    match service {
        "PostgreSQL" => postgres_url(text),
        "DynamoDB" => aws_endpoint("DYNAMODB"),
        "SQS" => aws_endpoint("SQS"),
        "EventBridge Scheduler" => aws_endpoint("SCHEDULER"),
        "Secrets Manager" => aws_endpoint("SECRETS_MANAGER"),
        _ => aws_endpoint(""),
    }
}

fn service(lower: &str) -> &'static str {
    if lower.contains("postgres") {
        "PostgreSQL"
    } else if lower.contains("dynamodb") {
        "DynamoDB"
    } else if lower.contains("secretsmanager")
        || lower.contains("secrets manager")
        || lower.contains("secret_arn")
    {
        "Secrets Manager"
    } else if lower.contains("scheduler") || lower.contains("schedule") {
        "EventBridge Scheduler"
    } else if lower.contains("sqs") || lower.contains("queue") || lower.contains("enqueue") {
        "SQS"
    } else {
        "AWS"
    }
}

/// `dynamodb:BatchGetItem` from "… is not authorized to perform: dynamodb:BatchGetItem on …".
fn action(text: &str) -> Option<String> {
    let at = text.find("perform: ")? + "perform: ".len();
    let word: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '-' | '_'))
        .collect();
    (word.contains(':')).then_some(word)
}

/// The (already redacted) PostgreSQL URL the message names.
fn postgres_url(text: &str) -> Option<String> {
    let at = text.find("postgres://").or_else(|| text.find("postgresql://"))?;
    let url = text[at..].split_whitespace().next()?.trim_end_matches([':', ',', ')', ';']);
    Some(url.to_owned())
}

/// The endpoint the SDK was pointed at: `AWS_ENDPOINT_URL_<SERVICE>`, else `AWS_ENDPOINT_URL`.
fn aws_endpoint(service_var: &str) -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let specific =
        if service_var.is_empty() { None } else { var(&format!("AWS_ENDPOINT_URL_{service_var}")) };
    specific.or_else(|| var("AWS_ENDPOINT_URL"))
}

impl Failure {
    /// One line: the cause, then the next step, then `done` (what the command did before it).
    pub(crate) fn line(&self, done: &str) -> String {
        let service = self.service;
        let postgres = service == "PostgreSQL";
        let at = self.at.as_deref().map(|a| format!(" at {a}")).unwrap_or_default();
        let (what, next) = match &self.cause {
            Cause::NoCredentials => (
                format!("no AWS credentials for {service}"),
                "set AWS_PROFILE (after `aws sso login`) or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"
                    .to_owned(),
            ),
            Cause::ExpiredToken => (
                format!("the AWS credentials for {service} have expired"),
                "refresh them (`aws sso login`, or new session credentials) and run it again".to_owned(),
            ),
            Cause::BadCredentials => (
                format!("{service} rejected the AWS credentials (unknown key id or bad signature)"),
                "check AWS_PROFILE / AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".to_owned(),
            ),
            Cause::AccessDenied(_) if postgres => (
                format!("PostgreSQL{at} refused the login"),
                "check the user and password of --ledger / NOTICE_LEDGER_URL".to_owned(),
            ),
            Cause::AccessDenied(action) => (
                match action {
                    Some(action) => format!("{service}: access denied to {action}"),
                    None => format!("{service}: access denied"),
                },
                "grant that permission to the role or user in use (AWS_PROFILE), or use one that has it"
                    .to_owned(),
            ),
            Cause::Throttled => (
                format!("{service} throttled the requests"),
                "wait a minute and run it again (a lower --rate or --concurrency helps)".to_owned(),
            ),
            Cause::Unreachable(why) if postgres => (
                format!("PostgreSQL unreachable{at} ({why})"),
                "check the host and port of --ledger / NOTICE_LEDGER_URL and that the server is up"
                    .to_owned(),
            ),
            Cause::Unreachable(why) => (
                format!("{service} unreachable{at} ({why})"),
                "check AWS_ENDPOINT_URL / AWS_REGION / the network".to_owned(),
            ),
        };
        format!("noticectl: {what} — {next}; {done}")
    }
}

/// What `main` prints for a command's error, and the exit code: a safety stop as it is (3); a
/// dependency failure as one line with the cause and the next step (2); anything else as its
/// context chain on one line (2).
pub(crate) fn report(err: &anyhow::Error) -> (String, Exit) {
    if err.chain().any(|e| e.is::<SafetyStop>()) {
        return (format!("noticectl: {err:#}"), Exit::SafetyStop);
    }
    match classify(err) {
        Some(failure) => {
            let done = err.downcast_ref::<Done>().map_or("nothing was written", |d| d.0.as_str());
            (failure.line(done), Exit::Unusable)
        }
        // `{:#}`: the message with its context chain ("context: cause"), as one line.
        None => (format!("noticectl: {err:#}"), Exit::Unusable),
    }
}

/// The whole chain with each cause's debug form (the SDK's, for an AWS error): for `-v` only.
/// The chain's own context layers are shown by their message (their debug form repeats the chain).
pub(crate) fn debug_chain(err: &anyhow::Error) -> String {
    err.chain()
        .enumerate()
        .map(|(i, e)| {
            let debug = format!("{e:?}");
            if debug.starts_with("Error {") {
                format!("  {i}: {e}\n")
            } else {
                format!("  {i}: {debug}\n")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cause(text: &str) -> Option<Cause> {
        classify_text(text).map(|f| f.cause)
    }

    #[test]
    fn the_usual_aws_failures_are_recognised() {
        let refused =
            "ledger lookup failed: ledger unavailable: DynamoDB BatchGetItem on T: could not connect: \
                       client error (Connect): tcp connect error: Connection refused (os error 111)";
        let f = classify_text(refused).unwrap();
        assert_eq!((f.service, f.cause), ("DynamoDB", Cause::Unreachable("connection refused")));
        assert_eq!(
            cause(
                "DynamoDB BatchGetItem on T: no AWS credentials: an error occurred while loading credentials"
            ),
            Some(Cause::NoCredentials)
        );
        assert_eq!(
            cause("SQS: ExpiredTokenException: The security token included in the request is expired"),
            Some(Cause::ExpiredToken)
        );
        assert_eq!(
            cause("DynamoDB: AccessDeniedException: User: arn:aws:iam::1:user/x is not authorized to perform: dynamodb:BatchGetItem on resource: T"),
            Some(Cause::AccessDenied(Some("dynamodb:BatchGetItem".into())))
        );
        assert_eq!(cause("DynamoDB: ThrottlingException: Rate exceeded"), Some(Cause::Throttled));
        assert_eq!(
            cause("SQS SendMessageBatch: dispatch failure: io error: dns error: failed to lookup address information"),
            Some(Cause::Unreachable("DNS: host not found"))
        );
        assert_eq!(cause("field `period_start` is not a real calendar date"), None);
        assert_eq!(cause("refusing without confirmation: stdin is not a terminal (pass --yes)"), None);
    }

    #[test]
    fn an_unreachable_postgres_is_never_an_invalid_setting() {
        let text =
            "invalid setting NOTICE_LEDGER_URL: ledger unavailable: PostgreSQL postgres://u@127.0.0.1:1/db: \
                    cannot get a connection: error connecting to server: Connection refused (os error 111)";
        let f = classify_text(text).unwrap();
        assert_eq!(f.service, "PostgreSQL");
        assert_eq!(f.at.as_deref(), Some("postgres://u@127.0.0.1:1/db"));
        let line = f.line("nothing was written");
        assert!(
            line.contains("PostgreSQL unreachable at postgres://u@127.0.0.1:1/db (connection refused)"),
            "{line}"
        );
        assert!(!line.contains("invalid setting"), "{line}");
    }

    #[test]
    fn a_typed_ledger_fault_decides_whatever_the_words() {
        // The text alone would say "connection refused"; the adapter's kind wins.
        let err = anyhow::Error::new(LedgerError::faulted(
            Fault::Throttled,
            "DynamoDB GetItem on T: Connection refused",
        ))
        .context("ledger lookup failed");
        let f = classify(&err).unwrap();
        assert_eq!((f.service, f.cause), ("DynamoDB", Cause::Throttled));
        let denied = anyhow::Error::new(LedgerError::faulted(
            Fault::Denied { action: Some("dynamodb:PutItem".into()) },
            "DynamoDB PutItem on T: HTTP 400 AccessDeniedException: no",
        ));
        assert_eq!(classify(&denied).unwrap().cause, Cause::AccessDenied(Some("dynamodb:PutItem".into())));
        // A kind without a wording of its own goes by the text, as before.
        let other = anyhow::Error::new(LedgerError::unavailable(
            "DynamoDB GetItem on T: could not connect: tcp connect error: Connection refused",
        ));
        assert_eq!(classify(&other).unwrap().cause, Cause::Unreachable("connection refused"));
        let busy = anyhow::Error::new(LedgerError::faulted(Fault::Busy, "sqlite: database is locked"));
        assert_eq!(classify(&busy), None);
    }

    #[test]
    fn a_safety_stop_exits_3_and_progress_is_named() {
        let stop = anyhow::Error::new(SafetyStop("refusing without confirmation".into())).context("withdraw");
        assert_eq!(report(&stop).1, Exit::SafetyStop);
        let failed = anyhow::anyhow!("SQS SendMessageBatch: dispatch failure: Connection refused")
            .context(Done("3 of 40 message(s) enqueued before it".into()));
        let (line, code) = report(&failed);
        assert_eq!(code, Exit::Unusable);
        assert!(
            line.starts_with("noticectl: SQS unreachable")
                && line.ends_with("3 of 40 message(s) enqueued before it"),
            "{line}"
        );
        assert_eq!(line.lines().count(), 1);
    }
}
