//! `run` jobs: EventMQ 0.3.13 Python jobs, on one long-lived Python worker
//! process per slot.
//!
//! The worker script (`python/emq_worker.py`, embedded here) is started as
//! `PYTHON -u -c SCRIPT HOOKS` in its own process group, so that a timeout
//! or a CANCEL kills it together with anything the job started (the slot
//! then starts a fresh worker). It speaks JSON lines over its original
//! stdin/stdout (see the script's docstring); the job's own prints go to
//! the job manager's stderr, each line tagged with the job's msgid
//! (`[MSGID] line`), and its traceback, when it raises, comes without the
//! worker script's own frames. `PYTHONPATH` and the working directory are
//! inherited (with `-c`, the working directory is on `sys.path`, as for
//! 0.3.13's worker).
//!
//! 0.3.13's worker-process settings, with its meaning (`eventmq/worker.py`):
//! - `SUBPROCESS_SETUP_FUNC` ([`PythonConfig::setup_func`]): a dotted path
//!   called with no arguments once in each worker process, before its first
//!   job (a Django project's `django.setup()`). If it raises, the traceback
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
//!   [`RETIRE_GRACE`] before its group is killed) and a fresh one started
//!   for the slot. No job is lost: the next job of the slot waits in its
//!   mailbox meanwhile, and the slot's READY went out with the REPLY.
//!
//! The runner sees its slot only through [`GroupRegistry`].

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use emqp_proto::job::{ErrorKind, JobError, JobOutcome, RunJob};
use log::{debug, info, warn};
use serde_json::Value;

use emq_process::{die_with_parent, GroupLeader};

use crate::registry::GroupRegistry;
use crate::reload::CodeVersion;

/// The worker script.
pub const WORKER_SCRIPT: &str = include_str!("../python/emq_worker.py");

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

struct Proc {
    leader: GroupLeader,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: i32,
    /// Jobs this process has answered.
    jobs: u64,
    /// The [`CodeVersion`] it was started at.
    version: u64,
}

/// A slot's Python worker; started on first use, restarted after it dies,
/// replaced after `max_job_count` jobs.
pub(crate) struct PythonWorker {
    cfg: PythonConfig,
    proc: Option<Proc>,
    used: bool,
}

fn crash(message: String) -> JobOutcome {
    JobOutcome::Error(JobError::new(ErrorKind::Crash, message))
}

impl PythonWorker {
    pub(crate) fn new(cfg: PythonConfig) -> PythonWorker {
        PythonWorker {
            cfg,
            proc: None,
            used: false,
        }
    }

