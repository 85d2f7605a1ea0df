//! What the timers cost with many workers: `poll_timeout` and a
//! `handle_timeout` with nothing due, per call, for 10 to 10,000
//! registered workers, each heard from at its own time.
//! `cargo run --release -p emq-router-core --example timer_cost`

#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use emq_router_core::testing::{frames, CommitAll, Driver, Flush};
use emq_router_core::{Action, Config, Input, Router, Socket};

/// A router with `workers` registered, on the test driver (invariants
/// unchecked: the check is O(workers) per call).
fn router_with(workers: usize) -> (Router, Duration) {
    let mut r = Router::new(Config::default());
    let mut d = Driver::new(Flush::AfterActions);
    d.check = false;
    let mut out: Vec<Action> = Vec::new();
    let mut now = Duration::from_micros(1);
    for i in 0..workers {
        let inform: &[&[u8]] = &[b"INFORM", b"i", b"", b"worker", b"job-ack"];
        let frames = frames(format!("worker-{i}").as_bytes(), inform);
        let input = Input::Frames {
            socket: Socket::Backend,
            frames,
        };
        d.input(&mut r, input, now, &mut CommitAll, &mut out)
            .expect("invariants are not checked");
        now += Duration::from_micros(10);
    }
    d.timeout(&mut r, now, &mut CommitAll, &mut out)
        .expect("invariants are not checked");
    (r, now)
}

fn main() {
    for workers in [10, 1_000, 10_000] {
        let (mut r, now) = router_with(workers);
        let calls = 200_000u32;
        let t = Instant::now();
        for _ in 0..calls {
            black_box(r.poll_timeout());
        }
        let poll = t.elapsed() / calls;
        let mut out: Vec<Action> = Vec::new();
        let t = Instant::now();
        for _ in 0..calls {
            r.handle_timeout(black_box(now), &mut out);
        }
        let timeout = t.elapsed() / calls;
        assert!(out.is_empty(), "nothing was due");
        println!(
            "{workers:>6} workers: poll_timeout {:>8} ns, handle_timeout (nothing due) {:>8} ns",
            poll.as_nanos(),
            timeout.as_nanos()
        );
    }
}
