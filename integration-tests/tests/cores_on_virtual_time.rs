//! The router core and the job manager's connection core, run together on
//! virtual time.
//!
//! A discrete-event simulation in one process: one `Router`
//! (`emq-router-core`) and one or more job manager `Connection`s
//! (`emq-jobmanager`), joined by a simulated network, with a fake client
//! on the router's frontend, a fake pool behind each job manager and a
//! fake journal store. No sockets, threads or clocks: the clock jumps to
//! the earliest of every core's `poll_timeout()` and the next delivery —
//! never by a fixed tick — so a minute of heartbeats costs a few hundred
//! steps, and every run is the same (the cores' ids are seeded).
//!
//! The parts, each a struct followed by its functions:
//! - `Sim`: the clock, the event queue and the loop (`step`,
//!   `run_until`); it carries out what the cores ask for, in order,
//!   feeding failed sends and journal outcomes back — the router through
//!   the core's one test driver (`emq_router_core::testing`), whose
//!   `Effects` here are `RouterWorld`;
//! - `RouterNode`, `JmNode` and `Pool`: a core and what the harness keeps
//!   about it; the pool "runs" a `SimJob` for the time its payload says;
//! - `Network` and `Fault`: a latency per link, FIFO delivery (as TCP),
//!   frames dropped or delayed on command, sends to a gone identity
//!   reported back to the router as `SendFailed`; and the link reset
//!   (`Sim::reset_link`): what a TCP reset does under ZMTP — the frames in
//!   transit on a job manager's link are lost, its driver's socket monitor
//!   reports the link down to its core, the router hears nothing;
//! - `Client`: REQUESTs in; acknowledgements, RESULTs and REJECTs out;
//! - `JournalStore`: commits every batch, or fails while told to;
//! - `Trace`: what happened, for the assertions.
//!
//! Then the tests: the rules that span both cores (docs/PROTOCOL.md, the
//! router core's `router/*.rs`, `emq-jobmanager/src/connection/*.rs`).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use emq_jobmanager::connection::{self as jm, Connection};
use emq_router_core::testing::{Driver, Effects, Flush};
use emq_router_core::{self as rc, Router};
use emqp_proto::job::{CallJob, ErrorKind, Job, JobError, JobOutcome};
use emqp_proto::{Command, Headers, Message, QueueSpec, RejectReason, Request, ResultStatus};
use serde_json::json;

type Frames = Vec<Vec<u8>>;

// ----- time at the boundary ------------------------------------------------

// Both cores take `Duration` since start: the simulation's clock is theirs.

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

// ----- SimJob ----------------------------------------------------------------

/// A simulated job, the `call` job `["call", {"handler": "sim", "args":
/// {"n": N, "ms": MS, "fail": F}}]`: the fake pool runs it for MS virtual
/// milliseconds, then reports `{"value": {"n": N}}`, or a failure of kind
/// `exception` when F. Its msgid is `job-NNNNN`.
#[derive(Debug, Clone, Copy)]
struct SimJob {
    n: u64,
    ms: u64,
    fail: bool,
}

impl SimJob {
    fn ok(n: u64, ms: u64) -> SimJob {
        SimJob { n, ms, fail: false }
    }

    fn failing(n: u64, ms: u64) -> SimJob {
        SimJob { n, ms, fail: true }
    }

    fn msgid(&self) -> String {
        msgid_of(self.n)
    }

    /// The MSG frame of its REQUEST.
    fn message(&self) -> Vec<u8> {
        Job::Call(CallJob {
            handler: "sim".into(),
            args: json!({"n": self.n, "ms": self.ms, "fail": self.fail}),
        })
        .to_message()
    }

    /// The job a job manager was told to start: only `SimJob`s are ever
    /// submitted, so anything else is a harness bug.
    fn from_job(job: &Job) -> SimJob {
        let Job::Call(c) = job else {
            panic!("not a simulated job: {job:?}")
        };
        let a = &c.args;
        SimJob {
            n: a["n"].as_u64().expect("n"),
            ms: a["ms"].as_u64().expect("ms"),
            fail: a["fail"].as_bool().expect("fail"),
        }
    }

    /// What the pool reports when the job ran to its end.
    fn outcome(&self) -> JobOutcome {
        if self.fail {
            JobOutcome::Error(JobError::new(
                ErrorKind::Exception,
                format!("job {} was told to fail", self.n),
            ))
        } else {
            JobOutcome::Value(json!({"n": self.n}))
        }
    }
}

fn msgid_of(n: u64) -> String {
    format!("job-{n:05}")
}

// ----- Event -----------------------------------------------------------------

/// Something due at an instant of the event queue.
#[derive(Debug)]
enum Event {
    /// Frames reach a router socket: `[identity, '', eMQP/1.0, CMD, ...]`.
    ToRouter { socket: rc::Socket, frames: Frames },
    /// Frames reach job manager `jm`'s DEALER of connection `identity`
    /// (lost if it has reconnected since).
    ToJm {
        jm: usize,
        identity: String,
        frames: Frames,
    },
    /// Frames reach the client's DEALER.
    ToClient { frames: Frames },
    /// A run of job manager `jm`'s pool ends.
    JobEnds { jm: usize, slot: usize, run: u64 },
    /// The journal store answers a batch.
    JournalAnswers {
        batch: rc::BatchId,
        result: rc::BatchResult,
    },
}

// ----- Network and Fault -----------------------------------------------------

/// Which way a frame goes: to the router, or from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Dir {
    ToRouter,
    FromRouter,
}

/// The link a frame travels on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Link {
    Client,
    Jm(usize),
}

/// What a fault does to the frames it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    Drop,
    /// Delivered this much later (and, links being FIFO, so is whatever
    /// follows it on the link).
    Delay(Duration),
}

/// A fault on the frames of one connection (by its identity) in one
/// direction, from the moment it is added.
#[derive(Debug, Clone)]
struct Fault {
    dir: Dir,
    /// The job manager connection (or client) identity.
    identity: String,
    /// Only frames of this command; `None`: every frame.
    command: Option<&'static str>,
    effect: Effect,
    /// How many more frames it hits; `None`: no limit.
    left: Option<u32>,
    /// It ends at this instant; `None`: never.
    until: Option<Duration>,
}

impl Fault {
    /// Drop every frame `identity` sends to the router.
    fn silence(identity: &str) -> Fault {
        Fault {
            dir: Dir::ToRouter,
            identity: identity.to_string(),
            command: None,
            effect: Effect::Drop,
            left: None,
            until: None,
        }
    }

    /// Drop the next frame of `command` that `identity` sends the router.
    fn drop_one(identity: &str, command: &'static str) -> Fault {
        Fault {
            command: Some(command),
            left: Some(1),
            ..Fault::silence(identity)
        }
    }

    /// Delay every frame `identity` sends the router by `by` until `until`.
    fn delay(identity: &str, by: Duration, until: Duration) -> Fault {
        Fault {
            effect: Effect::Delay(by),
            until: Some(until),
            ..Fault::silence(identity)
        }
    }

    fn hits(&self, now: Duration, dir: Dir, identity: &str, command: &str) -> bool {
        self.dir == dir
            && self.identity == identity
            && (self.command.is_none() || self.command == Some(command))
            && self.left != Some(0)
            && (self.until.is_none() || Some(now) < self.until)
    }
}

/// A frame a fault or a link reset dropped.
#[derive(Debug, Clone)]
struct Dropped {
    at: Duration,
    dir: Dir,
    identity: String,
    message: Option<Message>,
}

/// The wires: one latency per link, FIFO per link and direction, faults.
#[derive(Debug)]
struct Network {
    /// One way, client ↔ router frontend.
    client_latency: Duration,
    /// One way, job manager `i` ↔ router backend.
    jm_latency: Vec<Duration>,
    faults: Vec<Fault>,
    /// The last delivery scheduled on each link and direction.
    last_delivery: HashMap<(Link, Dir), Duration>,
    dropped: Vec<Dropped>,
}

impl Network {
    /// When `frames` (DEALER form: delimiter first) sent now by or to
    /// `identity` arrive, or `None` when a fault drops them. A delayed
    /// frame holds back what follows it on its link, as TCP does.
    fn route(
        &mut self,
        now: Duration,
        link: Link,
        dir: Dir,
        identity: &str,
        frames: &[Vec<u8>],
    ) -> Option<Duration> {
        let command = frames
            .get(2)
            .and_then(|c| std::str::from_utf8(c).ok())
            .unwrap_or("");
        let mut extra = Duration::ZERO;
        for f in &mut self.faults {
            if !f.hits(now, dir, identity, command) {
                continue;
            }
            if let Some(n) = &mut f.left {
                *n -= 1;
            }
            match f.effect {
                Effect::Drop => {
                    self.dropped.push(Dropped {
                        at: now,
                        dir,
                        identity: identity.to_string(),
                        message: Message::decode(frames.to_vec()).ok(),
                    });
                    return None;
                }
                Effect::Delay(d) => extra += d,
            }
        }
        let latency = match link {
            Link::Client => self.client_latency,
            Link::Jm(i) => self.jm_latency[i],
        };
        let last = self.last_delivery.entry((link, dir)).or_default();
        let at = (now + latency + extra).max(*last);
        *last = at;
        Some(at)
    }

