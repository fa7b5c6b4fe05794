//! A throwaway PostgreSQL cluster for the tests: `initdb` into a temporary directory, then one
//! `postgres` server on a free 127.0.0.1 port (no Unix socket, trust authentication, durability
//! off for speed). One cluster serves a whole test binary; every test gets its own database from
//! [`PgServer::create_database`], so tests never see each other's rows.
//!
//! The server runs under a small shell wrapper whose stdin is a pipe held by the test process.
//! When the test process exits — however it exits — the pipe closes, the wrapper stops the server
//! (fast shutdown) and deletes the cluster directory, so nothing outlives the tests.
//!
//! The server also accepts TLS, with a certificate for `127.0.0.1`/`localhost` signed by a
//! throwaway CA ([`PgServer::ca_certificate`]), so clients can be tested with verification on.
//!
//! `initdb` refuses to run as root: as root, the cluster is owned by and run as the `postgres`
//! system user (created by the Debian package) through `runuser`.
//!
//! Failures are loud: if the server binaries are missing or the cluster does not come up, the
//! test panics with the fix instead of skipping.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::process::Command;
use tokio::sync::OnceCell;

/// Superuser of the throwaway cluster (trust authentication: no password).
pub const SUPERUSER: &str = "postgres";
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
const INSTALL_HINT: &str =
    "run ./scripts/test.sh (it installs the Debian `postgresql` package when initdb is \
                            missing), or `apt-get install -y --no-install-recommends postgresql`, or point \
                            PG_BIN at the directory holding initdb and postgres";

/// Server settings: loopback TCP only, no durability (a test cluster is thrown away), room for
/// many small pools.
const SERVER_SETTINGS: &[&str] = &[
    "listen_addresses=127.0.0.1",
    "unix_socket_directories=",
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "max_connections=300",
    "shared_buffers=16MB",
    "dynamic_shared_memory_type=mmap",
];

/// Runs postgres ($1 binary, $2 data dir, $3 port, $4 cluster dir, rest: `-c` settings) until
/// stdin closes, then stops it and removes the cluster directory. If the server dies on its own,
/// the directory (with `postgres.log`) is kept for diagnosis.
/// (A background job's stdin is /dev/null unless redirected explicitly, hence fd 3.)
const WRAPPER: &str = r#"
bin="$1"; data="$2"; port="$3"; dir="$4"; shift 4
exec 3<&0
"$bin" -D "$data" -p "$port" "$@" </dev/null 3<&- &
pid=$!
( cat <&3 >/dev/null; touch "$dir/stop-requested"; kill -INT "$pid" 2>/dev/null ) &
exec 3<&-
wait "$pid"
if [ -e "$dir/stop-requested" ]; then rm -rf "$dir"; fi
"#;

/// The running cluster.
pub struct PgServer {
    port: u16,
    bin: PathBuf,
    dir: PathBuf,
    next_database: AtomicUsize,
    /// The CA that signed the server's certificate, or why TLS is not available.
    tls: Result<PathBuf, String>,
    /// The wrapper's stdin: closing it (when the test process exits) stops the server.
    _lifeline: Mutex<std::process::ChildStdin>,
    _wrapper: Mutex<std::process::Child>,
}

impl std::fmt::Debug for PgServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgServer").field("port", &self.port).field("dir", &self.dir).finish()
    }
}

static SERVER: OnceCell<PgServer> = OnceCell::const_new();

/// The test binary's PostgreSQL cluster, started on first use.
///
/// # Panics
/// If the server binaries are missing or the cluster does not come up within 30 s.
pub async fn postgres_server() -> &'static PgServer {
    SERVER.get_or_init(start).await
}

/// A new, empty database on the test cluster; returns its `postgres://` URL.
pub async fn fresh_postgres_url(hint: &str) -> String {
    let server = postgres_server().await;
    let name = server.create_database(hint).await;
    server.url(&name)
}

impl PgServer {
    pub fn port(&self) -> u16 {
        self.port
    }

