//! Every `noticectl` and `notice-proof` command the README and the docs show in a shell block
//! exists as written: its subcommand path answers `--help`. (Flags and arguments are the
//! commands' own tests' business; this guards the pages against renamed or moved commands.)

use std::path::{Path, PathBuf};
use std::process::Command;

use notice_e2e::workspace_root;

/// The built binary `name` beside this test's own target directory; the workspace test run
/// (`cargo test --workspace --all-targets`) builds every binary before any test runs.
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    // target/<profile>/deps/docs_commands-… → target/<profile>/<name>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("no target dir above {}", exe.display()));
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not built: run the workspace tests (`./scripts/test.sh`) or `cargo build -p {}` first",
        path.display(),
        if name == "noticectl" { "noticectl" } else { "notice-proof" }
    );
    path
}

/// Shell lines of the page's ```sh / ```bash / ```console blocks.
fn shell_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let fence = line.trim_start();
        if let Some(lang) = fence.strip_prefix("```") {
            inside = !inside && matches!(lang.trim(), "sh" | "bash" | "console" | "shell");
            continue;
        }
        if inside {
            lines.push(line.trim().trim_start_matches("$ ").to_owned());
        }
    }
    lines
}

/// (binary, subcommand path) of a line that runs one of the two tools.
fn invocation(line: &str) -> Option<(&'static str, Vec<String>)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let (bin, rest) = match words.as_slice() {
        ["noticectl", rest @ ..] => ("noticectl", rest),
        ["notice-proof", rest @ ..] => ("notice-proof", rest),
        ["cargo", "run", rest @ ..] => {
            let at = rest.iter().position(|w| *w == "--")?;
            let bin = if rest[..at].contains(&"noticectl") {
                "noticectl"
            } else if rest[..at].contains(&"notice-proof") {
                "notice-proof"
            } else {
                return None;
            };
            (bin, &rest[at + 1..])
        }
        _ => return None,
    };
    let path: Vec<String> = rest
        .iter()
        .take_while(|w| {
            !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
        })
        .take(2)
        .map(|w| (*w).to_owned())
        .collect();
    Some((bin, path))
}

#[test]
fn every_command_in_the_readme_and_docs_exists() {
    let root = workspace_root();
    let mut pages = vec![root.join("README.md")];
    let docs = std::fs::read_dir(root.join("docs")).unwrap_or_else(|e| panic!("docs/: {e}"));
    pages.extend(
        docs.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "md")),
    );
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        for line in shell_lines(&text) {
            let Some((bin, path)) = invocation(&line) else { continue };
            let out = Command::new(binary(bin))
                .args(&path)
                .arg("--help")
                .env("NOTICE_STATE_DIR", std::env::temp_dir().join("docs-commands-state"))
                .output()
                .unwrap_or_else(|e| panic!("{bin}: {e}"));
            assert!(
                out.status.success(),
                "{}: `{line}` — `{bin} {} --help` failed:\n{}",
                page.display(),
                path.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    // The README's two commands alone are two; the docs show many more.
    assert!(checked >= 10, "only {checked} commands found in {} pages", pages.len());
}

#[test]
fn the_line_parser_finds_subcommands_and_skips_the_rest() {
    assert_eq!(
        invocation("cargo run -p noticectl -- send events/renewals.jsonl --now X"),
        Some(("noticectl", vec!["send".to_owned()]))
    );
    assert_eq!(
        invocation("noticectl quarantine list --ledger dynamodb:T"),
        Some(("noticectl", vec!["quarantine".to_owned(), "list".to_owned()]))
    );
    assert_eq!(
        invocation("cargo run --release -p notice-proof -- verify"),
        Some(("notice-proof", vec!["verify".to_owned()]))
    );
    assert_eq!(invocation("sam build"), None);
    assert_eq!(
        shell_lines("x\n```sh\nnoticectl key\n```\n```text\nnoticectl nope\n```\n"),
        vec!["noticectl key"]
    );
}
