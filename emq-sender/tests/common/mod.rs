//! Shared by the tests that run the real emq-sender binary against a fake
//! ROUTER played by the test on a free loopback port. Every run is bounded;
//! the child is killed on drop.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::process::{Child, Command as Proc, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use emqp_proto::{Command, Message};

const BIN: &str = env!("CARGO_BIN_EXE_emq-sender");
const LIMIT: Duration = Duration::from_secs(30);

/// Kills the child when the test ends, however it ends.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub struct FakeRouter {
    _ctx: zmq::Context,
    pub sock: zmq::Socket,
    pub endpoint: String,
}

impl FakeRouter {
    pub fn new() -> FakeRouter {
        let ctx = zmq::Context::new();
        let sock = emq_transport::bind_router(
            &ctx,
            "tcp://127.0.0.1:*",
            &emq_transport::SocketOptions::default(),
        )
        .unwrap();
        sock.set_linger(0).unwrap();
        let endpoint = sock.get_last_endpoint().unwrap().unwrap();
        FakeRouter {
            _ctx: ctx,
            sock,
            endpoint,
        }
    }

    /// A ROUTER that requires ZMQ PLAIN credentials: a PLAIN server with
    /// the ZAP domain `frontend` and, in its own context, emq_transport's
    /// ZAP handler accepting the `user:password` lines of `users`.
    pub fn with_plain_users(users: &str) -> FakeRouter {
        use emq_transport::zap::{
            parse_plain_users, spawn_zap_handler, AccessPolicy, DomainPolicy,
        };
        let ctx = zmq::Context::new();
        let mut policy = AccessPolicy::default();
        policy.domains.insert(
            "frontend".into(),
            DomainPolicy {
                allow: Vec::new(),
                plain_users: Some(parse_plain_users(users).unwrap()),
                curve_keys: None,
            },
        );
        // the handler must be bound before the socket it guards
        spawn_zap_handler(&ctx, policy.clone()).unwrap();
        let sock = ctx.socket(zmq::ROUTER).unwrap();
        sock.set_linger(0).unwrap();
        sock.set_router_mandatory(true).unwrap();
        policy.apply(&sock, "frontend").unwrap();
        sock.bind("tcp://127.0.0.1:*").unwrap();
        let endpoint = sock.get_last_endpoint().unwrap().unwrap();
        FakeRouter {
            _ctx: ctx,
            sock,
            endpoint,
        }
    }

    pub fn send(&self, identity: &[u8], cmd: Command) {
        emq_transport::send_routed(&self.sock, identity.to_vec(), Message::new(cmd)).unwrap();
    }
}

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    /// Every message the router received, decoded (identity first).
    pub requests: Vec<(Vec<u8>, Message)>,
    /// The same messages as raw frames, identity first.
    pub raw: Vec<Vec<Vec<u8>>>,
}

pub fn reader<R: Read + Send + 'static>(mut r: R) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
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
    let mut raw = Vec::new();
    let code = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > LIMIT {
            break None;
        }
        if let Some(r) = router {
            while r.sock.poll(zmq::POLLIN, 10).unwrap() > 0 {
                let frames = r.sock.recv_multipart(0).unwrap();
                raw.push(frames.clone());
                let (id, msg) = Message::decode_routed(frames).expect("sender sent valid eMQP");
                serve(r, &id, &msg);
                requests.push((id, msg));
            }
        } else {
            thread::sleep(Duration::from_millis(10));
        }
    };
    let elapsed = started.elapsed();
    drop(child);
    Run {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        elapsed,
        requests,
        raw,
    }
}
