//! Peers: workers on the backend, 0.3.13 schedulers on the frontend.
//!
//! - **Registration.** Backend INFORM → `ACK [inform msgid]`, then one
//!   HEARTBEAT at once (a 0.3.13 job manager starts its worker processes,
//!   and so sends READY, only after the first HEARTBEAT). The ACK of an
//!   INFORM that listed features (every emq job manager) has a second
//!   frame, the router's own features ([`ROUTER_FEATURES`]: `reply-resend`
//!   and `adopt-running`, see `completion.rs`, and `reply-credit`, below); a 0.3.13 job manager, which lists none, gets
//!   0.3.13's one-frame ACK. A worker starts with 0 slots. Empty INFORM queues → `Config::default_queues`. The
//!   third INFORM frame lists features; `job-ack` makes the worker a
//!   [`WorkerKind::JobAck`] worker (completion tracked per REPLY), else it
//!   is [`WorkerKind::Legacy`] (see `completion.rs`). A second INFORM from
//!   a known identity re-registers it (its in-flight jobs are redelivered
//!   first). Frontend INFORM with TYPE `scheduler` registers a scheduler
//!   (ACK and HEARTBEAT too). INFORMs are ignored while draining.
//! - **Take-back keys.** The ACK's features frame also carries
//!   `take-back=KEY`: a secret of that job manager, 32 hex digits, the
//!   first 128 bits of SHA-256(`Config::take_back_secret` ‖ a counter), so
//!   that no one can work one out from keys or msgids seen before (the
//!   secret comes from the driver, random; the core draws no random
//!   numbers). A job manager that reconnects lists the key it was given in
//!   its INFORM (`take-back=KEY`) and is ACKed the same key; only a worker
//!   with the key of the worker a job was delivered to may take that job
//!   back (`completion.rs`, "Reconnects" and "Adoption"). A stranger on the
//!   backend does not know it, so it cannot finish other job managers'
//!   jobs. The key is neither logged nor shown (stripped from the
//!   worker's features).
//! - **Slots.** READY adds one slot, or, if one of the worker's queues
//!   (highest weight first) has a dispatchable job, hands out the oldest.
//!   A worker's `REPLY [MSG, ORIG_MSGID, STATUS, CREDIT]` (`reply-credit`,
//!   which only the ACK's features offer, so only emq job managers send
//!   it) is that REPLY followed by CREDIT READYs (at most
//!   [`MAX_REPLY_CREDIT`]): one message per job where there were two.
//! - **Heartbeats.** Every `heartbeat_interval` the router sends HEARTBEAT
//!   (body: unix time as Python's `str(time.time())`,
//!   `emqp_proto::heartbeat`) to every worker and scheduler — while
//!   draining too, so job managers finishing their jobs do not take the
//!   router for dead. Any message from a peer, even a malformed one,
//!   counts as its heartbeat. A peer silent for more than `interval ×
//!   liveness` is removed. Non-INFORM messages from unknown workers are
//!   logged (warn, rate-limited) and get nothing.
//! - **Redelivery.** When a worker is removed (heartbeat timeout, KBYE,
//!   send failure, re-INFORM) its unfinished jobs go back to the FRONT of
//!   their queues in dispatch order and are handed out again. A job lost
//!   this way `max_attempts` times is dead-lettered instead.
//! - **Send failures.** A failed send to a worker removes it (its jobs are
//!   redelivered, the job whose send failed first); to a scheduler removes
//!   it; to a client drops the message (the job itself is already
//!   settled), except a RESULT, which stays held (`results.rs`).

use std::time::Duration;

use emqp_proto::command::{
    FEATURE_ADOPT_RUNNING, FEATURE_REPLY_CREDIT, FEATURE_REPLY_RESEND, FEATURE_TAKE_BACK,
};
use emqp_proto::heartbeat::{timestamp_text, Liveness};
use emqp_proto::{Command, Inform, Message, PeerType};

