//! The `noticectl` and `notice-proof` command lines the README and `docs/` show, and their check
//! against the real clap definitions (issue 50, "executable docs").
//!
//! Test-only and shared: `cli/src/docs_check.rs` and `proof/src/docs_check.rs` both include this
//! one file by `#[path]` (it and its shell lexer, `docs_lexer.rs` beside it, need only std and
//! clap, which both crates have), so the two tools' pages are read by one extractor under one
//! placeholder convention — the one docs/operations.md writes down in *Commands in these pages*.
//! Change the rules there and here together.

use std::path::Path;

use clap::error::ErrorKind;
use clap::{Arg, Command, Parser};

// The shell lexer, beside this file: a `#[path]` here is relative to this file's own directory,
// so both includers (`cli/src/docs_check.rs`, `proof/src/docs_check.rs`) find it.
#[path = "docs_lexer.rs"]
mod lexer;

use lexer::{lex, Token};

/// What a placeholder becomes when its argument refuses it as written (and, for an argument with
/// a fixed set of values, refuses its first value too): the first of these the argument accepts —
/// a count, a fraction, an instant, an age, a whole notice key (docs/job.md's test vector).
const SAMPLES: [&str; 5] = [
    "1",
    "0.5",
    "2026-12-02T12:00:00Z",
    "15m",
    "439cd4564d72ee966ff47dffecf8bdbbd67b3b4e01b23211daafb0ea4ce4dacc",
];

/// Fenced blocks whose lines are commands; any other block (`text`, `json`, …) is not checked.
const SHELL_BLOCKS: [&str; 4] = ["sh", "bash", "console", "shell"];

/// One command a page shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocCommand {
    /// The page, relative to the workspace root (`docs/deploy.md`).
    pub page: String,
    /// The line the command starts on (1-based), where a reader finds it.
    pub line: usize,
    /// The command as the check saw it, on one line: the tool's name and its words.
    pub text: String,
    /// Its words after the tool's name, split as a shell splits them (quotes removed).
    pub args: Vec<Word>,
    /// Named in prose (an inline code span, a row of a command table): it may leave out required
    /// arguments, a subcommand or a flag's value, as prose does when it names a command.
    pub prose: bool,
}

/// One shell word of a documented command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    /// Stands for a value rather than being one: in capitals (`FILE`), or with `<…>`, `…`, or a
    /// shell expansion (`$(out X)`, `$VAR`) in it.
    pub placeholder: bool,
}

/// README.md and every `docs/*.md`, as (path relative to the workspace root, text), in name order.
pub fn workspace_pages() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let docs = std::fs::read_dir(root.join("docs")).expect("docs/ is readable");
    let mut names: Vec<String> = docs
        .map(|entry| entry.expect("a docs/ entry is readable").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    names.sort();
    names.insert(0, "README.md".to_owned());
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(root.join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect()
}

/// Every command of `tool` that `text` (the page `page`) shows: the lines of its shell blocks
/// (through `\` continuations and quotes that span lines, after `$ ` prompts and `NAME=value`
/// assignments, as `tool …` or `cargo run … -p tool -- …`, each command of a pipeline or list),
/// its inline code spans that run the tool (spans may cross lines), and the first-column spans of
/// the command table under a heading that is the tool's name in code (`` ## `noticectl` ``).
pub fn extract(page: &str, text: &str, tool: &str) -> Vec<DocCommand> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut paragraph: Vec<(usize, &str)> = Vec::new();
    let mut command_table = false;
    let mut at = 0;
    while at < lines.len() {
        let trimmed = lines[at].trim_start();
        if let Some((fence, lang)) = fence_opening(trimmed) {
            prose_commands(page, &paragraph, tool, command_table, &mut found);
            paragraph.clear();
            let mut end = at + 1;
            while end < lines.len() && !lines[end].trim_start().starts_with(fence) {
                end += 1;
            }
            if SHELL_BLOCKS.contains(&lang) {
                let body: Vec<(usize, &str)> = (at + 1..end).map(|n| (n + 1, lines[n])).collect();
                block_commands(page, &body, lang == "console", tool, &mut found);
            }
            at = end + 1;
            continue;
        }
        if trimmed.is_empty() {
            prose_commands(page, &paragraph, tool, command_table, &mut found);
            paragraph.clear();
        } else if let Some(title) = heading(trimmed) {
            prose_commands(page, &paragraph, tool, command_table, &mut found);
            paragraph.clear();
            command_table = title == format!("`{tool}`");
            prose_commands(page, &[(at + 1, lines[at])], tool, command_table, &mut found);
        } else {
            paragraph.push((at + 1, lines[at]));
        }
        at += 1;
    }
    prose_commands(page, &paragraph, tool, command_table, &mut found);
    found
}