    /// The orig msgids of the REPLYs a fault dropped on their way from
    /// `identity` to the router.
    fn dropped_replies_from(&self, identity: &str) -> Vec<String> {
        self.dropped
            .iter()
            .filter(|d| d.dir == Dir::ToRouter && d.identity == identity)
            .filter_map(|d| match &d.message {
                Some(Message {
                    command: Command::Reply(r),
                    ..
                }) => r.orig_msgid.clone(),
                _ => None,
            })
            .collect()
    }
}

// ----- Client ----------------------------------------------------------------

/// The fake client on the router's frontend.
#[derive(Debug, Default)]
struct Client {
    identity: Vec<u8>,
    /// Acknowledgements (`REPLY [msgid]`) per msgid.
    acks: HashMap<String, u32>,
    /// RESULTs per msgid: `(arrival, status, payload)`.
    results: HashMap<String, Vec<(Duration, ResultStatus, Vec<u8>)>>,
    rejects: HashMap<String, Vec<RejectReason>>,
}

impl Client {
    /// Record what the router sent.
    fn on_frames(&mut self, now: Duration, frames: Frames) {
        let msg = Message::decode(frames).expect("the router sends the client decodable frames");
        match msg.command {
            Command::Reply(r) if r.orig_msgid.is_none() => {
                let msgid = String::from_utf8(r.payload).expect("acked msgid");
                *self.acks.entry(msgid).or_default() += 1;
            }
            Command::Result(r) => self
                .results
                .entry(r.orig_msgid)
                .or_default()
                .push((now, r.status, r.payload)),
            Command::Reject(r) => self.rejects.entry(r.orig_msgid).or_default().push(r.reason),
            other => panic!("client got an unexpected {}", other.name()),
        }
    }

    fn result_count(&self) -> usize {
        self.results.values().map(Vec::len).sum()
    }
}

// ----- JournalStore ----------------------------------------------------------

/// The fake journal store: commits every batch after `latency`, or fails
/// it while `fail` holds an error text.
#[derive(Debug, Default)]
struct JournalStore {
    latency: Duration,
    fail: Option<String>,
    committed: Vec<rc::Record>,
    batches: u64,
    failed: u64,
}

impl JournalStore {
    fn append(&mut self, batch: &rc::Batch) -> rc::BatchResult {
        self.batches += 1;
        match &self.fail {
            Some(e) => {
                self.failed += 1;
                rc::BatchResult::Failed(e.clone())
            }
            None => {
                self.committed.extend(batch.records.iter().cloned());
                rc::BatchResult::Committed
            }
        }
    }
}

// ----- Trace -----------------------------------------------------------------

/// One run of a job on a job manager's pool.
#[derive(Debug, Clone)]
struct Run {
    jm: usize,
    /// The job manager's connection when the job started.
    identity: String,
    msgid: String,
    started: Duration,
    ended: Option<Duration>,
    ok: Option<bool>,
}

/// A HEARTBEAT on the wire.
#[derive(Debug, Clone)]
struct Heartbeat {
    sent: Duration,
    /// `None`: dropped.
    arrives: Option<Duration>,
    from_router: bool,
    /// The job manager connection it went to or came from.
    identity: String,
}

/// What happened, for the assertions.
#[derive(Debug, Default)]
struct Trace {
    runs: Vec<Run>,
    /// REQUESTs the router sent to job managers: `(sent, identity, msgid)`.
    dispatches: Vec<(Duration, String, String)>,
    heartbeats: Vec<Heartbeat>,
    /// When the router last read a frame from each backend identity.
    heard_by_router: HashMap<String, Duration>,
    /// When each job manager connection last read a frame.
    heard_by_jm: HashMap<String, Duration>,
    /// The router's worker count after each change: `(when, count)`.
    worker_counts: Vec<(Duration, usize)>,
    /// Position, in the router's action order, of each RESULT send.
    result_actions: HashMap<String, u64>,
    /// Router sends to an identity nobody holds: `(when, identity)`.
    send_failures: Vec<(Duration, String)>,
}

impl Trace {
    fn runs_of(&self, msgid: &str) -> Vec<&Run> {
        self.runs.iter().filter(|r| r.msgid == msgid).collect()
    }

    /// Heartbeats between the router and connection `identity`, one way.
    fn heartbeats(&self, identity: &str, from_router: bool) -> Vec<&Heartbeat> {
        self.heartbeats
            .iter()
            .filter(|h| h.identity == identity && h.from_router == from_router)
            .collect()
    }
}

// ----- RouterNode ------------------------------------------------------------

/// The router core and what the harness keeps about it.
#[derive(Debug)]
struct RouterNode {
    core: Router,
    /// The one test driver of the router core: sends, journal batches,
    /// `Flushed` after the sends (`rc::testing`).
    driver: Driver,
    /// When it emitted `Exit`, and that action's position in its action
    /// order. A router that exited reads nothing more.
    exited: Option<(Duration, u64)>,
    /// Actions carried out so far.
    actions: u64,
    /// Check the core's invariants after every `check_every` inputs and
    /// timeouts (the check walks every queued job: after each one is too
    /// slow with 1,000 queued); `unchecked` counts since the last check.
    check_every: u64,
    unchecked: u64,
}

impl RouterNode {
    fn is_up(&self) -> bool {
        self.exited.is_none()
    }

    fn check(&mut self, force: bool) {
        self.unchecked += 1;
        if force || self.unchecked >= self.check_every {
            self.unchecked = 0;
            if let Err(e) = self.core.check_invariants() {
                panic!("router invariant broken: {e}");
            }
        }
    }
}

// ----- JmNode and Pool -------------------------------------------------------

/// A job manager: its connection core, its current connection and its pool.
struct JmNode {
    core: Connection,
    /// The identity of its current connection; `None` before the first
    /// `Connect` and after `Exit`.
    link: Option<String>,
    /// Every `Connect`: `(when, identity)`.
    connects: Vec<(Duration, String)>,
    exited: Option<i32>,
    pool: Pool,
}

/// A run on a slot of the fake pool.
#[derive(Debug)]
struct Running {
    run: u64,
    job: SimJob,
    /// Its entry in `Trace::runs`.
    trace: usize,
}

/// The fake pool: runs a `SimJob` for its virtual duration.
#[derive(Debug, Default)]
struct Pool {
    running: BTreeMap<usize, Running>,
}

impl Pool {
    /// Start a job; returns when it ends.
    fn start(
        &mut self,
        jm: usize,
        identity: &str,
        start: &jm::JobStart,
        now: Duration,
        trace: &mut Trace,
    ) -> Duration {
        let job = SimJob::from_job(&start.job);
        assert!(
            !self.running.contains_key(&start.slot),
            "job manager {jm} started {} on busy slot {}",
            start.msgid,
            start.slot
        );
        trace.runs.push(Run {
            jm,
            identity: identity.to_string(),
            msgid: start.msgid.clone(),
            started: now,
            ended: None,
            ok: None,
        });
        self.running.insert(
            start.slot,
            Running {
                run: start.run,
                job,
                trace: trace.runs.len() - 1,
            },
        );
        now + ms(job.ms)
    }

    /// Run `run` on `slot` ends now, with its own outcome or `forced`
    /// (cancelled, killed); `None` if it ended already.
    fn end(
        &mut self,
        slot: usize,
        run: u64,
        forced: Option<JobOutcome>,
        now: Duration,
        trace: &mut Trace,
    ) -> Option<JobOutcome> {
        if self.running.get(&slot).map(|r| r.run) != Some(run) {
            return None;
        }
        let r = self.running.remove(&slot)?;
        let outcome = forced.unwrap_or_else(|| r.job.outcome());
        let t = &mut trace.runs[r.trace];
        t.ended = Some(now);
        t.ok = Some(outcome.is_ok());
        Some(outcome)
    }

    fn running_msgids(&self, trace: &Trace) -> Vec<String> {
        self.running
            .values()
            .map(|r| trace.runs[r.trace].msgid.clone())
            .collect()
    }
}

// ----- Sim -------------------------------------------------------------------

/// Steps before a run is declared stuck.
const MAX_STEPS: u64 = 2_000_000;
/// Steps at one instant before a run is declared stuck (a core whose
/// `poll_timeout` stays at or before `now` after `handle_timeout`).
const MAX_STEPS_PER_INSTANT: u64 = 100_000;

/// The simulation: the clock, the event queue, the nodes and the wires.
struct Sim {
    now: Duration,
    /// Events by `(instant, sequence)`: same-instant events keep the
    /// order they were scheduled in.
    queue: BTreeMap<(Duration, u64), Event>,
    seq: u64,
    steps: u64,
    steps_at_now: u64,
    router: RouterNode,
    jms: Vec<JmNode>,
    net: Network,
    client: Client,
    journal: JournalStore,
    trace: Trace,
}

/// What the loop does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Next {
    Event,
    RouterTimer,
    JmTimer(usize),
}

