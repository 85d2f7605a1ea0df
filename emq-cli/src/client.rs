//! Talking to a router's admin socket: one DEALER, one request at a time,
//! each answer awaited for at most the timeout.
//!
//! Which router is it? Both answer STATUS with `REPLY [json]`; emq's object
//! has a `counters` object, 0.3.13's (`inflight_messages_by_queue`,
//! `latency_messages_by_queue`, `max_latency_messages_by_queue`,
//! `waiting_messages_by_queue`, `processed_messages_by_queue`,
//! `processed_messages_by_worker`) has not. STATUS is asked first because a
//! 0.3.13 router ignores a command it does not know (ADMIN included)
//! without a word: asking it ADMIN would only ever time out.

use std::time::{Duration, Instant};

use emq_transport::Received;
use emqp_proto::{Command, Message};
use serde_json::Value;

/// What kind of router answers on the admin socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// emq: the control plane (ADMIN).
    Emq,
    /// EventMQ 0.3.13: STATUS, ROUTER_SHOW_WORKERS, ROUTER_SHOW_SCHEDULERS,
    /// DISCONNECT only.
    EventMq0313,
}

impl Flavour {
    /// Tell the router apart by its STATUS answer (see the module docs).
    pub fn of_status(status: &Value) -> Flavour {
        if status.get("counters").is_some_and(Value::is_object) {
            Flavour::Emq
        } else {
            Flavour::EventMq0313
        }
    }
}

/// Why a request got no usable answer (all exit 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// The socket could not be set up or used.
    Socket(String),
    /// No answer to `what` within the timeout.
    Timeout { what: String, timeout: Duration },
    /// The answer to `what` is not JSON.
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

/// A DEALER connected to a router's admin socket.
pub struct AdminClient {
    sock: zmq::Socket,
    timeout: Duration,
}

/// The answer to an ADMIN request: the bytes as received (printed as they
/// are with `--json`) and their JSON.
#[derive(Debug, Clone)]
pub struct Answer {
    pub raw: Vec<u8>,
    pub json: Value,
}

impl AdminClient {
    /// Connect to `endpoint`, or to every address of a comma-separated
    /// failover list (the router that serves answers; see
    /// `emq_transport::failover`). libzmq connects in the background: a
    /// router that is not there shows up as a timeout of the first
    /// request.
    pub fn connect(
        ctx: &zmq::Context,
        endpoint: &str,
        timeout: Duration,
        curve: Option<emq_transport::curve::CurveClient>,
    ) -> Result<AdminClient, ClientError> {
        let identity = format!("emq-cli-{}", emqp_proto::new_msgid());
        let opts = emq_transport::SocketOptions {
            linger_ms: 0,
            curve,
            ..emq_transport::SocketOptions::default()
        };
        let endpoints = emq_transport::parse_endpoints(endpoint, "admin address")
            .map_err(|e| ClientError::Socket(e.to_string()))?;
        let sock = emq_transport::connect_dealer_to(ctx, &endpoints, identity.as_bytes(), &opts)
            .map_err(|e| ClientError::Socket(e.to_string()))?;
        sock.set_sndtimeo(timeout.as_millis().min(i32::MAX as u128) as i32)
            .map_err(|e| ClientError::Socket(e.to_string()))?;
        Ok(AdminClient { sock, timeout })
    }

    /// Send `command` with a fresh `admin:<uuid4>` msgid; returns the msgid.
    fn send(&self, command: Command) -> Result<String, ClientError> {
        let msgid = format!("admin:{}", emqp_proto::new_msgid());
        let what = command.name();
        emq_transport::send_message(&self.sock, Message::with_msgid(msgid.clone(), command))
            .map_err(|e| match e {
                zmq::Error::EAGAIN => ClientError::Timeout {
                    what: what.to_string(),
                    timeout: self.timeout,
                },
                e => ClientError::Socket(format!("cannot send {what}: {e}")),
            })?;
        Ok(msgid)
    }

    /// Wait for the first message `pick` takes, skipping others (a stale
    /// answer, a heartbeat, frames that do not decode).
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
            match emq_transport::recv_message(&self.sock, ms) {
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

    /// ADMIN [request]: the `REPLY [answer, msgid]` naming this request.
    pub fn admin(&self, request: &Value) -> Result<Answer, ClientError> {
        let op = request.get("op").and_then(Value::as_str).unwrap_or("?");
        let what = format!("ADMIN {op}");
        let msgid = self.send(Command::Admin {
            request: request.to_string().into_bytes(),
        })?;
        let raw = self.wait(&what, |m| match m.command {
            Command::Reply(r) if r.orig_msgid.as_deref() == Some(msgid.as_str()) => Some(r.payload),
            _ => None,
        })?;
        parse(&what, raw)
    }

    /// Ask STATUS and tell the router's flavour from it.
    pub fn detect(&self) -> Result<(Flavour, Answer), ClientError> {
        let status = self.query(Command::Status)?;
        Ok((Flavour::of_status(&status.json), status))
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
    use serde_json::json;

    #[test]
    fn flavour_from_status() {
        // 0.3.13's STATUS keys (eventmq/router.py, get_status).
        let old = json!({
            "inflight_messages_by_queue": {}, "latency_messages_by_queue": {},
            "max_latency_messages_by_queue": {}, "waiting_messages_by_queue": {},
            "processed_messages_by_queue": {}, "processed_messages_by_worker": {}
        });
        assert_eq!(Flavour::of_status(&old), Flavour::EventMq0313);
        let emq = json!({"inflight_messages_by_queue": {}, "counters": {"accepted": 1}});
        assert_eq!(Flavour::of_status(&emq), Flavour::Emq);
        assert_eq!(
            Flavour::of_status(&json!({"counters": 3})),
            Flavour::EventMq0313
        );
    }
}
