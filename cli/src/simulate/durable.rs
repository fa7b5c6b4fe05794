//! The durable strategies: the real core ([`NoticeSender`]) over a real ledger, with a mailer that
//! hands each send to the simulation and parks the delivery future until the simulated answer.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use async_trait::async_trait;
use notice_ledger::faults::FaultyLedger;
use notice_ledger::ledger::memory::MemoryLedger;
use notice_ledger::ledger::Ledger;
use notice_ledger::links::ManageLinks;
use notice_ledger::mailer::{Mailer, OutgoingMail, SendResult};
use notice_ledger::render::Renderer;
use notice_ledger::{Delivery, NoticeKey, NoticeSecret, NoticeSender, SendBudget};
use notice_sqlite::SqliteLedger;

use super::args::{Params, SimLedger};
use super::run::Run;
use super::trace::{Crash, Trace};

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
        std::future::poll_fn(|_| {
            let mut g = lock(&self.gate);
            match g.answers.remove(&job) {
                Some(answer) => Poll::Ready(answer),
                None => {
                    g.parked = true;
                    Poll::Pending
                }
            }
        })
        .await
    }
}

pub(super) type DeliveryFuture = Pin<Box<dyn Future<Output = Delivery>>>;

/// Polls a real `deliver_body` future until it finishes (`Some`) or parks in the simulated mailer
/// (`None`). Real I/O (the SQLite ledger's blocking pool) is awaited as usual.
struct UntilParked<'a> {
    fut: &'a mut DeliveryFuture,
    gate: &'a Mutex<GateState>,
}

impl Future for UntilParked<'_> {
    type Output = Option<Delivery>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match this.fut.as_mut().poll(cx) {
            Poll::Ready(delivery) => Poll::Ready(Some(delivery)),
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
        let sender = NoticeSender::new(
            ledger.clone(),
            Arc::new(SimMailer { gate: gate.clone() }),
            Arc::new(Renderer::new(ManageLinks::new("https://billing.example.com/manage", links))),
            trace.policy.clone(),
            secret,
        )
        // Send timeouts are simulated (the mailer answers "unknown" in simulated time); the real
        // timer must never fire, however long the host takes between two polls.
        .with_budget(SendBudget {
            send_timeout: std::time::Duration::from_secs(7 * 86_400),
            ..SendBudget::default()
        });
        let keys = trace.notices.iter().map(|n| sender.key(&n.job)).collect();
        Ok(Self { sender: Arc::new(sender), ledger, gate, keys, _dir: dir })
    }
}

impl Run<'_> {
    pub(super) async fn durable_start(&mut self, id: usize) {
        let Some(d) = &self.durable else { return };
        let Some(job) = self.jobs.get(&id) else { return };
        let sender = Arc::clone(&d.sender);
        let body = Arc::clone(&self.trace.notices[job.notice].body);
        let now = self.trace.at(self.now);
        let fut: DeliveryFuture = Box::pin(async move { sender.deliver_body(&body, now, None).await });
        self.drive(id, fut).await;
    }

    pub(super) async fn durable_resume(&mut self, id: usize, answer: SendResult) {
        let Some(d) = &self.durable else { return };
        let Some(fut) = self.jobs.get_mut(&id).and_then(|j| j.future.take()) else { return };
        lock(&d.gate).answers.insert(id, answer);
        self.drive(id, fut).await;
    }

    /// Polls the job's real delivery until it finishes or parks in the mailer.
    async fn drive(&mut self, id: usize, mut fut: DeliveryFuture) {
        let Some(d) = &self.durable else { return };
        let gate = Arc::clone(&d.gate);
        {
            let mut g = lock(&gate);
            g.current = id;
            g.issued = None;
            g.parked = false;
        }
        match (UntilParked { fut: &mut fut, gate: &gate }).await {
            Some(delivery) => {
                *self.outcomes.entry(delivery.outcome.label().to_owned()).or_default() += 1;
                self.finish(id, &delivery.outcome, delivery.key.as_ref());
            }
            None => {
                let issued = lock(&gate).issued.take() == Some(id);
                let Some(job) = self.jobs.get_mut(&id) else { return };
                job.future = Some(fut);
                if issued {
                    // The claim is committed and the sender called the mailer.
                    if job.fate.crash == Some(Crash::AfterClaimBeforeSend) {
                        let instance = job.instance;
                        self.crash(instance);
                        return;
                    }
                    self.issue_send(id);
                }
            }
        }
    }
}
