//! Slots: jobs in, run on a free slot or held, timed out or cancelled,
//! finished.
//!
//! The rules (tests in `tests/slots.rs`):
//! - REQUEST → a free slot runs it, once: retries (`retry-count:N`) belong
//!   to the router, which journals attempts and backs off. Every delivered
//!   REQUEST gets exactly one `REPLY [payload, orig_msgid, status]`
//!   (`failed` with the error, `attempts: 1`, when it failed), then the
//!   READY for its slot.
//! - Timeouts: this core alone gives a job its timeout and says what stopping
//!   it means. A job's timeout is its `timeout:N` header (N > 0), else its
//!   payload's own `"timeout": SECONDS` field (> 0, an emq addition), else
//!   [`Config::default_timeout`](super::Config::default_timeout) (0.3.13's
//!   `GLOBAL_TIMEOUT`, 300 s; `None`: no timeout); a job killed at the
//!   default's limit is told so, with how to change it. 0.3.13 has only the header
//!   and `GLOBAL_TIMEOUT` (its worker's `payload["timeout"]` is the header's
//!   value, passed along by its job manager), and treats `timeout:0` as no
//!   header, as here. Past it, counted from the job's start (the pool's
//!   Started event) → cancel, failed REPLY of kind `timeout`, slot freed
//!   exactly once.
//! - `CANCEL [orig_msgid]` (the router's control plane) for a job this
//!   connection runs → the pool stops it ([`Action::CancelJob`] with
//!   [`CancelReason::Router`]); once the pool reports it finished, one
//!   `REPLY [{"error": {"kind": "cancelled", "message": "cancelled by the
//!   router", "attempts": 1}}, orig_msgid, failed]`, then the READY. Exactly
//!   once per job: a second CANCEL, or one for a job already being killed
//!   for its timeout, sends no second kill (the REPLY then says
//!   `cancelled`: the router is waiting for that answer); a job that
//!   succeeds before the kill reaches it is replied with its real result (a
//!   failure after the CANCEL cannot be told from the kill, and is replied
//!   `cancelled`). A CANCEL for a job not running here (finished, never
//!   delivered, its REPLY queued) is ignored, logged at debug. The kill is
//!   the pool's business: a shell job's process group, a Python job's
//!   worker process (replaced), or, for a Rust handler, no more waiting
//!   for it.
//! - Slot accounting: each slot is free or busy; at most `concurrency` jobs
//!   run. Credit (READYs outstanding), jobs held (received, not started) and
//!   running jobs together never exceed `concurrency` + the credit window
//!   ([`window`](super::window): 0 with
//!   [`Prefetch::Off`](super::Prefetch::Off), so then one READY per free
//!   slot). A REQUEST runs on a free slot at once, else waits in the held
//!   queue; held jobs start oldest first as slots free up (a held job never
//!   waits while a slot is free). A REQUEST with no slot free and no READY
//!   outstanding is answered failed (`crash`: the router sent more jobs than
//!   READYs). After a reconnect READYs go out only for what is free; REPLYs
//!   of jobs that finish while disconnected wait for the next ACK.
//! - Held jobs are the router's in-flight jobs like running ones: a
//!   CANCEL of one answers it `cancelled` at once; KBYE from the router
//!   and our own shutdown run them (as slots free up, within the grace
//!   period); a reconnect (router silent, no ACK) drops them unstarted —
//!   the router redelivers the jobs of the identity it lost, so running
//!   them too would run them twice; at the end of the grace period they
//!   are dropped with the jobs killed, before the KBYE that makes the
//!   router redeliver them.

use std::time::Duration;

use emqp_proto::job::{ErrorKind, Job, JobError, JobOutcome};
use emqp_proto::{Request, TraceParent};
use log::{debug, info, warn};

use super::{Action, CancelReason, Connection, JobContext, JobStart, Phase, CANCELLED_MESSAGE};

#[derive(Debug, Clone)]
pub(super) struct Running {
    pub(super) msgid: String,
    /// The run in the pool.
    run: u64,
    /// When it was handed to the pool.
    pub(super) started: Duration,
    timeout: Option<Duration>,
    /// The timeout is the job manager's default (the job named none).
    default_timeout: bool,
    deadline: Option<Duration>,
    /// The pool was told to stop the job, and why. Set once (no second
    /// kill); a CANCEL after a timeout kill only changes the reason.
    stopping: Option<CancelReason>,
}

