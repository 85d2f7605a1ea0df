//! Completion: REPLYs, retries, dead letters, RESULTs.
//!
//! - **Completion.** A worker REPLY `[payload, orig_msgid, status?]`
//!   completes that job exactly (status `ok` when absent); with
//!   `reply-requested` the client gets `RESULT [orig_msgid, status,
//!   payload]` once the completion is journaled (and the result is held
//!   until delivered: `results.rs`). A REPLY without
//!   orig_msgid (seed form) completes the worker's oldest in-flight
//!   reply-requested job.
//! - **Legacy workers** ([`WorkerKind::Legacy`], no `job-ack`): a READY
//!   also completes the worker's oldest in-flight job that is *not*
//!   reply-requested (those wait for their REPLY) — except the READY that
//!   follows a REPLY (0.3.13 sends REPLY, then READY for the same slot),
//!   which only frees that slot. This is a heuristic: a legacy worker does
//!   not say which fire-and-forget job ended, so the oldest is assumed, and
//!   start-up READYs that arrive after a dispatch complete that job early
//!   (it is then not redelivered if the worker dies). `job-ack` workers
//!   are tracked exactly.
//! - **Reconnects.** A `job-ack` worker's REPLY for a job that is not in
//!   flight on it completes that job wherever it is — in flight on another
//!   identity, or queued / waiting for a retry after a redelivery —
//!   because a job manager that reconnects with a new identity delivers
//!   the REPLY of a job that ran across the reconnect on the new
//!   connection (slots come from READYs, so no slot count changes). Any
//!   other REPLY whose msgid is not in flight on that worker (late,
//!   duplicate, legacy worker) is ignored: a result is forwarded at most
//!   once. **Only the job's holder may take it back**: the worker must
//!   have the take-back key of the worker the job was delivered to (its
//!   job manager listed it in the INFORM of its new connection;
//!   `peers.rs`, "Take-back keys"). A REPLY or RUNNING from any other
//!   worker for a job it does not hold is ignored with a warning (one
//!   line per claim, rate-limited), and the holder's run goes on.
//! - **REPLYs sent again.** An emq job manager sends the REPLYs of its
//!   last interval × liveness again after a reconnect, as they were (same
//!   message msgid), when this router's ACK listed `reply-resend`
//!   (docs/PROTOCOL.md, "Link resets"); the first copy may have been lost
//!   with the old connection. Each REPLY message counts at most once: a
//!   copy of one that ended its job finds no job (ignored, so no second
//!   RESULT); a copy of a failed REPLY that put its job back for a retry
//!   is recognised by its message msgid, which the job keeps
//!   ([`crate::jobs::JobExtra::retry_replies`]), and ignored wherever the
//!   job is now (waiting for its retry, queued, or in flight again), so it
//!   neither spends a retry nor ends the next try. A copy whose first
//!   never arrived is a REPLY like any other (the rules above).
//! - **Adoption.** A job manager that reconnects while jobs run (a link
//!   reset, a router found silent) may list them in `RUNNING [msgid...]`
//!   once the ACK of its new connection listed `adopt-running`. Each such
//!   job that is still in flight on another identity (the old one, not
//!   yet dropped), or back in its queue after that identity was dropped
//!   (redelivered, not yet handed out again), moves onto the new identity
//!   as in flight, without taking a slot (the job manager counts it as a
//!   busy slot and offers no READY for it); a requeued one has its lost
//!   delivery taken back. Its REPLY then completes it as usual, and the
//!   old identity's removal does not deliver it again. A job already
//!   handed out again, or finished, is left alone: that run happens (at
//!   least once). An adopted job keeps the start of the delivery it was
//!   taken from, when the router knows it.
//! - **Start times** (issue 32). A delivery's dispatch time goes with it
//!   to its end: the run (dispatch → REPLY, failed tries too) is observed
//!   in its queue's `run_time` histogram, and a finished job keeps its
//!   last delivery's start (`FinishedRecord::started_at_unix_ms`,
//!   journaled in its `Finished` record and restored), so that views show
//!   how long it waited (accepted → started) apart from how long it ran
//!   (started → finished). A job that never ran (cancelled while waiting),
//!   or one whose delivery the router did not see start (taken back from
//!   its queue after a restart), has none.
//! - **Retries** are the router's alone (job managers run each delivery
//!   once): a REPLY with status `failed` for a job with `retry-count:N`
//!   and fewer than N failures so far puts the job back (at the back of
//!   its queue) after `backoff(n)` = base·2ⁿ⁻¹ capped at max, so a failing
//!   job runs N+1 times at most. When retries are exhausted the job is
//!   dead-lettered with the worker's last error and only then does the
//!   client get `RESULT failed` with that payload. The `attempts` of a
//!   failed RESULT's error object is set to the number of executions.
//! - **Dead letters** (policy choice): a dead-lettered job that was
//!   `reply-requested` gets a `RESULT [msgid, failed, payload]` — the
//!   worker's last error after exhausted retries, or `{"error": {"kind":
//!   "dead-lettered", "message": ..., "attempts": N}}` after exhausted
//!   deliveries. `REJECT` stays reserved for REQUESTs that were never
//!   accepted. Dead letters are listed on the admin socket (the last
//!   `dead_letter_keep`) and journaled.

