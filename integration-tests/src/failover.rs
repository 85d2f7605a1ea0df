//! A frontend client that survives a router failover, for the HA tests:
//! one DEALER with a fixed identity connected to every router's frontend
//! with ZMQ_IMMEDIATE (a message goes only to a router that is up: a
//! standby binds nothing), a window of unacknowledged REQUESTs, and
//! resubmission under the same msgid of every job that was refused for a
//! passing reason (`journal-unavailable`, `shutting-down`, `queue-full`)
//! or not acknowledged in time (its router died) — except the reasons
//! listed in `final_reasons`, after which the job is given up (`refused`),
//! as a client that believes the router's word does. A `duplicate-msgid`
//! refusal means the router already holds the job: it counts as
//! acknowledged, and so does a RESULT.
//!
//! Results are confirmed as emq's own clients confirm them: every job
//! carries `result-receipt`, every RESULT is answered with `RECEIVED`
//! (batched per round), and each connection that comes up (a router that
//! took over) gets a hello (`HEARTBEAT`), on which the router sends again
//! the results it still holds for this client (docs/PROTOCOL.md, "Results
//! until delivered").

use std::collections::HashMap;
use std::time::{Duration, Instant};

use emqp_proto::{Command, Headers, Message, RejectReason, Request};

use emq_transport::failover::{LinkEvent, LinkWatch};

use crate::zmq_ctx;

/// One job's life as the client sees it.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub msgid: String,
    frames: Vec<Vec<u8>>,
    sent_at: Option<Instant>,
    /// When to send it again (refused, or no acknowledgement in time).
    retry_at: Option<Instant>,
    /// First acknowledgement (REPLY, duplicate-msgid or RESULT).
    pub acked_at: Option<Instant>,
    /// Given up after a final REJECT (`FailoverClient::final_reasons`).
    pub given_up: Option<Instant>,
    /// The reasons of the REJECTs it got, in order.
    pub rejected: Vec<RejectReason>,
    pub sends: usize,
}

/// See the module documentation.
pub struct FailoverClient {
    sock: zmq::Socket,
    watch: LinkWatch,
    /// RESULTs to confirm in the next RECEIVED.
    receipts: Vec<String>,
    /// Hellos sent (connections that came up).
    pub hellos: usize,
    pub identity: String,
    pub jobs: Vec<Tracked>,
    index: HashMap<String, usize>,
    /// First job never sent.
    next_new: usize,
    /// Sent and not acknowledged.
    in_flight: usize,
    pub window: usize,
    /// Resend a job not acknowledged this long after it was sent.
    pub ack_timeout: Duration,
    /// RESULTs received per msgid.
    pub results: HashMap<String, usize>,
    /// REJECTs received, by reason.
    pub rejects: HashMap<String, usize>,
    /// REJECT reasons taken as final: the job is given up (default none).
    pub final_reasons: Vec<RejectReason>,
    /// Jobs given up after a final REJECT (msgids).
    pub refused: Vec<String>,
    /// Sends after the first, over all jobs.
    pub resends: usize,
    /// New jobs sent per second at most (`None`: as fast as the window
    /// lets them go).
    pub rate: Option<f64>,
    started: Option<Instant>,
    last_scan: Instant,
}

impl Drop for FailoverClient {
    /// The monitor stops before its reader goes: an event with no reader
    /// would block the shared test context's I/O thread
    /// (emq_transport::failover).
    fn drop(&mut self) {
        let _ = self.watch.stop(&self.sock);
    }
}

