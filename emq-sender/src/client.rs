//! A client of the router's frontend: a DEALER with a uuid4 identity that
//! submits REQUESTs (or SCHEDULE / UNSCHEDULE) and reads the router's
//! answers (`REPLY` acknowledgement, `REJECT`, `RESULT`). Reusable by tests
//! and benchmarks.
//!
//! **Failover and results until delivered** (docs/PROTOCOL.md):
//! - The endpoint may be a failover list `A,B,...`: the DEALER connects to
//!   every address (`emq_transport::failover`) and talks to the router
//!   that serves; its identity stays the same for the life of the client,
//!   across reconnects and routers.
//! - A `reply-requested` REQUEST gets the `result-receipt` header, and
//!   every RESULT is confirmed with `RECEIVED` (batched: sent before the
//!   client next waits, or every [`RECEIPT_BATCH`] results), so the router
//!   keeps each result until this client has it.
//! - When a connection serves after one was lost (one came up after a
//!   drop: a router restarted, or another took over; or one that was up
//!   dropped while another still is: a frozen leader's, once the standby
//!   serves), the client says hello (`HEARTBEAT`: the router sends again
//!   every result it holds for this identity) and sends again every
//!   REQUEST, SCHEDULE and UNSCHEDULE not answered yet, with the same
//!   msgid ([`crate::track`] holds the rule); a `REJECT duplicate-msgid`
//!   for one sent again means the router had taken it, and is reported as
//!   [`Event::Accepted`]. A RESULT can so come twice: callers keep the
//!   first per msgid (this type reports every one).

use std::cell::{Cell, RefCell};
use std::fmt;
use std::time::{Duration, Instant};

use emq_transport::{LinkWatch, SocketOptions};
use emqp_proto::headers::{NOTICES, RESULT_RECEIPT};
use emqp_proto::{
    new_msgid, Command, Header, Headers, Message, Notice, RejectReason, Request, ResultStatus,
    Schedule,
};

pub use crate::event::Event;
use crate::track::{Again, Track};

/// Receipts sent in one `RECEIVED` at most (and sent as soon as this many
/// wait).
pub const RECEIPT_BATCH: usize = 256;

/// What a [`ClientError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A connection or internal error (exit code 1).
    Connection,
    /// A send that could not be queued in time (exit code 5).
    SendTimeout,
    /// A frame over the router's size limit, found before sending: nothing
    /// was sent (exit code 2).
    TooLarge,
}

/// An error of the client (see [`ErrorKind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientError {
    pub message: String,
    pub kind: ErrorKind,
}