/// Parses every documented command with `T`, the tool's real clap definition, and returns one
/// line per command that does not parse: `page:line: command: clap's first line`.
///
/// A `--help` or `--version` outcome is a parse. A prose command, or one with a `…` standing for
/// arguments left out, may also lack required arguments or its subcommand. The definition is read
/// without its `env = …` defaults, so the verdict does not depend on the test's environment.
pub fn check<T: Parser>(commands: &[DocCommand]) -> Vec<String> {
    let mut root = T::command();
    root.build();
    let root = without_env(root);
    let mut failures = Vec::new();
    for doc in commands {
        for (argv, elided) in resolve(&root, &doc.args, doc.prose) {
            let parsed =
                root.clone().try_get_matches_from(&argv).and_then(|m| T::from_arg_matches(&m).map(drop));
            let Err(error) = parsed else { continue };
            if passes(error.kind(), doc.prose || elided) {
                continue;
            }
            let first = error.to_string().lines().next().unwrap_or_default().to_owned();
            let checked = argv.join(" ");
            let as_checked =
                if checked == doc.text { String::new() } else { format!(" [checked as: {checked}]") };
            failures.push(format!("{}:{}: {}: {first}{as_checked}", doc.page, doc.line, doc.text));
        }
    }
    failures
}

/// Whether clap's refusal still means the page is right: `--help` and `--version` answer by an
/// "error", and a command named in part (`partial`) is allowed to stop short.
fn passes(kind: ErrorKind, partial: bool) -> bool {
    match kind {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => true,
        ErrorKind::MissingRequiredArgument
        | ErrorKind::MissingSubcommand
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => partial,
        _ => false,
    }
}

/// `command` with no `env = …` anywhere: a `NOTICE_*` variable set where the tests run must not
/// supply an argument a page leaves out (nor one the page shows be judged differently).
fn without_env(command: Command) -> Command {
    command.mut_args(|arg| arg.env(None::<&str>)).mut_subcommands(without_env)
}

/// The opening of a fenced block: its fence (``` or ~~~) and its language.
fn fence_opening(trimmed: &str) -> Option<(&'static str, &str)> {
    let fence = ["```", "~~~"].into_iter().find(|fence| trimmed.starts_with(fence))?;
    let info = trimmed.trim_start_matches(fence.as_bytes()[0] as char);
    Some((fence, info.split_whitespace().next().unwrap_or("")))
}

/// A heading's title (`## Title` → `Title`).
fn heading(trimmed: &str) -> Option<&str> {
    let title = trimmed.trim_start_matches('#');
    (title.len() < trimmed.len() && title.starts_with(' ')).then(|| title.trim())
}

/// The commands of one shell block, `body` being its (line number, line) pairs. In a `console`
/// block only `$ ` lines are commands (the rest is their output).
fn block_commands(
    page: &str,
    body: &[(usize, &str)],
    console: bool,
    tool: &str,
    found: &mut Vec<DocCommand>,
) {
    let mut at = 0;
    while at < body.len() {
        let (line, first) = body[at];
        let first = first.trim_start();
        let command = match (first.strip_prefix("$ "), console) {
            (Some(command), _) => command,
            (None, false) => first,
            (None, true) => {
                at += 1;
                continue;
            }
        };
        let mut text = command.to_owned();
        let mut lexed = lex(&text);
        while lexed.open && at + 1 < body.len() {
            at += 1;
            text.push('\n');
            text.push_str(body[at].1);
            lexed = lex(&text);
        }
        at += 1;
        push_invocations(page, line, &lexed.tokens, tool, false, found);
    }
}

/// The commands named in one paragraph of prose (or one heading): its inline code spans.
fn prose_commands(
    page: &str,
    paragraph: &[(usize, &str)],
    tool: &str,
    command_table: bool,
    found: &mut Vec<DocCommand>,
) {
    let mut joined = String::new();
    let mut starts = Vec::new();
    for (_, line) in paragraph {
        starts.push(joined.len());
        joined.push_str(line);
        joined.push('\n');
    }
    for (offset, content) in code_spans(&joined) {
        let row = starts.partition_point(|start| *start <= offset) - 1;
        let (line, text) = paragraph[row];
        let table_row = text.trim_start().starts_with('|');
        let lead_cell = table_row && command_table && offset - starts[row] < first_cell_end(text);
        // In a table a span's `|` is written `\|` (GitHub's rule); in the command table's first
        // column it separates alternatives (`quarantine list\|resolve`), as `/` does elsewhere.
        let content = match (table_row, lead_cell) {
            (true, true) => format!("{tool} {}", content.replace("\\|", "/")),
            (true, false) => content.replace("\\|", "|"),
            (false, _) => content.to_owned(),
        };
        push_invocations(page, line, &lex(&content).tokens, tool, true, found);
    }
}

