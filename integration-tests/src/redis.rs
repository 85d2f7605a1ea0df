//! A real Redis for a test: Debian's `redis-server` on a free loopback port
//! with its own directory and config (no persistence: no RDB snapshots, no
//! append-only file), started by the test and stopped when the
//! [`RedisServer`] is dropped — also when the test fails (the [`Proc`]
//! guard sends SIGTERM, then SIGKILL). EventMQ 0.3.13's `emq-scheduler`
//! keeps its schedules there.
//!
//! [`RedisServer::start`] returns `None` (the test is skipped, the reason
//! printed) when `redis-server` is not installed, except under CI
//! (`CI=true`), where it panics: `.ci/run` installs it.
//! [`RedisServer::cli`] runs Debian's `redis-cli` against it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::ports::free_port;
use crate::process::{run, scratch_dir, Proc, Spawn};

/// How long redis-server gets to say it accepts connections.
const READY: Duration = Duration::from_secs(20);

/// A running redis-server; stopped on drop.
#[derive(Debug)]
pub struct RedisServer {
    proc: Proc,
    port: u16,
    dir: PathBuf,
}

/// The program, if installed: `$EMQ_REDIS_SERVER`, else `redis-server` on
/// `PATH` or in `/usr/bin`.
fn find(name: &str, env: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The config: loopback only, this port, this directory, nothing written
/// to disk, log to stdout.
fn config(port: u16, dir: &Path) -> String {
    format!(
        "bind 127.0.0.1\n\
         port {port}\n\
         protected-mode yes\n\
         daemonize no\n\
         dir {}\n\
         save \"\"\n\
         appendonly no\n\
         logfile \"\"\n\
         databases 1\n",
        dir.display()
    )
}

impl RedisServer {
    /// Start one for `test`, on a fresh port (retried on another port if
    /// the first is taken meanwhile); `None` when redis-server is missing
    /// outside CI.
    pub fn start(test: &str) -> Option<RedisServer> {
        let Some(server) = find("redis-server", "EMQ_REDIS_SERVER") else {
            let why = "redis-server is not installed (Debian: apt-get install redis-server)";
            if crate::in_ci() {
                panic!("{test}: {why}; .ci/run installs it");
            }
            let msg = format!("SKIPPED {test}: {why}");
            println!("{msg}");
            eprintln!("{msg}");
            return None;
        };
        let mut last = String::new();
        for _ in 0..3 {
            let port = free_port();
            let dir = scratch_dir("redis");
            let conf = dir.join("redis.conf");
            std::fs::write(&conf, config(port, &dir)).expect("write redis.conf");
            let mut proc = Spawn::new("redis-server", &server).arg(&conf).spawn();
            match proc.wait_for_stdout_line("Ready to accept connections", READY) {
                Ok(_) => {
                    let r = RedisServer { proc, port, dir };
                    match r.cli(&["PING"]) {
                        Ok(pong) if pong == "PONG" => return Some(r),
                        other => last = format!("PING answered {other:?}"),
                    }
                }
                Err(e) => {
                    last = format!("{e}\nstdout:\n{}", proc.stdout());
                    eprintln!("[harness] redis-server did not start on port {port}: {last}");
                }
            }
        }
        panic!("redis-server did not start: {last}");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Its directory (config; nothing else is written there).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Run `redis-cli --raw` with `args` against it: its output, trimmed,
    /// or why it failed.
    pub fn cli(&self, args: &[&str]) -> Result<String, String> {
        let cli = find("redis-cli", "EMQ_REDIS_CLI")
            .ok_or("redis-cli is not installed (Debian: redis-tools)")?;
        let out = run(
            Spawn::new("redis-cli", cli)
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "--raw"])
                .args(args),
            Duration::from_secs(10),
        );
        if out.code() == Some(0) && !out.stdout.starts_with("ERR") {
            Ok(out.stdout.trim().to_string())
        } else {
            Err(out.describe())
        }
    }

    /// The elements of the list `key` (`LRANGE key 0 -1`).
    pub fn list(&self, key: &str) -> Result<Vec<String>, String> {
        let text = self.cli(&["LRANGE", key, "0", "-1"])?;
        Ok(text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect())
    }

    /// Stop it now (SIGTERM; SIGKILL after the grace time); the exit status.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        self.proc.stop()
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        self.proc.is_running()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_keeps_everything_in_memory_and_on_loopback() {
        let c = config(23456, Path::new("/tmp/x"));
        for line in [
            "bind 127.0.0.1",
            "port 23456",
            "dir /tmp/x",
            "save \"\"",
            "appendonly no",
            "daemonize no",
        ] {
            assert!(c.lines().any(|l| l == line), "{line} missing from:\n{c}");
        }
    }

    /// The module's contract, with the real server: it answers, keeps
    /// data in memory only, and is gone after drop.
    #[test]
    fn starts_answers_and_stops_on_drop() {
        let Some(mut r) = RedisServer::start("redis::starts_answers_and_stops_on_drop") else {
            return;
        };
        assert_eq!(r.cli(&["RPUSH", "l", "a", "b"]).unwrap(), "2");
        assert_eq!(r.list("l").unwrap(), ["a", "b"]);
        assert_eq!(r.cli(&["CONFIG", "GET", "save"]).unwrap(), "save");
        assert!(r.is_running());
        let port = r.port();
        let dir = r.dir().to_path_buf();
        let pid = r.proc.pid();
        drop(r);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "redis-server (pid {pid}) still running after drop"
        );
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "port {port} still open"
        );
        let written: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(written, ["redis.conf"], "nothing persisted");
    }
}
