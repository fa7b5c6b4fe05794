//! The operator's terminal: confirmation prompts before changes that cannot be taken back, and
//! progress bars for bulk work. Both hold back when there is no terminal — a prompt refuses
//! rather than block a script, a bar hides rather than fill a log.

use std::io::{BufRead, IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};

use crate::exit::SafetyStop;

/// Asks `question`; true only when the operator types `yes`.
pub(crate) fn confirm(question: &str) -> anyhow::Result<bool> {
    ask(&format!("{question} Type 'yes' to continue: "), "yes", "refusing without confirmation")
}

/// Prints `prompt` and reads one line; true only when it is `word`. Without a terminal it returns
/// `refusal` as a [`SafetyStop`] error (exit 3), so `--yes` is the only way to skip the question.
/// A caller whose question is answered otherwise returns [`crate::exit::Exit::SafetyStop`] too.
pub(crate) fn ask(prompt: &str, word: &str, refusal: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(SafetyStop(format!("{refusal}: stdin is not a terminal (pass --yes)")).into());
    }
    print!("{prompt}");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
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

/// `text` safe to print: control characters (ESC sequences, CR, NUL …) and bidi overrides from job
/// data or message attributes are shown escaped (`\u{1b}`), so input cannot rewrite the screen or
/// forge an output line.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}') {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Left-aligned columns, two spaces apart, each line indented by two: the tables the commands print.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        format!("  {}\n", padded.join("  ").trim_end())
    };
    let mut out = line(&header.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>());
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escape_neutralises_terminal_control() {
        assert_eq!(super::escape("batch\u{1b}[2J\r\nok"), "batch\\u{1b}[2J\\u{d}\\u{a}ok");
        assert_eq!(super::escape("plain · ünïcode"), "plain · ünïcode");
        assert_eq!(super::escape("a\u{202e}b"), "a\\u{202e}b");
    }
}
