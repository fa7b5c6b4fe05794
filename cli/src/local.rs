//! The embedded default: state in a directory (`.notices/`): `ledger.db`, `outbox/`, `secret`.

use std::io::Write;
use std::path::{Path, PathBuf};

use notice_ledger::NoticeSecret;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot prepare state directory {path}: {source}")]
    Dir { path: String, source: std::io::Error },
    #[error("cannot read or create the local secret {path}: {source}")]
    Secret { path: String, source: std::io::Error },
    #[error("{0}")]
    Invalid(String),
}

/// The local ledger file inside a state directory.
pub fn ledger_path(state_dir: &Path) -> PathBuf {
    state_dir.join("ledger.db")
}

pub struct StateDir {
    pub root: PathBuf,
}

impl StateDir {
    pub fn open(root: &Path) -> Result<Self, StateError> {
        std::fs::create_dir_all(root)
            .map_err(|source| StateError::Dir { path: root.display().to_string(), source })?;
        Ok(Self { root: root.to_path_buf() })
    }

    pub fn outbox_dir(&self) -> PathBuf {
        self.root.join("outbox")
    }

    /// `NOTICE_KEY_SECRET` when set; otherwise the state directory's own random secret, created
    /// (mode 0600) on first use and announced on stderr — a local ledger is only meaningful with
    /// the same secret every run.
    pub fn secret(&self) -> Result<NoticeSecret, StateError> {
        if let Some(value) = notice_setup::config::optional("NOTICE_KEY_SECRET") {
            return NoticeSecret::new(value).map_err(|e| StateError::Invalid(e.to_string()));
        }
        let path = self.root.join("secret");
        let err = |source| StateError::Secret { path: path.display().to_string(), source };
        match std::fs::read_to_string(&path) {
            Ok(text) => NoticeSecret::new(text.trim())
                .map_err(|e| StateError::Invalid(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let value = random_secret();
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::OpenOptionsExt;
                    options.mode(0o600);
                }
                match options.open(&path) {
                    Ok(mut f) => {
                        f.write_all(value.as_bytes()).map_err(err)?;
                        f.sync_all().map_err(err)?;
                        eprintln!(
                            "noticectl: NOTICE_KEY_SECRET is not set; created a random local secret in {} (mode 0600)",
                            path.display()
                        );
                        NoticeSecret::new(value).map_err(|e| StateError::Invalid(e.to_string()))
                    }
                    // Another process created it between our read and our create: use theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        let text = std::fs::read_to_string(&path).map_err(err)?;
                        NoticeSecret::new(text.trim()).map_err(|e| StateError::Invalid(e.to_string()))
                    }
                    Err(e) => Err(err(e)),
                }
            }
            Err(e) => Err(err(e)),
        }
    }
}

fn random_secret() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
