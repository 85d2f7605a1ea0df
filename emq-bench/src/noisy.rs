//! Flow control under load (issue 27), against the real router (release
//! build, `--journal none`) and a bench worker in a thread:
//!
//! - **Noisy neighbour.** Key A floods `flood` jobs at once; then key B
//!   submits one job every `interval`. The worker has `slots` slots and
//!   takes `service` per job (timed, not slept: it answers when the time
//!   is up), so A's backlog lasts flood × service / slots. Measured: B's
//!   submit → start (the worker received it) p50 / p99, with `fair` and
//!   without (a policy `concurrency=slots[,fair]` on `default`).
//! - **Dispatch throughput.** `flood` jobs at once through an instant
//!   worker (answers at once), from the first send until the worker
//!   received the last: plain jobs (FIFO path), jobs over 100 keys with no
//!   policy (the flow-controlled path: priorities and keys), and the same
//!   with `concurrency-per-key=4,fair` (limits on).
//!
//! Figures are reported, never asserted.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use emq_transport::SocketOptions;
use emqp_proto::command::FEATURE_JOB_ACK;
use emqp_proto::{Command, Inform, Message, PeerType, QueueSpec, PROTOCOL_VERSION};
use serde_json::{json, Value};

use crate::client::{send_parts, Frames};
use crate::procs::{free_ports, wait_listening, ChildGuard};
use crate::stats::percentile;

/// What the phase runs.
#[derive(Debug, Clone)]
pub struct NoisyConfig {
    pub router_bin: PathBuf,
    pub dir: PathBuf,
    /// Key A's jobs, all at once.
    pub flood: usize,
    /// Key B's jobs, one every `interval`.
    pub b_jobs: usize,
    pub interval: Duration,
    pub slots: usize,
    pub service: Duration,
    pub timeout: Duration,
}

/// B's submit → start latency, microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoisyFigures {
    pub b_p50_us: u64,
    pub b_p99_us: u64,
    pub b_jobs: usize,
}

/// One throughput run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throughput {
    pub jobs: usize,
    pub secs: f64,
}

impl Throughput {
    pub fn rate(&self) -> f64 {
        self.jobs as f64 / self.secs.max(1e-9)
    }
}

struct Router {
    guard: ChildGuard,
    frontend: String,
    backend: String,
}

fn start_router(
    cfg: &NoisyConfig,
    label: &str,
    limit: Option<&str>,
    stop: &AtomicBool,
) -> Result<Router, String> {
    let ports = free_ports(3)?;
    let ep = |p: u16| format!("tcp://127.0.0.1:{p}");
    let mut args = vec![
        "--frontend".to_string(),
        ep(ports[0]),
        "--backend".to_string(),
        ep(ports[1]),
        "--admin".to_string(),
        ep(ports[2]),
        "--hwm".to_string(),
        (cfg.flood * 2 + 10_000).to_string(),
        "--journal".to_string(),
        "none".to_string(),
    ];
    if let Some(l) = limit {
        args.push("--limit".into());
        args.push(format!("default:{l}"));
    }
    std::fs::create_dir_all(&cfg.dir).map_err(|e| format!("{}: {e}", cfg.dir.display()))?;
    let mut guard = ChildGuard::spawn(
        "emq-router",
        &cfg.router_bin,
        &args,
        &[("RUST_LOG", "warn")],
        cfg.dir.join(format!("emq-router-{label}.log")),
    )?;
    for p in &ports[..2] {
        wait_listening(&mut guard, *p, Duration::from_secs(15), stop)?;
    }
    Ok(Router {
        guard,
        frontend: ep(ports[0]),
        backend: ep(ports[1]),
    })
}

