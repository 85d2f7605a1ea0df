//! The plain data the state machine keeps and the read model shows:
//! counters ([`Stats`], per queue [`QueueMetrics`] with the latency
//! [`Histogram`]), dead letters ([`DeadLetter`]) and the journal's state
//! ([`JournalState`]). No behaviour beyond small accessors; this module
//! imports nothing of the state machine or its renderers, so the router
//! (`router/`), the read model (`snapshot.rs`) and the renderers
//! (`admin.rs`, `metrics.rs`) all import it without a circle.

use std::time::Duration;

use crate::journal::{DeadLetterRecord, JobRecord};
use crate::util::FastMap;

/// Upper bounds of the latency buckets, in microseconds.
pub const LATENCY_BOUNDS_MICROS: [u64; 18] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// A fixed-bucket histogram of durations in microseconds.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    /// Observations in bucket `i` (≤ bound `i`, > bound `i-1`); larger
    /// ones only count in `count`.
    pub buckets: [u64; LATENCY_BOUNDS_MICROS.len()],
    pub count: u64,
    pub sum_micros: u64,
}

impl Histogram {
    pub fn observe(&mut self, micros: u64) {
        self.count += 1;
        self.sum_micros = self.sum_micros.saturating_add(micros);
        if let Some(i) = LATENCY_BOUNDS_MICROS.iter().position(|b| micros <= *b) {
            self.buckets[i] += 1;
        }
    }

    /// Cumulative counts per bound (Prometheus `le` buckets).
    pub fn cumulative(&self) -> [u64; LATENCY_BOUNDS_MICROS.len()] {
        let mut out = self.buckets;
        for i in 1..out.len() {
            out[i] += out[i - 1];
        }
        out
    }
}

/// Counters of one route queue, one definition for every view (STATUS's
/// per-queue figures, admin `queues`, the dashboard, `/metrics`):
/// `finished = processed + failed + dead_lettered`.
#[derive(Debug, Clone, Default)]
pub struct QueueMetrics {
    /// Finished jobs: done, failed, or dead-lettered (retries or deliveries
    /// exhausted) — admin `processed_messages_by_queue`, `queues`'
    /// `finished`. Cancelled jobs are not counted.
    pub finished: u64,
    /// Finished ok (`done`).
    pub processed: u64,
    /// Finished failed with no retry left to try (not dead-lettered).
    pub failed: u64,
    pub retried: u64,
    pub redelivered: u64,
    pub dead_lettered: u64,
    pub rejected: u64,
    /// Jobs for this queue sent to `default` because no connected job
    /// manager served it (`--unserved-queues default`).
    pub routed_to_default: u64,
    /// Accepted (submitted) into this queue, restored jobs not counted.
    pub accepted: u64,
    /// Deliveries to a worker (started), redeliveries and retries too.
    pub dispatched: u64,
    /// Acceptance to finish of finished jobs.
    pub latency: Histogram,
    /// Run time of each delivery that ended with a REPLY (or a legacy
    /// READY): dispatch to its end, retried failures too.
    pub run_time: Histogram,
}

/// A job that gave up for good, as the admin socket lists it: the whole
/// job (a retry accepts it again), why, and when.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// The job as accepted (`route` is the queue it was buffered under).
    pub job: JobRecord,
    pub reason: String,
    /// The last error payload (worker's REPLY), if any.
    pub error: Option<Vec<u8>>,
    /// Unix milliseconds it was dead-lettered.
    pub at_unix_ms: u64,
}

impl From<DeadLetterRecord> for DeadLetter {
    fn from(d: DeadLetterRecord) -> DeadLetter {
        DeadLetter {
            job: d.job,
            reason: d.reason,
            error: d.error,
            at_unix_ms: d.dead_at_unix_ms,
        }
    }
}

/// Counters, visible on the admin socket and in `/metrics`.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub accepted: u64,
    pub restored: u64,
    pub dispatched: u64,
    pub completed: u64,
    pub failed: u64,
    pub retried: u64,
    pub redelivered: u64,
    /// Jobs a reconnected job manager said it still runs (`RUNNING`),
    /// moved onto its new connection instead of being delivered again.
    pub adopted: u64,
    /// REPLYs and RUNNINGs for a job delivered to another job manager,
    /// from a worker without that job manager's take-back key: ignored.
    pub foreign_claims: u64,
    pub dead_lettered: u64,
    pub rejected_queue_full: u64,
    pub rejected_malformed: u64,
    pub rejected_shutting_down: u64,
    pub rejected_duplicate: u64,
    /// REQUESTs sent again (a msgid held with the same queue and message)
    /// acknowledged as the job already held, not run again.
    pub resent_requests: u64,
    /// REQUESTs with a held `unique-key` acknowledged as the job holding
    /// it (`DUPLICATE`).
    pub unique_duplicates: u64,
    /// REQUESTs with a held `unique-key` refused `duplicate`.
    pub unique_rejected: u64,
    /// Waiting jobs cancelled by `on-conflict:replace`.
    pub unique_replaced: u64,
    /// REQUESTs and SCHEDULEs refused `journal-unavailable` (including
    /// jobs whose batch failed: they were never acknowledged).
    pub rejected_journal: u64,
    /// Jobs cancelled by an operator (cancel, purge).
    pub cancelled: u64,
    /// REQUESTs, SCHEDULEs and UNSCHEDULEs refused (`malformed`) for a
    /// frame over [`crate::Config::max_message_size`].
    pub rejected_too_large: u64,
    /// Messages dropped undecoded: malformed, or with a frame over
    /// [`crate::Config::max_message_size`] (refused or not).
    pub malformed_dropped: u64,
    /// Results of `reply-requested` jobs (first sends, not re-sends).
    pub results_forwarded: u64,
    /// Held results delivered: receipted by their client, or (without
    /// `result-receipt`) handed to it.
    pub results_delivered: u64,
    /// Held results sent again (to a client that was unreachable, or
    /// that said it reconnected).
    pub results_resent: u64,
    /// Held results dropped undelivered at the bounds.
    pub results_dropped: u64,
    /// Held results loaded from the journal at start.
    pub restored_results: u64,
    /// Jobs enqueued by built-in schedules.
    pub scheduled_runs: u64,
    /// Runs of built-in schedules skipped (queue at `hwm`, or shutting down).
    pub scheduled_runs_skipped: u64,
    /// Per route queue counters and latency (see [`crate::metrics`]).
    pub queues: FastMap<String, QueueMetrics>,
    pub processed_by_worker: FastMap<Vec<u8>, u64>,
}

impl Stats {
    /// The counters of route queue `q` (allocates only on its first use).
    pub(crate) fn queue_mut(&mut self, q: &str) -> &mut QueueMetrics {
        if !self.queues.contains_key(q) {
            self.queues.insert(q.to_string(), Default::default());
        }
        self.queues.get_mut(q).expect("just inserted")
    }
}

/// The journal as the admin STATUS and `/metrics` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalState {
    /// No journal (`--journal none`).
    Off,
    /// The last batch committed.
    Healthy,
    /// Batches fail; new work is refused until one commits.
    Failing {
        /// Core time of the first failure.
        since: Duration,
        /// The store's last error.
        error: String,
        /// REQUESTs and SCHEDULEs refused since.
        refused: u64,
    },
}

impl JournalState {
    /// `off`, `ok` or `failing`.
    pub fn name(&self) -> &'static str {
        match self {
            JournalState::Off => "off",
            JournalState::Healthy => "ok",
            JournalState::Failing { .. } => "failing",
        }
    }
}
