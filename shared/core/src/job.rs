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
use crate::locale::{Cldr, Locale, Money, TimeZone};

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
    /// Parses and validates one message body; `cldr` checks its locale and amount
    /// (the texts crate's `Icu`).
    pub fn parse(body: &str, cldr: &dyn Cldr) -> Result<Self, InvalidJob> {
        let value: Value = serde_json::from_str(body)
            .map_err(|e| InvalidJob::new("body", format!("is not valid JSON: {e}")))?;
        Self::from_value(&value, cldr)
    }

    pub fn from_value(value: &Value, cldr: &dyn Cldr) -> Result<Self, InvalidJob> {
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
        let locale = optional_parsed(obj, "locale", |text| Locale::parse(text, cldr))?;
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
                check_amount(map, cldr)?;
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
    pub fn parse(body: &str, cldr: &dyn Cldr) -> Result<Self, InvalidJob> {
        let value: Value = serde_json::from_str(body)
            .map_err(|e| InvalidJob::new("body", format!("is not valid JSON: {e}")))?;
        Self::from_value(&value, cldr)
    }

    pub fn from_value(value: &Value, cldr: &dyn Cldr) -> Result<Self, InvalidJob> {
        match action(object(value)?)? {
            Action::Send => Job::from_value(value, cldr).map(Message::Send),
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
fn check_amount(template_data: &Map<String, Value>, cldr: &dyn Cldr) -> Result<(), InvalidJob> {
    match template_data.get("amount") {
        None | Some(Value::Null) => Ok(()),
        Some(amount) => Money::from_value(amount, cldr)
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
