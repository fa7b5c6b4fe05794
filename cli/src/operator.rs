//! Who is acting: the name an audited action (a quarantine resolve or release, a withdraw)
//! records on the row it writes. Evidence that says "released by unknown-operator" proves
//! nothing, so an action without a name is refused before anything is opened or written.

/// `--operator NAME` (`--by` still works), else `NOTICE_OPERATOR`, else `$USER`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct OperatorArg {
    /// Who is acting, recorded on the row (else NOTICE_OPERATOR, then $USER; refused without one).
    #[arg(long = "operator", visible_alias = "by", value_name = "NAME")]
    operator: Option<String>,
}

/// The longest name recorded; a name is a person or a runbook's robot, not a paragraph.
const MAX_OPERATOR_CHARS: usize = 128;

impl OperatorArg {
    /// The name to record, or a refusal naming where each source was looked for. Called before
    /// the command opens its ledger, so a refused command leaves nothing behind.
    pub(crate) fn who(&self) -> anyhow::Result<String> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let (name, source) = match (&self.operator, env("NOTICE_OPERATOR"), env("USER")) {
            (Some(flag), _, _) => (flag.clone(), "--operator"),
            (None, Some(name), _) => (name, "NOTICE_OPERATOR"),
            (None, None, Some(name)) => (name, "USER"),
            (None, None, None) => anyhow::bail!(
                "who is acting? give --operator NAME (or set NOTICE_OPERATOR): it is recorded on the \
                 row as evidence; nothing was changed"
            ),
        };
        let name = name.trim().to_owned();
        if name.is_empty() || name.chars().count() > MAX_OPERATOR_CHARS || name.chars().any(char::is_control)
        {
            anyhow::bail!(
                "{source}: {name:?} is not a name to record (1 to {MAX_OPERATOR_CHARS} characters, no \
                 control characters); nothing was changed"
            );
        }
        Ok(name)
    }
}
