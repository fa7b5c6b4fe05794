//! Stripe's event shapes → the core's billing facts ([`StripeMapping`]).
//!
//! | event | fact |
//! |---|---|
//! | `invoice.upcoming` (charged automatically) | a renewal: the subscription, the new period's start, `next_payment_attempt`, `amount_due` and `currency`, `customer_email`, the customer's first preferred locale, country (and state) |
//! | `invoice.upcoming` with `collection_method: send_invoice` | unhandled: Stripe e-mails that invoice itself and charges nothing automatically |
//! | `customer.subscription.updated` with `cancel_at_period_end: true`, or a `cancel_at` no later than the period's end | a cancellation of the renewal at the period's end |
//! | `customer.subscription.deleted` | a cancellation of the renewal at the period's end |
//! | `customer.subscription.created` with `status: trialing` | a trial's conversion: the subscription, its `customer` (the e-mail, locale and address read from Stripe's API), the charge at `trial_end`, the trial's length from `trial_start`, the amount per period of its items (Σ `unit_amount` × `quantity`), the first item's term and plan name |
//! | `customer.subscription.updated` with `status: trialing` (and no cancellation) | the same, planned again from the subscription as it stands; with `previous_attributes.trial_end`, the notice for the old end is withdrawn too |
//! | `customer.subscription.updated` with `previous_attributes.trial_end`, no longer trialing | the trial ended early: the notice for the old end is withdrawn |
//! | `customer.subscription.created` not trialing, or ending with its trial (`cancel_at_period_end`) | unhandled |
//! | `customer.subscription.updated` whose `previous_attributes` show other `items` (or, before prices, `plan`/`quantity`) with a different amount per period (Σ `unit_amount` × `quantity`) | a price change: the subscription, its `customer` (the e-mail, locale and address are read from Stripe's API, [`crate::api`]), the new amount and currency, from the period's end (`current_period_end`, on the items from API 2025-03-31) |
//! | `customer.subscription.updated` with the same amount per period (another price id, same amount), or no price, plan or quantity change | unhandled |
//! | anything else | unhandled |
//!
//! The term (for the policy's obligations) is the subscription line's price `recurring` interval
//! and count, or its `plan`'s; API 2025-03-31 and later no longer put the price on the line, and
//! there the line's period gives it when it spans whole calendar years, months, weeks or days.
//!
//! Two API-version differences are read both ways: the invoice's subscription moved from
//! `invoice.subscription` to `invoice.parent.subscription_details.subscription` (API 2025-03-31),
//! and the subscription's `current_period_end` moved onto its items
//! (`items.data[].current_period_end`) in the same release.
//!
//! Which instant opens the new period: the subscription line's `period.start` (the period the
//! upcoming charge pays for, billed in advance), else the invoice's `period_end` (the current
//! period's end is the next one's start). Proration lines are never used: their periods are
//! fragments of the current period.

use chrono::{DateTime, Months, Utc};
use notice_ledger::intake::{
    BillingFact, BillingMapping, Cancellation, PriceChange, Refused, Renewal, Trial, TrialConversion,
};
use notice_ledger::policy::{Occasion, Term};
use serde_json::Value;

/// The Stripe mapping (stateless).
#[derive(Clone, Copy, Debug, Default)]
pub struct StripeMapping;

