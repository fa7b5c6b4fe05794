//! The durable strategies: the real core — the sender Lambda's own [`Worker`] over a
//! [`NoticeSender`] and a real ledger — with a mailer that hands each send to the simulation and
//! parks the worker's future until the simulated answer, a clock on simulated time, and the
//! simulation's queue and schedules as its ports (`ports.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use chrono::{DateTime, Utc};

use async_trait::async_trait;
use notice_ledger::ledger::Ledger;
use notice_ledger::links::ManageLinks;
use notice_ledger::mailer::{Mailer, OutgoingMail, SendResult};
use notice_ledger::worker::{Record, Worked, Worker};
use notice_ledger::{NoticeKey, NoticeSecret, NoticeSender, QueuePolicy, SendBudget};
use notice_sqlite::SqliteLedger;
use notice_testkit::faults::FaultyLedger;
use notice_testkit::MemoryLedger;
use notice_texts::Renderer;

use super::args::{Params, SimLedger};
use super::ports::{JobPorts, SimClock};
use super::trace::Trace;

/// What the simulation and the suspended mailer call tell each other.
#[derive(Default)]
struct GateState {
    /// The job whose future is being polled.
    current: usize,
    /// The job that called the mailer during this poll (its claim is committed).
    issued: Option<usize>,
    /// The polled future is waiting for a simulated send.
    parked: bool,
    /// Answers of finished simulated sends, by job.
    answers: HashMap<usize, SendResult>,
    /// The waker of each job's suspended mailer call: the worker polls a record again only when
    /// it was woken (its stream of records polls woken ones alone).
    wakers: HashMap<usize, Waker>,
}

fn lock(gate: &Mutex<GateState>) -> MutexGuard<'_, GateState> {
    gate.lock().unwrap_or_else(|p| p.into_inner())
}

/// Hands every send to the simulation and waits (in simulated time) for its answer.
struct SimMailer {
    gate: Arc<Mutex<GateState>>,
}

#[async_trait]
impl Mailer for SimMailer {
    async fn send(&self, _mail: &OutgoingMail) -> SendResult {
        let job = {
            let mut g = lock(&self.gate);
            g.issued = Some(g.current);
            g.current
        };
        std::future::poll_fn(|cx| {
            let mut g = lock(&self.gate);
            match g.answers.remove(&job) {
                Some(answer) => Poll::Ready(answer),
                None => {
                    g.parked = true;
                    g.wakers.insert(job, cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }
}

/// The worker's future over one received message: its batch's results (one).
pub(super) type WorkFuture = Pin<Box<dyn Future<Output = Vec<Worked>>>>;

/// Polls a real worker's future until it finishes (`Some`) or parks in the simulated mailer
/// (`None`). Real I/O (the SQLite ledger's blocking pool) is awaited as usual.
struct UntilParked<'a> {
    fut: &'a mut WorkFuture,
    gate: &'a Mutex<GateState>,
}

impl Future for UntilParked<'_> {
    type Output = Option<Vec<Worked>>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match this.fut.as_mut().poll(cx) {
            Poll::Ready(worked) => Poll::Ready(Some(worked)),
            Poll::Pending if lock(this.gate).parked => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The real sender of one durable run, with the ledger it writes and every notice's key, both
/// read by the report.
pub(super) struct Durable {
    sender: Arc<NoticeSender>,
    pub(super) ledger: Arc<FaultyLedger<Arc<dyn Ledger>>>,
    gate: Arc<Mutex<GateState>>,
    clock: SimClock,
    pub(super) keys: Vec<NoticeKey>,
    _dir: Option<tempfile::TempDir>,
}

impl Durable {
    pub(super) fn new(p: &Params, trace: &Trace) -> Result<Self, String> {
        let (inner, dir): (Arc<dyn Ledger>, _) = match p.ledger {
            SimLedger::Memory => (Arc::new(MemoryLedger::new()), None),
            SimLedger::Sqlite => {
                let dir = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
                let ledger = SqliteLedger::open(dir.path().join("ledger.db")).map_err(|e| e.to_string())?;
                (Arc::new(ledger), Some(dir))
            }
        };
        let ledger = Arc::new(FaultyLedger::new(inner, None));
        let gate = Arc::new(Mutex::new(GateState::default()));
        let secret = NoticeSecret::new("simulation-key-secret").map_err(|e| e.to_string())?;
        let links = NoticeSecret::new("simulation-links").map_err(|e| e.to_string())?;
        let clock = SimClock::new(trace.at(0));
        let sender = NoticeSender::new(
            ledger.clone(),
            Arc::new(SimMailer { gate: gate.clone() }),
            Arc::new(Renderer::builtin(ManageLinks::new("https://billing.example.com/manage", links))),
            trace.policy.clone(),
            secret,
        )
        // Send timeouts are simulated (the mailer answers "unknown" in simulated time); the real
        // timer must never fire, however long the host takes between two polls.
        .with_budget(SendBudget {
            send_timeout: std::time::Duration::from_secs(7 * 86_400),
            ..SendBudget::default()
        })
        .with_clock(Arc::new(clock.clone()))
        // The Lambda's worker, whose queue redelivers.
        .redelivered_by_queue();
        let keys = trace.notices.iter().map(|n| sender.key(&n.job)).collect();
        Ok(Self { sender: Arc::new(sender), ledger, gate, clock, keys, _dir: dir })
    }

    /// The sender Lambda's worker over one received message (a batch of one, `queue` its queue
    /// policy), on the job's own ports — not yet polled.
    pub(super) fn work(
        &self,
        queue: QueuePolicy,
        ports: &JobPorts,
        receive_count: u32,
        jitter: f64,
    ) -> WorkFuture {
        let sender = Arc::clone(&self.sender);
        let (message, parker) = (Arc::clone(&ports.message), Arc::clone(&ports.parker));
        Box::pin(async move {
            let record = Record {
                message: &*message,
                message_id: "",
                receive_count,
                jitter,
                metrics: sender.metrics(),
            };
            let worker = Worker {
                sender: &sender,
                policy: &queue,
                parker: Some(&*parker),
                deadline: None,
                concurrency: 1,
                events: false,
            };
            worker.work(std::slice::from_ref(&record)).await
        })
    }

    /// The simulated send of job `job` is over: its suspended mailer call returns `answer`.
    pub(super) fn answer(&self, job: usize, answer: SendResult) {
        let waker = {
            let mut g = lock(&self.gate);
            g.answers.insert(job, answer);
            g.wakers.remove(&job)
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Polls job `job`'s worker at the simulated `now` until it finishes or parks in the mailer.
    pub(super) async fn poll(&self, job: usize, fut: &mut WorkFuture, now: DateTime<Utc>) -> Polled {
        self.clock.set(now);
        {
            let mut g = lock(&self.gate);
            g.current = job;
            g.issued = None;
            g.parked = false;
        }
        match (UntilParked { fut, gate: &self.gate }).await {
            Some(worked) => Polled::Done(worked),
            None => Polled::Parked { issued: lock(&self.gate).issued.take() == Some(job) },
        }
    }
}

/// Where one poll of a job's real delivery stopped.
pub(super) enum Polled {
    /// The worker finished: its batch's results (one).
    Done(Vec<Worked>),
    /// The sender waits in the mailer for a simulated answer; `issued`: it called the mailer
    /// during this poll (its claim is committed), so the send must be issued now.
    Parked { issued: bool },
}
