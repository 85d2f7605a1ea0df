//! `emq-router`: binds the frontend, backend and admin ROUTER sockets and
//! moves frames between them and the sans-IO core (`emq_router::Router`).
//!
//! One poll loop: every readable socket is drained (non-blocking reads until
//! EAGAIN, bounded per round) into the core; the core's actions are then
//! executed in order — journal ops of the round first, in one transaction,
//! so that a job is durable before its acknowledgement leaves — and failed
//! sends (EHOSTUNREACH, EAGAIN at the peer's high-water mark) are fed back
//! as `SendFailed`. A tick every 100 ms drives heartbeats, the dead-peer
//! sweep, retries and the drain deadline.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use emq_router::util::LogLimiter;
use emq_router::{Action, Config, Input, JournalOp, Router, SendFailure, Socket, StoredJob};
use emq_transport::SocketOptions;
use emqp_proto::settings::Settings;
use emqp_proto::QueueSpec;

const DEFAULT_FRONTEND: &str = "tcp://127.0.0.1:47291";
const DEFAULT_BACKEND: &str = "tcp://127.0.0.1:47290";
const DEFAULT_ADMIN: &str = "tcp://127.0.0.1:47293";
/// Most messages read from one socket per poll round (fairness).
const READ_BATCH: usize = 4096;
const TICK: Duration = Duration::from_millis(100);

const AFTER_HELP: &str = "\
Every option can also come from the environment (EVENTMQ_<KEY>) or from the
[router] (or [global]) section of the INI file named by EVENTMQ_CONFIG_FILE
(default /etc/eventmq.conf). Command-line flags win over the environment,
which wins over the file. Keys: FRONTEND_ADDR, BACKEND_ADDR,
ADMINISTRATIVE_ADDR, HWM, HEARTBEAT_INTERVAL, HEARTBEAT_LIVENESS,
MAX_ATTEMPTS, RETRY_BACKOFF, RETRY_BACKOFF_MAX, DRAIN_TIMEOUT, QUEUES
(default queues of a worker whose INFORM names none), JOURNAL.

Protocol: eMQP/1.0, wire-compatible with EventMQ 0.3.13. Every accepted
REQUEST is acknowledged with REPLY [msgid]; results of reply-requested jobs
come back as RESULT [msgid, status, payload]; refused requests get
REJECT [msgid, reason, text]. SIGTERM, SIGINT or an admin DISCONNECT stop
the router in order: KBYE to every peer, wait for in-flight jobs (at most
--drain-timeout), exit 0.

Logs go to stderr; RUST_LOG overrides the level (default info).";

/// EventMQ (eMQP/1.0) router: clients submit jobs on the frontend, workers
/// take them on the backend, admin tools ask for status on the admin
/// endpoint.
#[derive(Parser, Debug)]
#[command(name = "emq-router", version, after_help = AFTER_HELP)]
struct Cli {
    /// Endpoint for clients (senders) and schedulers
    /// [env: EVENTMQ_FRONTEND_ADDR] [default: tcp://127.0.0.1:47291]
    #[arg(long, value_name = "ADDR")]
    frontend: Option<String>,

    /// Endpoint for workers (job managers)
    /// [env: EVENTMQ_BACKEND_ADDR] [default: tcp://127.0.0.1:47290]
    #[arg(long, value_name = "ADDR")]
    backend: Option<String>,

    /// Endpoint for admin tools (STATUS, ROUTER_SHOW_WORKERS, DISCONNECT, ...)
    /// [env: EVENTMQ_ADMINISTRATIVE_ADDR] [default: tcp://127.0.0.1:47293]
    #[arg(long, value_name = "ADDR")]
    admin: Option<String>,

    /// Buffered jobs per queue before REQUESTs are rejected `queue-full`
    /// [env: EVENTMQ_HWM] [default: 10000]
    #[arg(long, value_name = "N")]
    hwm: Option<usize>,

    /// Seconds between HEARTBEATs to every worker and scheduler
    /// [env: EVENTMQ_HEARTBEAT_INTERVAL] [default: 3]
    #[arg(long, value_name = "SECS")]
    heartbeat_interval: Option<f64>,

    /// A peer silent for interval × liveness is removed and its jobs are
    /// redelivered [env: EVENTMQ_HEARTBEAT_LIVENESS] [default: 3]
    #[arg(long, value_name = "N")]
    heartbeat_liveness: Option<u32>,

    /// Deliveries of a job that may be lost to dying workers before it is
    /// dead-lettered [env: EVENTMQ_MAX_ATTEMPTS] [default: 5]
    #[arg(long, value_name = "N")]
    max_attempts: Option<u32>,

