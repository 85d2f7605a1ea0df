//! Pub/sub for the tests: our `emq-pubsub` and EventMQ 0.3.13's on fresh
//! loopback ports, and [`Subscriber`], a plain zmq SUB socket as any
//! subscriber application has.
//!
//! A PUB socket drops what is published before a subscription has reached
//! it (ZeroMQ's slow joiner), and nothing tells a publisher when that has
//! happened. Tests therefore publish until the first message arrives (a
//! bounded loop, see [`publish_until_heard`]) and check exactly what comes
//! after it, never sleep a fixed time.

use std::time::{Duration, Instant};

use emqp_proto::Published;

use crate::bins;
use crate::ports::free_endpoint;
use crate::process::{Proc, Spawn};
use crate::python::PyEnv;

/// How long a pub/sub process gets to bind its sockets.
pub const READY: Duration = Duration::from_secs(20);

/// The two endpoints of a pub/sub process.
#[derive(Debug, Clone)]
pub struct PubsubAddrs {
    /// Where publishers send PUBLISH (ROUTER).
    pub incoming: String,
    /// Where subscribers connect (PUB).
    pub outgoing: String,
}

impl PubsubAddrs {
    pub fn fresh() -> PubsubAddrs {
        PubsubAddrs {
            incoming: free_endpoint(),
            outgoing: free_endpoint(),
        }
    }
}

/// Start a process on fresh ports until it logs `ready_line` (at most three
/// tries, for a port taken meanwhile).
fn start_on_fresh_ports(
    what: &str,
    ready_line: &str,
    spawn: impl Fn(&PubsubAddrs) -> Spawn,
) -> (Proc, PubsubAddrs) {
    let mut last = String::new();
    for _ in 0..3 {
        let addrs = PubsubAddrs::fresh();
        let mut p = spawn(&addrs).spawn();
        match p.wait_for_log_line(ready_line, READY) {
            Ok(_) => return (p, addrs),
            Err(e) => {
                eprintln!("[harness] {what} did not start, retrying on new ports: {e}");
                last = e;
            }
        }
    }
    panic!("{what} did not start: {last}");
}

/// Our `emq-pubsub` with extra flags; ready once it logs that it listens.
pub fn start_pubsub(extra: &[&str]) -> (Proc, PubsubAddrs) {
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    start_on_fresh_ports("emq-pubsub", "listening for PUBLISH on", |a| {
        Spawn::new("emq-pubsub", bins::bin(bins::PUBSUB))
            .args(["--incoming", &a.incoming, "--outgoing", &a.outgoing])
            .args(&extra)
    })
}

/// 0.3.13's `emq-pubsub` (`$venv/bin/emq-pubsub`, configured through
/// `EVENTMQ_PUBLISHER_*`); ready once it logs that it listens.
pub fn start_py_pubsub(py: &PyEnv) -> (Proc, PubsubAddrs) {
    start_on_fresh_ports("0.3.13 emq-pubsub", "Listening for subscribers on", |a| {
        Spawn::new("py-emq-pubsub", py.pubsub_script())
            .env("EVENTMQ_PUBLISHER_INCOMING_ADDR", &a.incoming)
            .env("EVENTMQ_PUBLISHER_OUTGOING_ADDR", &a.outgoing)
            .env("PYTHONUNBUFFERED", "1")
    })
}

/// A plain zmq SUB socket connected to a pub/sub process.
pub struct Subscriber {
    sock: zmq::Socket,
}

impl Subscriber {
    /// Connect to `outgoing`, subscribed to each prefix.
    pub fn connect(outgoing: &str, prefixes: &[&str]) -> Subscriber {
        let sock = crate::zmq_ctx().socket(zmq::SUB).expect("SUB socket");
        sock.set_linger(0).expect("linger");
        for p in prefixes {
            sock.set_subscribe(p.as_bytes()).expect("subscribe");
        }
        sock.connect(outgoing).expect("connect SUB");
        Subscriber { sock }
    }

    /// The next message, waiting at most `timeout`. Panics on a message
    /// that is not two frames.
    pub fn recv(&self, timeout: Duration) -> Option<Published> {
        let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        if self.sock.poll(zmq::POLLIN, ms).expect("poll SUB") == 0 {
            return None;
        }
        let frames = self.sock.recv_multipart(0).expect("recv SUB");
        Some(Published::decode(frames).expect("a published message is two frames"))
    }

    /// Everything received so far, without waiting.
    pub fn drain(&self) -> Vec<Published> {
        std::iter::from_fn(|| self.recv(Duration::ZERO)).collect()
    }
}

/// Call `publish(i)` for i = 0, 1, ... until `heard()` says the
/// subscribers got something, at most `limit` (each round waits up to
/// `step` for it); the number of rounds. Panics when nothing was heard.
pub fn publish_until_heard(
    limit: Duration,
    step: Duration,
    mut publish: impl FnMut(usize),
    mut heard: impl FnMut(Duration) -> bool,
) -> usize {
    let deadline = Instant::now() + limit;
    let mut i = 0;
    loop {
        publish(i);
        i += 1;
        if heard(step) {
            return i;
        }
        assert!(
            Instant::now() < deadline,
            "nothing published in {i} rounds ({limit:?}) reached the subscribers"
        );
    }
}

/// The JSON objects of emq-receiver's stdout (one per line; a last line
/// still being written is left out).
pub fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    let complete = stdout.rfind('\n').map_or("", |end| &stdout[..end]);
    complete
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}
