//! The routing state machine.
//!
//! # Call order
//!
//! A [`Router`] has four kinds of methods, as quinn-proto's `Connection`:
//!
//! - **input**: [`Router::handle`] takes one [`Input`] — frames read off
//!   a socket, a failed send, a journal batch's outcome, a shutdown
//!   request — at time `now`;
//! - **timers**: [`Router::poll_timeout`] gives the next deadline
//!   (heartbeat, liveness sweep, retry delay, schedule, group commit,
//!   journal retry, drain); when it is reached the driver calls
//!   [`Router::handle_timeout`]. The driver sleeps until that deadline or
//!   the next input, never on a fixed tick;
//! - **output**: both push [`Action`]s into the caller's buffer, in the
//!   order they must be carried out. A [`Action::Journal`] batch must be
//!   appended to the store and its outcome fed back with
//!   [`Input::JournalDone`] (in batch order); a failed
//!   [`Action::Send`] is fed back as [`Input::SendFailed`], and once the
//!   sends handed out are carried out (failures reported), the driver
//!   says so with [`Input::Flushed`] (as quinn-proto's "transmits
//!   done");
//! - **getters**: counts, [`Router::snapshot`] (the read model that admin
//!   STATUS and `/metrics` are rendered from), [`Router::check_invariants`].
//!
//! A driver's loop: read what the sockets have and `handle` each message;
//! if `poll_timeout() <= now`, `handle_timeout(now)`; carry out the
//! actions (feeding failures back, then [`Input::Flushed`], and journal
//! outcomes, which may add actions); stop after [`Action::Exit`]; sleep
//! until `poll_timeout()` or input. The core takes a RESULT handed out
//! as delivered at [`Input::Flushed`] unless a failure for its client
//! came before (`results.rs`). Time is a [`Duration`] since the driver's start (the same type as
//! the job manager's connection core); the core reads no clock and draws
//! no random numbers (msgids come from `Config::id_seed`).
//!
//! # Where each rule lives
//!
//! - `intake.rs`: decoding, REQUEST, the one `accept` path shared by
//!   REQUESTs, schedule runs and restored jobs, REJECTs;
//! - `peers.rs`: worker and scheduler registration, READY, heartbeats and
//!   liveness, send failures, redelivery of a removed worker's jobs;
//! - `dispatch.rs`: handing buffered jobs to free slots;
//! - `flow.rs`: flow control (per-key concurrency and rate limits,
//!   fairness, priorities; the data is `crate::flow`);
//! - `completion.rs`: REPLYs, retries, dead letters, RESULTs;
//! - `results.rs`: results held until delivered (receipts, re-sends to
//!   clients that come back, bounds);
//! - `schedules.rs`: SCHEDULE / UNSCHEDULE and the built-in book;
//! - `unique.rs`: unique jobs (`unique-key`, `unique-for`, `on-conflict`);
//! - `workflow.rs`: workflows (`WORKFLOW`: DAGs of jobs, results passed
//!   from parents to children, failure, cancel, restore);
//! - `batch.rs`: batches with callbacks (`BATCH`, the `batch:ID` header:
//!   counts, `on_success` / `on_complete` run once, restore);
//! - `control.rs`: the control plane (ADMIN ops: lookups, cancel, dead
//!   letters, pause, purge, drain);
//! - `durability.rs`: the journal rule (batches, held sends, failures);
//! - `acks.rs`: acknowledgements of one round to one client in one ACKS
//!   (clients that send the `batched-acks` header);
//! - `drain.rs`: orderly shutdown;
//! - `snapshot.rs`: [`Router::snapshot`], the read model copied out (its
//!   types, and the data the router keeps for it, are `crate::snapshot`
//!   and `crate::data`, which import nothing of this module);
//! - `timers.rs`: the timer table (which deadline sources there are, and
//!   in which order the due ones fire);
//! - `progress.rs`: the last progress of each running job (PROGRESS);
//! - `traces.rs`: the span of a job's queue wait and the `traceparent`
//!   forwarded to its worker;
//! - `invariants.rs`: the bookkeeping checks the tests run after every input.

use std::time::Duration;

mod acks;
pub(crate) mod batch;
mod completion;
mod control;
mod dispatch;
mod drain;
mod durability;
mod flow;
mod intake;
mod invariants;
mod peers;
#[cfg(test)]
pub(crate) use durability::LOADED_BATCH;
#[cfg(test)]
pub(crate) use peers::MAX_REPLY_CREDIT;
pub(crate) mod progress;
pub(crate) mod results;
mod schedules;
mod snapshot;
pub(crate) mod timers;
pub(crate) mod traces;
mod unique;
pub(crate) mod workflow;

