//! The embedded default: state in a directory (`.notices/`): `ledger.db`, `outbox/`, `secret`.

use std::io::Write;
use std::path::{Path, PathBuf};

use notice_ledger::keyring::KeyRing;
use notice_ledger::NoticeSecret;

/// The io error of `Dir` and `Secret` is their `source()`, not part of their message: `noticectl`
/// prints the whole chain (`{:#}`: "cannot prepare state directory X: <io error>").
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot prepare state directory {path}")]
    Dir { path: String, source: std::io::Error },
    #[error("cannot read or create the local secret {path}")]
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
        let dir_err = |source| StateError::Dir { path: root.display().to_string(), source };
        std::fs::create_dir_all(root).map_err(dir_err)?;
        // The ledger, the outbox and the secret are private to the operator, whatever the umask.
        notice_ledger::mailer::outbox::private(root, 0o700).map_err(dir_err)?;
        Ok(Self { root: root.to_path_buf() })
    }

    /// The state directory at `root`, not created: for a command that may need nothing of it
    /// (a secret from the environment, no local ledger), so that it leaves nothing behind. The
    /// directory is made only when the local secret has to be written.
    pub fn at(root: &Path) -> Self {
        Self { root: root.to_path_buf() }
    }

    pub fn outbox_dir(&self) -> PathBuf {
        self.root.join("outbox")
    }

    /// The deployment's secret when `NOTICE_KEY_SECRET` or `NOTICE_KEY_SECRET_ARN` is present
    /// (checked: blank or short is an error, never a fallback); only when neither variable exists,
    /// the state directory's own random secret, created (mode 0600) on first use and announced on
    /// stderr — a local ledger is only meaningful with the same secret every run.
    pub async fn secret(&self) -> Result<KeyRing, StateError> {
        if notice_setup::secret::source_from_env().map_err(|e| StateError::Invalid(e.to_string()))?.is_some()
        {
            let sdk = notice_setup::aws::load_sdk_config().await;
            if let Some(secret) =
                notice_setup::secret::resolve(&sdk).await.map_err(|e| StateError::Invalid(e.to_string()))?
            {
                return Ok(secret);
            }
        }
        let path = self.root.join("secret");
        let err = |source| StateError::Secret { path: path.display().to_string(), source };
        match std::fs::read_to_string(&path) {
            Ok(text) => KeyRing::from_stored(text.trim())
                .map_err(|e| StateError::Invalid(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A directory made by `at` does not exist yet: the secret is its first content.
                Self::open(&self.root)?;
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
                        NoticeSecret::configured(value)
                            .map(KeyRing::from)
                            .map_err(|e| StateError::Invalid(e.to_string()))
                    }
                    // Another process created it between our read and our create: use theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        let text = std::fs::read_to_string(&path).map_err(err)?;
                        KeyRing::from_stored(text.trim()).map_err(|e| StateError::Invalid(e.to_string()))
                    }
                    Err(e) => Err(err(e)),
                }
            }
            Err(e) => Err(err(e)),
        }
    }
}

/// 32 random bytes, hex: a new secret of the recommended strength (the local one, a rotation's).
pub(crate) fn random_secret() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
