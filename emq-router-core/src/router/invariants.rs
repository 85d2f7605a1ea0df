//! Invariants: the bookkeeping the tests check after every input.
//!
//! Slots never exceed READYs received; no job is both queued and in
//! flight; every in-flight entry belongs to a live worker; the free-slot
//! index matches the slots; no worker idles while its queue has a
//! dispatchable job; every unfinished job is in the msgid index and
//! nothing else is; every accepted job is queued, delayed, in flight,
//! completed or dead-lettered (conservation); no more RESULTs than
//! finished jobs; held results within their bounds, indexed per client
//! exactly once, counted (bytes, unsent) right, an unreachable client
//! probed, every result waiting for a commit with exactly one held send
//! (none without a journal), and every result produced or restored is
//! held, delivered, dropped at the bounds or replaced (conservation);
//! every unique key held for an unfinished job names a job in the store,
//! and every other one has an open window; every batch's pending jobs are
//! unfinished jobs, as many as it counts.

use std::collections::VecDeque;

use super::Router;
use crate::jobs::JobState;

impl Router {
    /// Check the internal bookkeeping; used by the tests and the proptest.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        self.pool.check_seen_index()?;
        self.check_unique()?;
        self.check_batches()?;
        let mut queued = 0usize;
        let mut inflight = 0usize;
        let mut delayed = 0usize;
        for (id, job) in self.store.jobs.iter() {
            let id = &id;
            match job.state {
                JobState::Queued if self.store.flow.has(job.route()) => {
                    // Checked by `check_flow` (waiting or presumed).
                    queued += 1;
                }
                JobState::Queued => {
                    queued += 1;
                    let n = self
                        .store
                        .queues
                        .get(job.route())
                        .map_or(0, |q| q.iter().filter(|j| **j == *id).count());
                    if n != 1 {
                        return Err(format!("queued job {id} is in its queue {n} times"));
                    }
                }
                JobState::InFlight { worker, seq } => {
                    inflight += 1;
                    let w = self
                        .pool
                        .get(worker)
                        .ok_or_else(|| format!("job {id} in flight on missing worker"))?;
                    if w.inflight.get(&seq).map(|i| i.job) != Some(*id) {
                        return Err(format!("job {id} not in its worker's in-flight table"));
                    }
                    if self.store.queues.values().any(|q| q.contains(id)) {
                        return Err(format!("job {id} both queued and in flight"));
                    }
                }
                JobState::Delayed { due } => {
                    delayed += 1;
                    if !self.store.delayed.contains(&(due, *id)) {
                        return Err(format!("delayed job {id} not in the delay set"));
                    }
                }
            }
        }
        let presumed = self.check_flow()?;
        let in_queues: usize = self.store.queues.values().map(VecDeque::len).sum::<usize>()
            + self.store.flow.waiting
            + presumed;
        if in_queues != queued || self.store.buffered() + presumed != queued {
            return Err(format!(
                "queue entries {in_queues}, counter {}, queued jobs {queued}",
                self.store.buffered()
            ));
        }
        if self.store.delayed.len() != delayed {
            return Err("delay set size mismatch".into());
        }
        let mut tables = 0usize;
        for w in self.pool.workers.values() {
            tables += w.inflight.len();
            if u64::from(w.slots) > w.readies {
                return Err(format!("worker {} has more slots than READYs", w.id));
            }
            for jid in w.inflight.values().map(|i| &i.job) {
                match self.store.jobs.get(jid).map(|j| j.state) {
                    Some(JobState::InFlight { worker, .. }) if worker == w.id => {}
                    other => return Err(format!("in-flight entry {jid} has state {other:?}")),
                }
            }
            for (weight, q) in &w.queues {
                let listed = self
                    .pool
                    .available
                    .get(q)
                    .is_some_and(|s| s.contains(&(std::cmp::Reverse(*weight), w.lru, w.id)));
                if listed != (w.slots > 0 && !w.draining) {
                    return Err(format!("worker {} availability index wrong on {q}", w.id));
                }
                if w.slots > 0
                    && !w.draining
                    && !self.is_draining()
                    && !self.paused.contains(q)
                    && self.front_dispatchable(q)
                {
                    return Err(format!("worker {} idle while {q} has jobs", w.id));
                }
            }
        }
        let listed: usize = self.pool.available.values().map(|s| s.len()).sum();
        let expected: usize = self
            .pool
            .workers
            .values()
            .filter(|w| w.slots > 0 && !w.draining)
            .map(|w| w.queues.len())
            .sum();
        if listed != expected {
            return Err(format!(
                "availability index has {listed} entries, expected {expected}"
            ));
        }
        if tables != inflight || self.pool.inflight_total != inflight {
            return Err(format!(
                "in-flight tables {tables}, counter {}, jobs {inflight}",
                self.pool.inflight_total
            ));
        }
        for (id, job) in self.store.jobs.iter() {
            if self.store.find(&job.msgid()) != Some(id) {
                return Err(format!(
                    "job {id} ({}) missing from the msgid index",
                    job.msgid()
                ));
            }
        }
        if self.store.indexed() != self.store.jobs.len() {
            return Err(format!(
                "msgid index has {} entries for {} jobs",
                self.store.indexed(),
                self.store.jobs.len()
            ));
        }
        for w in self.pool.workers.values() {
            for (m, seq) in &w.by_msgid {
                if !w.inflight.contains_key(seq) {
                    return Err(format!("worker {} msgid entry {m} -> {seq} is stale", w.id));
                }
            }
        }
        let finished = self.stats.completed + self.stats.dead_lettered + self.stats.cancelled;
        if self.stats.results_forwarded > finished {
            return Err(format!(
                "{} RESULTs forwarded for {finished} finished jobs",
                self.stats.results_forwarded
            ));
        }
        self.results
            .check(self.cfg.results_keep, self.cfg.results_keep_bytes)?;
        let committing: std::collections::BTreeSet<(&str, u64)> = self
            .results
            .in_state(super::results::Delivery::Committing)
            .collect();
        let queued: Vec<(&str, u64)> = self
            .journal
            .held_results()
            .filter(|k| committing.contains(k))
            .collect();
        if queued.len() != committing.len() {
            return Err(format!(
                "{} results wait for a commit, {} held sends for them",
                committing.len(),
                queued.len()
            ));
        }
        let held = self.results.len() as u64;
        let s = &self.stats;
        if held + s.results_delivered + s.results_dropped + self.results.replaced
            != s.results_forwarded + s.restored_results
        {
            return Err(format!(
                "results: {held} held + {} delivered + {} dropped + {} replaced != {} produced \
                 + {} restored",
                s.results_delivered,
                s.results_dropped,
                self.results.replaced,
                s.results_forwarded,
                s.restored_results
            ));
        }
        if self.stats.accepted != self.store.jobs.len() as u64 + finished {
            return Err(format!(
                "conservation: accepted {} != unfinished {} + completed {} + dead {}",
                self.stats.accepted,
                self.store.jobs.len(),
                self.stats.completed,
                self.stats.dead_lettered
            ));
        }
        Ok(())
    }
}