impl Sim {
    /// A router with a journal, and one job manager per entry of `slots`
    /// (that many slots each) serving `default`, all with the default
    /// timers; the job managers connect at time 0.
    fn new(slots: &[usize]) -> Sim {
        let router = rc::Config {
            journal: true,
            id_seed: 1,
            ..rc::Config::default()
        };
        let jms = slots
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let mut c = jm::Config::new(
                    vec!["tcp://router:47290".into()],
                    QueueSpec::parse_cli("default").unwrap(),
                    n,
                );
                c.id_seed = 1000 + i as u64;
                c
            })
            .collect();
        Sim::with(router, jms)
    }

    /// A simulation of these cores; latencies: client 100 µs, job manager
    /// `i` 250 + 50·i µs, journal 500 µs.
    fn with(router: rc::Config, jms: Vec<jm::Config>) -> Sim {
        let n = jms.len();
        let mut sim = Sim {
            now: Duration::ZERO,
            queue: BTreeMap::new(),
            seq: 0,
            steps: 0,
            steps_at_now: 0,
            router: RouterNode {
                core: Router::new(router),
                driver: {
                    let mut d = Driver::new(Flush::AfterActions);
                    d.check = false; // `RouterNode::check`, sampled
                    d
                },
                exited: None,
                actions: 0,
                check_every: 1,
                unchecked: 0,
            },
            jms: jms
                .into_iter()
                .map(|c| JmNode {
                    core: Connection::new(c),
                    link: None,
                    connects: Vec::new(),
                    exited: None,
                    pool: Pool::default(),
                })
                .collect(),
            net: Network {
                client_latency: us(100),
                jm_latency: (0..n as u64).map(|i| us(250 + 50 * i)).collect(),
                faults: Vec::new(),
                last_delivery: HashMap::new(),
                dropped: Vec::new(),
            },
            client: Client {
                identity: b"client-1".to_vec(),
                ..Client::default()
            },
            journal: JournalStore {
                latency: us(500),
                ..JournalStore::default()
            },
            trace: Trace::default(),
        };
        for i in 0..n {
            let mut out = Vec::new();
            sim.jms[i].core.start(sim.now, &mut out);
            sim.jm_actions(i, out);
        }
        sim
    }

    // ----- the loop ------------------------------------------------------

    /// Do the next thing due at or before `limit`: the earliest of the
    /// next delivery and every live core's `poll_timeout()` (a deadline in
    /// the past is due now). At one instant, deliveries go first — the
    /// driver reads its sockets, then handles timers. Returns false when
    /// nothing is due by `limit`.
    fn step(&mut self, limit: Duration) -> bool {
        let mut next: Option<(Duration, Next)> = None;
        let mut consider = |t: Option<Duration>, what: Next| {
            if let Some(t) = t {
                let cand = (t.max(self.now), what);
                match next {
                    Some(n) if n <= cand => {}
                    _ => next = Some(cand),
                }
            }
        };
        consider(self.queue.keys().next().map(|k| k.0), Next::Event);
        if self.router.is_up() {
            consider(self.router.core.poll_timeout(), Next::RouterTimer);
        }
        for (i, j) in self.jms.iter().enumerate() {
            if j.exited.is_none() {
                consider(j.core.poll_timeout(), Next::JmTimer(i));
            }
        }
        let Some((t, what)) = next else {
            return false;
        };
        if t > limit {
            return false;
        }
        self.advance_to(t);
        match what {
            Next::Event => {
                let (_, ev) = self.queue.pop_first().expect("an event is due");
                self.deliver(ev);
            }
            Next::RouterTimer => self.router_call(|d, r, now, fx, out| d.timeout(r, now, fx, out)),
            Next::JmTimer(i) => {
                let mut out = Vec::new();
                self.jms[i].core.handle_timeout(self.now, &mut out);
                self.jm_actions(i, out);
            }
        }
        true
    }

    /// Move the clock (never back), counting steps against the bounds.
    fn advance_to(&mut self, t: Duration) {
        self.steps += 1;
        assert!(self.steps < MAX_STEPS, "no end after {MAX_STEPS} steps");
        if t > self.now {
            self.now = t;
            self.steps_at_now = 0;
        }
        self.steps_at_now += 1;
        assert!(
            self.steps_at_now < MAX_STEPS_PER_INSTANT,
            "stuck at {:?}: a core's poll_timeout does not move on",
            self.now
        );
    }

    /// Step until `done` holds (true) or nothing is due by `limit`
    /// (false; the clock is then at `limit`).
    fn run_until(&mut self, limit: Duration, done: impl Fn(&Sim) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if !self.step(limit) {
                self.now = self.now.max(limit);
                return done(self);
            }
        }
    }

    /// Let `d` of virtual time pass.
    fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        self.run_until(limit, |_| false);
    }

    fn schedule(&mut self, at: Duration, ev: Event) {
        let mut events = Events {
            queue: &mut self.queue,
            seq: &mut self.seq,
        };
        events.schedule(at, ev);
    }

    /// Carry out a due event.
    fn deliver(&mut self, ev: Event) {
        match ev {
            Event::ToRouter { socket, frames } => {
                if !self.router.is_up() {
                    return;
                }
                if socket == rc::Socket::Backend {
                    let id = String::from_utf8_lossy(&frames[0]).into_owned();
                    self.trace.heard_by_router.insert(id, self.now);
                }
                self.router_input(rc::Input::Frames { socket, frames });
            }
            Event::ToJm {
                jm,
                identity,
                frames,
            } => {
                if self.jms[jm].link.as_deref() != Some(identity.as_str()) {
                    return; // that connection is gone
                }
                self.trace.heard_by_jm.insert(identity, self.now);
                self.jm_input(jm, jm::Input::Frames(frames));
            }
            Event::ToClient { frames } => self.client.on_frames(self.now, frames),
            Event::JobEnds { jm, slot, run } => {
                let j = &mut self.jms[jm];
                if let Some(outcome) = j.pool.end(slot, run, None, self.now, &mut self.trace) {
                    self.jm_input(jm, jm::Input::JobFinished { slot, run, outcome });
                }
            }
            Event::JournalAnswers { batch, result } => {
                if self.router.is_up() {
                    self.router_input(rc::Input::JournalDone { batch, result });
                }
            }
        }
    }

    // ----- the router's side ---------------------------------------------

    /// Feed the router one input now and carry out its actions.
    fn router_input(&mut self, input: rc::Input) {
        self.router_call(|d, r, now, fx, out| d.input(r, input, now, fx, out));
    }

    /// One call into the router through the driver, which carries out its
    /// actions in order ([`RouterWorld`]: a failed send goes back in as
    /// `SendFailed` at once; a journal batch is answered by the store
    /// after its latency; then `Flushed`). Checks the invariants and notes
    /// the worker count.
    fn router_call(
        &mut self,
        call: impl FnOnce(
            &mut Driver,
            &mut Router,
            Duration,
            &mut RouterWorld,
            &mut Vec<rc::Action>,
        ) -> Result<(), String>,
    ) {
        let Sim {
            now,
            queue,
            seq,
            router,
            jms,
            net,
            client,
            journal,
            trace,
            ..
        } = self;
        let mut world = RouterWorld {
            actions: &mut router.actions,
            exited: &mut router.exited,
            jms,
            client,
            net,
            trace,
            events: Events { queue, seq },
            journal,
        };
        let mut out = Vec::new();
        let result = call(
            &mut router.driver,
            &mut router.core,
            *now,
            &mut world,
            &mut out,
        );
        result.unwrap_or_else(|e| panic!("router: {e}"));
        self.router.check(false);
        let n = self.router.core.worker_count();
        if self.trace.worker_counts.last().map(|w| w.1) != Some(n) {
            self.trace.worker_counts.push((self.now, n));
        }
    }

    /// SIGTERM to the router: the orderly shutdown.
    fn router_shutdown(&mut self) {
        self.router_input(rc::Input::Shutdown);
    }

    // ----- the job managers' side ----------------------------------------

    /// Feed job manager `i` one input now and carry out its actions.
    fn jm_input(&mut self, i: usize, input: jm::Input) {
        let mut out = Vec::new();
        self.jms[i].core.handle(input, self.now, &mut out);
        self.jm_actions(i, out);
    }

    /// Carry out job manager `i`'s actions in order, as its driver does:
    /// `Connect` replaces the connection (frames on their way to the old
    /// one are lost; the router's sends to it fail from now on); `Send`
    /// goes on the wire (a DEALER queues: it never fails here); the pool
    /// starts, cancels and kills runs, and what it reports goes back in at
    /// once.
    fn jm_actions(&mut self, i: usize, out: Vec<jm::Action>) {
        let mut todo: VecDeque<jm::Action> = out.into();
        while let Some(a) = todo.pop_front() {
            let mut back: Vec<jm::Input> = Vec::new();
            match a {
                jm::Action::Connect { identity, .. } => {
                    self.jms[i].link = Some(identity.clone());
                    self.jms[i].connects.push((self.now, identity));
                }
                jm::Action::Send(msg) => self.jm_send(i, msg),
                jm::Action::StartJob(start) => {
                    let j = &mut self.jms[i];
                    let identity = j.link.clone().unwrap_or_default();
                    let ends = j
                        .pool
                        .start(i, &identity, &start, self.now, &mut self.trace);
                    let (slot, run) = (start.slot, start.run);
                    self.schedule(ends, Event::JobEnds { jm: i, slot, run });
                    back.push(jm::Input::JobStarted { slot, run });
                }
                jm::Action::CancelJob { slot, run, .. } => {
                    let killed = JobOutcome::Error(JobError::new(ErrorKind::Crash, "cancelled"));
                    let j = &mut self.jms[i];
                    if let Some(outcome) =
                        j.pool
                            .end(slot, run, Some(killed), self.now, &mut self.trace)
                    {
                        back.push(jm::Input::JobFinished { slot, run, outcome });
                    }
                }
                jm::Action::KillAll => {
                    let j = &mut self.jms[i];
                    let runs: Vec<(usize, u64)> =
                        j.pool.running.iter().map(|(s, r)| (*s, r.run)).collect();
                    for (slot, run) in runs {
                        let killed = JobOutcome::Error(JobError::new(ErrorKind::Crash, "killed"));
                        if let Some(outcome) =
                            j.pool
                                .end(slot, run, Some(killed), self.now, &mut self.trace)
                        {
                            back.push(jm::Input::JobFinished { slot, run, outcome });
                        }
                    }
                }
                jm::Action::Exit(code) => {
                    self.jms[i].exited = Some(code);
                    self.jms[i].link = None;
                }
            }
            for input in back {
                let mut more = Vec::new();
                self.jms[i].core.handle(input, self.now, &mut more);
                todo.extend(more);
            }
        }
    }

    /// Put a job manager's message on the wire to the router backend (it
    /// vanishes if the router has exited: nobody reads it).
    fn jm_send(&mut self, i: usize, msg: Message) {
        let Some(identity) = self.jms[i].link.clone() else {
            panic!(
                "job manager {i} sent {} with no connection",
                msg.command.name()
            );
        };
        let heartbeat = matches!(msg.command, Command::Heartbeat { .. });
        let frames = msg.encode();
        let at = self
            .net
            .route(self.now, Link::Jm(i), Dir::ToRouter, &identity, &frames);
        if heartbeat {
            self.trace.heartbeats.push(Heartbeat {
                sent: self.now,
                arrives: at,
                from_router: false,
                identity: identity.clone(),
            });
        }
        let Some(at) = at else { return };
        if !self.router.is_up() {
            return;
        }
        let mut routed = Vec::with_capacity(frames.len() + 1);
        routed.push(identity.into_bytes());
        routed.extend(frames);
        let ev = Event::ToRouter {
            socket: rc::Socket::Backend,
            frames: routed,
        };
        self.schedule(at, ev);
    }

    // ----- the client's side ---------------------------------------------

    /// The client sends `REQUEST` for `job` to queue `default` with these
    /// headers; returns its msgid.
    fn submit(&mut self, job: &SimJob, headers: &str) -> String {
        let msgid = job.msgid();
        let req = Request {
            queue: "default".into(),
            headers: Headers::parse(headers.as_bytes()).expect("headers"),
            message: job.message(),
        };
        let frames = Message::with_msgid(msgid.clone(), Command::Request(req)).encode();
        let id = String::from_utf8_lossy(&self.client.identity).into_owned();
        let at = self
            .net
            .route(self.now, Link::Client, Dir::ToRouter, &id, &frames);
        if let Some(at) = at {
            let mut routed = vec![self.client.identity.clone()];
            routed.extend(frames);
            let ev = Event::ToRouter {
                socket: rc::Socket::Frontend,
                frames: routed,
            };
            self.schedule(at, ev);
        }
        msgid
    }

    /// Submit jobs `0..n`, `reply-requested`, each running `dur(n)` ms.
    fn submit_many(&mut self, n: u64, dur: impl Fn(u64) -> u64) -> Vec<String> {
        (0..n)
            .map(|i| self.submit(&SimJob::ok(i, dur(i)), "reply-requested"))
            .collect()
    }

    // ----- getters for the tests -----------------------------------------

    fn identity(&self, i: usize) -> String {
        self.jms[i].link.clone().expect("connected")
    }

    fn add_fault(&mut self, f: Fault) {
        self.net.faults.push(f);
    }

    /// Whether a frame of `command` is in transit on job manager `i`'s
    /// current link, in direction `dir`.
    fn in_transit(&self, i: usize, dir: Dir, command: &str) -> bool {
        let Some(id) = self.jms[i].link.as_deref() else {
            return false;
        };
        self.queue
            .values()
            .any(|ev| on_link(ev, i, id, dir) && frame_command(ev) == Some(command))
    }

    /// Whether job manager `i` has a READY on its way to the router: a
    /// READY message, or a REPLY with credit in it (`reply-credit`: its
    /// fourth body frame).
    fn ready_in_transit(&self, i: usize) -> bool {
        let Some(id) = self.jms[i].link.as_deref() else {
            return false;
        };
        self.queue.values().any(|ev| {
            on_link(ev, i, id, Dir::ToRouter)
                && match (frame_command(ev), ev) {
                    (Some("READY"), _) => true,
                    (Some("REPLY"), Event::ToRouter { frames, .. }) => frames.len() == 9,
                    _ => false,
                }
        })
    }

    /// A TCP reset of job manager `i`'s connection, now: the frames in
    /// transit on it in `dirs` are lost, and the job manager's core gets
    /// the link down its driver's socket monitor reports. The router gets
    /// nothing (libzmq tells a ROUTER nothing useful, and the job
    /// manager's DEALER would reconnect under the same routing id).
    fn reset_link(&mut self, i: usize, dirs: &[Dir]) {
        let identity = self.identity(i);
        let lost: Vec<(Duration, u64)> = self
            .queue
            .iter()
            .filter(|(_, ev)| dirs.iter().any(|d| on_link(ev, i, &identity, *d)))
            .map(|(k, _)| *k)
            .collect();
        for k in lost {
            let ev = self.queue.remove(&k).expect("listed");
            let (dir, frames) = match ev {
                Event::ToRouter { frames, .. } => (Dir::ToRouter, frames[1..].to_vec()),
                Event::ToJm { frames, .. } => (Dir::FromRouter, frames),
                _ => unreachable!("on_link matches frames only"),
            };
            self.net.dropped.push(Dropped {
                at: self.now,
                dir,
                identity: identity.clone(),
                message: Message::decode(frames).ok(),
            });
        }
        self.jm_input(i, jm::Input::LinkDown { identity });
    }

    /// Step until a frame of `command` is in transit on job manager `i`'s
    /// link in `dir` (true), or nothing is due by `limit`.
    fn until_in_transit(&mut self, i: usize, dir: Dir, command: &str, limit: Duration) -> bool {
        self.run_until(limit, |s| s.in_transit(i, dir, command))
    }

    /// Run until every job manager is registered.
    fn until_registered(&mut self) {
        let n = self.jms.len();
        let all = |s: &Sim| {
            s.router.core.worker_count() == n && s.jms.iter().all(|j| j.core.is_registered())
        };
        assert!(self.run_until(self.now + secs(1), all), "registration");
    }

    /// The router's heartbeat silence limit (interval × liveness).
    fn router_peer_timeout(&self) -> Duration {
        self.router.core.config().peer_timeout()
    }
}

