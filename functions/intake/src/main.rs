//! Lambda entry point: logs, configuration once per cold start, then the handler.

use lambda_runtime::{service_fn, Error, LambdaEvent, Runtime};
use notice_setup::logs::InvokeSpan;

// One thread, as the other functions: one request at a time per instance, waiting on the ledger
// and the queue, not on CPU.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    notice_setup::logs::init_lambda_logs();
    let app = match notice_intake::settings::from_env().await {
        Ok(app) => app,
        Err(e) => {
            // Refuse to start: an intake that cannot verify, key or enqueue must not answer 200.
            tracing::error!(error = %e, "notice-intake cannot start");
            return Err(e.into());
        }
    };
    let app = &app;
    Runtime::new(service_fn(move |event: LambdaEvent<_>| notice_intake::http::handle(app, event)))
        .layer(InvokeSpan)
        .run()
        .await
}
