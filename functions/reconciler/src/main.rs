//! Lambda entry point for the reconciler.

use lambda_runtime::{service_fn, Error, LambdaEvent, Runtime};
use notice_setup::logs::InvokeSpan;

// One thread: a Lambda at 128 MB gets a small fraction of one vCPU, and the handler is one
// future anyway (records run concurrently inside it, not in parallel). The multi-thread
// scheduler only added cross-thread wake-ups (futex, work stealing) to every AWS call:
// BENCHMARKS.md, "Side by side with Powertools".
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    notice_setup::logs::init_lambda_logs();
    let (app, outcomes) = notice_reconciler::ReconcilerApp::from_env_with_outcomes().await.map_err(|e| {
        tracing::error!(error = %e, "notice-reconciler cannot start");
        e
    })?;
    let (app, outcomes) = (&app, outcomes.as_ref());
    Runtime::new(service_fn(move |event: LambdaEvent<serde_json::Value>| {
        notice_reconciler::handle_with_outcomes(app, outcomes, event)
    }))
    .layer(InvokeSpan)
    .run()
    .await
}
