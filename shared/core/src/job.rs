//! Queue messages: raw JSON body → a validated [`Job`] (`"action": "send"`, the default) or a
//! [`Withdrawal`] (`"action": "withdraw"`: this notice must not go out).
//!
//! Parsing goes through `serde_json::Value` rather than a derived struct so every error names the
//! field at fault and unknown fields are ignored (producers may add fields before workers know them).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::InvalidJob;
use crate::identity::{Identity, NoticeKey, NoticeSecret};
use crate::locale::{Locale, TimeZone};

/// Longest accepted e-mail address (RFC 5321 path limit).
pub const MAX_EMAIL_LEN: usize = crate::address::MAX_ADDRESS_LEN;
/// Largest accepted `template_data`, serialised. SQS bounds a whole message at 256 KiB; a reminder
/// needs a plan name and an amount, so anything near that is a producer bug or an attack on the
/// renderer and the ledger's digest.
pub const MAX_TEMPLATE_DATA_BYTES: usize = 16 * 1024;
/// Longest accepted locale code.
pub const MAX_CODE_LEN: usize = crate::locale::MAX_LOCALE_LEN;

/// A validated reminder job.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub identity: Identity,
    pub email: String,
    pub charge_at: DateTime<Utc>,
    pub jurisdiction: Option<String>,
    /// The customer's language (BCP 47, canonical case): picks the texts and how dates and
    /// amounts are written.
    pub locale: Option<Locale>,
    /// The customer's IANA time zone: the day `charge_at` falls on for them. None: UTC.
    pub time_zone: Option<TimeZone>,
    pub template_data: Map<String, Value>,
    /// The obligation rule that owes this notice (`<scope>/<rule>`, e.g. `US-CA/ca-annual-term`),
    /// when a planner chose its kind from the configuration's obligations: stored on the claim row
    /// so evidence can say *why* the customer was told, not only what and when. Not part of the
    /// content digest (it shapes nothing the customer reads).
    pub obligation: Option<String>,
}

impl Job {
    /// Parses and validates one message body.
    pub fn parse(body: &str) -> Result<Self, InvalidJob> {
        let value: Value = serde_json::from_str(body)
            .map_err(|e| InvalidJob::new("body", format!("is not valid JSON: {e}")))?;
        Self::from_value(&value)
    }

