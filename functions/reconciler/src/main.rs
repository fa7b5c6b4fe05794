//! Lambda entry point for the reconciler.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let app = notice_reconciler::ReconcilerApp::from_env().await.map_err(|e| {
        tracing::error!(error = %e, "notice-reconciler cannot start");
        e
    })?;
    let app = &app;
    run(service_fn(move |event: LambdaEvent<serde_json::Value>| notice_reconciler::handle(app, event))).await
}
