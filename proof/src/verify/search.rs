//! Breadth-first explicit-state search: every reachable state once, level by level, so the first
//! violation found has a shortest trace.
//!
//! Visited states are kept as 128-bit fingerprints ([`Lanes`]), not as states: a tenth of the
//! memory. Two distinct states sharing a fingerprint would hide one of them; if the fingerprint
//! behaves as a random function, with n states that happens with probability below n² / 2¹²⁹
//! (10⁻²³ at a hundred million states).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
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

type Visited = HashMap<u128, u32, BuildHasherDefault<Identity>>;

/// A successor not visited before its level, found by one thread, merged in frontier order.
struct Candidate {
    parent: u32,
    choice: u32,
    print: u128,
    next: State,
    /// A broken invariant: of the transition (`on_transition`: reported whether `next` is new or
    /// not), or of `next` (reported if `next` is new).
    broken: Option<Violation>,
    on_transition: bool,
    /// Transitions of its chunk up to and including this one.
    at: u64,
}

/// One thread's share of a level.
struct Part {
    found: Vec<Candidate>,
    transitions: u64,
}

/// Frontiers smaller than this are expanded on one thread: a thread costs more than it saves.
const PARALLEL_FROM: usize = 4096;

/// Expands `chunk` against the states visited before this level (read only, shared by the
/// threads); stops at the first broken transition, past which the merge never looks.
fn expand(model: &mut Model, chunk: &[(State, u32)], seen: &Visited) -> Result<Part, VerifyError> {
    let mut succs: Vec<Succ> = Vec::new();
    let mut found = Vec::new();
    let mut transitions = 0u64;
    for (state, index) in chunk {
        model.successors(state, &mut succs)?;
        for (choice, succ) in succs.drain(..).enumerate() {
            transitions += 1;
            let choice = u32::try_from(choice).map_err(|_| VerifyError::Bound("successors".into()))?;
            let (print, broken, on_transition) = match succ.broken {
                Some(v) => (0, Some(v), true),
                None => {
                    let print = fingerprint(&succ.next);
                    if seen.contains_key(&print) {
                        continue;
                    }
                    (print, model.check(&succ.next)?, false)
                }
            };
            found.push(Candidate {
                parent: *index,
                choice,
                print,
                next: succ.next,
                broken,
                on_transition,
                at: transitions,
            });
            if on_transition {
                return Ok(Part { found, transitions });
            }
        }
    }
    Ok(Part { found, transitions })
}

/// Expands one level on as many threads as there are models: contiguous chunks of the frontier,
/// their parts in frontier order (so ids, counts and traces do not depend on the thread count).
fn expand_level(
    models: &mut [Model],
    frontier: &[(State, u32)],
    seen: &Visited,
    parallel_from: usize,
) -> Vec<Result<Part, VerifyError>> {
    let threads = if frontier.len() < parallel_from { 1 } else { models.len().max(1) };
    let size = frontier.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let mut chunks = frontier.chunks(size);
        let mut models = models.iter_mut();
        let (Some(own), Some(model)) = (chunks.next(), models.next()) else { return Vec::new() };
        let others: Vec<_> = chunks
            .zip(models)
            .map(|(chunk, model)| scope.spawn(move || expand(model, chunk, seen)))
            .collect();
        let mut parts = vec![expand(model, own, seen)];
        for handle in others {
            parts.push(
                handle
                    .join()
                    .unwrap_or_else(|_| Err(VerifyError::Unexpected("a search thread panicked".into()))),
            );
        }
        parts
    })
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
    seen.insert(fingerprint(&initial), 0);
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
    let mut frontier = vec![(initial, 0u32)];
    let mut depth = 0;
    let mut transitions = 0u64;
    while !frontier.is_empty() {
        let parts = expand_level(models, &frontier, &seen, parallel_from);
        drop(frontier);
        let mut next_level = Vec::new();
        for part in parts {
            let part = part?;
            for c in part.found {
                if c.on_transition {
                    let mut path = path_to(&parents, c.parent);
                    path.push(c.choice);
                    let trace = replay(models, &path)?;
                    let v = c.broken.ok_or_else(|| {
                        VerifyError::Unexpected("a broken transition without its violation".into())
                    })?;
                    return Ok(done(&seen, depth + 1, transitions + c.at, Some((v, trace))));
                }
                let id = u32::try_from(parents.len())
                    .map_err(|_| VerifyError::Bound("more than 4 billion states".into()))?;
                match seen.entry(c.print) {
                    Entry::Occupied(_) => continue,
                    Entry::Vacant(e) => e.insert(id),
                };
                parents.push(Parent { state: c.parent, choice: c.choice });
                if let Some(v) = c.broken {
                    let trace = replay(models, &path_to(&parents, id))?;
                    return Ok(done(&seen, depth + 1, transitions + c.at, Some((v, trace))));
                }
                next_level.push((c.next, id));
            }
            transitions += part.transitions;
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
