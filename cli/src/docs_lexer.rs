//! The shell lexer of the documented command lines (`docs_lines.rs`): a command as a POSIX shell
//! would split it, closely enough for documentation, plus the docs' placeholder conventions.
//!
//! Included by `docs_lines.rs` as its module `lexer` (so wherever that file is included by
//! `#[path]`, this one comes with it); it needs only std.

use super::Word;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Token {
    Word(Word),
    /// `|`, `||`, `&&`, `&`, `;`, `(`, `)`: one command ends, another may start.
    Separator,
    /// `>`, `>>`, `<`, `2>&1`, `&>`: the command's own words have ended.
    Redirect,
}

pub(super) struct Lexed {
    pub(super) tokens: Vec<Token>,
    /// A quote, a `$(` or a trailing `\` is still open: the command continues on the next line.
    pub(super) open: bool,
}

/// The word being read: `started` once anything (even `''`) belongs to it.
#[derive(Default)]
struct Pending {
    text: String,
    started: bool,
    placeholder: bool,
}

impl Pending {
    fn push(&mut self, c: char) {
        self.text.push(c);
        self.started = true;
    }

    fn flush(&mut self, tokens: &mut Vec<Token>) {
        if self.started {
            let text = std::mem::take(&mut self.text);
            let placeholder = self.placeholder || is_capitals(&text) || text.contains('…');
            tokens.push(Token::Word(Word { text, placeholder }));
        }
        *self = Pending::default();
    }
}

/// `FILE`, `DIR`, `V`, `URL`, `SES_ID`: a word in capitals (letters, digits, `_`) stands for a value.
fn is_capitals(word: &str) -> bool {
    word.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && word.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Splits a command as a POSIX shell would, closely enough for documentation: whitespace between
/// words, `'…'` and `"…"` quotes, `\` escapes and line continuations, `$(…)` kept whole, a `#`
/// comment ending it, separators and redirections as tokens. Beyond the shell, for the docs'
/// conventions: `<…>` (spaces allowed, as in `<SES id>`) is one placeholder word, and `[` / `]`
/// around optional words are dropped.
pub(super) fn lex(text: &str) -> Lexed {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut word = Pending::default();
    let mut open = false;
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                word.flush(&mut tokens);
                at += 1;
            }
            '\\' => match next {
                None => {
                    open = true;
                    at += 1;
                }
                Some('\n') => at += 2,
                Some(escaped) => {
                    word.push(escaped);
                    at += 2;
                }
            },
            '\'' => {
                word.started = true;
                match chars[at + 1..].iter().position(|q| *q == '\'') {
                    Some(length) => {
                        word.text.extend(&chars[at + 1..at + 1 + length]);
                        at += length + 2;
                    }
                    None => {
                        word.text.extend(&chars[at + 1..]);
                        open = true;
                        at = chars.len();
                    }
                }
            }
            '"' => at = double_quoted(&chars, at + 1, &mut word, &mut open),
            '$' => at = expansion(&chars, at, &mut word, &mut open),
            '#' if !word.started => break,
            '&' if next == Some('>') => {
                word.flush(&mut tokens);
                tokens.push(Token::Redirect);
                at += 2;
            }
            '|' | '&' | ';' | '(' | ')' => {
                word.flush(&mut tokens);
                tokens.push(Token::Separator);
                at += if next == Some(c) && matches!(c, '|' | '&' | ';') { 2 } else { 1 };
            }
            '>' => {
                // `2>`, `2>&1`: the digits name a descriptor, they are not a word.
                if word.started && !word.placeholder && word.text.chars().all(|d| d.is_ascii_digit()) {
                    word = Pending::default();
                }
                word.flush(&mut tokens);
                tokens.push(Token::Redirect);
                at += if next == Some('>') { 2 } else { 1 };
                if chars.get(at) == Some(&'&') {
                    at += 1;
                    while chars.get(at).is_some_and(|d| d.is_ascii_digit() || *d == '-') {
                        at += 1;
                    }
                }
            }
            '<' => match angle_group(&chars, at) {
                Some(end) => {
                    word.text.extend(&chars[at..=end]);
                    word.started = true;
                    word.placeholder = true;
                    at = end + 1;
                }
                None => {
                    word.flush(&mut tokens);
                    tokens.push(Token::Redirect);
                    at += 1;
                }
            },
            '[' if !word.started => at += 1,
            ']' if word.started && next.is_none_or(char::is_whitespace) => at += 1,
            _ => {
                word.push(c);
                at += 1;
            }
        }
    }
    word.flush(&mut tokens);
    Lexed { tokens, open }
}

/// The end of a `<…>` placeholder starting at `at`: a `>` on the same line, the `<` followed by
/// no space. Anything else is a redirection.
fn angle_group(chars: &[char], at: usize) -> Option<usize> {
    if chars.get(at + 1).is_none_or(|c| c.is_whitespace()) {
        return None;
    }
    let length = chars[at..].iter().take_while(|c| **c != '\n').position(|c| *c == '>')?;
    Some(at + length)
}

/// A `"…"` quote from just after its opening `"`; returns the index after its closing `"`.
fn double_quoted(chars: &[char], mut at: usize, word: &mut Pending, open: &mut bool) -> usize {
    word.started = true;
    while at < chars.len() {
        match chars[at] {
            '"' => return at + 1,
            '\\' if chars.get(at + 1) == Some(&'\n') => at += 2,
            '\\' if matches!(chars.get(at + 1), Some('"' | '\\' | '$' | '`')) => {
                word.text.push(chars[at + 1]);
                at += 2;
            }
            '$' => at = expansion(chars, at, word, open),
            c => {
                word.text.push(c);
                at += 1;
            }
        }
    }
    *open = true;
    at
}

/// A `$` at `at`: `$(…)` (kept whole, nesting counted) or `$NAME` — either way the word becomes
/// a placeholder. Returns the index after the `$(…)`, or after the `$`.
fn expansion(chars: &[char], at: usize, word: &mut Pending, open: &mut bool) -> usize {
    word.started = true;
    word.placeholder = true;
    word.text.push('$');
    if chars.get(at + 1) != Some(&'(') {
        return at + 1;
    }
    let mut depth = 0;
    for (offset, c) in chars[at + 1..].iter().enumerate() {
        word.text.push(*c);
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return at + 2 + offset;
                }
            }
            _ => {}
        }
    }
    *open = true;
    chars.len()
}
