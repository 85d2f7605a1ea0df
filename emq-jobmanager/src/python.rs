//! `run` jobs: EventMQ 0.3.13 Python jobs, on one long-lived Python worker
//! process per slot.
//!
//! The worker script (`python/emq_worker.py`, embedded here) is started as
//! `PYTHON -u -c SCRIPT` in its own process group, so that a timeout or a
//! CANCEL kills it together with anything the job started (the slot then
//! starts a fresh worker). It speaks JSON lines over its
//! original stdin/stdout (see the script's docstring); the job's own prints
//! go to the job manager's stderr. `PYTHONPATH` and the working directory
//! are inherited (with `-c`, the working directory is on `sys.path`, as for
//! 0.3.13's worker).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use emqp_proto::job::{ErrorKind, JobError, JobOutcome, RunJob};
use log::{debug, warn};
use serde_json::Value;

use crate::pool::SlotShared;

/// The worker script.
pub const WORKER_SCRIPT: &str = include_str!("../python/emq_worker.py");

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
}

impl Default for PythonConfig {
    fn default() -> Self {
        PythonConfig {
            interpreter: "python3".to_string(),
            python_path: Vec::new(),
            prestart: true,
        }
    }
}

struct Proc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pid: i32,
}

/// A slot's Python worker; started on first use, restarted after it dies.
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

    fn spawn(&self, shared: &SlotShared) -> Result<Proc, String> {
        if shared.killed() {
            return Err("the job manager is shutting down".into());
        }
        let mut cmd = Command::new(&self.cfg.interpreter);
        cmd.arg("-u")
            .arg("-c")
            .arg(WORKER_SCRIPT)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0);
        crate::pool::die_with_parent(&mut cmd);
        if !self.cfg.python_path.is_empty() {
            let mut paths = self.cfg.python_path.clone();
            if let Some(existing) = std::env::var_os("PYTHONPATH") {
                paths.extend(std::env::split_paths(&existing));
            }
            if let Ok(joined) = std::env::join_paths(paths) {
                cmd.env("PYTHONPATH", joined);
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start Python worker {:?}: {e}", self.cfg.interpreter))?;
        let pid = child.id() as i32;
        shared.set_python_pgid(Some(pid));
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("Python worker has no pipes".into());
        };
        let mut proc = Proc {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            pid,
        };
        let mut hello = String::new();
        let ok = matches!(proc.stdout.read_line(&mut hello), Ok(n) if n > 0)
            && serde_json::from_str::<Value>(&hello)
                .ok()
                .and_then(|v| v.get("hello").cloned())
                .is_some();
        if !ok {
            let status = reap(proc, shared);
            return Err(format!(
                "Python worker {:?} did not start ({status}; output {:?})",
                self.cfg.interpreter,
                hello.trim()
            ));
        }
        debug!("Python worker pid {pid} started");
        Ok(proc)
    }

    /// Start the worker now if the configuration asks for it.
    pub(crate) fn prestart(&mut self, shared: &SlotShared) {
        if self.cfg.prestart {
            self.used = true;
            self.ensure_started(shared);
        }
    }

    /// Start the worker if it was used before and is not running (after a
    /// crash or a timeout kill).
    pub(crate) fn ensure_started(&mut self, shared: &SlotShared) {
        if self.used && self.proc.is_none() {
            match self.spawn(shared) {
                Ok(p) => self.proc = Some(p),
                Err(e) => warn!("{e}"),
            }
        }
    }

    /// Run one job; never panics.
    pub(crate) fn run(&mut self, run: u64, job: &RunJob, shared: &SlotShared) -> JobOutcome {
        self.used = true;
        // A worker that died while idle (OOM killer, kill -9) is replaced
        // before the job is sent, so the job is not blamed for it.
        if let Some(p) = &self.proc {
            if crate::pool::exited_no_reap(p.pid, false) {
                if let Some(p) = self.proc.take() {
                    let pid = p.pid;
                    let status = reap(p, shared);
                    warn!("idle Python worker pid {pid} had died ({status}); restarting it");
                }
            }
        }
        if self.proc.is_none() {
            match self.spawn(shared) {
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
        let request = serde_json::json!({"id": run, "job": job});
        let mut line = request.to_string();
        line.push('\n');
        shared.set_job_pgid(run, Some(proc.pid));
        let written = proc
            .stdin
            .write_all(line.as_bytes())
            .and_then(|_| proc.stdin.flush());
        let mut answer = String::new();
        let read = match written {
            Ok(()) => proc.stdout.read_line(&mut answer),
            Err(e) => Err(e),
        };
        shared.set_job_pgid(run, None);
        match read {
            Ok(n) if n > 0 => match parse_answer(&answer, run) {
                Ok(outcome) => outcome,
                Err(why) => {
                    warn!("Python worker pid {}: {why}; restarting it", proc.pid);
                    let p = self.proc.take();
                    if let Some(p) = p {
                        kill_and_reap(p, shared);
                    }
                    crash(why)
                }
            },
            _ => {
                let Some(p) = self.proc.take() else {
                    return crash("no Python worker".into());
                };
                let pid = p.pid;
                let status = reap(p, shared);
                warn!("Python worker pid {pid} died running a job ({status})");
                crash(format!(
                    "Python worker process died while running the job ({status})"
                ))
            }
        }
    }

    /// Kill and reap the worker (end of the slot thread, or after a run
    /// the pool stopped).
    pub(crate) fn stop(&mut self, shared: &SlotShared) {
        if let Some(p) = self.proc.take() {
            kill_and_reap(p, shared);
        }
    }
}

impl Drop for PythonWorker {
    fn drop(&mut self) {
        if let Some(mut p) = self.proc.take() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }
}

/// Forget the process group (so no kill can hit a reused pid), then reap.
fn reap(mut p: Proc, shared: &SlotShared) -> String {
    shared.set_python_pgid(None);
    drop(p.stdin);
    match p.child.wait() {
        Ok(s) => describe_status(s),
        Err(e) => format!("wait failed: {e}"),
    }
}

fn kill_and_reap(mut p: Proc, shared: &SlotShared) {
    // The process is not reaped yet, so its pid (= pgid) is still ours.
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(-p.pid, libc::SIGKILL);
    }
    let _ = p.child.kill();
    reap(p, shared);
}

pub(crate) fn describe_status(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "unknown status".into(),
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
