//! The job manager as a library: configure it, register Rust handlers,
//! run it. The loop here only moves data between the DEALER socket, the
//! [`Connection`] core and the [`Pool`].
//!
//! The DEALER is watched with libzmq's socket monitor
//! ([`emq_transport::failover::LinkWatch`]): a lost connection goes to the
//! core as [`Input::LinkDown`] (a TCP reset loses the frames in transit,
//! and libzmq would heal it under the same identity, so neither side would
//! notice otherwise). The monitor is stopped before its watch is dropped,
//! whenever the socket is replaced or closed (`Link`'s `Drop`).
//!
//! The service manager (systemd, `Type=notify`) is told READY when the
//! pool is up and the first connection is made (its status line names
//! the router; it changes on each reconnect) and STOPPING when a shutdown
//! begins (`emq_cli_support::service`; nothing without `NOTIFY_SOCKET`,
//! which job processes do not inherit).
//!
//! ```no_run
//! use emq_jobmanager::JobManager;
//! let code = JobManager::builder()
//!     .broker("tcp://127.0.0.1:47290")
//!     .concurrency(8)
//!     .handler("add", |args: serde_json::Value| {
//!         Ok(serde_json::json!(args[0].as_i64().unwrap_or(0) + args[1].as_i64().unwrap_or(0)))
//!     })
//!     .build()
//!     .unwrap()
//!     .run_until_signal()
//!     .unwrap();
//! std::process::exit(code);
//! ```

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use emq_transport::failover::{LinkEvent, LinkWatch};
use emq_transport::SocketOptions;
use emqp_proto::{Message, QueueSpec};
use log::{debug, info, warn};
use serde_json::Value;

use crate::connection::{Action, Config, Connection, Input, Prefetch};
use crate::handlers::Handlers;
use crate::pool::{Pool, PoolConfig, PoolEvent, Waker};
use crate::python::PythonConfig;
use crate::traces::RunSpans;

/// The default router backend endpoint.
pub const DEFAULT_BROKER: &str = "tcp://127.0.0.1:47290";

/// Why a job manager could not be built or stopped running.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot work ([`JobManagerBuilder::build`]).
    Config(ConfigError),
    /// The system refused a resource the job manager needs: signal
    /// handlers, the wake-up socket pair, slot threads.
    Io {
        /// What the job manager was doing.
        context: &'static str,
        source: std::io::Error,
    },
    /// A ZeroMQ call failed: connecting the DEALER, polling.
    Zmq {
        /// What the job manager was doing.
        context: String,
        detail: String,
    },
}

/// What is wrong with a [`ManagerConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    NoBroker,
    /// A broker endpoint that ZeroMQ cannot connect to (the reason).
    BadEndpoint(String),
    ZeroConcurrency,
    ZeroHeartbeatInterval,
    ZeroHeartbeatLiveness,
    ZeroMaxJobCount,
    /// `--reload` cannot watch what it was given (the reason).
    Reload(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::NoBroker => write!(f, "no broker address given"),
            ConfigError::BadEndpoint(why) => write!(f, "{why}"),
            ConfigError::ZeroConcurrency => write!(f, "concurrency must be at least 1"),
            ConfigError::ZeroHeartbeatInterval => {
                write!(f, "heartbeat interval must be greater than 0")
            }
            ConfigError::ZeroHeartbeatLiveness => {
                write!(f, "heartbeat liveness must be at least 1")
            }
            ConfigError::ZeroMaxJobCount => write!(f, "max job count must be at least 1"),
            ConfigError::Reload(why) => write!(f, "{why}"),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Config(e) => write!(f, "{e}"),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::Zmq { context, detail } => write!(f, "{context}: {detail}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Error {
        Error::Config(e)
    }
}

