//! A loopback TCP relay that a test can cut: a process connects to the
//! relay's port instead of its server's; [`Relay::cut`] closes every
//! relayed connection and drops every new one (a network partition
//! between that process and the server, as the process sees it), and
//! [`Relay::heal`] lets connections through again.

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
    /// Both ends of every relayed connection, to cut them.
    conns: Mutex<Vec<TcpStream>>,
}

/// A relay from `127.0.0.1:port()` to a target; stopped on drop.
pub struct Relay {
    port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
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
                std::thread::spawn(move || pipe(client, s2));
                std::thread::spawn(move || pipe(server, c2));
            }
        });
        Relay {
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

    /// Relay new connections again.
    pub fn heal(&self) {
        self.shared.open.store(true, Ordering::SeqCst);
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