    pub fn from_value(value: &Value) -> Result<Self, InvalidJob> {
        let obj = object(value)?;
        if action(obj)? != Action::Send {
            return Err(InvalidJob::new("action", "is `withdraw`: a withdraw message is not a send job"));
        }
        let identity = identity(obj)?;

        let email = crate::address::parse_recipient(required_str(obj, "email")?)
            .map_err(|e| InvalidJob::new("email", e.to_string()))?;
        let charge_at = required_str(obj, "charge_at")?;
        let charge_at = DateTime::parse_from_rfc3339(charge_at)
            .map_err(|_| InvalidJob::new("charge_at", "must be an RFC 3339 timestamp"))?
            .with_timezone(&Utc);

        let jurisdiction = jurisdiction(obj)?;
        let locale = optional_parsed(obj, "locale", Locale::parse)?;
        let time_zone = optional_parsed(obj, "time_zone", TimeZone::parse)?;
        let template_data = match obj.get("template_data") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(map)) => {
                let size = serde_json::to_string(map).map(|t| t.len()).unwrap_or(usize::MAX);
                if size > MAX_TEMPLATE_DATA_BYTES {
                    return Err(InvalidJob::new(
                        "template_data",
                        format!("is {size} bytes; at most {MAX_TEMPLATE_DATA_BYTES} are accepted"),
                    ));
                }
                check_amount(map)?;
                map.clone()
            }
            Some(_) => return Err(InvalidJob::new("template_data", "must be a JSON object")),
        };
        let obligation = obligation(obj)?;
        Ok(Self { identity, email, charge_at, jurisdiction, locale, time_zone, template_data, obligation })
    }

    pub fn key(&self, secret: &NoticeSecret) -> NoticeKey {
        self.identity.derive_key(secret)
    }

    /// Digest of everything that shapes the rendered message. The same key arriving with another
    /// digest means the producer changed the content without bumping `revision`.
    ///
    /// `time_zone` joins the canonical JSON only when present, so every job without one keeps the
    /// digest it had before the field existed (rows written then still match their redeliveries).
    /// The locale is digested in canonical form: a job that spells it `de_at` digests as `de-AT`.
    pub fn content_digest(&self) -> String {
        // serde_json maps are ordered (BTreeMap) without `preserve_order`, so this is canonical.
        let mut canonical = serde_json::json!({
            "email": self.email,
            "charge_at": self.charge_at.to_rfc3339(),
            "jurisdiction": self.jurisdiction,
            "locale": self.locale.as_ref().map(Locale::as_str),
            "template_data": self.template_data,
        });
        if let (Some(obj), Some(zone)) = (canonical.as_object_mut(), &self.time_zone) {
            obj.insert("time_zone".into(), Value::String(zone.as_str().into()));
        }
        hex::encode(Sha256::digest(canonical.to_string().as_bytes()))
    }

    /// The job as a JSON body again (for re-enqueueing and fixtures).
    pub fn to_value(&self) -> Value {
        let mut v = serde_json::json!({
            "subscription_id": self.identity.subscription_id(),
            "period_start": self.identity.period_start().format("%Y-%m-%d").to_string(),
            "kind": self.identity.kind().as_str(),
            "revision": self.identity.revision(),
            "email": self.email,
            "charge_at": self.charge_at.to_rfc3339(),
            "template_data": self.template_data,
        });
        if let Some(obj) = v.as_object_mut() {
            if let Some(j) = &self.jurisdiction {
                obj.insert("jurisdiction".into(), Value::String(j.clone()));
            }
            if let Some(l) = &self.locale {
                obj.insert("locale".into(), Value::String(l.as_str().into()));
            }
            if let Some(z) = &self.time_zone {
                obj.insert("time_zone".into(), Value::String(z.as_str().into()));
            }
            if let Some(o) = &self.obligation {
                obj.insert("obligation".into(), Value::String(o.clone()));
            }
        }
        v
    }
}

/// What a message asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Send,
    Withdraw,
}

fn object(value: &Value) -> Result<&Map<String, Value>, InvalidJob> {
    value.as_object().ok_or_else(|| InvalidJob::new("body", "must be a JSON object"))
}

fn action(obj: &Map<String, Value>) -> Result<Action, InvalidJob> {
    match obj.get("action") {
        None | Some(Value::Null) => Ok(Action::Send),
        Some(Value::String(s)) if s == "send" => Ok(Action::Send),
        Some(Value::String(s)) if s == "withdraw" => Ok(Action::Withdraw),
        Some(_) => Err(InvalidJob::new("action", "must be `send` or `withdraw`")),
    }
}

/// The business identity every message carries: the fields the notice key is derived from.
fn identity(obj: &Map<String, Value>) -> Result<Identity, InvalidJob> {
    let subscription_id = required_str(obj, "subscription_id")?;
    let period_start = required_str(obj, "period_start")?;
    let kind = required_str(obj, "kind")?;
    let revision = match obj.get("revision") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) => {
            n.as_u64().ok_or_else(|| InvalidJob::new("revision", "must be an integer >= 0"))?
        }
        Some(_) => return Err(InvalidJob::new("revision", "must be an integer >= 0")),
    };
    Identity::new(subscription_id, period_start, kind, revision)
}

/// Longest accepted withdraw `reason`, in characters. The ledger stores a reason this long whole
/// (its own bound, `ledger::MAX_REASON_CHARS`, is checked against this one where it is defined).
pub const MAX_WITHDRAW_REASON_CHARS: usize = 500;

/// A withdraw: the notice with this identity must not go out — whatever copies of its job are
/// still queued, parked or replayed later. It needs no e-mail or charge date (a withdraw that
/// carries them is fine: they are ignored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Withdrawal {
    pub identity: Identity,
    /// Why, for the audit trail (one line, at most [`MAX_WITHDRAW_REASON_CHARS`] characters).
    pub reason: Option<String>,
}

