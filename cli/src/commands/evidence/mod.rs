//! `noticectl evidence`: what the ledger shows about one subscription's notices for one period —
//! for a disputed charge or a regulator's question: which notice went out when, how long before
//! the charge, judged against which window, and what the provider reported.
//!
//! No index or scan: the notice keys are derived (kinds × revisions, under the deployment's
//! secret, as `noticectl key` does) and read in one batch (one DynamoDB `BatchGetItem`, hence at
//! most [`MAX_KEYS`] keys). The secret is used, never printed.
//!
//! Each window is judged by the policy of the configuration version the row names (`--config`:
//! directories, or buckets of published versions; else the built-in configuration if it is that
//! version); a row without a version, or whose version is not found, falls back to the policy given
//! now and says why. `--render JOBS` re-renders each notice from that version and the job's inputs
//! and compares the digest with the stored one.

//!
//! This module holds the arguments, the per-row evidence and the command's flow; which
//! configuration version judges a window is in [`versions`], `--render` in [`rerender`], and the
//! text for people in [`output`].

mod output;
mod rerender;
mod versions;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use chrono::{DateTime, Utc};
use notice_ledger::keyring::KeyRing;
use notice_ledger::ledger::{LedgerRow, RowState};
use notice_ledger::{Identity, NoticeKey, WindowPolicy};
use serde::Serialize;

use self::output::{render, render_blocks};
pub(crate) use self::rerender::RenderCheck;
use self::rerender::RenderInputs;
pub(crate) use self::versions::PolicyBasis;
use self::versions::Versions;
use super::windows::{PolicyArg, WindowView};
use crate::exit::Exit;
use crate::ledger_target::LedgerArg;
use crate::local::StateDir;
use crate::terminal::escape;

/// Keys one run may derive: one DynamoDB `BatchGetItem` holds 100.
pub(crate) const MAX_KEYS: usize = 100;

#[derive(clap::Args, Debug)]
pub(crate) struct EvidenceArgs {
    #[arg(long)]
    subscription_id: String,
    /// The period the notices were for (YYYY-MM-DD), as in the jobs.
    #[arg(long)]
    period_start: String,
    /// Notice kinds to look for, comma-separated; default: every kind the windows policy names.
    #[arg(long, value_delimiter = ',', value_name = "K1,K2")]
    kinds: Vec<String>,
    /// Revisions to look for: a range (`0-3`) or a list (`0,2`).
    #[arg(long, default_value = "0-3", value_name = "N-M")]
    revisions: String,
    #[command(flatten)]
    policy: PolicyArg,
    /// Where to find the notice configuration version each row names (repeatable): a
    /// configuration directory, or s3://BUCKET holding published versions
    /// (notice-config/<hex>.json). Each window is judged by that version's policy; the built-in
    /// configuration serves when it is that version. A row without a version, or whose version is
    /// not found, is judged by the policy given now (--windows) and says why.
    #[arg(long = "config", value_name = "DIR|s3://BUCKET")]
    configs: Vec<String>,
    /// Re-render each notice from its stored configuration version and its job in JOBS (job
    /// bodies, one JSON per line, as `noticectl send` reads) and compare with the stored digest:
    /// matches, differs, or inputs differ (JOBS holds other content than was sent). Manage links
    /// must be made as the sender made them: the same NOTICE_MANAGE_URL (and NOTICE_LINK_SECRET,
    /// if set) and key secret, or every digest differs. Exit 1 on any mismatch.
    #[arg(long, value_name = "JOBS")]
    render: Option<PathBuf>,
    #[command(flatten)]
    ledger: LedgerArg,
    /// A claim older than this many seconds is shown as quarantined; default
    /// NOTICE_STALE_AFTER_SECS (900).
    #[arg(long, value_name = "SECS")]
    stale_after_secs: Option<u64>,
    /// Print one JSON object (for export) instead of the blocks.
    #[arg(long, conflicts_with = "wide")]
    json: bool,
    /// One table row per notice (about 250 columns, more with the rendered-notice evidence) instead
    /// of one block per notice.
    #[arg(long)]
    wide: bool,
}

