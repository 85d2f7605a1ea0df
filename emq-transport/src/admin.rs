//! The one Rust client of a router's admin socket: a DEALER, one request at
//! a time, each answer awaited for at most the timeout. emq-cli, the
//! dashboard and the integration tests all use it.
//!
//! - **Control plane.** [`AdminClient::request`] sends `ADMIN [op]` (an
//!   [`AdminOp`], its JSON as docs/PROTOCOL.md says) and waits for the
//!   `REPLY` whose ORIG_MSGID is its msgid; [`AdminClient::call`] reads
//!   that answer into the object of `"ok": true` or the router's
//!   [`AdminError`].
//! - **0.3.13 commands.** [`AdminClient::query`] (STATUS,
//!   ROUTER_SHOW_WORKERS, ROUTER_SHOW_SCHEDULERS: their `REPLY [json]`)
//!   and [`AdminClient::disconnect`] (DISCONNECT, until its ACK).
//! - Anything else that arrives while waiting — a late answer to an
//!   earlier request, frames that do not decode — is skipped. A client
//!   whose request timed out may still receive that late answer: a caller
//!   that keeps clients for reuse drops a timed-out one.
//! - The endpoint may be a comma-separated failover list
//!   ([`crate::failover`]); libzmq connects in the background, so a router
//!   that is not there shows up as a [`ClientError::Timeout`].

use std::time::{Duration, Instant};

use emqp_proto::admin::{decode_answer, AdminError, AdminOp};
use emqp_proto::{Command, Message};
use serde_json::{Map, Value};

use crate::Received;

/// Why a request got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// The socket could not be set up or used.
    Socket(String),
    /// No answer to `what` within the timeout.
    Timeout { what: String, timeout: Duration },
    /// The answer to `what` is not JSON, or not a control-plane answer.
    NotJson { what: String, text: String },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Socket(e) => f.write_str(e),
            ClientError::Timeout { what, timeout } => {
                write!(f, "no answer to {what} within {}s", timeout.as_secs_f64())
            }
            ClientError::NotJson { what, text } => {
                let cut: String = text.chars().take(200).collect();
                write!(f, "the answer to {what} is not JSON: {cut}")
            }
        }
    }
}

impl std::error::Error for ClientError {}

/// What [`AdminClient::call`] returns when it is not the answer object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The router refused the op.
    Refused(AdminError),
    /// No usable answer.
    Client(ClientError),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Refused(e) => write!(f, "the router refused: {e}"),
            CallError::Client(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CallError {}

/// An answer: the bytes as received and their JSON.
#[derive(Debug, Clone)]
pub struct Answer {
    pub raw: Vec<u8>,
    pub json: Value,
}

/// A DEALER connected to a router's admin socket.
pub struct AdminClient {
    sock: zmq::Socket,
    timeout: Duration,
}

impl AdminClient {
    /// Connect to `endpoint` (one address or a comma-separated failover
    /// list) as `<name>-<uuid4>`, as a CURVE client with `curve`'s keys
    /// when given; every request waits at most `timeout`.
    pub fn connect(
        ctx: &zmq::Context,
        endpoint: &str,
        name: &str,
        timeout: Duration,
        curve: Option<crate::curve::CurveClient>,
    ) -> Result<AdminClient, ClientError> {
        let s = |e: &dyn std::fmt::Display| ClientError::Socket(e.to_string());
        let identity = format!("{name}-{}", emqp_proto::new_msgid());
        let opts = crate::SocketOptions {
            linger_ms: 0,
            curve,
            ..crate::SocketOptions::default()
        };
        let endpoints = crate::parse_endpoints(endpoint, "admin address").map_err(|e| s(&e))?;
        let sock = crate::connect_dealer_to(ctx, &endpoints, identity.as_bytes(), &opts)
            .map_err(|e| s(&e))?;
        sock.set_sndtimeo(timeout.as_millis().min(i32::MAX as u128) as i32)
            .map_err(|e| s(&e))?;
        Ok(AdminClient { sock, timeout })
    }

    /// The timeout of each request.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Send `command` with a fresh `admin:<uuid4>` msgid; returns the msgid.
    fn send(&self, command: Command) -> Result<String, ClientError> {
        let msgid = format!("admin:{}", emqp_proto::new_msgid());
        let what = command.name();
        crate::send_message(&self.sock, Message::with_msgid(msgid.clone(), command)).map_err(
            |e| match e {
                zmq::Error::EAGAIN => ClientError::Timeout {
                    what: what.to_string(),
                    timeout: self.timeout,
                },
                e => ClientError::Socket(format!("cannot send {what}: {e}")),
            },
        )?;
        Ok(msgid)
    }

    /// Wait for the first message `pick` takes, skipping others.
    fn wait<T>(
        &self,
        what: &str,
        mut pick: impl FnMut(Message) -> Option<T>,
    ) -> Result<T, ClientError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ClientError::Timeout {
                    what: what.to_string(),
                    timeout: self.timeout,
                });
            }
            let ms = left.as_millis().clamp(1, i64::MAX as u128) as i64;
            match crate::recv_message(&self.sock, ms) {
                Ok(Some(Received::Message(m))) => {
                    if let Some(t) = pick(m) {
                        return Ok(t);
                    }
                }
                Ok(Some(Received::Malformed(..))) | Ok(None) => {}
                Err(zmq::Error::EINTR) => {}
                Err(e) => return Err(ClientError::Socket(format!("receive: {e}"))),
            }
        }
    }

    /// STATUS, ROUTER_SHOW_WORKERS or ROUTER_SHOW_SCHEDULERS: their
    /// `REPLY [json]`.
    pub fn query(&self, command: Command) -> Result<Answer, ClientError> {
        let what = command.name();
        self.send(command)?;
        let raw = self.wait(what, |m| match m.command {
            Command::Reply(r) if r.orig_msgid.is_none() => Some(r.payload),
            _ => None,
        })?;
        parse(what, raw)
    }

    /// DISCONNECT: waits for the router's ACK of it.
    pub fn disconnect(&self) -> Result<(), ClientError> {
        let msgid = self.send(Command::Disconnect)?;
        self.wait("DISCONNECT", |m| match m.command {
            Command::Ack { acked_msgid, .. } if acked_msgid == msgid => Some(()),
            _ => None,
        })
    }

    /// `ADMIN [op]`: the `REPLY [answer, msgid]` naming this request, as
    /// it is (`{"ok": ...}` or not: see [`AdminClient::call`]).
    pub fn request(&self, op: &AdminOp) -> Result<Answer, ClientError> {
        let what = format!("ADMIN {}", op.name());
        let msgid = self.send(Command::Admin {
            request: op.to_value().to_string().into_bytes(),
        })?;
        let raw = self.wait(&what, |m| match m.command {
            Command::Reply(r) if r.orig_msgid.as_deref() == Some(msgid.as_str()) => Some(r.payload),
            _ => None,
        })?;
        parse(&what, raw)
    }

    /// [`AdminClient::request`], its answer read: the object of `"ok":
    /// true`, or the router's refusal.
    pub fn call(&self, op: &AdminOp) -> Result<Map<String, Value>, CallError> {
        let answer = self.request(op).map_err(CallError::Client)?;
        match decode_answer(&answer.json) {
            Some(Ok(m)) => Ok(m.clone()),
            Some(Err(e)) => Err(CallError::Refused(e)),
            None => Err(CallError::Client(ClientError::NotJson {
                what: format!("ADMIN {}", op.name()),
                text: String::from_utf8_lossy(&answer.raw).into_owned(),
            })),
        }
    }
}