/// The queue of events, borrowed apart from the rest of the simulation.
struct Events<'a> {
    queue: &'a mut BTreeMap<(Duration, u64), Event>,
    seq: &'a mut u64,
}

impl Events<'_> {
    fn schedule(&mut self, at: Duration, ev: Event) {
        *self.seq += 1;
        self.queue.insert((at, *self.seq), ev);
    }
}

/// What the router's actions do in the simulation: its `Effects` for the
/// driver, borrowing the parts of `Sim` they touch.
struct RouterWorld<'a> {
    actions: &'a mut u64,
    exited: &'a mut Option<(Duration, u64)>,
    jms: &'a [JmNode],
    client: &'a Client,
    net: &'a mut Network,
    trace: &'a mut Trace,
    events: Events<'a>,
    journal: &'a mut JournalStore,
}

impl Effects for RouterWorld<'_> {
    /// Put a router send on the wire; fails when no peer holds that
    /// identity (ROUTER_MANDATORY: EHOSTUNREACH).
    fn send(
        &mut self,
        now: Duration,
        socket: rc::Socket,
        identity: &[u8],
        frames: &[Vec<u8>],
    ) -> Result<(), rc::SendFailure> {
        *self.actions += 1;
        let unreachable = Err(rc::SendFailure::HostUnreachable);
        let id = String::from_utf8_lossy(identity).into_owned();
        let command = frames.get(2).map(Vec::as_slice).unwrap_or_default();
        match socket {
            rc::Socket::Backend => {
                let Some(jm) = self.jms.iter().position(|j| j.link.as_deref() == Some(&id)) else {
                    self.trace.send_failures.push((now, id));
                    return unreachable;
                };
                if command == b"REQUEST" {
                    let msgid = String::from_utf8_lossy(&frames[3]).into_owned();
                    self.trace.dispatches.push((now, id.clone(), msgid));
                }
                let at = self
                    .net
                    .route(now, Link::Jm(jm), Dir::FromRouter, &id, frames);
                if command == b"HEARTBEAT" {
                    self.trace.heartbeats.push(Heartbeat {
                        sent: now,
                        arrives: at,
                        from_router: true,
                        identity: id.clone(),
                    });
                }
                if let Some(at) = at {
                    let ev = Event::ToJm {
                        jm,
                        identity: id,
                        frames: frames.to_vec(),
                    };
                    self.events.schedule(at, ev);
                }
                Ok(())
            }
            rc::Socket::Frontend => {
                if identity != self.client.identity.as_slice() {
                    self.trace.send_failures.push((now, id));
                    return unreachable;
                }
                if command == b"RESULT" {
                    let msgid = String::from_utf8_lossy(&frames[4]).into_owned();
                    self.trace.result_actions.insert(msgid, *self.actions);
                }
                let at = self
                    .net
                    .route(now, Link::Client, Dir::FromRouter, &id, frames);
                if let Some(at) = at {
                    let ev = Event::ToClient {
                        frames: frames.to_vec(),
                    };
                    self.events.schedule(at, ev);
                }
                Ok(())
            }
            rc::Socket::Admin => Ok(()),
        }
    }

    /// The store answers after its latency.
    fn journal(&mut self, now: Duration, batch: &rc::Batch) -> Option<rc::BatchResult> {
        *self.actions += 1;
        let result = self.journal.append(batch);
        let at = now + self.journal.latency;
        let ev = Event::JournalAnswers {
            batch: batch.id,
            result,
        };
        self.events.schedule(at, ev);
        None
    }

    fn exit(&mut self, now: Duration) {
        *self.actions += 1;
        assert!(self.exited.is_none(), "the router exited twice");
        *self.exited = Some((now, *self.actions));
    }
}

