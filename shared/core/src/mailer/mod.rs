//! The mailer port: one attempt to hand one message to the provider, and what the provider said.

use std::fmt;

use async_trait::async_trait;

use crate::identity::NoticeKey;

#[cfg(feature = "outbox")]
pub mod outbox;
pub mod redirect;

/// A rendered message ready for the provider. Correlation travels as the `notice_key` tag and the
/// `X-Notice-Key` header: providers such as SES replace any Message-ID we could set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutgoingMail {
    pub key: NoticeKey,
    pub kind: String,
    pub to: String,
    pub subject: String,
    pub text: String,
    pub html: String,
    /// The language of the texts used (BCP 47), sent as `Content-Language`.
    pub language: String,
}

/// Why the provider did not accept a message it *said* it did not accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotAccepted {
    /// Throttled or over a sending quota: try again later.
    Throttled,
    /// Sending paused for the account or configuration set.
    Paused,
    /// Our configuration is wrong (unverified identity, missing configuration set): needs a human;
    /// retried so nothing is lost while it is fixed.
    Configuration,
}

impl fmt::Display for NotAccepted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotAccepted::Throttled => "throttled",
            NotAccepted::Paused => "sending paused",
            NotAccepted::Configuration => "configuration error",
        })
    }
}

/// What one send attempt established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendResult {
    /// The provider accepted the message and named it.
    Accepted { message_id: String },
    /// The provider answered that it did not accept the message: nothing went out.
    NotAccepted { class: NotAccepted, reason: String },
    /// The provider refused this message permanently (bad address, content rejected).
    Rejected { reason: String },
    /// No answer we can trust (5xx, timeout, connection reset): it may or may not have gone out.
    Unknown { reason: String },
}

/// The mailer port. Implementations make exactly one attempt: a retry inside the adapter could
/// send a second copy before the caller learns anything.
#[async_trait]
pub trait Mailer: Send + Sync {
    async fn send(&self, mail: &OutgoingMail) -> SendResult;
}

/// Lets tests keep a handle on an adapter they also hand to the sender.
#[async_trait]
impl<T: Mailer + ?Sized> Mailer for std::sync::Arc<T> {
    async fn send(&self, mail: &OutgoingMail) -> SendResult {
        (**self).send(mail).await
    }
}

/// Longest subject sent, in characters. Mail clients show ~60–80; beyond a few hundred a subject is
/// data gone wrong, and every header line must stay within RFC 5322's 998 octets once encoded.
pub const MAX_SUBJECT_CHARS: usize = 250;

/// A subject is one header line of text: control characters (NUL, ESC, DEL, CR/LF …) and
/// direction overrides are dropped, runs of whitespace become one space, and the result is capped
/// at [`MAX_SUBJECT_CHARS`] (ending in `…` when cut). Applied before any provider sees it, so SES
/// and the outbox send the same subject.
pub fn clean_subject(raw: &str) -> String {
    let visible: String = raw
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .filter(|c| !c.is_control() && !matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'))
        .collect();
    let words = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    if words.chars().count() <= MAX_SUBJECT_CHARS {
        return words;
    }
    let mut cut: String = words.chars().take(MAX_SUBJECT_CHARS - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}
