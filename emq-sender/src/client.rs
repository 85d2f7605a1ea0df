//! A client of the router's frontend: a DEALER with a uuid4 identity that
//! submits REQUESTs (or SCHEDULE / UNSCHEDULE) and reads the router's
//! answers (`REPLY` acknowledgement, `REJECT`, `RESULT`). Reusable by tests
//! and benchmarks.

use std::fmt;
use std::time::{Duration, Instant};

use emq_transport::SocketOptions;
use emqp_proto::{
    new_msgid, Command, Headers, Message, Reject, RejectReason, Reply, Request, ResultStatus,
    Schedule,
};

/// A connection or internal error (exit code 1), or a send that could not
/// be queued in time (`timed_out`, exit code 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientError {
    pub message: String,
    pub timed_out: bool,
}

impl ClientError {
    pub fn new(message: impl Into<String>) -> ClientError {
        ClientError {
            message: message.into(),
            timed_out: false,
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ClientError {}

impl From<zmq::Error> for ClientError {
    fn from(e: zmq::Error) -> Self {
        ClientError::new(format!("zmq: {e}"))
    }
}

/// What the router said about one of our REQUESTs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `REPLY [msgid]`: the REQUEST was accepted.
    Accepted { msgid: String },
    /// `REJECT [msgid, reason, text]`.
    Rejected {
        msgid: String,
        reason: RejectReason,
        text: String,
    },
    /// `RESULT [msgid, status, payload]` (only for `reply-requested`).
    Result {
        msgid: String,
        status: ResultStatus,
        payload: Vec<u8>,
    },
    /// Anything else (a HEARTBEAT, an unexpected command, or frames that did
    /// not decode), described for a debug message. Never fatal.
    Other(String),
}

impl Event {
    /// Classify one message received from the router.
    pub fn from_message(msg: Message) -> Event {
        match msg.command {
            Command::Reply(Reply {
                payload,
                orig_msgid: None,
                ..
            }) => Event::Accepted {
                msgid: String::from_utf8_lossy(&payload).into_owned(),
            },
            // A worker-style REPLY [payload, orig_msgid(, status)] is taken
            // as a result; routers send RESULT, but leniency costs nothing.
            Command::Reply(Reply {
                payload,
                orig_msgid: Some(orig),
                status,
            }) => Event::Result {
                msgid: orig,
                status: status.unwrap_or(ResultStatus::Ok),
                payload,
            },
            Command::Reject(Reject {
                orig_msgid,
                reason,
                text,
            }) => Event::Rejected {
                msgid: orig_msgid,
                reason,
                text,
            },
            Command::Result(r) => Event::Result {
                msgid: r.orig_msgid,
                status: r.status,
                payload: r.payload,
            },
            other => Event::Other(format!("{} {}", other.name(), msg.msgid)),
        }
    }

    /// The msgid of the REQUEST this event is about, if any.
    pub fn msgid(&self) -> Option<&str> {
        match self {
            Event::Accepted { msgid }
            | Event::Rejected { msgid, .. }
            | Event::Result { msgid, .. } => Some(msgid),
            Event::Other(_) => None,
        }
    }
}

/// How waiting for one REQUEST ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged (and no result was asked for).
    Accepted,
    Rejected {
        reason: RejectReason,
        text: String,
    },
    /// The job's result arrived.
    Finished {
        status: ResultStatus,
        payload: Vec<u8>,
    },
    /// Nothing (more) arrived in time; `accepted` tells whether the ack came.
    TimedOut {
        accepted: bool,
    },
}

/// A DEALER connected to a router frontend. Dropping it closes the socket
/// and terminates its own zmq context, which waits for unsent messages up to
/// the linger time ([`Client::set_linger`], default 1 s).
pub struct Client {
    // Field order matters: the socket is closed before the context ends.
    sock: zmq::Socket,
    _ctx: zmq::Context,
    identity: String,
    endpoint: String,
}

impl Client {
    /// Connect to `endpoint` with a fresh uuid4 identity and default options.
    pub fn connect(endpoint: &str) -> Result<Client, ClientError> {
        Self::connect_with(endpoint, &SocketOptions::default())
    }