    /// URL of database `name` on this cluster.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{name}", self.port)
    }

    /// PEM file of the CA that signed the server certificate (subject alternative names
    /// `127.0.0.1` and `localhost`). The server accepts TLS and plain connections alike.
    ///
    /// # Panics
    /// If the certificates could not be made (`openssl` missing).
    pub fn ca_certificate(&self) -> &Path {
        match &self.tls {
            Ok(path) => path,
            Err(reason) => panic!("the PostgreSQL test cluster has no TLS: {reason}"),
        }
    }

    /// Creates a database named after `hint` (made unique) and returns its name.
    pub async fn create_database(&self, hint: &str) -> String {
        let n = self.next_database.fetch_add(1, Ordering::Relaxed);
        let mut name: String = hint
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
            .take(40)
            .collect();
        name.push_str(&format!("_{n}"));
        let out = Command::new(self.bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", SUPERUSER, &name])
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.join("createdb").display()));
        assert!(
            out.status.success(),
            "createdb {name} failed ({}): {}\npostgres log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        name
    }

    /// Runs `sql` with `psql` in `database` (as a worker in another language, or an operator,
    /// would) and returns its unaligned output, or psql's error text.
    pub async fn psql(&self, database: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
            .args(["-p", &self.port.to_string(), "-U", SUPERUSER, "-d", database, "-c", sql])
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.join("psql").display()));
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }

    /// The server log (last lines), for diagnosing a failing test.
    pub fn log(&self) -> String {
        log_tail(&self.dir.join("postgres.log"))
    }
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Directory holding `initdb`, `postgres`, `createdb`, `pg_isready`, `psql`: `PG_BIN`, else the newest
/// `/usr/lib/postgresql/<version>/bin` (Debian), else the `PATH`.
fn bin_dir() -> PathBuf {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Some(dir) = std::env::var_os("PG_BIN").filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(has_server(&dir), "PG_BIN={} holds no initdb and postgres — {INSTALL_HINT}", dir.display());
        return dir;
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_server(dir))
        .collect();
    debian.sort();
    if let Some((_, dir)) = debian.pop() {
        return dir;
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|dir| has_server(dir));
    on_path
        .unwrap_or_else(|| panic!("PostgreSQL server binaries (initdb, postgres) not found — {INSTALL_HINT}"))
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap_or_else(|e| panic!("cannot bind a loopback port: {e}"));
    listener.local_addr().unwrap_or_else(|e| panic!("cannot read the bound port: {e}")).port()
}

async fn id(args: &[&str]) -> Option<u32> {
    let out = Command::new("id").args(args).output().await.ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// How to run the cluster's commands: as ourselves, or — as root — as the `postgres` user.
struct RunAs {
    prefix: Vec<String>,
    owner: Option<(u32, u32)>,
}

impl RunAs {
    async fn detect() -> Self {
        if id(&["-u"]).await != Some(0) {
            return Self { prefix: Vec::new(), owner: None };
        }
        let (Some(uid), Some(gid)) = (id(&["-u", SUPERUSER]).await, id(&["-g", SUPERUSER]).await) else {
            panic!(
                "running as root, and initdb refuses to run as root, but there is no `{SUPERUSER}` system \
                 user to own the test cluster — {INSTALL_HINT} (the package creates that user), or run the \
                 tests as an ordinary user"
            );
        };
        Self {
            prefix: vec!["runuser".into(), "-u".into(), SUPERUSER.into(), "--".into()],
            owner: Some((uid, gid)),
        }
    }

    fn command(&self, program: &Path) -> std::process::Command {
        match self.prefix.split_first() {
            None => std::process::Command::new(program),
            Some((first, rest)) => {
                let mut cmd = std::process::Command::new(first);
                cmd.args(rest).arg(program);
                cmd
            }
        }
    }

    fn own(&self, path: &Path) {
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))
                .unwrap_or_else(|e| panic!("cannot hand {} to {SUPERUSER}: {e}", path.display()));
        }
    }
}

async fn start() -> PgServer {
    let bin = bin_dir();
    let run_as = RunAs::detect().await;
    let dir = tempfile::Builder::new()
        .prefix("notice-e2e-pg-")
        .tempdir()
        .unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"))
        .keep();
    run_as.own(&dir);
    let data = dir.join("data");

    let initdb = run_as
        .command(&bin.join("initdb"))
        .arg("-D")
        .arg(&data)
        .args(["-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e} — {INSTALL_HINT}", bin.join("initdb").display()));
    assert!(
        initdb.status.success(),
        "initdb failed ({}):\n{}\n{}",
        initdb.status,
        String::from_utf8_lossy(&initdb.stdout),
        String::from_utf8_lossy(&initdb.stderr)
    );

    let tls = make_certificates(&dir.join("tls"), &run_as).await;
    let mut settings: Vec<String> = SERVER_SETTINGS.iter().map(|s| (*s).to_owned()).collect();
    if tls.is_ok() {
        let tls_dir = dir.join("tls");
        settings.push("ssl=on".into());
        settings.push(format!("ssl_cert_file={}", tls_dir.join("server.crt").display()));
        settings.push(format!("ssl_key_file={}", tls_dir.join("server.key").display()));
    }

    let mut last_error = String::new();
    // A port picked as free can be taken before postgres binds it (the server then exits and
    // keeps its directory): try a few.
    for _ in 0..3 {
        match try_start(&bin, &run_as, &dir, &data, &settings, &tls).await {
            Ok(server) => return server,
            Err(e) => last_error = e,
        }
    }
    panic!("the PostgreSQL test cluster ({}) did not come up — {INSTALL_HINT}\n{last_error}", bin.display());
}

