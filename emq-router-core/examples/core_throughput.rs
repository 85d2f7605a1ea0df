//! Core-only throughput: jobs/s through REQUEST → dispatch → REPLY → READY
//! with no sockets, the core's one throughput driver.
//! `cargo run --release -p emq-router-core --example core_throughput [JOBS]`

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use emq_router_core::{Action, Config, Input, Router, Socket};

fn f(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn main() {
    let jobs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500_000);
    let mut r = Router::new(Config::default());
    let mut out: Vec<Action> = Vec::new();
    let workers: Vec<Vec<u8>> = (0..8).map(|i| format!("worker-{i}").into_bytes()).collect();
    for w in &workers {
        r.handle(
            Input::Frames {
                socket: Socket::Backend,
                frames: f(&[
                    w,
                    b"",
                    b"eMQP/1.0",
                    b"INFORM",
                    b"i",
                    b"",
                    b"worker",
                    b"job-ack",
                ]),
            },
            Duration::ZERO,
            &mut out,
        );
        for _ in 0..4 {
            r.handle(
                Input::Frames {
                    socket: Socket::Backend,
                    frames: f(&[w, b"", b"eMQP/1.0", b"READY", b"r"]),
                },
                Duration::ZERO,
                &mut out,
            );
        }
    }
    out.clear();
    let payload =
        br#"["call", {"handler": "echo", "args": [1, 2, 3, "some text to make it realistic"]}]"#;
    let start = Instant::now();
    let mut pending: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
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
            r.handle(
                Input::Frames {
                    socket: Socket::Frontend,
                    frames: f(&[
                        b"client-1",
                        b"",
                        b"eMQP/1.0",
                        b"REQUEST",
                        msgid.as_bytes(),
                        b"default",
                        b"reply-requested",
                        payload,
                    ]),
                },
                now,
                &mut out,
            );
        }
        // The sends are "carried out": held RESULTs count as delivered.
        r.handle(Input::Flushed, now, &mut out);
        for a in out.drain(..) {
            if let Action::Send {
                socket: Socket::Backend,
                identity,
                frames,
            } = a
            {
                if frames[2] == b"REQUEST" {
                    pending.push((identity, frames[3].clone()));
                }
            }
        }
        for (w, msgid) in pending.drain(..) {
            r.handle(
                Input::Frames {
                    socket: Socket::Backend,
                    frames: f(&[
                        &w,
                        b"",
                        b"eMQP/1.0",
                        b"REPLY",
                        b"rp",
                        b"{\"value\": 1}",
                        &msgid,
                        b"ok",
                    ]),
                },
                now,
                &mut out,
            );
            r.handle(
                Input::Frames {
                    socket: Socket::Backend,
                    frames: f(&[&w, b"", b"eMQP/1.0", b"READY", b"r"]),
                },
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