impl BillingMapping for StripeMapping {
    fn source(&self) -> &'static str {
        "stripe"
    }

    fn event_id<'a>(&self, event: &'a Value) -> Option<&'a str> {
        event.get("id").and_then(Value::as_str)
    }

    fn event_type<'a>(&self, event: &'a Value) -> Option<&'a str> {
        event.get("type").and_then(Value::as_str)
    }

    fn fact(&self, event: &Value) -> Result<BillingFact, Refused> {
        let event_type = self.event_type(event).ok_or_else(|| Refused::new("event", "type", "is missing"))?;
        let handled = matches!(
            event_type,
            "invoice.upcoming"
                | "customer.subscription.created"
                | "customer.subscription.updated"
                | "customer.subscription.deleted"
        );
        if !handled {
            return Ok(BillingFact::Unhandled {
                event_type: event_type.to_owned(),
                reason: format!("{event_type} is not an event the intake maps"),
            });
        }
        let object = event
            .pointer("/data/object")
            .filter(|o| o.is_object())
            .ok_or_else(|| Refused::new(event_type, "data.object", "is missing"))?;
        match event_type {
            "invoice.upcoming" => upcoming(event_type, object),
            "customer.subscription.deleted" => {
                cancellation(event_type, object, "stripe customer.subscription.deleted")
            }
            "customer.subscription.created" => created(event_type, object),
            _ => updated(event_type, object, event.pointer("/data/previous_attributes")),
        }
    }
}

fn upcoming(event_type: &str, invoice: &Value) -> Result<BillingFact, Refused> {
    let refused = |field: &str, reason: &str| Refused::new(event_type, field, reason);
    if invoice.get("collection_method").and_then(Value::as_str) == Some("send_invoice") {
        return Ok(BillingFact::Unhandled {
            event_type: event_type.to_owned(),
            reason: "collection_method is send_invoice: Stripe e-mails the invoice and charges nothing automatically"
                .into(),
        });
    }
    let subscription_id = id_at(invoice, "/parent/subscription_details/subscription")
        .or_else(|| id_at(invoice, "/subscription"))
        .ok_or_else(|| {
            refused(
                "subscription",
                "is missing: neither `parent.subscription_details.subscription` (API 2025-03-31 and later) \
                 nor `subscription` (earlier versions) names one — not a subscription's invoice",
            )
        })?;
    let line = subscription_line(invoice);
    let period_start = line
        .and_then(|l| l.pointer("/period/start"))
        .and_then(Value::as_i64)
        .or_else(|| invoice.get("period_end").and_then(Value::as_i64))
        .ok_or_else(|| refused("period_end", "is missing, and no subscription line has a `period.start`"))?;
    let charge_at = invoice.get("next_payment_attempt").and_then(Value::as_i64).ok_or_else(|| {
        refused(
            "next_payment_attempt",
            "is missing or null: Stripe will not attempt the charge automatically, so there is no charge date to announce",
        )
    })?;
    let amount_minor = invoice
        .get("amount_due")
        .and_then(Value::as_i64)
        .ok_or_else(|| refused("amount_due", "is missing or not an integer"))?;
    let currency = invoice
        .get("currency")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| refused("currency", "is missing"))?
        .to_ascii_uppercase();
    let email = invoice
        .get("customer_email")
        .and_then(Value::as_str)
        .filter(|e| !e.trim().is_empty())
        .ok_or_else(|| {
            refused("customer_email", "is missing or null: the customer has no e-mail address on file")
        })?
        .to_owned();
    let locale = invoice
        .pointer("/customer_preferred_locales/0")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
        .map(str::to_owned);
    let plan_name = line.and_then(|l| {
        ["/price/nickname", "/plan/nickname", "/description"]
            .iter()
            .find_map(|p| l.pointer(p).and_then(Value::as_str).filter(|s| !s.trim().is_empty()))
            .map(str::to_owned)
    });
    Ok(BillingFact::Renewal(Renewal {
        // An upcoming invoice does not say whether a trial ends with it (the subscription does).
        occasion: Occasion::Renewal,
        term: line.and_then(term),
        trial_days: None,
        started_at: None,
        subscription_id,
        period_start_at: instant(event_type, "period.start", period_start)?,
        charge_at: instant(event_type, "next_payment_attempt", charge_at)?,
        amount_minor,
        currency,
        email,
        locale,
        jurisdiction: jurisdiction(invoice.get("customer_address")),
        plan_name,
    }))
}

