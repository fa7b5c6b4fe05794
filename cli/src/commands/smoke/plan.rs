//! What a smoke test sends and what each message must come to: pure, from the stack's own notice
//! configuration, so the jobs pass the deployed policy (a known kind, inside its window, the
//! content it requires) and nothing but the run's identities is touched.

use chrono::{DateTime, Duration, Utc};
use notice_ledger::policy::Window;
use notice_texts::notices::NoticeConfig;
use serde_json::{json, Map, Value};

/// SES's mailbox simulator: accepted by SES in and out of the sandbox, never a real mailbox, and
/// it answers each address with the event its name says (docs/operations.md, *Smoke test*).
pub(crate) const SIMULATOR: &str = "simulator.amazonses.com";

/// What a probe's notice must come to in the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// Sent once, then the provider's `Delivery` event reconciled.
    Delivered,
    /// Sent once, then the simulator's `Bounce` reconciled.
    Bounced,
    /// Sent once, then the simulator's `Complaint` reconciled.
    Complained,
    /// Withdrawn before its job arrived, so never sent.
    Withdrawn,
}

impl Expect {
    /// What mail to `address` comes to: the simulator's answer for its bounce and complaint
    /// mailboxes, a delivery for any other address.
    pub(crate) fn of_address(address: &str) -> Self {
        let (local, domain) = address.rsplit_once('@').unwrap_or((address, ""));
        let mailbox = local.split('+').next().unwrap_or(local);
        match (mailbox.to_ascii_lowercase().as_str(), domain.eq_ignore_ascii_case(SIMULATOR)) {
            ("bounce", true) => Expect::Bounced,
            ("complaint", true) => Expect::Complained,
            _ => Expect::Delivered,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Expect::Delivered => "delivered",
            Expect::Bounced => "bounced",
            Expect::Complained => "complained",
            Expect::Withdrawn => "withdrawn",
        }
    }

    /// The simulator mailbox whose answer is this outcome (a withdrawn notice is never sent; its
    /// address is the plain success one).
    fn mailbox(self) -> &'static str {
        match self {
            Expect::Delivered | Expect::Withdrawn => "success",
            Expect::Bounced => "bounce",
            Expect::Complained => "complaint",
        }
    }
}

/// One notice of the run: its job, how many copies go on the queue, and its expected end.
#[derive(Clone, Debug)]
pub(crate) struct Probe {
    pub(crate) expect: Expect,
    pub(crate) job: Value,
}

impl Probe {
    /// The withdraw message for this probe's notice (same identity).
    pub(crate) fn withdraw(&self, run: &str) -> Value {
        json!({
            "action": "withdraw",
            "subscription_id": self.job["subscription_id"],
            "period_start": self.job["period_start"],
            "kind": self.job["kind"],
            "revision": self.job["revision"],
            "reason": format!("noticectl smoke {run}: a withdrawn notice is never sent"),
        })
    }
}

/// Every copy of a job goes on the queue this many times: the ledger must refuse all but one.
pub(crate) const COPIES: usize = 2;

/// The run: its name, the kind and window its jobs use, and its probes.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) run: String,
    pub(crate) kind: String,
    pub(crate) window: Window,
    pub(crate) charge_at: DateTime<Utc>,
    pub(crate) probes: Vec<Probe>,
    /// The stack's `RedirectAllMailTo`: every notice goes there, so only its answer can be seen.
    pub(crate) redirect: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum PlanError {
    #[error(
        "kind {kind:?} is not one the stack's notice configuration knows ({known}): its jobs would be dead-lettered"
    )]
    UnknownKind { kind: String, known: String },
    #[error(
        "kind {kind:?}'s window ({opens} h → {closes} h before the charge) is empty: no job of it can be sent"
    )]
    EmptyWindow { kind: String, opens: u32, closes: u32 },
}

impl Plan {
    /// The run named `run` at `now` for `kind` (default: the configuration's first kind), with
    /// the configuration's sample variables (the values its check renders every text with). On a
    /// stack that redirects all mail (`redirect`), one sent probe expects the redirect address's
    /// answer instead of one probe per simulator answer.
    pub(crate) fn new(
        run: &str,
        now: DateTime<Utc>,
        config: &NoticeConfig,
        kind: Option<&str>,
        redirect: Option<&str>,
    ) -> Result<Self, PlanError> {
        let known = known_kinds(config);
        let kind = match kind {
            Some(kind) if known.is_empty() || known.iter().any(|k| k == kind) => kind.to_owned(),
            Some(kind) => {
                return Err(PlanError::UnknownKind { kind: kind.to_owned(), known: known.join(", ") })
            }
            None => known.first().cloned().unwrap_or_else(|| "renewal_notice_t72".to_owned()),
        };
        let window = config.policy().effective(Some(&kind), None).window;
        if window.opens_hours_before <= window.closes_hours_before {
            return Err(PlanError::EmptyWindow {
                kind,
                opens: window.opens_hours_before,
                closes: window.closes_hours_before,
            });
        }
        // The middle of the window: the job is sendable now and stays so for the whole run.
        let middle = (i64::from(window.opens_hours_before) + i64::from(window.closes_hours_before)) * 30;
        let charge_at = now + Duration::minutes(middle);
        let period_start = charge_at.format("%Y-%m-%d").to_string();
        let variables: Map<String, Value> = config.manifest().variables.clone();
        let expects = match redirect {
            Some(to) => vec![Expect::of_address(to), Expect::Withdrawn],
            None => vec![Expect::Delivered, Expect::Bounced, Expect::Complained, Expect::Withdrawn],
        };
        let probes = expects
            .into_iter()
            .map(|expect| Probe {
                expect,
                job: json!({
                    "subscription_id": format!("{run}-{}", expect.name()),
                    "period_start": period_start,
                    "kind": kind,
                    "revision": 0,
                    // The label keeps the run's mail apart in SES's own records.
                    "email": format!("{}+{run}@{SIMULATOR}", expect.mailbox()),
                    "charge_at": charge_at.to_rfc3339(),
                    "template_data": variables,
                }),
            })
            .collect();
        Ok(Self {
            run: run.to_owned(),
            kind,
            window,
            charge_at,
            probes,
            redirect: redirect.map(str::to_owned),
        })
    }

