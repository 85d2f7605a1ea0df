//! What every emq binary does with ZeroMQ, written once: socket setup with
//! the options the protocol needs (and the PLAIN or CURVE client side of a
//! connection), sending and receiving eMQP messages, shutdown signals, and
//! endpoint validation with clear errors. Access control on the router's
//! side is [`zap`]; CURVE keys are [`curve`]; the one client of a
//! router's admin socket is [`admin`].
//!
//! No protocol logic lives here; the cores (router, job manager) are sans-IO
//! and the binaries move frames between these sockets and the cores.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub mod admin;
pub mod curve;
pub mod failover;
pub mod log_limit;
pub mod plain;
pub mod poll;
pub mod zap;

use emqp_proto::{DecodeError, Message};

pub use failover::{
    connect_all, connect_dealer_to, loopback_for_wildcard, parse_endpoints, stop_monitor,
    LinkEvent, LinkWatch, LINK_HEARTBEAT,
};
pub use plain::{plain_credentials, PlainCredentials, Secret, ENV_PASSWORD, ENV_USERNAME};

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
    /// ZMQ PLAIN client credentials `(username, password)`, set by
    /// [`connect_dealer`] before it connects (for a router started with
    /// PLAIN users, see [`zap`]). `None`: the NULL mechanism. Ignored by
    /// [`bind_router`]. `Debug` does not show the password.
    pub plain: Option<PlainCredentials>,
    /// CURVE client keys, set by [`connect_dealer`] before it connects (for
    /// a router socket with authorised keys, see [`zap`] and [`curve`]).
    /// Wins over `plain`. `Debug` does not show the secret key.
    pub curve: Option<curve::CurveClient>,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            hwm: DEFAULT_SOCKET_HWM,
            max_message_size: -1,
            linger_ms: 1000,
            plain: None,
            curve: None,
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
    bind_router_with(ctx, endpoint, opts, |_| Ok(()))
}

/// [`bind_router`] with `configure` run on the socket just before it binds
/// (for settings that must precede bind, e.g. [`zap::AccessPolicy::apply`]).
pub fn bind_router_with(
    ctx: &zmq::Context,
    endpoint: &str,
    opts: &SocketOptions,
    configure: impl FnOnce(&zmq::Socket) -> zmq::Result<()>,
) -> Result<zmq::Socket, Box<dyn std::error::Error + Send + Sync>> {
    check_endpoint(endpoint)?;
    let sock = ctx.socket(zmq::ROUTER)?;
    apply_options(&sock, opts)?;
    sock.set_router_mandatory(true)?;
    configure(&sock)?;
    sock.bind(endpoint)
        .map_err(|e| format!("cannot bind {endpoint}: {e}"))?;
    Ok(sock)
}

/// A DEALER connected to `endpoint` with the given identity (0.3.13 peers
/// use a fresh uuid4 per connection), as a CURVE client when
/// [`SocketOptions::curve`] is set, else as a PLAIN client when
/// [`SocketOptions::plain`] is set.
pub fn connect_dealer(
    ctx: &zmq::Context,
    endpoint: &str,
    identity: &[u8],
    opts: &SocketOptions,
) -> Result<zmq::Socket, Box<dyn std::error::Error + Send + Sync>> {
    connect_dealer_to(ctx, &[endpoint.to_string()], identity, opts)
}

/// Frames up to this size fit in a zmq message itself (libzmq's "very
/// small message" storage): copying them costs no allocation.
const ZMQ_INLINE_MAX: usize = 33;

