//! Durability: the journal rule, group commit and journal failures.
//!
//! **Rule.** A client never hears of anything the journal could lose. An
//! acknowledgement (`REPLY [msgid]` of a REQUEST, SCHEDULE or UNSCHEDULE)
//! or a RESULT leaves only after every record emitted before it is in a
//! committed batch; and a job is handed to a worker only once its
//! `Accepted` record is committed (so a job never runs unless the journal
//! has it, and a job whose batch fails was never seen by anyone). Sends
//! that promise nothing (REJECTs, heartbeats, admin answers, dispatches of
//! durable jobs) do not wait.
//!
//! **Group commit.** Records gather in an open batch. Under light load
//! (the last batch had fewer than [`SMALL_BATCH`] records) the open batch
//! is due at once — the driver commits it after the read round that
//! produced it, so a lone job waits for one commit only. Under load the
//! batch grows with the load: it is due once it holds [`LOADED_BATCH`]
//! records but no sooner than [`COMMIT_DELAY`] after the previous batch,
//! and at the latest `Config::commit_max_delay` (4 ms by default; 1 ms
//! for PostgreSQL, whose commits cost per row, not per batch) after it;
//! at once with [`COMMIT_OPS`] records. (A commit has a fixed cost — the
//! WAL frames of every page it touches, the syscalls — that a larger
//! batch shares among more jobs: with SQLite, 32 jobs a batch cost about
//! 1.5 times the CPU per job of 128, docs/PERFORMANCE.md.) One batch is in
//! flight at a time; the next one gathers while it commits. A job
//! accepted and completed within one open batch needs no row: its
//! `Accepted` and `Completed` records cancel (unless its msgid was
//! accepted twice in the batch), and of the writes of one state row
//! (`PutState` / `DeleteState` of a kind and id) only the last is kept.
//!
//! **Failure.** When a batch fails: no acknowledgement leaves for a job of
//! that batch — the job is removed (it was never dispatched) and its
//! client gets `REJECT journal-unavailable`; the batch's other records
//! (completions, attempts, dead letters, schedules) are kept and written
//! first in the next batch, and the sends waiting for them wait for that
//! batch. Until a batch commits again, new REQUESTs and SCHEDULEs are
//! refused `journal-unavailable` and no job is dispatched (`dispatch.rs`
//! says why); the core retries every
//! [`RETRY_INTERVAL`] on its own — with the kept records, or a
//! [`Record::Probe`] when there are none — and recovers without a
//! restart. Jobs acknowledged earlier stay queued and are never dropped.
//! The log says once that the journal failed and once that it
//! recovered, with the number of requests refused meanwhile.
//!
//! **Uncertain outcome.** When the store cannot tell whether a batch
//! committed (`BatchResult::Uncertain`: the PostgreSQL connection broke
//! while the commit was on its way), the batch is handled as failed, with
//! one difference: a job of it may run (the commit may have happened, and
//! a router that takes over after this one would load it), so its client
//! is never told "refused": it gets `REJECT journal-uncertain` and sends
//! the REQUEST again under the same msgid. The msgid is remembered; until
//! a batch commits again (the store settles the uncertain batch before any
//! later write: one that did commit is undone there) a REQUEST with it is
//! answered `journal-uncertain` again, whatever else is going on; after
//! that it is a new REQUEST like any other. A router that holds the job
//! (one that loaded it after a failover) acknowledges the resent REQUEST
//! as that job (`intake.rs`). Only a batch known not to have been written
//! gives `journal-unavailable`.

use std::time::Duration;

use std::collections::VecDeque;

use super::Router;
use crate::data::JournalState;
use crate::event::{Action, Socket};
use crate::jobs::JobId;
use crate::journal::{Batch, BatchId, BatchResult, Record};
use crate::util::{FastMap, FastSet};
use emqp_proto::{Command, Reject, RejectReason};

pub(crate) use crate::config::COMMIT_DELAY;
/// Under load, records that make the open batch due once
/// [`COMMIT_DELAY`] has passed.
pub(crate) const LOADED_BATCH: usize = 512;
/// A batch this small means light load: the next one is due at once.
pub(crate) const SMALL_BATCH: usize = 16;
/// Records that make the open batch due at once.
pub(crate) const COMMIT_OPS: usize = 8192;
/// Time between two tries of a failing journal.
pub(crate) const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// What a held send is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tag {
    /// Nothing the core follows (a SCHEDULE's acknowledgement).
    Plain,
    /// The acknowledgement of job `JobId` (REQUEST msgid): REJECTed
    /// instead if that job's batch fails.
    Ack(JobId, String),
    /// The RESULT of a held result (msgid, seq): `results.rs` follows it
    /// once it leaves.
    Result(String, u64),
    /// A NOTICE about job `JobId`, held behind its acknowledgement:
    /// dropped if that job's batch fails (the client hears REJECT).
    Notice(JobId),
}

