//! `run` jobs: EventMQ 0.3.13 Python jobs, on one long-lived Python worker
//! process per slot.
//!
//! The worker script (`python/emq_worker.py`, embedded here) runs as the
//! pool's fork server ([`crate::forkserver`]: `PYTHON -u -c SCRIPT HOOKS`,
//! started once), which forks each worker into a process group of its own,
//! so that a timeout or a CANCEL kills it together with anything the job
//! started (the slot then takes a fresh worker). A worker speaks JSON lines
//! over a Unix socket (see the script's docstring); the job's own prints go
//! to the job manager's stderr, each line tagged with the job's msgid
//! (`[MSGID] line`), and its traceback, when it raises, comes without the
//! worker script's own frames. `PYTHONPATH` and the working directory are
//! inherited (with `-c`, the working directory is on `sys.path`, as for
//! 0.3.13's worker).
//!
//! 0.3.13's worker-process settings, with its meaning (`eventmq/worker.py`):
//! - `SUBPROCESS_SETUP_FUNC` ([`PythonConfig::setup_func`]): a dotted path
//!   called with no arguments once in each worker process, before its first
//!   job (a Django project's `django.setup()`): in the forked worker, first,
//!   not in the fork server, so what it opens (connections, threads) is the
//!   worker's own, as in 0.3.13. The fork server only imports the hooks'
//!   modules, so a worker finds them imported. If it raises, the traceback
//!   goes to stderr, the job manager logs a warning, and the worker runs
//!   jobs anyway (as 0.3.13 does).
//! - `JOB_ENTRY_FUNC` / `JOB_EXIT_FUNC` ([`PythonConfig::job_entry_func`],
//!   [`PythonConfig::job_exit_func`]): called with no arguments in the
//!   worker before and after every job. Where 0.3.13 lets an exception from
//!   either kill the worker's job thread (every later job then hangs until
//!   its timeout), emq defines: an entry function that raises fails the job
//!   (kind `exception`, message naming `JOB_ENTRY_FUNC`), which is then not
//!   run, and no exit function is called; an exit function that raises is
//!   logged with its traceback on stderr and the job's own result stands
//!   (the job did run: failing it would make the router retry it). Exit
//!   runs after a job that raised too. A path that cannot be loaded fails
//!   every job of that worker without running it.
//! - `MAX_JOB_COUNT` ([`PythonConfig::max_job_count`], default 1024): a
//!   worker that has run that many jobs is retired right after the REPLY
//!   of its last one (its stdin closed, so it exits on its own, given
//!   [`RETIRE_GRACE`] before its group is killed) and a fresh one takes
//!   the slot. No job is lost: the next job of the slot waits in its
//!   mailbox meanwhile, and the slot's READY went out with the REPLY.
//!
//! **Recycling without a stall or an interpreter start.** The fresh worker
//! is a *spare* forked when the old one has [`spare_lead`] jobs left (a
//! quarter of `MAX_JOB_COUNT`, at least its last one): a fork (about a
//! millisecond) and its `SUBPROCESS_SETUP_FUNC` run while the old one
//! works, so the slot takes it over at once; its hello line is read when
//! the first job is handed to it. The old one is handed to the fork server
//! to exit within [`RETIRE_GRACE`]; the slot does not wait for it. So a
//! slot has at most two worker processes, briefly (memory stays bounded),
//! and every worker still runs its setup once and first, then at most
//! `MAX_JOB_COUNT` jobs, each between its entry and exit functions, as in
//! 0.3.13. A spare is fresh: a worker killed for a timeout or a cancel is
//! replaced by it too.
//!
//! A slot starts its worker without waiting for it: the hello line is read
//! when the first job is handed over, so a slot whose interpreter is still
//! starting takes `call` and `shell` jobs meanwhile.
//!
//! In steady state a slot's idle worker is lent to the socket loop
//! (`PythonWorker::lend`), which writes requests and reads answers
//! itself (`Proc::send`, `Proc::poll_answer`: the same lines, read
//! without blocking); see the pool's "lean path". Starting, recycling and
//! reaping stay here, on the slot thread.
//!
//! The runner sees its slot only through [`GroupRegistry`].

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use emqp_proto::job::{ErrorKind, JobError, JobOutcome, RunJob};
use log::{debug, info, warn};
use serde_json::Value;

