//! A batch of the core's records turned into row operations with explicit
//! `seq`s, without a database: the one place where [`Record`]s meet rows.
//! Both stores run the same [`Plan`] — the PostgreSQL store
//! (`postgres/store.rs`) as a few multi-row statements, the SQLite store
//! (`sqlite.rs`) as one prepared statement per row in one transaction —
//! so the rules below are written once.
//!
//! [`Plan::build`] sorts the records, in one `match` over [`Record`], into
//! column arrays of new jobs, of finished jobs and of the job rows to
//! delete; rare records (a msgid accepted again, a delivery count, a dead
//! letter, a schedule, a pause) keep one operation each, in record order.
//! [`Plan::write`] hands the groups to a store's [`RowWriter`] in this
//! order, which gives the same end state as the records one by one:
//!
//! 1. inserts of new job rows (each gets a fresh `seq`);
//! 2. updates of job rows (replace, attempts), in record order;
//! 3. dead-letter moves and removals, in record order (a move copies the
//!    row as the updates left it);
//! 4. deletes of job rows (completed, finished, moved to the dead letters);
//! 5. inserts of finished jobs, then the trims of the finished jobs and
//!    the dead letters (once per batch, after its records);
//! 6. schedules, other router state and paused queues, in record order;
//! 7. inserts of held results, then deletes of released ones (a result
//!    row is inserted once and deleted at most once, as a job row);
//! 8. the probe's write, if the batch has a [`Record::Probe`] (a store
//!    whose every batch already writes, as PostgreSQL's lease check,
//!    skips it).
//!
//! Why this is the same: every job row is touched by at most one insert,
//! then updates, then at most one delete or move — after which its msgid
//! no longer maps to it, and a later `Accepted` of that msgid inserts a
//! new row with a new `seq`. Rows of different `seq`s commute; the other
//! tables are touched only by their own group, in record order.
//!
//! **Explicit `seq`s.** Every new row's `seq` comes from the store's
//! counters ([`Seqs`]: one past the largest `seq` of each table when the
//! store loaded its rows), never from the database (no `last_insert_rowid`,
//! no sequence): the plan is complete before anything is written, and a
//! row's `seq` orders it (acceptance order, oldest finished job or dead
//! letter first). Rows leave the finished jobs only through the trims,
//! oldest first, so their `seq`s stay contiguous and the count trim is
//! one `seq` range.
//!
//! **One statement (PostgreSQL).** The common batch — new jobs, finished
//! or completed jobs accepted in earlier batches, the finished-jobs trim, a
//! probe — can be written by one statement ([`Plan::is_one_statement`]):
//! the PostgreSQL store's data-modifying `WITH` clauses see the tables as
//! they were before the statement, so it is used only when no part touches
//! what another part of the same batch writes (no row both inserted and
//! deleted or updated; no finished row inserted and trimmed).
//!
//! The msgid → seq lookups go through a [`Staged`] overlay of the store's
//! [`Rows`], and the `seq` counters are copies: both become the store's
//! only when the batch commits ([`Rows::commit`]), so a failed batch
//! leaves them as the database is.

use emq_router_core::journal::{FinishedRecord, JobRecord, Record, ResultRecord, StateKind};

use std::time::{SystemTime, UNIX_EPOCH};

use crate::row_index::{Key, RowIndex, Staged};

/// The next `seq` of each table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seqs {
    pub(crate) job: i64,
    pub(crate) finished: i64,
    pub(crate) dead: i64,
    pub(crate) result: i64,
}

impl Default for Seqs {
    fn default() -> Self {
        Seqs {
            job: 1,
            finished: 1,
            dead: 1,
            result: 1,
        }
    }
}

/// What a store knows of its rows between batches: where each unfinished
/// job's and held result's row is, and the next `seq` of each table.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    /// msgid → seq of every unfinished job.
    pub(crate) jobs: RowIndex,
    /// msgid → seq of every held result.
    pub(crate) results: RowIndex,
    pub(crate) seqs: Seqs,
}

