//! The operator's write path (feature `publish`): put a version's object, then move the pointer.
//! Through the AWS SDK — the CLI links it anyway, and these are rare, interactive calls.
//!
//! Order matters: the object is written (or confirmed) before any pointer names it, and
//! [`point`] refuses an object that is missing or not what its name says, so readers never see a
//! pointer to something they cannot use.

use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_ssm::types::ParameterType;
use aws_types::SdkConfig;
use tracing::warn;

use crate::{one_line, sha256_hex, ConfigLocation, StoreError, MAX_CONFIG_BYTES};

/// Puts `bytes` as version `version_hex` at `s3://{bucket}/notice-config/{version_hex}.json`.
///
/// The write is conditional (`If-None-Match: *`, which moto 5.2.5 honours too), so a published
/// version is never overwritten, not even by a racing publisher. An object already under that
/// name is fine — same name, same bytes — once read back and compared: a wrong object there is
/// reported, never silently accepted.
pub async fn publish(
    sdk: &SdkConfig,
    bucket: &str,
    bytes: &[u8],
    version_hex: &str,
) -> Result<ConfigLocation, StoreError> {
    let location = ConfigLocation::published(bucket, version_hex)?;
    if bytes.len() > MAX_CONFIG_BYTES {
        // The sender would refuse it; refuse it before anyone can point at it.
        return Err(StoreError::TooLarge { location, limit: MAX_CONFIG_BYTES });
    }
    let actual = sha256_hex(bytes);
    if actual != version_hex {
        return Err(StoreError::DigestMismatch { location, actual });
    }
    let s3 = s3_client(sdk);
    let put = s3
        .put_object()
        .bucket(location.bucket())
        .key(location.key())
        .content_type("application/json")
        .if_none_match("*")
        .body(ByteStream::from(bytes.to_vec()))
        .send()
        .await;
    match put.map_err(|e| failure(&e)) {
        Ok(_) => Ok(location),
        // 412: the name exists. 409: a concurrent conditional write to it is in flight; the
        // read-back then finds it or reports it missing, and publishing again settles it.
        Err(Failure::Answer { status: 412 | 409, .. }) => {
            let stored = read_object(&s3, &location).await?;
            if stored == bytes {
                Ok(location)
            } else {
                Err(StoreError::DigestMismatch { actual: sha256_hex(&stored), location })
            }
        }
        Err(other) => Err(object_error(&location, other)),
    }
}

/// Points `parameter` (an SSM String parameter, created or overwritten) at `loc`, after checking
/// that `loc` exists and holds the version its name says. Returns the location it pointed at
/// before, if any, for the operator's "was → now" line; a previous value that is not a location
/// is logged and reported as none (it must not block the repair of a broken pointer).
pub async fn point(
    sdk: &SdkConfig,
    parameter: &str,
    loc: &ConfigLocation,
) -> Result<Option<ConfigLocation>, StoreError> {
    let stored = read_object(&s3_client(sdk), loc).await?;
    let actual = sha256_hex(&stored);
    if actual != loc.version_hex() {
        return Err(StoreError::DigestMismatch { location: loc.clone(), actual });
    }
    let ssm = aws_sdk_ssm::Client::new(sdk);
    let previous = match ssm.get_parameter().name(parameter).send().await.map_err(|e| failure(&e)) {
        Ok(out) => match out.parameter().and_then(|p| p.value()).map(str::parse::<ConfigLocation>) {
            Some(Ok(previous)) => Some(previous),
            Some(Err(e)) => {
                warn!(parameter, error = %e, "the previous pointer was not a location; replacing it");
                None
            }
            None => None,
        },
        Err(Failure::Answer { code, .. }) if code == "ParameterNotFound" => None,
        Err(other) => return Err(parameter_error(parameter, other)),
    };
    ssm.put_parameter()
        .name(parameter)
        .value(loc.to_string())
        .r#type(ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .map_err(|e| parameter_error(parameter, failure(&e)))?;
    Ok(previous)
}