/// A send waiting for a batch.
#[derive(Debug)]
struct Held {
    /// The batch it waits for.
    batch: u64,
    tag: Tag,
    action: Action,
}

/// The batch handed to the driver, not yet done.
#[derive(Debug)]
struct Pending {
    id: u64,
    /// Jobs with ids below this are durable once the batch commits.
    durable_below: JobId,
    /// Jobs accepted in the batch.
    jobs: Vec<JobId>,
    /// Its records other than `Accepted` and `Probe`: written again if it
    /// fails.
    keep: Vec<Record>,
}

/// The state of the journal rule (see the module documentation).
#[derive(Debug)]
pub(crate) struct Durability {
    enabled: bool,
    /// Under load, the longest time between two batches.
    max_delay: Duration,
    open: Vec<Option<Record>>,
    /// msgid → index in `open` of its `Accepted` (None: accepted twice).
    open_accepted: FastMap<String, Option<usize>>,
    /// (kind, id) → index in `open` of the last `PutState` / `DeleteState`
    /// of that row: a later one replaces it (the batch commits whole).
    open_states: FastMap<(crate::journal::StateKind, String), usize>,
    /// Jobs accepted in the open batch.
    open_jobs: Vec<JobId>,
    /// Records of failed batches, written first in the next one.
    again: Vec<Record>,
    /// The id the open batch will have.
    next_batch: u64,
    pending: Option<Pending>,
    held: VecDeque<Held>,
    durable_below: JobId,
    last_emit: Option<Duration>,
    last_batch_len: usize,
    state: JournalState,
    retry_at: Duration,
    /// Jobs whose two records cancelled (for the exit log).
    pub(crate) cancelled: u64,
    /// Msgids of jobs whose batch's outcome is uncertain, until a batch
    /// commits (the store has settled it then).
    uncertain: FastSet<String>,
}