impl Rows {
    /// The plan of `records` against these rows.
    pub(crate) fn plan<'a>(&self, records: &'a [Record]) -> Plan<'a> {
        Plan::build(records, &self.jobs, &self.results, self.seqs)
    }

    /// `plan`'s batch committed: its rows and counters become these.
    pub(crate) fn commit(&mut self, plan: Plan<'_>) {
        self.seqs = plan.seqs;
        plan.staged.apply(&mut self.jobs);
        plan.staged_results.apply(&mut self.results);
    }

    /// A job row read from the table. `false` (and nothing changes but the
    /// counter) if its msgid already has a row: only a hand-edited table
    /// has one twice, and the first row read is kept.
    pub(crate) fn add_job(&mut self, msgid: &str, seq: i64) -> bool {
        self.seqs.job = self.seqs.job.max(seq.saturating_add(1));
        add(&mut self.jobs, msgid, seq)
    }

    /// A held result's row read from the table (as [`Rows::add_job`]).
    pub(crate) fn add_result(&mut self, msgid: &str, seq: i64) -> bool {
        self.seqs.result = self.seqs.result.max(seq.saturating_add(1));
        add(&mut self.results, msgid, seq)
    }

    /// The largest `seq` of the finished jobs and of the dead letters
    /// (`None`: an empty table).
    pub(crate) fn saw_ends(&mut self, finished: Option<i64>, dead: Option<i64>) {
        if let Some(s) = finished {
            self.seqs.finished = self.seqs.finished.max(s.saturating_add(1));
        }
        if let Some(s) = dead {
            self.seqs.dead = self.seqs.dead.max(s.saturating_add(1));
        }
    }
}

fn add(index: &mut RowIndex, msgid: &str, seq: i64) -> bool {
    let key = Key::of(msgid);
    if index.get(&key).is_some() {
        return false;
    }
    index.set(key, Some(seq));
    true
}

/// `ResultRecord`s as column arrays.
#[derive(Debug, Default)]
pub(crate) struct ResultColumns<'a> {
    pub(crate) seq: Vec<i64>,
    pub(crate) msgid: Vec<&'a str>,
    pub(crate) client: Vec<&'a [u8]>,
    pub(crate) status: Vec<&'a str>,
    pub(crate) payload: Vec<&'a [u8]>,
    pub(crate) receipt: Vec<bool>,
    pub(crate) held_at: Vec<i64>,
}

impl<'a> ResultColumns<'a> {
    fn push(&mut self, seq: i64, r: &'a ResultRecord) {
        self.seq.push(seq);
        self.msgid.push(&r.msgid);
        self.client.push(&r.client);
        self.status.push(r.status.as_str());
        self.payload.push(&r.payload);
        self.receipt.push(r.receipt);
        self.held_at.push(unix_ms_column(r.held_at_unix_ms));
    }
}

/// `JobRecord`s as column arrays (the parameters of an `unnest` insert).
#[derive(Debug, Default)]
pub(crate) struct JobColumns<'a> {
    pub(crate) seq: Vec<i64>,
    pub(crate) msgid: Vec<&'a str>,
    pub(crate) client: Vec<&'a [u8]>,
    pub(crate) queue: Vec<&'a str>,
    pub(crate) route: Vec<&'a str>,
    pub(crate) headers: Vec<&'a [u8]>,
    pub(crate) message: Vec<&'a [u8]>,
    pub(crate) attempts: Vec<i32>,
    pub(crate) accepted_at: Vec<i64>,
    pub(crate) run_at: Vec<Option<i64>>,
}

impl<'a> JobColumns<'a> {
    fn push(&mut self, seq: i64, j: &'a JobRecord) {
        self.seq.push(seq);
        self.msgid.push(&j.msgid);
        self.client.push(&j.client);
        self.queue.push(&j.queue);
        self.route.push(route_column(j));
        self.headers.push(&j.headers);
        self.message.push(&j.payload);
        self.attempts.push(attempts_column(j.attempts));
        self.accepted_at.push(unix_ms_column(j.accepted_at_unix_ms));
        self.run_at.push(j.run_at_unix_ms.map(unix_ms_column));
    }

    pub(crate) fn len(&self) -> usize {
        self.seq.len()
    }
}

/// `FinishedRecord`s as column arrays.
#[derive(Debug, Default)]
pub(crate) struct FinishedColumns<'a> {
    pub(crate) job: JobColumns<'a>,
    pub(crate) outcome: Vec<&'a str>,
    pub(crate) finished_at: Vec<i64>,
    pub(crate) started_at: Vec<Option<i64>>,
    pub(crate) result: Vec<Option<&'a [u8]>>,
    pub(crate) result_truncated: Vec<bool>,
}