fn io(context: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

/// Everything a job manager needs to run. `Debug` does not show the
/// password.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// The connection core's settings: brokers, queues, concurrency,
    /// heartbeats, ACK timeout, reconnect delay, grace period, maximum
    /// message size, default job timeout. [`JobManager::run`] sets its
    /// `id_seed` and `unix_micros_at_start`.
    pub connection: Config,
    pub python: PythonConfig,
    /// ZMQ PLAIN credentials `(username, password)` for a router that
    /// requires them (`--plain-users`); `None`: no authentication.
    pub plain: Option<emq_transport::PlainCredentials>,
    /// CURVE keys (the router's public key, our key pair) for a router
    /// whose backend is a CURVE socket; wins over `plain`.
    pub curve: Option<emq_transport::curve::CurveClient>,
    /// The OTLP/HTTP traces URL (`--otlp-endpoint`, see
    /// `emq_cli_support::OtlpArgs`); `None`: no spans (`traces.rs`).
    pub traces_url: Option<String>,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        let mut connection = Config::new(vec![DEFAULT_BROKER.into()], QueueSpec::default(), 4);
        // The binary's and the library's default; the core's own default
        // (`Config::new`) is off, for its unit tests.
        connection.prefetch = Prefetch::adaptive();
        ManagerConfig {
            connection,
            python: PythonConfig::default(),
            plain: None,
            curve: None,
            traces_url: None,
        }
    }
}

/// Builds a [`JobManager`].
#[derive(Debug, Clone, Default)]
pub struct JobManagerBuilder {
    cfg: ManagerConfig,
    handlers: Handlers,
}

impl JobManagerBuilder {
    /// One router backend endpoint (replaces the list).
    pub fn broker(mut self, endpoint: impl Into<String>) -> Self {
        self.cfg.connection.brokers = vec![endpoint.into()];
        self
    }

    /// A failover list of router backends, tried in turn on reconnects.
    pub fn brokers(mut self, endpoints: Vec<String>) -> Self {
        self.cfg.connection.brokers = endpoints;
        self
    }

    pub fn queues(mut self, queues: QueueSpec) -> Self {
        self.cfg.connection.queues = queues;
        self
    }

    pub fn concurrency(mut self, n: usize) -> Self {
        self.cfg.connection.concurrency = n;
        self
    }

    pub fn python(mut self, python: PythonConfig) -> Self {
        self.cfg.python = python;
        self
    }

    pub fn heartbeat(mut self, interval: Duration, liveness: u32) -> Self {
        self.cfg.connection.heartbeat_interval = interval;
        self.cfg.connection.heartbeat_liveness = liveness;
        self
    }

    pub fn grace_period(mut self, d: Duration) -> Self {
        self.cfg.connection.grace_period = d;
        self
    }

    /// The router's maximum message size in bytes (`None`: no limit);
    /// results bigger than this are replied as `result-too-large`.
    pub fn max_message_size(mut self, bytes: Option<usize>) -> Self {
        self.cfg.connection.max_message_size = bytes;
        self
    }

    /// The timeout of a job that names none (0.3.13's `GLOBAL_TIMEOUT`,
    /// default 300 s); `None`: none.
    pub fn default_timeout(mut self, d: Option<Duration>) -> Self {
        self.cfg.connection.default_timeout = d;
        self
    }

    /// Connect as a ZMQ PLAIN client with these credentials.
    pub fn plain_credentials(
        mut self,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        self.cfg.plain = Some(emq_transport::PlainCredentials::new(username, password));
        self
    }

    /// The credit window beyond the free slots: [`Prefetch::Off`] for one
    /// READY per free slot, fixed, or adaptive (the default).
    pub fn prefetch(mut self, prefetch: Prefetch) -> Self {
        self.cfg.connection.prefetch = prefetch;
        self
    }

    /// Connect as a CURVE client with these keys.
    pub fn curve(mut self, keys: emq_transport::curve::CurveClient) -> Self {
        self.cfg.curve = Some(keys);
        self
    }

    pub fn config(mut self, cfg: ManagerConfig) -> Self {
        self.cfg = cfg;
        self
    }