use super::{frames_of, Router, Scheduler};
use crate::event::{Action, Frames, SendFailure, Socket};
use crate::jobs::JobId;
use crate::util::{ident, micros, GoneLog};

const MICROSECOND: Duration = Duration::from_micros(1);

/// What the router's ACK tells a worker that listed features.
const ROUTER_FEATURES: [&str; 3] = [
    FEATURE_REPLY_RESEND,
    FEATURE_ADOPT_RUNNING,
    FEATURE_REPLY_CREDIT,
];

/// Most READYs one REPLY's credit frame counts for (a bound on the work
/// one message makes; an emq job manager sends one or a few).
pub(crate) const MAX_REPLY_CREDIT: u32 = 1024;
use crate::workers::{WorkerId, WorkerKind};

impl Router {
    pub(crate) fn liveness(&self) -> Liveness {
        Liveness {
            interval: self.cfg.heartbeat_interval,
            liveness: self.cfg.heartbeat_liveness,
        }
    }

    fn is_dead(&self, last_seen: Duration, now: Duration) -> bool {
        self.liveness().is_dead(last_seen, now)
    }

    /// When the quietest peer will be dead.
    /// O(log workers + schedulers): the pool keeps its workers in the
    /// order they were last heard from; schedulers are few.
    pub(super) fn liveness_deadline(&self) -> Option<Duration> {
        let oldest = self
            .pool
            .quietest()
            .into_iter()
            .chain(self.schedulers.iter().map(|s| s.last_seen))
            .min()?;
        Some(self.liveness().deadline(oldest))
    }

    pub(super) fn on_backend(
        &mut self,
        identity: Vec<u8>,
        msg: Message,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
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
            Command::Reply(r) => {
                let credit = r.credit.min(MAX_REPLY_CREDIT);
                self.on_worker_reply(id, &msgid, r, now, out);
                // `reply-credit`: the READYs it stands for, after it.
                for _ in 0..credit {
                    self.on_ready(id, now, out);
                }
            }
            Command::Running { orig_msgids } => self.on_running(id, orig_msgids, now),
            Command::Progress(p) => self.on_progress(id, p, now),
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
        now: Duration,
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
        let mut inf_features = inf.features;
        let about = emqp_proto::WorkerAbout::take_from(&mut inf_features);
        let presented = emqp_proto::command::take_back_key(&inf_features).map(str::to_string);
        inf_features.retain(|f| !f.starts_with(FEATURE_TAKE_BACK));
        let take_back = if inf_features.is_empty() && presented.is_none() {
            None
        } else {
            Some(presented.unwrap_or_else(|| self.issue_take_back_key()))
        };
        log::info!(
            worker:% = ident(&identity);
            "worker {}{} registered: queues {}{}",
            ident(&identity),
            about
                .as_ref()
                .and_then(|a| a.label())
                .map(|l| format!(" ({l})"))
                .unwrap_or_default(),
            emqp_proto::QueueSpec(queues.clone()).to_inform_json(),
            if inf_features.is_empty() {
                String::new()
            } else {
                format!(", features {}", inf_features.join(","))
            }
        );
        let features = match &take_back {
            None => Vec::new(),
            Some(key) => ROUTER_FEATURES
                .iter()
                .map(|f| f.to_string())
                .chain([format!("{FEATURE_TAKE_BACK}{key}")])
                .collect(),
        };
        let id = self
            .pool
            .register(identity.clone(), queues, inf_features, now);
        if let Some(w) = self.pool.get_mut(id) {
            w.take_back = take_back.map(String::into_boxed_str);
            w.about = about.map(Box::new);
        }
        let ack = frames_of(
            self.ids.next_id(),
            Command::Ack {
                acked_msgid: msgid,
                features,
            },
        );
        self.send(Socket::Backend, identity.clone(), ack, out);
        let hb = self.heartbeat_frames(now);
        self.send(Socket::Backend, identity, hb, out);
    }

