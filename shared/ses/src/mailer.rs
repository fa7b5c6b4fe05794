//! SES v2 mailer: one `SendEmail` call per attempt, classified into what SES established.
//!
//! SES replaces any Message-ID we could set, so correlation travels as the `notice_key` email tag
//! (echoed as `mail.tags.notice_key` in every event) and the `X-Notice-Key` header. The client must
//! be built with `notice_setup::aws::sesv2_client`: retries disabled, so one call is one attempt.
//!
//! Nothing logged or returned here contains the recipient address: SES error messages can quote
//! it, so reasons are scrubbed before they leave this module.

use async_trait::async_trait;
use aws_sdk_sesv2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sesv2::operation::send_email::{SendEmailError, SendEmailOutput};
use aws_sdk_sesv2::types::{Body, Content, Destination, EmailContent, Message, MessageHeader, MessageTag};
use aws_smithy_runtime_api::http::Response as HttpResponse;
use tracing::{debug, warn};

use notice_ledger::mailer::{Mailer, NotAccepted, OutgoingMail, SendResult};

/// Header carrying the notice key inside the message itself (survives forwarding and bounces).
pub const NOTICE_KEY_HEADER: &str = "X-Notice-Key";
/// Email tag carrying the notice key into every SES event.
pub const NOTICE_KEY_TAG: &str = "notice_key";
/// Email tag carrying the notice kind, so event consumers can slice by kind.
pub const KIND_TAG: &str = "kind";

const CHARSET: &str = "UTF-8";
const MAX_TAG_VALUE_LEN: usize = 255;

/// Sends through SES v2 `SendEmail` with simple (subject/text/html) content.
#[derive(Clone, Debug)]
pub struct SesMailer {
    client: aws_sdk_sesv2::Client,
    from: String,
    configuration_set: Option<String>,
}

impl SesMailer {
    /// `configuration_set` names the SES configuration set whose event destination feeds the
    /// reconciler; without it no provider evidence comes back.
    pub fn new(
        client: aws_sdk_sesv2::Client,
        from: impl Into<String>,
        configuration_set: Option<String>,
    ) -> Self {
        Self { client, from: from.into(), configuration_set }
    }

    /// Builds the request's content and tags; an error here means nothing was sent.
    fn content(mail: &OutgoingMail) -> Result<(EmailContent, Vec<MessageTag>), String> {
        let text = |data: &str| Content::builder().data(data).charset(CHARSET).build();
        let message = Message::builder()
            .subject(text(&mail.subject).map_err(|e| e.to_string())?)
            .body(
                Body::builder()
                    .text(text(&mail.text).map_err(|e| e.to_string())?)
                    .html(text(&mail.html).map_err(|e| e.to_string())?)
                    .build(),
            )
            .headers(
                MessageHeader::builder()
                    .name(NOTICE_KEY_HEADER)
                    .value(mail.key.as_str())
                    .build()
                    .map_err(|e| e.to_string())?,
            )
            .build();
        let tag = |name: &str, value: &str| {
            MessageTag::builder().name(name).value(value).build().map_err(|e| e.to_string())
        };
        let tags = vec![tag(NOTICE_KEY_TAG, mail.key.as_str())?, tag(KIND_TAG, &mail.kind)?];
        Ok((EmailContent::builder().simple(message).build(), tags))
    }
}

