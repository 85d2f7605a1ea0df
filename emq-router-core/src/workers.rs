//! Connected workers, their free slots, and the per-queue index used to
//! pick one.
//!
//! For each queue, `available` holds `(Reverse(weight), lru, id)` for every
//! worker serving it with at least one free slot, so the first entry is the
//! least recently used worker among those with the highest weight: picking
//! is O(log n), and a dispatch re-inserts the chosen worker with a fresh
//! `lru` stamp (O(q log n) for a worker on q queues).
//!
//! `by_seen` orders workers by when they were last heard from, quietest
//! first, so the liveness deadline is the first entry and a sweep stops
//! at the first live worker (as mdbroker's purge does): neither walks
//! every worker. A message moves its worker only when the clock moved
//! since its last one (one move per worker per poll round under load).

use std::time::Duration;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::ids::JobId;
use crate::util::FastMap;

pub use crate::ids::{DispatchSeq, WorkerId};

type SlotKey = (Reverse<u32>, u64, WorkerId);

/// A job on a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inflight {
    pub job: JobId,
    /// Core time of the dispatch.
    pub since: Duration,
}

/// How a worker reports that a job ended (see `router/completion.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerKind {
    /// INFORMed with `job-ack` (every emq job manager): a REPLY for every
    /// job, so completion is exact.
    JobAck,
    /// A 0.3.13 job manager: REPLY only for reply-requested jobs, then a
    /// READY for the same slot; a READY otherwise means "the oldest job
    /// without a pending REPLY is done".
    Legacy {
        /// READYs still expected for jobs a REPLY already completed, so
        /// that READY does not complete a second job.
        ready_owed: u32,
    },
}

impl WorkerKind {
    /// A REPLY completed a job: a legacy worker's next READY only frees
    /// that slot.
    pub fn owe_ready(&mut self) {
        if let WorkerKind::Legacy { ready_owed } = self {
            *ready_owed = ready_owed.saturating_add(1);
        }
    }
}

/// One registered worker (one backend identity).
#[derive(Debug)]
pub struct Worker {
    pub id: WorkerId,
    pub identity: Vec<u8>,
    /// `(weight, queue)`, highest weight first.
    pub queues: Vec<(u32, String)>,
    /// The queues as announced (admin output keeps the INFORM order).
    pub announced: Vec<(u32, String)>,
    pub features: Vec<String>,
    /// Its job manager's take-back key (`router/peers.rs`, "Take-back
    /// keys"); `None` for a worker that listed no features.
    pub take_back: Option<Box<str>>,
    /// Who it is, as its INFORM said (name, host, pid, slots, version;
    /// emq job managers), for the `workers` view; `None` for a worker that
    /// said nothing (0.3.13).
    pub about: Option<Box<emqp_proto::WorkerAbout>>,
    /// How the worker reports finished jobs.
    pub kind: WorkerKind,
    pub slots: u32,
    /// Drained by an operator: finishes what it runs, is handed nothing
    /// new (its READYs are kept as slots).
    pub draining: bool,
    /// Core time of its registration.
    pub connected_at: Duration,
    /// READYs received (an upper bound for `slots`).
    pub readies: u64,
    pub last_seen: Duration,
    pub lru: u64,
    /// Dispatch sequence → job and when it was dispatched, oldest first.
    pub inflight: BTreeMap<DispatchSeq, Inflight>,
    /// Job msgid → dispatch sequence, for REPLY lookup.
    pub by_msgid: FastMap<String, DispatchSeq>,
}

impl Worker {
    /// Forget an in-flight entry; returns it (the job and its dispatch
    /// time).
    pub fn take_inflight(&mut self, seq: DispatchSeq) -> Option<Inflight> {
        self.inflight.remove(&seq)
    }

    /// Remove the msgid index entry if it points at `seq`.
    pub fn unindex(&mut self, msgid: &str, seq: DispatchSeq) {
        if self.by_msgid.get(msgid) == Some(&seq) {
            self.by_msgid.remove(msgid);
        }
    }
}

