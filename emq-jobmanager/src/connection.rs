//! The job manager's connection logic as a sans-IO state machine.
//!
//! [`Connection`] owns the protocol with the router: registration, slot
//! credit (READY), jobs in and results out, heartbeats, reconnects and the
//! orderly exit. No sockets, threads, clocks or randomness live here: time
//! is a [`Duration`] since the driver's start, passed in by the caller, and
//! every msgid and connection identity comes from [`MsgIds::seeded`] with
//! [`Config::id_seed`], so every rule is unit-tested on a fake clock with
//! exact frames (`connection/tests.rs`).
//!
//! How to drive it (the shape of quinn-proto's `Connection`):
//! - [`Connection::start`] once, for the first connection.
//! - Input: [`Connection::handle`] for each [`Input`] — frames read from the
//!   DEALER (decoded here; malformed ones are logged, rate-limited, and
//!   dropped), a job starting or finishing in the pool, a send that failed,
//!   the socket's connection lost ([`Input::LinkDown`], from libzmq's
//!   socket monitor, naming the connection's identity), a shutdown
//!   request.
//! - Timers: [`Connection::poll_timeout`] is the next deadline (heartbeat
//!   to send, router silence limit, ACK timeout, reconnect wait, job
//!   timeouts, end of the grace period); sleep until it, then call
//!   [`Connection::handle_timeout`]. Call `poll_timeout` again after every
//!   `handle*` call: input moves deadlines.
//! - Output: every `handle*` call appends [`Action`]s to the caller's
//!   buffer; carry them out in order (connect, send, start or cancel a job,
//!   exit). A send that fails (EAGAIN at the high-water mark, no socket, any
//!   error) goes back in as [`Input::SendFailed`].
//! - Getters: [`Connection::identity`], [`Connection::endpoint`],
//!   [`Connection::is_registered`], [`Connection::is_draining`],
//!   [`Connection::is_shutting_down`], [`Connection::slot_counts`],
//!   [`Connection::malformed_count`], [`Connection::resend_counts`].
//!
//! Rules (see the tests for each):
//! - connect → one INFORM `[queues, "worker", "job-ack,cancel"]`; no ACK within
//!   `ack_timeout` → a fresh connection (new identity, next broker), INFORM
//!   again.
//! - ACK → the REPLYs of the resend window again when the ACK lists
//!   `reply-resend` ([`resend`]); `RUNNING [msgid...]` with the jobs still
//!   running from an earlier connection when it lists `adopt-running` (the
//!   router moves them onto this connection instead of delivering them
//!   again); queued REPLYs; then one READY per free slot. No waiting for a
//!   router HEARTBEAT (a 0.3.13 quirk).
//! - REQUEST → a free slot runs it, once: retries (`retry-count:N`) belong
//!   to the router, which journals attempts and backs off. Every delivered
//!   REQUEST gets exactly one `REPLY [payload, orig_msgid, status]`
//!   (`failed` with the error, `attempts: 1`, when it failed), then the
//!   READY for its slot.
//! - Timeouts: this core alone gives a job its timeout and says what
//!   stopping it means. A job's timeout is its `timeout:N` header (N > 0),
//!   else its payload's own `"timeout": SECONDS` field (> 0, an emq
//!   addition), else [`Config::default_timeout`] (0.3.13's
//!   `GLOBAL_TIMEOUT`, 300 s; `None`: no timeout). 0.3.13 has only the
//!   header and `GLOBAL_TIMEOUT` (its worker's `payload["timeout"]` is the
//!   header's value, passed along by its job manager), and treats
//!   `timeout:0` as no header, as here. Past it, counted from the job's
//!   start (the pool's Started event) → cancel, failed REPLY of kind
//!   `timeout`, slot freed exactly once.
//! - `CANCEL [orig_msgid]` (the router's control plane) for a job this
//!   connection runs → the pool stops it ([`Action::CancelJob`] with
//!   [`CancelReason::Router`]); once the pool reports it finished, one
//!   `REPLY [{"error": {"kind": "cancelled", "message": "cancelled by the
//!   router", "attempts": 1}}, orig_msgid, failed]`, then the READY. Exactly
//!   once per job: a second CANCEL, or one for a job already being killed
//!   for its timeout, sends no second kill (the REPLY then says
//!   `cancelled`: the router is waiting for that answer); a job that
//!   succeeds before the kill reaches it is replied with its real result (a
//!   failure after the CANCEL cannot be told from the kill, and is replied
//!   `cancelled`). A CANCEL for a job not running here (finished, never
//!   delivered, its REPLY queued) is ignored, logged at debug. The kill is
//!   the pool's business: a shell job's process group, a Python job's
//!   worker process (replaced), or, for a Rust handler, no more waiting
//!   for it.
//! - A result whose payload is bigger than `max_message_size` (the router
//!   disconnects a peer that sends a bigger frame) is replaced by a failed
//!   REPLY of kind `result-too-large` giving the size and the limit.
//! - Slot accounting: each slot is free or busy; at most `concurrency`
//!   jobs run. Credit (READYs outstanding), jobs held (received, not
//!   started) and running jobs together never exceed `concurrency` + the
//!   credit window ([`window`]: 0 with [`Prefetch::Off`], so then one READY
//!   per free slot). A REQUEST runs on a free slot at once, else waits in
//!   the held queue; held jobs start oldest first as slots free up (a
//!   held job never waits while a slot is free). A REQUEST with no slot
//!   free and no READY outstanding is answered failed (`crash`: the router
//!   sent more jobs than READYs). After a reconnect READYs go out only
//!   for what is free; REPLYs of jobs that finish while disconnected wait
//!   for the next ACK.
//! - Held jobs are the router's in-flight jobs like running ones: a
//!   CANCEL of one answers it `cancelled` at once; KBYE from the router
//!   and our own shutdown run them (as slots free up, within the grace
//!   period); a reconnect (router silent, no ACK) drops them unstarted —
//!   the router redelivers the jobs of the identity it lost, so running
//!   them too would run them twice; at the end of the grace period they
//!   are dropped with the jobs killed, before the KBYE that makes the
//!   router redeliver them.
//! - Send failures: a REPLY that could not be sent is queued again, never
//!   dropped; a READY that could not be sent is no credit (the slot or
//!   window place is offered again). Both go out again at the next flush
//!   point: the next ACK, the next finished job, or the heartbeat deadline
//!   (in place of the HEARTBEAT).
//! - Heartbeats every interval when nothing else was sent; any message from
//!   the router is a heartbeat; silence past interval × liveness
//!   ([`Liveness`]) → reconnect.
//! - Link down ([`Input::LinkDown`] for the current connection; one for
//!   a connection already replaced is ignored): frames in transit on the
//!   TCP connection were lost and libzmq would heal it under the same
//!   identity, so neither side would notice. Registered or draining →
//!   the same as the router found silent: reconnect at once with a fresh
//!   identity to the next broker, INFORM, then (after the ACK) the
//!   REPLYs of the resend window, queued REPLYs and READYs for the free
//!   slots; running jobs keep running and reply on the new connection;
//!   the router drops the old identity at its next send to it and
//!   redelivers what it held there (a lost REQUEST). Waiting for an ACK →
//!   ignored: no slot was offered yet, and the ACK timeout covers a lost
//!   INFORM (a reconnect here would loop on a handshake that keeps
//!   failing). Leaving (shutdown) → the connection is kept (a new
//!   identity would make the router redeliver the running jobs) and the
//!   REPLYs of the resend window go out again on it.
//! - KBYE/DISCONNECT from the router → no more READYs; running jobs go on
//!   on the same connection and identity, and each REPLY goes out on it; once
//!   no job runs (at once if none did) → reconnect after `reconnect_delay`
//!   (new identity, next broker). Router silence meanwhile → reconnect at
//!   once, as above (the REPLYs then wait for the next ACK).
//! - Shutdown → no more READYs; running jobs get `grace_period` and their
//!   REPLYs go out as usual; KBYE only when leaving — once no job runs, or
//!   at the end of the grace period, when the rest are killed without a
//!   REPLY (the router redelivers them elsewhere on the KBYE) — then the
//!   process exits 0. (A KBYE at the start would make the router
//!   redeliver the running jobs while they still run: twice.)

