//! What `notice-proof verify` prints: a summary, or JSON.

use std::fmt::Write as _;

use notice_ledger::text::thousands;
use serde::Serialize;

use super::args::{Bounds, Faults};
use super::model::Invariant;
use super::mutants::Mutant;
use super::search::Explored;

/// A violation with its step-by-step trace.
#[derive(Debug, Serialize)]
pub(crate) struct Found {
    pub(crate) invariant: Invariant,
    pub(crate) detail: String,
    pub(crate) trace: Vec<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct MutantReport {
    pub(crate) name: &'static str,
    pub(crate) what: &'static str,
    pub(crate) caught: bool,
    pub(crate) invariant: Option<Invariant>,
    pub(crate) detail: Option<String>,
    pub(crate) trace: Vec<String>,
    pub(crate) states: usize,
    pub(crate) seconds: f64,
}

impl MutantReport {
    pub(super) fn new(mutant: Mutant, run: Explored) -> Self {
        let seconds = run.elapsed.as_secs_f64();
        let (invariant, detail, trace) = match run.violation {
            Some((v, trace)) => (Some(v.invariant), Some(v.detail), trace),
            None => (None, None, Vec::new()),
        };
        Self {
            name: mutant.name(),
            what: mutant.what(),
            caught: invariant.is_some(),
            invariant,
            detail,
            trace,
            states: run.states,
            seconds,
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct Report {
    /// The world's name in the default run (`custom`: the one world the flags describe).
    pub(crate) world: &'static str,
    pub(crate) bounds: Bounds,
    /// States of the real rules' world.
    pub(crate) states: usize,
    pub(crate) transitions: u64,
    pub(crate) depth: usize,
    pub(crate) seconds: f64,
    pub(crate) invariants: Vec<&'static str>,
    /// Violations of the real rules (the search stops at the first).
    pub(crate) violations: Vec<Found>,
    pub(crate) mutants: Vec<MutantReport>,
}

impl Report {
    pub(super) fn new(bounds: Bounds, real: Explored, mutants: Vec<MutantReport>) -> Self {
        let violations = real
            .violation
            .map(|(v, trace)| Found { invariant: v.invariant, detail: v.detail, trace })
            .into_iter()
            .collect();
        Self {
            world: "custom",
            bounds,
            states: real.states,
            transitions: real.transitions,
            depth: real.depth,
            seconds: real.elapsed.as_secs_f64(),
            invariants: Invariant::ALL.iter().map(|i| i.statement()).collect(),
            violations,
            mutants,
        }
    }

    pub(super) fn named(self, world: &'static str) -> Self {
        Self { world, ..self }
    }

    /// Seconds the mutants' runs took together.
    pub(crate) fn mutant_seconds(&self) -> f64 {
        self.mutants.iter().map(|m| m.seconds).sum()
    }

    /// No violation of the real rules, and every mutant caught.
    pub(crate) fn passed(&self) -> bool {
        self.violations.is_empty() && self.mutants.iter().all(|m| m.caught)
    }

    pub(crate) fn text(&self) -> String {
        let b = &self.bounds;
        let mut out = String::new();
        let plural = |n: u8, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        let _ = writeln!(
            out,
            "notice-proof verify: every interleaving of {}claim → send → commit, with the real rules",
            match (b.rate_gate, b.batch > 1) {
                (true, true) => "the batch's read → the batch's token take → each record's ",
                (true, false) => "read → token → ",
                (false, _) => "",
            }
        );
        let _ = writeln!(
            out,
            "world: {}, {} of notice A, {} of A, {}, {} (each with a replay), rate gate {}, ledger faults {}, in-flight redelivery {}, stale-receipt deletes {}, parking {}, {}",
            plural(b.notices, "notice"),
            plural(b.deliveries, "delivery").replace("deliverys", "deliveries"),
            plural(b.withdraws, "withdraw"),
            plural(b.workers, "worker"),
            plural(b.releases, "operator release"),
            if b.rate_gate { "on" } else { "off" },
            match b.ledger_faults {
                Faults::Off => "off",
                Faults::Clean => "clean",
                Faults::Ambiguous => "ambiguous",
            },
            if b.in_flight_redelivery { "on" } else { "off" },
            if b.stale_deletes { "on" } else { "off" },
            if b.parking { "on" } else { "off" },
            if b.batch > 1 {
                format!("batches of up to {} records (one prefetch each)", b.batch)
            } else {
                "each job reads alone".to_owned()
            },
        );
        let _ = writeln!(out, "invariants, checked in every state:");
        for i in &self.invariants {
            let _ = writeln!(out, "  • {i}");
        }
        let _ = writeln!(
            out,
            "real rules: {} states, {} transitions, depth {}, {:.1} s — {} violation{}",
            thousands(self.states as u64),
            thousands(self.transitions),
            self.depth,
            self.seconds,
            self.violations.len(),
            if self.violations.len() == 1 { "" } else { "s" }
        );
        for v in &self.violations {
            let _ = writeln!(out, "  ✗ {}: {}", v.invariant.statement(), v.detail);
            trace(&mut out, &v.trace);
        }
        if !self.mutants.is_empty() {
            let caught = self.mutants.iter().filter(|m| m.caught).count();
            let _ = writeln!(out, "mutants: {caught}/{} caught", self.mutants.len());
            for m in &self.mutants {
                let mark = if m.caught { "✓" } else { "✗ ESCAPED" };
                let _ = writeln!(out, "  {mark} {} — {}", m.name, m.what);
                if let (Some(i), Some(d)) = (m.invariant, &m.detail) {
                    let _ = writeln!(
                        out,
                        "    broke: {} — {d} ({} steps; {} states, {:.1} s)",
                        i.statement(),
                        m.trace.len(),
                        thousands(m.states as u64),
                        m.seconds
                    );
                    trace(&mut out, &m.trace);
                } else {
                    let _ =
                        writeln!(out, "    no invariant broke over {} states", thousands(m.states as u64));
                }
            }
        }
        let _ = writeln!(out, "{}", if self.passed() { "PASS" } else { "FAIL" });
        out
    }
}

fn trace(out: &mut String, steps: &[String]) {
    for (i, step) in steps.iter().enumerate() {
        let _ = writeln!(out, "      {:>2}. {step}", i + 1);
    }
}