    /// First retry delay for a failed job with `retry-count:N`; doubles each
    /// retry [env: EVENTMQ_RETRY_BACKOFF] [default: 1]
    #[arg(long, value_name = "SECS")]
    retry_backoff: Option<f64>,

    /// Largest retry delay [env: EVENTMQ_RETRY_BACKOFF_MAX] [default: 60]
    #[arg(long, value_name = "SECS")]
    retry_backoff_max: Option<f64>,

    /// On shutdown, how long to wait for in-flight jobs before exiting
    /// [env: EVENTMQ_DRAIN_TIMEOUT] [default: 10]
    #[arg(long, value_name = "SECS")]
    drain_timeout: Option<f64>,

    /// Queues of a worker whose INFORM names none, e.g. "10:default,15:email"
    /// or '[[10, "default"]]' [env: EVENTMQ_QUEUES] [default: 10:default]
    #[arg(long, value_name = "SPEC")]
    default_queues: Option<String>,

    /// Durable job journal (SQLite file): accepted jobs survive a router
    /// restart and are queued again. `none` keeps jobs in memory only
    /// [env: EVENTMQ_JOURNAL] [default: none]
    #[arg(long, value_name = "PATH|none")]
    journal: Option<String>,
}

/// Options after flags, environment, file and defaults are merged.
#[derive(Debug)]
struct Options {
    frontend: String,
    backend: String,
    admin: String,
    journal: Option<PathBuf>,
    core: Config,
}

/// A flag, else a setting, else the default; errors name where the bad
/// value came from.
fn pick<T: std::str::FromStr>(
    flag: Option<T>,
    settings: &Settings,
    key: &str,
    default: T,
) -> Result<T, String> {
    if let Some(v) = flag {
        return Ok(v);
    }
    match settings.get(key) {
        None => Ok(default),
        Some(text) => text.trim().parse().map_err(|_| {
            format!(
                "bad value {text:?} for {key} (from {})",
                settings.source(key).unwrap_or("settings")
            )
        }),
    }
}

fn secs_to_micros(secs: f64, what: &str, allow_zero: bool) -> Result<u64, String> {
    if !secs.is_finite() || secs < 0.0 || (!allow_zero && secs == 0.0) {
        return Err(format!(
            "{what} must be a positive number of seconds, got {secs}"
        ));
    }
    Ok((secs * 1e6).round() as u64)
}

impl Options {
    fn resolve(cli: Cli, s: &Settings) -> Result<Options, String> {
        let text = |flag: Option<String>, key: &str, default: &str| -> String {
            flag.or_else(|| s.get(key).map(str::to_string))
                .unwrap_or_else(|| default.to_string())
        };
        let frontend = text(cli.frontend, "FRONTEND_ADDR", DEFAULT_FRONTEND);
        let backend = text(cli.backend, "BACKEND_ADDR", DEFAULT_BACKEND);
        let admin = text(cli.admin, "ADMINISTRATIVE_ADDR", DEFAULT_ADMIN);
        for e in [&frontend, &backend, &admin] {
            emq_transport::check_endpoint(e).map_err(|e| e.to_string())?;
        }
        let journal_arg = text(cli.journal, "JOURNAL", "none");
        let journal = emq_journal::resolve_journal_path(Some(journal_arg.trim()));
        let default_queues = match cli
            .default_queues
            .or_else(|| s.get("QUEUES").map(str::to_string))
        {
            None => QueueSpec::default(),
            Some(t) => {
                let q = QueueSpec::parse_cli(&t)
                    .map_err(|e| format!("bad default queues {t:?}: {e}"))?;
                if q.is_empty() {
                    QueueSpec::default()
                } else {
                    q
                }
            }
        };
        let hb = pick(cli.heartbeat_interval, s, "HEARTBEAT_INTERVAL", 3.0)?;
        let backoff = pick(cli.retry_backoff, s, "RETRY_BACKOFF", 1.0)?;
        let backoff_max = pick(cli.retry_backoff_max, s, "RETRY_BACKOFF_MAX", 60.0)?;
        let drain = pick(cli.drain_timeout, s, "DRAIN_TIMEOUT", 10.0)?;
        let max_attempts = pick(cli.max_attempts, s, "MAX_ATTEMPTS", 5)?;
        if max_attempts == 0 {
            return Err("--max-attempts must be at least 1".into());
        }
        let liveness = pick(cli.heartbeat_liveness, s, "HEARTBEAT_LIVENESS", 3)?;
        if liveness == 0 {
            return Err("--heartbeat-liveness must be at least 1".into());
        }
        let core = Config {
            hwm: pick(cli.hwm, s, "HWM", 10_000)?,
            heartbeat_interval: secs_to_micros(hb, "--heartbeat-interval", false)?,
            heartbeat_liveness: liveness,
            max_attempts,
            retry_backoff_base: secs_to_micros(backoff, "--retry-backoff", true)?,
            retry_backoff_max: secs_to_micros(backoff_max, "--retry-backoff-max", true)?,
            drain_timeout: secs_to_micros(drain, "--drain-timeout", true)?,
            default_queues,
            journal: journal.is_some(),
            ..Config::default()
        };
        Ok(Options {
            frontend,
            backend,
            admin,
            journal,
            core,
        })
    }
}

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn to_journal(op: JournalOp) -> emq_journal::JournalOp {
    match op {
        JournalOp::Accepted(j) => emq_journal::JournalOp::Accepted(emq_journal::JournaledJob {
            route: if j.route == j.queue {
                String::new()
            } else {
                j.route
            },
            msgid: j.msgid,
            client: j.client,
            queue: j.queue,
            headers: String::from_utf8_lossy(&j.headers).into_owned(),
            message: j.payload,
            attempts: j.attempts,
            accepted_at_unix_ms: (j.accepted_at / 1000) as i64,
        }),
        JournalOp::Completed { msgid, .. } => emq_journal::JournalOp::Completed { msgid },
        JournalOp::DeadLettered { msgid, reason, .. } => emq_journal::JournalOp::DeadLettered {
            msgid,
            error: reason,
        },
    }
}