    /// Register a handler for `["call", {"handler": name, "args": ...}]`
    /// jobs, run on the job's slot thread.
    pub fn handler<F>(mut self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    {
        self.handlers.register(name, f);
        self
    }

    /// Register a handler run inline on the socket loop's thread, with no
    /// hand-off to a slot thread: for handlers that return in
    /// microseconds and never block (see [`crate::handlers`]).
    pub fn inline_handler<F>(mut self, name: impl Into<String>, f: F) -> Self
    where
        F: Fn(Value) -> Result<Value, String> + Send + Sync + 'static,
    {
        self.handlers.register_inline(name, f);
        self
    }

    pub fn handlers(mut self, handlers: Handlers) -> Self {
        self.handlers = handlers;
        self
    }

    /// Check the configuration.
    pub fn build(self) -> Result<JobManager, Error> {
        let c = &self.cfg.connection;
        if c.brokers.is_empty() {
            return Err(ConfigError::NoBroker.into());
        }
        for b in &c.brokers {
            emq_transport::check_endpoint(b)
                .map_err(|e| ConfigError::BadEndpoint(e.to_string()))?;
        }
        if c.concurrency == 0 {
            return Err(ConfigError::ZeroConcurrency.into());
        }
        if c.heartbeat_interval.is_zero() {
            return Err(ConfigError::ZeroHeartbeatInterval.into());
        }
        if c.heartbeat_liveness == 0 {
            return Err(ConfigError::ZeroHeartbeatLiveness.into());
        }
        if self.cfg.python.max_job_count == 0 {
            return Err(ConfigError::ZeroMaxJobCount.into());
        }
        Ok(JobManager {
            cfg: self.cfg,
            handlers: self.handlers,
        })
    }
}

/// A configured job manager; [`JobManager::run`] runs it.
pub struct JobManager {
    cfg: ManagerConfig,
    handlers: Handlers,
}

fn unix_micros_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

impl JobManager {
    pub fn builder() -> JobManagerBuilder {
        JobManagerBuilder::default()
    }

    pub fn config(&self) -> &ManagerConfig {
        &self.cfg
    }

    /// Run until SIGTERM/SIGINT/SIGQUIT (then leave in order) or a fatal
    /// error. Returns the exit code.
    pub fn run_until_signal(self) -> Result<i32, Error> {
        let signal =
            emq_transport::ShutdownSignal::install().map_err(io("installing signal handlers"))?;
        self.run(&signal)
    }

