//! Jurisdiction codes: an ISO 3166-1 alpha-2 country (`DE`) or an ISO 3166-2 subdivision
//! (`US-CA`), written in any case by a producer and normalised to upper case here — the one place
//! that reads them — so `us-ca` and `US-CA` can never pick different legal windows. A value that is
//! not an assigned code is refused rather than matched against nothing: a typo such as `US-CAL`
//! would otherwise silently get the kind's window instead of California's.
//!
//! The code lists come from the `rust_iso3166` crate at build time (`build.rs` keeps only the
//! codes). A subdivision ISO adds after that crate's release is refused until the crate is updated:
//! a refusal names the value, so the fix is a dependency bump, never a silently wrong window.

mod tables {
    include!(concat!(env!("OUT_DIR"), "/iso3166.rs"));
}

/// Longest ISO 3166-2 code (`CC-` and up to three characters).
const MAX_LEN: usize = 6;

/// Why a value is not a jurisdiction code (it names the value).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotAJurisdiction(String);

/// `value` as its canonical ISO 3166 code (upper case), or why it is not one.
pub fn normalise(value: &str) -> Result<String, NotAJurisdiction> {
    let upper = value.to_ascii_uppercase();
    let shape_ok = upper.len() <= MAX_LEN
        && upper.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && (upper.len() == 2 || upper.as_bytes().get(2) == Some(&b'-'));
    if !shape_ok {
        return Err(NotAJurisdiction(format!(
            "{value:?} is not an ISO 3166-1 alpha-2 country (`DE`) or ISO 3166-2 subdivision (`US-CA`) code"
        )));
    }
    let country = &upper[..2.min(upper.len())];
    if !is_country(country) {
        let what = if upper.len() == 2 { format!("{value:?}") } else { format!("{value:?}: {country:?}") };
        return Err(NotAJurisdiction(format!("{what} is not an ISO 3166-1 alpha-2 country code")));
    }
    if upper.len() > 2 && !is_subdivision(&upper) {
        return Err(NotAJurisdiction(format!(
            "{value:?} is not an ISO 3166-2 subdivision of {country} (e.g. `US-CA`, `DE-BY`)"
        )));
    }
    Ok(upper)
}

/// Whether `code` (upper case) is an assigned ISO 3166-1 alpha-2 code.
pub fn is_country(code: &str) -> bool {
    padded::<2>(code).is_some_and(|c| tables::COUNTRIES.binary_search(&c).is_ok())
}

/// Whether `code` (upper case) is an ISO 3166-2 subdivision code.
pub fn is_subdivision(code: &str) -> bool {
    padded::<6>(code).is_some_and(|c| tables::SUBDIVISIONS.binary_search(&c).is_ok())
}

/// `code` NUL-padded to `N` bytes, as the tables hold it; `None` when longer.
fn padded<const N: usize>(code: &str) -> Option<[u8; N]> {
    let bytes = code.as_bytes();
    let mut out = [0u8; N];
    out.get_mut(..bytes.len())?.copy_from_slice(bytes);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn countries_and_subdivisions_in_any_case_become_upper_case() {
        for (input, expected) in [
            ("US-CA", "US-CA"),
            ("us-ca", "US-CA"),
            ("Us-cA", "US-CA"),
            ("de", "DE"),
            ("DE-BY", "DE-BY"),
            ("gb-eng", "GB-ENG"),
            ("FR", "FR"),
        ] {
            assert_eq!(normalise(input).as_deref(), Ok(expected), "{input}");
        }
    }

    #[test]
    fn anything_else_is_refused_naming_the_value() {
        for bad in [
            "", "U", "USA", "US_CA", "US CA", "USA-CA", "US-CAL", "XX", "XX-CA", "US-", "-CA", "US-CA-1",
            "ÜS",
        ] {
            let err = normalise(bad).unwrap_err();
            assert!(err.to_string().contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }

    #[test]
    fn the_tables_are_sorted_and_plausible() {
        assert!(tables::COUNTRIES.len() >= 249, "{}", tables::COUNTRIES.len());
        assert!(tables::SUBDIVISIONS.len() > 4000, "{}", tables::SUBDIVISIONS.len());
        assert!(tables::COUNTRIES.windows(2).all(|w| w[0] < w[1]));
        assert!(tables::SUBDIVISIONS.windows(2).all(|w| w[0] < w[1]));
        for code in ["US-NY", "US-CA", "CA-QC", "AU-NSW", "JP-13", "BR-SP"] {
            assert!(is_subdivision(code), "{code}");
        }
    }
}