/// The S3 client for the operator. With an endpoint override, path-style addressing, as the
/// sender's reader uses: emulators and private endpoints rarely resolve per-bucket host names.
fn s3_client(sdk: &SdkConfig) -> aws_sdk_s3::Client {
    let conf = aws_sdk_s3::config::Builder::from(sdk).force_path_style(sdk.endpoint_url().is_some()).build();
    aws_sdk_s3::Client::from_conf(conf)
}

/// The whole object (its size bounded as the reader bounds it).
async fn read_object(s3: &aws_sdk_s3::Client, loc: &ConfigLocation) -> Result<Vec<u8>, StoreError> {
    let out = s3
        .get_object()
        .bucket(loc.bucket())
        .key(loc.key())
        .send()
        .await
        .map_err(|e| object_error(loc, failure(&e)))?;
    if out.content_length().is_some_and(|n| n > MAX_CONFIG_BYTES as i64) {
        return Err(StoreError::TooLarge { location: loc.clone(), limit: MAX_CONFIG_BYTES });
    }
    let body = out.body.collect().await.map_err(|e| StoreError::Unreachable {
        what: loc.to_string(),
        reason: one_line(&DisplayErrorContext(&e).to_string()),
    })?;
    Ok(body.into_bytes().to_vec())
}

/// An SDK error reduced to what the callers decide on.
enum Failure {
    /// The request could not be made here (credentials, configuration).
    Local(String),
    /// No answer (timeout, connection).
    NoAnswer(String),
    Answer {
        status: u16,
        code: String,
        message: String,
    },
}

fn failure<E, R>(err: &SdkError<E, R>) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + HasStatus,
{
    let text = one_line(&DisplayErrorContext(err).to_string());
    match err {
        SdkError::ConstructionFailure(_) => Failure::Local(text),
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) => Failure::NoAnswer(text),
        _ => Failure::Answer {
            status: err.raw_response().map_or(0, HasStatus::status_code),
            code: err.code().unwrap_or("").to_owned(),
            message: one_line(err.message().unwrap_or(&text)),
        },
    }
}

/// The status of a raw SDK response (one impl; a trait only to keep `failure` generic over the
/// two SDK crates' identical error types).
trait HasStatus {
    fn status_code(&self) -> u16;
}

impl HasStatus for aws_sdk_s3::config::http::HttpResponse {
    fn status_code(&self) -> u16 {
        self.status().as_u16()
    }
}

fn object_error(loc: &ConfigLocation, failure: Failure) -> StoreError {
    let what = loc.to_string();
    match failure {
        Failure::Local(reason) => StoreError::NotConfigured { what, reason },
        Failure::NoAnswer(reason) => StoreError::Unreachable { what, reason },
        Failure::Answer { status, code, .. }
            if status == 404 || code == "NoSuchKey" || code == "NoSuchBucket" =>
        {
            let code = if code.is_empty() { format!("HTTP {status}") } else { code };
            StoreError::ObjectMissing { location: loc.clone(), code }
        }
        Failure::Answer { status, code, message } if status == 403 || code == "AccessDenied" => {
            StoreError::ObjectDenied {
                location: loc.clone(),
                message: if message.is_empty() { code } else { message },
            }
        }
        Failure::Answer { status, code, message } => StoreError::Unexpected { what, status, code, message },
    }
}

fn parameter_error(parameter: &str, failure: Failure) -> StoreError {
    let what = format!("SSM parameter {parameter}");
    let parameter = parameter.to_owned();
    match failure {
        Failure::Local(reason) => StoreError::NotConfigured { what, reason },
        Failure::NoAnswer(reason) => StoreError::Unreachable { what, reason },
        Failure::Answer { code, .. } if code == "ParameterNotFound" => {
            StoreError::ParameterMissing { parameter }
        }
        Failure::Answer { code, message, .. } if code == "AccessDeniedException" => {
            StoreError::ParameterDenied { parameter, message }
        }
        Failure::Answer { status, code, message } => StoreError::Unexpected { what, status, code, message },
    }
}