/// Whether `ev` carries frames on job manager `jm`'s link of connection
/// `identity`, in direction `dir`.
fn on_link(ev: &Event, jm: usize, identity: &str, dir: Dir) -> bool {
    match (ev, dir) {
        (
            Event::ToRouter {
                socket: rc::Socket::Backend,
                frames,
            },
            Dir::ToRouter,
        ) => frames[0] == identity.as_bytes(),
        (
            Event::ToJm {
                jm: j,
                identity: id,
                ..
            },
            Dir::FromRouter,
        ) => *j == jm && id == identity,
        _ => false,
    }
}

/// The command frame of a frame-carrying event.
fn frame_command(ev: &Event) -> Option<&str> {
    let f = match ev {
        Event::ToRouter { frames, .. } => frames.get(3),
        Event::ToJm { frames, .. } | Event::ToClient { frames } => frames.get(2),
        _ => None,
    }?;
    std::str::from_utf8(f).ok()
}

/// Every msgid of `msgids` has exactly one acknowledgement and exactly one
/// RESULT, `ok`, and no REJECT.
fn assert_one_ok_result_each(sim: &Sim, msgids: &[String]) {
    for m in msgids {
        assert_eq!(sim.client.acks.get(m), Some(&1), "acks of {m}");
        let r = sim.client.results.get(m).map(Vec::as_slice).unwrap_or(&[]);
        assert_eq!(r.len(), 1, "RESULTs of {m}: {r:?}");
        assert_eq!(r[0].1, ResultStatus::Ok, "{m}: {r:?}");
        assert!(!sim.client.rejects.contains_key(m), "{m} rejected");
    }
    assert_eq!(sim.client.result_count(), msgids.len(), "no other RESULTs");
}

/// Gaps between consecutive instants.
fn gaps(t: &[Duration]) -> Vec<Duration> {
    t.windows(2).map(|w| w[1] - w[0]).collect()
}

// ----- 1. throughput and exactly-once on healthy links -----------------------

/// 1,000 jobs through two job managers of 4 slots: each is acknowledged
/// once, runs once, gets one RESULT; the router sends exactly 1,000
/// REQUESTs; both job managers work.
#[test]
fn thousand_jobs_through_two_job_managers_each_run_once() {
    let mut sim = Sim::new(&[4, 4]);
    sim.router.check_every = 500;
    sim.until_registered();
    let msgids = sim.submit_many(1000, |n| 5 + (n * 7) % 40);
    let done = sim.run_until(secs(60), |s| s.client.result_count() >= 1000);
    assert!(done, "{} RESULTs by 60 s", sim.client.result_count());
    sim.run_for(secs(1));
    sim.router.check(true);

    assert_one_ok_result_each(&sim, &msgids);
    for m in &msgids {
        let runs = sim.trace.runs_of(m);
        assert_eq!(runs.len(), 1, "{m} ran {} times", runs.len());
        assert_eq!(runs[0].ok, Some(true));
    }
    assert_eq!(
        sim.trace.dispatches.len(),
        1000,
        "router → job manager REQUESTs"
    );
    for i in 0..2 {
        let n = sim.trace.runs.iter().filter(|r| r.jm == i).count();
        assert!(n >= 250, "job manager {i} ran only {n} of 1000 jobs");
    }
    assert_eq!(sim.router.core.inflight_count(), 0);
    assert_eq!(sim.router.core.buffered_count(), 0);
    assert!(sim.router.core.unfinished_jobs().is_empty());
    assert_eq!(sim.router.core.stats().completed, 1000);
    assert_eq!(sim.router.core.stats().redelivered, 0);
    assert!(sim.trace.send_failures.is_empty());
    // 8 slots, 24.5 ms mean: about 3 s of virtual time, not a tick loop.
    assert!(sim.steps < 60_000, "{} steps", sim.steps);
}

// ----- 2. a job manager that goes silent -------------------------------------

/// Job manager 0 goes silent at T (every frame it sends is dropped). The
/// router removes it interval × liveness after it last heard from it and
/// redelivers its jobs to job manager 1; its REPLYs sent meanwhile are
/// lost, so each of those jobs runs twice but has one RESULT. Job manager
/// 0, no longer hearing the router, reconnects interval × liveness after
/// it last heard from it, under a new identity, and runs jobs again.
#[test]
fn a_silent_job_manager_is_removed_its_jobs_redelivered_and_it_comes_back() {
    let mut sim = Sim::new(&[4, 4]);
    sim.router.check_every = 50;
    sim.until_registered();
    let msgids = sim.submit_many(300, |_| 500);
    let t_silent = secs(2) + ms(100);
    sim.run_until(t_silent, |_| false);
    let old = sim.identity(0);
    let running_at_t = sim.jms[0].pool.running_msgids(&sim.trace);
    assert_eq!(running_at_t.len(), 4, "job manager 0 is busy at T");
    sim.add_fault(Fault::silence(&old));

    // The router removes it, interval × liveness after its last frame.
    let limit = sim.router_peer_timeout();
    let removed = sim.run_until(secs(30), |s| s.router.core.worker_count() == 1);
    assert!(removed, "the silent job manager was never removed");
    let t_removed = sim.now;
    let last_heard = sim.trace.heard_by_router[&old];
    assert!(last_heard <= t_silent + ms(1));
    assert_eq!(t_removed, last_heard + limit + us(1), "removal time");
    let snap = sim.router.core.snapshot(sim.now);
    assert!(snap.workers.iter().all(|w| w.identity != old));
    assert_eq!(sim.router.core.stats().redelivered, 4);

    // It reconnects under a new identity after its own liveness limit.
    let back = sim.run_until(secs(60), |s| s.jms[0].connects.len() == 2);
    assert!(back, "the silent job manager never reconnected");
    let (t_back, new) = sim.jms[0].connects[1].clone();
    assert_ne!(new, old);
    let jm_limit = secs(3) * 3;
    assert_eq!(t_back, sim.trace.heard_by_jm[&old] + jm_limit + us(1));
    assert!(
        t_back > t_silent + limit,
        "reconnected before the router gave up"
    );

    let done = sim.run_until(secs(120), |s| s.client.result_count() >= 300);
    assert!(done, "{} RESULTs by 120 s", sim.client.result_count());
    sim.run_for(secs(1));
    sim.router.check(true);

    assert_one_ok_result_each(&sim, &msgids);
    assert!(sim.net.dropped.iter().all(|d| d.at >= t_silent));
    let lost: BTreeSet<String> = sim.net.dropped_replies_from(&old).into_iter().collect();
    let running: BTreeSet<String> = running_at_t.into_iter().collect();
    assert_eq!(
        lost, running,
        "the REPLYs dropped are those of the jobs running at T"
    );
    for m in &msgids {
        let runs = sim.trace.runs_of(m);
        if lost.contains(m) {
            assert_eq!(runs.len(), 2, "{m}: once on the silent one, once again");
            assert_eq!(runs[0].identity, old);
            assert_eq!(runs[1].jm, 1, "{m} redelivered to the other job manager");
            assert!(
                runs[1].started > t_removed,
                "{m} ran again before the removal"
            );
        } else {
            assert_eq!(runs.len(), 1, "{m} ran {} times", runs.len());
        }
    }
    let served_again = sim.trace.runs.iter().filter(|r| r.identity == new).count();
    assert!(served_again > 0, "the reconnected job manager ran nothing");
    assert_eq!(sim.router.core.worker_count(), 2);
    assert_eq!(sim.router.core.stats().redelivered, 4);
}

