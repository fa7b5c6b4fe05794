//! SQS (a standard queue with a redrive policy) and Lambda's SQS event source mapping, as the
//! model runs them.

use std::collections::VecDeque;

use super::clock::{Us, SEC};
use super::meter::Gauge;
use super::world::{Books, Ev};

/// SQS as deployed by template.yaml.
#[derive(Clone, Debug)]
pub(super) struct SqsLimits {
    /// The queue's visibility timeout (template: 180 s).
    pub(super) visibility: Us,
    /// In-flight messages per standard queue (~120 000); past it receives come back empty.
    pub(super) in_flight_cap: i64,
    /// The redrive policy's maxReceiveCount (template: 20).
    pub(super) max_receives: u32,
    /// Records per Lambda batch (template: 25).
    pub(super) batch: usize,
    /// MaximumBatchingWindowInSeconds (template: 1 s): with fewer than
    /// a batch visible, the mapping waits this long from the first visible record before it
    /// invokes with what it has.
    pub(super) window: Us,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Sent with a delay (`DelaySeconds`): neither visible nor in flight until it ends.
    Delayed,
    Visible,
    InFlight,
    Gone,
}

#[derive(Clone, Debug)]
struct Msg {
    notice: u32,
    receives: u32,
    /// The current receipt handle: a delete or visibility change with an older one is ignored.
    receipt: u32,
    /// Bumped by every visibility change, so a superseded timeout does nothing.
    vis: u32,
    state: State,
}

/// One received message, as a record of a batch.
#[derive(Clone, Copy, Debug)]
pub(super) struct Received {
    pub(super) msg: u32,
    pub(super) notice: u32,
    pub(super) receives: u32,
    pub(super) receipt: u32,
}

#[derive(Debug)]
pub(super) struct Queue {
    limits: SqsLimits,
    msgs: Vec<Msg>,
    /// Visible messages in arrival order; `true` marks a duplicate delivery of an in-flight one.
    ready: VecDeque<(u32, bool)>,
    pub(super) in_flight: Gauge,
    pub(super) over_limit: u64,
    pub(super) first_over_limit: Option<Us>,
    pub(super) dead_lettered: u64,
    pub(super) receives: u64,
    /// Messages sent with a delay (jobs a refused park put back on the queue).
    pub(super) requeued: u64,
}

impl Queue {
    pub(super) fn new(limits: SqsLimits) -> Self {
        Self {
            limits,
            msgs: Vec::new(),
            ready: VecDeque::new(),
            in_flight: Gauge::default(),
            over_limit: 0,
            first_over_limit: None,
            dead_lettered: 0,
            receives: 0,
            requeued: 0,
        }
    }

    /// `SendMessage`: a new message for `notice`, visible at once.
    pub(super) fn send(&mut self, notice: u32, books: &mut Books) {
        let msg = self.push(notice, State::Visible, books);
        self.ready.push_back((msg, false));
    }

    /// A new message for `notice`, with no receives, in `state`; the notice has one more copy on
    /// the queue.
    fn push(&mut self, notice: u32, state: State, books: &mut Books) -> u32 {
        let msg = self.msgs.len() as u32;
        self.msgs.push(Msg { notice, receives: 0, receipt: 0, vis: 0, state });
        if let Some(n) = books.notices.get_mut(notice as usize) {
            n.on_queue += 1;
        }
        msg
    }

    /// `SendMessage` with `DelaySeconds`: a new message for `notice` (with no receives), visible
    /// after `delay`; it does not count as in flight meanwhile.
    pub(super) fn send_delayed(
        &mut self,
        notice: u32,
        delay: Us,
        now: Us,
        books: &mut Books,
        out: &mut Vec<(Us, Ev)>,
    ) {
        let msg = self.push(notice, State::Delayed, books);
        out.push((now + delay, Ev::Visible { msg, vis: 0 }));
        self.requeued += 1;
    }

    /// Whether a receive now would fill a whole batch. Counts the visible list's entries, a few of
    /// which may be stale (a duplicate delivery whose message was deleted since): at worst a
    /// batch goes a little short, as a real poller's receive sometimes does.
    pub(super) fn fills_a_batch(&self) -> bool {
        self.ready.len() >= self.limits.batch
    }

    /// Whether a receive now would find anything.
    pub(super) fn has_visible(&mut self) -> bool {
        while let Some(&(msg, dup)) = self.ready.front() {
            if dup || self.msgs[msg as usize].state == State::Visible {
                return true;
            }
            self.ready.pop_front();
        }
        false
    }