impl Withdrawal {
    pub fn from_value(value: &Value) -> Result<Self, InvalidJob> {
        let obj = object(value)?;
        let identity = identity(obj)?;
        let reason = match obj.get("reason") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => {
                if s.chars().count() > MAX_WITHDRAW_REASON_CHARS {
                    return Err(InvalidJob::new(
                        "reason",
                        format!("must be at most {MAX_WITHDRAW_REASON_CHARS} characters"),
                    ));
                }
                if s.chars().any(char::is_control) {
                    return Err(InvalidJob::new(
                        "reason",
                        "must be a single line without control characters",
                    ));
                }
                Some(s.clone())
            }
            Some(_) => return Err(InvalidJob::new("reason", "must be a string")),
        };
        Ok(Self { identity, reason })
    }

    pub fn key(&self, secret: &NoticeSecret) -> NoticeKey {
        self.identity.derive_key(secret)
    }

    /// The withdraw as a queue message body.
    pub fn to_value(&self) -> Value {
        let mut v = serde_json::json!({
            "action": "withdraw",
            "subscription_id": self.identity.subscription_id(),
            "period_start": self.identity.period_start().format("%Y-%m-%d").to_string(),
            "kind": self.identity.kind().as_str(),
            "revision": self.identity.revision(),
        });
        if let (Some(obj), Some(reason)) = (v.as_object_mut(), &self.reason) {
            obj.insert("reason".into(), Value::String(reason.clone()));
        }
        v
    }
}

/// One queue message: a job to send, or a withdraw of one.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Send(Job),
    Withdraw(Withdrawal),
}

impl Message {
    /// Parses and validates one message body; `action` picks the kind (default `send`).
    pub fn parse(body: &str) -> Result<Self, InvalidJob> {
        let value: Value = serde_json::from_str(body)
            .map_err(|e| InvalidJob::new("body", format!("is not valid JSON: {e}")))?;
        Self::from_value(&value)
    }

    pub fn from_value(value: &Value) -> Result<Self, InvalidJob> {
        match action(object(value)?)? {
            Action::Send => Job::from_value(value).map(Message::Send),
            Action::Withdraw => Withdrawal::from_value(value).map(Message::Withdraw),
        }
    }

    pub fn identity(&self) -> &Identity {
        match self {
            Message::Send(job) => &job.identity,
            Message::Withdraw(w) => &w.identity,
        }
    }
}

/// `template_data.amount`, when present, is the documented money object and nothing else: a
/// string ("12.34 CAD") would satisfy a policy's `requires` and be printed raw, in no locale's
/// notation, where a statute asks for the amount.
fn check_amount(template_data: &Map<String, Value>) -> Result<(), InvalidJob> {
    match template_data.get("amount") {
        None | Some(Value::Null) => Ok(()),
        Some(amount) => crate::locale::Money::from_value(amount)
            .map(drop)
            .map_err(|reason| InvalidJob::new("template_data.amount", reason)),
    }
}

fn required_str<'a>(obj: &'a Map<String, Value>, field: &'static str) -> Result<&'a str, InvalidJob> {
    match obj.get(field) {
        None | Some(Value::Null) => Err(InvalidJob::new(field, "is required")),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(InvalidJob::new(field, "must be a string")),
    }
}

/// `jurisdiction`: an ISO 3166 code in any case, kept in upper case (see [`crate::jurisdiction`]).
fn jurisdiction(obj: &Map<String, Value>) -> Result<Option<String>, InvalidJob> {
    match obj.get("jurisdiction") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => crate::jurisdiction::normalise(s).map(Some).map_err(|e| {
            InvalidJob::new("jurisdiction", format!("must be an ISO 3166 country or subdivision code: {e}"))
        }),
        Some(_) => Err(InvalidJob::new("jurisdiction", "must be a string")),
    }
}

/// Longest accepted `obligation`: a jurisdiction or `default`, `/`, and a rule name (at most 64).
pub const MAX_OBLIGATION_LEN: usize = 128;

