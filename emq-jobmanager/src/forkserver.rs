//! The Python fork server: one Python process per pool that has started
//! the interpreter and done the worker script's imports (and imported the
//! hooks' modules) once, and forks a fresh worker for a slot in about a
//! millisecond (an interpreter start with its imports takes tens of
//! milliseconds of CPU, seconds on a loaded machine). Recycling a worker
//! after `MAX_JOB_COUNT` jobs then costs a fork, and the worker's own
//! `SUBPROCESS_SETUP_FUNC`, which still runs once in each worker, first
//! (0.3.13's meaning: what it opens, connections or threads, must not be
//! shared by forked processes).
//!
//! The rule, as [`crate::python`] relies on it:
//! - **A worker is asked for, not started.** [`ForkServer::fork`] makes a
//!   Unix socket pair, sends one end to the server with a `fork` line
//!   (the descriptor rides along, `SCM_RIGHTS`) and returns the other: the
//!   worker speaks its usual protocol on it (hello line first). The
//!   request is buffered by the kernel, so a slot never waits for the
//!   server to start; the server answers `forked` with the pid.
//! - **Every exit is reported, and a pid stays ours until we say so.** The
//!   workers are the server's children, not the job manager's. The server
//!   watches each with a pidfd and reports `exited` (code or signal)
//!   without reaping it (`waitid(WNOWAIT)`), so the pid and its process
//!   group cannot be reused while the job manager may still kill that
//!   group; the job manager forgets the group, then sends `reap`. A worker
//!   the job manager no longer follows (a retired one) is `release`d with
//!   a grace period: the server kills its group when it exits or when the
//!   grace ends, and reaps it. Exit reports over the server's own socket
//!   were chosen over `PR_SET_CHILD_SUBREAPER` (which would make every
//!   orphan of every job the job manager's child to reap, fighting std's
//!   `Child::wait`) and over a pidfd per worker in the job manager (which
//!   cannot kill a process group, and would not keep the pgid reserved).
//! - **Workers die with their server, the server with the job manager.**
//!   The server is started with `PR_SET_PDEATHSIG` (as the workers were
//!   before) by its own reader thread, which lives as long as the server
//!   (the signal fires when the spawning *thread* ends), and each worker
//!   sets it too, against the server. When the
//!   job manager closes the control socket, the server kills every
//!   worker's group and exits.
//! - **A server that dies is replaced.** Its reader thread sees the socket
//!   close, reaps it, and marks every worker it had as exited ("its fork
//!   server exited"); the next [`ForkServer::fork`] starts a new server.
//!   Such workers' pids are reaped by init, not by us: a kill aimed at one
//!   of their groups after that could reach a reused pid, a window the
//!   reader closes by reporting them exited at once.
//! - **`--reload`**: a server started at an older [`CodeVersion`] is not
//!   asked for workers any more; a new one is started (its setup and
//!   imports see the new code). The old one lives until its last worker
//!   is gone (its running jobs finish on the code they started with).
//!
//! [`CodeVersion`]: crate::reload::CodeVersion

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use log::{debug, warn};
use serde_json::Value;

use emq_process::{die_with_parent, send_fd, GroupLeader};

use crate::reload::CodeVersion;

/// The worker script (the fork server and its workers).
pub const WORKER_SCRIPT: &str = include_str!("../python/emq_worker.py");

/// How to start a fork server (from [`crate::python::PythonConfig`]).
#[derive(Debug, Clone)]
pub(crate) struct ServerSpec {
    /// The interpreter (`--python`).
    pub(crate) interpreter: String,
    /// Directories put in front of the inherited `PYTHONPATH`.
    pub(crate) python_path: Vec<std::path::PathBuf>,
    /// The script's argument: the hook paths, as JSON.
    pub(crate) hooks: String,
    /// The watched code's version (`--reload`).
    pub(crate) code_version: CodeVersion,
}

/// What the reader thread learnt from one server.
#[derive(Default)]
struct State {
    /// The server exited (why): no more forks, every worker exited.
    dead: Option<String>,
    /// Fork request token → the worker's pid.
    forked: HashMap<u64, i32>,
    /// Workers forked and not yet reported exited.
    live: HashSet<i32>,
    /// Workers reported exited, not reaped yet: how they ended.
    exited: HashMap<i32, String>,
    /// Workers released to the server (their exit is not kept).
    released: HashSet<i32>,
}

