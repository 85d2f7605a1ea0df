//! Failover lists: a comma-separated list of router addresses (a job
//! manager's `--broker A,B`, a client's), written once for every binary.
//!
//! - [`parse_endpoints`] reads the list the same way everywhere: items
//!   trimmed, empty items skipped, each checked ([`check_endpoint`]), the
//!   same address once, at least one.
//! - Clients (a DEALER on the frontend or the admin socket) connect to
//!   **every** address of the list at once ([`connect_all`]): a standby
//!   router binds nothing, so only the router that serves accepts the
//!   connection. With more than one address the DEALER gets
//!   `ZMQ_IMMEDIATE` — it queues messages only on connections that are
//!   up, so nothing waits in the pipe of an address where no router
//!   listens (without it a DEALER round-robins over every connect, up or
//!   not, and a message queued for a dead address waits there for good)
//!   — and ZMTP heartbeats ([`LINK_HEARTBEAT`]), so a connection to a
//!   router whose machine died is dropped in seconds, not at the TCP
//!   timeout. If several routers serve at once (a misconfiguration: the
//!   lease of issue 18 allows one), requests are spread over them and
//!   each answers its own.
//! - A client keeps its identity for the life of its socket, across
//!   reconnects and across routers: a router re-sends held results to
//!   that identity (docs/PROTOCOL.md, "Results until delivered").
//! - [`LinkWatch`] tells a client when a connection comes up or goes
//!   down (libzmq's socket monitor), so that after a reconnect it can say
//!   hello and send again what was not acknowledged.
//! - **A monitor is stopped before its reader goes** ([`stop_monitor`],
//!   [`LinkWatch::stop`]). libzmq's I/O thread writes each event to the
//!   monitor with a blocking send: an event with no reader left (a router
//!   going away while the socket still lingers over unsent messages)
//!   blocks that thread for good, and every socket of the context with
//!   it. For the same reason the reader has no receive limit: a client
//!   that reads no events for a long while queues a few bytes per event
//!   instead of filling the pipe.
//!
//! Job managers use the same list but one address at a time, with a new
//! identity per connection (their slots belong to one router:
//! `emq-jobmanager`'s connection core).

use std::time::Duration;

use crate::{apply_options, check_endpoint, EndpointError, SocketOptions};

/// ZMTP heartbeat interval of a client connected to a failover list (its
/// timeout is three times this).
pub const LINK_HEARTBEAT: Duration = Duration::from_secs(1);

/// Read a comma-separated list of endpoints (see the module
/// documentation). `what` names the option in errors.
pub fn parse_endpoints(text: &str, what: &str) -> Result<Vec<String>, EndpointError> {
    let mut out: Vec<String> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        check_endpoint(item).map_err(|e| EndpointError(format!("{what}: {e}")))?;
        if !out.iter().any(|e| e == item) {
            out.push(item.to_string());
        }
    }
    if out.is_empty() {
        return Err(EndpointError(format!(
            "{what}: no address given (expected ADDR or ADDR,ADDR,...)"
        )));
    }
    Ok(out)
}

/// The address a client connects to for a bind address: a wildcard host
/// (`tcp://*:P`, `tcp://0.0.0.0:P`, as in a router's settings) is reached
/// at 127.0.0.1; anything else is kept.
pub fn loopback_for_wildcard(addr: &str) -> String {
    let addr = addr.trim();
    for wildcard in ["tcp://*:", "tcp://0.0.0.0:"] {
        if let Some(port) = addr.strip_prefix(wildcard) {
            return format!("tcp://127.0.0.1:{port}");
        }
    }
    addr.to_string()
}

/// A DEALER with `identity` and the shared options (PLAIN credentials
/// when set), not connected yet: set up a [`LinkWatch`] on it first if
/// the first connection matters, then [`connect_all`].
pub fn dealer(
    ctx: &zmq::Context,
    identity: &[u8],
    opts: &SocketOptions,
) -> Result<zmq::Socket, Box<dyn std::error::Error + Send + Sync>> {
    let sock = ctx.socket(zmq::DEALER)?;
    apply_options(&sock, opts)?;
    sock.set_identity(identity)?;
    if let Some(curve) = &opts.curve {
        curve.apply(&sock)?;
    } else if let Some(plain) = &opts.plain {
        sock.set_plain_username(Some(&plain.username))?;
        sock.set_plain_password(Some(plain.password.expose()))?;
    }
    Ok(sock)
}

