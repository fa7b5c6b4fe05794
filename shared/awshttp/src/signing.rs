//! Signing a request: on the SigV4 fast path ([`crate::sigv4`]) when it has that shape, by
//! `aws_sigv4::http_request::sign` otherwise, with the settings each service expects.

use std::borrow::Cow;
use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningInstructions,
    SigningSettings, UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, USER_AGENT};
use http::Method;
use http_body_util::Full;

use crate::{sigv4, AwsHttp, CallError, Target, AGENT};

/// How a service expects requests to be signed. The JSON services take the defaults; S3 differs
/// in three ways, and a request signed the default way is refused by it: the payload hash goes
/// in an `x-amz-content-sha256` header (which S3 requires), and the path is signed as sent —
/// neither normalised (`a/../b` is a legal key) nor encoded a second time.
pub(crate) fn signing_settings(signing_name: &str) -> SigningSettings {
    let mut settings = SigningSettings::default();
    if signing_name == "s3" {
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        settings.percent_encoding_mode = PercentEncodingMode::Single;
    }
    settings
}

impl AwsHttp {
    /// The request, signed by `identity` at `now`: on the fast path when the request has its
    /// shape ([`sigv4`]), by `aws_sigv4::http_request::sign` otherwise.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sign_with(
        &self,
        identity: &Identity,
        now: SystemTime,
        target: &Target,
        method: Method,
        content_type: Option<&'static str>,
        extra_headers: &[(HeaderName, &'static str)],
        body: Vec<u8>,
    ) -> Result<http::Request<Full<Bytes>>, CallError> {
        let fast = match (&method, &target.shape, content_type, identity.data::<Credentials>()) {
            (&Method::POST, Some(shape), Some(content_type), Some(creds)) => self.inner.keys.sign_post(
                shape,
                creds,
                &target.region,
                target.signing_name,
                content_type,
                extra_headers,
                &body,
                now,
            ),
            _ => None,
        };
        let signature = match fast {
            Some(signed) => Signature::Fast(signed),
            None => Signature::General(general_signature(
                identity,
                now,
                target,
                &method,
                content_type,
                extra_headers,
                &body,
            )?),
        };
        let mut request = http::Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = method;
        *request.uri_mut() = target.uri.clone();
        let map = request.headers_mut();
        if let Some(content_type) = content_type {
            map.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        }
        for (name, value) in extra_headers {
            map.insert(name.clone(), HeaderValue::from_static(value));
        }
        map.insert(USER_AGENT, HeaderValue::from_static(AGENT));
        match signature {
            Signature::Fast(signed) => signed.apply(request.headers_mut()),
            Signature::General(instructions) => instructions.apply_to_request_http1x(&mut request),
        }
        Ok(request)
    }
}

/// The headers a request is signed with, by whichever path signed it.
enum Signature {
    Fast(sigv4::Signed),
    General(SigningInstructions),
}

/// The signature `aws_sigv4::http_request::sign` gives: every request outside the fast path's
/// shape (S3, `GET`s, anything unusual).
pub(crate) fn general_signature(
    identity: &Identity,
    now: SystemTime,
    target: &Target,
    method: &Method,
    content_type: Option<&'static str>,
    extra_headers: &[(HeaderName, &'static str)],
    body: &[u8],
) -> Result<SigningInstructions, CallError> {
    let mut headers = Vec::with_capacity(extra_headers.len() + 1);
    if let Some(content_type) = content_type {
        headers.push((CONTENT_TYPE.as_str(), content_type));
    }
    headers.extend(extra_headers.iter().map(|(name, value)| (name.as_str(), *value)));
    let params = v4::SigningParams::builder()
        .identity(identity)
        .region(&target.region)
        .name(target.signing_name)
        .time(now)
        .settings(signing_settings(target.signing_name))
        .build()
        .map_err(|e| CallError::Build(e.to_string()))?
        .into();
    let signable = SignableRequest::new(
        method.as_str(),
        Cow::Borrowed(target.uri_text.as_str()),
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| CallError::Build(e.to_string()))?;
    let (instructions, _signature) =
        sign(signable, &params).map_err(|e| CallError::Build(e.to_string()))?.into_parts();
    Ok(instructions)
}
