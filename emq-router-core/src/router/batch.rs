//! Batches with callbacks (Sidekiq Pro's model), run by the router.
//!
//! - **Open.** `BATCH [{"op": "open", "on_success"?, "on_complete"?}]`
//!   (emq; msgid = the batch id) makes an open batch: a state row
//!   `batch`/ID, `REPLY [ID]` once it commits. Refused (`REJECT`) as a
//!   REQUEST would be: `journal-uncertain`, `shutting-down`,
//!   `journal-unavailable`, `malformed` (bad spec or id, a callback that
//!   is not a `run`/`call` job or carries `batch`), `duplicate-msgid`
//!   (the router holds a batch with this id opened otherwise, or one that
//!   finished), `queue-full` at [`MAX_BATCHES`] unfinished. The same open
//!   sent again while the batch is unfinished is acknowledged again.
//! - **Join.** A job whose HEADERS carry `batch:ID` of an unfinished batch
//!   is one of its jobs from its acceptance (`Router::accept` calls
//!   [`Router::batch_take`]): `pending` counts them. A REQUEST naming a
//!   batch that is closed, finished or unknown is refused `batch-closed`
//!   (`intake.rs`). Membership is not written anywhere but in the job's
//!   own journaled HEADERS: at start the restored jobs are counted again.
//! - **Count.** When a job of the batch ends for good (done, failed after
//!   its retries, dead-lettered, cancelled: `completion.rs` calls
//!   [`Router::batch_job_ended`]; a retry is not an end) it is counted
//!   `succeeded` or `failed` (its msgid kept among the first
//!   [`MAX_FAILED_IDS`] `failed_ids`), and the batch row is written in the
//!   same journal batch as the job's own record — encoded once when that
//!   journal batch is taken, however many of its jobs ended in it (a dirty
//!   set), not once per job end. A failed job run again
//!   (`dead-retry`, `requeue`) while its batch is unfinished is pending
//!   again, not a new job.
//! - **Close.** `BATCH [{"op": "close"}]`: no REQUEST joins any more (row
//!   written, `REPLY [ID]`); closing a closed or finished batch is
//!   acknowledged again; an unknown id is refused `not-found`.
//! - **Callbacks.** Once the batch is closed and no job of it is pending,
//!   in one journal batch: `on_success` (if given and no job failed) and
//!   `on_complete` (if given) are accepted as ordinary jobs, msgids
//!   `ID/on-success` and `ID/on-complete`, no client, their MSG with the
//!   batch's status first in `args` (`crate::batch`), and the batch's row
//!   is rewritten finished. So each callback is accepted exactly once:
//!   before the commit a restarted router still holds the closed batch
//!   with no job pending and submits them then; after it, the callbacks
//!   are restored jobs and the batch is finished. The callbacks then run
//!   as any job (their own `retry-count`...). The last [`FINISHED_KEPT`]
//!   finished batches stay visible to lookups, across restarts (their
//!   rows; the oldest's row is deleted when one more finishes).
//! - **Cancel.** Admin `cancel` of a batch id (`Router::cancel_batch`)
//!   closes the batch (no REQUEST joins any more), marks it cancelled
//!   (`cancelled_at_unix_ms`, in its row) and cancels each of its pending
//!   jobs as `cancel` does one job: a queued or delayed job at once, a
//!   running one through CANCEL to its job manager (refused for a 0.3.13
//!   job manager, which cannot cancel: that job runs on and is counted at
//!   its end). A cancelled job ends failed, so `on_success` is skipped and
//!   `on_complete` runs, once, when the last of them has stopped. An
//!   unfinished batch only: cancelling a finished one is a `conflict`.
//!   A router restarted before its jobs stopped cancels what it restores
//!   of a cancelled batch.
//! - **Journal failure.** A callback job accepted in a failed journal
//!   batch is accepted again (the batch's finished row is written with the
//!   next batch); a member job refused that way is no longer pending.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use emqp_proto::{Command, Headers, RejectReason, Reply, ResultStatus};
use serde_json::{json, Value};

use super::{frames_of, Router};
use crate::batch::{Batch, Event, Spec, MAX_BATCHES, MAX_FAILED_IDS};
use crate::event::{Action, Socket};
use crate::jobs::{Job, JobId};
use crate::journal::{Record, StateKind};
use crate::util::FastMap;

/// Finished batches kept for lookups.
pub(crate) const FINISHED_KEPT: usize = 1_000;

