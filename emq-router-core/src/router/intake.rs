//! Intake: decoding, REQUEST, and the one `accept` path.
//!
//! - **Decoding.** Frames off a socket are decoded here; anything
//!   malformed is logged (rate-limited) and dropped, and counts as the
//!   sender's heartbeat. An undecodable REQUEST, SCHEDULE or UNSCHEDULE
//!   whose msgid is readable gets `REJECT [msgid, malformed, reason]`.
//!   Nothing here panics on input.
//! - **Size.** Before decoding, every frame is measured against
//!   `Config::max_message_size` (per frame, as libzmq's ZMQ_MAXMSGSIZE,
//!   and as the job manager measures its results). A message with a
//!   bigger frame is dropped with a rate-limited warning naming the
//!   socket, the peer and the size, and counts as the sender's heartbeat;
//!   a REQUEST, SCHEDULE or UNSCHEDULE on the frontend whose msgid is
//!   readable gets `REJECT [msgid, malformed, "message of N bytes is over
//!   the router's limit of M bytes"]`. The binary sets ZMQ_MAXMSGSIZE to
//!   twice the limit, so that libzmq cuts (silently) only what is too big
//!   to be worth reading.
//! - **REQUEST.** Routed through its queue if a connected worker serves
//!   it, else as "Unserved queues" says; the frames are forwarded unchanged (queue
//!   frame as sent, same msgid, headers frame byte for byte). Every
//!   accepted REQUEST is acknowledged `REPLY [msgid]`, dispatched or
//!   buffered, once its journal record is committed. A REQUEST whose
//!   msgid was answered `journal-uncertain` is answered so again until
//!   the journal can tell (`durability.rs`). **A REQUEST sent again** — a
//!   msgid the router holds as an unfinished job, or keeps as a finished
//!   one, with the same queue and message (a finished job keeps the
//!   first 1,000 bytes: those are compared) — is acknowledged as that job
//!   (once its record is committed) and not run again: a client resends
//!   under the same msgid after `journal-uncertain` or a lost
//!   acknowledgement, possibly to the router that took over (a finished
//!   job whose result waits for its client answers `duplicate-msgid`, as
//!   below). Refused, in this order: `shutting-down` while draining;
//!   `malformed` for a bad `delay`, `key` or `priority` header (`flow.rs`);
//!   `not-a-job` when the message is JSON but not an array (every job
//!   form, 0.3.13's and emq's, is `[KIND, PARAMS]`: such a job could only
//!   fail on a worker as `bad-job`; a message that is not JSON passes, it
//!   may be a custom job manager's; `emqp_proto::job::not_a_job`);
//!   `journal-unavailable` while the journal fails; `duplicate-msgid` when an unfinished job
//!   already has that msgid with another queue or message (the journal
//!   and the REPLYs of workers name jobs by msgid, so two could not be
//!   kept apart), or the router holds the undelivered result of one
//!   (`results.rs`: a client that sends a REQUEST again after a reconnect
//!   learns so that it was taken); `malformed` for bad `delay` or
//!   unique-job headers; then a REQUEST with a `unique-key` someone
//!   holds is answered as `unique.rs` says (DUPLICATE, REJECT
//!   `duplicate`, or the waiting holder replaced), or refused
//!   `queue-full` at the key cap; `queue-full` when the route has `hwm`
//!   jobs buffered and no free slot.
//! - **Unserved queues** (`Config::unserved`, `--unserved-queues`). A job
//!   whose queue no connected job manager serves goes, with `default`
//!   (the default: EventMQ 0.3.13's rule, so that a 0.3.13 deployment
//!   behaves the same after the switch), to the `default` queue — logged
//!   (rate-limited) and counted per requested queue (`routed_to_default`
//!   in admin `queues`, which lists the queue); with `hold`, it stays in
//!   its own queue (listed with its depth and no workers) until a job
//!   manager for it connects, as Celery and RQ keep it. A job's route is
//!   chosen once, at acceptance: a job sent to `default` stays there.
//!   A REQUEST with the `notices` header (emq) is followed, after its
//!   ACK, by `NOTICE [msgid, routed-to-default | held-unserved, text]`;
//!   held with the ACK until the job's record commits and dropped with it
//!   if the batch fails. Without the header (0.3.13 clients) no NOTICE.
//! - **Accept.** REQUESTs, schedule runs and jobs restored from a journal
//!   all become jobs through [`Router::accept`]: interned meta, msgid
//!   index, the `Accepted` record (not for restored jobs: they are in the
//!   journal already), the job's unique key (`unique.rs`), the queue
//!   buffer.