use std::collections::VecDeque;

use emqp_proto::{Command, Message, MsgIds};

use crate::config::Config;
use crate::data::{DeadLetter, JournalState, Stats};
use crate::event::{Action, Frames, Input, Socket};
use crate::finished::Finished;
use crate::jobs::{JobId, JobStore};
use crate::journal::Restored;
use crate::util::{micros, FastSet, GoneLog, LogLimiter};
use crate::workers::WorkerPool;

pub use control::admin_request;
pub(crate) use durability::Durability;
pub use flow::PRIORITY_AGING;

/// A registered scheduler (a 0.3.13 `emq-scheduler` on the frontend).
#[derive(Debug, Clone)]
pub struct Scheduler {
    pub identity: Vec<u8>,
    pub last_seen: Duration,
}

/// What [`Router::restore`] put back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RestoreCounts {
    pub jobs: usize,
    pub dead_letters: usize,
    pub schedules: usize,
    pub paused_queues: usize,
    pub finished: usize,
    /// Results not yet delivered.
    pub results: usize,
    /// Flow-control policies.
    pub policies: usize,
    /// Unique-key windows still open.
    pub unique_windows: usize,
    /// Unfinished workflows.
    pub workflows: usize,
    /// Unfinished batches.
    pub batches: usize,
}

/// The router core. See the module documentation for the call order.
#[derive(Debug)]
pub struct Router {
    pub(crate) cfg: Config,
    pub(crate) pool: WorkerPool,
    pub(crate) store: JobStore,
    pub(crate) schedulers: Vec<Scheduler>,
    pub(crate) stats: Stats,
    pub(crate) dead: VecDeque<DeadLetter>,
    /// Dead letters loaded from the journal at start.
    pub(crate) restored_dead: u64,
    /// Built-in schedules (SCHEDULE with no external scheduler connected).
    pub(crate) book: emq_schedule::ScheduleBook,
    pub(crate) journal: Durability,
    /// Paused queues: they buffer, nothing is dispatched from them.
    pub(crate) paused: FastSet<String>,
    /// Finished jobs kept for lookups.
    pub(crate) finished: Finished,
    /// Results held until delivered.
    pub(crate) results: results::Results,
    /// Unique keys held (`unique.rs`).
    pub(crate) unique: unique::UniqueKeys,
    /// Workflows (`workflow.rs`).
    pub(crate) workflows: workflow::Workflows,
    /// Batches (`batch.rs`).
    pub(crate) batches: batch::Batches,
    next_heartbeat: Duration,
    drain_deadline: Option<Duration>,
    exited: bool,
    ids: MsgIds,
    /// Take-back keys issued so far (`peers.rs`, "Take-back keys").
    take_back_issued: u64,
    malformed_log: LogLimiter,
    stranger_log: LogLimiter,
    oversized_log: LogLimiter,
    unknown_log: LogLimiter,
    reject_log: LogLimiter,
    /// Jobs for queues nobody serves (`intake.rs`).
    unserved_log: LogLimiter,
    gone_log: GoneLog,
    drop_log: LogLimiter,
}

pub(crate) fn frames_of(msgid: String, command: Command) -> Frames {
    Message::with_msgid(msgid, command).encode()
}

impl Router {
    pub fn new(cfg: Config) -> Router {
        let journal = Durability::new(cfg.journal, cfg.commit_max_delay);
        let mut r = Router {
            ids: MsgIds::seeded(cfg.id_seed),
            cfg,
            pool: WorkerPool::default(),
            store: JobStore::new(),
            schedulers: Vec::new(),
            stats: Stats::default(),
            dead: VecDeque::new(),
            restored_dead: 0,
            book: emq_schedule::ScheduleBook::new(),
            journal,
            paused: FastSet::default(),
            finished: Finished::default(),
            results: results::Results::default(),
            unique: unique::UniqueKeys::default(),
            workflows: workflow::Workflows::default(),
            batches: batch::Batches::default(),
            next_heartbeat: Duration::ZERO,
            drain_deadline: None,
            exited: false,
            malformed_log: LogLimiter::new("malformed messages", 20),
            oversized_log: LogLimiter::new("messages over the size limit", 20),
            unknown_log: LogLimiter::new("messages from unknown workers", 20),
            stranger_log: LogLimiter::new("claims of other job managers' jobs", 20),
            take_back_issued: 0,
            reject_log: LogLimiter::new("rejected requests", 20),
            unserved_log: LogLimiter::new("jobs for unserved queues", 5),
            gone_log: GoneLog::default(),
            drop_log: LogLimiter::new("dropped results", 20),
        };
        r.apply_start_limits();
        r
    }

