//! File outbox: one RFC 5322 `.eml` per accepted send, for local runs without a provider.
//!
//! Messages are built by `mail-builder` (encoded words for non-ASCII, folded header lines, no raw
//! control characters), so every file opens in a mail client and parses strictly. Files hold
//! addresses and subscription ids: the outbox directory is 0700 and each message 0600, whatever
//! the umask.

use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use chrono::Utc;
use mail_builder::headers::address::Address;
use mail_builder::headers::raw::Raw;
use mail_builder::MessageBuilder;

use super::{Mailer, OutgoingMail, SendResult};
use crate::address::{parse_sender, Sender};

pub struct FileOutbox {
    dir: PathBuf,
    from: Sender,
}

impl FileOutbox {
    /// `from` is checked like `NOTICE_FROM` (an address, optionally with a display name).
    pub fn new(dir: impl Into<PathBuf>, from: &str) -> std::io::Result<Self> {
        let from = parse_sender(from)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("from: {e}")))?;
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        private(&dir, 0o700)?;
        Ok(Self { dir, from })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Messages in the outbox, sorted by file name.
    pub fn messages(&self) -> std::io::Result<Vec<PathBuf>> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "eml"))
            .collect();
        out.sort();
        Ok(out)
    }

    fn write(&self, mail: &OutgoingMail) -> std::io::Result<String> {
        let message_id = format!("{}.{}@outbox.notice-ledger.invalid", mail.key.prefix(), random_hex(8));
        let eml = render_eml(mail, &self.from, &message_id)?;
        let name = format!("{}-{}.eml", Utc::now().format("%Y%m%dT%H%M%S%.6fZ"), mail.key.prefix());
        // Write then rename, so a reader (or a crash) never sees half a message.
        let tmp = self.dir.join(format!(".{name}.tmp"));
        {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options.open(&tmp)?;
            private(&tmp, 0o600)?;
            f.write_all(&eml)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, self.dir.join(name))?;
        Ok(message_id)
    }
}

/// Sets `mode` exactly: a creation mode is filtered by the umask, this is not.
pub fn private(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

#[async_trait]
impl Mailer for FileOutbox {
    async fn send(&self, mail: &OutgoingMail) -> SendResult {
        match self.write(mail) {
            Ok(message_id) => SendResult::Accepted { message_id },
            // A failed local write may have left nothing or a temp file: nothing was "sent".
            Err(e) => SendResult::NotAccepted {
                class: super::NotAccepted::Configuration,
                reason: format!("outbox write failed: {e}"),
            },
        }
    }
}

fn random_hex(bytes: usize) -> String {
    use rand::RngCore;
    let mut buf = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// The message as RFC 5322 bytes: multipart/alternative (text + HTML) with the correlation headers.
pub(crate) fn render_eml(mail: &OutgoingMail, from: &Sender, message_id: &str) -> std::io::Result<Vec<u8>> {
    let from = match &from.name {
        Some(name) => Address::new_address(Some(name.as_str()), from.address.as_str()),
        None => Address::new_address(None::<&str>, from.address.as_str()),
    };
    // The recipient and the subject were checked and cleaned before rendering; the builder still
    // encodes and folds them, so nothing a template produced can start a header of its own.
    MessageBuilder::new()
        .from(from)
        .to(Address::new_address(None::<&str>, mail.to.as_str()))
        .subject(super::clean_subject(&mail.subject))
        .date(Utc::now().timestamp())
        .message_id(message_id)
        .header("X-Notice-Key", Raw::new(mail.key.to_string()))
        .header("X-Notice-Kind", Raw::new(mail.kind.as_str()))
        .header("Content-Language", Raw::new(mail.language.as_str()))
        .text_body(mail.text.as_str())
        .html_body(mail.html.as_str())
        .write_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{Identity, NoticeSecret};

    #[tokio::test]
    async fn writes_one_private_eml_with_notice_key_header() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = FileOutbox::new(dir.path().join("outbox"), "Billing <billing@example.com>").unwrap();
        let key = Identity::new("sub_1", "2026-10-01", "k", 0)
            .unwrap()
            .derive_key(&NoticeSecret::new("s").unwrap());
        let mail = OutgoingMail {
            key: key.clone(),
            kind: "k".into(),
            to: "ada@example.com".into(),
            subject: "Ihre Verlängerung".into(),
            text: "hello".into(),
            html: "<p>hello</p>".into(),
            language: "de".into(),
        };
        let SendResult::Accepted { message_id } = outbox.send(&mail).await else { panic!("outbox refused") };
        let files = outbox.messages().unwrap();
        assert_eq!(files.len(), 1);
        let eml = std::fs::read_to_string(&files[0]).unwrap();
        assert!(eml.contains(&format!("X-Notice-Key: {key}\r\n")), "{eml}");
        assert!(eml.contains(&format!("Message-ID: <{message_id}>")), "{eml}");
        assert!(eml.contains("Subject: =?utf-8?"), "{eml}");
        assert!(eml.contains("text/html"), "{eml}");
        assert!(eml.contains("Content-Language: de\r\n"), "{eml}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&files[0]), 0o600);
            assert_eq!(mode(outbox.dir()), 0o700);
        }
    }

    #[test]
    fn a_from_with_a_line_break_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = FileOutbox::new(dir.path(), "billing@example.com\r\nBcc: x@evil.example").err().unwrap();
        assert!(err.to_string().contains("from"), "{err}");
    }
}
