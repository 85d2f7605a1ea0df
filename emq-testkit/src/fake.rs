//! Peers played by the test, with builders for the frames they send:
//!
//! - [`FakeRouter`]: a ROUTER for clients and job managers under test,
//!   driven from the test's own thread (`next`, `expect`, `register`,
//!   `readies`, ...), or [`FakeRouter::serve`]d by a thread of its own
//!   ([`ServedRouter`]: it records what it got and answers with a closure)
//!   when the code under test blocks the test's thread.
//! - [`FakeDealer`]: a DEALER for a router (or receiver) under test: a
//!   worker that INFORMs, a client, an admin tool, with or without PLAIN
//!   credentials.
//!
//! HEARTBEATs are skipped by `next`/`expect` on both; every receive is
//! bounded by a timeout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use emqp_proto::job::JobOutcome;
use emqp_proto::{Command, Headers, Inform, Message, PeerType, QueueSpec, Request};

/// A routing identity (the first frame a ROUTER sees).
pub type Identity = Vec<u8>;

/// How long `expect` waits on either fake.
pub const EXPECT_WITHIN: Duration = Duration::from_secs(10);

/// A ROUTER bound on a loopback port, with its own context.
pub struct FakeRouter {
    // Declared before the context: the socket closes first.
    pub sock: zmq::Socket,
    pub endpoint: String,
    _ctx: zmq::Context,
}

impl Default for FakeRouter {
    fn default() -> Self {
        Self::new()
    }
}

/// The `tcp://127.0.0.1:PORT` a socket bound to `tcp://127.0.0.1:*` got.
fn bound_endpoint(sock: &zmq::Socket) -> String {
    sock.get_last_endpoint()
        .expect("last endpoint")
        .expect("a UTF-8 endpoint")
}

impl FakeRouter {
    /// A plain ROUTER (as emq_transport binds the router's frontend) on a
    /// port the kernel picks, kept bound (no probe, then bind: another
    /// test process may take a probed port in between).
    pub fn new() -> FakeRouter {
        FakeRouter::bind("tcp://127.0.0.1:*")
    }

    /// A plain ROUTER bound on `endpoint` (e.g. a failover test's second
    /// router, on an address its client already has).
    pub fn bind(endpoint: &str) -> FakeRouter {
        let ctx = zmq::Context::new();
        let sock =
            emq_transport::bind_router(&ctx, endpoint, &emq_transport::SocketOptions::default())
                .unwrap_or_else(|e| panic!("bind the fake router on {endpoint}: {e}"));
        sock.set_linger(0).expect("linger");
        let endpoint = bound_endpoint(&sock);
        FakeRouter {
            sock,
            endpoint,
            _ctx: ctx,
        }
    }

    /// A ROUTER that requires ZMQ PLAIN credentials: a PLAIN server with
    /// the ZAP domain `frontend` and, in its own context, emq_transport's
    /// ZAP handler accepting the `user:password` lines of `users`.
    pub fn with_plain_users(users: &str) -> FakeRouter {
        use emq_transport::zap::{
            parse_plain_users, spawn_zap_handler, AccessPolicy, DomainPolicy,
        };
        let ctx = zmq::Context::new();
        let mut policy = AccessPolicy::default();
        policy.domains.insert(
            "frontend".into(),
            DomainPolicy {
                allow: Vec::new(),
                plain_users: Some(parse_plain_users(users).expect("users")),
                curve_keys: None,
            },
        );
        // the handler must be bound before the socket it guards
        spawn_zap_handler(&ctx, policy.clone()).expect("zap handler");
        let sock = ctx.socket(zmq::ROUTER).expect("socket");
        sock.set_linger(0).expect("linger");
        sock.set_router_mandatory(true).expect("mandatory");
        policy.apply(&sock, "frontend").expect("policy");
        sock.bind("tcp://127.0.0.1:*")
            .expect("bind the fake router");
        let endpoint = bound_endpoint(&sock);
        FakeRouter {
            sock,
            endpoint,
            _ctx: ctx,
        }
    }