/// `obligation`: the rule that owes the notice, `<scope>/<rule>` as a planner writes it. Checked
/// for shape only (letters, digits, `-`, `_`, one `/`), never against the configuration: a job
/// planned under an older configuration stays valid after a rule is renamed, and the row keeps the
/// name it was planned under.
fn obligation(obj: &Map<String, Value>) -> Result<Option<String>, InvalidJob> {
    let s = match obj.get("obligation") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s,
        Some(_) => return Err(InvalidJob::new("obligation", "must be a string")),
    };
    let part_ok =
        |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    let shaped = s.len() <= MAX_OBLIGATION_LEN
        && s.split_once('/').is_some_and(|(scope, rule)| part_ok(scope) && part_ok(rule));
    if !shaped {
        return Err(InvalidJob::new(
            "obligation",
            format!(
                "must be `<scope>/<rule>` (letters, digits, `-` and `_` on each side; at most \
                 {MAX_OBLIGATION_LEN} characters), as the planner writes it: `US-CA/ca-annual-term`"
            ),
        ));
    }
    Ok(Some(s.clone()))
}

/// An optional string field that must parse as `T` (`locale`, `time_zone`); the error names it.
fn optional_parsed<T>(
    obj: &Map<String, Value>,
    field: &'static str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Option<T>, InvalidJob> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => parse(s).map(Some).map_err(|reason| InvalidJob::new(field, reason)),
        Some(_) => Err(InvalidJob::new(field, "must be a string")),
    }
}

impl Job {
    /// The recipient's domain, lower-cased (for per-domain rate limits and metrics without PII).
    pub fn recipient_domain(&self) -> String {
        self.email.rsplit_once('@').map(|(_, d)| d.to_ascii_lowercase()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"subscription_id":"sub_8812","period_start":"2026-10-01","kind":"renewal_notice_t72",
        "revision":0,"email":"ada@example.com","charge_at":"2026-10-01T09:00:00Z","jurisdiction":"US-CA",
        "template_data":{"plan_name":"Coffee Box","amount":{"minor":2900,"currency":"USD"}},"future_field":true}"#;

    fn with(field: &str, value: Value) -> String {
        let mut v: Value = serde_json::from_str(GOOD).unwrap();
        v[field] = value;
        v.to_string()
    }

    fn without(field: &str) -> String {
        let mut v: Value = serde_json::from_str(GOOD).unwrap();
        v.as_object_mut().unwrap().remove(field);
        v.to_string()
    }

    #[test]
    fn parses_contract_example_and_ignores_unknown_fields() {
        let job = Job::parse(GOOD).unwrap();
        assert_eq!(job.identity.subscription_id(), "sub_8812");
        assert_eq!(job.identity.revision(), 0);
        assert_eq!(job.jurisdiction.as_deref(), Some("US-CA"));
        assert_eq!(job.template_data["plan_name"], "Coffee Box");
        assert_eq!(Job::from_value(&job.to_value()).unwrap(), job);
    }

    #[test]
    fn revision_defaults_to_zero() {
        assert_eq!(Job::parse(&without("revision")).unwrap().identity.revision(), 0);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (without("subscription_id"), "subscription_id"),
            (without("email"), "email"),
            (without("charge_at"), "charge_at"),
            (with("revision", serde_json::json!(-1)), "revision"),
            (with("revision", serde_json::json!(1.5)), "revision"),
            (with("revision", serde_json::json!("1")), "revision"),
            (with("email", serde_json::json!("not-an-address")), "email"),
            (with("email", serde_json::json!("a@b.com\r\nBcc: x@y.z")), "email"),
            (with("charge_at", serde_json::json!("2026-10-01")), "charge_at"),
            (with("template_data", serde_json::json!([1])), "template_data"),
            (with("jurisdiction", serde_json::json!("US CA")), "jurisdiction"),
            (with("kind", serde_json::json!(7)), "kind"),
            (with("locale", serde_json::json!("en US")), "locale"),
            (with("locale", serde_json::json!("und")), "locale"),
            (with("locale", serde_json::json!(7)), "locale"),
            (with("time_zone", serde_json::json!("Europe/Atlantis")), "time_zone"),
            (with("time_zone", serde_json::json!("+02:00")), "time_zone"),
            (with("time_zone", serde_json::json!(2)), "time_zone"),
            (with("obligation", serde_json::json!(7)), "obligation"),
            (with("obligation", serde_json::json!("ca-annual-term")), "obligation"),
            (with("obligation", serde_json::json!("US-CA/")), "obligation"),
            (with("obligation", serde_json::json!("US-CA/a|b")), "obligation"),
            (with("obligation", serde_json::json!("US-CA/a/b")), "obligation"),
            (
                with("obligation", serde_json::json!(format!("US/{}", "r".repeat(MAX_OBLIGATION_LEN)))),
                "obligation",
            ),
            (with("email", serde_json::json!("victim@example.com,attacker@evil.example")), "email"),
            (with("email", serde_json::json!("Victim <victim@example.com>")), "email"),
            (with("email", serde_json::json!("a@-b.com")), "email"),
            (with("email", serde_json::json!("a\u{200B}@example.com")), "email"),
            (
                with("template_data", serde_json::json!({"plan_name": "x".repeat(MAX_TEMPLATE_DATA_BYTES)})),
                "template_data",
            ),
            (with("template_data", serde_json::json!({"amount": "12.34 CAD"})), "template_data.amount"),
            (
                with("template_data", serde_json::json!({"amount": {"minor": 1234, "currency": "cad"}})),
                "template_data.amount",
            ),
            (
                with("template_data", serde_json::json!({"amount": {"minor": 12.5, "currency": "CAD"}})),
                "template_data.amount",
            ),
            ("[]".to_string(), "body"),
            ("{not json".to_string(), "body"),
        ];
        for (body, field) in cases {
            let err = Job::parse(&body).unwrap_err();
            assert_eq!(err.field, field, "{body}");
            assert!(err.to_string().contains(field));
        }
    }

