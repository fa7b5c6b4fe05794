//! A deployed stack on the emulator, for `noticectl smoke`: the resources template.yaml makes and
//! a CloudFormation stack whose outputs name them (the key secret in Secrets Manager, the notice
//! configuration published to S3 and pointed at by SSM), and a [`Driver`] that plays what AWS
//! does around the two functions — the event source mapping (receive a batch, run the sender,
//! delete what it did not fail), CloudWatch's EMF extraction (the sender's documents and the
//! reconciler's counts put as metrics) and SES's event feed for the mailbox simulator (`bounce@`
//! bounces, `complaint@` is delivered then complained about, anything else is delivered), fed to
//! the real reconciler.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use lambda_runtime::{Context, LambdaEvent};
use notice_configstore::{point, publish};
use notice_dynamodb::ledger::DynamoLedger;
use notice_reconciler::ReconcilerApp;
use notice_sender::SenderApp;
use notice_setup::aws;
use notice_setup::notices::{load_published, ConfigSpec};
use notice_texts::notices::Bundle;
use serde_json::{json, Value};

use crate::sender_app::{self, app_with, record, settings, Env, SECRET, TABLE};
use crate::ses_events::ses_events_for_sends;

/// The function names the stack's outputs give (the metrics' `Function` dimension): the names the
/// functions put in their EMF documents outside Lambda.
pub const SENDER: &str = "notice-sender";
pub const RECONCILER: &str = "notice-reconciler";
const BUCKET: &str = "smoke-notice-config";
const PARAMETER: &str = "/smoke-stack/notice-config";

pub struct SmokeStack {
    pub env: Env,
    pub name: String,
    /// The stack parameter `RedirectAllMailTo` (a staging stack), which the sender applies.
    pub redirect: Option<String>,
}

impl SmokeStack {
    /// The stack `name` on a fresh emulator, its notice configuration the bundle in `config_dir`.
    pub async fn start(name: &str, config_dir: &Path) -> Self {
        Self::start_redirecting(name, config_dir, None).await
    }

    /// [`SmokeStack::start`], the stack redirecting every notice to `redirect` when given.
    pub async fn start_redirecting(name: &str, config_dir: &Path, redirect: Option<&str>) -> Self {
        let env = sender_app::env().await;
        let sdk = env.moto.sdk_config().await;
        let secret = aws_sdk_secretsmanager::Client::new(&sdk)
            .create_secret()
            .name(format!("{name}-NoticeKeySecret"))
            .secret_string(SECRET)
            .send()
            .await
            .expect("create the key secret");
        let s3 = aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&sdk).force_path_style(true).build(),
        );
        s3.create_bucket().bucket(BUCKET).send().await.expect("bucket");
        let bundle = Bundle::from_dir(config_dir).expect("the configuration bundle");
        let location =
            publish(&sdk, BUCKET, &bundle.to_published(), bundle.version().hex()).await.expect("publish");
        point(&sdk, PARAMETER, &location).await.expect("point");
        let outputs = json!({
            "ReminderQueueUrl": env.queue_url,
            "NoticeTableName": TABLE,
            "NoticeKeySecretArn": secret.arn().expect("the secret's ARN"),
            "NoticeConfigParameter": PARAMETER,
            "SenderFunctionName": SENDER,
            "ReconcilerFunctionName": RECONCILER,
        });
        let outputs: serde_json::Map<String, Value> = outputs
            .as_object()
            .expect("an object")
            .iter()
            .map(|(k, v)| (k.clone(), json!({ "Value": v })))
            .collect();
        // One resource (a stack needs one); the outputs name what the harness made.
        let template = json!({
            "Parameters": { "RedirectAllMailTo": { "Type": "String", "Default": redirect.unwrap_or("") } },
            "Resources": { "Marker": { "Type": "AWS::SQS::Queue", "Properties": { "QueueName": format!("{name}-marker") } } },
            "Outputs": outputs,
        });
        aws_sdk_cloudformation::Client::new(&sdk)
            .create_stack()
            .stack_name(name)
            .template_body(template.to_string())
            .send()
            .await
            .expect("create the stack");
        Self { env, name: name.to_owned(), redirect: redirect.map(str::to_owned) }
    }

    /// The sender (its published configuration loaded, its key check recorded as at its first
    /// start) and the reconciler, driven as AWS drives them.
    pub async fn driver(&self) -> Driver {
        let sdk = self.env.moto.sdk_config().await;
        let (config, _) = load_published(&sdk, &ConfigSpec::Parameter(PARAMETER.into()))
            .await
            .expect("the published version");
        let mut s = settings(&self.env, true);
        s.send.policy = config.policy().clone();
        s.send.renderer = Arc::new(s.send.renderer.with_config(Arc::new(config)));
        s.send.redirect_all_mail_to = self.redirect.clone();
        let sender = app_with(&self.env, s, None).await;
        let checks = notice_dynamodb::DynamoKeyCheck::new(aws::dynamodb_client(&sdk), TABLE);
        let secret = notice_ledger::NoticeSecret::new(SECRET).expect("secret");
        notice_sender::verify_key_secret(&checks, &secret.clone().into()).await.expect("the key check");
        let reconciler =
            ReconcilerApp { ledger: Arc::new(DynamoLedger::new(aws::dynamodb_client(&sdk), TABLE)) };
        Driver {
            sender,
            reconciler,
            sqs: self.env.moto.sqs().await,
            cloudwatch: aws::cloudwatch(&sdk).expect("CloudWatch's endpoint"),
            queue_url: self.env.queue_url.clone(),
            reconciled: HashSet::new(),
            ses_events: true,
        }
    }
}