/// One notice as the ledger records it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct NoticeEvidence {
    pub(crate) notice_key: String,
    pub(crate) kind: String,
    pub(crate) revision: u64,
    pub(crate) state: &'static str,
    /// An open claim older than the stale age: the send's outcome is unknown to the ledger.
    pub(crate) quarantined: bool,
    pub(crate) origin: &'static str,
    /// When the claim was taken — immediately before the one send attempt.
    pub(crate) claimed_at: Option<DateTime<Utc>>,
    /// The row's last write (a commit, a provider event, or the missed record itself).
    pub(crate) updated_at: DateTime<Utc>,
    /// The moment judged against the window: the claim, or for a missed notice when the miss was
    /// recorded.
    pub(crate) at: Option<DateTime<Utc>>,
    pub(crate) charge_at: Option<DateTime<Utc>>,
    pub(crate) jurisdiction: Option<String>,
    pub(crate) hours_before_charge: Option<f64>,
    pub(crate) minutes_before_charge: Option<i64>,
    /// The effective window for this kind and jurisdiction under the policy given, and whether
    /// `at` lies inside it (both need the stored charge time).
    pub(crate) window: Option<WindowView>,
    pub(crate) inside_window: Option<bool>,
    pub(crate) message_id: Option<String>,
    pub(crate) delivery_status: Option<&'static str>,
    pub(crate) duplicate_message_ids: Vec<String>,
    /// Why the row is missed, rejected or released; who resolved it.
    pub(crate) detail: Option<String>,
    /// Digest of the content inputs (recipient, charge, jurisdiction, locale, template data) of
    /// the job that claimed it; the rendered body itself is not stored.
    pub(crate) content_digest: Option<String>,
    /// What rendered the message, when the row stores it (all three or none): the notice
    /// configuration's content-addressed version, the template used (`<kind>/<locale>`) and the
    /// hex SHA-256 of the rendered subject, text and HTML.
    pub(crate) config_version: Option<String>,
    pub(crate) template: Option<String>,
    pub(crate) rendered_digest: Option<String>,
    /// The obligation rule that owed the notice (`US-CA/ca-annual-term`), as the claim stored it
    /// from the job: why the customer was told. `None`: a producer's own job, or a row written
    /// before rules were recorded.
    pub(crate) obligation: Option<String>,
    /// That rule's `description` in the policy that judged this row (its statute), when that
    /// policy still has the rule.
    pub(crate) obligation_description: Option<String>,
    /// Which policy judged `window` and `inside_window`.
    pub(crate) policy: PolicyBasis,
    /// `--render`: the re-rendered notice against the stored digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) render: Option<RenderCheck>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct Report {
    subscription_id: String,
    period_start: String,
    ledger: String,
    /// The policy given now: what judges rows without a configuration version found.
    policy: String,
    configs: Vec<String>,
    kinds: Vec<String>,
    revisions: Vec<u64>,
    keys_looked_up: usize,
    /// The key secret's identifier (never the secret): which secret the keys were derived with.
    key_secret: String,
    notices: Vec<NoticeEvidence>,
}

