//! A TCP relay that records every byte it forwards: put it between a
//! client and a router socket, and the test can look at what crossed the
//! wire (the CURVE tests check that job payloads and results are not
//! there in clear text — and are, without CURVE).
//!
//! The relay listens on a fresh loopback port; each accepted connection
//! gets a connection to the upstream endpoint and two copying threads.
//! Everything read in either direction is appended to one shared buffer.
//! Dropping the relay stops accepting and shuts every connection down.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A recording TCP relay (see the module docs).
pub struct Relay {
    /// `tcp://127.0.0.1:PORT`: connect here instead of upstream.
    pub endpoint: String,
    recorded: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<JoinHandle<()>>,
}

impl Relay {
    /// Relay to `upstream` (`tcp://HOST:PORT`).
    pub fn start(upstream: &str) -> Relay {
        let target = upstream
            .strip_prefix("tcp://")
            .expect("a tcp:// endpoint")
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("relay bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let endpoint = format!("tcp://{}", listener.local_addr().expect("addr"));
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::new(Mutex::new(Vec::new()));
        let accept = {
            let (recorded, stop, streams) = (recorded.clone(), stop.clone(), streams.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let client = match listener.accept() {
                        Ok((s, _)) => s,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        }
                        Err(_) => return,
                    };
                    let _ = client.set_nonblocking(false);
                    let Ok(server) = TcpStream::connect(&target) else {
                        continue;
                    };
                    for s in [&client, &server] {
                        if let Ok(c) = s.try_clone() {
                            streams.lock().unwrap().push(c);
                        }
                    }
                    for (from, to) in [(&client, &server), (&server, &client)] {
                        let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
                            continue;
                        };
                        let recorded = recorded.clone();
                        std::thread::spawn(move || {
                            let mut buf = [0u8; 16 * 1024];
                            loop {
                                match from.read(&mut buf) {
                                    Ok(0) | Err(_) => break,
                                    Ok(n) => {
                                        recorded.lock().unwrap().extend_from_slice(&buf[..n]);
                                        if to.write_all(&buf[..n]).is_err() {
                                            break;
                                        }
                                    }
                                }
                            }
                            let _ = to.shutdown(Shutdown::Write);
                        });
                    }
                }
            })
        };
        Relay {
            endpoint,
            recorded,
            stop,
            streams,
            accept: Some(accept),
        }
    }

    /// How many bytes went through so far, both directions.
    pub fn len(&self) -> usize {
        self.recorded.lock().unwrap().len()
    }

    /// Whether nothing went through yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `needle` appears in the recorded bytes.
    pub fn saw(&self, needle: &[u8]) -> bool {
        let rec = self.recorded.lock().unwrap();
        !needle.is_empty() && rec.windows(needle.len()).any(|w| w == needle)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for s in self.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_cross_the_relay_and_are_recorded() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = upstream.local_addr().unwrap();
        let echo = std::thread::spawn(move || {
            let (mut s, _) = upstream.accept().unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).unwrap();
            s.write_all(b"pong:").unwrap();
            s.write_all(&buf).unwrap();
        });
        let relay = Relay::start(&format!("tcp://{addr}"));
        let mut c = TcpStream::connect(relay.endpoint.strip_prefix("tcp://").unwrap()).unwrap();
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
