//! Core-only throughput: jobs/s through REQUEST → dispatch → REPLY → READY
//! with no sockets, the core's one throughput driver, on the one test
//! driver (`emq_router_core::testing`).
//! `cargo run --release -p emq-router-core --example core_throughput [JOBS]`

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use emq_router_core::testing::{frames, CommitAll, Driver, Effects, Flush};
use emq_router_core::{Action, Batch, BatchResult, Config, Input, Router, SendFailure, Socket};

/// The workers' side: every REQUEST sent to a worker, to answer.
#[derive(Default)]
struct Workers {
    pending: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Effects for Workers {
    fn send(
        &mut self,
        _now: Duration,
        socket: Socket,
        identity: &[u8],
        frames: &[Vec<u8>],
    ) -> Result<(), SendFailure> {
        if socket == Socket::Backend && frames[2] == b"REQUEST" {
            self.pending.push((identity.to_vec(), frames[3].clone()));
        }
        Ok(())
    }

    fn journal(&mut self, now: Duration, batch: &Batch) -> Option<BatchResult> {
        CommitAll.journal(now, batch)
    }
}

/// The router on the test driver, and the workers' side.
struct Bench {
    d: Driver,
    r: Router,
    fx: Workers,
    out: Vec<Action>,
    now: Duration,
}

impl Bench {
    /// One message in (`identity` + the eMQP/1.0 `parts`), its actions
    /// carried out.
    fn feed(&mut self, socket: Socket, identity: &[u8], parts: &[&[u8]]) {
        let frames = frames(identity, parts);
        let input = Input::Frames { socket, frames };
        let Bench { d, r, fx, out, now } = self;
        d.input(r, input, *now, fx, out)
            .expect("invariants are not checked");
    }

    /// The sends are "carried out": held RESULTs count as delivered.
    fn flushed(&mut self) {
        let Bench { d, r, fx, out, now } = self;
        d.flushed(r, *now, fx, out)
            .expect("invariants are not checked");
        out.clear();
    }
}

fn main() {
    let jobs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500_000);
    // Sends are flushed once per batch of inputs, as a driver that reads
    // many messages before it flushes; invariants are for the tests.
    let mut d = Driver::new(Flush::Batched);
    d.check = false;
    let mut b = Bench {
        d,
        r: Router::new(Config::default()),
        fx: Workers::default(),
        out: Vec::new(),
        now: Duration::ZERO,
    };
    for i in 0..8 {
        let w = format!("worker-{i}").into_bytes();
        let inform: &[&[u8]] = &[b"INFORM", b"i", b"", b"worker", b"job-ack"];
        b.feed(Socket::Backend, &w, inform);
        for _ in 0..4 {
            b.feed(Socket::Backend, &w, &[b"READY", b"r"]);
        }
    }
    b.flushed();
    b.fx.pending.clear();
    let payload =
        br#"["call", {"handler": "echo", "args": [1, 2, 3, "some text to make it realistic"]}]"#;
    let start = Instant::now();
    let mut done = 0usize;
    let mut sent = 0usize;
    b.now = Duration::from_micros(1);
    while done < jobs {
        // Submit a batch of 32 (one per slot), then answer all dispatched.
        for _ in 0..32 {
            if sent == jobs {
                break;
            }
            let msgid = format!("job-{sent}");
            sent += 1;
            let request: &[&[u8]] = &[
                b"REQUEST",
                msgid.as_bytes(),
                b"default",
                b"reply-requested",
                payload,
            ];
            b.feed(Socket::Frontend, b"client-1", request);
        }
        b.flushed();
        for (w, msgid) in std::mem::take(&mut b.fx.pending) {
            let reply: &[&[u8]] = &[b"REPLY", b"rp", b"{\"value\": 1}", &msgid, b"ok"];
            b.feed(Socket::Backend, &w, reply);
            b.feed(Socket::Backend, &w, &[b"READY", b"r"]);
            done += 1;
        }
        b.now += Duration::from_micros(10);
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{jobs} jobs in {secs:.3} s: {:.0} jobs/s through the core (incl. building input frames), completed {}",
        jobs as f64 / secs,
        b.r.stats().completed
    );
}
