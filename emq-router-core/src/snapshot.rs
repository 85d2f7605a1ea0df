//! The read model: what an operator sees — queues, workers, schedulers,
//! schedules, counters, dead letters, the journal's state — as plain data
//! ([`Snapshot`]). [`crate::Router::snapshot`] (in `router/snapshot.rs`,
//! beside the state it reads) makes one; the admin STATUS / ROUTER_SHOW_* answers
//! (`admin.rs`) and the Prometheus text (`metrics.rs`) are pure functions
//! of it. This module imports no part of the state machine, so the router
//! can render its own answers without an import circle.

use crate::data::{DeadLetter, JournalState, QueueMetrics, Stats};

/// One route queue.
#[derive(Debug, Clone, Default)]
pub struct QueueView {
    pub name: String,
    /// Jobs buffered.
    pub depth: u64,
    /// Jobs on workers.
    pub inflight: u64,
    /// Jobs waiting for a retry delay.
    pub retry_waiting: u64,
    /// Delayed jobs (`delay:SECS`) waiting for their time.
    pub delayed: u64,
    /// Accepted, not finished (buffered + in flight + retry waiting).
    pub unfinished: u64,
    /// Mean age of the unfinished jobs, ms.
    pub mean_age_ms: u64,
    /// Age of the oldest unfinished job, ms.
    pub max_age_ms: u64,
    /// Counters and the latency histogram.
    pub metrics: QueueMetrics,
    /// Workers serving it: `(weight, identity)`, highest weight first.
    pub serving: Vec<(u32, String)>,
    /// Some worker announced it in this run (it stays listed, possibly with
    /// no worker, after its last worker left, as in 0.3.13).
    pub announced: bool,
    /// Flow control (`router/flow.rs`): waiting jobs a limit holds now.
    pub flow_limited: u64,
    /// Flow control: times a free worker was left idle by a limit.
    pub flow_throttled: u64,
}

/// One connected worker (job manager connection).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerView {
    pub identity: String,
    /// Queues as announced: `(weight, queue)`.
    pub queues: Vec<(u32, String)>,
    /// Core time of its last message, seconds.
    pub last_seen_secs: f64,
    /// Credit: jobs the router may hand it now, its READYs not used yet
    /// (its free slots plus, for an emq job manager, the credit window
    /// beyond them: docs/PROTOCOL.md, "Credit window"). Not its slots.
    pub credit: u32,
    /// Jobs in flight on it: running, or held by its job manager.
    pub inflight: u64,
    pub features: Vec<String>,
    /// Jobs finished on it.
    pub processed: u64,
}

/// Everything the admin answers and the metrics are made of.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Unix milliseconds of the snapshot.
    pub unix_ms: u64,
    pub queues: Vec<QueueView>,
    pub workers: Vec<WorkerView>,
    /// 0.3.13 scheduler peers: `(identity, last seen seconds)`.
    pub schedulers: Vec<(String, f64)>,
    pub schedules: Vec<emq_schedule::ScheduleInfo>,
    /// Counters (the per-queue and per-worker maps are in `queues` and
    /// `workers`).
    pub stats: Stats,
    /// Dead letters kept, newest first.
    pub dead_letters: Vec<DeadLetter>,
    /// Dead letters loaded from the journal at start.
    pub dead_letters_restored: u64,
    pub journal: JournalState,
    /// Acknowledgements and RESULTs waiting for a commit.
    pub held_sends: u64,
    /// Results held until delivered, their bytes, and the clients among
    /// theirs that could not be reached.
    pub results_held: u64,
    /// Unique keys held (`unique-key`).
    pub unique_keys: u64,
    /// Workflows (`WORKFLOW`): held unfinished, and this run's accepted,
    /// succeeded and failed (or cancelled) ones.
    pub workflows: WorkflowCounts,
    /// Batches (`BATCH`): held unfinished, and this run's opened and
    /// finished (callbacks submitted) ones.
    pub batches: BatchCounts,
    pub results_bytes: u64,
    pub results_unreachable_clients: u64,
    pub draining: bool,
}

/// Batch figures of the admin STATUS (`batches`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchCounts {
    pub held: u64,
    pub opened: u64,
    pub finished: u64,
}

/// Workflow figures of the admin STATUS (`workflows`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkflowCounts {
    pub held: u64,
    pub accepted: u64,
    pub succeeded: u64,
    pub failed: u64,
}