    pub fn connect_with(endpoint: &str, opts: &SocketOptions) -> Result<Client, ClientError> {
        let ctx = zmq::Context::new();
        let identity = new_msgid();
        let sock = emq_transport::connect_dealer(&ctx, endpoint, identity.as_bytes(), opts)
            .map_err(|e| ClientError::new(e.to_string()))?;
        Ok(Client {
            sock,
            _ctx: ctx,
            identity,
            endpoint: endpoint.to_string(),
        })
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The underlying socket (to poll it together with other things).
    pub fn socket(&self) -> &zmq::Socket {
        &self.sock
    }

    /// How long unsent messages are kept when the client is dropped.
    pub fn set_linger(&self, linger: Duration) -> Result<(), ClientError> {
        let ms = i32::try_from(linger.as_millis()).unwrap_or(i32::MAX);
        self.sock.set_linger(ms)?;
        Ok(())
    }

    /// Send a REQUEST with a fresh msgid; returns that msgid.
    pub fn submit(
        &self,
        queue: &str,
        headers: &Headers,
        message: Vec<u8>,
    ) -> Result<String, ClientError> {
        let msgid = new_msgid();
        self.submit_with_msgid(&msgid, queue, headers, message)?;
        Ok(msgid)
    }

    /// Send a REQUEST with the given msgid.
    pub fn submit_with_msgid(
        &self,
        msgid: &str,
        queue: &str,
        headers: &Headers,
        message: Vec<u8>,
    ) -> Result<(), ClientError> {
        self.send_command(
            msgid,
            Command::Request(Request {
                queue: queue.to_string(),
                headers: headers.clone(),
                message,
            }),
        )
    }

    /// Send a SCHEDULE (`unschedule` false) or UNSCHEDULE with a fresh
    /// msgid; returns that msgid. An emq router answers `REPLY [msgid]`
    /// (accepted) or `REJECT [msgid, malformed, text]`, which
    /// [`Client::wait`] reads; an EventMQ 0.3.13 router never answers.
    pub fn schedule(&self, unschedule: bool, body: Schedule) -> Result<String, ClientError> {
        let msgid = new_msgid();
        let cmd = if unschedule {
            Command::Unschedule(body)
        } else {
            Command::Schedule(body)
        };
        self.send_command(&msgid, cmd)?;
        Ok(msgid)
    }

    /// Send PUBLISH [topic, message] with a fresh msgid (to a pub/sub
    /// process; nothing answers); returns that msgid.
    pub fn publish(&self, topic: &str, message: Vec<u8>) -> Result<String, ClientError> {
        let msgid = new_msgid();
        self.send_command(
            &msgid,
            Command::Publish {
                topic: topic.to_string(),
                message,
            },
        )?;
        Ok(msgid)
    }

    /// Send any command with the given msgid.
    pub fn send_command(&self, msgid: &str, command: Command) -> Result<(), ClientError> {
        let msg = Message::with_msgid(msgid, command);
        match emq_transport::send_message(&self.sock, msg) {
            Ok(()) => Ok(()),
            // Only with a send timeout set: the outgoing queue stayed full.
            Err(zmq::Error::EAGAIN) => Err(ClientError {
                message: format!(
                    "cannot queue more messages for {}: the router does not take them",
                    self.endpoint
                ),
                timed_out: true,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// How long a submit may block when the outgoing queue is full
    /// (unbounded by default).
    pub fn set_send_timeout(&self, timeout: Duration) -> Result<(), ClientError> {
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        self.sock.set_sndtimeo(ms)?;
        Ok(())
    }

    /// The next message from the router, waiting at most `timeout`.
    pub fn recv_event(&self, timeout: Duration) -> Result<Option<Event>, ClientError> {
        let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        Ok(
            emq_transport::recv_message(&self.sock, ms)?.map(|r| match r {
                emq_transport::Received::Message(m) => Event::from_message(m),
                emq_transport::Received::Malformed(e, sizes) => {
                    Event::Other(format!("malformed message ({e}), frame sizes {sizes:?}"))
                }
            }),
        )
    }

    /// A message already queued, without waiting.
    pub fn try_recv_event(&self) -> Result<Option<Event>, ClientError> {
        match self.sock.recv_multipart(zmq::DONTWAIT) {
            Ok(frames) => {
                let sizes: Vec<usize> = frames.iter().map(Vec::len).collect();
                Ok(Some(match Message::decode(frames) {
                    Ok(m) => Event::from_message(m),
                    Err(e) => {
                        Event::Other(format!("malformed message ({e}), frame sizes {sizes:?}"))
                    }
                }))
            }
            Err(zmq::Error::EAGAIN) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Wait for the router's answer to REQUEST `msgid`: its acknowledgement,
    /// or with `want_result` its RESULT. Events about other msgids are
    /// ignored. A REJECT ends the wait at any time.
    pub fn wait(
        &self,
        msgid: &str,
        want_result: bool,
        timeout: Duration,
    ) -> Result<Outcome, ClientError> {
        let deadline = Instant::now() + timeout;
        let mut accepted = false;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Outcome::TimedOut { accepted });
            }
            let Some(ev) = self.recv_event(left)? else {
                return Ok(Outcome::TimedOut { accepted });
            };
            if ev.msgid() != Some(msgid) {
                continue;
            }
            match ev {
                Event::Accepted { .. } => {
                    accepted = true;
                    if !want_result {
                        return Ok(Outcome::Accepted);
                    }
                }
                Event::Rejected { reason, text, .. } => {
                    return Ok(Outcome::Rejected { reason, text })
                }
                Event::Result {
                    status, payload, ..
                } => return Ok(Outcome::Finished { status, payload }),
                Event::Other(_) => {}
            }
        }
    }

    /// Submit and wait in one call.
    pub fn submit_and_wait(
        &self,
        queue: &str,
        headers: &Headers,
        message: Vec<u8>,
        want_result: bool,
        timeout: Duration,
    ) -> Result<(String, Outcome), ClientError> {
        let msgid = self.submit(queue, headers, message)?;
        let outcome = self.wait(&msgid, want_result, timeout)?;
        Ok((msgid, outcome))
    }
}

/// The endpoint to connect to when `--broker` is not given:
/// `EMQ_BROKER_ADDR`, else `EVENTMQ_FRONTEND_ADDR` (the router's bind
/// address in 0.3.13 settings; a wildcard host becomes 127.0.0.1), else
/// [`DEFAULT_BROKER`].
pub fn default_broker(
    emq_broker_addr: Option<&str>,
    eventmq_frontend_addr: Option<&str>,
) -> String {
    if let Some(a) = emq_broker_addr.map(str::trim).filter(|a| !a.is_empty()) {
        return a.to_string();
    }
    from_bind_address(eventmq_frontend_addr).unwrap_or_else(|| DEFAULT_BROKER.to_string())
}

/// The endpoint `--publish` connects to when `--broker` is not given:
/// `EVENTMQ_PUBLISHER_INCOMING_ADDR` (the pub/sub process's bind address
/// in 0.3.13 settings; a wildcard host becomes 127.0.0.1), else
/// [`DEFAULT_PUBLISHER`].
pub fn default_publisher(eventmq_publisher_incoming_addr: Option<&str>) -> String {
    from_bind_address(eventmq_publisher_incoming_addr)
        .unwrap_or_else(|| DEFAULT_PUBLISHER.to_string())
}

/// A bind address from 0.3.13 settings as an address to connect to.
fn from_bind_address(addr: Option<&str>) -> Option<String> {
    let a = addr.map(str::trim).filter(|a| !a.is_empty())?;
    for wildcard in ["tcp://*:", "tcp://0.0.0.0:"] {
        if let Some(port) = a.strip_prefix(wildcard) {
            return Some(format!("tcp://127.0.0.1:{port}"));
        }
    }
    Some(a.to_string())
}

/// The router frontend's default address (0.3.13's).
pub const DEFAULT_BROKER: &str = "tcp://127.0.0.1:47291";

/// The pub/sub process's default incoming address (0.3.13's
/// `PUBLISHER_INCOMING_ADDR`).
pub const DEFAULT_PUBLISHER: &str = "tcp://127.0.0.1:47298";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_broker_precedence() {
        assert_eq!(default_broker(None, None), DEFAULT_BROKER);
        assert_eq!(
            default_broker(Some("tcp://10.0.0.1:1"), Some("tcp://127.0.0.1:2")),
            "tcp://10.0.0.1:1"
        );
        assert_eq!(
            default_broker(Some(""), Some("tcp://127.0.0.1:2")),
            "tcp://127.0.0.1:2"
        );
        assert_eq!(
            default_broker(None, Some("tcp://*:47291")),
            "tcp://127.0.0.1:47291"
        );
        assert_eq!(
            default_broker(None, Some("tcp://0.0.0.0:5")),
            "tcp://127.0.0.1:5"
        );
    }

    #[test]
    fn default_publisher_is_the_0_3_13_pubsub_incoming_address() {
        assert_eq!(default_publisher(None), DEFAULT_PUBLISHER);
        assert_eq!(default_publisher(Some(" ")), DEFAULT_PUBLISHER);
        assert_eq!(
            default_publisher(Some("tcp://*:47298")),
            "tcp://127.0.0.1:47298"
        );
        assert_eq!(
            default_publisher(Some("tcp://10.0.0.2:9")),
            "tcp://10.0.0.2:9"
        );
    }

    fn msg(cmd: Command) -> Message {
        Message::with_msgid("m-1", cmd)
    }

    #[test]
    fn router_answers_are_classified() {
        assert_eq!(
            Event::from_message(msg(Command::Reply(Reply::ack_of("req-1")))),
            Event::Accepted {
                msgid: "req-1".into()
            }
        );
        assert_eq!(
            Event::from_message(msg(Command::Reject(Reject {
                orig_msgid: "req-1".into(),
                reason: RejectReason::QueueFull,
                text: "full".into()
            }))),
            Event::Rejected {
                msgid: "req-1".into(),
                reason: RejectReason::QueueFull,
                text: "full".into()
            }
        );
        assert_eq!(
            Event::from_message(msg(Command::Result(emqp_proto::JobResult {
                orig_msgid: "req-1".into(),
                status: ResultStatus::Failed,
                payload: b"{}".to_vec()
            }))),
            Event::Result {
                msgid: "req-1".into(),
                status: ResultStatus::Failed,
                payload: b"{}".to_vec()
            }
        );
        let ev = Event::from_message(msg(Command::Heartbeat { timestamp: None }));
        assert!(matches!(ev, Event::Other(_)));
        assert_eq!(ev.msgid(), None);
        assert_eq!(
            Event::from_message(msg(Command::Reply(Reply {
                payload: b"{\"value\": 1}".to_vec(),
                orig_msgid: Some("req-2".into()),
                status: None
            }))),
            Event::Result {
                msgid: "req-2".into(),
                status: ResultStatus::Ok,
                payload: b"{\"value\": 1}".to_vec()
            }
        );
    }
}