/// All workers and the queue indexes.
#[derive(Debug, Default)]
pub struct WorkerPool {
    pub workers: FastMap<WorkerId, Worker>,
    pub by_identity: FastMap<Vec<u8>, WorkerId>,
    /// Queue → `(Reverse(weight), id)` of every worker serving it. A queue
    /// key stays after its last worker leaves (0.3.13 shows it as `[]`).
    pub serving: FastMap<String, BTreeSet<(Reverse<u32>, WorkerId)>>,
    /// Queue → workers serving it that have a free slot.
    pub available: FastMap<String, BTreeSet<SlotKey>>,
    next_id: WorkerId,
    lru_clock: u64,
    /// Sum of in-flight jobs over all workers.
    pub inflight_total: usize,
    /// `(last_seen, id)` of every worker, quietest first.
    by_seen: BTreeSet<(Duration, WorkerId)>,
}

impl WorkerPool {
    pub fn id_of(&self, identity: &[u8]) -> Option<WorkerId> {
        self.by_identity.get(identity).copied()
    }

    /// A message from `identity` counts as its heartbeat.
    pub fn touch(&mut self, identity: &[u8], now: Duration) {
        let Some(id) = self.id_of(identity) else {
            return;
        };
        if let Some(w) = self.workers.get_mut(&id) {
            if w.last_seen != now {
                self.by_seen.remove(&(w.last_seen, id));
                w.last_seen = now;
                self.by_seen.insert((now, id));
            }
        }
    }

    /// When the quietest worker was last heard from.
    pub fn quietest(&self) -> Option<Duration> {
        self.by_seen.first().map(|(t, _)| *t)
    }

