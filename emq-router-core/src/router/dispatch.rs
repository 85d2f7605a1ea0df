//! Dispatch: buffered jobs to free slots.
//!
//! A job of a queue goes to the least recently used worker with a free
//! slot among those with the highest weight for that queue
//! (`workers.rs`). Only a **dispatchable** job leaves its buffer: one
//! whose `Accepted` record is committed (with a journal; see
//! `durability.rs`) — so a job never runs unless the journal has it, and a
//! job whose batch fails can still be refused. New jobs sit at the back of
//! their buffer, so the dispatchable ones form its front; a queue whose
//! front is not yet durable waits for the commit, which pumps it again.
//! Nothing is dispatched while the router drains, from a paused queue, or
//! to a drained worker. A flow-controlled queue (`flow.rs`) picks its
//! next job by its own rules (limits, priorities, fairness) instead of
//! its front.
//!
//! **Nor while the journal fails** (`durability.rs`): a job started then
//! could finish with nobody able to record it. With a lease (PostgreSQL,
//! high availability) such a router is about to step down, and the
//! standby that takes over runs every unrecorded job again; with SQLite a
//! crash before the journal recovers would do the same. So a failing
//! journal holds the buffered jobs where they are, and the first batch
//! that commits again pumps every queue. Only the jobs already running
//! when the journal failed can run twice.
//!
//! **The worker learns the delivery count**: every delivery after the
//! first carries `attempt:N` in its HEADERS (replacing any `attempt` item
//! the client sent, which also a first delivery drops in favour of
//! `attempt:1`); other items are forwarded byte for byte. A Python job
//! reads it as `emq_job.current()["attempt"]`.

use std::time::Duration;

use emqp_proto::headers::ATTEMPT;
use emqp_proto::PROTOCOL_VERSION;

use super::{traces, Router};
use crate::event::{Action, Socket};
use crate::jobs::JobId;
use crate::journal::Record;
use crate::util::{ident, micros};
use crate::workers::WorkerId;

impl Router {
    /// Whether the front job of `queue` may be handed out.
    pub(crate) fn front_dispatchable(&self, queue: &str) -> bool {
        if self.store.flow.has(queue) {
            return self.flow_ready(queue);
        }
        !self.journal.is_failing()
            && self
                .store
                .front(queue)
                .is_some_and(|id| self.journal.is_durable(id))
    }

    /// The front job of `queue` (for a flow-controlled queue, the job its
    /// rules pick at `now`), taken out of its buffer, if dispatchable.
    pub(super) fn pop_dispatchable(&mut self, queue: &str, now: Duration) -> Option<JobId> {
        if self.store.flow.has(queue) {
            return self.pop_flow(queue, now);
        }
        if !self.front_dispatchable(queue) {
            return None;
        }
        self.store.pop_front(queue)
    }

    /// Hand dispatchable jobs of `queue` to free workers.
    pub(crate) fn pump(&mut self, queue: &str, now: Duration, out: &mut Vec<Action>) {
        if self.is_draining() || self.paused.contains(queue) {
            return;
        }
        while let Some(wid) = self.pool.pick(queue) {
            let Some(jid) = self.pop_dispatchable(queue, now) else {
                return;
            };
            self.dispatch(jid, wid, true, now, out);
        }
    }

    /// Send job `jid` to worker `wid`.
    pub(super) fn dispatch(
        &mut self,
        jid: JobId,
        wid: WorkerId,
        consume_slot: bool,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let Some(job) = self.store.jobs.get(&jid) else {
            return;
        };
        let msgid = job.msgid().to_string();
        let Some(seq) = self
            .pool
            .record_dispatch(wid, jid, &msgid, consume_slot, now)
        else {
            // Unknown worker: cannot happen (callers pick live workers);
            // keep the job rather than lose it.
            self.store.requeue(jid, true);
            return;
        };
        let Some(job) = self.store.jobs.get_mut(&jid) else {
            return;
        };
        job.attempts += 1;
        if let Some(e) = job.extra.as_mut() {
            // A new delivery starts from nothing.
            e.progress = None;
        }
        let attempts = job.attempts;
        self.store.set_inflight(jid, wid, seq);
        self.workflow_job_dispatched(&msgid, now);
        let identity = self
            .pool
            .get(wid)
            .map(|w| w.identity.clone())
            .unwrap_or_default();
        let Some(job) = self.store.jobs.get(&jid) else {
            return;
        };
        log::debug!(
            msgid:% = msgid, queue:% = job.queue(), worker:% = ident(&identity), attempt = attempts;
            "job {msgid} (queue {}) dispatched to {} (attempt {attempts})",
            job.queue(),
            ident(&identity),
        );
        let (headers, span) = if self.cfg.traces {
            let epoch = self.cfg.epoch_unix_micros;
            let times = (job.accepted_unix(epoch), epoch.saturating_add(micros(now)));
            let (span, headers) = traces::dispatch_span(
                self.cfg.id_seed,
                &msgid,
                job.queue(),
                job.headers(),
                attempts,
                times,
            );
            (headers, Some(span))
        } else {
            (job.headers().to_vec(), None)
        };
        // A delivery after the first tells the worker its count
        // (`attempt:N`, `emqp_proto::headers::ATTEMPT`); a client's own
        // `attempt` item never reaches a worker as the count. Whether the
        // client sent one was found at intake (`JobMeta::attempt_item`).
        let headers = if attempts > 1 || job.meta.attempt_item {
            emqp_proto::headers::frame_with_item(&headers, ATTEMPT, &attempts.to_string())
        } else {
            headers
        };
        let frames = vec![
            Vec::new(),
            PROTOCOL_VERSION.as_bytes().to_vec(),
            b"REQUEST".to_vec(),
            msgid.as_bytes().to_vec(),
            job.queue().as_bytes().to_vec(),
            headers,
            job.payload().to_vec(),
        ];
        let journaled = self.dispatch_journaled(job.route());
        self.stats.dispatched += 1;
        self.stats.queue_mut(job.route()).dispatched += 1;
        if journaled {
            // Flow control: a limited queue's runs are known to the
            // journal before they start (`flow.rs`, "Restarts").
            self.journal
                .record(Record::Attempt { msgid, attempts }, None);
            self.send_after_journal(Socket::Backend, identity, frames, None, out);
            return;
        }
        self.send(Socket::Backend, identity, frames, out);
        if let Some(span) = span {
            out.push(Action::JobSpan(span));
        }
        if attempts > 1 && self.journal.enabled() {
            self.journal
                .record(Record::Attempt { msgid, attempts }, None);
        }
    }
}