use std::time::Duration;

use std::rc::Rc;

use emqp_proto::{Reply, ResultStatus};

use super::Router;
use crate::data::DeadLetter;
use crate::event::Action;
use crate::jobs::{Job, JobId, JobState};
use crate::journal::{FinishedRecord, Record};

/// What [`Router::take_back`] found.
enum TakeBack {
    /// Taken: back from its queue (`true`) or off another worker, then
    /// with the core time that delivery started.
    Taken {
        from_queue: bool,
        started: Option<Duration>,
    },
    /// Nothing to take it from (in flight on the claimant, finished, never
    /// lost).
    Nothing,
    /// Held elsewhere, and the claimant lacks the holder's key.
    NotTheHolder,
}

/// Payload bytes a finished job or dead letter keeps for lookups.
pub(crate) const PAYLOAD_KEPT: usize = 1000;
use crate::util::{ident, micros};
use crate::workers::{DispatchSeq, Inflight, WorkerId, WorkerKind};

impl Router {
    /// Legacy READY: the oldest in-flight job of the worker that is not
    /// reply-requested is done.
    pub(super) fn complete_oldest_fire_and_forget(
        &mut self,
        id: WorkerId,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let Some(w) = self.pool.get(id) else { return };
        let found = w
            .inflight
            .iter()
            .find(|(_, i)| {
                self.store
                    .jobs
                    .get(&i.job)
                    .is_some_and(|j| !j.reply_requested())
            })
            .map(|(seq, _)| *seq);
        if let Some(seq) = found {
            if let Some(i) = self.finish_inflight(id, seq) {
                self.job_done(i.job, id, ResultStatus::Ok, None, Some(i.since), now, out);
            }
        }
    }

    /// Take the in-flight entry `seq` off worker `id` (the job and when
    /// it was dispatched).
    fn finish_inflight(&mut self, id: WorkerId, seq: DispatchSeq) -> Option<Inflight> {
        let jid = self.pool.get(id)?.inflight.get(&seq)?.job;
        let msgid = self.store.jobs.get(&jid)?.msgid().to_string();
        self.pool.finish(id, seq, &msgid)
    }

    /// A worker's REPLY (message msgid `reply_msgid`).
    pub(super) fn on_worker_reply(
        &mut self,
        id: WorkerId,
        reply_msgid: &str,
        r: Reply,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let Some(w) = self.pool.get(id) else { return };
        let seq = match &r.orig_msgid {
            Some(m) => w.by_msgid.get(m).copied(),
            None => w
                .inflight
                .iter()
                .find(|(_, i)| {
                    self.store
                        .jobs
                        .get(&i.job)
                        .is_some_and(|j| j.reply_requested())
                })
                .map(|(seq, _)| *seq),
        };
        let Some(seq) = seq else {
            if w.kind == WorkerKind::JobAck {
                if let Some(m) = &r.orig_msgid {
                    if self.reply_elsewhere(id, reply_msgid, m, &r, now, out) {
                        return;
                    }
                }
            }
            log::debug!(
                "REPLY from worker {} for {} not in flight (late or duplicate): ignored",
                self.pool
                    .get(id)
                    .map(|w| ident(&w.identity).into_owned())
                    .unwrap_or_default(),
                r.orig_msgid.as_deref().unwrap_or("<no msgid>")
            );
            return;
        };
        let taken = w
            .inflight
            .get(&seq)
            .is_some_and(|i| self.reply_taken(i.job, reply_msgid));
        if taken {
            return;
        }
        let Some(i) = self.finish_inflight(id, seq) else {
            return;
        };
        if let Some(w) = self.pool.get_mut(id) {
            w.kind.owe_ready();
        }
        let status = r.status.unwrap_or(ResultStatus::Ok);
        let reply = Some((reply_msgid, r.payload));
        self.job_done(i.job, id, status, reply, Some(i.since), now, out);
    }

