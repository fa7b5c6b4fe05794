//! File outbox: one RFC 5322 `.eml` per accepted send, for local runs without a provider.

use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use base64::Engine;
use chrono::Utc;

use super::{Mailer, OutgoingMail, SendResult};

pub struct FileOutbox {
    dir: PathBuf,
    from: String,
}

impl FileOutbox {
    pub fn new(dir: impl Into<PathBuf>, from: impl Into<String>) -> std::io::Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        Ok(Self { dir, from: from.into() })
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
        let eml = render_eml(mail, &self.from, &message_id);
        let name = format!("{}-{}.eml", Utc::now().format("%Y%m%dT%H%M%S%.6fZ"), mail.key.prefix());
        // Write then rename, so a reader (or a crash) never sees half a message.
        let tmp = self.dir.join(format!(".{name}.tmp"));
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(eml.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, self.dir.join(name))?;
        Ok(message_id)
    }
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

/// RFC 2047 encoded-word for non-ASCII header text.
fn encode_header(text: &str) -> String {
    if text.is_ascii() {
        text.to_owned()
    } else {
        format!("=?UTF-8?B?{}?=", base64::engine::general_purpose::STANDARD.encode(text))
    }
}

/// Base64 body folded at 76 columns (RFC 2045).
fn base64_body(text: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
    encoded
        .as_bytes()
        .chunks(76)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join("\r\n")
}

pub(crate) fn render_eml(mail: &OutgoingMail, from: &str, message_id: &str) -> String {
    let boundary = format!("=_notice_{}", mail.key.prefix());
    let headers = [
        format!("From: {from}"),
        format!("To: {}", mail.to),
        format!("Subject: {}", encode_header(&mail.subject)),
        format!("Date: {}", Utc::now().to_rfc2822()),
        format!("Message-ID: <{message_id}>"),
        format!("X-Notice-Key: {}", mail.key),
        format!("X-Notice-Kind: {}", mail.kind),
        "MIME-Version: 1.0".to_owned(),
        format!("Content-Type: multipart/alternative; boundary=\"{boundary}\""),
    ];
    let mut out = headers.join("\r\n");
    out.push_str("\r\n\r\n");
    for (ctype, body) in [("text/plain", &mail.text), ("text/html", &mail.html)] {
        out.push_str(&format!(
            "--{boundary}\r\nContent-Type: {ctype}; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n{}\r\n",
            base64_body(body)
        ));
    }
    out.push_str(&format!("--{boundary}--\r\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{Identity, NoticeSecret};

    #[tokio::test]
    async fn writes_one_eml_with_notice_key_header() {
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
        };
        let SendResult::Accepted { message_id } = outbox.send(&mail).await else { panic!("outbox refused") };
        let files = outbox.messages().unwrap();
        assert_eq!(files.len(), 1);
        let eml = std::fs::read_to_string(&files[0]).unwrap();
        assert!(eml.contains(&format!("X-Notice-Key: {key}\r\n")));
        assert!(eml.contains(&format!("Message-ID: <{message_id}>")));
        assert!(eml.contains("Subject: =?UTF-8?B?"));
        assert!(eml.contains("Content-Type: text/html; charset=utf-8"));
    }
}
