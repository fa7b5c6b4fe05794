//! The customer's language and time zone: the ICU4X checks the job's parse asks for ([`Icu`], the
//! core's [`Cldr`] port), and dates and money written the way the customer reads them.
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

pub use notice_ledger::locale::{Cldr, Locale, Money, TimeZone, MAX_LOCALE_LEN, MAX_TIME_ZONE_LEN};

/// The [`Cldr`] every entry point hands the job's parse: BCP 47 through `icu_locale_core`, the
/// currencies' display precision from ICU4X's compiled CLDR data.
#[derive(Clone, Copy, Debug, Default)]
pub struct Icu;

impl Cldr for Icu {
    fn canonical_locale(&self, text: &str) -> Result<String, String> {
        let id = icu_locale_core::Locale::try_from_str(&text.replace('_', "-"))
            .map_err(|e| format!("`{text}` is not a BCP 47 language tag ({e}); e.g. `en-US`, `de`"))?;
        if id.id.language.is_unknown() {
            return Err(format!("`{text}` names no language (`und`); e.g. `en-US`, `de`"));
        }
        Ok(id.to_string())
    }

    fn shown_exactly(&self, money: &Money) -> bool {
        shown_exactly(money)
    }
}

/// The ICU form of a canonical tag. It was produced by ICU from a parsed locale, so it parses
/// again; `und` (root data) stands in if that ever fails rather than a panic in a Lambda.
fn icu(locale: &Locale) -> icu_locale_core::Locale {
    icu_locale_core::Locale::try_from_str(locale.as_str()).unwrap_or(icu_locale_core::Locale::UNKNOWN)
}