    /// Whether the REPLY message `reply_msgid` already put job `jid` back
    /// for a retry (a copy sent again after a reconnect): then it changes
    /// nothing.
    fn reply_taken(&self, jid: JobId, reply_msgid: &str) -> bool {
        let taken = self
            .store
            .jobs
            .get(&jid)
            .and_then(|j| j.extra.as_ref())
            .is_some_and(|e| e.retry_replies.iter().any(|m| &**m == reply_msgid));
        if taken {
            log::debug!(
                "REPLY {reply_msgid} was taken already (it put its job back for a retry): ignored"
            );
        }
        taken
    }

    /// A job-ack worker's REPLY for a job that is not in flight on it (its
    /// job manager reconnected with a new identity while the job ran): the
    /// job is completed wherever it is — in flight on another (old)
    /// identity, or queued / waiting for a retry after a redelivery.
    /// Returns whether a job was found.
    fn reply_elsewhere(
        &mut self,
        id: WorkerId,
        reply_msgid: &str,
        msgid: &str,
        r: &Reply,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(jid) = self.store.find(msgid) else {
            return false;
        };
        if self.reply_taken(jid, reply_msgid) {
            return true;
        }
        let started = match self.take_back(id, jid) {
            TakeBack::Taken { started, .. } => started,
            TakeBack::Nothing => return false,
            TakeBack::NotTheHolder => {
                self.log_stranger(id, "REPLY", msgid, now);
                return true;
            }
        };
        log::info!(
            "REPLY for {msgid} from worker {} completes the job delivered on another connection",
            self.pool
                .get(id)
                .map(|w| ident(&w.identity).into_owned())
                .unwrap_or_default()
        );
        let status = r.status.unwrap_or(ResultStatus::Ok);
        let reply = Some((reply_msgid, r.payload.clone()));
        self.job_done(jid, id, status, reply, started, now, out);
        true
    }

    /// `RUNNING [msgid...]` from a job-ack worker after the ACK of its
    /// reconnect: it still runs these jobs, delivered on an earlier
    /// connection. Each is moved onto this worker (see "Adoption" in the
    /// module documentation); the others are left as they are.
    pub(super) fn on_running(&mut self, id: WorkerId, msgids: Vec<String>, now: Duration) {
        let Some(w) = self.pool.get(id) else { return };
        if w.kind != WorkerKind::JobAck {
            log::debug!("RUNNING from a worker without job-ack: ignored");
            return;
        }
        let who = ident(&w.identity).into_owned();
        let mut adopted = 0usize;
        for msgid in msgids {
            let Some(jid) = self.store.find(&msgid) else {
                log::debug!("RUNNING {msgid} from {who}: no such unfinished job");
                continue;
            };
            let (from_queue, started) = match self.take_back(id, jid) {
                TakeBack::Taken {
                    from_queue,
                    started,
                } => (from_queue, started),
                TakeBack::Nothing => {
                    log::debug!("RUNNING {msgid} from {who}: on it already, or handed out again");
                    continue;
                }
                TakeBack::NotTheHolder => {
                    self.log_stranger(id, "RUNNING", &msgid, now);
                    continue;
                }
            };
            // It runs since its earlier delivery started, when known.
            let since = started.unwrap_or(now);
            let Some(seq) = self.pool.record_dispatch(id, jid, &msgid, false, since) else {
                // Cannot happen (the worker is known): keep the job.
                self.store.requeue(jid, true);
                continue;
            };
            if let Some(job) = self.store.jobs.get_mut(&jid) {
                if from_queue {
                    // Its delivery was not lost after all.
                    let extra = job.extra_mut();
                    extra.lost = extra.lost.saturating_sub(1);
                }
            }
            self.store.set_inflight(jid, id, seq);
            adopted += 1;
        }
        if adopted > 0 {
            self.stats.adopted += adopted as u64;
            log::info!(
                "worker {who} reconnected running {adopted} job(s) delivered on its earlier \
                 connection: moved to it, not delivered again"
            );
        }
    }