use emq_process::kill_group;

use crate::forkserver::{ForkServer, Forked, Server, ServerSpec};
use crate::registry::GroupRegistry;
use crate::reload::CodeVersion;

/// The worker script.
pub use crate::forkserver::WORKER_SCRIPT;

/// 0.3.13's `MAX_JOB_COUNT`.
pub const DEFAULT_MAX_JOB_COUNT: u64 = 1024;

/// How long a retired worker gets to exit on its own (its `atexit`
/// handlers, non-daemon threads) before its process group is killed.
pub const RETIRE_GRACE: Duration = Duration::from_secs(2);

/// How to start Python workers.
#[derive(Debug, Clone)]
pub struct PythonConfig {
    /// The interpreter (`--python`), default `python3`.
    pub interpreter: String,
    /// Directories put in front of the inherited `PYTHONPATH`.
    pub python_path: Vec<PathBuf>,
    /// Start each slot's worker when the pool starts (default), rather
    /// than on the slot's first `run` job.
    pub prestart: bool,
    /// `SUBPROCESS_SETUP_FUNC`: `pkg.mod.func` (or `pkg.mod:Class.method`)
    /// called once in each worker process before its first job.
    pub setup_func: Option<String>,
    /// `JOB_ENTRY_FUNC`: called in the worker before every job.
    pub job_entry_func: Option<String>,
    /// `JOB_EXIT_FUNC`: called in the worker after every job.
    pub job_exit_func: Option<String>,
    /// `MAX_JOB_COUNT`: a worker process is replaced after this many jobs
    /// (at least 1).
    pub max_job_count: u64,
    /// `--reload`: directories watched for `.py` changes (empty: off;
    /// [`crate::reload`]).
    pub reload_dirs: Vec<PathBuf>,
    /// The watched code's version: a worker started at an older one is
    /// replaced before its next job (never bumped without `reload_dirs`).
    pub code_version: CodeVersion,
}

impl Default for PythonConfig {
    fn default() -> Self {
        PythonConfig {
            interpreter: "python3".to_string(),
            python_path: Vec::new(),
            prestart: true,
            setup_func: None,
            job_entry_func: None,
            job_exit_func: None,
            max_job_count: DEFAULT_MAX_JOB_COUNT,
            reload_dirs: Vec::new(),
            code_version: CodeVersion::default(),
        }
    }
}

impl PythonConfig {
    /// The pool's fork server for these settings (not started yet).
    pub(crate) fn fork_server(&self) -> Arc<ForkServer> {
        ForkServer::new(ServerSpec {
            interpreter: self.interpreter.clone(),
            python_path: self.python_path.clone(),
            hooks: self.hooks_json(),
            code_version: self.code_version.clone(),
        })
    }

    /// The worker script's argument: the hook paths, as JSON.
    fn hooks_json(&self) -> String {
        serde_json::json!({
            "setup": self.setup_func,
            "entry": self.job_entry_func,
            "exit": self.job_exit_func,
        })
        .to_string()
    }
}

pub(crate) struct Proc {
    /// The fork server that forked it.
    server: Arc<Server>,
    /// Its fork request ([`Server::pid_of`]).
    token: u64,
    stdin: UnixStream,
    stdout: BufReader<UnixStream>,
    /// Its pid (= process group): from the server's answer, or its hello.
    pid: Option<i32>,
    /// Jobs this process has answered.
    jobs: u64,
    /// Its hello line was read (it is ready for jobs).
    greeted: bool,
    /// The [`CodeVersion`] it was started at.
    version: u64,
}

impl std::fmt::Debug for Proc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proc")
            .field("pid", &self.pid)
            .field("jobs", &self.jobs)
            .field("greeted", &self.greeted)
            .finish()
    }
}