impl<'a> FinishedColumns<'a> {
    fn push(&mut self, seq: i64, f: &'a FinishedRecord) {
        self.job.push(seq, &f.job);
        self.outcome.push(&f.outcome);
        self.finished_at.push(unix_ms_column(f.finished_at_unix_ms));
        self.started_at
            .push(f.started_at_unix_ms.map(unix_ms_column));
        self.result.push(f.result.as_deref());
        self.result_truncated.push(f.result_truncated);
    }
}

/// A change to an existing job row.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Update<'a> {
    /// A msgid accepted again while unfinished: new fields, same place in
    /// the acceptance order.
    Replace {
        seq: i64,
        job: &'a JobRecord,
    },
    Attempts {
        seq: i64,
        attempts: i32,
    },
}

/// A change to the dead letters.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Dead<'a> {
    Move(DeadMove<'a>),
    /// Forget the dead letters of `msgid`.
    Remove {
        msgid: &'a str,
    },
}

/// Copy job row `job_seq` into the dead letters as row `seq`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct DeadMove<'a> {
    pub(crate) job_seq: i64,
    pub(crate) seq: i64,
    pub(crate) reason: &'a str,
    /// The last error payload.
    pub(crate) error: Option<&'a [u8]>,
}

/// Schedules, other router state and paused queues.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Other<'a> {
    PutSchedule {
        id: &'a str,
        blob: &'a [u8],
    },
    DeleteSchedule {
        id: &'a str,
    },
    PutState {
        kind: StateKind,
        id: &'a str,
        blob: &'a [u8],
    },
    DeleteState {
        kind: StateKind,
        id: &'a str,
    },
    Pause {
        queue: &'a str,
    },
    Resume {
        queue: &'a str,
    },
}