#[async_trait]
impl Mailer for SesMailer {
    async fn send(&self, mail: &OutgoingMail) -> SendResult {
        // SES refuses the whole call for a bad tag; catching it here keeps the reason clear.
        for (name, value) in [(NOTICE_KEY_TAG, mail.key.as_str()), (KIND_TAG, mail.kind.as_str())] {
            if !valid_tag_value(value) {
                return SendResult::Rejected {
                    reason: format!("email tag `{name}` value is not [A-Za-z0-9_-]{{1,255}}"),
                };
            }
        }
        let (content, tags) = match Self::content(mail) {
            Ok(parts) => parts,
            Err(e) => {
                return SendResult::NotAccepted {
                    class: NotAccepted::Configuration,
                    reason: format!("could not build the SendEmail request: {}", redact(&e)),
                }
            }
        };
        let result = self
            .client
            .send_email()
            .from_email_address(&self.from)
            .destination(Destination::builder().to_addresses(&mail.to).build())
            .content(content)
            .set_email_tags(Some(tags))
            .set_configuration_set_name(self.configuration_set.clone())
            .send()
            .await;
        let outcome = match &result {
            Ok(out) => classify_output(out),
            Err(err) => classify(err),
        };
        match &outcome {
            SendResult::Accepted { message_id } => {
                debug!(key = mail.key.prefix(), %message_id, "SES accepted the message")
            }
            other => warn!(key = mail.key.prefix(), result = ?other, "SES did not accept the message"),
        }
        outcome
    }
}

/// A successful `SendEmail` answer: accepted, named by its MessageId. Without the id we cannot
/// correlate events or commit, so the outcome counts as unknown.
pub fn classify_output(out: &SendEmailOutput) -> SendResult {
    match out.message_id() {
        Some(id) if !id.is_empty() => SendResult::Accepted { message_id: id.to_owned() },
        _ => SendResult::Unknown { reason: "SES answered without a MessageId".into() },
    }
}

/// What a failed `SendEmail` call established. Pure, so every branch is unit-tested.
///
/// Only an answer SES *modeled* (or a 4xx it sent) proves nothing went out; anything without a
/// trustworthy answer — 5xx, timeouts, dropped connections, unreadable responses — is `Unknown`,
/// because the message may already be on its way.
pub fn classify(err: &SdkError<SendEmailError, HttpResponse>) -> SendResult {
    match err {
        // The request was never built, so it was never sent.
        SdkError::ConstructionFailure(_) => SendResult::NotAccepted {
            class: NotAccepted::Configuration,
            reason: format!("request could not be constructed: {}", source_text(err)),
        },
        SdkError::TimeoutError(_) => {
            SendResult::Unknown { reason: format!("SendEmail timed out: {}", source_text(err)) }
        }
        SdkError::DispatchFailure(_) => {
            SendResult::Unknown { reason: format!("SendEmail dispatch failed: {}", source_text(err)) }
        }
        SdkError::ResponseError(ctx) => SendResult::Unknown {
            reason: format!(
                "unreadable SendEmail response (HTTP {}): {}",
                ctx.raw().status().as_u16(),
                source_text(err)
            ),
        },
        SdkError::ServiceError(ctx) => classify_service_error(ctx.err(), ctx.raw().status().as_u16()),
        // `SdkError` is non-exhaustive: a kind we do not know gives no proof of anything.
        _ => SendResult::Unknown { reason: format!("unexpected SendEmail failure: {}", source_text(err)) },
    }
}

fn classify_service_error(err: &SendEmailError, status: u16) -> SendResult {
    let code = err.code().unwrap_or("unknown");
    // Modeled errors display their own message; unhandled ones keep it in the metadata.
    let shown = err.to_string();
    let text = match err.message() {
        Some(m) if !shown.contains(m) => format!("{shown}: {m}"),
        _ => shown,
    };
    let reason = redact(&text);
    let not_accepted = |class| SendResult::NotAccepted { class, reason: reason.clone() };
    // SES reports an unverified sender (or, in the sandbox, recipient) as `MessageRejected`; that
    // is our configuration, not this message, so it must not be recorded as a permanent rejection.
    if mentions_unverified_identity(&text) {
        return not_accepted(NotAccepted::Configuration);
    }
    match err {
        SendEmailError::TooManyRequestsException(_) | SendEmailError::LimitExceededException(_) => {
            not_accepted(NotAccepted::Throttled)
        }
        SendEmailError::SendingPausedException(_) | SendEmailError::AccountSuspendedException(_) => {
            not_accepted(NotAccepted::Paused)
        }
        SendEmailError::MailFromDomainNotVerifiedException(_) | SendEmailError::NotFoundException(_) => {
            not_accepted(NotAccepted::Configuration)
        }
        SendEmailError::MessageRejected(_) | SendEmailError::BadRequestException(_) => {
            SendResult::Rejected { reason }
        }
        // Unmodeled: only the HTTP status says whether SES refused the request.
        _ => match (code, status) {
            (_, 429) | ("Throttling" | "ThrottlingException", _) => not_accepted(NotAccepted::Throttled),
            // A 4xx (other than a request timeout) is SES refusing the request at the door:
            // credentials, permissions, signature. Nothing went out; a human must fix it.
            (_, 400..=499) if status != 408 => not_accepted(NotAccepted::Configuration),
            _ => SendResult::Unknown { reason: format!("HTTP {status} {reason}") },
        },
    }
}

