//! The customer's language and time zone: validated codes, and dates and money written the way
//! the customer reads them.
//!
//! Everything locale-sensitive comes from CLDR through ICU4X with compiled-in data
//! (`icu_datetime` for dates, `icu_experimental`'s currency formatter for money), and every zone
//! from the IANA database bundled into `jiff` (`tzdb-bundle-always`, never the host's): a Lambda
//! image may have no `/usr/share/zoneinfo`, and a notice must not change its date with the host
//! it renders on. (`chrono-tz` compiles every zone into code: ~1.9 MB of binary against jiff's
//! ~0.45 MB, measured for issue 35.)
//! Nothing here is hand-written per language, so a new locale needs no code.
//!
//! Formatting never fails: a formatter that cannot be built (it cannot, with compiled data and a
//! validated input, but the ICU API says it may) falls back to ISO 8601 dates and `29.00 EUR`,
//! never to a blank in a legal notice.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use chrono::{DateTime, Utc};
use icu_calendar::{cal::Gregorian, Date};
use icu_datetime::{fieldsets::YMD, FixedCalendarDateTimeFormatter};
use icu_experimental::dimension::currency::{formatter::CurrencyFormatter, CurrencyType};
use icu_experimental::dimension::provider::currency::fractions::{CurrencyFractionsV1, Rounding};
use icu_provider::prelude::{DataPayload, DataProvider};
use serde_json::Value;

/// Longest accepted locale tag. Real tags are short (`zh-Hant-TW` is 10); the bound keeps a
/// producer's garbage out of logs and digests.
pub const MAX_LOCALE_LEN: usize = 32;
/// Longest accepted time-zone name (the longest IANA name, `America/Argentina/ComodRivadavia`,
/// is 32).
pub const MAX_TIME_ZONE_LEN: usize = 64;

/// A BCP 47 language tag, validated and in canonical case (`de-at` → `de-AT`, `ZH-hant-tw` →
/// `zh-Hant-TW`).
///
/// Underscores are accepted and read as hyphens (`pt_BR` → `pt-BR`): the job contract accepted
/// `[A-Za-z0-9_-]` before this type existed and producers built on POSIX/Java locales send
/// them; refusing them now would dead-letter jobs that were valid yesterday. The canonical form
/// is what is stored, digested and sent back out.
///
/// Only the canonical text is kept (24 bytes, like the `String` it replaced in `Job`); the ICU
/// form is parsed again where it is needed, which costs nanoseconds against a formatter's
/// microseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locale {
    tag: String,
}

impl Locale {
    /// Parses a tag; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() || text.len() > MAX_LOCALE_LEN {
            return Err(format!("must be a BCP 47 language tag of 1 to {MAX_LOCALE_LEN} characters"));
        }
        let id = icu_locale_core::Locale::try_from_str(&text.replace('_', "-"))
            .map_err(|e| format!("`{text}` is not a BCP 47 language tag ({e}); e.g. `en-US`, `de`"))?;
        if id.id.language.is_unknown() {
            return Err(format!("`{text}` names no language (`und`); e.g. `en-US`, `de`"));
        }
        Ok(Self { tag: id.to_string() })
    }

    /// The ICU form. `tag` was produced by ICU from a parsed locale, so it parses again; `und`
    /// (root data) stands in if that ever fails rather than a panic in a Lambda.
    fn icu(&self) -> icu_locale_core::Locale {
        icu_locale_core::Locale::try_from_str(&self.tag).unwrap_or(icu_locale_core::Locale::UNKNOWN)
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

    /// Tags to look templates up by, most specific first: `de-AT` → `de-AT`, `de`;
    /// `zh-Hant-TW` → `zh-Hant-TW`, `zh-Hant`, `zh`. Each step drops the last subtag of the
    /// language identifier (variants, then region, then script); Unicode extensions (`-u-…`)
    /// shape formatting, never which template is chosen, so they are not in the chain. The
    /// caller appends its bundle's default language. No likely-subtags inference: `zh-TW` falls
    /// back to `zh`, not to `zh-Hant` — ship a `zh-TW` template if the difference matters.
    pub fn fallback_chain(&self) -> Vec<String> {
        let mut id = self.icu().id;
        let mut chain = vec![id.to_string()];
        let mut push = |id: &icu_locale_core::LanguageIdentifier| {
            let tag = id.to_string();
            if chain.last() != Some(&tag) {
                chain.push(tag);
            }
        };
        id.variants.clear();
        push(&id);
        id.region = None;
        push(&id);
        id.script = None;
        push(&id);
        chain
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
}

impl std::fmt::Display for TimeZone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The long date of `at` as the customer reads it: the calendar day in `zone`, written in
/// `locale`'s language (`December 31, 2026`, `31. Dezember 2026`, `2026年12月31日`).
///
/// Always the Gregorian calendar: a billing date is a Gregorian date in every contract we send,
/// and the fixed calendar links only its data (not all of CLDR's calendars).
pub fn format_date(at: DateTime<Utc>, zone: &TimeZone, locale: &Locale) -> String {
    let iso = || at.format("%Y-%m-%d").to_string();
    let Ok(instant) = jiff::Timestamp::new(at.timestamp(), 0) else { return iso() };
    let day = zone.tz.to_datetime(instant).date();
    let iso = || day.to_string();
    let Ok(month) = u8::try_from(day.month()) else { return iso() };
    let Ok(date) = Date::try_new_gregorian(i32::from(day.year()), month, day.day() as u8) else {
        return iso();
    };
    DATE_FORMATTERS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let formatter = match cache.get(locale.as_str()) {
            Some(f) => Rc::clone(f),
            None => {
                let Ok(f) = FixedCalendarDateTimeFormatter::<Gregorian, YMD>::try_new(
                    (&locale.icu()).into(),
                    YMD::long(),
                ) else {
                    return iso();
                };
                let f = Rc::new(f);
                remember(&mut cache, locale.as_str().to_owned(), Rc::clone(&f));
                f
            }
        };
        formatter.format(&date).to_string()
    })
}

