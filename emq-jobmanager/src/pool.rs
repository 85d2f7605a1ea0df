//! The execution slots: one thread per slot, fed jobs over a
//! crossbeam channel by the socket loop, reporting [`PoolEvent`]s back.
//!
//! A slot runs one job at a time, so the pool can never run more jobs than
//! it has slots. Each slot keeps its own long-lived Python worker process
//! for `run` jobs ([`crate::python`]); `shell` jobs get a fresh process
//! group ([`crate::shell`]); `call` jobs run a registered Rust handler
//! ([`crate::handlers`]).
//!
//! Cancelling (a timeout) and killing (end of the shutdown grace period)
//! kill the process group that runs the job; the slot thread then reports
//! the job finished, exactly once per [`JobStart`].

use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crossbeam_channel::{unbounded, Receiver, Sender};
use emqp_proto::job::{ErrorKind, Job, JobError, JobOutcome};
use log::{debug, warn};

use crate::connection::JobStart;
use crate::handlers::Handlers;
use crate::python::{PythonConfig, PythonWorker};

/// What the pool reports.
#[derive(Debug, Clone, PartialEq)]
pub enum PoolEvent {
    Started {
        slot: usize,
        run: u64,
    },
    Finished {
        slot: usize,
        run: u64,
        outcome: JobOutcome,
    },
}

/// Called after every event is queued (the socket loop uses it to wake its
/// poll).
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// How to build the pool.
#[derive(Clone)]
pub struct PoolConfig {
    pub concurrency: usize,
    pub python: PythonConfig,
    pub handlers: Handlers,
}

impl PoolConfig {
    pub fn new(concurrency: usize) -> PoolConfig {
        PoolConfig {
            concurrency,
            python: PythonConfig::default(),
            handlers: Handlers::default(),
        }
    }
}

/// What a slot is doing, shared between its thread and the pool owner so
/// that a cancel or kill can reach the right process group.
#[derive(Debug, Default)]
pub(crate) struct SlotState {
    /// The run in progress.
    run: Option<u64>,
    /// The run that was cancelled.
    cancelled: Option<u64>,
    /// The process group running the current job.
    job_pgid: Option<i32>,
    /// The slot's Python worker process (its own process group).
    python_pgid: Option<i32>,
    /// `kill_all` was called: the pool is being torn down; nothing new
    /// is started.
    killed: bool,
}

#[derive(Debug, Default)]
pub(crate) struct SlotShared {
    state: Mutex<SlotState>,
}