    /// `ReceiveMessage` for up to one batch: each message is hidden for the visibility timeout
    /// (its end goes to `out`); one received more than maxReceiveCount times goes to the
    /// dead-letter queue instead. `dup` (drawn per receive): SQS delivers this one twice.
    pub(super) fn receive(
        &mut self,
        now: Us,
        books: &mut Books,
        out: &mut Vec<(Us, Ev)>,
        mut dup: impl FnMut() -> bool,
    ) -> Vec<Received> {
        if self.in_flight.now >= self.limits.in_flight_cap {
            self.over_limit += 1;
            self.first_over_limit.get_or_insert(now);
            return Vec::new();
        }
        let mut batch = Vec::with_capacity(self.limits.batch);
        let mut dups = Vec::new();
        while batch.len() < self.limits.batch {
            let Some((msg, is_dup)) = self.ready.pop_front() else { break };
            let m = &mut self.msgs[msg as usize];
            match (m.state, is_dup) {
                (State::Visible, _) | (State::InFlight, true) => {}
                _ => continue,
            }
            if m.receives >= self.limits.max_receives {
                if m.state == State::InFlight {
                    self.in_flight.add(-1);
                }
                m.state = State::Gone;
                self.dead_lettered += 1;
                if let Some(n) = books.notices.get_mut(m.notice as usize) {
                    n.on_queue = n.on_queue.saturating_sub(1);
                    n.dead_lettered = true;
                }
                continue;
            }
            if m.state == State::Visible {
                self.in_flight.add(1);
            }
            m.state = State::InFlight;
            m.receives += 1;
            m.receipt += 1;
            m.vis += 1;
            self.receives += 1;
            out.push((now + self.limits.visibility, Ev::Visible { msg, vis: m.vis }));
            batch.push(Received { msg, notice: m.notice, receives: m.receives, receipt: m.receipt });
            if dup() {
                dups.push((msg, true));
            }
        }
        // A duplicate goes to another receive, never the same batch.
        self.ready.extend(dups);
        batch
    }

    /// A visibility timeout or a delay ends: the message is visible (again) unless it was
    /// deleted or hidden anew since.
    pub(super) fn expire(&mut self, msg: u32, vis: u32) {
        let Some(m) = self.msgs.get_mut(msg as usize) else { return };
        if m.vis != vis {
            return;
        }
        match m.state {
            State::InFlight => self.in_flight.add(-1),
            State::Delayed => {}
            State::Visible | State::Gone => return,
        }
        m.state = State::Visible;
        self.ready.push_back((msg, false));
    }

    /// `ChangeMessageVisibility` with this receipt: hidden for `wait` from now (still in flight).
    pub(super) fn change_visibility(&mut self, r: &Received, wait: Us, now: Us, out: &mut Vec<(Us, Ev)>) {
        let Some(m) = self.msgs.get_mut(r.msg as usize) else { return };
        if m.state == State::InFlight && m.receipt == r.receipt {
            m.vis += 1;
            out.push((now + wait, Ev::Visible { msg: r.msg, vis: m.vis }));
        }
    }

    /// `DeleteMessage` with this receipt; an older receipt deletes nothing.
    pub(super) fn delete(&mut self, r: &Received, books: &mut Books) -> bool {
        let Some(m) = self.msgs.get_mut(r.msg as usize) else { return false };
        if m.state != State::InFlight || m.receipt != r.receipt {
            return false;
        }
        m.state = State::Gone;
        self.in_flight.add(-1);
        if let Some(n) = books.notices.get_mut(m.notice as usize) {
            n.on_queue = n.on_queue.saturating_sub(1);
        }
        true
    }

    /// The sender moved this record to the dead-letter queue itself.
    pub(super) fn dead_letter(&mut self, r: &Received, books: &mut Books) {
        if self.delete(r, books) {
            self.dead_lettered += 1;
            if let Some(n) = books.notices.get_mut(r.notice as usize) {
                n.dead_lettered = true;
            }
        }
    }
}

/// Lambda's SQS scaling as modelled.
#[derive(Clone, Debug)]
pub(super) struct LambdaLimits {
    /// The event source mapping's `MaximumConcurrency` (template default 10; 2–1 000).
    pub(super) max_concurrency: u32,
    /// The account's concurrency (1 000 by default).
    pub(super) account_concurrency: u32,
    /// Concurrent batches at the start (5), added per minute while messages wait (300), and the
    /// most one mapping drives (1 000).
    pub(super) start: u32,
    pub(super) ramp_per_minute: u32,
    pub(super) ceiling: u32,
}

/// How many batches the event source mapping runs at once, and how that grows.
#[derive(Clone, Debug)]
pub(super) struct Pollers {
    limits: LambdaLimits,
    pub(super) target: u32,
    pub(super) busy: u32,
    pub(super) peak: u32,
    /// First time messages waited with every allowed invocation busy at the cap.
    pub(super) first_capped: Option<Us>,
    ramp_credit: f64,
}

impl Pollers {
    pub(super) fn new(limits: LambdaLimits) -> Self {
        let target = limits.start.min(Self::cap_of(&limits));
        Self { limits, target, busy: 0, peak: 0, first_capped: None, ramp_credit: 0.0 }
    }

    fn cap_of(l: &LambdaLimits) -> u32 {
        l.max_concurrency.min(l.account_concurrency).min(l.ceiling).max(1)
    }

    pub(super) fn cap(&self) -> u32 {
        Self::cap_of(&self.limits)
    }

    /// Whether another batch may start now.
    pub(super) fn free(&self) -> bool {
        self.busy < self.target
    }

    pub(super) fn start(&mut self) {
        self.busy += 1;
        self.peak = self.peak.max(self.busy);
    }