impl Proc {
    /// Close its pipes (a worker between jobs then reads EOF and exits)
    /// and name it: its fork server and its pid (= process group), from
    /// the server's answer when its hello never came; `None` when the
    /// server never forked it.
    fn close(self) -> (Arc<Server>, Option<i32>) {
        let Proc {
            server,
            token,
            stdin,
            stdout,
            pid,
            ..
        } = self;
        drop((stdin, stdout));
        let pid = pid.or_else(|| server.pid_of(token, FORK_ANSWER));
        (server, pid)
    }
}

/// What a worker's socket said, read without blocking by the socket loop
/// ([`Proc::poll_answer`]).
pub(crate) enum Answer {
    /// The answer has not come yet (progress lines were handed over).
    Pending,
    /// The job's outcome; the worker is idle again.
    Done(JobOutcome),
    /// The worker is gone or broke the protocol: `None` for its socket's
    /// end (it died), else why its answer is unreadable. Its slot thread
    /// reaps it and reports the run ([`PythonWorker::died_running`]).
    Broken(Option<String>),
}

impl Proc {
    /// The descriptor of its socket (polled by the socket loop while the
    /// worker is lent to it).
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.stdout.get_ref().as_raw_fd()
    }

    pub(crate) fn pid(&self) -> Option<i32> {
        self.pid
    }

    /// Whether it can take a job now: not reported exited, started at the
    /// code version `now` (`--reload`).
    pub(crate) fn fit(&self, now: u64) -> bool {
        self.version == now && self.pid.is_none_or(|pid| self.server.exited(pid).is_none())
    }

    /// Whether its slot thread has work to do after this job: it ran its
    /// `max` jobs (retire it), or its spare is due ([`spare_lead`]).
    pub(crate) fn due(&self, max: u64) -> bool {
        let max = max.max(1);
        self.jobs >= max || self.jobs + spare_lead(max) == max
    }

    /// Write a whole request (one write on a socket that is idle, so it
    /// does not block for a request under the socket's buffer).
    pub(crate) fn send(&mut self, request: &[u8]) -> std::io::Result<()> {
        self.stdin.write_all(request)
    }

    /// Read what the worker wrote for `run` without blocking (its socket
    /// is non-blocking while lent): progress lines go to `progress`, a
    /// partial line waits in `line`.
    pub(crate) fn poll_answer(
        &mut self,
        run: u64,
        line: &mut Vec<u8>,
        progress: &mut dyn FnMut(u8, String),
    ) -> Answer {
        loop {
            let buf = match self.stdout.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Answer::Pending,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return Answer::Broken(None),
            };
            if buf.is_empty() {
                return Answer::Broken(None);
            }
            let (take, complete) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            line.extend_from_slice(&buf[..take]);
            self.stdout.consume(take);
            if !complete {
                continue;
            }
            let text = String::from_utf8_lossy(line).into_owned();
            line.clear();
            match classify(&text, run) {
                Line::Progress(percent, message) => progress(percent, message),
                Line::Skip => {}
                Line::Answer(Ok(outcome)) => {
                    self.jobs += 1;
                    return Answer::Done(outcome);
                }
                Line::Answer(Err(why)) => return Answer::Broken(Some(why)),
            }
        }
    }
}

/// How many jobs before a worker's retirement its spare starts: a quarter
/// of `max_job_count` (so a spare idles for at most that share of a
/// worker's life), at least 1 (its last job).
pub fn spare_lead(max_job_count: u64) -> u64 {
    (max_job_count / 4).max(1)
}

/// Which of the slot's processes a new worker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The one that runs its jobs.
    Worker,
    /// The next one, started during the worker's last job.
    Spare,
}

/// A slot's Python worker; started on first use, restarted after it dies,
/// replaced after `max_job_count` jobs by a spare started during its last
/// ones. Every worker is forked by the pool's [`ForkServer`].
pub(crate) struct PythonWorker {
    cfg: PythonConfig,
    forks: Arc<ForkServer>,
    proc: Option<Proc>,
    /// The next worker, started before `proc` retires (not greeted yet).
    spare: Option<Proc>,
    used: bool,
    /// A worker of this slot ran a job: any later wait for a worker's
    /// start is recycling's cost (counted, [`ForkServer::start_waits`]).
    had_worker: bool,
    /// The worker is lent to the socket loop ([`PythonWorker::lend`]):
    /// no other is started until it comes back.
    lent: bool,
}

