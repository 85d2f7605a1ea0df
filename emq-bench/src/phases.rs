//! The measured phases of one run: raw limit, emq end to end (memory and
//! durable journal, and memory with CURVE on every socket) with a
//! single-job round trip each, and router memory with jobs buffered and no
//! worker.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use emq_transport::SocketOptions;
use serde_json::{json, Value};

use crate::client::{run_phase, Completion, JobFrames, Limits, Phase, PhaseResult};
use crate::procs::{
    free_ports, proc_status_bytes, wait_listening, wait_quiet, ChildGuard, CpuOf, TempDir,
};
use crate::raw::RawRelay;
use crate::stats::Latency;
use crate::worker::IdealWorker;

/// What the phases need to know.
#[derive(Debug, Clone)]
pub struct Config {
    pub jobs: usize,
    pub window: usize,
    pub single_jobs: usize,
    pub memory_jobs: usize,
    pub concurrency: usize,
    /// emq-jobmanager --prefetch, when given.
    pub prefetch: Option<String>,
    pub warmup_jobs: usize,
    pub router_bin: PathBuf,
    pub jobmanager_bin: PathBuf,
    /// RUST_LOG for the children (their default level is info).
    pub rust_log: Option<String>,
    /// Keep the children's logs here instead of a removed temp dir.
    pub keep_logs: Option<PathBuf>,
    pub idle_timeout: Duration,
    pub phase_timeout: Duration,
    /// The PostgreSQL database of the PostgreSQL journal phase
    /// (`postgresql://…`); `None`: that phase is unavailable.
    pub postgres: Option<String>,
}

/// The journal of an emq phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Journal {
    /// `--journal none`.
    Memory,
    /// A fresh SQLite file.
    Sqlite,
    /// `Config::postgres`.
    Postgres,
}

impl Journal {
    fn label(self) -> &'static str {
        match self {
            Journal::Memory => "memory",
            Journal::Sqlite => "durable",
            Journal::Postgres => "postgres",
        }
    }
}

/// The figures of one pipelined or one-at-a-time client phase.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub jobs: usize,
    pub completed: usize,
    pub elapsed_s: f64,
    pub rate: f64,
    pub latency: Option<Latency>,
    pub acks: usize,
    /// Messages that carried the acknowledgements.
    pub ack_messages: usize,
    pub results_ok: usize,
    pub results_failed: usize,
    pub rejected: usize,
    pub unexpected: usize,
    /// CPU time per completed job of each process involved, microseconds
    /// (pipelined phase only).
    pub cpu_us_per_job: Vec<(String, f64)>,
}

impl Figures {
    pub fn of(mut r: PhaseResult) -> Figures {
        Figures {
            jobs: r.jobs,
            completed: r.completed(),
            elapsed_s: r.elapsed.as_secs_f64(),
            rate: r.rate(),
            latency: Latency::of(&mut r.latencies_ns),
            acks: r.acks,
            ack_messages: r.ack_messages,
            results_ok: r.results_ok,
            results_failed: r.results_failed,
            rejected: r.rejected(),
            unexpected: r.unexpected,
            cpu_us_per_job: Vec::new(),
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "jobs": self.jobs,
            "completed": self.completed,
            "elapsed_s": self.elapsed_s,
            "per_s": self.rate,
            "p50_us": self.latency.map(|l| l.p50_us),
            "p99_us": self.latency.map(|l| l.p99_us),
            "max_us": self.latency.map(|l| l.max_us),
            "acks": self.acks,
            "ack_messages": self.ack_messages,
            "results_ok": self.results_ok,
            "results_failed": self.results_failed,
            "rejected": self.rejected,
            "unexpected": self.unexpected,
            "cpu_us_per_job": self.cpu_us_per_job.iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect::<serde_json::Map<String, Value>>(),
        })
    }
}

/// A phase's outcome: measured, not possible with these binaries, or failed.
#[derive(Debug, Clone)]
pub enum Outcome<T> {
    Done(T),
    Unavailable(String),
    Failed(String),
    Skipped,
}

impl<T> Outcome<T> {
    pub fn done(&self) -> Option<&T> {
        match self {
            Outcome::Done(t) => Some(t),
            _ => None,
        }
    }

