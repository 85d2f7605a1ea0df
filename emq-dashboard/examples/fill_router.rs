//! Buffer many jobs in a router quickly, to measure the dashboard under
//! load: a pipelined DEALER that keeps `WINDOW` REQUESTs unacknowledged.
//!
//! ```text
//! emq-router --journal none --hwm 2000000 --http 127.0.0.1:9464 &
//! cargo run --release -p emq-dashboard --example fill_router -- tcp://127.0.0.1:47291 1000000
//! ```
//!
//! Every 100th job's payload carries a tag `needle-N` to search for; the
//! msgid of the last job is printed.

#![forbid(unsafe_code)]

use std::time::Instant;

use emqp_proto::{Command, Headers, Message, Request};

const WINDOW: usize = 5000;

fn main() {
    let mut args = std::env::args().skip(1);
    let endpoint = args
        .next()
        .unwrap_or_else(|| "tcp://127.0.0.1:47291".to_string());
    let total: usize = args
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let ctx = zmq::Context::new();
    let sock = ctx.socket(zmq::DEALER).expect("socket");
    sock.set_sndhwm(0).expect("sndhwm");
    sock.set_rcvhwm(0).expect("rcvhwm");
    sock.set_linger(1000).expect("linger");
    sock.connect(&endpoint).expect("connect");
    let start = Instant::now();
    let (mut sent, mut acked, mut rejected) = (0usize, 0usize, 0usize);
    let mut last = String::new();
    while acked + rejected < total {
        while sent < total && sent - acked - rejected < WINDOW {
            let tag = if sent % 100 == 0 {
                format!(" needle-{sent}")
            } else {
                String::new()
            };
            let payload = format!(
                r#"["shell", {{"argv": ["echo", "order {sent} for customer {}{tag}"]}}]"#,
                sent % 9973
            );
            let msg = Message::new(Command::Request(Request {
                queue: if sent % 4 == 0 { "email" } else { "default" }.to_string(),
                headers: Headers::new(),
                message: payload.into_bytes(),
            }));
            last = msg.msgid.clone();
            sock.send_multipart(msg.encode(), 0).expect("send");
            sent += 1;
        }
        let frames = sock.recv_multipart(0).expect("receive");
        match Message::decode(frames).map(|m| m.command) {
            Ok(Command::Reply(_)) => acked += 1,
            Ok(Command::Reject(r)) => {
                if rejected == 0 {
                    eprintln!("first reject: {:?} {}", r.reason, r.text);
                }
                rejected += 1;
            }
            _ => {}
        }
        if (acked + rejected) % 100_000 == 0 {
            eprintln!(
                "{} answered in {:.1} s",
                acked + rejected,
                start.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "{acked} accepted, {rejected} rejected in {:.1} s; last msgid {last}",
        start.elapsed().as_secs_f64()
    );
}
