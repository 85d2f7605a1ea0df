//! Child processes that cannot outlive their test.
//!
//! Every child runs in its own process group (so the Python job manager's
//! worker processes, or the shell children of a job, are reachable), with
//! stderr and stdout redirected to files under `target/emq-it-logs/<test>/`.
//! [`Proc`] stops its child on drop: SIGCONT (in case a test stopped it),
//! SIGTERM, up to [`STOP_GRACE`] to exit, then SIGKILL of the whole group.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::bins;

/// How long a process gets to exit after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(8);

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// The log directory of the current test (the libtest thread name).
pub fn test_log_dir() -> PathBuf {
    let thread = std::thread::current();
    let name: String = thread
        .name()
        .unwrap_or("main")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = bins::target_dir().join("emq-it-logs").join(name);
    // Emptied on first use in this process: logs of earlier runs go.
    static FRESH: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let mut fresh = FRESH.lock().unwrap_or_else(|e| e.into_inner());
    if fresh.get_or_insert_with(HashSet::new).insert(dir.clone()) {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// A fresh scratch directory for the current test (under its log dir).
pub fn scratch_dir(label: &str) -> PathBuf {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir = test_log_dir().join(format!("{label}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// A [`scratch_dir`] removed when dropped, for tests whose files are not
/// worth keeping for a post-mortem.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        TempDir(scratch_dir(label))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An empty EventMQ config file, so neither our binaries nor 0.3.13 read
/// `/etc/eventmq.conf` of the machine.
pub fn empty_config() -> PathBuf {
    let p = bins::target_dir()
        .join("emq-it-logs")
        .join("empty-eventmq.conf");
    if !p.exists() {
        let _ = std::fs::create_dir_all(p.parent().expect("has parent"));
        let _ = std::fs::write(&p, "");
    }
    p
}

/// A plain `std::process::Child` (e.g. with piped stdio) killed and reaped
/// when the test ends, however it ends. [`Proc`] does more (own group,
/// logs, SIGTERM first); this is for tests that read the child's pipes.
pub struct ChildGuard(pub Child);

impl ChildGuard {
    /// The exit code once the child exits within `timeout` (polled every
    /// 20 ms), else `None`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.0.try_wait().expect("try_wait") {
                return s.code();
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What to start.
#[derive(Debug, Clone)]
pub struct Spawn {
    name: String,
    program: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    cwd: Option<PathBuf>,
    stdin: Option<Vec<u8>>,
    /// Keep stdin open for the test to write ([`Proc::take_stdin`]).
    stdin_pipe: bool,
}

impl Spawn {
    /// `name` labels the log files. The child gets the test's environment
    /// minus every inherited `EVENTMQ_*` variable, plus
    /// `EVENTMQ_CONFIG_FILE` = an empty file, `PYTHONDONTWRITEBYTECODE=1`,
    /// `RUST_LOG=info` unless set, plus what [`Spawn::env`] adds.
    pub fn new(name: &str, program: impl AsRef<Path>) -> Spawn {
        Spawn {
            name: name.to_string(),
            program: program.as_ref().to_path_buf(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            stdin: None,
            stdin_pipe: false,
        }
    }

    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Spawn {
        self.args.push(a.as_ref().to_os_string());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Spawn
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    pub fn env(mut self, k: impl AsRef<OsStr>, v: impl AsRef<OsStr>) -> Spawn {
        self.env
            .push((k.as_ref().to_os_string(), v.as_ref().to_os_string()));
        self
    }

    /// [`Spawn::env`] for each pair.
    pub fn envs<I, K, V>(self, vars: I) -> Spawn
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        vars.into_iter().fold(self, |s, (k, v)| s.env(k, v))
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Spawn {
        self.cwd = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Bytes written to the child's stdin (then closed). Without this,
    /// stdin is /dev/null.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Spawn {
        self.stdin = Some(bytes.into());
        self
    }

    /// A pipe on the child's stdin that the test writes at its own pace
    /// ([`Proc::take_stdin`]; the child sees the end when it is dropped).
    pub fn stdin_pipe(mut self) -> Spawn {
        self.stdin_pipe = true;
        self
    }

    fn command(&self, stdout: File, stderr: File) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .stdout(stdout)
            .stderr(stderr)
            .stdin(if self.stdin.is_some() || self.stdin_pipe {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .process_group(0);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("EVENTMQ_") {
                cmd.env_remove(&k);
            }
        }
        cmd.env("EVENTMQ_CONFIG_FILE", empty_config());
        // No __pycache__ in tests/python.
        cmd.env("PYTHONDONTWRITEBYTECODE", "1");
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(d) = &self.cwd {
            cmd.current_dir(d);
        }
        cmd
    }

    /// Start it; panics when it cannot be started.
    pub fn spawn(self) -> Proc {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = test_log_dir();
        let base = format!("{n:03}-{}", self.name);
        let stderr_path = dir.join(format!("{base}.stderr.log"));
        let stdout_path = dir.join(format!("{base}.stdout.log"));
        let err = File::create(&stderr_path).expect("create stderr log");
        let out = File::create(&stdout_path).expect("create stdout log");
        let mut child = self
            .command(out, err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.program.display()));
        if let Some(bytes) = self.stdin.clone() {
            if let Some(mut stdin) = child.stdin.take() {
                std::thread::spawn(move || {
                    let _ = stdin.write_all(&bytes);
                });
            }
        }
        let pid = child.id() as i32;
        eprintln!(
            "[harness] started {} (pid {pid}): {} {:?}; stderr {}",
            self.name,
            self.program.display(),
            self.args,
            stderr_path.display()
        );
        Proc {
            name: self.name,
            child,
            pid,
            stderr_path,
            stdout_path,
            status: None,
        }
    }
}

/// A running child; stopped on drop.
#[derive(Debug)]
pub struct Proc {
    pub name: String,
    child: Child,
    pid: i32,
    stderr_path: PathBuf,
    stdout_path: PathBuf,
    status: Option<ExitStatus>,
}

/// `sig` to process `pid`, or to process group `-pid` (a stale pid only
/// yields ESRCH).
fn signal_pid(pid: i32, sig: i32) {
    if pid < 0 {
        emq_process::signal_group(-pid, sig);
    } else {
        emq_process::signal(pid, sig);
    }
}

impl Proc {
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The child's stdin, with [`Spawn::stdin_pipe`] (once).
    pub fn take_stdin(&mut self) -> Option<std::process::ChildStdin> {
        self.child.stdin.take()
    }

    pub fn stderr_path(&self) -> &Path {
        &self.stderr_path
    }

    pub fn stdout_path(&self) -> &Path {
        &self.stdout_path
    }

    /// Everything the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.stderr_path).unwrap_or_default()).into_owned()
    }

    /// Everything the child wrote to stdout so far.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.stdout_path).unwrap_or_default()).into_owned()
    }

    /// The last `n` lines of stderr, for failure messages.
    pub fn tail(&self, n: usize) -> String {
        tail_lines(&self.stderr(), n)
    }

    /// Whether the child is still running (reaps it if it exited).
    pub fn is_running(&mut self) -> bool {
        if self.status.is_some() {
            return false;
        }
        match self.child.try_wait() {
            Ok(Some(s)) => {
                self.status = Some(s);
                false
            }
            Ok(None) => true,
            Err(_) => false,
        }
    }

    /// The exit status, once exited.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.is_running();
        self.status
    }

    /// Wait up to `timeout` for the child to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.is_running() {
                return self.status;
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until a line of stderr (or stdout) contains `needle`; the line.
    /// Fails early, with the log tail, if the child exits first.
    pub fn wait_for_log_line(&mut self, needle: &str, timeout: Duration) -> Result<String, String> {
        self.wait_for_line(needle, timeout, false)
    }

    /// Like [`Proc::wait_for_log_line`], on stdout.
    pub fn wait_for_stdout_line(
        &mut self,
        needle: &str,
        timeout: Duration,
    ) -> Result<String, String> {
        self.wait_for_line(needle, timeout, true)
    }

    fn wait_for_line(
        &mut self,
        needle: &str,
        timeout: Duration,
        stdout: bool,
    ) -> Result<String, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let text = if stdout { self.stdout() } else { self.stderr() };
            if let Some(line) = text.lines().find(|l| l.contains(needle)) {
                return Ok(line.to_string());
            }
            let running = self.is_running();
            if !running || Instant::now() >= deadline {
                let why = if running {
                    format!("not seen within {timeout:?}")
                } else {
                    format!("process exited ({:?}) first", self.status)
                };
                return Err(format!(
                    "{}: line containing {needle:?} {why}; stderr tail:\n{}",
                    self.name,
                    self.tail(30)
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Send a signal to the child (not its group).
    pub fn signal(&self, sig: i32) {
        if self.status.is_none() {
            signal_pid(self.pid, sig);
        }
    }

    /// SIGTERM the child (not its group), without waiting: the test then
    /// sees what it does on the way out, and [`Proc::wait_exit`]s.
    pub fn terminate(&self) {
        self.signal(libc::SIGTERM);
    }

    /// SIGSTOP the child.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT the child.
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// SIGKILL the child alone, as a crash would; its own children (job
    /// processes) live on until the group is killed on drop.
    pub fn kill9(&mut self) -> Option<ExitStatus> {
        self.signal(libc::SIGKILL);
        self.wait_exit(Duration::from_secs(5))
    }

    /// SIGKILL the child's whole process group (the child and everything
    /// it started, e.g. 0.3.13's worker processes): a machine-level crash.
    pub fn kill9_group(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            signal_pid(-self.pid, libc::SIGKILL);
        }
        self.kill9()
    }

    /// SIGTERM, then SIGKILL after [`STOP_GRACE`]; the exit status. Kills
    /// whatever is left of the process group afterwards.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        if self.is_running() {
            self.signal(libc::SIGCONT);
            self.signal(libc::SIGTERM);
            if self.wait_exit(STOP_GRACE).is_none() {
                eprintln!(
                    "[harness] {} (pid {}) ignored SIGTERM for {STOP_GRACE:?}; SIGKILL",
                    self.name, self.pid
                );
                signal_pid(-self.pid, libc::SIGKILL);
                signal_pid(self.pid, libc::SIGKILL);
                let _ = self.child.wait().map(|s| self.status = Some(s));
            }
        }
        signal_pid(-self.pid, libc::SIGKILL);
        self.status
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let was_running = self.is_running();
        self.stop();
        if std::thread::panicking() {
            eprintln!(
                "[harness] --- {} (pid {}, {}) stderr tail ({}):\n{}",
                self.name,
                self.pid,
                if was_running {
                    "was running"
                } else {
                    "had exited"
                },
                self.stderr_path.display(),
                self.tail(40)
            );
        }
    }
}

/// Whether `pid` is a live process (a zombie waiting for its reaper is
/// not), from `/proc/PID/stat`.
pub use emq_process::pid_alive;

/// Wait (polling `/proc` every 20 ms, at most `timeout`) until none of
/// `pids` is alive; whether they all went.
pub fn wait_pids_gone(pids: &[i32], timeout: Duration) -> bool {
    crate::poll_until(timeout, Duration::from_millis(20), || {
        (!pids.iter().any(|&p| pid_alive(p))).then_some(())
    })
    .is_some()
}

/// The last `n` lines of `text`.
pub fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// How a one-shot command ended.
#[derive(Debug)]
pub struct RunOutput {
    /// `None` when it was killed at the timeout.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl RunOutput {
    /// The exit code; `None` on timeout or death by signal.
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// A description for assertion messages.
    pub fn describe(&self) -> String {
        let how = match self.status {
            None => "timed out".to_string(),
            Some(s) => match (s.code(), s.signal()) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => format!("{s}"),
            },
        };
        format!(
            "{how}\n--- stdout:\n{}\n--- stderr:\n{}",
            tail_lines(&self.stdout, 40),
            tail_lines(&self.stderr, 40)
        )
    }
}

/// [`run`], for a command that must exit by itself within `timeout`: a
/// panic (with its output) if it had to be killed.
pub fn run_to_exit(spawn: Spawn, timeout: Duration) -> RunOutput {
    let name = spawn.name.clone();
    let out = run(spawn, timeout);
    assert!(
        out.status.is_some(),
        "{name} did not exit within {timeout:?}: {}",
        out.describe()
    );
    out
}

/// Run to completion, at most `timeout` (then killed, `status: None`).
pub fn run(spawn: Spawn, timeout: Duration) -> RunOutput {
    let mut p = spawn.spawn();
    let status = p.wait_exit(timeout);
    if status.is_none() {
        signal_pid(-p.pid, libc::SIGKILL);
        let _ = p.child.wait();
    }
    let out = RunOutput {
        status,
        stdout: p.stdout(),
        stderr: p.stderr(),
    };
    p.status = Some(p.status.unwrap_or_else(|| ExitStatus::from_raw(9)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_is_bounded_and_a_terminated_pid_is_seen_to_go() {
        let sh = Spawn::new("sh", "/bin/sh").args(["-c", "echo out; echo err >&2; exit 3"]);
        let out = run(sh, Duration::from_secs(10));
        assert_eq!(out.code(), Some(3), "{}", out.describe());
        assert_eq!(
            (out.stdout.as_str(), out.stderr.as_str()),
            ("out\n", "err\n")
        );
        let out = run(
            Spawn::new("sleep", "sleep").arg("30"),
            Duration::from_millis(200),
        );
        assert!(out.status.is_none(), "killed at the bound");
        let late = std::panic::catch_unwind(|| {
            run_to_exit(
                Spawn::new("sleep", "sleep").arg("30"),
                Duration::from_millis(200),
            )
        });
        assert!(late.is_err(), "run_to_exit fails when it had to kill");

        let mut p = Spawn::new("sleep", "sleep").arg("30").spawn();
        let pid = p.pid();
        assert!(pid_alive(pid));
        p.terminate();
        assert!(p.wait_exit(Duration::from_secs(5)).is_some());
        assert!(wait_pids_gone(&[pid], Duration::from_secs(5)));
        assert!(!pid_alive(pid));
    }
}
