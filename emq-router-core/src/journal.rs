//! The journal model: the plain-data records the core emits, the batches
//! they travel in, what a store gives back at start, and the
//! [`JournalStore`] trait every store implements (SQLite in `emq-journal`
//! first; a second store plugs in without touching the core).
//!
//! The core never writes anything itself. It emits [`Batch`]es
//! ([`crate::Action::Journal`]) in order, and the driver appends each one
//! to its store — one transaction per batch, all or nothing — then reports
//! the outcome with [`crate::Input::JournalDone`]. What the core does with
//! that outcome (hold acknowledgements until it, refuse work while the
//! store fails, write failed records again) is the durability rule in
//! `router/durability.rs`.
//!
//! Records name jobs by msgid (the router holds at most one unfinished job
//! per msgid: a REQUEST re-using one is refused `duplicate-msgid`) and
//! carry times as unix milliseconds.

/// A job as the journal keeps it, and as the core takes it back at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// The client's REQUEST msgid (also the msgid forwarded to workers).
    pub msgid: String,
    /// The client's identity on the frontend (empty for scheduled runs).
    pub client: Vec<u8>,
    /// The queue frame as the client sent it (forwarded unchanged).
    pub queue: String,
    /// The queue the job is routed through (`default` for unserved queues).
    pub route: String,
    /// The HEADERS frame as sent, byte for byte.
    pub headers: Vec<u8>,
    /// The MSG frame (never decoded by the router).
    pub payload: Vec<u8>,
    /// Deliveries so far.
    pub attempts: u32,
    /// Unix milliseconds when the router accepted the job.
    pub accepted_at_unix_ms: u64,
    /// A delayed job (`delay:SECS`): unix milliseconds before which it is
    /// not dispatched.
    pub run_at_unix_ms: Option<u64>,
}

/// A finished job kept for lookups (`--retain-finished`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishedRecord {
    /// The job as accepted (payload kept up to 1,000 bytes).
    pub job: JobRecord,
    /// `done`, `failed` or `cancelled`.
    pub outcome: String,
    /// When its last delivery was dispatched to a worker (`None`: it
    /// never ran — cancelled while waiting — or the router did not know,
    /// e.g. journals written before this was kept). Waited = started −
    /// accepted; ran = finished − started.
    pub started_at_unix_ms: Option<u64>,
    pub finished_at_unix_ms: u64,
    /// The RESULT payload, when it is small enough to keep.
    pub result: Option<Vec<u8>>,
    /// The result was larger than the router keeps.
    pub result_truncated: bool,
}

/// A `reply-requested` job's result, kept until it is delivered to its
/// client (see `router/results.rs` for what "delivered" means).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultRecord {
    /// The job's msgid (the RESULT's ORIG_MSGID).
    pub msgid: String,
    /// The client's identity on the frontend.
    pub client: Vec<u8>,
    /// `ok` or `failed`.
    pub status: emqp_proto::ResultStatus,
    /// The RESULT payload.
    pub payload: Vec<u8>,
    /// The job had the `result-receipt` header: delivered once the client
    /// sends `RECEIVED`; else once handed to a connected client.
    pub receipt: bool,
    /// Unix milliseconds the job finished.
    pub held_at_unix_ms: u64,
}

/// What a [`Record::PutState`] belongs to. Each kind is owned by one rule
/// of the core, which alone encodes and decodes its blobs; the stores keep
/// `(kind, id, blob)` rows and know nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StateKind {
    /// A queue's flow-control policy (id: the queue).
    QueuePolicy,
    /// A unique key held for a window (id: the key).
    UniqueKey,
    /// An unfinished workflow's graph (id: the workflow id;
    /// `router/workflow.rs`).
    Workflow,
    /// A finished node of an unfinished workflow: its outcome and result
    /// (id: `WORKFLOW_ID/NODE_ID`; `router/workflow.rs`).
    WorkflowNode,
    /// An unfinished batch: its callbacks and counts (id: the batch id;
    /// `router/batch.rs`).
    Batch,
    /// A finished workflow kept for lookups: its graph, node states,
    /// times and results (id: the workflow id; `router/workflow.rs`,
    /// "Finished workflows").
    WorkflowFinished,
}

impl StateKind {
    /// Every kind, for stores that list them.
    pub const ALL: [StateKind; 6] = [
        StateKind::QueuePolicy,
        StateKind::UniqueKey,
        StateKind::Workflow,
        StateKind::WorkflowNode,
        StateKind::Batch,
        StateKind::WorkflowFinished,
    ];

