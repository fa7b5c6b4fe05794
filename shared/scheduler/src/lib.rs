//! EventBridge Scheduler as the [`Parker`]: one one-time schedule per parked notice.
//!
//! The schedule is named by the notice key (64 lowercase hex — exactly Scheduler's name limit), so
//! every delivery of one notice, from the sender or from `noticectl enqueue`, lands on the same
//! name and a second park is a `ConflictException`: already parked. It fires at the window's
//! opening (`at(...)`, UTC, no flexible window), puts the job's own body back on the queue it came
//! from, and deletes itself afterwards. A message with a `replay_batch` attribute goes back
//! through Scheduler's universal `sqs:sendMessage` target, which can carry message attributes
//! (the templated SQS target cannot); the body is unchanged either way.
//!
//! Scheduler retries a failed delivery for up to a day ([`MAX_EVENT_AGE_SECS`]); with a dead-letter
//! queue configured, an event it still cannot deliver lands there instead of vanishing.

use async_trait::async_trait;
use aws_sdk_scheduler::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_scheduler::operation::create_schedule::CreateScheduleError;
use aws_sdk_scheduler::types::{
    ActionAfterCompletion, DeadLetterConfig, FlexibleTimeWindow, FlexibleTimeWindowMode, RetryPolicy, Target,
};
use chrono::{DateTime, Utc};
use serde_json::json;

use notice_awshttp::fault::sdk_fault;
use notice_ledger::park::{ParkError, ParkRefusal, ParkRequest, Parked, Parker};
use notice_ledger::{Fault, NoticeKey};

/// The service this adapter is, as an operator knows it: named in every typed failure.
pub const SERVICE: &str = "EventBridge Scheduler";

/// Longest Scheduler keeps retrying a delivery (its maximum): a window is at least a day wide.
pub const MAX_EVENT_AGE_SECS: i32 = 86_400;
/// Scheduler's maximum retry attempts within that day.
const MAX_RETRY_ATTEMPTS: i32 = 185;

/// Parks jobs as one-time schedules in one schedule group.
#[derive(Clone, Debug)]
pub struct SchedulerParker {
    client: aws_sdk_scheduler::Client,
    group: String,
    role_arn: String,
    dead_letter_arn: Option<String>,
}

/// A parked notice as an operator sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParkedSchedule {
    /// The schedule name: the notice key.
    pub name: String,
    /// When it fires (`at(...)` expression), when it could be read.
    pub expression: Option<String>,
    pub target_arn: Option<String>,
    /// The body it puts back on the queue.
    pub body: Option<String>,
    pub created: Option<DateTime<Utc>>,
}

impl SchedulerParker {
    pub fn new(
        client: aws_sdk_scheduler::Client,
        group: impl Into<String>,
        role_arn: impl Into<String>,
    ) -> Self {
        Self { client, group: group.into(), role_arn: role_arn.into(), dead_letter_arn: None }
    }

