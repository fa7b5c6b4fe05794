//! `template.yaml` watches its own stack's functions: every alarm and dashboard line on the
//! `NoticeLedger` namespace takes its `Function` dimension from the stack's own
//! `AWS::Serverless::Function` (the deployed name, which the Lambdas emit as `Function`), never from
//! a literal — two stacks in one account must not share alarms or graphs. And the capacity alarms
//! exist: a refused park into EventBridge Scheduler, and the reminder queue's in-flight count.

use std::collections::BTreeSet;

use notice_e2e::template;
use serde_json::Value as Json;
use serde_yaml::Value;

const NAMESPACE: &str = "NoticeLedger";

fn resources(template: &Value) -> Vec<(String, &Value)> {
    template
        .get("Resources")
        .and_then(Value::as_mapping)
        .expect("template.yaml has Resources")
        .iter()
        .map(|(k, v)| (k.as_str().expect("logical ids are strings").to_owned(), v))
        .collect()
}

fn of_type<'a>(template: &'a Value, kind: &str) -> Vec<(String, &'a Value)> {
    resources(template)
        .into_iter()
        .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some(kind))
        .collect()
}

/// Logical ids of the template's Lambdas.
fn functions(template: &Value) -> BTreeSet<String> {
    of_type(template, "AWS::Serverless::Function").into_iter().map(|(id, _)| id).collect()
}

fn alarms(template: &Value) -> Vec<(String, &Value)> {
    of_type(template, "AWS::CloudWatch::Alarm")
        .into_iter()
        .map(|(id, r)| {
            let props = r.get("Properties").unwrap_or_else(|| panic!("{id} has no Properties"));
            (id, props)
        })
        .collect()
}

/// `!Ref X` or `{Ref: X}`: `X`.
fn ref_target(value: &Value) -> Option<&str> {
    match value {
        Value::Tagged(t) if t.tag == "Ref" => t.value.as_str(),
        Value::Mapping(m) if m.len() == 1 => m.get("Ref").and_then(Value::as_str),
        _ => None,
    }
}

/// `!GetAtt A.B`, `!GetAtt [A, B]` or `{Fn::GetAtt: [A, B]}`: `"A.B"`.
fn get_att(value: &Value) -> Option<String> {
    let inner = match value {
        Value::Tagged(t) if t.tag == "GetAtt" => &t.value,
        Value::Mapping(m) if m.len() == 1 => m.get("Fn::GetAtt")?,
        _ => return None,
    };
    match inner {
        Value::String(s) => Some(s.clone()),
        Value::Sequence(parts) => {
            let parts: Option<Vec<&str>> = parts.iter().map(Value::as_str).collect();
            Some(parts?.join("."))
        }
        _ => None,
    }
}

/// Every metric an alarm reads: `(Namespace, MetricName, Dimensions)` of the alarm itself, or of
/// each `MetricStat` in its `Metrics` (math expressions).
fn alarm_metrics(props: &Value) -> Vec<(&str, &str, &Value)> {
    let mut out = Vec::new();
    if let Some(ns) = props.get("Namespace").and_then(Value::as_str) {
        let name = props.get("MetricName").and_then(Value::as_str).unwrap_or("");
        out.push((ns, name, props.get("Dimensions").unwrap_or(&Value::Null)));
    }
    for query in props.get("Metrics").and_then(Value::as_sequence).into_iter().flatten() {
        if let Some(metric) = query.get("MetricStat").and_then(|s| s.get("Metric")) {
            let ns = metric.get("Namespace").and_then(Value::as_str).unwrap_or("");
            let name = metric.get("MetricName").and_then(Value::as_str).unwrap_or("");
            out.push((ns, name, metric.get("Dimensions").unwrap_or(&Value::Null)));
        }
    }
    out
}

fn dimensions(dims: &Value) -> Vec<(&str, &Value)> {
    dims.as_sequence()
        .into_iter()
        .flatten()
        .map(|d| {
            (d.get("Name").and_then(Value::as_str).unwrap_or(""), d.get("Value").unwrap_or(&Value::Null))
        })
        .collect()
}

fn number(props: &Value, key: &str) -> Option<f64> {
    props.get(key).and_then(Value::as_f64)
}

