//! A test client on the router's frontend: a DEALER that submits REQUESTs
//! and records what comes back — REPLY acknowledgements, RESULTs, REJECTs.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use emqp_proto::job::JobOutcome;
use emqp_proto::{Command, Headers, Message, Reject, Request, ResultStatus};

use crate::zmq_ctx;

/// One RESULT as received.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: ResultStatus,
    pub payload: Vec<u8>,
}

impl Outcome {
    pub fn parsed(&self) -> Option<JobOutcome> {
        JobOutcome::from_payload(&self.payload).ok()
    }

    /// The payload as JSON (Null when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.payload).unwrap_or(serde_json::Value::Null)
    }
}

/// A frontend client with everything it received, by REQUEST msgid.
pub struct Client {
    sock: zmq::Socket,
    pub identity: String,
    /// Submitted msgids in order.
    pub submitted: Vec<String>,
    /// Acknowledgements, `REPLY [msgid]` or a msgid of an ACKS (msgid →
    /// how many).
    pub acks: HashMap<String, usize>,
    /// ACKS messages received (each acknowledging one or more msgids).
    pub acks_messages: usize,
    /// `REPLY [msgid]` acknowledgements received.
    pub reply_acks: usize,
    /// RESULTs (msgid → every one received, to spot duplicates).
    pub results: HashMap<String, Vec<Outcome>>,
    pub rejects: HashMap<String, Vec<Reject>>,
    /// Anything else well-formed (e.g. HEARTBEAT).
    pub other: Vec<Message>,
    /// Frames that did not decode.
    pub malformed: usize,
}

impl Client {
    /// Connect a DEALER with a fresh uuid4 identity.
    pub fn connect(endpoint: &str) -> Client {
        Client::dealer(&[endpoint], false)
    }

    fn dealer(endpoints: &[&str], immediate: bool) -> Client {
        let sock = zmq_ctx().socket(zmq::DEALER).expect("dealer socket");
        let identity = emqp_proto::new_msgid();
        sock.set_identity(identity.as_bytes()).expect("identity");
        sock.set_linger(0).expect("linger");
        sock.set_sndhwm(0).expect("sndhwm");
        sock.set_rcvhwm(0).expect("rcvhwm");
        sock.set_immediate(immediate).expect("immediate");
        for e in endpoints {
            sock.connect(e).expect("connect");
        }
        Client {
            sock,
            identity,
            submitted: Vec::new(),
            acks: HashMap::new(),
            acks_messages: 0,
            reply_acks: 0,
            results: HashMap::new(),
            rejects: HashMap::new(),
            other: Vec::new(),
            malformed: 0,
        }
    }

    /// Connect one DEALER to every router in `endpoints` with
    /// ZMQ_IMMEDIATE: a message goes only to a router that is up (a
    /// standby binds nothing), so after a failover everything goes to the
    /// new leader. A hello (`HEARTBEAT`) after the takeover makes it send
    /// the RESULTs it still holds for this client.
    pub fn connect_all(endpoints: &[&str]) -> Client {
        Client::dealer(endpoints, true)
    }

    /// Send `BATCH [spec]` under `id` (open, close) and wait up to 20 s for
    /// its acknowledgement; panics with the REJECTs otherwise.
    pub fn batch_op(&mut self, id: &str, spec: serde_json::Value) {
        let spec = serde_json::to_vec(&spec).expect("batch spec");
        let msg = Message::with_msgid(id.to_string(), Command::Batch { spec });
        self.acks.remove(id);
        self.send_frames(msg.encode());
        assert!(
            self.wait_for(Duration::from_secs(20), |c| c.acks.contains_key(id)),
            "BATCH {id} acknowledged: {:?}",
            self.rejects
        );
    }

    /// Send a hello (`HEARTBEAT`) without waiting: false when no router
    /// is connected (a [`Client::connect_all`] client between leaders).
    pub fn hello(&self) -> bool {
        let hello = Message::new(Command::Heartbeat { timestamp: None });
        self.sock
            .send_multipart(hello.encode(), zmq::DONTWAIT)
            .is_ok()
    }

