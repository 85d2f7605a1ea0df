//! Admin socket answers (`REPLY [json]`).
//!
//! The 0.3.13 keys are all present, with emq's meaning:
//! - STATUS: `inflight_messages_by_queue` (accepted and not finished:
//!   buffered, waiting for a retry or on a worker — 0.3.13 counts the same
//!   set), `latency_messages_by_queue` / `max_latency_messages_by_queue`
//!   (average / largest ms since acceptance of those), `waiting_messages_by_queue`
//!   (buffered), `processed_messages_by_queue` / `processed_messages_by_worker`
//!   (finished jobs; 0.3.13 counted only direct dispatches). Plus emq's:
//!   `dispatched_messages_by_queue`, `inflight_messages_by_worker`,
//!   `retry_waiting_messages`, `counters`, `dead_letter` (`count` — this
//!   run's plus those loaded from the journal (`from_journal`) — and the
//!   most recent entries), `shutting_down`.
//! - ROUTER_SHOW_WORKERS: `connected_workers{id: {queues, hb,
//!   available_slots, inflight, features}}` and `connected_queues{queue:
//!   [[weight, id], ...]}` (a queue stays listed, possibly empty, after its
//!   last worker leaves, as in 0.3.13).
//! - ROUTER_SHOW_SCHEDULERS: `connected_schedulers{id: {hb}}` (0.3.13
//!   scheduler peers) and emq's `schedules`: the built-in schedules, a list
//!   of `emq_schedule::ScheduleInfo` objects (id, queue, headers, message,
//!   interval_secs / cron, nohaste, run_limit, runs_left, next_run_ms,
//!   last_run_ms, run_count, created_ms, updated_ms; times in unix ms).
//!
//! `hb` is the core time of the peer's last message in seconds (0.3.13 uses
//! `time.monotonic()`, also an arbitrary origin).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::queues::JobState;
use crate::router::Router;
use crate::util::{ident, secs_f64};

fn obj<V: Into<Value>>(m: BTreeMap<String, V>) -> Value {
    Value::Object(
        m.into_iter()
            .map(|(k, v)| (k, v.into()))
            .collect::<Map<_, _>>(),
    )
}

impl Router {
    pub(crate) fn status_json(&self, now: u64) -> String {
        let mut inflight: BTreeMap<String, u64> = BTreeMap::new();
        let mut dispatched: BTreeMap<String, u64> = BTreeMap::new();
        let mut lat_sum: BTreeMap<String, u64> = BTreeMap::new();
        let mut lat_max: BTreeMap<String, u64> = BTreeMap::new();
        for job in self.store.jobs.values() {
            let q = job.route();
            let age_ms = now.saturating_sub(job.accepted_at) / 1000;
            *inflight.entry(q.to_string()).or_default() += 1;
            *lat_sum.entry(q.to_string()).or_default() += age_ms;
            let m = lat_max.entry(q.to_string()).or_default();
            *m = (*m).max(age_ms);
            if matches!(job.state, JobState::InFlight { .. }) {
                *dispatched.entry(q.to_string()).or_default() += 1;
            }
        }
        let latency: BTreeMap<String, u64> = lat_sum
            .iter()
            .map(|(q, s)| (q.clone(), s / inflight.get(q).copied().unwrap_or(1).max(1)))
            .collect();
        let waiting: BTreeMap<String, u64> = self
            .store
            .queues
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(q, v)| (q.clone(), v.len() as u64))
            .collect();
        let processed_q: BTreeMap<String, u64> = self
            .stats
            .queues
            .iter()
            .filter(|(_, m)| m.finished > 0)
            .map(|(k, m)| (k.clone(), m.finished))
            .collect();
        let processed_w: BTreeMap<String, u64> = self
            .stats
            .processed_by_worker
            .iter()
            .map(|(k, v)| (ident(k).into_owned(), *v))
            .collect();
        let inflight_w: BTreeMap<String, u64> = self
            .pool
            .workers
            .values()
            .map(|w| (ident(&w.identity).into_owned(), w.inflight.len() as u64))
            .collect();
        let s = &self.stats;
        let recent: Vec<Value> = self
            .dead
            .iter()
            .rev()
            .map(|d| {
                json!({
                    "msgid": d.msgid,
                    "queue": d.queue,
                    "client": ident(&d.client),
                    "attempts": d.attempts,
                    "reason": d.reason,
                    "error": d.error.as_deref().map(|e| String::from_utf8_lossy(e).into_owned()),
                    "age_ms": (self.cfg.epoch_unix_micros.saturating_add(now) / 1000).saturating_sub(d.at_unix_ms),
                    "at_unix_ms": d.at_unix_ms,
                })
            })
            .collect();
        let v = json!({
            "inflight_messages_by_queue": obj(inflight),
            "latency_messages_by_queue": obj(latency),
            "max_latency_messages_by_queue": obj(lat_max),
            "waiting_messages_by_queue": obj(waiting),
            "processed_messages_by_queue": obj(processed_q),
            "processed_messages_by_worker": obj(processed_w),
            "dispatched_messages_by_queue": obj(dispatched),
            "inflight_messages_by_worker": obj(inflight_w),
            "retry_waiting_messages": self.store.delayed.len(),
            "shutting_down": self.is_draining(),
            "counters": {
                "accepted": s.accepted,
                "restored": s.restored,
                "dispatched": s.dispatched,
                "completed": s.completed,
                "failed": s.failed,
                "retried": s.retried,
                "redelivered": s.redelivered,
                "dead_lettered": s.dead_lettered,
                "results_forwarded": s.results_forwarded,
                "rejected_queue_full": s.rejected_queue_full,
                "rejected_malformed": s.rejected_malformed,
                "rejected_shutting_down": s.rejected_shutting_down,
                "malformed_dropped": s.malformed_dropped,
            },
            "dead_letter": {
                "count": s.dead_lettered + self.restored_dead,
                "from_journal": self.restored_dead,
                "recent": recent,
            },
        });
        v.to_string()
    }

    pub(crate) fn workers_json(&self, _now: u64) -> String {
        let mut workers: BTreeMap<String, Value> = BTreeMap::new();
        for w in self.pool.workers.values() {
            workers.insert(
                ident(&w.identity).into_owned(),
                json!({
                    "queues": w.announced.iter().map(|(wt, q)| json!([wt, q])).collect::<Vec<_>>(),
                    "hb": secs_f64(w.last_seen),
                    "available_slots": w.slots,
                    "inflight": w.inflight.len(),
                    "features": w.features,
                }),
            );
        }
        let mut queues: BTreeMap<String, Value> = BTreeMap::new();
        for (q, set) in &self.pool.serving {
            let list: Vec<Value> = set
                .iter()
                .filter_map(|(weight, id)| {
                    self.pool
                        .get(*id)
                        .map(|w| json!([weight.0, ident(&w.identity)]))
                })
                .collect();
            queues.insert(q.clone(), Value::Array(list));
        }
        json!({
            "connected_workers": obj(workers),
            "connected_queues": obj(queues),
        })
        .to_string()
    }

    pub(crate) fn schedulers_json(&self, _now: u64) -> String {
        let mut m: BTreeMap<String, Value> = BTreeMap::new();
        for s in &self.schedulers {
            m.insert(
                ident(&s.identity).into_owned(),
                json!({ "hb": secs_f64(s.last_seen) }),
            );
        }
        let schedules = serde_json::to_value(self.book.list()).unwrap_or(Value::Null);
        json!({ "connected_schedulers": obj(m), "schedules": schedules }).to_string()
    }
}
