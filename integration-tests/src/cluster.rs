//! Starting routers and job managers — ours and EventMQ 0.3.13's — on
//! fresh loopback ports, and waiting until they are usable.

use std::time::Duration;

use crate::bins;
use crate::ports::free_endpoint;
use crate::process::{Proc, Spawn};
use crate::python::{self, PyEnv};

/// The three router endpoints.
#[derive(Debug, Clone)]
pub struct Addrs {
    pub frontend: String,
    pub backend: String,
    pub admin: String,
}

impl Addrs {
    pub fn fresh() -> Addrs {
        Addrs {
            frontend: free_endpoint(),
            backend: free_endpoint(),
            admin: free_endpoint(),
        }
    }
}

/// How long a router gets to answer its first STATUS.
pub const ROUTER_READY: Duration = Duration::from_secs(20);

/// Heartbeat settings that make fault tests fast: 0.5 s beats, 3 missed
/// beats (1.5 s) mean dead.
pub const FAST_HEARTBEAT: [&str; 4] = ["--heartbeat-interval", "0.5", "--heartbeat-liveness", "3"];

/// Wait until the router at `addrs` answers STATUS (or the process exits).
pub fn wait_router_ready(p: &mut Proc, addrs: &Addrs, timeout: Duration) -> Result<(), String> {
    wait_router_ready_as(p, addrs, timeout, None)
}

/// [`wait_router_ready`], asking STATUS as a CURVE client when `curve` is
/// given (a router whose admin socket is CURVE).
pub fn wait_router_ready_as(
    p: &mut Proc,
    addrs: &Addrs,
    timeout: Duration,
    curve: Option<&emq_transport::curve::CurveClient>,
) -> Result<(), String> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if !p.is_running() {
            let status = p.exit_status();
            return Err(format!(
                "{} exited ({status:?}) before answering STATUS; stderr tail:\n{}",
                p.name,
                p.tail(30)
            ));
        }
        if crate::admin::query_as(
            &addrs.admin,
            emqp_proto::Command::Status,
            Duration::from_millis(500),
            curve,
        )
        .is_ok()
        {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "{} did not answer STATUS on {} within {timeout:?}; stderr tail:\n{}",
                p.name,
                addrs.admin,
                p.tail(30)
            ));
        }
    }
}

/// Spawn our router (as `name`) on `addrs` with extra flags, without
/// waiting for it (a standby router never answers STATUS).
pub fn spawn_router(name: &str, addrs: &Addrs, extra: &[&str]) -> Proc {
    router_command(name, addrs, extra).spawn()
}

/// What [`spawn_router`] starts, for a test to add to (e.g. environment).
pub fn router_command(name: &str, addrs: &Addrs, extra: &[&str]) -> Spawn {
    Spawn::new(name, bins::bin(bins::ROUTER))
        .args([
            "--frontend",
            &addrs.frontend,
            "--backend",
            &addrs.backend,
            "--admin",
            &addrs.admin,
        ])
        .args(extra)
}

/// Start our router on `addrs` with extra flags; ready when it answers STATUS.
/// Unless `extra` names a `--journal`, the router gets a journal file of
/// its own in the test's scratch directory (the default one in `$HOME` is
/// shared by every router on the machine, and locked by the first).
pub fn start_router_on(addrs: &Addrs, extra: &[&str]) -> Result<Proc, String> {
    start_router_on_as(addrs, extra, None)
}

/// [`start_router_on`], asking STATUS with `curve`'s keys.
pub fn start_router_on_as(
    addrs: &Addrs,
    extra: &[&str],
    curve: Option<&emq_transport::curve::CurveClient>,
) -> Result<Proc, String> {
    let journal = if extra.contains(&"--journal") {
        vec![]
    } else {
        let dir = crate::process::scratch_dir("journal");
        vec![
            "--journal".to_string(),
            dir.join("router.journal").display().to_string(),
        ]
    };
    let journal: Vec<&str> = journal.iter().map(String::as_str).collect();
    let mut p = spawn_router("emq-router", addrs, &[&journal[..], extra].concat());
    wait_router_ready_as(&mut p, addrs, ROUTER_READY, curve).map(|_| p)
}