/// The batches the router holds.
#[derive(Debug, Default)]
pub(crate) struct Batches {
    /// Unfinished (open, or closed with jobs pending).
    pub(crate) live: BTreeMap<String, Batch>,
    /// Job msgid → batch id, for its pending jobs.
    jobs: FastMap<String, String>,
    pub(crate) finished: VecDeque<Batch>,
    pub(crate) opened: u64,
    pub(crate) finished_count: u64,
    /// Unfinished batches whose counts changed since the open journal
    /// batch was last taken: their rows are encoded once, when it is
    /// (`Router::write_dirty_batch_rows`), not at every job end.
    dirty: BTreeSet<String>,
    /// Rows encoded from `dirty` (tests: once per journal batch).
    pub(crate) dirty_rows_encoded: u64,
}

impl Batches {
    fn find(&self, id: &str) -> Option<(&Batch, bool)> {
        match self.live.get(id) {
            Some(b) => Some((b, true)),
            None => self
                .finished
                .iter()
                .rev()
                .find(|b| b.id == id)
                .map(|b| (b, false)),
        }
    }
}

impl Router {
    /// `BATCH [SPEC]` from `client`.
    pub(super) fn on_batch(
        &mut self,
        client: Vec<u8>,
        msgid: String,
        spec: Vec<u8>,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let at = self.unix_ms(now);
        let outcome = match serde_json::from_slice::<Spec>(&spec) {
            Err(e) => Err((RejectReason::Malformed, format!("batch: {e}"))),
            Ok(s) => self.batch_op(&msgid, s, at, now, out),
        };
        match outcome {
            Ok(()) => {
                let ack = frames_of(self.ids.next_id(), Command::Reply(Reply::ack_of(&msgid)));
                self.send_after_journal(Socket::Frontend, client, ack, None, out);
            }
            Err((reason, text)) => {
                log::warn!("BATCH {msgid} rejected ({}): {text}", reason.as_str());
                self.reject(client, msgid, reason, text, out);
            }
        }
    }