    /// Send `cmd` (with a fresh msgid) to `id`.
    pub fn send(&self, id: &[u8], cmd: Command) {
        self.send_msg(id, Message::new(cmd));
    }

    pub fn send_msg(&self, id: &[u8], m: Message) {
        self.try_send_msg(id, m).expect("fake router send");
    }

    /// Send `m` to `id`; `EHOSTUNREACH` while no peer has that identity
    /// (ROUTER_MANDATORY).
    pub fn try_send_msg(&self, id: &[u8], m: Message) -> zmq::Result<()> {
        self.sock.send_multipart(m.encode_routed(id.to_vec()), 0)
    }

    /// Send `m` to `id` once a peer with that identity has connected
    /// (retried every 20 ms while the send is refused); false if none did
    /// within `timeout`.
    pub fn send_when_connected(&self, id: &[u8], m: Message, timeout: Duration) -> bool {
        crate::poll_until(timeout, Duration::from_millis(20), || {
            self.try_send_msg(id, m.clone()).ok()
        })
        .is_some()
    }

    /// Raw frames (identity first), or `None` after `timeout`.
    pub fn recv_raw(&self, timeout: Duration) -> Option<Vec<Vec<u8>>> {
        recv_raw(&self.sock, timeout)
    }

    /// The next message (heartbeats included), decoded, within `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<(Identity, Message)> {
        let frames = self.recv_raw(timeout)?;
        Some(Message::decode_routed(frames).expect("the peer sent valid eMQP"))
    }

    /// The next message that is not a HEARTBEAT, within `timeout`; while
    /// waiting, HEARTBEATs go to `keepalive` every 200 ms.
    pub fn next(&self, timeout: Duration, keepalive: Option<&[u8]>) -> Option<(Identity, Message)> {
        let deadline = Instant::now() + timeout;
        let mut last_hb = Instant::now() - Duration::from_secs(1);
        loop {
            if let Some(id) = keepalive {
                if last_hb.elapsed() >= Duration::from_millis(200) {
                    // Best effort: the peer may have said KBYE and gone
                    // already, with what we wait for still queued here.
                    let _ = self.try_send_msg(id, Message::new(heartbeat()));
                    last_hb = Instant::now();
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let Some((id, m)) = self.recv(left.min(Duration::from_millis(100))) else {
                continue;
            };
            if !is_heartbeat(&m) {
                return Some((id, m));
            }
        }
    }

    /// [`FakeRouter::next`] within [`EXPECT_WITHIN`], or a panic naming
    /// `what`.
    pub fn expect(&self, what: &str, keepalive: Option<&[u8]>) -> (Identity, Message) {
        self.next(EXPECT_WITHIN, keepalive)
            .unwrap_or_else(|| panic!("timed out waiting for {what}"))
    }

    /// The next message whose command is `name` (`"REQUEST"`), skipping
    /// any other (at most 100), each within [`EXPECT_WITHIN`].
    pub fn expect_command(&self, name: &str) -> (Identity, Message) {
        for _ in 0..100 {
            let (id, m) = self
                .recv(EXPECT_WITHIN)
                .unwrap_or_else(|| panic!("no {name} within {EXPECT_WITHIN:?}"));
            if m.command.name() == name {
                return (id, m);
            }
        }
        panic!("no {name} among 100 messages");
    }

    /// The next message from `id` is a READY (HEARTBEATs to `id` meanwhile).
    pub fn expect_ready(&self, id: &[u8]) {
        let (_, m) = self.expect("READY", Some(id));
        assert!(is_ready(&m), "expected READY, got {m:?}");
    }

    /// The next message from `id` is a worker's REPLY:
    /// [`reply_of`] it (HEARTBEATs to `id` meanwhile).
    pub fn expect_reply(&self, id: &[u8]) -> (String, String, JobOutcome) {
        reply_of(&self.expect("REPLY", Some(id)).1)
    }

    /// Wait for a worker's INFORM and ACK it; returns its identity.
    pub fn register(&self) -> Identity {
        let (id, m) = self.expect("INFORM", None);
        assert!(matches!(m.command, Command::Inform(_)), "{m:?}");
        self.send(&id, ack(&m.msgid));
        id
    }

    /// How many READYs arrive within `window` (HEARTBEATs to `keepalive`
    /// meanwhile); anything else is a panic.
    pub fn readies(&self, window: Duration, keepalive: &[u8]) -> usize {
        let deadline = Instant::now() + window;
        let mut n = 0;
        while let Some((_, m)) = self.next(
            deadline.saturating_duration_since(Instant::now()),
            Some(keepalive),
        ) {
            assert!(is_ready(&m), "expected only READYs, got {m:?}");
            n += 1;
        }
        n
    }

    /// A REQUEST on queue `default` with `msgid`, `headers` and a JSON body.
    pub fn request(&self, id: &[u8], msgid: &str, headers: &str, body: serde_json::Value) {
        self.send_msg(
            id,
            Message::with_msgid(msgid, request("default", headers, &body.to_string())),
        );
    }

    /// Hand the router to a thread of its own until the returned
    /// [`ServedRouter`] is dropped: every well-formed message it receives
    /// is recorded, and `answer` gives what goes back to its sender (sent
    /// with a fresh msgid), or `None` for silence. A panic in `answer` is
    /// raised again when the [`ServedRouter`] is dropped.
    pub fn serve(
        self,
        mut answer: impl FnMut(&Message) -> Option<Command> + Send + 'static,
    ) -> ServedRouter {
        let endpoint = self.endpoint.clone();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                let Some(frames) = self.recv_raw(Duration::from_millis(50)) else {
                    continue;
                };
                let Ok((id, msg)) = Message::decode_routed(frames) else {
                    continue;
                };
                seen2
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(msg.clone());
                if let Some(cmd) = answer(&msg) {
                    // Best effort: a client that gave up has gone.
                    let _ = self.try_send_msg(&id, Message::new(cmd));
                }
            }
        });
        ServedRouter {
            endpoint,
            seen,
            stop,
            thread: Some(thread),
        }
    }
}

