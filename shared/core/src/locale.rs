//! The customer's language, time zone and money as a job carries them: validated codes, and the
//! port ([`Cldr`]) for the two checks only CLDR can answer.
//!
//! A job's locale is checked and put in canonical case by a BCP 47 parser, and an amount is
//! refused when CLDR would show it rounded; both need ICU4X, which this crate does not link (a
//! reconciler or a reporter renders nothing). So the job's parse asks a [`Cldr`]: the texts crate (`shared/texts`)
//! implements it over ICU4X (its `Icu`), and the entry points that parse jobs hand it in. Writing
//! a date or an amount in the customer's language is the texts crate's too.
//!
//! Zones are checked here: the IANA database bundled into `jiff` (`tzdb-bundle-always`, never the
//! host's) answers them, and the intake's planner reads its billing zone from it as well.

use serde_json::Value;

/// Longest accepted locale tag. Real tags are short (`zh-Hant-TW` is 10); the bound keeps a
/// producer's garbage out of logs and digests.
pub const MAX_LOCALE_LEN: usize = 32;
/// Longest accepted time-zone name (the longest IANA name, `America/Argentina/ComodRivadavia`,
/// is 32).
pub const MAX_TIME_ZONE_LEN: usize = 64;

/// What only CLDR knows, asked when a job is parsed: a language tag's canonical form, and
/// whether an amount is shown exactly. The texts crate's `Icu` answers from ICU4X's compiled data.
pub trait Cldr: Send + Sync {
    /// The canonical form of a BCP 47 tag (`de-at` → `de-AT`, `pt_BR` → `pt-BR`), or why it is
    /// not one. Called only with `1..=`[`MAX_LOCALE_LEN`] bytes.
    fn canonical_locale(&self, text: &str) -> Result<String, String>;

    /// Whether CLDR's display precision for `money`'s currency (the one a formatter rounds to)
    /// keeps the amount exact.
    fn shown_exactly(&self, money: &Money) -> bool;
}

/// A BCP 47 language tag, validated and in canonical case (`de-at` → `de-AT`, `ZH-hant-tw` →
/// `zh-Hant-TW`).
///
/// Underscores are accepted and read as hyphens (`pt_BR` → `pt-BR`): the job contract accepted
/// `[A-Za-z0-9_-]` before this type existed and producers built on POSIX/Java locales send
/// them; refusing them now would dead-letter jobs that were valid yesterday. The canonical form
/// is what is stored, digested and sent back out.
///
/// Only the canonical text is kept (24 bytes, like the `String` it replaced in `Job`); the ICU
/// form is parsed again where it is needed (the texts crate), which costs nanoseconds against a
/// formatter's microseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locale {
    tag: String,
}

impl Locale {
    /// Parses a tag through `cldr`; the error says what is wrong with it.
    pub fn parse(text: &str, cldr: &dyn Cldr) -> Result<Self, String> {
        if text.is_empty() || text.len() > MAX_LOCALE_LEN {
            return Err(format!("must be a BCP 47 language tag of 1 to {MAX_LOCALE_LEN} characters"));
        }
        cldr.canonical_locale(text).map(|tag| Self { tag })
    }

    /// The canonical tag, e.g. `pt-BR`.
    pub fn as_str(&self) -> &str {
        &self.tag
    }

    /// The language subtag alone, e.g. `pt`.
    pub fn language(&self) -> &str {
        // Canonical tags start with the language subtag.
        self.tag.split('-').next().unwrap_or(&self.tag)
    }
}

impl std::fmt::Display for Locale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.tag)
    }
}

/// An IANA time-zone name (`Europe/Berlin`, `America/New_York`, `UTC`), checked against the
/// tz database bundled into the binary (so it works on hosts without `/usr/share/zoneinfo`).
/// Lookup ignores case and keeps the database's spelling (`europe/berlin` → `Europe/Berlin`);
/// backward-compatible links (`US/Eastern`) are accepted. Fixed offsets (`+02:00`) are not: a
/// customer lives in a zone, and an offset is wrong half the year.
#[derive(Clone, Debug)]
pub struct TimeZone {
    /// Always a zone from the database, so it has an IANA name.
    tz: jiff::tz::TimeZone,
}

impl PartialEq for TimeZone {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for TimeZone {}

impl TimeZone {
    /// The zone dates are shown in when a job names none.
    pub fn utc() -> Self {
        Self { tz: jiff::tz::TimeZone::UTC }
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() || text.len() > MAX_TIME_ZONE_LEN {
            return Err(format!("must be an IANA time-zone name of 1 to {MAX_TIME_ZONE_LEN} characters"));
        }
        let unknown = || format!("`{text}` is not an IANA time-zone name; e.g. `Europe/Berlin`, `UTC`");
        let tz = jiff::tz::db().get(text).map_err(|_| unknown())?;
        tz.iana_name().ok_or_else(unknown)?;
        Ok(Self { tz })
    }

    pub fn as_str(&self) -> &str {
        self.tz.iana_name().unwrap_or("UTC")
    }