use std::collections::VecDeque;
use std::time::Duration;

pub mod resend;
pub mod window;
pub use window::{Prefetch, Window};

use emqp_proto::command::{
    FEATURE_ADOPT_RUNNING, FEATURE_CANCEL, FEATURE_JOB_ACK, FEATURE_REPLY_RESEND,
};
use emqp_proto::heartbeat::{timestamp_text, Liveness};
use emqp_proto::job::{ErrorKind, Job, JobError, JobOutcome};
use emqp_proto::{
    Command, Inform, Message, MsgIds, PeerType, QueueSpec, Reply, Request, ResultStatus,
};
use log::{debug, info, warn};

/// The router's default `--max-message-size`: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// 0.3.13's `GLOBAL_TIMEOUT`: the timeout of a job that names none.
pub const DEFAULT_GLOBAL_TIMEOUT: Duration = Duration::from_secs(300);

/// At most this many REPLYs are kept to be sent again after a reconnect
/// ([`resend`]).
pub const DEFAULT_RESEND_MAX_REPLIES: usize = 4096;

/// At most this many payload bytes of REPLYs are kept to be sent again.
pub const DEFAULT_RESEND_MAX_BYTES: usize = 16 * 1024 * 1024;

/// At most one warning about malformed messages per this long.
const MALFORMED_LOG_EVERY: Duration = Duration::from_secs(10);

/// Timers, limits and identity of a job manager connection.
#[derive(Debug, Clone)]
pub struct Config {
    /// Router backend endpoints; a reconnect moves to the next one.
    pub brokers: Vec<String>,
    /// The queues announced in INFORM.
    pub queues: QueueSpec,
    /// Number of execution slots.
    pub concurrency: usize,
    /// Send a HEARTBEAT after this long without sending anything.
    pub heartbeat_interval: Duration,
    /// The router is dead after `heartbeat_interval * heartbeat_liveness`
    /// of silence.
    pub heartbeat_liveness: u32,
    /// Reconnect when an INFORM is not ACKed within this.
    pub ack_timeout: Duration,
    /// Wait this long before reconnecting after the router said KBYE (and
    /// the jobs running then finished).
    pub reconnect_delay: Duration,
    /// After a shutdown request, running jobs get this long to finish.
    pub grace_period: Duration,
    /// The largest frame the router accepts (its `--max-message-size`);
    /// `None`: no limit.
    pub max_message_size: Option<usize>,
    /// The timeout of a job that names none (0.3.13's `GLOBAL_TIMEOUT`);
    /// `None`: such a job may run for ever.
    pub default_timeout: Option<Duration>,
    /// Seed of every msgid and connection identity ([`MsgIds::seeded`]).
    pub id_seed: u64,
    /// Unix time in microseconds at `now == 0`, for HEARTBEAT timestamps.
    pub unix_micros_at_start: u64,
    /// The credit window beyond the free slots ([`window`]).
    pub prefetch: Prefetch,
    /// At most this many REPLYs are kept to be sent again after a
    /// reconnect ([`resend`]).
    pub resend_max_replies: usize,
    /// At most this many payload bytes of REPLYs are kept to be sent again.
    pub resend_max_bytes: usize,
}