fn kill_group(pgid: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Whether child `pid` has exited, without reaping it (the zombie keeps
/// the pid and its process group ours until `Child::wait`). With `block`,
/// waits for the exit.
pub(crate) fn exited_no_reap(pid: i32, block: bool) -> bool {
    let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
        if rc == 0 {
            // With WNOHANG and no state change, si_pid stays 0.
            // SAFETY: waitid filled in the struct (or left it zeroed).
            return block || unsafe { info.si_pid() } != 0;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            // ECHILD: not our child any more (already reaped).
            _ => return true,
        }
    }
}

/// Have the child killed if the slot thread that started it goes away
/// (e.g. the job manager is SIGKILLed), so no job outlives its manager.
pub(crate) fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure only calls prctl(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            #[cfg(target_os = "linux")]
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

impl SlotShared {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record the process group that runs `run` (or `None` once it has
    /// exited, before it is reaped). If the run was cancelled before the
    /// process existed, it is killed at once.
    pub(crate) fn set_job_pgid(&self, run: u64, pgid: Option<i32>) {
        let mut s = self.lock();
        s.job_pgid = pgid;
        if let Some(p) = pgid {
            if s.cancelled == Some(run) {
                kill_group(p);
            }
        }
    }

    pub(crate) fn killed(&self) -> bool {
        self.lock().killed
    }

    /// Record the slot's Python worker; one started after `kill_all` is
    /// killed at once.
    pub(crate) fn set_python_pgid(&self, pgid: Option<i32>) {
        let mut s = self.lock();
        s.python_pgid = pgid;
        if let (Some(p), true) = (pgid, s.killed) {
            kill_group(p);
        }
    }

    pub(crate) fn python_pgid(&self) -> Option<i32> {
        self.lock().python_pgid
    }

    fn begin(&self, run: u64) {
        let mut s = self.lock();
        s.run = Some(run);
        s.cancelled = None;
        s.job_pgid = None;
    }

    /// The run is over; whether it had been cancelled.
    fn end(&self, run: u64) -> bool {
        let mut s = self.lock();
        let cancelled = s.cancelled == Some(run);
        s.run = None;
        s.cancelled = None;
        s.job_pgid = None;
        cancelled
    }

    /// Cancel `run` if it is the one in progress. True if it was.
    fn cancel(&self, run: u64) -> bool {
        let mut s = self.lock();
        if s.run != Some(run) {
            return false;
        }
        s.cancelled = Some(run);
        if let Some(p) = s.job_pgid {
            kill_group(p);
        }
        true
    }

    /// Kill whatever runs, and the idle Python worker. Returns the run that
    /// was in progress.
    fn kill_all(&self) -> Option<u64> {
        let mut s = self.lock();
        s.killed = true;
        s.cancelled = s.run;
        if let Some(p) = s.job_pgid {
            kill_group(p);
        }
        if let Some(p) = s.python_pgid {
            kill_group(p);
        }
        s.run
    }
}

struct SlotHandle {
    jobs: Option<Sender<JobStart>>,
    cancel: Sender<u64>,
    shared: Arc<SlotShared>,
    thread: Option<JoinHandle<()>>,
}

/// The slots. Dropping the pool kills every process it started.
pub struct Pool {
    slots: Vec<SlotHandle>,
    events_tx: Sender<PoolEvent>,
    events_rx: Receiver<PoolEvent>,
    waker: Option<Waker>,
}

impl Pool {
    pub fn new(cfg: PoolConfig, waker: Option<Waker>) -> std::io::Result<Pool> {
        let (events_tx, events_rx) = unbounded();
        let mut slots = Vec::with_capacity(cfg.concurrency.max(1));
        for slot in 0..cfg.concurrency.max(1) {
            let (jobs_tx, jobs_rx) = unbounded::<JobStart>();
            let (cancel_tx, cancel_rx) = unbounded::<u64>();
            let shared = Arc::new(SlotShared::default());
            let worker = SlotThread {
                slot,
                jobs: jobs_rx,
                cancel: cancel_rx,
                shared: Arc::clone(&shared),
                python: PythonWorker::new(cfg.python.clone()),
                handlers: cfg.handlers.clone(),
                events: events_tx.clone(),
                waker: waker.clone(),
            };
            let thread = std::thread::Builder::new()
                .name(format!("emq-slot-{slot}"))
                .spawn(move || worker.run())?;
            slots.push(SlotHandle {
                jobs: Some(jobs_tx),
                cancel: cancel_tx,
                shared,
                thread: Some(thread),
            });
        }
        Ok(Pool {
            slots,
            events_tx,
            events_rx,
            waker,
        })
    }

    pub fn concurrency(&self) -> usize {
        self.slots.len()
    }

    /// Queue a job on its slot. A job that cannot be queued (bad slot, dead
    /// slot thread) is reported finished with a crash at once.
    pub fn start(&self, job: JobStart) {
        let (slot, run) = (job.slot, job.run);
        let sent = match self.slots.get(slot).and_then(|s| s.jobs.as_ref()) {
            Some(tx) => tx.send(job).is_ok(),
            None => false,
        };
        if !sent {
            warn!("slot {slot} cannot take run {run}; reporting it crashed");
            let _ = self.events_tx.send(PoolEvent::Finished {
                slot,
                run,
                outcome: JobOutcome::Error(JobError::new(
                    ErrorKind::Crash,
                    "job manager slot is not running",
                )),
            });
            if let Some(w) = &self.waker {
                w();
            }
        }
    }

    /// Kill `run` on `slot` if it is still running there.
    pub fn cancel(&self, slot: usize, run: u64) {
        if let Some(s) = self.slots.get(slot) {
            if s.shared.cancel(run) {
                debug!("cancelled run {run} on slot {slot}");
            }
            let _ = s.cancel.send(run);
        }
    }

    /// Kill every running job and idle Python worker.
    pub fn kill_all(&self) {
        for s in &self.slots {
            if let Some(run) = s.shared.kill_all() {
                let _ = s.cancel.send(run);
            }
        }
    }

    pub fn events(&self) -> &Receiver<PoolEvent> {
        &self.events_rx
    }

    /// The pid of the Python worker process of `slot`, if one is running.
    pub fn python_pid(&self, slot: usize) -> Option<i32> {
        self.slots.get(slot).and_then(|s| s.shared.python_pgid())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.kill_all();
        for s in &mut self.slots {
            s.jobs.take();
        }
        for s in &mut self.slots {
            if let Some(t) = s.thread.take() {
                // A slot blocked in a Rust handler that ignores cancellation
                // would block here; handlers run on their own threads, so
                // the slot thread itself always returns.
                let _ = t.join();
            }
        }
    }
}

struct SlotThread {
    slot: usize,
    jobs: Receiver<JobStart>,
    cancel: Receiver<u64>,
    shared: Arc<SlotShared>,
    python: PythonWorker,
    handlers: Handlers,
    events: Sender<PoolEvent>,
    waker: Option<Waker>,
}

impl SlotThread {
    fn emit(&self, e: PoolEvent) {
        let _ = self.events.send(e);
        if let Some(w) = &self.waker {
            w();
        }
    }

    fn run(mut self) {
        self.python.prestart(&self.shared);
        while let Ok(js) = self.jobs.recv() {
            let run = js.run;
            self.shared.begin(run);
            while self.cancel.try_recv().is_ok() {}
            self.emit(PoolEvent::Started {
                slot: self.slot,
                run,
            });
            let outcome = match &js.job {
                _ if self.shared.killed() => JobOutcome::Error(JobError::new(
                    ErrorKind::Crash,
                    "killed: the job manager is shutting down",
                )),
                Job::Run(job) => self.python.run(run, job, &self.shared),
                Job::Shell(job) => crate::shell::run(job, run, &self.shared),
                Job::Call(job) => self.handlers.run(job, run, &self.cancel),
            };
            let cancelled = self.shared.end(run);
            let outcome = match outcome {
                JobOutcome::Error(e) if cancelled && e.kind != ErrorKind::Timeout => {
                    JobOutcome::Error(JobError::new(
                        ErrorKind::Timeout,
                        "job was cancelled (timed out) and killed",
                    ))
                }
                o => o,
            };
            self.emit(PoolEvent::Finished {
                slot: self.slot,
                run,
                outcome,
            });
            if matches!(js.job, Job::Run(_)) {
                // A worker killed by a timeout or a crash is replaced now,
                // not when the next job arrives.
                self.python.ensure_started(&self.shared);
            }
        }
        self.python.stop(&self.shared);
    }
}

#[cfg(test)]
mod tests;