    fn from_result(r: Result<T, String>) -> Outcome<T> {
        match r {
            Ok(t) => Outcome::Done(t),
            Err(e) => Outcome::Failed(e),
        }
    }
}

impl<T> Outcome<T> {
    pub fn status_json(&self, f: impl Fn(&T) -> Value) -> Value {
        match self {
            Outcome::Done(t) => f(t),
            Outcome::Unavailable(why) => json!({ "unavailable": why }),
            Outcome::Failed(why) => json!({ "error": why }),
            Outcome::Skipped => json!({ "skipped": true }),
        }
    }
}

/// A pipelined phase plus a one-at-a-time phase against the same server.
#[derive(Debug, Clone)]
pub struct PipeAndSingle {
    pub pipelined: Figures,
    pub single: Figures,
    /// Router VmHWM at the end (emq phases only).
    pub router_hwm_bytes: Option<u64>,
}

impl PipeAndSingle {
    pub fn to_json(&self) -> Value {
        json!({
            "pipelined": self.pipelined.to_json(),
            "single": self.single.to_json(),
            "router_vmhwm_bytes": self.router_hwm_bytes,
        })
    }
}

/// Router memory with jobs buffered and no worker.
#[derive(Debug, Clone)]
pub struct Memory {
    pub jobs: usize,
    pub acks: usize,
    pub rejected: usize,
    pub baseline_rss_bytes: Option<u64>,
    pub vmhwm_bytes: Option<u64>,
    pub rss_after_bytes: Option<u64>,
    pub submit_rate: f64,
}

impl Memory {
    pub fn to_json(&self) -> Value {
        json!({
            "jobs": self.jobs,
            "acks": self.acks,
            "rejected": self.rejected,
            "baseline_vmrss_bytes": self.baseline_rss_bytes,
            "vmhwm_bytes": self.vmhwm_bytes,
            "vmrss_after_bytes": self.rss_after_bytes,
            "submit_per_s": self.submit_rate,
        })
    }
}

/// A tag no earlier phase of this process used.
fn next_tag() -> u32 {
    static N: AtomicU32 = AtomicU32::new(0);
    let pid = std::process::id();
    (pid << 12) ^ N.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
}

fn client_socket(
    ctx: &zmq::Context,
    endpoint: &str,
    curve: Option<&emq_transport::curve::CurveClient>,
) -> Result<zmq::Socket, String> {
    let opts = SocketOptions {
        linger_ms: 0,
        curve: curve.cloned(),
        ..SocketOptions::default()
    };
    let id = emqp_proto::new_msgid();
    emq_transport::connect_dealer(ctx, endpoint, id.as_bytes(), &opts)
        .map_err(|e| format!("client connect {endpoint}: {e}"))
}

fn limits(cfg: &Config) -> Limits {
    Limits {
        idle: cfg.idle_timeout,
        total: cfg.phase_timeout,
        ack_grace: Duration::from_secs(2),
    }
}

/// Fail when a phase lost or rejected jobs: its figures would be wrong.
fn check_complete(what: &str, f: &Figures, expect_acks: bool) -> Result<(), String> {
    if f.completed != f.jobs || f.rejected > 0 || f.results_failed > 0 {
        return Err(format!(
            "{what}: {} of {} jobs completed, {} rejected, {} failed",
            f.completed, f.jobs, f.rejected, f.results_failed
        ));
    }
    if expect_acks && f.acks != f.jobs {
        return Err(format!(
            "{what}: {} acks (REPLY) for {} accepted jobs",
            f.acks, f.jobs
        ));
    }
    Ok(())
}

/// Before a measured phase: wait (at most 20 s) until the machine is
/// quiet, e.g. until the job manager's Python workers have started.
fn settle(stop: &AtomicBool) {
    let (waited, quiet) = wait_quiet(0.15, Duration::from_secs(20), stop);
    if !quiet {
        eprintln!(
            "emq-bench: WARNING: the machine did not get quiet within {:.1} s (other load?); measuring anyway",
            waited.as_secs_f64()
        );
    } else if waited > Duration::from_millis(150) {
        eprintln!(
            "emq-bench: waited {:.1} s for the machine to be quiet",
            waited.as_secs_f64()
        );
    }
}

