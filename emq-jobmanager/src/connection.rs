//! The job manager's connection logic as a sans-IO state machine.
//!
//! [`Connection::handle`] takes an [`Input`] (a message from the router, a
//! clock tick, a job starting or finishing in the pool, a shutdown request)
//! and the current time, and returns the [`Action`]s to carry out (connect a
//! fresh DEALER, send a message, start or cancel a job, exit). No sockets,
//! threads or clocks live here: time is a [`Duration`] since the start of
//! the process, passed in by the caller, so every rule is unit-tested with a
//! fake clock.
//!
//! Rules (see the tests at the bottom for each):
//! - connect → one INFORM `[queues, "worker", "job-ack"]`; no ACK within
//!   `ack_timeout` → a fresh connection (new identity, next broker), INFORM
//!   again.
//! - ACK → queued REPLYs, then one READY per free slot. No waiting for a
//!   router HEARTBEAT (a 0.3.13 quirk).
//! - REQUEST → a free slot runs it. Every finished job gets
//!   `REPLY [payload, orig_msgid, status]`, then the READY for its slot.
//! - Slot accounting: each slot is either free (with or without a READY
//!   outstanding) or busy; so outstanding READYs + running jobs never exceed
//!   the concurrency. After a reconnect READYs go out only for free slots;
//!   REPLYs of jobs that finish while disconnected wait for the next ACK.
//! - Heartbeats every interval when nothing else was sent; any message from
//!   the router is a heartbeat; silence past interval × liveness → reconnect.
//! - KBYE/DISCONNECT from the router → reconnect after `reconnect_delay`.
//! - Shutdown → KBYE, no new jobs, running jobs get `grace_period`, then are
//!   killed (failed REPLY each) and the process exits 0.
//! - `retry-count:N` → up to N local retries; `timeout:N` → cancel after N s,
//!   failed REPLY of kind `timeout`, slot freed exactly once.

use std::time::Duration;

use emqp_proto::command::FEATURE_JOB_ACK;
use emqp_proto::job::{ErrorKind, Job, JobError, JobOutcome};
use emqp_proto::{Command, Inform, Message, PeerType, QueueSpec, Reply, Request, ResultStatus};
use log::{debug, info, warn};

/// Timers and identity of a job manager connection.
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
    /// Wait this long before reconnecting after the router said KBYE.
    pub reconnect_delay: Duration,
    /// After a shutdown request, running jobs get this long to finish.
    pub grace_period: Duration,
    /// Pause before a failed job is retried (`retry-count:N`).
    pub retry_backoff: Duration,
    /// Unix time (seconds) at `now == 0`, for HEARTBEAT timestamps.
    pub unix_time_at_start: f64,
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
            retry_backoff: Duration::from_millis(200),
            unix_time_at_start: 0.0,
        }
    }

    fn silence_limit(&self) -> Duration {
        self.heartbeat_interval * self.heartbeat_liveness.max(1)
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A decoded message from the router.
    Message(Message),
    /// Time passed (call regularly, e.g. every 100 ms).
    Tick,
    /// The pool began running `run` on `slot`.
    JobStarted { slot: usize, run: u64 },
    /// The pool finished `run` on `slot`; the slot is free again.
    JobFinished {
        slot: usize,
        run: u64,
        outcome: JobOutcome,
    },
    /// SIGTERM/SIGINT: leave in order.
    Shutdown,
}

/// A job for the pool to run.
#[derive(Debug, Clone, PartialEq)]
pub struct JobStart {
    pub slot: usize,
    /// Unique per attempt; a cancel or a result names it.
    pub run: u64,
    /// The REQUEST msgid.
    pub msgid: String,
    pub job: Job,
    /// 1 for the first attempt.
    pub attempt: u32,
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
    Send(Message),
    StartJob(JobStart),
    /// Kill `run` on `slot` (it timed out); the pool still reports it finished.
    CancelJob {
        slot: usize,
        run: u64,
    },
    /// Kill every running job (end of the grace period).
    KillAll,
    /// Stop the process with this exit code.
    Exit(i32),
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    AwaitingAck {
        inform_msgid: String,
        since: Duration,
    },
    Registered,
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
    job: Job,
    attempt: u32,
    retries_left: u32,
    timeout: Option<Duration>,
    /// The run in the pool, `None` while waiting to retry.
    active: Option<u64>,
    deadline: Option<Duration>,
    timed_out: bool,
    retry_at: Option<Duration>,
    last_error: Option<JobError>,
}