    #[test]
    fn a_withdraw_needs_only_the_identity_and_names_what_is_wrong() {
        let w = r#"{"action":"withdraw","subscription_id":"sub_8812","period_start":"2026-10-01",
            "kind":"renewal_notice_t72","revision":1,"reason":"cancelled"}"#;
        let Message::Withdraw(parsed) = Message::parse(w).unwrap() else { panic!("a withdraw") };
        assert_eq!(parsed.identity.revision(), 1);
        assert_eq!(parsed.reason.as_deref(), Some("cancelled"));
        assert_eq!(Withdrawal::from_value(&parsed.to_value()).unwrap(), parsed);
        // The same identity as the job it withdraws: the same key.
        let job = Job::parse(&with("revision", serde_json::json!(1))).unwrap();
        let secret = NoticeSecret::new(b"k".to_vec()).unwrap();
        assert_eq!(parsed.key(&secret), job.key(&secret));
        // A withdraw carrying a job's fields is still a withdraw.
        let Message::Withdraw(_) = Message::parse(&with("action", serde_json::json!("withdraw"))).unwrap()
        else {
            panic!("email and charge_at are ignored on a withdraw")
        };
        assert!(matches!(Message::parse(GOOD).unwrap(), Message::Send(_)));
        assert!(matches!(
            Message::parse(&with("action", serde_json::json!("send"))).unwrap(),
            Message::Send(_)
        ));

