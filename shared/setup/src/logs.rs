//! The Lambdas' log lines: lambda_runtime's default subscriber (Lambda's advanced logging
//! controls: `AWS_LAMBDA_LOG_FORMAT`, `AWS_LAMBDA_LOG_LEVEL`, else `RUST_LOG`, else `INFO`), with
//! one change. Its JSON lines carry every open span twice — the current one as `span`, and again
//! inside the list of all of them as `spans` — so every notice's key, message id and outcome was
//! paid for twice in CloudWatch Logs ingestion, on every line. Here each span's fields appear once,
//! in `spans` (outermost first: the invocation's `requestId`, then the message's `notice` span).
//!
//! And the invocation's span is this module's [`InvokeSpan`], not lambda_runtime's
//! `TracingLayer`: that one also prints the X-Ray trace id (about 95 bytes) and a 21-character
//! name on every line, the largest part of a notice's one line. The request id is what ties a
//! line to its invocation; Lambda's own `platform.start` record carries the trace id beside it.

use tracing_subscriber::filter::{EnvFilter, LevelFilter};

/// Installs the subscriber; a second call (tests that start a handler twice) keeps the first.
pub fn init_lambda_logs() {
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL").or_else(|_| std::env::var("RUST_LOG"));
    let level = level.ok().and_then(|l| l.parse::<LevelFilter>().ok()).unwrap_or(LevelFilter::INFO);
    let filter = EnvFilter::builder().with_default_directive(level.into()).from_env_lossy();
    let builder = tracing_subscriber::fmt()
        .with_target(false)
        .without_time()
        .with_env_filter(filter)
        .with_writer(std::io::stdout);
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    // `try_init`: an already installed subscriber is not an error worth refusing a start over.
    let _ = if json { builder.json().with_current_span(false).try_init() } else { builder.try_init() };
}

/// The invocation's span, `invoke`, with its request id alone (see the module's note). The
/// runtime still sets `_X_AMZN_TRACE_ID` for each invocation itself, so the AWS SDK propagates a
/// trace as before. Each Lambda's `main` runs its handler as
/// `Runtime::new(handler).layer(InvokeSpan).run()`.
#[cfg(feature = "lambda")]
#[derive(Clone, Copy, Debug, Default)]
pub struct InvokeSpan;

#[cfg(feature = "lambda")]
impl<S> lambda_runtime::tower::Layer<S> for InvokeSpan {
    type Service = InvokeSpanService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        InvokeSpanService { inner }
    }
}

/// The service [`InvokeSpan`] wraps a handler in.
#[cfg(feature = "lambda")]
#[derive(Clone)]
pub struct InvokeSpanService<S> {
    inner: S,
}

#[cfg(feature = "lambda")]
impl<S> lambda_runtime::Service<lambda_runtime::LambdaInvocation> for InvokeSpanService<S>
where
    S: lambda_runtime::Service<
        lambda_runtime::LambdaInvocation,
        Response = (),
        Error = lambda_runtime::Error,
    >,
{
    type Response = ();
    type Error = lambda_runtime::Error;
    type Future = tracing::instrument::Instrumented<S::Future>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: lambda_runtime::LambdaInvocation) -> Self::Future {
        use tracing::Instrument;
        let span = tracing::info_span!("invoke", requestId = %req.context.request_id);
        // Entered while the handler's future is made, so spans it opens there are its children.
        let future = {
            let _entered = span.enter();
            self.inner.call(req)
        };
        future.instrument(span)
    }
}
