//! AWS and database failures, classified once: an error chain becomes one line with the cause
//! and the next step ("DynamoDB unreachable at http://127.0.0.1:1 (connection refused) — check
//! AWS_ENDPOINT_URL / the network; nothing was written"), exit code 2. The SDK's debug form is
//! printed only with `-v`.
//!
//! Every port error of the project carries its cause as a kind ([`Fault`]) and names its service
//! (DynamoDB, PostgreSQL, SQLite, SQS, EventBridge Scheduler, Secrets Manager): the adapter read
//! both from the driver's or SDK's typed error. Those decide here, never the message text; an
//! error that carries no kind (or one this line has no wording for) is printed as its chain.

use std::error::Error as StdError;
use std::fmt;

use notice_ledger::intake::EnqueueError;
use notice_ledger::keycheck::KeyCheckError;
use notice_ledger::park::ParkError;
use notice_ledger::queue::QueueError;
use notice_ledger::{ConfigError, DependencyError, Fault, LedgerError};

use crate::exit::{Exit, NotFound, SafetyStop};

/// The service `noticectl smoke` reads the stack from, as an operator knows it (the one AWS call
/// of the tool outside the project's adapters).
pub(crate) const CLOUDFORMATION: &str = "CloudFormation";

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
    /// With the IAM action (`dynamodb:BatchGetItem`) when the adapter knows it.
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

/// The dependency failure `err`'s chain describes, if it is one: the first typed port error in
/// the chain whose fault has a wording of its own.
pub(crate) fn classify(err: &anyhow::Error) -> Option<Failure> {
    let (service, fault) = err.chain().find_map(typed)?;
    let cause = cause_of(&fault)?;
    Some(Failure { service, cause, at: location(service, &format!("{err:#}")) })
}