#[test]
fn every_namespace_alarm_reads_its_own_stacks_function() {
    let template = template();
    let functions = functions(&template);
    assert!(functions.len() >= 3, "the template's Lambdas: {functions:?}");
    let mut checked = 0;
    let mut problems = Vec::new();
    for (id, props) in alarms(&template) {
        for (ns, metric, dims) in alarm_metrics(props) {
            if ns != NAMESPACE {
                continue;
            }
            checked += 1;
            let function: Vec<&Value> =
                dimensions(dims).into_iter().filter(|(n, _)| *n == "Function").map(|(_, v)| v).collect();
            match function.as_slice() {
                [value] => match ref_target(value) {
                    Some(target) if functions.contains(target) => {}
                    _ => problems.push(format!(
                        "{id} ({metric}): Function = {value:?}, not a !Ref to one of {functions:?}"
                    )),
                },
                _ => problems.push(format!("{id} ({metric}): {} Function dimensions", function.len())),
            }
        }
    }
    assert!(checked >= 7, "expected the NoticeLedger alarms, found {checked}");
    assert!(problems.is_empty(), "alarms not tied to this stack's functions:\n{}", problems.join("\n"));
}

/// The dashboard body: the `!Sub` string, parsed as JSON (substitutions sit inside JSON strings).
fn dashboard_bodies(template: &Value) -> Vec<(String, Json)> {
    of_type(template, "AWS::CloudWatch::Dashboard")
        .into_iter()
        .map(|(id, r)| {
            let body = r.get("Properties").and_then(|p| p.get("DashboardBody"));
            let text = match body {
                Some(Value::Tagged(t)) if t.tag == "Sub" => t.value.as_str(),
                Some(Value::String(s)) => Some(s.as_str()),
                _ => None,
            };
            let text = text.unwrap_or_else(|| panic!("{id}: DashboardBody is not a !Sub string"));
            let json = serde_json::from_str(text).unwrap_or_else(|e| panic!("{id}: body is not JSON: {e}"));
            (id, json)
        })
        .collect()
}

/// A widget's metric lines, with the dashboard shorthand `"."` (same as the line above) resolved.
/// Each line is the array's leading strings: namespace, metric name, then dimension name/value pairs.
fn metric_lines(widget: &Json) -> Vec<Vec<String>> {
    let mut lines = Vec::new();
    let mut previous: Vec<String> = Vec::new();
    for line in widget["properties"]["metrics"].as_array().into_iter().flatten() {
        let Some(items) = line.as_array() else { continue };
        let strings: Vec<String> = items
            .iter()
            .map_while(Json::as_str)
            .enumerate()
            .map(|(i, s)| if s == "." { previous.get(i).cloned().unwrap_or_default() } else { s.to_owned() })
            .collect();
        if strings.is_empty() {
            continue; // an expression line: `[{"expression": …}]`
        }
        previous = strings.clone();
        lines.push(strings);
    }
    lines
}

fn widgets(body: &Json) -> &[Json] {
    body["widgets"].as_array().map(Vec::as_slice).unwrap_or_default()
}

#[test]
fn every_dashboard_namespace_line_names_its_own_stacks_function() {
    let template = template();
    let allowed: BTreeSet<String> = functions(&template).iter().map(|f| format!("${{{f}}}")).collect();
    let bodies = dashboard_bodies(&template);
    assert!(!bodies.is_empty(), "template.yaml has a dashboard");
    let mut checked = 0;
    let mut problems = Vec::new();
    for (id, body) in &bodies {
        for widget in widgets(body) {
            for line in metric_lines(widget) {
                if line[0] != NAMESPACE {
                    continue;
                }
                checked += 1;
                let function = line[2..].chunks(2).find(|pair| pair[0] == "Function").and_then(|p| p.get(1));
                match function {
                    Some(value) if allowed.contains(value) => {}
                    other => problems.push(format!(
                        "{id} «{}»: {line:?} has Function = {other:?}, not one of {allowed:?}",
                        widget["properties"]["title"].as_str().unwrap_or("?")
                    )),
                }
            }
        }
    }
    assert!(checked >= 20, "expected the NoticeLedger dashboard lines, found {checked}");
    assert!(
        problems.is_empty(),
        "dashboard lines not tied to this stack's functions:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_refused_park_pages_within_minutes() {
    let template = template();
    let parking: Vec<(String, &Value)> = alarms(&template)
        .into_iter()
        .filter(|(_, p)| alarm_metrics(p).iter().any(|(ns, m, _)| *ns == NAMESPACE && *m == "ParkingRefused"))
        .collect();
    let [(id, props)] = parking.as_slice() else {
        panic!(
            "expected one alarm on {NAMESPACE}/ParkingRefused, found {:?}",
            parking.iter().map(|a| &a.0).collect::<Vec<_>>()
        );
    };
    let period = number(props, "Period").unwrap_or_else(|| panic!("{id}: no Period"));
    assert!(period <= 300.0, "{id}: Period {period} s is too slow to page on a refused park");
    assert_eq!(number(props, "EvaluationPeriods"), Some(1.0), "{id}: one refused park is enough");
    // The sender emits ParkingRefused under [Function] and under [Function, Reason]: the alarm
    // reads the total, so it must not narrow to one reason.
    let (_, _, dims) = alarm_metrics(props)[0];
    let names: Vec<&str> = dimensions(dims).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["Function"], "{id}: the total, not one Reason");
    let actions = props.get("AlarmActions").and_then(Value::as_sequence).map(Vec::len).unwrap_or(0);
    assert!(actions > 0, "{id}: it must page (AlarmActions)");
}

