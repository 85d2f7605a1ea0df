//! Core-only throughput: jobs/s through REQUEST → dispatch → REPLY → READY
//! with no sockets, the core's one throughput driver, on the one test
//! driver (`emq_router_core::testing`).
//! `cargo run --release -p emq-router-core --example core_throughput [JOBS]`

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use emq_router_core::testing::{CommitAll, Driver, Effects, Flush};
use emq_router_core::{Action, Batch, BatchResult, Config, Input, Router, SendFailure, Socket};

fn f(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

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

/// One message in, its actions carried out.
fn feed(
    d: &mut Driver,
    r: &mut Router,
    fx: &mut Workers,
    socket: Socket,
    frames: Vec<Vec<u8>>,
    now: Duration,
    out: &mut Vec<Action>,
) {
    d.input(r, Input::Frames { socket, frames }, now, fx, out)
        .expect("invariants are not checked");
}

fn main() {
    let jobs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500_000);
    let mut r = Router::new(Config::default());
    // Sends are flushed once per batch of inputs, as a driver that reads
    // many messages before it flushes; invariants are for the tests.
    let mut d = Driver::new(Flush::Batched);
    d.check = false;
    let mut fx = Workers::default();
    let mut out: Vec<Action> = Vec::new();
    let workers: Vec<Vec<u8>> = (0..8).map(|i| format!("worker-{i}").into_bytes()).collect();
    for w in &workers {
        let inform = f(&[
            w,
            b"",
            b"eMQP/1.0",
            b"INFORM",
            b"i",
            b"",
            b"worker",
            b"job-ack",
        ]);
        feed(
            &mut d,
            &mut r,
            &mut fx,
            Socket::Backend,
            inform,
            Duration::ZERO,
            &mut out,
        );
        for _ in 0..4 {
            let ready = f(&[w, b"", b"eMQP/1.0", b"READY", b"r"]);
            feed(
                &mut d,
                &mut r,
                &mut fx,
                Socket::Backend,
                ready,
                Duration::ZERO,
                &mut out,
            );
        }
    }
    out.clear();
    let payload =
        br#"["call", {"handler": "echo", "args": [1, 2, 3, "some text to make it realistic"]}]"#;
    let start = Instant::now();
    let mut done = 0usize;
    let mut sent = 0usize;
    let mut now = Duration::from_micros(1);
    while done < jobs {
        // Submit a batch of 32 (one per slot), then answer all dispatched.
        for _ in 0..32 {
            if sent == jobs {
                break;
            }
            let msgid = format!("job-{sent}");
            sent += 1;
            let request = f(&[
                b"client-1",
                b"",
                b"eMQP/1.0",
                b"REQUEST",
                msgid.as_bytes(),
                b"default",
                b"reply-requested",
                payload,
            ]);
            feed(
                &mut d,
                &mut r,
                &mut fx,
                Socket::Frontend,
                request,
                now,
                &mut out,
            );
        }
        // The sends are "carried out": held RESULTs count as delivered.
        d.flushed(&mut r, now, &mut fx, &mut out)
            .expect("invariants are not checked");
        out.clear();
        for (w, msgid) in std::mem::take(&mut fx.pending) {
            let reply = f(&[
                &w,
                b"",
                b"eMQP/1.0",
                b"REPLY",
                b"rp",
                b"{\"value\": 1}",
                &msgid,
                b"ok",
            ]);
            feed(
                &mut d,
                &mut r,
                &mut fx,
                Socket::Backend,
                reply,
                now,
                &mut out,
            );
            let ready = f(&[&w, b"", b"eMQP/1.0", b"READY", b"r"]);
            feed(
                &mut d,
                &mut r,
                &mut fx,
                Socket::Backend,
                ready,
                now,
                &mut out,
            );
            done += 1;
        }
        now += Duration::from_micros(10);
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{jobs} jobs in {secs:.3} s: {:.0} jobs/s through the core (incl. building input frames), completed {}",
        jobs as f64 / secs,
        r.stats().completed
    );
}