#[derive(Debug, Clone)]
enum Slot {
    /// `offered`: a READY for this slot is outstanding on this connection.
    Free {
        offered: bool,
    },
    Busy(Box<Running>),
}

/// Slot counts, for logs and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotCounts {
    /// Free, with a READY outstanding.
    pub offered: usize,
    /// Free, no READY outstanding (not registered yet).
    pub idle: usize,
    /// Running a job or waiting to retry one.
    pub busy: usize,
}

/// The connection state machine. See the module docs.
pub struct Connection {
    cfg: Config,
    phase: Phase,
    slots: Vec<Slot>,
    broker_index: usize,
    connected_once: bool,
    identity: String,
    last_sent: Duration,
    last_received: Duration,
    /// REPLYs of jobs that finished while not registered.
    pending_replies: Vec<Message>,
    next_run: u64,
}

impl Connection {
    pub fn new(mut cfg: Config) -> Connection {
        if cfg.brokers.is_empty() {
            cfg.brokers.push("tcp://127.0.0.1:47290".to_string());
        }
        cfg.concurrency = cfg.concurrency.max(1);
        Connection {
            slots: vec![Slot::Free { offered: false }; cfg.concurrency],
            cfg,
            phase: Phase::Stopped,
            broker_index: 0,
            connected_once: false,
            identity: String::new(),
            last_sent: Duration::ZERO,
            last_received: Duration::ZERO,
            pending_replies: Vec::new(),
            next_run: 1,
        }
    }