/// A [`FakeRouter`] answered by its own thread ([`FakeRouter::serve`]);
/// stopped on drop.
pub struct ServedRouter {
    pub endpoint: String,
    seen: Arc<Mutex<Vec<Message>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ServedRouter {
    /// Every well-formed message received so far, in order.
    pub fn seen(&self) -> Vec<Message> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for ServedRouter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if let Err(panic) = t.join() {
                if !std::thread::panicking() {
                    std::panic::resume_unwind(panic);
                }
            }
        }
    }
}

/// A DEALER played by the test against a router (or receiver) under test:
/// a worker, a client or an admin tool.
pub struct FakeDealer {
    pub sock: zmq::Socket,
    _ctx: zmq::Context,
}

impl FakeDealer {
    /// Connect to `endpoint` with identity `id` (no handshake awaited:
    /// messages queue until the connection is up).
    pub fn connect(endpoint: &str, id: &[u8]) -> FakeDealer {
        FakeDealer::connect_with(endpoint, id, emq_transport::SocketOptions::default())
    }

    /// [`FakeDealer::connect`] as a ZMQ PLAIN client `user`:`password`.
    pub fn connect_plain(endpoint: &str, id: &[u8], user: &str, password: &str) -> FakeDealer {
        FakeDealer::connect_with(
            endpoint,
            id,
            emq_transport::SocketOptions {
                plain: Some(emq_transport::PlainCredentials::new(user, password)),
                ..emq_transport::SocketOptions::default()
            },
        )
    }

    fn connect_with(endpoint: &str, id: &[u8], opts: emq_transport::SocketOptions) -> FakeDealer {
        let ctx = zmq::Context::new();
        let sock = emq_transport::connect_dealer(&ctx, endpoint, id, &opts)
            .unwrap_or_else(|e| panic!("connect the fake dealer to {endpoint}: {e}"));
        sock.set_linger(0).expect("linger");
        FakeDealer { sock, _ctx: ctx }
    }