/// Why the subscription ends with its current period, when it does: `cancel_at_period_end`, or a
/// `cancel_at` no later than the period's end.
fn ends_with_period(subscription: &Value) -> Option<&'static str> {
    if subscription.get("cancel_at_period_end").and_then(Value::as_bool) == Some(true) {
        return Some("cancel_at_period_end");
    }
    let cancel_at = subscription.get("cancel_at").and_then(Value::as_i64)?;
    (cancel_at <= period_end(subscription)?).then_some("cancel_at before the renewal")
}

fn updated(event_type: &str, subscription: &Value, previous: Option<&Value>) -> Result<BillingFact, Refused> {
    if let Some(why) = ends_with_period(subscription) {
        return cancellation(
            event_type,
            subscription,
            &format!("stripe customer.subscription.updated: {why}"),
        );
    }
    let moved_end = previous.and_then(|p| p.get("trial_end"));
    if is_trialing(subscription) || moved_end.is_some() {
        // A trial's amount, term or end changed (or nothing the notice states): its conversion
        // is planned again from the subscription as it stands — the same notice, or a corrected one.
        let stands = is_trialing(subscription).then(|| trial(event_type, subscription)).transpose()?;
        return Ok(BillingFact::TrialConversion(TrialConversion {
            subscription_id: subscription_id(event_type, subscription)?,
            trial: stands,
            previous_end: match moved_end.and_then(Value::as_i64) {
                Some(secs) => Some(instant(event_type, "previous_attributes.trial_end", secs)?),
                None => None,
            },
        }));
    }
    if let Some(previous) =
        previous.filter(|p| ["items", "plan", "quantity"].iter().any(|f| p.get(f).is_some()))
    {
        return price_change(event_type, subscription, previous);
    }
    Ok(BillingFact::Unhandled {
        event_type: event_type.to_owned(),
        reason: "no cancellation at the period's end and no change of price or quantity".into(),
    })
}

/// A new subscription: in a free trial (`status: trialing` with a `trial_end`), the conversion's
/// notice is planned now, ahead of its window; any other new subscription states nothing to announce.
fn created(event_type: &str, subscription: &Value) -> Result<BillingFact, Refused> {
    if !is_trialing(subscription) {
        return Ok(BillingFact::Unhandled {
            event_type: event_type.to_owned(),
            reason:
                "the subscription is not in a trial: its renewals are announced from their upcoming invoices"
                    .into(),
        });
    }
    if let Some(why) = ends_with_period(subscription) {
        return Ok(BillingFact::Unhandled {
            event_type: event_type.to_owned(),
            reason: format!("the subscription ends with its trial ({why}): no charge to announce"),
        });
    }
    Ok(BillingFact::TrialConversion(TrialConversion {
        subscription_id: subscription_id(event_type, subscription)?,
        trial: Some(trial(event_type, subscription)?),
        previous_end: None,
    }))
}

/// Whether the subscription is in a trial: `status: trialing`.
pub(crate) fn is_trialing(subscription: &Value) -> bool {
    subscription.get("status").and_then(Value::as_str) == Some("trialing")
}

