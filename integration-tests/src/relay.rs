//! A loopback TCP relay that a test can cut: a process connects to the
//! relay's port instead of its server's; [`Relay::cut`] closes every
//! relayed connection and drops every new one (a network partition
//! between that process and the server, as the process sees it), and
//! [`Relay::heal`] lets connections through again. Every byte it forwards,
//! in either direction, is also recorded: [`Relay::saw`] tells whether some
//! bytes crossed the wire in clear (the CURVE tests check that payloads and
//! results do not, and do without CURVE). [`Relay::mute_answers`] drops
//! what the server sends while the client's bytes still reach it: a
//! request (a COMMIT) is carried out and its answer lost.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::ports::free_port;

#[derive(Default)]
struct Shared {
    /// Connections are relayed (not cut).
    open: AtomicBool,
    stop: AtomicBool,
    /// The server's bytes are dropped (not forwarded to the client).
    mute: AtomicBool,
    /// Both ends of every relayed connection, to cut them.
    conns: Mutex<Vec<TcpStream>>,
    /// Everything forwarded so far, both directions.
    recorded: Mutex<Vec<u8>>,
}

/// A relay from `127.0.0.1:port()` to a target; stopped on drop.
pub struct Relay {
    /// `tcp://127.0.0.1:PORT`: connect here instead of to the target.
    pub endpoint: String,
    port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// Forward `from` to `to`; `answers`: the server → client direction
/// (dropped while muted).
fn pipe(mut from: TcpStream, mut to: TcpStream, shared: &Shared, answers: bool) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) if answers && shared.mute.load(Ordering::SeqCst) => {}
            Ok(n) => {
                shared
                    .recorded
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&buf[..n]);
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

impl Relay {
    /// Relay a free loopback port to a `tcp://HOST:PORT` endpoint.
    pub fn to_endpoint(upstream: &str) -> Relay {
        let target = upstream
            .strip_prefix("tcp://")
            .and_then(|a| std::net::ToSocketAddrs::to_socket_addrs(a).ok())
            .and_then(|mut a| a.next())
            .unwrap_or_else(|| panic!("not a tcp://HOST:PORT endpoint: {upstream}"));
        Relay::start(target)
    }

    /// Relay a free loopback port to `target`.
    pub fn start(target: SocketAddr) -> Relay {
        let port = free_port();
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the relay");
        let shared = Arc::new(Shared::default());
        shared.open.store(true, Ordering::SeqCst);
        let s = Arc::clone(&shared);
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = conn else { continue };
                if !s.open.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(target) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                {
                    let mut conns = s.conns.lock().unwrap_or_else(|e| e.into_inner());
                    if let (Ok(a), Ok(b)) = (client.try_clone(), server.try_clone()) {
                        conns.push(a);
                        conns.push(b);
                    }
                }
                let (a, b) = (Arc::clone(&s), Arc::clone(&s));
                std::thread::spawn(move || pipe(client, s2, &a, false));
                std::thread::spawn(move || pipe(server, c2, &b, true));
            }
        });
        Relay {
            endpoint: format!("tcp://127.0.0.1:{port}"),
            port,
            shared,
            accept: Some(accept),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Close every relayed connection and drop new ones until
    /// [`Relay::heal`].
    pub fn cut(&self) {
        self.shared.open.store(false, Ordering::SeqCst);
        let mut conns = self.shared.conns.lock().unwrap_or_else(|e| e.into_inner());
        for c in conns.drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Relay new connections again (and the server's answers).
    pub fn heal(&self) {
        self.shared.mute.store(false, Ordering::SeqCst);
        self.shared.open.store(true, Ordering::SeqCst);
    }

    /// Drop every byte the server sends from now on (until
    /// [`Relay::heal`]); the client's bytes still go through.
    pub fn mute_answers(&self) {
        self.shared.mute.store(true, Ordering::SeqCst);
    }

    /// How many bytes went through so far, both directions.
    pub fn len(&self) -> usize {
        self.recorded().len()
    }

    /// Whether nothing went through yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `needle` appears in the bytes that went through.
    pub fn saw(&self, needle: &[u8]) -> bool {
        let rec = self.recorded();
        !needle.is_empty() && rec.windows(needle.len()).any(|w| w == needle)
    }

    fn recorded(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.shared
            .recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_cross_the_relay_and_are_recorded() {
        let upstream = TcpListener::bind(("127.0.0.1", free_port())).unwrap();
        let addr = upstream.local_addr().unwrap();
        let echo = std::thread::spawn(move || {
            let (mut s, _) = upstream.accept().unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).unwrap();
            s.write_all(b"pong:").unwrap();
            s.write_all(&buf).unwrap();
        });
        let relay = Relay::to_endpoint(&format!("tcp://{addr}"));
        let mut c = TcpStream::connect(("127.0.0.1", relay.port())).unwrap();
        c.write_all(b"hello").unwrap();
        let mut back = [0u8; 10];
        c.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"pong:hello");
        echo.join().unwrap();
        assert!(relay.saw(b"hello") && relay.saw(b"pong:"));
        assert!(!relay.saw(b"absent"));
        assert_eq!(relay.len(), 15);
    }
}