/// The byte offset of the `|` that closes a table row's first cell (not an escaped `\|`, not one
/// inside a code span); the line's length when there is none.
fn first_cell_end(row: &str) -> usize {
    let mut bars = 0;
    let mut code = false;
    let mut escaped = false;
    for (at, c) in row.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '`' => code = !code,
            '|' if !code => {
                bars += 1;
                if bars == 2 {
                    return at;
                }
            }
            _ => {}
        }
    }
    row.len()
}

/// The code spans of a paragraph: (byte offset of the opening backticks, content). A span opens
/// with a run of backticks and closes at the next run of the same length; it may cross lines.
fn code_spans(text: &str) -> Vec<(usize, &str)> {
    let bytes = text.as_bytes();
    let run = |from: usize| bytes[from..].iter().take_while(|b| **b == b'`').count();
    let mut spans = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'`' => {
                let length = run(at);
                let open_end = at + length;
                let mut close = open_end;
                let mut closed = None;
                while close < bytes.len() {
                    if bytes[close] == b'`' {
                        let other = run(close);
                        if other == length {
                            closed = Some(close);
                            break;
                        }
                        close += other;
                    } else {
                        close += 1;
                    }
                }
                match closed {
                    Some(close) => {
                        spans.push((at, &text[open_end..close]));
                        at = close + length;
                    }
                    None => at = open_end,
                }
            }
            _ => at += 1,
        }
    }
    spans
}

/// Records each command of `tokens` (a pipeline or list: `a | b`, `a && b`, `a; b`) that runs
/// `tool`; its words end at a redirection. A span that is only the tool's name is not a command.
fn push_invocations(
    page: &str,
    line: usize,
    tokens: &[Token],
    tool: &str,
    prose: bool,
    found: &mut Vec<DocCommand>,
) {
    for segment in tokens.split(|token| matches!(token, Token::Separator)) {
        let words: Vec<Word> = segment
            .iter()
            .map_while(|token| match token {
                Token::Word(word) => Some(word.clone()),
                _ => None,
            })
            .collect();
        let Some(args) = invocation(&words, tool) else { continue };
        if prose && args.is_empty() {
            continue;
        }
        let text: Vec<String> =
            std::iter::once(tool).chain(args.iter().map(|w| w.text.as_str())).map(shown).collect();
        found.push(DocCommand {
            page: page.to_owned(),
            line,
            text: text.join(" "),
            args: args.to_vec(),
            prose,
        });
    }
}

/// A word as a reader would type it back, on one line: quoted when it holds a space or is empty.
fn shown(word: &str) -> String {
    if word.is_empty() || word.contains(char::is_whitespace) {
        format!("'{}'", word.split_whitespace().collect::<Vec<_>>().join(" "))
    } else {
        word.to_owned()
    }
}

/// The words after `tool` when `words` run it: `tool …`, `path/to/tool …`, or
/// `cargo run [cargo flags] -p|--package|--bin tool [cargo flags] -- …`; assignments
/// (`NOTICE_CONFIG=dir`) before the command are skipped.
fn invocation<'w>(words: &'w [Word], tool: &str) -> Option<&'w [Word]> {
    let start = words.iter().position(|word| !is_assignment(&word.text))?;
    let words = &words[start..];
    let first = words[0].text.as_str();
    if first == tool || first.strip_suffix(tool).is_some_and(|dir| dir.ends_with('/')) {
        return Some(&words[1..]);
    }
    if first != "cargo" || words.get(1).map(|w| w.text.as_str()) != Some("run") {
        return None;
    }
    let rest = &words[2..];
    let (cargo, args) = match rest.iter().position(|word| word.text == "--") {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &rest[rest.len()..]),
    };
    let names_tool = cargo
        .windows(2)
        .any(|pair| matches!(pair[0].text.as_str(), "-p" | "--package" | "--bin") && pair[1].text == tool)
        || cargo
            .iter()
            .any(|word| word.text == format!("--package={tool}") || word.text == format!("--bin={tool}"));
    names_tool.then_some(args)
}

/// `NAME=value` before a command sets its environment; it is not the command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The argument lists (the tool's name first) a documented command stands for — one, or one for
/// each subcommand an `a/b` names — with its placeholders filled; and for each, whether a `…`
/// stood for arguments left out.
fn resolve(root: &Command, args: &[Word], prose: bool) -> Vec<(Vec<String>, bool)> {
    match walk(root, args, prose) {
        Walk::Done { argv, elided } => vec![(argv, elided)],
        Walk::Alternatives { at, names } => names
            .into_iter()
            .flat_map(|name| {
                let mut one = args.to_vec();
                one[at] = Word { text: name, placeholder: false };
                resolve(root, &one, prose)
            })
            .collect(),
    }
}

