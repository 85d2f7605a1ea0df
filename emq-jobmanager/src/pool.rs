//! The execution slots: one thread per slot, fed jobs by the socket loop
//! through a mutex + condition variable mailbox (no spinning), reporting
//! [`PoolEvent`]s back over a channel and waking the loop through the
//! [`Waker`] — except for Python `run` jobs in steady state, which take
//! the lean path below, with no thread hand-off.
//!
//! **The lean path.** A slot thread whose Python worker is idle and ready
//! (greeted, fit, not due for its spare or retirement) lends it to the
//! socket loop. [`Pool::start`] then writes a `run` job's request to that
//! worker's socket itself (non-blocking: a request under
//! `LEAN_REQUEST_MAX`, to an idle socket), reports `Started`, and the loop
//! polls the lent workers' sockets ([`Pool::lean_fds`]) in its own
//! `zmq::poll`; [`Pool::lean_readable`] reads progress lines and the
//! answer and queues `Progress`/`Finished` (no wake-up: the loop drains
//! them next). The worker stays lent after its answer unless the slot
//! thread has work with it, in which case it is handed back: the pool
//! aimed a kill at it (discarded), it ran its `MAX_JOB_COUNT` jobs
//! (retired) or reached its spare's lead (spare forked), it broke off its
//! run (socket ended, or an unreadable answer: the slot thread reaps it and
//! reports the run as a crash, with its exit status), it could not be
//! written to (killed; the job goes through the slot thread, not blamed
//! for it), or it talked or died while idle. Every other job, a `run` job
//! while no worker is lent (the slot's first, or while a replacement
//! starts), and a request too big, go through the mailbox as before. A
//! slot runs one job at a time either way: the slot thread takes no job
//! from its mailbox while a lean run is in progress, and the loop lends
//! nothing while the slot has a run or a queued job. A lean run is the
//! slot's run for [`Pool::cancel`] and [`Pool::kill_all`] (its worker's
//! group is the job's group), so the rules below hold for it unchanged.
//!
//! A slot runs one job at a time, so the pool can never run more jobs than
//! it has slots. Each slot keeps its own long-lived Python worker process
//! for `run` jobs ([`crate::python`]); `shell` jobs get a fresh process
//! group ([`crate::shell`]); `call` jobs run a registered Rust handler
//! ([`crate::handlers`]) on the slot thread, or, for a handler registered
//! inline, on the caller's thread at once ([`Pool::run_inline`]).
//!
//! Cancelling ([`Pool::cancel`]: a timeout, or the router's CANCEL) and
//! killing ([`Pool::kill_all`]: end of the shutdown grace period) kill the
//! process group that runs the job; the slot thread then reports the job
//! finished, exactly once per [`JobStart`], with the outcome it saw (a
//! killed process, or its real result if it finished before the kill
//! reached it). Why a job was stopped is not the pool's business: the
//! connection core, which decided it, turns the failure of a job it
//! stopped into its `timeout` or `cancelled` REPLY. Per job kind:
//! - `shell`: the job's process group (the command and all it started).
//! - `run`: the slot's Python worker process (its own group), which the
//!   slot thread then replaces before it takes the next job. A cancelled
//!   run never keeps its worker, even if the kill arrived just after the
//!   answer was read: a worker the pool aimed a kill at is not reused.
//! - `call`: a Rust handler cannot be killed. Its run is reported at once
//!   by the pool (the handler's eventual return is discarded) and its
//!   thread is abandoned: a fresh thread takes the slot over, and the old
//!   one, still busy in the handler, reports nothing and ends when the
//!   handler returns. A fresh thread rather than keeping the slot until the
//!   handler returns, because the router has been told the job is over and
//!   gets a READY for the slot at once; a handler that never returns
//!   would otherwise hold the slot for ever. The cost: until it returns,
//!   the abandoned thread runs beyond `--concurrency` (one per stuck
//!   handler).
//! - A job still waiting in the slot's mailbox (its thread busy starting
//!   a Python worker) is taken out and reported at once, never started.
//!
//! The runners reach the slot only through [`GroupRegistry`] (in
//! [`crate::registry`]), which [`SlotShared`] implements: they never import
//! the pool.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{unbounded, Receiver, Sender};
use emqp_proto::job::{ErrorKind, Job, JobError, JobOutcome};
use log::{debug, warn};

use crate::connection::JobStart;
use crate::handlers::Handlers;
use emq_process::kill_group;