impl FailoverClient {
    /// Connect to every endpoint in `frontends`.
    pub fn connect(frontends: &[&str]) -> FailoverClient {
        let sock = zmq_ctx().socket(zmq::DEALER).expect("dealer socket");
        let identity = emqp_proto::new_msgid();
        sock.set_identity(identity.as_bytes()).expect("identity");
        sock.set_linger(0).expect("linger");
        sock.set_immediate(true).expect("immediate");
        sock.set_sndhwm(0).expect("sndhwm");
        sock.set_rcvhwm(0).expect("rcvhwm");
        let watch = LinkWatch::new(zmq_ctx(), &sock).expect("socket monitor");
        for f in frontends {
            sock.connect(f).expect("connect");
        }
        FailoverClient {
            sock,
            watch,
            receipts: Vec::new(),
            hellos: 0,
            identity,
            jobs: Vec::new(),
            index: HashMap::new(),
            next_new: 0,
            in_flight: 0,
            window: 500,
            ack_timeout: Duration::from_secs(3),
            results: HashMap::new(),
            rejects: HashMap::new(),
            final_reasons: Vec::new(),
            refused: Vec::new(),
            resends: 0,
            rate: None,
            started: None,
            last_scan: Instant::now(),
        }
    }

    /// Queue a job (`reply-requested`) for submission; its msgid.
    pub fn add(&mut self, queue: &str, message: Vec<u8>) -> String {
        let headers = Headers::parse(b"reply-requested,result-receipt").expect("headers");
        let msg = Message::new(Command::Request(Request {
            queue: queue.to_string(),
            headers,
            message,
        }));
        let msgid = msg.msgid.clone();
        self.index.insert(msgid.clone(), self.jobs.len());
        self.jobs.push(Tracked {
            msgid: msgid.clone(),
            frames: msg.encode(),
            sent_at: None,
            retry_at: None,
            acked_at: None,
            given_up: None,
            rejected: Vec::new(),
            sends: 0,
        });
        msgid
    }

    pub fn acked_count(&self) -> usize {
        self.jobs.iter().filter(|j| j.acked_at.is_some()).count()
    }

    /// Every job acknowledged.
    pub fn all_acked(&self) -> bool {
        self.jobs.iter().all(|j| j.acked_at.is_some())
    }

    /// Acknowledged msgids.
    pub fn acked(&self) -> Vec<&Tracked> {
        self.jobs.iter().filter(|j| j.acked_at.is_some()).collect()
    }

    /// The first acknowledgement received at or after `t`.
    pub fn first_ack_after(&self, t: Instant) -> Option<Instant> {
        self.jobs
            .iter()
            .filter_map(|j| j.acked_at)
            .filter(|a| *a >= t)
            .min()
    }

    /// Try to send `i`; false when no router takes it now.
    fn send(&mut self, i: usize) -> bool {
        let frames = self.jobs[i].frames.clone();
        match self.sock.send_multipart(frames, zmq::DONTWAIT) {
            Ok(()) => {
                let j = &mut self.jobs[i];
                if j.sends > 0 {
                    self.resends += 1;
                }
                j.sends += 1;
                j.sent_at = Some(Instant::now());
                j.retry_at = None;
                self.in_flight += 1;
                true
            }
            Err(_) => false,
        }
    }

    fn ack(&mut self, msgid: &str) {
        if let Some(&i) = self.index.get(msgid) {
            let j = &mut self.jobs[i];
            if j.acked_at.is_none() {
                j.acked_at = Some(Instant::now());
                if j.sent_at.take().is_some() {
                    self.in_flight -= 1;
                }
                j.retry_at = None;
            }
        }
    }

    /// A job refused for good: never sent again.
    fn give_up(&mut self, msgid: &str) {
        if let Some(&i) = self.index.get(msgid) {
            let j = &mut self.jobs[i];
            if j.acked_at.is_none() && j.given_up.is_none() {
                if j.sent_at.take().is_some() {
                    self.in_flight -= 1;
                }
                j.retry_at = None;
                j.given_up = Some(Instant::now());
                self.refused.push(msgid.to_string());
            }
        }
    }

    /// A refused job goes out again after a pause.
    fn retry_later(&mut self, msgid: &str, pause: Duration) {
        if let Some(&i) = self.index.get(msgid) {
            let j = &mut self.jobs[i];
            if j.acked_at.is_none() {
                if j.sent_at.take().is_some() {
                    self.in_flight -= 1;
                }
                j.retry_at = Some(Instant::now() + pause);
            }
        }
    }

