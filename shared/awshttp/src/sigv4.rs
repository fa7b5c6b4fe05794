//! SigV4 for the hot JSON `POST`s, with each day's signing key kept.
//!
//! Why: `aws_sigv4::http_request::sign` is general (any method, query, header set, encoding
//! mode, presigning) and derives the signing key — four HMACs — on every request. Per notice that
//! came to about 9 % of the sender's CPU (BENCHMARKS.md, "where the CPU goes"). The hot calls
//! all have one shape: a `POST` to a fixed path without a query, a content type and at most a few
//! static headers (`x-amz-target`). For that shape the canonical request is a handful of lines,
//! most of them fixed per target, and the key changes only with the date, the credentials, the
//! region and the service.
//!
//! The cryptography is the crate's own (`generate_signing_key`, `calculate_signature`); only the
//! canonical request and the `Authorization` value are put together here, in the layout of the
//! SigV4 specification. The tests sign the same requests both ways and require the same headers,
//! byte for byte. Anything outside the shape (S3, a query, a path that signing would normalise or
//! encode, a header signing would rewrite or drop) returns `None` and goes to `sign` as before.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::sign::v4::{calculate_signature, generate_signing_key};
use chrono::{DateTime, Utc};
use http::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use http::Uri;
use sha2_sigv4::{Digest, Sha256};

const ALGORITHM: &str = "AWS4-HMAC-SHA256";
const X_AMZ_DATE: &str = "x-amz-date";
const X_AMZ_SECURITY_TOKEN: &str = "x-amz-security-token";

/// Header names the fast path adds itself, or that `sign` would leave unsigned or compute: an
/// extra header by one of these names is outside the shape.
const RESERVED: [&str; 9] = [
    "content-type",
    "host",
    X_AMZ_DATE,
    X_AMZ_SECURITY_TOKEN,
    "x-amz-content-sha256",
    "authorization",
    "user-agent",
    "x-amzn-trace-id",
    "transfer-encoding",
];

/// How many signing keys are kept: one per (service, region) in use, a few at most (DynamoDB,
/// SES, EventBridge); beyond this the oldest goes.
const KEPT_KEYS: usize = 8;

/// The part of a target's canonical request that never changes, when the target has the fast
/// path's shape.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    /// The path as signed: only unreserved characters and `/`, nothing to normalise, so it is
    /// the same encoded once or twice.
    path: String,
    /// The `host` header as signed: the authority, without a default port.
    host: String,
}

impl Shape {
    /// The shape of `uri` signed for `signing_name`, or `None` when `sign` must do it.
    pub(crate) fn of(uri: &Uri, signing_name: &str) -> Option<Self> {
        if signing_name == "s3" || uri.query().is_some() {
            return None;
        }
        let authority = uri.authority()?;
        if authority.as_str().contains('@') {
            return None;
        }
        let path = uri.path();
        let plain =
            path.starts_with('/') && path.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~/".contains(&b));
        let normal = !path.contains("//") && !path.split('/').any(|s| s == "." || s == "..");
        if !plain || !normal {
            return None;
        }
        let default_port = matches!(
            (uri.scheme_str(), authority.port_u16()),
            (Some("http"), Some(80)) | (Some("https"), Some(443))
        );
        let host = if default_port { authority.host() } else { authority.as_str() };
        Some(Self { path: path.to_owned(), host: host.to_owned() })
    }
}

/// The headers a signature adds to its request.
pub(crate) struct Signed {
    date_time: HeaderValue,
    authorization: HeaderValue,
    security_token: Option<HeaderValue>,
}

impl Signed {
    pub(crate) fn apply(self, headers: &mut HeaderMap) {
        headers.insert(HeaderName::from_static(X_AMZ_DATE), self.date_time);
        headers.insert(AUTHORIZATION, self.authorization);
        if let Some(token) = self.security_token {
            headers.insert(HeaderName::from_static(X_AMZ_SECURITY_TOKEN), token);
        }
    }
}

/// One derived signing key and what it was derived from.
struct Kept {
    date: String,
    region: String,
    service: String,
    access_key_id: String,
    /// Compared, never shown: a refreshed identity with the same key id but another secret must
    /// not reuse the old key.
    secret: String,
    key: Vec<u8>,
}