/// `0-3` → 0, 1, 2, 3; `0,2` → 0, 2; `5` → 5.
pub(crate) fn parse_revisions(text: &str) -> anyhow::Result<Vec<u64>> {
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .with_context(|| format!("--revisions {text:?}: {s:?} is not a revision (an integer >= 0)"))
    };
    let mut out = Vec::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((from, to)) => {
                let (from, to) = (number(from)?, number(to)?);
                if from > to {
                    anyhow::bail!("--revisions {text:?}: the range {from}-{to} is backwards");
                }
                if to - from >= MAX_KEYS as u64 {
                    anyhow::bail!("--revisions {text:?}: at most {MAX_KEYS} revisions in one run");
                }
                out.extend(from..=to);
            }
            None => out.push(number(part)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// What one row shows, judged against `policy` and the stale age at `now`.
pub(crate) fn notice_evidence(
    row: &LedgerRow,
    kind: &str,
    revision: u64,
    policy: &WindowPolicy,
    basis: PolicyBasis,
    stale_before: DateTime<Utc>,
) -> NoticeEvidence {
    let at = match row.state {
        RowState::Missed => Some(row.updated_at),
        _ => row.claimed_at,
    };
    let before = row.charge_at.zip(at).map(|(charge, at)| charge - at);
    // Rows written before jurisdictions were normalised may hold `us-ca`: judged as `US-CA`.
    let jurisdiction = row
        .jurisdiction
        .as_deref()
        .map(|j| notice_ledger::jurisdiction::normalise(j).unwrap_or_else(|_| j.to_owned()));
    let jurisdiction = jurisdiction.as_deref();
    let window = row.charge_at.map(|charge| {
        let effective = policy.effective(Some(kind), jurisdiction);
        WindowView::new(Some(kind), jurisdiction, &effective, Some(charge))
    });
    let inside_window = row
        .charge_at
        .zip(at)
        .map(|(charge, at)| policy.effective(Some(kind), jurisdiction).window.contains(charge, at));
    NoticeEvidence {
        notice_key: row.key.as_str().to_owned(),
        kind: kind.to_owned(),
        revision,
        state: row.state.as_str(),
        quarantined: row.state == RowState::Claimed && row.claimed_at.is_some_and(|t| t < stale_before),
        origin: row.origin.as_str(),
        claimed_at: row.claimed_at,
        updated_at: row.updated_at,
        at,
        charge_at: row.charge_at,
        jurisdiction: row.jurisdiction.clone(),
        hours_before_charge: before.map(|d| d.num_milliseconds() as f64 / 3_600_000.0),
        minutes_before_charge: before.map(|d| d.num_minutes()),
        window,
        inside_window,
        message_id: row.message_id.clone(),
        delivery_status: row.delivery_status.map(|d| d.as_str()),
        duplicate_message_ids: row.duplicate_message_ids.clone(),
        detail: row.detail.clone(),
        content_digest: row.content_digest.clone(),
        config_version: row.rendered.as_ref().map(|r| r.config_version.clone()),
        template: row.rendered.as_ref().map(|r| r.template.clone()),
        rendered_digest: row.rendered.as_ref().map(|r| r.rendered_digest.clone()),
        obligation: row.obligation.clone(),
        obligation_description: row
            .obligation
            .as_deref()
            .and_then(|id| policy.obligations().rule(id))
            .and_then(|rule| rule.description.clone()),
        policy: basis,
        render: None,
    }
}

fn revisions_text(revisions: &[u64]) -> String {
    match (revisions.first(), revisions.last()) {
        (Some(first), Some(last)) if revisions.len() as u64 == last - first + 1 && revisions.len() > 1 => {
            format!("{first}-{last}")
        }
        _ => revisions.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
    }
}

pub(crate) async fn run(state_dir: PathBuf, args: EvidenceArgs) -> anyhow::Result<ExitCode> {
    let (policy, policy_source) = args.policy.load()?;
    let mut versions = Versions::new(&args.configs)?;
    let kinds = kinds_to_look_for(&args.kinds, &policy, &policy_source, &versions)?;
    let revisions = parse_revisions(&args.revisions)?;
    let wanted = kinds.len() * revisions.len();
    if wanted > MAX_KEYS {
        anyhow::bail!(
            "evidence: {} kinds × {} revisions is {wanted} keys; at most {MAX_KEYS} in one run (narrow --kinds or --revisions)",
            kinds.len(),
            revisions.len()
        );
    }
    let stale_after = match args.stale_after_secs {
        Some(secs) => std::time::Duration::from_secs(secs),
        None => notice_setup::config::stale_after_from_env()?,
    };

    let state = StateDir::open(&state_dir)?;
    let secret = state.secret().await?;
    let (keys, derived) =
        derive_keys(&secret, &args.subscription_id, &args.period_start, &kinds, &revisions)?;

    let target = args.ledger.target(&state.root)?;
    let (opened, key_secret) = target.open_checked(&secret, false).await?;
    let ledger = opened.ledger;
    let rows = ledger.get_many(&keys).await.context("ledger lookup failed")?;
    let now = Utc::now();
    let stale_before = now - chrono::Duration::from_std(stale_after).unwrap_or(chrono::Duration::MAX);
    let render_inputs = match &args.render {
        Some(path) => Some(RenderInputs::read(path, &secret)?),
        None => None,
    };
    let judge = Judge {
        policy: &policy,
        policy_source: &policy_source,
        stale_before,
        render: render_inputs.as_ref(),
    };
    let notices = judge.all(&rows, &derived, &mut versions).await;

    if notices.is_empty() {
        eprintln!(
            "noticectl evidence: no ledger rows for subscription {}, period {} (kinds {} × revisions {}) in {}, \
             keys derived with key secret {} — if notices were sent, check the kinds and the revisions",
            escape(&args.subscription_id),
            args.period_start,
            kinds.join(","),
            revisions_text(&revisions),
            target.describe(),
            key_secret.identifier()
        );
        return Ok(Exit::Attention.into());
    }
    let report = Report {
        subscription_id: args.subscription_id,
        period_start: args.period_start,
        ledger: target.describe(),
        policy: policy_source,
        configs: args.configs,
        kinds,
        revisions,
        keys_looked_up: keys.len(),
        key_secret: key_secret.identifier(),
        notices,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if args.wide {
        print!("{}", render(&report));
    } else {
        print!("{}", render_blocks(&report));
    }
    Ok(render_verdict(&report, render_inputs.is_some()))
}

/// The kinds to look for: `--kinds` as given, else every kind the windows policy and the
/// configuration versions name.
fn kinds_to_look_for(
    given: &[String],
    policy: &WindowPolicy,
    policy_source: &str,
    versions: &Versions,
) -> anyhow::Result<Vec<String>> {
    if !given.is_empty() {
        return Ok(given.iter().map(|k| k.trim().to_owned()).collect());
    }
    let mut named: Vec<String> = policy.kinds().into_iter().map(str::to_owned).collect();
    named.extend(versions.kinds());
    named.sort_unstable();
    named.dedup();
    if named.is_empty() {
        anyhow::bail!(
            "evidence: give --kinds: the windows policy ({policy_source}) names no kinds to look for"
        );
    }
    Ok(named)
}

/// The kind and revision each derived key was derived for.
type DerivedFor = HashMap<NoticeKey, (String, u64)>;

/// Every key the notices of `kinds` × `revisions` may live under, and the kind and revision each
/// was derived for.
fn derive_keys(
    secret: &KeyRing,
    subscription_id: &str,
    period_start: &str,
    kinds: &[String],
    revisions: &[u64],
) -> anyhow::Result<(Vec<NoticeKey>, DerivedFor)> {
    let wanted = kinds.len() * revisions.len();
    let mut derived: DerivedFor = HashMap::with_capacity(wanted);
    let mut keys = Vec::with_capacity(wanted);
    for kind in kinds {
        for revision in revisions {
            let identity = Identity::new(subscription_id, period_start, kind, *revision)?;
            // Every version held, retired ones too: a notice keyed before a rotation is still found.
            for key in secret.all_keys(&identity) {
                derived.insert(key.clone(), (kind.clone(), *revision));
                keys.push(key);
            }
        }
    }
    Ok((keys, derived))
}

/// How the rows are judged: by the policy of the configuration version each names, else the
/// policy given now; a claim older than `stale_before` is quarantined; `--render` checks each.
struct Judge<'a> {
    policy: &'a WindowPolicy,
    policy_source: &'a str,
    stale_before: DateTime<Utc>,
    render: Option<&'a RenderInputs>,
}

impl Judge<'_> {
    /// The evidence of every row found under a derived key, by kind and revision.
    async fn all(
        &self,
        rows: &[LedgerRow],
        derived: &DerivedFor,
        versions: &mut Versions,
    ) -> Vec<NoticeEvidence> {
        let mut notices: Vec<NoticeEvidence> = Vec::with_capacity(rows.len());
        for row in rows {
            let Some((kind, revision)) = derived.get(&row.key) else { continue };
            notices.push(self.one(row, kind, *revision, versions).await);
        }
        notices.sort_by(|a, b| (a.kind.as_str(), a.revision).cmp(&(b.kind.as_str(), b.revision)));
        notices
    }

    async fn one(
        &self,
        row: &LedgerRow,
        kind: &str,
        revision: u64,
        versions: &mut Versions,
    ) -> NoticeEvidence {
        let found = match &row.rendered {
            Some(r) => versions.find(&r.config_version).await,
            None => Err("the row names no configuration version".to_owned()),
        };
        let mut notice = match (&found, &row.rendered) {
            (Ok((config, from)), _) => notice_evidence(
                row,
                kind,
                revision,
                config.policy(),
                PolicyBasis::version(config, from),
                self.stale_before,
            ),
            (Err(why), rendered) => {
                let reason = match rendered {
                    Some(r) => format!("its version {} was not found: {why}", escape(&r.config_version)),
                    None => why.clone(),
                };
                let basis = PolicyBasis::given_now(self.policy_source, reason);
                notice_evidence(row, kind, revision, self.policy, basis, self.stale_before)
            }
        };
        notice.render = self.render.map(|inputs| inputs.check(row, &found));
        notice
    }
}

