//! Shared by the tests that run the real emq-sender binary against a fake
//! ROUTER (emq-testkit's) played by the test on a free loopback port. Every run is bounded;
//! the child is killed on drop.
#![allow(dead_code)]

use std::io::Write;
use std::process::{Command as Proc, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use emqp_proto::{Command, Message};

const BIN: &str = env!("CARGO_BIN_EXE_emq-sender");
const LIMIT: Duration = Duration::from_secs(30);

pub use emq_testkit::lines::reader;
pub use emq_testkit::{ChildGuard as Guard, FakeRouter};

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    /// Every message the router received but RECEIVED, decoded (identity
    /// first).
    pub requests: Vec<(Vec<u8>, Message)>,
    /// The msgids of the RESULTs the sender confirmed with RECEIVED.
    pub received: Vec<String>,
    /// The same messages as raw frames, identity first.
    pub raw: Vec<Vec<Vec<u8>>>,
}

impl Run {
    /// Assert that the sender exited with `code`, quickly (in under 5 s),
    /// saying every one of `parts` on stderr.
    pub fn says_at_once(&self, code: i32, parts: &[&str]) {
        assert_eq!(self.code, Some(code), "stderr: {}", self.stderr);
        for p in parts {
            assert!(self.stderr.contains(p), "{p:?} not in: {}", self.stderr);
        }
        assert!(self.elapsed < Duration::from_secs(5), "{:?}", self.elapsed);
    }
}

/// Run emq-sender with `args` (plus `--broker` of the fake router, when
/// given) and serve the router with `serve` until the sender exits.
pub fn run_sender(
    router: Option<&FakeRouter>,
    args: &[&str],
    stdin: Option<String>,
    serve: impl FnMut(&FakeRouter, &[u8], &Message),
) -> Run {
    run_sender_env(router, true, &[], args, stdin, serve)
}

/// [`run_sender`] with control over `--broker` and the environment.
pub fn run_sender_env(
    router: Option<&FakeRouter>,
    broker_flag: bool,
    env: &[(&str, &str)],
    args: &[&str],
    stdin: Option<String>,
    mut serve: impl FnMut(&FakeRouter, &[u8], &Message),
) -> Run {
    let mut cmd = Proc::new(BIN);
    if let (Some(r), true) = (router, broker_flag) {
        cmd.arg("--broker").arg(&r.endpoint);
    }
    cmd.env_remove("EMQ_BROKER_ADDR")
        .env_remove("EVENTMQ_FRONTEND_ADDR")
        .env_remove("EVENTMQ_PUBLISHER_INCOMING_ADDR")
        .env_remove("EMQ_USERNAME")
        .env_remove("EMQ_PASSWORD");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = Guard(cmd.spawn().expect("spawn emq-sender"));
    let out = reader(child.0.stdout.take().unwrap());
    let err = reader(child.0.stderr.take().unwrap());
    if let Some(text) = stdin {
        let mut w = child.0.stdin.take().unwrap();
        thread::spawn(move || {
            let _ = w.write_all(text.as_bytes());
        });
    }
    let mut requests = Vec::new();
    let mut received = Vec::new();
    let mut raw = Vec::new();
    let code = match router {
        // Nothing to serve: wait for the exit.
        None => child.wait_exit(LIMIT),
        Some(r) => loop {
            if let Some(status) = child.0.try_wait().unwrap() {
                break status.code();
            }
            if started.elapsed() > LIMIT {
                break None;
            }
            while r.sock.poll(zmq::POLLIN, 10).unwrap() > 0 {
                let frames = r.sock.recv_multipart(0).unwrap();
                raw.push(frames.clone());
                let (id, msg) = Message::decode_routed(frames).expect("sender sent valid eMQP");
                if let Command::Received { orig_msgids } = &msg.command {
                    received.extend(orig_msgids.iter().cloned());
                    continue;
                }
                serve(r, &id, &msg);
                requests.push((id, msg));
            }
        },
    };
    let elapsed = started.elapsed();
    drop(child);
    Run {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        elapsed,
        requests,
        received,
        raw,
    }
}