fn crash(message: String) -> JobOutcome {
    JobOutcome::Error(JobError::new(ErrorKind::Crash, message))
}

/// How long to wait for a fork server's `forked` answer (it comes within
/// a millisecond from a serving server; bounded against a stuck one).
const FORK_ANSWER: Duration = Duration::from_secs(5);

/// How long a worker whose socket closed, or that was killed, may take to
/// be reported exited before its group is killed (again).
const EXIT_REPORT: Duration = Duration::from_secs(10);

impl PythonWorker {
    pub(crate) fn new(cfg: PythonConfig, forks: Arc<ForkServer>) -> PythonWorker {
        PythonWorker {
            cfg,
            forks,
            proc: None,
            spare: None,
            used: false,
            had_worker: false,
            lent: false,
        }
    }

    /// Start a worker and wait for its hello (it is then ready).
    fn spawn(&self, slot: &dyn GroupRegistry) -> Result<Proc, String> {
        let mut proc = self.launch(slot, Role::Worker)?;
        match self.greet(&mut proc, slot, Role::Worker) {
            Ok(()) => Ok(proc),
            Err(output) => Err(self.not_started(proc, slot, &output)),
        }
    }

    /// The slot's worker `proc` sent no hello (`output` instead): reap it
    /// and say so.
    fn not_started(&self, proc: Proc, slot: &dyn GroupRegistry, output: &str) -> String {
        let status = reap(proc, slot);
        format!(
            "Python worker {:?} did not start ({status}; output {output:?})",
            self.cfg.interpreter
        )
    }

    /// Ask the fork server for a worker without waiting for its hello; it
    /// is recorded as the slot's worker or its spare once its pid is known
    /// (at once when the server is serving, else at its hello).
    fn launch(&self, slot: &dyn GroupRegistry, role: Role) -> Result<Proc, String> {
        if slot.closing() {
            return Err("the job manager is shutting down".into());
        }
        let version = self.cfg.code_version.get();
        let serving = self.forks.serving();
        let Forked {
            server,
            socket,
            token,
        } = self.forks.fork()?;
        let reader = socket
            .try_clone()
            .map_err(|e| format!("Python worker socket: {e}"))?;
        let mut proc = Proc {
            server,
            token,
            stdin: socket,
            stdout: BufReader::new(reader),
            pid: None,
            jobs: 0,
            greeted: false,
            version,
        };
        if serving {
            proc.pid = proc.server.pid_of(token, FORK_ANSWER);
            if let Some(pid) = proc.pid {
                record(slot, role, Some(pid));
            }
        }
        Ok(proc)
    }

    /// Read the hello line of `proc` (once). Without one, it is killed
    /// (the caller reaps it) and what it wrote instead is the error.
    fn greet(&self, proc: &mut Proc, slot: &dyn GroupRegistry, role: Role) -> Result<(), String> {
        if proc.greeted {
            return Ok(());
        }
        // The hello line comes after SUBPROCESS_SETUP_FUNC ran.
        let mut hello = String::new();
        let hello_value = match proc.stdout.read_line(&mut hello) {
            Ok(n) if n > 0 => serde_json::from_str::<Value>(&hello)
                .ok()
                .filter(|v| v.get("hello").is_some()),
            _ => None,
        };
        let Some(hello_value) = hello_value else {
            if let Some(pid) = proc.pid {
                kill_group(pid);
            }
            return Err(hello.trim().to_string());
        };
        proc.greeted = true;
        if proc.pid.is_none() {
            proc.pid = hello_value["pid"].as_i64().map(|p| p as i32);
            record(slot, role, proc.pid);
        }
        let pid = proc.pid.unwrap_or(0);
        if let Some(e) = hello_value.get("setup_error").and_then(Value::as_str) {
            warn!(
                "Python worker pid {pid}: SUBPROCESS_SETUP_FUNC {:?} failed ({e}); it runs \
                 jobs anyway, as EventMQ does (traceback above)",
                self.cfg.setup_func.as_deref().unwrap_or("")
            );
        }
        if let Some(e) = hello_value.get("hooks_error").and_then(Value::as_str) {
            warn!("Python worker pid {pid}: {e}; its jobs fail without running");
        }
        debug!("Python worker pid {pid} started");
        Ok(())
    }

