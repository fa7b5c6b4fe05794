//! The operator's terminal: confirmation prompts before changes that cannot be taken back, and
//! progress bars for bulk work. Both hold back when there is no terminal — a prompt refuses
//! rather than block a script, a bar hides rather than fill a log.

use std::io::{BufRead, IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};

/// Asks `question`; true only when the operator types `yes`.
pub(crate) fn confirm(question: &str) -> Result<bool, String> {
    ask(&format!("{question} Type 'yes' to continue: "), "yes", "refusing without confirmation")
}

/// Prints `prompt` and reads one line; true only when it is `word`. Without a terminal it returns
/// `refusal` as an error, so `--yes` is the only way to skip the question.
pub(crate) fn ask(prompt: &str, word: &str, refusal: &str) -> Result<bool, String> {
    if !std::io::stdin().is_terminal() {
        return Err(format!("{refusal}: stdin is not a terminal (pass --yes)"));
    }
    print!("{prompt}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).map_err(|e| e.to_string())?;
    Ok(answer.trim() == word)
}

/// A bar of `len` steps labelled `what`, drawn on stderr only when stderr is a terminal.
pub(crate) fn progress(len: usize, what: &str) -> ProgressBar {
    let bar =
        if std::io::stderr().is_terminal() { ProgressBar::new(len as u64) } else { ProgressBar::hidden() };
    if let Ok(style) =
        ProgressStyle::with_template(&format!("{what} {{bar:40}} {{pos}}/{{len}} ({{eta}} left)"))
    {
        bar.set_style(style);
    }
    bar
}
