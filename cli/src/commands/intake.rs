//! `noticectl intake stripe FILE`: the Stripe intake, locally. Each event (one JSON object per
//! line, or one pretty-printed event; `-` reads standard input) is mapped and planned exactly as the
//! intake Lambda does — `notice_stripe::StripeMapping`, then the core's `IntakePlanner` under the
//! configuration's obligations, against this ledger's own rows — and the jobs and withdraws it
//! would enqueue are written to standard output as JSON lines, so that
//! `noticectl intake stripe events.jsonl --config DIR | noticectl send - --config DIR` runs the whole
//! path with no AWS. Nothing is written to the ledger: the sender does that, from the messages.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use notice_ledger::intake::{BillingMapping, IntakeDecision, IntakePlanner, Kinds, PlanError};
use notice_ledger::locale::TimeZone;
use notice_ledger::Kind;
use notice_stripe::{ApiKey, StripeApi, StripeMapping};
use serde_json::Value;

use crate::exit::Exit;
use crate::ledger_target::LedgerArg;
use crate::local::StateDir;

#[derive(clap::Args, Debug)]
pub(crate) struct IntakeArgs {
    #[command(subcommand)]
    source: Source,
}

#[derive(clap::Subcommand, Debug)]
enum Source {
    /// Stripe events (as the webhook receives them) → the messages the intake would enqueue.
    Stripe(StripeArgs),
}

#[derive(clap::Args, Debug)]
struct StripeArgs {
    /// Stripe events: one JSON object per line, or one pretty-printed event; `-` reads stdin.
    file: PathBuf,
    #[command(flatten)]
    config: crate::notices_arg::ConfigArg,
    #[command(flatten)]
    ledger: LedgerArg,
    /// The IANA time zone the Stripe account keeps its days in (as the stack's IntakeBillingTimeZone).
    #[arg(long, env = "NOTICE_INTAKE_BILLING_TIME_ZONE", value_name = "ZONE")]
    billing_time_zone: String,
    /// The one kind of every notice, for a configuration without obligations (as IntakeKind).
    #[arg(long, env = "NOTICE_INTAKE_KIND", value_name = "KIND")]
    kind: Option<String>,
    /// A restricted Stripe API key (read-only Customers and Subscriptions): a price change's
    /// customer e-mail, locale and address are read from Stripe's API, as the Lambda does.
    #[arg(long, env = "NOTICE_STRIPE_API_KEY", value_name = "KEY", hide_env_values = true)]
    stripe_api_key: Option<String>,
    /// Stripe's API base URL (a local stand-in in tests).
    #[arg(long, env = "NOTICE_STRIPE_API_BASE", value_name = "URL", default_value = notice_stripe::api::DEFAULT_BASE)]
    stripe_api_base: String,
}

/// One event of the input, or why its line is not one.
struct Read {
    line: usize,
    event: Result<Value, String>,
}

/// The whole input as one event when it is one JSON value, else one event per non-empty line.
fn events(text: &str) -> Vec<Read> {
    if let Ok(event) = serde_json::from_str::<Value>(text) {
        return vec![Read { line: 1, event: Ok(event) }];
    }
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| Read {
            line: i + 1,
            event: serde_json::from_str(l).map_err(|e| format!("not JSON: {e}")),
        })
        .collect()
}

fn read_input(path: &PathBuf) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text).context("standard input")?;
        Ok(text)
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
    }
}

/// What the run did, for the closing line and the exit code.
#[derive(Default)]
struct Tally {
    events: usize,
    jobs: usize,
    withdraws: usize,
    ignored: usize,
    refused: usize,
}