/// The trial of a subscription in one: its `trial_start` and `trial_end`, the amount per period
/// charged from its end (Σ `unit_amount` × `quantity` of `items.data`, in their one currency), the
/// first item's term and plan name, the `customer` whose facts the notice needs, `start_date`.
/// What cannot be read is refused, naming the field — never a guessed amount or date.
pub fn trial(event_type: &str, subscription: &Value) -> Result<Trial, Refused> {
    let refused = |field: &str, reason: String| Refused::new(event_type, field, reason);
    let at = |field: &str| -> Result<_, Refused> {
        let secs = subscription.get(field).and_then(Value::as_i64).ok_or_else(|| {
            refused(
                field,
                "is missing or null: the subscription is trialing, but its trial has no such date".into(),
            )
        })?;
        instant(event_type, field, secs)
    };
    let (starts_at, ends_at) = (at("trial_start")?, at("trial_end")?);
    let items = subscription
        .pointer("/items/data")
        .and_then(Value::as_array)
        .filter(|items| !items.is_empty())
        .ok_or_else(|| refused("items.data", "is missing or empty: no amount to announce".into()))?;
    let (amount_minor, currency) = amount(items, None).map_err(|(f, r)| refused(&f, r))?;
    let customer_id =
        id_at(subscription, "/customer").ok_or_else(|| refused("customer", "is missing".into()))?;
    let first = items.first();
    Ok(Trial {
        subscription_id: subscription_id(event_type, subscription)?,
        customer_id,
        starts_at,
        ends_at,
        amount_minor,
        currency,
        plan_name: first.and_then(nickname),
        term: first.and_then(term),
        started_at: subscription
            .get("start_date")
            .and_then(Value::as_i64)
            .and_then(|s| DateTime::from_timestamp(s, 0)),
    })
}

/// A subscription item's plan name: its price's (or, before prices, its plan's) `nickname`.
fn nickname(item: &Value) -> Option<String> {
    ["/price/nickname", "/plan/nickname"]
        .iter()
        .find_map(|p| item.pointer(p).and_then(Value::as_str).filter(|s| !s.trim().is_empty()))
        .map(str::to_owned)
}

fn subscription_id(event_type: &str, subscription: &Value) -> Result<String, Refused> {
    subscription
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| Refused::new(event_type, "id", "is missing"))
}

/// A subscription whose items' price or quantity changed (`previous_attributes` holds the old
/// `items`, or — before prices — the old `plan` and `quantity`): the new amount per period from
/// the next renewal (the current period's end). The customer's e-mail, language and address are
/// not in the event; the planner reads them from Stripe's API by `customer`.
fn price_change(event_type: &str, subscription: &Value, previous: &Value) -> Result<BillingFact, Refused> {
    let refused = |field: &str, reason: String| Refused::new(event_type, field, reason);
    let items = subscription
        .pointer("/items/data")
        .and_then(Value::as_array)
        .filter(|items| !items.is_empty())
        .ok_or_else(|| refused("items.data", "is missing or empty".into()))?;
    let (amount_minor, currency) = amount(items, None).map_err(|(f, r)| refused(&f, r))?;
    let previous_minor = match previous.pointer("/items/data").and_then(Value::as_array) {
        Some(old_items) => amount(old_items, None),
        // Before prices: the subscription's old `plan` and `quantity` over its one item.
        None => amount(items, Some(previous)),
    }
    .map_err(|(f, r)| refused(&format!("previous_attributes.{f}"), r))?
    .0;
    if previous_minor == amount_minor {
        return Ok(BillingFact::Unhandled {
            event_type: event_type.to_owned(),
            reason: format!("the amount per period is unchanged ({amount_minor} minor units)"),
        });
    }
    let subscription_id = subscription
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| refused("id", "is missing".into()))?
        .to_owned();
    let customer_id =
        id_at(subscription, "/customer").ok_or_else(|| refused("customer", "is missing".into()))?;
    let end = period_end(subscription).ok_or_else(|| {
        refused(
            "current_period_end",
            "is missing: neither the subscription (API versions before 2025-03-31) nor its items \
             (`items.data[].current_period_end`) say when the new price first applies"
                .into(),
        )
    })?;
    let first = items.first();
    let plan_name = first.and_then(nickname);
    let starts = instant(event_type, "current_period_end", end)?;
    Ok(BillingFact::PriceChange(PriceChange {
        subscription_id,
        customer_id,
        period_start_at: starts,
        charge_at: starts,
        previous_minor,
        amount_minor,
        currency,
        plan_name,
        term: first.and_then(term),
        // The event states only the amount just before this change, not the one the current
        // period was billed at: the planner reads that from the subscription's latest invoice.
        in_force_minor: None,
    }))
}

