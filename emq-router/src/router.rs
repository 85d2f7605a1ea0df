//! The routing state machine: `Router::handle(input, now, &mut outbox)`.
//!
//! Rules (each has unit tests in `tests.rs`):
//!
//! - **Registration.** Backend INFORM → `ACK [inform msgid]`, then one
//!   HEARTBEAT at once (a 0.3.13 job manager starts its worker processes, and
//!   so sends READY, only after the first HEARTBEAT). A worker starts with 0
//!   slots. Empty INFORM queues → `Config::default_queues`. The third INFORM
//!   frame lists features; `job-ack` switches completion tracking to
//!   per-REPLY. A second INFORM from a known identity re-registers it (its
//!   in-flight jobs are redelivered first). Frontend INFORM with TYPE
//!   `scheduler` registers a scheduler (ACK too).
//! - **Slots.** READY adds one slot, or, if one of the worker's queues
//!   (highest weight first) has buffered jobs, hands out the oldest of them.
//! - **REQUEST.** Routed through its queue if a connected worker serves it,
//!   else through `default`; the frames are forwarded unchanged (queue frame
//!   as sent, same msgid, headers frame byte for byte). The worker is the
//!   least recently used one with a free slot among those with the highest
//!   weight for that queue. Every accepted REQUEST is acknowledged with
//!   `REPLY [msgid]`, dispatched or buffered. A full buffer (`hwm`) gives
//!   `REJECT [msgid, queue-full, text]`; an undecodable REQUEST whose msgid
//!   is readable gives `REJECT malformed`; while shutting down,
//!   `REJECT shutting-down`.
//! - **Completion.** A worker REPLY `[payload, orig_msgid, status?]`
//!   completes that job exactly (status `ok` when absent); with
//!   `reply-requested` the client gets `RESULT [orig_msgid, status, payload]`.
//!   A REPLY without orig_msgid (seed form) completes the worker's oldest
//!   in-flight reply-requested job. For legacy workers (no `job-ack`) a READY
//!   also completes the worker's oldest in-flight job that is *not*
//!   reply-requested (those wait for their REPLY) — except the READY that
//!   follows a REPLY (0.3.13 sends REPLY, then READY for the same slot),
//!   which only frees that slot. This is a heuristic: a legacy worker does
//!   not say which fire-and-forget job ended, so the oldest is assumed, and
//!   start-up READYs that arrive after a dispatch complete that job early
//!   (it is then not redelivered if the worker dies). `job-ack` workers are
//!   tracked exactly. A `job-ack` worker's REPLY for a job that is not in
//!   flight on it completes that job wherever it is — in flight on another
//!   identity, or queued / waiting for a retry after a redelivery — because
//!   a job manager that reconnects with a new identity delivers the REPLY of
//!   a job that ran across the reconnect on the new connection (slots come
//!   from READYs, so no slot count changes). Any other REPLY whose msgid is
//!   not in flight on that worker (late, duplicate, legacy worker) is
//!   ignored: a result is forwarded at most once.
//! - **Retries.** A REPLY with status `failed` for a job with
//!   `retry-count:N` and fewer than N failures so far re-queues the job (at
//!   the back) after `backoff(n)` = base·2ⁿ⁻¹ capped at max. When retries
//!   are exhausted the job is dead-lettered with the worker's last error and
//!   only then does the client get `RESULT failed` with that payload. A
//!   failed job without `retry-count` simply completes as failed.
//! - **Redelivery.** When a worker is removed (heartbeat timeout, KBYE, send
//!   failure, re-INFORM) its unfinished jobs go back to the FRONT of their
//!   queues in dispatch order and are handed out again. A job that has been
//!   lost this way `max_attempts` times is dead-lettered instead.
//! - **Dead letters** (policy choice): a dead-lettered job that was
//!   `reply-requested` gets a `RESULT [msgid, failed, payload]` — the
//!   worker's last error after exhausted retries, or
//!   `{"error": {"kind": "dead-lettered", "message": ..., "attempts": N}}`
//!   after exhausted deliveries. `REJECT` stays reserved for REQUESTs that
//!   were never accepted. Dead letters are listed on the admin socket (the
//!   last `dead_letter_keep`) and journaled.
//! - **Heartbeats.** Every `heartbeat_interval` the router sends HEARTBEAT
//!   (body: unix time as Python's `str(time.time())`) to every worker and
//!   scheduler. Any message from a peer, even a malformed one, counts as its
//!   heartbeat. A peer silent for more than `interval × liveness` is
//!   removed. Non-INFORM messages from unknown workers are logged (warn,
//!   rate-limited) and get nothing.
//! - **Schedules** (built in, `emq_schedule::ScheduleBook`). A client's
//!   SCHEDULE is booked by the router itself — unless a 0.3.13
//!   `emq-scheduler` peer is connected (frontend INFORM type `scheduler`):
//!   then it goes verbatim to the most recently registered one, as in
//!   0.3.13, and is not booked. A booked SCHEDULE is acknowledged
//!   `REPLY [msgid]` (emq extension); bad timing / cron / run_count gives
//!   `REJECT [msgid, malformed, reason]`. UNSCHEDULE goes to every
//!   scheduler peer AND removes the built-in schedule. On every tick the
//!   book's due runs become jobs on their queue, like accepted REQUESTs
//!   (journalled, buffered, dispatched, retried, redelivered) with a
//!   generated msgid and no client: their results are not forwarded. A run
//!   that finds its queue at `hwm` is skipped (logged). Book changes are
//!   journalled (`PutSchedule` / `DeleteSchedule`) in the same batch as the
//!   jobs; [`Router::restore_schedules`] puts them back at start, and a run
//!   missed while the router was down runs once. Time for schedules is
//!   unix time: `Config::epoch_unix_micros + now`. No runs while shutting
//!   down.
//! - **Admin.** STATUS, ROUTER_SHOW_WORKERS, ROUTER_SHOW_SCHEDULERS answer
//!   `REPLY [json]` (see `admin.rs`). DISCONNECT (and [`Input::Shutdown`]) is
//!   ACKed, KBYE goes to every worker and scheduler, new REQUESTs are
//!   rejected `shutting-down`, buffered jobs are no longer handed out, and
//!   [`Action::Exit`] is emitted when no job is in flight or `drain_timeout`
//!   has passed. Unfinished jobs stay in the core ([`Router::unfinished_jobs`])
//!   for the journal.
//! - **Metrics.** Per route queue: finished / processed / failed /
//!   retried / redelivered / dead-lettered / rejected counters and the
//!   acceptance → completion latency histogram ([`crate::metrics`]);
//!   [`crate::metrics::render`] gives the Prometheus text.
//! - **Journal** (when `Config::journal`): `Accepted` before the ack of a
//!   REQUEST (and for every scheduled run), `Completed`, `DeadLettered`,
//!   `Attempt` before each repeated delivery, `PutSchedule` /
//!   `DeleteSchedule` for the built-in book. [`Router::restore`] takes jobs
//!   back (a journalled attempt count above 1 counts as lost deliveries
//!   toward `max_attempts`), [`Router::restore_dead_letters`] the admin
//!   dead-letter list, [`Router::restore_schedules`] the schedules.
//! - **Malformed input** of any shape is logged (rate-limited) and dropped;
//!   nothing here panics on input.
//! - **Send failures.** A failed send to a worker removes it (its jobs are
//!   redelivered, the job whose send failed first); to a scheduler removes
//!   it; to a client drops the message (the job itself is already settled,
//!   nothing is kept for the client).