pub(crate) async fn run(state_dir: PathBuf, args: IntakeArgs) -> anyhow::Result<ExitCode> {
    let Source::Stripe(args) = args.source;
    let zone = TimeZone::parse(args.billing_time_zone.trim())
        .map_err(|e| anyhow::anyhow!("--billing-time-zone {:?}: {e}", args.billing_time_zone))?;
    let stated = args
        .kind
        .as_deref()
        .filter(|k| !k.trim().is_empty())
        .map(|k| Kind::parse(k.trim()).map_err(|e| anyhow::anyhow!("--kind {k:?}: {}", e.reason)))
        .transpose()?;
    let text = read_input(&args.file)?;
    let state = StateDir::open(&state_dir)?;
    let ring = state.secret().await?;
    let policy = args.config.notices(&ring)?.policy;
    let kinds = Kinds::from_policy(&policy, stated)?;
    let target = args.ledger.target(&state.root)?;
    let (opened, _) = target.open_checked(&ring, false).await?;
    eprintln!(
        "noticectl: Stripe events from {} · kinds: {} · ledger {} (read only)",
        args.file.display(),
        kinds.describe(),
        target.describe()
    );
    let mut planner = IntakePlanner::with_kinds(kinds, zone, ring, std::sync::Arc::new(notice_texts::Icu));
    if let Some(key) = args.stripe_api_key.as_deref().filter(|k| !k.trim().is_empty()) {
        // The error names the option, never the value.
        let key = ApiKey::parse(key).map_err(|e| anyhow::anyhow!("NOTICE_STRIPE_API_KEY {e}"))?;
        let api = StripeApi::new(&args.stripe_api_base, key)
            .map_err(|e| anyhow::anyhow!("NOTICE_STRIPE_API_BASE: {e}"))?;
        let api = Arc::new(api);
        planner = planner.with_customers(api.clone()).with_subscriptions(api);
    } else {
        if planner.announces_price_changes() {
            eprintln!("noticectl: no NOTICE_STRIPE_API_KEY: a price-change event will stop the run (its customer facts come from Stripe's API)");
        }
        if planner.tells_trials_apart() {
            eprintln!("noticectl: no NOTICE_STRIPE_API_KEY: a trialing subscription's event will stop the run (its customer facts come from Stripe's API), and an upcoming invoice is planned as the renewal it states (whether a trial ends with it is read from Stripe's API)");
        }
        if planner.counts_anniversaries() {
            eprintln!("noticectl: no NOTICE_STRIPE_API_KEY: an event an anniversary rule speaks for is refused (the subscription's start comes from Stripe's API)");
        }
    }
    let mut tally = Tally::default();
    let mut out = std::io::stdout().lock();
    for read in events(&text) {
        tally.events += 1;
        let event = match read.event {
            Ok(event) => event,
            Err(e) => {
                tally.refused += 1;
                eprintln!("line {}: refused: {e}", read.line);
                continue;
            }
        };
        let event_type = StripeMapping.event_type(&event).unwrap_or("").to_owned();
        let planned = match StripeMapping.fact(&event) {
            Ok(fact) => planner.plan(&event_type, &fact, opened.ledger.as_ref()).await,
            Err(refused) => Err(PlanError::Refused(refused)),
        };
        match planned {
            Ok(decisions) => {
                for decision in &decisions {
                    match decision {
                        IntakeDecision::Send(_) => tally.jobs += 1,
                        IntakeDecision::Withdraw(_) => tally.withdraws += 1,
                        IntakeDecision::Ignore { reason } => {
                            tally.ignored += 1;
                            eprintln!("line {} ({event_type}): ignored: {reason}", read.line);
                        }
                    }
                    if let Some(message) = decision.message() {
                        writeln!(out, "{message}")?;
                    }
                }
            }
            Err(PlanError::Refused(refused)) => {
                tally.refused += 1;
                eprintln!("line {}: refused: {refused}", read.line);
            }
            // The Lambda answers 500 and Stripe retries; here nothing more can be planned.
            Err(PlanError::Ledger(e)) => return Err(e).context(format!("line {}", read.line)),
            // Stripe unreachable, or the key refused (or unset): nothing is guessed in its place.
            Err(PlanError::Lookup(e)) => {
                return Err(e).context(format!(
                    "line {}: the customer's facts could not be read from Stripe's API (NOTICE_STRIPE_API_KEY, NOTICE_STRIPE_API_BASE)",
                    read.line
                ))
            }
        }
    }
    out.flush()?;
    eprintln!(
        "events: {} · jobs: {} · withdraws: {} · ignored: {} · refused: {}",
        tally.events, tally.jobs, tally.withdraws, tally.ignored, tally.refused
    );
    Ok(Exit::attention_if(tally.refused > 0).into())
}