    pub(crate) fn probe(&self, expect: Expect) -> Option<&Probe> {
        self.probes.iter().find(|p| p.expect == expect)
    }

    /// The probes whose notice is sent (all but the withdrawn one).
    pub(crate) fn sent(&self) -> impl Iterator<Item = &Probe> {
        self.probes.iter().filter(|p| p.expect != Expect::Withdrawn)
    }
}

/// The kinds the configuration's texts and policy name, texts first (the manifest's order).
fn known_kinds(config: &NoticeConfig) -> Vec<String> {
    let mut kinds: Vec<String> = config.manifest().kinds.clone();
    for kind in config.policy().kinds() {
        if !kinds.iter().any(|k| k == kind) {
            kinds.push(kind.to_owned());
        }
    }
    kinds
}

/// The run's name from its start: `smoke-20261202t053000z`, lower case so it is a valid label
/// in an e-mail address and sorts by time.
pub(crate) fn run_name(now: DateTime<Utc>) -> String {
    format!("smoke-{}", now.format("%Y%m%dt%H%M%Sz"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use notice_ledger::Job;

    fn now() -> DateTime<Utc> {
        "2026-12-02T05:30:00Z".parse().unwrap_or_default()
    }

    fn example() -> NoticeConfig {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/notices-de");
        notice_setup::notices::from_dir(&dir).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn jobs_are_valid_inside_the_window_and_only_the_runs_own() {
        let config = example();
        let plan = Plan::new(&run_name(now()), now(), &config, None, None).unwrap();
        assert_eq!(plan.run, "smoke-20261202t053000z");
        assert_eq!(plan.kind, "renewal_notice_t72", "the manifest's first kind");
        assert_eq!(plan.probes.len(), 4);
        for probe in &plan.probes {
            let job = Job::from_value(&probe.job, &notice_texts::Icu)
                .unwrap_or_else(|e| panic!("{e}: {}", probe.job));
            assert!(plan.window.contains(job.charge_at, now()), "{}", probe.job);
            assert!(job.identity.subscription_id().starts_with("smoke-20261202t053000z-"));
            assert!(job.email.ends_with("@simulator.amazonses.com"), "{}", job.email);
            config.policy().admit(&job, || job.template_data.clone()).unwrap();
        }
        let bounce = plan.probe(Expect::Bounced).unwrap();
        assert_eq!(bounce.job["email"], "bounce+smoke-20261202t053000z@simulator.amazonses.com");
        let withdraw = plan.probe(Expect::Withdrawn).unwrap().withdraw(&plan.run);
        assert!(notice_ledger::job::Withdrawal::from_value(&withdraw).is_ok(), "{withdraw}");
    }

    #[test]
    fn a_kind_the_configuration_does_not_know_is_refused_by_name() {
        let err = Plan::new("smoke-x", now(), &example(), Some("annual_renewl"), None).unwrap_err();
        assert!(matches!(&err, PlanError::UnknownKind { kind, .. } if kind == "annual_renewl"), "{err}");
        assert!(err.to_string().contains("annual_renewal"), "{err}");
        let annual = Plan::new("smoke-x", now(), &example(), Some("annual_renewal"), None).unwrap();
        assert_eq!((annual.window.opens_hours_before, annual.window.closes_hours_before), (1440, 168));
        assert_eq!(annual.charge_at, now() + Duration::hours(804));
    }

    #[test]
    fn a_redirecting_stack_gets_one_sent_probe_expecting_the_redirects_answer() {
        for (to, expect) in [
            ("success@simulator.amazonses.com", Expect::Delivered),
            ("Bounce+x@simulator.amazonses.com", Expect::Bounced),
            ("complaint@simulator.amazonses.com", Expect::Complained),
            ("bounce@example.com", Expect::Delivered),
            ("team@example.com", Expect::Delivered),
        ] {
            let plan = Plan::new("smoke-x", now(), &example(), None, Some(to)).unwrap();
            let sent: Vec<Expect> = plan.sent().map(|p| p.expect).collect();
            assert_eq!(sent, [expect], "{to}");
            assert!(plan.probe(Expect::Withdrawn).is_some());
        }
    }
}
