//! Jobs and where they are: a per-queue FIFO buffer, a retry delay set, or
//! in flight on a worker (the worker holds that index, see `workers.rs`).
//!
//! Every job lives in one map keyed by the router's job id; buffers and
//! in-flight tables hold ids only, so payloads are moved, never copied,
//! except once per delivery (the frame handed to the worker).

use std::collections::{BTreeSet, VecDeque};

use crate::events::StoredJob;
use crate::util::FastMap;
use crate::workers::WorkerId;

pub type JobId = u64;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// In the buffer of its route queue.
    Queued,
    /// Dispatched to a worker; `seq` orders the worker's in-flight table.
    InFlight { worker: WorkerId, seq: u64 },
    /// Waiting for a retry after a failed REPLY.
    Delayed { due: u64 },
}

/// An accepted job.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: JobId,
    pub msgid: String,
    pub client: Vec<u8>,
    /// Queue frame as sent.
    pub queue: String,
    /// Queue the job is buffered under and dispatched from.
    pub route: String,
    /// HEADERS frame as sent.
    pub headers: Vec<u8>,
    pub reply_requested: bool,
    pub retry_count: u32,
    pub payload: Vec<u8>,
    /// Deliveries so far.
    pub attempts: u32,
    /// Deliveries lost to worker failure.
    pub lost: u32,
    /// Failed REPLYs so far.
    pub failures: u32,
    /// The last failed REPLY payload.
    pub last_error: Option<Vec<u8>>,
    /// Core time of acceptance (latency stats).
    pub accepted_at: u64,
    /// Unix micros of acceptance (journal).
    pub accepted_unix: u64,
    pub state: JobState,
}

impl Job {
    pub fn to_stored(&self) -> StoredJob {
        StoredJob {
            id: self.id,
            msgid: self.msgid.clone(),
            client: self.client.clone(),
            queue: self.queue.clone(),
            route: self.route.clone(),
            headers: self.headers.clone(),
            payload: self.payload.clone(),
            attempts: self.attempts,
            accepted_at: self.accepted_unix,
        }
    }
}

/// All unfinished jobs and the queue buffers.
#[derive(Debug, Default)]
pub struct JobStore {
    pub jobs: FastMap<JobId, Job>,
    pub queues: FastMap<String, VecDeque<JobId>>,
    pub delayed: BTreeSet<(u64, JobId)>,
    pub next_id: JobId,
    /// Jobs in buffers (all queues), kept so `buffered()` is O(1).
    buffered: usize,
}

impl JobStore {
    pub fn new() -> JobStore {
        JobStore {
            next_id: 1,
            ..JobStore::default()
        }
    }

    pub fn alloc_id(&mut self) -> JobId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub fn queue_len(&self, queue: &str) -> usize {
        self.queues.get(queue).map_or(0, VecDeque::len)
    }

    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// Insert a new job, buffered at the back of its route queue.
    pub fn insert_queued(&mut self, mut job: Job) {
        job.state = JobState::Queued;
        let id = job.id;
        self.queues
            .entry(job.route.clone())
            .or_default()
            .push_back(id);
        self.buffered += 1;
        self.jobs.insert(id, job);
    }

    /// Put an existing job back into its route queue.
    pub fn requeue(&mut self, id: JobId, front: bool) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.state = JobState::Queued;
        let q = match self.queues.get_mut(job.route.as_str()) {
            Some(q) => q,
            None => self.queues.entry(job.route.clone()).or_default(),
        };
        if front {
            q.push_front(id);
        } else {
            q.push_back(id);
        }
        self.buffered += 1;
    }

    /// The oldest buffered job of `queue`, removed from the buffer (the job
    /// stays in the map; the caller sets its new state).
    pub fn pop_front(&mut self, queue: &str) -> Option<JobId> {
        let id = self.queues.get_mut(queue)?.pop_front()?;
        self.buffered -= 1;
        Some(id)
    }

    /// Take a queued job out of its buffer (rare path: linear in the
    /// queue length). The job stays in the map.
    pub fn remove_queued(&mut self, id: JobId) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        if let Some(q) = self.queues.get_mut(job.route.as_str()) {
            if let Some(pos) = q.iter().position(|j| *j == id) {
                q.remove(pos);
                self.buffered -= 1;
            }
        }
    }

    pub fn delay(&mut self, id: JobId, due: u64) {
        if let Some(job) = self.jobs.get_mut(&id) {
            job.state = JobState::Delayed { due };
            self.delayed.insert((due, id));
        }
    }

    /// Delayed jobs due at `now`, oldest due first, removed from the set.
    pub fn take_due(&mut self, now: u64) -> Vec<JobId> {
        let mut out = Vec::new();
        while let Some(&(due, id)) = self.delayed.first() {
            if due > now {
                break;
            }
            self.delayed.pop_first();
            out.push(id);
        }
        out
    }
}