    /// The name a store writes in its `kind` column (never changes).
    pub fn as_str(self) -> &'static str {
        match self {
            StateKind::QueuePolicy => "queue-policy",
            StateKind::UniqueKey => "unique-key",
            StateKind::Workflow => "workflow",
            StateKind::WorkflowNode => "workflow-node",
            StateKind::Batch => "batch",
            StateKind::WorkflowFinished => "workflow-finished",
        }
    }

    /// The kind a store read back; `None` for a name this build does not
    /// know (a newer router's row: the store skips it).
    pub fn parse(name: &str) -> Option<StateKind> {
        StateKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// One change to the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A job was accepted. Durable before the client hears of it.
    Accepted(JobRecord),
    /// The job finished (ok, or failed with no retry left): forget it.
    /// Unknown msgids are ignored.
    Completed { msgid: String },
    /// The job finished and is kept for lookups: forget the unfinished
    /// job, keep this (the store keeps the newest `keep` and drops those
    /// finished before `drop_before_unix_ms`).
    Finished {
        record: FinishedRecord,
        keep: usize,
        drop_before_unix_ms: u64,
    },
    /// A queue was paused (no dispatch) or resumed.
    QueuePaused { queue: String, paused: bool },
    /// A dead letter was retried or discarded: forget it. Unknown msgids
    /// are ignored.
    DeadLetterRemoved { msgid: String },
    /// The job failed for good: it moves to the dead letters with `reason`
    /// and the worker's last error payload, if any (the store keeps the
    /// newest `keep`). Unknown msgids are ignored.
    DeadLettered {
        msgid: String,
        reason: String,
        error: Option<Vec<u8>>,
        keep: usize,
    },
    /// The job is being delivered again: its delivery count is `attempts`.
    Attempt { msgid: String, attempts: u32 },
    /// A built-in schedule was created, changed or ran: store `blob`
    /// (opaque, from `emq_schedule::ScheduleBook::take_changes`) under `id`.
    PutSchedule { id: String, blob: Vec<u8> },
    /// A built-in schedule was removed. Unknown ids are ignored.
    DeleteSchedule { id: String },
    /// A piece of router state other than jobs (a queue's flow-control
    /// policy, a unique key's window): store `blob` (opaque to the store,
    /// encoded by the rule that owns `kind`) under `(kind, id)`, replacing
    /// what was there.
    PutState {
        kind: StateKind,
        id: String,
        blob: Vec<u8>,
    },
    /// Forget the state under `(kind, id)`. Unknown ids are ignored.
    DeleteState { kind: StateKind, id: String },
    /// A finished job's result is kept until delivered (in the same batch
    /// as the job's `Finished`, `Completed` or `DeadLettered` record). A
    /// msgid already held is replaced.
    ResultHeld(ResultRecord),
    /// The held result was delivered (or dropped at the router's bounds):
    /// forget it. Unknown msgids are ignored.
    ResultReleased { msgid: String },
    /// Nothing to keep: the core asks whether the store can write again
    /// after a failure. A store makes a real write that leaves no trace
    /// (for SQLite: a row inserted and deleted in the batch's transaction).
    Probe,
}

/// A dead letter as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterRecord {
    pub job: JobRecord,
    pub reason: String,
    /// The worker's last error payload (its failed REPLY), if any.
    pub error: Option<Vec<u8>>,
    pub dead_at_unix_ms: u64,
}

/// Batches are numbered from 1 in the order the core emits them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BatchId(pub u64);

/// Records to append in one transaction: all of them or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub id: BatchId,
    pub records: Vec<Record>,
}

/// How a batch ended, as the driver reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchResult {
    /// Committed: every record is durable.
    Committed,
    /// Nothing of the batch was written; the text says why (for the log
    /// and the admin STATUS).
    Failed(String),
    /// The store cannot tell whether the batch was written (the
    /// connection to the database broke while its commit was on its way);
    /// the text says why. The store settles it before its next write: a
    /// batch that did commit is undone there, so that the core's view
    /// (nothing of it written) holds once a later batch commits.
    Uncertain(String),
}

/// What a store holds, read at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restored {
    /// Unfinished jobs, oldest acceptance first.
    pub jobs: Vec<JobRecord>,
    /// Dead letters, oldest first.
    pub dead_letters: Vec<DeadLetterRecord>,
    /// Built-in schedules: `(id, blob)`.
    pub schedules: Vec<(String, Vec<u8>)>,
    /// Paused queues.
    pub paused_queues: Vec<String>,
    /// Finished jobs kept for lookups, oldest first.
    pub finished: Vec<FinishedRecord>,
    /// Results not yet delivered, oldest first.
    pub results: Vec<ResultRecord>,
    /// Other router state ([`Record::PutState`]), ordered by kind and id.
    pub states: Vec<(StateKind, String, Vec<u8>)>,
}

/// A durable store of [`Record`]s.
pub trait JournalStore {
    /// The store's error type.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Append one batch atomically: after `Ok`, every record survives a
    /// crash of the process; after `Err`, none of them was written.
    fn append(&mut self, batch: &Batch) -> Result<(), Self::Error>;

    /// Everything the core needs at start.
    fn load(&mut self) -> Result<Restored, Self::Error>;

    /// Where the store lives, for logs (a path or a URL without secrets).
    fn describe(&self) -> String;
}