#[test]
fn the_reminder_queue_in_flight_count_is_watched_below_the_sqs_limit() {
    let template = template();
    let in_flight: Vec<(String, &Value)> = alarms(&template)
        .into_iter()
        .filter(|(_, p)| {
            alarm_metrics(p).iter().any(|(ns, m, dims)| {
                *ns == "AWS/SQS"
                    && *m == "ApproximateNumberOfMessagesNotVisible"
                    && dimensions(dims).iter().any(|(n, v)| {
                        *n == "QueueName" && get_att(v).as_deref() == Some("ReminderQueue.QueueName")
                    })
            })
        })
        .collect();
    let [(id, props)] = in_flight.as_slice() else {
        panic!(
            "expected one alarm on the reminder queue's ApproximateNumberOfMessagesNotVisible, found {:?}",
            in_flight.iter().map(|a| &a.0).collect::<Vec<_>>()
        );
    };
    assert_eq!(number(props, "Threshold"), Some(80000.0), "{id}: well below SQS's ~120 000 in flight");
    assert_eq!(
        props.get("ComparisonOperator").and_then(Value::as_str),
        Some("GreaterThanOrEqualToThreshold"),
        "{id}"
    );
    let actions = props.get("AlarmActions").and_then(Value::as_sequence).map(Vec::len).unwrap_or(0);
    assert!(actions > 0, "{id}: it must page (AlarmActions)");
}

/// The actions an alarm notifies, by the resource each `!Ref` names.
fn alarm_actions(props: &Value) -> Vec<&str> {
    props
        .get("AlarmActions")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .filter_map(ref_target)
        .collect()
}

#[test]
fn a_late_withdraw_warns_without_paging_and_a_send_after_withdraw_pages() {
    let template = template();
    let on = |metric: &str| -> Vec<(String, &Value)> {
        alarms(&template)
            .into_iter()
            .filter(|(_, p)| alarm_metrics(p).iter().any(|(ns, m, _)| *ns == NAMESPACE && *m == metric))
            .collect()
    };
    let too_late = on("WithdrawTooLate");
    let [(id, props)] = too_late.as_slice() else { panic!("one WithdrawTooLate alarm: {too_late:?}") };
    assert_eq!(alarm_actions(props), ["WarningTopic"], "{id}: a warning, never the paging topic");
    let sent_after = on("SentAfterWithdraw");
    let [(id, props)] = sent_after.as_slice() else { panic!("one SentAfterWithdraw alarm: {sent_after:?}") };
    assert_eq!(alarm_actions(props), ["AlarmTopic"], "{id}: a withdrawn notice that went out pages");
    // The paging topic carries no warning.
    for (id, props) in alarms(&template) {
        if alarm_actions(props).contains(&"AlarmTopic") {
            assert!(
                !alarm_metrics(props).iter().any(|(_, m, _)| *m == "WithdrawTooLate"),
                "{id} pages on a warning"
            );
        }
    }
}

