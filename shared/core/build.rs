//! Generates the ISO 3166 code tables the job and the windows policy check jurisdictions against
//! (`jurisdiction.rs`), from the `rust_iso3166` crate's data. Only the codes are kept (sorted, for
//! a binary search): the crate's own tables carry names and phf maps, about 1.5 MB in a binary,
//! where the codes alone are a few tens of kilobytes.

use std::fmt::Write as _;

fn main() {
    let mut countries: Vec<&str> = rust_iso3166::ALL_ALPHA2.to_vec();
    countries.sort_unstable();
    countries.dedup();
    let mut subdivisions: Vec<&str> = rust_iso3166::iso3166_2::SUBDIVISION_MAP.keys().copied().collect();
    subdivisions.sort_unstable();
    subdivisions.dedup();
    let mut out = String::new();
    // Fixed-width byte arrays, NUL-padded: 2 bytes a country and 6 a subdivision, where a `&str`
    // would cost 16 bytes of pointer and length besides its text.
    let mut table = |name: &str, width: usize, codes: &[&str]| {
        let _ = writeln!(out, "/// {} codes, sorted, NUL-padded to {width} bytes.", codes.len());
        let _ = writeln!(out, "pub(crate) static {name}: [[u8; {width}]; {}] = [", codes.len());
        for code in codes {
            assert!(code.len() <= width && code.is_ascii(), "unexpected code {code:?}");
            let padded = format!("{code}{}", "\\0".repeat(width - code.len()));
            let _ = writeln!(out, "    *b\"{padded}\",");
        }
        out.push_str("];\n");
    };
    table("COUNTRIES", 2, &countries);
    table("SUBDIVISIONS", 6, &subdivisions);
    let path = std::path::Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("iso3166.rs");
    if let Err(e) = std::fs::write(&path, out) {
        panic!("cannot write {}: {e}", path.display());
    }
    println!("cargo::rerun-if-changed=build.rs");
}