use crate::forkserver::ForkServer;
use crate::python::{encode_request, Answer, Proc, PythonConfig, PythonWorker};
use crate::registry::GroupRegistry;

/// What the pool reports.
#[derive(Debug, Clone, PartialEq)]
pub enum PoolEvent {
    /// The slot thread took the job. It does not wake the socket loop: it
    /// rides along with the next wake-up, and `at` says when it happened
    /// (a job's timeout counts from there).
    Started { slot: usize, run: u64, at: Instant },
    Finished {
        slot: usize,
        run: u64,
        outcome: JobOutcome,
    },
    /// A Python job reported its progress (`emq_job.progress`): 0–100 and
    /// a line of text (empty: none). Wakes the socket loop.
    Progress {
        slot: usize,
        run: u64,
        percent: u8,
        message: String,
    },
}

/// Called after an event that needs the socket loop is queued (every
/// `Finished`; `Started` events wait for the next wake-up). It may be
/// called from several threads at once; the socket loop's waker coalesces
/// the calls into one wake-up per batch.
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
/// that a cancel or kill can reach the right process group. It is also the
/// slot's mailbox: the socket loop queues jobs here and the slot thread
/// sleeps on the condition variable (no spinning) until one arrives.
#[derive(Debug, Default)]
pub(crate) struct SlotState {
    /// Jobs queued for the slot thread (the core queues at most one at a
    /// time; a queue keeps the pool correct for any caller).
    queue: VecDeque<JobStart>,
    /// No more jobs will be queued: the thread stops once idle.
    closed: bool,
    /// The run in progress.
    run: Option<u64>,
    /// The run the pool stopped (a cancel, or `kill_all`).
    stopped: Option<u64>,
    /// The process group running the current job.
    job_pgid: Option<i32>,
    /// The slot's Python worker process (its own process group).
    python_pgid: Option<i32>,
    /// Its spare, started before it retires (its own process group).
    spare_pgid: Option<i32>,
    /// The run in progress is a `call` handler running on the slot thread
    /// itself (its name, for the timeout message): a cancel abandons the
    /// thread instead of waiting for it.
    inline_call: Option<String>,
    /// The pool gave up on this thread (its handler ran past a cancel):
    /// the pool has reported the run finished, the thread reports nothing
    /// more and ends when the handler returns.
    abandoned: bool,
    /// `kill_all` was called: the pool is being torn down; nothing new
    /// is started.
    killed: bool,
    /// The slot's idle Python worker, lent to the socket loop (see
    /// "The lean path" in the module doc).
    lent: Option<Proc>,
    /// The run in progress is on the socket loop's lean path: the slot
    /// thread takes no job until it is over.
    lean: bool,
    /// A lent worker the socket loop gave back, and why.
    returned: Option<(Proc, Handback)>,
}

/// Why the socket loop gives a lent worker back to its slot thread.
#[derive(Debug)]
enum Handback {
    /// It answered its job (the loop reported the run); its slot thread
    /// discards it (`stopped`: the pool aimed a kill at it), retires it,
    /// or starts its spare, and lends it (or the next one) again.
    Answered { stopped: bool },
    /// It broke off `run` (its socket ended, or `why` its answer is
    /// unreadable): the slot thread reaps it and reports the run.
    Died { run: u64, why: Option<String> },
    /// It was found dead, stale (`--reload`) or talking while idle: the
    /// slot thread checks it (and replaces it).
    Idle,
    /// A request could not be written to it (it died while idle, or its
    /// socket is full): it is killed and replaced; the job goes to the
    /// slot thread.
    Unsent,
}

/// What the slot thread is given to do.
enum Work {
    /// A job, whether the pool is being torn down, and the lent worker
    /// taken back for a `run` job that came through the mailbox.
    Job(Box<JobStart>, bool, Option<Proc>),
    /// A lent worker given back.
    Back(Proc, Handback),
}

/// The failure of a run killed at the end of the shutdown grace period.
const KILLED_AT_SHUTDOWN: &str = "killed: the job manager is shutting down";

#[derive(Debug, Default)]
pub(crate) struct SlotShared {
    state: Mutex<SlotState>,
    /// Signalled when a job is queued or the mailbox is closed.
    wake: Condvar,
}