/// A kind the policy does not know and a notice without required content are legal defects in the
/// producer: each pages on the first one, on the sender's total, and both show on the dashboard
/// with the jurisdictions the policy does not cover.
#[test]
fn an_unknown_kind_and_missing_required_content_page_on_the_first_one() {
    let template = template();
    for metric in ["UnknownKind", "MissingRequiredContent", "ConfigRefreshFailed", "RenderFailed"] {
        let on: Vec<(String, &Value)> = alarms(&template)
            .into_iter()
            .filter(|(_, p)| alarm_metrics(p).iter().any(|(ns, m, _)| *ns == NAMESPACE && *m == metric))
            .collect();
        let [(id, props)] = on.as_slice() else { panic!("one {metric} alarm: {on:?}") };
        assert_eq!(alarm_actions(props), ["AlarmTopic"], "{id}: it pages");
        assert_eq!(number(props, "Threshold"), Some(0.0), "{id}");
        assert_eq!(props.get("ComparisonOperator").and_then(Value::as_str), Some("GreaterThanThreshold"));
        assert_eq!(number(props, "EvaluationPeriods"), Some(1.0), "{id}: the first one is enough");
        let (_, _, dims) = alarm_metrics(props)[0];
        let dims: Vec<(&str, &Value)> = dimensions(dims);
        assert_eq!(dims.len(), 1, "{id}: the Function total");
        assert_eq!(ref_target(dims[0].1), Some("SenderFunction"), "{id}");
    }
    let lines: Vec<Vec<String>> = dashboard_bodies(&template)
        .iter()
        .flat_map(|(_, body)| widgets(body).iter().flat_map(metric_lines).collect::<Vec<_>>())
        .collect();
    for metric in ["UnknownKind", "MissingRequiredContent", "UnlistedJurisdiction"] {
        assert!(
            lines.iter().any(|l| l.get(1).map(String::as_str) == Some(metric)),
            "{metric} on the dashboard"
        );
    }
}

/// A staging stack may redirect its mail to one address; a production stack may not deploy with
/// one (a CloudFormation rule), and the sender gets both settings from the template.
#[test]
fn only_a_staging_stack_may_redirect_its_mail() {
    let template = template();
    let rule = template
        .get("Rules")
        .and_then(|r| r.get("RedirectOnlyOnStaging"))
        .expect("Rules.RedirectOnlyOnStaging");
    let text = serde_yaml::to_string(rule).unwrap();
    assert!(
        text.contains("RedirectAllMailTo") && text.contains("StackEnvironment") && text.contains("staging"),
        "{text}"
    );
    let env = |path: &[&str]| -> Value {
        path.iter().fold(template.clone(), |v, k| v.get(*k).cloned().unwrap_or(Value::Null))
    };
    let global = env(&["Globals", "Function", "Environment", "Variables", "NOTICE_ENVIRONMENT"]);
    assert!(serde_yaml::to_string(&global).unwrap().contains("StackEnvironment"), "{global:?}");
    let sender = env(&[
        "Resources",
        "SenderFunction",
        "Properties",
        "Environment",
        "Variables",
        "NOTICE_REDIRECT_ALL_MAIL_TO",
    ]);
    let sender = serde_yaml::to_string(&sender).unwrap();
    assert!(sender.contains("HasRedirect") && sender.contains("RedirectAllMailTo"), "{sender}");
    let params = env(&["Parameters", "StackEnvironment", "Default"]);
    assert_eq!(params.as_str(), Some("production"), "a stack is production unless it says otherwise");
    // samconfig's staging environment is a stack of its own, marked staging, redirected.
    let samconfig = std::fs::read_to_string(notice_e2e::workspace_root().join("samconfig.toml")).unwrap();
    let staging = samconfig.split("[staging.global.parameters]").nth(1).expect("a staging environment");
    assert!(staging.contains("stack_name = \"notice-ledger-staging\""), "{staging}");
    assert!(staging.contains("StackEnvironment=staging RedirectAllMailTo=success@simulator.amazonses.com"));
}