    /// The first connection.
    pub fn start(&mut self, now: Duration) -> Vec<Action> {
        let mut out = Vec::new();
        self.connect(now, &mut out);
        out
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

    pub fn is_shutting_down(&self) -> bool {
        matches!(self.phase, Phase::ShuttingDown { .. } | Phase::Stopped)
    }

    pub fn slot_counts(&self) -> SlotCounts {
        let mut c = SlotCounts {
            offered: 0,
            idle: 0,
            busy: 0,
        };
        for s in &self.slots {
            match s {
                Slot::Free { offered: true } => c.offered += 1,
                Slot::Free { offered: false } => c.idle += 1,
                Slot::Busy(_) => c.busy += 1,
            }
        }
        c
    }

    pub fn handle(&mut self, input: Input, now: Duration) -> Vec<Action> {
        let mut out = Vec::new();
        self.handle_into(input, now, &mut out);
        out
    }

    /// [`Connection::handle`], appending the actions to `out` (no
    /// allocation per input in the socket loop).
    pub fn handle_into(&mut self, input: Input, now: Duration, out: &mut Vec<Action>) {
        if self.phase == Phase::Stopped && self.connected_once {
            return;
        }
        match input {
            Input::Message(m) => self.on_message(m, now, out),
            Input::Tick => self.on_tick(now, out),
            Input::JobStarted { slot, run } => self.on_job_started(slot, run, now),
            Input::JobFinished { slot, run, outcome } => {
                self.on_job_finished(slot, run, outcome, now, out)
            }
            Input::Shutdown => self.on_shutdown(now, out),
        }
    }

    // ---- connection ---------------------------------------------------

    fn connect(&mut self, now: Duration, out: &mut Vec<Action>) {
        if self.connected_once {
            self.broker_index = (self.broker_index + 1) % self.cfg.brokers.len();
        }
        self.connected_once = true;
        self.identity = emqp_proto::new_msgid();
        for s in &mut self.slots {
            if let Slot::Free { offered } = s {
                *offered = false;
            }
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
        let inform = Message::new(Command::Inform(Inform {
            queues: self.cfg.queues.clone(),
            peer_type: Some(PeerType::Worker),
            features: vec![FEATURE_JOB_ACK.to_string()],
        }));
        self.phase = Phase::AwaitingAck {
            inform_msgid: inform.msgid.clone(),
            since: now,
        };
        self.last_received = now;
        self.send(inform, now, out);
    }

    fn reconnect(&mut self, now: Duration, why: &str, out: &mut Vec<Action>) {
        warn!(
            "{why}: reconnecting (was {} on {})",
            self.identity,
            self.endpoint()
        );
        self.connect(now, out);
    }

    fn send(&mut self, msg: Message, now: Duration, out: &mut Vec<Action>) {
        self.last_sent = now;
        out.push(Action::Send(msg));
    }

    fn send_ready(&mut self, slot: usize, now: Duration, out: &mut Vec<Action>) {
        self.slots[slot] = Slot::Free { offered: true };
        self.send(Message::new(Command::Ready), now, out);
    }

    fn heartbeat(&self, now: Duration) -> Message {
        let ts = self.cfg.unix_time_at_start + now.as_secs_f64();
        Message::new(Command::Heartbeat {
            timestamp: Some(format!("{ts}")),
        })
    }

    // ---- inputs -------------------------------------------------------

    fn on_message(&mut self, msg: Message, now: Duration, out: &mut Vec<Action>) {
        if !matches!(msg.command, Command::Disconnect) {
            self.last_received = now;
        }
        match msg.command {
            Command::Ack { acked_msgid } => self.on_ack(&acked_msgid, now, out),
            Command::Heartbeat { .. } => {}
            Command::Request(req) => self.on_request(msg.msgid, req, now, out),
            Command::Kbye | Command::Disconnect => {
                if self.is_shutting_down() {
                    return;
                }
                warn!(
                    "router {} said {}; reconnecting in {:?}",
                    self.endpoint(),
                    if matches!(msg.command, Command::Kbye) {
                        "KBYE"
                    } else {
                        "DISCONNECT"
                    },
                    self.cfg.reconnect_delay
                );
                for s in &mut self.slots {
                    if let Slot::Free { offered } = s {
                        *offered = false;
                    }
                }
                self.phase = Phase::Waiting {
                    until: now + self.cfg.reconnect_delay,
                };
            }
            other => debug!("ignoring {} from the router", other.name()),
        }
    }

    fn on_ack(&mut self, acked: &str, now: Duration, out: &mut Vec<Action>) {
        let Phase::AwaitingAck { inform_msgid, .. } = &self.phase else {
            debug!("ignoring ACK of {acked}: not waiting for one");
            return;
        };
        if acked != inform_msgid {
            warn!("ACK names {acked}, our INFORM was {inform_msgid}; accepting it");
        }
        self.phase = Phase::Registered;
        info!(
            "registered with {} as {} ({} queued result(s))",
            self.endpoint(),
            self.identity,
            self.pending_replies.len()
        );
        for reply in std::mem::take(&mut self.pending_replies) {
            self.send(reply, now, out);
        }
        for i in 0..self.slots.len() {
            if matches!(self.slots[i], Slot::Free { .. }) {
                self.send_ready(i, now, out);
            }
        }
    }

    fn on_request(&mut self, msgid: String, req: Request, now: Duration, out: &mut Vec<Action>) {
        if self.is_shutting_down() {
            warn!("REQUEST {msgid} arrived after KBYE; not running it (the router owns it)");
            return;
        }
        let pick = self
            .slots
            .iter()
            .position(|s| matches!(s, Slot::Free { offered: true }))
            .or_else(|| {
                self.slots
                    .iter()
                    .position(|s| matches!(s, Slot::Free { offered: false }))
            });
        let Some(slot) = pick else {
            warn!(
                "REQUEST {msgid} but all {} slot(s) are busy (more REQUESTs than READYs); failing it",
                self.cfg.concurrency
            );
            let err = JobError::new(
                ErrorKind::Crash,
                "job manager had no free slot (router sent more jobs than READYs)",
            );
            self.queue_or_send_reply(&msgid, &JobOutcome::Error(err), now, out);
            return;
        };
        let job = match Job::parse(&req.message) {
            Ok(job) => job,
            Err(e) => {
                warn!("REQUEST {msgid}: bad job: {e}");
                self.slots[slot] = Slot::Free { offered: false };
                let err = JobError::new(ErrorKind::BadJob, e.to_string());
                self.finish_slot(slot, &msgid, JobOutcome::Error(err), now, out);
                return;
            }
        };
        let run = self.next_run;
        self.next_run += 1;
        let timeout = req.headers.timeout_secs().map(Duration::from_secs);
        let retries = req.headers.retry_count().unwrap_or(0);
        debug!(
            "job {msgid} on slot {slot} (queue {}, timeout {timeout:?}, retries {retries})",
            req.queue
        );
        self.slots[slot] = Slot::Busy(Box::new(Running {
            msgid: msgid.clone(),
            job: job.clone(),
            attempt: 1,
            retries_left: retries,
            timeout,
            active: Some(run),
            deadline: timeout.map(|t| now + t),
            timed_out: false,
            retry_at: None,
            last_error: None,
        }));
        out.push(Action::StartJob(JobStart {
            slot,
            run,
            msgid,
            job,
            attempt: 1,
            timeout,
        }));
    }

    fn on_job_started(&mut self, slot: usize, run: u64, now: Duration) {
        if let Some(Slot::Busy(r)) = self.slots.get_mut(slot) {
            if r.active == Some(run) {
                debug!(
                    "job {} started on slot {slot} (attempt {})",
                    r.msgid, r.attempt
                );
                if !r.timed_out {
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
        let shutting_down = self.is_shutting_down();
        let Some(Slot::Busy(r)) = self.slots.get_mut(slot) else {
            warn!("result of run {run} for slot {slot}, which is not busy; ignored");
            return;
        };
        if r.active != Some(run) {
            warn!("stale result of run {run} on slot {slot}; ignored");
            return;
        }
        r.active = None;
        let mut outcome = outcome;
        if r.timed_out {
            if let JobOutcome::Error(_) = outcome {
                let secs = r.timeout.map(|t| t.as_secs()).unwrap_or(0);
                outcome = JobOutcome::Error(JobError::new(
                    ErrorKind::Timeout,
                    format!("job ran past its timeout of {secs} s and was killed"),
                ));
            }
        }
        match outcome {
            JobOutcome::Value(v) => {
                debug!("job {} finished ok on slot {slot}", r.msgid);
                let msgid = r.msgid.clone();
                self.finish_slot(slot, &msgid, JobOutcome::Value(v), now, out);
            }
            JobOutcome::Error(mut e) => {
                e.attempts = Some(r.attempt);
                let retryable = !matches!(e.kind, ErrorKind::BadJob | ErrorKind::UnknownHandler);
                if retryable && r.retries_left > 0 && !shutting_down {
                    r.retries_left -= 1;
                    r.attempt += 1;
                    r.timed_out = false;
                    r.deadline = None;
                    r.retry_at = Some(now + self.cfg.retry_backoff);
                    warn!(
                        "job {} failed ({:?}: {}); retrying (attempt {}, {} retr(ies) left after it)",
                        r.msgid, e.kind, e.message, r.attempt, r.retries_left
                    );
                    r.last_error = Some(e);
                } else {
                    warn!(
                        "job {} failed on slot {slot} after {} attempt(s): {:?}: {}",
                        r.msgid, r.attempt, e.kind, e.message
                    );
                    let msgid = r.msgid.clone();
                    self.finish_slot(slot, &msgid, JobOutcome::Error(e), now, out);
                }
            }
        }
    }

    /// A job is done for good: REPLY, then the READY that frees the slot.
    fn finish_slot(
        &mut self,
        slot: usize,
        msgid: &str,
        outcome: JobOutcome,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        self.slots[slot] = Slot::Free { offered: false };
        self.queue_or_send_reply(msgid, &outcome, now, out);
        match self.phase {
            Phase::Registered => self.send_ready(slot, now, out),
            Phase::ShuttingDown { .. } => self.maybe_exit(out),
            _ => {}
        }
    }

    fn queue_or_send_reply(
        &mut self,
        msgid: &str,
        outcome: &JobOutcome,
        now: Duration,
        out: &mut Vec<Action>,
    ) {
        let status = if outcome.is_ok() {
            ResultStatus::Ok
        } else {
            ResultStatus::Failed
        };
        let reply = Message::new(Command::Reply(Reply::result(
            outcome.to_payload(),
            msgid.to_string(),
            status,
        )));
        match self.phase {
            Phase::Registered | Phase::ShuttingDown { .. } => self.send(reply, now, out),
            _ => {
                debug!("result of {msgid} queued until the router ACKs us");
                self.pending_replies.push(reply);
            }
        }
    }

    fn on_tick(&mut self, now: Duration, out: &mut Vec<Action>) {
        // Job timers first: a timeout or a retry does not depend on the link.
        let shutting_down = self.is_shutting_down();
        for slot in 0..self.slots.len() {
            let Slot::Busy(r) = &mut self.slots[slot] else {
                continue;
            };
            match (r.active, r.deadline, r.retry_at) {
                (Some(run), Some(deadline), _) if !r.timed_out && now >= deadline => {
                    r.timed_out = true;
                    warn!(
                        "job {} on slot {slot} ran past its timeout of {:?}; killing it",
                        r.msgid,
                        r.timeout.unwrap_or_default()
                    );
                    out.push(Action::CancelJob { slot, run });
                }
                (None, _, Some(at)) if now >= at && shutting_down => {
                    let msgid = r.msgid.clone();
                    let err = r.last_error.take().unwrap_or_else(|| {
                        JobError::new(ErrorKind::Crash, "job manager shut down before a retry")
                    });
                    self.finish_slot(slot, &msgid, JobOutcome::Error(err), now, out);
                }
                (None, _, Some(at)) if now >= at => {
                    let run = self.next_run;
                    self.next_run += 1;
                    r.active = Some(run);
                    r.retry_at = None;
                    r.deadline = r.timeout.map(|t| now + t);
                    out.push(Action::StartJob(JobStart {
                        slot,
                        run,
                        msgid: r.msgid.clone(),
                        job: r.job.clone(),
                        attempt: r.attempt,
                        timeout: r.timeout,
                    }));
                }
                _ => {}
            }
        }
        match self.phase.clone() {
            Phase::AwaitingAck { since, .. } => {
                if now.saturating_sub(since) >= self.cfg.ack_timeout {
                    self.reconnect(now, "no ACK for our INFORM", out);
                }
            }
            Phase::Registered => {
                if now.saturating_sub(self.last_received) >= self.cfg.silence_limit() {
                    let why = format!(
                        "router silent for {:?}",
                        now.saturating_sub(self.last_received)
                    );
                    self.reconnect(now, &why, out);
                } else if now.saturating_sub(self.last_sent) >= self.cfg.heartbeat_interval {
                    let hb = self.heartbeat(now);
                    self.send(hb, now, out);
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
                } else {
                    self.maybe_exit(out);
                }
            }
            Phase::Stopped => {}
        }
    }

    fn on_shutdown(&mut self, now: Duration, out: &mut Vec<Action>) {
        if self.is_shutting_down() {
            return;
        }
        let busy = self.slot_counts().busy;
        info!(
            "shutting down: KBYE to {}, {busy} running job(s) get {:?}",
            self.endpoint(),
            self.cfg.grace_period
        );
        for reply in std::mem::take(&mut self.pending_replies) {
            self.send(reply, now, out);
        }
        self.send(Message::new(Command::Kbye), now, out);
        self.phase = Phase::ShuttingDown {
            deadline: now + self.cfg.grace_period,
        };
        // Jobs waiting for a retry are not retried any more.
        for slot in 0..self.slots.len() {
            if let Slot::Busy(r) = &mut self.slots[slot] {
                if r.active.is_none() {
                    let msgid = r.msgid.clone();
                    let err = r.last_error.take().unwrap_or_else(|| {
                        JobError::new(ErrorKind::Crash, "job manager shut down before a retry")
                    });
                    self.slots[slot] = Slot::Free { offered: false };
                    self.queue_or_send_reply(&msgid, &JobOutcome::Error(err), now, out);
                }
            }
        }
        self.maybe_exit(out);
    }

    fn maybe_exit(&mut self, out: &mut Vec<Action>) {
        if self.slot_counts().busy == 0 {
            info!("no jobs running; exiting");
            self.phase = Phase::Stopped;
            out.push(Action::Exit(0));
        }
    }

    fn kill_remaining(&mut self, now: Duration, out: &mut Vec<Action>) {
        warn!(
            "grace period over; killing {} running job(s)",
            self.slot_counts().busy
        );
        out.push(Action::KillAll);
        for slot in 0..self.slots.len() {
            if let Slot::Busy(r) = &self.slots[slot] {
                let msgid = r.msgid.clone();
                let mut err = JobError::new(
                    ErrorKind::Crash,
                    "killed: the job manager shut down and the grace period ran out",
                );
                err.attempts = Some(r.attempt);
                self.slots[slot] = Slot::Free { offered: false };
                self.queue_or_send_reply(&msgid, &JobOutcome::Error(err), now, out);
            }
        }
        self.phase = Phase::Stopped;
        out.push(Action::Exit(0));
    }
}

#[cfg(test)]
mod tests;
