//! The router core's configuration. Durations are [`Duration`]s, like the
//! `now` (time since the driver's start) the driver passes to
//! [`crate::Router::handle`] — the same time type as the job manager's
//! connection core.

use std::time::Duration;

use emqp_proto::QueueSpec;

/// One second.
pub const SECOND: Duration = Duration::from_secs(1);

/// The default of [`Config::max_message_size`]: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = emqp_proto::DEFAULT_MAX_MESSAGE_SIZE;

/// Buffered jobs per queue before a REQUEST is rejected `queue-full`
/// (`--hwm`). Chosen from memory, not from EventMQ's 10,000: a buffered
/// job costs the router about 175 bytes plus its payload (measured: peak
/// RSS with 1,000,000 small jobs buffered, 162–188 MB in memory mode,
/// 264–288 MB with the journal), so a full queue of small jobs takes about
/// 190 MB — affordable on any machine that runs a broker, and a burst of
/// a million jobs from one client is buffered, not refused. Payload bytes
/// come on top: lower `--hwm` for large payloads.
pub const DEFAULT_HWM: usize = 1_000_000;

/// The default of [`Config::max_unique_keys`] (`--max-unique-keys`): a
/// held key costs its text, the holder's msgid and two index entries,
/// under 1 KiB, so 100,000 keys stay under 100 MiB, and the journal keeps
/// at most one state row per key with a window.
pub const DEFAULT_MAX_UNIQUE_KEYS: usize = 100_000;

/// Finished workflows kept by default (`Config::workflows_keep`): each
/// holds its graph and node results (at most
/// [`crate::workflow::MAX_RESULT_BYTES`] each, usually far less).
pub const DEFAULT_WORKFLOWS_KEEP: usize = 1_000;
/// How long a finished workflow is kept by default: a day.
pub const DEFAULT_WORKFLOWS_KEEP_FOR: Duration = Duration::from_secs(24 * 3600);

/// Under load, the longest time between two journal batches by default
/// (`Config::commit_max_delay`, `router/durability.rs`, "Group commit").
pub const DEFAULT_COMMIT_MAX_DELAY: Duration = Duration::from_millis(4);
/// The shortest time between two journal batches under load: also the
/// `Config::commit_max_delay` that keeps every batch at that cadence.
pub const COMMIT_DELAY: Duration = Duration::from_millis(1);

/// Where a job goes whose queue no connected job manager serves
/// (`--unserved-queues`; `router/intake.rs`, "Unserved queues").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unserved {
    /// To `default`, as EventMQ 0.3.13 routes it (logged, counted per
    /// queue): the default, so that a 0.3.13 deployment behaves the same.
    #[default]
    Default,
    /// Held in its own queue until a job manager for it connects (as
    /// Celery and RQ do).
    Hold,
}

impl Unserved {
    pub fn name(self) -> &'static str {
        match self {
            Unserved::Default => "default",
            Unserved::Hold => "hold",
        }
    }
}

impl std::str::FromStr for Unserved {
    type Err = String;
    fn from_str(s: &str) -> Result<Unserved, String> {
        match s.trim() {
            "default" => Ok(Unserved::Default),
            "hold" => Ok(Unserved::Hold),
            other => Err(format!("{other:?} is not hold or default")),
        }
    }
}

