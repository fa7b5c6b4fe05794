//! The deployed stack as the smoke test sees it: its outputs by stack name (CloudFormation
//! DescribeStacks), and the sender's and reconciler's metrics (CloudWatch GetMetricStatistics).

use std::collections::BTreeMap;

use anyhow::Context;
use chrono::{DateTime, Utc};

/// Namespace of every metric the functions write (docs/metrics.md).
const NAMESPACE: &str = "NoticeLedger";

/// The outputs of template.yaml the smoke test needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StackOutputs {
    pub(crate) stack: String,
    pub(crate) queue_url: String,
    pub(crate) table: String,
    pub(crate) key_secret_arn: String,
    pub(crate) config_parameter: String,
    pub(crate) sender_function: String,
    pub(crate) reconciler_function: String,
    /// The stack parameter `RedirectAllMailTo`, when set (a staging stack).
    pub(crate) redirect: Option<String>,
}

impl StackOutputs {
    /// The outputs by name; a missing one is named (a stack from another template, or one whose
    /// deploy has not finished).
    pub(crate) fn from_map(
        stack: &str,
        outputs: &BTreeMap<String, String>,
        redirect: Option<String>,
    ) -> anyhow::Result<Self> {
        let get = |name: &str| {
            outputs.get(name).filter(|v| !v.is_empty()).cloned().with_context(|| {
                format!(
                    "stack {stack} has no output {name}: is it a notice-ledger stack (template.yaml), fully \
                     deployed? It has: {}",
                    outputs.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            })
        };
        Ok(Self {
            stack: stack.to_owned(),
            queue_url: get("ReminderQueueUrl")?,
            table: get("NoticeTableName")?,
            key_secret_arn: get("NoticeKeySecretArn")?,
            config_parameter: get("NoticeConfigParameter")?,
            sender_function: get("SenderFunctionName")?,
            reconciler_function: get("ReconcilerFunctionName")?,
            redirect: redirect.filter(|r| !r.trim().is_empty()),
        })
    }
}

pub(crate) async fn outputs(sdk: &aws_config::SdkConfig, stack: &str) -> anyhow::Result<StackOutputs> {
    let cfn = aws_sdk_cloudformation::Client::new(sdk);
    let described = cfn.describe_stacks().stack_name(stack).send().await.map_err(|e| {
        let fault = notice_awshttp::fault::sdk_fault(&e, "cloudformation:DescribeStacks");
        let detail = aws_sdk_cloudformation::error::DisplayErrorContext(&e).to_string();
        anyhow::Error::new(notice_ledger::DependencyError::new(crate::failure::CLOUDFORMATION, fault, detail))
            .context(format!("cannot read stack {stack} (CloudFormation DescribeStacks)"))
    })?;
    let found = described.stacks().first().with_context(|| format!("no stack named {stack}"))?;
    let outputs: BTreeMap<String, String> = found
        .outputs()
        .iter()
        .filter_map(|o| Some((o.output_key()?.to_owned(), o.output_value()?.to_owned())))
        .collect();
    let redirect = found
        .parameters()
        .iter()
        .find(|p| p.parameter_key() == Some("RedirectAllMailTo"))
        .and_then(|p| p.parameter_value().map(str::to_owned));
    StackOutputs::from_map(stack, &outputs, redirect)
}

/// Sums of one function's metrics since the run's start, read over CloudWatch's JSON protocol
/// ([`notice_setup::aws::cloudwatch`] says why not the SDK's crate).
pub(crate) struct Metrics {
    http: notice_awshttp::AwsHttp,
    target: notice_awshttp::Target,
    since: DateTime<Utc>,
}

/// One metric read: a few hundred bytes each way.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl Metrics {
    pub(crate) fn new(sdk: &aws_config::SdkConfig, since: DateTime<Utc>) -> anyhow::Result<Self> {
        let (http, target) = notice_setup::aws::cloudwatch(sdk)?;
        Ok(Self { http, target, since })
    }

    /// The sum of `metric` (dimension `Function` = `function`) from the run's start to now, in
    /// one-minute periods; 0 when nothing was written.
    pub(crate) async fn sum(&self, function: &str, metric: &str) -> anyhow::Result<f64> {
        // A minute either side: EMF timestamps are the invocation's, periods are whole minutes.
        let start = self.since - chrono::Duration::minutes(1);
        let end = Utc::now() + chrono::Duration::minutes(1);
        let body = serde_json::json!({
            "Namespace": NAMESPACE, "MetricName": metric,
            "Dimensions": [{"Name": "Function", "Value": function}],
            "StartTime": start.timestamp(), "EndTime": end.timestamp(),
            "Period": 60, "Statistics": ["Sum"],
        });
        let what =
            || format!("cannot read {NAMESPACE}/{metric} of {function} (CloudWatch GetMetricStatistics)");
        let target = http::HeaderName::from_static("x-amz-target");
        let response = self
            .http
            .post(
                &self.target,
                "application/x-amz-json-1.0",
                &[(target, "GraniteServiceVersion20100801.GetMetricStatistics")],
                body.to_string().into_bytes(),
                CALL_TIMEOUT,
            )
            .await
            .with_context(what)?;
        let answer: serde_json::Value = serde_json::from_slice(&response.body).unwrap_or_default();
        if !response.status.is_success() {
            let code = answer["__type"].as_str().unwrap_or("no error code");
            let message = answer["message"].as_str().or(answer["Message"].as_str()).unwrap_or_default();
            anyhow::bail!("{}: HTTP {} {code} {message}", what(), response.status.as_u16());
        }
        let sum: f64 =
            answer["Datapoints"].as_array().into_iter().flatten().filter_map(|d| d["Sum"].as_f64()).sum();
        // An empty sum is -0.0, which would print as "-0".
        Ok(sum + 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_output_is_named_with_what_the_stack_has() {
        let mut outputs: BTreeMap<String, String> = [
            "ReminderQueueUrl",
            "NoticeTableName",
            "NoticeKeySecretArn",
            "NoticeConfigParameter",
            "SenderFunctionName",
            "ReconcilerFunctionName",
        ]
        .into_iter()
        .map(|k| (k.to_owned(), format!("v-{k}")))
        .collect();
        let all =
            StackOutputs::from_map("staging", &outputs, Some(" ".into())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (all.table.as_str(), all.sender_function.as_str()),
            ("v-NoticeTableName", "v-SenderFunctionName")
        );
        outputs.remove("NoticeKeySecretArn");
        let err = StackOutputs::from_map("staging", &outputs, None).unwrap_err().to_string();
        assert!(err.starts_with("stack staging has no output NoticeKeySecretArn"), "{err}");
        assert!(err.contains("NoticeTableName"), "{err}");
    }
}
