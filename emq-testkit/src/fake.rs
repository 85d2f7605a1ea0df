//! Peers played by the test: a fake ROUTER (for clients and job managers
//! under test) and a fake worker (a DEALER that INFORMs like a job
//! manager), with builders for the frames they send. Every receive is
//! bounded by a timeout.

use std::time::{Duration, Instant};

use emqp_proto::{Command, Headers, Inform, Message, PeerType, QueueSpec, Request};

/// A routing identity (the first frame a ROUTER sees).
pub type Identity = Vec<u8>;

/// A ROUTER bound on a fresh loopback port, with its own context.
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
    /// A plain ROUTER (as emq_transport binds the router's frontend).
    pub fn new() -> FakeRouter {
        let ctx = zmq::Context::new();
        // Bound on a port the kernel picks and kept bound (no probe, then
        // bind: another test process may take a probed port in between).
        let sock = emq_transport::bind_router(
            &ctx,
            "tcp://127.0.0.1:*",
            &emq_transport::SocketOptions::default(),
        )
        .expect("bind the fake router");
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
        self.sock
            .send_multipart(m.encode_routed(id.to_vec()), 0)
            .expect("fake router send");
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
                    self.send(id, heartbeat());
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
            if !matches!(m.command, Command::Heartbeat { .. }) {
                return Some((id, m));
            }
        }
    }

    /// [`FakeRouter::next`] within 10 s, or a panic naming `what`.
    pub fn expect(&self, what: &str, keepalive: Option<&[u8]>) -> (Identity, Message) {
        self.next(Duration::from_secs(10), keepalive)
            .unwrap_or_else(|| panic!("timed out waiting for {what}"))
    }

    /// Wait for a worker's INFORM and ACK it; returns its identity.
    pub fn register(&self) -> Identity {
        let (id, m) = self.expect("INFORM", None);
        assert!(matches!(m.command, Command::Inform(_)), "{m:?}");
        self.send(&id, ack(&m.msgid));
        id
    }

    /// A REQUEST on queue `default` with `msgid`, `headers` and a JSON body.
    pub fn request(&self, id: &[u8], msgid: &str, headers: &str, body: serde_json::Value) {
        self.send_msg(
            id,
            Message::with_msgid(msgid, request("default", headers, &body.to_string())),
        );
    }
}

/// A DEALER that connects to a router's backend as a worker would.
pub struct FakeWorker {
    pub sock: zmq::Socket,
    _ctx: zmq::Context,
}

impl FakeWorker {
    /// Connect to `endpoint` with identity `id` and send an INFORM for
    /// `queues` (e.g. `"10:default"`); returns without waiting for the ACK.
    pub fn connect(endpoint: &str, id: &str, queues: &str) -> FakeWorker {
        let ctx = zmq::Context::new();
        let sock = emq_transport::connect_dealer(
            &ctx,
            endpoint,
            id.as_bytes(),
            &emq_transport::SocketOptions::default(),
        )
        .expect("connect the fake worker");
        sock.set_linger(0).expect("linger");
        let w = FakeWorker { sock, _ctx: ctx };
        w.send(inform(queues, PeerType::Worker));
        w
    }

    pub fn send(&self, cmd: Command) -> String {
        let m = Message::new(cmd);
        let msgid = m.msgid.clone();
        self.sock
            .send_multipart(m.encode(), 0)
            .expect("fake worker send");
        msgid
    }

    /// The next message, decoded, within `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Message> {
        let frames = recv_raw(&self.sock, timeout)?;
        Some(Message::decode(frames).expect("the router sent valid eMQP"))
    }

    /// The next message that is not a HEARTBEAT, within 10 s, or a panic.
    pub fn expect(&self, what: &str) -> Message {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left) {
                Some(m) if matches!(m.command, Command::Heartbeat { .. }) => continue,
                Some(m) => return m,
                None => panic!("timed out waiting for {what}"),
            }
        }
    }
}

fn recv_raw(sock: &zmq::Socket, timeout: Duration) -> Option<Vec<Vec<u8>>> {
    let ms = timeout.as_millis().clamp(1, i64::MAX as u128) as i64;
    if sock.poll(zmq::POLLIN, ms).expect("poll") == 0 {
        return None;
    }
    Some(sock.recv_multipart(0).expect("recv"))
}

// Frame builders: the commands tests send most, as `Command`s (encode with
// `Message::new(cmd)`; `Message::encode[_routed]` gives the frames).

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

/// `INFORM` for `queues` (`"10:default,5:mail"`; empty: the default queue).
pub fn inform(queues: &str, peer: PeerType) -> Command {
    Command::Inform(Inform {
        queues: QueueSpec::parse_cli(queues).expect("queue spec"),
        peer_type: Some(peer),
        features: Vec::new(),
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
        let w = FakeWorker::connect(&r.endpoint, "w1", "10:default");
        let id = r.register();
        assert_eq!(id, b"w1");
        assert!(matches!(w.expect("ACK").command, Command::Ack { .. }));
        r.request(&id, "m1", "", serde_json::json!({"x": 1}));
        let m = w.expect("REQUEST");
        assert_eq!(m.msgid, "m1");
        assert!(r.recv(Duration::from_millis(1)).is_none());
    }
}