/// Tunables of the routing core. `Config::default()` matches the CLI
/// defaults of `emq-router`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Buffered jobs per queue before a REQUEST is rejected `queue-full`.
    pub hwm: usize,
    /// Unique keys held at most (`router/unique.rs`): at the cap a REQUEST
    /// with a new key is refused `queue-full`, to be sent again later.
    pub max_unique_keys: usize,
    /// How often HEARTBEAT goes to every worker and scheduler.
    pub heartbeat_interval: Duration,
    /// A peer silent for `heartbeat_interval * heartbeat_liveness` is removed.
    pub heartbeat_liveness: u32,
    /// Deliveries of one job that may be lost to worker failure (timeout,
    /// KBYE, unreachable) before the job is dead-lettered.
    pub max_attempts: u32,
    /// First retry delay after a failed REPLY of a `retry-count:N` job.
    pub retry_backoff_base: Duration,
    /// Upper bound of the doubling retry delay.
    pub retry_backoff_max: Duration,
    /// After DISCONNECT / SIGTERM: how long to wait for in-flight jobs.
    pub drain_timeout: Duration,
    /// Queues of a worker whose INFORM names none (0.3.13 `conf.QUEUES`).
    pub default_queues: QueueSpec,
    /// Where a job for a queue nobody serves goes.
    pub unserved: Unserved,
    /// Keep a journal: emit [`crate::Action::Journal`] batches and hold
    /// acknowledgements and dispatches until they are committed (see
    /// `router/durability.rs`). Off: memory only.
    pub journal: bool,
    /// Under load, the longest a journal batch waits to grow after the
    /// previous one (`router/durability.rs`, "Group commit"); at least
    /// [`COMMIT_DELAY`]. A store whose commits have a fixed cost that a
    /// bigger batch shares (SQLite) wants more; one that pays per row
    /// (PostgreSQL) only gains latency: the router gives it
    /// [`COMMIT_DELAY`].
    pub commit_max_delay: Duration,
    /// Dead letters kept (in memory and in the journal); the oldest go.
    pub dead_letter_keep: usize,
    /// Finished jobs kept for lookups (0: none).
    pub retain_finished: usize,
    /// The longest a finished job is kept.
    pub retain_for: Duration,
    /// Results larger than this are not kept (only that they were larger).
    pub retain_result_bytes: usize,
    /// Undelivered results held at most (`router/results.rs`); the oldest
    /// beyond are dropped.
    pub results_keep: usize,
    /// Payload and msgid bytes of the held results, at most.
    pub results_keep_bytes: usize,
    /// The longest an undelivered result is held.
    pub results_keep_for: Duration,
    /// Finished workflows kept for lookups, in memory and in the journal
    /// (`router/workflow.rs`, "Finished workflows"); 0: none.
    pub workflows_keep: usize,
    /// The longest a finished workflow is kept.
    pub workflows_keep_for: Duration,
    /// Unix time in microseconds at `now == 0` (a unix time, not a
    /// duration); HEARTBEAT bodies carry `(epoch_unix_micros + now)` as
    /// Python's `str(time.time())`.
    pub epoch_unix_micros: u64,
    /// The largest frame the core takes, in bytes (`--max-message-size`);
    /// `None`: no limit. A message with a bigger frame is dropped with a
    /// warning, and an oversized REQUEST, SCHEDULE or UNSCHEDULE whose
    /// msgid is readable is refused `malformed` (see `router/intake.rs`).
    /// The binary lets libzmq cut only frames over twice this, so that
    /// the sender hears why.
    pub max_message_size: Option<usize>,
    /// Seed of the msgids the router makes (acks, heartbeats, schedule
    /// runs): the driver passes a random one; tests a fixed one, so that
    /// frames are the same on every run.
    pub id_seed: u64,
    /// The secret the take-back keys are made from (`router/peers.rs`,
    /// "Take-back keys"): the driver passes random bytes; tests fixed ones.
    /// Unlike `id_seed` it must never be guessable from what the router
    /// sends.
    pub take_back_secret: [u8; 32],
    /// Emit an [`crate::Action::JobSpan`] for every dispatch and forward
    /// the router's own `traceparent` to the worker (`router/traces.rs`);
    /// the driver sets it when an OTLP endpoint is configured. Off: no
    /// header is touched and nothing is emitted.
    pub traces: bool,
    /// Flow-control policies given at start (`--limit QUEUE:...`): each
    /// replaces the journal's policy of its queue (`router/flow.rs`).
    pub limits: Vec<(String, emqp_proto::flow::Policy)>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            hwm: DEFAULT_HWM,
            max_unique_keys: DEFAULT_MAX_UNIQUE_KEYS,
            heartbeat_interval: 3 * SECOND,
            heartbeat_liveness: 3,
            max_attempts: 5,
            retry_backoff_base: SECOND,
            retry_backoff_max: 60 * SECOND,
            drain_timeout: 10 * SECOND,
            default_queues: QueueSpec::default(),
            unserved: Unserved::Default,
            journal: false,
            commit_max_delay: DEFAULT_COMMIT_MAX_DELAY,
            dead_letter_keep: 10_000,
            retain_finished: 10_000,
            retain_for: Duration::from_secs(3600),
            retain_result_bytes: 8192,
            results_keep: 100_000,
            results_keep_bytes: 256 * 1024 * 1024,
            results_keep_for: Duration::from_secs(3600),
            workflows_keep: DEFAULT_WORKFLOWS_KEEP,
            workflows_keep_for: DEFAULT_WORKFLOWS_KEEP_FOR,
            epoch_unix_micros: 0,
            max_message_size: Some(DEFAULT_MAX_MESSAGE_SIZE),
            id_seed: 0,
            take_back_secret: [0; 32],
            traces: false,
            limits: Vec::new(),
        }
    }
}

impl Config {
    /// Silence after which a worker or scheduler is removed.
    pub fn peer_timeout(&self) -> Duration {
        self.heartbeat_interval
            .saturating_mul(self.heartbeat_liveness.max(1))
    }

    /// Delay before retry number `n` (1-based): base, 2·base, 4·base, … ≤ max.
    pub fn backoff(&self, n: u32) -> Duration {
        let shift = n.saturating_sub(1).min(30);
        self.retry_backoff_base
            .saturating_mul(1u32 << shift)
            .min(self.retry_backoff_max)
    }
}