use std::collections::VecDeque;
use std::rc::Rc;

use emqp_proto::{
    Command, Headers, Inform, Message, PeerType, Reject, RejectReason, Reply, Request,
    ResultStatus, DEFAULT_QUEUE, PROTOCOL_VERSION,
};

use crate::config::Config;
use crate::events::{Action, Frames, Input, JournalOp, SendFailure, Socket, StoredJob};
use crate::queues::{Job, JobExtra, JobId, JobState, JobStore};
use crate::util::{ident, unix_ts_text, FastMap, LogLimiter, MsgIds};
use crate::workers::{WorkerId, WorkerPool};

/// A registered scheduler (frontend peer).
#[derive(Debug, Clone)]
pub struct Scheduler {
    pub identity: Vec<u8>,
    pub last_seen: u64,
}

/// A job that gave up for good.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub id: u64,
    pub msgid: String,
    pub client: Vec<u8>,
    pub queue: String,
    pub attempts: u32,
    pub reason: String,
    /// The last error payload (worker's REPLY), if any.
    pub error: Option<Vec<u8>>,
    /// Core time it was dead-lettered (0 for ones loaded from a journal).
    pub at: u64,
    /// Unix milliseconds it was dead-lettered.
    pub at_unix_ms: u64,
}

/// Counters, visible on the admin socket.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub accepted: u64,
    pub restored: u64,
    pub dispatched: u64,
    pub completed: u64,
    pub failed: u64,
    pub retried: u64,
    pub redelivered: u64,
    pub dead_lettered: u64,
    pub rejected_queue_full: u64,
    pub rejected_malformed: u64,
    pub rejected_shutting_down: u64,
    pub malformed_dropped: u64,
    pub results_forwarded: u64,
    /// Jobs enqueued by built-in schedules.
    pub scheduled_runs: u64,
    /// Runs of built-in schedules skipped (queue at `hwm`, or shutting down).
    pub scheduled_runs_skipped: u64,
    /// Per route queue counters and latency (see [`crate::metrics`]).
    pub queues: FastMap<String, crate::metrics::QueueMetrics>,
    pub processed_by_worker: FastMap<Vec<u8>, u64>,
}

impl Stats {
    /// The counters of route queue `q` (allocates only on its first use).
    pub(crate) fn queue_mut(&mut self, q: &str) -> &mut crate::metrics::QueueMetrics {
        if !self.queues.contains_key(q) {
            self.queues.insert(q.to_string(), Default::default());
        }
        self.queues.get_mut(q).expect("just inserted")
    }
}

/// The router core. See the module documentation for the rules.
#[derive(Debug)]
pub struct Router {
    pub(crate) cfg: Config,
    pub(crate) pool: WorkerPool,
    pub(crate) store: JobStore,
    pub(crate) schedulers: Vec<Scheduler>,
    pub(crate) stats: Stats,
    pub(crate) dead: VecDeque<DeadLetter>,
    /// msgid → job of every unfinished job whose delivery was lost at least
    /// once (`lost > 0`): a job-ack worker's REPLY for it may arrive on
    /// another identity (reconnect) while it is queued or delayed again.
    pub(crate) redelivered: FastMap<String, JobId>,
    /// Dead letters loaded from the journal at start.
    pub(crate) restored_dead: u64,
    /// Built-in schedules (SCHEDULE with no external scheduler connected).
    pub(crate) book: emq_schedule::ScheduleBook,
    next_heartbeat: u64,
    drain_deadline: Option<u64>,
    exited: bool,
    ids: MsgIds,
    malformed_log: LogLimiter,
    unknown_log: LogLimiter,
    reject_log: LogLimiter,
    gone_log: LogLimiter,
}

fn frames_of(msgid: String, command: Command) -> Frames {
    Message::with_msgid(msgid, command).encode()
}

impl Router {
    pub fn new(cfg: Config) -> Router {
        Router {
            cfg,
            pool: WorkerPool::default(),
            store: JobStore::new(),
            schedulers: Vec::new(),
            stats: Stats::default(),
            dead: VecDeque::new(),
            redelivered: FastMap::default(),
            restored_dead: 0,
            book: emq_schedule::ScheduleBook::new(),
            next_heartbeat: 0,
            drain_deadline: None,
            exited: false,
            ids: MsgIds::new(),
            malformed_log: LogLimiter::new("malformed messages", 20),
            unknown_log: LogLimiter::new("messages from unknown workers", 20),
            reject_log: LogLimiter::new("rejected requests", 20),
            gone_log: LogLimiter::new("messages to gone clients", 20),
        }
    }

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

    /// Every accepted, unfinished job (buffered, delayed or in flight), in
    /// job id order: what a journal must keep at shutdown.
    pub fn unfinished_jobs(&self) -> Vec<StoredJob> {
        let epoch = self.cfg.epoch_unix_micros;
        let mut v: Vec<StoredJob> = self
            .store
            .jobs
            .iter()
            .map(|(id, j)| j.to_stored(id, epoch))
            .collect();
        v.sort_by_key(|j| j.id);
        v
    }

    /// Seed the core with jobs recovered from a journal. They were
    /// acknowledged in an earlier run, so no REPLY goes out; they are
    /// buffered (ignoring `hwm`) under their route queue, in the given order,
    /// and handed out as slots appear. Returns how many were queued.
    pub fn restore(
        &mut self,
        jobs: impl IntoIterator<Item = StoredJob>,
        now: u64,
        out: &mut Vec<Action>,
    ) -> usize {
        let mut n = 0;
        let mut routes: Vec<String> = Vec::new();
        for s in jobs {
            let id = if s.id == 0 || self.store.jobs.contains_key(&s.id) {
                self.store.alloc_id()
            } else {
                s.id
            };
            if id >= self.store.next_id {
                self.store.next_id = id + 1;
            }
            let route = if s.route.is_empty() {
                DEFAULT_QUEUE.to_string()
            } else {
                s.route
            };
            if !routes.contains(&route) {
                routes.push(route.clone());
            }
            // A journalled delivery count above 1 means earlier deliveries
            // were lost; keep counting them (at least one more try is left).
            let lost = s
                .attempts
                .saturating_sub(1)
                .min(self.cfg.max_attempts.saturating_sub(1));
            if lost > 0 {
                self.redelivered.insert(s.msgid.clone(), id);
            }
            let meta = self
                .store
                .metas
                .intern(&s.client, &s.queue, &route, &s.headers, || {
                    let h = Headers::parse(&s.headers).unwrap_or_default();
                    (h.reply_requested(), h.retry_count().unwrap_or(0))
                });
            let mut job = Job::new(&s.msgid, &s.payload, meta, now);
            job.attempts = s.attempts;
            job.extra = Some(Box::new(JobExtra {
                lost,
                accepted_unix: Some(s.accepted_at),
                ..JobExtra::default()
            }));
            self.store.insert_queued(id, job);
            self.stats.accepted += 1;
            self.stats.restored += 1;
            n += 1;
        }
        for r in routes {
            self.pump(&r, out);
        }
        n
    }