/// Send `identity` (ROUTER sockets) then `frames` as one multipart
/// message. Small frames are copied into zmq's inline storage, bigger ones
/// handed to zmq as they are (no copy); `flags` is `0` or
/// `zmq::DONTWAIT`. Once the first frame is taken, zmq takes the rest.
pub fn send_frames(
    sock: &zmq::Socket,
    identity: Option<&[u8]>,
    frames: Vec<Vec<u8>>,
    flags: i32,
) -> zmq::Result<()> {
    let n = frames.len();
    if let Some(id) = identity {
        sock.send(id, flags | if n > 0 { zmq::SNDMORE } else { 0 })?;
    }
    for (i, f) in frames.into_iter().enumerate() {
        let flags = flags | if i + 1 < n { zmq::SNDMORE } else { 0 };
        if f.len() <= ZMQ_INLINE_MAX || f.len() != f.capacity() {
            sock.send(&f[..], flags)?;
        } else {
            sock.send(f, flags)?;
        }
    }
    Ok(())
}

/// Receive one multipart message without blocking (`EAGAIN` when none is
/// waiting): every frame is copied out of the reused `msg`, with no
/// `zmq::Message` and no socket option call per frame.
pub fn recv_frames(sock: &zmq::Socket, msg: &mut zmq::Message) -> zmq::Result<Vec<Vec<u8>>> {
    sock.recv(msg, zmq::DONTWAIT)?;
    let mut frames = Vec::with_capacity(8);
    frames.push(msg.to_vec());
    while msg.get_more() {
        sock.recv(msg, 0)?;
        frames.push(msg.to_vec());
    }
    Ok(frames)
}

/// Send a message on a DEALER socket.
pub fn send_message(sock: &zmq::Socket, msg: Message) -> zmq::Result<()> {
    send_frames(sock, None, msg.encode(), 0)
}

/// Send a message on a ROUTER socket to `identity`, without blocking. With
/// ROUTER_MANDATORY an unknown peer gives `Err(EHOSTUNREACH)`.
pub fn send_routed(sock: &zmq::Socket, identity: Vec<u8>, msg: Message) -> zmq::Result<()> {
    send_frames(sock, Some(&identity), msg.encode(), zmq::DONTWAIT)
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

/// Signals as a flag and as a file descriptor that turns readable when one
/// arrives (signal-hook's flag and self-pipe), so that a poll loop can
/// sleep until its next deadline or a signal — no periodic wake-up to look
/// at a flag.
struct SignalPipe {
    flag: Arc<AtomicBool>,
    read: std::os::unix::net::UnixStream,
}

impl SignalPipe {
    fn install(signals: &[i32], flag: Arc<AtomicBool>) -> std::io::Result<SignalPipe> {
        let (read, write) = std::os::unix::net::UnixStream::pair()?;
        read.set_nonblocking(true)?;
        for &sig in signals {
            signal_hook::flag::register(sig, Arc::clone(&flag))?;
            signal_hook::low_level::pipe::register(sig, write.try_clone()?)?;
        }
        Ok(SignalPipe { flag, read })
    }

    /// Empty the pipe, so that it does not keep a poll awake.
    fn drain(&self) {
        use std::io::Read;
        let mut buf = [0u8; 64];
        while matches!((&self.read).read(&mut buf), Ok(n) if n > 0) {}
    }

    fn poll_item(&self) -> zmq::PollItem<'static> {
        use std::os::fd::AsRawFd;
        zmq::PollItem::from_fd(self.read.as_raw_fd(), zmq::POLLIN)
    }
}

/// SIGTERM, SIGINT and SIGQUIT as a flag and as a file descriptor that
/// turns readable when one arrives, so a poll loop can sleep until its
/// next deadline or a signal — no periodic wake-up to look at a flag.
/// [`ShutdownSignal::manual`] makes one that a [`ShutdownTrigger`] sets
/// instead (a loop run on a thread of a test or an embedding program).
pub struct ShutdownSignal(SignalPipe);

/// Sets a [`ShutdownSignal`] made by [`ShutdownSignal::manual`], waking
/// the loop that polls it.
#[derive(Clone)]
pub struct ShutdownTrigger {
    flag: Arc<AtomicBool>,
    write: Arc<std::os::unix::net::UnixStream>,
}

