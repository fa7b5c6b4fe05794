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
    let mut table = |name: &str, codes: &[&str]| {
        let _ = writeln!(
            out,
            "/// {} codes, sorted.\npub(crate) static {name}: [&str; {}] = [",
            codes.len(),
            codes.len()
        );
        for code in codes {
            let _ = writeln!(out, "    {code:?},");
        }
        out.push_str("];\n");
    };
    table("COUNTRIES", &countries);
    table("SUBDIVISIONS", &subdivisions);
    let path = std::path::Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("iso3166.rs");
    if let Err(e) = std::fs::write(&path, out) {
        panic!("cannot write {}: {e}", path.display());
    }
    println!("cargo::rerun-if-changed=build.rs");
}
