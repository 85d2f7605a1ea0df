//! The driver: the router built from parts, and the one loop that runs
//! the core in the call order it documents (see the crate documentation
//! in `main.rs`).
//!
//! - `sockets.rs`: the zmq context, ZAP, the three ROUTER sockets and
//!   their monitors, sends and reads;
//! - `web.rs`: the HTTP side (metrics, dashboard);
//! - `journal_port.rs`: the journal port — none, SQLite, or PostgreSQL
//!   with its leader lease (`ha.rs`, `pg_writer.rs`) — one interface;
//! - this file: a term of service ([`Term`]) and its loop, which sleeps
//!   until input, a signal or the one minimum deadline of the router
//!   core, the journal port (the lease's timers) and the HTTP side.
//!
//! With a PostgreSQL journal the router runs in terms: it waits as a
//! standby (no socket bound) until it holds the leader lease, then
//! serves — loads the journal, binds, runs the loop, renewing the lease
//! on its timer — until it stops (shutdown: the lease is released) or
//! loses the lease (KBYE to every peer, sockets closed, back to
//! standby). Other journals serve one term.
//!
//! The service manager (systemd, `Type=notify`) hears of it
//! (`emq_cli_support::service`): READY once a term serves (sockets bound,
//! journal loaded) or a router waits as a standby, with the status line
//! saying which; STOPPING when the core starts to drain (a signal or
//! DISCONNECT). Nothing without `NOTIFY_SOCKET`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use emq_cli_support::{service, Exit};
use emq_journal::postgres::{PgJournal, PgOptions};
use emq_journal::JournalTarget;
use emq_router_core::lease::StepDownReason;
use emq_router_core::{Action, Input, Router, Socket};
use emq_transport::{ReloadSignal, ShutdownSignal};

use crate::flags::Plan;
use crate::ha::LeasedPg;
use crate::journal_port::{Event, JournalPort, LoadError, NoJournal, Sqlite};
use crate::pg_writer::PgWriter;
use crate::sockets::{Sockets, READ_ORDER};
use crate::web::Web;

/// Most messages read from one socket per poll round (fairness).
const READ_BATCH: usize = 4096;
/// How long a router stepping down gives its KBYEs to leave.
const STEP_DOWN_LINGER: Duration = Duration::from_millis(200);

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

/// The signals the loop wakes for (installed once: a router that goes
/// back to standby and serves again keeps the same handlers).
struct Signals {
    shutdown: ShutdownSignal,
    /// SIGHUP: the access files are read again.
    reload: ReloadSignal,
    /// The span exporter, when traces are on (kept across terms).
    tracing: Option<emq_otel::Tracing>,
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
    let signal_fail = |e: std::io::Error| format!("signal handlers: {e}");
    let tracing = match &opts.traces_url {
        Some(url) => Some(emq_otel::Tracing::start(url, "emq-router")?),
        None => None,
    };
    let signals = Signals {
        shutdown: ShutdownSignal::install().map_err(signal_fail)?,
        reload: ReloadSignal::install().map_err(signal_fail)?,
        tracing,
    };
    let served = serve_journal(&opts, start, &signals);
    if let Some(t) = &signals.tracing {
        t.shutdown();
    }
    served
}

/// Serve with the plan's journal until the router exits.
fn serve_journal(opts: &Plan, start: Instant, signals: &Signals) -> Result<(), Fail> {
    match &opts.journal {
        JournalTarget::None => {
            if opts.journal_default {
                log::warn!(
                    "no journal: no data directory known (set EMQ_DATA_DIR or HOME, or pass \
                     --journal PATH); buffered jobs are lost if the router stops"
                );
            } else {
                log::info!(
                    "no journal (--journal none): buffered jobs are lost if the router stops"
                );
            }
            serve(opts, &mut NoJournal::default(), start, signals).map(drop)
        }
        JournalTarget::Sqlite(path) => {
            let mut journal = open_sqlite(path, opts.journal_default)?;
            serve(opts, &mut journal, start, signals).map(drop)
        }
        JournalTarget::Postgres(url) => {
            let mut pg = open_postgres(url, opts, start)?;
            serve_in_terms(opts, &mut pg, start, signals)
        }
    }
}