    // ----- getters ---------------------------------------------------------

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Jobs waiting in queue buffers (not counting delayed retries).
    pub fn buffered_count(&self) -> usize {
        self.store.buffered()
    }

    /// Jobs waiting for a retry delay.
    pub fn delayed_count(&self) -> usize {
        self.store.delayed.len()
    }

    /// Results held until delivered, and their bytes.
    pub fn held_results(&self) -> (usize, usize) {
        (self.results.len(), self.results.bytes())
    }

    /// Unique keys held.
    pub fn unique_keys(&self) -> usize {
        self.unique.len()
    }

    /// Unfinished workflows held.
    pub fn workflow_count(&self) -> usize {
        self.workflows.len()
    }

    /// Jobs on workers.
    pub fn inflight_count(&self) -> usize {
        self.pool.inflight_total
    }

    pub fn worker_count(&self) -> usize {
        self.pool.workers.len()
    }

    pub fn scheduler_count(&self) -> usize {
        self.schedulers.len()
    }

    pub fn dead_letters(&self) -> impl Iterator<Item = &DeadLetter> {
        self.dead.iter()
    }

    pub fn is_draining(&self) -> bool {
        self.drain_deadline.is_some()
    }

    pub fn has_exited(&self) -> bool {
        self.exited
    }

    /// Every accepted, unfinished job (buffered, delayed or in flight) as
    /// a journal record, in acceptance order. Walks every job: for tests,
    /// tools and exports, not for a hot path.
    pub fn unfinished_jobs(&self) -> Vec<crate::journal::JobRecord> {
        let mut v: Vec<(JobId, crate::journal::JobRecord)> = self
            .store
            .jobs
            .iter()
            .map(|(id, j)| (id, self.job_record(j)))
            .collect();
        v.sort_by_key(|(id, _)| *id);
        v.into_iter().map(|(_, r)| r).collect()
    }

    /// The journal's state (healthy, or failing since when and why).
    pub fn journal_state(&self) -> &JournalState {
        self.journal.state()
    }

    /// The built-in schedules.
    pub fn schedules(&self) -> &emq_schedule::ScheduleBook {
        &self.book
    }

    // ----- input -----------------------------------------------------------

