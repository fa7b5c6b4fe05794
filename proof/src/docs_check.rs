//! Executable docs (issue 50): every `notice-proof` command the README and `docs/` show — shell
//! blocks (`cargo run --release -p notice-proof -- …` included) and inline code — parses with the
//! real [`Cli`], under the placeholder convention docs/operations.md writes down (*Commands in
//! these pages*). The extractor and the check are `noticectl`'s (`cli/src/docs_lines.rs`, included
//! here rather than copied: one reading of the pages for both tools).

#[path = "../../cli/src/docs_lines.rs"]
mod docs_lines;

use docs_lines::{check, extract, workspace_pages, DocCommand};

use crate::Cli;

#[test]
fn every_notice_proof_command_in_the_readme_and_docs_parses() {
    let commands: Vec<DocCommand> =
        workspace_pages().iter().flat_map(|(page, text)| extract(page, text, "notice-proof")).collect();
    let failures = check::<Cli>(&commands);
    assert!(
        failures.is_empty(),
        "{} of {} documented notice-proof commands do not parse:\n{}",
        failures.len(),
        commands.len(),
        failures.join("\n")
    );
    // proof.md and capacity.md alone run it seven times in shell blocks.
    assert!(
        commands.len() >= 12,
        "only {} notice-proof commands found in the README and docs/",
        commands.len()
    );
    eprintln!("{} documented notice-proof commands parse", commands.len());
}
