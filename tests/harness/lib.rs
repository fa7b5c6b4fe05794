//! The end-to-end harness: a private moto server per test (DynamoDB, SQS and SES v2 in one
//! process) and a scriptable SES v2 stand-in for the failure modes moto cannot produce
//! (5xx, throttling, hangs, dropped connections).
//!
//! Failures here are loud on purpose: if the emulator cannot be started the test panics with
//! the fix (`./scripts/test.sh`) instead of skipping.
//!
//! Layout, one concern a module (everything a test uses is re-exported here, so imports read
//! `notice_e2e::{start_moto, Moto, start_ses_stub, …}`):
//! - `template`: `template.yaml` as the schema source ([`workspace_root`], [`template()`],
//!   [`ledger_table_properties`]).
//! - `http`: the minimal HTTP/1.1 client ([`http_request`]) for moto's management API.
//! - `moto`: the emulator ([`start_moto`], [`Moto`]): clients, environment, resources as
//!   `template.yaml` deploys them, recorder and state.
//! - `ses_stub`: the SES v2 stand-in ([`start_ses_stub`], [`SesStub`], [`StubReply`]).
//! - [`postgres`]: a throwaway PostgreSQL cluster.
//! - [`ledger_suite`]: the behaviour every ledger adapter shares.
//! - [`sender_app`]: the sender Lambda over moto.
//! - [`outcome_bus`]: an EventBridge bus whose outcome events a test reads back from a queue.

mod http;
pub mod ledger_suite;
mod moto;
pub mod outcome_bus;
pub mod postgres;
pub mod sender_app;
pub mod ses_events;
mod ses_stub;
pub mod smoke_stack;
mod template;

pub use http::{http_request, HttpResponse};
pub use moto::{
    amz_target, launch_moto, start_moto, Moto, ACCESS_KEY_ID, ACCOUNT_ID, REGION, SECRET_ACCESS_KEY,
};
pub use ses_stub::{start_ses_stub, SesStub, StubReply, StubRequest};
pub use template::{ledger_table_properties, template, template_resource_properties, workspace_root};
