//! `notice-proof`'s copy of the exit-code contract. The one table is docs/operations.md
//! (*Exit codes*), shared with `noticectl` (`cli/src/exit.rs`); this binary cannot depend on the
//! cli crate, so it keeps the same four values here. Keep them equal.

use std::process::ExitCode;

/// How a run ended; the numbers are docs/operations.md's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
// The whole table is kept, as documented, though this binary returns only some of it itself
// (`verify` reports a failed check as 1 through `ExitCode::FAILURE`).
#[allow(dead_code)]
pub(crate) enum Exit {
    /// 0: everything asked was done (and every check held).
    Ok = 0,
    /// 1: done, but something needs attention (a check failed, a mutant survived).
    Attention = 1,
    /// 2: usage, configuration or a dependency unusable: nothing or only part was done.
    Unusable = 2,
    /// 3: a safety stop.
    SafetyStop = 3,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_codes_are_the_documented_ones() {
        use super::Exit;
        let codes = [Exit::Ok, Exit::Attention, Exit::Unusable, Exit::SafetyStop].map(|e| e as u8);
        assert_eq!(codes, [0, 1, 2, 3]);
    }
}
