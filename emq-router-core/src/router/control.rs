//! The control plane: `ADMIN [request JSON]` on the admin socket (an emq
//! extension; docs/PROTOCOL.md, "Control plane").
//!
//! - Every request gets one answer, `REPLY [answer JSON, msgid]`:
//!   `{"ok": true, ...}` or `{"ok": false, "error": {"kind", "message"}}`.
//!   The request is decoded once into an [`AdminOp`] (the vocabulary of
//!   `emqp_proto::admin`) and dispatched on it, one arm per op; a request
//!   that does not decode is a `bad-request` — never silence.
//! - Lookups read the core; none walks every job: `jobs` pages through the
//!   jobs in acceptance order from a cursor and looks at no more than
//!   [`SCAN_LIMIT`] jobs per call. `jobs` with state `dead-lettered` is
//!   the page of the dead letters `dead` gives (every state of
//!   `ViewState` is listed: the CLI offers them all).
//! - State changes the journal keeps ([`OpName::is_journaled`]) are
//!   journaled like everything else, and refused `journal-unavailable`
//!   while the journal fails (a change the journal could lose is not
//!   made). Draining a worker acts on a connection, which does not outlive
//!   the router, and is not journaled.
//! - **Cancel.** A delayed, queued or retrying job is removed at once and
//!   ends `cancelled`. A running job is cancelled by its job manager: the
//!   router sends `CANCEL [msgid]` to a worker with the `cancel` feature
//!   and marks the job `cancelling`; its failed REPLY ends it `cancelled`
//!   (no retry), and so does its worker's death (no redelivery); a REPLY
//!   `ok` that crossed the CANCEL ends it `done`. A 0.3.13 job manager
//!   cannot cancel: `unsupported`. A `reply-requested` client gets a
//!   failed RESULT of kind `cancelled`.
//! - **Pause.** A paused queue buffers and accepts jobs but dispatches
//!   none; the state is journaled and survives a restart.
//! - **Requeue.** A failed or cancelled job the router retains finished
//!   is accepted again under its msgid, queue, headers and message (a new
//!   job's journal record; its attempts start again); a dead letter is
//!   retried as `dead-retry` does. Refused `conflict`: an unfinished job,
//!   a job that finished ok, one whose message was longer than the first
//!   1,000 bytes a finished job keeps, one whose result still waits for
//!   its client; `not-found` when the router holds neither.
//! - **Msgid prefixes.** Where an op names one job (`job`, `cancel`,
//!   `dead-retry` / `dead-discard` of one msgid, `requeue`), a msgid the
//!   router does not hold may be the unique beginning of one it does, as
//!   git takes a commit's: at least [`MIN_PREFIX`] characters, matched
//!   against the unfinished, the retained finished and the dead-lettered
//!   jobs. Two or more matches are a `bad-request` that lists them (at
//!   most [`PREFIX_CANDIDATES`]); none leaves the op to say `not-found`.
//!   Only a msgid that is not found exactly is looked up so (a scan: an
//!   operator's lookup, not a hot path); a workflow id held is exact (not
//!   the prefix of its nodes' `ID/NODE`).

use std::time::Duration;

/// The shortest msgid prefix taken for a whole msgid ("Msgid prefixes").
pub(crate) const MIN_PREFIX: usize = 4;

/// How many matches an ambiguous prefix's refusal lists.
pub(crate) const PREFIX_CANDIDATES: usize = 10;

use emqp_proto::admin::{
    encode_answer, AdminError, AdminOp, DeadQuery, DeadTarget, ErrorKind, JobsQuery, OpName, Order,
    ViewState,
};
use emqp_proto::{Command, Headers, Message, Reply};
use serde_json::{json, Value};

use super::completion::PAYLOAD_KEPT;
use super::intake::NewJob;
use super::{frames_of, Router};
use crate::data::{Histogram, LATENCY_BOUNDS_MICROS};
use crate::event::{Action, Socket};
use crate::jobs::{Job, JobId, JobState};
use crate::journal::{FinishedRecord, Record};
use crate::util::ident;
use crate::workers::WorkerId;

/// Jobs one `jobs` call looks at, at most.
pub(crate) const SCAN_LIMIT: usize = 100_000;
/// Default and largest page of `jobs` and `dead`.
const PAGE: u64 = 50;
const PAGE_MAX: u64 = 1000;

fn bad(message: impl Into<String>) -> AdminError {
    AdminError::bad_request(message)
}

fn not_found(message: impl Into<String>) -> AdminError {
    AdminError::not_found(message)
}

/// A payload or result as JSON when it is JSON, else as text.
fn json_or_text(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// The first bytes of a MSG frame as text, and whether it was cut.
fn payload_preview(bytes: &[u8]) -> (String, bool) {
    let cut = bytes.len() > PAYLOAD_KEPT;
    let b = &bytes[..bytes.len().min(PAYLOAD_KEPT)];
    (String::from_utf8_lossy(b).into_owned(), cut)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
}

/// The filters of `jobs` and `dead`.
struct Filter<'a> {
    queue: Option<&'a str>,
    state: Option<&'a str>,
    contains: Option<&'a str>,
}

