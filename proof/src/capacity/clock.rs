//! Virtual time. The real send path awaits modelled services; each await suspends its task until
//! the simulated clock reaches the answer, so an hour of traffic runs in seconds and one seed
//! always gives one run.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use chrono::{DateTime, TimeDelta, TimeZone, Utc};

/// Simulated microseconds since the run's start.
pub(super) type Us = i64;
pub(super) const MS: Us = 1_000;
pub(super) const SEC: Us = 1_000_000;
pub(super) const MINUTE: Us = 60 * SEC;

/// A task of the run's executor (one Lambda invocation, one schedule's firing …).
pub(super) type TaskId = u32;

/// The instant the run starts at: a Monday, far from any real clock, so nothing depends on when
/// the run happens.
pub(super) fn epoch() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2027, 1, 4, 0, 0, 0).single().unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// The wall-clock instant of simulated time `t`.
pub(super) fn at(t: Us) -> DateTime<Utc> {
    epoch() + TimeDelta::microseconds(t)
}

/// Simulated time of a wall-clock instant.
pub(super) fn since_epoch(instant: DateTime<Utc>) -> Us {
    (instant - epoch()).num_microseconds().unwrap_or(Us::MAX)
}

#[derive(Default)]
struct State {
    now: Us,
    /// The task being polled: a sleep registers its wake-up for it.
    current: Option<TaskId>,
    /// Wake-ups registered since the executor last collected them, each with the waker of the
    /// future that slept: combinators that poll only woken children (`join_all` of many) need it.
    wakes: Vec<(Us, TaskId, Waker)>,
}

/// The run's clock, shared by the executor and every modelled service.
#[derive(Clone, Default)]
pub(super) struct Clock(Arc<Mutex<State>>);

/// The sender's clock port on simulated time.
impl notice_ledger::clock::Clock for Clock {
    fn now(&self) -> DateTime<Utc> {
        self.now_utc()
    }
}

impl Clock {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn now(&self) -> Us {
        self.lock().now
    }

    pub(super) fn now_utc(&self) -> DateTime<Utc> {
        at(self.now())
    }

    /// Moves the clock (never backwards: events are handled in time order).
    pub(super) fn advance(&self, to: Us) {
        let mut s = self.lock();
        s.now = s.now.max(to);
    }

    /// The executor polls `task` next.
    pub(super) fn enter(&self, task: TaskId) {
        self.lock().current = Some(task);
    }

    pub(super) fn leave(&self) {
        self.lock().current = None;
    }

    /// Wake-ups registered since the last call.
    pub(super) fn take_wakes(&self) -> Vec<(Us, TaskId, Waker)> {
        std::mem::take(&mut self.lock().wakes)
    }

    /// Resolves once simulated time has advanced by `d` (at once for `d ≤ 0`).
    pub(super) fn sleep(&self, d: Us) -> Sleep {
        Sleep { clock: self.clone(), until: self.now().saturating_add(d.max(0)), armed: false }
    }
}

/// See [`Clock::sleep`]. A task may hold several (a batch's records run concurrently), so a poll
/// before the sleep's own time — another sleep of the task woke it — stays pending.
pub(super) struct Sleep {
    clock: Clock,
    until: Us,
    armed: bool,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.clock.lock();
        if s.now >= self.until {
            return Poll::Ready(());
        }
        if self.armed {
            return Poll::Pending;
        }
        let Some(task) = s.current else {
            // Polled outside the executor: nothing would ever wake it.
            return Poll::Ready(());
        };
        let until = self.until;
        s.wakes.push((until, task, cx.waker().clone()));
        drop(s);
        self.armed = true;
        Poll::Pending
    }
}

/// The run's tasks: boxed futures polled only when one of their sleeps is due (after that
/// sleep's waker is woken, so the combinator above it polls it).
#[derive(Default)]
pub(super) struct Tasks {
    slots: Vec<Option<Pin<Box<dyn Future<Output = ()>>>>>,
    free: Vec<TaskId>,
}

impl Tasks {
    pub(super) fn spawn(&mut self, fut: Pin<Box<dyn Future<Output = ()>>>) -> TaskId {
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(fut);
                id
            }
            None => {
                self.slots.push(Some(fut));
                (self.slots.len() - 1) as TaskId
            }
        }
    }

    /// Polls `task` once; `true` when it finished (its slot is then free).
    pub(super) fn poll(&mut self, clock: &Clock, task: TaskId) -> bool {
        let Some(Some(fut)) = self.slots.get_mut(task as usize) else { return false };
        clock.enter(task);
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        let done = fut.as_mut().poll(&mut cx).is_ready();
        clock.leave();
        if done {
            self.slots[task as usize] = None;
            self.free.push(task);
        }
        done
    }

    /// Drops `task` where it stands (a crashed invocation); `false` when it had already finished.
    pub(super) fn kill(&mut self, task: TaskId) -> bool {
        match self.slots.get_mut(task as usize) {
            Some(slot @ Some(_)) => {
                *slot = None;
                self.free.push(task);
                true
            }
            _ => false,
        }
    }
}