    /// The zone itself, for the calendar day an instant falls on there.
    pub fn tz(&self) -> &jiff::tz::TimeZone {
        &self.tz
    }
}

impl std::fmt::Display for TimeZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An amount of money in minor units of an ISO 4217 currency (`{"minor": 2900, "currency":
/// "EUR"}` is €29.00). Integers end to end: a float never touches a price.
///
/// Only what a notice can state exactly is a `Money`:
/// - `minor` is an integer ≥ 0. A reminder announces a charge; a negative amount is a credit or
///   a producer bug, and is refused rather than printed as `-€29.00` in a legal notice.
/// - `currency` is an active ISO 4217 code, upper case, with a minor unit (`XAU`, `XXX` have
///   none). Minor units are ISO 4217's (EUR 2, JPY 0, BHD 3), as payment processors use them.
/// - CLDR writes a few currencies with fewer digits than ISO 4217 has (ALL, HUF, IQD, LAK: none
///   at all); an amount CLDR would round (ALL 123.50) is refused, never shown rounded
///   ([`Cldr::shown_exactly`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Money {
    minor: i64,
    currency: iso_currency::Currency,
}

impl Money {
    pub fn from_value(value: &Value, cldr: &dyn Cldr) -> Result<Self, String> {
        let obj =
            value.as_object().ok_or("must be an object like {\"minor\": 2900, \"currency\": \"EUR\"}")?;
        let minor = match obj.get("minor") {
            Some(Value::Number(n)) => {
                n.as_i64().ok_or("`minor` must be an integer count of minor units (2900 for 29.00)")?
            }
            None | Some(Value::Null) => return Err("`minor` is required".into()),
            Some(_) => return Err("`minor` must be an integer count of minor units (2900 for 29.00)".into()),
        };
        if minor < 0 {
            return Err(format!("`minor` is {minor}: a notice states a charge, never a negative amount"));
        }
        let code = match obj.get("currency") {
            Some(Value::String(s)) => s.as_str(),
            None | Some(Value::Null) => return Err("`currency` is required".into()),
            Some(_) => return Err("`currency` must be a string".into()),
        };
        if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(format!("`currency` `{code}` must be an ISO 4217 code in upper case, e.g. `EUR`"));
        }
        let currency = iso_currency::Currency::from_code(code)
            .ok_or_else(|| format!("`currency` `{code}` is not an ISO 4217 currency code"))?;
        if currency.exponent().is_none() {
            return Err(format!("`currency` `{code}` has no minor unit in ISO 4217"));
        }
        let money = Self { minor, currency };
        if !cldr.shown_exactly(&money) {
            return Err(format!(
                "{minor} minor units of {code}: CLDR writes {code} with fewer decimals, so the amount would be shown rounded"
            ));
        }
        Ok(money)
    }

    pub fn minor(&self) -> i64 {
        self.minor
    }

    /// The ISO 4217 code, e.g. `EUR`.
    pub fn currency(&self) -> &'static str {
        self.currency.code()
    }

    /// Decimal digits of one major unit (ISO 4217): EUR 2, JPY 0, BHD 3.
    pub fn minor_digits(&self) -> u8 {
        self.currency.exponent().unwrap_or(0) as u8
    }
}

/// A [`Cldr`] for the core's own unit tests, which cannot link ICU4X: tags of the simple form
/// `ll[-Ssss][-RR]` (any case, `_` read as `-`) in canonical case, `und` and anything else
/// refused; every amount shown exactly. What ICU itself answers is tested where it is linked
/// (`shared/core/tests/job.rs`, `shared/texts`).
#[cfg(test)]
pub(crate) struct SimpleTags;

#[cfg(test)]
impl Cldr for SimpleTags {
    fn canonical_locale(&self, text: &str) -> Result<String, String> {
        let bad = || format!("`{text}` is not a BCP 47 language tag; e.g. `en-US`, `de`");
        let text = text.replace('_', "-");
        let mut parts = text.split('-');
        let language = parts.next().filter(|l| (2..=3).contains(&l.len())).ok_or_else(bad)?;
        if !language.bytes().all(|b| b.is_ascii_alphabetic()) || language.eq_ignore_ascii_case("und") {
            return Err(bad());
        }
        let mut tag = language.to_ascii_lowercase();
        for part in parts {
            match part.len() {
                4 if part.bytes().all(|b| b.is_ascii_alphabetic()) && !tag.contains('-') => {
                    tag.push('-');
                    tag.push_str(&part[..1].to_ascii_uppercase());
                    tag.push_str(&part[1..].to_ascii_lowercase());
                }
                2 if part.bytes().all(|b| b.is_ascii_alphabetic()) => {
                    tag.push('-');
                    tag.push_str(&part.to_ascii_uppercase());
                }
                _ => return Err(bad()),
            }
        }
        Ok(tag)
    }

    fn shown_exactly(&self, _: &Money) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn money(minor: i64, currency: &str) -> Money {
        Money::from_value(&serde_json::json!({"minor": minor, "currency": currency}), &SimpleTags).unwrap()
    }

    #[test]
    fn zones_are_iana_names_from_the_compiled_database() {
        assert_eq!(TimeZone::parse("Europe/Berlin").unwrap().as_str(), "Europe/Berlin");
        assert_eq!(TimeZone::parse("UTC").unwrap(), TimeZone::utc());
        assert!(TimeZone::parse("US/Eastern").is_ok());
        assert_eq!(TimeZone::parse("europe/berlin").unwrap().as_str(), "Europe/Berlin");
        for bad in ["", "Europe/Atlantis", "+02:00", "CEST+2", &"A/".repeat(40)] {
            assert!(TimeZone::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn minor_units_follow_iso_4217() {
        assert_eq!(money(2900, "EUR").minor_digits(), 2);
        assert_eq!(money(2900, "JPY").minor_digits(), 0);
        assert_eq!(money(2900, "BHD").minor_digits(), 3);
        assert_eq!(money(2900, "EUR").currency(), "EUR");
        assert_eq!(money(2900, "EUR").minor(), 2900);
    }
}