    /// The slot's worker, ready: the one running, else the spare (which
    /// takes over), else a new one. The hello of a spare is read here.
    fn ready(&mut self, slot: &dyn GroupRegistry) -> Result<&mut Proc, String> {
        self.promote_spare(slot);
        if let Some(mut spare) = self.proc.take_if(|p| !p.greeted) {
            if self.had_worker && !hello_waiting(&mut spare) {
                self.forks.note_start_wait();
            }
            match self.greet(&mut spare, slot, Role::Worker) {
                Ok(()) => self.proc = Some(spare),
                // A spare that died is not the job's fault: a new worker
                // is started for it, as for a worker found dead while idle.
                Err(output) => warn!(
                    "{}; starting another",
                    self.not_started(spare, slot, &output)
                ),
            }
        }
        if self.proc.is_none() {
            if self.had_worker {
                self.forks.note_start_wait();
            }
            self.proc = Some(self.spawn(slot)?);
        }
        self.had_worker = true;
        self.proc
            .as_mut()
            .ok_or_else(|| "no Python worker".to_string())
    }

    /// With no worker, the spare (if any) becomes the slot's worker.
    fn promote_spare(&mut self, slot: &dyn GroupRegistry) -> bool {
        if self.proc.is_some() || self.lent {
            return false;
        }
        let Some(spare) = self.spare.take() else {
            return false;
        };
        slot.set_spare_group(None);
        slot.set_worker_group(spare.pid);
        debug!(
            "spare Python worker pid {:?} takes the slot over",
            spare.pid
        );
        self.proc = Some(spare);
        true
    }

    /// Start the spare once the worker has [`spare_lead`] jobs left.
    fn prepare_spare(&mut self, slot: &dyn GroupRegistry) {
        let max = self.cfg.max_job_count.max(1);
        let near_the_end = matches!(&self.proc, Some(p) if p.jobs + spare_lead(max) >= max);
        if !near_the_end || self.spare.is_some() {
            return;
        }
        match self.launch(slot, Role::Spare) {
            Ok(p) => {
                debug!(
                    "spare Python worker pid {:?} forked for the last jobs of pid {:?}",
                    p.pid,
                    self.proc.as_ref().and_then(|w| w.pid)
                );
                self.spare = Some(p);
            }
            // The slot starts one when it needs it, as without a spare.
            Err(e) => warn!("spare Python worker: {e}"),
        }
    }

    /// Start the worker now if the configuration asks for it.
    pub(crate) fn prestart(&mut self, slot: &dyn GroupRegistry) {
        if self.cfg.prestart {
            self.used = true;
            self.ensure_started(slot);
        }
    }

    /// Start the worker if it was used before and is not running (after a
    /// crash, a kill, or its retirement; a spare takes over), without
    /// waiting for it, and its spare once it has [`spare_lead`] jobs left.
    pub(crate) fn ensure_started(&mut self, slot: &dyn GroupRegistry) {
        if !self.used {
            return;
        }
        // Its hello is read with its first job: the slot thread does not
        // wait for the fork server to start (seconds on a loaded machine)
        // before it takes a job, so a `call` or `shell` job is not held
        // behind it, and the READYs the job manager sends at once are
        // slots that can start a job now.
        if self.proc.is_none() && !self.lent && !self.promote_spare(slot) {
            match self.launch(slot, Role::Worker) {
                Ok(p) => self.proc = Some(p),
                Err(e) => warn!("{e}"),
            }
        }
        self.prepare_spare(slot);
    }