    /// The workers last heard from before `cutoff` (walks only those).
    pub fn silent_since(&self, cutoff: Duration) -> impl Iterator<Item = WorkerId> + '_ {
        self.by_seen
            .iter()
            .take_while(move |(t, _)| *t < cutoff)
            .map(|(_, id)| *id)
    }

    /// Whether `by_seen` holds exactly every worker at its `last_seen`.
    pub fn check_seen_index(&self) -> Result<(), String> {
        if self.by_seen.len() != self.workers.len() {
            return Err(format!(
                "{} workers, {} in the liveness order",
                self.workers.len(),
                self.by_seen.len()
            ));
        }
        match self
            .workers
            .values()
            .find(|w| !self.by_seen.contains(&(w.last_seen, w.id)))
        {
            Some(w) => Err(format!("worker {:?} out of the liveness order", w.id)),
            None => Ok(()),
        }
    }

    pub fn get(&self, id: WorkerId) -> Option<&Worker> {
        self.workers.get(&id)
    }

    pub fn get_mut(&mut self, id: WorkerId) -> Option<&mut Worker> {
        self.workers.get_mut(&id)
    }

    /// Whether any connected worker serves `queue`.
    pub fn serves(&self, queue: &str) -> bool {
        self.serving.get(queue).is_some_and(|s| !s.is_empty())
    }

    /// Register a worker with no free slot.
    pub fn register(
        &mut self,
        identity: Vec<u8>,
        announced: Vec<(u32, String)>,
        features: Vec<String>,
        now: Duration,
    ) -> WorkerId {
        self.next_id = WorkerId(self.next_id.0 + 1);
        let id = self.next_id;
        let mut queues: Vec<(u32, String)> = Vec::with_capacity(announced.len());
        for (w, q) in &announced {
            // A queue named twice keeps its first (highest after sort) weight.
            if !queues.iter().any(|(_, n)| n == q) {
                queues.push((*w, q.clone()));
            }
        }
        queues.sort_by_key(|q| Reverse(q.0));
        for (w, q) in &queues {
            self.serving
                .entry(q.clone())
                .or_default()
                .insert((Reverse(*w), id));
        }
        let kind = if features
            .iter()
            .any(|f| f == emqp_proto::command::FEATURE_JOB_ACK)
        {
            WorkerKind::JobAck
        } else {
            WorkerKind::Legacy { ready_owed: 0 }
        };
        self.by_identity.insert(identity.clone(), id);
        self.by_seen.insert((now, id));
        self.workers.insert(
            id,
            Worker {
                id,
                identity,
                queues,
                announced,
                features,
                take_back: None,
                about: None,
                kind,
                slots: 0,
                draining: false,
                connected_at: now,
                readies: 0,
                last_seen: now,
                lru: 0,
                inflight: BTreeMap::new(),
                by_msgid: FastMap::default(),
            },
        );
        id
    }

    /// Remove a worker and its index entries; the caller handles its jobs.
    pub fn remove(&mut self, id: WorkerId) -> Option<Worker> {
        let w = self.workers.remove(&id)?;
        self.by_identity.remove(&w.identity);
        self.by_seen.remove(&(w.last_seen, id));
        for (weight, q) in &w.queues {
            if let Some(s) = self.serving.get_mut(q) {
                s.remove(&(Reverse(*weight), id));
            }
            if let Some(s) = self.available.get_mut(q) {
                s.remove(&(Reverse(*weight), w.lru, id));
            }
        }
        self.inflight_total -= w.inflight.len();
        Some(w)
    }

    /// The worker to hand a job of `queue` to, if any has a free slot.
    pub fn pick(&self, queue: &str) -> Option<WorkerId> {
        self.available
            .get(queue)
            .and_then(|s| s.first())
            .map(|k| k.2)
    }

    /// Whether a worker with a free slot serves `queue`.
    pub fn has_free(&self, queue: &str) -> bool {
        self.available.get(queue).is_some_and(|s| !s.is_empty())
    }

    fn unlist(&mut self, id: WorkerId) {
        let Some(w) = self.workers.get(&id) else {
            return;
        };
        for (weight, q) in &w.queues {
            if let Some(s) = self.available.get_mut(q) {
                s.remove(&(Reverse(*weight), w.lru, id));
            }
        }
    }

    fn list(&mut self, id: WorkerId) {
        let Some(w) = self.workers.get(&id) else {
            return;
        };
        if w.slots == 0 || w.draining {
            return;
        }
        for (weight, q) in &w.queues {
            self.available
                .entry(q.clone())
                .or_default()
                .insert((Reverse(*weight), w.lru, id));
        }
    }

    /// Drain (`true`: hand it nothing new) or resume a worker.
    pub fn set_draining(&mut self, id: WorkerId, draining: bool) {
        self.unlist(id);
        if let Some(w) = self.workers.get_mut(&id) {
            w.draining = draining;
        }
        self.list(id);
    }

    /// One more free slot.
    pub fn add_slot(&mut self, id: WorkerId) {
        let Some(w) = self.workers.get_mut(&id) else {
            return;
        };
        w.slots += 1;
        if w.slots == 1 {
            self.list(id);
        }
    }

    /// Record a dispatch to `id`: take a slot if `consume_slot`, stamp LRU,
    /// and add the job to the in-flight table under a fresh sequence.
    pub fn record_dispatch(
        &mut self,
        id: WorkerId,
        job: JobId,
        msgid: &str,
        consume_slot: bool,
        now: Duration,
    ) -> Option<DispatchSeq> {
        self.unlist(id);
        self.lru_clock += 1;
        let seq = DispatchSeq(self.lru_clock);
        let w = self.workers.get_mut(&id)?;
        if consume_slot {
            w.slots = w.slots.saturating_sub(1);
        }
        w.lru = seq.0;
        w.inflight.insert(seq, Inflight { job, since: now });
        w.by_msgid.insert(msgid.to_string(), seq);
        self.inflight_total += 1;
        self.list(id);
        Some(seq)
    }

    /// Remove an in-flight entry (completion); returns it (the job id
    /// and when it was dispatched).
    pub fn finish(&mut self, id: WorkerId, seq: DispatchSeq, msgid: &str) -> Option<Inflight> {
        let w = self.workers.get_mut(&id)?;
        let i = w.take_inflight(seq)?;
        w.unindex(msgid, seq);
        self.inflight_total -= 1;
        Some(i)
    }
}
