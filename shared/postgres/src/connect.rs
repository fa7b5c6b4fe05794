//! Connection options from the URL: TLS modes, root certificates, redaction.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use notice_ledger::LedgerError;
use tracing::debug;

/// What `connect` takes from the URL beyond what tokio-postgres understands.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ConnectOptions {
    /// The URL as tokio-postgres accepts it (`sslmode` normalised, `sslrootcert` removed).
    pub(crate) url: String,
    /// `Some(extra roots)` when TLS is required.
    pub(crate) tls: Option<TlsRoots>,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TlsRoots {
    /// `sslrootcert=PATH`: a PEM file of CA certificates trusted besides the system roots.
    extra_pem: Option<PathBuf>,
}

impl ConnectOptions {
    /// Splits libpq TLS parameters tokio-postgres does not know (`sslrootcert`, `sslmode=verify-*`)
    /// out of `url`. Never echoes the URL in errors: it may carry a password.
    pub(crate) fn parse(url: &str) -> Result<Self, LedgerError> {
        if !is_postgres_url(url) {
            return Err(LedgerError::unavailable(
                "a PostgreSQL URL starts with postgres:// or postgresql://",
            ));
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        let mut tls = false;
        let mut extra_pem = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "sslmode" => match value {
                    "disable" | "allow" | "prefer" => tls = false,
                    "require" | "verify-ca" | "verify-full" => tls = true,
                    other => {
                        return Err(LedgerError::unavailable(format!(
                            "invalid PostgreSQL URL: sslmode={other} (use disable or require/verify-full)"
                        )))
                    }
                },
                "sslrootcert" => extra_pem = Some(PathBuf::from(percent_decode(value)?)),
                _ => kept.push(pair),
            }
        }
        let url = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
        Ok(Self { url, tls: tls.then_some(TlsRoots { extra_pem }) })
    }
}

/// `url` as it may be shown to people and logs: `postgres://user@host:port/db`, without the
/// password or query parameters (which may carry one).
pub fn redacted(url: &str) -> String {
    ConnectOptions::parse(url)
        .ok()
        .and_then(|o| tokio_postgres::Config::from_str(&o.url).ok())
        .map_or_else(|| "postgres://<unparseable URL>".to_owned(), |c| describe(&c))
}

/// Whether `url` names a PostgreSQL database (`postgres://…` or `postgresql://…`).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

pub(crate) fn percent_decode(value: &str) -> Result<String, LedgerError> {
    let bad = || LedgerError::unavailable("invalid PostgreSQL URL: bad percent-encoding in sslrootcert");
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// `postgres://user@host:port/db`, never the password.
pub(crate) fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().map(|u| format!("{u}@")).unwrap_or_default();
    let db = config.get_dbname().unwrap_or("");
    format!("postgres://{user}{host}:{port}/{db}")
}

/// A rustls connector trusting the system roots plus `roots.extra_pem`.
pub(crate) fn tls_connector(
    roots: &TlsRoots,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, LedgerError> {
    let tls_err = |what: String| LedgerError::unavailable(format!("PostgreSQL TLS: {what}"));
    let mut store = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    let (added, _ignored) = store.add_parsable_certificates(native.certs);
    if !native.errors.is_empty() {
        debug!(errors = native.errors.len(), added, "some system root certificates could not be loaded");
    }
    if let Some(path) = &roots.extra_pem {
        use rustls::pki_types::pem::PemObject;
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
            .map_err(|e| tls_err(format!("sslrootcert {}: {e}", path.display())))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_err(format!("sslrootcert {}: {e}", path.display())))?;
        if certs.is_empty() {
            return Err(tls_err(format!("sslrootcert {} holds no PEM certificate", path.display())));
        }
        for cert in certs {
            store.add(cert).map_err(|e| tls_err(format!("sslrootcert {}: {e}", path.display())))?;
        }
    }
    if store.is_empty() {
        return Err(tls_err(
            "no trusted root certificates: install the system CA bundle or set sslrootcert=PATH".into(),
        ));
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_err(e.to_string()))?
        .with_root_certificates(store)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_unless_tls_is_required() {
        let o = ConnectOptions::parse("postgres://u:pw@db:5432/notices").expect("parse");
        assert_eq!(o, ConnectOptions { url: "postgres://u:pw@db:5432/notices".into(), tls: None });
        let o = ConnectOptions::parse("postgresql://db/n?sslmode=prefer&application_name=x").expect("parse");
        assert_eq!(o.url, "postgresql://db/n?application_name=x");
        assert_eq!(o.tls, None);
    }

    #[test]
    fn tls_modes_and_root_certificates() {
        let o = ConnectOptions::parse("postgres://db/n?sslmode=require").expect("parse");
        assert_eq!(o.url, "postgres://db/n");
        assert_eq!(o.tls, Some(TlsRoots { extra_pem: None }));
        let o = ConnectOptions::parse(
            "postgres://db/n?sslmode=verify-full&sslrootcert=%2Fopt%2Frds%20ca.pem&connect_timeout=5",
        )
        .expect("parse");
        assert_eq!(o.url, "postgres://db/n?connect_timeout=5");
        assert_eq!(o.tls, Some(TlsRoots { extra_pem: Some(PathBuf::from("/opt/rds ca.pem")) }));
    }

    #[test]
    fn bad_urls_are_refused_without_echoing_them() {
        for url in ["mysql://u:hunter2@db/n", "postgres://u:hunter2@db/n?sslmode=sometimes"] {
            match ConnectOptions::parse(url) {
                Err(LedgerError::Unavailable { detail: msg, .. }) => {
                    assert!(!msg.contains("hunter2"), "{msg}")
                }
                other => panic!("{url}: {other:?}"),
            }
        }
        assert!(ConnectOptions::parse("postgres://db/n?sslmode=require&sslrootcert=%zz").is_err());
    }

    #[test]
    fn redacted_urls_keep_where_but_not_the_secret() {
        assert_eq!(
            redacted("postgresql://ada:hunter2@db:6543/ledger?sslmode=require&password=hunter2"),
            "postgres://ada@db:6543/ledger"
        );
        assert!(!redacted("postgres://ada:hunter2@db/x?sslmode=bogus").contains("hunter2"));
    }

    #[test]
    fn descriptions_never_carry_the_password() {
        let config: tokio_postgres::Config =
            "postgres://ada:hunter2@db.internal:6543/ledger".parse().expect("url");
        assert_eq!(describe(&config), "postgres://ada@db.internal:6543/ledger");
    }
}
