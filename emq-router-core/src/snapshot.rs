//! The read model: [`Router::snapshot`] copies what an operator sees —
//! queues, workers, schedulers, schedules, counters, dead letters, the
//! journal's state — into plain data. The admin STATUS / ROUTER_SHOW_*
//! answers (`admin.rs`) and the Prometheus text (`metrics.rs`) are pure
//! functions of it.
//!
//! Cost: O(queues + workers + jobs in flight + jobs waiting for a retry +
//! dead letters kept), never O(buffered jobs): per-route ages are kept as
//! running totals by the job store, and a queue's oldest buffered job is
//! the front of its buffer.

use std::time::Duration;

use std::collections::BTreeMap;

use crate::jobs::JobState;
use crate::metrics::QueueMetrics;
use crate::router::{DeadLetter, JournalState, Router, Stats};
use crate::util::ident;

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

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
}

/// One connected worker (job manager connection).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerView {
    pub identity: String,
    /// Queues as announced: `(weight, queue)`.
    pub queues: Vec<(u32, String)>,
    /// Core time of its last message, seconds.
    pub last_seen_secs: f64,
    pub free_slots: u32,
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
    pub results_bytes: u64,
    pub results_unreachable_clients: u64,
    pub draining: bool,
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
                free_slots: w.slots,
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
            results_bytes: self.results.bytes() as u64,
            results_unreachable_clients: self.results.unreachable_clients() as u64,
            draining: self.is_draining(),
        }
    }
}
