//! The Lambdas' log lines: lambda_runtime's default subscriber (Lambda's advanced logging
//! controls: `AWS_LAMBDA_LOG_FORMAT`, `AWS_LAMBDA_LOG_LEVEL`, else `RUST_LOG`, else `INFO`), with
//! one change. Its JSON lines carry every open span twice — the current one as `span`, and again
//! inside the list of all of them as `spans` — so every notice's key, message id and outcome was
//! paid for twice in CloudWatch Logs ingestion, on every line. Here each span's fields appear once,
//! in `spans` (outermost first: the invocation's `requestId`, then the message's `notice` span).

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