/// Start our router on fresh ports (retried on new ports if it cannot
/// start, e.g. a port was taken meanwhile).
pub fn start_router(extra: &[&str]) -> (Proc, Addrs) {
    start_router_as(extra, None)
}

/// [`start_router`] for a router whose admin socket is CURVE: readiness
/// is asked with `curve`'s keys.
pub fn start_router_as(
    extra: &[&str],
    curve: Option<&emq_transport::curve::CurveClient>,
) -> (Proc, Addrs) {
    let mut last = String::new();
    for _ in 0..3 {
        let addrs = Addrs::fresh();
        match start_router_on_as(&addrs, extra, curve) {
            Ok(p) => return (p, addrs),
            Err(e) => {
                eprintln!("[harness] router start failed, retrying on new ports: {e}");
                last = e;
            }
        }
    }
    panic!("our router did not start: {last}");
}

/// Start our job manager against `broker` with extra flags. Python jobs run
/// with [`python::job_python`] and `tests/python` on PYTHONPATH.
///
/// Unless `extra` names `--prefetch`, it runs with `--prefetch 0` (one
/// READY per free slot): many tests count a worker's free slots or expect
/// the jobs a job manager holds to be the ones it runs. The credit window
/// has its own tests (`credit_window.rs`, and against 0.3.13's router).
pub fn start_jobmanager(name: &str, broker: &str, extra: &[&str]) -> Proc {
    jobmanager_command(name, broker, extra).spawn()
}

/// What [`start_jobmanager`] starts, for a test to add to (e.g.
/// environment).
pub fn jobmanager_command(name: &str, broker: &str, extra: &[&str]) -> Spawn {
    let prefetch: &[&str] = if extra.contains(&"--prefetch") {
        &[]
    } else {
        &["--prefetch", "0"]
    };
    Spawn::new(name, bins::bin(bins::JOBMANAGER))
        .args(["--broker", broker, "--python", &python::job_python()])
        .args(prefetch)
        .args(extra)
        .env("PYTHONPATH", python::pythonpath())
}

/// Start 0.3.13's router (`$venv/bin/emq-router`) on `addrs`.
pub fn start_py_router_on(py: &PyEnv, addrs: &Addrs) -> Result<Proc, String> {
    let mut p = Spawn::new("py-emq-router", py.router_script())
        .env("EVENTMQ_FRONTEND_ADDR", &addrs.frontend)
        .env("EVENTMQ_BACKEND_ADDR", &addrs.backend)
        .env("EVENTMQ_ADMINISTRATIVE_ADDR", &addrs.admin)
        .env("PYTHONUNBUFFERED", "1")
        .spawn();
    wait_router_ready(&mut p, addrs, ROUTER_READY).map(|_| p)
}

/// Start 0.3.13's router on fresh ports.
pub fn start_py_router(py: &PyEnv) -> (Proc, Addrs) {
    let mut last = String::new();
    for _ in 0..3 {
        let addrs = Addrs::fresh();
        match start_py_router_on(py, &addrs) {
            Ok(p) => return (p, addrs),
            Err(e) => {
                eprintln!("[harness] python router start failed, retrying: {e}");
                last = e;
            }
        }
    }
    panic!("the 0.3.13 router did not start: {last}");
}

/// Start 0.3.13's job manager (`$venv/bin/emq-jobmanager -J jobs`) against
/// `broker`, serving `queues_json` (0.3.13's `EVENTMQ_QUEUES` form, e.g.
/// `[[10, "default"]]`; `-Q` would send an empty queue frame). The
/// failover address is set to the same broker, or 0.3.13 would reconnect
/// to its default port after a missed heartbeat.
pub fn start_py_jobmanager(
    py: &PyEnv,
    name: &str,
    broker: &str,
    queues_json: &str,
    jobs: usize,
) -> Proc {
    Spawn::new(name, py.jobmanager_script())
        .args(["-J", &jobs.to_string()])
        .env("EVENTMQ_WORKER_ADDR", broker)
        .env("EVENTMQ_WORKER_ADDR_DEFAULT", broker)
        .env("EVENTMQ_WORKER_ADDR_FAILOVER", broker)
        .env("EVENTMQ_QUEUES", queues_json)
        .env("PYTHONPATH", python::pythonpath())
        .env("PYTHONUNBUFFERED", "1")
        .spawn()
}
