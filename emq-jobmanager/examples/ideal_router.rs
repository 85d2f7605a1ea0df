//! Load generator for the job manager alone: an "ideal router" (a bare
//! ROUTER socket on 127.0.0.1) that answers the INFORM and sends a
//! `["call", {"handler": "noop"}]` REQUEST (reply-requested) for every
//! READY, as fast as READYs arrive. It measures what the job manager costs
//! without the real router in the way: jobs/s, CPU µs per job of the job
//! manager process, and the one-at-a-time round trip.
//!
//! ```sh
//! cargo build --release -p emq-jobmanager --examples
//! target/release/examples/ideal_router [--bin target/release/emq-jobmanager] \
//!     [--jobs 200000] [--single 2000] [--concurrency 8] [--runs 3]
//! ```

#![forbid(unsafe_code)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use emqp_proto::{Command as Cmd, Headers, Message, Request};

struct Args {
    bin: String,
    jobs: usize,
    single: usize,
    concurrency: usize,
    runs: usize,
}

fn args() -> Args {
    let mut a = Args {
        bin: "target/release/emq-jobmanager".into(),
        jobs: 200_000,
        single: 2000,
        concurrency: 8,
        runs: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--bin" => a.bin = val(),
            "--jobs" => a.jobs = val().parse().expect("--jobs N"),
            "--single" => a.single = val().parse().expect("--single N"),
            "--concurrency" => a.concurrency = val().parse().expect("--concurrency N"),
            "--runs" => a.runs = val().parse().expect("--runs N"),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// The job manager; killed on drop.
struct Jm(Child);

impl Drop for Jm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// user + system CPU time of process `pid` (all threads).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 (1-based), i.e. 11 and 12 after ')'.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    let hz = emq_process::clock_ticks_per_second();
    Duration::from_micros(ticks * 1_000_000 / hz)
}

/// Context switches (voluntary + involuntary) of every thread of `pid`.
fn switches(pid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    dir.flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|st| {
            st.lines()
                .filter(|l| l.contains("ctxt_switches"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

struct Bench {
    sock: zmq::Socket,
    id: Vec<u8>,
    credits: usize,
    request: Request,
    next_msgid: u64,
    replies: usize,
}

impl Bench {
    fn send_job(&mut self) {
        self.next_msgid += 1;
        let m = Message::with_msgid(
            format!("job-{}", self.next_msgid),
            Cmd::Request(self.request.clone()),
        );
        self.sock
            .send_multipart(m.encode_routed(self.id.clone()), 0)
            .expect("send REQUEST");
        self.credits -= 1;
    }

    /// Handle everything that arrived within `timeout_ms`.
    fn pump(&mut self, timeout_ms: i64) {
        if self.sock.poll(zmq::POLLIN, timeout_ms).expect("poll") == 0 {
            return;
        }
        while let Ok(frames) = self.sock.recv_multipart(zmq::DONTWAIT) {
            let Ok((_, m)) = Message::decode_routed(frames) else {
                panic!("bad message from the job manager");
            };
            match m.command {
                Cmd::Ready => self.credits += 1,
                Cmd::Reply(_) => self.replies += 1,
                Cmd::Heartbeat { .. } => {
                    let hb = Message::new(Cmd::Heartbeat {
                        timestamp: Some("1.0".into()),
                    });
                    let _ = self
                        .sock
                        .send_multipart(hb.encode_routed(self.id.clone()), 0);
                }
                _ => {}
            }
        }
    }

    /// `n` jobs, pipelined up to the READYs offered; returns jobs/s.
    fn pipelined(&mut self, n: usize) -> f64 {
        let target = self.replies + n;
        let mut sent = 0;
        let t = Instant::now();
        while self.replies < target {
            while self.credits > 0 && sent < n {
                self.send_job();
                sent += 1;
            }
            self.pump(1000);
            assert!(t.elapsed() < Duration::from_secs(120), "stalled");
        }
        n as f64 / t.elapsed().as_secs_f64()
    }

    /// `n` jobs one at a time; sorted round trips in µs.
    fn single(&mut self, n: usize) -> Vec<f64> {
        let mut lat = Vec::with_capacity(n);
        for _ in 0..n {
            let t0 = Instant::now();
            while self.credits == 0 {
                self.pump(1000);
                assert!(t0.elapsed() < Duration::from_secs(10), "no READY");
            }
            let target = self.replies + 1;
            let t = Instant::now();
            self.send_job();
            while self.replies < target {
                self.pump(1000);
                assert!(t.elapsed() < Duration::from_secs(10), "no REPLY");
            }
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
        lat.sort_by(|a, b| a.total_cmp(b));
        lat
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let a = args();
    let ctx = zmq::Context::new();
    let sock = ctx.socket(zmq::ROUTER).expect("socket");
    sock.set_linger(0).unwrap();
    sock.set_sndhwm(0).unwrap();
    sock.set_rcvhwm(0).unwrap();
    sock.bind("tcp://127.0.0.1:*").expect("bind");
    let endpoint = sock.get_last_endpoint().unwrap().unwrap();
    let child = Command::new(&a.bin)
        .args([
            "--broker",
            &endpoint,
            "--concurrency",
            &a.concurrency.to_string(),
        ])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", a.bin));
    let jm = Jm(child);
    let pid = jm.0.id();

    // INFORM -> ACK.
    assert!(sock.poll(zmq::POLLIN, 10_000).unwrap() > 0, "no INFORM");
    let (id, m) = Message::decode_routed(sock.recv_multipart(0).unwrap()).unwrap();
    assert!(matches!(m.command, Cmd::Inform(_)), "{m:?}");
    let ack = Message::new(Cmd::Ack {
        acked_msgid: m.msgid,
        features: vec![],
    });
    sock.send_multipart(ack.encode_routed(id.clone()), 0)
        .unwrap();

    let mut b = Bench {
        sock,
        id,
        credits: 0,
        request: Request {
            queue: "default".into(),
            headers: Headers::parse(b"reply-requested").unwrap(),
            message: br#"["call", {"handler": "noop", "args": null}]"#.to_vec(),
        },
        next_msgid: 0,
        replies: 0,
    };
    b.pipelined(2000); // warm-up

    let (mut rates, mut cpus, mut sws, mut p50s, mut p99s) =
        (vec![], vec![], vec![], vec![], vec![]);
    for run in 1..=a.runs {
        let (c0, s0) = (cpu_time(pid), switches(pid));
        let rate = b.pipelined(a.jobs);
        let cpu = (cpu_time(pid) - c0).as_secs_f64() * 1e6 / a.jobs as f64;
        let sw = (switches(pid) - s0) as f64 / a.jobs as f64;
        let lat = b.single(a.single);
        let (p50, p99) = (pct(&lat, 0.5), pct(&lat, 0.99));
        let max = lat.last().copied().unwrap_or(f64::NAN);
        eprintln!(
            "run {run}: {rate:.0} jobs/s, job manager {cpu:.1} CPU us/job, {sw:.2} context switches/job; single p50 {p50:.0} us p99 {p99:.0} us max {max:.0} us"
        );
        rates.push(rate);
        cpus.push(cpu);
        sws.push(sw);
        p50s.push(p50);
        p99s.push(p99);
    }
    println!(
        "concurrency {}: median of {} runs: {:.0} jobs/s, {:.1} CPU us/job, {:.2} switches/job, single p50 {:.0} us, p99 {:.0} us",
        a.concurrency,
        a.runs,
        median(rates),
        median(cpus),
        median(sws),
        median(p50s),
        median(p99s)
    );
}