// ----- 3. router shutdown while jobs run -------------------------------------

/// SIGTERM to the router while 8 jobs run: KBYE to both job managers,
/// which finish their running jobs and send the REPLYs on the same
/// connection; every RESULT is sent before the router's `Exit`, and
/// reaches the client; nothing else is dispatched and nothing runs twice;
/// each job manager reconnects `reconnect_delay` after its last job.
#[test]
fn router_shutdown_lets_running_jobs_report_before_exit() {
    let mut sim = Sim::new(&[4, 4]);
    sim.until_registered();
    let msgids = sim.submit_many(40, |_| 2000);
    sim.run_until(secs(3), |_| false);
    let running: Vec<String> = (0..2)
        .flat_map(|i| sim.jms[i].pool.running_msgids(&sim.trace))
        .collect();
    assert_eq!(running.len(), 8, "both job managers busy at the shutdown");
    let dispatched_before = sim.trace.dispatches.len();
    sim.router_shutdown();

    let reconnected = sim.run_until(secs(30), |s| s.jms.iter().all(|j| j.connects.len() >= 2));
    assert!(reconnected, "the job managers did not reconnect");
    let (t_exit, exit_action) = sim.router.exited.expect("the router exited");

    assert_eq!(
        sim.trace.dispatches.len(),
        dispatched_before,
        "no dispatch while draining"
    );
    let mut last_end = [Duration::ZERO; 2];
    for m in &msgids {
        let runs = sim.trace.runs_of(m);
        assert!(runs.len() <= 1, "{m} ran {} times", runs.len());
        let Some(run) = runs.first() else {
            assert!(!sim.client.results.contains_key(m));
            continue;
        };
        let ended = run.ended.expect("every started job finished");
        assert!(ended < t_exit, "{m} still ran at the exit");
        last_end[run.jm] = last_end[run.jm].max(ended);
        let r = &sim.client.results[m];
        assert_eq!(r.len(), 1, "{m}: {r:?}");
        assert_eq!(r[0].1, ResultStatus::Ok);
        assert!(
            sim.trace.result_actions[m] < exit_action,
            "the RESULT of {m} was sent after the Exit"
        );
    }
    assert_eq!(sim.client.result_count(), 16, "two rounds of 8 jobs ran");
    for m in &running {
        assert_eq!(sim.trace.runs_of(m).len(), 1);
    }
    assert_eq!(
        sim.router.core.unfinished_jobs().len(),
        24,
        "the rest stay unfinished"
    );
    assert!(sim.client.rejects.is_empty());
    for (i, j) in sim.jms.iter().enumerate() {
        let (t, id) = &j.connects[1];
        assert_eq!(*t, last_end[i] + secs(1), "job manager {i} reconnect time");
        assert_ne!(*id, j.connects[0].1, "a fresh identity");
        assert!(*t > t_exit);
    }
}

// ----- 4. retries ------------------------------------------------------------

/// A `retry-count:2` job that fails every time runs exactly three times;
/// the router waits 1 s, then 2 s (its default backoff) after each failed
/// REPLY, so the job manager sees gaps of backoff + one round trip; the
/// client gets one RESULT, `failed`, with `attempts == 3`.
#[test]
fn a_failing_retry_job_runs_three_times_with_backoff_1s_then_2s() {
    let mut sim = Sim::new(&[2]);
    sim.until_registered();
    let job = SimJob::failing(7, 100);
    let msgid = sim.submit(&job, "reply-requested,retry-count:2");
    let done = sim.run_until(secs(30), |s| s.client.results.contains_key(&msgid));
    assert!(done, "no RESULT");
    sim.run_for(secs(10));
    sim.router.check(true);

    let runs = sim.trace.runs_of(&msgid);
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(runs.iter().all(|r| r.ok == Some(false)));
    let round_trip = 2 * sim.net.jm_latency[0];
    let cfg = sim.router.core.config().clone();
    for (k, w) in runs.windows(2).enumerate() {
        let gap = w[1].started - w[0].ended.unwrap();
        let expected = cfg.backoff(k as u32 + 1);
        assert_eq!(expected, secs(1 << k), "router default backoff");
        assert_eq!(gap, expected + round_trip, "gap {k}");
    }
    let router_gaps: Vec<Duration> =
        gaps(&sim.trace.dispatches.iter().map(|d| d.0).collect::<Vec<_>>());
    assert_eq!(
        router_gaps,
        vec![
            ms(100) + round_trip + secs(1),
            ms(100) + round_trip + secs(2)
        ],
        "router dispatch gaps: run + round trip + backoff"
    );
    let r = &sim.client.results[&msgid];
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].1, ResultStatus::Failed);
    let err = match JobOutcome::from_payload(&r[0].2).unwrap() {
        JobOutcome::Error(e) => e,
        v => panic!("not an error: {v:?}"),
    };
    assert_eq!(err.attempts, Some(3));
    assert_eq!(err.kind, ErrorKind::Exception);
    let stats = sim.router.core.stats();
    assert_eq!((stats.retried, stats.dead_lettered), (2, 1));
    assert_eq!(sim.client.acks.get(&msgid), Some(&1));
}

// ----- 5. a REPLY lost on the way --------------------------------------------

/// Two job managers of 2 slots; ten 200 ms jobs; the first REPLY job
/// manager 0 sends is lost on the wire. Returns the simulation once the
/// other nine have their RESULT, and the lost job's msgid.
fn lose_one_reply() -> (Sim, Vec<String>, String) {
    let mut sim = Sim::new(&[2, 2]);
    sim.until_registered();
    let jm0 = sim.identity(0);
    sim.add_fault(Fault::drop_one(&jm0, "REPLY"));
    let msgids = sim.submit_many(10, |_| 200);
    let nine = sim.run_until(secs(10), |s| s.client.result_count() >= 9);
    assert!(nine, "the other jobs finish");
    let lost = sim.net.dropped_replies_from(&jm0);
    assert_eq!(lost.len(), 1);
    (sim, msgids, lost[0].clone())
}

/// A REPLY lost with NO link event. ZMTP runs on TCP, which does not lose
/// a frame on a live connection: a frame is lost only with its
/// connection (a reset, modelled by `reset_link` below, which the job
/// manager sees and recovers from). So this case is the remaining
/// theoretical limit, kept here to document what the rules give: the job
/// manager forgets a job once its REPLY is handed to the socket (and
/// sends the READY for the slot); the router tracks the job until a REPLY
/// names it, and its only other way out is the worker's removal
/// (heartbeat timeout, KBYE, send failure). Heartbeats keep flowing, so
/// the job stays in flight at the router — no RESULT, no redelivery — for
/// as long as job manager 0 stays connected. When it leaves (here: its
/// own shutdown, KBYE) the router redelivers the job, which runs a second
/// time on job manager 1 and gets its one RESULT.
#[test]
fn a_lost_reply_keeps_the_job_in_flight_until_its_job_manager_leaves() {
    let (mut sim, msgids, lost) = lose_one_reply();
    let jm0 = sim.identity(0);
    sim.run_for(secs(120));
    sim.router.check(true);

    assert!(
        !sim.client.results.contains_key(&lost),
        "no RESULT while connected"
    );
    assert_eq!(sim.router.core.inflight_count(), 1);
    let snap = sim.router.core.snapshot(sim.now);
    let w0 = snap.workers.iter().find(|w| w.identity == jm0).unwrap();
    assert_eq!(
        w0.inflight, 1,
        "the router holds the lost job on job manager 0"
    );
    // The READY for the lost job's slot rode in its REPLY (`reply-credit`)
    // and was lost with it: one credit short, as with a lost READY. (TCP
    // loses a frame only with its connection, and on a reconnect the job
    // manager offers every free slot again: `a_ready_lost_in_a_link_reset_
    // leaks_no_slot`.)
    assert_eq!(w0.credit, 1, "the READY in the lost REPLY is lost too");
    assert_eq!(
        sim.jms[0].core.slot_counts().busy,
        0,
        "job manager 0 is idle"
    );
    assert_eq!(sim.jms[0].connects.len(), 1, "nobody reconnected");
    assert_eq!(sim.router.core.stats().redelivered, 0);
    assert_eq!(sim.trace.runs_of(&lost).len(), 1);

    // Job manager 0 leaves: KBYE; the router redelivers the job.
    sim.jm_input(0, jm::Input::Shutdown);
    assert_eq!(sim.jms[0].exited, Some(0));
    let t_leave = sim.now;
    let done = sim.run_until(sim.now + secs(5), |s| s.client.results.contains_key(&lost));
    assert!(
        done,
        "the lost job got no RESULT after its job manager left"
    );
    sim.run_for(secs(1));
    assert_one_ok_result_each(&sim, &msgids);
    let runs = sim.trace.runs_of(&lost);
    assert_eq!(runs.len(), 2, "it ran again");
    assert_eq!(runs[1].jm, 1);
    assert!(runs[1].started > t_leave);
    assert_eq!(sim.router.core.stats().redelivered, 1);
    for m in msgids.iter().filter(|m| **m != lost) {
        assert_eq!(sim.trace.runs_of(m).len(), 1, "{m}");
    }
}

