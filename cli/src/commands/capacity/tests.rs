use super::*;

fn close(actual: f64, expected: f64) {
    assert!((actual - expected).abs() <= expected.abs() * 1e-9 + 1e-9, "{actual} != {expected}");
}

fn verdict(p: &CapacityPlan, key: &str) -> Verdict {
    p.row(key).unwrap().verdict
}

#[test]
fn one_hundred_thousand_a_day_fits_the_default_quotas() {
    let p = plan(&Inputs::new(100_000).check().unwrap());
    // 100 000 / 86 400 = 1.157 407…/s; × 3 = 3.472 222…/s.
    close(p.avg_rate_per_sec, 100_000.0 / 86_400.0);
    close(p.peak_rate_per_sec, 3.472_222_222_222_222);
    // 30 days − 72 h = 27 days parked: 27 × 100 000 = 2 700 000, 27 % of 10 000 000.
    close(p.wait_days, 27.0);
    close(p.live_schedules, 2_700_000.0);
    close(p.row("live_schedules").unwrap().percent_of_quota.unwrap(), 27.0);
    assert_eq!(verdict(&p, "live_schedules"), Verdict::Ok);
    close(p.create_schedule_per_sec, 3.472_222_222_222_222);
    close(p.invocations_per_sec, 3.472_222_222_222_222);
    // 3.472 2… × 900 = 3 125.
    close(p.sqs_in_flight, 3_125.0);
    assert_eq!(verdict(&p, "sqs_in_flight"), Verdict::Ok);
    close(p.ses_rate_needed, 3.472_222_222_222_222);
    assert_eq!(verdict(&p, "ses_rate_needed"), Verdict::Unchecked);
    // 3 writes per sent notice: 10.416 6…/s.
    close(p.ledger_writes_per_sec, 10.416_666_666_666_666);
    assert!(p.quota_requests.is_empty(), "{:?}", p.quota_requests);
    assert_eq!(p.cohort_drain_secs, None);
}

#[test]
fn one_million_a_day_needs_a_schedule_quota_raise() {
    let p = plan(&Inputs::new(1_000_000).check().unwrap());
    // 1 000 000 / 86 400 × 3 = 34.722 2…/s.
    close(p.peak_rate_per_sec, 34.722_222_222_222_22);
    // 27 × 1 000 000 = 27 000 000: 270 % of 10 000 000.
    close(p.live_schedules, 27_000_000.0);
    close(p.row("live_schedules").unwrap().percent_of_quota.unwrap(), 270.0);
    assert_eq!(verdict(&p, "live_schedules"), Verdict::Raise);
    // 34.72 of 5 000 and of 1 000: fine.
    assert_eq!(verdict(&p, "create_schedule_per_sec"), Verdict::Ok);
    assert_eq!(verdict(&p, "invocations_per_sec"), Verdict::Ok);
    // 34.722… × 900 = 31 250, 26 % of 120 000.
    close(p.sqs_in_flight, 31_250.0);
    assert_eq!(verdict(&p, "sqs_in_flight"), Verdict::Ok);
    close(p.ledger_writes_per_sec, 104.166_666_666_666_67);
    // 2 × 27 000 000 = 54 000 000, already two significant figures.
    assert_eq!(p.quota_requests.len(), 1, "{:?}", p.quota_requests);
    assert_eq!(p.quota_requests[0].quota, "EventBridge Scheduler: schedules per Region");
    assert_eq!(p.quota_requests[0].request, 54_000_000.0);
}

#[test]
fn ten_million_a_day_exceeds_the_sqs_hard_limit() {
    let p = plan(&Inputs::new(10_000_000).check().unwrap());
    // 10 000 000 / 86 400 × 3 = 347.222…/s.
    close(p.peak_rate_per_sec, 347.222_222_222_222_2);
    // 27 × 10 000 000 = 270 000 000: 2 700 % of the quota.
    close(p.live_schedules, 270_000_000.0);
    assert_eq!(verdict(&p, "live_schedules"), Verdict::Raise);
    // 347.2 / 5 000 = 6.9 %; 347.2 / 1 000 = 34.7 %: both below half.
    assert_eq!(verdict(&p, "create_schedule_per_sec"), Verdict::Ok);
    assert_eq!(verdict(&p, "invocations_per_sec"), Verdict::Ok);
    // 347.22… × 900 = 312 500 > 120 000: cannot be raised.
    close(p.sqs_in_flight, 312_500.0);
    assert_eq!(verdict(&p, "sqs_in_flight"), Verdict::HardLimit);
    // 347.22… × 3 = 1 041.67 writes/s.
    close(p.ledger_writes_per_sec, 1_041.666_666_666_666_7);
    // Only the schedule quota is requested (2 × 270 000 000); SQS is a hard limit, not a request.
    let requests: Vec<(&str, f64)> = p.quota_requests.iter().map(|q| (q.quota, q.request)).collect();
    assert_eq!(requests, [("EventBridge Scheduler: schedules per Region", 540_000_000.0)]);
    // 312 500 / 60 000 = 5.2: at least 6 queues keep each under half the limit.
    assert!(p.notes.iter().any(|n| n.contains("at least 6 queues")), "{:?}", p.notes);
}