impl ClientError {
    pub fn new(message: impl Into<String>) -> ClientError {
        ClientError {
            message: message.into(),
            kind: ErrorKind::Connection,
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
    /// `DUPLICATE`: answered as the job `existing`, which holds the
    /// REQUEST's unique key; `result`: that job's RESULT when it was
    /// waited for and came in time.
    Duplicate {
        existing: String,
        text: String,
        result: Option<(ResultStatus, Vec<u8>)>,
    },
}

/// A DEALER connected to a router frontend (or to every address of a
/// failover list). Dropping it closes the socket and terminates its own
/// zmq context, which waits for unsent messages up to the linger time
/// ([`Client::set_linger`], default 1 s).
pub struct Client {
    // Field order matters: the sockets are closed before the context ends.
    sock: zmq::Socket,
    watch: LinkWatch,
    _ctx: zmq::Context,
    identity: String,
    endpoint: String,
    track: RefCell<Track>,
    /// The router's largest frame ([`Client::set_max_message_size`]).
    max_frame: Cell<Option<usize>>,
    /// NOTICEs [`Client::wait`] read, for [`Client::take_notices`].
    notices: RefCell<Vec<Notice>>,
}

impl Drop for Client {
    /// The receipts not sent yet go out (within the linger time): the
    /// router would send those results again otherwise. The connection
    /// monitor is stopped before its reader is dropped.
    fn drop(&mut self) {
        let _ = self.flush_receipts();
        // Before the watch's reader goes (emq_transport::failover); a
        // failure leaves only this client's own context at risk.
        let _ = self.watch.stop(&self.sock);
    }
}

impl Client {
    /// Connect to `endpoint` (or every address of a comma-separated
    /// failover list) with a fresh uuid4 identity and default options.
    pub fn connect(endpoint: &str) -> Result<Client, ClientError> {
        Self::connect_with(endpoint, &SocketOptions::default())
    }

    pub fn connect_with(endpoint: &str, opts: &SocketOptions) -> Result<Client, ClientError> {
        let endpoints = emq_transport::parse_endpoints(endpoint, "broker")
            .map_err(|e| ClientError::new(e.to_string()))?;
        let ctx = zmq::Context::new();
        let identity = new_msgid();
        let err = |e: Box<dyn std::error::Error + Send + Sync>| ClientError::new(e.to_string());
        let sock = emq_transport::failover::dealer(&ctx, identity.as_bytes(), opts).map_err(err)?;
        let watch = LinkWatch::new(&ctx, &sock)?;
        emq_transport::connect_all(&sock, &endpoints).map_err(err)?;
        Ok(Client {
            sock,
            watch,
            _ctx: ctx,
            identity,
            endpoint: endpoints.join(","),
            track: RefCell::new(Track::new()),
            max_frame: Cell::new(Some(emqp_proto::DEFAULT_MAX_MESSAGE_SIZE)),
            notices: RefCell::new(Vec::new()),
        })
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// A connection to the router has been up at least once (the ZMTP
    /// handshake succeeded): `false` means nothing answered at the address.
    /// (As of the connection changes read so far: waiting reads them.)
    pub fn ever_connected(&self) -> bool {
        self.track.borrow().ever_connected()
    }

    /// The address, or the failover list, as `A,B`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The underlying socket (to poll it together with other things).
    pub fn socket(&self) -> &zmq::Socket {
        &self.sock
    }

    /// Keep unanswered messages to send them again after a reconnect (on
    /// by default; off for fire and forget, where nothing is answered).
    pub fn set_resend(&self, on: bool) {
        self.track.borrow_mut().set_enabled(on);
    }

    /// The router's `--max-message-size` (per frame; `None`: no limit;
    /// default [`emqp_proto::DEFAULT_MAX_MESSAGE_SIZE`]). A message with a
    /// bigger frame is not sent: [`ErrorKind::TooLarge`] at once, instead
    /// of a router that drops it (libzmq disconnects a peer over its
    /// ZMQ_MAXMSGSIZE without a word) and a wait for an answer that never
    /// comes.
    pub fn set_max_message_size(&self, limit: Option<usize>) {
        self.max_frame.set(limit);
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

    /// Send a REQUEST with the given msgid, with the `notices` header (the
    /// router may send NOTICEs right before the ACK); a `reply-requested` one
    /// gets the `result-receipt` header (this client confirms its RESULT).
    pub fn submit_with_msgid(
        &self,
        msgid: &str,
        queue: &str,
        headers: &Headers,
        message: Vec<u8>,
    ) -> Result<(), ClientError> {
        let mut headers = headers.clone();
        if headers.reply_requested() && !headers.result_receipt() {
            headers.push(Header::Other(RESULT_RECEIPT.to_string()));
        }
        if !headers.notices() {
            headers.push(Header::Other(NOTICES.to_string()));
        }
        self.send_command(
            msgid,
            Command::Request(Request {
                queue: queue.to_string(),
                headers,
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

    /// Send any command with the given msgid (a REQUEST, SCHEDULE or
    /// UNSCHEDULE is kept until answered, to be sent again after a
    /// reconnect).
    pub fn send_command(&self, msgid: &str, command: Command) -> Result<(), ClientError> {
        let answered = matches!(
            command,
            Command::Request(_) | Command::Schedule(_) | Command::Unschedule(_)
        );
        let name = command.name();
        let frames = Message::with_msgid(msgid, command).encode();
        if let Some(limit) = self.max_frame.get() {
            if let Some(big) = frames.iter().map(Vec::len).find(|&n| n > limit) {
                return Err(ClientError {
                    message: format!(
                        "{name} {msgid} not sent: a frame of {big} bytes is over the router's \
                         limit of {limit} bytes (--max-message-size, EVENTMQ_MAX_MESSAGE_SIZE)"
                    ),
                    kind: ErrorKind::TooLarge,
                });
            }
        }
        if answered {
            self.track.borrow_mut().sent(msgid, &frames);
        }
        self.send_frames(frames)
    }

    fn send_frames(&self, frames: Vec<Vec<u8>>) -> Result<(), ClientError> {
        match emq_transport::send_frames(&self.sock, None, frames, 0) {
            Ok(()) => Ok(()),
            // Only with a send timeout set: the outgoing queue stayed full.
            Err(zmq::Error::EAGAIN) => Err(ClientError {
                message: format!(
                    "cannot queue more messages for {}: the router does not take them",
                    self.endpoint
                ),
                kind: ErrorKind::SendTimeout,
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

    /// The next message from the router, waiting at most `timeout`
    /// (receipts due are sent first; connection changes are handled on
    /// the way and reported as [`Event::Reconnected`]).
    pub fn recv_event(&self, timeout: Duration) -> Result<Option<Event>, ClientError> {
        self.flush_receipts()?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(ev) = self.link_events()? {
                return Ok(Some(ev));
            }
            if let Some(ev) = self.try_recv_message()? {
                return Ok(Some(ev));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            // Wake up for the deadline, or for a resend the books hold.
            let wake = self
                .track
                .borrow()
                .wake_at()
                .map_or(deadline, |w| w.min(deadline));
            let left = wake.saturating_duration_since(now);
            // Whole milliseconds, rounded up: no busy loop before `wake`.
            let ms = i64::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i64::MAX);
            let mut items = [
                self.sock.as_poll_item(zmq::POLLIN),
                self.watch.socket().as_poll_item(zmq::POLLIN),
            ];
            zmq::poll(&mut items, ms)?;
        }
    }

    /// A message already queued, without waiting.
    pub fn try_recv_event(&self) -> Result<Option<Event>, ClientError> {
        if let Some(ev) = self.link_events()? {
            return Ok(Some(ev));
        }
        self.try_recv_message()
    }

    fn try_recv_message(&self) -> Result<Option<Event>, ClientError> {
        match self.sock.recv_multipart(zmq::DONTWAIT) {
            Ok(frames) => {
                let sizes: Vec<usize> = frames.iter().map(Vec::len).collect();
                let ev = match Message::decode(frames) {
                    Ok(m) => Event::from_message(m),
                    Err(e) => {
                        Event::Other(format!("malformed message ({e}), frame sizes {sizes:?}"))
                    }
                };
                self.noted(ev).map(Some)
            }
            Err(zmq::Error::EAGAIN) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Keep the books of one event from the router.
    fn noted(&self, ev: Event) -> Result<Event, ClientError> {
        let ev = self.track.borrow_mut().noted(ev);
        if self.track.borrow().receipts() >= RECEIPT_BATCH {
            self.flush_receipts()?;
        }
        Ok(ev)
    }

    /// Send `RECEIVED` for the RESULTs read so far.
    pub fn flush_receipts(&self) -> Result<(), ClientError> {
        let msgids = self.track.borrow_mut().take_receipts();
        if msgids.is_empty() {
            return Ok(());
        }
        let msg = Message::new(Command::Received {
            orig_msgids: msgids,
        });
        self.send_frames(msg.encode())
    }

    /// Connection changes, and resends that are due: when the books say
    /// so ([`crate::track`]), say hello and send the unanswered messages
    /// again.
    fn link_events(&self) -> Result<Option<Event>, ClientError> {
        let now = Instant::now();
        let again = {
            let mut t = self.track.borrow_mut();
            let mut again = None;
            for e in self.watch.events() {
                again = t.link(e, now).or(again);
            }
            again.or_else(|| t.due(now))
        };
        let Some(Again { endpoint, messages }) = again else {
            return Ok(None);
        };
        // libzmq applies its pipe changes (a dropped connection's pipe
        // removed) before the messages go.
        self.sock.get_events()?;
        let hello = Message::new(Command::Heartbeat { timestamp: None });
        self.send_frames(hello.encode())?;
        let resent = messages.len();
        for frames in messages {
            self.send_frames(frames)?;
        }
        Ok(Some(Event::Reconnected { endpoint, resent }))
    }

    /// Wait for the router's answer to REQUEST `msgid`: its acknowledgement,
    /// or with `want_result` its RESULT. Events about other msgids are
    /// ignored. A REJECT ends the wait at any time. NOTICEs about `msgid`
    /// are kept for [`Client::take_notices`]: those read before the
    /// answer (the router sends them right before the ACK, on the same
    /// pipe), and, after an acknowledgement that ends the wait, those
    /// already received (an older emq router sent them behind it).
    pub fn wait(
        &self,
        msgid: &str,
        want_result: bool,
        timeout: Duration,
    ) -> Result<Outcome, ClientError> {
        self.wait_acked_within(msgid, want_result, timeout, timeout)
    }

    /// [`Client::wait`], ending at `ack_timeout` when nothing answered
    /// `msgid` by then (no acknowledgement: no router, most likely),
    /// though the result may take up to `timeout`.
    pub fn wait_acked_within(
        &self,
        msgid: &str,
        want_result: bool,
        ack_timeout: Duration,
        timeout: Duration,
    ) -> Result<Outcome, ClientError> {
        let start = Instant::now();
        let deadline = start + timeout;
        let ack_deadline = start + ack_timeout.min(timeout);
        let mut accepted = false;
        // After a DUPLICATE: the job waited for is the existing one.
        let mut duplicate: Option<(String, String)> = None;
        let timed_out = |accepted: bool, duplicate: Option<(String, String)>| match duplicate {
            Some((existing, text)) => Outcome::Duplicate {
                existing,
                text,
                result: None,
            },
            None => Outcome::TimedOut { accepted },
        };
        loop {
            let until = if accepted { deadline } else { ack_deadline };
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(timed_out(accepted, duplicate));
            }
            let Some(ev) = self.recv_event(left)? else {
                return Ok(timed_out(accepted, duplicate));
            };
            if let Some((existing, text)) = &duplicate {
                if let Event::Result {
                    msgid: m,
                    status,
                    payload,
                } = ev
                {
                    if &m == existing {
                        return Ok(Outcome::Duplicate {
                            existing: m,
                            text: text.clone(),
                            result: Some((status, payload)),
                        });
                    }
                }
                continue;
            }
            if ev.msgid() != Some(msgid) {
                continue;
            }
            match ev {
                Event::Duplicate { existing, text, .. } => {
                    if !want_result {
                        return Ok(Outcome::Duplicate {
                            existing,
                            text,
                            result: None,
                        });
                    }
                    accepted = true;
                    duplicate = Some((existing, text));
                }
                Event::Accepted { .. } => {
                    accepted = true;
                    if !want_result {
                        while let Some(ev) = self.try_recv_event()? {
                            match ev {
                                Event::Notice(n) if n.orig_msgid == msgid => {
                                    self.notices.borrow_mut().push(n)
                                }
                                _ => {}
                            }
                        }
                        return Ok(Outcome::Accepted);
                    }
                }
                Event::Notice(n) => self.notices.borrow_mut().push(n),
                Event::Rejected { reason, text, .. } => {
                    return Ok(Outcome::Rejected { reason, text })
                }
                Event::Result {
                    status, payload, ..
                } => {
                    self.flush_receipts()?;
                    return Ok(Outcome::Finished { status, payload });
                }
                Event::Reconnected { .. } | Event::Other(_) => {}
            }
        }
    }

    /// The NOTICEs [`Client::wait`] kept, oldest first; emptied.
    pub fn take_notices(&self) -> Vec<Notice> {
        std::mem::take(&mut self.notices.borrow_mut())
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

/// The endpoint (or failover list) to connect to when `--broker` is not
/// given: `EMQ_BROKER_ADDR`, else `EVENTMQ_FRONTEND_ADDR` (the router's
/// bind address in 0.3.13 settings; a wildcard host becomes 127.0.0.1, in
/// each address of a list), else [`DEFAULT_BROKER`].
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

/// A bind address (or a comma-separated list of them) from 0.3.13
/// settings as the address(es) to connect to: a wildcard host becomes
/// 127.0.0.1.
fn from_bind_address(addr: Option<&str>) -> Option<String> {
    let a = addr.map(str::trim).filter(|a| !a.is_empty())?;
    Some(
        a.split(',')
            .map(emq_transport::loopback_for_wildcard)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// The router frontend's default address (0.3.13's).
pub const DEFAULT_BROKER: &str = "tcp://127.0.0.1:47291";

/// The pub/sub process's default incoming address (0.3.13's
/// `PUBLISHER_INCOMING_ADDR`).
pub const DEFAULT_PUBLISHER: &str = "tcp://127.0.0.1:47298";

#[cfg(test)]
mod tests {
    use super::*;
    use emqp_proto::{Reject, Reply};

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
        assert_eq!(
            default_broker(None, Some("tcp://*:5, tcp://10.0.0.2:6")),
            "tcp://127.0.0.1:5,tcp://10.0.0.2:6"
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
                status: None,
                credit: 0,
            }))),
            Event::Result {
                msgid: "req-2".into(),
                status: ResultStatus::Ok,
                payload: b"{\"value\": 1}".to_vec()
            }
        );
    }
}