    fn take(&mut self, frames: Vec<Vec<u8>>) {
        let Ok(m) = Message::decode(frames) else {
            return;
        };
        match m.command {
            Command::Reply(r) if r.orig_msgid.is_none() => {
                let id = String::from_utf8_lossy(&r.payload).into_owned();
                self.ack(&id);
            }
            Command::Result(r) => {
                *self.results.entry(r.orig_msgid.clone()).or_default() += 1;
                self.receipts.push(r.orig_msgid.clone());
                self.ack(&r.orig_msgid);
            }
            Command::Reject(r) => {
                *self
                    .rejects
                    .entry(r.reason.as_str().to_string())
                    .or_default() += 1;
                if let Some(&i) = self.index.get(&r.orig_msgid) {
                    self.jobs[i].rejected.push(r.reason.clone());
                }
                if r.reason == RejectReason::DuplicateMsgid {
                    self.ack(&r.orig_msgid);
                } else if self.final_reasons.contains(&r.reason) {
                    self.give_up(&r.orig_msgid);
                } else {
                    self.retry_later(&r.orig_msgid, Duration::from_millis(200));
                }
            }
            _ => {}
        }
    }

    /// Every job has its RESULT.
    pub fn all_results(&self) -> bool {
        self.jobs
            .iter()
            .all(|j| self.results.contains_key(&j.msgid))
    }

    /// One round: say hello on new connections, send what is due, then
    /// receive for up to `wait`, then confirm the RESULTs received.
    pub fn step(&mut self, wait: Duration) {
        for event in self.watch.events() {
            if let LinkEvent::Up(_) = event {
                let hello = Message::new(Command::Heartbeat { timestamp: None });
                if self
                    .sock
                    .send_multipart(hello.encode(), zmq::DONTWAIT)
                    .is_ok()
                {
                    self.hellos += 1;
                }
            }
        }
        let now = Instant::now();
        // Jobs whose acknowledgement is overdue, or whose pause after a
        // refusal is over (a scan every 100 ms).
        if now.duration_since(self.last_scan) >= Duration::from_millis(100) {
            self.last_scan = now;
            let due: Vec<usize> = (0..self.next_new)
                .filter(|&i| {
                    let j = &self.jobs[i];
                    j.acked_at.is_none()
                        && j.given_up.is_none()
                        && (j.retry_at.is_some_and(|t| t <= now)
                            || j.sent_at
                                .is_some_and(|t| now.duration_since(t) >= self.ack_timeout))
                })
                .collect();
            for i in due {
                if self.jobs[i].sent_at.take().is_some() {
                    self.in_flight -= 1;
                }
                if !self.send(i) {
                    self.jobs[i].retry_at = Some(now);
                    break;
                }
            }
        }
        let started = *self.started.get_or_insert(now);
        let allowed = match self.rate {
            Some(r) => (now.duration_since(started).as_secs_f64() * r) as usize + 1,
            None => usize::MAX,
        };
        while self.in_flight < self.window && self.next_new < self.jobs.len().min(allowed) {
            if !self.send(self.next_new) {
                break;
            }
            self.next_new += 1;
        }
        let mut wait_ms = wait.as_millis() as i64;
        let mut n = 0;
        while n < 10_000 && self.sock.poll(zmq::POLLIN, wait_ms).unwrap_or(0) > 0 {
            match self.sock.recv_multipart(0) {
                Ok(frames) => self.take(frames),
                Err(_) => break,
            }
            wait_ms = 0;
            n += 1;
        }
        if !self.receipts.is_empty() {
            let orig_msgids = std::mem::take(&mut self.receipts);
            let msg = Message::new(Command::Received { orig_msgids });
            // Unsent (no router up): the router sends those RESULTs again
            // after the hello, and they are confirmed then.
            let _ = self.sock.send_multipart(msg.encode(), zmq::DONTWAIT);
        }
    }

    /// Run rounds until `done(self)` or `timeout`; whether `done` held.
    pub fn drive(&mut self, timeout: Duration, mut done: impl FnMut(&Self) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(self) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            self.step(Duration::from_millis(20));
        }
    }
}