    /// Take job `jid` back, for worker `id`, from where an earlier
    /// delivery of it left it after a reconnect (a REPLY or a RUNNING from
    /// the job manager's new identity): in flight on another identity, or
    /// queued / waiting for a retry delay after that delivery was counted
    /// lost — if `id` holds the take-back key of the worker the job was
    /// delivered to (see "Reconnects").
    fn take_back(&mut self, id: WorkerId, jid: JobId) -> TakeBack {
        let Some(job) = self.store.jobs.get(&jid) else {
            return TakeBack::Nothing;
        };
        let key = self.pool.get(id).and_then(|w| w.take_back.as_deref());
        let holds = |other: Option<&str>| key.is_some() && key == other;
        let lost = job.lost() > 0;
        let lost_from = job.extra.as_ref().and_then(|e| e.lost_from.as_deref());
        let presumed = self.store.is_presumed(jid, job.route());
        match job.state {
            // Restored and presumed running (`flow.rs`, "Restarts"): the
            // restart lost its holder's key, so the job manager that
            // names it takes it.
            JobState::Queued if presumed => {
                self.store.remove_queued(jid);
                TakeBack::Taken {
                    from_queue: false,
                    started: None,
                }
            }
            JobState::InFlight { worker, seq } if worker != id => {
                let holder = self.pool.get(worker).and_then(|w| w.take_back.as_deref());
                if !holds(holder) {
                    return TakeBack::NotTheHolder;
                }
                let Some(i) = self.finish_inflight(worker, seq) else {
                    return TakeBack::Nothing;
                };
                if let Some(w) = self.pool.get_mut(worker) {
                    // A legacy worker would send a READY for that slot.
                    w.kind.owe_ready();
                }
                TakeBack::Taken {
                    from_queue: false,
                    started: Some(i.since),
                }
            }
            JobState::Queued | JobState::Delayed { .. } if lost && !holds(lost_from) => {
                TakeBack::NotTheHolder
            }
            JobState::Queued if lost => {
                self.store.remove_queued(jid);
                TakeBack::Taken {
                    from_queue: true,
                    started: None,
                }
            }
            JobState::Delayed { due } if lost => {
                self.store.delayed.remove(&(due, jid));
                TakeBack::Taken {
                    from_queue: true,
                    started: None,
                }
            }
            _ => TakeBack::Nothing,
        }
    }

    /// A claim of a job by a worker without its holder's take-back key.
    fn log_stranger(&mut self, id: WorkerId, what: &str, msgid: &str, now: Duration) {
        self.stats.foreign_claims += 1;
        if self.stranger_log.allow(now) {
            log::warn!(
                "{what} for {msgid} from worker {} ignored: that job was delivered to another \
                 job manager, and this one did not present its take-back key",
                self.pool
                    .get(id)
                    .map(|w| ident(&w.identity).into_owned())
                    .unwrap_or_default()
            );
        }
    }