fn open_sqlite(path: &std::path::Path, is_default: bool) -> Result<Sqlite, Fail> {
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
        if is_default {
            " (default; --journal none for memory only)"
        } else {
            ""
        }
    );
    let journal = emq_journal::SqliteJournal::open(path).map_err(|e| {
        Fail(
            Exit::JournalUnusable,
            format!(
                "journal unusable: {e} (fix or move the file, pass --journal PATH for another \
                 file, or --journal none to run without one)"
            ),
        )
    })?;
    Sqlite::new(journal).map_err(|e| {
        Fail(
            Exit::Internal,
            format!("cannot start the journal thread: {e}"),
        )
    })
}

fn open_postgres(url: &str, opts: &Plan, start: Instant) -> Result<LeasedPg, Fail> {
    // A statement that hangs (a cut network) must end well within the
    // lease TTL: the lease is renewed through the same connection.
    let pg_opts = PgOptions {
        connect_timeout: opts.lease.ttl / 2,
        tcp_user_timeout: opts.lease.ttl / 2,
    };
    let pg = PgJournal::open(url, &pg_opts).map_err(|e| {
        Fail(
            Exit::JournalUnusable,
            format!("journal unusable: {e} (check --journal URL and that the database is up)"),
        )
    })?;
    log::info!(
        "journal: {} (PostgreSQL; lease TTL {:?}, renewed every {:?})",
        emq_router_core::journal::JournalStore::describe(&pg),
        opts.lease.ttl,
        opts.lease.renew_every
    );
    let w = PgWriter::start(pg).map_err(|e| format!("cannot start the journal thread: {e}"))?;
    Ok(LeasedPg::new(w, opts.lease, start))
}