async fn try_start(
    bin: &Path,
    run_as: &RunAs,
    dir: &Path,
    data: &Path,
    settings: &[String],
    tls: &Result<PathBuf, String>,
) -> Result<PgServer, String> {
    let port = free_port();
    let log_path = dir.join("postgres.log");
    let log =
        std::fs::File::create(&log_path).map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    run_as.own(&log_path);
    let log_err = log.try_clone().map_err(|e| format!("cannot clone log handle: {e}"))?;
    let mut cmd = run_as.command(Path::new("sh"));
    cmd.arg("-c").arg(WRAPPER).arg("sh").arg(bin.join("postgres")).arg(data).arg(port.to_string()).arg(dir);
    for setting in settings {
        cmd.arg("-c").arg(setting);
    }
    let mut wrapper = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .spawn()
        .map_err(|e| format!("cannot start postgres: {e}"))?;
    let lifeline = wrapper.stdin.take().ok_or("the wrapper has no stdin")?;

    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Ok(Some(status)) = wrapper.try_wait() {
            return Err(format!(
                "postgres exited with {status} before accepting connections; its log:\n{}",
                log_tail(&log_path)
            ));
        }
        let ready = Command::new(bin.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string(), "-U", SUPERUSER])
            .stdin(Stdio::null())
            .status()
            .await
            .map_err(|e| format!("cannot run pg_isready: {e}"))?;
        if ready.success() {
            return Ok(PgServer {
                port,
                bin: bin.to_path_buf(),
                dir: dir.to_path_buf(),
                next_database: AtomicUsize::new(0),
                tls: tls.clone(),
                _lifeline: Mutex::new(lifeline),
                _wrapper: Mutex::new(wrapper),
            });
        }
        if Instant::now() > deadline {
            let log = log_tail(&log_path);
            drop(lifeline); // stops the server and cleans up
            panic!(
                "postgres on 127.0.0.1:{port} did not accept connections within {}s — {INSTALL_HINT}\n\
                 its log:\n{log}",
                STARTUP_TIMEOUT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A throwaway CA and a server certificate for `127.0.0.1`/`localhost` in `dir` (EC P-256, valid
/// two days); returns the CA file. The key is owned by the cluster's user with mode 0600, as the
/// server demands.
async fn make_certificates(dir: &Path, run_as: &RunAs) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let ext = dir.join("server.ext");
    std::fs::write(
        &ext,
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .map_err(|e| format!("cannot write {}: {e}", ext.display()))?;
    let p = |name: &str| dir.join(name).display().to_string();
    let steps: [Vec<String>; 3] = [
        [
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=notice-e2e test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([p("ca.key"), "-out".into(), p("ca.crt")])
        .collect(),
        [
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([p("server.key"), "-out".into(), p("server.csr")])
        .collect(),
        ["x509", "-req", "-days", "2", "-CAcreateserial", "-in"]
            .iter()
            .map(|s| (*s).to_owned())
            .chain([p("server.csr"), "-CA".into(), p("ca.crt"), "-CAkey".into(), p("ca.key")])
            .chain(["-extfile".into(), ext.display().to_string(), "-out".into(), p("server.crt")])
            .collect(),
    ];
    for args in steps {
        let out = Command::new("openssl")
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(|e| format!("cannot run openssl ({e}) — apt-get install -y openssl"))?;
        if !out.status.success() {
            return Err(format!(
                "openssl {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let key = dir.join("server.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", key.display()))?;
    run_as.own(dir);
    run_as.own(&key);
    run_as.own(&dir.join("server.crt"));
    Ok(dir.join("ca.crt"))
}
