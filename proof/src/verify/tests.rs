//! The checker on small worlds, fast enough for a debug build in CI: the real rules hold, every
//! mutant is caught by the invariant it breaks (so a clean result is not a checker that cannot
//! fail), and the two gaps it once found in the real rules stay closed.

use super::args::{Bounds, Faults};
use super::model::{Invariant, Model};
use super::mutants::{Mutant, Rules};
use super::search::{explore, explore_from, Explored};
use super::sender::BatchCtx;
use super::world::{Answer, Answers, Phase, Step};

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
        batch: 1,
        rotation: false,
    }
}

/// The batch path with the operator's release: A's original and its replay, each alone or both in
/// one batch. One worker and no in-flight redelivery, to stay quick in a debug build (the default
/// run's `batch` world has two workers).
fn batched() -> Bounds {
    Bounds { workers: 1, batch: 2, in_flight_redelivery: false, ..small() }
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

/// The key secret mid-rotation, small enough for a debug build: one worker, the original and the
/// operator's release and replay, each received on either side of the switch.
fn rotating_released() -> Bounds {
    Bounds {
        rotation: true,
        workers: 1,
        in_flight_redelivery: false,
        ledger_faults: Faults::Off,
        parking: false,
        ..small()
    }
}

/// … and two workers racing the original and a duplicate, no release.
fn rotating_racing() -> Bounds {
    Bounds { workers: 2, deliveries: 2, releases: 0, ..rotating_released() }
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
fn the_real_rules_hold_while_the_secret_rotates() {
    for bounds in [rotating_released(), rotating_racing()] {
        let run = run(bounds, Rules::real());
        clean(&run);
        assert!(run.states > 10_000, "the world is too small to mean anything: {} states", run.states);
    }
}

/// Without rotation a world never writes an alias: the rotation mutants are no-ops there, which is
/// why they run only in rotation worlds.
#[test]
fn only_a_rotation_world_catches_the_rotation_mutants() {
    let one_version = Bounds { rotation: false, ..rotating_racing() };
    let real = run(one_version, Rules::real()).states;
    for mutant in [Mutant::RotationWithoutAlias, Mutant::AliasOverwritesRow] {
        let escaped = explore(&mut [Model::build(one_version, Rules::with(mutant)).unwrap()]).unwrap();
        assert!(escaped.violation.is_none(), "{} caught with one version", mutant.name());
        assert_eq!(escaped.states, real, "{} changed a world with one version", mutant.name());
    }
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
        (Mutant::StaleBatchRead, &[NoSilentEnd][..]),
        (Mutant::RotationWithoutAlias, &[OneAcceptance, DuplicatesDetected, NoSilentEnd][..]),
        (Mutant::AliasOverwritesRow, &[NeverBackwards][..]),
        (Mutant::AliasExpires, &[NoSilentEnd, DuplicatesDetected, OneAcceptance][..]),
        (Mutant::SkipQuarantineView, &[NoSilentEnd][..]),
    ] {
        let bounds = match (mutant.needs_withdraw(), mutant.needs_release()) {
            _ if mutant == Mutant::AliasExpires => rotating_released(),
            _ if mutant.needs_rotation() => rotating_racing(),
            _ if mutant.needs_batch() => batched(),
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
fn every_mutant_is_listed_and_runs_only_where_it_can_be_told_apart() {
    assert_eq!(Mutant::ALL.len(), 20);
    // A world with everything a mutant may need (one message of A: `small`); each check takes one
    // thing away.
    let full = Bounds { batch: 2, ..released_then_withdrawn() };
    let full = Bounds { parking: true, ..full };
    type Needs = fn(Mutant) -> bool;
    for mutant in Mutant::ALL {
        let name = mutant.name();
        // A rotation world gives each secret version a sender, not each delivery.
        let full = Bounds { rotation: mutant != Mutant::KeyPerDelivery, ..full };
        let needs_in_flight: Needs = |m| m.needs_in_flight_redelivery() || m.needs_two_at_once();
        let without: [(Bounds, Needs); 7] = [
            (Bounds { rate_gate: false, ..full }, Mutant::needs_gate),
            (Bounds { withdraws: 0, ..full }, Mutant::needs_withdraw),
            (Bounds { releases: 0, ..full }, Mutant::needs_release),
            (Bounds { parking: false, ..full }, Mutant::needs_parking),
            (Bounds { batch: 1, ..full }, Mutant::needs_batch),
            (Bounds { in_flight_redelivery: false, ..full }, needs_in_flight),
            (Bounds { rotation: false, ..full }, Mutant::needs_rotation),
        ];
        assert!(Model::new(full, Rules::with(mutant)).is_ok(), "{name}");
        assert!(
            Model::new(Bounds { in_flight_redelivery: false, deliveries: 2, ..full }, Rules::with(mutant))
                .is_ok()
                || mutant.needs_in_flight_redelivery(),
            "{name}: two messages are two deliveries at once"
        );
        for (bounds, needs) in without {
            assert_eq!(Model::new(bounds, Rules::with(mutant)).is_err(), needs(mutant), "{name}: {bounds:?}");
        }
    }
}

#[test]
fn a_batch_reads_once_and_its_records_claim_without_reading() {
    // Two redelivered copies of A in one batch: the real prefetch reads A's row once and takes one
    // token for it; then each record, delivered with the prefetch, goes straight to its
    // conditional claim.
    let mut model = Model::new(batched(), Rules::real()).unwrap();
    let core = &mut model.core;
    let a = core.key_of(0, 0).unwrap();
    let batch = |answers: &[Answer]| {
        let mut all = Answers::default();
        for x in answers {
            all = all.with(*x).unwrap();
        }
        Some(BatchCtx { mate: Some((0, false)), mate_again: true, answers: all })
    };
    let step = |core: &mut super::sender::Core, prefetch: &[Answer]| {
        core.step(0, (0, false), true, Phase::Open, Answers::default(), batch(prefetch)).unwrap()
    };
    assert_eq!(step(core, &[]), Step::BatchRead { keys: [Some(a), None] });
    assert_eq!(step(core, &[Answer::Free]), Step::BatchToken { keys: [Some(a), None] });
    assert_eq!(
        step(core, &[Answer::Free, Answer::Admitted]),
        Step::Claim { key: a, alias: None, listed: false }
    );
    // Limited for the batch: every record of the key is deferred, nothing claimed.
    let limited = step(core, &[Answer::Free, Answer::Limited]);
    assert!(matches!(limited, Step::Done { outcome: "rate_limited", .. }), "{limited:?}");
    // Held by a claim the batch read as old: put on the quarantine view, then suppressed without a
    // claim; as young: on the view, then in flight. A failed view write: retried, never acked.
    let held =
        |young| Answer::Held { state: notice_ledger::ledger::RowState::Claimed, digest: Some(0), young };
    assert_eq!(step(core, &[held(false)]), Step::List { key: a });
    let after = |core: &mut super::sender::Core, young, answer| {
        let answers = Answers::default().with(answer).unwrap();
        core.step(0, (0, false), true, Phase::Open, answers, batch(&[held(young)])).unwrap()
    };
    assert!(matches!(after(core, false, Answer::Written), Step::Done { outcome: "suppressed", .. }));
    assert!(matches!(after(core, true, Answer::Written), Step::Done { outcome: "in_flight", .. }));
    let failed = after(core, false, Answer::Failed);
    assert!(matches!(failed, Step::Done { outcome: "ledger_unavailable", .. }), "{failed:?}");
    // The batch read failed: no token for the batch; each record reads its own row.
    assert_eq!(step(core, &[Answer::Failed]), Step::Read { key: a });
    // The batch take failed: each record takes its own token.
    assert_eq!(step(core, &[Answer::Free, Answer::GateFailed]), Step::Token { key: a });
    // Before the window the prefetch reads nothing: the record is deferred.
    let early = core.step(0, (0, false), true, Phase::Early, Answers::default(), batch(&[])).unwrap();
    assert!(matches!(early, Step::Done { outcome: "deferred", .. }), "{early:?}");
}

#[test]
fn a_batch_of_first_deliveries_reads_nothing_and_its_claim_decides() {
    let mut model = Model::new(batched(), Rules::real()).unwrap();
    let core = &mut model.core;
    let a = core.key_of(0, 0).unwrap();
    let ctx = |mate_again, answers: &[Answer]| {
        let mut all = Answers::default();
        for x in answers {
            all = all.with(*x).unwrap();
        }
        Some(BatchCtx { mate: Some((0, false)), mate_again, answers: all })
    };
    // Both first deliveries: no read, the token take straight away, then the claim.
    let first = |core: &mut super::sender::Core, prefetch: &[Answer], own: &[Answer]| {
        let mut answers = Answers::default();
        for x in own {
            answers = answers.with(*x).unwrap();
        }
        core.step(0, (0, false), false, Phase::Open, answers, ctx(false, prefetch)).unwrap()
    };
    assert_eq!(first(core, &[], &[]), Step::BatchToken { keys: [Some(a), None] });
    assert_eq!(first(core, &[Answer::Admitted], &[]), Step::Claim { key: a, alias: None, listed: false });
    // The key turns out decided: the claim's refusal is the duplicate's answer.
    let sent = Answer::Held { state: notice_ledger::ledger::RowState::Sent, digest: Some(0), young: false };
    let refused = first(core, &[Answer::Admitted], &[sent]);
    assert!(matches!(refused, Step::Done { outcome: "suppressed", .. }), "{refused:?}");
    // One of the two was received before: the key is read first, as for a redelivery alone.
    let mixed = core.step(0, (0, false), false, Phase::Open, Answers::default(), ctx(true, &[])).unwrap();
    assert_eq!(mixed, Step::BatchRead { keys: [Some(a), None] });
}

#[test]
fn the_real_rules_hold_on_the_batch_path() {
    let run = run(batched(), Rules::real());
    clean(&run);
    // Batches of two (both orders) and the prefetch's own steps make a larger world than each
    // job reading alone.
    let alone = run_alone(Bounds { batch: 1, ..batched() });
    assert!(run.states > 2 * alone.states, "{} vs {}", run.states, alone.states);
}

fn run_alone(bounds: Bounds) -> Explored {
    let run = run(bounds, Rules::real());
    clean(&run);
    run
}

#[test]
fn only_the_batch_path_with_a_release_catches_a_stale_batch_read() {
    // The same world each job reading alone: the batch read is never made, the mutant changes
    // nothing, and it escapes — the batch world is the one that catches it.
    let alone = Bounds { batch: 1, ..batched() };
    let forced = explore(&mut [Model::build(alone, Rules::with(Mutant::StaleBatchRead)).unwrap()]).unwrap();
    assert!(forced.violation.is_none(), "caught without a batch read");
    assert_eq!(forced.states, run_alone(alone).states, "the mutant changed the world without a batch read");
    // Without an operator release it escapes too: a claim its own sender released was young
    // moments before, so a read that misses the release finds it in flight and comes back.
    let unreleased = Bounds { releases: 0, deliveries: 2, ..batched() };
    let forced =
        explore(&mut [Model::build(unreleased, Rules::with(Mutant::StaleBatchRead)).unwrap()]).unwrap();
    assert!(forced.violation.is_none(), "caught without a release");
    // With both: caught, the replay acked as a duplicate of a claim the operator had released.
    let caught = run(batched(), Rules::with(Mutant::StaleBatchRead));
    let Some((v, trace)) = caught.violation else { panic!("escaped over {} states", caught.states) };
    assert_eq!(v.invariant, Invariant::NoSilentEnd, "{}", v.detail);
    let text = trace.join("\n");
    assert!(text.contains("operator releases") && text.contains("batch read"), "{text}");
    assert!(text.contains("held (claimed, stale)") && text.contains("ends suppressed"), "{text}");
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
    let expected = [
        ("deliveries", Bounds::DEFAULT),
        ("withdraw", Bounds { withdraws: 1, releases: 0, ..Bounds::DEFAULT }),
        ("withdraw-release", Bounds { withdraws: 1, workers: 1, ..Bounds::DEFAULT }),
        ("batch", Bounds { batch: 2, deliveries: 1, in_flight_redelivery: false, ..Bounds::DEFAULT }),
        ("rotation", Bounds { rotation: true, releases: 0, ..Bounds::DEFAULT }),
        (
            "rotation-release",
            Bounds { rotation: true, deliveries: 1, in_flight_redelivery: false, ..Bounds::DEFAULT },
        ),
    ];
    assert_eq!(run, expected);
    assert_eq!(worlds(&["--rotation", "on"]), [("custom", Bounds { rotation: true, ..Bounds::DEFAULT })]);
    assert_eq!(worlds(&["--batch", "2"]), [("custom", Bounds { batch: 2, ..Bounds::DEFAULT })]);
    assert_eq!(worlds(&["--parking", "off"]), [("custom", Bounds { parking: false, ..Bounds::DEFAULT })]);
    assert_eq!(worlds(&["--withdraws", "1"]), [("custom", Bounds { withdraws: 1, ..Bounds::DEFAULT })]);
    assert_eq!(worlds(&["--stale-deletes"]).len(), 1);
    // Every mutant runs in some world of the default run, so `verify` alone checks all of them.
    for mutant in Mutant::ALL {
        assert!(run.iter().any(|(_, b)| mutant.runs_in(b)), "{} runs in no default world", mutant.name());
    }
}

#[test]
fn every_answer_survives_its_byte() {
    use notice_ledger::ledger::RowState;
    let mut all = vec![
        Answer::Free,
        Answer::Admitted,
        Answer::Limited,
        Answer::GateFailed,
        Answer::Minted,
        Answer::Recorded,
        Answer::Failed,
        Answer::Refused,
        Answer::Written,
        Answer::NotAccepted,
        Answer::Rejected,
        Answer::Unknown,
    ];
    all.extend((0..8).map(Answer::Accepted));
    for state in RowState::ALL {
        for digest in [None, Some(0), Some(1), Some(2)] {
            for young in [false, true] {
                all.push(Answer::Held { state, digest, young });
            }
        }
    }
    for answer in all {
        let answers = Answers::default().with(answer).unwrap();
        assert_eq!(answers.to_vec(), [answer], "{answer:?}");
    }
    // The state stays small: every world's frontier holds full states.
    // (217 B: a job's answers have a sixth byte, for the placement read while the secret rotates;
    // 232 B: a seventh, for putting a held claim on the quarantine view, and a row's `listed`;
    // 237 B: whether a job's record and its batch mate were received before, which decides
    // whether the sender reads them first.)
    assert!(
        std::mem::size_of::<super::model::State>() <= 237,
        "{}",
        std::mem::size_of::<super::model::State>()
    );
}