use std::time::Duration;

use emqp_proto::{
    Command, Headers, Message, Notice, NoticeKind, PeerType, Reject, RejectReason, Reply, Request,
    DEFAULT_QUEUE, PROTOCOL_VERSION,
};

use super::durability::Tag;
use super::{frames_of, Router};
use crate::config::Unserved;
use crate::event::{Action, Frames, Socket};
use crate::jobs::{Job, JobId};
use crate::journal::{JobRecord, Record};
use crate::util::ident;

/// Frames kept from before decoding.
pub(crate) enum Raw {
    /// A REQUEST's HEADERS frame, forwarded byte for byte.
    Headers(Vec<u8>),
    /// A whole SCHEDULE / UNSCHEDULE, forwarded verbatim to scheduler peers.
    Frames(Frames),
}

/// A job about to be accepted.
pub(crate) struct NewJob<'a> {
    pub msgid: &'a str,
    pub client: &'a [u8],
    pub queue: &'a str,
    pub route: &'a str,
    pub headers: &'a [u8],
    pub payload: &'a [u8],
    /// `(reply_requested, retry_count)`, parsed only for a new meta.
    pub parse: &'a dyn Fn() -> (bool, u32),
    /// A delayed job: core time before which it is not dispatched, and
    /// the same as unix milliseconds (journaled).
    pub run_at: Option<(Duration, u64)>,
    /// A job taken back from the journal: no `Accepted` record (it has
    /// one), and what the journal knew of it.
    pub journaled: Option<Journaled>,
}

/// What the journal knew of a restored job.
pub(crate) struct Journaled {
    /// Deliveries so far.
    pub attempts: u32,
    /// Deliveries lost to dying workers (count toward `max_attempts`).
    pub lost: u32,
    /// Unix microseconds of its acceptance.
    pub accepted_unix: u64,
}