/// Pipelined + one-at-a-time phases with a warm-up first, on `endpoint`.
fn client_phases(
    cfg: &Config,
    endpoint: &str,
    expect_acks: bool,
    stop: &AtomicBool,
    pids: &[(&str, CpuOf)],
    curve: Option<&emq_transport::curve::CurveClient>,
    mut alive: impl FnMut() -> Result<(), String>,
) -> Result<(Figures, Figures), String> {
    let mut procs: Vec<(String, CpuOf)> =
        vec![("bench".to_string(), CpuOf::Pid(std::process::id()))];
    procs.extend(pids.iter().map(|(n, p)| (n.to_string(), *p)));
    let cpu = || -> Vec<Option<f64>> { procs.iter().map(|(_, p)| p.secs()).collect() };
    let ctx = zmq::Context::new();
    let sock = client_socket(&ctx, endpoint, curve)?;
    let job = JobFrames::noop(true);
    // warm-up: connections made, worker registered, caches warm
    let warm = Limits {
        idle: cfg.idle_timeout.max(Duration::from_secs(20)),
        ..limits(cfg)
    };
    let w = run_phase(
        &sock,
        &job,
        Phase {
            n: cfg.warmup_jobs,
            window: 100,
            tag: next_tag(),
            completion: Completion::Result,
            expect_acks,
            limits: warm,
        },
        stop,
    )
    .map_err(|e| format!("warm-up: {e}"))?;
    check_complete("warm-up", &Figures::of(w), expect_acks)?;
    alive()?;
    settle(stop);
    let cpu_before = cpu();
    let p = run_phase(
        &sock,
        &job,
        Phase {
            n: cfg.jobs,
            window: cfg.window,
            tag: next_tag(),
            completion: Completion::Result,
            expect_acks,
            limits: limits(cfg),
        },
        stop,
    )
    .map_err(|e| format!("pipelined: {e}"))?;
    let cpu_after = cpu();
    let mut pipelined = Figures::of(p);
    for (i, (name, _)) in procs.iter().enumerate() {
        if let (Some(a), Some(b)) = (cpu_before[i], cpu_after[i]) {
            let per_job = (b - a) * 1e6 / pipelined.completed.max(1) as f64;
            pipelined.cpu_us_per_job.push((name.clone(), per_job));
        }
    }
    check_complete("pipelined", &pipelined, expect_acks)?;
    alive()?;
    settle(stop);
    let s = run_phase(
        &sock,
        &job,
        Phase {
            n: cfg.single_jobs,
            window: 1,
            tag: next_tag(),
            completion: Completion::Result,
            expect_acks,
            limits: limits(cfg),
        },
        stop,
    )
    .map_err(|e| format!("single: {e}"))?;
    let single = Figures::of(s);
    check_complete("single", &single, expect_acks)?;
    alive()?;
    Ok((pipelined, single))
}

/// The raw zmq limit, in-process; with `credit`, under READY flow control
/// with that many slots (see [`crate::raw`]).
pub fn raw(cfg: &Config, credit: Option<usize>, stop: &AtomicBool) -> Outcome<PipeAndSingle> {
    // One job at a time is the same with or without credit: measured once.
    let cfg = &Config {
        single_jobs: if credit.is_some() { 0 } else { cfg.single_jobs },
        ..cfg.clone()
    };
    Outcome::from_result((|| {
        let relay = RawRelay::start(credit)?;
        let (pipelined, single) =
            client_phases(cfg, &relay.frontend, false, stop, &[], None, || Ok(()))?;
        relay.finish()?;
        Ok(PipeAndSingle {
            pipelined,
            single,
            router_hwm_bytes: None,
        })
    })())
}

/// Where the children's logs and the journal go.
struct Workdir {
    tmp: TempDir,
    keep: Option<PathBuf>,
}

impl Workdir {
    fn new(cfg: &Config, label: &str) -> Result<Workdir, String> {
        Ok(Workdir {
            tmp: TempDir::new(label)?,
            keep: cfg.keep_logs.clone(),
        })
    }

    fn log(&self, name: &str) -> PathBuf {
        match &self.keep {
            Some(d) => {
                let _ = std::fs::create_dir_all(d);
                let stamp = SystemStamp::now();
                d.join(format!("{name}-{stamp}.log"))
            }
            None => self.tmp.path().join(format!("{name}.log")),
        }
    }
}

struct SystemStamp;

