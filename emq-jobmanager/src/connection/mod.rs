//! The job manager's connection logic as a sans-IO state machine.
//!
//! [`Connection`] owns the protocol with the router: registration, slot
//! credit (READY), jobs in and results out, heartbeats, reconnects and the
//! orderly exit. No sockets, threads, clocks or randomness live here: time
//! is a [`Duration`] since the driver's start, passed in by the caller, and
//! every msgid and connection identity comes from [`MsgIds::seeded`] with
//! [`Config::id_seed`], so every rule is unit-tested on a fake clock with
//! exact frames (`connection/tests/`).
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
//! # Where each rule lives
//!
//! - `link.rs`: connecting, INFORM and ACK, heartbeats and router
//!   silence, a connection lost (link down), malformed messages;
//! - `slots.rs`: REQUESTs onto free slots or held, job timeouts, CANCEL,
//!   slot accounting;
//! - `replies.rs`: one REPLY per job, results too large, send failures,
//!   flush points (queued REPLYs, then READYs);
//! - `leaving.rs`: the router leaving (KBYE, DISCONNECT) and our own
//!   shutdown with its grace period;
//! - `window.rs`: the credit window's size (READYs beyond the free slots);
//! - `resend.rs`: REPLYs kept to be sent again after a reconnect.

use std::collections::VecDeque;
use std::time::Duration;

mod leaving;
mod link;
mod replies;
pub mod resend;
mod slots;
pub mod window;
pub use slots::SlotCounts;
pub use window::{Prefetch, Window};

use emqp_proto::heartbeat::Liveness;
use emqp_proto::job::{Job, JobOutcome};
use emqp_proto::{Message, MsgIds, QueueSpec};

use link::MalformedLog;
use slots::{Held, Slot};

/// The router's default `--max-message-size`: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = emqp_proto::DEFAULT_MAX_MESSAGE_SIZE;

/// 0.3.13's `GLOBAL_TIMEOUT`: the timeout of a job that names none.
pub const DEFAULT_GLOBAL_TIMEOUT: Duration = Duration::from_secs(300);

/// At most this many REPLYs are kept to be sent again after a reconnect
/// ([`resend`]).
pub const DEFAULT_RESEND_MAX_REPLIES: usize = 4096;

/// At most this many payload bytes of REPLYs are kept to be sent again.
pub const DEFAULT_RESEND_MAX_BYTES: usize = 16 * 1024 * 1024;

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
    /// Who this job manager is (name, host, pid, slots, version), sent in
    /// every INFORM's features so that the router shows the same name
    /// across reconnects ([`emqp_proto::WorkerAbout`]).
    pub about: emqp_proto::WorkerAbout,
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
            about: emqp_proto::WorkerAbout::default(),
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
    /// The job of `run` on `slot` reported its progress (0–100, a line of
    /// text): sent to the router as PROGRESS while connected (a report
    /// that cannot be sent is dropped: the next one replaces it).
    JobProgress {
        slot: usize,
        run: u64,
        percent: u8,
        message: String,
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
    /// What the job may know of its delivery (`emq_job.current()` in a
    /// Python job) and its trace parent (boxed: [`Action`] stays small).
    pub context: Box<JobContext>,
}

/// A job's delivery, as its REQUEST gave it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobContext {
    /// The REQUEST's queue.
    pub queue: String,
    /// The REQUEST's HEADERS frame, as text.
    pub headers: String,
    /// Which delivery this is: the router's `attempt:N` item, else 1
    /// (`emqp_proto::headers::ATTEMPT`).
    pub attempt: u32,
    /// The span the job's run is a child of: the REQUEST's `traceparent`
    /// (the router's span), which the driver replaces with its own run
    /// span when it traces (`emq_otel`), so the job's spans nest under it.
    pub traceparent: Option<emqp_proto::TraceParent>,
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
    /// INFORMs in a row left without an ACK (`link.rs`).
    unanswered_informs: u32,
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
    /// The current connection's ACK listed `reply-credit`: READYs may go
    /// in a REPLY (`replies.rs`).
    router_takes_credit: bool,
    /// The take-back key the router's last ACK gave (`link.rs`), listed in
    /// the INFORM of every later connection.
    take_back: Option<String>,
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
            router_takes_credit: false,
            take_back: None,
            cfg,
            phase: Phase::Stopped,
            broker_index: 0,
            connected_once: false,
            unanswered_informs: 0,
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

    /// The credit window: outstanding READYs, measured service time and
    /// round trip.
    pub fn window(&self) -> &Window {
        &self.window
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
            Input::JobProgress {
                slot,
                run,
                percent,
                message,
            } => self.on_job_progress(slot, run, (percent, message), now, out),
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
        link.into_iter().chain(self.job_deadlines()).min()
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
        self.fire_job_timeouts(now, out);
        match self.phase {
            Phase::AwaitingAck { since, .. } => {
                if now >= since + self.cfg.ack_timeout {
                    self.inform_unanswered(now, out);
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
}

#[cfg(test)]
mod tests;
