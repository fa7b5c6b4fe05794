//! One problem found in a notice configuration, located as precisely as the check can: what
//! `noticectl config check` prints one per line and a refused start lists.

use std::fmt;

use super::bundle::BundleError;

/// One thing wrong with a configuration, located as precisely as the check can.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub file: Option<String>,
    pub line: Option<usize>,
    pub message: String,
}

impl Problem {
    pub fn file(file: &str, line: Option<usize>, message: impl Into<String>) -> Self {
        Self { file: Some(file.to_owned()), line, message: message.into() }
    }
}

impl From<BundleError> for Problem {
    fn from(e: BundleError) -> Self {
        Self { file: e.file, line: None, message: e.reason }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{file}:{line}: {}", self.message),
            (Some(file), None) => write!(f, "{file}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}