    pub(super) fn finish(&mut self) {
        self.busy = self.busy.saturating_sub(1);
    }

    /// One second passed: while messages wait and every poller is busy, the mapping adds up to
    /// `ramp_per_minute / 60` batches, up to the cap; with nothing waiting it stays where it is.
    pub(super) fn tick(&mut self, now: Us, waiting: bool) {
        if !waiting || self.busy < self.target {
            return;
        }
        if self.target >= self.cap() {
            self.first_capped.get_or_insert(now);
            return;
        }
        self.ramp_credit += f64::from(self.limits.ramp_per_minute) * (SEC as f64 / 60.0) / SEC as f64;
        let add = self.ramp_credit.floor();
        self.ramp_credit -= add;
        self.target = (self.target + add as u32).min(self.cap());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::producer::{Notice, Source};

    fn books(n: usize) -> Books {
        Books { notices: (0..n).map(|_| Notice::new(0, 0, Source::Produced)).collect(), outbox: Vec::new() }
    }

    fn limits(cap: i64) -> SqsLimits {
        SqsLimits { visibility: 180 * SEC, in_flight_cap: cap, max_receives: 3, batch: 10, window: 0 }
    }

    #[test]
    fn receives_stop_at_the_in_flight_cap() {
        let mut b = books(100);
        let mut q = Queue::new(limits(25));
        for i in 0..100 {
            q.send(i, &mut b);
        }
        let mut out = Vec::new();
        let mut got = 0;
        for _ in 0..10 {
            got += q.receive(0, &mut b, &mut out, || false).len();
        }
        // Three batches of 10 reach 30 ≥ 25: the fourth receive is refused.
        assert_eq!(got, 30);
        assert_eq!(q.in_flight.now, 30);
        assert_eq!(q.over_limit, 7);
    }

    #[test]
    fn a_message_comes_back_after_its_timeout_and_dead_letters_after_max_receives() {
        let mut b = books(1);
        let mut q = Queue::new(limits(100));
        q.send(0, &mut b);
        for round in 1..=3 {
            let mut out = Vec::new();
            let got = q.receive(0, &mut b, &mut out, || false);
            assert_eq!(got.len(), 1, "receive {round}");
            let Some(&(_, Ev::Visible { msg, vis })) = out.first() else { panic!("no timeout") };
            q.expire(msg, vis);
        }
        let mut out = Vec::new();
        assert!(q.receive(0, &mut b, &mut out, || false).is_empty());
        assert_eq!(q.dead_lettered, 1);
        assert!(b.notices[0].dead_lettered);
        assert_eq!(b.notices[0].on_queue, 0);
    }

    #[test]
    fn a_delayed_message_is_neither_visible_nor_in_flight_until_its_delay_ends_and_starts_its_receives_anew()
    {
        let mut b = books(1);
        let mut q = Queue::new(limits(100));
        let mut out = Vec::new();
        q.send(0, &mut b);
        let old = q.receive(0, &mut b, &mut out, || false);
        let mut out = Vec::new();
        q.send_delayed(0, 900 * SEC, 0, &mut b, &mut out);
        assert!(q.delete(&old[0], &mut b), "the refused message is acked");
        assert_eq!((q.in_flight.now, b.notices[0].on_queue, q.requeued), (0, 1, 1));
        assert!(!q.has_visible(), "hidden while delayed");
        let Some(&(at, Ev::Visible { msg, vis })) = out.first() else { panic!("no end of delay") };
        assert_eq!(at, 900 * SEC);
        q.expire(msg, vis);
        let mut out = Vec::new();
        let got = q.receive(at, &mut b, &mut out, || false);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].receives, 1, "a new message: its receives start at one");
    }

    #[test]
    fn a_stale_receipt_deletes_nothing() {
        let mut b = books(1);
        let mut q = Queue::new(limits(100));
        q.send(0, &mut b);
        let mut out = Vec::new();
        let first = q.receive(0, &mut b, &mut out, || true);
        let again = q.receive(0, &mut b, &mut out, || false); // the duplicate delivery
        assert_eq!((first.len(), again.len()), (1, 1));
        assert!(!q.delete(&first[0], &mut b), "the first receipt is stale");
        assert!(q.delete(&again[0], &mut b));
        assert_eq!(q.in_flight.now, 0);
    }

    #[test]
    fn the_mapping_scales_by_300_a_minute_up_to_maximum_concurrency() {
        let l = LambdaLimits {
            max_concurrency: 200,
            account_concurrency: 1_000,
            start: 5,
            ramp_per_minute: 300,
            ceiling: 1_000,
        };
        let mut p = Pollers::new(l);
        for s in 0..30 {
            while p.free() {
                p.start();
            }
            p.tick(s * SEC, true);
        }
        // 5 + 30 s × 5/s.
        assert_eq!(p.target, 155);
        for s in 30..120 {
            while p.free() {
                p.start();
            }
            p.tick(s * SEC, true);
        }
        assert_eq!(p.target, 200, "capped at MaximumConcurrency");
        assert!(p.first_capped.is_some());
    }
}