    /// Where Scheduler puts an event it could not deliver within a day.
    pub fn with_dead_letter(mut self, arn: Option<String>) -> Self {
        self.dead_letter_arn = arn;
        self
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    fn target(&self, req: &ParkRequest<'_>) -> Result<Target, ParkError> {
        let (arn, input) = match req.replay_batch {
            None => (req.queue_arn.to_owned(), req.body.to_owned()),
            Some(batch) => {
                let queue_url = queue_url_from_arn(req.queue_arn)
                    .ok_or_else(|| not_built(format!("{} is not an SQS queue ARN", req.queue_arn)))?;
                let input = json!({
                    "QueueUrl": queue_url,
                    "MessageBody": req.body,
                    "MessageAttributes": {"replay_batch": {"DataType": "String", "StringValue": batch}},
                });
                (universal_send_message_arn(req.queue_arn), input.to_string())
            }
        };
        let retry = RetryPolicy::builder()
            .maximum_event_age_in_seconds(MAX_EVENT_AGE_SECS)
            .maximum_retry_attempts(MAX_RETRY_ATTEMPTS)
            .build();
        let dead_letter =
            self.dead_letter_arn.as_ref().map(|arn| DeadLetterConfig::builder().arn(arn).build());
        Target::builder()
            .arn(arn)
            .role_arn(&self.role_arn)
            .input(input)
            .retry_policy(retry)
            .set_dead_letter_config(dead_letter)
            .build()
            .map_err(|e| not_built(e.to_string()))
    }

    /// The parked body and wake-up of an existing schedule (`None`s when they cannot be read).
    async fn parked(&self, name: &str) -> Parked {
        let existing = self.get(name).await.ok().flatten();
        let at = existing.as_ref().and_then(|s| s.expression.as_deref()).and_then(parse_at_expression);
        Parked::AlreadyParked { body: existing.and_then(|s| s.body), at }
    }

    /// One parked notice, `None` when no schedule has that name.
    pub async fn get(&self, name: &str) -> Result<Option<ParkedSchedule>, ParkError> {
        let out = match self.client.get_schedule().name(name).group_name(&self.group).send().await {
            Ok(out) => out,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => {
                return Ok(None)
            }
            Err(e) => return Err(unavailable("GetSchedule", e)),
        };
        let target = out.target();
        let input = target.and_then(|t| t.input());
        let universal = target.is_some_and(|t| t.arn().contains(":aws-sdk:sqs:"));
        let body = match input {
            Some(text) if universal => serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| v.get("MessageBody").and_then(|b| b.as_str()).map(str::to_owned)),
            other => other.map(str::to_owned),
        };
        Ok(Some(ParkedSchedule {
            name: name.to_owned(),
            expression: out.schedule_expression().map(str::to_owned),
            target_arn: target.map(|t| t.arn().to_owned()),
            body,
            created: out.creation_date().and_then(|d| DateTime::from_timestamp(d.secs(), d.subsec_nanos())),
        }))
    }

    /// Names of every parked notice in the group, oldest page first, each with its creation time.
    pub async fn list(&self) -> Result<Vec<(String, Option<DateTime<Utc>>)>, ParkError> {
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = self
                .client
                .list_schedules()
                .group_name(&self.group)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| unavailable("ListSchedules", e))?;
            for s in out.schedules() {
                let created =
                    s.creation_date().and_then(|d| DateTime::from_timestamp(d.secs(), d.subsec_nanos()));
                names.extend(s.name().map(|n| (n.to_owned(), created)));
            }
            match out.next_token() {
                Some(next) if !next.is_empty() => token = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(names)
    }

    /// Deletes one parked notice. `Ok(false)`: there was none.
    pub async fn cancel(&self, name: &str) -> Result<bool, ParkError> {
        match self.client.delete_schedule().name(name).group_name(&self.group).send().await {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => Ok(false),
            Err(e) => Err(unavailable("DeleteSchedule", e)),
        }
    }
}

#[async_trait]
impl Parker for SchedulerParker {
    async fn park(&self, req: &ParkRequest<'_>) -> Result<Parked, ParkError> {
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|e| not_built(e.to_string()))?;
        let created = self
            .client
            .create_schedule()
            .name(req.key.as_str())
            .group_name(&self.group)
            .schedule_expression(at_expression(req.at))
            .schedule_expression_timezone("UTC")
            .flexible_time_window(window)
            .action_after_completion(ActionAfterCompletion::Delete)
            .target(self.target(req)?)
            .send()
            .await;
        match created {
            Ok(_) => Ok(Parked::Scheduled),
            Err(e) if matches!(e.as_service_error(), Some(CreateScheduleError::ConflictException(_))) => {
                Ok(self.parked(req.key.as_str()).await)
            }
            Err(e) => {
                let reason = match e.as_service_error() {
                    Some(CreateScheduleError::ServiceQuotaExceededException(_)) => ParkRefusal::Quota,
                    Some(CreateScheduleError::ThrottlingException(_)) => ParkRefusal::Throttled,
                    _ => ParkRefusal::Unavailable,
                };
                let fault = sdk_fault(&e, "scheduler:CreateSchedule");
                Err(ParkError::refused(reason, describe("CreateSchedule", e)).in_service(SERVICE, fault))
            }
        }
    }

    async fn unpark(&self, key: &NoticeKey) -> Result<bool, ParkError> {
        self.cancel(key.as_str()).await
    }
}

