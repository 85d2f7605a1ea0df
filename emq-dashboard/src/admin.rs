//! The dashboard as an admin client of its own router: every API call is
//! one control-plane request, `ADMIN [request JSON]`, answered `REPLY
//! [answer JSON, msgid]` (docs/PROTOCOL.md, "Control plane").
//!
//! The router binds its admin ROUTER socket on an extra `inproc://`
//! endpoint in the same zmq context ([`crate::INPROC_ADMIN`]); inproc
//! carries no ZAP handshake, so the HTTP side's own access rules
//! ([`crate::access`]) are what guard it. The router core answers in its
//! poll loop, between other messages: a request costs the loop what the op
//! costs, never a lock held across threads.
//!
//! zmq sockets belong to one thread at a time, so requests borrow a DEALER
//! from a small idle pool (creating one when none is free), send, wait for
//! the REPLY whose ORIG_MSGID is theirs — anything else on the socket is a
//! late answer to an earlier request and is dropped — and give it back. A
//! socket whose request timed out is closed instead, so a late answer
//! never meets a later request. Calls block; the HTTP handlers run them on
//! tokio's blocking threads.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use emqp_proto::{Command, Message};
use serde_json::Value;

/// Idle sockets kept for reuse; more concurrent requests open more.
const POOL_KEEP: usize = 4;

/// Why a request got no answer.
#[derive(Debug)]
pub enum AdminError {
    /// No REPLY within the timeout (the router is busy or stopping).
    Timeout(Duration),
    /// A zmq call failed.
    Socket(String),
    /// The REPLY was not a JSON object.
    BadAnswer(String),
}

impl std::fmt::Display for AdminError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdminError::Timeout(t) => write!(f, "the router did not answer within {t:?}"),
            AdminError::Socket(e) => write!(f, "admin socket: {e}"),
            AdminError::BadAnswer(e) => write!(f, "the router's answer is not JSON: {e}"),
        }
    }
}

impl std::error::Error for AdminError {}

/// Control-plane requests to one router, from any thread.
pub struct AdminClient {
    ctx: zmq::Context,
    endpoint: String,
    timeout: Duration,
    idle: Mutex<Vec<zmq::Socket>>,
}

impl AdminClient {
    /// A client of the admin endpoint `endpoint` (normally
    /// [`crate::INPROC_ADMIN`], in the router's context `ctx`); each
    /// request waits at most `timeout` for its answer. Nothing is
    /// connected until the first request.
    pub fn new(ctx: &zmq::Context, endpoint: &str, timeout: Duration) -> AdminClient {
        AdminClient {
            ctx: ctx.clone(),
            endpoint: endpoint.to_string(),
            timeout,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Send `request` (`{"op": ..., ...}`) and return the answer object
    /// (`{"ok": true, ...}` or `{"ok": false, "error": ...}`). Blocks for
    /// at most the timeout.
    pub fn request(&self, request: &Value) -> Result<Value, AdminError> {
        let sock = match self.idle.lock().ok().and_then(|mut v| v.pop()) {
            Some(s) => s,
            None => self.connect()?,
        };
        let msgid = format!("dashboard:{}", emqp_proto::new_msgid());
        let msg = Message::with_msgid(
            msgid.clone(),
            Command::Admin {
                request: request.to_string().into_bytes(),
            },
        );
        sock.send_multipart(msg.encode(), zmq::DONTWAIT)
            .map_err(|e| AdminError::Socket(format!("send: {e}")))?;
        let deadline = Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // Dropped, not pooled: its late answer must not be read by
                // the next request.
                return Err(AdminError::Timeout(self.timeout));
            }
            let ready = sock
                .poll(zmq::POLLIN, left.as_millis().max(1) as i64)
                .map_err(|e| AdminError::Socket(format!("poll: {e}")))?;
            if ready == 0 {
                continue;
            }
            let frames = sock
                .recv_multipart(0)
                .map_err(|e| AdminError::Socket(format!("receive: {e}")))?;
            let reply = match Message::decode(frames) {
                Ok(Message {
                    command: Command::Reply(r),
                    ..
                }) if r.orig_msgid.as_deref() == Some(msgid.as_str()) => r,
                // Not the answer to this request (undecodable, or another
                // msgid): skipped.
                _ => continue,
            };
            if let Ok(mut idle) = self.idle.lock() {
                if idle.len() < POOL_KEEP {
                    idle.push(sock);
                }
            }
            return match serde_json::from_slice::<Value>(&reply.payload) {
                Ok(v @ Value::Object(_)) => Ok(v),
                Ok(other) => Err(AdminError::BadAnswer(other.to_string())),
                Err(e) => Err(AdminError::BadAnswer(e.to_string())),
            };
        }
    }

    fn connect(&self) -> Result<zmq::Socket, AdminError> {
        let s = |e: zmq::Error| AdminError::Socket(e.to_string());
        let sock = self.ctx.socket(zmq::DEALER).map_err(s)?;
        sock.set_linger(0).map_err(s)?;
        sock.set_identity(format!("dashboard-{}", emqp_proto::new_msgid()).as_bytes())
            .map_err(s)?;
        sock.connect(&self.endpoint)
            .map_err(|e| AdminError::Socket(format!("connect {}: {e}", self.endpoint)))?;
        Ok(sock)
    }
}