    /// Run one job; never panics.
    /// `msgid` tags the job's own output on stderr (`[msgid] line`).
    pub(crate) fn run(
        &mut self,
        run: u64,
        msgid: &str,
        job: &RunJob,
        (context, progress): (&Value, &dyn Fn(u8, String)),
        slot: &dyn GroupRegistry,
    ) -> JobOutcome {
        self.used = true;
        self.drop_if_unfit(slot);
        let proc = match self.ready(slot) {
            Ok(p) => p,
            Err(e) => {
                warn!("{e}");
                return crash(e);
            }
        };
        let line = match encode_request(run, msgid, job, context) {
            Ok(line) => line,
            Err(e) => return crash(e),
        };
        slot.set_job_group(run, proc.pid);
        let written = proc.stdin.write_all(&line);
        let mut answer = String::new();
        let read = match written {
            Ok(()) => read_answer(&mut proc.stdout, &mut answer, run, progress),
            Err(e) => Err(e),
        };
        slot.set_job_group(run, None);
        match read {
            Ok(n) if n > 0 => match parse_answer(&answer, run) {
                Ok(outcome) => {
                    proc.jobs += 1;
                    outcome
                }
                Err(why) => self.died_running(Some(why), slot),
            },
            _ => self.died_running(None, slot),
        }
    }

    /// The worker broke off a job: `why` its answer was unreadable (it is
    /// killed), or `None` when its socket ended (it died). It is reaped;
    /// the job's crash outcome.
    pub(crate) fn died_running(
        &mut self,
        why: Option<String>,
        slot: &dyn GroupRegistry,
    ) -> JobOutcome {
        let Some(p) = self.proc.take() else {
            return crash("no Python worker".into());
        };
        if let Some(why) = why {
            warn!("Python worker pid {:?}: {why}; restarting it", p.pid);
            kill_and_reap(p, slot);
            return crash(why);
        }
        let pid = p.pid.unwrap_or(0);
        let status = reap(p, slot);
        warn!("Python worker pid {pid} died running a job ({status})");
        crash(format!(
            "Python worker process died while running the job ({status})"
        ))
    }

    /// Lend the slot's worker to the socket loop, which then writes its
    /// requests and reads its answers itself (no hand-off to the slot
    /// thread per job): only a worker ready for a job now (greeted, or its
    /// hello already waiting; fit; not due for its spare or retirement),
    /// its socket made non-blocking. It comes back with [`Self::take_back`].
    pub(crate) fn lend(&mut self, slot: &dyn GroupRegistry) -> Option<Proc> {
        if self.lent {
            return None;
        }
        self.drop_if_unfit(slot);
        let max = self.cfg.max_job_count.max(1);
        let p = self.proc.as_mut()?;
        if p.jobs >= max || (p.jobs + spare_lead(max) >= max && self.spare.is_none()) {
            return None;
        }
        if !p.greeted {
            if !hello_waiting(p) {
                return None;
            }
            // A spare that took over (or a fresh worker) whose hello came.
            let mut p = self.proc.take()?;
            match self.greet(&mut p, slot, Role::Worker) {
                Ok(()) => self.proc = Some(p),
                Err(output) => {
                    warn!("{}", self.not_started(p, slot, &output));
                    return None;
                }
            }
        }
        let p = self.proc.take()?;
        if p.stdin.set_nonblocking(true).is_err() {
            self.proc = Some(p);
            return None;
        }
        self.had_worker = true;
        self.lent = true;
        Some(p)
    }

    /// The lent worker is back (blocking again).
    pub(crate) fn take_back(&mut self, p: Proc, slot: &dyn GroupRegistry) {
        self.lent = false;
        let _ = p.stdin.set_nonblocking(false);
        match self.proc {
            // Never: only one worker is lent. Not kept twice.
            Some(_) => kill_and_reap(p, slot),
            None => self.proc = Some(p),
        }
    }

    /// An idle worker that died (OOM killer, kill -9, its fork server
    /// gone) or was started before the code changed (`--reload`) goes, so
    /// that the next job is not blamed for it.
    pub(crate) fn drop_if_unfit(&mut self, slot: &dyn GroupRegistry) {
        // A dead worker's socket says so at once (the exit report may
        // still be on its way from the fork server).
        let dead = self.proc.as_mut().is_some_and(|p| {
            p.greeted && (p.pid.is_some_and(|pid| p.server.exited(pid).is_some()) || hung_up(p))
        });
        if dead {
            if let Some(p) = self.proc.take() {
                let pid = p.pid.unwrap_or(0);
                let status = reap(p, slot);
                warn!("idle Python worker pid {pid} had died ({status}); restarting it");
            }
        }
        // --reload: an idle worker (or spare) started before the code
        // changed goes.
        let now = self.cfg.code_version.get();
        if self.proc.as_ref().is_some_and(|p| p.version != now) {
            if let Some(p) = self.proc.take() {
                info!(
                    "Python worker pid {:?}: the code changed (--reload); starting a fresh one for the next job",
                    p.pid
                );
                kill_and_reap(p, slot);
            }
        }
        if self.spare.as_ref().is_some_and(|p| p.version != now) {
            self.drop_spare(slot);
        }
    }