impl Config {
    /// The defaults of the CLI contract for `brokers` and `concurrency`.
    pub fn new(brokers: Vec<String>, queues: QueueSpec, concurrency: usize) -> Config {
        Config {
            brokers,
            queues,
            concurrency,
            heartbeat_interval: Duration::from_secs(3),
            heartbeat_liveness: 3,
            ack_timeout: Duration::from_secs(5),
            reconnect_delay: Duration::from_secs(1),
            grace_period: Duration::from_secs(30),
            max_message_size: Some(DEFAULT_MAX_MESSAGE_SIZE),
            default_timeout: Some(DEFAULT_GLOBAL_TIMEOUT),
            id_seed: 0,
            unix_micros_at_start: 0,
            prefetch: Prefetch::Off,
            resend_max_replies: DEFAULT_RESEND_MAX_REPLIES,
            resend_max_bytes: DEFAULT_RESEND_MAX_BYTES,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// One multipart message as read from the DEALER (delimiter first).
    Frames(Vec<Vec<u8>>),
    /// The pool began running `run` on `slot`.
    JobStarted { slot: usize, run: u64 },
    /// The pool finished `run` on `slot`; the slot is free again.
    JobFinished {
        slot: usize,
        run: u64,
        outcome: JobOutcome,
    },
    /// An [`Action::Send`] could not be carried out; `message` is what it
    /// carried.
    SendFailed { message: Message },
    /// The socket of connection `identity` lost its connection to the
    /// router (libzmq's socket monitor: DISCONNECTED). Frames in transit
    /// were lost; libzmq would reconnect under the same identity.
    LinkDown { identity: String },
    /// SIGTERM/SIGINT: leave in order.
    Shutdown,
}

/// A job for the pool to run.
#[derive(Debug, Clone, PartialEq)]
pub struct JobStart {
    pub slot: usize,
    /// Unique per delivery; a cancel or a result names it.
    pub run: u64,
    /// The REQUEST msgid.
    pub msgid: String,
    pub job: Job,
    pub timeout: Option<Duration>,
}

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Drop the current socket (if any) and connect a new DEALER.
    Connect {
        endpoint: String,
        identity: String,
    },
    /// Send on the current socket; report a failure as
    /// [`Input::SendFailed`].
    Send(Message),
    StartJob(JobStart),
    /// Stop `run` on `slot` (it timed out, or the router cancelled it); the
    /// pool still reports it finished.
    CancelJob {
        slot: usize,
        run: u64,
        reason: CancelReason,
    },
    /// Kill every running job (end of the grace period).
    KillAll,
    /// Stop the process with this exit code.
    Exit(i32),
}

/// Why a running job is stopped: it decides the failure the pool reports
/// (`timeout` or `cancelled`) and what the logs say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReason {
    /// It ran past its `timeout:N`.
    Timeout,
    /// The router sent CANCEL.
    Router,
}

/// The `message` of the failed REPLY of a job the router cancelled.
pub const CANCELLED_MESSAGE: &str = "cancelled by the router";

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    AwaitingAck {
        inform_msgid: String,
        since: Duration,
    },
    Registered,
    /// The router said KBYE while jobs ran: no READYs, REPLYs still go out
    /// on this connection; reconnect once no job runs.
    Draining,
    /// The router left; reconnect at `until`.
    Waiting {
        until: Duration,
    },
    ShuttingDown {
        deadline: Duration,
    },
    Stopped,
}

#[derive(Debug, Clone)]
struct Running {
    msgid: String,
    /// The run in the pool.
    run: u64,
    /// When it was handed to the pool.
    started: Duration,
    timeout: Option<Duration>,
    deadline: Option<Duration>,
    /// The pool was told to stop the job, and why. Set once (no second
    /// kill); a CANCEL after a timeout kill only changes the reason.
    stopping: Option<CancelReason>,
}

#[derive(Debug, Clone)]
enum Slot {
    Free,
    Busy(Box<Running>),
}

/// A job received in the credit window while every slot was busy.
#[derive(Debug, Clone)]
struct Held {
    msgid: String,
    job: Job,
    timeout: Option<Duration>,
}

/// Slot counts, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotCounts {
    /// Free, with a READY outstanding.
    pub offered: usize,
    /// Free, no READY outstanding (not registered, the router left, or the
    /// READY could not be sent).
    pub idle: usize,
    /// Running a job.
    pub busy: usize,
    /// READYs outstanding beyond the free slots (the credit window).
    pub extra: usize,
    /// Jobs received and not started (every slot was busy).
    pub held: usize,
}

/// Malformed messages from the router: counted, logged at most once per
/// [`MALFORMED_LOG_EVERY`].
#[derive(Debug, Default)]
struct MalformedLog {
    total: u64,
    unlogged: u64,
    last_logged: Option<Duration>,
}

/// The connection state machine. See the module docs.
pub struct Connection {
    cfg: Config,
    liveness: Liveness,
    ids: MsgIds,
    phase: Phase,
    slots: Vec<Slot>,
    /// Credit and the window's size.
    window: Window,
    /// Jobs received beyond the busy slots, oldest first.
    held: VecDeque<Held>,
    broker_index: usize,
    connected_once: bool,
    identity: String,
    last_sent: Duration,
    last_received: Duration,
    /// REPLYs not sent yet: their job finished while not registered, or
    /// their send failed.
    pending_replies: VecDeque<Message>,
    /// Copies of the REPLYs sent in the resend window ([`resend`]).
    sent_replies: resend::SentReplies,
    /// The current connection's ACK listed `reply-resend`.
    router_resends: bool,
    next_run: u64,
    malformed: MalformedLog,
}

