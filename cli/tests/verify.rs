//! `noticectl verify` as CI runs it: a small world, the JSON report, and the exit code that
//! fails a build when the real rules break or a mutant escapes.

use std::process::Command;

use serde_json::Value;

fn verify(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_noticectl"))
        .arg("verify")
        .args(args)
        .output()
        .expect("run noticectl verify");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.code(), json, stderr)
}

#[test]
fn a_small_world_passes_and_every_mutant_is_caught_with_a_trace() {
    let (code, report, stderr) =
        verify(&["--workers", "2", "--deliveries", "2", "--releases", "0", "--json"]);
    assert_eq!(code, Some(0), "{report:#}\n{stderr}");
    assert!(report["states"].as_u64().unwrap_or(0) > 1_000, "{report:#}");
    assert!(report["depth"].as_u64().unwrap_or(0) > 10, "{report:#}");
    assert_eq!(report["violations"], serde_json::json!([]));
    let mutants = report["mutants"].as_array().expect("mutants");
    assert_eq!(mutants.len(), 6);
    for m in mutants {
        assert_eq!(m["caught"], true, "{m:#}");
        assert!(m["trace"].as_array().is_some_and(|t| !t.is_empty()), "{m:#}");
    }
}

#[test]
fn a_violation_of_the_real_rules_fails_the_command_and_prints_its_trace() {
    // The known gap of in-flight redelivery (see README): found, reported, exit code 1.
    let args =
        ["--workers", "2", "--deliveries", "1", "--releases", "0", "--in-flight-redelivery", "--no-mutants"];
    let (code, report, stderr) = verify(&[&args[..], &["--json"]].concat());
    assert_eq!(code, Some(1), "{report:#}\n{stderr}");
    let v = &report["violations"][0];
    assert_eq!(v["invariant"], "no_silent_end", "{report:#}");
    assert!(v["trace"].as_array().is_some_and(|t| t.len() >= 5), "{report:#}");

    let out = Command::new(env!("CARGO_BIN_EXE_noticectl")).arg("verify").args(args).output().expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 violation") && text.contains("FAIL"), "{text}");
}

#[test]
fn bounds_outside_the_model_are_refused() {
    let (code, _, stderr) = verify(&["--workers", "4"]);
    assert_eq!(code, Some(2), "{stderr}");
    let (code, _, stderr) = verify(&["--notices", "3", "--deliveries", "4"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("at most"), "{stderr}");
}
