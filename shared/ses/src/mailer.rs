//! SES v2 mailer: one `SendEmail` HTTP request per attempt, classified into what SES established.
//!
//! The request goes through [`notice_awshttp`] (SigV4 + one connection pool), not the SDK: the
//! SDK's per-call machinery cost more CPU than the whole notice path (BENCHMARKS.md). That client
//! never retries, so one call is one attempt: a retried `SendEmail` could put a second copy in
//! the recipient's inbox before our code sees anything.
//!
//! SES replaces any Message-ID we could set, so correlation travels as the `notice_key` email tag
//! (echoed as `mail.tags.notice_key` in every event) and the `X-Notice-Key` header.
//!
//! Nothing logged or returned here contains the recipient address: SES error messages can quote
//! it, so reasons are scrubbed before they leave this module.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sesv2::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};
use futures::FutureExt;
use notice_awshttp::{error_code, AwsHttp, CallError, Response, Target};
use serde::Serialize;
use serde_json::Value;
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
const SEND_EMAIL_PATH: &str = "/v2/email/outbound-emails";

/// The `SendEmail` endpoint and its bound: every attempt, connect to last byte, ends within
/// `timeout`, and an unanswered attempt is reported as unknown, never repeated.
#[derive(Clone, Debug)]
pub struct SesClient {
    http: AwsHttp,
    /// The resolved endpoint, or why there is none (then every send is a configuration error,
    /// as the SDK reports a request it cannot construct).
    target: Result<Target, String>,
    timeout: Duration,
}

impl SesClient {
    /// Resolves the endpoint the way the SDK client does: the SDK's own endpoint rules over
    /// `region`, FIPS, dual-stack and the endpoint override (`AWS_ENDPOINT_URL_SESV2` or
    /// `AWS_ENDPOINT_URL`).
    pub fn new(
        http: AwsHttp,
        region: Option<&str>,
        use_fips: bool,
        use_dual_stack: bool,
        endpoint_override: Option<&str>,
        timeout: Duration,
    ) -> Self {
        let target = (|| {
            let region = region.ok_or("no region configured")?;
            let params = Params::builder()
                .region(region)
                .use_fips(use_fips)
                .use_dual_stack(use_dual_stack)
                .set_endpoint(endpoint_override.map(str::to_owned))
                .build()
                .map_err(|e| e.to_string())?;
            let endpoint = DefaultResolver::new()
                .resolve_endpoint(&params)
                .now_or_never()
                .ok_or("the endpoint resolver did not answer at once")?
                .map_err(|e| e.to_string())?;
            Target::new(endpoint.url(), SEND_EMAIL_PATH, region, "ses").map_err(|e| e.to_string())
        })();
        if let Err(e) = &target {
            warn!(error = %e, "no SES endpoint: every send will fail as a configuration error");
        }
        Self { http, target, timeout }
    }

    /// Bounds each attempt as a whole.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The connect bound of the pool.
    pub fn connect_timeout(&self) -> Duration {
        self.http.connect_timeout()
    }

    /// The resolved `SendEmail` URI.
    pub fn endpoint(&self) -> Option<&http::Uri> {
        self.target.as_ref().ok().map(Target::uri)
    }
}

/// Sends through SES v2 `SendEmail` with simple (subject/text/html) content.
#[derive(Clone, Debug)]
pub struct SesMailer {
    client: SesClient,
    from: String,
    configuration_set: Option<String>,
}

impl SesMailer {
    /// `configuration_set` names the SES configuration set whose event destination feeds the
    /// reconciler; without it no provider evidence comes back.
    pub fn new(client: SesClient, from: impl Into<String>, configuration_set: Option<String>) -> Self {
        Self { client, from: from.into(), configuration_set }
    }