impl Connection {
    pub fn new(mut cfg: Config) -> Connection {
        if cfg.brokers.is_empty() {
            cfg.brokers.push("tcp://127.0.0.1:47290".to_string());
        }
        cfg.concurrency = cfg.concurrency.max(1);
        Connection {
            slots: vec![Slot::Free; cfg.concurrency],
            window: Window::new(cfg.prefetch),
            held: VecDeque::new(),
            liveness: Liveness {
                interval: cfg.heartbeat_interval,
                liveness: cfg.heartbeat_liveness,
            },
            ids: MsgIds::seeded(cfg.id_seed),
            sent_replies: resend::SentReplies::new(
                resend::window(&cfg),
                cfg.resend_max_replies,
                cfg.resend_max_bytes,
            ),
            router_resends: false,
            cfg,
            phase: Phase::Stopped,
            broker_index: 0,
            connected_once: false,
            identity: String::new(),
            last_sent: Duration::ZERO,
            last_received: Duration::ZERO,
            pending_replies: VecDeque::new(),
            next_run: 1,
            malformed: MalformedLog::default(),
        }
    }

    /// The first connection.
    pub fn start(&mut self, now: Duration, out: &mut Vec<Action>) {
        if !self.connected_once {
            self.connect(now, out);
        }
    }

    // ---- getters --------------------------------------------------------

    /// The identity of the current connection.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The broker of the current connection.
    pub fn endpoint(&self) -> &str {
        &self.cfg.brokers[self.broker_index]
    }

    pub fn is_registered(&self) -> bool {
        self.phase == Phase::Registered
    }

    /// The router said KBYE; running jobs finish on this connection.
    pub fn is_draining(&self) -> bool {
        self.phase == Phase::Draining
    }

    pub fn is_shutting_down(&self) -> bool {
        matches!(self.phase, Phase::ShuttingDown { .. } | Phase::Stopped)
    }

    pub fn slot_counts(&self) -> SlotCounts {
        let busy = self.busy();
        let free = self.slots.len() - busy;
        let credit = self.window.credit();
        let offered = credit.min(free);
        SlotCounts {
            offered,
            idle: free - offered,
            busy,
            extra: credit - offered,
            held: self.held.len(),
        }
    }

    /// The credit window: outstanding READYs, measured service time and
    /// round trip.
    pub fn window(&self) -> &Window {
        &self.window
    }