    /// A worker: connect with identity `id` and send an INFORM for
    /// `queues` (e.g. `"10:default"`); returns without waiting for the ACK.
    pub fn worker(endpoint: &str, id: &str, queues: &str) -> FakeDealer {
        let w = FakeDealer::connect(endpoint, id.as_bytes());
        w.send(inform(queues, PeerType::Worker));
        w
    }

    /// Send `cmd` with a fresh msgid; the msgid.
    pub fn send(&self, cmd: Command) -> String {
        let m = Message::new(cmd);
        let msgid = m.msgid.clone();
        self.send_msg(m);
        msgid
    }

    /// Send `cmd` with `msgid`.
    pub fn send_as(&self, msgid: &str, cmd: Command) {
        self.send_msg(Message::with_msgid(msgid, cmd));
    }

    pub fn send_msg(&self, m: Message) {
        self.send_frames(m.encode());
    }

    /// Send raw frames (`['', 'eMQP/1.0', COMMAND, ...]`, see [`frames`]).
    pub fn send_frames(&self, frames: Vec<Vec<u8>>) {
        self.sock
            .send_multipart(frames, 0)
            .expect("fake dealer send");
    }

    /// Raw frames of the next message, within `timeout`.
    pub fn recv_raw(&self, timeout: Duration) -> Option<Vec<Vec<u8>>> {
        recv_raw(&self.sock, timeout)
    }

    /// The next message, decoded, within `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Message> {
        let frames = self.recv_raw(timeout)?;
        Some(Message::decode(frames).expect("the router sent valid eMQP"))
    }

    /// Raw frames of the next message that is not a HEARTBEAT, within
    /// `timeout` (frames are not decoded: a test may check bad ones).
    pub fn next_raw(&self, timeout: Duration) -> Option<Vec<Vec<u8>>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let frames = self.recv_raw(left)?;
            if frames.get(2).map(Vec::as_slice) != Some(b"HEARTBEAT") {
                return Some(frames);
            }
        }
    }

    /// [`FakeDealer::next_raw`] within [`EXPECT_WITHIN`], or a panic
    /// naming `what`.
    pub fn expect_raw(&self, what: &str) -> Vec<Vec<u8>> {
        self.next_raw(EXPECT_WITHIN)
            .unwrap_or_else(|| panic!("timed out waiting for {what}"))
    }

    /// The next message that is not a HEARTBEAT, decoded, within
    /// [`EXPECT_WITHIN`], or a panic naming `what`.
    pub fn expect(&self, what: &str) -> Message {
        Message::decode(self.expect_raw(what)).expect("the router sent valid eMQP")
    }

    /// Whether nothing but HEARTBEATs arrives within `window` (what a
    /// refused peer gets).
    pub fn gets_nothing(&self, window: Duration) -> bool {
        self.next_raw(window).is_none()
    }
}

fn recv_raw(sock: &zmq::Socket, timeout: Duration) -> Option<Vec<Vec<u8>>> {
    let ms = timeout.as_millis().clamp(1, i64::MAX as u128) as i64;
    if sock.poll(zmq::POLLIN, ms).expect("poll") == 0 {
        return None;
    }
    Some(sock.recv_multipart(0).expect("recv"))
}

/// Whether `m` is a HEARTBEAT.
pub fn is_heartbeat(m: &Message) -> bool {
    matches!(m.command, Command::Heartbeat { .. })
}

/// Whether `m` is a READY.
pub fn is_ready(m: &Message) -> bool {
    m.command == Command::Ready
}

/// A worker's REPLY to a job: `(orig_msgid, status, outcome)`; a panic if
/// `m` is anything else.
pub fn reply_of(m: &Message) -> (String, String, JobOutcome) {
    let Command::Reply(r) = &m.command else {
        panic!("expected REPLY, got {m:?}")
    };
    (
        r.orig_msgid.clone().expect("orig msgid"),
        r.status.expect("status").as_str().to_string(),
        JobOutcome::from_payload(&r.payload).expect("a job outcome payload"),
    )
}