impl ShutdownTrigger {
    /// Ask for the shutdown (the loop wakes and leaves in order).
    pub fn trigger(&self) {
        use std::io::Write;
        self.flag.store(true, Ordering::Relaxed);
        let _ = (&*self.write).write(&[1]);
    }
}

impl ShutdownSignal {
    /// Install the handlers (signal-hook's flag and self-pipe).
    pub fn install() -> std::io::Result<ShutdownSignal> {
        SignalPipe::install(
            &[
                signal_hook::consts::SIGTERM,
                signal_hook::consts::SIGINT,
                signal_hook::consts::SIGQUIT,
            ],
            Arc::new(AtomicBool::new(false)),
        )
        .map(ShutdownSignal)
    }

    /// A shutdown signal no OS signal sets, only the trigger returned
    /// with it.
    pub fn manual() -> std::io::Result<(ShutdownSignal, ShutdownTrigger)> {
        let (read, write) = std::os::unix::net::UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        let flag = Arc::new(AtomicBool::new(false));
        let trigger = ShutdownTrigger {
            flag: Arc::clone(&flag),
            write: Arc::new(write),
        };
        Ok((ShutdownSignal(SignalPipe { flag, read }), trigger))
    }

    /// Whether a signal has arrived (an atomic load; once one has, the
    /// pipe is emptied too, so that it does not keep a poll awake).
    pub fn requested(&self) -> bool {
        if !shutdown_requested(&self.0.flag) {
            return false;
        }
        self.0.drain();
        true
    }

    /// A `zmq::poll` item that is readable once a signal arrived.
    pub fn poll_item(&self) -> zmq::PollItem<'static> {
        self.0.poll_item()
    }
}

/// SIGHUP, the conventional "read your files again", as a flag and a file
/// descriptor (see [`ShutdownSignal`]). Installing it replaces SIGHUP's
/// default action (ending the process).
pub struct ReloadSignal(SignalPipe);

impl ReloadSignal {
    /// Install the handler.
    pub fn install() -> std::io::Result<ReloadSignal> {
        SignalPipe::install(
            &[signal_hook::consts::SIGHUP],
            Arc::new(AtomicBool::new(false)),
        )
        .map(ReloadSignal)
    }

    /// Whether SIGHUP arrived since the last call (the flag is cleared,
    /// the pipe emptied).
    pub fn take(&self) -> bool {
        if !self.0.flag.swap(false, Ordering::Relaxed) {
            return false;
        }
        self.0.drain();
        true
    }

    /// A `zmq::poll` item that is readable once SIGHUP arrived.
    pub fn poll_item(&self) -> zmq::PollItem<'static> {
        self.0.poll_item()
    }
}