/// Connect `sock` to every endpoint; with more than one, messages are
/// queued on live connections only and dead ones are found by ZMTP
/// heartbeats (see the module documentation).
pub fn connect_all(
    sock: &zmq::Socket,
    endpoints: &[String],
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    if endpoints.is_empty() {
        return Err("no address to connect to".into());
    }
    for e in endpoints {
        check_endpoint(e)?;
    }
    if endpoints.len() > 1 {
        sock.set_immediate(true)?;
        let ivl = i32::try_from(LINK_HEARTBEAT.as_millis()).unwrap_or(i32::MAX);
        sock.set_heartbeat_ivl(ivl)?;
        sock.set_heartbeat_timeout(ivl.saturating_mul(3))?;
    }
    for e in endpoints {
        sock.connect(e)
            .map_err(|err| format!("cannot connect to {e}: {err}"))?;
    }
    Ok(())
}

/// A DEALER connected to every endpoint of a failover list.
pub fn connect_dealer_to(
    ctx: &zmq::Context,
    endpoints: &[String],
    identity: &[u8],
    opts: &SocketOptions,
) -> Result<zmq::Socket, Box<dyn std::error::Error + Send + Sync>> {
    let sock = dealer(ctx, identity, opts)?;
    connect_all(&sock, endpoints)?;
    Ok(sock)
}

/// A connection of a watched socket came up or went down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// The ZMTP handshake with the peer at this endpoint succeeded.
    Up(String),
    /// The connection to this endpoint was lost.
    Down(String),
}

/// The connections of one socket, watched through libzmq's socket monitor
/// (an inproc PAIR socket). Poll [`LinkWatch::socket`] with the watched
/// socket; read with [`LinkWatch::events`].
pub struct LinkWatch {
    pair: zmq::Socket,
}

impl LinkWatch {
    /// Watch `sock` (before it connects, to see its first connection).
    pub fn new(ctx: &zmq::Context, sock: &zmq::Socket) -> zmq::Result<LinkWatch> {
        let endpoint = format!("inproc://emq-link-{}", emqp_proto::new_msgid());
        let events =
            zmq::SocketEvent::HANDSHAKE_SUCCEEDED as i32 | zmq::SocketEvent::DISCONNECTED as i32;
        sock.monitor(&endpoint, events)?;
        let pair = ctx.socket(zmq::PAIR)?;
        pair.set_linger(0)?;
        pair.set_rcvhwm(0)?;
        pair.connect(&endpoint)?;
        Ok(LinkWatch { pair })
    }

    /// Stop watching `sock` (the socket this watch was made for); call it
    /// before the watch is dropped (see the module documentation). Events
    /// already waiting can still be read.
    pub fn stop(&self, sock: &zmq::Socket) -> zmq::Result<()> {
        stop_monitor(sock)
    }

    /// The socket to poll (readable when an event is waiting).
    pub fn socket(&self) -> &zmq::Socket {
        &self.pair
    }

    /// Every event waiting, without blocking.
    pub fn events(&self) -> Vec<LinkEvent> {
        let mut out = Vec::new();
        while let Ok(frames) = self.pair.recv_multipart(zmq::DONTWAIT) {
            // [u16 event, u32 value] in host order, then the endpoint.
            let (Some(head), Some(endpoint)) = (frames.first(), frames.get(1)) else {
                continue;
            };
            if head.len() < 2 {
                continue;
            }
            let event = u16::from_ne_bytes([head[0], head[1]]);
            let endpoint = String::from_utf8_lossy(endpoint).into_owned();
            match zmq::SocketEvent::from_raw(event) {
                zmq::SocketEvent::HANDSHAKE_SUCCEEDED => out.push(LinkEvent::Up(endpoint)),
                zmq::SocketEvent::DISCONNECTED => out.push(LinkEvent::Down(endpoint)),
                _ => {}
            }
        }
        out
    }
}