    /// Put dead letters recovered from a journal into the admin list
    /// (oldest first; only the last `dead_letter_keep` are kept). They do
    /// not count in [`Stats::dead_lettered`] (this run's), only in the
    /// listed `count` of the admin STATUS.
    pub fn restore_dead_letters(&mut self, letters: impl IntoIterator<Item = DeadLetter>) -> usize {
        let mut n = 0;
        for d in letters {
            n += 1;
            if self.cfg.dead_letter_keep == 0 {
                continue;
            }
            if self.dead.len() >= self.cfg.dead_letter_keep {
                self.dead.pop_front();
            }
            self.dead.push_back(d);
        }
        self.restored_dead += n as u64;
        n
    }

    /// Feed one input; actions are appended to `out` in the order the
    /// binary must execute them (journal entries precede the sends they
    /// cover).
    pub fn handle(&mut self, input: Input, now: u64, out: &mut Vec<Action>) {
        match input {
            Input::Frames { socket, frames } => self.on_frames(socket, frames, now, out),
            Input::Message {
                socket,
                identity,
                message,
            } => self.on_message(socket, identity, message, None, now, out),
            Input::Tick => self.on_tick(now, out),
            Input::SendFailed {
                socket,
                identity,
                reason,
            } => self.on_send_failed(socket, identity, reason, now, out),
            Input::Shutdown => self.start_shutdown("shutdown requested", now, out),
        }
        self.maybe_exit(now, out);
    }

    // ----- decoding -------------------------------------------------------

    fn on_frames(&mut self, socket: Socket, mut frames: Frames, now: u64, out: &mut Vec<Action>) {
        if frames.is_empty() {
            self.stats.malformed_dropped += 1;
            if self.malformed_log.allow(now) {
                log::warn!("{}: dropped an empty message", socket.name());
            }
            return;
        }
        if socket == Socket::Frontend && frames.get(3).map(Vec::as_slice) == Some(b"REQUEST") {
            // Hot path: take the REQUEST apart without copying any frame.
            // Anything `Message::decode` would refuse goes the general way
            // below (same errors, same REJECT).
            if let Some((identity, msgid, r, raw_headers)) = take_request(&mut frames) {
                self.touch(socket, &identity, now);
                self.on_request(identity, msgid, r, Some(raw_headers), now, out);
                return;
            }
        }
        let identity = frames.remove(0);
        // Keep what decoding would lose: the HEADERS frame of a REQUEST (to
        // forward it byte for byte) and whole SCHEDULE/UNSCHEDULE messages
        // (forwarded verbatim). A REQUEST's msgid is kept for REJECT.
        let mut raw_headers = None;
        let mut raw_frames = None;
        let mut request_msgid = None;
        match frames.get(2).map(Vec::as_slice) {
            Some(b"REQUEST") => {
                raw_headers = frames.get(5).cloned();
                request_msgid = frames
                    .get(3)
                    .and_then(|m| std::str::from_utf8(m).ok())
                    .map(str::to_string);
            }
            Some(b"SCHEDULE") | Some(b"UNSCHEDULE") => raw_frames = Some(frames.clone()),
            _ => {}
        }
        match Message::decode(frames) {
            Ok(msg) => {
                let raw = match (raw_headers, raw_frames) {
                    (Some(h), _) => Some(Raw::Headers(h)),
                    (None, Some(f)) => Some(Raw::Frames(f)),
                    (None, None) => None,
                };
                self.on_message(socket, identity, msg, raw, now, out)
            }
            Err(e) => {
                self.touch(socket, &identity, now);
                self.stats.malformed_dropped += 1;
                if self.malformed_log.allow(now) {
                    log::warn!(
                        "{}: dropped malformed message from {}: {e}",
                        socket.name(),
                        ident(&identity)
                    );
                }
                if let (Socket::Frontend, Some(msgid)) = (socket, request_msgid) {
                    self.stats.rejected_malformed += 1;
                    self.reject(
                        identity,
                        msgid,
                        RejectReason::Malformed,
                        format!("malformed REQUEST: {e}"),
                        out,
                    );
                }
            }
        }
    }

    /// Any message counts as a heartbeat of a known peer.
    fn touch(&mut self, socket: Socket, identity: &[u8], now: u64) {
        match socket {
            Socket::Backend => {
                if let Some(id) = self.pool.id_of(identity) {
                    if let Some(w) = self.pool.get_mut(id) {
                        w.last_seen = now;
                    }
                }
            }
            Socket::Frontend => {
                if let Some(s) = self.schedulers.iter_mut().find(|s| s.identity == identity) {
                    s.last_seen = now;
                }
            }
            Socket::Admin => {}
        }
    }

    fn on_message(
        &mut self,
        socket: Socket,
        identity: Vec<u8>,
        msg: Message,
        raw: Option<Raw>,
        now: u64,
        out: &mut Vec<Action>,
    ) {
        self.touch(socket, &identity, now);
        match socket {
            Socket::Backend => self.on_backend(identity, msg, now, out),
            Socket::Frontend => self.on_frontend(identity, msg, raw, now, out),
            Socket::Admin => self.on_admin(identity, msg, now, out),
        }
    }

    // ----- backend --------------------------------------------------------

    fn on_backend(&mut self, identity: Vec<u8>, msg: Message, now: u64, out: &mut Vec<Action>) {
        let Message { msgid, command } = msg;
        if let Command::Inform(inf) = command {
            self.on_worker_inform(identity, msgid, inf, now, out);
            return;
        }
        let Some(id) = self.pool.id_of(&identity) else {
            if self.unknown_log.allow(now) {
                log::warn!(
                    "backend: {} from unknown worker {} ignored (no INFORM yet, or removed)",
                    command.name(),
                    ident(&identity)
                );
            }
            return;
        };
        match command {
            Command::Ready => self.on_ready(id, now, out),
            Command::Reply(r) => self.on_worker_reply(id, r, now, out),
            Command::Heartbeat { .. } => {}
            Command::Kbye => self.remove_worker(id, "KBYE", now, out),
            other => {
                if self.malformed_log.allow(now) {
                    log::warn!(
                        "backend: unexpected {} from worker {} ignored",
                        other.name(),
                        ident(&identity)
                    );
                }
            }
        }
    }

    fn on_worker_inform(
        &mut self,
        identity: Vec<u8>,
        msgid: String,
        inf: Inform,
        now: u64,
        out: &mut Vec<Action>,
    ) {
        if inf.peer_type == Some(PeerType::Scheduler) {
            log::warn!(
                "backend: scheduler INFORM from {} ignored (schedulers connect to the frontend)",
                ident(&identity)
            );
            return;
        }
        if self.is_draining() {
            log::info!(
                "backend: INFORM from {} ignored: shutting down",
                ident(&identity)
            );
            return;
        }
        if let Some(old) = self.pool.id_of(&identity) {
            self.remove_worker(old, "registered again", now, out);
        }
        let queues = if inf.queues.is_empty() {
            self.cfg.default_queues.0.clone()
        } else {
            inf.queues.0
        };
        log::info!(
            "worker {} registered: queues {}{}",
            ident(&identity),
            emqp_proto::QueueSpec(queues.clone()).to_inform_json(),
            if inf.features.is_empty() {
                String::new()
            } else {
                format!(", features {}", inf.features.join(","))
            }
        );
        self.pool
            .register(identity.clone(), queues, inf.features, now);
        let ack = frames_of(self.ids.next_id(), Command::Ack { acked_msgid: msgid });
        self.send(Socket::Backend, identity.clone(), ack, out);
        let hb = self.heartbeat_frames(now);
        self.send(Socket::Backend, identity, hb, out);
    }