/// A deployed stack always sends a published notice configuration and links a manage page of its
/// own: both parameters are required (no default), the sender is pointed at its own SSM
/// parameter, and it may read only that parameter and only the bucket's `notice-config/*`.
#[test]
fn the_sender_reads_only_its_own_published_configuration() {
    let template = template();
    let params = template.get("Parameters").unwrap_or_else(|| panic!("no Parameters"));
    for name in ["ManageUrl", "NoticeConfigBucket"] {
        let p = params.get(name).unwrap_or_else(|| panic!("no parameter {name}"));
        assert!(p.get("Default").is_none(), "{name} must be required: {p:?}");
    }
    assert!(params.get("WindowPolicy").is_none(), "the policy comes from the configuration's windows.json");
    let (_, sender) = resources(&template)
        .into_iter()
        .find(|(id, _)| id == "SenderFunction")
        .unwrap_or_else(|| panic!("no SenderFunction"));
    let props = sender.get("Properties").unwrap_or_else(|| panic!("no Properties"));
    let vars =
        props.get("Environment").and_then(|e| e.get("Variables")).unwrap_or_else(|| panic!("no variables"));
    let config =
        serde_yaml::to_string(vars.get("NOTICE_CONFIG").unwrap_or_else(|| panic!("no NOTICE_CONFIG")))
            .unwrap_or_default();
    assert!(config.contains("ssm:/${AWS::StackName}/notice-config"), "{config}");
    assert!(vars.get("NOTICE_WINDOWS").is_none() && vars.get("NOTICE_TEMPLATE_DIR").is_none());
    assert!(
        ref_target(vars.get("NOTICE_MANAGE_URL").unwrap_or_else(|| panic!("no NOTICE_MANAGE_URL")))
            == Some("ManageUrl")
    );
    let policies = serde_yaml::to_string(props.get("Policies").unwrap_or_else(|| panic!("no Policies")))
        .unwrap_or_default();
    let statements: Vec<&str> = policies.split("- Sid:").collect();
    let s3: Vec<&&str> = statements.iter().filter(|s| s.contains("s3:")).collect();
    assert_eq!(s3.len(), 1, "one S3 statement: {s3:?}");
    assert!(
        s3[0].contains("s3:GetObject") && !s3[0].contains("s3:PutObject") && !s3[0].contains("s3:*"),
        "{}",
        s3[0]
    );
    assert!(s3[0].contains("${NoticeConfigBucket}/notice-config/*"), "{}", s3[0]);
    let ssm: Vec<&&str> = statements.iter().filter(|s| s.contains("ssm:")).collect();
    assert_eq!(ssm.len(), 1, "{ssm:?}");
    assert!(
        ssm[0].contains("ssm:GetParameter") && ssm[0].contains("parameter/${AWS::StackName}/notice-config"),
        "{}",
        ssm[0]
    );
    assert!(!ssm[0].contains("ssm:PutParameter"));
}

/// The SES event types the configuration set publishes, for `TrackOpensAndClicks` = `tracking`:
/// read through the destination's `!If`, as CloudFormation would resolve it.
fn published_event_types(template: &Value, tracking: bool) -> Vec<String> {
    let destination = template_resource(template, "NoticeEventDestination");
    let types = &destination["Properties"]["EventDestination"]["MatchingEventTypes"];
    let chosen = match types {
        Value::Tagged(t) if t.tag == "If" => {
            let branches = t.value.as_sequence().expect("!If [condition, then, else]");
            assert_eq!(branches[0].as_str(), Some("TracksOpensAndClicks"), "{branches:?}");
            let condition = &template["Conditions"]["TracksOpensAndClicks"];
            let Value::Tagged(eq) = condition else { panic!("TracksOpensAndClicks: {condition:?}") };
            let sides = eq.value.as_sequence().expect("!Equals [a, b]");
            assert!(eq.tag == "Equals", "{condition:?}");
            assert_eq!(
                (ref_target(&sides[0]), sides[1].as_str()),
                (Some("TrackOpensAndClicks"), Some("true"))
            );
            if tracking {
                &branches[1]
            } else {
                &branches[2]
            }
        }
        plain => plain,
    };
    chosen
        .as_sequence()
        .expect("a list of event types")
        .iter()
        .map(|t| t.as_str().expect("an event type").to_owned())
        .collect()
}

fn template_resource<'a>(template: &'a Value, id: &str) -> &'a Value {
    template.get("Resources").and_then(|r| r.get(id)).unwrap_or_else(|| panic!("no resource {id}"))
}

/// A legally required notice does not track its reader by default: with open or click selected,
/// SES adds a pixel and rewrites every link (the signed manage link too) through its own domain.
/// What every guarantee needs stays: send (a lost commit's resolution), the outcomes and the
/// evidence. The parameter turns tracking on, and defaults to off.
#[test]
fn open_and_click_are_published_only_when_the_stack_asks_for_them() {
    let template = template();
    let parameter = &template["Parameters"]["TrackOpensAndClicks"];
    assert_eq!(parameter["Default"].as_str(), Some("false"), "{parameter:?}");

    let by_default = published_event_types(&template, false);
    for needed in ["send", "delivery", "bounce", "complaint", "reject", "deliveryDelay"] {
        assert!(by_default.iter().any(|t| t == needed), "{needed} is what a guarantee needs: {by_default:?}");
    }
    for tracking in ["open", "click"] {
        assert!(!by_default.iter().any(|t| t == tracking), "{tracking} is on by default: {by_default:?}");
    }
    let tracked = published_event_types(&template, true);
    assert_eq!(tracked.len(), by_default.len() + 2, "{tracked:?}");
    assert!(tracked.iter().any(|t| t == "open") && tracked.iter().any(|t| t == "click"), "{tracked:?}");
}