/// Leader and standby, in terms, until a shutdown.
fn serve_in_terms(
    opts: &Plan,
    pg: &mut LeasedPg,
    start: Instant,
    signals: &Signals,
) -> Result<(), Fail> {
    log::info!(
        "standby: waiting for the leader lease as {} (no socket bound until then)",
        pg.holder()
    );
    // A standby is up and doing its job: waiting. systemd counts it as
    // started (a unit that never became leader must not time out).
    service::ready(&format!(
        "standby: waiting for the leader lease as {}",
        pg.holder()
    ));
    loop {
        if pg.wait_for_lease(&signals.shutdown).is_none() {
            log::info!("shutdown signal received while standby: exiting");
            service::stopping("stopping: standby exits");
            return Ok(());
        }
        match serve(opts, pg, start, signals) {
            Ok(Served::Exit) => return Ok(()),
            Ok(Served::SteppedDown) => {
                log::info!("standby: waiting for the leader lease again");
                service::status("standby: waiting for the leader lease again");
            }
            Err(e) => {
                pg.shutdown();
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

/// One term: load the journal, bind, serve until the core exits or the
/// journal port says the lease is lost.
fn serve(
    opts: &Plan,
    journal: &mut dyn JournalPort,
    start: Instant,
    signals: &Signals,
) -> Result<Served, Fail> {
    // Load first: a standby that took over must have the journal before it
    // binds (and a journal that cannot be read stops a lone router).
    let restored = match journal.load() {
        Ok(r) => r,
        Err(LoadError::GaveUp) => return Ok(Served::SteppedDown),
        Err(LoadError::Unusable(e)) => {
            return Err(Fail(
                Exit::JournalUnusable,
                format!("journal unusable: {e}"),
            ))
        }
    };
    let socks = Sockets::open(opts)?;
    let web = Web::start(opts, &socks)?;
    // Only a serving router drains the outbox.
    let outbox = opts.outbox.as_deref().and_then(|url| {
        crate::outbox::OutboxPort::start(url)
            .map_err(|e| log::error!("outbox: cannot start its thread: {e}"))
            .ok()
    });
    let mut term = Term {
        outbox,
        opts,
        router: Router::new(opts.core.clone()),
        journal,
        socks,
        web,
        out: Vec::with_capacity(1024),
        carrying: Vec::with_capacity(1024),
        start,
        tracing: signals.tracing.as_ref(),
        told_stopping: false,
    };
    if let Some(restored) = restored {
        let n = term
            .router
            .restore(restored, start.elapsed(), &mut term.out);
        log::info!(
            "journal {}: {} unfinished job(s) queued again, {} dead letter(s), {} schedule(s), \
             {} paused queue(s), {} finished job(s), {} undelivered result(s), {} flow-control \
             policy(ies) restored",
            term.journal.describe(),
            n.jobs,
            n.dead_letters,
            n.schedules,
            n.paused_queues,
            n.finished,
            n.results,
            n.policies
        );
    }
    service::ready(&format!("serving (journal {})", term.journal.describe()));
    let ended = match term.flush() {
        Some(ended) => ended,
        None => term.run(signals)?,
    };
    Ok(term.finish(ended))
}

/// How a term's loop ended.
enum Ended {
    /// The core is done (after a shutdown or DISCONNECT).
    Exit,
    /// The journal port lost the leader lease.
    Lost(StepDownReason),
}

/// A term of service: the core and the parts it is driven with.
struct Term<'a> {
    opts: &'a Plan,
    router: Router,
    journal: &'a mut dyn JournalPort,
    socks: Sockets,
    web: Web,
    /// The core's actions not yet carried out.
    out: Vec<Action>,
    /// The actions being carried out (swapped with `out`, so that neither
    /// buffer is allocated again per round).
    carrying: Vec<Action>,
    start: Instant,
    tracing: Option<&'a emq_otel::Tracing>,
    /// The service manager was told STOPPING (the core drains).
    told_stopping: bool,
    /// `--outbox`: rows in, answers out (`outbox.rs`).
    outbox: Option<crate::outbox::OutboxPort>,
}

impl Term<'_> {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// The loop. After a round that read something, the next round reads
    /// again at once (non-blocking) instead of polling first: under load
    /// messages keep arriving, and a zmq_poll per round is a syscall and a
    /// wake-up for few messages. Only a round that found nothing sleeps.
    fn run(&mut self, signals: &Signals) -> Result<Ended, String> {
        let mut busy = false;
        loop {
            if !busy {
                self.sleep(signals)?;
            }
            // The journal first: a router whose lease ran out must not
            // take in (or answer) anything more.
            busy = match self.journal_events() {
                Ok(any) => any,
                Err(reason) => return Ok(Ended::Lost(reason)),
            };
            busy |= self.read();
            let now = self.now();
            if signals.reload.take() {
                self.socks.reload_access(self.opts);
            }
            if signals.shutdown.requested() && !self.router.is_draining() {
                log::info!("shutdown signal received");
                self.router.handle(Input::Shutdown, now, &mut self.out);
            }
            if !self.told_stopping && self.router.is_draining() {
                self.told_stopping = true;
                service::stopping("stopping: draining in-flight jobs");
            }
            if self.router.poll_timeout().is_some_and(|t| t <= now) {
                self.router.handle_timeout(now, &mut self.out);
            }
            self.web.tick(&self.router, self.now());
            if let Some(ended) = self.flush() {
                return Ok(ended);
            }
        }
    }

    /// Sleep until input, a signal, or the one minimum deadline of the
    /// core, the journal port and the HTTP side.
    fn sleep(&self, signals: &Signals) -> Result<(), String> {
        let deadline = emq_transport::poll::earliest([
            self.router.poll_timeout(),
            self.journal.deadline(),
            self.web.deadline(),
        ]);
        let timeout = deadline.map(|t| t.saturating_sub(self.now()));
        let mut items = Vec::with_capacity(6);
        items.extend(self.socks.poll_items());
        items.push(signals.shutdown.poll_item());
        items.push(signals.reload.poll_item());
        items.extend(self.journal.poll_item());
        items.extend(self.outbox.as_ref().map(|o| o.poll_item()));
        emq_transport::poll::poll(&mut items, timeout)
            .map(drop)
            .map_err(|e| format!("poll failed: {e}"))
    }

    /// What every socket has, up to [`READ_BATCH`] messages each, into
    /// the core. Whether anything was read.
    fn read(&mut self) -> bool {
        let now = self.now();
        let mut any = false;
        for socket in READ_ORDER {
            for _ in 0..READ_BATCH {
                let Some(frames) = self.socks.recv(socket) else {
                    break;
                };
                any = true;
                self.router
                    .handle(Input::Frames { socket, frames }, now, &mut self.out);
            }
        }
        if let Some(o) = self.outbox.as_mut() {
            for frames in o.take() {
                any = true;
                let socket = Socket::Frontend;
                self.router
                    .handle(Input::Frames { socket, frames }, now, &mut self.out);
            }
        }
        any
    }

    /// The journal port's outcomes, into the core; whether there were
    /// any, or the lease is lost.
    fn journal_events(&mut self) -> Result<bool, StepDownReason> {
        let mut any = false;
        while let Some(event) = self.journal.next_event() {
            any = true;
            match event {
                Event::Done { batch, result } => {
                    let now = self.now();
                    self.router
                        .handle(Input::JournalDone { batch, result }, now, &mut self.out);
                }
                Event::StepDown(reason) => return Err(reason),
            }
        }
        Ok(any)
    }

    /// Carry out the core's actions in order — sends (each failure fed
    /// back as `SendFailed`, then `Flushed`), journal batches handed to
    /// the port (outcomes that are ready fed back as `JournalDone`) —
    /// until none are left. `Some` when the term is over.
    fn flush(&mut self) -> Option<Ended> {
        let mut exit = false;
        let mut failed: Vec<Input> = Vec::new();
        while !self.out.is_empty() {
            let now = self.now();
            let mut sent = false;
            std::mem::swap(&mut self.out, &mut self.carrying);
            for a in self.carrying.drain(..) {
                match a {
                    Action::Send {
                        socket,
                        identity,
                        frames,
                    } => {
                        sent = true;
                        if socket == Socket::Frontend && identity == crate::outbox::IDENTITY {
                            if let Some(o) = self.outbox.as_mut() {
                                o.answer(frames);
                                continue;
                            }
                        }
                        if let Err(reason) = self.socks.send(socket, &identity, frames, now) {
                            failed.push(Input::SendFailed {
                                socket,
                                identity,
                                reason,
                            });
                        }
                    }
                    Action::Journal(batch) => self.journal.append(batch),
                    Action::Exit => exit = true,
                    Action::JobSpan(span) => {
                        if let Some(t) = self.tracing {
                            t.record(queue_wait_span(span));
                        }
                    }
                }
            }
            for input in failed.drain(..) {
                self.router.handle(input, now, &mut self.out);
            }
            if sent {
                self.router.handle(Input::Flushed, now, &mut self.out);
            }
            if let Err(reason) = self.journal_events() {
                return Some(Ended::Lost(reason));
            }
        }
        exit.then_some(Ended::Exit)
    }

    /// End the term: on a lost lease, what the core had to send
    /// (refusals, and acknowledgements of batches that did commit), then
    /// KBYE to every peer — never a batch — and the sockets close (what
    /// the core still held is in the journal for the router that takes
    /// over); on exit, say what stays and release the journal.
    fn finish(self, ended: Ended) -> Served {
        let Term {
            mut router,
            journal,
            mut socks,
            web,
            mut out,
            start,
            ..
        } = self;
        let served = match ended {
            Ended::Lost(reason) => {
                router.step_down(&reason.to_string(), &mut out);
                let now = start.elapsed();
                for a in out.drain(..) {
                    if let Action::Send {
                        socket,
                        identity,
                        frames,
                    } = a
                    {
                        let _ = socks.send(socket, &identity, frames, now);
                    }
                }
                Served::SteppedDown
            }
            Ended::Exit => {
                if let Some((batches, records)) = journal.counts() {
                    log::info!("journal: {batches} transaction(s), {records} record(s) this run");
                }
                log_unfinished(&router, journal.is_durable());
                journal.stop();
                Served::Exit
            }
        };
        // The HTTP side holds the context (the dashboard's socket): first.
        drop(web);
        match served {
            Served::SteppedDown => {
                socks.close(Some(STEP_DOWN_LINGER));
                log::warn!("stopped serving: sockets closed");
            }
            Served::Exit => socks.close(None),
        }
        served
    }
}

fn log_unfinished(router: &Router, durable: bool) {
    let buffered = router.buffered_count() + router.delayed_count();
    let inflight = router.inflight_count();
    if buffered + inflight == 0 {
        log::info!("exiting: no unfinished jobs");
    } else if durable {
        log::info!(
            "exiting: {buffered} buffered and {inflight} in-flight job(s) stay in the journal"
        );
    } else {
        log::warn!(
            "exiting: {buffered} buffered and {inflight} in-flight job(s) are lost (no journal)"
        );
    }
}

/// The OpenTelemetry span of a job's queue wait (`router/traces.rs` in the
/// core says what it covers).
fn queue_wait_span(span: emq_router_core::JobSpan) -> emq_otel::Span {
    use emq_otel::attr;
    emq_otel::Span {
        name: "emq.queue_wait",
        kind: emq_otel::Kind::Internal,
        context: span.context,
        parent: span.parent,
        start: emq_otel::unix_micros(span.accepted_unix_us),
        end: emq_otel::unix_micros(span.dispatched_unix_us),
        attributes: vec![
            attr("emq.queue", span.queue),
            attr("emq.msgid", span.msgid),
            attr("emq.attempt", i64::from(span.attempt)),
        ],
        error: None,
    }
}