impl Filter<'_> {
    fn admits(&self, queue: &str, route: &str, state: &str, payload: &[u8]) -> bool {
        self.queue.is_none_or(|q| q == queue || q == route)
            && self.state.is_none_or(|s| s == state)
            && self.contains.is_none_or(|c| contains(payload, c))
    }
}

/// A page's size: the default when absent, at most [`PAGE_MAX`].
fn page_of(limit: Option<std::num::NonZeroU64>) -> usize {
    limit.map_or(PAGE, |n| n.get().min(PAGE_MAX)) as usize
}

impl Router {
    /// An ADMIN request (decoded) from `identity`.
    pub(super) fn on_admin_request(
        &mut self,
        identity: Vec<u8>,
        msgid: String,
        request: &[u8],
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let answer = AdminOp::decode(request).and_then(|op| self.admin_op(op, now, out));
        if let Err(e) = &answer {
            log::debug!("admin request from {} refused: {e}", ident(&identity));
        }
        self.admin_answer(identity, msgid, &encode_answer(answer), out);
    }

    /// The `bad-request` answer to an ADMIN message that did not decode
    /// (or had a frame over the size limit): never silence on the admin
    /// socket.
    pub(super) fn admin_undecodable(
        &mut self,
        identity: Vec<u8>,
        msgid: String,
        e: &dyn std::fmt::Display,
        out: &mut Vec<Action>,
    ) {
        let v = encode_answer(Err(bad(format!("undecodable admin message: {e}"))));
        self.admin_answer(identity, msgid, &v, out);
    }

    /// `REPLY [answer, msgid]` on the admin socket.
    pub(super) fn admin_answer(
        &mut self,
        identity: Vec<u8>,
        msgid: String,
        value: &Value,
        out: &mut Vec<Action>,
    ) {
        let reply = Reply {
            payload: value.to_string().into_bytes(),
            orig_msgid: Some(msgid),
            status: None,
            credit: 0,
        };
        let f = frames_of(self.ids.next_id(), Command::Reply(reply));
        self.send(Socket::Admin, identity, f, out);
    }

    /// `typed` as a full msgid (see "Msgid prefixes"): itself when the
    /// router holds it or nothing begins with it, else the one msgid
    /// that begins with it.
    fn full_msgid(&self, typed: &str) -> Result<String, AdminError> {
        let held = |m: &str| {
            self.store.find(m).is_some()
                || self.finished.get(m).is_some()
                || self.dead.iter().any(|d| d.job.msgid == m)
                || self.workflows.get(m).is_some()
        };
        if typed.chars().count() < MIN_PREFIX || held(typed) {
            return Ok(typed.to_string());
        }
        let mut found: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        for (_, j) in self.store.jobs.iter() {
            let m = j.msgid().to_string();
            if m.starts_with(typed) {
                found.insert(m);
            }
        }
        found.extend(
            self.finished
                .msgids()
                .filter(|m| m.starts_with(typed))
                .map(str::to_string),
        );
        found.extend(
            self.dead
                .iter()
                .filter(|d| d.job.msgid.starts_with(typed))
                .map(|d| d.job.msgid.clone()),
        );
        match found.len() {
            0 => Ok(typed.to_string()),
            1 => Ok(found.into_iter().next().unwrap_or_default()),
            n => Err(bad(format!(
                "msgid prefix {typed} is ambiguous: {n} jobs begin with it: {}{}",
                found
                    .iter()
                    .take(PREFIX_CANDIDATES)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                if n > PREFIX_CANDIDATES { ", ..." } else { "" }
            ))),
        }
    }

    /// `op` with a msgid prefix replaced by the msgid it names.
    fn with_full_msgid(&self, op: AdminOp) -> Result<AdminOp, AdminError> {
        Ok(match op {
            AdminOp::Job { msgid } => AdminOp::Job {
                msgid: self.full_msgid(&msgid)?,
            },
            AdminOp::Cancel { msgid } => AdminOp::Cancel {
                msgid: self.full_msgid(&msgid)?,
            },
            AdminOp::DeadRetry(DeadTarget::One { msgid }) => AdminOp::DeadRetry(DeadTarget::One {
                msgid: self.full_msgid(&msgid)?,
            }),
            AdminOp::Requeue { msgid } => AdminOp::Requeue {
                msgid: self.full_msgid(&msgid)?,
            },
            AdminOp::DeadDiscard(DeadTarget::One { msgid }) => {
                AdminOp::DeadDiscard(DeadTarget::One {
                    msgid: self.full_msgid(&msgid)?,
                })
            }
            other => other,
        })
    }

