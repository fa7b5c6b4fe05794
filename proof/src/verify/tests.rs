//! The checker on small worlds, fast enough for a debug build in CI: the real rules hold, every
//! mutant is caught by the invariant it breaks (so a clean result is not a checker that cannot
//! fail), and the two gaps it once found in the real rules stay closed.

use super::args::{Bounds, Faults};
use super::model::{Invariant, Model};
use super::mutants::{Mutant, Rules};
use super::search::{explore, explore_from, Explored};

fn small() -> Bounds {
    Bounds {
        workers: 2,
        deliveries: 1,
        notices: 1,
        releases: 1,
        ledger_faults: Faults::Ambiguous,
        in_flight_redelivery: true,
        stale_deletes: false,
        rate_gate: true,
        withdraws: 0,
        parking: true,
    }
}

/// A world with the producer's withdraw of notice A, enqueued at any time. Parking off, to keep
/// the mutant runs small; `a_withdraw_waiting_on_a_claim_never_parks_behind_its_delivery` runs a
/// withdraw with parking on.
fn withdrawing() -> Bounds {
    Bounds { releases: 0, withdraws: 1, parking: false, ..small() }
}

/// One worker, a withdraw and an operator release: the only way a provider event meets a
/// tombstone in the real rules (a claim released after its message went out).
fn released_then_withdrawn() -> Bounds {
    Bounds { workers: 1, releases: 1, withdraws: 1, parking: false, ..small() }
}

fn run(bounds: Bounds, rules: Rules) -> Explored {
    explore(&mut [Model::new(bounds, rules).unwrap()]).unwrap()
}

fn clean(run: &Explored) {
    if let Some((v, trace)) = &run.violation {
        panic!("{:?}: {}\n{}", v.invariant, v.detail, trace.join("\n"));
    }
}