enum Walk {
    Done {
        argv: Vec<String>,
        elided: bool,
    },
    /// `args[at]` is `a/b`, naming subcommands `a` and `b`: each is checked in its place.
    Alternatives {
        at: usize,
        names: Vec<String>,
    },
}

/// Follows the words through the command tree as clap would — subcommands, flags and the values
/// they take, positionals in order — only to learn which argument each placeholder stands for.
/// clap, not this walk, is the judge: a word the walk cannot place is passed on as written.
fn walk(root: &Command, args: &[Word], prose: bool) -> Walk {
    let mut argv = vec![root.get_name().to_owned()];
    let mut command = root;
    let mut positional = 0;
    let mut raw = false;
    let mut elided = false;
    let mut at = 0;
    while at < args.len() {
        let word = &args[at];
        let text = word.text.as_str();
        at += 1;
        if !raw && text == "--" {
            raw = true;
            argv.push(text.to_owned());
        } else if !raw && is_flag(text) {
            let (name, inline) = match text.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (text, None),
            };
            let arg = flag(command, name).filter(|arg| arg.get_action().takes_values());
            match (arg, inline) {
                (Some(arg), Some(value)) if word.placeholder => {
                    argv.push(format!("{name}={}", fill(arg, value)))
                }
                (Some(arg), None) => {
                    argv.push(text.to_owned());
                    match args.get(at) {
                        Some(value) if !is_flag(&value.text) => {
                            argv.push(if value.placeholder {
                                fill(arg, &value.text)
                            } else {
                                value.text.clone()
                            });
                            at += 1;
                        }
                        _ if prose || elided => argv.push(fill(arg, "VALUE")),
                        _ => {}
                    }
                }
                _ => argv.push(text.to_owned()),
            }
        } else if text == "…" {
            elided = true;
        } else if let Some(sub) = (!raw).then(|| command.find_subcommand(text)).flatten() {
            argv.push(text.to_owned());
            command = sub;
            positional = 0;
        } else if let Some(names) = (!raw).then(|| alternatives(command, text)).flatten() {
            return Walk::Alternatives { at: at - 1, names };
        } else {
            let mut positionals: Vec<&Arg> = command.get_positionals().collect();
            positionals.sort_by_key(|arg| arg.get_index());
            match positionals.get(positional) {
                Some(arg) => {
                    argv.push(if word.placeholder { fill(arg, text) } else { text.to_owned() });
                    if arg.get_num_args().is_none_or(|range| range.max_values() <= 1) {
                        positional += 1;
                    }
                }
                None => argv.push(text.to_owned()),
            }
        }
    }
    Walk::Done { argv, elided }
}

/// `a/b/c` when `a`, `b` and `c` are all subcommands of `command`.
fn alternatives(command: &Command, text: &str) -> Option<Vec<String>> {
    let names: Vec<String> = text.split('/').map(str::to_owned).collect();
    let all = names.len() > 1 && names.iter().all(|name| command.find_subcommand(name).is_some());
    all.then_some(names)
}

/// `--name`, `--name=value`, `-x`; not `-` (standard input) and not a negative number.
fn is_flag(text: &str) -> bool {
    text.len() > 1 && text.starts_with('-') && text.parse::<f64>().is_err()
}

/// The argument `--name` or `-x` names in `command` (its own and the global ones it inherits).
fn flag<'c>(command: &'c Command, name: &str) -> Option<&'c Arg> {
    command.get_arguments().find(|arg| match name.strip_prefix("--") {
        Some(long) => {
            arg.get_long() == Some(long) || arg.get_all_aliases().is_some_and(|all| all.contains(&long))
        }
        None => name.len() == 2 && name[1..].chars().next() == arg.get_short(),
    })
}

/// A placeholder's stand-in: itself if `arg` accepts it as written, else the first of `arg`'s
/// fixed values, else the first sample `arg` accepts; itself when none fits (clap then says why).
fn fill(arg: &Arg, written: &str) -> String {
    let first_choice = arg.get_possible_values().first().map(|choice| choice.get_name().to_owned());
    std::iter::once(written.to_owned())
        .chain(first_choice)
        .chain(SAMPLES.iter().map(|sample| (*sample).to_owned()))
        .find(|value| accepts(arg, value))
        .unwrap_or_else(|| written.to_owned())
}

fn accepts(arg: &Arg, value: &str) -> bool {
    let probe = Arg::new("value")
        .required(true)
        .allow_hyphen_values(true)
        .value_parser(arg.get_value_parser().clone());
    Command::new("probe").no_binary_name(true).arg(probe).try_get_matches_from([value]).is_ok()
}