    fn on_ready(&mut self, id: WorkerId, now: u64, out: &mut Vec<Action>) {
        let Some(w) = self.pool.get_mut(id) else {
            return;
        };
        w.readies += 1;
        if !w.job_ack && w.ready_owed > 0 {
            // The READY that follows a REPLY frees that job's slot.
            w.ready_owed -= 1;
        } else if !w.job_ack {
            // Legacy: READY means "the oldest job I had without a pending
            // REPLY is done".
            let found = w
                .inflight
                .iter()
                .find(|(_, jid)| {
                    self.store
                        .jobs
                        .get(jid)
                        .is_some_and(|j| !j.reply_requested())
                })
                .map(|(seq, _)| *seq);
            if let Some(seq) = found {
                if let Some(jid) = self.finish_inflight(id, seq) {
                    self.job_done(jid, id, ResultStatus::Ok, None, now, out);
                }
            }
        }
        if !self.is_draining() {
            let nq = self.pool.get(id).map_or(0, |w| w.queues.len());
            for i in 0..nq {
                let Some(w) = self.pool.get(id) else { return };
                let q = &w.queues[i].1;
                if let Some(jid) = self.store.pop_front(q) {
                    self.dispatch(jid, id, false, out);
                    return;
                }
            }
        }
        self.pool.add_slot(id);
    }

    /// Take the in-flight entry `seq` off worker `id`.
    fn finish_inflight(&mut self, id: WorkerId, seq: u64) -> Option<JobId> {
        let jid = *self.pool.get(id)?.inflight.get(&seq)?;
        let msgid = self.store.jobs.get(&jid)?.msgid();
        self.pool.finish(id, seq, &msgid)
    }