    /// A job's delivery ended with `status`; `reply`: the msgid and
    /// payload of the REPLY message that ended it (`None`: a legacy
    /// worker's READY); `started`: core time that delivery was
    /// dispatched, when known (its run time goes to the queue's
    /// `run_time` histogram, and a finished job keeps it).
    #[allow(clippy::too_many_arguments)]
    fn job_done(
        &mut self,
        jid: JobId,
        worker: WorkerId,
        status: ResultStatus,
        reply: Option<(&str, Vec<u8>)>,
        started: Option<Duration>,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let (reply_msgid, payload) = match reply {
            Some((m, p)) => (Some(m), Some(p)),
            None => (None, None),
        };
        let Some(job) = self.store.jobs.get_mut(&jid) else {
            return;
        };
        if let Some(s) = started {
            let m = self.stats.queue_mut(job.route());
            m.run_time.observe(micros(now.saturating_sub(s)));
        }
        let cancelling = job.extra.as_ref().is_some_and(|e| e.cancelling);
        if status == ResultStatus::Failed && cancelling {
            // Cancelled by an operator: its job manager stopped it.
            let Some(job) = self.store.remove_job(jid) else {
                return;
            };
            self.finish_cancelled(job, "cancelled while it ran", started, now, out);
            return;
        }
        if status == ResultStatus::Failed && job.failures() < job.retry_count() {
            let extra = job.extra_mut();
            extra.failures += 1;
            extra.last_error = payload;
            if let Some(m) = reply_msgid {
                extra.took_retry_reply(m);
            }
            let failures = extra.failures;
            let delay = self.cfg.backoff(failures);
            log::info!(
                msgid:% = job.msgid(), queue:% = job.route();
                "job {} failed (try {} of {}), retrying in {} ms",
                job.msgid(),
                failures,
                job.retry_count() + 1,
                delay.as_millis()
            );
            self.stats.retried += 1;
            let meta = Rc::clone(&job.meta);
            self.stats.queue_mut(&meta.route).retried += 1;
            self.store.delay(jid, now.saturating_add(delay));
            return;
        }
        let Some(job) = self.store.remove_job(jid) else {
            return;
        };
        let executions = job.failures() + 1;
        let payload = match (status, payload) {
            (ResultStatus::Failed, Some(p)) => Some(with_attempts(p, executions)),
            (_, p) => p,
        };
        let failed_for_good = status == ResultStatus::Failed && job.retry_count() > 0;
        {
            let m = self.stats.queue_mut(job.route());
            if !failed_for_good {
                // (a dead letter counts itself finished in `dead_letter`)
                m.finished += 1;
                if status == ResultStatus::Failed {
                    m.failed += 1;
                } else {
                    m.processed += 1;
                }
                m.latency
                    .observe(micros(now.saturating_sub(job.accepted_at())));
            }
        }
        if let Some(w) = self.pool.get(worker) {
            match self.stats.processed_by_worker.get_mut(&w.identity) {
                Some(n) => *n += 1,
                None => {
                    self.stats.processed_by_worker.insert(w.identity.clone(), 1);
                }
            }
        }
        if failed_for_good {
            let reason = format!("failed after {executions} tries");
            self.dead_letter(job, reason, payload, now, out);
            return;
        }
        self.stats.completed += 1;
        if status == ResultStatus::Failed {
            self.stats.failed += 1;
        }
        log::debug!(
            msgid:% = job.msgid(), queue:% = job.route(), status:% = status.as_str();
            "job {} completed ({}) in {} ms",
            job.msgid(),
            status.as_str(),
            now.saturating_sub(job.accepted_at()).as_millis()
        );
        let payload = payload.unwrap_or_else(|| br#"{"value": null}"#.to_vec());
        let outcome = match status {
            ResultStatus::Ok => "done",
            ResultStatus::Failed => "failed",
        };
        self.record_finished(&job, outcome, Some(&payload), started, now);
        self.unique_job_ended(&job, Some((status, &payload)), out);
        self.workflow_job_ended(&job, status, &payload, now, out);
        self.batch_job_ended(&job, status, now, out);
        if job.reply_requested() && !job.client().is_empty() {
            self.send_result(&job, status, payload, now, out);
        }
    }

    /// Journal a finished job, and keep it for lookups (when retention is
    /// on): a `Finished` record, else `Completed`. `started`: core time
    /// its last delivery was dispatched (`None`: it never ran, or the
    /// router does not know, e.g. it was adopted after a restart), kept
    /// as `started_at_unix_ms` so that its wait (accepted → started) and
    /// its run (started → finished) are told apart.
    pub(super) fn record_finished(
        &mut self,
        job: &Job,
        outcome: &str,
        result: Option<&[u8]>,
        started: Option<Duration>,
        now: Duration,
    ) {
        let keep = self.cfg.retain_finished;
        if keep == 0 {
            self.journal.record(
                Record::Completed {
                    msgid: job.msgid().to_string(),
                },
                None,
            );
            return;
        }
        let finished_at = self.unix_ms(now);
        let drop_before = self.retention_cutoff(now);
        let mut j = self.job_record(job);
        j.payload.truncate(PAYLOAD_KEPT);
        let (result, result_truncated) = match result {
            Some(r) if r.len() > self.cfg.retain_result_bytes => (None, true),
            Some(r) => (Some(r.to_vec()), false),
            None => (None, false),
        };
        let record = FinishedRecord {
            job: j,
            outcome: outcome.to_string(),
            started_at_unix_ms: started.map(|s| self.unix_ms(s)),
            finished_at_unix_ms: finished_at,
            result,
            result_truncated,
        };
        if !self.journal.enabled() {
            // Memory mode: no copy for a journal that records nothing.
            self.finished.push(record, keep, drop_before);
            return;
        }
        self.finished.push(record.clone(), keep, drop_before);
        self.journal.record(
            Record::Finished {
                record,
                keep,
                drop_before_unix_ms: drop_before,
            },
            None,
        );
    }

    /// A job (already out of the store) ends cancelled: journaled and
    /// kept as `cancelled`, a `reply-requested` client gets a failed
    /// RESULT of kind `cancelled`.
    pub(super) fn finish_cancelled(
        &mut self,
        job: Job,
        why: &str,
        started: Option<Duration>,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        self.stats.cancelled += 1;
        log::info!(
            msgid:% = job.msgid(), queue:% = job.route();
            "job {} (queue {}) cancelled: {why}",
            job.msgid(),
            job.route()
        );
        let payload = serde_json::to_vec(&serde_json::json!({
            "error": {
                "kind": "cancelled",
                "message": format!("cancelled by an operator ({why})"),
                "attempts": job.attempts,
            }
        }))
        .unwrap_or_default();
        self.record_finished(&job, "cancelled", Some(&payload), started, now);
        self.unique_job_ended(&job, Some((ResultStatus::Failed, &payload)), out);
        self.workflow_job_ended(&job, ResultStatus::Failed, &payload, now, out);
        self.batch_job_ended(&job, ResultStatus::Failed, now, out);
        if job.reply_requested() && !job.client().is_empty() {
            self.send_result(&job, ResultStatus::Failed, payload, now, out);
        }
    }

    /// A job (already out of the store) gives up for good.
    pub(super) fn dead_letter(
        &mut self,
        job: Job,
        reason: String,
        error: Option<Vec<u8>>,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        self.stats.dead_lettered += 1;
        let m = self.stats.queue_mut(job.route());
        m.dead_lettered += 1;
        m.finished += 1;
        log::warn!(
            msgid:% = job.msgid(), queue:% = job.route();
            "job {} (queue {}) dead-lettered after {} deliveries: {reason}",
            job.msgid(),
            job.route(),
            job.attempts
        );
        self.journal.record(
            Record::DeadLettered {
                msgid: job.msgid().to_string(),
                reason: reason.clone(),
                error: error.clone(),
                keep: self.cfg.dead_letter_keep,
            },
            None,
        );
        {
            let payload = match &error {
                Some(p) => p.clone(),
                None => serde_json::to_vec(&serde_json::json!({
                    "error": {
                        "kind": "dead-lettered",
                        "message": reason,
                        "attempts": job.attempts,
                    }
                }))
                .unwrap_or_default(),
            };
            self.unique_job_ended(&job, Some((ResultStatus::Failed, &payload)), out);
            self.workflow_job_ended(&job, ResultStatus::Failed, &payload, now, out);
            self.batch_job_ended(&job, ResultStatus::Failed, now, out);
            if job.reply_requested() && !job.client().is_empty() {
                self.send_result(&job, ResultStatus::Failed, payload, now, out);
            }
        }
        // The whole job: a dead-letter retry accepts it again.
        let record = self.job_record(&job);
        self.keep_dead_letter(DeadLetter {
            job: record,
            reason,
            error,
            at_unix_ms: self.unix_ms(now),
        });
    }

    fn keep_dead_letter(&mut self, d: DeadLetter) {
        if self.cfg.dead_letter_keep == 0 {
            return;
        }
        if self.dead.len() >= self.cfg.dead_letter_keep {
            self.dead.pop_front();
        }
        self.dead.push_back(d);
    }

    /// Put dead letters recovered from a journal into the admin list
    /// (oldest first; only the last `dead_letter_keep` are kept). They do
    /// not count in [`crate::Stats::dead_lettered`] (this run's), only in
    /// the listed `count` of the admin STATUS.
    pub fn restore_dead_letters(&mut self, letters: impl IntoIterator<Item = DeadLetter>) -> usize {
        let mut n = 0;
        for d in letters {
            n += 1;
            self.keep_dead_letter(d);
        }
        self.restored_dead += n as u64;
        n
    }

    /// Delayed jobs whose retry delay ended go to the back of their queue.
    pub(super) fn requeue_due_retries(&mut self, now: Duration, out: &mut Vec<Action>) {
        let due = self.store.take_due(now);
        if due.is_empty() {
            return;
        }
        let mut routes: Vec<String> = Vec::new();
        for jid in due {
            self.store.requeue(jid, false);
            if let Some(j) = self.store.jobs.get(&jid) {
                let route = j.route();
                if !routes.iter().any(|r| r == route) {
                    routes.push(route.to_string());
                }
            }
        }
        for r in routes {
            self.pump(&r, now, out);
        }
    }
}

/// A failed payload with `error.attempts` set to `n` (the executions);
/// any other payload unchanged.
fn with_attempts(payload: Vec<u8>, n: u32) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&payload) else {
        return payload;
    };
    match v.get_mut("error").and_then(|e| e.as_object_mut()) {
        Some(e) => {
            e.insert("attempts".into(), n.into());
            serde_json::to_vec(&v).unwrap_or(payload)
        }
        None => payload,
    }
}
