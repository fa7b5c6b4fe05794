//! Breadth-first explicit-state search: every reachable state once, level by level, so the first
//! violation found has a shortest trace.
//!
//! Visited states are kept as 128-bit fingerprints ([`Lanes`]), not as states: a tenth of the
//! memory. Two distinct states sharing a fingerprint would hide one of them; if the fingerprint
//! behaves as a random function, with n states that happens with probability below n² / 2¹²⁹
//! (10⁻²³ at a hundred million states).

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::error::VerifyError;
use super::fast_hash::Lanes;
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

/// A state's 128-bit fingerprint: its `Hash` stream through two independent 64-bit lanes.
fn fingerprint(state: &State) -> u128 {
    let mut lanes = Lanes::default();
    state.hash(&mut lanes);
    lanes.wide()
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

/// The fingerprints of the states visited so far (a state's number lives in the frontier).
type Visited = HashSet<u128, BuildHasherDefault<Identity>>;

/// A successor not visited before its level, found by one thread; its state is at the same index
/// of its part's `states`.
struct Candidate {
    parent: u32,
    choice: u32,
    /// Stored as two words: a `u128` would pad the candidate to its 16-byte alignment.
    print: [u64; 2],
    /// Transitions of its chunk up to and including this one.
    at: u64,
    /// Whether the transition broke an invariant (reported whether `next` is new or not), or
    /// `next` did (reported if `next` is new): the violation is the part's `broken`.
    broken: Option<bool>,
}

/// One thread's share of a level. The buffers are kept from level to level: allocating them
/// afresh made the kernel zero their pages again every level.
#[derive(Default)]
struct Part {
    found: Vec<Candidate>,
    states: Vec<State>,
    /// The first broken invariant in the chunk; the thread stops at a broken transition, past
    /// which the merge never looks.
    broken: Vec<Violation>,
    transitions: u64,
    error: Option<VerifyError>,
    /// The fingerprints this part found in this level: two paths to one state within a level
    /// (moves that commute) are common, and each copy would cost a state's memory until the merge.
    level: Visited,
}

/// Frontiers smaller than this are expanded on one thread: a thread costs more than it saves.
const PARALLEL_FROM: usize = 4096;

fn wide(print: [u64; 2]) -> u128 {
    (u128::from(print[1]) << 64) | u128::from(print[0])
}

/// Expands `chunk` against the states visited before this level (read only, shared by the
/// threads) into `part`.
fn expand(model: &mut Model, chunk: &[State], ids: &[u32], seen: &Visited, part: &mut Part) {
    if let Err(e) = expand_into(model, chunk, ids, seen, part) {
        part.error = Some(e);
    }
}

fn expand_into(
    model: &mut Model,
    chunk: &[State],
    ids: &[u32],
    seen: &Visited,
    part: &mut Part,
) -> Result<(), VerifyError> {
    let mut succs: Vec<Succ> = Vec::new();
    for (state, index) in chunk.iter().zip(ids) {
        model.successors(state, &mut succs)?;
        // By reference: most successors were seen before, and moving each out would copy it.
        for (choice, succ) in succs.iter().enumerate() {
            part.transitions += 1;
            let choice = u32::try_from(choice).map_err(|_| VerifyError::Bound("successors".into()))?;
            let (print, broken) = match &succ.broken {
                Some(v) => (0, Some((v.clone(), true))),
                None => {
                    let print = fingerprint(&succ.next);
                    if seen.contains(&print) || !part.level.insert(print) {
                        continue;
                    }
                    (print, model.check(&succ.next)?.map(|v| (v, false)))
                }
            };
            let on_transition = broken.as_ref().map(|(_, t)| *t);
            part.found.push(Candidate {
                parent: *index,
                choice,
                print: [print as u64, (print >> 64) as u64],
                at: part.transitions,
                broken: on_transition,
            });
            part.states.push(succ.next.clone());
            if let Some((v, on_transition)) = broken {
                part.broken.push(v);
                if on_transition {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// Expands one level on as many threads as there are models: contiguous chunks of the frontier,
/// one part each, in frontier order (so numbers, counts and traces do not depend on the thread
/// count).
fn expand_level(
    models: &mut [Model],
    frontier: &Frontier,
    seen: &Visited,
    parts: &mut Vec<Part>,
    parallel_from: usize,
) -> Result<(), VerifyError> {
    let threads = if frontier.states.len() < parallel_from { 1 } else { models.len().max(1) };
    parts.resize_with(threads.max(parts.len()), Part::default);
    for part in parts.iter_mut() {
        part.found.clear();
        part.states.clear();
        part.broken.clear();
        part.transitions = 0;
        part.error = None;
        part.level.clear();
    }
    let size = frontier.states.len().div_ceil(threads).max(1);
    let panicked = std::thread::scope(|scope| {
        let mut work = frontier
            .states
            .chunks(size)
            .zip(frontier.ids.chunks(size))
            .zip(models.iter_mut())
            .zip(parts.iter_mut());
        let Some((((states, ids), model), part)) = work.next() else { return false };
        let others: Vec<_> = work
            .map(|(((states, ids), model), part)| scope.spawn(move || expand(model, states, ids, seen, part)))
            .collect();
        expand(model, states, ids, seen, part);
        // Every thread joined: a panicked one left unjoined would panic the scope.
        let mut panicked = false;
        for handle in others {
            panicked |= handle.join().is_err();
        }
        panicked
    });
    if panicked {
        return Err(VerifyError::Unexpected("a search thread panicked".into()));
    }
    Ok(())
}

/// One level of states, with their numbers.
#[derive(Default)]
struct Frontier {
    states: Vec<State>,
    ids: Vec<u32>,
}

/// One progress line on stderr per level (level, states, states/s, the next level's size),
/// rewritten in place, when a person is watching: `verify` sets it when stderr is a terminal and
/// the output is not `--json`. Never in tests or pipes, so counts and output stay as they were.
pub(crate) static PROGRESS: AtomicBool = AtomicBool::new(false);

fn progress(depth: usize, states: usize, next: usize, started: Instant) {
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r  level {depth:>3} · {} states · {} states/s · {} in the next level · {:.0} s   ",
        notice_ledger::text::thousands(states as u64),
        notice_ledger::text::thousands((states as f64 / secs) as u64),
        notice_ledger::text::thousands(next as u64),
        secs
    );
    let _ = err.flush();
}

/// Explores every state reachable from the start; stops at the first violation. `models` (one
/// or more, all of one world) are the threads' own copies of the world.
pub(crate) fn explore(models: &mut [Model]) -> Result<Explored, VerifyError> {
    explore_from(models, PARALLEL_FROM)
}

/// [`explore`], splitting every level of at least `parallel_from` states among the models.
pub(super) fn explore_from(models: &mut [Model], parallel_from: usize) -> Result<Explored, VerifyError> {
    let started = Instant::now();
    let model = models.first().ok_or_else(|| VerifyError::Unexpected("no model to explore".into()))?;
    let initial = model.initial();
    let mut seen = Visited::default();
    let mut parents: Vec<Parent> = vec![Parent { state: ROOT, choice: 0 }];
    seen.insert(fingerprint(&initial));
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
    let mut frontier = Frontier { states: vec![initial], ids: vec![0] };
    let mut parts: Vec<Part> = Vec::new();
    let mut depth = 0;
    let mut transitions = 0u64;
    while !frontier.states.is_empty() {
        expand_level(models, &frontier, &seen, &mut parts, parallel_from)?;
        frontier.states.clear();
        frontier.ids.clear();
        for part in parts.iter_mut() {
            let mut broken = part.broken.drain(..);
            for (c, next) in part.found.iter().zip(part.states.drain(..)) {
                let violation = match c.broken {
                    Some(_) => Some(
                        broken.next().ok_or_else(|| VerifyError::Unexpected("a lost violation".into()))?,
                    ),
                    None => None,
                };
                if let (Some(true), Some(v)) = (c.broken, &violation) {
                    let mut path = path_to(&parents, c.parent);
                    path.push(c.choice);
                    let trace = replay(models, &path)?;
                    return Ok(done(&seen, depth + 1, transitions + c.at, Some((v.clone(), trace))));
                }
                if !seen.insert(wide(c.print)) {
                    continue;
                }
                let id = u32::try_from(parents.len())
                    .map_err(|_| VerifyError::Bound("more than 4 billion states".into()))?;
                parents.push(Parent { state: c.parent, choice: c.choice });
                if let Some(v) = violation {
                    let trace = replay(models, &path_to(&parents, id))?;
                    return Ok(done(&seen, depth + 1, transitions + c.at, Some((v, trace))));
                }
                frontier.states.push(next);
                frontier.ids.push(id);
            }
            if let Some(e) = part.error.take() {
                return Err(e);
            }
            transitions += part.transitions;
        }
        if !frontier.states.is_empty() {
            depth += 1;
        }
        if PROGRESS.load(Ordering::Relaxed) {
            progress(depth, seen.len(), frontier.states.len(), started);
        }
    }
    if PROGRESS.load(Ordering::Relaxed) {
        eprintln!();
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
fn replay(models: &mut [Model], path: &[u32]) -> Result<Vec<String>, VerifyError> {
    let Some(model) = models.first_mut() else { return Ok(Vec::new()) };
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