/// What [`SlotShared::cancel`] / [`SlotShared::kill_all`] found.
enum Stopped {
    /// Nothing was running (or another run was).
    Nothing,
    /// A child process group was (or will be) killed; the slot thread
    /// reports the run finished.
    Killed,
    /// An inline `call` handler was running: the thread is abandoned and
    /// the caller reports the run finished (handler name, run, queued jobs).
    Abandoned {
        handler: String,
        run: u64,
        queued: VecDeque<JobStart>,
    },
    /// The run was still queued: taken out, never started; the caller
    /// reports it finished.
    Dequeued,
}

impl GroupRegistry for SlotShared {
    /// If the run was stopped before its process existed, it is killed at
    /// once.
    fn set_job_group(&self, run: u64, pgid: Option<i32>) {
        let mut s = self.lock();
        s.job_pgid = pgid;
        if let Some(p) = pgid {
            if s.stopped == Some(run) {
                kill_group(p);
            }
        }
    }

    /// The slot's Python worker; one started after `kill_all` (or by an
    /// abandoned thread) is killed at once.
    fn set_worker_group(&self, pgid: Option<i32>) {
        let mut s = self.lock();
        s.python_pgid = pgid;
        if let (Some(p), true) = (pgid, s.killed || s.abandoned) {
            kill_group(p);
        }
    }

    /// The spare worker; one started after `kill_all` (or by an
    /// abandoned thread) is killed at once.
    fn set_spare_group(&self, pgid: Option<i32>) {
        let mut s = self.lock();
        s.spare_pgid = pgid;
        if let (Some(p), true) = (pgid, s.killed || s.abandoned) {
            kill_group(p);
        }
    }

    fn closing(&self) -> bool {
        self.lock().killed
    }
}

impl SlotState {
    /// Nothing runs or waits on the slot and the pool is not closing: a
    /// worker may be lent to the socket loop, and a `run` job may take it.
    fn lendable(&self) -> bool {
        self.queue.is_empty()
            && self.run.is_none()
            && !(self.killed || self.closed || self.abandoned)
    }

    /// Run `run` is over (on the slot thread or the lean path): whether
    /// the pool had aimed a kill at it.
    fn end_run(&mut self, run: u64) -> bool {
        let stopped = self.stopped == Some(run);
        self.run = None;
        self.stopped = None;
        self.job_pgid = None;
        self.inline_call = None;
        self.lean = false;
        stopped
    }
}

impl SlotShared {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn python_pgid(&self) -> Option<i32> {
        self.lock().python_pgid
    }

    fn spare_pgid(&self) -> Option<i32> {
        self.lock().spare_pgid
    }

    /// Queue a job; false (the job dropped) if the mailbox is closed.
    fn push(&self, job: JobStart) -> bool {
        let mut s = self.lock();
        if s.closed || s.abandoned {
            return false;
        }
        s.queue.push_back(job);
        drop(s);
        self.wake.notify_one();
        true
    }

    fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
    }

    /// Wait for the next job and mark it in progress (under the same lock
    /// as `kill_all`, so a kill either sees the run or the run sees it).
    /// With it, whether the pool is being torn down (fail the job); `None`
    /// once the mailbox is closed and empty.
    fn next(&self) -> Option<Work> {
        let mut s = self.lock();
        loop {
            if let Some((p, why)) = s.returned.take() {
                return Some(Work::Back(p, why));
            }
            if s.lean && !s.closed {
                s = self.wake.wait(s).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            if let Some(js) = s.queue.pop_front() {
                s.run = Some(js.run);
                s.stopped = None;
                s.job_pgid = None;
                s.inline_call = match &js.job {
                    Job::Call(c) if !s.killed => Some(c.handler.clone()),
                    _ => None,
                };
                let killed = s.killed;
                let lent = match js.job {
                    Job::Run(_) => s.lent.take(),
                    _ => None,
                };
                return Some(Work::Job(Box::new(js), killed, lent));
            }
            if s.closed || s.abandoned {
                return None;
            }
            s = self.wake.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The run is over: `None` if the thread was abandoned meanwhile (the
    /// pool reported the run; the thread must report nothing and end),
    /// else whether the pool stopped the run.
    fn end(&self, run: u64) -> Option<bool> {
        let mut s = self.lock();
        if s.abandoned {
            return None;
        }
        Some(s.end_run(run))
    }

    /// Lend the slot's idle worker to the socket loop: refused (given
    /// back) while a job waits in the mailbox or the pool is closing.
    fn park(&self, p: Proc) -> Option<Proc> {
        let mut s = self.lock();
        if !s.lendable() {
            return Some(p);
        }
        s.lent = Some(p);
        None
    }

    /// Give the slot thread a lent worker back (`s` is this slot's state,
    /// locked; released here) and wake it.
    fn hand_back(&self, mut s: MutexGuard<'_, SlotState>, p: Proc, why: Handback) {
        s.returned = Some((p, why));
        drop(s);
        self.wake.notify_one();
    }

    /// Give up on the thread running an inline handler.
    fn abandon(s: &mut SlotState, run: u64) -> Stopped {
        s.abandoned = true;
        s.stopped = Some(run);
        // The abandoned thread's idle Python worker (and its spare) go
        // now, not when the handler returns.
        for p in [s.python_pgid, s.spare_pgid].into_iter().flatten() {
            kill_group(p);
        }
        Stopped::Abandoned {
            handler: s.inline_call.clone().unwrap_or_default(),
            run,
            queued: std::mem::take(&mut s.queue),
        }
    }

    /// Cancel `run` if it is the one in progress, or take it out of the
    /// mailbox if it has not started.
    fn cancel(&self, run: u64) -> Stopped {
        let mut s = self.lock();
        if s.abandoned {
            return Stopped::Nothing;
        }
        if s.run != Some(run) {
            return match s.queue.iter().position(|js| js.run == run) {
                Some(i) => {
                    s.queue.remove(i);
                    Stopped::Dequeued
                }
                None => Stopped::Nothing,
            };
        }
        if s.inline_call.is_some() {
            return SlotShared::abandon(&mut s, run);
        }
        s.stopped = Some(run);
        if let Some(p) = s.job_pgid {
            kill_group(p);
        }
        Stopped::Killed
    }

    /// Kill whatever runs, and the idle Python worker.
    fn kill_all(&self) -> Stopped {
        let mut s = self.lock();
        s.killed = true;
        for p in [s.python_pgid, s.spare_pgid].into_iter().flatten() {
            kill_group(p);
        }
        let Some(run) = s.run.filter(|_| !s.abandoned) else {
            return Stopped::Nothing;
        };
        if s.inline_call.is_some() {
            return SlotShared::abandon(&mut s, run);
        }
        s.stopped = Some(run);
        if let Some(p) = s.job_pgid {
            kill_group(p);
        }
        Stopped::Killed
    }
}

struct SlotHandle {
    shared: Arc<SlotShared>,
    thread: Option<JoinHandle<()>>,
}

/// What every slot thread needs, kept to start replacement threads.
struct SlotEnv {
    python: PythonConfig,
    /// The fork server every slot's Python workers come from.
    forks: Arc<ForkServer>,
    handlers: Handlers,
    events: Sender<PoolEvent>,
    waker: Option<Waker>,
}

impl SlotEnv {
    fn wake(&self) {
        if let Some(w) = &self.waker {
            w();
        }
    }

    fn emit(&self, e: PoolEvent) {
        let _ = self.events.send(e);
        self.wake();
    }

    /// Start the thread of `slot`. A replacement thread (`prestart`
    /// false) takes jobs at once; its Python worker starts with the first
    /// `run` job.
    fn spawn(&self, slot: usize, prestart: bool) -> std::io::Result<SlotHandle> {
        let shared = Arc::new(SlotShared::default());
        let mut python = self.python.clone();
        python.prestart &= prestart;
        let worker = SlotThread {
            slot,
            shared: Arc::clone(&shared),
            python: PythonWorker::new(python, Arc::clone(&self.forks)),
            handlers: self.handlers.clone(),
            events: self.events.clone(),
            waker: self.waker.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("emq-slot-{slot}"))
            .spawn(move || worker.run())?;
        Ok(SlotHandle {
            shared,
            thread: Some(thread),
        })
    }
}

/// The slots. Dropping the pool kills every process it started.
pub struct Pool {
    /// Behind a mutex so that a cancel can replace an abandoned slot
    /// thread through `&self` (only the socket loop uses the pool, so the
    /// locks are never contended).
    slots: Vec<Mutex<SlotHandle>>,
    env: SlotEnv,
    events_rx: Receiver<PoolEvent>,
    /// The runs on the lean path, by slot: the worker lent to the socket
    /// loop, its run, and the part of a line read so far.
    lean: Mutex<Vec<Option<LeanRun>>>,
    /// Runs started on the lean path (for tests and measurements).
    lean_starts: std::sync::atomic::AtomicU64,
}

struct LeanRun {
    run: u64,
    proc: Proc,
    line: Vec<u8>,
}

/// The largest request sent on the lean path: a bigger one goes through
/// the slot thread, whose blocking write may wait for the worker to read.
const LEAN_REQUEST_MAX: usize = 64 * 1024;

fn lock_handle(m: &Mutex<SlotHandle>) -> MutexGuard<'_, SlotHandle> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    pub fn new(cfg: PoolConfig, waker: Option<Waker>) -> std::io::Result<Pool> {
        let (events_tx, events_rx) = unbounded();
        let forks = cfg.python.fork_server();
        if cfg.python.prestart {
            if let Err(e) = forks.start() {
                warn!("{e}");
            }
        }
        let env = SlotEnv {
            forks,
            python: cfg.python,
            handlers: cfg.handlers,
            events: events_tx,
            waker,
        };
        let mut slots = Vec::with_capacity(cfg.concurrency.max(1));
        for slot in 0..cfg.concurrency.max(1) {
            slots.push(Mutex::new(env.spawn(slot, true)?));
        }
        let lean = Mutex::new((0..slots.len()).map(|_| None).collect());
        Ok(Pool {
            slots,
            env,
            events_rx,
            lean,
            lean_starts: Default::default(),
        })
    }

    pub fn concurrency(&self) -> usize {
        self.slots.len()
    }

    /// Run `job` at once on the caller's thread if it is a `call` job
    /// whose handler is registered inline ([`Handlers::register_inline`]):
    /// its outcome. `None` for every other job, which goes to
    /// [`Pool::start`]. No [`PoolEvent`] is emitted for an inline run: the
    /// caller has the outcome in hand.
    pub fn run_inline(&self, job: &mut JobStart) -> Option<JobOutcome> {
        let Job::Call(call) = &mut job.job else {
            return None;
        };
        self.env.handlers.call_inline(&call.handler, &mut call.args)
    }

    /// Queue a job on its slot. A job that cannot be queued (bad slot, dead
    /// slot thread) is reported finished with a crash at once.
    pub fn start(&self, job: JobStart) {
        let Some(job) = self.start_lean(job) else {
            return;
        };
        let (slot, run) = (job.slot, job.run);
        let sent = match self.slots.get(slot) {
            Some(h) => lock_handle(h).shared.push(job),
            None => false,
        };
        if !sent {
            warn!("slot {slot} cannot take run {run}; reporting it crashed");
            self.crashed(slot, run, "job manager slot is not running");
        }
    }

    /// Stop `run` on `slot` (the core timed it out, or the router
    /// cancelled it) if it is still running or queued there; it is reported
    /// finished, as a failure unless it succeeded before the kill reached
    /// it. A child process is killed and the slot thread reports the run (a
    /// Python worker is replaced); a queued run is taken out and reported
    /// at once; a `call` handler (a Rust function, which cannot be killed)
    /// is reported at once and its thread abandoned: a fresh thread takes
    /// over the slot, the old one ends, reporting nothing, when the handler
    /// returns (see the module docs). A run that already finished is left
    /// alone.
    pub fn cancel(&self, slot: usize, run: u64) {
        let Some(h) = self.slots.get(slot) else {
            return;
        };
        let mut h = lock_handle(h);
        match h.shared.cancel(run) {
            Stopped::Nothing => {}
            Stopped::Killed => debug!("stopping run {run} on slot {slot}"),
            Stopped::Dequeued => {
                debug!("run {run} on slot {slot} stopped before it started");
                self.env.emit(PoolEvent::Finished {
                    slot,
                    run,
                    outcome: JobOutcome::Error(JobError::new(
                        ErrorKind::Crash,
                        "stopped by the job manager before it started",
                    )),
                });
            }
            Stopped::Abandoned {
                handler,
                run,
                queued,
            } => {
                warn!(
                    "handler {handler:?} (run {run}, slot {slot}) was stopped and cannot be \
                     interrupted; abandoning its thread (it stays busy until the handler \
                     returns, its result is discarded)"
                );
                // Detach the old thread; it ends when the handler returns.
                h.thread.take();
                match self.env.spawn(slot, false) {
                    Ok(fresh) => {
                        *h = fresh;
                        for js in queued {
                            let (slot, run) = (js.slot, js.run);
                            if !h.shared.push(js) {
                                self.crashed(slot, run, "job manager slot is not running");
                            }
                        }
                    }
                    Err(e) => {
                        warn!("cannot start a new thread for slot {slot}: {e}");
                        for js in queued {
                            self.crashed(js.slot, js.run, "job manager slot is not running");
                        }
                    }
                }
                // The core replaces this with why it stopped the run.
                let error = JobError::new(
                    ErrorKind::Crash,
                    format!("handler {handler:?} was stopped (left running in the background)"),
                );
                self.env.emit(PoolEvent::Finished {
                    slot,
                    run,
                    outcome: JobOutcome::Error(error),
                });
            }
        }
    }

    /// The lean path: a `run` job for a slot that is idle with a worker
    /// lent to the socket loop is written to that worker's socket here,
    /// on the caller's thread; `Some(job)` back for the slot thread.
    fn start_lean(&self, job: JobStart) -> Option<JobStart> {
        let Job::Run(rj) = &job.job else {
            return Some(job);
        };
        let (slot, run) = (job.slot, job.run);
        let Some(h) = self.slots.get(slot) else {
            return Some(job);
        };
        let shared = Arc::clone(&lock_handle(h).shared);
        let mut s = shared.lock();
        if !s.lendable() {
            return Some(job);
        }
        let Some(mut proc) = s.lent.take() else {
            return Some(job);
        };
        if !proc.fit(self.env.python.code_version.get()) {
            shared.hand_back(s, proc, Handback::Idle);
            return Some(job);
        }
        let request = match encode_request(run, &job.msgid, rj, &job_context(&job)) {
            Ok(r) if r.len() <= LEAN_REQUEST_MAX => r,
            // The slot thread sends it (or reports why it cannot).
            _ => {
                s.lent = Some(proc);
                return Some(job);
            }
        };
        if let Err(e) = proc.send(&request) {
            // Its socket is closed (it died while idle, and the loop has
            // not seen it yet) or full: it goes, and the job is not blamed
            // for it: the slot thread runs it on a fresh worker.
            debug!("run {run} on slot {slot}: its idle Python worker cannot take it ({e})");
            shared.hand_back(s, proc, Handback::Unsent);
            return Some(job);
        }
        s.run = Some(run);
        s.stopped = None;
        s.job_pgid = proc.pid();
        s.lean = true;
        drop(s);
        let _ = self.env.events.send(PoolEvent::Started {
            slot,
            run,
            at: Instant::now(),
        });
        self.lean_starts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lean_runs()[slot] = Some(LeanRun {
            run,
            proc,
            line: Vec::new(),
        });
        None
    }

    fn lean_runs(&self) -> MutexGuard<'_, Vec<Option<LeanRun>>> {
        self.lean.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sockets of the workers lent to the socket loop, by slot: to
    /// poll for reading, then [`Pool::lean_readable`].
    pub fn lean_fds(&self, out: &mut Vec<(usize, std::os::fd::RawFd)>) {
        out.clear();
        let runs = self.lean_runs();
        for (slot, h) in self.slots.iter().enumerate() {
            if let Some(r) = &runs[slot] {
                out.push((slot, r.proc.raw_fd()));
            } else if let Some(p) = &lock_handle(h).shared.lock().lent {
                out.push((slot, p.raw_fd()));
            }
        }
    }

    /// The socket of the worker lent to the socket loop for `slot` is
    /// readable: progress and the answer of its run are reported (queued
    /// for [`Pool::events`], no wake-up: the caller drains them next); a
    /// worker that broke off its run, or talks while idle, goes back to
    /// the slot thread.
    pub fn lean_readable(&self, slot: usize) {
        let Some(h) = self.slots.get(slot) else {
            return;
        };
        let shared = Arc::clone(&lock_handle(h).shared);
        let mut runs = self.lean_runs();
        let Some(r) = runs.get_mut(slot).and_then(Option::as_mut) else {
            drop(runs);
            // An idle lent worker: its socket ended (it died), or a line
            // came out of turn (a late progress report of its last run:
            // dropped, as between jobs on the slot thread).
            let mut s = shared.lock();
            let Some(p) = s.lent.as_mut() else {
                return;
            };
            let mut line = Vec::new();
            if matches!(p.poll_answer(0, &mut line, &mut |_, _| {}), Answer::Pending) {
                return;
            }
            if let Some(p) = s.lent.take() {
                shared.hand_back(s, p, Handback::Idle);
            }
            return;
        };
        let run = r.run;
        let events = &self.env.events;
        let mut progress = |percent: u8, message: String| {
            let _ = events.send(PoolEvent::Progress {
                slot,
                run,
                percent,
                message,
            });
        };
        let answer = r.proc.poll_answer(run, &mut r.line, &mut progress);
        if matches!(answer, Answer::Pending) {
            return;
        }
        let Some(LeanRun { proc, .. }) = runs[slot].take() else {
            return;
        };
        drop(runs);
        let mut s = shared.lock();
        match answer {
            Answer::Pending => {}
            Answer::Done(outcome) => {
                let stopped = s.end_run(run);
                let max = self.env.python.max_job_count;
                if stopped || proc.due(max) || s.killed || s.closed || s.abandoned {
                    // After `kill_all` its worker was killed too.
                    let stopped = stopped || s.killed;
                    shared.hand_back(s, proc, Handback::Answered { stopped });
                } else {
                    s.lent = Some(proc);
                    drop(s);
                }
                let _ = events.send(PoolEvent::Finished { slot, run, outcome });
            }
            Answer::Broken(why) => {
                // The slot thread reaps it and reports the run.
                shared.hand_back(s, proc, Handback::Died { run, why });
            }
        }
    }

    fn crashed(&self, slot: usize, run: u64, why: &str) {
        self.env.emit(PoolEvent::Finished {
            slot,
            run,
            outcome: JobOutcome::Error(JobError::new(ErrorKind::Crash, why)),
        });
    }

    /// Kill every running job and idle Python worker.
    pub fn kill_all(&self) {
        for (slot, h) in self.slots.iter().enumerate() {
            let mut h = lock_handle(h);
            if let Stopped::Abandoned {
                handler,
                run,
                queued,
            } = h.shared.kill_all()
            {
                warn!("handler {handler:?} (run {run}, slot {slot}) still running at kill; abandoning its thread");
                h.thread.take();
                for js in queued {
                    self.crashed(js.slot, js.run, KILLED_AT_SHUTDOWN);
                }
                self.crashed(slot, run, KILLED_AT_SHUTDOWN);
            }
        }
    }

    pub fn events(&self) -> &Receiver<PoolEvent> {
        &self.events_rx
    }

    /// The pid of the Python worker process of `slot`, if one is running.
    pub fn python_pid(&self, slot: usize) -> Option<i32> {
        self.slots
            .get(slot)
            .and_then(|h| lock_handle(h).shared.python_pgid())
    }

    /// How many `run` jobs were started on the lean path (written to a
    /// worker lent to the socket loop) so far.
    pub fn lean_starts(&self) -> u64 {
        self.lean_starts.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the Python worker of `slot` is idle and lent to the socket
    /// loop: its next `run` job takes the lean path.
    pub fn python_lent(&self, slot: usize) -> bool {
        self.slots
            .get(slot)
            .is_some_and(|h| lock_handle(h).shared.lock().lent.is_some())
    }

    /// The pid of the Python fork server, if one is running.
    pub fn fork_server_pid(&self) -> Option<i32> {
        self.env.forks.pid()
    }

    /// How many times a slot that had a Python worker had to wait for a
    /// fresh one to start (after a retirement, a crash or a cancel: the
    /// spare, or the replacement, was not ready when the next job came).
    pub fn python_start_waits(&self) -> u64 {
        self.env.forks.start_waits()
    }

    /// The pid of the spare Python worker of `slot` (started before its
    /// worker retires), if there is one.
    pub fn python_spare_pid(&self, slot: usize) -> Option<i32> {
        self.slots
            .get(slot)
            .and_then(|h| lock_handle(h).shared.spare_pgid())
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.kill_all();
        for h in &self.slots {
            lock_handle(h).shared.close();
        }
        for h in &self.slots {
            // Threads stuck in a Rust handler were abandoned (detached) by
            // `kill_all`; every other slot thread returns promptly.
            if let Some(t) = lock_handle(h).thread.take() {
                let _ = t.join();
            }
        }
    }
}

struct SlotThread {
    slot: usize,
    shared: Arc<SlotShared>,
    python: PythonWorker,
    handlers: Handlers,
    events: Sender<PoolEvent>,
    waker: Option<Waker>,
}

impl SlotThread {
    fn emit(&self, e: PoolEvent, wake: bool) {
        let _ = self.events.send(e);
        if wake {
            if let Some(w) = &self.waker {
                w();
            }
        }
    }

    /// Run `run` of this slot is over (reported once per run, waking the
    /// socket loop).
    fn finished(&self, run: u64, outcome: JobOutcome) {
        self.emit(
            PoolEvent::Finished {
                slot: self.slot,
                run,
                outcome,
            },
            true,
        );
    }

    /// Lend the idle worker to the socket loop, if it is ready.
    fn offer(&mut self) {
        if let Some(p) = self.python.lend(&*self.shared) {
            if let Some(p) = self.shared.park(p) {
                self.python.take_back(p, &*self.shared);
            }
        }
    }

    /// A lent worker is back: what its job (or its death) leaves to do.
    /// `false`: the thread was abandoned.
    fn back(&mut self, p: Proc, why: Handback) -> bool {
        let shared = &*self.shared;
        self.python.take_back(p, shared);
        match why {
            Handback::Answered { stopped: true } | Handback::Unsent => self.python.discard(shared),
            Handback::Answered { stopped: false } => self.python.retire_if_spent(shared),
            Handback::Idle => self.python.drop_if_unfit(shared),
            Handback::Died { run, why } => {
                let outcome = self.python.died_running(why, shared);
                if self.shared.end(run).is_none() {
                    return false;
                }
                self.finished(run, outcome);
            }
        }
        self.python.ensure_started(shared);
        true
    }

    fn run(mut self) {
        self.python.prestart(&*self.shared);
        loop {
            self.offer();
            let (mut js, killed) = match self.shared.next() {
                None => break,
                Some(Work::Back(p, why)) => {
                    if !self.back(p, why) {
                        break;
                    }
                    continue;
                }
                Some(Work::Job(js, killed, lent)) => {
                    if let Some(p) = lent {
                        self.python.take_back(p, &*self.shared);
                    }
                    (*js, killed)
                }
            };
            let run = js.run;
            // No wake-up: the event carries its instant, so the core
            // counts a timeout from the real start whenever it reads it.
            self.emit(
                PoolEvent::Started {
                    slot: self.slot,
                    run,
                    at: Instant::now(),
                },
                false,
            );
            let context = job_context(&js);
            let outcome = match &mut js.job {
                _ if killed => {
                    JobOutcome::Error(JobError::new(ErrorKind::Crash, KILLED_AT_SHUTDOWN))
                }
                Job::Run(job) => {
                    let (slot, events, waker) = (self.slot, &self.events, &self.waker);
                    let report = |percent: u8, message: String| {
                        let _ = events.send(PoolEvent::Progress {
                            slot,
                            run,
                            percent,
                            message,
                        });
                        if let Some(w) = waker {
                            w();
                        }
                    };
                    self.python
                        .run(run, &js.msgid, job, (&context, &report), &*self.shared)
                }
                Job::Shell(job) => crate::shell::run(job, run, &*self.shared),
                // Inline: no thread start or hand-off per job.
                Job::Call(job) => self
                    .handlers
                    .call(&job.handler, std::mem::take(&mut job.args)),
            };
            let Some(stopped) = self.shared.end(run) else {
                debug!("abandoned slot thread of run {run} ends; its result is discarded");
                break;
            };
            // The outcome as the slot saw it, even for a run the pool
            // stopped: the core knows why it stopped it and says so.
            self.finished(run, outcome);
            if matches!(js.job, Job::Run(_)) {
                if stopped {
                    // The kill may have landed after the answer was read:
                    // a worker the pool aimed a kill at is never reused
                    // (its spare, a fresh process, is).
                    self.python.discard(&*self.shared);
                } else {
                    // A worker that ran its MAX_JOB_COUNT jobs goes now,
                    // between jobs (the REPLY above is already out).
                    self.python.retire_if_spent(&*self.shared);
                }
                // A worker killed by a cancel, a timeout or a crash, or
                // retired, is replaced now, not when the next job arrives.
                self.python.ensure_started(&*self.shared);
            }
        }
        let (lent, returned) = {
            let mut s = self.shared.lock();
            (s.lent.take(), s.returned.take())
        };
        for p in lent.into_iter().chain(returned.map(|(p, _)| p)) {
            self.python.take_back(p, &*self.shared);
            self.python.discard(&*self.shared);
        }
        self.python.stop(&*self.shared);
    }
}

/// What a Python job is told of its delivery (`emq_job.current()`, and
/// the trace context its spans nest under).
fn job_context(js: &JobStart) -> serde_json::Value {
    serde_json::json!({
        "msgid": js.msgid,
        "queue": js.context.queue,
        "headers": js.context.headers,
        "attempt": js.context.attempt,
        "traceparent": js.context.traceparent.map(|t| t.to_string()),
    })
}

#[cfg(test)]
mod tests;
