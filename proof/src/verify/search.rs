//! Breadth-first explicit-state search: every reachable state once, level by level, so the first
//! violation found has a shortest trace.
//!
//! Visited states are kept as 128-bit fingerprints (two SipHash-1-3 passes), not as states: a
//! tenth of the memory. Two distinct states sharing a fingerprint would hide one of them; with
//! n states that happens with probability below n² / 2¹²⁹ (10⁻²⁵ at ten million states).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use super::error::VerifyError;
use super::model::{Model, State, Succ, Violation};
use super::world::MAX_SLOTS;

/// What one exhaustive run found.
pub(crate) struct Explored {
    pub(crate) states: usize,
    pub(crate) transitions: u64,
    /// Longest shortest path from the start (BFS levels).
    pub(crate) depth: usize,
    pub(crate) elapsed: Duration,
    /// The first violation, with its trace (one line per step).
    pub(crate) violation: Option<(Violation, Vec<String>)>,
}

/// How a state was first reached: its parent and the index of the transition among the parent's
/// successors (replayed to print a trace).
#[derive(Clone, Copy)]
struct Parent {
    state: u32,
    choice: u32,
}

const ROOT: u32 = u32::MAX;

/// A state's 128-bit fingerprint: its `Hash` stream packed into bytes, then two SipHash-1-3 passes
/// with different prefixes over those bytes.
fn fingerprint(state: &State) -> u128 {
    let mut packed = Packed::default();
    state.hash(&mut packed);
    let bytes = &packed.buf[..packed.len.min(packed.buf.len())];
    let mut low = DefaultHasher::new();
    low.write(bytes);
    let mut high = DefaultHasher::new();
    high.write_u64(0x9e37_79b9_7f4a_7c15);
    high.write(bytes);
    // An overflowing buffer (a state far beyond the bounds) still hashes its length.
    low.write_usize(packed.len);
    (u128::from(high.finish()) << 64) | u128::from(low.finish())
}

/// Collects a `Hash` stream with every integer as a LEB128 varint (small numbers, one byte each):
/// prefix-free, so distinct streams stay distinct.
struct Packed {
    buf: [u8; 512],
    len: usize,
}

impl Default for Packed {
    fn default() -> Self {
        Self { buf: [0; 512], len: 0 }
    }
}

impl Packed {
    fn varint(&mut self, mut n: u64) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            let out = if n == 0 { byte } else { byte | 0x80 };
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = out;
            }
            self.len += 1;
            if n == 0 {
                return;
            }
        }
    }
}

impl Hasher for Packed {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.varint(bytes.len() as u64);
        for b in bytes {
            self.varint(u64::from(*b));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.varint(u64::from(n));
    }
    fn write_u16(&mut self, n: u16) {
        self.varint(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.varint(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.varint(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.varint(n as u64);
    }
    fn write_isize(&mut self, n: isize) {
        self.varint(n as u64);
    }
}

/// Fingerprints are already uniform: the map uses their low bits as they are.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64;
    }
}

type Visited = HashMap<u128, u32, BuildHasherDefault<Identity>>;

/// Explores every state reachable from the start; stops at the first violation.
pub(crate) fn explore(model: &mut Model) -> Result<Explored, VerifyError> {
    let started = Instant::now();
    let initial = model.initial();
    let mut seen = Visited::default();
    let mut parents: Vec<Parent> = vec![Parent { state: ROOT, choice: 0 }];
    seen.insert(fingerprint(&initial), 0);
    let mut frontier = vec![(initial.clone(), 0u32)];
    let mut succs: Vec<Succ> = Vec::new();
    let mut depth = 0;
    let mut transitions = 0u64;
    let done = |seen: &Visited, depth, transitions, violation| Explored {
        states: seen.len(),
        transitions,
        depth,
        elapsed: started.elapsed(),
        violation,
    };
    if let Some(v) = model.check(&initial)? {
        return Ok(done(&seen, 0, 0, Some((v, Vec::new()))));
    }
    while !frontier.is_empty() {
        let mut next_level = Vec::new();
        for (state, index) in frontier {
            model.successors(&state, &mut succs)?;
            for (choice, succ) in succs.drain(..).enumerate() {
                transitions += 1;
                let choice = u32::try_from(choice).map_err(|_| VerifyError::Bound("successors".into()))?;
                if let Some(v) = succ.broken {
                    let mut path = path_to(&parents, index);
                    path.push(choice);
                    let trace = replay(model, &path)?;
                    return Ok(done(&seen, depth + 1, transitions, Some((v, trace))));
                }
                let print = fingerprint(&succ.next);
                if seen.contains_key(&print) {
                    continue;
                }
                let id = u32::try_from(parents.len())
                    .map_err(|_| VerifyError::Bound("more than 4 billion states".into()))?;
                parents.push(Parent { state: index, choice });
                seen.insert(print, id);
                if let Some(v) = model.check(&succ.next)? {
                    let trace = replay(model, &path_to(&parents, id))?;
                    return Ok(done(&seen, depth + 1, transitions, Some((v, trace))));
                }
                next_level.push((succ.next, id));
            }
        }
        if !next_level.is_empty() {
            depth += 1;
        }
        frontier = next_level;
    }
    Ok(done(&seen, depth, transitions, None))
}

/// The transition choices from the start to state `index`.
fn path_to(parents: &[Parent], mut index: u32) -> Vec<u32> {
    let mut path = Vec::new();
    while let Some(p) = parents.get(index as usize).filter(|p| p.state != ROOT) {
        path.push(p.choice);
        index = p.state;
    }
    path.reverse();
    path
}

/// Walks `path` again from the start and describes every step.
fn replay(model: &mut Model, path: &[u32]) -> Result<Vec<String>, VerifyError> {
    let mut state = model.initial();
    let mut succs = Vec::new();
    let mut lines = Vec::with_capacity(path.len());
    // States keep workers sorted; the trace keeps calling each worker by the name it started with.
    let mut names = [0u8, 1, 2];
    let mut messages: [u8; MAX_SLOTS] = std::array::from_fn(|i| i as u8);
    for &choice in path {
        model.successors(&state, &mut succs)?;
        let succ = succs.drain(..).nth(choice as usize).ok_or_else(|| {
            VerifyError::Unexpected("a trace did not replay (nondeterministic successors)".into())
        })?;
        lines.push(model.describe(&succ.label, &succ.next, &names, &messages));
        let mut renamed = messages;
        for (old, new) in succ.moved.iter().enumerate() {
            if let (Some(slot), Some(name)) = (renamed.get_mut(usize::from(*new)), messages.get(old)) {
                *slot = *name;
            }
        }
        messages = renamed;
        let mut renamed = names;
        for (old, new) in succ.renumbered.iter().enumerate() {
            if let (Some(slot), Some(name)) = (renamed.get_mut(usize::from(*new)), names.get(old)) {
                *slot = *name;
            }
        }
        names = renamed;
        state = succ.next;
    }
    Ok(lines)
}
