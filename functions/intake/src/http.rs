//! The Function URL's side of a request (payload format 2.0): the event in, the response out.
//! Lambda types stay here and in `main.rs`; [`crate::receive`] sees only a [`Request`].

use aws_lambda_events::event::lambda_function_urls::{LambdaFunctionUrlRequest, LambdaFunctionUrlResponse};
use base64::Engine as _;
use http::{HeaderMap, HeaderValue};
use lambda_runtime::LambdaEvent;

use crate::{receive, Answer, IntakeApp, Request, Tally, MAX_BODY_BYTES};

/// The request as the handler needs it: method, `Stripe-Signature`, the raw body. A body the
/// Function URL base64-encoded (it does so for content types it does not consider text) is
/// decoded — to the bytes Stripe signed, never re-serialised. `Err`: the answer already.
pub fn request(event: &LambdaFunctionUrlRequest) -> Result<Request, Answer> {
    let method = event.request_context.http.method.clone().unwrap_or_default();
    let signature = event.headers.get("stripe-signature").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let raw = event.body.as_deref().unwrap_or("");
    let body = if event.is_base64_encoded {
        // Four base64 characters per three bytes: a longer text is over the limit decoded too.
        if raw.len() > MAX_BODY_BYTES.div_ceil(3) * 4 + 4 {
            return Err(too_large());
        }
        base64::engine::general_purpose::STANDARD.decode(raw).map_err(|_| Answer {
            status: 400,
            body: serde_json::json!({"error": "the body is not valid base64"}),
        })?
    } else {
        raw.as_bytes().to_vec()
    };
    Ok(Request { method, signature, body })
}

fn too_large() -> Answer {
    Answer {
        status: 413,
        body: serde_json::json!({"error": format!("the body is over {MAX_BODY_BYTES} bytes")}),
    }
}

/// The Function URL response for an answer (JSON, never cached).
pub fn response(answer: &Answer) -> LambdaFunctionUrlResponse {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    let mut response = LambdaFunctionUrlResponse::default();
    response.status_code = i64::from(answer.status);
    response.headers = headers;
    response.body = Some(answer.body.to_string());
    response.is_base64_encoded = false;
    response
}

/// The Lambda handler: one request, one answer, one EMF document.
pub async fn handle(
    app: &IntakeApp,
    event: LambdaEvent<LambdaFunctionUrlRequest>,
) -> Result<LambdaFunctionUrlResponse, lambda_runtime::Error> {
    let mut tally = Tally::default();
    let now = chrono::Utc::now();
    let answer = match request(&event.payload) {
        Ok(request) => receive(app, &request, now.timestamp(), &mut tally).await,
        Err(answer) => {
            tally.refused += 1;
            answer
        }
    };
    println!("{}", tally.to_emf(&app.function_name, now.timestamp_millis()));
    Ok(response(&answer))
}