        let withdraw = |f: &str, v: Value| {
            let mut body: Value = serde_json::from_str(w).unwrap();
            body[f] = v;
            body.to_string()
        };
        let cases = [
            (withdraw("action", serde_json::json!("cancel")), "action"),
            (withdraw("action", serde_json::json!(1)), "action"),
            (with("action", serde_json::json!("withdrawn")), "action"),
            (withdraw("subscription_id", Value::Null), "subscription_id"),
            (withdraw("period_start", serde_json::json!("October")), "period_start"),
            (withdraw("kind", serde_json::json!("")), "kind"),
            (withdraw("revision", serde_json::json!(-1)), "revision"),
            (withdraw("reason", serde_json::json!("two\nlines")), "reason"),
            (withdraw("reason", serde_json::json!("x".repeat(MAX_WITHDRAW_REASON_CHARS + 1))), "reason"),
            (withdraw("reason", serde_json::json!(5)), "reason"),
        ];
        for (body, field) in cases {
            let err = Message::parse(&body).unwrap_err();
            assert_eq!(err.field, field, "{body}");
        }
        let err = Job::parse(w).unwrap_err();
        assert_eq!(err.field, "action", "a withdraw is never read as a job");
        assert!(Message::parse(&withdraw(
            "reason",
            serde_json::json!("x".repeat(MAX_WITHDRAW_REASON_CHARS))
        ))
        .is_ok());
    }

    #[test]
    fn digest_tracks_content_not_identity_order() {
        let a = Job::parse(GOOD).unwrap();
        let b = Job::parse(&with(
            "template_data",
            serde_json::json!({"amount":{"currency":"USD","minor":2900},"plan_name":"Coffee Box"}),
        ))
        .unwrap();
        assert_eq!(a.content_digest(), b.content_digest());
        let c =
            Job::parse(&with("template_data", serde_json::json!({"amount":{"minor":3900,"currency":"USD"}})))
                .unwrap();
        assert_ne!(a.content_digest(), c.content_digest());
    }

    #[test]
    fn locale_and_time_zone_are_validated_canonicalised_and_round_tripped() {
        let job = Job::parse(&with("locale", serde_json::json!("pt_br"))).unwrap();
        assert_eq!(job.locale.as_ref().map(Locale::as_str), Some("pt-BR"));
        assert_eq!(job.time_zone, None);
        let mut body: Value = serde_json::from_str(GOOD).unwrap();
        body["locale"] = "de-AT".into();
        body["time_zone"] = "Europe/Vienna".into();
        let job = Job::from_value(&body).unwrap();
        assert_eq!(job.time_zone.as_ref().map(TimeZone::as_str), Some("Europe/Vienna"));
        let again = job.to_value();
        assert_eq!(again["locale"], "de-AT");
        assert_eq!(again["time_zone"], "Europe/Vienna");
        assert_eq!(Job::from_value(&again).unwrap(), job);
        assert!(Job::parse(GOOD).unwrap().to_value().get("time_zone").is_none());
    }

    /// A job names the rule that owes it, round-trips it, and an old job without one stays valid
    /// with the same digest: the rule says why, not what the customer reads.
    #[test]
    fn obligation_is_optional_round_tripped_and_not_digested() {
        let plain = Job::parse(GOOD).unwrap();
        assert_eq!(plain.obligation, None);
        assert!(plain.to_value().get("obligation").is_none());
        let owed = Job::parse(&with("obligation", serde_json::json!("US-CA/ca-annual-term"))).unwrap();
        assert_eq!(owed.obligation.as_deref(), Some("US-CA/ca-annual-term"));
        assert_eq!(owed.to_value()["obligation"], "US-CA/ca-annual-term");
        assert_eq!(Job::from_value(&owed.to_value()).unwrap(), owed);
        assert_eq!(owed.content_digest(), plain.content_digest());
        assert!(Job::parse(&with("obligation", Value::Null)).unwrap().obligation.is_none());
    }

    /// Ledger rows written before `time_zone` existed hold these digests; a redelivery of the
    /// same job must still match them (else it dead-letters as a payload conflict). The values
    /// were computed with `content_digest` as it was before the field was added.
    #[test]
    fn digest_of_a_job_without_time_zone_is_unchanged() {
        // The digested content of those rows, string amount and all: a job body no longer
        // carries one (the money object only), but the digest of what the rows hold is pinned.
        let as_then = |body: &str| {
            let mut job = Job::parse(body).unwrap();
            job.template_data.insert("amount".into(), "29.00 USD".into());
            job
        };
        assert_eq!(
            as_then(GOOD).content_digest(),
            "9f5795aa670e1dc9b042d93d3a753088b2321be09d39a7c4710e440749cba67d"
        );
        let pt_br = as_then(&with("locale", serde_json::json!("pt-BR")));
        assert_eq!(
            pt_br.content_digest(),
            "de0f9858a55ea810373ae4f60bc4a4352374306cbfc47b8df28918ebc8e8b3ee"
        );
        let zoned = as_then(&with("time_zone", serde_json::json!("UTC")));
        assert_ne!(zoned.content_digest(), as_then(GOOD).content_digest());
    }
}