fn parse(what: &str, raw: Vec<u8>) -> Result<Answer, ClientError> {
    match serde_json::from_slice(&raw) {
        Ok(json) => Ok(Answer { raw, json }),
        Err(_) => Err(ClientError::NotJson {
            what: what.to_string(),
            text: String::from_utf8_lossy(&raw).into_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emqp_proto::admin::{encode_answer, ErrorKind};

    /// A ROUTER bound on `inproc://<name>`, and a client of it.
    fn pair(ctx: &zmq::Context, name: &str, timeout: Duration) -> (zmq::Socket, AdminClient) {
        let endpoint = format!("inproc://{name}");
        let r = ctx.socket(zmq::ROUTER).unwrap();
        r.bind(&endpoint).unwrap();
        let c = AdminClient::connect(ctx, &endpoint, "t", timeout, None).unwrap();
        (r, c)
    }

    /// Answer one ADMIN with `answer(op)`, after a stale REPLY to another
    /// msgid (which the client must skip).
    fn serve_one(r: &zmq::Socket, answer: impl Fn(AdminOp) -> Value) {
        let mut frames = r.recv_multipart(0).unwrap();
        let identity = frames.remove(0);
        let msg = Message::decode(frames).unwrap();
        let Command::Admin { request } = msg.command else {
            panic!("not ADMIN: {:?}", msg.command)
        };
        let op = AdminOp::decode(&request).unwrap();
        let reply = |orig: &str, v: &Value| {
            let m = Message::with_msgid(
                "r",
                Command::Reply(emqp_proto::Reply {
                    payload: v.to_string().into_bytes(),
                    orig_msgid: Some(orig.to_string()),
                    status: None,
                    credit: 0,
                }),
            );
            r.send_multipart(m.encode_routed(identity.clone()), 0)
                .unwrap();
        };
        reply(
            "admin:stale",
            &serde_json::json!({"ok": true, "stale": true}),
        );
        reply(&msg.msgid, &answer(op));
    }

    #[test]
    fn a_call_gets_its_own_answer_or_the_refusal() {
        let ctx = zmq::Context::new();
        let (r, c) = pair(&ctx, "admin-client-test", Duration::from_secs(5));
        let server = std::thread::spawn(move || {
            serve_one(&r, |op| {
                assert_eq!(op, AdminOp::Queues);
                encode_answer(Ok(serde_json::json!({"queues": []})))
            });
            serve_one(&r, |op| {
                encode_answer(Err(AdminError::not_found(format!("{:?}", op.name()))))
            });
            r
        });
        let ok = c.call(&AdminOp::Queues).unwrap();
        assert_eq!(ok["queues"], serde_json::json!([]));
        assert!(ok.get("stale").is_none(), "the stale answer was skipped");
        match c.call(&AdminOp::Job { msgid: "m".into() }) {
            Err(CallError::Refused(e)) => assert_eq!(e.kind, ErrorKind::NotFound),
            other => panic!("{other:?}"),
        }
        drop(server.join().unwrap());
    }

    #[test]
    fn no_answer_is_a_timeout() {
        let ctx = zmq::Context::new();
        let (_silent, c) = pair(&ctx, "admin-client-silent", Duration::from_millis(200));
        match c.call(&AdminOp::Status) {
            Err(CallError::Client(ClientError::Timeout { what, .. })) => {
                assert_eq!(what, "ADMIN status")
            }
            other => panic!("{other:?}"),
        }
    }
}
