//! The simulation's claims, checked on small seeded traces: the durable ledger neither duplicates
//! nor loses where no dedupe at all duplicates, and parking survives lead times the queue cannot
//! hold.

use super::args::{parse_params, Params};
use super::strategies::Strategy;
use super::{simulate, Report};

fn params(extra: &[&str]) -> Params {
    parse_params(extra).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn durable_ledger_neither_duplicates_nor_loses_while_no_dedupe_duplicates() {
    for seed in ["1", "2", "3"] {
        let p = params(&["--notices", "2000", "--seed", seed]);
        let report = simulate(&p, &[Strategy::None, Strategy::DurableLedger]).await.unwrap();
        let (none, durable) = (&report.rows[0], &report.rows[1]);
        assert!(none.duplicates > 0, "seed {seed}: the trace never redelivered: {none:?}");
        assert_eq!(durable.duplicates, 0, "seed {seed}: {durable:?}");
        assert_eq!(durable.lost, 0, "seed {seed}: {durable:?}");
        assert_eq!(durable.missed, 0, "seed {seed}: {durable:?}");
        assert_eq!(durable.delivered + durable.quarantined - durable.quarantined_sent, 2000, "{durable:?}");
        assert!(durable.quarantined > 0, "seed {seed}: unknown outcomes must show up as quarantine");
        assert!(durable.counters.redelivered_while_in_flight > 0, "seed {seed}: {durable:?}");
        assert!(durable.counters.jobs_killed_by_redeploy > 0, "seed {seed}: {durable:?}");
    }
}

#[tokio::test]
async fn same_seed_same_report_and_other_seed_other_report() {
    let a = simulate(&params(&["--notices", "300", "--seed", "9"]), &[Strategy::None]).await.unwrap();
    let b = simulate(&params(&["--notices", "300", "--seed", "9"]), &[Strategy::None]).await.unwrap();
    let c = simulate(&params(&["--notices", "300", "--seed", "10"]), &[Strategy::None]).await.unwrap();
    let key = |r: &Report| serde_json::to_string(&r.rows).unwrap();
    assert_eq!(key(&a), key(&b));
    assert_ne!(key(&a), key(&c));
}

#[tokio::test]
async fn without_chaos_every_strategy_delivers_each_notice_once() {
    let p = params(&[
        "--notices",
        "200",
        "--crash-rate",
        "0",
        "--unknown-rate",
        "0",
        "--throttle-rate",
        "0",
        "--ghost-rate",
        "0",
        "--producer-dup-rate",
        "0",
        "--redeploy-at",
        "off",
        "--replay-at",
        "off",
        "--latency-cap",
        "1s",
    ]);
    let report = simulate(&p, &Strategy::all(&p)).await.unwrap();
    for row in &report.rows {
        assert_eq!((row.delivered, row.duplicates, row.lost, row.quarantined), (200, 0, 0, 0), "{row:?}");
    }
}

/// Thirty-day leads on the queue alone hide 12 h a receive and would reach the redrive's 20
/// receives (and the 14 days of retention); from the tenth receive on each wait is a new message,
/// so hopping loses nothing either — it only costs receives and in-flight messages, which parking
/// saves.
#[tokio::test]
async fn thirty_day_leads_lose_nothing_hopping_on_the_queue_or_parked() {
    for seed in ["1", "2", "3"] {
        let p = params(&["--notices", "300", "--seed", seed, "--lead-days", "30"]);
        let strategies = [Strategy::DurableLedger, Strategy::DurableLedgerParking];
        let report = simulate(&p, &strategies).await.unwrap();
        let (hops, parking) = (&report.rows[0], &report.rows[1]);
        assert_eq!((hops.duplicates, hops.lost, hops.missed), (0, 0, 0), "seed {seed}: {hops:?}");
        let h = &hops.counters;
        assert_eq!(h.dead_lettered_by_receive_count + h.expired_by_retention, 0, "seed {seed}: {h:?}");
        assert!(h.requeued > 0, "seed {seed}: the long waits went back as new messages: {h:?}");
        assert!(h.receives > 10 * parking.counters.receives, "seed {seed}: hopping costs receives: {h:?}");
        assert_eq!((parking.duplicates, parking.lost, parking.missed), (0, 0, 0), "seed {seed}: {parking:?}");
        let c = &parking.counters;
        assert_eq!(c.dead_lettered_by_receive_count + c.expired_by_retention, 0, "seed {seed}: {c:?}");
        assert!(c.parked > 0 && c.unparked == c.parked, "seed {seed}: {c:?}");
        assert!(c.park_conflicts > 0, "seed {seed}: producer duplicates must park twice: {c:?}");
        assert_eq!(parking.delivered + parking.quarantined - parking.quarantined_sent, 300, "{parking:?}");
    }
}

/// Without a receive limit the 14 days of retention would drop what hides for 30 days; a
/// requeued job is a new message, with retention of its own.
#[tokio::test]
async fn a_requeued_job_starts_its_retention_anew() {
    let p = params(&["--notices", "300", "--lead-days", "30", "--max-receive-count", "1000"]);
    let report = simulate(&p, &[Strategy::DurableLedger, Strategy::DurableLedgerParking]).await.unwrap();
    let (hops, parking) = (&report.rows[0], &report.rows[1]);
    assert_eq!((hops.lost, hops.counters.expired_by_retention), (0, 0), "{hops:?}");
    assert!(hops.counters.requeued > 0, "{hops:?}");
    assert_eq!((parking.duplicates, parking.lost, parking.missed), (0, 0, 0), "{parking:?}");
}

#[tokio::test]
async fn a_crash_between_park_and_ack_parks_again_and_loses_nothing() {
    // No producer duplicates and no broker ghosts: every conflict is a redelivery after a crash.
    let p = params(&[
        "--notices",
        "300",
        "--lead-days",
        "30",
        "--crash-rate",
        "0.05",
        "--producer-dup-rate",
        "0",
        "--ghost-rate",
        "0",
    ]);
    let report = simulate(&p, &[Strategy::DurableLedgerParking]).await.unwrap();
    let parking = &report.rows[0];
    assert!(parking.counters.park_conflicts > 0, "{parking:?}");
    assert_eq!((parking.duplicates, parking.lost, parking.missed), (0, 0, 0), "{parking:?}");
}