impl Durability {
    /// `max_delay`: `Config::commit_max_delay`.
    pub(crate) fn new(enabled: bool, max_delay: Duration) -> Durability {
        Durability {
            enabled,
            max_delay: max_delay.max(COMMIT_DELAY),
            open: Vec::new(),
            open_accepted: FastMap::default(),
            open_states: FastMap::default(),
            open_jobs: Vec::new(),
            again: Vec::new(),
            next_batch: 1,
            pending: None,
            held: VecDeque::new(),
            durable_below: JobId(1),
            last_emit: None,
            last_batch_len: 0,
            state: if enabled {
                JournalState::Healthy
            } else {
                JournalState::Off
            },
            retry_at: Duration::ZERO,
            cancelled: 0,
            uncertain: FastSet::default(),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Whether batches fail (new work refused, nothing dispatched).
    pub(crate) fn is_failing(&self) -> bool {
        matches!(self.state, JournalState::Failing { .. })
    }

    pub(crate) fn state(&self) -> &JournalState {
        &self.state
    }

    /// Sends waiting for a commit.
    pub(crate) fn held_count(&self) -> usize {
        self.held.len()
    }

    /// Whether job `id`'s `Accepted` record is committed.
    pub(crate) fn is_durable(&self, id: JobId) -> bool {
        !self.enabled || id < self.durable_below
    }

    pub(crate) fn mark_durable_below(&mut self, id: JobId) {
        if self.pending.is_none() && self.open_jobs.is_empty() {
            self.durable_below = self.durable_below.max(id);
        }
    }

    /// Whether `msgid` named a job of a batch whose outcome is not yet
    /// known (answered `journal-uncertain`).
    pub(crate) fn is_uncertain(&self, msgid: &str) -> bool {
        self.uncertain.contains(msgid)
    }

    /// Why new work is refused, while the journal fails.
    pub(crate) fn refusal(&self) -> Option<String> {
        match &self.state {
            JournalState::Failing { error, .. } => {
                Some(format!("the router's journal cannot store jobs: {error}"))
            }
            _ => None,
        }
    }

    /// A REQUEST or SCHEDULE was refused for the failing journal (the
    /// count STATUS and the recovery log line give).
    pub(crate) fn count_refused(&mut self) {
        if let JournalState::Failing { refused, .. } = &mut self.state {
            *refused += 1;
        }
    }

    /// Add a record to the open batch; `job` for an `Accepted` record.
    pub(crate) fn record(&mut self, record: Record, job: Option<JobId>) {
        if !self.enabled {
            return;
        }
        match record {
            Record::Accepted(j) => {
                let i = self.open.len();
                match self.open_accepted.get_mut(&j.msgid) {
                    Some(slot) => *slot = None,
                    None => {
                        self.open_accepted.insert(j.msgid.clone(), Some(i));
                    }
                }
                if let Some(id) = job {
                    self.open_jobs.push(id);
                }
                self.open.push(Some(Record::Accepted(j)));
            }
            Record::Completed { msgid } => {
                if let Some(Some(i)) = self.open_accepted.get(&msgid).copied() {
                    self.open_accepted.remove(&msgid);
                    self.open[i] = None;
                    self.cancelled += 1;
                    return;
                }
                self.open.push(Some(Record::Completed { msgid }));
            }
            Record::Finished {
                record,
                keep,
                drop_before_unix_ms,
            } => {
                // Its `Accepted` in this batch needs no row; the finished
                // record is kept.
                if let Some(Some(i)) = self.open_accepted.get(&record.job.msgid).copied() {
                    self.open_accepted.remove(&record.job.msgid);
                    self.open[i] = None;
                    self.cancelled += 1;
                }
                self.open.push(Some(Record::Finished {
                    record,
                    keep,
                    drop_before_unix_ms,
                }));
            }
            Record::PutState { kind, ref id, .. } | Record::DeleteState { kind, ref id } => {
                // Only the last write of a row in a batch counts (a
                // batch's counts rewritten at every job end under load).
                let i = self.open.len();
                if let Some(old) = self.open_states.insert((kind, id.clone()), i) {
                    self.open[old] = None;
                }
                self.open.push(Some(record));
            }
            other => self.open.push(Some(other)),
        }
    }

    /// The batch a send emitted now must wait for, if any.
    fn waits_for(&self) -> Option<u64> {
        if !self.open.is_empty() || !self.again.is_empty() {
            Some(self.next_batch)
        } else if let Some(p) = &self.pending {
            Some(p.id)
        } else {
            self.held.back().map(|h| h.batch)
        }
    }

    /// A send that promises something: held until the records emitted
    /// before it are committed, else given back to go out now.
    pub(crate) fn hold(&mut self, action: Action, tag: Tag) -> Option<Action> {
        if !self.enabled {
            return Some(action);
        }
        match self.waits_for() {
            None => Some(action),
            Some(batch) => {
                self.held.push_back(Held { batch, tag, action });
                None
            }
        }
    }

    /// Held RESULT sends: `(msgid, seq)` (for the invariants).
    pub(crate) fn held_results(&self) -> impl Iterator<Item = (&str, u64)> {
        self.held.iter().filter_map(|h| match &h.tag {
            Tag::Result(m, seq) => Some((m.as_str(), *seq)),
            _ => None,
        })
    }

    /// When the open batch (or a retry) is due; `None` when nothing is
    /// to be written or a batch is in flight.
    pub(crate) fn deadline(&self, draining: bool) -> Option<Duration> {
        if !self.enabled || self.pending.is_some() {
            return None;
        }
        if matches!(self.state, JournalState::Failing { .. }) {
            return Some(self.retry_at);
        }
        if self.open.is_empty() && self.again.is_empty() {
            return None;
        }
        if draining || self.open.len() >= COMMIT_OPS || self.last_batch_len < SMALL_BATCH {
            return Some(Duration::ZERO);
        }
        let wait = if self.open.len() + self.again.len() >= LOADED_BATCH {
            COMMIT_DELAY
        } else {
            self.max_delay
        };
        Some(
            self.last_emit
                .map_or(Duration::ZERO, |t| t.saturating_add(wait)),
        )
    }

    /// Nothing open, in flight, held or kept for a retry.
    pub(crate) fn is_idle(&self) -> bool {
        !self.enabled
            || (self.open.is_empty()
                && self.again.is_empty()
                && self.pending.is_none()
                && self.held.is_empty())
    }

    /// Close the open batch: the [`Batch`] to emit, if due at `now`.
    pub(crate) fn take_batch(
        &mut self,
        now: Duration,
        draining: bool,
        next_job_id: JobId,
    ) -> Option<Batch> {
        let due = self.deadline(draining)?;
        if due > now {
            return None;
        }
        let failing = matches!(self.state, JournalState::Failing { .. });
        let mut records: Vec<Record> = std::mem::take(&mut self.again);
        records.extend(self.open.drain(..).flatten());
        if records.is_empty() && failing {
            records.push(Record::Probe);
        }
        self.open_accepted.clear();
        self.open_states.clear();
        let id = self.next_batch;
        self.next_batch += 1;
        self.last_emit = Some(now);
        self.last_batch_len = records.len();
        let keep = records
            .iter()
            .filter(|r| !matches!(r, Record::Accepted(_) | Record::Probe))
            .cloned()
            .collect();
        self.pending = Some(Pending {
            id,
            durable_below: next_job_id,
            jobs: std::mem::take(&mut self.open_jobs),
            keep,
        });
        Some(Batch {
            id: BatchId(id),
            records,
        })
    }
}

impl Router {
    /// Emit the open batch if it is due (see the module documentation).
    pub(super) fn flush_journal(&mut self, now: Duration, out: &mut Vec<Action>) {
        let draining = self.is_draining();
        if self
            .journal
            .deadline(draining)
            .is_some_and(|due| due <= now)
        {
            self.write_dirty_batch_rows();
        }
        let next = self.store.next_id;
        if let Some(batch) = self.journal.take_batch(now, draining, next) {
            out.push(Action::Journal(batch));
        }
    }

    /// Emit the open batch now, whatever the group-commit timing says
    /// (tests: the harness commits after every input), unless the journal
    /// is failing and its retry is not due.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn flush_journal_now(&mut self, now: Duration, out: &mut Vec<Action>) {
        if matches!(self.journal.state, JournalState::Failing { .. }) {
            // A failing journal is tried again on its own schedule.
            return self.flush_journal(now, out);
        }
        let saved = self.journal.last_batch_len;
        self.journal.last_batch_len = 0;
        self.flush_journal(now, out);
        if self.journal.pending.is_none() {
            self.journal.last_batch_len = saved;
        }
    }

    /// A send that waits for the journal (acknowledgements, RESULTs);
    /// `ack`: the job and msgid a REQUEST's acknowledgement is for.
    pub(crate) fn send_after_journal(
        &mut self,
        socket: Socket,
        identity: Vec<u8>,
        frames: crate::event::Frames,
        ack: Option<(JobId, String)>,
        out: &mut Vec<Action>,
    ) {
        let tag = match ack {
            Some((job, msgid)) => Tag::Ack(job, msgid),
            None => Tag::Plain,
        };
        self.send_tagged(socket, identity, frames, tag, out);
    }

    /// Send `frames` once every record written before is committed, held
    /// as `tag` says (in order with every other held send).
    pub(crate) fn send_tagged(
        &mut self,
        socket: Socket,
        identity: Vec<u8>,
        frames: crate::event::Frames,
        tag: Tag,
        out: &mut Vec<Action>,
    ) {
        let action = Action::Send {
            socket,
            identity,
            frames,
        };
        if let Some(action) = self.journal.hold(action, tag) {
            super::acks::push(out, action);
        }
    }

    pub(super) fn on_journal_done(
        &mut self,
        batch: BatchId,
        result: BatchResult,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let Some(p) = self.journal.pending.take() else {
            log::warn!(
                "journal outcome of batch {} with no batch in flight",
                batch.0
            );
            return;
        };
        if p.id != batch.0 {
            log::warn!(
                "journal outcome of batch {} while batch {} is in flight",
                batch.0,
                p.id
            );
        }
        match result {
            BatchResult::Committed => self.batch_committed(p, now, out),
            BatchResult::Failed(error) => self.batch_failed(p, error, false, now, out),
            BatchResult::Uncertain(error) => self.batch_failed(p, error, true, now, out),
        }
    }

    fn batch_committed(&mut self, p: Pending, now: Duration, out: &mut Vec<Action>) {
        let j = &mut self.journal;
        let recovered = j.is_failing();
        if let JournalState::Failing { since, refused, .. } = &j.state {
            log::info!(
                "journal recovered after {:.1} s: accepting and dispatching jobs again \
                 ({refused} request(s) refused meanwhile)",
                now.saturating_sub(*since).as_secs_f64()
            );
        }
        j.state = JournalState::Healthy;
        if !j.uncertain.is_empty() {
            log::info!(
                "journal: the batch of {} job(s) answered journal-uncertain is settled \
                 (written or not, the store has it undone); their msgids are free again",
                j.uncertain.len()
            );
            j.uncertain.clear();
        }
        j.durable_below = j.durable_below.max(p.durable_below);
        let mut results: Vec<(String, u64)> = Vec::new();
        while j.held.front().is_some_and(|h| h.batch <= p.id) {
            if let Some(h) = j.held.pop_front() {
                if let Tag::Result(m, seq) = h.tag {
                    results.push((m, seq));
                }
                // Acknowledgements of one batch to one client: one ACKS.
                super::acks::push(out, h.action);
            }
        }
        for (m, seq) in results {
            self.result_released(&m, seq);
        }
        let mut routes: Vec<String> = Vec::new();
        if recovered {
            // Dispatch was held while the journal failed (dispatch.rs).
            routes = self.store.buffered_routes();
        } else {
            for jid in &p.jobs {
                if let Some(job) = self.store.jobs.get(jid) {
                    if !routes.iter().any(|r| r == job.route()) {
                        routes.push(job.route().to_string());
                    }
                }
            }
        }
        for r in routes {
            self.pump(&r, now, out);
        }
    }

    /// `uncertain`: the batch may have been written (its jobs may run):
    /// `journal-uncertain`, else `journal-unavailable`.
    fn batch_failed(
        &mut self,
        p: Pending,
        error: String,
        uncertain: bool,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        // The jobs of the batch were never acknowledged nor dispatched:
        // take them out; their acknowledgements become REJECTs.
        let failed: crate::util::FastSet<JobId> = p.jobs.iter().copied().collect();
        self.unique_batch_failed(&p.jobs, out);
        let failed_msgids: Vec<(JobId, String)> = p
            .jobs
            .iter()
            .filter_map(|j| Some((*j, self.store.jobs.get(j)?.msgid().to_string())))
            .collect();
        let routes: Vec<String> = p
            .jobs
            .iter()
            .filter_map(|j| self.store.jobs.get(j))
            .filter(|j| j.state == crate::jobs::JobState::Queued)
            .map(|j| j.route().to_string())
            .collect();
        let removed = self.store.remove_queued_set(&failed);
        self.stats.accepted -= removed as u64;
        if removed > 0 {
            // (taken back from the queues' `accepted` too)
            for r in &routes {
                let m = self.stats.queue_mut(r);
                m.accepted = m.accepted.saturating_sub(1);
            }
        }
        self.stats.rejected_journal += removed as u64;
        let next = self.journal.next_batch;
        let mut reject_ids = 0u64;
        let held = std::mem::take(&mut self.journal.held);
        for mut h in held {
            if h.batch <= p.id {
                let failed_ack = match &h.tag {
                    Tag::Ack(j, m) if failed.contains(j) => Some(m.clone()),
                    _ => None,
                };
                if matches!(&h.tag, Tag::Notice(j) if failed.contains(j)) {
                    continue;
                }
                if let Some(msgid) = failed_ack {
                    if let Action::Send { identity, .. } = h.action {
                        reject_ids += 1;
                        let (reason, text) = if uncertain {
                            self.journal.uncertain.insert(msgid.clone());
                            (
                                RejectReason::JournalUncertain,
                                format!(
                                    "the router cannot tell whether its journal stored the job \
                                     ({error}); it may run: send it again with the same msgid"
                                ),
                            )
                        } else {
                            (
                                RejectReason::JournalUnavailable,
                                format!("the router's journal cannot store jobs: {error}"),
                            )
                        };
                        let f = super::frames_of(
                            self.ids.next_id(),
                            Command::Reject(Reject {
                                orig_msgid: msgid,
                                reason,
                                text,
                            }),
                        );
                        out.push(Action::Send {
                            socket: Socket::Frontend,
                            identity,
                            frames: f,
                        });
                    }
                    continue;
                }
                // Waits for the records kept for the next batch.
                h.batch = next;
            }
            self.journal.held.push_back(h);
        }
        self.workflow_batch_failed(&failed_msgids, now, out);
        self.batch_batch_failed(&failed_msgids, now, out);
        let j = &mut self.journal;
        let mut keep = p.keep;
        keep.append(&mut j.again);
        j.again = keep;
        j.retry_at = now.saturating_add(RETRY_INTERVAL);
        match &mut j.state {
            JournalState::Failing { error: e, .. } => {
                if uncertain && reject_ids > 0 {
                    log::warn!(
                        "journal write failed: {error}; {reject_ids} job(s) of the batch \
                         answered journal-uncertain (the commit may have happened)"
                    );
                }
                *e = error
            }
            _ => {
                let answered = if uncertain {
                    "answered journal-uncertain (the commit may have happened: they may run; \
                     their clients send them again)"
                } else {
                    "refused (journal-unavailable)"
                };
                log::error!(
                    "journal write failed: {error}; {reject_ids} job(s) of the batch {answered}, \
                     new jobs and schedules are refused and no job is dispatched until a write \
                     succeeds again (retrying every {} s)",
                    RETRY_INTERVAL.as_secs()
                );
                j.state = JournalState::Failing {
                    since: now,
                    error,
                    refused: 0,
                };
            }
        }
    }
}