    /// Put back what a journal store held (at start, before any input):
    /// unfinished jobs are queued again without an acknowledgement (they
    /// had theirs) and dispatched as slots appear; dead letters fill the
    /// admin list; schedules go into the book (a run missed while the
    /// router was down runs once, at the next timeout).
    pub fn restore(
        &mut self,
        restored: Restored,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> RestoreCounts {
        // Policies first: restored jobs of a limited queue may be presumed
        // running (`flow.rs`). Paused too: restored jobs of a paused queue
        // stay buffered.
        let policies = self.restore_policies(&restored.states, now, out);
        let paused = restored.paused_queues.len();
        self.paused.extend(restored.paused_queues);
        // Batches before the jobs: each restored job of one is counted.
        self.restore_batch_rows(&restored.states);
        let jobs = self.restore_jobs(restored.jobs, now, out);
        let dead_letters = restored.dead_letters.len();
        self.restore_dead_letters(restored.dead_letters.into_iter().map(DeadLetter::from));
        let schedules = self.restore_schedules(restored.schedules, now, out);
        let finished = restored.finished.len();
        let keep = self.cfg.retain_finished;
        let drop_before = self.retention_cutoff(now);
        for f in restored.finished {
            self.finished.push(f, keep, drop_before);
        }
        let results = self.restore_results(restored.results, now);
        let unique_windows = self.restore_unique(&restored.states, now);
        let workflows = self.restore_workflows(&restored.states, now, out);
        let batches = self.settle_restored_batches(now, out);
        RestoreCounts {
            workflows,
            batches,
            unique_windows,
            jobs,
            dead_letters,
            schedules,
            paused_queues: paused,
            finished,
            results,
            policies,
        }
    }

    /// Feed one input; actions are appended to `out` in the order the
    /// driver must carry them out.
    pub fn handle(&mut self, input: Input, now: Duration, out: &mut Vec<Action>) {
        match input {
            Input::Frames { socket, frames } => self.on_frames(socket, frames, now, out),
            Input::Message {
                socket,
                identity,
                message,
            } => self.on_message(socket, identity, message, None, now, out),
            Input::SendFailed {
                socket,
                identity,
                reason,
            } => self.on_send_failed(socket, identity, reason, now, out),
            Input::JournalDone { batch, result } => self.on_journal_done(batch, result, now, out),
            Input::Shutdown => self.start_shutdown("shutdown requested", now, out),
            Input::Flushed => self.confirm_results(out),
        }
        self.pump_woken(now, out);
        self.maybe_exit(now, out);
    }

    /// The earliest time at which [`Router::handle_timeout`] has work, or
    /// `None` when nothing is timed (no peers, no delayed jobs, no
    /// schedules, nothing to commit): the earliest deadline of the timer
    /// table (`timers.rs`), each read in O(1) or O(log n).
    pub fn poll_timeout(&self) -> Option<Duration> {
        timers::TIMERS
            .into_iter()
            .filter_map(|t| self.deadline(t))
            .min()
    }

    /// Timers due at `now` — heartbeats, the dead-peer sweep, retries
    /// whose delay ended, schedule runs, result probes and expiry, the
    /// group commit or journal retry, the drain deadline — and only those
    /// (`timers.rs`).
    pub fn handle_timeout(&mut self, now: Duration, out: &mut Vec<Action>) {
        let drop_before = self.retention_cutoff(now);
        self.finished.trim(self.cfg.retain_finished, drop_before);
        self.trim_finished_workflows(now);
        self.fire_due(now, out);
        self.pump_woken(now, out);
    }

    fn on_message(
        &mut self,
        socket: Socket,
        identity: Vec<u8>,
        msg: Message,
        raw: Option<intake::Raw>,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        self.touch(socket, &identity, now);
        if socket == Socket::Frontend {
            self.gone_log.seen(&identity);
            self.results_client_seen(&identity, out);
        }
        match socket {
            Socket::Backend => self.on_backend(identity, msg, now, out),
            Socket::Frontend => self.on_frontend(identity, msg, raw, now, out),
            Socket::Admin => self.on_admin(identity, msg, now, out),
        }
    }

    /// Admin socket: STATUS and the ROUTER_SHOW_* answer `REPLY [json]`
    /// rendered from [`Router::snapshot`]; DISCONNECT is ACKed and starts
    /// the orderly shutdown.
    fn on_admin(&mut self, identity: Vec<u8>, msg: Message, now: Duration, out: &mut Vec<Action>) {
        let Message { msgid, command } = msg;
        let json = match command {
            Command::Status => crate::admin::status_json(&self.snapshot(now)),
            Command::RouterShowWorkers => crate::admin::workers_json(&self.snapshot(now)),
            Command::RouterShowSchedulers => crate::admin::schedulers_json(&self.snapshot(now)),
            Command::Admin { request } => {
                self.on_admin_request(identity, msgid, &request, now, out);
                return;
            }
            Command::Disconnect => {
                let ack = frames_of(
                    self.ids.next_id(),
                    Command::Ack {
                        acked_msgid: msgid,
                        features: vec![],
                    },
                );
                self.send(Socket::Admin, identity, ack, out);
                self.start_shutdown("admin DISCONNECT", now, out);
                return;
            }
            other => {
                log::debug!("admin: {} ignored", other.name());
                return;
            }
        };
        let reply = emqp_proto::Reply {
            payload: json.into_bytes(),
            orig_msgid: None,
            status: None,
            credit: 0,
        };
        let f = frames_of(self.ids.next_id(), Command::Reply(reply));
        self.send(Socket::Admin, identity, f, out);
    }

    /// A send that promises nothing (REJECTs, heartbeats, dispatches,
    /// admin answers) goes out at once; see `send_after_journal`.
    pub(crate) fn send(
        &mut self,
        socket: Socket,
        identity: Vec<u8>,
        frames: Frames,
        out: &mut Vec<Action>,
    ) {
        out.push(Action::Send {
            socket,
            identity,
            frames,
        });
    }

    /// Finished jobs older than this (unix ms) are no longer kept.
    pub(crate) fn retention_cutoff(&self, now: Duration) -> u64 {
        self.unix_ms(now)
            .saturating_sub(u64::try_from(self.cfg.retain_for.as_millis()).unwrap_or(u64::MAX))
    }

    /// Unix milliseconds at core time `now`.
    pub(crate) fn unix_ms(&self, now: Duration) -> u64 {
        self.cfg.epoch_unix_micros.saturating_add(micros(now)) / 1000
    }
}
