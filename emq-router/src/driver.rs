//! The driver: the sockets, the journal store and the poll loop that runs
//! the core in the call order it documents (see the crate documentation
//! in `main.rs`).
//!
//! With a PostgreSQL journal the router runs in terms: it waits as a
//! standby (no socket bound) until it holds the leader lease (`ha.rs`),
//! then serves — loads the journal, binds, runs the loop, renewing the
//! lease on its timer — until it stops (shutdown: the lease is released)
//! or loses the lease (KBYE to every peer, sockets closed, back to
//! standby). Other stores serve one term.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use emq_cli_support::Exit;
use emq_journal::postgres::{PgJournal, PgOptions};
use emq_journal::JournalTarget;
use emq_router_core::journal::{Batch, BatchResult, JournalStore, Restored};
use emq_router_core::lease::StepDownReason;
use emq_router_core::util::LogLimiter;
use emq_router_core::{Action, Input, Router, SendFailure, Socket};
use emq_transport::{ReloadSignal, ShutdownSignal, SocketOptions};

use crate::flags::Plan;
use crate::ha::Ha;
use crate::pg_writer::{PgWriter, Reply, Request};

/// Most messages read from one socket per poll round (fairness).
const READ_BATCH: usize = 4096;
/// How often the metrics text is rendered (when --metrics is on).
const METRICS_EVERY: Duration = Duration::from_millis(500);
/// How long a router stepping down gives its KBYEs to leave.
const STEP_DOWN_LINGER_MS: i32 = 200;

fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Why `run` failed: the message and the exit code
/// ([`Exit::JournalUnusable`]: the journal cannot be used;
/// [`Exit::Internal`]: anything else).
pub(crate) struct Fail(pub(crate) Exit, pub(crate) String);

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail(Exit::Internal, s)
    }
}

fn journal_fail(e: emq_journal::JournalError) -> Fail {
    Fail(
        Exit::JournalUnusable,
        format!(
            "journal unusable: {e} (fix or move the file, pass --journal PATH for another \
             file, or --journal none to run without one)"
        ),
    )
}

fn pg_fail(e: emq_journal::postgres::PgError) -> Fail {
    Fail(
        Exit::JournalUnusable,
        format!("journal unusable: {e} (check --journal URL and that the database is up)"),
    )
}

/// The journal store of this router. SQLite commits on the loop's thread;
/// PostgreSQL on a thread of its own (`pg_writer.rs`), outcomes coming
/// back through the loop.
enum Store {
    None,
    Sqlite(Box<emq_journal::Journal>),
    Postgres(Box<PgWriter>),
}

impl Store {
    fn is_some(&self) -> bool {
        !matches!(self, Store::None)
    }

    /// Append on the loop's thread (not PostgreSQL: see [`execute`]).
    fn append_here(&mut self, batch: &Batch) -> BatchResult {
        let r = match self {
            Store::None => Ok(()),
            Store::Sqlite(j) => JournalStore::append(&mut **j, batch).map_err(|e| e.to_string()),
            Store::Postgres(_) => Err("the PostgreSQL journal appends on its thread".into()),
        };
        match r {
            Ok(()) => BatchResult::Committed,
            Err(e) => BatchResult::Failed(e),
        }
    }

    fn load(&mut self) -> Result<Option<Restored>, String> {
        match self {
            Store::None => Ok(None),
            Store::Sqlite(j) => JournalStore::load(&mut **j)
                .map(Some)
                .map_err(|e| e.to_string()),
            Store::Postgres(w) => match w.call(Request::Load) {
                Some(Reply::Loaded(r)) => r.map(Some).map_err(|e| e.to_string()),
                other => Err(format!("journal thread: unexpected {other:?}")),
            },
        }
    }

    fn describe(&self) -> String {
        match self {
            Store::None => "none".into(),
            Store::Sqlite(j) => j.describe(),
            Store::Postgres(w) => w.describe().to_string(),
        }
    }

    /// Transactions and records written since open.
    fn counts(&self) -> Option<(u64, u64)> {
        match self {
            Store::None => None,
            Store::Sqlite(j) => j
                .stats()
                .ok()
                .map(|s| (s.batches_appended, s.records_appended)),
            Store::Postgres(w) => Some((w.batches, w.records)),
        }
    }