    /// The request body (SES v2 `SendEmail`, REST-JSON).
    fn body(&self, mail: &OutgoingMail) -> Result<Vec<u8>, String> {
        let text = |data| Text { data, charset: CHARSET };
        let request = SendEmailRequest {
            from_email_address: &self.from,
            destination: Destination { to_addresses: [&mail.to] },
            content: EmailContent {
                simple: Message {
                    subject: text(&mail.subject),
                    body: Body { text: text(&mail.text), html: text(&mail.html) },
                    headers: [
                        NameValue { name: NOTICE_KEY_HEADER, value: mail.key.as_str() },
                        NameValue { name: "Content-Language", value: &mail.language },
                    ],
                },
            },
            email_tags: [
                NameValue { name: NOTICE_KEY_TAG, value: mail.key.as_str() },
                NameValue { name: KIND_TAG, value: &mail.kind },
            ],
            configuration_set_name: self.configuration_set.as_deref(),
        };
        serde_json::to_vec(&request).map_err(|e| e.to_string())
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct SendEmailRequest<'a> {
    from_email_address: &'a str,
    destination: Destination<'a>,
    content: EmailContent<'a>,
    email_tags: [NameValue<'a>; 2],
    #[serde(skip_serializing_if = "Option::is_none")]
    configuration_set_name: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Destination<'a> {
    to_addresses: [&'a str; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct EmailContent<'a> {
    simple: Message<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Message<'a> {
    subject: Text<'a>,
    body: Body<'a>,
    headers: [NameValue<'a>; 2],
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Body<'a> {
    text: Text<'a>,
    html: Text<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Text<'a> {
    data: &'a str,
    charset: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct NameValue<'a> {
    name: &'a str,
    value: &'a str,
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
        let unbuilt = |e: &str| SendResult::NotAccepted {
            class: NotAccepted::Configuration,
            reason: format!("could not build the SendEmail request: {}", redact(e)),
        };
        let outcome = match (&self.client.target, self.body(mail)) {
            (Err(e), _) => unbuilt(e),
            (_, Err(e)) => unbuilt(&e),
            (Ok(target), Ok(body)) => {
                // Exactly one attempt: `post` never retries.
                let result =
                    self.client.http.post(target, "application/json", &[], body, self.client.timeout).await;
                match &result {
                    Ok(response) => classify(response),
                    Err(err) => classify_call_error(err),
                }
            }
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

/// What a `SendEmail` HTTP answer established. Pure, so every branch is unit-tested.
///
/// A 2xx with a MessageId is accepted. Only an error SES *named* (or a 4xx it sent) proves
/// nothing went out; a 5xx, or a 2xx we cannot read, is `Unknown`, because the message may
/// already be on its way.
pub fn classify(response: &Response) -> SendResult {
    let status = response.status.as_u16();
    let parsed: Option<Value> = serde_json::from_slice(&response.body).ok();
    let field = |name: &str| parsed.as_ref().and_then(|v| v.get(name)).and_then(Value::as_str);
    if response.status.is_success() {
        return match (&parsed, field("MessageId")) {
            (_, Some(id)) if !id.is_empty() => SendResult::Accepted { message_id: id.to_owned() },
            (Some(_), _) => SendResult::Unknown { reason: "SES answered without a MessageId".into() },
            (None, _) => SendResult::Unknown {
                reason: format!("unreadable SendEmail response (HTTP {status}): not JSON"),
            },
        };
    }
    let code = error_code(&response.headers, field("__type").or_else(|| field("code")));
    let message = field("message").or_else(|| field("Message"));
    classify_error(code, message, status)
}

/// What a call without an HTTP answer established: nothing, unless it never left.
pub fn classify_call_error(err: &CallError) -> SendResult {
    let reason = redact(&err.to_string());
    match err {
        // Never signed, so never sent.
        CallError::Credentials(_) | CallError::Build(_) => SendResult::NotAccepted {
            class: NotAccepted::Configuration,
            reason: format!("request could not be constructed: {reason}"),
        },
        CallError::Timeout(_) => SendResult::Unknown { reason: format!("SendEmail timed out: {reason}") },
        CallError::Connect(_) | CallError::Transport(_) => {
            SendResult::Unknown { reason: format!("SendEmail dispatch failed: {reason}") }
        }
    }
}

fn classify_error(code: Option<&str>, message: Option<&str>, status: u16) -> SendResult {
    let text = match (code, message) {
        (Some(code), Some(m)) => format!("{code}: {m}"),
        (Some(code), None) => code.to_owned(),
        (None, Some(m)) => m.to_owned(),
        (None, None) => "no error code".to_owned(),
    };
    let reason = redact(&text);
    let not_accepted = |class| SendResult::NotAccepted { class, reason: reason.clone() };
    // SES reports an unverified sender (or, in the sandbox, recipient) as `MessageRejected`; that
    // is our configuration, not this message, so it must not be recorded as a permanent rejection.
    if mentions_unverified_identity(&text) {
        return not_accepted(NotAccepted::Configuration);
    }
    match (code.unwrap_or(""), status) {
        ("TooManyRequestsException" | "LimitExceededException", _) => not_accepted(NotAccepted::Throttled),
        ("SendingPausedException" | "AccountSuspendedException", _) => not_accepted(NotAccepted::Paused),
        ("MailFromDomainNotVerifiedException" | "NotFoundException", _) => {
            not_accepted(NotAccepted::Configuration)
        }
        ("MessageRejected" | "BadRequestException", _) => SendResult::Rejected { reason },
        // Not an SES error: only the HTTP status says whether SES refused the request.
        (_, 429) | ("Throttling" | "ThrottlingException", _) => not_accepted(NotAccepted::Throttled),
        // A 4xx (other than a request timeout) is SES refusing the request at the door:
        // credentials, permissions, signature. Nothing went out; a human must fix it.
        (_, 400..=499) if status != 408 => not_accepted(NotAccepted::Configuration),
        _ => SendResult::Unknown { reason: format!("HTTP {status} {reason}") },
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
    use bytes::Bytes;
    use http::{HeaderMap, HeaderValue, StatusCode};

    use notice_ledger::NoticeKey;

    use super::*;

    fn answer(status: u16, error_type: Option<&'static str>, body: &str) -> SendResult {
        let mut headers = HeaderMap::new();
        if let Some(t) = error_type {
            headers.insert("x-amzn-ErrorType", HeaderValue::from_static(t));
        }
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::IM_A_TEAPOT);
        classify(&Response { status, headers, body: Bytes::from(body.to_owned()) })
    }

    /// An SES error as SES v2 sends it: the code in the header, the message in the body.
    fn error(status: u16, code: &'static str, message: &str) -> SendResult {
        answer(status, Some(code), &serde_json::json!({ "message": message }).to_string())
    }

    fn class(result: SendResult) -> Option<NotAccepted> {
        match result {
            SendResult::NotAccepted { class, .. } => Some(class),
            _ => None,
        }
    }

    #[test]
    fn accepted_with_message_id() {
        assert_eq!(
            answer(200, None, r#"{"MessageId":"0100-abc"}"#),
            SendResult::Accepted { message_id: "0100-abc".into() }
        );
    }

    #[test]
    fn accepted_without_message_id_is_unknown() {
        assert!(matches!(answer(200, None, "{}"), SendResult::Unknown { .. }));
        assert!(matches!(answer(200, None, r#"{"MessageId":""}"#), SendResult::Unknown { .. }));
        assert!(matches!(answer(200, None, "<html>"), SendResult::Unknown { .. }), "unreadable 200");
    }

    #[test]
    fn throttling_is_not_accepted() {
        assert_eq!(class(error(429, "TooManyRequestsException", "slow down")), Some(NotAccepted::Throttled));
        assert_eq!(class(error(400, "LimitExceededException", "")), Some(NotAccepted::Throttled));
    }

    #[test]
    fn paused_is_not_accepted() {
        assert_eq!(class(error(400, "SendingPausedException", "")), Some(NotAccepted::Paused));
        assert_eq!(class(error(400, "AccountSuspendedException", "")), Some(NotAccepted::Paused));
    }

    #[test]
    fn configuration_errors_are_not_accepted() {
        assert_eq!(
            class(error(400, "MailFromDomainNotVerifiedException", "")),
            Some(NotAccepted::Configuration)
        );
        let missing = error(404, "NotFoundException", "Configuration set <cs> does not exist");
        assert_eq!(class(missing), Some(NotAccepted::Configuration));
    }

    #[test]
    fn unverified_identity_is_configuration_not_rejection() {
        let result = error(400, "MessageRejected", "Email address is not verified. The following identities failed the check in region US-EAST-1: ada@example.com");
        let SendResult::NotAccepted { class, reason } = result else { panic!("{result:?}") };
        assert_eq!(class, NotAccepted::Configuration);
        assert!(!reason.contains("ada@example.com"), "{reason}");
        assert!(reason.contains("<address>"), "{reason}");
    }

    #[test]
    fn content_rejection_is_permanent() {
        assert!(matches!(error(400, "MessageRejected", "Illegal address"), SendResult::Rejected { .. }));
        assert!(matches!(error(400, "BadRequestException", ""), SendResult::Rejected { .. }));
    }

    #[test]
    fn the_code_may_come_in_the_body() {
        let body = r#"{"__type":"com.amazonaws.sesv2#MessageRejected","message":"Illegal address"}"#;
        assert!(matches!(answer(400, None, body), SendResult::Rejected { .. }));
        let body = r#"{"code":"SendingPausedException","message":"paused"}"#;
        assert_eq!(class(answer(400, None, body)), Some(NotAccepted::Paused));
    }

    #[test]
    fn unmodeled_server_error_is_unknown() {
        assert!(matches!(error(500, "InternalFailure", "oops"), SendResult::Unknown { .. }));
        assert!(matches!(answer(503, None, ""), SendResult::Unknown { .. }));
        assert!(matches!(answer(500, None, "<html>"), SendResult::Unknown { .. }), "unparseable 500");
    }

    #[test]
    fn unmodeled_client_errors() {
        assert_eq!(class(error(403, "AccessDeniedException", "")), Some(NotAccepted::Configuration));
        assert_eq!(class(answer(403, None, "not json")), Some(NotAccepted::Configuration));
        assert_eq!(class(error(400, "ThrottlingException", "")), Some(NotAccepted::Throttled));
        assert!(matches!(answer(408, None, "{}"), SendResult::Unknown { .. }));
    }

    #[test]
    fn no_trustworthy_answer_is_unknown() {
        let timeout = CallError::Timeout(Duration::from_secs(3));
        assert!(matches!(classify_call_error(&timeout), SendResult::Unknown { .. }));
        let reset = CallError::Transport("connection reset".into());
        assert!(matches!(classify_call_error(&reset), SendResult::Unknown { .. }));
        let refused = CallError::Connect("connection refused".into());
        assert!(matches!(classify_call_error(&refused), SendResult::Unknown { .. }));
    }

    #[test]
    fn a_request_never_signed_sent_nothing() {
        let e = CallError::Credentials("no provider".into());
        assert_eq!(class(classify_call_error(&e)), Some(NotAccepted::Configuration));
        let e = CallError::Build("bad header".into());
        assert_eq!(class(classify_call_error(&e)), Some(NotAccepted::Configuration));
    }

    #[test]
    fn request_body_is_the_protocol_shape() {
        let client = SesClient::new(
            AwsHttp::new(None, Duration::from_secs(3)),
            Some("eu-west-1"),
            false,
            false,
            None,
            Duration::from_secs(8),
        );
        assert_eq!(
            client.endpoint().map(ToString::to_string).as_deref(),
            Some("https://email.eu-west-1.amazonaws.com/v2/email/outbound-emails")
        );
        let mailer = SesMailer::new(client, "Billing <billing@example.com>", Some("cs".into()));
        let mail = OutgoingMail {
            key: NoticeKey::parse(&"ab".repeat(32)).unwrap_or_else(|e| panic!("{e}")),
            to: "ada@example.com".into(),
            subject: "Renewal".into(),
            text: "plain".into(),
            html: "<p>html</p>".into(),
            kind: "renewal_notice_t72".into(),
            language: "de-AT".into(),
        };
        let body: Value = serde_json::from_slice(&mailer.body(&mail).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
        let key = "ab".repeat(32);
        assert_eq!(
            body,
            serde_json::json!({
                "FromEmailAddress": "Billing <billing@example.com>",
                "Destination": {"ToAddresses": ["ada@example.com"]},
                "Content": {"Simple": {
                    "Subject": {"Data": "Renewal", "Charset": "UTF-8"},
                    "Body": {"Text": {"Data": "plain", "Charset": "UTF-8"}, "Html": {"Data": "<p>html</p>", "Charset": "UTF-8"}},
                    "Headers": [{"Name": "X-Notice-Key", "Value": key}, {"Name": "Content-Language", "Value": "de-AT"}]}},
                "EmailTags": [{"Name": "notice_key", "Value": key}, {"Name": "kind", "Value": "renewal_notice_t72"}],
                "ConfigurationSetName": "cs"
            })
        );
    }

    #[test]
    fn without_a_region_every_send_is_a_configuration_error() {
        let client = SesClient::new(
            AwsHttp::new(None, Duration::from_secs(3)),
            None,
            false,
            false,
            None,
            Duration::from_secs(8),
        );
        assert!(client.endpoint().is_none());
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
