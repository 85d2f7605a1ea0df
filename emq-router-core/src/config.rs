//! The router core's configuration. All durations are microseconds, the
//! unit of the `now` the binary passes to [`crate::Router::handle`].

use emqp_proto::QueueSpec;

/// One second in the core's time unit.
pub const SECOND: u64 = 1_000_000;

/// The default of [`Config::max_message_size`]: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// Tunables of the routing core. `Config::default()` matches the CLI
/// defaults of `emq-router`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Buffered jobs per queue before a REQUEST is rejected `queue-full`.
    pub hwm: usize,
    /// How often HEARTBEAT goes to every worker and scheduler.
    pub heartbeat_interval: u64,
    /// A peer silent for `heartbeat_interval * heartbeat_liveness` is removed.
    pub heartbeat_liveness: u32,
    /// Deliveries of one job that may be lost to worker failure (timeout,
    /// KBYE, unreachable) before the job is dead-lettered.
    pub max_attempts: u32,
    /// First retry delay after a failed REPLY of a `retry-count:N` job.
    pub retry_backoff_base: u64,
    /// Upper bound of the doubling retry delay.
    pub retry_backoff_max: u64,
    /// After DISCONNECT / SIGTERM: how long to wait for in-flight jobs.
    pub drain_timeout: u64,
    /// Queues of a worker whose INFORM names none (0.3.13 `conf.QUEUES`).
    pub default_queues: QueueSpec,
    /// Keep a journal: emit [`crate::Action::Journal`] batches and hold
    /// acknowledgements and dispatches until they are committed (see
    /// `router/durability.rs`). Off: memory only.
    pub journal: bool,
    /// How many dead-lettered jobs the admin socket lists (the count is total).
    pub dead_letter_keep: usize,
    /// Unix time in microseconds at `now == 0`; HEARTBEAT bodies carry
    /// `(epoch_unix_micros + now)` as Python's `str(time.time())`.
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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            hwm: 10_000,
            heartbeat_interval: 3 * SECOND,
            heartbeat_liveness: 3,
            max_attempts: 5,
            retry_backoff_base: SECOND,
            retry_backoff_max: 60 * SECOND,
            drain_timeout: 10 * SECOND,
            default_queues: QueueSpec::default(),
            journal: false,
            dead_letter_keep: 1000,
            epoch_unix_micros: 0,
            max_message_size: Some(DEFAULT_MAX_MESSAGE_SIZE),
            id_seed: 0,
        }
    }
}

impl Config {
    /// Silence after which a worker or scheduler is removed.
    pub fn peer_timeout(&self) -> u64 {
        self.heartbeat_interval
            .saturating_mul(u64::from(self.heartbeat_liveness.max(1)))
    }

    /// Delay before retry number `n` (1-based): base, 2·base, 4·base, … ≤ max.
    pub fn backoff(&self, n: u32) -> u64 {
        let shift = n.saturating_sub(1).min(40);
        self.retry_backoff_base
            .saturating_mul(1u64 << shift)
            .min(self.retry_backoff_max)
    }
}