/// Tags to look templates up by, most specific first: `de-AT` → `de-AT`, `de`;
/// `zh-Hant-TW` → `zh-Hant-TW`, `zh-Hant`, `zh`. Each step drops the last subtag of the
/// language identifier (variants, then region, then script); Unicode extensions (`-u-…`)
/// shape formatting, never which template is chosen, so they are not in the chain. The
/// caller appends its bundle's default language. No likely-subtags inference: `zh-TW` falls
/// back to `zh`, not to `zh-Hant` — ship a `zh-TW` template if the difference matters.
pub fn fallback_chain(locale: &Locale) -> Vec<String> {
    let mut id = icu(locale).id;
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

/// The long date of `at` as the customer reads it: the calendar day in `zone`, written in
/// `locale`'s language (`December 31, 2026`, `31. Dezember 2026`, `2026年12月31日`).
///
/// Always the Gregorian calendar: a billing date is a Gregorian date in every contract we send,
/// and the fixed calendar links only its data (not all of CLDR's calendars).
pub fn format_date(at: DateTime<Utc>, zone: &TimeZone, locale: &Locale) -> String {
    let iso = || at.format("%Y-%m-%d").to_string();
    let Ok(instant) = jiff::Timestamp::new(at.timestamp(), 0) else { return iso() };
    let day = zone.tz().to_datetime(instant).date();
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
                    (&icu(locale)).into(),
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

/// The amount as a decimal with exactly [`Money::minor_digits`] fraction digits.
fn decimal(money: &Money) -> fixed_decimal::Decimal {
    let mut d = fixed_decimal::Decimal::from(money.minor());
    d.multiply_pow10(-i16::from(money.minor_digits()));
    d
}

/// Whether CLDR's display precision for this currency (the one the formatter rounds to)
/// keeps the amount exact.
fn shown_exactly(money: &Money) -> bool {
    let Some(code) = CurrencyType::try_from_str(money.currency()).ok() else { return false };
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
    let iso = i32::from(money.minor_digits());
    let cldr = i32::from(info.digits);
    let minor = money.minor();
    let Some(scaled) = (if cldr >= iso {
        10i64.checked_pow((cldr - iso) as u32).and_then(|f| minor.checked_mul(f))
    } else {
        let f = 10i64.pow((iso - cldr) as u32);
        (minor % f == 0).then_some(minor / f)
    }) else {
        return false;
    };
    scaled % increment == 0
}

/// The amount as the customer reads it, with CLDR's symbol, separators and spacing for
/// `locale`: en-US `€29.00`, de-DE `29,00 €`, pt-BR `R$ 29,00`, ja-JP `￥2,900`.
///
/// The spaces CLDR puts between number and symbol are no-break spaces (U+00A0 in de, fr and pt;
/// fr's *grouping* separator is U+202F), so an amount never wraps across lines; templates and
/// tests must expect them, not U+0020.
pub fn format_money(m: &Money, locale: &Locale) -> String {
    let plain = || format!("{} {}", decimal(m), m.currency());
    let Ok(code) = CurrencyType::try_from_str(m.currency()) else { return plain() };
    MONEY_FORMATTERS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let key = format!("{}|{}", locale.as_str(), m.currency());
        let formatter = match cache.get(&key) {
            Some(f) => Rc::clone(f),
            None => {
                let Ok(f) =
                    CurrencyFormatter::try_new_symbol((&icu(locale)).into(), code, Default::default())
                else {
                    return plain();
                };
                let f = Rc::new(f);
                remember(&mut cache, key, Rc::clone(&f));
                f
            }
        };
        let text = formatter.format_fixed_decimal(&decimal(m)).to_string();
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone as _;

    fn locale(tag: &str) -> Locale {
        Locale::parse(tag, &Icu).unwrap()
    }

    fn money(minor: i64, currency: &str) -> Money {
        Money::from_value(&serde_json::json!({"minor": minor, "currency": currency}), &Icu).unwrap()
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
            let err = Locale::parse(bad, &Icu).unwrap_err();
            assert!(!err.is_empty(), "{bad:?}");
        }
        assert!(Locale::parse("und", &Icu).unwrap_err().contains("no language"));
    }

    #[test]
    fn fallback_chain_drops_one_subtag_at_a_time() {
        assert_eq!(fallback_chain(&locale("de-AT")), ["de-AT", "de"]);
        assert_eq!(fallback_chain(&locale("zh-Hant-TW")), ["zh-Hant-TW", "zh-Hant", "zh"]);
        assert_eq!(fallback_chain(&locale("de")), ["de"]);
        assert_eq!(fallback_chain(&locale("de-CH-1996")), ["de-CH-1996", "de-CH", "de"]);
        assert_eq!(fallback_chain(&locale("de-DE-u-nu-latn")), ["de-DE", "de"]);
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
            let err = Money::from_value(&value, &Icu).unwrap_err();
            assert!(err.contains(reason), "{value}: {err}");
        }
        let whole_lek =
            Money::from_value(&serde_json::json!({"minor": 12_300, "currency": "ALL"}), &Icu).unwrap();
        assert_eq!(format_money(&whole_lek, &locale("en-US")), "ALL\u{a0}123");
    }

    #[test]
    fn cached_formatters_never_answer_for_another_locale_or_currency() {
        let eur = Money::from_value(&serde_json::json!({"minor": 2900, "currency": "EUR"}), &Icu).unwrap();
        let usd = Money::from_value(&serde_json::json!({"minor": 2900, "currency": "USD"}), &Icu).unwrap();
        let de = Locale::parse("de-DE", &Icu).unwrap();
        let en = Locale::parse("en-US", &Icu).unwrap();
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
            let l = Locale::parse(&format!("de-{region}"), &Icu).unwrap();
            assert!(format_date(at, &TimeZone::utc(), &l).contains("2026"));
        }
        for i in 0..(MAX_CACHED_FORMATTERS + 5) {
            let l =
                Locale::parse(&format!("en-{}", ["US", "GB", "IE", "AU", "NZ", "CA"][i % 6]), &Icu).unwrap();
            assert!(format_date(at, &TimeZone::utc(), &l).contains("2026"));
        }
        assert_eq!(format_date(at, &TimeZone::utc(), &de), "31. Dezember 2026");
        DATE_FORMATTERS.with(|c| assert!(c.borrow().len() <= MAX_CACHED_FORMATTERS));
    }
}