/// The signing keys in use, shared by every clone of the client.
#[derive(Default)]
pub(crate) struct Keys {
    kept: Mutex<Vec<Kept>>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.kept.lock().map(|k| k.len()).unwrap_or(0);
        f.debug_struct("Keys").field("kept", &kept).finish_non_exhaustive()
    }
}

impl Keys {
    /// The key for this day, region, service and credentials: kept, or derived and kept.
    /// `date` is `now`'s UTC date, the only part of the time the key is derived from.
    fn key(&self, creds: &Credentials, now: SystemTime, date: &str, region: &str, service: &str) -> Vec<u8> {
        let matches = |k: &Kept| {
            k.date == date
                && k.region == region
                && k.service == service
                && k.access_key_id == creds.access_key_id()
                && k.secret == creds.secret_access_key()
        };
        if let Ok(kept) = self.kept.lock() {
            if let Some(k) = kept.iter().find(|k| matches(k)) {
                return k.key.clone();
            }
        }
        let key = generate_signing_key(creds.secret_access_key(), now, region, service).as_ref().to_vec();
        if let Ok(mut kept) = self.kept.lock() {
            // Yesterday's key (or a replaced identity's) for the same service and region is done.
            kept.retain(|k| !(k.region == region && k.service == service));
            if kept.len() >= KEPT_KEYS {
                kept.remove(0);
            }
            kept.push(Kept {
                date: date.to_owned(),
                region: region.to_owned(),
                service: service.to_owned(),
                access_key_id: creds.access_key_id().to_owned(),
                secret: creds.secret_access_key().to_owned(),
                key: key.clone(),
            });
        }
        key
    }