thread_local! {
    /// Formatters by locale (and currency): building one costs several times formatting with it
    /// (BENCHMARKS.md, "Rendering in the customer's language"), and a sender sees few locales.
    /// Per thread, so nothing is shared across threads (ICU's data handles need not be `Sync`).
    static DATE_FORMATTERS: RefCell<HashMap<String, Rc<FixedCalendarDateTimeFormatter<Gregorian, YMD>>>> =
        RefCell::new(HashMap::new());
    static MONEY_FORMATTERS: RefCell<HashMap<String, Rc<CurrencyFormatter<icu_decimal::DecimalFormatter>>>> = RefCell::new(HashMap::new());
}

/// Most formatters one thread keeps: beyond it (a producer sending hundreds of locales) the cache
/// starts again rather than grow without bound.
const MAX_CACHED_FORMATTERS: usize = 64;

fn remember<V>(cache: &mut HashMap<String, V>, key: String, value: V) {
    if cache.len() >= MAX_CACHED_FORMATTERS {
        cache.clear();
    }
    cache.insert(key, value);
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
///   at all); an amount CLDR would round (ALL 123.50) is refused, never shown rounded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Money {
    minor: i64,
    currency: iso_currency::Currency,
}

impl Money {
    pub fn from_value(value: &Value) -> Result<Self, String> {
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
        if !money.shown_exactly() {
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

    /// The amount as a decimal with exactly [`Self::minor_digits`] fraction digits.
    fn decimal(&self) -> fixed_decimal::Decimal {
        let mut d = fixed_decimal::Decimal::from(self.minor);
        d.multiply_pow10(-i16::from(self.minor_digits()));
        d
    }

    /// Whether CLDR's display precision for this currency (the one the formatter rounds to)
    /// keeps the amount exact.
    fn shown_exactly(&self) -> bool {
        let Some(code) = CurrencyType::try_from_str(self.currency()).ok() else { return false };
        let Ok(fractions) =
            DataProvider::<CurrencyFractionsV1>::load(&icu_experimental::provider::Baked, Default::default())
                .map(|r| -> DataPayload<CurrencyFractionsV1> { r.payload })
        else {
            return false;
        };
        let info = fractions.get().resolve(code);
        // Units of the last shown digit the displayed value is a multiple of.
        let increment: i64 = match info.rounding {
            Rounding::R1 => 1,
            Rounding::R5 => 5,
            Rounding::R20 => 20,
            Rounding::R50 => 50,
            _ => return false,
        };
        let iso = i32::from(self.minor_digits());
        let cldr = i32::from(info.digits);
        let Some(scaled) = (if cldr >= iso {
            10i64.checked_pow((cldr - iso) as u32).and_then(|f| self.minor.checked_mul(f))
        } else {
            let f = 10i64.pow((iso - cldr) as u32);
            (self.minor % f == 0).then_some(self.minor / f)
        }) else {
            return false;
        };
        scaled % increment == 0
    }
}

/// The amount as the customer reads it, with CLDR's symbol, separators and spacing for
/// `locale`: en-US `€29.00`, de-DE `29,00 €`, pt-BR `R$ 29,00`, ja-JP `￥2,900`.
///
/// The spaces CLDR puts between number and symbol are no-break spaces (U+00A0 in de, fr and pt;
/// fr's *grouping* separator is U+202F), so an amount never wraps across lines; templates and
/// tests must expect them, not U+0020.
pub fn format_money(m: &Money, locale: &Locale) -> String {
    let plain = || format!("{} {}", m.decimal(), m.currency());
    let Ok(code) = CurrencyType::try_from_str(m.currency()) else { return plain() };
    MONEY_FORMATTERS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let key = format!("{}|{}", locale.as_str(), m.currency());
        let formatter = match cache.get(&key) {
            Some(f) => Rc::clone(f),
            None => {
                let Ok(f) =
                    CurrencyFormatter::try_new_symbol((&locale.icu()).into(), code, Default::default())
                else {
                    return plain();
                };
                let f = Rc::new(f);
                remember(&mut cache, key, Rc::clone(&f));
                f
            }
        };
        let text = formatter.format_fixed_decimal(&m.decimal()).to_string();
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone as _;

    fn locale(tag: &str) -> Locale {
        Locale::parse(tag).unwrap()
    }

    fn money(minor: i64, currency: &str) -> Money {
        Money::from_value(&serde_json::json!({"minor": minor, "currency": currency})).unwrap()
    }

    #[test]
    fn tags_are_canonicalised_and_underscores_read_as_hyphens() {
        assert_eq!(locale("de-at").as_str(), "de-AT");
        assert_eq!(locale("pt_BR").as_str(), "pt-BR");
        assert_eq!(locale("ZH-hant-tw").as_str(), "zh-Hant-TW");
        assert_eq!(locale("en").as_str(), "en");
        assert_eq!(locale("pt-BR").language(), "pt");
    }

    #[test]
    fn invalid_tags_say_why() {
        for bad in ["", "e", "en-", "english-language-tag", "en US", "und", "12-34", &"a".repeat(40)] {
            let err = Locale::parse(bad).unwrap_err();
            assert!(!err.is_empty(), "{bad:?}");
        }
        assert!(Locale::parse("und").unwrap_err().contains("no language"));
    }

    #[test]
    fn fallback_chain_drops_one_subtag_at_a_time() {
        assert_eq!(locale("de-AT").fallback_chain(), ["de-AT", "de"]);
        assert_eq!(locale("zh-Hant-TW").fallback_chain(), ["zh-Hant-TW", "zh-Hant", "zh"]);
        assert_eq!(locale("de").fallback_chain(), ["de"]);
        assert_eq!(locale("de-CH-1996").fallback_chain(), ["de-CH-1996", "de-CH", "de"]);
        assert_eq!(locale("de-DE-u-nu-latn").fallback_chain(), ["de-DE", "de"]);
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
    fn long_dates_in_five_languages() {
        let at = Utc.with_ymd_and_hms(2026, 12, 31, 12, 0, 0).unwrap();
        let utc = TimeZone::utc();
        assert_eq!(format_date(at, &utc, &locale("en-US")), "December 31, 2026");
        assert_eq!(format_date(at, &utc, &locale("de-DE")), "31. Dezember 2026");
        assert_eq!(format_date(at, &utc, &locale("fr-FR")), "31 décembre 2026");
        assert_eq!(format_date(at, &utc, &locale("ja-JP")), "2026年12月31日");
        assert_eq!(format_date(at, &utc, &locale("pt-BR")), "31 de dezembro de 2026");
    }

    #[test]
    fn the_zone_decides_the_day() {
        let at = Utc.with_ymd_and_hms(2026, 12, 31, 23, 30, 0).unwrap();
        let berlin = TimeZone::parse("Europe/Berlin").unwrap();
        let new_york = TimeZone::parse("America/New_York").unwrap();
        assert_eq!(format_date(at, &TimeZone::utc(), &locale("de-DE")), "31. Dezember 2026");
        assert_eq!(format_date(at, &berlin, &locale("de-DE")), "1. Januar 2027");
        assert_eq!(format_date(at, &berlin, &locale("en-US")), "January 1, 2027");
        let early = Utc.with_ymd_and_hms(2027, 1, 1, 3, 0, 0).unwrap();
        assert_eq!(format_date(early, &new_york, &locale("en-US")), "December 31, 2026");
    }

    #[test]
    fn money_in_five_languages_with_cldrs_no_break_spaces() {
        let eur = money(2900, "EUR");
        assert_eq!(format_money(&money(2900, "USD"), &locale("en-US")), "$29.00");
        assert_eq!(format_money(&eur, &locale("en-US")), "€29.00");
        assert_eq!(format_money(&eur, &locale("de-DE")), "29,00\u{a0}€");
        // CLDR fr: U+00A0 between number and symbol; U+202F only as the grouping separator.
        assert_eq!(format_money(&eur, &locale("fr-FR")), "29,00\u{a0}€");
        assert_eq!(format_money(&money(290_000, "EUR"), &locale("fr-FR")), "2\u{202f}900,00\u{a0}€");
        assert_eq!(format_money(&money(2900, "JPY"), &locale("ja-JP")), "￥2,900");
        assert_eq!(format_money(&money(2900, "JPY"), &locale("en-US")), "¥2,900");
        assert_eq!(format_money(&money(2900, "BRL"), &locale("pt-BR")), "R$\u{a0}29,00");
        assert_eq!(format_money(&money(29_000, "BHD"), &locale("en-US")), "BHD\u{a0}29.000");
        assert_eq!(format_money(&money(0, "EUR"), &locale("de-DE")), "0,00\u{a0}€");
    }

    #[test]
    fn minor_units_follow_iso_4217() {
        assert_eq!(money(2900, "EUR").minor_digits(), 2);
        assert_eq!(money(2900, "JPY").minor_digits(), 0);
        assert_eq!(money(2900, "BHD").minor_digits(), 3);
        assert_eq!(money(2900, "EUR").currency(), "EUR");
        assert_eq!(money(2900, "EUR").minor(), 2900);
    }

    #[test]
    fn money_that_cannot_be_stated_exactly_is_refused() {
        let cases = [
            (serde_json::json!({"minor": -2900, "currency": "EUR"}), "negative"),
            (serde_json::json!({"minor": 29.5, "currency": "EUR"}), "integer"),
            (serde_json::json!({"minor": "2900", "currency": "EUR"}), "integer"),
            (serde_json::json!({"currency": "EUR"}), "required"),
            (serde_json::json!({"minor": 2900}), "required"),
            (serde_json::json!({"minor": 2900, "currency": "eur"}), "upper case"),
            (serde_json::json!({"minor": 2900, "currency": "EURO"}), "upper case"),
            (serde_json::json!({"minor": 2900, "currency": "ABC"}), "not an ISO 4217"),
            (serde_json::json!({"minor": 2900, "currency": "XAU"}), "no minor unit"),
            // ALL has 2 minor digits in ISO 4217, none in CLDR: 123.50 would print as 124.
            (serde_json::json!({"minor": 12_350, "currency": "ALL"}), "rounded"),
            (serde_json::json!("29.00 EUR"), "object"),
        ];
        for (value, reason) in cases {
            let err = Money::from_value(&value).unwrap_err();
            assert!(err.contains(reason), "{value}: {err}");
        }
        let whole_lek = Money::from_value(&serde_json::json!({"minor": 12_300, "currency": "ALL"})).unwrap();
        assert_eq!(format_money(&whole_lek, &locale("en-US")), "ALL\u{a0}123");
    }

    #[test]
    fn cached_formatters_never_answer_for_another_locale_or_currency() {
        let eur = Money::from_value(&serde_json::json!({"minor": 2900, "currency": "EUR"})).unwrap();
        let usd = Money::from_value(&serde_json::json!({"minor": 2900, "currency": "USD"})).unwrap();
        let de = Locale::parse("de-DE").unwrap();
        let en = Locale::parse("en-US").unwrap();
        let at = Utc.with_ymd_and_hms(2026, 12, 31, 9, 0, 0).unwrap();
        for _ in 0..2 {
            assert_eq!(format_money(&eur, &de), "29,00\u{a0}€");
            assert_eq!(format_money(&usd, &de), "29,00\u{a0}$");
            assert_eq!(format_money(&eur, &en), "€29.00");
            assert_eq!(format_date(at, &TimeZone::utc(), &de), "31. Dezember 2026");
            assert_eq!(format_date(at, &TimeZone::utc(), &en), "December 31, 2026");
        }
        // More locales than the cache keeps: it starts again, and still answers right.
        for region in ["AT", "CH", "LU", "BE", "LI", "IT"].iter().cycle().take(3 * MAX_CACHED_FORMATTERS) {
            let l = Locale::parse(&format!("de-{region}")).unwrap();
            assert!(format_date(at, &TimeZone::utc(), &l).contains("2026"));
        }
        for i in 0..(MAX_CACHED_FORMATTERS + 5) {
            let l = Locale::parse(&format!("en-{}", ["US", "GB", "IE", "AU", "NZ", "CA"][i % 6])).unwrap();
            assert!(format_date(at, &TimeZone::utc(), &l).contains("2026"));
        }
        assert_eq!(format_date(at, &TimeZone::utc(), &de), "31. Dezember 2026");
        DATE_FORMATTERS.with(|c| assert!(c.borrow().len() <= MAX_CACHED_FORMATTERS));
    }
}