fn mentions_unverified_identity(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.contains("not verified") || text.contains("unverified")
}

/// An SES email tag value: `[A-Za-z0-9_-]`, 1 to 255 characters.
pub fn valid_tag_value(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_TAG_VALUE_LEN
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The error with its causes, addresses scrubbed.
fn source_text(err: &SdkError<SendEmailError, HttpResponse>) -> String {
    redact(&aws_sdk_sesv2::error::DisplayErrorContext(err).to_string())
}

/// Replaces every word containing `@` (an email address, possibly the recipient's) with a marker.
fn redact(text: &str) -> String {
    text.split_inclusive(char::is_whitespace)
        .map(|word| {
            if word.contains('@') {
                let trailing = &word[word.trim_end().len()..];
                format!("<address>{trailing}")
            } else {
                word.to_owned()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use aws_sdk_sesv2::types::error as ses;
    use aws_smithy_runtime_api::client::result::ConnectorError;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    use super::*;

    type E = SdkError<SendEmailError, HttpResponse>;

    fn raw(status: u16) -> HttpResponse {
        HttpResponse::new(StatusCode::try_from(status).expect("valid status"), SdkBody::empty())
    }

    fn service(err: SendEmailError, status: u16) -> SendResult {
        classify(&E::service_error(err, raw(status)))
    }

    fn class(result: SendResult) -> Option<NotAccepted> {
        match result {
            SendResult::NotAccepted { class, .. } => Some(class),
            _ => None,
        }
    }

    #[test]
    fn accepted_with_message_id() {
        let out = SendEmailOutput::builder().message_id("0100-abc").build();
        assert_eq!(classify_output(&out), SendResult::Accepted { message_id: "0100-abc".into() });
    }

    #[test]
    fn accepted_without_message_id_is_unknown() {
        let out = SendEmailOutput::builder().build();
        assert!(matches!(classify_output(&out), SendResult::Unknown { .. }));
    }

    #[test]
    fn throttling_is_not_accepted() {
        let e = SendEmailError::TooManyRequestsException(
            ses::TooManyRequestsException::builder().message("slow down").build(),
        );
        assert_eq!(class(service(e, 429)), Some(NotAccepted::Throttled));
        let e = SendEmailError::LimitExceededException(ses::LimitExceededException::builder().build());
        assert_eq!(class(service(e, 400)), Some(NotAccepted::Throttled));
    }

    #[test]
    fn paused_is_not_accepted() {
        let e = SendEmailError::SendingPausedException(ses::SendingPausedException::builder().build());
        assert_eq!(class(service(e, 400)), Some(NotAccepted::Paused));
        let e = SendEmailError::AccountSuspendedException(ses::AccountSuspendedException::builder().build());
        assert_eq!(class(service(e, 400)), Some(NotAccepted::Paused));
    }

    #[test]
    fn configuration_errors_are_not_accepted() {
        let e = SendEmailError::MailFromDomainNotVerifiedException(
            ses::MailFromDomainNotVerifiedException::builder().build(),
        );
        assert_eq!(class(service(e, 400)), Some(NotAccepted::Configuration));
        let e = SendEmailError::NotFoundException(
            ses::NotFoundException::builder().message("Configuration set <cs> does not exist").build(),
        );
        assert_eq!(class(service(e, 404)), Some(NotAccepted::Configuration));
    }

    #[test]
    fn unverified_identity_is_configuration_not_rejection() {
        let e = SendEmailError::MessageRejected(
            ses::MessageRejected::builder()
                .message("Email address is not verified. The following identities failed the check in region US-EAST-1: ada@example.com")
                .build(),
        );
        let result = service(e, 400);
        let SendResult::NotAccepted { class, reason } = result else { panic!("{result:?}") };
        assert_eq!(class, NotAccepted::Configuration);
        assert!(!reason.contains("ada@example.com"), "{reason}");
        assert!(reason.contains("<address>"), "{reason}");
    }

    #[test]
    fn content_rejection_is_permanent() {
        let e = SendEmailError::MessageRejected(
            ses::MessageRejected::builder().message("Illegal address").build(),
        );
        assert!(matches!(service(e, 400), SendResult::Rejected { .. }));
        let e = SendEmailError::BadRequestException(ses::BadRequestException::builder().build());
        assert!(matches!(service(e, 400), SendResult::Rejected { .. }));
    }

    #[test]
    fn unmodeled_server_error_is_unknown() {
        let e = SendEmailError::generic(ErrorMetadata::builder().code("InternalFailure").build());
        assert!(matches!(service(e, 500), SendResult::Unknown { .. }));
        let e = SendEmailError::generic(ErrorMetadata::builder().build());
        assert!(matches!(service(e, 503), SendResult::Unknown { .. }));
    }

    #[test]
    fn unmodeled_client_errors() {
        let e = SendEmailError::generic(ErrorMetadata::builder().code("AccessDeniedException").build());
        assert_eq!(class(service(e, 403)), Some(NotAccepted::Configuration));
        let e = SendEmailError::generic(ErrorMetadata::builder().code("ThrottlingException").build());
        assert_eq!(class(service(e, 400)), Some(NotAccepted::Throttled));
        let e = SendEmailError::generic(ErrorMetadata::builder().build());
        assert!(matches!(service(e, 408), SendResult::Unknown { .. }));
    }

    #[test]
    fn no_trustworthy_answer_is_unknown() {
        let timeout = E::timeout_error("operation timed out");
        assert!(matches!(classify(&timeout), SendResult::Unknown { .. }));
        let reset = E::dispatch_failure(ConnectorError::io("connection reset".into()));
        assert!(matches!(classify(&reset), SendResult::Unknown { .. }));
        let slow = E::dispatch_failure(ConnectorError::timeout("read timed out".into()));
        assert!(matches!(classify(&slow), SendResult::Unknown { .. }));
        let garbled = E::response_error("invalid JSON", raw(200));
        assert!(matches!(classify(&garbled), SendResult::Unknown { .. }));
    }

    #[test]
    fn construction_failure_sent_nothing() {
        let e = E::construction_failure("missing region");
        assert_eq!(class(classify(&e)), Some(NotAccepted::Configuration));
    }

    #[test]
    fn tag_values() {
        assert!(valid_tag_value("renewal_notice_t72"));
        assert!(valid_tag_value(&"a".repeat(64)));
        assert!(valid_tag_value("A-z_9"));
        assert!(!valid_tag_value(""));
        assert!(!valid_tag_value("has space"));
        assert!(!valid_tag_value("a|b"));
        assert!(!valid_tag_value(&"a".repeat(256)));
    }

    #[test]
    fn redaction_keeps_everything_but_addresses() {
        assert_eq!(
            redact("failed for ada@example.com, bob@x.io\tend"),
            "failed for <address> <address>\tend"
        );
        assert_eq!(redact("no address here"), "no address here");
    }
}
