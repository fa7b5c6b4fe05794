//! The traffic: who is notified, when their window opens, and the message body producers enqueue.

use chrono::{DateTime, TimeDelta, Utc};
use rand::rngs::StdRng;
use rand::Rng;

use super::clock::{at, Us, MINUTE, SEC};

/// How a notice entered the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// Enqueued by a producer during the run, `lead` before its window opens.
    Produced,
    /// Parked before the run started; its schedule fires during it (the steady-state backlog).
    Backlog,
    /// Part of an operator's replay burst: enqueued at once, window already open.
    Replay,
}

/// One notice, kept small: a run holds millions. Its body is rebuilt when a message is received.
#[derive(Clone, Debug)]
pub(super) struct Notice {
    pub(super) domain: u32,
    /// When its window opens (simulated time).
    pub(super) opens: Us,
    pub(super) source: Source,
    /// Copies the provider accepted.
    pub(super) sends: u32,
    pub(super) first_send: Option<Us>,
    /// Its messages on the queue (visible or in flight), and whether a schedule holds it.
    pub(super) on_queue: u32,
    pub(super) scheduled: bool,
    pub(super) dead_lettered: bool,
}

impl Notice {
    pub(super) fn new(domain: u32, opens: Us, source: Source) -> Self {
        Self {
            domain,
            opens,
            source,
            sends: 0,
            first_send: None,
            on_queue: 0,
            scheduled: false,
            dead_lettered: false,
        }
    }
}

/// The recipient-domain mix: named domains with their shares, the rest spread over a long tail.
#[derive(Clone, Debug)]
pub(super) struct Domains {
    /// Index 0.. named, then the tail.
    pub(super) names: Vec<String>,
    /// Cumulative shares of the named domains.
    cumulative: Vec<f64>,
    named: usize,
}

impl Domains {
    pub(super) fn new(named: &[(String, f64)], tail: u32) -> Self {
        let mut names: Vec<String> = named.iter().map(|(d, _)| d.clone()).collect();
        let mut acc = 0.0;
        let cumulative = named
            .iter()
            .map(|(_, share)| {
                acc += share;
                acc
            })
            .collect();
        names.extend((0..tail.max(1)).map(|i| format!("d{i}.example")));
        Self { names, cumulative, named: named.len() }
    }

    pub(super) fn draw(&self, rng: &mut StdRng) -> u32 {
        let u: f64 = rng.gen();
        match self.cumulative.iter().position(|&c| u < c) {
            Some(i) => i as u32,
            None => (self.named + rng.gen_range(0..self.names.len() - self.named)) as u32,
        }
    }

    pub(super) fn index_of(&self, domain: &str) -> Option<u32> {
        self.names.iter().position(|d| d == domain).map(|i| i as u32)
    }

    pub(super) fn name(&self, i: u32) -> &str {
        self.names.get(i as usize).map(String::as_str).unwrap_or("d0.example")
    }
}

/// The default window opens 72 h before the charge.
pub(super) const OPENS_BEFORE_CHARGE: TimeDelta = TimeDelta::hours(72);

/// The charge instant of a notice whose window opens at `opens`.
pub(super) fn charge_at(opens: Us) -> DateTime<Utc> {
    at(opens) + OPENS_BEFORE_CHARGE
}

/// The job body a producer enqueues for notice `idx` (the contract's message schema). The
/// recipient's local part names the notice, so the modelled provider knows whom it reached.
pub(super) fn body(idx: u32, n: &Notice, domains: &Domains) -> String {
    format!(
        concat!(
            r#"{{"subscription_id":"sub_{idx}","period_start":"2027-01-01","kind":"renewal_notice_t72","#,
            r#""revision":0,"email":"n{idx}@{domain}","charge_at":"{charge}","#,
            r#""template_data":{{"plan_name":"Coffee Box","amount":{{"minor":2900,"currency":"USD"}}}}}}"#
        ),
        idx = idx,
        domain = domains.name(n.domain),
        charge = charge_at(n.opens).to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

/// The notice a recipient address or a body names (`n{idx}@…`).
pub(super) fn notice_of(text: &str) -> Option<u32> {
    let start = text.find("\"email\":\"n").map(|i| i + 10).or_else(|| text.starts_with('n').then_some(1))?;
    let digits: String = text[start..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Lead times: uniform over `[0, lead_days]` before the window opens.
pub(super) fn lead(rng: &mut StdRng, lead_days: f64) -> Us {
    let max = (lead_days * 86_400.0 * SEC as f64) as Us;
    if max <= 0 {
        0
    } else {
        rng.gen_range(0..=max)
    }
}

/// A fixed billing day's windows all open at this instant of the run.
pub(super) const FIXED_OPENING: Us = MINUTE;

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_body_names_its_notice_and_parses_as_a_job() {
        let domains = Domains::new(&[("gmail.com".into(), 0.5)], 10);
        let n = Notice::new(0, 3 * MINUTE, Source::Produced);
        let text = body(4_711, &n, &domains);
        assert_eq!(notice_of(&text), Some(4_711));
        assert_eq!(notice_of("n4711@gmail.com"), Some(4_711));
        let job = notice_ledger::Job::parse(&text, &notice_texts::Icu).map_err(|e| e.to_string());
        assert_eq!(job.map(|j| j.recipient_domain()), Ok("gmail.com".to_owned()));
    }

    #[test]
    fn the_mix_draws_named_shares_and_a_tail() {
        let domains = Domains::new(&[("gmail.com".into(), 0.35), ("outlook.com".into(), 0.15)], 1_000);
        let mut rng = StdRng::seed_from_u64(1);
        let draws: Vec<u32> = (0..20_000).map(|_| domains.draw(&mut rng)).collect();
        let gmail = draws.iter().filter(|&&d| d == 0).count() as f64 / 20_000.0;
        let tail = draws.iter().filter(|&&d| d >= 2).count() as f64 / 20_000.0;
        assert!((0.33..0.37).contains(&gmail), "gmail share {gmail}");
        assert!((0.48..0.52).contains(&tail), "tail share {tail}");
    }
}
