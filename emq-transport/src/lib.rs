//! What every emq binary does with ZeroMQ, written once: socket setup with
//! the options the protocol needs, sending and receiving eMQP messages,
//! shutdown signals, and endpoint validation with clear errors.
//!
//! No protocol logic lives here; the cores (router, job manager) are sans-IO
//! and the binaries move frames between these sockets and the cores.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub mod metrics_http;
pub mod zap;

use emqp_proto::{DecodeError, Message};

/// Default high-water mark for sockets (messages, per peer pipe).
pub const DEFAULT_SOCKET_HWM: i32 = 100_000;

/// Options shared by every socket an emq binary opens.
#[derive(Debug, Clone)]
pub struct SocketOptions {
    /// ZMQ_SNDHWM / ZMQ_RCVHWM.
    pub hwm: i32,
    /// ZMQ_MAXMSGSIZE in bytes; -1 for no limit.
    pub max_message_size: i64,
    /// ZMQ_LINGER in milliseconds on close.
    pub linger_ms: i32,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            hwm: DEFAULT_SOCKET_HWM,
            max_message_size: -1,
            linger_ms: 1000,
        }
    }
}

/// Why an endpoint string is unusable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointError(pub String);

impl std::fmt::Display for EndpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EndpointError {}

/// Check a zmq endpoint (`tcp://host:port`, `ipc://path`, `inproc://name`)
/// before handing it to libzmq, whose own error ("Invalid argument") does
/// not say what is wrong.
pub fn check_endpoint(endpoint: &str) -> Result<(), EndpointError> {
    let err = |why: &str| Err(EndpointError(format!("bad endpoint {endpoint:?}: {why}")));
    if let Some(rest) = endpoint.strip_prefix("tcp://") {
        let Some((host, port)) = rest.rsplit_once(':') else {
            return err("expected tcp://HOST:PORT");
        };
        if host.is_empty() {
            return err("missing host");
        }
        if port != "*" && port.parse::<u16>().is_err() {
            return err("port must be a number from 0 to 65535 or *");
        }
        Ok(())
    } else if endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://") {
        Ok(())
    } else {
        err("expected a tcp://, ipc:// or inproc:// address")
    }
}

fn apply_options(sock: &zmq::Socket, opts: &SocketOptions) -> zmq::Result<()> {
    sock.set_sndhwm(opts.hwm)?;
    sock.set_rcvhwm(opts.hwm)?;
    sock.set_maxmsgsize(opts.max_message_size)?;
    sock.set_linger(opts.linger_ms)?;
    Ok(())
}

/// A bound ROUTER socket with ROUTER_MANDATORY set, so a send to a peer that
/// is gone fails with EHOSTUNREACH instead of being dropped silently.
pub fn bind_router(
    ctx: &zmq::Context,
    endpoint: &str,
    opts: &SocketOptions,
) -> Result<zmq::Socket, Box<dyn std::error::Error + Send + Sync>> {
    check_endpoint(endpoint)?;
    let sock = ctx.socket(zmq::ROUTER)?;
    apply_options(&sock, opts)?;
    sock.set_router_mandatory(true)?;
    sock.bind(endpoint)
        .map_err(|e| format!("cannot bind {endpoint}: {e}"))?;
    Ok(sock)
}

/// A DEALER connected to `endpoint` with the given identity (0.3.13 peers
/// use a fresh uuid4 per connection).
pub fn connect_dealer(
    ctx: &zmq::Context,
    endpoint: &str,
    identity: &[u8],
    opts: &SocketOptions,
) -> Result<zmq::Socket, Box<dyn std::error::Error + Send + Sync>> {
    check_endpoint(endpoint)?;
    let sock = ctx.socket(zmq::DEALER)?;
    apply_options(&sock, opts)?;
    sock.set_identity(identity)?;
    sock.connect(endpoint)
        .map_err(|e| format!("cannot connect to {endpoint}: {e}"))?;
    Ok(sock)
}