// ----- 5b. link resets --------------------------------------------------------

/// How long a client may wait for the RESULT of a job whose frames a link
/// reset lost.
const RESET_BOUND: Duration = Duration::from_secs(15);

/// The orig msgids of the REPLYs in transit from job manager `i`.
fn replies_in_transit(sim: &Sim, i: usize) -> Vec<String> {
    let id = sim.identity(i);
    sim.queue
        .values()
        .filter(|ev| on_link(ev, i, &id, Dir::ToRouter) && frame_command(ev) == Some("REPLY"))
        .filter_map(|ev| match ev {
            Event::ToRouter { frames, .. } => {
                Some(String::from_utf8_lossy(frames.get(6)?).into_owned())
            }
            _ => None,
        })
        .collect()
}

/// A reset while a REPLY is on its way to the router: the REPLY is lost
/// (with the READY behind it, and whatever the router was sending). The
/// job manager reconnects at once under a fresh identity; after the ACK
/// (which lists `reply-resend`) it sends its recent REPLYs again, and the
/// router completes the job still in flight on the old identity: the
/// client gets its RESULT within the bound, and the job ran once. The
/// same reset losing only what the router sends: the first REPLY
/// arrives, its copy changes nothing (one RESULT). Every job gets one
/// RESULT; only a job still running at the reset may run twice (see
/// below).
#[test]
fn a_reply_lost_in_a_link_reset_is_sent_again_and_its_job_runs_once() {
    for dirs in [&[Dir::ToRouter, Dir::FromRouter][..], &[Dir::FromRouter]] {
        let mut sim = Sim::new(&[2, 2]);
        sim.until_registered();
        let msgids = sim.submit_many(10, |_| 200);
        assert!(sim.until_in_transit(0, Dir::ToRouter, "REPLY", secs(10)));
        let old = sim.identity(0);
        let in_transit = replies_in_transit(&sim, 0);
        assert_eq!(in_transit.len(), 1, "{in_transit:?}");
        let job = in_transit[0].clone();
        let running_at_reset = sim.jms[0].pool.running_msgids(&sim.trace);
        let t_reset = sim.now;
        sim.reset_link(0, dirs);
        assert_ne!(sim.identity(0), old, "reconnected at once");
        assert_eq!(sim.jms[0].connects.len(), 2);
        let done = sim.run_until(t_reset + RESET_BOUND, |s| s.client.result_count() >= 10);
        assert!(
            done,
            "{dirs:?}: {} RESULTs {RESET_BOUND:?} after the reset; the router holds {} in flight",
            sim.client.result_count(),
            sim.router.core.inflight_count()
        );
        sim.run_for(secs(20));
        sim.router.check(true);
        assert_one_ok_result_each(&sim, &msgids);
        let lost = sim.net.dropped_replies_from(&old);
        if dirs.contains(&Dir::ToRouter) {
            assert_eq!(lost, vec![job.clone()], "{dirs:?}");
        } else {
            assert!(lost.is_empty());
        }
        assert_eq!(sim.trace.runs_of(&job).len(), 1, "{dirs:?}: {job} ran once");
        // A job still running across the reconnect replies on the new
        // connection; if the router dropped the old identity first (a
        // send to it failed: here the dispatch that the READY which got
        // through asked for), it redelivered that job: at least once.
        for m in &msgids {
            let runs = sim.trace.runs_of(m).len();
            if running_at_reset.contains(m) {
                assert!(runs <= 2, "{dirs:?}: {m} ran {runs} times");
            } else {
                assert_eq!(runs, 1, "{dirs:?}: {m}");
            }
        }
        let twice = msgids
            .iter()
            .filter(|m| sim.trace.runs_of(m).len() > 1)
            .count() as u64;
        let redelivered = sim.router.core.stats().redelivered;
        assert!(twice <= redelivered, "{dirs:?}: {twice} > {redelivered}");
        if dirs.contains(&Dir::ToRouter) {
            // The READY was lost too: the router sent nothing to the old
            // identity before the copies completed its jobs.
            assert_eq!(redelivered, 0, "{dirs:?}");
        }
        assert_eq!(
            sim.router.core.worker_count(),
            2,
            "the old identity is gone"
        );
        assert_eq!(sim.jms[0].connects.len(), 2, "one reconnect");
    }
}

/// A reset while a long job runs and nothing is on its way: the job
/// manager reconnects at once and, after the ACK (which lists
/// `adopt-running`), says the job still runs (`RUNNING`); the router moves
/// it onto the new identity, so when it drops the old one (its next
/// HEARTBEAT to it fails) nothing is delivered again. The job runs once
/// and its RESULT comes from the new connection. (Without the move, the
/// drop redelivered it to the new identity's free slot: twice.)
#[test]
fn a_job_running_across_a_link_reset_is_adopted_and_runs_once() {
    let mut sim = Sim::new(&[2]);
    sim.until_registered();
    let msgids = sim.submit_many(1, |_| 5000);
    sim.run_for(secs(1));
    assert_eq!(sim.jms[0].pool.running_msgids(&sim.trace), msgids);
    let old = sim.identity(0);
    sim.reset_link(0, &[Dir::ToRouter, Dir::FromRouter]);
    assert_ne!(sim.identity(0), old);
    let done = sim.run_until(secs(30), |s| s.client.result_count() >= 1);
    assert!(done, "no RESULT");
    sim.run_for(secs(20));
    sim.router.check(true);
    assert_one_ok_result_each(&sim, &msgids);
    assert_eq!(sim.trace.runs_of(&msgids[0]).len(), 1, "ran once");
    let stats = sim.router.core.stats();
    assert_eq!((stats.adopted, stats.redelivered), (1, 0));
    assert_eq!(
        sim.router.core.worker_count(),
        1,
        "the old identity is gone"
    );
}

/// A reset while a READY is on its way: it is lost, but the job manager
/// reconnects and offers every free slot to the router again under its
/// new identity (the old identity, with its leaked slot, is dropped at the
/// router's next send to it): all 20 one-second jobs run, once each, and
/// at the end the router offers both slots.
#[test]
fn a_ready_lost_in_a_link_reset_leaks_no_slot() {
    let mut sim = Sim::new(&[2]);
    sim.until_registered();
    sim.run_for(secs(1));
    let msgids = sim.submit_many(20, |_| 1000);
    // The READY that frees a slot rides in its job's REPLY (`reply-credit`).
    assert!(sim.run_until(secs(10), |s| s.ready_in_transit(0)));
    let old = sim.identity(0);
    let t_reset = sim.now;
    sim.reset_link(0, &[Dir::ToRouter, Dir::FromRouter]);
    let lost_ready = sim.net.dropped.iter().any(|d| {
        d.identity == old
            && matches!(&d.message, Some(m) if m.command == Command::Ready
                || matches!(&m.command, Command::Reply(r) if r.credit > 0))
    });
    assert!(lost_ready, "the reset lost a READY");
    let new = sim.identity(0);

    // Within a heartbeat interval the router serves the new identity with
    // both slots (offered or busy) and has dropped the old one.
    let interval = sim.router.core.config().heartbeat_interval;
    let both = sim.run_until(t_reset + interval + ms(10), |s| {
        let snap = s.router.core.snapshot(s.now);
        snap.workers.len() == 1
            && snap.workers[0].identity == new
            && u64::from(snap.workers[0].credit) + snap.workers[0].inflight == 2
    });
    assert!(both, "{:?}", sim.router.core.snapshot(sim.now).workers);

    let done = sim.run_until(sim.now + secs(60), |s| s.client.result_count() >= 20);
    assert!(done, "{} RESULTs", sim.client.result_count());
    sim.run_for(secs(1));
    sim.router.check(true);
    assert_one_ok_result_each(&sim, &msgids);
    let snap = sim.router.core.snapshot(sim.now);
    assert_eq!(snap.workers.len(), 1);
    assert_eq!(
        snap.workers[0].credit,
        2,
        "the router offers {} of the job manager's 2 slots ({:?} on the job manager)",
        snap.workers[0].credit,
        sim.jms[0].core.slot_counts()
    );
    let twice: Vec<&String> = msgids
        .iter()
        .filter(|m| sim.trace.runs_of(m).len() > 1)
        .collect();
    assert!(twice.is_empty(), "ran twice: {twice:?}");
}

/// A reset while a REQUEST is on its way to the job manager: the router
/// holds the job in flight on the old identity, which it drops at its
/// next send there (at the latest its HEARTBEAT, one interval later), and
/// redelivers the job, which runs once, on the reconnected job manager.
#[test]
fn a_request_lost_in_a_link_reset_runs_once_within_a_bound() {
    let mut sim = Sim::new(&[2]);
    sim.until_registered();
    sim.run_for(ms(500));
    let msgid = sim.submit(&SimJob::ok(1, 100), "reply-requested");
    assert!(sim.until_in_transit(0, Dir::FromRouter, "REQUEST", secs(1)));
    let old = sim.identity(0);
    let t_reset = sim.now;
    sim.reset_link(0, &[Dir::ToRouter, Dir::FromRouter]);
    let done = sim.run_until(t_reset + RESET_BOUND, |s| {
        s.client.results.contains_key(&msgid)
    });
    assert!(done, "no RESULT {RESET_BOUND:?} after the reset");
    let took = sim.client.results[&msgid][0].0 - t_reset;
    let interval = sim.router.core.config().heartbeat_interval;
    assert!(
        took <= interval + ms(100) + ms(10),
        "the RESULT came {took:?} after the reset"
    );
    sim.run_for(secs(20));
    sim.router.check(true);
    assert_one_ok_result_each(&sim, std::slice::from_ref(&msgid));
    let runs = sim.trace.runs_of(&msgid);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].identity, sim.identity(0), "on the new connection");
    assert_eq!(sim.router.core.stats().redelivered, 1);
    assert!(sim.trace.send_failures.iter().any(|(_, id)| *id == old));
}