/// What a store does with each group of a [`Plan`]: one implementation
/// per store (its SQL), called by [`Plan::write`] in the plan's order, so
/// that the order is written once. Each method gets a group that is not
/// empty.
pub(crate) trait RowWriter {
    type Error;
    /// New job rows.
    fn insert_jobs(&mut self, jobs: &JobColumns<'_>) -> Result<(), Self::Error>;
    /// New fields for job row `seq` (a msgid accepted again).
    fn replace_job(&mut self, seq: i64, job: &JobRecord) -> Result<(), Self::Error>;
    /// A new delivery count for job row `seq`.
    fn set_attempts(&mut self, seq: i64, attempts: i32) -> Result<(), Self::Error>;
    /// A job row into the dead letters, at `dead_at` (unix ms).
    fn move_to_dead(&mut self, m: &DeadMove<'_>, dead_at: i64) -> Result<(), Self::Error>;
    /// Forget the dead letters of `msgid`.
    fn remove_dead(&mut self, msgid: &str) -> Result<(), Self::Error>;
    /// Job rows completed, finished or moved to the dead letters.
    fn delete_jobs(&mut self, seqs: &[i64]) -> Result<(), Self::Error>;
    /// New finished-job rows.
    fn insert_finished(&mut self, finished: &FinishedColumns<'_>) -> Result<(), Self::Error>;
    /// Delete finished rows with `seq` at or below `at_or_below`, or
    /// finished before `before` (unix ms).
    fn trim_finished(&mut self, at_or_below: i64, before: i64) -> Result<(), Self::Error>;
    /// Keep the newest `keep` dead letters.
    fn trim_dead(&mut self, keep: i64) -> Result<(), Self::Error>;
    /// A schedule, other router state or a paused queue.
    fn other(&mut self, change: &Other<'_>) -> Result<(), Self::Error>;
    /// New held-result rows.
    fn insert_results(&mut self, results: &ResultColumns<'_>) -> Result<(), Self::Error>;
    /// Held results released (or replaced).
    fn delete_results(&mut self, seqs: &[i64]) -> Result<(), Self::Error>;
    /// A real write, to learn whether the store takes one again.
    fn probe(&mut self) -> Result<(), Self::Error>;
}

/// The statements of one batch; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Plan<'a> {
    pub(crate) inserts: JobColumns<'a>,
    pub(crate) updates: Vec<Update<'a>>,
    pub(crate) dead: Vec<Dead<'a>>,
    pub(crate) deletes: Vec<i64>,
    pub(crate) finished: FinishedColumns<'a>,
    /// Delete finished rows with `seq` at or below the first, or finished
    /// before the second (unix ms).
    pub(crate) trim_finished: Option<(i64, i64)>,
    /// Keep the newest this many dead letters.
    pub(crate) trim_dead: Option<i64>,
    pub(crate) other: Vec<Other<'a>>,
    /// Held results to insert, released (or replaced) ones to delete.
    pub(crate) results: ResultColumns<'a>,
    pub(crate) result_deletes: Vec<i64>,
    /// The counters after this batch (the store's once it commits).
    pub(crate) seqs: Seqs,
    /// The counters before it: job rows from `first.job` on are new.
    pub(crate) first: Seqs,
    /// The msgid → seq changes (the store's once it commits).
    pub(crate) staged: Staged,
    /// The same for held results.
    pub(crate) staged_results: Staged,
    /// The batch has a [`Record::Probe`].
    pub(crate) probe: bool,
}

impl<'a> Plan<'a> {
    /// Sort `records` into statements, finding rows through `rows` and
    /// numbering new rows from `seqs`.
    pub(crate) fn build(
        records: &'a [Record],
        rows: &RowIndex,
        result_rows: &RowIndex,
        seqs: Seqs,
    ) -> Plan<'a> {
        let mut p = Plan {
            seqs,
            first: seqs,
            ..Plan::default()
        };
        for record in records {
            match record {
                Record::Accepted(job) => {
                    let key = Key::of(&job.msgid);
                    match p.staged.get(rows, &key) {
                        Some(seq) => p.updates.push(Update::Replace { seq, job }),
                        None => {
                            let seq = p.next_job();
                            p.inserts.push(seq, job);
                            p.staged.set(key, Some(seq));
                        }
                    }
                }
                Record::Completed { msgid } => {
                    if let Some(seq) = p.take_row(rows, msgid) {
                        p.deletes.push(seq);
                    }
                }
                Record::Finished {
                    record,
                    keep,
                    drop_before_unix_ms,
                } => {
                    if let Some(seq) = p.take_row(rows, &record.job.msgid) {
                        p.deletes.push(seq);
                    }
                    let seq = p.seqs.finished;
                    p.seqs.finished += 1;
                    p.finished.push(seq, record);
                    let keep = i64::try_from(*keep).unwrap_or(i64::MAX);
                    p.trim_finished = Some((
                        seq.saturating_sub(keep),
                        unix_ms_column(*drop_before_unix_ms),
                    ));
                }
                Record::QueuePaused { queue, paused } => p.other.push(if *paused {
                    Other::Pause { queue }
                } else {
                    Other::Resume { queue }
                }),
                Record::DeadLetterRemoved { msgid } => p.dead.push(Dead::Remove { msgid }),
                Record::DeadLettered {
                    msgid,
                    reason,
                    error,
                    keep,
                } => {
                    let keep = i64::try_from(*keep).unwrap_or(i64::MAX);
                    p.trim_dead = Some(p.trim_dead.map_or(keep, |k| k.min(keep)));
                    match p.take_row(rows, msgid) {
                        Some(job_seq) => {
                            let seq = p.seqs.dead;
                            p.seqs.dead += 1;
                            p.dead.push(Dead::Move(DeadMove {
                                job_seq,
                                seq,
                                reason,
                                error: error.as_deref(),
                            }));
                            p.deletes.push(job_seq);
                        }
                        None => log::debug!("journal: dead letter for unknown job {msgid}"),
                    }
                }
                Record::Attempt { msgid, attempts } => {
                    if let Some(seq) = p.staged.get(rows, &Key::of(msgid)) {
                        p.updates.push(Update::Attempts {
                            seq,
                            attempts: attempts_column(*attempts),
                        });
                    }
                }
                Record::ResultHeld(r) => {
                    let key = Key::of(&r.msgid);
                    // A msgid held again: the new result, as the newest.
                    if let Some(old) = p.staged_results.get(result_rows, &key) {
                        p.result_deletes.push(old);
                    }
                    let seq = p.seqs.result;
                    p.seqs.result += 1;
                    p.results.push(seq, r);
                    p.staged_results.set(key, Some(seq));
                }
                Record::ResultReleased { msgid } => {
                    let key = Key::of(msgid);
                    if let Some(seq) = p.staged_results.get(result_rows, &key) {
                        p.result_deletes.push(seq);
                        p.staged_results.set(key, None);
                    }
                }
                Record::PutSchedule { id, blob } => p.other.push(Other::PutSchedule { id, blob }),
                Record::DeleteSchedule { id } => p.other.push(Other::DeleteSchedule { id }),
                Record::PutState { kind, id, blob } => p.other.push(Other::PutState {
                    kind: *kind,
                    id,
                    blob,
                }),
                Record::DeleteState { kind, id } => {
                    p.other.push(Other::DeleteState { kind: *kind, id })
                }
                Record::Probe => p.probe = true,
            }
        }
        p
    }

    /// Carry out the plan through `w`, group by group in the order of the
    /// module documentation; `dead_at` (unix ms) is the time of every dead
    /// letter of the batch. Stops at the first error (the store's
    /// transaction then rolls back).
    pub(crate) fn write<W: RowWriter>(&self, w: &mut W, dead_at: i64) -> Result<(), W::Error> {
        if self.inserts.len() > 0 {
            w.insert_jobs(&self.inserts)?;
        }
        for u in &self.updates {
            match u {
                Update::Replace { seq, job } => w.replace_job(*seq, job)?,
                Update::Attempts { seq, attempts } => w.set_attempts(*seq, *attempts)?,
            }
        }
        for d in &self.dead {
            match d {
                Dead::Move(m) => w.move_to_dead(m, dead_at)?,
                Dead::Remove { msgid } => w.remove_dead(msgid)?,
            }
        }
        if !self.deletes.is_empty() {
            w.delete_jobs(&self.deletes)?;
        }
        if self.finished.job.len() > 0 {
            w.insert_finished(&self.finished)?;
        }
        if let Some((at_or_below, before)) = self.trim_finished {
            w.trim_finished(at_or_below, before)?;
        }
        if let Some(keep) = self.trim_dead {
            w.trim_dead(keep)?;
        }
        for o in &self.other {
            w.other(o)?;
        }
        if !self.results.seq.is_empty() {
            w.insert_results(&self.results)?;
        }
        if !self.result_deletes.is_empty() {
            w.delete_results(&self.result_deletes)?;
        }
        if self.probe {
            w.probe()?;
        }
        Ok(())
    }

    /// Whether one statement writes this batch (see the module
    /// documentation): only inserts of new jobs, deletes of rows older
    /// than the batch, finished jobs that the batch's own trim keeps.
    pub(crate) fn is_one_statement(&self) -> bool {
        let only_hot_groups = self.updates.is_empty()
            && self.dead.is_empty()
            && self.other.is_empty()
            && self.trim_dead.is_none();
        let deletes_old_rows = self.deletes.iter().all(|s| *s < self.first.job)
            && self.result_deletes.iter().all(|s| *s < self.first.result);
        let trim_keeps_new_rows = match self.trim_finished {
            None => true,
            Some((at_or_below, before)) => {
                self.finished
                    .job
                    .seq
                    .first()
                    .is_none_or(|s| *s > at_or_below)
                    && self.finished.finished_at.iter().all(|t| *t >= before)
            }
        };
        only_hot_groups && deletes_old_rows && trim_keeps_new_rows
    }

    fn next_job(&mut self) -> i64 {
        let s = self.seqs.job;
        self.seqs.job += 1;
        s
    }

    /// The unfinished row of `msgid`, which the batch then forgets.
    fn take_row(&mut self, rows: &RowIndex, msgid: &str) -> Option<i64> {
        let key = Key::of(msgid);
        let seq = self.staged.get(rows, &key)?;
        self.staged.set(key, None);
        Some(seq)
    }
}

// How a `JobRecord` is laid out in a row, the same in both stores and in
// every table that holds jobs. These choices stay inside the stores; the
// records are the core's.
//
// - `route`: empty when it equals `queue` (the common case costs no text);
//   read back as the queue.
// - times: unix milliseconds as a signed 64-bit integer; a time past
//   `i64::MAX` ms (year 292 million) is stored as `i64::MAX`, and a
//   negative one (only from a hand-edited row) reads as 0.
// - a delivery count as a signed 32-bit integer (PostgreSQL's `INTEGER`).

/// The `route` column: empty when it equals `queue`.
pub(crate) fn route_column(job: &JobRecord) -> &str {
    if job.route == job.queue {
        ""
    } else {
        &job.route
    }
}

/// A delivery count as `INTEGER` (a count past `i32::MAX` is stored as it).
pub(crate) fn attempts_column(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Unix ms as a 64-bit integer (past `i64::MAX` stored as it).
pub(crate) fn unix_ms_column(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// A 64-bit integer back to unix ms (a negative one, only from a
/// hand-edited row, reads as 0).
pub(crate) fn unix_ms_from_column(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0)
}

/// Now, as a dead letter's time (the time of the append; the same for
/// every dead letter of a batch).
pub(crate) fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| unix_ms_column(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(msgid: &str) -> JobRecord {
        JobRecord {
            msgid: msgid.into(),
            client: vec![1],
            queue: "q".into(),
            route: "q".into(),
            headers: b"reply-requested".to_vec(),
            payload: b"[]".to_vec(),
            attempts: 0,
            accepted_at_unix_ms: 1_000,
            run_at_unix_ms: None,
        }
    }

    fn finished(msgid: &str, keep: usize) -> Record {
        Record::Finished {
            record: FinishedRecord {
                job: job(msgid),
                outcome: "done".into(),
                started_at_unix_ms: None,
                finished_at_unix_ms: 2_000,
                result: Some(b"1".to_vec()),
                result_truncated: false,
            },
            keep,
            drop_before_unix_ms: 500,
        }
    }

    fn held(msgid: &str) -> ResultRecord {
        ResultRecord {
            msgid: msgid.into(),
            client: vec![1],
            status: emqp_proto::ResultStatus::Ok,
            payload: b"{}".to_vec(),
            receipt: false,
            held_at_unix_ms: 5,
        }
    }

    #[test]
    fn a_busy_batch_is_three_multi_row_statements() {
        let mut rows = RowIndex::default();
        rows.set(Key::of("old1"), Some(1));
        rows.set(Key::of("old2"), Some(2));
        let records = vec![
            Record::Accepted(job("a")),
            Record::Accepted(job("b")),
            finished("old1", 10),
            Record::Completed {
                msgid: "old2".into(),
            },
            Record::Probe,
        ];
        let p = Plan::build(
            &records,
            &rows,
            &RowIndex::default(),
            Seqs {
                job: 3,
                finished: 7,
                dead: 1,
                result: 1,
            },
        );
        assert_eq!(p.inserts.seq, [3, 4]);
        assert_eq!(p.inserts.msgid, ["a", "b"]);
        assert_eq!(
            p.inserts.route,
            ["", ""],
            "route equal to the queue is empty"
        );
        assert_eq!(p.deletes, [1, 2]);
        assert_eq!(p.finished.job.seq, [7]);
        // The newest 10 kept: rows at or below 7 - 10 go.
        assert_eq!(p.trim_finished, Some((-3, 500)));
        assert!(p.updates.is_empty() && p.dead.is_empty() && p.other.is_empty());
        assert!(p.is_one_statement(), "the hot path");
        assert_eq!(
            p.seqs,
            Seqs {
                job: 5,
                finished: 8,
                dead: 1,
                result: 1
            }
        );
        // The index itself is untouched until the store applies `staged`.
        assert_eq!(rows.get(&Key::of("a")), None);
        let mut applied = rows;
        p.staged.apply(&mut applied);
        assert_eq!(applied.get(&Key::of("a")), Some(3));
        assert_eq!(applied.get(&Key::of("old1")), None);
    }

    #[test]
    fn a_msgid_reused_in_one_batch_gets_a_new_row_and_updates_stay_in_order() {
        let rows = RowIndex::default();
        let mut again = job("m");
        again.payload = b"second".to_vec();
        let records = vec![
            Record::Accepted(job("m")),
            Record::Accepted(again.clone()),
            Record::Attempt {
                msgid: "m".into(),
                attempts: 2,
            },
            Record::Completed { msgid: "m".into() },
            Record::Accepted(job("m")),
            Record::Attempt {
                msgid: "unknown".into(),
                attempts: 9,
            },
        ];
        let p = Plan::build(&records, &rows, &RowIndex::default(), Seqs::default());
        assert_eq!(p.inserts.seq, [1, 2], "a new row after the completion");
        assert_eq!(
            p.updates,
            [
                Update::Replace {
                    seq: 1,
                    job: &again
                },
                Update::Attempts {
                    seq: 1,
                    attempts: 2
                }
            ]
        );
        assert_eq!(p.deletes, [1]);
        assert!(
            !p.is_one_statement(),
            "a row inserted and changed in one batch"
        );
        let mut idx = RowIndex::default();
        p.staged.apply(&mut idx);
        assert_eq!(idx.get(&Key::of("m")), Some(2));
    }

    #[test]
    fn dead_letters_move_rows_and_keep_their_order_with_removals() {
        let mut rows = RowIndex::default();
        rows.set(Key::of("x"), Some(5));
        let records = vec![
            Record::DeadLettered {
                msgid: "x".into(),
                reason: "lost".into(),
                error: None,
                keep: 100,
            },
            Record::DeadLetterRemoved { msgid: "x".into() },
            Record::DeadLettered {
                msgid: "gone".into(),
                reason: "lost".into(),
                error: None,
                keep: 3,
            },
            Record::QueuePaused {
                queue: "q".into(),
                paused: true,
            },
            Record::PutSchedule {
                id: "s".into(),
                blob: vec![1],
            },
            Record::DeleteSchedule { id: "s".into() },
        ];
        let p = Plan::build(&records, &rows, &RowIndex::default(), Seqs::default());
        assert_eq!(
            p.dead,
            [
                Dead::Move(DeadMove {
                    job_seq: 5,
                    seq: 1,
                    reason: "lost",
                    error: None,
                }),
                Dead::Remove { msgid: "x" }
            ]
        );
        assert_eq!(p.deletes, [5], "a moved row leaves the jobs table");
        assert_eq!(p.trim_dead, Some(3), "the smallest keep of the batch");
        assert!(!p.is_one_statement());
        assert_eq!(
            p.other,
            [
                Other::Pause { queue: "q" },
                Other::PutSchedule {
                    id: "s",
                    blob: &[1]
                },
                Other::DeleteSchedule { id: "s" }
            ]
        );
    }

    #[test]
    fn finished_rows_the_batch_would_trim_take_the_general_path() {
        let rows = RowIndex::default();
        // keep 1 of 2 finished in this batch: the first must go at once.
        let records = vec![finished("x", 1), finished("y", 1)];
        let p = Plan::build(&records, &rows, &RowIndex::default(), Seqs::default());
        assert_eq!(p.trim_finished, Some((1, 500)));
        assert!(!p.is_one_statement());
        // Older than the cut-off: trimmed in the same batch.
        let mut old = finished("z", 10);
        if let Record::Finished { record, .. } = &mut old {
            record.finished_at_unix_ms = 100;
        }
        assert!(
            !Plan::build(&[old], &rows, &RowIndex::default(), Seqs::default()).is_one_statement()
        );
        assert!(Plan::build(
            &[finished("w", 10)],
            &rows,
            &RowIndex::default(),
            Seqs::default()
        )
        .is_one_statement());
        assert!(Plan::build(
            &[Record::Probe],
            &rows,
            &RowIndex::default(),
            Seqs::default()
        )
        .is_one_statement());
    }

    #[test]
    fn held_results_are_inserted_and_released_by_row() {
        let mut results = RowIndex::default();
        results.set(Key::of("old"), Some(4));
        let r = held;
        let records = vec![
            Record::ResultHeld(r("new")),
            Record::ResultReleased {
                msgid: "old".into(),
            },
            Record::ResultReleased {
                msgid: "unknown".into(),
            },
        ];
        let seqs = Seqs {
            result: 5,
            ..Seqs::default()
        };
        let p = Plan::build(&records, &RowIndex::default(), &results, seqs);
        assert_eq!(p.results.seq, [5]);
        assert_eq!(p.result_deletes, [4]);
        assert!(p.is_one_statement());
        // Held and released in one batch: a row inserted and deleted.
        let records = vec![
            Record::ResultHeld(r("x")),
            Record::ResultReleased { msgid: "x".into() },
        ];
        let p = Plan::build(&records, &RowIndex::default(), &results, seqs);
        assert_eq!(
            (p.results.seq.clone(), p.result_deletes.clone()),
            (vec![5], vec![5])
        );
        assert!(!p.is_one_statement());
    }

    /// A writer that notes which group came when.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl RowWriter for Log {
        type Error = String;
        fn insert_jobs(&mut self, j: &JobColumns<'_>) -> Result<(), String> {
            self.0.push(format!("insert jobs {:?}", j.seq));
            Ok(())
        }
        fn replace_job(&mut self, seq: i64, _: &JobRecord) -> Result<(), String> {
            self.0.push(format!("replace {seq}"));
            Ok(())
        }
        fn set_attempts(&mut self, seq: i64, attempts: i32) -> Result<(), String> {
            self.0.push(format!("attempts {seq} {attempts}"));
            Ok(())
        }
        fn move_to_dead(&mut self, m: &DeadMove<'_>, at: i64) -> Result<(), String> {
            self.0
                .push(format!("dead {} as {} at {at}", m.job_seq, m.seq));
            Ok(())
        }
        fn remove_dead(&mut self, msgid: &str) -> Result<(), String> {
            self.0.push(format!("forget dead {msgid}"));
            Ok(())
        }
        fn delete_jobs(&mut self, seqs: &[i64]) -> Result<(), String> {
            self.0.push(format!("delete jobs {seqs:?}"));
            Ok(())
        }
        fn insert_finished(&mut self, f: &FinishedColumns<'_>) -> Result<(), String> {
            self.0.push(format!("insert finished {:?}", f.job.seq));
            Ok(())
        }
        fn trim_finished(&mut self, at_or_below: i64, before: i64) -> Result<(), String> {
            self.0
                .push(format!("trim finished <= {at_or_below} or < {before}"));
            Ok(())
        }
        fn trim_dead(&mut self, keep: i64) -> Result<(), String> {
            self.0.push(format!("trim dead to {keep}"));
            Ok(())
        }
        fn other(&mut self, o: &Other<'_>) -> Result<(), String> {
            self.0.push(format!("{o:?}"));
            Ok(())
        }
        fn insert_results(&mut self, r: &ResultColumns<'_>) -> Result<(), String> {
            self.0.push(format!("insert results {:?}", r.seq));
            Ok(())
        }
        fn delete_results(&mut self, seqs: &[i64]) -> Result<(), String> {
            if seqs.contains(&99) {
                return Err("refused".into());
            }
            self.0.push(format!("delete results {seqs:?}"));
            Ok(())
        }
        fn probe(&mut self) -> Result<(), String> {
            self.0.push("probe".into());
            Ok(())
        }
    }

    #[test]
    fn a_plan_is_written_group_by_group_in_one_order_for_every_store() {
        let mut rows = RowIndex::default();
        rows.set(Key::of("old"), Some(1));
        rows.set(Key::of("lost"), Some(2));
        let mut results = RowIndex::default();
        results.set(Key::of("r-old"), Some(3));
        let r = held("r-new");
        // Records in an order unlike the groups'.
        let records = vec![
            Record::Probe,
            Record::ResultReleased {
                msgid: "r-old".into(),
            },
            Record::ResultHeld(r),
            Record::PutSchedule {
                id: "s".into(),
                blob: vec![1],
            },
            finished("old", 10),
            Record::DeadLettered {
                msgid: "lost".into(),
                reason: "lost".into(),
                error: None,
                keep: 5,
            },
            Record::Attempt {
                msgid: "new".into(),
                attempts: 2,
            },
            Record::Accepted(job("new")),
            Record::Attempt {
                msgid: "new".into(),
                attempts: 3,
            },
        ];
        let p = Plan::build(
            &records,
            &rows,
            &results,
            Seqs {
                job: 10,
                finished: 20,
                dead: 30,
                result: 40,
            },
        );
        let mut log = Log::default();
        p.write(&mut log, 777).unwrap();
        assert_eq!(
            log.0,
            [
                "insert jobs [10]",
                "attempts 10 3",
                "dead 2 as 30 at 777",
                "delete jobs [1, 2]",
                "insert finished [20]",
                "trim finished <= 10 or < 500",
                "trim dead to 5",
                "PutSchedule { id: \"s\", blob: [1] }",
                "insert results [40]",
                "delete results [3]",
                "probe",
            ]
        );
        // The first error stops the writing (the store rolls back).
        let mut held = RowIndex::default();
        held.set(Key::of("r-old"), Some(99));
        let p = Plan::build(&records, &rows, &held, Seqs::default());
        let mut log = Log::default();
        assert_eq!(p.write(&mut log, 0), Err("refused".to_string()));
        assert!(!log.0.contains(&"probe".to_string()), "{:?}", log.0);
    }

    #[test]
    fn columns_clamp_what_postgres_cannot_hold() {
        assert_eq!(attempts_column(u32::MAX), i32::MAX);
        assert_eq!(unix_ms_column(u64::MAX), i64::MAX);
        assert_eq!(unix_ms_from_column(-5), 0);
        let mut j = job("r");
        j.route = "default".into();
        assert_eq!(route_column(&j), "default");
    }
}