    /// Signs a `POST` of `body` to a target of `shape`, or `None` when the request is outside
    /// the shape (then `sign` must do it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sign_post(
        &self,
        shape: &Shape,
        creds: &Credentials,
        region: &str,
        service: &str,
        content_type: &str,
        extra_headers: &[(HeaderName, &'static str)],
        body: &[u8],
        now: SystemTime,
    ) -> Option<Signed> {
        let plain = |v: &str| v.trim() == v && !v.contains("  ");
        if !plain(content_type) {
            return None;
        }
        for (i, (name, value)) in extra_headers.iter().enumerate() {
            let name = name.as_str();
            if RESERVED.contains(&name) || !plain(value) || extra_headers[..i].iter().any(|(n, _)| n == name)
            {
                return None;
            }
        }
        let token = creds.session_token();
        if token.is_some_and(|t| !plain(t)) {
            return None;
        }

        let date_time = DateTime::<Utc>::from(now).format("%Y%m%dT%H%M%SZ").to_string();
        let date = &date_time[..8];
        let mut headers: Vec<(&str, &str)> = Vec::with_capacity(4 + extra_headers.len());
        headers.push(("content-type", content_type));
        headers.push(("host", &shape.host));
        headers.push((X_AMZ_DATE, &date_time));
        if let Some(token) = token {
            headers.push((X_AMZ_SECURITY_TOKEN, token));
        }
        headers.extend(extra_headers.iter().map(|(n, v)| (n.as_str(), *v)));
        headers.sort_unstable_by_key(|(name, _)| *name);

        let mut signed_headers = String::with_capacity(96);
        let mut canonical = String::with_capacity(512);
        canonical.push_str("POST\n");
        canonical.push_str(&shape.path);
        canonical.push_str("\n\n");
        for (name, value) in &headers {
            let _ = writeln!(canonical, "{name}:{value}");
            if !signed_headers.is_empty() {
                signed_headers.push(';');
            }
            signed_headers.push_str(name);
        }
        let _ = write!(canonical, "\n{signed_headers}\n{}", hex::encode(Sha256::digest(body)));

        let scope = format!("{date}/{region}/{service}/aws4_request");
        let string_to_sign = format!(
            "{ALGORITHM}\n{date_time}\n{scope}\n{}",
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        let key = self.key(creds, now, date, region, service);
        let signature = calculate_signature(&key, string_to_sign.as_bytes());
        let authorization = format!(
            "{ALGORITHM} Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            creds.access_key_id()
        );
        let mut security_token = match token {
            Some(t) => Some(HeaderValue::from_str(t).ok()?),
            None => None,
        };
        if let Some(t) = security_token.as_mut() {
            t.set_sensitive(true);
        }
        Some(Signed {
            date_time: HeaderValue::from_str(&date_time).ok()?,
            authorization: HeaderValue::from_str(&authorization).ok()?,
            security_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use http::Method;

    use super::*;
    use crate::signing::general_signature;
    use crate::{AwsHttp, Target};

    fn creds(secret: &str, token: Option<&str>) -> Credentials {
        Credentials::new("AKIDEXAMPLE", secret, token.map(str::to_owned), None, "test")
    }

    fn target(endpoint: &str, path: &str, service: &'static str) -> Target {
        Target::new(endpoint, path, "eu-west-1", service).unwrap_or_else(|e| panic!("{e}"))
    }

    fn headers_of(map: &HeaderMap) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> =
            [X_AMZ_DATE, "authorization", X_AMZ_SECURITY_TOKEN, "x-amz-content-sha256"]
                .iter()
                .filter_map(|n| {
                    map.get(*n).map(|v| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                })
                .collect();
        pairs.sort();
        pairs
    }

    /// The headers `aws_sigv4::http_request::sign` puts on the same request.
    fn by_the_crate(
        creds: &Credentials,
        now: SystemTime,
        target: &Target,
        content_type: &'static str,
        extra: &[(HeaderName, &'static str)],
        body: &[u8],
    ) -> Vec<(String, String)> {
        let identity = creds.clone().into();
        let instructions =
            general_signature(&identity, now, target, &Method::POST, Some(content_type), extra, body)
                .unwrap_or_else(|e| panic!("{e}"));
        let mut request = http::Request::new(());
        instructions.apply_to_request_http1x(&mut request);
        headers_of(request.headers())
    }

    /// The headers the fast path puts on it; it must take the request.
    #[allow(clippy::too_many_arguments)]
    fn by_the_fast_path(
        keys: &Keys,
        creds: &Credentials,
        now: SystemTime,
        target: &Target,
        content_type: &'static str,
        extra: &[(HeaderName, &'static str)],
        body: &[u8],
    ) -> Vec<(String, String)> {
        let shape =
            target.shape.as_ref().unwrap_or_else(|| panic!("{:?} has the fast path's shape", target.uri));
        let signed = keys
            .sign_post(shape, creds, &target.region, target.signing_name, content_type, extra, body, now)
            .unwrap_or_else(|| panic!("the fast path takes {:?} {extra:?}", target.uri));
        let mut map = HeaderMap::new();
        signed.apply(&mut map);
        headers_of(&map)
    }

    #[test]
    fn the_fast_path_signs_byte_for_byte_as_the_crate_does() {
        let targets = [
            target("https://dynamodb.eu-west-1.amazonaws.com", "/", "dynamodb"),
            target("https://email.eu-west-1.amazonaws.com", "/v2/email/outbound-emails", "ses"),
            target("http://127.0.0.1:5000", "/", "dynamodb"),
            target("https://events.eu-west-1.amazonaws.com:443", "/", "events"),
            target("http://localhost:80/", "/a/b/", "ses"),
            target("https://Mixed.Case.example:8443", "/x_y-z.~1/v2", "ssm"),
        ];
        let xt = HeaderName::from_static("x-amz-target");
        let extras: [&[(HeaderName, &'static str)]; 3] = [
            &[],
            &[(xt.clone(), "DynamoDB_20120810.PutItem")],
            &[(HeaderName::from_static("x-amz-zeta"), "z v"), (xt, "AWSEvents.PutEvents")],
        ];
        let long = "{\"Item\":{\"pk\":{\"S\":\"n#\u{e9}t\u{e9} \u{1f600}\"}}}".repeat(40);
        let bodies: [&[u8]; 3] = [b"", b"{}", long.as_bytes()];
        let times = [
            UNIX_EPOCH + Duration::from_secs(1_796_169_600), // 2026-12-02T00:00:00Z
            UNIX_EPOCH + Duration::from_millis(1_709_251_199_999), // 2024-02-29T23:59:59.999Z
        ];
        let keys = Keys::default();
        let mut compared = 0;
        for creds in [
            creds("secret", None),
            creds("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", Some("FwoGZX//IvYXdz==")),
        ] {
            for target in &targets {
                for extra in extras {
                    for body in bodies {
                        for now in times {
                            for content_type in ["application/x-amz-json-1.0", "application/json"] {
                                // Twice: derived, then kept.
                                for _ in 0..2 {
                                    assert_eq!(
                                        by_the_fast_path(
                                            &keys,
                                            &creds,
                                            now,
                                            target,
                                            content_type,
                                            extra,
                                            body
                                        ),
                                        by_the_crate(&creds, now, target, content_type, extra, body),
                                        "{:?} {extra:?} at {now:?}",
                                        target.uri
                                    );
                                    compared += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(compared, 2 * 6 * 3 * 3 * 2 * 2 * 2);
    }

    #[test]
    fn a_new_day_or_a_new_secret_gets_a_new_key() {
        let keys = Keys::default();
        let t = target("https://dynamodb.eu-west-1.amazonaws.com", "/", "dynamodb");
        let before_midnight = UNIX_EPOCH + Duration::from_secs(1_796_169_599);
        let after_midnight = before_midnight + Duration::from_secs(2);
        let rotated = creds("another-secret", None);
        for (creds, now) in [
            (creds("secret", None), before_midnight),
            (creds("secret", None), after_midnight),
            (rotated.clone(), after_midnight),
            (creds("secret", Some("T")), after_midnight),
        ] {
            assert_eq!(
                by_the_fast_path(&keys, &creds, now, &t, "application/json", &[], b"{}"),
                by_the_crate(&creds, now, &t, "application/json", &[], b"{}"),
            );
        }
        // One key per service and region: the day's and the secret's replace the old one.
        assert_eq!(keys.kept.lock().map(|k| k.len()).unwrap_or(0), 1);
    }

    #[test]
    fn requests_outside_the_shape_go_to_the_crate() {
        for (endpoint, path, service) in [
            ("https://bucket.s3.eu-west-1.amazonaws.com", "/key", "s3"),
            ("https://ssm.eu-west-1.amazonaws.com", "/?Action=x", "ssm"),
            ("https://ssm.eu-west-1.amazonaws.com", "/a//b", "ssm"),
            ("https://ssm.eu-west-1.amazonaws.com", "/a/./b", "ssm"),
            ("https://ssm.eu-west-1.amazonaws.com", "/a/../b", "ssm"),
            ("https://ssm.eu-west-1.amazonaws.com", "/a%20b", "ssm"),
            ("https://user@ssm.eu-west-1.amazonaws.com", "/", "ssm"),
        ] {
            assert!(target(endpoint, path, service).shape.is_none(), "{endpoint}{path}");
        }
        let keys = Keys::default();
        let t = target("https://dynamodb.eu-west-1.amazonaws.com", "/", "dynamodb");
        let shape = t.shape.as_ref().unwrap_or_else(|| panic!("a plain target"));
        let c = creds("secret", None);
        let now = SystemTime::now();
        for (content_type, extra) in [
            ("application/json", vec![(HeaderName::from_static("host"), "elsewhere")]),
            ("application/json", vec![(HeaderName::from_static("user-agent"), "x")]),
            ("application/json", vec![(HeaderName::from_static("x-a"), " padded")]),
            ("application/json", vec![(HeaderName::from_static("x-a"), "two  spaces")]),
            (
                "application/json",
                vec![(HeaderName::from_static("x-a"), "1"), (HeaderName::from_static("x-a"), "2")],
            ),
            ("application/json ", vec![]),
        ] {
            assert!(
                keys.sign_post(shape, &c, "eu-west-1", "dynamodb", content_type, &extra, b"{}", now)
                    .is_none(),
                "{content_type:?} {extra:?}"
            );
        }
    }

    #[tokio::test]
    async fn the_client_signs_hot_posts_on_the_fast_path() {
        let http = AwsHttp::new(None, Duration::from_secs(1));
        let identity = creds("secret", None).into();
        let now = SystemTime::now();
        let t = target("http://127.0.0.1:5000", "/", "dynamodb");
        let xt = [(HeaderName::from_static("x-amz-target"), "DynamoDB_20120810.PutItem")];
        let request = http
            .sign_with(
                &identity,
                now,
                &t,
                Method::POST,
                Some("application/x-amz-json-1.0"),
                &xt,
                b"{}".to_vec(),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            http.inner.keys.kept.lock().map(|k| k.len()).unwrap_or(0),
            1,
            "the fast path kept its key"
        );
        assert_eq!(
            headers_of(request.headers()),
            by_the_crate(&creds("secret", None), now, &t, "application/x-amz-json-1.0", &xt, b"{}")
        );
        assert_eq!(
            request.headers().get("x-amz-target").map(HeaderValue::as_bytes),
            Some(&b"DynamoDB_20120810.PutItem"[..])
        );
    }
}