#[derive(Debug, Clone)]
pub(super) enum Slot {
    Free,
    Busy(Box<Running>),
}

/// A job received in the credit window while every slot was busy.
#[derive(Debug, Clone)]
pub(super) struct Held {
    msgid: String,
    job: Job,
    context: Box<JobContext>,
    timeout: Option<Duration>,
    default_timeout: bool,
}

/// Slot counts, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotCounts {
    /// Free, with a READY outstanding.
    pub offered: usize,
    /// Free, no READY outstanding (not registered, the router left, or the
    /// READY could not be sent).
    pub idle: usize,
    /// Running a job.
    pub busy: usize,
    /// READYs outstanding beyond the free slots (the credit window).
    pub extra: usize,
    /// Jobs received and not started (every slot was busy).
    pub held: usize,
}

impl Connection {
    pub fn slot_counts(&self) -> SlotCounts {
        let busy = self.busy();
        let free = self.slots.len() - busy;
        let credit = self.window.credit();
        let offered = credit.min(free);
        SlotCounts {
            offered,
            idle: free - offered,
            busy,
            extra: credit - offered,
            held: self.held.len(),
        }
    }

    pub(super) fn busy(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Busy(_)))
            .count()
    }

    fn free_slot(&self) -> Option<usize> {
        self.slots.iter().position(|s| matches!(s, Slot::Free))
    }

    pub(super) fn on_request(
        &mut self,
        msgid: String,
        req: Request,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let credited = self.window.request_received(now);
        if self.is_shutting_down() {
            warn!(
                msgid:% = msgid;
                "REQUEST {msgid} arrived while leaving; not running it (the router owns it)"
            );
            return;
        }
        let free = self.free_slot();
        if free.is_none() && !credited {
            warn!(
                msgid:% = msgid;
                "REQUEST {msgid} but all {} slot(s) are busy and no READY is outstanding \
                 (more REQUESTs than READYs); failing it",
                self.cfg.concurrency
            );
            let err = JobError::new(
                ErrorKind::Crash,
                "job manager had no free slot (router sent more jobs than READYs)",
            );
            self.queue_or_send_reply(&msgid, JobOutcome::Error(err), now, out);
            return;
        }
        let (job, own_timeout) = match Job::parse_with_timeout(&req.message) {
            Ok(parsed) => parsed,
            Err(e) => {
                warn!(msgid:% = msgid, queue:% = req.queue; "REQUEST {msgid}: bad job: {e}");
                let err = JobError::new(ErrorKind::BadJob, e.to_string());
                self.queue_or_send_reply(&msgid, JobOutcome::Error(err), now, out);
                if self.phase == Phase::Registered {
                    self.flush(now, out);
                }
                return;
            }
        };
        let own = req
            .headers
            .timeout_secs()
            .map(Duration::from_secs)
            .or(own_timeout);
        let default_timeout = own.is_none();
        let timeout = own.or(self.cfg.default_timeout);
        let headers = req.headers.encode();
        let context = Box::new(JobContext {
            traceparent: TraceParent::from_headers(headers.as_bytes()),
            attempt: emqp_proto::headers::frame_attempt(headers.as_bytes()),
            queue: req.queue.clone(),
            headers,
        });
        match free {
            Some(slot) => {
                debug!(
                    msgid:% = msgid, queue:% = req.queue, slot = slot;
                    "job {msgid} on slot {slot} (queue {}, timeout {timeout:?})",
                    req.queue
                );
                self.start_job(
                    slot,
                    msgid,
                    (job, context),
                    (timeout, default_timeout),
                    now,
                    out,
                );
            }
            None => {
                debug!(
                    msgid:% = msgid, queue:% = req.queue;
                    "job {msgid} held: every slot busy ({} held before it)",
                    self.held.len()
                );
                self.held.push_back(Held {
                    msgid,
                    job,
                    context,
                    timeout,
                    default_timeout,
                });
            }
        }
    }

    fn start_job(
        &mut self,
        slot: usize,
        msgid: String,
        (job, context): (Job, Box<JobContext>),
        (timeout, default_timeout): (Option<Duration>, bool),
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let run = self.next_run;
        self.next_run += 1;
        self.slots[slot] = Slot::Busy(Box::new(Running {
            msgid: msgid.clone(),
            run,
            started: now,
            timeout,
            default_timeout,
            deadline: timeout.map(|t| now + t),
            stopping: None,
        }));
        out.push(Action::StartJob(JobStart {
            slot,
            run,
            msgid,
            job,
            timeout,
            context,
        }));
    }

    /// Held jobs onto free slots, oldest first.
    fn start_held(&mut self, now: Duration, out: &mut Vec<Action>) {
        while !self.held.is_empty() {
            let Some(slot) = self.free_slot() else { return };
            let Some(h) = self.held.pop_front() else {
                return;
            };
            debug!(msgid:% = h.msgid, slot = slot; "held job {} on slot {slot}", h.msgid);
            let timeout = (h.timeout, h.default_timeout);
            self.start_job(slot, h.msgid, (h.job, h.context), timeout, now, out);
        }
    }

    pub(super) fn on_job_started(&mut self, slot: usize, run: u64, now: Duration) {
        if let Some(Slot::Busy(r)) = self.slots.get_mut(slot) {
            if r.run == run {
                debug!(msgid:% = r.msgid, slot = slot; "job {} started on slot {slot}", r.msgid);
                if r.stopping.is_none() {
                    r.deadline = r.timeout.map(|t| now + t);
                }
            }
        }
    }

    pub(super) fn on_job_progress(
        &mut self,
        slot: usize,
        run: u64,
        (percent, message): (u8, String),
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let msgid = match self.slots.get(slot) {
            Some(Slot::Busy(r)) if r.run == run && r.stopping.is_none() => r.msgid.clone(),
            _ => return,
        };
        if !matches!(self.phase, Phase::Registered | Phase::Draining) {
            debug!(msgid:% = msgid; "progress of job {msgid} dropped: not connected");
            return;
        }
        let p = emqp_proto::Progress {
            orig_msgid: msgid,
            percent,
            message,
        };
        self.send(emqp_proto::Command::Progress(p), now, out);
    }

    pub(super) fn on_job_finished(
        &mut self,
        slot: usize,
        run: u64,
        outcome: JobOutcome,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let Some(Slot::Busy(r)) = self.slots.get(slot) else {
            warn!("result of run {run} for slot {slot}, which is not busy; ignored");
            return;
        };
        if r.run != run {
            warn!("stale result of run {run} on slot {slot}; ignored");
            return;
        }
        let msgid = r.msgid.clone();
        if r.stopping != Some(CancelReason::Router) {
            // What the window sizes from: how long jobs take here (a
            // timeout counts: that job was long).
            self.window.job_finished(now.saturating_sub(r.started));
        }
        // A job stopped by us that still succeeded finished on its own
        // before the kill reached it: its real result goes out.
        let outcome = match (outcome, r.stopping) {
            (JobOutcome::Error(_), Some(CancelReason::Timeout)) => {
                let secs = r.timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0);
                JobOutcome::Error(JobError::new(
                    ErrorKind::Timeout,
                    timeout_message(secs, r.default_timeout),
                ))
            }
            (JobOutcome::Error(_), Some(CancelReason::Router)) => {
                JobOutcome::Error(JobError::new(ErrorKind::Cancelled, CANCELLED_MESSAGE))
            }
            (o, _) => o,
        };
        match &outcome {
            JobOutcome::Value(_) => {
                debug!(msgid:% = msgid, slot = slot; "job {msgid} finished ok on slot {slot}")
            }
            JobOutcome::Error(e) => warn!(
                msgid:% = msgid, slot = slot;
                "job {msgid} failed on slot {slot}: {:?}: {}",
                e.kind, e.message
            ),
        }
        self.finish_slot(slot, &msgid, outcome, now, out);
    }

    /// CANCEL from the router: stop every run of `orig_msgid` (one, unless
    /// the router delivered the same msgid twice); its REPLY goes out when
    /// the pool reports it finished.
    pub(super) fn on_cancel(&mut self, orig_msgid: &str, now: Duration, out: &mut Vec<Action>) {
        let mut found = false;
        for (slot, s) in self.slots.iter_mut().enumerate() {
            let Slot::Busy(r) = s else { continue };
            if r.msgid != orig_msgid {
                continue;
            }
            found = true;
            match r.stopping.replace(CancelReason::Router) {
                None => {
                    info!(
                        msgid:% = orig_msgid, slot = slot;
                        "CANCEL of job {orig_msgid}: stopping it on slot {slot}"
                    );
                    out.push(Action::CancelJob {
                        slot,
                        run: r.run,
                        reason: CancelReason::Router,
                    });
                }
                Some(CancelReason::Timeout) => debug!(
                    "CANCEL of job {orig_msgid}: already being killed for its timeout; \
                     it will be replied cancelled"
                ),
                Some(CancelReason::Router) => {
                    debug!("CANCEL of job {orig_msgid} again: already being cancelled")
                }
            }
        }
        if let Some(i) = self.held.iter().position(|h| h.msgid == orig_msgid) {
            found = true;
            self.held.remove(i);
            info!(
                msgid:% = orig_msgid;
                "CANCEL of job {orig_msgid}: it was held, not started; replying cancelled"
            );
            let err = JobError::new(ErrorKind::Cancelled, CANCELLED_MESSAGE);
            self.queue_or_send_reply(orig_msgid, JobOutcome::Error(err), now, out);
            if self.phase == Phase::Registered {
                self.flush(now, out);
            }
        }
        if !found {
            debug!("ignoring CANCEL of job {orig_msgid}: not running here");
        }
    }

    /// A job is done: REPLY, then the READY that frees the slot (or, when
    /// the router left, the reconnect once no job runs).
    fn finish_slot(
        &mut self,
        slot: usize,
        msgid: &str,
        outcome: JobOutcome,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        self.slots[slot] = Slot::Free;
        self.queue_or_send_reply(msgid, outcome, now, out);
        if matches!(
            self.phase,
            Phase::Registered | Phase::Draining | Phase::ShuttingDown { .. }
        ) {
            self.start_held(now, out);
        }
        match self.phase {
            Phase::Registered => {
                self.flush(now, out);
            }
            Phase::Draining if self.busy() == 0 => {
                info!(
                    "the last running job finished; reconnecting in {:?}",
                    self.cfg.reconnect_delay
                );
                self.phase = Phase::Waiting {
                    until: now + self.cfg.reconnect_delay,
                };
            }
            Phase::ShuttingDown { .. } => self.maybe_exit(now, out),
            _ => {}
        }
    }

    /// The timeouts of the running jobs not being stopped yet.
    pub(super) fn job_deadlines(&self) -> impl Iterator<Item = Duration> + '_ {
        self.slots.iter().filter_map(|s| match s {
            Slot::Busy(r) if r.stopping.is_none() => r.deadline,
            _ => None,
        })
    }

    /// Stop every job past its timeout (once: a job being stopped has no
    /// deadline left).
    pub(super) fn fire_job_timeouts(&mut self, now: Duration, out: &mut Vec<Action>) {
        for (slot, s) in self.slots.iter_mut().enumerate() {
            let Slot::Busy(r) = s else { continue };
            if r.stopping.is_none() && r.deadline.is_some_and(|d| now >= d) {
                r.stopping = Some(CancelReason::Timeout);
                warn!(
                    msgid:% = r.msgid, slot = slot;
                    "job {} on slot {slot} ran past its timeout of {:?}; killing it",
                    r.msgid,
                    r.timeout.unwrap_or_default()
                );
                out.push(Action::CancelJob {
                    slot,
                    run: r.run,
                    reason: CancelReason::Timeout,
                });
            }
        }
    }
}

/// The message of a job killed for its timeout of `secs`; when the limit
/// was the job manager's default (the job named none), where it comes
/// from and how to change it.
pub(super) fn timeout_message(secs: f64, default_timeout: bool) -> String {
    let mut m = format!("job ran past its timeout of {secs} s and was killed");
    if default_timeout {
        m.push_str(
            " (the job manager's default, GLOBAL_TIMEOUT: change it with \
             --global-timeout or EVENTMQ_GLOBAL_TIMEOUT, or give the job a \
             timeout:N header)",
        );
    }
    m
}