    /// Retire the worker if it has run its `max_job_count` jobs: forget
    /// its group (its spare takes the slot over), close its socket (it
    /// exits on its own, as 0.3.13's worker leaves its loop) and hand it
    /// to its fork server, which gives it [`RETIRE_GRACE`], then kills
    /// what is left of its group and reaps it. The slot does not wait.
    pub(crate) fn retire_if_spent(&mut self, slot: &dyn GroupRegistry) {
        let max = self.cfg.max_job_count.max(1);
        let spent = matches!(&self.proc, Some(p) if p.jobs >= max);
        if !spent {
            return;
        }
        let Some(p) = self.proc.take() else { return };
        info!(
            "Python worker pid {:?} ran {} job(s) (MAX_JOB_COUNT {max}); replacing it{}",
            p.pid,
            p.jobs,
            if self.spare.is_some() {
                " with its spare"
            } else {
                ""
            }
        );
        slot.set_worker_group(None);
        let (server, pid) = p.close();
        match pid {
            Some(pid) => server.release(pid, RETIRE_GRACE),
            None => warn!("retired Python worker: its fork server never named it"),
        }
    }

    /// Kill and reap the worker and its spare (end of the slot thread).
    pub(crate) fn stop(&mut self, slot: &dyn GroupRegistry) {
        self.discard(slot);
        self.drop_spare(slot);
    }

    /// Kill and reap the spare, if any.
    fn drop_spare(&mut self, slot: &dyn GroupRegistry) {
        if let Some(p) = self.spare.take() {
            slot.set_spare_group(None);
            let (server, pid) = p.close();
            // Unreaped, so its pid (= pgid) is still ours; the server
            // kills its group again and reaps it.
            if let Some(pid) = pid {
                kill_group(pid);
                server.release(pid, Duration::ZERO);
            }
        }
    }

    /// Kill and reap the worker (after a run the pool stopped); its spare
    /// stays, to take over.
    pub(crate) fn discard(&mut self, slot: &dyn GroupRegistry) {
        if let Some(p) = self.proc.take() {
            kill_and_reap(p, slot);
        }
    }
}

/// A job request line to a worker (see the worker script's docstring).
#[derive(serde::Serialize)]
struct Request<'a> {
    id: u64,
    msgid: &'a str,
    job: &'a RunJob,
    context: &'a Value,
}

/// A job request line for a worker.
pub(crate) fn encode_request(
    run: u64,
    msgid: &str,
    job: &RunJob,
    context: &Value,
) -> Result<Vec<u8>, String> {
    // Serialized from the borrowed parts (no `Value` copy of the job).
    let request = Request {
        id: run,
        msgid,
        job,
        context,
    };
    let mut line = serde_json::to_vec(&request)
        .map_err(|e| format!("cannot encode the job for the Python worker: {e}"))?;
    line.push(b'\n');
    Ok(line)
}

/// Whether the hello of `p` can be read without waiting.
fn hello_waiting(p: &mut Proc) -> bool {
    if !p.stdout.buffer().is_empty() {
        return true;
    }
    if p.stdout.get_ref().set_nonblocking(true).is_err() {
        return false;
    }
    let ready = p.stdout.fill_buf().is_ok_and(|b| !b.is_empty());
    let _ = p.stdout.get_ref().set_nonblocking(false);
    ready
}

/// Whether the socket of the idle worker `p` is closed: it died.
fn hung_up(p: &mut Proc) -> bool {
    if !p.stdout.buffer().is_empty() || p.stdout.get_ref().set_nonblocking(true).is_err() {
        return false;
    }
    let closed = p.stdout.fill_buf().is_ok_and(|b| b.is_empty());
    let _ = p.stdout.get_ref().set_nonblocking(false);
    closed
}

