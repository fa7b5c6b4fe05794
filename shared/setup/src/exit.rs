//! The one exit-code contract of the entry points that run for an operator — `noticectl` and
//! `notice-proof` — as the table in docs/operations.md (*Exit codes*). Both return every code
//! through [`Exit`], so the two cannot drift apart.

use std::process::ExitCode;

/// How a command ended. The numbers are the contract: scripts and runbooks test them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// 0: everything asked was done.
    Ok = 0,
    /// 1: done, but something needs attention (invalid lines, missed, quarantined, too late,
    /// rate-limited or not enqueued): each is listed at the end of the output.
    Attention = 1,
    /// 2: usage, configuration, or a dependency unreachable: nothing or only part was done (the
    /// message says which).
    Unusable = 2,
    /// 3: a safety stop: a census "stop" verdict, a confirmation refused or declined, a release
    /// refused while SES events are pending. Nothing was changed.
    SafetyStop = 3,
}

impl Exit {
    /// 0 when `attention` is false, else 1.
    pub fn attention_if(attention: bool) -> Self {
        if attention {
            Exit::Attention
        } else {
            Exit::Ok
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_are_the_documented_ones() {
        let codes = [Exit::Ok, Exit::Attention, Exit::Unusable, Exit::SafetyStop].map(|e| e as u8);
        assert_eq!(codes, [0, 1, 2, 3]);
        assert_eq!(Exit::attention_if(true), Exit::Attention);
        assert_eq!(Exit::attention_if(false), Exit::Ok);
    }
}