#[test]
fn the_real_rules_hold_over_a_small_world() {
    // With a release and its replay; in-flight redelivery off to stay quick in a debug build (the
    // CI world of `tests/verify.rs` runs it on, with two messages).
    let run = run(Bounds { in_flight_redelivery: false, ..small() }, Rules::real());
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
        (Mutant::TokenAfterClaim, &[LimitedLeavesNoClaim][..]),
        (Mutant::SkipPreRead, &[NoTokenOnDecided][..]),
        (Mutant::FailedReadIsFree, &[NoTokenOnDecided][..]),
        (Mutant::WithdrawOverwritesClaim, &[WithdrawnNotSent][..]),
        (Mutant::EventLeavesWithdrawn, &[SentAfterWithdrawPaged][..]),
        (Mutant::ParkWithTtl, &[NoSilentEnd][..]),
        (Mutant::HideTooLong, &[NoSilentEnd][..]),
    ] {
        let bounds = match (mutant.needs_withdraw(), mutant.needs_release()) {
            _ if mutant.needs_parking() => small(),
            (true, true) => released_then_withdrawn(),
            (true, false) => withdrawing(),
            _ => small(),
        };
        let run = run(bounds, Rules::with(mutant));
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
fn every_mutant_is_listed_and_the_gate_mutants_need_a_gate() {
    assert_eq!(Mutant::ALL.len(), 15);
    let gateless = Bounds { rate_gate: false, ..released_then_withdrawn() };
    let unparked = released_then_withdrawn();
    let gateless = Bounds { parking: true, ..gateless };
    for mutant in Mutant::ALL {
        let name = mutant.name();
        assert_eq!(Model::new(gateless, Rules::with(mutant)).is_err(), mutant.needs_gate(), "{name}");
        let refused = Model::new(small(), Rules::with(mutant)).is_err();
        assert_eq!(refused, mutant.needs_withdraw(), "{name}");
        let refused = Model::new(unparked, Rules::with(mutant)).is_err();
        assert_eq!(refused, mutant.needs_parking(), "{name}");
    }
}

#[test]
fn the_real_rules_hold_with_a_withdraw_at_any_time() {
    // Small for a debug build (in-flight redelivery off); `tests/verify.rs` runs it on.
    let run = run(Bounds { in_flight_redelivery: false, ..withdrawing() }, Rules::real());
    clean(&run);
    assert!(run.states > 5_000, "{} states", run.states);
}

#[test]
fn without_a_gate_the_world_is_the_one_before_it() {
    // `--rate-gate off` is the world the checker explored before the gate was modelled: no read,
    // no token, the same states.
    let gated = run(Bounds { releases: 0, ..small() }, Rules::real());
    let gateless = run(Bounds { releases: 0, rate_gate: false, ..small() }, Rules::real());
    clean(&gateless);
    assert!(gated.states > gateless.states, "{} vs {}", gated.states, gateless.states);
    assert!(gated.depth > gateless.depth);
}

#[test]
fn a_parked_job_comes_back_in_any_order_with_its_copies() {
    // Parking as its own queue action: a job deferred before its window parks (one schedule per
    // key; a second park of the key is acked while the first has not fired) and its body comes
    // back as a new delivery. The real rules hold, and the world differs from the one where a
    // park simply comes back.
    let bounds = Bounds { releases: 0, in_flight_redelivery: false, deliveries: 2, ..small() };
    let parked = run(bounds, Rules::real());
    clean(&parked);
    let unparked = run(Bounds { parking: false, ..bounds }, Rules::real());
    clean(&unparked);
    assert_ne!(parked.states, unparked.states);
}

#[test]
fn a_withdraw_waiting_on_a_claim_never_parks_behind_its_delivery() {
    // Was a gap this model found: parked jobs are named by the notice key alone, so a withdraw
    // waiting on a young claim (longer than a hide) parked, found its delivery's schedule
    // ("already parked") and was acked unanswered. Now a withdraw's wait is at most a hide.
    let run = run(Bounds { parking: true, in_flight_redelivery: false, ..withdrawing() }, Rules::real());
    clean(&run);
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

#[test]
fn the_search_finds_the_same_on_any_number_of_threads() {
    // Levels split among threads are merged in frontier order: the same states, the same numbers
    // and the same shortest trace as one thread.
    let world = Bounds { in_flight_redelivery: false, ..small() };
    for rules in [Rules::real(), Rules::with(Mutant::TokenAfterClaim)] {
        let one = explore_from(&mut [Model::new(world, rules).unwrap()], usize::MAX).unwrap();
        let mut three: Vec<Model> = (0..3).map(|_| Model::new(world, rules).unwrap()).collect();
        let split = explore_from(&mut three, 1).unwrap();
        assert_eq!((one.states, one.transitions, one.depth), (split.states, split.transitions, split.depth));
        let trace =
            |run: &Explored| run.violation.as_ref().map(|(v, t)| (v.invariant, v.detail.clone(), t.clone()));
        assert_eq!(trace(&one), trace(&split));
    }
}

#[test]
fn the_default_run_is_its_named_worlds_and_any_flag_is_one_world() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: super::VerifyArgs,
    }
    let worlds = |flags: &[&str]| Cli::parse_from([&["verify"], flags].concat()).args.worlds();
    let run = worlds(&["--json", "--no-mutants"]);
    assert_eq!(run, super::args::DEFAULT_RUN.to_vec());
    // What `verify --help` and docs/proof.md say the run is.
    let names: Vec<&str> = run.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, ["deliveries", "withdraw", "withdraw-release"]);
    assert_eq!(run[0].1, Bounds::DEFAULT);
    assert_eq!(run[1].1, Bounds { withdraws: 1, releases: 0, ..Bounds::DEFAULT });
    assert_eq!(run[2].1, Bounds { withdraws: 1, workers: 1, ..Bounds::DEFAULT });
    assert_eq!(worlds(&["--parking", "off"]), [("custom", Bounds { parking: false, ..Bounds::DEFAULT })]);
    assert_eq!(worlds(&["--withdraws", "1"]), [("custom", Bounds { withdraws: 1, ..Bounds::DEFAULT })]);
    assert_eq!(worlds(&["--stale-deletes"]).len(), 1);
    // Every mutant runs in some world of the default run, so `verify` alone checks all of them.
    for mutant in Mutant::ALL {
        assert!(run.iter().any(|(_, b)| mutant.runs_in(b)), "{} runs in no default world", mutant.name());
    }
}