    fn batch_op(
        &mut self,
        id: &str,
        spec: Spec,
        at: u64,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Result<(), (RejectReason, String)> {
        let held = self
            .batches
            .find(id)
            .map(|(b, live)| (live, b.opened_by(&spec)));
        if self.journal.is_uncertain(id) {
            return Err((
                RejectReason::JournalUncertain,
                "the router cannot yet tell whether its journal stored this batch; send it \
                 again with the same msgid"
                    .into(),
            ));
        }
        match spec {
            Spec::Open(_) if held == Some((true, true)) => {
                log::debug!("BATCH {id} open sent again: acknowledged as the one held");
                Ok(())
            }
            Spec::Open(open) => {
                if self.is_draining() {
                    return Err((
                        RejectReason::ShuttingDown,
                        "the router is shutting down".into(),
                    ));
                }
                if let Some(why) = self.journal.refusal() {
                    self.journal.count_refused();
                    return Err((RejectReason::JournalUnavailable, why));
                }
                if held.is_some() {
                    return Err((
                        RejectReason::DuplicateMsgid,
                        format!("the router holds a batch {id} (opened otherwise, or finished)"),
                    ));
                }
                if self.batches.live.len() >= MAX_BATCHES {
                    return Err((
                        RejectReason::QueueFull,
                        format!("the router holds {MAX_BATCHES} unfinished batches (its limit)"),
                    ));
                }
                let o = *open;
                let b = Batch::open(id, o.on_success, o.on_complete, o.description, at)
                    .map_err(|e| (RejectReason::Malformed, format!("batch: {e}")))?;
                log::info!("batch {id} opened");
                self.put_batch_row(id, b.encode());
                self.batches.opened += 1;
                self.batches.live.insert(id.to_string(), b);
                Ok(())
            }
            Spec::Close => {
                let Some((live, _)) = held else {
                    return Err((
                        RejectReason::NotFound,
                        format!("no batch {id} (unfinished or recent)"),
                    ));
                };
                let closed = !live || self.batches.live.get(id).is_some_and(Batch::is_closed);
                if closed {
                    log::debug!("BATCH {id} close sent again: acknowledged");
                    return Ok(());
                }
                if let Some(why) = self.journal.refusal() {
                    self.journal.count_refused();
                    return Err((RejectReason::JournalUnavailable, why));
                }
                let Some(b) = self.batches.live.get_mut(id) else {
                    return Ok(());
                };
                b.closed_unix_ms = Some(at);
                log::info!(
                    "batch {id} closed: {} job(s), {} pending",
                    b.total(),
                    b.pending
                );
                let blob = b.encode();
                self.put_batch_row(id, blob);
                self.settle_batch(id, now, out);
                Ok(())
            }
        }
    }

    /// Admin `cancel` of batch `id` (module documentation). `None`: the
    /// router holds no batch `id`; `Some(Err)`: it is finished.
    pub(super) fn cancel_batch(
        &mut self,
        id: &str,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Option<Result<Value, String>> {
        let at = self.unix_ms(now);
        let Some(b) = self.batches.live.get_mut(id) else {
            let (b, _) = self.batches.find(id)?;
            return Some(Err(format!(
                "batch {id} already finished ({} succeeded, {} failed)",
                b.succeeded, b.failed
            )));
        };
        b.closed_unix_ms.get_or_insert(at);
        b.cancelled_unix_ms.get_or_insert(at);
        let blob = b.encode();
        self.put_batch_row(id, blob);
        let jobs = self.cancel_batch_jobs(id, now, out);
        self.settle_batch(id, now, out);
        let state = if self.batches.live.contains_key(id) {
            "cancelling"
        } else {
            "cancelled"
        };
        Some(Ok(json!({ "batch": id, "state": state, "jobs": jobs })))
    }

    /// Cancel each pending job of batch `id` as `cancel` does one job;
    /// what each `cancel` answered.
    fn cancel_batch_jobs(&mut self, id: &str, now: Duration, out: &mut Vec<Action>) -> Vec<Value> {
        let mut members: Vec<String> = self
            .batches
            .jobs
            .iter()
            .filter(|(_, b)| b.as_str() == id)
            .map(|(m, _)| m.clone())
            .collect();
        members.sort();
        log::info!(
            "batch {id} cancelled by an operator: {} pending job(s) cancelled",
            members.len()
        );
        self.cancel_each(members, now, out)
    }

    /// Batch `id`'s row is to be written with the open journal batch
    /// (nothing is written without a journal).
    fn mark_batch_dirty(&mut self, id: &str) {
        if self.journal.enabled() && !self.batches.dirty.contains(id) {
            self.batches.dirty.insert(id.to_string());
        }
    }

    /// The open journal batch is being taken: the rows of the unfinished
    /// batches counted since the last one, encoded once each. (A batch
    /// that finished meanwhile wrote its finished row itself.)
    pub(super) fn write_dirty_batch_rows(&mut self) {
        for id in std::mem::take(&mut self.batches.dirty) {
            if let Some(b) = self.batches.live.get(&id) {
                let blob = b.encode();
                self.batches.dirty_rows_encoded += 1;
                self.put_batch_row(&id, blob);
            }
        }
    }

    fn put_batch_row(&mut self, id: &str, blob: Vec<u8>) {
        self.journal.record(
            Record::PutState {
                kind: StateKind::Batch,
                id: id.to_string(),
                blob,
            },
            None,
        );
    }

    /// Why a REQUEST with these HEADERS cannot join its batch
    /// (`batch-closed`), if it names one.
    pub(super) fn batch_refusal(&self, headers: &Headers) -> Option<String> {
        let id = headers.batch()?;
        match self.batches.live.get(id) {
            Some(b) if !b.is_closed() => None,
            Some(_) => Some(format!("batch {id} is closed")),
            None if self.batches.find(id).is_some() => Some(format!("batch {id} is finished")),
            None => Some(format!("the router holds no unfinished batch {id}")),
        }
    }

    /// Job `msgid` is accepted (new, restored or run again): if its
    /// HEADERS name an unfinished batch, it is one of its pending jobs.
    pub(super) fn batch_take(&mut self, msgid: &str, headers: &[u8]) {
        let Some(id) = emqp_proto::headers::frame_batch(headers) else {
            return;
        };
        let Some(b) = self.batches.live.get_mut(id) else {
            return;
        };
        if b.finished_unix_ms.is_some() || self.batches.jobs.contains_key(msgid) {
            return;
        }
        b.pending += 1;
        let again = b.uncount_failure(msgid);
        let id = id.to_string();
        if again {
            self.mark_batch_dirty(&id);
        }
        self.batches.jobs.insert(msgid.to_string(), id);
    }

    /// A job ended for good: if it is a batch's, it is counted.
    pub(super) fn batch_job_ended(
        &mut self,
        job: &Job,
        status: ResultStatus,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        if self.batches.jobs.is_empty() {
            return;
        }
        let msgid = job.msgid().to_string();
        let Some(id) = self.batches.jobs.remove(&msgid) else {
            return;
        };
        let Some(b) = self.batches.live.get_mut(&id) else {
            return;
        };
        b.count_end(&msgid, status == ResultStatus::Ok);
        self.mark_batch_dirty(&id);
        self.settle_batch(&id, now, out);
    }

    /// If batch `id` is due: its callbacks accepted, its row finished, kept
    /// among the finished.
    fn settle_batch(&mut self, id: &str, now: Duration, out: &mut Vec<Action>) {
        if !self.batches.live.get(id).is_some_and(Batch::is_due) {
            return;
        }
        let Some(mut b) = self.batches.live.remove(id) else {
            return;
        };
        b.finished_unix_ms = Some(self.unix_ms(now));
        // Its row says finished (kept for lookups): in the same
        // transaction as its callbacks' jobs, so they are accepted once.
        self.put_batch_row(id, b.encode());
        let events: Vec<Event> = b.callbacks().into_iter().map(|(e, _)| e).collect();
        log::info!(
            "batch {id} finished: {} succeeded, {} failed; callbacks: {}",
            b.succeeded,
            b.failed,
            if events.is_empty() {
                "none".to_string()
            } else {
                events
                    .iter()
                    .map(|e| e.suffix())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
        for e in events {
            self.submit_callback(&b, e, now, out);
        }
        self.batches.finished_count += 1;
        self.keep_finished_batch(b);
    }

    /// Keep `b` among the last [`FINISHED_KEPT`] finished batches; the
    /// oldest one past that is forgotten, its row deleted.
    fn keep_finished_batch(&mut self, b: Batch) {
        while self.batches.finished.len() >= FINISHED_KEPT {
            let Some(old) = self.batches.finished.pop_front() else {
                break;
            };
            self.journal.record(
                Record::DeleteState {
                    kind: StateKind::Batch,
                    id: old.id,
                },
                None,
            );
        }
        self.batches.finished.push_back(b);
    }

    /// Accept the callback `event` of finished batch `b` as a job.
    fn submit_callback(
        &mut self,
        b: &Batch,
        event: Event,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Option<JobId> {
        let c = b.callback(event)?;
        let msgid = b.callback_msgid(event);
        if self.store.find(&msgid).is_some() {
            log::warn!("batch {}: callback job {msgid} held already", b.id);
            return None;
        }
        let payload = match b.callback_payload(event) {
            Ok(p) => p,
            Err(e) => {
                log::warn!("batch {}: callback {msgid} not submitted: {e}", b.id);
                return None;
            }
        };
        let (jid, route) = self.accept_own(&msgid, &c.queue, c.headers.as_bytes(), &payload, now);
        self.pump(&route, now, out);
        Some(jid)
    }

    /// Jobs of a failed journal batch (taken out, never acknowledged): a
    /// batch's pending job is no longer pending; a callback job is
    /// accepted again.
    pub(super) fn batch_batch_failed(
        &mut self,
        failed: &[(JobId, String)],
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let mut again = Vec::new();
        for (_, msgid) in failed {
            if let Some(id) = self.batches.jobs.remove(msgid) {
                if let Some(b) = self.batches.live.get_mut(&id) {
                    b.pending = b.pending.saturating_sub(1);
                }
                self.settle_batch(&id, now, out);
                continue;
            }
            let Some((id, suffix)) = msgid.rsplit_once('/') else {
                continue;
            };
            let Some(event) = Event::of_suffix(suffix) else {
                continue;
            };
            if let Some(b) = self.batches.finished.iter().rev().find(|b| b.id == id) {
                again.push((b.clone(), event));
            }
        }
        for (b, event) in again {
            log::warn!(
                "batch {}: callback {} accepted again (its journal batch failed)",
                b.id,
                event.suffix()
            );
            self.submit_callback(&b, event, now, out);
        }
    }

    /// Batches from the journal's state rows, before the jobs are
    /// restored (`batch_take` counts them as they are).
    pub(super) fn restore_batch_rows(&mut self, states: &[(StateKind, String, Vec<u8>)]) {
        let mut finished = Vec::new();
        for (kind, id, blob) in states {
            if *kind != StateKind::Batch {
                continue;
            }
            match Batch::decode(blob) {
                Ok(b) if &b.id == id && b.finished_unix_ms.is_some() => finished.push(b),
                Ok(b) if &b.id == id => {
                    self.batches.live.insert(id.clone(), b);
                }
                Ok(_) => log::warn!("journal: batch {id} names another id: skipped"),
                Err(e) => log::warn!("journal: batch {id} unreadable ({e}): skipped"),
            }
        }
        // The finished ones, oldest first, as they were kept.
        finished.sort_by_key(|b| b.finished_unix_ms);
        for b in finished {
            self.keep_finished_batch(b);
        }
    }

    /// After the jobs are restored: the closed batches with nothing
    /// pending submit their callbacks (the router died before they did).
    pub(super) fn settle_restored_batches(
        &mut self,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> usize {
        let ids: Vec<String> = self.batches.live.keys().cloned().collect();
        for id in &ids {
            // Cancelled before the restart: what it still held was being
            // stopped, and is cancelled now (restored, so waiting).
            if self.batches.live[id].cancelled_unix_ms.is_some() {
                self.cancel_batch_jobs(id, now, out);
            }
            self.settle_batch(id, now, out);
        }
        self.batches.live.len()
    }

    /// The batch of job `msgid`, if it is a pending job of an unfinished
    /// batch or a callback of a recent one.
    pub(crate) fn batch_of_job(&self, msgid: &str, headers: &[u8]) -> Option<String> {
        if let Some(id) = self.batches.jobs.get(msgid) {
            return Some(id.clone());
        }
        if let Some(id) = emqp_proto::headers::frame_batch(headers) {
            return Some(id.to_string());
        }
        let (id, suffix) = msgid.rsplit_once('/')?;
        Event::of_suffix(suffix)?;
        self.batches.find(id).map(|(b, _)| b.id.clone())
    }

    /// The invariants of the batches (`invariants.rs`): every pending job
    /// of a batch is an unfinished job of an unfinished batch, and each
    /// batch's `pending` is the number of them.
    pub(super) fn check_batches(&self) -> Result<(), String> {
        let mut pending: FastMap<&str, u64> = FastMap::default();
        for (msgid, id) in &self.batches.jobs {
            if self.store.find(msgid).is_none() {
                return Err(format!("batch {id}: pending job {msgid} is not unfinished"));
            }
            *pending.entry(id.as_str()).or_default() += 1;
        }
        for (id, b) in &self.batches.live {
            let n = pending.remove(id.as_str()).unwrap_or(0);
            if b.pending != n || b.finished_unix_ms.is_some() {
                return Err(format!(
                    "batch {id}: pending {} but {n} job(s) of it unfinished (finished: {:?})",
                    b.pending, b.finished_unix_ms
                ));
            }
        }
        if let Some((id, n)) = pending.into_iter().next() {
            return Err(format!(
                "{n} pending job(s) of batch {id}, which is not unfinished"
            ));
        }
        Ok(())
    }

    /// The admin view of a batch: counts, state, callbacks.
    pub(crate) fn batch_view(&self, id: &str) -> Option<Value> {
        let (b, _) = self.batches.find(id)?;
        let state = if b.finished_unix_ms.is_some() {
            "finished"
        } else if b.is_closed() {
            "closed"
        } else {
            "open"
        };
        let due: Vec<Event> = b.callbacks().into_iter().map(|(e, _)| e).collect();
        let mut callbacks = serde_json::Map::new();
        for e in [Event::Success, Event::Complete] {
            if b.callback(e).is_none() {
                continue;
            }
            let st = if b.finished_unix_ms.is_none() {
                "waiting"
            } else if due.contains(&e) {
                "submitted"
            } else {
                "skipped"
            };
            callbacks.insert(
                format!("on_{}", e.as_str()),
                json!({ "msgid": b.callback_msgid(e), "state": st }),
            );
        }
        Some(json!({
            "batch": b.id,
            "state": state,
            "description": b.description,
            "total": b.total(),
            "pending": b.pending,
            "succeeded": b.succeeded,
            "failed": b.failed,
            "failed_ids": b.failed_ids,
            "opened_at_unix_ms": b.opened_unix_ms,
            "closed_at_unix_ms": b.closed_unix_ms,
            "finished_at_unix_ms": b.finished_unix_ms,
            "cancelled_at_unix_ms": b.cancelled_unix_ms,
            "callbacks": callbacks,
            "limits": { "max_batches": MAX_BATCHES, "max_failed_ids": MAX_FAILED_IDS },
        }))
    }
}