fn from_journal(j: emq_journal::JournaledJob) -> StoredJob {
    StoredJob {
        id: 0,
        route: if j.route.is_empty() {
            j.queue.clone()
        } else {
            j.route
        },
        msgid: j.msgid,
        client: j.client,
        queue: j.queue,
        headers: j.headers.into_bytes(),
        payload: j.message,
        attempts: j.attempts,
        accepted_at: (j.accepted_at_unix_ms.max(0) as u64) * 1000,
    }
}

struct Sockets {
    frontend: zmq::Socket,
    backend: zmq::Socket,
    admin: zmq::Socket,
}

impl Sockets {
    fn get(&self, s: Socket) -> &zmq::Socket {
        match s {
            Socket::Frontend => &self.frontend,
            Socket::Backend => &self.backend,
            Socket::Admin => &self.admin,
        }
    }
}

/// Execute the core's actions; failed sends are fed back until none are
/// left. Returns whether the core asked to exit.
fn execute(
    router: &mut Router,
    socks: &Sockets,
    journal: &mut Option<emq_journal::Journal>,
    out: &mut Vec<Action>,
    start: Instant,
    eagain_log: &mut LogLimiter,
) -> bool {
    let mut exit = false;
    let mut ops: Vec<emq_journal::JournalOp> = Vec::new();
    let mut sends: Vec<(Socket, Vec<u8>, emq_router::Frames)> = Vec::new();
    let mut failed: Vec<Input> = Vec::new();
    while !out.is_empty() {
        for a in out.drain(..) {
            match a {
                Action::Journal(op) => ops.push(to_journal(op)),
                Action::Send {
                    socket,
                    identity,
                    frames,
                } => sends.push((socket, identity, frames)),
                Action::Exit => exit = true,
            }
        }
        // Journal first: every op of this round is committed before any
        // of its sends (acknowledgements) leaves.
        if !ops.is_empty() {
            if let Some(j) = journal.as_mut() {
                if let Err(e) = j.append(&ops) {
                    log::error!("journal write failed, jobs of this round are not durable: {e}");
                }
            }
            ops.clear();
        }
        for (socket, identity, frames) in sends.drain(..) {
            let r = socks.get(socket).send_multipart(
                std::iter::once(identity.clone()).chain(frames),
                zmq::DONTWAIT,
            );
            if let Err(e) = r {
                let reason = match e {
                    zmq::Error::EHOSTUNREACH => SendFailure::HostUnreachable,
                    zmq::Error::EAGAIN => {
                        if eagain_log.allow(start.elapsed().as_micros() as u64) {
                            log::warn!(
                                "{}: peer {} is not reading (send buffer full)",
                                socket.name(),
                                String::from_utf8_lossy(&identity)
                            );
                        }
                        SendFailure::WouldBlock
                    }
                    other => SendFailure::Other(other.to_string()),
                };
                failed.push(Input::SendFailed {
                    socket,
                    identity,
                    reason,
                });
            }
        }
        let now = start.elapsed().as_micros() as u64;
        for input in failed.drain(..) {
            router.handle(input, now, out);
        }
    }
    exit
}