/// Turn `sock`'s socket monitor off, so that nothing is written to its
/// reader any more (see the module documentation for why this comes
/// before the reader is closed).
///
/// libzmq turns a monitor off with a NULL endpoint, which the zmq crate's
/// safe API cannot pass; a monitor on a fresh inproc address with no
/// events does the same: libzmq closes the old monitor socket first, and
/// the new one is never written to. A socket already being closed
/// answers ETERM, which is fine: its context is ending.
pub fn stop_monitor(sock: &zmq::Socket) -> zmq::Result<()> {
    let off = format!("inproc://emq-monitor-off-{}", emqp_proto::new_msgid());
    match sock.monitor(&off, 0) {
        Err(zmq::Error::ETERM) => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_trimmed_checked_and_deduplicated() {
        assert_eq!(
            parse_endpoints(
                " tcp://127.0.0.1:1 ,, tcp://127.0.0.1:2,tcp://127.0.0.1:1",
                "--broker"
            )
            .unwrap(),
            ["tcp://127.0.0.1:1", "tcp://127.0.0.1:2"]
        );
        assert_eq!(
            parse_endpoints("ipc:///tmp/x", "--broker").unwrap(),
            ["ipc:///tmp/x"]
        );
        let e = parse_endpoints("tcp://127.0.0.1:1,127.0.0.1:2", "--broker").unwrap_err();
        assert!(
            e.0.starts_with("--broker: bad endpoint \"127.0.0.1:2\""),
            "{e}"
        );
        let e = parse_endpoints(" , ", "--broker").unwrap_err();
        assert!(e.0.contains("no address"), "{e}");
        assert_eq!(loopback_for_wildcard(" tcp://*:5"), "tcp://127.0.0.1:5");
        assert_eq!(
            loopback_for_wildcard("tcp://0.0.0.0:6"),
            "tcp://127.0.0.1:6"
        );
        assert_eq!(
            loopback_for_wildcard("tcp://10.0.0.1:7"),
            "tcp://10.0.0.1:7"
        );
    }

    /// A client on a two-address list: only the address where a router
    /// listens gets the message; the watch reports the connection.
    #[test]
    fn a_dealer_on_a_list_sends_to_the_live_router_only() {
        let ctx = zmq::Context::new();
        let router = ctx.socket(zmq::ROUTER).unwrap();
        router.bind("tcp://127.0.0.1:*").unwrap();
        let live = router.get_last_endpoint().unwrap().unwrap();
        // An address where nobody listens: a port bound and closed again
        // (by the OS at once; a zmq socket would unbind in the background
        // and might still take a connection, and the message sent on it).
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("tcp://127.0.0.1:{}", l.local_addr().unwrap().port())
        };
        let sock = dealer(&ctx, b"client-1", &SocketOptions::default()).unwrap();
        let watch = LinkWatch::new(&ctx, &sock).unwrap();
        connect_all(&sock, &[dead.clone(), live.clone()]).unwrap();
        sock.set_sndtimeo(5000).unwrap();
        for i in 0..4 {
            sock.send(format!("m{i}").as_bytes(), 0).unwrap();
        }
        for i in 0..4 {
            assert!(router.poll(zmq::POLLIN, 5000).unwrap() > 0, "message {i}");
            let f = router.recv_multipart(0).unwrap();
            assert_eq!(f, [b"client-1".to_vec(), format!("m{i}").into_bytes()]);
        }
        let mut up = Vec::new();
        for _ in 0..50 {
            up.extend(watch.events());
            if !up.is_empty() {
                break;
            }
            watch.socket().poll(zmq::POLLIN, 100).unwrap();
        }
        assert_eq!(up, [LinkEvent::Up(live)]);
    }

    /// A watched DEALER whose router goes away while it lingers over
    /// unsent messages: after [`LinkWatch::stop`] and the watch dropped,
    /// the DISCONNECTED event is not written, and the context still
    /// carries messages. (Without the stop, libzmq's I/O thread blocks on
    /// the event for good and the probes below get nothing.)
    #[test]
    fn a_stopped_watch_leaves_the_context_working_when_the_router_goes() {
        let rctx = zmq::Context::new();
        let router = rctx.socket(zmq::ROUTER).unwrap();
        router.set_linger(0).unwrap();
        router.set_rcvhwm(1).unwrap();
        router.bind("tcp://127.0.0.1:*").unwrap();
        let addr = router.get_last_endpoint().unwrap().unwrap();
        let ctx = zmq::Context::new();
        let sock = ctx.socket(zmq::DEALER).unwrap();
        sock.set_linger(1000).unwrap();
        let watch = LinkWatch::new(&ctx, &sock).unwrap();
        sock.connect(&addr).unwrap();
        sock.send("hello", 0).unwrap();
        assert!(router.poll(zmq::POLLIN, 5000).unwrap() > 0);
        router.recv_multipart(0).unwrap();
        // The router reads no more: fill the DEALER's queue.
        let chunk = vec![0u8; 32 * 1024];
        let mut full = false;
        for _ in 0..5000 {
            if sock.send(&chunk[..], zmq::DONTWAIT).is_err() {
                full = true;
                break;
            }
        }
        assert!(full, "the DEALER never filled up");
        watch.stop(&sock).unwrap();
        drop(watch);
        drop(router); // the connection drops under the lingering DEALER
        for probe in 1..=3 {
            let r = ctx.socket(zmq::ROUTER).unwrap();
            r.set_linger(0).unwrap();
            r.bind("tcp://127.0.0.1:*").unwrap();
            let d = ctx.socket(zmq::DEALER).unwrap();
            d.set_linger(0).unwrap();
            d.connect(&r.get_last_endpoint().unwrap().unwrap()).unwrap();
            d.send("probe", 0).unwrap();
            assert!(
                r.poll(zmq::POLLIN, 2000).unwrap() > 0,
                "the context stopped carrying messages (probe {probe})"
            );
        }
        sock.set_linger(0).unwrap();
    }
}