    fn admin_op(
        &mut self,
        op: AdminOp,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Result<Value, AdminError> {
        let op = self.with_full_msgid(op)?;
        if op.name().is_journaled() {
            if let Some(why) = self.journal.refusal() {
                return Err(AdminError::new(ErrorKind::JournalUnavailable, why));
            }
        }
        match op {
            AdminOp::Status => {
                let mut v: Value =
                    serde_json::from_str(&crate::admin::status_json(&self.snapshot(now)))
                        .unwrap_or(Value::Null);
                if let Some(m) = v.as_object_mut() {
                    m.insert("version".into(), env!("CARGO_PKG_VERSION").into());
                }
                Ok(v)
            }
            AdminOp::Job { msgid } => self
                .job_view_by_msgid(&msgid, now)
                .map(|v| json!({ "job": v }))
                .ok_or_else(|| {
                    not_found(format!(
                        "no job {msgid} (unfinished, retained finished or dead-lettered)"
                    ))
                }),
            AdminOp::Jobs(q) => self.op_jobs(&q, now),
            AdminOp::Workflow { id } => self
                .workflow_view(&id, now)
                .map(|v| json!({ "workflow": v }))
                .ok_or_else(|| {
                    not_found(format!(
                        "no workflow {id} (unfinished, or finished and still kept: at most {} \
                         for {} s)",
                        self.cfg.workflows_keep,
                        self.cfg.workflows_keep_for.as_secs()
                    ))
                }),
            AdminOp::Batch { id } => self
                .batch_view(&id)
                .map(|v| json!({ "batch": v }))
                .ok_or_else(|| not_found(format!("no batch {id} (unfinished or recent)"))),
            AdminOp::Cancel { msgid } => self.op_cancel(&msgid, now, out),
            AdminOp::Dead(q) => self.op_dead(&q),
            AdminOp::DeadRetry(t) => self.op_dead_take(&t, true, now, out),
            AdminOp::DeadDiscard(t) => self.op_dead_take(&t, false, now, out),
            AdminOp::Requeue { msgid } => self.op_requeue(&msgid, now, out),
            AdminOp::Queues => Ok(self.op_queues(now)),
            AdminOp::Pause { queue } => Ok(self.op_pause(queue, true, now, out)),
            AdminOp::Resume { queue } => Ok(self.op_pause(queue, false, now, out)),
            AdminOp::Purge { queue } => {
                let ids = self.store.take_waiting(&queue);
                let n = ids.len();
                for jid in ids {
                    if let Some(job) = self.store.remove_job(jid) {
                        self.finish_cancelled(job, "queue purged", None, now, out);
                    }
                }
                log::info!("queue {queue} purged: {n} waiting job(s) cancelled");
                Ok(json!({ "queue": queue, "purged": n }))
            }
            AdminOp::Workers => Ok(self.op_workers(now)),
            AdminOp::Drain { worker } => self.op_drain(worker, true, now, out),
            AdminOp::Undrain { worker } => self.op_drain(worker, false, now, out),
            AdminOp::Schedules => Ok(json!({ "schedules": self.book.list() })),
            AdminOp::Unschedule { id } => {
                let sid = emq_schedule::ScheduleId::parse(&id)
                    .ok_or_else(|| bad(format!("{id} is not a schedule id")))?;
                if !self.book.unschedule(&sid) {
                    return Err(not_found(format!("no schedule {id}")));
                }
                self.journal_schedules();
                Ok(json!({ "removed": id }))
            }
            AdminOp::Shutdown => {
                self.start_shutdown("admin shutdown", now, out);
                Ok(json!({ "shutting_down": true }))
            }
            AdminOp::LimitsSet(a) => self.op_limits_set(&a.queue, &a.change, now, out),
            AdminOp::LimitsShow { queue } => self.op_limits_show(queue.as_deref(), now),
            AdminOp::LimitsClear { queue } => self.op_limits_clear(&queue, now, out),
        }
    }

    /// `pause` (`paused`) or `resume`.
    fn op_pause(
        &mut self,
        queue: String,
        paused: bool,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Value {
        let changed = if paused {
            self.paused.insert(queue.clone())
        } else {
            self.paused.remove(&queue)
        };
        if changed {
            log::info!(
                "queue {queue} {}",
                if paused { "paused" } else { "resumed" }
            );
            self.journal.record(
                Record::QueuePaused {
                    queue: queue.clone(),
                    paused,
                },
                None,
            );
            if !paused {
                self.pump(&queue, now, out);
            }
        }
        json!({ "queue": queue, "paused": paused })
    }

    /// `drain` (`draining`) or `undrain`.
    /// The connected worker `worker` names: its identity, else its
    /// `NAME@HOST` or its `NAME` (what `workers` shows) when one worker
    /// has it; several with that name are a `bad-request` listing their
    /// identities.
    fn worker_named(&self, worker: &str) -> Result<WorkerId, AdminError> {
        if let Some(id) = self.pool.id_of(worker.as_bytes()) {
            return Ok(id);
        }
        let named: Vec<&crate::workers::Worker> = self
            .pool
            .workers
            .values()
            .filter(|w| {
                w.about.as_ref().is_some_and(|a| {
                    a.label().as_deref() == Some(worker) || a.name.as_deref() == Some(worker)
                })
            })
            .collect();
        match named.as_slice() {
            [] => Err(not_found(format!("no connected worker {worker}"))),
            [w] => Ok(w.id),
            many => {
                let mut ids: Vec<String> = many
                    .iter()
                    .map(|w| ident(&w.identity).into_owned())
                    .collect();
                ids.sort_unstable();
                Err(AdminError::new(
                    ErrorKind::BadRequest,
                    format!(
                        "{} workers are named {worker}: name one by its identity ({})",
                        many.len(),
                        ids.join(", ")
                    ),
                ))
            }
        }
    }

    fn op_drain(
        &mut self,
        worker: String,
        draining: bool,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Result<Value, AdminError> {
        let id = self.worker_named(&worker)?;
        self.pool.set_draining(id, draining);
        log::info!(
            "worker {worker} {}",
            if draining {
                "drained: no new jobs"
            } else {
                "resumed"
            }
        );
        if !draining {
            let queues: Vec<String> = self
                .pool
                .get(id)
                .map(|w| w.queues.iter().map(|(_, q)| q.clone()).collect())
                .unwrap_or_default();
            for q in queues {
                self.pump(&q, now, out);
            }
        }
        Ok(json!({ "worker": worker, "draining": draining }))
    }

    // ----- jobs ---------------------------------------------------------------

    /// The state name of an unfinished job.
    fn state_of(&self, job: &Job) -> ViewState {
        let cancelling = job.extra.as_ref().is_some_and(|e| e.cancelling);
        match job.state {
            JobState::Queued => ViewState::Queued,
            JobState::InFlight { .. } if cancelling => ViewState::Cancelling,
            JobState::InFlight { .. } => ViewState::InFlight,
            JobState::Delayed { .. } if job.failures() > 0 => ViewState::Retrying,
            JobState::Delayed { .. } => ViewState::Delayed,
        }
    }

    fn unfinished_view(&self, job: &Job, now: Duration) -> Value {
        let (payload, cut) = payload_preview(job.payload());
        let mut v = json!({
            "msgid": job.msgid().to_string(),
            "queue": job.queue(),
            "route": job.route(),
            "state": self.state_of(job),
            "headers": String::from_utf8_lossy(job.headers()),
            "attempts": job.attempts,
            "accepted_at_ms": job.accepted_unix(self.cfg.epoch_unix_micros) / 1000,
            "client": ident(job.client()),
            "payload": payload,
        });
        let m = v.as_object_mut().expect("an object");
        if cut {
            m.insert("payload_truncated".into(), true.into());
        }
        match job.state {
            JobState::InFlight { worker, seq } => {
                if let Some(w) = self.pool.get(worker) {
                    m.insert("worker".into(), ident(&w.identity).into());
                    // Its NAME@HOST, when its job manager said (the view
                    // of `workers`).
                    if let Some(name) = w.about.as_ref().and_then(|a| a.label()) {
                        m.insert("worker_name".into(), name.into());
                    }
                    if let Some(i) = w.inflight.get(&seq) {
                        let started = self.unix_ms(i.since);
                        m.insert("dispatched_at_ms".into(), started.into());
                        m.insert("started_at_ms".into(), started.into());
                        let accepted = job.accepted_unix(self.cfg.epoch_unix_micros) / 1000;
                        m.insert("waited_ms".into(), started.saturating_sub(accepted).into());
                        m.insert(
                            "running_ms".into(),
                            (now.saturating_sub(i.since).as_millis() as u64).into(),
                        );
                    }
                }
            }
            JobState::Delayed { due } => {
                m.insert("run_at_ms".into(), self.unix_ms(due).into());
            }
            JobState::Queued => {
                if let Some(why) = self
                    .store
                    .find(&job.msgid())
                    .and_then(|jid| self.waiting_reason(jid, job, now))
                {
                    m.insert("waiting".into(), why.into());
                }
            }
        }
        if let Some(k) = &job.meta.key {
            m.insert("key".into(), (**k).into());
        }
        if job.meta.priority > 0 {
            m.insert("priority".into(), job.meta.priority.into());
        }
        if let Some(e) = job.extra.as_ref().and_then(|e| e.last_error.as_deref()) {
            m.insert("last_error".into(), json_or_text(e));
        }
        if let Some(p) = job.extra.as_ref().and_then(|e| e.progress.as_ref()) {
            m.insert("progress".into(), self.progress_view(p));
        }
        v
    }

    fn finished_view(r: &FinishedRecord) -> Value {
        let (payload, cut) = payload_preview(&r.job.payload);
        let mut v = json!({
            "msgid": r.job.msgid,
            "queue": r.job.queue,
            "route": r.job.route,
            "state": r.outcome,
            "headers": String::from_utf8_lossy(&r.job.headers),
            "attempts": r.job.attempts,
            "accepted_at_ms": r.job.accepted_at_unix_ms,
            "finished_at_ms": r.finished_at_unix_ms,
            "client": ident(&r.job.client),
            "payload": payload,
            "result": r.result.as_deref().map(json_or_text),
        });
        let m = v.as_object_mut().expect("an object");
        if cut {
            m.insert("payload_truncated".into(), true.into());
        }
        if r.result_truncated {
            m.insert("result_truncated".into(), true.into());
        }
        // Waited (accepted → started) and ran (started → finished), apart.
        if let Some(started) = r.started_at_unix_ms {
            m.insert("started_at_ms".into(), started.into());
            m.insert(
                "waited_ms".into(),
                started.saturating_sub(r.job.accepted_at_unix_ms).into(),
            );
            m.insert(
                "ran_ms".into(),
                r.finished_at_unix_ms.saturating_sub(started).into(),
            );
        }
        if r.outcome != "done" {
            if let Some(res) = &r.result {
                if let Some(e) = json_or_text(res).get("error") {
                    m.insert("last_error".into(), e.clone());
                }
            }
        }
        v
    }

    fn dead_view(d: &super::DeadLetter) -> Value {
        let (payload, cut) = payload_preview(&d.job.payload);
        json!({
            "msgid": d.job.msgid,
            "queue": d.job.queue,
            "route": d.job.route,
            "state": ViewState::DeadLettered,
            "headers": String::from_utf8_lossy(&d.job.headers),
            "attempts": d.job.attempts,
            "accepted_at_ms": d.job.accepted_at_unix_ms,
            "finished_at_ms": d.at_unix_ms,
            "at_ms": d.at_unix_ms,
            "client": ident(&d.job.client),
            "reason": d.reason,
            "error": d.error.as_deref().map(json_or_text),
            "last_error": d.error.as_deref().map(json_or_text),
            "payload": payload,
            "payload_truncated": cut,
        })
    }

    /// The `job` answer: the job's view, with its unique key (`unique_key`,
    /// and `unique_held`: whether it still holds it) when it has one, and
    /// its `workflow` when it is a node of one (unfinished or recent).
    fn job_view_by_msgid(&self, msgid: &str, now: Duration) -> Option<Value> {
        let Some(mut v) = self.job_view_of(msgid, now) else {
            // A workflow's handle reads like a job's (`workflow.rs`).
            return self.workflow_job_view(msgid, now);
        };
        let headers = v
            .get("headers")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Some(u) = super::unique::unique_of(headers.as_bytes()) {
            let held = self.unique.holder(&u.key) == Some(msgid);
            if let Some(m) = v.as_object_mut() {
                m.insert("unique_key".into(), u.key.into());
                m.insert("unique_held".into(), held.into());
            }
        }
        if let (Some(wf), Some(m)) = (self.workflows.of_job(msgid), v.as_object_mut()) {
            m.insert("workflow".into(), wf.into());
        }
        let batch = self.batch_of_job(msgid, headers.as_bytes());
        if let (Some(b), Some(m)) = (batch, v.as_object_mut()) {
            m.insert("batch".into(), b.into());
        }
        Some(v)
    }

    fn job_view_of(&self, msgid: &str, now: Duration) -> Option<Value> {
        if let Some(jid) = self.store.find(msgid) {
            return self
                .store
                .jobs
                .get(&jid)
                .map(|j| self.unfinished_view(j, now));
        }
        if let Some(r) = self.finished.get(msgid) {
            return Some(Self::finished_view(r));
        }
        self.dead
            .iter()
            .rev()
            .find(|d| d.job.msgid == msgid)
            .map(Self::dead_view)
    }

    /// `jobs`: the unfinished jobs in acceptance order, then the retained
    /// finished ones in finishing order (each newest or oldest first),
    /// filtered; one page, from a cursor (`u<job id>` or `f<sequence>`).
    fn op_jobs(&self, q: &JobsQuery, now: Duration) -> Result<Value, AdminError> {
        if q.state == Some(ViewState::DeadLettered) {
            // Every state of the list is listed (`emq-cli jobs --state`
            // offers them all): the dead letters as `dead` pages them.
            let dead = DeadQuery {
                queue: q.queue.clone(),
                contains: q.contains.clone(),
                limit: q.limit,
                cursor: q.cursor.clone(),
            };
            let (page, next, count) = self.dead_page(&dead, newest_first(q.order))?;
            return Ok(json!({ "jobs": page, "next_cursor": next, "scanned": count }));
        }
        let filter = Filter {
            queue: q.queue.as_deref(),
            state: q.state.map(ViewState::as_str),
            contains: q.contains.as_deref(),
        };
        let newest = newest_first(q.order);
        let limit = page_of(q.limit);
        let (in_finished, cursor_n) = match q.cursor.as_deref() {
            None => (false, None),
            Some(c) => {
                let (phase, n) = c.split_at(c.len().min(1));
                let n: u64 = n.parse().map_err(|_| bad(format!("bad cursor {c:?}")))?;
                match phase {
                    "u" => (false, Some(n)),
                    "f" => (true, Some(n)),
                    _ => return Err(bad(format!("bad cursor {c:?}"))),
                }
            }
        };
        let wants_unfinished = q.state.is_none_or(|s| !s.is_finished());
        let wants_finished = q.state.is_none_or(ViewState::is_finished);
        let mut page: Vec<Value> = Vec::new();
        let mut scanned = 0usize;
        let mut next: Option<String> = None;
        if wants_unfinished && !in_finished {
            let mut last: Option<JobId> = None;
            let mut stopped = false;
            self.store
                .jobs
                .scan(newest, cursor_n.map(JobId), |id, job| {
                    if page.len() >= limit || scanned >= SCAN_LIMIT {
                        stopped = true;
                        return false;
                    }
                    scanned += 1;
                    last = Some(id);
                    let state = self.state_of(job).as_str();
                    if filter.admits(job.queue(), job.route(), state, job.payload()) {
                        page.push(self.unfinished_view(job, now));
                    }
                    true
                });
            // The next page starts after the last job looked at.
            if stopped {
                next = last.map(|l| format!("u{}", l.0));
            }
        }
        if next.is_none() && wants_finished {
            let start = if in_finished { cursor_n } else { None };
            let mut last: Option<u64> = None;
            for (seq, r) in self.finished.iter(newest, start) {
                if page.len() >= limit || scanned >= SCAN_LIMIT {
                    next = last.map(|l| format!("f{l}"));
                    break;
                }
                scanned += 1;
                last = Some(seq);
                if filter.admits(&r.job.queue, &r.job.route, &r.outcome, &r.job.payload) {
                    page.push(Self::finished_view(r));
                }
            }
        }
        Ok(json!({ "jobs": page, "next_cursor": next, "scanned": scanned }))
    }

    /// `cancel` of each of `msgids` (a workflow's or a batch's jobs):
    /// each one's answer, or `{"msgid", "error"}`.
    pub(super) fn cancel_each(
        &mut self,
        msgids: Vec<String>,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Vec<Value> {
        msgids
            .into_iter()
            .map(|m| match self.op_cancel(&m, now, out) {
                Ok(v) => v,
                Err(e) => json!({ "msgid": m, "error": e.message }),
            })
            .collect()
    }

    pub(super) fn op_cancel(
        &mut self,
        msgid: &str,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Result<Value, AdminError> {
        if let Some(v) = self.cancel_workflow(msgid, now, out) {
            return Ok(v);
        }
        if let Some(r) = self.cancel_batch(msgid, now, out) {
            return r.map_err(|why| AdminError::new(ErrorKind::Conflict, why));
        }
        if let Some(w) = self.workflow_job_view(msgid, now) {
            return Err(AdminError::new(
                ErrorKind::Conflict,
                format!("workflow {msgid} already finished ({})", w["state"]),
            ));
        }
        let Some(jid) = self.store.find(msgid) else {
            if let Some(r) = self.finished.get(msgid) {
                return Err(AdminError::new(
                    ErrorKind::Conflict,
                    format!("job {msgid} already finished ({})", r.outcome),
                ));
            }
            if self.dead.iter().any(|d| d.job.msgid == msgid) {
                return Err(AdminError::new(
                    ErrorKind::Conflict,
                    format!(
                        "job {msgid} is dead-lettered (discard it with {})",
                        OpName::DeadDiscard
                    ),
                ));
            }
            return Err(not_found(format!("no job {msgid}")));
        };
        let Some(job) = self.store.jobs.get(&jid) else {
            return Err(not_found(format!("no job {msgid}")));
        };
        let was = self.state_of(job);
        match job.state {
            JobState::Queued | JobState::Delayed { .. } => {
                match job.state {
                    JobState::Queued => self.store.remove_queued(jid),
                    JobState::Delayed { due } => {
                        self.store.delayed.remove(&(due, jid));
                    }
                    JobState::InFlight { .. } => {}
                }
                if let Some(job) = self.store.remove_job(jid) {
                    self.finish_cancelled(job, "cancel", None, now, out);
                }
                Ok(json!({ "msgid": msgid, "was": was, "state": "cancelled" }))
            }
            JobState::InFlight { worker, .. } => {
                let Some(w) = self.pool.get(worker) else {
                    return Err(not_found(format!("no job {msgid}")));
                };
                if was == ViewState::Cancelling {
                    return Ok(json!({ "msgid": msgid, "was": was, "state": "cancelling" }));
                }
                if !w
                    .features
                    .iter()
                    .any(|f| f == emqp_proto::command::FEATURE_CANCEL)
                {
                    return Err(AdminError::new(
                        ErrorKind::Unsupported,
                        format!(
                            "job {msgid} runs on worker {}, which cannot cancel jobs (a 0.3.13 job manager)",
                            ident(&w.identity)
                        ),
                    ));
                }
                let identity = w.identity.clone();
                if let Some(j) = self.store.jobs.get_mut(&jid) {
                    j.extra_mut().cancelling = true;
                }
                log::info!(
                    msgid:% = msgid, worker:% = ident(&identity);
                    "job {msgid} cancelling: CANCEL to worker {}",
                    ident(&identity)
                );
                let f = frames_of(
                    self.ids.next_id(),
                    Command::Cancel {
                        orig_msgid: msgid.to_string(),
                    },
                );
                self.send(Socket::Backend, identity, f, out);
                Ok(json!({ "msgid": msgid, "was": was, "state": "cancelling" }))
            }
        }
    }

    // ----- dead letters -------------------------------------------------------

    fn op_dead(&self, q: &DeadQuery) -> Result<Value, AdminError> {
        let (page, next, count) = self.dead_page(q, true)?;
        Ok(json!({ "dead_letters": page, "next_cursor": next, "count": count }))
    }

    /// One page of the dead letters that match `q` (newest or oldest
    /// first), the next page's cursor, and how many match.
    fn dead_page(
        &self,
        q: &DeadQuery,
        newest: bool,
    ) -> Result<(Vec<Value>, Option<String>, usize), AdminError> {
        let filter = Filter {
            queue: q.queue.as_deref(),
            state: None,
            contains: q.contains.as_deref(),
        };
        let limit = page_of(q.limit);
        let skip: usize = match q.cursor.as_deref() {
            None => 0,
            Some(c) => c.parse().map_err(|_| bad(format!("bad cursor {c:?}")))?,
        };
        let in_order: Vec<&super::DeadLetter> = if newest {
            self.dead.iter().rev().collect()
        } else {
            self.dead.iter().collect()
        };
        let matching = in_order.into_iter().filter(|d| {
            filter.admits(
                &d.job.queue,
                &d.job.route,
                ViewState::DeadLettered.as_str(),
                &d.job.payload,
            )
        });
        let page: Vec<Value> = matching
            .clone()
            .skip(skip)
            .take(limit)
            .map(Self::dead_view)
            .collect();
        let count = matching.count();
        let next = (skip + page.len() < count).then(|| (skip + page.len()).to_string());
        Ok((page, next, count))
    }

    /// [`AdminOp::Requeue`] (see "Requeue" above).
    fn op_requeue(
        &mut self,
        msgid: &str,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Result<Value, AdminError> {
        if self.is_draining() {
            return Err(AdminError::new(
                ErrorKind::ShuttingDown,
                "the router is shutting down",
            ));
        }
        if let Some(jid) = self.store.find(msgid) {
            let state = self
                .store
                .jobs
                .get(&jid)
                .map_or("unfinished", |j| self.state_of(j).as_str());
            return Err(AdminError::new(
                ErrorKind::Conflict,
                format!("job {msgid} is {state}: only a finished job can be queued again"),
            ));
        }
        if self.dead.iter().any(|d| d.job.msgid == msgid) {
            let target = DeadTarget::One {
                msgid: msgid.to_string(),
            };
            self.op_dead_take(&target, true, now, out)?;
            return Ok(json!({"msgid": msgid, "was": "dead-lettered", "state": "queued"}));
        }
        let Some(r) = self.finished.get(msgid) else {
            return Err(not_found(format!(
                "no job {msgid} (retained finished or dead-lettered)"
            )));
        };
        let conflict = |m: String| Err(AdminError::new(ErrorKind::Conflict, m));
        if r.outcome == "done" {
            return conflict(format!(
                "job {msgid} finished ok: requeue runs failed and cancelled jobs"
            ));
        }
        if r.job.payload.len() >= PAYLOAD_KEPT {
            return conflict(format!(
                "job {msgid}: the router keeps only the first {PAYLOAD_KEPT} bytes of a \
                 finished job's message, so it cannot run it again; submit it again"
            ));
        }
        if self.results.holds(msgid) {
            return conflict(format!(
                "job {msgid}: its result waits for its client; requeue it once delivered"
            ));
        }
        let (job, was) = (r.job.clone(), r.outcome.clone());
        let route = self.route_of(&job.queue).to_string();
        let h = Headers::parse(&job.headers).unwrap_or_default();
        let parse = || (h.reply_requested(), h.retry_count().unwrap_or(0));
        self.accept(
            NewJob {
                msgid: &job.msgid,
                client: &job.client,
                queue: &job.queue,
                route: &route,
                headers: &job.headers,
                payload: &job.payload,
                parse: &parse,
                run_at: None,
                journaled: None,
            },
            now,
        );
        log::info!("job {msgid} ({was}) queued again by an operator");
        self.pump(&route, now, out);
        Ok(json!({"msgid": msgid, "was": was, "state": "queued"}))
    }

    /// [`AdminOp::DeadRetry`] (`retry`) or [`AdminOp::DeadDiscard`]: one msgid, or all that
    /// match the filters.
    fn op_dead_take(
        &mut self,
        target: &DeadTarget,
        retry: bool,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> Result<Value, AdminError> {
        if retry && self.is_draining() {
            return Err(AdminError::new(
                ErrorKind::ShuttingDown,
                "the router is shutting down",
            ));
        }
        let take = |d: &super::DeadLetter| match target {
            DeadTarget::One { msgid } => d.job.msgid == *msgid,
            DeadTarget::All { queue, contains } => Filter {
                queue: queue.as_deref(),
                state: None,
                contains: contains.as_deref(),
            }
            .admits(
                &d.job.queue,
                &d.job.route,
                ViewState::DeadLettered.as_str(),
                &d.job.payload,
            ),
        };
        let mut taken = Vec::new();
        let mut kept = std::collections::VecDeque::with_capacity(self.dead.len());
        for d in std::mem::take(&mut self.dead) {
            if take(&d) {
                taken.push(d);
            } else {
                kept.push_back(d);
            }
        }
        self.dead = kept;
        if taken.is_empty() {
            if let DeadTarget::One { msgid } = target {
                return Err(not_found(format!("no dead letter {msgid}")));
            }
        }
        let mut done = 0usize;
        let mut skipped = 0usize;
        let mut routes: Vec<String> = Vec::new();
        for d in taken {
            if retry && self.store.find(&d.job.msgid).is_some() {
                // The msgid is held by another unfinished job: keep it.
                skipped += 1;
                self.dead.push_back(d);
                continue;
            }
            self.journal.record(
                Record::DeadLetterRemoved {
                    msgid: d.job.msgid.clone(),
                },
                None,
            );
            if retry {
                let route = self.route_of(&d.job.queue).to_string();
                let h = Headers::parse(&d.job.headers).unwrap_or_default();
                let parse = || (h.reply_requested(), h.retry_count().unwrap_or(0));
                self.accept(
                    NewJob {
                        msgid: &d.job.msgid,
                        client: &d.job.client,
                        queue: &d.job.queue,
                        route: &route,
                        headers: &d.job.headers,
                        payload: &d.job.payload,
                        parse: &parse,
                        run_at: None,
                        journaled: None,
                    },
                    now,
                );
                if !routes.contains(&route) {
                    routes.push(route);
                }
            }
            done += 1;
        }
        for r in routes {
            self.pump(&r, now, out);
        }
        log::info!(
            "{done} dead letter(s) {}",
            if retry { "retried" } else { "discarded" }
        );
        let key = if retry { "retried" } else { "discarded" };
        let mut v = json!({ key: done });
        if skipped > 0 {
            v["skipped_msgid_in_use"] = skipped.into();
        }
        Ok(v)
    }

    // ----- queues, workers ---------------------------------------------------

    fn op_queues(&self, now: Duration) -> Value {
        let snap = self.snapshot(now);
        let mut names: Vec<&str> = snap.queues.iter().map(|q| q.name.as_str()).collect();
        for p in &self.paused {
            if !names.contains(&p.as_str()) {
                names.push(p);
            }
        }
        names.sort_unstable();
        let queues: Vec<Value> = names
            .iter()
            .map(|name| {
                let q = snap.queues.iter().find(|q| q.name == *name);
                json!({
                    "name": name,
                    "depth": q.map_or(0, |q| q.depth),
                    "inflight": q.map_or(0, |q| q.inflight),
                    "retry_waiting": q.map_or(0, |q| q.retry_waiting),
                    "delayed": q.map_or(0, |q| q.delayed),
                    "oldest_age_ms": q.map_or(0, |q| q.max_age_ms),
                    "paused": self.paused.contains(*name),
                    // finished = processed + failed + dead_lettered: the
                    // same figure as STATUS's processed_messages_by_queue.
                    "finished": q.map_or(0, |q| q.metrics.finished),
                    "processed": q.map_or(0, |q| q.metrics.processed),
                    "failed": q.map_or(0, |q| q.metrics.failed),
                    "dead_lettered": q.map_or(0, |q| q.metrics.dead_lettered),
                    "routed_to_default": q.map_or(0, |q| q.metrics.routed_to_default),
                    "workers": q.map_or(0, |q| q.serving.len()),
                    // Counters for rates over time (the dashboard's
                    // per-queue history): accepted (submitted), deliveries
                    // started, and each delivery's run time.
                    "accepted": q.map_or(0, |q| q.metrics.accepted),
                    "started": q.map_or(0, |q| q.metrics.dispatched),
                    "run_time": q.map_or_else(
                        || histogram_view(&Histogram::default()),
                        |q| histogram_view(&q.metrics.run_time),
                    ),
                })
            })
            .collect();
        json!({ "queues": queues })
    }

    fn op_workers(&self, now: Duration) -> Value {
        let mut workers: Vec<Value> = self
            .pool
            .workers
            .values()
            .map(|w| {
                let running: Vec<Value> = w
                    .inflight
                    .values()
                    .filter_map(|i| {
                        self.store.jobs.get(&i.job).map(|j| {
                            json!({
                                "msgid": j.msgid().to_string(),
                                "queue": j.queue(),
                                "running_ms": now.saturating_sub(i.since).as_millis() as u64,
                            })
                        })
                    })
                    .collect();
                json!({
                    "identity": ident(&w.identity),
                    "queues": w.announced.iter().map(|(wt, q)| json!([wt, q])).collect::<Vec<_>>(),
                    "credit": w.slots,
                    "inflight": w.inflight.len(),
                    "running": running,
                    "connected_ms": now.saturating_sub(w.connected_at).as_millis() as u64,
                    "draining": w.draining,
                    "features": w.features,
                    // Who it is (emq job managers say so in their INFORM):
                    // NAME@HOST, the same across its reconnects.
                    "name": w.about.as_ref().and_then(|a| a.label()),
                    "pid": w.about.as_ref().and_then(|a| a.pid),
                    "concurrency": w.about.as_ref().and_then(|a| a.slots),
                    "version": w.about.as_ref().and_then(|a| a.version.clone()),
                })
            })
            .collect();
        workers.sort_by(|a, b| a["identity"].as_str().cmp(&b["identity"].as_str()));
        json!({ "workers": workers })
    }
}

/// For tests and tools: an ADMIN request's frames.
pub fn admin_request(msgid: &str, request: &Value) -> Message {
    Message::with_msgid(
        msgid,
        Command::Admin {
            request: request.to_string().into_bytes(),
        },
    )
}

/// A histogram as `queues` shows it: `{"count", "sum_us", "bounds_us",
/// "counts"}` (`counts[i]`: observations ≤ `bounds_us[i]` and above the
/// bound before; those above the last bound count only in `count`).
fn histogram_view(h: &Histogram) -> Value {
    json!({
        "count": h.count,
        "sum_us": h.sum_micros,
        "bounds_us": LATENCY_BOUNDS_MICROS,
        "counts": h.buckets,
    })
}

/// `newest` first unless `oldest` was asked for.
fn newest_first(order: Option<Order>) -> bool {
    order != Some(Order::Oldest)
}