impl SystemStamp {
    fn now() -> String {
        static N: AtomicU32 = AtomicU32::new(0);
        format!(
            "{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        )
    }
}

/// A running emq-router on free loopback ports.
pub struct Router {
    pub guard: ChildGuard,
    pub frontend: String,
    pub backend: String,
}

fn child_env(cfg: &Config) -> Vec<(&str, &str)> {
    match &cfg.rust_log {
        Some(l) => vec![("RUST_LOG", l.as_str())],
        None => Vec::new(),
    }
}

/// CURVE keys for a phase: the router's key pair file and a directory of
/// authorised keys (the job manager's and the client's), all written by
/// emq_transport::curve as `emq-cli keygen` writes them.
struct CurveSetup {
    router_secret: PathBuf,
    router_public: PathBuf,
    authorised: PathBuf,
    jobmanager_secret: PathBuf,
    client: emq_transport::curve::CurveClient,
}

impl CurveSetup {
    fn make(dir: &Path) -> Result<CurveSetup, String> {
        use emq_transport::curve::{generate, write_key_pair, CurveClient};
        let err = |e: emq_transport::curve::KeyError| format!("CURVE keys: {e}");
        let authorised = dir.join("clients");
        std::fs::create_dir_all(&authorised).map_err(|e| format!("CURVE keys: {e}"))?;
        let router = generate().map_err(err)?;
        let (router_public, router_secret) =
            write_key_pair(&dir.join("router"), &router, true).map_err(err)?;
        let jm = generate().map_err(err)?;
        let (_, jobmanager_secret) =
            write_key_pair(&authorised.join("jobmanager"), &jm, true).map_err(err)?;
        let client = generate().map_err(err)?;
        write_key_pair(&authorised.join("bench"), &client, true).map_err(err)?;
        Ok(CurveSetup {
            router_secret,
            router_public,
            authorised,
            jobmanager_secret,
            client: CurveClient {
                server_key: router.public,
                own: client,
            },
        })
    }

    fn router_args(&self) -> Vec<String> {
        vec![
            "--curve-secret-key-file".into(),
            self.router_secret.display().to_string(),
            "--curve-keys".into(),
            self.authorised.display().to_string(),
        ]
    }