#[test]
fn a_fixed_billing_day_wakes_the_cohort_within_the_spread() {
    let inputs =
        Inputs { fixed_billing_day: true, spread_secs: 3_600, ..Inputs::new(1_000_000) }.check().unwrap();
    let p = plan(&inputs);
    // 1 000 000 / 3 600 = 277.78/s, for invocations and for SES (3 600 > 60).
    close(p.invocations_per_sec, 277.777_777_777_777_8);
    assert_eq!(rate(p.invocations_per_sec), "277.8");
    close(p.ses_rate_needed, 277.777_777_777_777_8);
    assert_eq!(rate(p.ses_rate_needed), "277.8");
    assert_eq!(verdict(&p, "invocations_per_sec"), Verdict::Ok);
    // Creating schedules still follows the enqueue rate.
    close(p.create_schedule_per_sec, 34.722_222_222_222_22);
    // 1 000 000 / 1 000 invocations/s = 1 000 s to drain.
    assert_eq!(p.cohort_drain_secs, Some(1_000.0));
    // min(1 000 000, 277.78 × 900 = 250 000) = 250 000: over the hard limit.
    close(p.sqs_in_flight, 250_000.0);
    assert_eq!(verdict(&p, "sqs_in_flight"), Verdict::HardLimit);
    // The ledger follows the send rate: 277.78 × 3 = 833.3 writes/s.
    close(p.ledger_writes_per_sec, 833.333_333_333_333_4);
}

#[test]
fn a_fixed_billing_day_without_spread_wakes_in_one_second() {
    let inputs = Inputs { fixed_billing_day: true, ..Inputs::new(1_000_000) }.check().unwrap();
    let p = plan(&inputs);
    // V / max(0, 1) = 1 000 000/s; SES over max(0, 60) s = 16 666.7/s; SQS min(V, 9 × 10^8) = V.
    close(p.invocations_per_sec, 1_000_000.0);
    close(p.ses_rate_needed, 1_000_000.0 / 60.0);
    close(p.sqs_in_flight, 1_000_000.0);
    assert_eq!(verdict(&p, "invocations_per_sec"), Verdict::Raise);
    // 1 000 000 / 500 = 2 000 s of spread keeps it under half of 1 000/s.
    assert!(p.notes.iter().any(|n| n.contains("at least 2 000 s")), "{:?}", p.notes);
}

#[test]
fn the_spread_stops_short_of_the_window_close() {
    let inputs = Inputs { fixed_billing_day: true, spread_secs: 1_000_000, ..Inputs::new(1_000_000) };
    let p = plan(&inputs.check().unwrap());
    // (72 − 24) h = 172 800 s, less the 900 s margin: 171 900 s of room.
    close(effective_spread(&p.inputs), 171_900.0);
    close(p.invocations_per_sec, 1_000_000.0 / 171_900.0);
    assert!(p.notes.iter().any(|n| n.contains("cut to 171 900 s")), "{:?}", p.notes);
}

#[test]
fn a_two_day_lead_parks_nothing() {
    let p = plan(&Inputs { lead_days: 2.0, ..Inputs::new(1_000_000) }.check().unwrap());
    // 2 days < 72 h: jobs arrive inside their window.
    assert_eq!(p.wait_days, 0.0);
    assert_eq!(p.live_schedules, 0.0);
    assert_eq!(p.create_schedule_per_sec, 0.0);
    assert_eq!(p.invocations_per_sec, 0.0);
    assert_eq!(verdict(&p, "live_schedules"), Verdict::Ok);
    assert!(p.quota_requests.is_empty());
    // Still sent at the peak rate.
    close(p.ses_rate_needed, 34.722_222_222_222_22);
}

#[test]
fn the_ses_rate_is_judged_when_given() {
    let p = plan(&Inputs { ses_rate: Some(14.0), ..Inputs::new(1_000_000) }.check().unwrap());
    // 34.72 / 14 = 248 %: raise to 2 × 34.72 = 69.44 → 70/s.
    assert_eq!(verdict(&p, "ses_rate_needed"), Verdict::Raise);
    let ses = p.quota_requests.iter().find(|q| q.quota.starts_with("SES")).unwrap();
    assert_eq!(ses.request, 70.0);
}

#[test]
fn closes_at_or_after_opens_is_an_error_naming_both_flags() {
    for closes_hours in [72.0, 80.0] {
        let err = Inputs { closes_hours, ..Inputs::new(1_000) }.check().unwrap_err().to_string();
        assert!(err.contains("--closes-hours") && err.contains("--opens-hours"), "{err}");
    }
    let err = Inputs::new(0).check().unwrap_err().to_string();
    assert!(err.contains("--per-day"), "{err}");
    let err = Inputs { peak_factor: 0.5, ..Inputs::new(1) }.check().unwrap_err().to_string();
    assert!(err.contains("--peak-factor"), "{err}");
    let err = Inputs { lead_days: -1.0, ..Inputs::new(1) }.check().unwrap_err().to_string();
    assert!(err.contains("--lead-days"), "{err}");
}

#[test]
fn numbers_are_rounded_for_people() {
    assert_eq!(count(27_000_000.0), "27 000 000");
    assert_eq!(count(3_125.0), "3 125");
    assert_eq!(count(999.0), "999");
    assert_eq!(rate(3.472_222), "3.47");
    assert_eq!(rate(34.722_22), "34.7");
    assert_eq!(rate(1_041.67), "1 042");
    assert_eq!(rate(14.0), "14");
    assert_eq!(rate(0.0), "0");
    assert_eq!(round_up_sensibly(69.44), 70.0);
    assert_eq!(round_up_sensibly(694.4), 700.0);
    assert_eq!(round_up_sensibly(54_000_000.0), 54_000_000.0);
    assert_eq!(round_up_sensibly(54_000_001.0), 55_000_000.0);
    assert_eq!(round_up_sensibly(0.7), 1.0);
}