fn run(cli: Cli) -> Result<(), String> {
    let settings = Settings::load("router").map_err(|e| e.to_string())?;
    let mut opts = Options::resolve(cli, &settings)?;
    let start = Instant::now();
    opts.core.epoch_unix_micros = unix_micros();

    let mut journal = match &opts.journal {
        None => None,
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            Some(emq_journal::Journal::open(path).map_err(|e| e.to_string())?)
        }
    };

    let ctx = zmq::Context::new();
    let sock_opts = SocketOptions::default();
    let bind = |endpoint: &str, what: &str| {
        emq_transport::bind_router(&ctx, endpoint, &sock_opts).map_err(|e| format!("{what}: {e}"))
    };
    let socks = Sockets {
        frontend: bind(&opts.frontend, "frontend")?,
        backend: bind(&opts.backend, "backend")?,
        admin: bind(&opts.admin, "admin")?,
    };
    let shown = |s: &zmq::Socket, fallback: &str| {
        s.get_last_endpoint()
            .ok()
            .and_then(|e| e.ok())
            .unwrap_or_else(|| fallback.to_string())
    };
    log::info!(
        "listening: frontend {} (clients, schedulers)",
        shown(&socks.frontend, &opts.frontend)
    );
    log::info!(
        "listening: backend {} (workers)",
        shown(&socks.backend, &opts.backend)
    );
    log::info!(
        "listening: admin {} (admin tools)",
        shown(&socks.admin, &opts.admin)
    );
    let flag = emq_transport::shutdown_flag().map_err(|e| format!("signal handlers: {e}"))?;

    let mut router = Router::new(opts.core.clone());
    let mut out: Vec<Action> = Vec::with_capacity(1024);
    let mut eagain_log = LogLimiter::new("send-buffer-full warnings", 20);
    if let Some(j) = journal.as_ref() {
        let jobs = j.load_unfinished().map_err(|e| e.to_string())?;
        let now = start.elapsed().as_micros() as u64;
        let n = router.restore(jobs.into_iter().map(from_journal), now, &mut out);
        log::info!(
            "journal {}: {n} unfinished job(s) queued again",
            opts.journal
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        );
    } else {
        log::info!("no journal (--journal none): buffered jobs are lost if the router stops");
    }
    execute(
        &mut router,
        &socks,
        &mut journal,
        &mut out,
        start,
        &mut eagain_log,
    );

    let mut next_tick = Duration::ZERO;
    loop {
        let elapsed = start.elapsed();
        let timeout = next_tick.saturating_sub(elapsed).min(TICK);
        let mut items = [
            socks.frontend.as_poll_item(zmq::POLLIN),
            socks.backend.as_poll_item(zmq::POLLIN),
            socks.admin.as_poll_item(zmq::POLLIN),
        ];
        let ready = match zmq::poll(&mut items, timeout.as_millis() as i64) {
            Ok(_) => [
                items[0].is_readable(),
                items[1].is_readable(),
                items[2].is_readable(),
            ],
            Err(zmq::Error::EINTR) => [false; 3],
            Err(e) => return Err(format!("poll failed: {e}")),
        };
        let now = start.elapsed().as_micros() as u64;
        for (i, socket) in [Socket::Frontend, Socket::Backend, Socket::Admin]
            .into_iter()
            .enumerate()
        {
            if !ready[i] {
                continue;
            }
            let sock = socks.get(socket);
            for _ in 0..READ_BATCH {
                match sock.recv_multipart(zmq::DONTWAIT) {
                    Ok(frames) => router.handle(Input::Frames { socket, frames }, now, &mut out),
                    Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                    Err(e) => {
                        log::error!("{}: receive failed: {e}", socket.name());
                        break;
                    }
                }
            }
        }
        if start.elapsed() >= next_tick {
            next_tick = start.elapsed() + TICK;
            router.handle(Input::Tick, now, &mut out);
        }
        if emq_transport::shutdown_requested(&flag) && !router.is_draining() {
            log::info!("shutdown signal received");
            router.handle(Input::Shutdown, now, &mut out);
        }
        if execute(
            &mut router,
            &socks,
            &mut journal,
            &mut out,
            start,
            &mut eagain_log,
        ) {
            break;
        }
    }

    let buffered = router.buffered_count() + router.delayed_count();
    let inflight = router.inflight_count();
    if buffered + inflight > 0 {
        if journal.is_some() {
            log::info!(
                "exiting: {buffered} buffered and {inflight} in-flight job(s) stay in the journal"
            );
        } else {
            log::warn!(
                "exiting: {buffered} buffered and {inflight} in-flight job(s) are lost (no journal)"
            );
        }
    } else {
        log::info!("exiting: no unfinished jobs");
    }
    // Closing the sockets flushes the KBYEs (linger).
    drop(socks);
    Ok(())
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("emq-router: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        let env: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // No EVENTMQ_CONFIG_FILE: the default file is optional; a section
        // name no file uses keeps the host's /etc/eventmq.conf out of it.
        Settings::load_from("emq-router-test-no-section", &env).unwrap()
    }

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("emq-router").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn defaults_match_the_cli_contract() {
        let o = Options::resolve(cli(&[]), &settings(&[])).unwrap();
        assert_eq!(o.frontend, DEFAULT_FRONTEND);
        assert_eq!(o.backend, DEFAULT_BACKEND);
        assert_eq!(o.admin, DEFAULT_ADMIN);
        assert_eq!(o.core.hwm, 10_000);
        assert_eq!(o.core.heartbeat_interval, 3_000_000);
        assert_eq!(o.core.heartbeat_liveness, 3);
        assert_eq!(o.core.max_attempts, 5);
        assert!(o.journal.is_none() && !o.core.journal);
        assert_eq!(o.core.default_queues, QueueSpec::default());
    }

    #[test]
    fn environment_applies_and_flags_win() {
        let s = settings(&[
            ("EVENTMQ_FRONTEND_ADDR", "tcp://127.0.0.1:1"),
            ("EVENTMQ_BACKEND_ADDR", "tcp://127.0.0.1:2"),
            ("EVENTMQ_ADMINISTRATIVE_ADDR", "tcp://127.0.0.1:3"),
            ("EVENTMQ_HWM", "7"),
            ("EVENTMQ_HEARTBEAT_INTERVAL", "1.5"),
            ("EVENTMQ_QUEUES", r#"[[20, "high"], [10, "default"]]"#),
        ]);
        let o =
            Options::resolve(cli(&["--frontend", "tcp://127.0.0.1:9", "--hwm", "8"]), &s).unwrap();
        assert_eq!(o.frontend, "tcp://127.0.0.1:9");
        assert_eq!(o.backend, "tcp://127.0.0.1:2");
        assert_eq!(o.admin, "tcp://127.0.0.1:3");
        assert_eq!(o.core.hwm, 8);
        assert_eq!(o.core.heartbeat_interval, 1_500_000);
        assert_eq!(o.core.default_queues.0[0], (20, "high".to_string()));
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let e = Options::resolve(cli(&[]), &settings(&[("EVENTMQ_HWM", "lots")])).unwrap_err();
        assert!(e.contains("HWM") && e.contains("lots"), "{e}");
        let e = Options::resolve(cli(&["--backend", "localhost:1"]), &settings(&[])).unwrap_err();
        assert!(e.contains("tcp://"), "{e}");
        assert!(Options::resolve(cli(&["--heartbeat-interval", "0"]), &settings(&[])).is_err());
        assert!(Options::resolve(cli(&["--max-attempts", "0"]), &settings(&[])).is_err());
        assert!(Cli::try_parse_from(["emq-router", "--hwm", "-1"]).is_err());
    }

    #[test]
    fn journal_flag_selects_a_file_or_none() {
        let o = Options::resolve(cli(&["--journal", "/tmp/x/j.sqlite"]), &settings(&[])).unwrap();
        assert_eq!(o.journal, Some(PathBuf::from("/tmp/x/j.sqlite")));
        assert!(o.core.journal);
        let o = Options::resolve(
            cli(&["--journal", "none"]),
            &settings(&[("EVENTMQ_JOURNAL", "/tmp/y")]),
        )
        .unwrap();
        assert!(o.journal.is_none());
    }

    #[test]
    fn journal_records_round_trip() {
        let j = StoredJob {
            id: 3,
            msgid: "m".into(),
            client: vec![1, 2],
            queue: "odd".into(),
            route: "default".into(),
            headers: b"reply-requested".to_vec(),
            payload: b"[]".to_vec(),
            attempts: 0,
            accepted_at: 1_700_000_000_123_000,
        };
        let emq_journal::JournalOp::Accepted(rec) = to_journal(JournalOp::Accepted(j.clone()))
        else {
            panic!()
        };
        assert_eq!(rec.accepted_at_unix_ms, 1_700_000_000_123);
        let back = from_journal(rec);
        assert_eq!(back, StoredJob { id: 0, ..j });
    }
}
