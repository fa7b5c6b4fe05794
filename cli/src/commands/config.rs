//! `noticectl config check | preview | publish`: a notice configuration (texts per kind and
//! locale, the windows policy, a manifest) checked as a whole, looked at as the customer will see
//! it, and published as one immutable, content-addressed version. docs/notices.md.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, Context};
use notice_ledger::links::ManageLinks;
use notice_ledger::locale::{Locale, TimeZone};
use notice_ledger::mailer::outbox::FileOutbox;
use notice_ledger::mailer::{Mailer, SendResult};
use notice_ledger::NoticeSecret;
use notice_texts::config_check::sample_job;
use notice_texts::notices::{Bundle, NoticeConfig, Problem};
use notice_texts::Renderer;

use crate::exit::Exit;
use crate::terminal::escape;

#[derive(clap::Args, Debug)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(clap::Subcommand, Debug)]
enum ConfigCommand {
    /// Check a configuration directory as a whole: every template parses, uses only known variables, renders for every kind × locale × jurisdiction with the manifest's sample data and shows what the policy requires. Exit 1 with every problem listed (file:line: what).
    Check {
        dir: PathBuf,
        /// One JSON object instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Render one sample notice (the manifest's sample variables) to OUT: notice.html, notice.txt and notice.eml, for a reviewer to open.
    Preview {
        dir: PathBuf,
        #[arg(long)]
        kind: String,
        /// The customer's locale (the texts answering it are used: de-AT → de → the default).
        #[arg(long)]
        locale: String,
        /// The customer's jurisdiction (ISO 3166 code): checks the policy's required content too.
        #[arg(long)]
        jurisdiction: Option<String>,
        /// The customer's time zone (IANA, e.g. America/Los_Angeles): the charge date as they
        /// will read it. Without it, UTC, as for a job that names none.
        #[arg(long, value_name = "ZONE")]
        time_zone: Option<String>,
        /// Where the files go (created if missing).
        #[arg(long, default_value = "preview")]
        out: PathBuf,
    },
    /// Check, then upload the configuration to S3 under its digest (never overwriting a version) and point the deployment's SSM parameter at it. Senders pick it up within NOTICE_CONFIG_REFRESH_SECS.
    Publish {
        dir: PathBuf,
        /// The stack's configuration bucket (the NoticeConfigBucket parameter).
        #[arg(long)]
        bucket: String,
        /// The SSM parameter the senders read (the stack's NoticeConfigParameter output); without it, only upload.
        #[arg(long)]
        parameter: Option<String>,
        /// Print what would be uploaded and pointed at; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

pub(crate) async fn run(args: ConfigArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ConfigCommand::Check { dir, json } => check(&dir, json),
        ConfigCommand::Preview { dir, kind, locale, jurisdiction, time_zone, out } => {
            let customer = Customer {
                locale: &locale,
                jurisdiction: jurisdiction.as_deref(),
                time_zone: time_zone.as_deref(),
            };
            preview(&dir, &kind, customer, &out).await
        }
        ConfigCommand::Publish { dir, bucket, parameter, dry_run } => {
            publish(&dir, &bucket, parameter.as_deref(), dry_run).await
        }
    }
}

/// Who the preview is for: the flags that place a customer.
struct Customer<'a> {
    locale: &'a str,
    jurisdiction: Option<&'a str>,
    time_zone: Option<&'a str>,
}

/// A directory that cannot be read at all is exit 2 in the table (an unreadable file), not a
/// configuration with problems (exit 1): nothing was checked.
fn readable(dir: &Path) -> anyhow::Result<()> {
    std::fs::read_dir(dir)
        .map(drop)
        .with_context(|| format!("cannot read the configuration {}", dir.display()))
}

/// Reads and checks `dir`: the configuration, or every problem found.
fn load(dir: &Path) -> Result<NoticeConfig, Vec<Problem>> {
    let bundle = Bundle::from_dir(dir).map_err(|e| vec![Problem::from(e)])?;
    NoticeConfig::load(bundle)
}

fn check(dir: &Path, json: bool) -> anyhow::Result<ExitCode> {
    readable(dir)?;
    let result = load(dir);
    if json {
        let doc = match &result {
            Ok(c) => serde_json::json!({
                "ok": true,
                "name": c.manifest().name,
                "version": c.version().as_str(),
                "locales": c.manifest().locales.iter().map(Locale::as_str).collect::<Vec<_>>(),
                "kinds": c.manifest().kinds,
                "jurisdictions": c.policy().jurisdictions(),
            }),
            Err(problems) => serde_json::json!({
                "ok": false,
                "problems": problems.iter().map(|p| serde_json::json!({
                    "file": p.file, "line": p.line, "message": p.message,
                })).collect::<Vec<_>>(),
            }),
        };
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        match &result {
            Ok(c) => {
                let m = c.manifest();
                println!(
                    "ok: {} · version {} · {} kind(s) × {} locale(s) × {} jurisdiction(s), every combination rendered",
                    escape(&m.name),
                    c.version(),
                    if m.kinds.is_empty() { "any".to_owned() } else { m.kinds.len().to_string() },
                    m.locales.len(),
                    c.policy().jurisdictions().len()
                );
            }
            Err(problems) => {
                print_problems(problems);
                eprintln!(
                    "noticectl: {} problem(s) in {}; nothing can be published",
                    problems.len(),
                    dir.display()
                );
            }
        }
    }
    Ok(if result.is_ok() { Exit::Ok } else { Exit::Attention }.into())
}

async fn preview(dir: &Path, kind: &str, customer: Customer<'_>, out: &Path) -> anyhow::Result<ExitCode> {
    let Customer { locale, jurisdiction, time_zone } = customer;
    readable(dir)?;
    let config = match load(dir) {
        Ok(c) => c,
        Err(problems) => {
            print_problems(&problems);
            return Err(anyhow!(
                "{} fails its check ({} problem(s)): fix them first",
                dir.display(),
                problems.len()
            ));
        }
    };
    let locale = Locale::parse(locale, &notice_texts::Icu).map_err(|e| anyhow!("--locale: {e}"))?;
    let mut job = sample_job(&config, kind, &locale, jurisdiction).map_err(|e| anyhow!("{e}"))?;
    if let Some(zone) = time_zone {
        job.time_zone = Some(TimeZone::parse(zone).map_err(|e| anyhow!("--time-zone: {e}"))?);
    }
    let secret = NoticeSecret::new("noticectl config preview")?;
    let links = ManageLinks::new("https://manage.example.com/preview", secret.clone());
    let renderer = Renderer::new(Arc::new(config), links);
    renderer.config().policy().admit(&job, || renderer.variables(&job)).map_err(|r| anyhow!("{r}"))?;
    let rendered = renderer.render(&job, &job.key(&secret)).map_err(|e| anyhow!("{e}"))?;
    std::fs::create_dir_all(out).with_context(|| out.display().to_string())?;
    std::fs::write(out.join("notice.html"), &rendered.mail.html)?;
    std::fs::write(
        out.join("notice.txt"),
        format!("Subject: {}\n\n{}", rendered.mail.subject, rendered.mail.text),
    )?;
    // The .eml exactly as `noticectl send` writes it (the outbox's MIME), then renamed.
    let outbox = FileOutbox::new(out.join("eml"), "Preview <preview@example.com>")?;
    if let SendResult::Accepted { .. } = outbox.send(&rendered.mail).await {
        for file in outbox.messages()? {
            std::fs::rename(&file, out.join("notice.eml")).with_context(|| file.display().to_string())?;
        }
        std::fs::remove_dir(out.join("eml")).with_context(|| out.join("eml").display().to_string())?;
    } else {
        return Err(anyhow!("could not write {}/notice.eml", out.display()));
    }
    println!(
        "{} · texts {} · subject {:?}\nwrote {}/notice.html, notice.txt, notice.eml",
        renderer.config().version(),
        rendered.template.label(),
        rendered.mail.subject,
        out.display()
    );
    Ok(Exit::Ok.into())
}

async fn publish(
    dir: &Path,
    bucket: &str,
    parameter: Option<&str>,
    dry_run: bool,
) -> anyhow::Result<ExitCode> {
    readable(dir)?;
    let config = match load(dir) {
        Ok(c) => c,
        Err(problems) => {
            print_problems(&problems);
            eprintln!("noticectl: {} problem(s): nothing published", problems.len());
            return Ok(Exit::Attention.into());
        }
    };
    let bytes = config.bundle().to_published();
    let version = config.version();
    let target = format!("s3://{bucket}/notice-config/{}.json", version.hex());
    println!("checked: {} · version {version} · {} bytes", escape(&config.manifest().name), bytes.len());
    if dry_run {
        println!("dry run: would upload {target}");
        if let Some(p) = parameter {
            println!("dry run: would point {p} at it");
        }
        return Ok(Exit::Ok.into());
    }
    let sdk = notice_setup::aws::load_sdk_config().await;
    let location =
        notice_configstore::publish(&sdk, bucket, &bytes, version.hex()).await.map_err(|e| anyhow!("{e}"))?;
    println!("uploaded {location}");
    if let Some(p) = parameter {
        let previous = notice_configstore::point(&sdk, p, &location).await.map_err(|e| anyhow!("{e}"))?;
        match previous {
            Some(prev) if prev == location => println!("{p} already points at it"),
            Some(prev) => println!("{p}: was {prev}, now {location}"),
            None => println!("{p}: now {location}"),
        }
        println!(
            "senders pick it up within NOTICE_CONFIG_REFRESH_SECS (default 5 minutes); new ones at start"
        );
    }
    Ok(Exit::Ok.into())
}

/// Every problem, one line each (`file:line: what`), as `config check` prints them.
fn print_problems(problems: &[Problem]) {
    for p in problems {
        println!("{}", escape(&p.to_string()));
    }
}