    /// A new take-back key (see "Take-back keys" above).
    fn issue_take_back_key(&mut self) -> String {
        use sha2::{Digest, Sha256};
        self.take_back_issued += 1;
        let digest = Sha256::new()
            .chain_update(self.cfg.take_back_secret)
            .chain_update(self.take_back_issued.to_le_bytes())
            .finalize();
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    pub(super) fn on_scheduler_inform(
        &mut self,
        identity: Vec<u8>,
        msgid: String,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
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
        let ack = frames_of(
            self.ids.next_id(),
            Command::Ack {
                acked_msgid: msgid,
                features: vec![],
            },
        );
        self.send(Socket::Frontend, identity.clone(), ack, out);
        let hb = self.heartbeat_frames(now);
        self.send(Socket::Frontend, identity, hb, out);
    }

    pub(super) fn on_scheduler_kbye(&mut self, identity: &[u8]) {
        if let Some(i) = self.schedulers.iter().position(|s| s.identity == identity) {
            self.schedulers.remove(i);
            log::info!("scheduler {} removed (KBYE)", ident(identity));
        }
    }

    fn on_ready(&mut self, id: WorkerId, now: Duration, out: &mut Vec<Action>) {
        let Some(w) = self.pool.get_mut(id) else {
            return;
        };
        w.readies += 1;
        if let WorkerKind::Legacy { ready_owed } = &mut w.kind {
            if *ready_owed > 0 {
                // The READY that follows a REPLY frees that job's slot.
                *ready_owed -= 1;
            } else {
                self.complete_oldest_fire_and_forget(id, now, out);
            }
        }
        let drained = self.pool.get(id).is_some_and(|w| w.draining);
        if !self.is_draining() && !drained {
            let nq = self.pool.get(id).map_or(0, |w| w.queues.len());
            for i in 0..nq {
                let Some(w) = self.pool.get(id) else { return };
                let q = w.queues[i].1.clone();
                if self.paused.contains(&q) {
                    continue;
                }
                if let Some(jid) = self.pop_dispatchable(&q, now) {
                    self.dispatch(jid, id, false, now, out);
                    return;
                }
            }
        }
        self.pool.add_slot(id);
    }

    pub(super) fn heartbeat_frames(&mut self, now: Duration) -> Frames {
        let ts = timestamp_text(self.cfg.epoch_unix_micros.saturating_add(micros(now)));
        frames_of(
            self.ids.next_id(),
            Command::Heartbeat {
                timestamp: Some(ts),
            },
        )
    }

    /// HEARTBEAT to every worker and scheduler when the interval is up.
    pub(super) fn send_heartbeats(&mut self, now: Duration, out: &mut Vec<Action>) {
        if now < self.next_heartbeat {
            return;
        }
        self.next_heartbeat = now.saturating_add(self.cfg.heartbeat_interval.max(MICROSECOND));
        for (socket, identity) in self.peers() {
            let hb = self.heartbeat_frames(now);
            self.send(socket, identity, hb, out);
        }
    }

    /// Every peer the router talks to unasked: workers on the backend in
    /// registration order, then 0.3.13 schedulers on the frontend.
    pub(super) fn peers(&self) -> Vec<(Socket, Vec<u8>)> {
        let mut workers: Vec<(WorkerId, Vec<u8>)> = self
            .pool
            .workers
            .values()
            .map(|w| (w.id, w.identity.clone()))
            .collect();
        workers.sort_unstable_by_key(|(id, _)| *id);
        workers
            .into_iter()
            .map(|(_, identity)| (Socket::Backend, identity))
            .chain(
                self.schedulers
                    .iter()
                    .map(|s| (Socket::Frontend, s.identity.clone())),
            )
            .collect()
    }

    /// Remove every peer silent past the liveness limit: the quietest
    /// workers first, up to the first live one.
    pub(super) fn sweep_dead_peers(&mut self, now: Duration, out: &mut Vec<Action>) {
        // Dead: silent for more than the limit (`Liveness::is_dead`);
        // before the limit has passed once, the cut-off is zero: none.
        let cutoff = now.saturating_sub(self.liveness().silence_limit());
        let mut dead: Vec<WorkerId> = self.pool.silent_since(cutoff).collect();
        debug_assert!(dead.iter().all(|id| self
            .pool
            .get(*id)
            .is_some_and(|w| self.is_dead(w.last_seen, now))));
        dead.sort_unstable();
        for id in dead {
            self.remove_worker(id, "heartbeat timeout", now, out);
        }
        let live = self.liveness();
        self.schedulers.retain(|s| {
            let alive = !live.is_dead(s.last_seen, now);
            if !alive {
                log::info!(
                    "scheduler {} removed (heartbeat timeout)",
                    ident(&s.identity)
                );
            }
            alive
        });
    }

    pub(super) fn on_send_failed(
        &mut self,
        socket: Socket,
        identity: Vec<u8>,
        reason: SendFailure,
        now: Duration,
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
                } else {
                    self.gone_summary(now);
                    if self.gone_log.dropped(&identity, now) {
                        log::info!(
                            "client {} {why}: message dropped (results are kept for it; \
                             later drops are summed up every {} s)",
                            ident(&identity),
                            GoneLog::WINDOW.as_secs()
                        );
                    } else {
                        log::debug!("client {} {why}: message dropped", ident(&identity));
                    }
                    self.results_send_failed(&identity, now);
                }
            }
            Socket::Admin => log::debug!("admin peer {} {why}", ident(&identity)),
        }
    }

    /// The summary of the messages to gone clients not logged one by one
    /// ([`GoneLog`]), when one is due.
    pub(super) fn gone_summary(&mut self, now: Duration) {
        if let Some((n, clients)) = self.gone_log.take_summary(now) {
            log::info!(
                "{n} more message(s) to {clients} unreachable client(s) dropped in the last \
                 {} s (results are kept for them)",
                GoneLog::WINDOW.as_secs()
            );
        }
    }

    /// Remove a worker; its unfinished jobs go back to the front of their
    /// queues (dispatch order kept) or to the dead letters.
    pub(super) fn remove_worker(
        &mut self,
        id: WorkerId,
        reason: &str,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let Some(w) = self.pool.remove(id) else {
            return;
        };
        let mut back: Vec<JobId> = Vec::new();
        let mut dead: Vec<JobId> = Vec::new();
        let mut cancelled: Vec<(JobId, Duration)> = Vec::new();
        for i in w.inflight.values() {
            let jid = &i.job;
            if let Some(job) = self.store.jobs.get_mut(jid) {
                if job.extra.as_ref().is_some_and(|e| e.cancelling) {
                    cancelled.push((*jid, i.since));
                    continue;
                }
                let extra = job.extra_mut();
                extra.lost += 1;
                extra.lost_from = w.take_back.clone();
                if extra.lost >= self.cfg.max_attempts {
                    dead.push(*jid);
                } else {
                    back.push(*jid);
                }
            }
        }
        log::info!(
            worker:% = ident(&w.identity);
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
            if let Some(job) = self.store.remove_job(jid) {
                let reason = format!(
                    "delivery lost {} times (last: worker {} {reason})",
                    job.lost(),
                    ident(&w.identity)
                );
                self.dead_letter(job, reason, None, now, out);
            }
        }
        for (jid, started) in cancelled {
            if let Some(job) = self.store.remove_job(jid) {
                self.finish_cancelled(
                    job,
                    "its worker left while it was being cancelled",
                    Some(started),
                    now,
                    out,
                );
            }
        }
        for r in routes {
            self.pump(&r, now, out);
        }
    }
}