/// The amount per period of `items`: each item's `price.unit_amount` (or, before prices, its
/// `plan.amount`) times its `quantity` (1 when absent), in the items' one currency, upper case.
/// `old`: the previous attributes of a subscription from before prices, whose `plan` and
/// `quantity` replace the (one) item's. Err: the field (relative to the item list) and why — a
/// tiered or metered price has no `unit_amount`, and no amount can be announced for it.
pub(crate) fn amount(items: &[Value], old: Option<&Value>) -> Result<(i64, String), (String, String)> {
    let mut total: i64 = 0;
    let mut currency: Option<String> = None;
    for (i, item) in items.iter().enumerate() {
        let price = old
            .and_then(|o| o.get("plan"))
            .or_else(|| item.get("price"))
            .or_else(|| item.get("plan"))
            .ok_or_else(|| (format!("items.data[{i}].price"), "is missing".to_owned()))?;
        let unit =
            price.get("unit_amount").or_else(|| price.get("amount")).and_then(Value::as_i64).ok_or_else(
                || {
                    (
                        format!("items.data[{i}].price.unit_amount"),
                        "is missing or null (a tiered or metered price): no amount per period to announce"
                            .to_owned(),
                    )
                },
            )?;
        let quantity = old
            .and_then(|o| o.get("quantity"))
            .or_else(|| item.get("quantity"))
            .and_then(Value::as_i64)
            .unwrap_or(1);
        total = unit
            .checked_mul(quantity)
            .and_then(|a| total.checked_add(a))
            .ok_or_else(|| (format!("items.data[{i}].quantity"), "overflows the amount".to_owned()))?;
        let code = price
            .get("currency")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| (format!("items.data[{i}].price.currency"), "is missing".to_owned()))?
            .to_ascii_uppercase();
        match &currency {
            Some(c) if *c != code => {
                return Err((format!("items.data[{i}].price.currency"), format!("{code} beside {c}")))
            }
            _ => currency = Some(code),
        }
    }
    let currency = currency.ok_or_else(|| ("items.data".to_owned(), "is empty".to_owned()))?;
    Ok((total, currency))
}

fn cancellation(event_type: &str, subscription: &Value, reason: &str) -> Result<BillingFact, Refused> {
    let subscription_id = subscription
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Refused::new(event_type, "id", "is missing"))?
        .to_owned();
    let end = period_end(subscription).ok_or_else(|| {
        Refused::new(
            event_type,
            "current_period_end",
            "is missing: neither the subscription (API versions before 2025-03-31) nor its items \
             (`items.data[].current_period_end`) say when the period ends",
        )
    })?;
    Ok(BillingFact::Cancellation(Cancellation {
        subscription_id,
        period_start_at: instant(event_type, "current_period_end", end)?,
        reason: reason.to_owned(),
        // The first item's price (or plan): an anniversary reminder planned ahead is withdrawn
        // for the periods after the period's end (its start: only the crossing ones, when weekly).
        term: subscription.pointer("/items/data/0").and_then(term),
        started_at: subscription
            .get("start_date")
            .and_then(Value::as_i64)
            .and_then(|s| DateTime::from_timestamp(s, 0)),
    }))
}

/// When the subscription's current period ends (the renewal's instant): the subscription's own
/// field, else the latest of its items' (API 2025-03-31 moved it there).
pub(crate) fn period_end(subscription: &Value) -> Option<i64> {
    subscription.get("current_period_end").and_then(Value::as_i64).or_else(|| {
        subscription
            .pointer("/items/data")
            .and_then(Value::as_array)?
            .iter()
            .filter_map(|item| item.get("current_period_end").and_then(Value::as_i64))
            .max()
    })
}

/// The invoice's line for the subscription itself (not a proration, not a one-off item).
fn subscription_line(invoice: &Value) -> Option<&Value> {
    invoice.pointer("/lines/data").and_then(Value::as_array)?.iter().find(|line| is_subscription_line(line))
}