// Frame builders: the commands tests send most, as `Command`s (encode with
// `Message::new(cmd)`; `Message::encode[_routed]` gives the frames), and
// raw frames for what a test wants on the wire letter for letter.

/// Frames from text, e.g. `frames(&["", "eMQP/1.0", "READY", "r-1"])`.
pub fn frames(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// `HEARTBEAT` with a fixed timestamp.
pub fn heartbeat() -> Command {
    Command::Heartbeat {
        timestamp: Some("1.0".into()),
    }
}

/// `ACK` of `msgid`.
pub fn ack(msgid: &str) -> Command {
    Command::Ack {
        acked_msgid: msgid.to_string(),
        features: vec![],
    }
}

/// `INFORM` for `queues` (`"10:default,5:mail"`; empty: an empty queue
/// frame, the router's default queues), with no features.
pub fn inform(queues: &str, peer: PeerType) -> Command {
    inform_with_features(queues, peer, &[])
}

/// [`inform`] announcing `features` (e.g. `["job-ack"]`).
pub fn inform_with_features(queues: &str, peer: PeerType, features: &[&str]) -> Command {
    Command::Inform(Inform {
        queues: QueueSpec::parse_cli(queues).expect("queue spec"),
        peer_type: Some(peer),
        features: features.iter().map(|f| f.to_string()).collect(),
    })
}

/// `REQUEST` on `queue` with `headers` (e.g. `"guarantee"`) and `body`.
pub fn request(queue: &str, headers: &str, body: &str) -> Command {
    Command::Request(Request {
        queue: queue.to_string(),
        headers: Headers::parse(headers.as_bytes()).expect("headers"),
        message: body.as_bytes().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_informs_the_router_and_gets_an_ack() {
        let r = FakeRouter::new();
        let w = FakeDealer::worker(&r.endpoint, "w1", "10:default");
        let id = r.register();
        assert_eq!(id, b"w1");
        assert!(matches!(w.expect("ACK").command, Command::Ack { .. }));
        r.request(&id, "m1", "", serde_json::json!({"x": 1}));
        let m = w.expect("REQUEST");
        assert_eq!(m.msgid, "m1");
        assert!(r.recv(Duration::from_millis(1)).is_none());
    }

    #[test]
    fn readies_count_and_heartbeats_are_skipped() {
        let r = FakeRouter::new();
        let w = FakeDealer::worker(&r.endpoint, "w2", "");
        let id = r.register();
        w.send(heartbeat());
        w.send(Command::Ready);
        w.send(Command::Ready);
        assert_eq!(r.readies(Duration::from_millis(500), &id), 2);
        // The router's keepalive HEARTBEATs are not what the worker expects.
        assert!(matches!(w.expect("ACK").command, Command::Ack { .. }));
        assert!(w.gets_nothing(Duration::from_millis(50)));
    }

    #[test]
    fn a_served_router_records_and_answers_from_its_thread() {
        let served = FakeRouter::new().serve(|m| match m.command {
            Command::Status => Some(Command::Reply(emqp_proto::Reply::ack_of("{}"))),
            _ => None,
        });
        let d = FakeDealer::connect(&served.endpoint, b"d1");
        d.send(Command::Kbye);
        d.send_as("s-1", Command::Status);
        let m = d.expect("the STATUS answer");
        assert!(matches!(&m.command, Command::Reply(r) if r.payload == b"{}"));
        let seen: Vec<&str> = served.seen().iter().map(|m| m.command.name()).collect();
        assert_eq!(seen, ["KBYE", "STATUS"]);
    }

    #[test]
    fn send_when_connected_waits_for_the_peer() {
        let r = FakeRouter::new();
        assert!(r
            .try_send_msg(b"late", Message::new(Command::Ready))
            .is_err());
        let d = FakeDealer::connect(&r.endpoint, b"late");
        assert!(r.send_when_connected(b"late", Message::new(Command::Ready), EXPECT_WITHIN));
        assert!(is_ready(&d.expect("READY")));
    }
}
