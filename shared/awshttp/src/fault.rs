//! Why an AWS call failed, read once from the typed error — the SDK's [`SdkError`] variant and
//! error code, the credentials error under it, the I/O error kind of a connection attempt, or this
//! client's own [`CallError`] — never from message text. Every AWS adapter of the project (the
//! DynamoDB ledger, SQS, EventBridge Scheduler, Secrets Manager) classifies with these, so an
//! unreachable endpoint, throttling or a denial means the same wherever it happens.

use aws_credential_types::provider::error::CredentialsError;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use notice_ledger::Fault;

use crate::CallError;

/// The fault an SDK call's error means. `action` is the IAM action the call needs
/// (`sqs:SendMessage`), named in a denial.
pub fn sdk_fault<E, R>(err: &SdkError<E, R>, action: &str) -> Fault
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    if credentials_in(err) {
        return Fault::NoCredentials;
    }
    match err {
        SdkError::ServiceError(_) => match err.code().map_or(Fault::Other, code_fault) {
            Fault::Denied { action: None } => Fault::Denied { action: Some(action.to_owned()) },
            fault => fault,
        },
        SdkError::TimeoutError(_) => Fault::TimedOut,
        // No connection was made: the I/O error says why when there is one; a DNS failure or a
        // failed TLS handshake carries none the kind could name.
        SdkError::DispatchFailure(failure) if failure.is_io() || failure.is_timeout() => {
            Fault::unreachable_in(err).unwrap_or(Fault::Unreachable("cannot connect"))
        }
        SdkError::DispatchFailure(_) => Fault::unreachable_in(err).unwrap_or(Fault::Other),
        _ => Fault::Other,
    }
}

/// The fault this client's call error means.
pub fn call_fault(e: &CallError) -> Fault {
    match e {
        CallError::Credentials(_) => Fault::NoCredentials,
        CallError::Timeout(_) => Fault::TimedOut,
        CallError::Connect(failure) => {
            failure.kind.and_then(Fault::unreachable).unwrap_or(Fault::Unreachable("cannot connect"))
        }
        CallError::Build(_) | CallError::Transport(_) => Fault::Other,
    }
}

/// The fault an AWS error code names: throttling, credentials the service does not accept, an
/// IAM denial; anything else is [`Fault::Other`]. Codes are the service's typed answer (the
/// `__type` of a JSON error, the `Code` of an XML one), so they are matched exactly.
pub fn code_fault(code: &str) -> Fault {
    match code {
        "ThrottlingException"
        | "Throttling"
        | "ThrottledException"
        | "RequestThrottledException"
        | "RequestThrottled"
        | "ProvisionedThroughputExceededException"
        | "RequestLimitExceeded"
        | "SlowDown"
        | "EC2ThrottledException"
        | "AWS.SimpleQueueService.RequestThrottled" => Fault::Throttled,
        "ExpiredTokenException" | "ExpiredToken" => Fault::ExpiredCredentials,
        "UnrecognizedClientException" | "InvalidClientTokenId" | "SignatureDoesNotMatch" => {
            Fault::BadCredentials
        }
        "AccessDeniedException" | "AccessDenied" => Fault::Denied { action: None },
        _ => Fault::Other,
    }
}

/// Whether the credentials provider's own error lies among `err`'s sources: the call was never
/// signed for want of credentials.
fn credentials_in(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(err);
    while let Some(cause) = source {
        if cause.is::<CredentialsError>() {
            return true;
        }
        source = cause.source();
    }
    false
}