/// A failed REPLY that reached the router (the job waits for its retry)
/// and is sent again after a reset: the copy spends no retry. A
/// `retry-count:2` job that always fails runs three times and its RESULT
/// says `attempts: 3`.
#[test]
fn a_failed_reply_sent_again_after_a_reset_spends_no_retry() {
    let mut sim = Sim::new(&[1]);
    sim.until_registered();
    let msgid = sim.submit(&SimJob::failing(3, 100), "reply-requested,retry-count:2");
    assert!(sim.run_until(secs(5), |s| s.router.core.delayed_count() == 1));
    let (kept, _) = sim.jms[0].core.resend_counts();
    assert_eq!(kept, 1, "the failed REPLY is kept to be sent again");
    sim.reset_link(0, &[Dir::ToRouter, Dir::FromRouter]);
    let done = sim.run_until(secs(30), |s| s.client.results.contains_key(&msgid));
    assert!(done);
    sim.run_for(secs(20));
    sim.router.check(true);
    assert_eq!(sim.trace.runs_of(&msgid).len(), 3);
    let r = &sim.client.results[&msgid];
    assert_eq!(r.len(), 1);
    let JobOutcome::Error(e) = JobOutcome::from_payload(&r[0].2).unwrap() else {
        panic!("not an error")
    };
    assert_eq!(e.attempts, Some(3));
    assert_eq!(sim.router.core.stats().retried, 2);
}

// ----- a job manager's own shutdown ------------------------------------------

/// SIGTERM to job manager 0 while it runs two 5 s jobs: it takes no new
/// jobs, heartbeats on, lets the running ones finish within its grace
/// period (30 s), sends their REPLYs, and only then says KBYE. Each job
/// runs once. (This was a bug the harness found: the job manager used to
/// say KBYE first, and a router removes a worker on KBYE and redelivers
/// its jobs — so both ran a second time on job manager 1.)
#[test]
fn a_job_manager_shutdown_lets_its_running_jobs_finish_once() {
    let mut sim = Sim::new(&[2, 2]);
    sim.until_registered();
    let msgids = sim.submit_many(4, |_| 5000);
    sim.run_for(secs(1));
    let on_0 = sim.jms[0].pool.running_msgids(&sim.trace);
    assert_eq!(on_0.len(), 2);
    sim.jm_input(0, jm::Input::Shutdown);
    let done = sim.run_until(secs(30), |s| s.client.result_count() >= 4);
    assert!(done);
    sim.run_for(secs(10));
    assert_eq!(
        sim.jms[0].exited,
        Some(0),
        "it finished its jobs and exited"
    );
    assert_one_ok_result_each(&sim, &msgids);
    for m in &on_0 {
        let runs = sim.trace.runs_of(m);
        assert_eq!(
            runs[0].ok,
            Some(true),
            "{m} finished on the leaving job manager"
        );
        assert_eq!(
            runs.len(),
            1,
            "{m} ran again on job manager {} at {:?} though job manager 0 finished it at {:?}",
            runs[runs.len() - 1].jm,
            runs[runs.len() - 1].started,
            runs[0].ended
        );
    }
    assert_eq!(sim.router.core.stats().redelivered, 0);
}

// ----- 6. heartbeats ---------------------------------------------------------

/// No jobs for 60 s: HEARTBEATs flow both ways, each within one interval
/// of the previous one, and neither side disconnects the other.
#[test]
fn quiet_links_heartbeat_both_ways_for_a_minute() {
    let mut sim = Sim::new(&[4, 4]);
    sim.until_registered();
    let t0 = sim.now;
    sim.run_for(secs(60));
    sim.router.check(true);

    let interval = sim.router.core.config().heartbeat_interval;
    assert_eq!(interval, secs(3));
    assert_eq!(sim.router.core.worker_count(), 2);
    assert_eq!(sim.trace.worker_counts.last().unwrap().1, 2);
    assert!(
        sim.trace.worker_counts.windows(2).all(|w| w[1].1 > w[0].1),
        "no worker removed: {:?}",
        sim.trace.worker_counts
    );
    assert!(sim.trace.send_failures.is_empty());
    for i in 0..2 {
        assert_eq!(sim.jms[i].connects.len(), 1, "job manager {i} reconnected");
        assert!(sim.jms[i].core.is_registered());
        let id = sim.identity(i);
        let on_time = interval + sim.net.jm_latency[i];
        for from_router in [true, false] {
            let hb = sim.trace.heartbeats(&id, from_router);
            let arrivals: Vec<Duration> = hb
                .iter()
                .map(|h| h.arrives.expect("no fault: nothing dropped"))
                .filter(|t| *t <= sim.now)
                .collect();
            assert!(
                arrivals.len() >= 19,
                "{} heartbeats in 60 s",
                arrivals.len()
            );
            let first = arrivals[0].saturating_sub(t0);
            assert!(first <= on_time, "first heartbeat after {first:?}");
            let g = gaps(&arrivals);
            assert!(
                g.iter().all(|g| *g <= interval),
                "job manager {i}, from router {from_router}: gaps {g:?}"
            );
            let last = sim.now - *arrivals.last().unwrap();
            assert!(last <= on_time, "silent for {last:?} at the end");
            let sent: Vec<Duration> = hb.iter().map(|h| h.sent).collect();
            let sg = gaps(&sent);
            assert!(
                sg.iter().rev().take(10).all(|g| *g == interval),
                "steady state: one HEARTBEAT per interval: {sg:?}"
            );
        }
    }
}

/// A 5 s delay on everything job manager 0 sends, for 20 s: the router
/// hears it at most 5 s + one interval apart, under the 9 s limit, so
/// nobody is removed or reconnects.
#[test]
fn a_delay_below_the_liveness_limit_disconnects_nobody() {
    let mut sim = Sim::new(&[2, 2]);
    sim.until_registered();
    let id = sim.identity(0);
    let t_fault = sim.now + secs(4);
    sim.run_until(t_fault, |_| false);
    sim.add_fault(Fault::delay(&id, secs(5), t_fault + secs(20)));
    sim.run_for(secs(40));
    sim.router.check(true);

    assert_eq!(sim.router.core.worker_count(), 2);
    assert!(sim.jms.iter().all(|j| j.connects.len() == 1));
    let arrivals: Vec<Duration> = sim
        .trace
        .heartbeats(&id, false)
        .iter()
        .map(|h| h.arrives.unwrap())
        .collect();
    let g = gaps(&arrivals);
    let widest = *g.iter().max().unwrap();
    assert!(widest > secs(3), "the delay shows: {g:?}");
    assert!(widest <= secs(8) + ms(1), "{g:?}");
    assert!(widest < sim.router_peer_timeout());
}

// ----- the journal -----------------------------------------------------------

/// A failing journal store (on command): the job of the failed batch and
/// any REQUEST while it fails are refused `journal-unavailable` and never
/// run; once the store works again the router's retry recovers and new
/// jobs run.
#[test]
fn a_failing_journal_refuses_jobs_and_recovers() {
    let mut sim = Sim::new(&[2]);
    sim.until_registered();
    sim.journal.fail = Some("disk full".into());
    let a = sim.submit(&SimJob::ok(1, 10), "reply-requested");
    sim.run_for(ms(100));
    let b = sim.submit(&SimJob::ok(2, 10), "reply-requested");
    sim.run_for(ms(100));
    sim.journal.fail = None;
    sim.run_for(secs(2));
    let c = sim.submit(&SimJob::ok(3, 10), "reply-requested");
    sim.run_for(secs(1));
    sim.router.check(true);

    for m in [&a, &b] {
        assert_eq!(
            sim.client.rejects.get(m),
            Some(&vec![RejectReason::JournalUnavailable]),
            "{m}"
        );
        assert!(sim.trace.runs_of(m).is_empty());
        assert!(!sim.client.acks.contains_key(m));
    }
    assert!(sim.journal.failed >= 1);
    assert_eq!(sim.client.acks.get(&c), Some(&1));
    assert_eq!(sim.client.results[&c].len(), 1);
    assert_eq!(sim.trace.runs_of(&c).len(), 1);
    let committed = |r: &rc::Record| matches!(r, rc::Record::Accepted(j) if j.msgid == c);
    assert!(sim.journal.committed.iter().any(committed));
    assert!(!sim
        .journal
        .committed
        .iter()
        .any(|r| matches!(r, rc::Record::Accepted(j) if j.msgid == a)));
}