/// The exit code of a run that found notices: with `--render` (`rendered`), 1 when none could
/// be compared or any needs attention.
fn render_verdict(report: &Report, rendered: bool) -> ExitCode {
    if rendered {
        let checks: Vec<&RenderCheck> = report.notices.iter().filter_map(|n| n.render.as_ref()).collect();
        let compared = checks.iter().filter(|c| !matches!(c.verdict, "no job" | "not rendered")).count();
        if compared == 0 {
            eprintln!("noticectl evidence: --render: no notice could be compared (no job in the file for a rendered notice)");
            return Exit::Attention.into();
        }
        if checks.iter().any(|c| c.needs_attention()) {
            return Exit::Attention.into();
        }
    }
    Exit::Ok.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_read_as_ranges_or_lists() {
        assert_eq!(parse_revisions("0-3").unwrap(), [0, 1, 2, 3]);
        assert_eq!(parse_revisions("2,0,2").unwrap(), [0, 2]);
        assert_eq!(parse_revisions("5").unwrap(), [5]);
        assert_eq!(parse_revisions("0-1,4").unwrap(), [0, 1, 4]);
        assert!(parse_revisions("3-1").is_err());
        assert!(parse_revisions("-1").is_err());
        assert!(parse_revisions("a").is_err());
        assert!(parse_revisions("0-1000").is_err());
        assert_eq!(revisions_text(&[0, 1, 2, 3]), "0-3");
        assert_eq!(revisions_text(&[0, 2]), "0,2");
        assert_eq!(revisions_text(&[4]), "4");
    }
}
