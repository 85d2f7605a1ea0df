//! A throwaway PostgreSQL cluster per test, from Debian's packages
//! (`postgresql`: `/usr/lib/postgresql/<version>/bin`).
//!
//! [`PgCluster::start`] runs `initdb` in a fresh temporary directory and
//! `pg_ctl start` on a free loopback port — as the `postgres` system user
//! when the test runs as root (PostgreSQL refuses to run as root), the
//! directory then chowned to it — with trust authentication on 127.0.0.1
//! only. It is stopped (`pg_ctl stop`, fast, then immediate) and removed
//! when the guard drops, also when the test panics; the server's log is
//! copied into the test's log directory first.
//!
//! `EMQ_PG_BIN` names another binary directory. Without PostgreSQL a test
//! is skipped (a line in the summary), except under `CI=true`, where it
//! fails.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::ports::free_port;
use crate::process::test_log_dir;

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// The directory holding `initdb`, `pg_ctl` and `postgres`: `$EMQ_PG_BIN`,
/// else the newest `/usr/lib/postgresql/*/bin`.
pub fn bin_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("EMQ_PG_BIN") {
        let d = PathBuf::from(d);
        return d.join("initdb").exists().then_some(d);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b)
}

/// The uid and gid of the `postgres` user, when this process is root
/// (and so must not run the server itself).
fn run_as() -> Option<(u32, u32)> {
    // Our own uid: the owner of /proc/self.
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata("/proc/self").map_or(true, |m| m.uid() != 0) {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("running as root and there is no `postgres` user (apt-get install postgresql)");
    let f: Vec<&str> = line.split(':').collect();
    Some((
        f[2].parse().expect("postgres uid"),
        f[3].parse().expect("postgres gid"),
    ))
}

/// A running PostgreSQL cluster; stopped and removed on drop.
#[derive(Debug)]
pub struct PgCluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    user: Option<(u32, u32)>,
    running: bool,
}

impl PgCluster {
    /// `Some(cluster)`, or `None` (reported as skipped) when PostgreSQL is
    /// not installed outside CI. Panics in CI without it, or when it does
    /// not start.
    pub fn start_or_skip(test: &str) -> Option<PgCluster> {
        if bin_dir().is_none() {
            assert!(
                !crate::in_ci(),
                "{test}: PostgreSQL is not installed (apt-get install postgresql; or set EMQ_PG_BIN)"
            );
            crate::report(&format!(
                "SKIPPED {test}: PostgreSQL not installed (apt-get install postgresql)"
            ));
            return None;
        }
        Some(PgCluster::start())
    }

    /// initdb + start on a free port; panics with the server's output when
    /// that fails.
    pub fn start() -> PgCluster {
        let bin = bin_dir().expect("PostgreSQL binaries (apt-get install postgresql)");
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("emq-pg-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the cluster's directory");
        let user = run_as();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .unwrap_or_else(|e| panic!("chown {} to postgres: {e}", dir.display()));
        }
        let mut c = PgCluster {
            bin,
            dir,
            port: free_port(),
            user,
            running: false,
        };
        let data = c.data_dir();
        let out = c.tool("initdb", |cmd| {
            cmd.arg("-D")
                .arg(&data)
                .args(["-U", "postgres", "--auth=trust", "--no-sync"])
                .args(["-E", "UTF8", "--locale=C"]);
        });
        assert!(
            out.status.success(),
            "initdb failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        c.start_server();
        c
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log_file(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Run `bin/name` (as `postgres` when we are root) and wait for it.
    fn tool(&self, name: &str, args: impl FnOnce(&mut Command)) -> Output {
        let mut cmd = Command::new(self.bin.join(name));
        args(&mut cmd);
        cmd.current_dir(&self.dir)
            .env_remove("PGDATA")
            .env_remove("PGPORT")
            .env("LC_ALL", "C");
        if let Some((uid, gid)) = self.user {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(gid).env("HOME", &self.dir);
        }
        cmd.output()
            .unwrap_or_else(|e| panic!("cannot run {name}: {e}"))
    }

    fn start_server(&mut self) {
        let (data, log) = (self.data_dir(), self.log_file());
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=40 \
             -c shared_buffers=32MB -c fsync=on -c synchronous_commit=on",
            self.port,
            self.dir.display()
        );
        let out = self.tool("pg_ctl", |cmd| {
            cmd.arg("start")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "60", "-o", &opts]);
        });
        assert!(
            out.status.success(),
            "pg_ctl start failed:\n{}{}\n--- server log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        self.running = true;
        eprintln!(
            "[harness] PostgreSQL ({}) on 127.0.0.1:{} in {}",
            self.bin.display(),
            self.port,
            self.dir.display()
        );
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `db` (see [`PgCluster::create_database`]).
    pub fn url_of(&self, db: &str) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The URL of the `postgres` database.
    pub fn url(&self) -> String {
        self.url_of("postgres")
    }

    /// A new empty database; its URL.
    pub fn create_database(&self, name: &str) -> String {
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.url_of(name)
    }

    /// Run `sql` in `db` with psql; its output (`-tA`: bare values,
    /// `|`-separated). Panics when psql fails.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-U", "postgres"])
            .args(["-p", &self.port.to_string(), "-d", db, "-c", sql])
            .env_remove("PGPASSWORD")
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// `pg_ctl stop -m fast`: every client is disconnected, the server
    /// writes a checkpoint and exits.
    pub fn stop(&mut self) {
        if !self.running {
            return;
        }
        let data = self.data_dir();
        let out = self.tool("pg_ctl", |cmd| {
            cmd.arg("stop")
                .arg("-D")
                .arg(&data)
                .args(["-m", "fast", "-w", "-t", "30"]);
        });
        if !out.status.success() {
            let _ = self.tool("pg_ctl", |cmd| {
                cmd.arg("stop")
                    .arg("-D")
                    .arg(&data)
                    .args(["-m", "immediate", "-w", "-t", "30"]);
            });
        }
        self.running = false;
    }

    /// `pg_ctl stop -m immediate`: the server and every backend quit at
    /// once (as if killed), without a checkpoint; connections break
    /// wherever they are, also in the middle of a COMMIT.
    pub fn kill(&mut self) {
        if !self.running {
            return;
        }
        let data = self.data_dir();
        let _ = self.tool("pg_ctl", |cmd| {
            cmd.arg("stop")
                .arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "-w", "-t", "30"]);
        });
        self.running = false;
    }

    /// Start again after [`PgCluster::stop`], on the same port.
    pub fn start_again(&mut self) {
        if !self.running {
            self.start_server();
        }
    }

    pub fn is_running(&self) -> bool {
        self.running
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        self.stop();
        let log = self.log_file();
        if log.exists() {
            let _ = std::fs::copy(
                &log,
                test_log_dir().join(format!("postgres-{}.log", self.port)),
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