    fn on_worker_reply(&mut self, id: WorkerId, r: Reply, now: u64, out: &mut Vec<Action>) {
        let Some(w) = self.pool.get(id) else { return };
        let seq = match &r.orig_msgid {
            Some(m) => w.by_msgid.get(m).copied(),
            None => w
                .inflight
                .iter()
                .find(|(_, jid)| {
                    self.store
                        .jobs
                        .get(jid)
                        .is_some_and(|j| j.reply_requested())
                })
                .map(|(seq, _)| *seq),
        };
        let Some(seq) = seq else {
            if w.job_ack {
                if let Some(m) = &r.orig_msgid {
                    if self.reply_elsewhere(id, m, &r, now, out) {
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
        let Some(jid) = self.finish_inflight(id, seq) else {
            return;
        };
        if let Some(w) = self.pool.get_mut(id) {
            if !w.job_ack {
                w.ready_owed = w.ready_owed.saturating_add(1);
            }
        }
        let status = r.status.unwrap_or(ResultStatus::Ok);
        self.job_done(jid, id, status, Some(r.payload), now, out);
    }

    /// A job-ack worker's REPLY for a job that is not in flight on it (its
    /// job manager reconnected with a new identity while the job ran): the
    /// job is completed wherever it is — in flight on another (old)
    /// identity, or queued / waiting for a retry after a redelivery.
    /// Rare path (a miss on the replying worker), so linear in the number
    /// of workers. Returns whether a job was found.
    fn reply_elsewhere(
        &mut self,
        id: WorkerId,
        msgid: &str,
        r: &Reply,
        now: u64,
        out: &mut Vec<Action>,
    ) -> bool {
        let mut on: Option<(WorkerId, u64)> = None;
        for w in self.pool.workers.values() {
            if w.id != id {
                if let Some(seq) = w.by_msgid.get(msgid) {
                    on = Some((w.id, *seq));
                    break;
                }
            }
        }
        let jid = match on {
            Some((old, seq)) => {
                let Some(jid) = self.finish_inflight(old, seq) else {
                    return false;
                };
                if let Some(w) = self.pool.get_mut(old) {
                    // A legacy worker would send a READY for that slot.
                    if !w.job_ack {
                        w.ready_owed = w.ready_owed.saturating_add(1);
                    }
                }
                jid
            }
            None => {
                let Some(jid) = self.redelivered.get(msgid).copied() else {
                    return false;
                };
                match self.store.jobs.get(&jid).map(|j| j.state) {
                    Some(JobState::Queued) => self.store.remove_queued(jid),
                    Some(JobState::Delayed { due }) => {
                        self.store.delayed.remove(&(due, jid));
                    }
                    // In flight: found above (on another worker) or not
                    // at all (on the replying worker: not a miss).
                    _ => return false,
                }
                jid
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
        self.job_done(jid, id, status, Some(r.payload.clone()), now, out);
        true
    }

    /// A job's delivery ended with `status`.
    fn job_done(
        &mut self,
        jid: JobId,
        worker: WorkerId,
        status: ResultStatus,
        payload: Option<Vec<u8>>,
        now: u64,
        out: &mut Vec<Action>,
    ) {
        let Some(job) = self.store.jobs.get_mut(&jid) else {
            return;
        };
        if status == ResultStatus::Failed && job.failures() < job.retry_count() {
            let extra = job.extra_mut();
            extra.failures += 1;
            extra.last_error = payload;
            let failures = extra.failures;
            let delay = self.cfg.backoff(failures);
            log::info!(
                "job {} failed (try {} of {}), retrying in {} ms",
                job.msgid(),
                failures,
                job.retry_count() + 1,
                delay / 1000
            );
            self.stats.retried += 1;
            let meta = Rc::clone(&job.meta);
            self.stats.queue_mut(&meta.route).retried += 1;
            self.store.delay(jid, now.saturating_add(delay));
            return;
        }
        let Some(job) = self.store.jobs.remove(&jid) else {
            return;
        };
        if job.lost() > 0 {
            self.forget_redelivered(&job.msgid(), jid);
        }
        let failed_for_good = status == ResultStatus::Failed && job.retry_count() > 0;
        {
            let m = self.stats.queue_mut(job.route());
            m.finished += 1;
            if !failed_for_good {
                if status == ResultStatus::Failed {
                    m.failed += 1;
                } else {
                    m.processed += 1;
                }
                m.latency.observe(now.saturating_sub(job.accepted_at));
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
            let reason = format!("failed after {} tries", job.failures() + 1);
            self.dead_letter(jid, job, reason, payload, now, out);
            return;
        }
        self.stats.completed += 1;
        if status == ResultStatus::Failed {
            self.stats.failed += 1;
        }
        log::debug!(
            "job {} completed ({}) in {} ms",
            job.msgid(),
            status.as_str(),
            now.saturating_sub(job.accepted_at) / 1000
        );
        if self.cfg.journal {
            out.push(Action::Journal(JournalOp::Completed {
                id: jid,
                msgid: job.msgid().to_string(),
            }));
        }
        if job.reply_requested() && !job.client().is_empty() {
            let payload = payload.unwrap_or_else(|| br#"{"value": null}"#.to_vec());
            self.send_result(
                job.client().to_vec(),
                job.msgid().to_string(),
                status,
                payload,
                out,
            );
        }
    }

    fn forget_redelivered(&mut self, msgid: &str, jid: JobId) {
        if self.redelivered.get(msgid) == Some(&jid) {
            self.redelivered.remove(msgid);
        }
    }

    fn send_result(
        &mut self,
        client: Vec<u8>,
        msgid: String,
        status: ResultStatus,
        payload: Vec<u8>,
        out: &mut Vec<Action>,
    ) {
        self.stats.results_forwarded += 1;
        let f = frames_of(
            self.ids.next_id(),
            Command::Result(emqp_proto::JobResult {
                orig_msgid: msgid,
                status,
                payload,
            }),
        );
        self.send(Socket::Frontend, client, f, out);
    }

    fn dead_letter(
        &mut self,
        jid: JobId,
        job: Job,
        reason: String,
        error: Option<Vec<u8>>,
        now: u64,
        out: &mut Vec<Action>,
    ) {
        self.stats.dead_lettered += 1;
        self.stats.queue_mut(job.route()).dead_lettered += 1;
        log::warn!(
            "job {} (queue {}) dead-lettered after {} deliveries: {reason}",
            job.msgid(),
            job.route(),
            job.attempts
        );
        if self.cfg.journal {
            out.push(Action::Journal(JournalOp::DeadLettered {
                id: jid,
                msgid: job.msgid().to_string(),
                reason: reason.clone(),
            }));
        }
        if job.reply_requested() && !job.client().is_empty() {
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
            self.send_result(
                job.client().to_vec(),
                job.msgid().to_string(),
                ResultStatus::Failed,
                payload,
                out,
            );
        }
        if self.cfg.dead_letter_keep > 0 {
            if self.dead.len() >= self.cfg.dead_letter_keep {
                self.dead.pop_front();
            }
            self.dead.push_back(DeadLetter {
                id: jid,
                msgid: job.msgid().to_string(),
                client: job.client().to_vec(),
                queue: job.route().to_string(),
                attempts: job.attempts,
                reason,
                error,
                at: now,
                at_unix_ms: self.cfg.epoch_unix_micros.saturating_add(now) / 1000,
            });
        }
    }

    /// Remove a worker; its unfinished jobs go back to the front of their
    /// queues (dispatch order kept) or to the dead letters.
    fn remove_worker(&mut self, id: WorkerId, reason: &str, now: u64, out: &mut Vec<Action>) {
        let Some(w) = self.pool.remove(id) else {
            return;
        };
        let mut back: Vec<JobId> = Vec::new();
        let mut dead: Vec<JobId> = Vec::new();
        for jid in w.inflight.values() {
            if let Some(job) = self.store.jobs.get_mut(jid) {
                let extra = job.extra_mut();
                extra.lost += 1;
                let lost = extra.lost;
                if lost == 1 {
                    self.redelivered.insert(job.msgid().to_string(), *jid);
                }
                if lost >= self.cfg.max_attempts {
                    dead.push(*jid);
                } else {
                    back.push(*jid);
                }
            }
        }
        log::info!(
            "worker {} removed ({reason}): {} job(s) back to queue, {} dead-lettered",
            ident(&w.identity),
            back.len(),
            dead.len()
        );
        let mut routes: Vec<String> = Vec::new();
        for jid in back.iter().rev() {
            self.store.requeue(*jid, true);
            if let Some(j) = self.store.jobs.get(jid) {
                let route = j.route();
                self.stats.queue_mut(route).redelivered += 1;
                if !routes.iter().any(|r| r == route) {
                    routes.push(route.to_string());
                }
            }
        }
        self.stats.redelivered += back.len() as u64;
        for jid in dead {
            if let Some(job) = self.store.jobs.remove(&jid) {
                self.forget_redelivered(&job.msgid(), jid);
                let reason = format!(
                    "delivery lost {} times (last: worker {} {reason})",
                    job.lost(),
                    ident(&w.identity)
                );
                self.dead_letter(jid, job, reason, None, now, out);
            }
        }
        for r in routes {
            self.pump(&r, out);
        }
    }

    /// Hand buffered jobs of `queue` to free workers.
    fn pump(&mut self, queue: &str, out: &mut Vec<Action>) {
        if self.is_draining() {
            return;
        }
        while let Some(wid) = self.pool.pick(queue) {
            let Some(jid) = self.store.pop_front(queue) else {
                return;
            };
            self.dispatch(jid, wid, true, out);
        }
    }

    /// Send job `jid` to worker `wid`.
    fn dispatch(&mut self, jid: JobId, wid: WorkerId, consume_slot: bool, out: &mut Vec<Action>) {
        let Some(job) = self.store.jobs.get_mut(&jid) else {
            return;
        };
        let Some(seq) = self
            .pool
            .record_dispatch(wid, jid, &job.msgid(), consume_slot)
        else {
            // Unknown worker: cannot happen (callers pick live workers);
            // keep the job rather than lose it.
            self.store.requeue(jid, true);
            return;
        };
        job.attempts += 1;
        job.state = JobState::InFlight { worker: wid, seq };
        if job.attempts > 1 && self.cfg.journal {
            out.push(Action::Journal(JournalOp::Attempt {
                id: jid,
                msgid: job.msgid().to_string(),
                attempts: job.attempts,
            }));
        }
        let identity = self
            .pool
            .get(wid)
            .map(|w| w.identity.clone())
            .unwrap_or_default();
        log::debug!(
            "job {} (queue {}) dispatched to {} (attempt {})",
            job.msgid(),
            job.queue(),
            ident(&identity),
            job.attempts
        );
        let frames = vec![
            Vec::new(),
            PROTOCOL_VERSION.as_bytes().to_vec(),
            b"REQUEST".to_vec(),
            job.msgid().as_bytes().to_vec(),
            job.queue().as_bytes().to_vec(),
            job.headers().to_vec(),
            job.payload().to_vec(),
        ];
        self.stats.dispatched += 1;
        self.send(Socket::Backend, identity, frames, out);
    }

    // ----- frontend -------------------------------------------------------

    fn on_frontend(
        &mut self,
        identity: Vec<u8>,
        msg: Message,
        raw: Option<Raw>,
        now: u64,
        out: &mut Vec<Action>,
    ) {
        let Message { msgid, command } = msg;
        match command {
            Command::Request(r) => {
                let raw_headers = match raw {
                    Some(Raw::Headers(h)) => Some(h),
                    _ => None,
                };
                self.on_request(identity, msgid, r, raw_headers, now, out)
            }
            Command::Inform(inf) => {
                if inf.peer_type != Some(PeerType::Scheduler) {
                    log::warn!(
                        "frontend: worker INFORM from {} ignored (workers connect to the backend)",
                        ident(&identity)
                    );
                    return;
                }
                if self.is_draining() {
                    log::info!("frontend: scheduler INFORM ignored: shutting down");
                    return;
                }
                match self.schedulers.iter().position(|s| s.identity == identity) {
                    Some(i) => {
                        let s = self.schedulers.remove(i);
                        self.schedulers.push(s);
                    }
                    None => {
                        log::info!("scheduler {} registered", ident(&identity));
                        self.schedulers.push(Scheduler {
                            identity: identity.clone(),
                            last_seen: now,
                        });
                    }
                }
                let ack = frames_of(self.ids.next_id(), Command::Ack { acked_msgid: msgid });
                self.send(Socket::Frontend, identity.clone(), ack, out);
                let hb = self.heartbeat_frames(now);
                self.send(Socket::Frontend, identity, hb, out);
            }
            cmd @ (Command::Schedule(_) | Command::Unschedule(_)) => {
                let raw = match raw {
                    Some(Raw::Frames(f)) => Some(f),
                    _ => None,
                };
                self.on_schedule(identity, msgid, cmd, raw, now, out);
            }
            Command::Kbye => {
                if let Some(i) = self.schedulers.iter().position(|s| s.identity == identity) {
                    self.schedulers.remove(i);
                    log::info!("scheduler {} removed (KBYE)", ident(&identity));
                }
            }
            Command::Heartbeat { .. } => {}
            other => {
                log::debug!(
                    "frontend: {} from {} ignored",
                    other.name(),
                    ident(&identity)
                );
            }
        }
    }

    /// SCHEDULE / UNSCHEDULE from a client. With a 0.3.13 scheduler peer
    /// connected, SCHEDULE goes verbatim to the newest one (as in 0.3.13)
    /// and is not booked here; otherwise the built-in book keeps it: ack
    /// `REPLY [msgid]`, or `REJECT malformed` with the reason. UNSCHEDULE
    /// goes to every scheduler peer and also removes the built-in schedule.
    /// Every SCHEDULE or UNSCHEDULE the router takes is acked to the client,
    /// forwarded or booked, matching a schedule or not.
    fn on_schedule(
        &mut self,
        client: Vec<u8>,
        msgid: String,
        cmd: Command,
        raw: Option<Frames>,
        now: u64,
        out: &mut Vec<Action>,
    ) {
        let (sched, unschedule) = match cmd {
            Command::Schedule(s) => (s, false),
            Command::Unschedule(s) => (s, true),
            _ => return,
        };
        let peers = !self.schedulers.is_empty();
        if peers {
            let frames = match raw {
                Some(f) => f,
                None if unschedule => frames_of(msgid.clone(), Command::Unschedule(sched.clone())),
                None => frames_of(msgid.clone(), Command::Schedule(sched.clone())),
            };
            if unschedule {
                let ids: Vec<Vec<u8>> =
                    self.schedulers.iter().map(|s| s.identity.clone()).collect();
                for s in ids {
                    self.send(Socket::Frontend, s, frames.clone(), out);
                }
            } else if let Some(s) = self.schedulers.last() {
                let s = s.identity.clone();
                self.send(Socket::Frontend, s, frames, out);
                // Accepted by the router (handed to the scheduler peer).
                self.ack_client(client, &msgid, out);
                return;
            }
        }
        let now_ms = self.unix_ms(now);
        if unschedule {
            if self.book.unschedule(&sched) {
                self.journal_schedules(out);
            } else if !peers {
                log::info!(
                    "UNSCHEDULE from {} for queue {}: no such schedule",
                    ident(&client),
                    sched.queue
                );
            }
            // Removal is idempotent: the client learns its UNSCHEDULE was
            // taken, whether or not a schedule matched.
            self.ack_client(client, &msgid, out);
            return;
        }
        if self.is_draining() {
            self.reject(
                client,
                msgid,
                RejectReason::ShuttingDown,
                "the router is shutting down".into(),
                out,
            );
            return;
        }
        match self.book.schedule(&sched, now_ms) {
            Ok(id) => {
                log::debug!("SCHEDULE {msgid} from {} booked as {id}", ident(&client));
                self.journal_schedules(out);
                self.ack_client(client, &msgid, out);
            }
            Err(e) => {
                self.stats.rejected_malformed += 1;
                log::warn!("SCHEDULE {msgid} from {} refused: {e}", ident(&client));
                self.reject(client, msgid, RejectReason::Malformed, e.to_string(), out);
            }
        }
    }

    /// `REPLY [msgid]` to a client on the frontend: its message was taken.
    fn ack_client(&mut self, client: Vec<u8>, msgid: &str, out: &mut Vec<Action>) {
        let ack = frames_of(self.ids.next_id(), Command::Reply(Reply::ack_of(msgid)));
        self.send(Socket::Frontend, client, ack, out);
    }

    /// Unix milliseconds at core time `now`.
    fn unix_ms(&self, now: u64) -> i64 {
        i64::try_from(self.cfg.epoch_unix_micros.saturating_add(now) / 1000).unwrap_or(i64::MAX)
    }

    /// Journal what the schedule book changed.
    fn journal_schedules(&mut self, out: &mut Vec<Action>) {
        if !self.book.has_changes() {
            return;
        }
        let changes = self.book.take_changes();
        if !self.cfg.journal {
            return;
        }
        for c in changes {
            out.push(Action::Journal(match c {
                emq_schedule::ScheduleChange::Put { id, blob } => JournalOp::PutSchedule {
                    id: id.as_str().to_string(),
                    blob,
                },
                emq_schedule::ScheduleChange::Delete { id } => JournalOp::DeleteSchedule {
                    id: id.as_str().to_string(),
                },
            }));
        }
    }

    /// Built-in schedules whose time has come become jobs: like an
    /// accepted REQUEST (journalled, buffered, dispatched) with a generated
    /// msgid and no client (results go nowhere).
    fn run_schedules(&mut self, now: u64, out: &mut Vec<Action>) {
        let now_ms = self.unix_ms(now);
        match self.book.next_wakeup() {
            Some(t) if t <= now_ms => {}
            _ => return,
        }
        let mut routes: Vec<String> = Vec::new();
        for run in self.book.due(now_ms) {
            let route = if self.pool.serves(&run.queue) {
                run.queue.clone()
            } else {
                DEFAULT_QUEUE.to_string()
            };
            if !self.pool.has_free(&route) && self.store.queue_len(&route) >= self.cfg.hwm {
                self.stats.scheduled_runs_skipped += 1;
                log::warn!(
                    "schedule {} run {} skipped: queue {route} has {} buffered jobs (hwm)",
                    run.id,
                    run.run_number,
                    self.store.queue_len(&route)
                );
                continue;
            }
            let msgid = self.ids.next_id();
            log::info!(
                "schedule {} run {}: job {msgid} on queue {}",
                run.id,
                run.run_number,
                run.queue
            );
            let id = self.store.alloc_id();
            let headers = run.headers.encode().into_bytes();
            let meta = self
                .store
                .metas
                .intern(b"", &run.queue, &route, &headers, || {
                    (
                        run.headers.reply_requested(),
                        run.headers.retry_count().unwrap_or(0),
                    )
                });
            let job = Job::new(&msgid, &run.message, meta, now);
            self.stats.accepted += 1;
            self.stats.scheduled_runs += 1;
            if self.cfg.journal {
                out.push(Action::Journal(JournalOp::Accepted(
                    job.to_stored(id, self.cfg.epoch_unix_micros),
                )));
            }
            self.store.insert_queued(id, job);
            if !routes.contains(&route) {
                routes.push(route);
            }
        }
        self.journal_schedules(out);
        for r in routes {
            self.pump(&r, out);
        }
    }

    /// Put schedules recovered from a journal (`(id, blob)` records) into
    /// the built-in book. A run that fell due while the router was down
    /// runs once, on the next tick. An unusable record is logged and its
    /// deletion journalled. Returns how many were restored.
    pub fn restore_schedules(
        &mut self,
        records: impl IntoIterator<Item = (String, Vec<u8>)>,
        now: u64,
        out: &mut Vec<Action>,
    ) -> usize {
        let now_ms = self.unix_ms(now);
        let mut n = 0;
        for (id, blob) in records {
            match self.book.restore(&blob, now_ms) {
                Ok(_) => n += 1,
                Err(e) => {
                    log::error!("journal schedule {id} cannot be restored, deleting it: {e}");
                    if self.cfg.journal {
                        out.push(Action::Journal(JournalOp::DeleteSchedule { id }));
                    }
                }
            }
        }
        self.journal_schedules(out);
        n
    }

    /// The built-in schedules.
    pub fn schedules(&self) -> &emq_schedule::ScheduleBook {
        &self.book
    }

    fn reject(
        &mut self,
        client: Vec<u8>,
        msgid: String,
        reason: RejectReason,
        text: String,
        out: &mut Vec<Action>,
    ) {
        let f = frames_of(
            self.ids.next_id(),
            Command::Reject(Reject {
                orig_msgid: msgid,
                reason,
                text,
            }),
        );
        self.send(Socket::Frontend, client, f, out);
    }

    fn on_request(
        &mut self,
        client: Vec<u8>,
        msgid: String,
        r: Request,
        raw_headers: Option<Vec<u8>>,
        now: u64,
        out: &mut Vec<Action>,
    ) {
        if self.is_draining() {
            self.stats.rejected_shutting_down += 1;
            let route = if self.pool.serves(&r.queue) {
                r.queue.as_str()
            } else {
                DEFAULT_QUEUE
            };
            self.stats.queue_mut(route).rejected += 1;
            if self.reject_log.allow(now) {
                log::warn!("REQUEST {msgid} rejected: shutting down");
            }
            self.reject(
                client,
                msgid,
                RejectReason::ShuttingDown,
                "the router is shutting down".into(),
                out,
            );
            return;
        }
        let route: &str = if self.pool.serves(&r.queue) {
            &r.queue
        } else {
            DEFAULT_QUEUE
        };
        if !self.pool.has_free(route) && self.store.queue_len(route) >= self.cfg.hwm {
            self.stats.rejected_queue_full += 1;
            if self.reject_log.allow(now) {
                log::warn!(
                    "REQUEST {msgid} for queue {} rejected: {} jobs buffered (hwm {})",
                    r.queue,
                    self.store.queue_len(route),
                    self.cfg.hwm
                );
            }
            let text = format!(
                "queue {route} has {} buffered jobs (hwm)",
                self.store.queue_len(route)
            );
            self.stats.queue_mut(route).rejected += 1;
            self.reject(client, msgid, RejectReason::QueueFull, text, out);
            return;
        }
        let id = self.store.alloc_id();
        let headers = raw_headers.unwrap_or_else(|| r.headers.encode().into_bytes());
        let meta = self
            .store
            .metas
            .intern(&client, &r.queue, route, &headers, || {
                (
                    r.headers.reply_requested(),
                    r.headers.retry_count().unwrap_or(0),
                )
            });
        let job = Job::new(&msgid, &r.message, meta, now);
        self.stats.accepted += 1;
        if self.cfg.journal {
            out.push(Action::Journal(JournalOp::Accepted(
                job.to_stored(id, self.cfg.epoch_unix_micros),
            )));
        }
        self.store.insert_queued(id, job);
        self.pump(route, out);
        self.ack_client(client, &msgid, out);
    }

    // ----- admin ----------------------------------------------------------

    fn on_admin(&mut self, identity: Vec<u8>, msg: Message, now: u64, out: &mut Vec<Action>) {
        let Message { msgid, command } = msg;
        let json = match command {
            Command::Status => self.status_json(now),
            Command::RouterShowWorkers => self.workers_json(now),
            Command::RouterShowSchedulers => self.schedulers_json(now),
            Command::Disconnect => {
                let ack = frames_of(self.ids.next_id(), Command::Ack { acked_msgid: msgid });
                self.send(Socket::Admin, identity, ack, out);
                self.start_shutdown("admin DISCONNECT", now, out);
                return;
            }
            other => {
                log::debug!("admin: {} ignored", other.name());
                return;
            }
        };
        let reply = Reply {
            payload: json.into_bytes(),
            orig_msgid: None,
            status: None,
        };
        let f = frames_of(self.ids.next_id(), Command::Reply(reply));
        self.send(Socket::Admin, identity, f, out);
    }

    // ----- time, failures, shutdown ----------------------------------------

    fn heartbeat_frames(&mut self, now: u64) -> Frames {
        let ts = unix_ts_text(self.cfg.epoch_unix_micros.saturating_add(now));
        frames_of(
            self.ids.next_id(),
            Command::Heartbeat {
                timestamp: Some(ts),
            },
        )
    }

    fn on_tick(&mut self, now: u64, out: &mut Vec<Action>) {
        if !self.is_draining() && now >= self.next_heartbeat {
            self.next_heartbeat = now.saturating_add(self.cfg.heartbeat_interval.max(1));
            let mut ids: Vec<(WorkerId, Vec<u8>)> = self
                .pool
                .workers
                .values()
                .map(|w| (w.id, w.identity.clone()))
                .collect();
            ids.sort_unstable_by_key(|(id, _)| *id);
            for (_, identity) in ids {
                let hb = self.heartbeat_frames(now);
                self.send(Socket::Backend, identity, hb, out);
            }
            let scheds: Vec<Vec<u8>> = self.schedulers.iter().map(|s| s.identity.clone()).collect();
            for identity in scheds {
                let hb = self.heartbeat_frames(now);
                self.send(Socket::Frontend, identity, hb, out);
            }
        }
        let timeout = self.cfg.peer_timeout();
        let mut dead: Vec<WorkerId> = self
            .pool
            .workers
            .values()
            .filter(|w| now.saturating_sub(w.last_seen) > timeout)
            .map(|w| w.id)
            .collect();
        dead.sort_unstable();
        for id in dead {
            self.remove_worker(id, "heartbeat timeout", now, out);
        }
        self.schedulers.retain(|s| {
            let alive = now.saturating_sub(s.last_seen) <= timeout;
            if !alive {
                log::info!(
                    "scheduler {} removed (heartbeat timeout)",
                    ident(&s.identity)
                );
            }
            alive
        });
        let due = self.store.take_due(now);
        if !due.is_empty() {
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
                self.pump(&r, out);
            }
        }
        if !self.is_draining() {
            self.run_schedules(now, out);
        }
    }

    fn on_send_failed(
        &mut self,
        socket: Socket,
        identity: Vec<u8>,
        reason: SendFailure,
        now: u64,
        out: &mut Vec<Action>,
    ) {
        let why = match &reason {
            SendFailure::HostUnreachable => "unreachable".to_string(),
            SendFailure::WouldBlock => "send buffer full".to_string(),
            SendFailure::Other(e) => format!("send failed: {e}"),
        };
        match socket {
            Socket::Backend => {
                if let Some(id) = self.pool.id_of(&identity) {
                    self.remove_worker(id, &why, now, out);
                }
            }
            Socket::Frontend => {
                if let Some(i) = self.schedulers.iter().position(|s| s.identity == identity) {
                    self.schedulers.remove(i);
                    log::info!("scheduler {} removed ({why})", ident(&identity));
                } else if self.gone_log.allow(now) {
                    log::info!("client {} {why}: message dropped", ident(&identity));
                }
            }
            Socket::Admin => log::debug!("admin peer {} {why}", ident(&identity)),
        }
    }

    fn start_shutdown(&mut self, why: &str, now: u64, out: &mut Vec<Action>) {
        if self.is_draining() {
            return;
        }
        self.drain_deadline = Some(now.saturating_add(self.cfg.drain_timeout));
        log::info!(
            "shutting down ({why}): KBYE to {} worker(s) and {} scheduler(s); {} job(s) in flight, {} buffered",
            self.pool.workers.len(),
            self.schedulers.len(),
            self.inflight_count(),
            self.buffered_count() + self.delayed_count()
        );
        let mut ids: Vec<(WorkerId, Vec<u8>)> = self
            .pool
            .workers
            .values()
            .map(|w| (w.id, w.identity.clone()))
            .collect();
        ids.sort_unstable_by_key(|(id, _)| *id);
        for (_, identity) in ids {
            let f = frames_of(self.ids.next_id(), Command::Kbye);
            self.send(Socket::Backend, identity, f, out);
        }
        let scheds: Vec<Vec<u8>> = self.schedulers.iter().map(|s| s.identity.clone()).collect();
        for identity in scheds {
            let f = frames_of(self.ids.next_id(), Command::Kbye);
            self.send(Socket::Frontend, identity, f, out);
        }
    }

    fn maybe_exit(&mut self, now: u64, out: &mut Vec<Action>) {
        let Some(deadline) = self.drain_deadline else {
            return;
        };
        if self.exited {
            return;
        }
        let idle = self.pool.inflight_total == 0;
        if idle || now >= deadline {
            self.exited = true;
            if !idle {
                log::warn!(
                    "drain timeout: {} job(s) still in flight are kept as unfinished",
                    self.pool.inflight_total
                );
            }
            out.push(Action::Exit);
        }
    }

    fn send(&mut self, socket: Socket, identity: Vec<u8>, frames: Frames, out: &mut Vec<Action>) {
        out.push(Action::Send {
            socket,
            identity,
            frames,
        });
    }

    // ----- invariants (tests) ----------------------------------------------

    /// Check the internal bookkeeping; used by the tests and the proptest.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut queued = 0usize;
        let mut inflight = 0usize;
        let mut delayed = 0usize;
        for (id, job) in self.store.jobs.iter() {
            let id = &id;
            match job.state {
                JobState::Queued => {
                    queued += 1;
                    let n = self
                        .store
                        .queues
                        .get(job.route())
                        .map_or(0, |q| q.iter().filter(|j| **j == *id).count());
                    if n != 1 {
                        return Err(format!("queued job {id} is in its queue {n} times"));
                    }
                }
                JobState::InFlight { worker, seq } => {
                    inflight += 1;
                    let w = self
                        .pool
                        .get(worker)
                        .ok_or_else(|| format!("job {id} in flight on missing worker"))?;
                    if w.inflight.get(&seq) != Some(id) {
                        return Err(format!("job {id} not in its worker's in-flight table"));
                    }
                    if self.store.queues.values().any(|q| q.contains(id)) {
                        return Err(format!("job {id} both queued and in flight"));
                    }
                }
                JobState::Delayed { due } => {
                    delayed += 1;
                    if !self.store.delayed.contains(&(due, *id)) {
                        return Err(format!("delayed job {id} not in the delay set"));
                    }
                }
            }
        }
        let in_queues: usize = self.store.queues.values().map(VecDeque::len).sum();
        if in_queues != queued || self.store.buffered() != queued {
            return Err(format!(
                "queue entries {in_queues}, counter {}, queued jobs {queued}",
                self.store.buffered()
            ));
        }
        if self.store.delayed.len() != delayed {
            return Err("delay set size mismatch".into());
        }
        let mut tables = 0usize;
        for w in self.pool.workers.values() {
            tables += w.inflight.len();
            if u64::from(w.slots) > w.readies {
                return Err(format!("worker {} has more slots than READYs", w.id));
            }
            for jid in w.inflight.values() {
                match self.store.jobs.get(jid).map(|j| j.state) {
                    Some(JobState::InFlight { worker, .. }) if worker == w.id => {}
                    other => return Err(format!("in-flight entry {jid} has state {other:?}")),
                }
            }
            for (weight, q) in &w.queues {
                let listed = self
                    .pool
                    .available
                    .get(q)
                    .is_some_and(|s| s.contains(&(std::cmp::Reverse(*weight), w.lru, w.id)));
                if listed != (w.slots > 0) {
                    return Err(format!("worker {} availability index wrong on {q}", w.id));
                }
                if w.slots > 0 && !self.is_draining() && self.store.queue_len(q) > 0 {
                    return Err(format!("worker {} idle while {q} has jobs", w.id));
                }
            }
        }
        let listed: usize = self.pool.available.values().map(|s| s.len()).sum();
        let expected: usize = self
            .pool
            .workers
            .values()
            .filter(|w| w.slots > 0)
            .map(|w| w.queues.len())
            .sum();
        if listed != expected {
            return Err(format!(
                "availability index has {listed} entries, expected {expected}"
            ));
        }
        if tables != inflight || self.pool.inflight_total != inflight {
            return Err(format!(
                "in-flight tables {tables}, counter {}, jobs {inflight}",
                self.pool.inflight_total
            ));
        }
        for (m, jid) in &self.redelivered {
            match self.store.jobs.get(jid) {
                Some(j) if *j.msgid() == **m && j.lost() > 0 => {}
                _ => return Err(format!("redelivery index entry {m} -> {jid} is stale")),
            }
        }
        let finished = self.stats.completed + self.stats.dead_lettered;
        if self.stats.results_forwarded > finished {
            return Err(format!(
                "{} RESULTs forwarded for {finished} finished jobs",
                self.stats.results_forwarded
            ));
        }
        if self.stats.accepted != self.store.jobs.len() as u64 + finished {
            return Err(format!(
                "conservation: accepted {} != unfinished {} + completed {} + dead {}",
                self.stats.accepted,
                self.store.jobs.len(),
                self.stats.completed,
                self.stats.dead_lettered
            ));
        }
        Ok(())
    }
}

/// `[identity, '', eMQP/1.0, REQUEST, MSGID, QUEUE, HEADERS, MSG, ...]`
/// as `Message::decode` would take it (extra frames ignored), without
/// copies: `(identity, msgid, request, raw headers frame)`. `None` (frames
/// untouched) when decoding would fail.
fn take_request(frames: &mut Frames) -> Option<(Vec<u8>, String, Request, Vec<u8>)> {
    if frames.len() < 8
        || !frames[1].is_empty()
        || frames[2] != PROTOCOL_VERSION.as_bytes()
        || frames[3] != b"REQUEST"
        || std::str::from_utf8(&frames[4]).is_err()
        || std::str::from_utf8(&frames[5]).is_err()
    {
        return None;
    }
    let headers = Headers::parse(&frames[6]).ok()?;
    let mut take = |i: usize| std::mem::take(&mut frames[i]);
    let identity = take(0);
    let msgid = String::from_utf8(take(4)).ok()?;
    let queue = String::from_utf8(take(5)).ok()?;
    let raw_headers = take(6);
    let message = take(7);
    Some((
        identity,
        msgid,
        Request {
            queue,
            headers,
            message,
        },
        raw_headers,
    ))
}

/// Frames kept from before decoding.
enum Raw {
    Headers(Vec<u8>),
    Frames(Frames),
}