/// Send a message on a DEALER socket.
pub fn send_message(sock: &zmq::Socket, msg: Message) -> zmq::Result<()> {
    sock.send_multipart(msg.encode(), 0)
}

/// Send a message on a ROUTER socket to `identity`, without blocking. With
/// ROUTER_MANDATORY an unknown peer gives `Err(EHOSTUNREACH)`.
pub fn send_routed(sock: &zmq::Socket, identity: Vec<u8>, msg: Message) -> zmq::Result<()> {
    sock.send_multipart(msg.encode_routed(identity), zmq::DONTWAIT)
}

/// What a receive yielded.
#[derive(Debug)]
pub enum Received {
    Message(Message),
    /// The frames did not decode; they are returned for logging.
    Malformed(DecodeError, Vec<usize>),
}

/// Receive one DEALER-side message, waiting at most `timeout_ms` (-1 forever).
/// `Ok(None)` on timeout.
pub fn recv_message(sock: &zmq::Socket, timeout_ms: i64) -> zmq::Result<Option<Received>> {
    if sock.poll(zmq::POLLIN, timeout_ms)? == 0 {
        return Ok(None);
    }
    let frames = sock.recv_multipart(0)?;
    let sizes: Vec<usize> = frames.iter().map(Vec::len).collect();
    Ok(Some(match Message::decode(frames) {
        Ok(m) => Received::Message(m),
        Err(e) => Received::Malformed(e, sizes),
    }))
}

/// A flag set by SIGTERM or SIGINT (and SIGQUIT, which 0.3.13 also handles).
/// Binaries poll it in their loop and shut down in order.
pub fn shutdown_flag() -> std::io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGQUIT,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&flag))?;
    }
    Ok(flag)
}

/// Whether a shutdown signal has arrived.
pub fn shutdown_requested(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked_with_clear_errors() {
        assert!(check_endpoint("tcp://127.0.0.1:47291").is_ok());
        assert!(check_endpoint("tcp://*:1").is_ok());
        assert!(check_endpoint("ipc:///tmp/x").is_ok());
        let e = check_endpoint("127.0.0.1:47291").unwrap_err();
        assert!(e.0.contains("tcp://"), "{e}");
        assert!(check_endpoint("tcp://127.0.0.1:99999").is_err());
        assert!(check_endpoint("tcp://127.0.0.1").is_err());
        assert!(check_endpoint("tcp://:80").is_err());
    }

    #[test]
    fn router_and_dealer_exchange_a_message_and_mandatory_reports_gone_peers() {
        let ctx = zmq::Context::new();
        let router = bind_router(&ctx, "tcp://127.0.0.1:*", &SocketOptions::default()).unwrap();
        let endpoint = router.get_last_endpoint().unwrap().unwrap();
        let dealer = connect_dealer(&ctx, &endpoint, b"peer-1", &SocketOptions::default()).unwrap();
        send_message(&dealer, Message::new(emqp_proto::Command::Ready)).unwrap();
        assert!(router.poll(zmq::POLLIN, 5000).unwrap() > 0);
        let (id, msg) = Message::decode_routed(router.recv_multipart(0).unwrap()).unwrap();
        assert_eq!(id, b"peer-1");
        assert_eq!(msg.command, emqp_proto::Command::Ready);
        let err = send_routed(
            &router,
            b"nobody".to_vec(),
            Message::new(emqp_proto::Command::Kbye),
        );
        assert_eq!(err, Err(zmq::Error::EHOSTUNREACH));
        send_routed(&router, id, Message::new(emqp_proto::Command::Kbye)).unwrap();
        match recv_message(&dealer, 5000).unwrap() {
            Some(Received::Message(m)) => assert_eq!(m.command, emqp_proto::Command::Kbye),
            other => panic!("{other:?}"),
        }
    }
}