    /// Run until `shutdown` is signalled (then leave in order) or a fatal
    /// error. Returns the exit code.
    ///
    /// The loop: carry out the core's actions (a failed send goes back in
    /// as [`Input::SendFailed`]), then sleep in `zmq::poll` until a message
    /// arrives, a Python worker lent to the loop writes (the pool's lean
    /// path: its answer or progress is read here, no thread hand-off), a
    /// pool event or the shutdown signal's descriptor wakes it,
    /// or the core's [`Connection::poll_timeout`] is reached — then
    /// [`Connection::handle_timeout`]. No other wake-up: an idle job
    /// manager wakes for its heartbeats only.
    pub fn run(self, shutdown: &emq_transport::ShutdownSignal) -> Result<i32, Error> {
        let ManagerConfig {
            connection: mut core_cfg,
            python,
            plain,
            curve,
            traces_url,
        } = self.cfg;
        let mut spans = match &traces_url {
            Some(url) => Some(RunSpans::new(
                emq_otel::Tracing::start(url, "emq-jobmanager").map_err(|e| Error::Io {
                    context: "starting the OTLP exporter",
                    source: std::io::Error::other(e),
                })?,
            )),
            None => None,
        };
        core_cfg.id_seed = emqp_proto::msgid::random_seed();
        core_cfg.unix_micros_at_start = unix_micros_now();
        // Who we are, for `emq-cli workers` and the dashboard (the name
        // comes from --name; the rest is this process's).
        let about = &mut core_cfg.about;
        about.host = about.host.take().or_else(hostname);
        about.pid = about.pid.or(Some(std::process::id()));
        about.slots = about.slots.or(Some(core_cfg.concurrency as u64));
        about.version = about
            .version
            .take()
            .or_else(|| Some(env!("CARGO_PKG_VERSION").to_string()));
        let start = Instant::now();
        let (concurrency, prefetch, queues, brokers, max_message_size, default_timeout) = (
            core_cfg.concurrency,
            core_cfg.prefetch,
            core_cfg.queues.to_inform_json(),
            core_cfg.brokers.join(","),
            core_cfg.max_message_size,
            core_cfg.default_timeout,
        );
        let mut core = Connection::new(core_cfg);

        let (wake_rx, wake_tx) = UnixStream::pair().map_err(io("creating the wake-up socket"))?;
        wake_rx
            .set_nonblocking(true)
            .map_err(io("creating the wake-up socket"))?;
        wake_tx
            .set_nonblocking(true)
            .map_err(io("creating the wake-up socket"))?;
        // One wake-up per batch of pool events: a slot thread writes to the
        // socket only when no wake-up is pending; the loop clears the flag
        // and then drains every queued event.
        let wake_pending = Arc::new(AtomicBool::new(false));
        let waker: Waker = {
            let pending = Arc::clone(&wake_pending);
            Arc::new(move || {
                use std::io::Write;
                if !pending.swap(true, Ordering::AcqRel) {
                    let _ = (&wake_tx).write(&[1]);
                }
            })
        };
        if !python.reload_dirs.is_empty() {
            crate::reload::watch(&python.reload_dirs, python.code_version.clone())
                .map_err(|e| Error::Config(ConfigError::Reload(e)))?;
        }
        let pool = Pool::new(
            PoolConfig {
                concurrency,
                python,
                handlers: self.handlers,
            },
            Some(waker),
        )
        .map_err(io("starting the slot threads"))?;
        info!(
            "emq-jobmanager {}: {concurrency} slot(s), credit window {prefetch}, queues {queues}, \
             brokers {brokers}, max message size {}, default job timeout {}",
            env!("CARGO_PKG_VERSION"),
            match max_message_size {
                Some(n) => format!("{n} bytes"),
                None => "unlimited".to_string(),
            },
            match default_timeout {
                Some(t) => format!("{} s", t.as_secs_f64()),
                None => "none".to_string(),
            }
        );

        if let Some(c) = &curve {
            info!(
                "CURVE: router key {}, our public key {}",
                c.server_key, c.own.public
            );
        } else if let Some(p) = &plain {
            info!(
                "authenticating to the router as PLAIN user {:?}",
                p.username
            );
        }
        let ctx = zmq::Context::new();
        let opts = SocketOptions {
            plain,
            curve,
            ..SocketOptions::default()
        };
        let mut link: Option<Link> = None;
        let mut shutdown_seen = false;
        let mut actions = Vec::new();
        core.start(start.elapsed(), &mut actions);
        // Inputs produced while carrying out `actions` (outcomes of jobs
        // run inline, sends that failed), fed to the core before the next
        // poll.
        let mut feedback: Vec<Input> = Vec::new();
        let mut frame_buf = zmq::Message::new();
        // The sockets of the Python workers lent to this loop (the pool's
        // lean path), and which of them are readable.
        let mut lean_fds = Vec::new();
        let mut lean_ready = Vec::new();
        loop {
            for action in actions.drain(..) {
                match action {
                    Action::Connect { endpoint, identity } => {
                        if let Some(old) = link.take() {
                            let _ = old.sock.set_linger(0);
                        }
                        link = Some(Link::open(&ctx, &endpoint, &identity, &opts)?);
                        info!("connected to {endpoint} as {identity}");
                        emq_cli_support::service::ready(&format!(
                            "connected to {endpoint} ({concurrency} slot(s))"
                        ));
                    }
                    Action::Send(msg) => {
                        if let Some(message) = send(link.as_ref().map(|l| &l.sock), msg) {
                            feedback.push(Input::SendFailed { message });
                        }
                    }
                    Action::StartJob(mut job) => {
                        debug!(
                            "starting job {} on slot {} (run {})",
                            job.msgid, job.slot, job.run
                        );
                        if let Some(s) = spans.as_mut() {
                            s.start(&mut job);
                        }
                        match pool.run_inline(&mut job) {
                            Some(outcome) => {
                                if let Some(s) = spans.as_mut() {
                                    s.finish(job.run, &outcome);
                                }
                                feedback.push(Input::JobFinished {
                                    slot: job.slot,
                                    run: job.run,
                                    outcome,
                                })
                            }
                            None => pool.start(job),
                        }
                    }
                    Action::CancelJob { slot, run, reason } => {
                        debug!("stopping run {run} on slot {slot} ({reason:?})");
                        pool.cancel(slot, run)
                    }
                    Action::KillAll => pool.kill_all(),
                    Action::Exit(code) => {
                        drop(pool);
                        // Closing with linger lets KBYE and the last REPLYs out.
                        drop(link);
                        if let Some(s) = &spans {
                            s.shutdown();
                        }
                        info!("exiting with status {code}");
                        return Ok(code);
                    }
                }
            }
            if !feedback.is_empty() {
                // Their REPLYs and READYs go out with the next batch.
                let now = start.elapsed();
                for input in feedback.drain(..) {
                    core.handle(input, now, &mut actions);
                }
                continue;
            }
            if !shutdown_seen && shutdown.requested() {
                shutdown_seen = true;
                emq_cli_support::service::stopping("stopping: finishing running jobs");
                core.handle(Input::Shutdown, start.elapsed(), &mut actions);
                continue;
            }
            let now = start.elapsed();
            let deadline = core.poll_timeout();
            if deadline.is_some_and(|d| now >= d) {
                core.handle_timeout(now, &mut actions);
                continue;
            }
            let wait = deadline.map(|d| d - now);

            let (wake_readable, sock_readable, watch_readable) = {
                let wake_item = zmq::PollItem::from_fd(wake_rx.as_raw_fd(), zmq::POLLIN);
                let mut items = vec![wake_item, shutdown.poll_item()];
                if let Some(l) = &link {
                    items.push(l.sock.as_poll_item(zmq::POLLIN));
                    items.push(l.watch.socket().as_poll_item(zmq::POLLIN));
                }
                let first_lean = items.len();
                pool.lean_fds(&mut lean_fds);
                for (_, fd) in &lean_fds {
                    items.push(zmq::PollItem::from_fd(*fd, zmq::POLLIN));
                }
                emq_transport::poll::poll(&mut items, wait).map_err(|e| Error::Zmq {
                    context: "polling".into(),
                    detail: e.to_string(),
                })?;
                let ready = |i: usize| items.get(i).is_some_and(|it| it.is_readable());
                lean_ready.clear();
                for (i, (slot, _)) in lean_fds.iter().enumerate() {
                    let it = &items[first_lean + i];
                    // A closed socket may show as an error or hang-up only.
                    if it.is_readable() || it.is_error() {
                        lean_ready.push(*slot);
                    }
                }
                let sock = if link.is_some() {
                    (ready(2), ready(3))
                } else {
                    (false, false)
                };
                (ready(0), sock.0, sock.1)
            };
            // The answers (and progress) of the lean runs, queued as pool
            // events and handed to the core below.
            for slot in lean_ready.drain(..) {
                pool.lean_readable(slot);
            }
            let now = start.elapsed();
            if sock_readable {
                if let Some(l) = &link {
                    // Everything the router sent so far, before any output.
                    loop {
                        match emq_transport::recv_frames(&l.sock, &mut frame_buf) {
                            Ok(frames) => core.handle(Input::Frames(frames), now, &mut actions),
                            Err(zmq::Error::EAGAIN) => break,
                            Err(zmq::Error::EINTR) => continue,
                            Err(e) => {
                                warn!("receive failed: {e}");
                                break;
                            }
                        }
                    }
                }
            }
            if watch_readable {
                // After the frames read above: what arrived before the
                // connection went down is the router's.
                if let Some(l) = &link {
                    for input in l.events() {
                        core.handle(input, now, &mut actions);
                    }
                }
            }
            if wake_readable {
                let mut buf = [0u8; 256];
                while matches!((&wake_rx).read(&mut buf), Ok(n) if n > 0) {}
            }
            // Clear the flag before draining: an event queued after this
            // point writes a fresh wake-up.
            wake_pending.swap(false, Ordering::AcqRel);
            while let Ok(ev) = pool.events().try_recv() {
                match ev {
                    // Handed in at the instant it happened (it woke
                    // nothing): a job's timeout counts from its start.
                    PoolEvent::Started { slot, run, at } => core.handle(
                        Input::JobStarted { slot, run },
                        at.saturating_duration_since(start).min(now),
                        &mut actions,
                    ),
                    PoolEvent::Progress {
                        slot,
                        run,
                        percent,
                        message,
                    } => core.handle(
                        Input::JobProgress {
                            slot,
                            run,
                            percent,
                            message,
                        },
                        now,
                        &mut actions,
                    ),
                    PoolEvent::Finished { slot, run, outcome } => {
                        if let Some(s) = spans.as_mut() {
                            s.finish(run, &outcome);
                        }
                        core.handle(Input::JobFinished { slot, run, outcome }, now, &mut actions)
                    }
                }
            }
        }
    }
}

/// The DEALER of one connection and the monitor watching it.
struct Link {
    sock: zmq::Socket,
    watch: LinkWatch,
    /// The connection's identity, named in [`Input::LinkDown`].
    identity: String,
    endpoint: String,
}

impl Link {
    /// A DEALER with `identity`, watched from before it connects.
    fn open(
        ctx: &zmq::Context,
        endpoint: &str,
        identity: &str,
        opts: &SocketOptions,
    ) -> Result<Link, Error> {
        let err = |e: Box<dyn std::error::Error + Send + Sync>| Error::Zmq {
            context: format!("connecting to {endpoint}"),
            detail: e.to_string(),
        };
        let sock = emq_transport::failover::dealer(ctx, identity.as_bytes(), opts).map_err(err)?;
        let watch = LinkWatch::new(ctx, &sock).map_err(|e| Error::Zmq {
            context: format!("watching the connection to {endpoint}"),
            detail: e.to_string(),
        })?;
        let link = Link {
            sock,
            watch,
            identity: identity.to_string(),
            endpoint: endpoint.to_string(),
        };
        emq_transport::connect_all(&link.sock, &[endpoint.to_string()]).map_err(err)?;
        Ok(link)
    }

