//! Lambda entry point: logs, configuration once per cold start, then the handler.

use lambda_runtime::{service_fn, Error, LambdaEvent, Runtime};
use notice_setup::logs::InvokeSpan;

// One thread: a Lambda at 128 MB gets a small fraction of one vCPU, and the handler is one
// future anyway (records run concurrently inside it, not in parallel). The multi-thread
// scheduler only added cross-thread wake-ups (futex, work stealing) to every AWS call:
// BENCHMARKS.md, "Side by side with Powertools".
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    notice_setup::logs::init_lambda_logs();
    let app = match notice_sender::SenderApp::from_env().await {
        Ok(app) => app,
        Err(e) => {
            // Refuse to start: a sender without its secret or table must not take messages.
            tracing::error!(error = %e, "notice-sender cannot start");
            return Err(e.into());
        }
    };
    let app = &app;
    Runtime::new(service_fn(move |event: LambdaEvent<_>| notice_sender::handle(app, event)))
        .layer(InvokeSpan)
        .run()
        .await
}