/// The service and fault a typed port error names, if `e` is one.
fn typed(e: &(dyn StdError + 'static)) -> Option<(&'static str, Fault)> {
    if let Some(e) = e.downcast_ref::<LedgerError>() {
        return e.service().zip(e.fault().cloned());
    }
    if let Some(KeyCheckError::Ledger(e)) = e.downcast_ref::<KeyCheckError>() {
        return e.service().zip(e.fault().cloned());
    }
    if let Some(e) = e.downcast_ref::<ConfigError>() {
        return e.dependency().map(|(service, fault)| (service, fault.clone()));
    }
    if let Some(e) = e.downcast_ref::<QueueError>() {
        return Some((e.service, e.fault.clone()));
    }
    if let Some(e) = e.downcast_ref::<EnqueueError>() {
        return Some((e.service, e.fault.clone()));
    }
    if let Some(e) = e.downcast_ref::<notice_sqs::SendError>() {
        return Some((e.service(), e.fault()));
    }
    if let Some(e) = e.downcast_ref::<ParkError>() {
        return Some((e.service, e.fault.clone()));
    }
    e.downcast_ref::<DependencyError>().map(|e| (e.service, e.fault.clone()))
}

/// The cause a typed fault names; `None` for the kinds this line has no wording of its own for (a
/// timeout after connecting, a busy file, anything else), which are printed as their chain.
fn cause_of(fault: &Fault) -> Option<Cause> {
    Some(match fault {
        Fault::Unreachable(why) => Cause::Unreachable(why),
        Fault::Throttled => Cause::Throttled,
        Fault::NoCredentials => Cause::NoCredentials,
        Fault::ExpiredCredentials => Cause::ExpiredToken,
        Fault::BadCredentials => Cause::BadCredentials,
        Fault::Denied { action } => Cause::AccessDenied(action.clone()),
        Fault::TimedOut | Fault::Busy | Fault::Other => return None,
    })
}

/// Where `service` was called: the (redacted) PostgreSQL URL the message names, or the endpoint
/// the SDK was pointed at. Only the place is read from the text; the cause never is.
fn location(service: &str, text: &str) -> Option<String> {
    let endpoint_var = [
        (notice_dynamodb::SERVICE, "DYNAMODB"),
        (notice_sqs::SERVICE, "SQS"),
        (notice_scheduler::SERVICE, "SCHEDULER"),
        (notice_setup::secret::SECRETS_MANAGER, "SECRETS_MANAGER"),
        (CLOUDFORMATION, "CLOUDFORMATION"),
    ];
    if service == notice_postgres::SERVICE {
        postgres_url(text)
    } else {
        // A file (SQLite) or an unnamed store has no endpoint.
        endpoint_var.iter().find(|(name, _)| *name == service).and_then(|(_, var)| aws_endpoint(var))
    }
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
    var(&format!("AWS_ENDPOINT_URL_{service_var}")).or_else(|| var("AWS_ENDPOINT_URL"))
}

impl Failure {
    /// One line: the cause, then the next step, then `done` (what the command did before it).
    pub(crate) fn line(&self, done: &str) -> String {
        let service = self.service;
        let postgres = service == notice_postgres::SERVICE;
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
    if err.chain().any(|e| e.is::<NotFound>()) {
        return (format!("noticectl: {err:#}"), Exit::Attention);
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

    fn cause(err: impl StdError + Send + Sync + 'static) -> Option<(&'static str, Cause)> {
        classify(&anyhow::Error::new(err).context("the command")).map(|f| (f.service, f.cause))
    }

    #[test]
    fn a_typed_ledger_fault_decides_whatever_the_words() {
        // The text alone would say "connection refused"; the adapter's kind wins.
        let err = anyhow::Error::new(LedgerError::faulted(
            notice_dynamodb::SERVICE,
            Fault::Throttled,
            "DynamoDB GetItem on T: Connection refused",
        ))
        .context("ledger lookup failed");
        let f = classify(&err).unwrap();
        assert_eq!((f.service, f.cause), ("DynamoDB", Cause::Throttled));
        let denied = LedgerError::faulted(
            notice_dynamodb::SERVICE,
            Fault::Denied { action: Some("dynamodb:PutItem".into()) },
            "DynamoDB PutItem on T: HTTP 400 AccessDeniedException: no",
        );
        assert_eq!(cause(denied), Some(("DynamoDB", Cause::AccessDenied(Some("dynamodb:PutItem".into())))));
        // A kind without a wording of its own is printed as its chain, whatever the words say.
        let other = LedgerError::unavailable(
            "DynamoDB GetItem on T: could not connect: tcp connect error: Connection refused",
        );
        assert_eq!(cause(other), None);
        let busy = LedgerError::faulted(notice_sqlite::SERVICE, Fault::Busy, "sqlite: database is locked");
        assert_eq!(cause(busy), None);
    }

    #[test]
    fn words_alone_classify_nothing() {
        for text in [
            "SQS SendMessageBatch: dispatch failure: io error: Connection refused (os error 111)",
            "DynamoDB: ThrottlingException: Rate exceeded",
            "no AWS credentials: an error occurred while loading credentials",
        ] {
            assert_eq!(classify(&anyhow::anyhow!("{text}")), None, "{text}");
        }
    }

    #[test]
    fn every_port_error_names_its_service_and_kind() {
        let refused = Fault::Unreachable("connection refused");
        assert_eq!(
            cause(QueueError::new(notice_sqs::SERVICE, refused.clone(), "ChangeMessageVisibility: …")),
            Some(("SQS", Cause::Unreachable("connection refused")))
        );
        assert_eq!(
            cause(EnqueueError::new(notice_sqs::SERVICE, Fault::Throttled, "SendMessage: …")),
            Some(("SQS", Cause::Throttled))
        );
        let park = ParkError::unavailable("EventBridge Scheduler CreateSchedule: …").in_service(
            notice_scheduler::SERVICE,
            Fault::Denied { action: Some("scheduler:CreateSchedule".into()) },
        );
        assert_eq!(
            cause(park),
            Some(("EventBridge Scheduler", Cause::AccessDenied(Some("scheduler:CreateSchedule".into()))))
        );
        let secret = ConfigError::Dependency {
            name: "NOTICE_KEY_SECRET_ARN",
            error: DependencyError::new(
                notice_setup::secret::SECRETS_MANAGER,
                Fault::ExpiredCredentials,
                "cannot read s: …",
            ),
        };
        assert_eq!(cause(secret), Some(("Secrets Manager", Cause::ExpiredToken)));
        let key_check = KeyCheckError::Ledger(LedgerError::faulted(
            notice_postgres::SERVICE,
            Fault::BadCredentials,
            "PostgreSQL …",
        ));
        assert_eq!(cause(key_check), Some(("PostgreSQL", Cause::BadCredentials)));
    }

    #[test]
    fn an_unreachable_postgres_is_never_an_invalid_setting() {
        let err = anyhow::Error::new(ConfigError::Ledger {
            name: "NOTICE_LEDGER_URL",
            error: LedgerError::faulted(
                notice_postgres::SERVICE,
                Fault::Unreachable("connection refused"),
                "PostgreSQL postgres://u@127.0.0.1:1/db: cannot get a connection: error connecting to server",
            ),
        });
        let f = classify(&err).unwrap();
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
    fn a_safety_stop_exits_3_and_progress_is_named() {
        let stop = anyhow::Error::new(SafetyStop("refusing without confirmation".into())).context("withdraw");
        assert_eq!(report(&stop).1, Exit::SafetyStop);
        let refused = QueueError::new(
            notice_sqs::SERVICE,
            Fault::Unreachable("connection refused"),
            "SendMessageBatch: dispatch failure",
        );
        let failed = anyhow::Error::new(refused)
            .context("SQS SendMessageBatch to q")
            .context(Done("3 of 40 message(s) enqueued before it".into()));
        let (line, code) = report(&failed);
        assert_eq!(code, Exit::Unusable);
        assert!(
            line.starts_with("noticectl: SQS unreachable")
                && line.contains("(connection refused)")
                && line.ends_with("3 of 40 message(s) enqueued before it"),
            "{line}"
        );
        assert_eq!(line.lines().count(), 1);
    }
}