    /// The watch's events, as inputs for the core: a lost connection
    /// names this link's identity (the core ignores it once it has moved
    /// on to another connection).
    fn events(&self) -> Vec<Input> {
        let mut inputs = Vec::new();
        for e in self.watch.events() {
            match e {
                LinkEvent::Up(ep) => debug!("connection to {ep} up ({})", self.identity),
                LinkEvent::Down(ep) => {
                    warn!(
                        "connection to {ep} lost ({}); frames in transit may be lost",
                        self.identity
                    );
                    inputs.push(Input::LinkDown {
                        identity: self.identity.clone(),
                    });
                }
            }
        }
        inputs
    }
}

impl Drop for Link {
    /// The monitor is stopped before its reader goes (see
    /// `emq_transport::failover`): libzmq's I/O thread would otherwise
    /// block for good on an event nobody reads.
    fn drop(&mut self) {
        if let Err(e) = self.watch.stop(&self.sock) {
            warn!("stopping the monitor of {}: {e}", self.endpoint);
        }
    }
}

/// Send `msg` without blocking. `Some(msg)` back when it could not be sent
/// (no socket, EAGAIN at the high-water mark, any error), for the core.
fn send(sock: Option<&zmq::Socket>, msg: Message) -> Option<Message> {
    let Some(s) = sock else {
        warn!("no socket; cannot send {}", msg.command.name());
        return Some(msg);
    };
    let frames = msg.encode();
    // The first frame decides: libzmq takes a multipart message whole or
    // not at all, so a refused first frame leaves `frames` intact.
    let n = frames.len();
    let first_flags = zmq::DONTWAIT | if n > 1 { zmq::SNDMORE } else { 0 };
    if let Err(e) = s.send(&frames[0][..], first_flags) {
        let Ok(back) = Message::decode(frames) else {
            warn!("cannot send a message ({e}), and it does not decode again; dropped");
            return None;
        };
        if e == zmq::Error::EAGAIN {
            debug!("cannot send {} now (high-water mark)", back.command.name());
        } else {
            warn!("cannot send {}: {e}", back.command.name());
        }
        return Some(back);
    }
    let rest: Vec<Vec<u8>> = frames.into_iter().skip(1).collect();
    if !rest.is_empty() {
        if let Err(e) = emq_transport::send_frames(s, None, rest, zmq::DONTWAIT) {
            warn!("a message was cut short while sending: {e}");
        }
    }
    None
}

/// This machine's host name (Linux: /proc/sys/kernel/hostname), else
/// `$HOSTNAME`; `None` when neither says.
fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}