/// One fork server process, shared by its reader thread and every
/// [`Server`] handle.
struct Inner {
    ctl: Mutex<UnixStream>,
    state: Mutex<State>,
    changed: Condvar,
    leader: Mutex<Option<GroupLeader>>,
    pid: i32,
    version: u64,
    tokens: AtomicU64,
}

/// A fork server, as the slots hold it: when the last handle goes (no
/// worker of it left, and the pool took a newer one or stopped), its
/// control socket is shut down and it exits after killing what it has
/// left.
pub(crate) struct Server(Arc<Inner>);

impl Drop for Server {
    fn drop(&mut self) {
        // Quietly: no warning from the reader for an exit we asked for.
        self.state().dead.get_or_insert_with(|| "stopped".into());
        let _ = lock(&self.0.ctl).shutdown(std::net::Shutdown::Write);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How a worker ended, from an `exited` report.
fn describe(v: &Value) -> String {
    match (v["code"].as_i64(), v["signal"].as_i64()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "unknown status".into(),
    }
}

impl Server {
    /// The server's pid.
    pub(crate) fn pid(&self) -> i32 {
        self.0.pid
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.0.state)
    }

    fn send(&self, line: &Value) -> std::io::Result<()> {
        let mut text = line.to_string();
        text.push('\n');
        lock(&self.0.ctl).write_all(text.as_bytes())
    }

    /// The pid of the worker forked for `token`, waiting up to `wait` for
    /// the server's answer (`None`: not forked yet, or never will be).
    pub(crate) fn pid_of(&self, token: u64, wait: Duration) -> Option<i32> {
        self.wait_for(wait, |s| match s.forked.get(&token) {
            Some(pid) => Some(Some(*pid)),
            None if s.dead.is_some() => Some(None),
            None => None,
        })
    }

    /// Why the server is gone, if it is.
    pub(crate) fn gone(&self) -> Option<String> {
        self.state().dead.clone()
    }

    /// How worker `pid` ended, if it has (not reaped: its group id is
    /// still ours).
    pub(crate) fn exited(&self, pid: i32) -> Option<String> {
        self.state().exited.get(&pid).cloned()
    }

    /// Wait up to `wait` for worker `pid` to exit; how it ended.
    pub(crate) fn wait_exited(&self, pid: i32, wait: Duration) -> Option<String> {
        self.wait_for(wait, |s| {
            s.exited.get(&pid).map(|status| Some(status.clone()))
        })
    }

    /// Wait up to `wait`, woken at each change of the server's state,
    /// until `settled` gives an answer (`Some`); `None` when time ran out.
    fn wait_for<T>(
        &self,
        wait: Duration,
        settled: impl Fn(&State) -> Option<Option<T>>,
    ) -> Option<T> {
        let deadline = Instant::now() + wait;
        let mut s = self.state();
        loop {
            if let Some(answer) = settled(&s) {
                return answer;
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            s = self
                .0
                .changed
                .wait_timeout(s, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Let the server reap worker `pid`, which has exited (forget its
    /// group first: after this the pid may be reused).
    pub(crate) fn reap(&self, pid: i32) {
        let dead = {
            let mut s = self.state();
            s.exited.remove(&pid);
            s.forked.retain(|_, p| *p != pid);
            s.dead.is_some()
        };
        if !dead {
            let _ = self.send(&serde_json::json!({ "reap": pid }));
        }
    }

    /// Hand worker `pid` over to the server: it gets `grace` to exit on
    /// its own, then its group is killed; either way the server kills what
    /// is left of its group and reaps it. Its exit is not kept here.
    pub(crate) fn release(&self, pid: i32, grace: Duration) {
        let dead = {
            let mut s = self.state();
            s.forked.retain(|_, p| *p != pid);
            if s.exited.remove(&pid).is_none() && s.live.contains(&pid) {
                s.released.insert(pid);
            }
            s.dead.is_some()
        };
        if !dead {
            let grace = grace.as_secs_f64();
            let _ = self.send(&serde_json::json!({ "release": pid, "grace": grace }));
        }
    }

    /// Whether the server is serving (its hello was read, it has not
    /// exited): a fork is then answered within about a millisecond.
    fn serving(&self) -> bool {
        let s = self.state();
        s.dead.is_none() && s.forked.contains_key(&0)
    }
}

/// The pool's fork server: started on first use, replaced when it dies or
/// the code changes (`--reload`).
pub(crate) struct ForkServer {
    cfg: ServerSpec,
    current: Mutex<Option<Arc<Server>>>,
    /// Times a slot that had a worker had to wait for a fresh one's hello.
    start_waits: AtomicU64,
}

/// A worker asked for: its socket, its server, and the request's token
/// (see [`Server::pid_of`]).
pub(crate) struct Forked {
    pub(crate) server: Arc<Server>,
    pub(crate) socket: UnixStream,
    pub(crate) token: u64,
}

impl ForkServer {
    pub(crate) fn new(cfg: ServerSpec) -> Arc<ForkServer> {
        Arc::new(ForkServer {
            cfg,
            current: Mutex::new(None),
            start_waits: AtomicU64::new(0),
        })
    }

    /// The pid of the running server, if any.
    pub(crate) fn pid(&self) -> Option<i32> {
        lock(&self.current)
            .as_ref()
            .filter(|s| s.state().dead.is_none())
            .map(|s| s.pid())
    }

    /// Start the server if it is not running (the pool's prestart).
    pub(crate) fn start(&self) -> Result<(), String> {
        self.server().map(|_| ())
    }

    /// The running server at the current code version, started if needed.
    fn server(&self) -> Result<Arc<Server>, String> {
        let version = self.cfg.code_version.get();
        let mut current = lock(&self.current);
        if let Some(s) = current.as_ref() {
            if s.0.version == version && s.state().dead.is_none() {
                return Ok(Arc::clone(s));
            }
        }
        // A dead or outdated server is dropped here; an outdated one
        // lives on until its last worker goes.
        *current = None;
        let server = Arc::new(self.spawn(version)?);
        *current = Some(Arc::clone(&server));
        Ok(server)
    }

    fn spawn(&self, version: u64) -> Result<Server, String> {
        let cannot = |e: std::io::Error| {
            format!("cannot start Python worker {:?}: {e}", self.cfg.interpreter)
        };
        let (ours, theirs) = UnixStream::pair().map_err(cannot)?;
        let theirs_out: OwnedFd = theirs.try_clone().map_err(cannot)?.into();
        let mut cmd = Command::new(&self.cfg.interpreter);
        cmd.arg("-u")
            .arg("-c")
            .arg(WORKER_SCRIPT)
            .arg(&self.cfg.hooks)
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::from(theirs_out))
            .stderr(Stdio::inherit())
            .process_group(0);
        die_with_parent(&mut cmd);
        // systemd's socket is the job manager's (NotifyAccess=main).
        cmd.env_remove(emq_cli_support::service::NOTIFY_SOCKET);
        if !self.cfg.python_path.is_empty() {
            let mut paths = self.cfg.python_path.clone();
            if let Some(existing) = std::env::var_os("PYTHONPATH") {
                paths.extend(std::env::split_paths(&existing));
            }
            if let Ok(joined) = std::env::join_paths(paths) {
                cmd.env("PYTHONPATH", joined);
            }
        }
        // The server is spawned by its reader thread, which lives as long
        // as the server does: PR_SET_PDEATHSIG fires when the *thread*
        // that spawned a child ends, and a slot thread (or the caller of
        // Pool::new) may end long before the pool.
        let reader = ours.try_clone().map_err(cannot)?;
        let (spawned_tx, spawned_rx) = std::sync::mpsc::channel();
        let (inner_tx, inner_rx) = std::sync::mpsc::channel::<Arc<Inner>>();
        std::thread::Builder::new()
            .name("emq-forkserver".into())
            .spawn(move || {
                let spawned = GroupLeader::spawn(&mut cmd);
                drop(cmd);
                let ok = spawned.is_ok();
                if spawned_tx.send(spawned).is_err() || !ok {
                    return;
                }
                if let Ok(inner) = inner_rx.recv() {
                    read_reports(inner, reader);
                }
            })
            .map_err(cannot)?;
        let leader = spawned_rx
            .recv()
            .map_err(|_| format!("cannot start Python worker {:?}", self.cfg.interpreter))?
            .map_err(cannot)?;
        let pid = leader.pid();
        let inner = Arc::new(Inner {
            ctl: Mutex::new(ours),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            leader: Mutex::new(Some(leader)),
            pid,
            version,
            // 0 marks the hello in `forked`.
            tokens: AtomicU64::new(1),
        });
        // The thread waits for it; if it is gone, so is its reader: the
        // server is stopped here (dropping `inner` kills it).
        if inner_tx.send(Arc::clone(&inner)).is_err() {
            return Err(format!(
                "cannot start Python worker {:?}: its reader thread ended",
                self.cfg.interpreter
            ));
        }
        debug!("Python fork server pid {pid} started");
        Ok(Server(inner))
    }

    /// Ask for a fresh worker (see the module docs); its pid comes with
    /// the server's answer ([`Server::pid_of`]) or its hello.
    pub(crate) fn fork(&self) -> Result<Forked, String> {
        // One retry: a server found dead on the way is replaced once.
        let mut last = String::new();
        for _ in 0..2 {
            let server = self.server()?;
            let (ours, theirs) = UnixStream::pair()
                .map_err(|e| format!("cannot make a Python worker's socket: {e}"))?;
            let token = server.0.tokens.fetch_add(1, Ordering::Relaxed);
            let line = format!("{{\"fork\": {token}}}\n");
            let sent = {
                let ctl = lock(&server.0.ctl);
                send_fd(&ctl, line.as_bytes(), theirs.as_fd())
            };
            match sent {
                Ok(()) => {
                    return Ok(Forked {
                        server,
                        socket: ours,
                        token,
                    })
                }
                Err(e) => {
                    last = format!("Python fork server pid {} is gone: {e}", server.pid());
                    let mut s = server.state();
                    s.dead.get_or_insert_with(|| "unreachable".into());
                }
            }
        }
        Err(last)
    }

    /// A slot that had a worker waits for a fresh one to start.
    pub(crate) fn note_start_wait(&self) {
        self.start_waits.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times a slot that had a worker waited for a fresh one.
    pub(crate) fn start_waits(&self) -> u64 {
        self.start_waits.load(Ordering::Relaxed)
    }

    /// Whether the current server is serving (its hello read).
    pub(crate) fn serving(&self) -> bool {
        lock(&self.current).as_ref().is_some_and(|s| s.serving())
    }
}

impl Drop for ForkServer {
    fn drop(&mut self) {
        let Some(server) = lock(&self.current).take() else {
            return;
        };
        // Closing the control socket makes it kill its workers and exit;
        // it is reaped (and killed, if it lingers) here.
        server.state().dead.get_or_insert_with(|| "stopped".into());
        let _ = lock(&server.0.ctl).shutdown(std::net::Shutdown::Write);
        let deadline = Instant::now() + Duration::from_secs(2);
        let leader = loop {
            let mut l = lock(&server.0.leader);
            match l.as_ref() {
                None => break None,
                Some(leader) if leader.exited() || Instant::now() >= deadline => break l.take(),
                Some(_) => {}
            }
            drop(l);
            std::thread::sleep(Duration::from_millis(5));
        };
        if let Some(leader) = leader {
            leader.kill();
            let _ = leader.reap();
        }
    }
}

/// The reader thread of one server: every report, until it exits.
fn read_reports(inner: Arc<Inner>, ctl: UnixStream) {
    let mut lines = BufReader::new(ctl);
    let mut line = String::new();
    loop {
        line.clear();
        match lines.read_line(&mut line) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
            warn!(
                "Python fork server pid {}: unreadable report {line:?}",
                inner.pid
            );
            continue;
        };
        let mut s = lock(&inner.state);
        if v.get("hello").is_some() {
            s.forked.insert(0, inner.pid);
        } else if let (Some(token), Some(pid)) = (v["forked"].as_u64(), v["pid"].as_i64()) {
            s.forked.insert(token, pid as i32);
            s.live.insert(pid as i32);
        } else if let Some(pid) = v["exited"].as_i64() {
            let pid = pid as i32;
            s.live.remove(&pid);
            if !s.released.remove(&pid) {
                s.exited.insert(pid, describe(&v));
            }
        }
        drop(s);
        inner.changed.notify_all();
    }
    // The server is gone: reap it, and its workers count as exited.
    let leader = lock(&inner.leader).take();
    let status = match leader.map(|l| l.reap()) {
        Some(Ok(s)) => describe_status(s),
        Some(Err(e)) => format!("wait failed: {e}"),
        None => "stopped".into(),
    };
    let mut s = lock(&inner.state);
    let why = format!("killed: its fork server exited ({status})");
    for pid in std::mem::take(&mut s.live) {
        if !s.released.remove(&pid) {
            s.exited.insert(pid, why.clone());
        }
    }
    if s.dead.is_none() {
        warn!(
            "Python fork server pid {} exited ({status}); a new one starts for the next worker",
            inner.pid
        );
    }
    s.dead.get_or_insert(status);
    drop(s);
    inner.changed.notify_all();
}

/// How a process ended, in words.
pub(crate) fn describe_status(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown status".into(),
    }
}