    fn pg(&mut self) -> Option<&mut PgWriter> {
        match self {
            Store::Postgres(w) => Some(w),
            _ => None,
        }
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

/// Send `frames` to `identity`; a failure becomes a `SendFailed` input.
fn send_or_fail(
    socks: &Sockets,
    socket: Socket,
    identity: Vec<u8>,
    frames: Vec<Vec<u8>>,
    failed: &mut Vec<Input>,
    start: Instant,
    eagain_log: &mut LogLimiter,
) {
    if let Err(e) =
        emq_transport::send_frames(socks.get(socket), Some(&identity), frames, zmq::DONTWAIT)
    {
        let reason = match e {
            zmq::Error::EHOSTUNREACH => SendFailure::HostUnreachable,
            zmq::Error::EAGAIN => {
                if eagain_log.allow(start.elapsed()) {
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

/// Carry out the core's actions in order: sends (failures fed back as
/// `SendFailed`), journal batches (appended, outcome fed back as
/// `JournalDone`; on PostgreSQL a batch may go to the journal thread,
/// whose reply the loop feeds back), until none are left.
fn execute(
    router: &mut Router,
    socks: &Sockets,
    journal: &mut Store,
    out: &mut Vec<Action>,
    start: Instant,
    eagain_log: &mut LogLimiter,
) -> bool {
    let mut exit = false;
    let mut failed: Vec<Input> = Vec::new();
    while !out.is_empty() {
        for a in std::mem::take(out) {
            match a {
                Action::Send {
                    socket,
                    identity,
                    frames,
                } => send_or_fail(
                    socks,
                    socket,
                    identity,
                    frames,
                    &mut failed,
                    start,
                    eagain_log,
                ),
                Action::Journal(batch) => match &mut *journal {
                    Store::Postgres(w) => w.send(Request::Append(batch)),
                    here => {
                        let result = here.append_here(&batch);
                        failed.push(Input::JournalDone {
                            batch: batch.id,
                            result,
                        });
                    }
                },
                Action::Exit => exit = true,
            }
        }
        let now = start.elapsed();
        for input in failed.drain(..) {
            router.handle(input, now, out);
        }
    }
    exit
}

pub(crate) fn run(plan: &Plan) -> Result<(), Fail> {
    let mut opts = plan.clone();
    let start = Instant::now();
    opts.core.epoch_unix_micros = unix_micros();
    opts.core.id_seed = emqp_proto::msgid::random_seed();
    // four random seeds (uuid4 bits from the OS's generator): ~240 bits
    for chunk in opts.core.take_back_secret.chunks_mut(8) {
        chunk.copy_from_slice(&emqp_proto::msgid::random_seed().to_le_bytes());
    }
    let signals = ShutdownSignal::install().map_err(|e| format!("signal handlers: {e}"))?;
    // SIGHUP: the access files are read again (installed once: a router
    // that goes back to standby and serves again keeps the same handler).
    let reload = ReloadSignal::install().map_err(|e| format!("signal handlers: {e}"))?;

    let mut store = match &opts.journal {
        JournalTarget::None => Store::None,
        JournalTarget::Sqlite(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| {
                    Fail(
                        Exit::JournalUnusable,
                        format!("cannot create journal directory {}: {e}", dir.display()),
                    )
                })?;
            }
            log::info!(
                "journal: {}{}",
                path.display(),
                if opts.journal_default {
                    " (default; --journal none for memory only)"
                } else {
                    ""
                }
            );
            Store::Sqlite(Box::new(
                emq_journal::Journal::open(path).map_err(journal_fail)?,
            ))
        }
        JournalTarget::Postgres(url) => {
            // A statement that hangs (a cut network) must end well within
            // the lease TTL: the lease is renewed on this thread.
            let pg_opts = PgOptions {
                connect_timeout: opts.lease.ttl / 2,
                tcp_user_timeout: opts.lease.ttl / 2,
            };
            let pg = PgJournal::open(url, &pg_opts).map_err(pg_fail)?;
            log::info!(
                "journal: {} (PostgreSQL; lease TTL {:?}, renewed every {:?})",
                pg.describe(),
                opts.lease.ttl,
                opts.lease.renew_every
            );
            let w =
                PgWriter::start(pg).map_err(|e| format!("cannot start the journal thread: {e}"))?;
            Store::Postgres(Box::new(w))
        }
    };

    if !store.is_some() {
        if opts.journal_default {
            log::warn!(
                "no journal: no data directory known (set EMQ_DATA_DIR or HOME, or pass --journal PATH); \
                 buffered jobs are lost if the router stops"
            );
        } else {
            log::info!("no journal (--journal none): buffered jobs are lost if the router stops");
        }
    }

    let Store::Postgres(_) = &store else {
        serve(&opts, &mut store, None, start, &signals, &reload)?;
        return Ok(());
    };
    // Leader and standby, in terms.
    let mut ha = Ha::new(opts.lease, start);
    log::info!(
        "standby: waiting for the leader lease as {} (no socket bound until then)",
        ha.holder()
    );
    loop {
        let pg = store.pg().expect("a PostgreSQL store");
        if ha.wait_for_lease(pg, &signals).is_none() {
            log::info!("shutdown signal received while standby: exiting");
            return Ok(());
        }
        match serve(&opts, &mut store, Some(&mut ha), start, &signals, &reload) {
            Ok(Served::Exit) => return Ok(()),
            Ok(Served::SteppedDown) => {
                log::info!("standby: waiting for the leader lease again");
            }
            Err(e) => {
                if let Some(pg) = store.pg() {
                    ha.shutdown(pg);
                }
                return Err(e);
            }
        }
    }
}

/// How a term ended.
enum Served {
    /// Shutdown (signal or DISCONNECT): exit the process.
    Exit,
    /// The lease was lost: back to standby.
    SteppedDown,
}

/// One term: load the journal, bind, serve until the core exits or (with
/// a lease) the lease is lost.
fn serve(
    opts: &Plan,
    store: &mut Store,
    mut ha: Option<&mut Ha>,
    start: Instant,
    signals: &ShutdownSignal,
    reload: &ReloadSignal,
) -> Result<Served, Fail> {
    // Load first: a standby that took over must have the journal before it
    // binds (and a journal that cannot be read stops a lone router).
    let restored = match store.load() {
        Ok(r) => r,
        Err(e) => match (store.pg(), ha.as_deref_mut()) {
            (Some(pg), Some(ha)) => {
                log::error!(
                    "cannot load the journal after taking the lease: {e}; giving the lease up"
                );
                ha.give_up(pg);
                return Ok(Served::SteppedDown);
            }
            _ => {
                return Err(Fail(
                    Exit::JournalUnusable,
                    format!("journal unusable: {e}"),
                ))
            }
        },
    };

    let mut ctx = zmq::Context::new();
    let sock_opts = SocketOptions {
        max_message_size: opts.socket_max_message_size(),
        ..SocketOptions::default()
    };
    for line in &opts.access_warnings {
        log::warn!("{line}");
    }
    // The ZAP handler must be bound before the sockets it guards.
    let zap = if opts.access.is_active() {
        for line in &opts.access_log {
            log::info!("{line}");
        }
        Some(
            emq_transport::zap::spawn_zap_handler(&ctx, opts.access.clone())
                .map_err(|e| format!("cannot start the ZAP handler: {e}"))?,
        )
    } else {
        None
    };
    let access = &opts.access;
    let bind = |endpoint: &str, what: &str| {
        emq_transport::bind_router_with(&ctx, endpoint, &sock_opts, |s| access.apply(s, what))
            .map_err(|e| format!("{what}: {e}"))
    };
    let socks = Sockets {
        frontend: bind(&opts.frontend, "frontend")?,
        backend: bind(&opts.backend, "backend")?,
        admin: bind(&opts.admin, "admin")?,
    };
    // Peers refused by the handshake itself (clear text on a CURVE or
    // PLAIN socket) never reach the ZAP handler: a monitor logs them.
    for (sock, what) in [
        (&socks.frontend, "frontend"),
        (&socks.backend, "backend"),
        (&socks.admin, "admin"),
    ] {
        let mechanism = match access.domains.get(what) {
            Some(d) if d.curve_keys.is_some() => "CURVE",
            Some(d) if d.plain_users.is_some() => "PLAIN",
            _ => continue,
        };
        emq_transport::zap::spawn_handshake_monitor(&ctx, sock, what, mechanism)
            .map_err(|e| format!("{what}: cannot monitor handshakes: {e}"))?;
    }
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
    // The server stops (and its thread is joined) when `_metrics_http` drops.
    let metrics_text = (opts.metrics.is_some() || opts.http.is_some())
        .then(emq_http::metrics::MetricsText::default);
    let _metrics_http = match (&opts.metrics, &metrics_text) {
        (Some(addr), Some(text)) => {
            let server = emq_http::metrics::serve_metrics(addr, text.clone())
                .map_err(|e| format!("--metrics {addr}: {e}"))?;
            log::info!(
                "listening: metrics http://{}/metrics (Prometheus)",
                server.local_addr()
            );
            Some(server)
        }
        _ => None,
    };
    // --http: the dashboard is an admin client of this router, on an extra
    // inproc endpoint of the admin socket (inproc has no ZAP; the HTTP
    // side applies its own access rules). Dropped before the context ends.
    let dashboard = match (&opts.http, &metrics_text) {
        (Some((addr, access)), Some(text)) => {
            socks
                .admin
                .bind(emq_dashboard::INPROC_ADMIN)
                .map_err(|e| format!("admin: cannot bind {}: {e}", emq_dashboard::INPROC_ADMIN))?;
            let d = emq_dashboard::Dashboard::start(
                addr,
                &ctx,
                emq_dashboard::INPROC_ADMIN,
                access.clone(),
                emq_http::metrics::routes(text.clone()),
            )?;
            log::info!(
                "listening: dashboard http://{}/ (API /api/, metrics /metrics{}{})",
                d.local_addr(),
                if access.token.is_some() {
                    "; token required"
                } else {
                    ""
                },
                if access.read_only { "; read-only" } else { "" }
            );
            Some(d)
        }
        _ => None,
    };
    let mut access = opts.access.clone();

    let mut router = Router::new(opts.core.clone());
    let mut out: Vec<Action> = Vec::with_capacity(1024);
    let mut eagain_log = LogLimiter::new("send-buffer-full warnings", 20);
    if let Some(restored) = restored {
        let now = start.elapsed();
        let n = router.restore(restored, now, &mut out);
        log::info!(
            "journal {}: {} unfinished job(s) queued again, {} dead letter(s), {} schedule(s), \
             {} paused queue(s), {} finished job(s), {} undelivered result(s) restored",
            store.describe(),
            n.jobs,
            n.dead_letters,
            n.schedules,
            n.paused_queues,
            n.finished,
            n.results
        );
    }
    let mut lost: Option<StepDownReason> = None;
    execute(&mut router, &socks, store, &mut out, start, &mut eagain_log);

    let mut next_metrics = Duration::ZERO;
    // After a round that read something, the next round reads again at
    // once (non-blocking) instead of polling first: under load messages
    // keep arriving, and a zmq_poll per round is a syscall and a wake-up
    // for few messages. Only a round that found nothing polls, blocking
    // until the core's next deadline.
    let mut busy = false;
    let mut msg = zmq::Message::new();
    while lost.is_none() {
        if !busy {
            // Sleep until input, a signal, the core's or the lease's next
            // deadline, or (with --metrics) the next render of the metrics
            // text.
            let now = start.elapsed();
            let mut deadline = router.poll_timeout();
            if let Some(t) = ha.as_deref().and_then(Ha::poll_timeout) {
                deadline = Some(deadline.map_or(t, |d| d.min(t)));
            }
            let mut timeout = deadline.map(|t| t.saturating_sub(now));
            if metrics_text.is_some() {
                let m = next_metrics.saturating_sub(start.elapsed());
                timeout = Some(timeout.map_or(m, |t| t.min(m)));
            }
            let timeout_ms = match timeout {
                Some(t) => i64::try_from(t.as_micros().div_ceil(1000)).unwrap_or(i64::MAX),
                None => -1,
            };
            let mut items = vec![
                socks.frontend.as_poll_item(zmq::POLLIN),
                socks.backend.as_poll_item(zmq::POLLIN),
                socks.admin.as_poll_item(zmq::POLLIN),
                signals.poll_item(),
                reload.poll_item(),
            ];
            if let Some(w) = store.pg() {
                items.push(w.poll_item());
            }
            match zmq::poll(&mut items, timeout_ms) {
                Ok(_) | Err(zmq::Error::EINTR) => {}
                Err(e) => return Err(format!("poll failed: {e}").into()),
            }
        }
        busy = false;
        // The lease first: a router whose lease ran out must not take in
        // (or answer) anything more. Then what the journal thread did.
        if let (Some(h), Some(w)) = (ha.as_deref_mut(), store.pg()) {
            if let Some(reason) = h.due(w).step_down {
                lost = Some(reason);
                break;
            }
            let now = start.elapsed();
            while let Some(reply) = w.try_recv() {
                busy = true;
                match reply {
                    // Taken over: the batch is neither acknowledged nor
                    // refused; the router steps down.
                    Reply::Appended { result: Err(e), .. } if e.is_fenced() => {
                        lost = Some(h.fenced(w).step_down.unwrap_or(StepDownReason::Fenced));
                    }
                    Reply::Appended { batch, result, .. } => {
                        let result = match result {
                            Ok(()) => BatchResult::Committed,
                            // The connection broke while the commit was on
                            // its way: its jobs may run (journal-uncertain).
                            Err(e) if e.may_have_committed() => {
                                BatchResult::Uncertain(e.to_string())
                            }
                            Err(e) => BatchResult::Failed(e.to_string()),
                        };
                        router.handle(Input::JournalDone { batch, result }, now, &mut out);
                    }
                    Reply::Renewed(r) => {
                        if let Some(reason) = h.renewed(r, w).step_down {
                            lost = Some(reason);
                        }
                    }
                    other => log::debug!("journal thread: {other:?} ignored"),
                }
                if lost.is_some() {
                    break;
                }
            }
            if lost.is_some() {
                break;
            }
        }
        let now = start.elapsed();
        // Backend first: READYs and REPLYs free slots that the REQUESTs
        // read next can use at once.
        for socket in [Socket::Backend, Socket::Frontend, Socket::Admin] {
            let sock = socks.get(socket);
            for _ in 0..READ_BATCH {
                match emq_transport::recv_frames(sock, &mut msg) {
                    Ok(frames) => {
                        busy = true;
                        router.handle(Input::Frames { socket, frames }, now, &mut out)
                    }
                    Err(zmq::Error::EAGAIN) | Err(zmq::Error::EINTR) => break,
                    Err(e) => {
                        log::error!("{}: receive failed: {e}", socket.name());
                        break;
                    }
                }
            }
        }
        if reload.take() {
            reload_access(opts, zap.as_ref(), &mut access);
        }
        if signals.requested() && !router.is_draining() {
            log::info!("shutdown signal received");
            router.handle(Input::Shutdown, now, &mut out);
        }
        let now = start.elapsed();
        if router.poll_timeout().is_some_and(|t| t <= now) {
            router.handle_timeout(now, &mut out);
        }
        if let Some(text) = &metrics_text {
            if start.elapsed() >= next_metrics {
                next_metrics = start.elapsed() + METRICS_EVERY;
                text.set(emq_router_core::metrics::render(&router.snapshot(now)));
            }
        }
        if execute(&mut router, &socks, store, &mut out, start, &mut eagain_log) {
            break;
        }
    }

    if let Some(reason) = &lost {
        // Stepping down: what the core had to send (refusals, and
        // acknowledgements of batches that did commit), then KBYE to every
        // peer — never a batch — and the sockets close. What the core
        // still held is in the journal for the router that takes over.
        router.step_down(&reason.to_string(), &mut out);
        for a in out.drain(..) {
            if let Action::Send {
                socket,
                identity,
                frames,
            } = a
            {
                let _ = emq_transport::send_frames(
                    socks.get(socket),
                    Some(&identity),
                    frames,
                    zmq::DONTWAIT,
                );
            }
        }
        for s in [&socks.frontend, &socks.backend, &socks.admin] {
            let _ = s.set_linger(STEP_DOWN_LINGER_MS);
        }
    } else if let Some((batches, records)) = store.counts() {
        log::info!("journal: {batches} transaction(s), {records} record(s) this run");
    }

    if lost.is_none() {
        let buffered = router.buffered_count() + router.delayed_count();
        let inflight = router.inflight_count();
        if buffered + inflight > 0 {
            if store.is_some() {
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
        if let (Some(h), Some(pg)) = (ha, store.pg()) {
            h.shutdown(pg);
        }
    }
    // Closing the sockets and terminating the context flushes the KBYEs
    // and ACKs (linger). The ZAP thread's socket holds the context too, so
    // terminate it explicitly (that also ends the ZAP thread).
    drop(dashboard);
    drop(socks);
    let _ = ctx.destroy();
    if let Some(zap) = zap {
        let _ = zap.join();
    }
    if lost.is_some() {
        log::warn!("stopped serving: sockets closed");
        Ok(Served::SteppedDown)
    } else {
        Ok(Served::Exit)
    }
}

/// SIGHUP: read the access files again (`--plain-users`, the CURVE
/// sockets' authorised keys) and hand the result to the ZAP handler. A
/// file that cannot be read or parsed keeps the policy as it was (and says
/// so); connections already let in stay either way.
fn reload_access(
    opts: &Plan,
    zap: Option<&emq_transport::zap::ZapHandler>,
    access: &mut emq_transport::zap::AccessPolicy,
) {
    let Some(zap) = zap else {
        log::info!("SIGHUP: no access files to read again");
        return;
    };
    match opts.access_files.reload(access) {
        Ok((next, lines)) => {
            if lines.is_empty() {
                log::info!("SIGHUP: no access files to read again");
                return;
            }
            for line in lines {
                log::info!("SIGHUP: reloaded {line}");
            }
            zap.set_policy(next.clone());
            *access = next;
        }
        Err(e) => log::error!("SIGHUP: {e}; keeping the access rules as they were"),
    }
}
