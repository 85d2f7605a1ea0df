//! [`Router::snapshot`]: the read model ([`crate::snapshot`]) copied out
//! of the state machine at core time `now`.
//!
//! Cost: O(queues + workers + jobs in flight + jobs waiting for a retry +
//! dead letters kept), never O(buffered jobs): per-route ages are kept as
//! running totals by the job store, and a queue's oldest buffered job is
//! the front of its buffer.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Router;
use crate::jobs::JobState;
use crate::snapshot::{QueueView, Snapshot, WorkerView};
use crate::util::ident;

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Router {
    /// The read model at core time `now`.
    pub fn snapshot(&self, now: Duration) -> Snapshot {
        let mut queues: BTreeMap<String, QueueView> = BTreeMap::new();
        fn view<'a>(queues: &'a mut BTreeMap<String, QueueView>, q: &str) -> &'a mut QueueView {
            queues.entry(q.to_string()).or_insert_with(|| QueueView {
                name: q.to_string(),
                ..QueueView::default()
            })
        }
        for (q, m) in &self.stats.queues {
            view(&mut queues, q).metrics = m.clone();
        }
        for (q, buf) in &self.store.queues {
            let v = view(&mut queues, q);
            v.depth = buf.len() as u64;
        }
        for (q, f) in &self.store.flow.queues {
            let v = view(&mut queues, q);
            v.depth = f.waiting as u64;
            v.flow_limited = f.limited(now) as u64;
            v.flow_throttled = f.throttled;
        }
        for (q, set) in &self.pool.serving {
            let serving: Vec<(u32, String)> = set
                .iter()
                .filter_map(|(weight, id)| {
                    self.pool
                        .get(*id)
                        .map(|w| (weight.0, ident(&w.identity).into_owned()))
                })
                .collect();
            let v = view(&mut queues, q);
            v.serving = serving;
            v.announced = true;
        }
        for (route, n, mean_at) in self.store.age_totals() {
            let v = view(&mut queues, route);
            v.unfinished = n;
            v.mean_age_ms = ms(now.saturating_sub(mean_at));
        }
        // Oldest job: a buffer's front, or one in flight or delayed.
        let mut oldest: BTreeMap<&str, Duration> = BTreeMap::new();
        let note = |route: &str, at: Duration| (route.to_string(), at);
        let mut ages: Vec<(String, Duration)> = Vec::new();
        for (q, buf) in &self.store.queues {
            if let Some(j) = buf.front().and_then(|id| self.store.jobs.get(id)) {
                ages.push(note(q, j.accepted_at()));
            }
        }
        for (q, f) in &self.store.flow.queues {
            if let Some(j) = f
                .listed_heads()
                .filter_map(|(id, _)| self.store.jobs.get(&id))
                .min_by_key(|j| j.accepted_at())
            {
                ages.push(note(q, j.accepted_at()));
            }
        }
        let mut inflight: BTreeMap<String, u64> = BTreeMap::new();
        for w in self.pool.workers.values() {
            for jid in w.inflight.values().map(|i| &i.job) {
                if let Some(j) = self.store.jobs.get(jid) {
                    *inflight.entry(j.route().to_string()).or_default() += 1;
                    ages.push(note(j.route(), j.accepted_at()));
                }
            }
        }
        // Waiting for a time: a retry (failed before) or a delayed job.
        let mut retrying: BTreeMap<String, u64> = BTreeMap::new();
        let mut delayed: BTreeMap<String, u64> = BTreeMap::new();
        for (_, jid) in &self.store.delayed {
            if let Some(j) = self.store.jobs.get(jid) {
                if matches!(j.state, JobState::Delayed { .. }) {
                    let m = if j.failures() > 0 {
                        &mut retrying
                    } else {
                        &mut delayed
                    };
                    *m.entry(j.route().to_string()).or_default() += 1;
                    ages.push(note(j.route(), j.accepted_at()));
                }
            }
        }
        for (route, at) in &ages {
            let e = oldest.entry(route.as_str()).or_insert(*at);
            *e = (*e).min(*at);
        }
        let oldest: Vec<(String, Duration)> = oldest
            .into_iter()
            .map(|(r, at)| (r.to_string(), at))
            .collect();
        for (q, n) in inflight {
            view(&mut queues, &q).inflight = n;
        }
        for (q, n) in retrying {
            view(&mut queues, &q).retry_waiting = n;
        }
        for (q, n) in delayed {
            view(&mut queues, &q).delayed = n;
        }
        for (q, at) in oldest {
            view(&mut queues, &q).max_age_ms = ms(now.saturating_sub(at));
        }
        let mut workers: Vec<WorkerView> = self
            .pool
            .workers
            .values()
            .map(|w| WorkerView {
                identity: ident(&w.identity).into_owned(),
                queues: w.announced.clone(),
                last_seen_secs: w.last_seen.as_secs_f64(),
                credit: w.slots,
                inflight: w.inflight.len() as u64,
                features: w.features.clone(),
                processed: self
                    .stats
                    .processed_by_worker
                    .get(&w.identity)
                    .copied()
                    .unwrap_or(0),
            })
            .collect();
        workers.sort_by(|a, b| a.identity.cmp(&b.identity));
        let mut stats = self.stats.clone();
        stats.queues = Default::default();
        Snapshot {
            unix_ms: self.unix_ms(now),
            queues: queues.into_values().collect(),
            workers,
            schedulers: self
                .schedulers
                .iter()
                .map(|s| (ident(&s.identity).into_owned(), s.last_seen.as_secs_f64()))
                .collect(),
            schedules: self.book.list(),
            stats,
            dead_letters: self.dead.iter().rev().cloned().collect(),
            dead_letters_restored: self.restored_dead,
            journal: self.journal.state().clone(),
            held_sends: self.journal.held_count() as u64,
            results_held: self.results.len() as u64,
            unique_keys: self.unique.len() as u64,
            workflows: crate::snapshot::WorkflowCounts {
                held: self.workflows.len() as u64,
                accepted: self.workflows.accepted,
                succeeded: self.workflows.succeeded,
                failed: self.workflows.failed,
            },
            batches: crate::snapshot::BatchCounts {
                held: self.batches.live.len() as u64,
                opened: self.batches.opened,
                finished: self.batches.finished_count,
            },
            results_bytes: self.results.bytes() as u64,
            results_unreachable_clients: self.results.unreachable_clients() as u64,
            draining: self.is_draining(),
        }
    }
}