/// What AWS does around the functions, one step at a time.
pub struct Driver {
    sender: SenderApp,
    reconciler: ReconcilerApp,
    sqs: aws_sdk_sqs::Client,
    /// CloudWatch in its JSON protocol (the SDK's crate speaks CBOR, which moto does not).
    cloudwatch: (notice_awshttp::AwsHttp, notice_awshttp::Target),
    queue_url: String,
    /// SES message ids whose events were fed to the reconciler.
    reconciled: HashSet<String>,
    /// Whether SES's event feed runs (off: a stack whose configuration set publishes nowhere).
    pub ses_events: bool,
}

impl Driver {
    /// Runs until dropped: one batch (if any), then the events of new sends.
    pub async fn run(mut self, moto: &crate::Moto) {
        loop {
            self.step(moto).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn step(&mut self, moto: &crate::Moto) {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(10)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive");
        let messages = out.messages();
        if !messages.is_empty() {
            let records: Vec<Value> = messages.iter().map(record).collect();
            let event: SqsEvent =
                serde_json::from_value(json!({ "Records": records })).expect("an SQS event");
            let (response, documents) =
                notice_sender::handle_batch(&self.sender, LambdaEvent::new(event, Context::default())).await;
            let failed: HashSet<&str> =
                response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
            for m in messages {
                if !failed.contains(m.message_id().unwrap_or_default()) {
                    self.sqs
                        .delete_message()
                        .queue_url(&self.queue_url)
                        .receipt_handle(m.receipt_handle().unwrap_or_default())
                        .send()
                        .await
                        .expect("delete");
                }
            }
            for document in &documents {
                self.put_emf(document).await;
            }
        }
        if self.ses_events {
            self.feed_ses_events(moto).await;
        }
    }

    /// SES's events for every message accepted since the last step, through the reconciler.
    async fn feed_ses_events(&mut self, moto: &crate::Moto) {
        let sent: Vec<Value> = moto
            .sent_messages()
            .await
            .into_iter()
            .filter(|m| m["id"].as_str().is_some_and(|id| !self.reconciled.contains(id)))
            .collect();
        if sent.is_empty() {
            return;
        }
        let events = ses_events_for_sends(&sent, &moto.recorded_send_email_requests().await);
        let event: SqsEvent = serde_json::from_value(events).expect("an SQS event");
        let (_, tally) = notice_reconciler::handle_sqs(&self.reconciler, event).await;
        self.put(RECONCILER, &[("DuplicateSendsDetected", tally.duplicates as f64)]).await;
        self.reconciled.extend(sent.iter().filter_map(|m| m["id"].as_str().map(str::to_owned)));
    }

    /// An EMF document as CloudWatch turns it into metrics: every listed metric, under its
    /// dimensions' values from the document.
    async fn put_emf(&self, document: &Value) {
        let Some(spec) = document["_aws"]["CloudWatchMetrics"][0].as_object() else { return };
        let function = document["Function"].as_str().unwrap_or_default().to_owned();
        let values: Vec<(&str, f64)> = spec["Metrics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["Name"].as_str())
            .filter_map(|name| Some((name, document[name].as_f64()?)))
            .collect();
        self.put(&function, &values).await;
    }

    async fn put(&self, function: &str, values: &[(&str, f64)]) {
        let data: Vec<Value> = values
            .iter()
            .map(|(name, value)| {
                json!({"MetricName": name, "Value": value, "Unit": "Count",
                    "Dimensions": [{"Name": "Function", "Value": function}]})
            })
            .collect();
        let (http, target) = &self.cloudwatch;
        for chunk in data.chunks(20) {
            let body = json!({"Namespace": "NoticeLedger", "MetricData": chunk}).to_string().into_bytes();
            let header = http::HeaderName::from_static("x-amz-target");
            let response = http
                .post(
                    target,
                    "application/x-amz-json-1.0",
                    &[(header, "GraniteServiceVersion20100801.PutMetricData")],
                    body,
                    Duration::from_secs(10),
                )
                .await
                .expect("PutMetricData answers");
            assert!(response.status.is_success(), "PutMetricData: {response:?}");
        }
    }
}
