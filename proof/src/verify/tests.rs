//! The checker on small worlds, fast enough for a debug build in CI: the real rules hold, every
//! mutant is caught by the invariant it breaks (so a clean result is not a checker that cannot
//! fail), and the two gaps it once found in the real rules stay closed.

use super::args::{Bounds, Faults};
use super::model::{Invariant, Model};
use super::mutants::{Mutant, Rules};
use super::search::{explore, Explored};

fn small() -> Bounds {
    Bounds {
        workers: 2,
        deliveries: 1,
        notices: 1,
        releases: 1,
        ledger_faults: Faults::Ambiguous,
        in_flight_redelivery: true,
        stale_deletes: false,
    }
}

fn run(bounds: Bounds, rules: Rules) -> Explored {
    explore(&mut Model::new(bounds, rules).unwrap()).unwrap()
}

fn clean(run: &Explored) {
    if let Some((v, trace)) = &run.violation {
        panic!("{:?}: {}\n{}", v.invariant, v.detail, trace.join("\n"));
    }
}

#[test]
fn the_real_rules_hold_over_a_small_world() {
    let run = run(small(), Rules::real());
    clean(&run);
    assert!(run.states > 10_000, "the world is too small to mean anything: {} states", run.states);
}

#[test]
fn every_mutant_is_caught_by_the_invariant_it_breaks() {
    use Invariant::*;
    for (mutant, expected) in [
        (Mutant::AckBeforeCommit, &[AckAfterDurable][..]),
        (Mutant::ReleaseUnknown, &[OneAcceptance][..]),
        (Mutant::SdkRetry, &[OneAcceptance][..]),
        (Mutant::KeyPerDelivery, &[OneAcceptance, NoSilentEnd][..]),
        (Mutant::UnconditionalClaim, &[NeverBackwards, OneAcceptance][..]),
        (Mutant::TtlExpiresOpenClaim, &[NeverBackwards, NoSilentEnd][..]),
        (Mutant::AckHeldInFlight, &[NoSilentEnd][..]),
        (Mutant::AckFailedRelease, &[NoSilentEnd][..]),
    ] {
        let run = run(small(), Rules::with(mutant));
        let Some((v, trace)) = run.violation else {
            panic!("{} escaped over {} states", mutant.name(), run.states)
        };
        assert!(
            expected.contains(&v.invariant),
            "{}: caught by {:?}: {}",
            mutant.name(),
            v.invariant,
            v.detail
        );
        assert!(trace.len() >= 3, "{}: a trace of {} steps", mutant.name(), trace.len());
    }
}

#[test]
fn a_duplicate_receive_while_the_claimer_releases_ends_sent() {
    // Was a gap: the duplicate was suppressed and acked while the claimer could still release.
    // Now it comes back once the claim's sender is done.
    let bounds = Bounds { releases: 0, ledger_faults: Faults::Clean, ..small() };
    let run = run(bounds, Rules::real());
    clean(&run);
    assert!(run.states > 1_000, "{} states", run.states);
}

#[test]
fn a_release_applied_but_answered_with_an_error_is_retried() {
    // Was a gap: a release whose write landed but whose answer was lost was taken for "the claim
    // stays", and the job acked with its row released.
    let bounds = Bounds { workers: 1, releases: 0, ledger_faults: Faults::Ambiguous, ..small() };
    clean(&run(bounds, Rules::real()));
}
