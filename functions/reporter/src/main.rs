//! Lambda entry point for the reporter.

use lambda_runtime::{run, service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let app = notice_reporter::ReporterApp::from_env().await.map_err(|e| {
        tracing::error!(error = %e, "notice-reporter cannot start");
        e
    })?;
    let app = &app;
    run(service_fn(move |event: LambdaEvent<serde_json::Value>| notice_reporter::handle(app, event))).await
}