    fn busy(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Busy(_)))
            .count()
    }

    fn free_slot(&self) -> Option<usize> {
        self.slots.iter().position(|s| matches!(s, Slot::Free))
    }

    /// Malformed messages from the router dropped so far.
    pub fn malformed_count(&self) -> u64 {
        self.malformed.total
    }

    /// REPLYs kept to be sent again after a reconnect, and how many were
    /// forgotten for the bounds before their window ended ([`resend`]).
    pub fn resend_counts(&self) -> (usize, u64) {
        (self.sent_replies.len(), self.sent_replies.forgotten())
    }

    // ---- input ----------------------------------------------------------

    /// Feed one input; the resulting actions are appended to `out`.
    pub fn handle(&mut self, input: Input, now: Duration, out: &mut Vec<Action>) {
        if self.phase == Phase::Stopped && self.connected_once {
            return;
        }
        match input {
            Input::Frames(frames) => match Message::decode(frames) {
                Ok(m) => self.on_message(m, now, out),
                Err(e) => self.on_malformed(&e.to_string(), now),
            },
            Input::JobStarted { slot, run } => self.on_job_started(slot, run, now),
            Input::JobFinished { slot, run, outcome } => {
                self.on_job_finished(slot, run, outcome, now, out)
            }
            Input::SendFailed { message } => self.on_send_failed(message),
            Input::LinkDown { identity } => self.on_link_down(&identity, now, out),
            Input::Shutdown => self.on_shutdown(now, out),
        }
    }

    /// The next instant [`Connection::handle_timeout`] has something to do;
    /// `None`: nothing until the next input.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let link = match &self.phase {
            Phase::AwaitingAck { since, .. } => Some(*since + self.cfg.ack_timeout),
            Phase::Registered | Phase::Draining => Some(
                (self.last_sent + self.cfg.heartbeat_interval)
                    .min(self.liveness.deadline(self.last_received)),
            ),
            Phase::Waiting { until } => Some(*until),
            // Heartbeats go on while running jobs finish: a router that
            // heard nothing for interval × liveness would redeliver them.
            Phase::ShuttingDown { deadline } => {
                Some((*deadline).min(self.last_sent + self.cfg.heartbeat_interval))
            }
            Phase::Stopped => return None,
        };
        let jobs = self.slots.iter().filter_map(|s| match s {
            Slot::Busy(r) if r.stopping.is_none() => r.deadline,
            _ => None,
        });
        link.into_iter().chain(jobs).min()
    }

    /// Carry out every timer due at `now` (call when [`poll_timeout`] is
    /// reached; earlier calls do nothing).
    ///
    /// [`poll_timeout`]: Connection::poll_timeout
    pub fn handle_timeout(&mut self, now: Duration, out: &mut Vec<Action>) {
        if self.phase == Phase::Stopped {
            return;
        }
        self.sent_replies.expire(now);
        // Job timers first: a timeout does not depend on the link.
        for (slot, s) in self.slots.iter_mut().enumerate() {
            let Slot::Busy(r) = s else { continue };
            if r.stopping.is_none() && r.deadline.is_some_and(|d| now >= d) {
                r.stopping = Some(CancelReason::Timeout);
                warn!(
                    "job {} on slot {slot} ran past its timeout of {:?}; killing it",
                    r.msgid,
                    r.timeout.unwrap_or_default()
                );
                out.push(Action::CancelJob {
                    slot,
                    run: r.run,
                    reason: CancelReason::Timeout,
                });
            }
        }
        match self.phase {
            Phase::AwaitingAck { since, .. } => {
                if now >= since + self.cfg.ack_timeout {
                    self.reconnect(now, "no ACK for our INFORM", out);
                }
            }
            Phase::Registered | Phase::Draining => {
                if self.liveness.is_dead(self.last_received, now) {
                    let why = format!(
                        "router silent for {:?}",
                        now.saturating_sub(self.last_received)
                    );
                    self.reconnect(now, &why, out);
                } else if now >= self.last_sent + self.cfg.heartbeat_interval {
                    // What a failed send left behind goes out in place of
                    // the HEARTBEAT (any message counts as one).
                    if !self.flush(now, out) {
                        self.send_heartbeat(now, out);
                    }
                }
            }
            Phase::Waiting { until } => {
                if now >= until {
                    self.reconnect(now, "router left", out);
                }
            }
            Phase::ShuttingDown { deadline } => {
                if now >= deadline {
                    self.kill_remaining(now, out);
                } else if now >= self.last_sent + self.cfg.heartbeat_interval {
                    self.send_heartbeat(now, out);
                }
            }
            Phase::Stopped => {}
        }
    }

    fn send_heartbeat(&mut self, now: Duration, out: &mut Vec<Action>) {
        let micros = self
            .cfg
            .unix_micros_at_start
            .saturating_add(now.as_micros() as u64);
        let hb = Command::Heartbeat {
            timestamp: Some(timestamp_text(micros)),
        };
        self.send(hb, now, out);
    }

    // ---- connection -----------------------------------------------------

    fn connect(&mut self, now: Duration, out: &mut Vec<Action>) {
        if self.connected_once {
            self.broker_index = (self.broker_index + 1) % self.cfg.brokers.len();
        }
        self.connected_once = true;
        self.identity = self.ids.next_id();
        self.router_resends = false;
        self.withdraw_readies();
        if !self.held.is_empty() {
            warn!(
                "dropping {} held job(s), not started: the router redelivers the jobs of the \
                 connection it lost (running them too would run them twice)",
                self.held.len()
            );
            self.held.clear();
        }
        let endpoint = self.cfg.brokers[self.broker_index].clone();
        info!(
            "connecting to {endpoint} as {} ({} slot(s))",
            self.identity, self.cfg.concurrency
        );
        out.push(Action::Connect {
            endpoint,
            identity: self.identity.clone(),
        });
        let inform = Command::Inform(Inform {
            queues: self.cfg.queues.clone(),
            peer_type: Some(PeerType::Worker),
            features: vec![FEATURE_JOB_ACK.to_string(), FEATURE_CANCEL.to_string()],
        });
        let inform_msgid = self.send(inform, now, out);
        self.phase = Phase::AwaitingAck {
            inform_msgid,
            since: now,
        };
        self.last_received = now;
    }

    fn reconnect(&mut self, now: Duration, why: &str, out: &mut Vec<Action>) {
        warn!(
            "{why}: reconnecting (was {} on {})",
            self.identity,
            self.endpoint()
        );
        self.connect(now, out);
    }

    /// The router forgot (or never got) our READYs.
    fn withdraw_readies(&mut self) {
        self.window.withdraw();
    }

    /// Send `command` under a fresh msgid; returns the msgid.
    fn send(&mut self, command: Command, now: Duration, out: &mut Vec<Action>) -> String {
        let msg = Message::with_msgid(self.ids.next_id(), command);
        let msgid = msg.msgid.clone();
        self.send_message(msg, now, out);
        msgid
    }

    fn send_message(&mut self, msg: Message, now: Duration, out: &mut Vec<Action>) {
        if self.router_resends && matches!(msg.command, Command::Reply(_)) {
            self.sent_replies.keep(&msg, now);
        }
        self.last_sent = now;
        out.push(Action::Send(msg));
    }

    /// The REPLYs of the resend window again, as they were sent (the
    /// router takes each at most once); they stay kept. How many.
    fn resend_replies(&mut self, now: Duration, out: &mut Vec<Action>) -> usize {
        if !self.router_resends {
            return 0;
        }
        let copies = self.sent_replies.in_window(now);
        let n = copies.len();
        if n > 0 {
            self.last_sent = now;
            out.extend(copies.into_iter().map(Action::Send));
        }
        n
    }

    /// Send queued REPLYs, and (registered) READYs up to `concurrency` +
    /// the window: one for every free slot without one, and as many more
    /// as the window allows. Whether anything was sent.
    fn flush(&mut self, now: Duration, out: &mut Vec<Action>) -> bool {
        let before = out.len();
        if matches!(
            self.phase,
            Phase::Registered | Phase::Draining | Phase::ShuttingDown { .. }
        ) {
            while let Some(reply) = self.pending_replies.pop_front() {
                self.send_message(reply, now, out);
            }
        }
        if self.phase == Phase::Registered {
            let concurrency = self.cfg.concurrency;
            let running_since = self.slots.iter().filter_map(|s| match s {
                Slot::Busy(r) => Some(r.started),
                Slot::Free => None,
            });
            let extra = self.window.extra(concurrency, running_since, now);
            let have = self.busy() + self.held.len() + self.window.credit();
            for _ in have..concurrency + extra {
                self.window.ready_sent(now);
                self.send(Command::Ready, now, out);
            }
        }
        out.len() > before
    }

    // ---- inputs ---------------------------------------------------------

    fn on_malformed(&mut self, why: &str, now: Duration) {
        let m = &mut self.malformed;
        m.total += 1;
        let due = match m.last_logged {
            None => true,
            Some(t) => now.saturating_sub(t) >= MALFORMED_LOG_EVERY,
        };
        if due {
            if m.unlogged > 0 {
                warn!(
                    "ignoring a malformed message from the router: {why} \
                     ({} more since the last warning)",
                    m.unlogged
                );
            } else {
                warn!("ignoring a malformed message from the router: {why}");
            }
            m.unlogged = 0;
            m.last_logged = Some(now);
        } else {
            m.unlogged += 1;
        }
    }

    fn on_message(&mut self, msg: Message, now: Duration, out: &mut Vec<Action>) {
        if !matches!(msg.command, Command::Heartbeat { .. }) {
            debug!("received {} {}", msg.command.name(), msg.msgid);
        }
        if !matches!(msg.command, Command::Disconnect) {
            self.last_received = now;
        }
        match msg.command {
            Command::Ack {
                acked_msgid,
                features,
            } => self.on_ack(&acked_msgid, &features, now, out),
            Command::Heartbeat { .. } => {}
            Command::Request(req) => self.on_request(msg.msgid, req, now, out),
            Command::Cancel { orig_msgid } => self.on_cancel(&orig_msgid, now, out),
            Command::Kbye | Command::Disconnect => {
                let said = if matches!(msg.command, Command::Kbye) {
                    "KBYE"
                } else {
                    "DISCONNECT"
                };
                self.on_router_leaving(said, now);
            }
            other => debug!("ignoring {} from the router", other.name()),
        }
    }

    fn on_router_leaving(&mut self, said: &str, now: Duration) {
        if self.is_shutting_down() || matches!(self.phase, Phase::Draining | Phase::Waiting { .. })
        {
            return;
        }
        self.withdraw_readies();
        let busy = self.busy();
        let held = self.held.len();
        if self.phase == Phase::Registered && busy + held > 0 {
            warn!(
                "router {} said {said}; finishing {busy} running and {held} held job(s) on this \
                 connection, then reconnecting",
                self.endpoint()
            );
            self.phase = Phase::Draining;
        } else {
            warn!(
                "router {} said {said}; reconnecting in {:?}",
                self.endpoint(),
                self.cfg.reconnect_delay
            );
            self.phase = Phase::Waiting {
                until: now + self.cfg.reconnect_delay,
            };
        }
    }

    fn on_ack(&mut self, acked: &str, features: &[String], now: Duration, out: &mut Vec<Action>) {
        let Phase::AwaitingAck { inform_msgid, .. } = &self.phase else {
            debug!("ignoring ACK of {acked}: not waiting for one");
            return;
        };
        if acked != inform_msgid {
            warn!("ACK names {acked}, our INFORM was {inform_msgid}; accepting it");
        }
        self.phase = Phase::Registered;
        self.router_resends = features.iter().any(|f| f == FEATURE_REPLY_RESEND);
        if !self.router_resends && self.sent_replies.len() > 0 {
            debug!(
                "forgetting {} sent REPLY(s): this router does not take REPLYs sent again",
                self.sent_replies.len()
            );
            self.sent_replies.clear();
        }
        let resent = self.resend_replies(now, out);
        let running = if features.iter().any(|f| f == FEATURE_ADOPT_RUNNING) {
            self.announce_running(now, out)
        } else {
            0
        };
        info!(
            "registered with {} as {} ({} queued result(s), {resent} recent result(s) sent again, \
             {running} running job(s) announced)",
            self.endpoint(),
            self.identity,
            self.pending_replies.len()
        );
        self.flush(now, out);
    }

    /// `RUNNING [msgid...]`: the jobs still running from an earlier
    /// connection, so that the router moves them onto this one instead of
    /// delivering them again (see the module documentation). How many.
    fn announce_running(&mut self, now: Duration, out: &mut Vec<Action>) -> usize {
        let orig_msgids: Vec<String> = self
            .slots
            .iter()
            .filter_map(|s| match s {
                Slot::Busy(r) => Some(r.msgid.clone()),
                Slot::Free => None,
            })
            .collect();
        let n = orig_msgids.len();
        if n > 0 {
            self.send(Command::Running { orig_msgids }, now, out);
        }
        n
    }

    /// The socket lost its connection (see the module documentation).
    fn on_link_down(&mut self, identity: &str, now: Duration, out: &mut Vec<Action>) {
        if identity != self.identity {
            debug!("link down of {identity}, a connection already replaced: ignored");
            return;
        }
        match self.phase {
            Phase::Registered | Phase::Draining => {
                self.reconnect(now, "connection to the router lost (link down)", out)
            }
            Phase::ShuttingDown { .. } => {
                let n = self.resend_replies(now, out);
                warn!(
                    "connection to the router lost while leaving; keeping {} (libzmq reconnects \
                     it), {n} recent result(s) sent again",
                    self.identity
                );
            }
            Phase::AwaitingAck { .. } => debug!(
                "link down before the ACK: ignored (the ACK timeout of {:?} covers it)",
                self.cfg.ack_timeout
            ),
            Phase::Waiting { .. } | Phase::Stopped => {
                debug!("link down while not connected to a router: ignored")
            }
        }
    }

    fn on_request(&mut self, msgid: String, req: Request, now: Duration, out: &mut Vec<Action>) {
        let credited = self.window.request_received(now);
        if self.is_shutting_down() {
            warn!("REQUEST {msgid} arrived while leaving; not running it (the router owns it)");
            return;
        }
        let free = self.free_slot();
        if free.is_none() && !credited {
            warn!(
                "REQUEST {msgid} but all {} slot(s) are busy and no READY is outstanding \
                 (more REQUESTs than READYs); failing it",
                self.cfg.concurrency
            );
            let err = JobError::new(
                ErrorKind::Crash,
                "job manager had no free slot (router sent more jobs than READYs)",
            );
            self.queue_or_send_reply(&msgid, JobOutcome::Error(err), now, out);
            return;
        }
        let (job, own_timeout) = match Job::parse_with_timeout(&req.message) {
            Ok(parsed) => parsed,
            Err(e) => {
                warn!("REQUEST {msgid}: bad job: {e}");
                let err = JobError::new(ErrorKind::BadJob, e.to_string());
                self.queue_or_send_reply(&msgid, JobOutcome::Error(err), now, out);
                if self.phase == Phase::Registered {
                    self.flush(now, out);
                }
                return;
            }
        };
        let timeout = req
            .headers
            .timeout_secs()
            .map(Duration::from_secs)
            .or(own_timeout)
            .or(self.cfg.default_timeout);
        match free {
            Some(slot) => {
                debug!(
                    "job {msgid} on slot {slot} (queue {}, timeout {timeout:?})",
                    req.queue
                );
                self.start_job(slot, msgid, job, timeout, now, out);
            }
            None => {
                debug!(
                    "job {msgid} held: every slot busy ({} held before it)",
                    self.held.len()
                );
                self.held.push_back(Held {
                    msgid,
                    job,
                    timeout,
                });
            }
        }
    }

    fn start_job(
        &mut self,
        slot: usize,
        msgid: String,
        job: Job,
        timeout: Option<Duration>,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let run = self.next_run;
        self.next_run += 1;
        self.slots[slot] = Slot::Busy(Box::new(Running {
            msgid: msgid.clone(),
            run,
            started: now,
            timeout,
            deadline: timeout.map(|t| now + t),
            stopping: None,
        }));
        out.push(Action::StartJob(JobStart {
            slot,
            run,
            msgid,
            job,
            timeout,
        }));
    }

    /// Held jobs onto free slots, oldest first.
    fn start_held(&mut self, now: Duration, out: &mut Vec<Action>) {
        while !self.held.is_empty() {
            let Some(slot) = self.free_slot() else { return };
            let Some(h) = self.held.pop_front() else {
                return;
            };
            debug!("held job {} on slot {slot}", h.msgid);
            self.start_job(slot, h.msgid, h.job, h.timeout, now, out);
        }
    }

    fn on_job_started(&mut self, slot: usize, run: u64, now: Duration) {
        if let Some(Slot::Busy(r)) = self.slots.get_mut(slot) {
            if r.run == run {
                debug!("job {} started on slot {slot}", r.msgid);
                if r.stopping.is_none() {
                    r.deadline = r.timeout.map(|t| now + t);
                }
            }
        }
    }

    fn on_job_finished(
        &mut self,
        slot: usize,
        run: u64,
        outcome: JobOutcome,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let Some(Slot::Busy(r)) = self.slots.get(slot) else {
            warn!("result of run {run} for slot {slot}, which is not busy; ignored");
            return;
        };
        if r.run != run {
            warn!("stale result of run {run} on slot {slot}; ignored");
            return;
        }
        let msgid = r.msgid.clone();
        if r.stopping != Some(CancelReason::Router) {
            // What the window sizes from: how long jobs take here (a
            // timeout counts: that job was long).
            self.window.job_finished(now.saturating_sub(r.started));
        }
        // A job stopped by us that still succeeded finished on its own
        // before the kill reached it: its real result goes out.
        let outcome = match (outcome, r.stopping) {
            (JobOutcome::Error(_), Some(CancelReason::Timeout)) => {
                let secs = r.timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0);
                JobOutcome::Error(JobError::new(
                    ErrorKind::Timeout,
                    format!("job ran past its timeout of {secs} s and was killed"),
                ))
            }
            (JobOutcome::Error(_), Some(CancelReason::Router)) => {
                JobOutcome::Error(JobError::new(ErrorKind::Cancelled, CANCELLED_MESSAGE))
            }
            (o, _) => o,
        };
        match &outcome {
            JobOutcome::Value(_) => debug!("job {msgid} finished ok on slot {slot}"),
            JobOutcome::Error(e) => warn!(
                "job {msgid} failed on slot {slot}: {:?}: {}",
                e.kind, e.message
            ),
        }
        self.finish_slot(slot, &msgid, outcome, now, out);
    }

    /// CANCEL from the router: stop every run of `orig_msgid` (one, unless
    /// the router delivered the same msgid twice); its REPLY goes out when
    /// the pool reports it finished.
    fn on_cancel(&mut self, orig_msgid: &str, now: Duration, out: &mut Vec<Action>) {
        let mut found = false;
        for (slot, s) in self.slots.iter_mut().enumerate() {
            let Slot::Busy(r) = s else { continue };
            if r.msgid != orig_msgid {
                continue;
            }
            found = true;
            match r.stopping.replace(CancelReason::Router) {
                None => {
                    info!("CANCEL of job {orig_msgid}: stopping it on slot {slot}");
                    out.push(Action::CancelJob {
                        slot,
                        run: r.run,
                        reason: CancelReason::Router,
                    });
                }
                Some(CancelReason::Timeout) => debug!(
                    "CANCEL of job {orig_msgid}: already being killed for its timeout; \
                     it will be replied cancelled"
                ),
                Some(CancelReason::Router) => {
                    debug!("CANCEL of job {orig_msgid} again: already being cancelled")
                }
            }
        }
        if let Some(i) = self.held.iter().position(|h| h.msgid == orig_msgid) {
            found = true;
            self.held.remove(i);
            info!("CANCEL of job {orig_msgid}: it was held, not started; replying cancelled");
            let err = JobError::new(ErrorKind::Cancelled, CANCELLED_MESSAGE);
            self.queue_or_send_reply(orig_msgid, JobOutcome::Error(err), now, out);
            if self.phase == Phase::Registered {
                self.flush(now, out);
            }
        }
        if !found {
            debug!("ignoring CANCEL of job {orig_msgid}: not running here");
        }
    }

    /// A job is done: REPLY, then the READY that frees the slot (or, when
    /// the router left, the reconnect once no job runs).
    fn finish_slot(
        &mut self,
        slot: usize,
        msgid: &str,
        outcome: JobOutcome,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        self.slots[slot] = Slot::Free;
        self.queue_or_send_reply(msgid, outcome, now, out);
        if matches!(
            self.phase,
            Phase::Registered | Phase::Draining | Phase::ShuttingDown { .. }
        ) {
            self.start_held(now, out);
        }
        match self.phase {
            Phase::Registered => {
                self.flush(now, out);
            }
            Phase::Draining if self.busy() == 0 => {
                info!(
                    "the last running job finished; reconnecting in {:?}",
                    self.cfg.reconnect_delay
                );
                self.phase = Phase::Waiting {
                    until: now + self.cfg.reconnect_delay,
                };
            }
            Phase::ShuttingDown { .. } => self.maybe_exit(now, out),
            _ => {}
        }
    }

    /// The REPLY of a finished job: sent now on a connection the router
    /// listens on (after anything queued before it), else queued.
    fn queue_or_send_reply(
        &mut self,
        msgid: &str,
        outcome: JobOutcome,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let reply = self.reply_message(msgid, outcome);
        match self.phase {
            Phase::Registered | Phase::Draining | Phase::ShuttingDown { .. } => {
                self.pending_replies.push_back(reply);
                while let Some(r) = self.pending_replies.pop_front() {
                    self.send_message(r, now, out);
                }
            }
            _ => {
                debug!("result of {msgid} queued until the router ACKs us");
                self.pending_replies.push_back(reply);
            }
        }
    }

    /// `REPLY [payload, msgid, status]`; a payload over the router's limit
    /// becomes a `result-too-large` failure.
    fn reply_message(&mut self, msgid: &str, outcome: JobOutcome) -> Message {
        let mut outcome = outcome;
        if let JobOutcome::Error(e) = &mut outcome {
            e.attempts = Some(1);
        }
        let mut payload = outcome.to_payload();
        if let Some(limit) = self.cfg.max_message_size {
            if payload.len() > limit {
                warn!(
                    "result of job {msgid} is {} bytes, over the maximum message size of \
                     {limit} bytes; replying failed (result-too-large) instead",
                    payload.len()
                );
                let mut e = JobError::new(
                    ErrorKind::ResultTooLarge,
                    format!(
                        "the job's result is {} bytes, larger than the maximum message size \
                         of {limit} bytes",
                        payload.len()
                    ),
                );
                e.attempts = Some(1);
                outcome = JobOutcome::Error(e);
                payload = outcome.to_payload();
            }
        }
        let status = if outcome.is_ok() {
            ResultStatus::Ok
        } else {
            ResultStatus::Failed
        };
        Message::with_msgid(
            self.ids.next_id(),
            Command::Reply(Reply::result(payload, msgid.to_string(), status)),
        )
    }

    fn on_send_failed(&mut self, message: Message) {
        match message.command {
            Command::Reply(_) => {
                warn!(
                    "a REPLY ({}) could not be sent; queued to be sent again",
                    message.msgid
                );
                self.sent_replies.unsent(&message.msgid);
                self.pending_replies.push_back(message);
            }
            Command::Ready => {
                // Any outstanding READY stands for any free slot.
                if self.window.ready_failed() {
                    warn!("a READY could not be sent; it will be offered again");
                } else {
                    debug!("a READY could not be sent; no credit was counting on it");
                }
            }
            Command::Heartbeat { .. } => debug!("a HEARTBEAT could not be sent"),
            other => warn!("{} could not be sent (its timer covers it)", other.name()),
        }
    }

    /// SIGTERM/SIGINT: no more READYs; running jobs get the grace period
    /// and their REPLYs go out as usual on this connection. KBYE is said
    /// only when leaving (every job done, or the grace period over): a
    /// router removes a worker on KBYE and redelivers what it still holds,
    /// so a KBYE at the start would make every running job run twice.
    fn on_shutdown(&mut self, now: Duration, out: &mut Vec<Action>) {
        if self.is_shutting_down() {
            return;
        }
        let busy = self.busy();
        info!(
            "shutting down: no new jobs, {busy} running and {} held job(s) get {:?}, then KBYE to {}",
            self.held.len(),
            self.cfg.grace_period,
            self.endpoint()
        );
        while let Some(reply) = self.pending_replies.pop_front() {
            self.send_message(reply, now, out);
        }
        self.phase = Phase::ShuttingDown {
            deadline: now + self.cfg.grace_period,
        };
        self.maybe_exit(now, out);
    }

    fn maybe_exit(&mut self, now: Duration, out: &mut Vec<Action>) {
        if self.busy() == 0 && self.held.is_empty() {
            info!("no jobs running; KBYE and exit");
            self.send(Command::Kbye, now, out);
            self.phase = Phase::Stopped;
            out.push(Action::Exit(0));
        }
    }

    /// End of the grace period: kill what still runs, without a REPLY for
    /// it (the job did not fail: the job manager left), and say KBYE: the
    /// router redelivers the jobs still in flight to another job manager.
    fn kill_remaining(&mut self, now: Duration, out: &mut Vec<Action>) {
        warn!(
            "grace period over; killing {} running job(s) and dropping {} held, which the router \
             redelivers after our KBYE",
            self.busy(),
            self.held.len()
        );
        out.push(Action::KillAll);
        self.held.clear();
        for slot in 0..self.slots.len() {
            if let Slot::Busy(_) = &self.slots[slot] {
                self.slots[slot] = Slot::Free;
            }
        }
        self.send(Command::Kbye, now, out);
        self.phase = Phase::Stopped;
        out.push(Action::Exit(0));
    }
}

#[cfg(test)]
mod tests;