/// Whether an invoice line bills a subscription item for its period (not a proration, not a
/// one-off item): `type: subscription` before API 2025-03-31, `parent.type:
/// subscription_item_details` from it.
pub(crate) fn is_subscription_line(line: &Value) -> bool {
    let old_shape = line.get("type").and_then(Value::as_str) == Some("subscription")
        && line.get("proration").and_then(Value::as_bool) != Some(true);
    let new_shape = line.pointer("/parent/type").and_then(Value::as_str) == Some("subscription_item_details")
        && line.pointer("/parent/subscription_item_details/proration").and_then(Value::as_bool) != Some(true);
    old_shape || new_shape
}

/// The term the subscription line pays for: its price's `recurring` (or, before prices, its
/// `plan`) interval and count; where the line no longer carries the price (API 2025-03-31 and
/// later), its period, when it spans a whole number of calendar years, months, weeks or days.
/// `None` otherwise: a rule that needs the term then refuses the event, naming it.
pub(crate) fn term(line: &Value) -> Option<Term> {
    for pointer in ["/price/recurring", "/plan"] {
        if let Some(interval) = line.pointer(pointer).and_then(|r| r.get("interval")).and_then(Value::as_str)
        {
            let count = line.pointer(pointer).and_then(|r| r.get("interval_count")).and_then(Value::as_u64);
            return Term::parse(interval, count.unwrap_or(1));
        }
    }
    let start = line.pointer("/period/start").and_then(Value::as_i64)?;
    let end = line.pointer("/period/end").and_then(Value::as_i64)?;
    period_term(DateTime::from_timestamp(start, 0)?, DateTime::from_timestamp(end, 0)?)
}

/// The whole calendar term from `start` to `end`, in the largest unit that spans it exactly.
fn period_term(start: DateTime<Utc>, end: DateTime<Utc>) -> Option<Term> {
    let months = |n: u32| start.checked_add_months(Months::new(n));
    if let Some(n) = (1..=60).find(|n| months(n * 12) == Some(end)) {
        return Term::parse("year", u64::from(n));
    }
    if let Some(n) = (1..=60).find(|n| months(*n) == Some(end)) {
        return Term::parse("month", u64::from(n));
    }
    let seconds = end.signed_duration_since(start).num_seconds();
    const DAY: i64 = 86_400;
    if seconds <= 0 || seconds % DAY != 0 {
        return None;
    }
    let days = u64::try_from(seconds / DAY).ok()?;
    if days % 7 == 0 {
        Term::parse("week", days / 7)
    } else {
        Term::parse("day", days)
    }
}

/// An id at `pointer`: a string, or an expanded object's `id`.
fn id_at(object: &Value, pointer: &str) -> Option<String> {
    match object.pointer(pointer)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Object(o) => o.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned),
        _ => None,
    }
}

fn instant(event_type: &str, field: &str, secs: i64) -> Result<DateTime<Utc>, Refused> {
    DateTime::from_timestamp(secs, 0)
        .ok_or_else(|| Refused::new(event_type, field, format!("{secs} is not a Unix timestamp")))
}

/// `US-CA` from a customer address with country `US` and state `CA`; the country alone when the
/// state is not an ISO 3166-2 subdivision code (Stripe keeps what was typed); none without a
/// country code.
pub(crate) fn jurisdiction(address: Option<&Value>) -> Option<String> {
    let address = address?;
    let country = address.get("country").and_then(Value::as_str).filter(|c| !c.is_empty())?;
    let state = address.get("state").and_then(Value::as_str).filter(|s| !s.is_empty());
    if let Some(state) = state {
        if let Ok(j) = notice_ledger::jurisdiction::normalise(&format!("{country}-{state}")) {
            return Some(j);
        }
    }
    notice_ledger::jurisdiction::normalise(country).ok()
}