/// Whether a shutdown signal has arrived.
pub fn shutdown_requested(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_shutdown_signal_wakes_a_poll_when_triggered() {
        let (signal, trigger) = ShutdownSignal::manual().unwrap();
        let mut items = [signal.poll_item()];
        let short = Some(std::time::Duration::from_millis(1));
        assert_eq!(poll::poll(&mut items, short).unwrap(), 0);
        assert!(!signal.requested());
        let t = trigger.clone();
        let th = std::thread::spawn(move || t.trigger());
        assert_eq!(poll::poll(&mut items, None).unwrap(), 1);
        th.join().unwrap();
        assert!(signal.requested());
        // Emptied: a poll does not stay awake on it.
        let mut items = [signal.poll_item()];
        assert_eq!(poll::poll(&mut items, short).unwrap(), 0);
    }

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
    fn frames_of_every_size_cross_intact_and_recv_reports_eagain_when_empty() {
        let ctx = zmq::Context::new();
        let router = bind_router(&ctx, "inproc://frames", &SocketOptions::default()).unwrap();
        let dealer =
            connect_dealer(&ctx, "inproc://frames", b"d", &SocketOptions::default()).unwrap();
        let mut msg = zmq::Message::new();
        assert_eq!(recv_frames(&router, &mut msg), Err(zmq::Error::EAGAIN));
        let mut spare = Vec::with_capacity(100);
        spare.extend_from_slice(b"capacity above length");
        let frames = vec![
            Vec::new(),
            b"small".to_vec(),
            vec![7u8; ZMQ_INLINE_MAX],
            vec![8u8; ZMQ_INLINE_MAX + 1],
            vec![9u8; 100_000],
            spare,
        ];
        send_frames(&dealer, None, frames.clone(), 0).unwrap();
        assert!(router.poll(zmq::POLLIN, 5000).unwrap() > 0);
        let got = recv_frames(&router, &mut msg).unwrap();
        assert_eq!(got[0], b"d");
        assert_eq!(&got[1..], &frames[..]);
        // And back through the ROUTER, identity first.
        send_frames(&router, Some(b"d"), frames.clone(), zmq::DONTWAIT).unwrap();
        assert!(dealer.poll(zmq::POLLIN, 5000).unwrap() > 0);
        assert_eq!(recv_frames(&dealer, &mut msg).unwrap(), frames);
        assert_eq!(recv_frames(&dealer, &mut msg), Err(zmq::Error::EAGAIN));
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

    #[test]
    fn debug_output_hides_the_password() {
        let opts = SocketOptions {
            plain: Some(PlainCredentials::new("user", "s3cret")),
            ..SocketOptions::default()
        };
        let text = format!("{opts:?}");
        assert!(text.contains("user") && !text.contains("s3cret"), "{text}");
    }

    #[test]
    fn a_plain_router_with_a_zap_handler_accepts_only_the_right_credentials() {
        use crate::zap::{parse_plain_users, spawn_zap_handler, AccessPolicy, DomainPolicy};
        let ctx = zmq::Context::new();
        let mut policy = AccessPolicy::default();
        policy.domains.insert(
            "frontend".into(),
            DomainPolicy {
                allow: Vec::new(),
                plain_users: Some(parse_plain_users("alice:pw1\n").unwrap()),
                curve_keys: None,
            },
        );
        // the handler must be bound before the socket it guards
        let _zap = spawn_zap_handler(&ctx, policy.clone()).unwrap();
        let quiet = SocketOptions {
            linger_ms: 0,
            ..SocketOptions::default()
        };
        let router = ctx.socket(zmq::ROUTER).unwrap();
        router.set_linger(0).unwrap();
        policy.apply(&router, "frontend").unwrap();
        router.bind("tcp://127.0.0.1:*").unwrap();
        let endpoint = router.get_last_endpoint().unwrap().unwrap();
        let dealer = |id: &[u8], plain: Option<(&str, &str)>| {
            let opts = SocketOptions {
                plain: plain.map(|(u, p)| PlainCredentials::new(u, p)),
                ..quiet.clone()
            };
            let d = connect_dealer(&ctx, &endpoint, id, &opts).unwrap();
            send_message(&d, Message::new(emqp_proto::Command::Ready)).unwrap();
            d
        };
        let wrong = dealer(b"wrong", Some(("alice", "nope")));
        let unknown = dealer(b"unknown", Some(("bob", "pw1")));
        let null = dealer(b"null", None);
        let good = dealer(b"good", Some(("alice", "pw1")));
        assert!(router.poll(zmq::POLLIN, 5000).unwrap() > 0);
        let (id, msg) = Message::decode_routed(router.recv_multipart(0).unwrap()).unwrap();
        assert_eq!(id, b"good");
        assert_eq!(msg.command, emqp_proto::Command::Ready);
        assert_eq!(
            router.poll(zmq::POLLIN, 300).unwrap(),
            0,
            "only the peer with the right credentials gets through"
        );
        // and the accepted connection works both ways
        send_routed(&router, id, Message::new(emqp_proto::Command::Kbye)).unwrap();
        match recv_message(&good, 5000).unwrap() {
            Some(Received::Message(m)) => assert_eq!(m.command, emqp_proto::Command::Kbye),
            other => panic!("{other:?}"),
        }
        drop((wrong, unknown, null, good, router));
    }
}