/// A worker thread: `slots` slots, `service` per job; notes when each job
/// arrived (msgid → instant).
struct Worker {
    stop: Arc<AtomicBool>,
    arrivals: Arc<Mutex<HashMap<Vec<u8>, Instant>>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl Worker {
    fn start(backend: &str, slots: usize, service: Duration) -> Result<Worker, String> {
        let ctx = zmq::Context::new();
        let opts = SocketOptions {
            linger_ms: 0,
            ..SocketOptions::default()
        };
        let id = emqp_proto::new_msgid();
        let sock = emq_transport::connect_dealer(&ctx, backend, id.as_bytes(), &opts)
            .map_err(|e| format!("worker connect: {e}"))?;
        let inform = Message::new(Command::Inform(Inform {
            queues: QueueSpec::parse_cli("default").map_err(|e| e.to_string())?,
            peer_type: Some(PeerType::Worker),
            features: vec![FEATURE_JOB_ACK.to_string()],
        }));
        emq_transport::send_message(&sock, inform).map_err(|e| format!("INFORM: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("worker: no ACK of INFORM".into());
            }
            if let Ok(Some(emq_transport::Received::Message(m))) =
                emq_transport::recv_message(&sock, left.as_millis() as i64)
            {
                if let Command::Ack { .. } = m.command {
                    break;
                }
            }
        }
        for _ in 0..slots.max(1) {
            emq_transport::send_message(&sock, Message::new(Command::Ready))
                .map_err(|e| format!("READY: {e}"))?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let arrivals = Arc::new(Mutex::new(HashMap::new()));
        let (s, a) = (Arc::clone(&stop), Arc::clone(&arrivals));
        let thread = std::thread::spawn(move || {
            let _ctx = ctx;
            worker_loop(&sock, service, &a, &s)
        });
        Ok(Worker {
            stop,
            arrivals,
            thread: Some(thread),
        })
    }

    fn arrived(&self) -> usize {
        self.arrivals.lock().map(|m| m.len()).unwrap_or(0)
    }

    fn finish(mut self) -> Result<HashMap<Vec<u8>, Instant>, String> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            h.join().map_err(|_| "worker panicked".to_string())??;
        }
        let m = std::mem::take(&mut *self.arrivals.lock().map_err(|_| "poisoned")?);
        Ok(m)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

fn worker_loop(
    sock: &zmq::Socket,
    service: Duration,
    arrivals: &Mutex<HashMap<Vec<u8>, Instant>>,
    stop: &AtomicBool,
) -> Result<(), String> {
    let proto = PROTOCOL_VERSION.as_bytes();
    let payload = emqp_proto::job::JobOutcome::Value(Value::Null).to_payload();
    let mut f = Frames::new();
    // Constant service time: jobs end in arrival order.
    let mut running: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut n = 0u64;
    let mut last_hb = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let wait = running
            .front()
            .map(|(t, _)| t.saturating_duration_since(Instant::now()).as_millis() as i64)
            .unwrap_or(50)
            .min(50);
        match sock.poll(zmq::POLLIN, wait) {
            Ok(_) | Err(zmq::Error::EINTR) => {}
            Err(e) => return Err(format!("worker poll: {e}")),
        }
        loop {
            match f.recv(sock, zmq::DONTWAIT) {
                Ok(()) => {}
                Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                Err(e) => return Err(format!("worker recv: {e}")),
            }
            if f.get(2) != b"REQUEST" {
                continue;
            }
            let now = Instant::now();
            let msgid = f.get(3).to_vec();
            if let Ok(mut m) = arrivals.lock() {
                m.insert(msgid.clone(), now);
            }
            running.push_back((now + service, msgid));
        }
        let now = Instant::now();
        while running.front().is_some_and(|(t, _)| *t <= now) {
            let Some((_, msgid)) = running.pop_front() else {
                break;
            };
            n += 1;
            let reply = format!("1dea2000-0000-4000-8000-{:012x}", 2 * n);
            let ready = format!("1dea2000-0000-4000-8000-{:012x}", 2 * n + 1);
            send_parts(
                sock,
                &[
                    b"",
                    proto,
                    b"REPLY",
                    reply.as_bytes(),
                    &payload,
                    &msgid,
                    b"ok",
                ],
                stop,
            )?;
            send_parts(sock, &[b"", proto, b"READY", ready.as_bytes()], stop)?;
        }
        if last_hb.elapsed() > Duration::from_secs(1) {
            emq_transport::send_message(
                sock,
                Message::new(Command::Heartbeat {
                    timestamp: Some("0".into()),
                }),
            )
            .map_err(|e| format!("worker heartbeat: {e}"))?;
            last_hb = Instant::now();
        }
    }
    Ok(())
}

/// A client DEALER on `frontend`.
fn client(frontend: &str) -> Result<(zmq::Context, zmq::Socket), String> {
    let ctx = zmq::Context::new();
    let opts = SocketOptions {
        linger_ms: 0,
        ..SocketOptions::default()
    };
    let id = emqp_proto::new_msgid();
    let sock = emq_transport::connect_dealer(&ctx, frontend, id.as_bytes(), &opts)
        .map_err(|e| format!("client connect: {e}"))?;
    Ok((ctx, sock))
}

fn submit(sock: &zmq::Socket, msgid: &str, headers: &str, stop: &AtomicBool) -> Result<(), String> {
    let message = br#"["call", {"handler": "noop", "args": null}]"#;
    send_parts(
        sock,
        &[
            b"",
            PROTOCOL_VERSION.as_bytes(),
            b"REQUEST",
            msgid.as_bytes(),
            b"default",
            headers.as_bytes(),
            message,
        ],
        stop,
    )
}

/// Read and drop what the router sent the client (acknowledgements).
fn drain(sock: &zmq::Socket) {
    while sock.recv_multipart(zmq::DONTWAIT).is_ok() {}
}

fn wait_for(
    what: &str,
    timeout: Duration,
    stop: &AtomicBool,
    mut done: impl FnMut() -> bool,
    sock: &zmq::Socket,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    while !done() {
        if stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: not within {timeout:?}"));
        }
        drain(sock);
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

/// The noisy-neighbour run, with `fair` or without.
pub fn noisy_neighbour(
    cfg: &NoisyConfig,
    fair: bool,
    stop: &AtomicBool,
) -> Result<NoisyFigures, String> {
    let label = if fair { "fair" } else { "unfair" };
    let policy = format!(
        "concurrency={}{}",
        cfg.slots,
        if fair { ",fair" } else { "" }
    );
    let mut router = start_router(cfg, label, Some(&policy), stop)?;
    let worker = Worker::start(&router.backend, cfg.slots, cfg.service)?;
    // A and B are two clients (two connections): B's REQUESTs do not
    // queue behind A's on one socket.
    let (_ctx, sock) = client(&router.frontend)?;
    let (_ctx_b, sock_b) = client(&router.frontend)?;
    for i in 0..cfg.flood {
        submit(&sock, &format!("a-{i}"), "key:A", stop)?;
        if i % 1000 == 0 {
            drain(&sock);
        }
    }
    let mut submitted: Vec<(String, Instant)> = Vec::with_capacity(cfg.b_jobs);
    let mut next = Instant::now();
    for i in 0..cfg.b_jobs {
        while Instant::now() < next {
            drain(&sock);
            drain(&sock_b);
            std::thread::sleep(Duration::from_micros(200));
        }
        let m = format!("b-{i}");
        let at = Instant::now();
        submit(&sock_b, &m, "key:B", stop)?;
        submitted.push((m, at));
        next += cfg.interval;
    }
    let arrivals = Arc::clone(&worker.arrivals);
    let all_b = || {
        arrivals
            .lock()
            .map(|m| {
                submitted
                    .iter()
                    .all(|(id, _)| m.contains_key(id.as_bytes()))
            })
            .unwrap_or(false)
    };
    drain(&sock_b);
    let waited = wait_for("every B job started", cfg.timeout, stop, all_b, &sock);
    let seen = worker.finish()?;
    router.guard.stop(Duration::from_secs(5));
    waited?;
    let mut lat: Vec<u64> = submitted
        .iter()
        .filter_map(|(id, at)| {
            seen.get(id.as_bytes())
                .map(|t| t.saturating_duration_since(*at))
        })
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .collect();
    Ok(NoisyFigures {
        b_p50_us: percentile(&mut lat, 50.0).unwrap_or(0),
        b_p99_us: percentile(&mut lat, 99.0).unwrap_or(0),
        b_jobs: lat.len(),
    })
}

/// One dispatch-throughput run: `headers` of job `i` from `header`, the
/// router's `limit` on `default`.
pub fn throughput(
    cfg: &NoisyConfig,
    label: &str,
    header: impl Fn(usize) -> String,
    limit: Option<&str>,
    stop: &AtomicBool,
) -> Result<Throughput, String> {
    let mut router = start_router(cfg, label, limit, stop)?;
    let worker = Worker::start(&router.backend, cfg.slots, Duration::ZERO)?;
    let (_ctx, sock) = client(&router.frontend)?;
    let t0 = Instant::now();
    for i in 0..cfg.flood {
        submit(&sock, &format!("t-{i}"), &header(i), stop)?;
        if i % 1000 == 0 {
            drain(&sock);
        }
    }
    let n = cfg.flood;
    let r = wait_for(
        "every job started",
        cfg.timeout,
        stop,
        || worker.arrived() >= n,
        &sock,
    );
    let secs = t0.elapsed().as_secs_f64();
    let _ = worker.finish();
    router.guard.stop(Duration::from_secs(5));
    r?;
    Ok(Throughput { jobs: n, secs })
}

/// Every run of the phase, printed as a table; its JSON.
pub fn run_all(cfg: &NoisyConfig, stop: &AtomicBool) -> Result<Value, String> {
    let mut out = serde_json::Map::new();
    println!(
        "noisy neighbour: key A floods {} jobs, key B one job every {} ms ({} jobs); worker {} slots × {} ms per job",
        cfg.flood,
        cfg.interval.as_millis(),
        cfg.b_jobs,
        cfg.slots,
        cfg.service.as_secs_f64() * 1000.0
    );
    println!("{:<34} {:>12} {:>12}", "policy", "B p50 (ms)", "B p99 (ms)");
    for fair in [false, true] {
        let f = noisy_neighbour(cfg, fair, stop)?;
        let name = format!(
            "concurrency={}{}",
            cfg.slots,
            if fair { ",fair" } else { "" }
        );
        println!(
            "{:<34} {:>12.2} {:>12.2}",
            name,
            f.b_p50_us as f64 / 1000.0,
            f.b_p99_us as f64 / 1000.0
        );
        out.insert(
            if fair { "noisy_fair" } else { "noisy_unfair" }.into(),
            json!({"policy": name, "b_p50_us": f.b_p50_us, "b_p99_us": f.b_p99_us, "b_jobs": f.b_jobs}),
        );
    }
    println!();
    println!(
        "dispatch throughput: {} jobs at once, instant worker with {} slots",
        cfg.flood, cfg.slots
    );
    println!("{:<46} {:>12}", "jobs", "jobs/s");
    let runs: [(&str, &str, Option<&str>); 3] = [
        ("plain (no key, no policy)", "plain", None),
        ("100 keys, no policy", "keys", None),
        (
            "100 keys, concurrency-per-key=4,fair",
            "limits",
            Some("concurrency-per-key=4,fair"),
        ),
    ];
    for (name, label, limit) in runs {
        let keyed = label != "plain";
        let t = throughput(
            cfg,
            label,
            |i| {
                if keyed {
                    format!("key:k{}", i % 100)
                } else {
                    String::new()
                }
            },
            limit,
            stop,
        )?;
        println!("{:<46} {:>12.0}", name, t.rate());
        out.insert(
            format!("throughput_{label}"),
            json!({"jobs": t.jobs, "secs": t.secs, "jobs_per_s": t.rate(), "policy": limit}),
        );
    }
    Ok(Value::Object(out))
}

/// The defaults: 100,000 A jobs, B every 10 ms.
pub fn default_config(router_bin: &Path, dir: &Path, quick: bool) -> NoisyConfig {
    NoisyConfig {
        router_bin: router_bin.to_path_buf(),
        dir: dir.to_path_buf(),
        flood: if quick { 5_000 } else { 100_000 },
        b_jobs: if quick { 50 } else { 200 },
        interval: Duration::from_millis(10),
        slots: 8,
        service: Duration::from_millis(1),
        timeout: Duration::from_secs(120),
    }
}