/// A Scheduler call's failure, its fault read from the SDK's typed error.
fn unavailable<E, R>(op: &str, err: SdkError<E, R>) -> ParkError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    let fault = sdk_fault(&err, &format!("scheduler:{op}"));
    ParkError::unavailable(describe(op, err)).in_service(SERVICE, fault)
}

/// A park this parker could not even ask for (a request it cannot build): nothing was sent.
fn not_built(detail: impl Into<String>) -> ParkError {
    ParkError::unavailable(detail).in_service(SERVICE, Fault::Other)
}

fn describe(op: &str, err: impl std::error::Error) -> String {
    format!("EventBridge Scheduler {op}: {}", DisplayErrorContext(err))
}

/// `at(yyyy-mm-ddThh:mm:ss)`, read in the schedule's time zone (UTC).
pub fn at_expression(at: DateTime<Utc>) -> String {
    format!("at({})", at.format("%Y-%m-%dT%H:%M:%S"))
}

/// The instant of an `at(yyyy-mm-ddThh:mm:ss)` expression (UTC), `None` for anything else.
pub fn parse_at_expression(expression: &str) -> Option<DateTime<Utc>> {
    let inner = expression.strip_prefix("at(")?.strip_suffix(')')?;
    chrono::NaiveDateTime::parse_from_str(inner, "%Y-%m-%dT%H:%M:%S").ok().map(|t| t.and_utc())
}

/// The universal target for SQS `SendMessage` in the queue's partition.
fn universal_send_message_arn(queue_arn: &str) -> String {
    let partition = queue_arn.split(':').nth(1).filter(|p| !p.is_empty()).unwrap_or("aws");
    format!("arn:{partition}:scheduler:::aws-sdk:sqs:sendMessage")
}

pub use notice_sqs::queue_url_from_arn;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expression_is_utc_seconds() {
        let at = DateTime::parse_from_rfc3339("2026-10-31T09:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(at_expression(at), "at(2026-10-31T09:00:00)");
        assert_eq!(parse_at_expression(&at_expression(at)), Some(at));
        assert_eq!(parse_at_expression("rate(5 minutes)"), None);
    }

    /// A park against a closed port is refused as unavailable, and says why by its kind: the
    /// operator's line comes from that kind, never from the SDK's words.
    #[tokio::test]
    async fn a_closed_port_is_an_unreachable_scheduler() {
        use aws_sdk_scheduler::config::{BehaviorVersion, Credentials, Region};
        let config = aws_sdk_scheduler::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "test"))
            .endpoint_url("http://127.0.0.1:1")
            .retry_config(aws_sdk_scheduler::config::retry::RetryConfig::disabled())
            .build();
        let parker =
            SchedulerParker::new(aws_sdk_scheduler::Client::from_conf(config), "g", "arn:aws:iam::1:role/r");
        let key = NoticeKey::parse(&"ab".repeat(32)).unwrap();
        let at = DateTime::parse_from_rfc3339("2026-10-31T09:00:00Z").unwrap().with_timezone(&Utc);
        let request = ParkRequest {
            key: &key,
            at,
            body: "{}",
            queue_arn: "arn:aws:sqs:us-east-1:1:q",
            replay_batch: None,
        };
        let refused = Fault::Unreachable("connection refused");
        let err = parker.park(&request).await.unwrap_err();
        assert_eq!(
            (err.reason, err.service, &err.fault),
            (ParkRefusal::Unavailable, SERVICE, &refused),
            "{err}"
        );
        let err = parker.list().await.unwrap_err();
        assert_eq!((err.service, &err.fault), (SERVICE, &refused), "{err}");
        // A request it cannot build never reached the service: no kind is claimed for it.
        let bad = ParkRequest { replay_batch: Some("b"), queue_arn: "not-an-arn", ..request };
        assert_eq!(parker.park(&bad).await.unwrap_err().fault, Fault::Other);
    }

    #[test]
    fn universal_target_follows_the_partition() {
        assert_eq!(
            universal_send_message_arn("arn:aws-us-gov:sqs:us-gov-west-1:1:q"),
            "arn:aws-us-gov:scheduler:::aws-sdk:sqs:sendMessage"
        );
    }
}