    fn jobmanager_args(&self) -> Vec<String> {
        vec![
            "--curve-server-key".into(),
            self.router_public.display().to_string(),
            "--curve-secret-key-file".into(),
            self.jobmanager_secret.display().to_string(),
        ]
    }
}

/// `journal`: a file path, a `postgresql://` URL, or `None` for memory
/// only.
fn start_router(
    cfg: &Config,
    dir: &Workdir,
    journal: Option<&str>,
    hwm: usize,
    curve: Option<&CurveSetup>,
    stop: &AtomicBool,
) -> Result<Router, String> {
    let ports = free_ports(3)?;
    let ep = |p: u16| format!("tcp://127.0.0.1:{p}");
    let journal_arg = journal.unwrap_or("none").to_string();
    let mut args = vec![
        "--frontend".to_string(),
        ep(ports[0]),
        "--backend".to_string(),
        ep(ports[1]),
        "--admin".to_string(),
        ep(ports[2]),
        "--hwm".to_string(),
        hwm.to_string(),
        "--journal".to_string(),
        journal_arg,
    ];
    args.extend(curve.map(CurveSetup::router_args).unwrap_or_default());
    let mut guard = ChildGuard::spawn(
        "emq-router",
        &cfg.router_bin,
        &args,
        &child_env(cfg),
        dir.log("emq-router"),
    )?;
    let t = Duration::from_secs(15);
    wait_listening(&mut guard, ports[0], t, stop)?;
    wait_listening(&mut guard, ports[1], t, stop)?;
    Ok(Router {
        guard,
        frontend: ep(ports[0]),
        backend: ep(ports[1]),
    })
}

fn start_jobmanager(
    cfg: &Config,
    dir: &Workdir,
    backend: &str,
    curve: Option<&CurveSetup>,
) -> Result<ChildGuard, String> {
    let mut args = vec![
        "--broker".to_string(),
        backend.to_string(),
        "--concurrency".to_string(),
        cfg.concurrency.to_string(),
        "--queues".to_string(),
        "default".to_string(),
    ];
    if let Some(p) = &cfg.prefetch {
        args.extend(["--prefetch".to_string(), p.clone()]);
    }
    args.extend(curve.map(CurveSetup::jobmanager_args).unwrap_or_default());
    ChildGuard::spawn(
        "emq-jobmanager",
        &cfg.jobmanager_bin,
        &args,
        &child_env(cfg),
        dir.log("emq-jobmanager"),
    )
}

/// `Err` naming the child and its log tail when it has exited.
fn check_alive(g: &mut ChildGuard) -> Result<(), String> {
    match g.exited() {
        None => Ok(()),
        Some(status) => Err(format!(
            "{} exited ({status}); log:\n{}",
            g.name,
            g.log_tail(15)
        )),
    }
}

/// Whether `emq-router --help` mentions `--journal` (run with a timeout).
pub fn router_supports_journal(cfg: &Config) -> Result<bool, String> {
    let dir = TempDir::new("help")?;
    let mut g = ChildGuard::spawn(
        "emq-router --help",
        &cfg.router_bin,
        &["--help".to_string()],
        &[],
        dir.path().join("help.txt"),
    )?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while g.exited().is_none() {
        if Instant::now() > deadline {
            return Err("emq-router --help did not exit within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = std::fs::read_to_string(dir.path().join("help.txt")).unwrap_or_default();
    Ok(text.contains("--journal"))
}

/// emq end to end: real router (journal `none`, a fresh sqlite file, or
/// the PostgreSQL database of `--postgres`) and one job manager, pipelined
/// then one job at a time; with `curve`, the router's three sockets are
/// CURVE and the job manager and the bench's client have authorised keys.
pub fn emq(
    cfg: &Config,
    journal: Journal,
    curve: bool,
    stop: &AtomicBool,
) -> Outcome<PipeAndSingle> {
    for bin in [&cfg.router_bin, &cfg.jobmanager_bin] {
        if !bin.exists() {
            return Outcome::Unavailable(format!("{} not built", bin.display()));
        }
    }
    if journal != Journal::Memory {
        match router_supports_journal(cfg) {
            Ok(true) => {}
            Ok(false) => return Outcome::Unavailable("emq-router has no --journal option".into()),
            Err(e) => return Outcome::Failed(e),
        }
    }
    if journal == Journal::Postgres && cfg.postgres.is_none() {
        return Outcome::Unavailable("no --postgres database".into());
    }
    if curve && !emq_transport::curve::curve_available() {
        return Outcome::Unavailable("this build's libzmq has no CURVE".into());
    }
    let label = if curve { "curve" } else { journal.label() };
    Outcome::from_result((|| {
        let dir = Workdir::new(cfg, label)?;
        let file = dir.tmp.path().join("j.sqlite").display().to_string();
        let journal_arg = match journal {
            Journal::Memory => None,
            Journal::Sqlite => Some(file.as_str()),
            Journal::Postgres => cfg.postgres.as_deref(),
        };
        let keys = if curve {
            Some(CurveSetup::make(dir.tmp.path())?)
        } else {
            None
        };
        let mut router = start_router(
            cfg,
            &dir,
            journal_arg,
            (cfg.window * 2).max(10_000),
            keys.as_ref(),
            stop,
        )?;
        let mut jm = start_jobmanager(cfg, &dir, &router.backend, keys.as_ref())?;
        let frontend = router.frontend.clone();
        let mut pids = vec![
            ("emq-router", CpuOf::Pid(router.guard.pid())),
            ("emq-jobmanager", CpuOf::Pid(jm.pid())),
        ];
        if journal == Journal::Postgres {
            // The server's processes, when it runs on this machine.
            pids.push(("postgres", CpuOf::Named("postgres")));
        }
        let client_keys = keys.as_ref().map(|k| &k.client);
        let r = client_phases(cfg, &frontend, true, stop, &pids, client_keys, || {
            check_alive(&mut router.guard)?;
            check_alive(&mut jm)
        });
        let hwm = proc_status_bytes(router.guard.pid(), "VmHWM");
        let r = r.map_err(|e| {
            let mut msg = e;
            for g in [&router.guard, &jm] {
                msg.push_str(&format!("\n--- {} log tail:\n{}", g.name, g.log_tail(8)));
            }
            msg
        });
        jm.stop(Duration::from_secs(5));
        router.guard.stop(Duration::from_secs(5));
        let (pipelined, single) = r?;
        Ok(PipeAndSingle {
            pipelined,
            single,
            router_hwm_bytes: hwm,
        })
    })())
}

/// The real router (memory mode) with the bench's ideal in-process worker
/// instead of emq-jobmanager: the router's own cost.
pub fn emq_ideal_worker(cfg: &Config, stop: &AtomicBool) -> Outcome<PipeAndSingle> {
    if !cfg.router_bin.exists() {
        return Outcome::Unavailable(format!("{} not built", cfg.router_bin.display()));
    }
    Outcome::from_result((|| {
        let dir = Workdir::new(cfg, "ideal")?;
        let mut router = start_router(cfg, &dir, None, (cfg.window * 2).max(10_000), None, stop)?;
        let worker = IdealWorker::start(&router.backend, cfg.concurrency, Duration::from_secs(15))
            .map_err(|e| {
                format!(
                    "{e}\n--- emq-router log tail:\n{}",
                    router.guard.log_tail(8)
                )
            })?;
        let frontend = router.frontend.clone();
        let pids = [("emq-router", CpuOf::Pid(router.guard.pid()))];
        let r = client_phases(cfg, &frontend, true, stop, &pids, None, || {
            check_alive(&mut router.guard)
        });
        let hwm = proc_status_bytes(router.guard.pid(), "VmHWM");
        let w = worker.finish();
        router.guard.stop(Duration::from_secs(5));
        let (pipelined, single) = r.map_err(|e| {
            format!(
                "{e}\n--- emq-router log tail:\n{}",
                router.guard.log_tail(8)
            )
        })?;
        w?;
        Ok(PipeAndSingle {
            pipelined,
            single,
            router_hwm_bytes: hwm,
        })
    })())
}

/// Router peak memory with `cfg.memory_jobs` jobs buffered and no worker.
/// With `durable`, the router keeps a journal (every job is also a row in
/// SQLite, and the journal indexes it in memory).
pub fn memory(cfg: &Config, durable: bool, stop: &AtomicBool) -> Outcome<Memory> {
    if !cfg.router_bin.exists() {
        return Outcome::Unavailable(format!("{} not built", cfg.router_bin.display()));
    }
    Outcome::from_result((|| {
        let dir = Workdir::new(cfg, if durable { "rss-durable" } else { "rss" })?;
        let journal = dir.tmp.path().join("j.sqlite").display().to_string();
        let mut router = start_router(
            cfg,
            &dir,
            durable.then_some(journal.as_str()),
            cfg.memory_jobs.max(1) * 2,
            None,
            stop,
        )?;
        let pid = router.guard.pid();
        let ctx = zmq::Context::new();
        let sock = client_socket(&ctx, &router.frontend, None)?;
        // let the connection settle before the baseline
        std::thread::sleep(Duration::from_millis(200));
        let baseline = proc_status_bytes(pid, "VmRSS");
        let r = run_phase(
            &sock,
            &JobFrames::noop(true),
            Phase {
                n: cfg.memory_jobs,
                window: cfg.window,
                tag: next_tag(),
                completion: Completion::Ack,
                expect_acks: true,
                limits: limits(cfg),
            },
            stop,
        )
        .map_err(|e| {
            format!(
                "buffering {} jobs: {e}\n--- emq-router log tail:\n{}",
                cfg.memory_jobs,
                router.guard.log_tail(8)
            )
        })?;
        check_alive(&mut router.guard)?;
        std::thread::sleep(Duration::from_millis(200));
        let vmhwm = proc_status_bytes(pid, "VmHWM");
        let after = proc_status_bytes(pid, "VmRSS");
        router.guard.stop(Duration::from_secs(10));
        let rejected = r.rejected();
        let rate = r.acks as f64 / r.elapsed.as_secs_f64().max(1e-9);
        if r.acks != cfg.memory_jobs {
            return Err(format!(
                "{} of {} jobs acknowledged ({rejected} rejected: {:?})",
                r.acks, cfg.memory_jobs, r.rejects
            ));
        }
        Ok(Memory {
            jobs: cfg.memory_jobs,
            acks: r.acks,
            rejected,
            baseline_rss_bytes: baseline,
            vmhwm_bytes: vmhwm,
            rss_after_bytes: after,
            submit_rate: rate,
        })
    })())
}