    /// Send raw frames (DEALER side, starting with the delimiter).
    pub fn send_frames(&self, frames: Vec<Vec<u8>>) {
        self.sock.send_multipart(frames, 0).expect("send");
    }

    /// Submit a REQUEST; its msgid.
    pub fn submit(&mut self, queue: &str, headers: &str, message: Vec<u8>) -> String {
        let headers = Headers::parse(headers.as_bytes()).expect("test headers parse");
        let msg = Message::new(Command::Request(Request {
            queue: queue.to_string(),
            headers,
            message,
        }));
        let id = msg.msgid.clone();
        self.send_frames(msg.encode());
        self.submitted.push(id.clone());
        id
    }

    /// Submit with `reply-requested` (so a RESULT comes back).
    pub fn submit_reply(&mut self, queue: &str, message: Vec<u8>) -> String {
        self.submit(queue, "reply-requested", message)
    }

    fn take(&mut self, frames: Vec<Vec<u8>>) {
        match Message::decode(frames) {
            Ok(m) => match m.command {
                Command::Reply(r) if r.orig_msgid.is_none() => {
                    let id = String::from_utf8_lossy(&r.payload).into_owned();
                    self.reply_acks += 1;
                    *self.acks.entry(id).or_default() += 1;
                }
                Command::Acks { orig_msgids } => {
                    self.acks_messages += 1;
                    for id in orig_msgids {
                        *self.acks.entry(id).or_default() += 1;
                    }
                }
                Command::Result(r) => {
                    self.results.entry(r.orig_msgid).or_default().push(Outcome {
                        status: r.status,
                        payload: r.payload,
                    });
                }
                Command::Reject(r) => {
                    self.rejects
                        .entry(r.orig_msgid.clone())
                        .or_default()
                        .push(r);
                }
                command => self.other.push(Message {
                    msgid: m.msgid,
                    command,
                }),
            },
            Err(_) => self.malformed += 1,
        }
    }

    /// Receive everything available, waiting up to `timeout` for the first
    /// message; how many were received.
    pub fn pump(&mut self, timeout: Duration) -> usize {
        let mut n = 0;
        let mut wait = timeout.as_millis() as i64;
        while self.sock.poll(zmq::POLLIN, wait).unwrap_or(0) > 0 {
            match self.sock.recv_multipart(0) {
                Ok(frames) => {
                    self.take(frames);
                    n += 1;
                }
                Err(_) => break,
            }
            wait = 0;
        }
        n
    }

    /// Pump until `done(self)` or `timeout`; whether `done` became true.
    pub fn wait_for(&mut self, timeout: Duration, mut done: impl FnMut(&Client) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(self) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            self.pump((deadline - now).min(Duration::from_millis(100)));
        }
    }

    /// Whether `id` has a RESULT or a REJECT.
    pub fn finished(&self, id: &str) -> bool {
        self.results.contains_key(id) || self.rejects.contains_key(id)
    }

    /// Wait until every id has a RESULT or REJECT; the unfinished ones on
    /// timeout.
    pub fn wait_finished(&mut self, ids: &[String], timeout: Duration) -> Result<(), Vec<String>> {
        let ids: Vec<String> = ids.to_vec();
        if self.wait_for(timeout, |c| ids.iter().all(|i| c.finished(i))) {
            Ok(())
        } else {
            Err(ids.into_iter().filter(|i| !self.finished(i)).collect())
        }
    }

    /// The first RESULT for `id`.
    pub fn result(&self, id: &str) -> Option<&Outcome> {
        self.results.get(id).and_then(|v| v.first())
    }

    /// Ids with more than one RESULT.
    pub fn duplicate_results(&self) -> Vec<String> {
        self.results
            .iter()
            .filter(|(_, v)| v.len() > 1)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Submitted ids acknowledged at least once.
    pub fn acked(&self) -> HashSet<String> {
        self.acks.keys().cloned().collect()
    }
}