    fn spawn(&self, slot: &dyn GroupRegistry) -> Result<Proc, String> {
        if slot.closing() {
            return Err("the job manager is shutting down".into());
        }
        let version = self.cfg.code_version.get();
        let mut cmd = Command::new(&self.cfg.interpreter);
        cmd.arg("-u")
            .arg("-c")
            .arg(WORKER_SCRIPT)
            .arg(self.cfg.hooks_json())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
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
        let mut leader = GroupLeader::spawn(&mut cmd)
            .map_err(|e| format!("cannot start Python worker {:?}: {e}", self.cfg.interpreter))?;
        let pid = leader.pid();
        slot.set_worker_group(Some(pid));
        let child = leader.child();
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("Python worker has no pipes".into());
        };
        let mut proc = Proc {
            leader,
            stdin,
            stdout: BufReader::new(stdout),
            pid,
            jobs: 0,
            version,
        };
        // The hello line comes after SUBPROCESS_SETUP_FUNC ran.
        let mut hello = String::new();
        let hello_value = match proc.stdout.read_line(&mut hello) {
            Ok(n) if n > 0 => serde_json::from_str::<Value>(&hello)
                .ok()
                .filter(|v| v.get("hello").is_some()),
            _ => None,
        };
        let Some(hello_value) = hello_value else {
            let status = reap(proc, slot);
            return Err(format!(
                "Python worker {:?} did not start ({status}; output {:?})",
                self.cfg.interpreter,
                hello.trim()
            ));
        };
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
        Ok(proc)
    }

    /// Start the worker now if the configuration asks for it.
    pub(crate) fn prestart(&mut self, slot: &dyn GroupRegistry) {
        if self.cfg.prestart {
            self.used = true;
            self.ensure_started(slot);
        }
    }

    /// Start the worker if it was used before and is not running (after a
    /// crash, a kill, or its retirement).
    pub(crate) fn ensure_started(&mut self, slot: &dyn GroupRegistry) {
        if self.used && self.proc.is_none() {
            match self.spawn(slot) {
                Ok(p) => self.proc = Some(p),
                Err(e) => warn!("{e}"),
            }
        }
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
        // A worker that died while idle (OOM killer, kill -9) is replaced
        // before the job is sent, so the job is not blamed for it.
        if self.proc.as_ref().is_some_and(|p| p.leader.exited()) {
            if let Some(p) = self.proc.take() {
                let pid = p.pid;
                let status = reap(p, slot);
                warn!("idle Python worker pid {pid} had died ({status}); restarting it");
            }
        }
        // --reload: an idle worker started before the code changed goes.
        if self
            .proc
            .as_ref()
            .is_some_and(|p| p.version != self.cfg.code_version.get())
        {
            if let Some(p) = self.proc.take() {
                info!(
                    "Python worker pid {}: the code changed (--reload); starting a fresh one for the next job",
                    p.pid
                );
                kill_and_reap(p, slot);
            }
        }
        if self.proc.is_none() {
            match self.spawn(slot) {
                Ok(p) => self.proc = Some(p),
                Err(e) => {
                    warn!("{e}");
                    return crash(e);
                }
            }
        }
        let Some(proc) = self.proc.as_mut() else {
            return crash("no Python worker".into());
        };
        let request =
            serde_json::json!({"id": run, "msgid": msgid, "job": job, "context": context});
        let mut line = request.to_string();
        line.push('\n');
        slot.set_job_group(run, Some(proc.pid));
        let written = proc
            .stdin
            .write_all(line.as_bytes())
            .and_then(|_| proc.stdin.flush());
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
                Err(why) => {
                    warn!("Python worker pid {}: {why}; restarting it", proc.pid);
                    if let Some(p) = self.proc.take() {
                        kill_and_reap(p, slot);
                    }
                    crash(why)
                }
            },
            _ => {
                let Some(p) = self.proc.take() else {
                    return crash("no Python worker".into());
                };
                let pid = p.pid;
                let status = reap(p, slot);
                warn!("Python worker pid {pid} died running a job ({status})");
                crash(format!(
                    "Python worker process died while running the job ({status})"
                ))
            }
        }
    }

    /// Retire the worker if it has run its `max_job_count` jobs: close its
    /// stdin (it exits on its own, as 0.3.13's worker leaves its loop),
    /// give it [`RETIRE_GRACE`], then kill what is left of its group.
    pub(crate) fn retire_if_spent(&mut self, slot: &dyn GroupRegistry) {
        let max = self.cfg.max_job_count.max(1);
        let spent = matches!(&self.proc, Some(p) if p.jobs >= max);
        if !spent {
            return;
        }
        let Some(p) = self.proc.take() else { return };
        let Proc {
            leader,
            stdin,
            stdout,
            pid,
            jobs,
            ..
        } = p;
        info!("Python worker pid {pid} ran {jobs} job(s) (MAX_JOB_COUNT {max}); replacing it");
        drop(stdin);
        let deadline = Instant::now() + RETIRE_GRACE;
        // Bounded: a job may have left a non-daemon thread that keeps the
        // interpreter from exiting.
        while !leader.exited() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if !leader.exited() {
            warn!(
                "retired Python worker pid {pid} did not exit within {RETIRE_GRACE:?}; killing it"
            );
        }
        // Whatever its jobs left running in its group goes with it.
        leader.kill();
        drop(stdout);
        slot.set_worker_group(None);
        match leader.reap() {
            Ok(s) => debug!("retired Python worker pid {pid}: {}", describe_status(s)),
            Err(e) => warn!("retired Python worker pid {pid}: wait failed: {e}"),
        }
    }

    /// Kill and reap the worker (end of the slot thread, or after a run
    /// the pool stopped).
    pub(crate) fn stop(&mut self, slot: &dyn GroupRegistry) {
        if let Some(p) = self.proc.take() {
            kill_and_reap(p, slot);
        }
    }
}

/// Forget the process group (so no kill can hit a reused pid), then reap.
fn reap(p: Proc, slot: &dyn GroupRegistry) -> String {
    slot.set_worker_group(None);
    drop(p.stdin);
    match p.leader.reap() {
        Ok(s) => describe_status(s),
        Err(e) => format!("wait failed: {e}"),
    }
}

fn kill_and_reap(p: Proc, slot: &dyn GroupRegistry) {
    // The process is not reaped yet, so its pid (= pgid) is still ours.
    p.leader.kill();
    reap(p, slot);
}

pub(crate) fn describe_status(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown status".into(),
    }
}

/// Read the job's answer line into `answer`, handing each progress line
/// that comes before it (`{"progress": {"id", "percent", "message"}}`, from
/// `emq_job.progress`) to `progress`. Lines for another run, or with a
/// percent out of 0–100, are dropped.
fn read_answer(
    out: &mut BufReader<ChildStdout>,
    answer: &mut String,
    run: u64,
    progress: &dyn Fn(u8, String),
) -> std::io::Result<usize> {
    loop {
        answer.clear();
        let n = out.read_line(answer)?;
        if n == 0 || !answer.starts_with("{\"progress\"") {
            return Ok(n);
        }
        let Ok(v) = serde_json::from_str::<Value>(answer.trim()) else {
            return Ok(n);
        };
        let p = &v["progress"];
        if p["id"].as_u64() != Some(run) {
            continue;
        }
        let percent = p["percent"].as_u64().filter(|p| *p <= 100);
        if let Some(percent) = percent {
            let message = p["message"].as_str().unwrap_or_default().to_string();
            progress(percent as u8, message);
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