impl Router {
    pub(super) fn on_frames(
        &mut self,
        socket: Socket,
        mut frames: Frames,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        if frames.is_empty() {
            self.stats.malformed_dropped += 1;
            if self.malformed_log.allow(now) {
                log::warn!("{}: dropped an empty message", socket.name());
            }
            return;
        }
        if let Some(limit) = self.cfg.max_message_size {
            if let Some(size) = frames.iter().map(Vec::len).max().filter(|&n| n > limit) {
                self.on_oversized(socket, frames, size, limit, now, out);
                return;
            }
        }
        if socket == Socket::Frontend && frames.get(3).map(Vec::as_slice) == Some(b"REQUEST") {
            // Hot path: take the REQUEST apart without copying any frame.
            // Anything `Message::decode` would refuse goes the general way
            // below (same errors, same REJECT).
            if let Some((identity, msgid, r, raw_headers)) = take_request(&mut frames) {
                self.touch(socket, &identity, now);
                self.results_client_seen(&identity, out);
                self.on_request(identity, msgid, r, Some(raw_headers), now, out);
                return;
            }
        }
        let identity = frames.remove(0);
        // Keep what decoding would lose: the HEADERS frame of a REQUEST (to
        // forward it byte for byte) and whole SCHEDULE/UNSCHEDULE messages
        // (forwarded verbatim). The msgid of a client's command is kept
        // for a REJECT.
        let mut raw_headers = None;
        let mut raw_frames = None;
        let mut answer_msgid = None;
        let cmd = frames.get(2).map(Vec::as_slice);
        match cmd {
            Some(b"REQUEST") => raw_headers = frames.get(5).cloned(),
            Some(b"SCHEDULE") | Some(b"UNSCHEDULE") => raw_frames = Some(frames.clone()),
            _ => {}
        }
        if socket == Socket::Admin
            || matches!(
                cmd,
                Some(b"REQUEST") | Some(b"SCHEDULE") | Some(b"UNSCHEDULE")
            )
        {
            answer_msgid = frames
                .get(3)
                .and_then(|m| std::str::from_utf8(m).ok())
                .map(str::to_string);
        }
        let cmd_name = cmd
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .unwrap_or_default();
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
                if socket == Socket::Admin {
                    self.admin_undecodable(identity, answer_msgid.unwrap_or_default(), &e, out);
                } else if let (Socket::Frontend, Some(msgid)) = (socket, answer_msgid) {
                    self.stats.rejected_malformed += 1;
                    self.reject(
                        identity,
                        msgid,
                        RejectReason::Malformed,
                        format!("malformed {cmd_name}: {e}"),
                        out,
                    );
                }
            }
        }
    }

    /// A message with a frame of `size` bytes, over `limit`: dropped with a
    /// warning; a client's REQUEST, SCHEDULE or UNSCHEDULE with a readable
    /// msgid is refused `malformed`. `frames` still has the identity first.
    fn on_oversized(
        &mut self,
        socket: Socket,
        frames: Frames,
        size: usize,
        limit: usize,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let mut frames = frames;
        let identity = std::mem::take(&mut frames[0]);
        self.touch(socket, &identity, now);
        self.stats.malformed_dropped += 1;
        let cmd = frames.get(3).map(Vec::as_slice);
        let msgid = frames.get(4).and_then(|m| std::str::from_utf8(m).ok());
        if self.oversized_log.allow(now) {
            log::warn!(
                "{}: dropped {} {} from {}: a frame of {size} bytes, over the limit of \
                 {limit} bytes (--max-message-size)",
                socket.name(),
                cmd.map(String::from_utf8_lossy).unwrap_or_default(),
                msgid.unwrap_or("(no msgid)"),
                ident(&identity)
            );
        }
        // A worker's REPLY that is too big still ends its job: as failed
        // with kind `result-too-large`, or the job would stay in flight on
        // a live worker for ever. (Frames: '', eMQP/1.0, REPLY, msgid,
        // payload, orig_msgid, status.)
        if socket == Socket::Backend && cmd == Some(b"REPLY") {
            let orig = frames
                .get(6)
                .and_then(|m| std::str::from_utf8(m).ok())
                .map(str::to_string);
            if let (Some(id), Some(orig)) = (self.pool.id_of(&identity), orig) {
                let payload = serde_json::to_vec(&serde_json::json!({"error": {
                    "kind": "result-too-large",
                    "message": format!(
                        "the job's result had a frame of {size} bytes, over the router's limit of {limit} bytes"
                    ),
                }}))
                .unwrap_or_default();
                let r = Reply {
                    payload,
                    orig_msgid: Some(orig),
                    status: Some(emqp_proto::ResultStatus::Failed),
                    credit: 0,
                };
                self.on_worker_reply(id, msgid.unwrap_or_default(), r, now, out);
            }
            return;
        }
        if socket == Socket::Admin {
            let e = format!("a frame of {size} bytes is over the router's limit of {limit} bytes");
            self.admin_undecodable(identity, msgid.unwrap_or_default().to_string(), &e, out);
            return;
        }
        let refusable = matches!(
            cmd,
            Some(b"REQUEST") | Some(b"SCHEDULE") | Some(b"UNSCHEDULE")
        );
        let (Socket::Frontend, true, Some(msgid)) = (socket, refusable, msgid) else {
            return;
        };
        if cmd == Some(b"REQUEST") {
            if let Some(queue) = frames.get(5).and_then(|q| std::str::from_utf8(q).ok()) {
                let route = self.route_of(queue).to_string();
                self.stats.queue_mut(&route).rejected += 1;
            }
        }
        self.stats.rejected_too_large += 1;
        let text = format!("message of {size} bytes is over the router's limit of {limit} bytes");
        self.reject(
            identity,
            msgid.to_string(),
            RejectReason::Malformed,
            text,
            out,
        );
    }

    /// Any message counts as a heartbeat of a known peer.
    pub(super) fn touch(&mut self, socket: Socket, identity: &[u8], now: Duration) {
        match socket {
            Socket::Backend => self.pool.touch(identity, now),
            Socket::Frontend => {
                if let Some(s) = self.schedulers.iter_mut().find(|s| s.identity == identity) {
                    s.last_seen = now;
                }
            }
            Socket::Admin => {}
        }
    }

    pub(super) fn on_frontend(
        &mut self,
        identity: Vec<u8>,
        msg: Message,
        raw: Option<Raw>,
        now: Duration,
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
                self.on_scheduler_inform(identity, msgid, now, out);
            }
            cmd @ (Command::Schedule(_) | Command::Unschedule(_)) => {
                let raw = match raw {
                    Some(Raw::Frames(f)) => Some(f),
                    _ => None,
                };
                self.on_schedule(identity, msgid, cmd, raw, now, out);
            }
            Command::Kbye => self.on_scheduler_kbye(&identity),
            Command::Heartbeat { .. } => {
                if !self.schedulers.iter().any(|s| s.identity == identity) {
                    self.results_client_hello(&identity, out);
                }
            }
            Command::Received { orig_msgids } => self.on_received(&identity, orig_msgids),
            Command::Workflow { spec } => self.on_workflow(identity, msgid, spec, now, out),
            Command::Batch { spec } => self.on_batch(identity, msgid, spec, now, out),
            other => {
                log::debug!(
                    "frontend: {} from {} ignored",
                    other.name(),
                    ident(&identity)
                );
            }
        }
    }

    /// The queue a job for `queue` is buffered under: its own if a
    /// connected worker serves it or unserved queues are held, else
    /// `default`.
    pub(crate) fn route_of<'q>(&self, queue: &'q str) -> &'q str {
        if self.cfg.unserved == Unserved::Hold || self.pool.serves(queue) {
            queue
        } else {
            DEFAULT_QUEUE
        }
    }

    /// What became of a job for `queue` buffered under `route` because no
    /// connected job manager serves `queue` (see "Unserved queues"):
    /// `None` when it is served.
    fn unserved(&self, queue: &str, route: &str) -> Option<NoticeKind> {
        if route != queue {
            Some(NoticeKind::RoutedToDefault)
        } else if !self.pool.serves(queue) {
            Some(NoticeKind::HeldUnserved)
        } else {
            None
        }
    }

    /// Make a job for an unserved queue visible (see "Unserved queues"):
    /// counted when sent to `default`, logged either way.
    fn note_unserved(&mut self, msgid: &str, queue: &str, route: &str, now: Duration) {
        let Some(kind) = self.unserved(queue, route) else {
            return;
        };
        if kind == NoticeKind::RoutedToDefault {
            self.stats.queue_mut(queue).routed_to_default += 1;
        }
        if self.unserved_log.allow(now) {
            match kind {
                NoticeKind::RoutedToDefault => log::warn!(
                    msgid:% = msgid, queue:% = queue;
                    "job {msgid} for queue {queue:?}: no connected job manager serves it; sent \
                     to {route:?} (EventMQ 0.3.13's rule; --unserved-queues hold keeps such \
                     jobs in their own queue)"
                ),
                _ => log::warn!(
                    msgid:% = msgid, queue:% = queue;
                    "job {msgid} for queue {queue:?}: no connected job manager serves it; held \
                     until one does (--unserved-queues hold)"
                ),
            }
        }
    }

    /// The NOTICE for the client of a job accepted for `queue` under
    /// `route` that asked for notices (`notices` header) and whose queue no
    /// connected job manager serves; held like the job's acknowledgement,
    /// behind it, and dropped if the job's batch fails.
    fn notify_unserved(
        &mut self,
        client: Vec<u8>,
        (jid, msgid): (JobId, String),
        queue: &str,
        route: &str,
        out: &mut Vec<Action>,
    ) {
        let Some(kind) = self.unserved(queue, route) else {
            return;
        };
        let text = unserved_text(&kind, queue, route);
        let notice = frames_of(
            self.ids.next_id(),
            Command::Notice(Notice {
                orig_msgid: msgid,
                kind,
                text,
            }),
        );
        self.send_tagged(Socket::Frontend, client, notice, Tag::Notice(jid), out);
    }

    fn on_request(
        &mut self,
        client: Vec<u8>,
        msgid: String,
        r: Request,
        raw_headers: Option<Vec<u8>>,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let route = self.route_of(&r.queue).to_string();
        let delay = r.headers.delay();
        // `key:` / `priority:` (`flow.rs`).
        let flow = r.headers.flow().map(|_| ()).map_err(|e| e.to_string());
        let unique = r.headers.unique();
        if delay.is_ok() && flow.is_ok() && self.resent_request(&client, &msgid, &r, out) {
            return;
        }
        let refusal = if self.journal.is_uncertain(&msgid) {
            Some((
                RejectReason::JournalUncertain,
                "the router cannot yet tell whether its journal stored this job; it may run: \
                 send it again with the same msgid"
                    .to_string(),
            ))
        } else if self.is_draining() {
            self.stats.rejected_shutting_down += 1;
            Some((
                RejectReason::ShuttingDown,
                "the router is shutting down".to_string(),
            ))
        } else if let Err(why) = &delay {
            self.stats.rejected_malformed += 1;
            Some((RejectReason::Malformed, why.clone()))
        } else if let Err(why) = &flow {
            self.stats.rejected_malformed += 1;
            Some((RejectReason::Malformed, why.clone()))
        } else if let Err(why) = &unique {
            self.stats.rejected_malformed += 1;
            Some((RejectReason::Malformed, why.to_string()))
        } else if let Some(why) = emqp_proto::job::not_a_job(&r.message) {
            self.stats.rejected_malformed += 1;
            Some((RejectReason::NotAJob, why))
        } else if let Some(why) = self.batch_refusal(&r.headers) {
            Some((RejectReason::BatchClosed, why))
        } else if let Some(why) = self.journal.refusal() {
            self.journal.count_refused();
            self.stats.rejected_journal += 1;
            Some((RejectReason::JournalUnavailable, why))
        } else if self.store.find(&msgid).is_some() {
            // Held with another queue or message (`resent_request`).
            self.stats.rejected_duplicate += 1;
            Some((
                RejectReason::DuplicateMsgid,
                format!("the router already holds an unfinished job with msgid {msgid}"),
            ))
        } else if self.results.holds(&msgid) {
            self.stats.rejected_duplicate += 1;
            Some((
                RejectReason::DuplicateMsgid,
                format!("the router holds the undelivered result of a job with msgid {msgid}"),
            ))
        } else if let Ok(Some(u)) = &unique {
            // Held by another job: answered here (`unique.rs`); free: the
            // queue's bound still applies.
            let s = super::unique::Submit {
                client: &client,
                msgid: &msgid,
                route: &route,
                reply_requested: r.headers.reply_requested(),
            };
            match self.unique_conflict(s, u, now, out) {
                super::unique::Conflict::Answered => return,
                super::unique::Conflict::Free => self.queue_full(&route),
            }
        } else {
            self.queue_full(&route)
        };
        if let Some((reason, text)) = refusal {
            self.stats.queue_mut(&route).rejected += 1;
            // A failing journal is logged once when it fails and once when
            // it recovers (with the count), not per refused REQUEST.
            if reason != RejectReason::JournalUnavailable && self.reject_log.allow(now) {
                log::warn!(
                    msgid:% = msgid, queue:% = r.queue;
                    "REQUEST {msgid} for queue {} rejected ({}): {text}",
                    r.queue,
                    reason.as_str()
                );
            }
            self.reject(client, msgid, reason, text, out);
            return;
        }
        let headers = raw_headers.unwrap_or_else(|| r.headers.encode().into_bytes());
        let parse = || {
            (
                r.headers.reply_requested(),
                r.headers.retry_count().unwrap_or(0),
            )
        };
        let jid = self.accept(
            NewJob {
                msgid: &msgid,
                client: &client,
                queue: &r.queue,
                route: &route,
                headers: &headers,
                payload: &r.message,
                parse: &parse,
                journaled: None,
                run_at: match delay {
                    Ok(Some(d)) if !d.is_zero() => {
                        Some((now.saturating_add(d), self.unix_ms(now.saturating_add(d))))
                    }
                    _ => None,
                },
            },
            now,
        );
        self.pump(&route, now, out);
        let ack = if r.headers.batched_acks() {
            super::acks::acks_frames(self.ids.next_id(), &msgid)
        } else {
            frames_of(self.ids.next_id(), Command::Reply(Reply::ack_of(&msgid)))
        };
        if r.headers.notices() {
            // The NOTICE goes right before the ACK, on the same pipe: a
            // client that stops reading at the ACK (emq-sender without
            // --wait) has read it by then.
            let job = (jid, msgid.clone());
            self.notify_unserved(client.clone(), job.clone(), &r.queue, &route, out);
            self.send_after_journal(Socket::Frontend, client, ack, Some(job), out);
        } else {
            self.send_after_journal(Socket::Frontend, client, ack, Some((jid, msgid)), out);
        }
    }

    /// `queue-full` when `route` has `hwm` jobs buffered and no free slot.
    fn queue_full(&mut self, route: &str) -> Option<(RejectReason, String)> {
        if self.pool.has_free(route) || self.store.queue_len(route) < self.cfg.hwm {
            return None;
        }
        self.stats.rejected_queue_full += 1;
        Some((
            RejectReason::QueueFull,
            format!(
                "queue {route} has {} buffered jobs (hwm)",
                self.store.queue_len(route)
            ),
        ))
    }

    /// A REQUEST sent again: `msgid` names a job this router holds
    /// unfinished, or keeps finished, with the same queue and message.
    /// Acknowledged as that job (after the records before it are
    /// committed; for an unfinished job whose own record is not yet, its
    /// batch's outcome decides, as for the first acknowledgement) and not
    /// run again. `false`: not a resend.
    fn resent_request(
        &mut self,
        client: &[u8],
        msgid: &str,
        r: &Request,
        out: &mut Vec<Action>,
    ) -> bool {
        let held = if let Some(jid) = self.store.find(msgid) {
            match self.store.jobs.get(&jid) {
                Some(j) if j.queue() == r.queue && j.payload() == r.message.as_slice() => {
                    Some(Some(jid))
                }
                _ => None,
            }
        } else if self.results.holds(msgid) {
            // Its undelivered result makes it `duplicate-msgid` (which
            // says it was taken; the result follows the client's hello).
            None
        } else {
            self.finished.get(msgid).and_then(|f| {
                let kept = &r.message[..r.message.len().min(super::completion::PAYLOAD_KEPT)];
                (f.job.queue == r.queue && f.job.payload == kept).then_some(None)
            })
        };
        let Some(jid) = held else {
            return false;
        };
        log::debug!(
            "REQUEST {msgid} from {} sent again: acknowledged as the job the router holds ({})",
            ident(client),
            if jid.is_some() {
                "unfinished"
            } else {
                "finished"
            }
        );
        self.stats.resent_requests += 1;
        let ack = frames_of(self.ids.next_id(), Command::Reply(Reply::ack_of(msgid)));
        let tag = jid.map(|j| (j, msgid.to_string()));
        self.send_after_journal(Socket::Frontend, client.to_vec(), ack, tag, out);
        true
    }

    /// Accept a job the router submits itself (a workflow's node, a
    /// batch's callback): no client, its flags read from its own headers.
    /// Returns the job and its route, which the caller pumps once its own
    /// bookkeeping of the job is in place.
    pub(crate) fn accept_own(
        &mut self,
        msgid: &str,
        queue: &str,
        headers: &[u8],
        payload: &[u8],
        now: Duration,
    ) -> (JobId, String) {
        let route = self.route_of(queue).to_string();
        let parse = || {
            let h = Headers::parse(headers).unwrap_or_default();
            (h.reply_requested(), h.retry_count().unwrap_or(0))
        };
        let jid = self.accept(
            NewJob {
                msgid,
                client: b"",
                queue,
                route: &route,
                headers,
                payload,
                parse: &parse,
                run_at: None,
                journaled: None,
            },
            now,
        );
        (jid, route)
    }

    /// Make a job of `new`: intern its meta, index its msgid, record it
    /// (`Accepted`) and buffer it at the back of its route queue. The
    /// caller pumps the route.
    pub(crate) fn accept(&mut self, new: NewJob<'_>, now: Duration) -> JobId {
        let id = self.store.alloc_id();
        let meta =
            self.store
                .metas
                .intern(new.client, new.queue, new.route, new.headers, new.parse);
        let mut job = Job::new(new.msgid, new.payload, meta, now);
        if let Some(r) = &new.journaled {
            job.attempts = r.attempts;
            let e = job.extra_mut();
            e.lost = r.lost;
            e.accepted_unix = Some(r.accepted_unix);
        }
        if let Some((_, unix_ms)) = new.run_at {
            job.extra_mut().run_at_unix_ms = Some(unix_ms);
        }
        self.stats.accepted += 1;
        if new.journaled.is_none() {
            self.stats.queue_mut(new.route).accepted += 1;
            self.note_unserved(new.msgid, new.queue, new.route, now);
        }
        if new.journaled.is_none() && self.journal.enabled() {
            let record = self.job_record(&job);
            self.journal.record(Record::Accepted(record), Some(id));
        }
        // Its unique key's window goes in the same batch.
        self.unique_take(new.msgid, new.headers, new.journaled.is_some(), now);
        // Its batch's row (when it was counted failed before) too.
        self.batch_take(new.msgid, new.headers);
        self.store.index(new.msgid, id);
        let presumed = new
            .journaled
            .as_ref()
            .and_then(|r| self.presume_until(new.route, r.attempts, now));
        match (new.run_at, presumed) {
            (Some((due, _)), _) => self.store.insert_delayed(id, job, due),
            (None, Some(until)) => self.store.insert_presumed(id, job, until),
            (None, None) => self.store.insert_queued(id, job),
        }
        id
    }

    /// Jobs a journal held: buffered again (ignoring `hwm`) under their
    /// route queue, in the given order, without acknowledgement or record.
    /// A journalled delivery count above 1 means earlier deliveries were
    /// lost: they keep counting toward `max_attempts` (at least one more
    /// try is left). A msgid already held is skipped (logged).
    pub(super) fn restore_jobs(
        &mut self,
        jobs: Vec<JobRecord>,
        now: Duration,
        out: &mut Vec<Action>,
    ) -> usize {
        let mut n = 0;
        let mut routes: Vec<String> = Vec::new();
        for s in jobs {
            if self.store.find(&s.msgid).is_some() {
                log::warn!("journal: job {} listed twice, restored once", s.msgid);
                continue;
            }
            let route = if s.route.is_empty() {
                DEFAULT_QUEUE.to_string()
            } else {
                s.route.clone()
            };
            if !routes.contains(&route) {
                routes.push(route.clone());
            }
            let lost = s
                .attempts
                .saturating_sub(1)
                .min(self.cfg.max_attempts.saturating_sub(1));
            let now_ms = self.unix_ms(now);
            let run_at = match s.run_at_unix_ms {
                Some(at) if at > now_ms => {
                    Some((now.saturating_add(Duration::from_millis(at - now_ms)), at))
                }
                _ => None,
            };
            let parse = || {
                let h = Headers::parse(&s.headers).unwrap_or_default();
                (h.reply_requested(), h.retry_count().unwrap_or(0))
            };
            self.accept(
                NewJob {
                    msgid: &s.msgid,
                    client: &s.client,
                    queue: &s.queue,
                    route: &route,
                    headers: &s.headers,
                    payload: &s.payload,
                    parse: &parse,
                    run_at,
                    journaled: Some(Journaled {
                        attempts: s.attempts,
                        lost,
                        accepted_unix: s.accepted_at_unix_ms.saturating_mul(1000),
                    }),
                },
                now,
            );
            self.stats.restored += 1;
            n += 1;
        }
        // Restored jobs are durable: dispatchable at once.
        self.journal.mark_durable_below(self.store.next_id);
        for r in routes {
            self.pump(&r, now, out);
        }
        n
    }

    /// The journal record of a job.
    pub(crate) fn job_record(&self, job: &Job) -> JobRecord {
        JobRecord {
            msgid: job.msgid().to_string(),
            client: job.client().to_vec(),
            queue: job.queue().to_string(),
            route: job.route().to_string(),
            headers: job.headers().to_vec(),
            payload: job.payload().to_vec(),
            attempts: job.attempts,
            accepted_at_unix_ms: job.accepted_unix(self.cfg.epoch_unix_micros) / 1000,
            run_at_unix_ms: job.extra.as_ref().and_then(|e| e.run_at_unix_ms),
        }
    }

    pub(crate) fn reject(
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

    /// `REPLY [msgid]` to a client on the frontend: its message was taken.
    pub(crate) fn ack_client(&mut self, client: Vec<u8>, msgid: &str, out: &mut Vec<Action>) {
        let ack = frames_of(self.ids.next_id(), Command::Reply(Reply::ack_of(msgid)));
        self.send_after_journal(Socket::Frontend, client, ack, None, out);
    }
}

/// The NOTICE text for a job for `queue` no connected job manager serves.
fn unserved_text(kind: &NoticeKind, queue: &str, route: &str) -> String {
    match kind {
        NoticeKind::RoutedToDefault => format!(
            "no job manager serves queue {queue:?}; the router sent it to {route:?} (router \
             flag --unserved-queues hold keeps it instead)"
        ),
        _ => format!(
            "no job manager serves queue {queue:?}; the router holds it there until one \
             connects (router flag --unserved-queues hold)"
        ),
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
