//! Executable docs (issue 50): every `noticectl` command the README and `docs/` show — shell
//! blocks, inline code, the command table of docs/operations.md — parses with the real [`Cli`],
//! under the placeholder convention docs/operations.md writes down (*Commands in these pages*).
//! The extractor and the check are shared with `notice-proof`'s pages (`docs_lines.rs`).

#[path = "docs_lines.rs"]
mod docs_lines;

use docs_lines::{check, extract, workspace_pages, DocCommand};

use crate::Cli;

fn documented() -> Vec<DocCommand> {
    workspace_pages().iter().flat_map(|(page, text)| extract(page, text, "noticectl")).collect()
}

#[test]
fn every_noticectl_command_in_the_readme_and_docs_parses() {
    let commands = documented();
    let failures = check::<Cli>(&commands);
    assert!(
        failures.is_empty(),
        "{} of {} documented noticectl commands do not parse:\n{}",
        failures.len(),
        commands.len(),
        failures.join("\n")
    );
    // The pages show well over a hundred: far fewer means the extractor lost a form.
    assert!(
        commands.len() >= 120,
        "only {} noticectl commands found in the README and docs/",
        commands.len()
    );
    eprintln!("{} documented noticectl commands parse", commands.len());
}

/// (line, command, from prose) of what `extract` finds for `noticectl` in `page`.
fn found(page: &str) -> Vec<(usize, String, bool)> {
    extract("page.md", page, "noticectl").into_iter().map(|c| (c.line, c.text, c.prose)).collect()
}

fn failures(page: &str) -> Vec<String> {
    check::<Cli>(&extract("page.md", page, "noticectl"))
}

/// A flag in a place the parser does not take it fails, naming page and line; in its place it
/// parses. (`parked list --schedule-group g`, the line that started this check, parses now that
/// the group is a global flag.)
#[test]
fn a_misplaced_flag_fails_naming_page_and_line_and_its_fix_parses() {
    let page = "```sh\nnoticectl --ledger dynamodb:t quarantine list\nnoticectl quarantine list --ledger dynamodb:t\n\
                noticectl parked list --schedule-group g\n```\n";
    assert_eq!(
        failures(page),
        ["page.md:2: noticectl --ledger dynamodb:t quarantine list: error: unexpected argument '--ledger' found"]
    );
}

#[test]
fn shell_lines_are_split_as_a_shell_splits_them() {
    let page = r#"```sh
# a comment line
$ NOTICE_CONFIG=dir noticectl send a.jsonl \
    --now 2026-12-02T12:00:00Z  # trailing comment
cargo run -q -p noticectl --release -- show "$(out X)" 2>&1 | tee out.txt
producer | noticectl validate - --json > verdicts.txt
noticectl enqueue '{"a":
  1}' && echo done
sam build
```

```text
noticectl nope
```
"#;
    let expected = [
        (3, "noticectl send a.jsonl --now 2026-12-02T12:00:00Z"),
        (5, "noticectl show '$(out X)'"),
        (6, "noticectl validate - --json"),
        (7, r#"noticectl enqueue '{"a": 1}'"#),
    ];
    let expected: Vec<_> = expected.iter().map(|(line, text)| (*line, (*text).to_owned(), false)).collect();
    assert_eq!(found(page), expected);
}

#[test]
fn prose_spans_and_the_command_table_are_commands_too() {
    let page =
        "Run `noticectl parked list\n--limit 5` daily; `noticectl` alone is a name, `noticectl: error` \
                output.\n\n## `noticectl`\n\n| command | what |\n|---|---|\n| `quarantine list\\|release` | \
                `noticectl show KEY`, `--ledger` |\n";
    assert_eq!(
        found(page),
        [
            (1, "noticectl parked list --limit 5".to_owned(), true),
            (8, "noticectl quarantine list/release".to_owned(), true),
            (8, "noticectl show KEY".to_owned(), true),
        ]
    );
    assert_eq!(failures(page), Vec::<String>::new());
}

#[test]
fn placeholders_take_a_value_their_argument_accepts_and_real_values_are_judged() {
    // KEY must be a key, T an instant, N a count, AGE an age: each gets a sample that fits.
    let placeholders = "```sh\nnoticectl send FILE --now T --concurrency N\nnoticectl show <KEY>\n\
                        noticectl quarantine list --older-than AGE\nnoticectl evidence … --json\n\
                        noticectl send --help\nnoticectl --version\n```\n";
    assert_eq!(failures(placeholders), Vec::<String>::new());
    let wrong = "```sh\nnoticectl send f.jsonl --now tomorrow\nnoticectl show\n```\n";
    let wrong = failures(wrong);
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(wrong[0]
        .starts_with("page.md:2: noticectl send f.jsonl --now tomorrow: error: invalid value 'tomorrow'"));
    assert!(wrong[1].starts_with("page.md:3: noticectl show: error: the following required arguments"));
    // The same incomplete command in prose names it, and passes; an unknown flag does not.
    assert_eq!(failures("`noticectl show` and `noticectl evidence --render`"), Vec::<String>::new());
    assert_eq!(failures("`noticectl show --nope`").len(), 1);
}

#[test]
fn a_slash_names_each_subcommand_and_each_is_checked() {
    assert_eq!(failures("`noticectl enqueue/replay --queue-url`"), Vec::<String>::new());
    let parked_has_no_queue_url = failures("`noticectl enqueue/parked --queue-url U`");
    assert_eq!(parked_has_no_queue_url.len(), 1, "{parked_has_no_queue_url:?}");
    assert!(parked_has_no_queue_url[0].contains("[checked as: noticectl parked --queue-url"));
}