/// Which of the slot's records a worker goes to.
fn record(slot: &dyn GroupRegistry, role: Role, pid: Option<i32>) {
    match role {
        Role::Worker => slot.set_worker_group(pid),
        Role::Spare => slot.set_spare_group(pid),
    }
}

/// Forget the process group (so no kill can hit a reused pid), then have
/// the server reap the worker, once it is reported exited: how it ended.
fn reap(p: Proc, slot: &dyn GroupRegistry) -> String {
    slot.set_worker_group(None);
    let (server, pid) = p.close();
    let Some(pid) = pid else {
        return match server.gone() {
            Some(why) => format!("its fork server pid {} exited: {why}", server.pid()),
            None => format!("its fork server pid {} did not fork it", server.pid()),
        };
    };
    let status = match server.wait_exited(pid, EXIT_REPORT) {
        Some(s) => s,
        None => {
            warn!("Python worker pid {pid} did not exit within {EXIT_REPORT:?}; killing it");
            kill_group(pid);
            server
                .wait_exited(pid, EXIT_REPORT)
                .unwrap_or_else(|| "no exit report".into())
        }
    };
    server.reap(pid);
    status
}

fn kill_and_reap(p: Proc, slot: &dyn GroupRegistry) {
    // The process is not reaped yet, so its pid (= pgid) is still ours.
    if let Some(pid) = p.pid {
        kill_group(pid);
    }
    reap(p, slot);
}

/// One line a worker wrote during a job.
enum Line {
    /// `{"progress": {"id", "percent", "message"}}` (`emq_job.progress`).
    Progress(u8, String),
    /// A progress line for another run, or with a percent out of 0–100:
    /// dropped.
    Skip,
    /// The answer: the outcome, or why it is unreadable.
    Answer(Result<JobOutcome, String>),
}

fn classify(line: &str, run: u64) -> Line {
    if !line.starts_with("{\"progress\"") {
        return Line::Answer(parse_answer(line, run));
    }
    let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
        return Line::Answer(parse_answer(line, run));
    };
    let p = &v["progress"];
    if p["id"].as_u64() != Some(run) {
        return Line::Skip;
    }
    match p["percent"].as_u64().filter(|p| *p <= 100) {
        Some(percent) => Line::Progress(
            percent as u8,
            p["message"].as_str().unwrap_or_default().to_string(),
        ),
        None => Line::Skip,
    }
}

/// Read the job's answer line into `answer`, handing each progress line
/// that comes before it to `progress` ([`classify`]).
fn read_answer(
    out: &mut BufReader<UnixStream>,
    answer: &mut String,
    run: u64,
    progress: &dyn Fn(u8, String),
) -> std::io::Result<usize> {
    loop {
        answer.clear();
        let n = out.read_line(answer)?;
        if n == 0 {
            return Ok(n);
        }
        match classify(answer, run) {
            Line::Progress(percent, message) => progress(percent, message),
            Line::Skip => {}
            Line::Answer(_) => return Ok(n),
        }
    }
}

fn parse_answer(line: &str, run: u64) -> Result<JobOutcome, String> {
    let mut v: Value = serde_json::from_str(line.trim())
        .map_err(|e| format!("unreadable answer from the Python worker: {e}"))?;
    let Some(obj) = v.as_object_mut() else {
        return Err("Python worker answer is not an object".into());
    };
    if obj.get("id").and_then(Value::as_u64) != Some(run) {
        return Err(format!(
            "Python worker answered for run {:?}, expected {run}",
            obj.get("id")
        ));
    }
    if let Some(e) = obj.remove("error") {
        let err: JobError = serde_json::from_value(e)
            .map_err(|e| format!("bad error object from the Python worker: {e}"))?;
        return Ok(JobOutcome::Error(err));
    }
    match obj.remove("value") {
        Some(v) => Ok(JobOutcome::Value(v)),
        None => Err("Python worker answer has neither value nor error".into()),
    }
}
