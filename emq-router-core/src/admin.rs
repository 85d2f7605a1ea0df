//! Admin socket answers (`REPLY [json]`), pure functions of the read
//! model ([`Snapshot`]).
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
//!   most recent entries), `shutting_down`, `journal` (`state` `off`, `ok`
//!   or `failing` with the last `error` and the requests `refused` since,
//!   and `held_sends`), `results` (held until delivered: `held`, `bytes`,
//!   `unreachable_clients`, and the counters `delivered`, `resent`,
//!   `dropped`).
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

use crate::data::JournalState;
use crate::snapshot::Snapshot;
use crate::util::ident;

fn obj<V: Into<Value>>(m: BTreeMap<String, V>) -> Value {
    Value::Object(
        m.into_iter()
            .map(|(k, v)| (k, v.into()))
            .collect::<Map<_, _>>(),
    )
}

/// STATUS.
pub fn status_json(snap: &Snapshot) -> String {
    let mut inflight: BTreeMap<String, u64> = BTreeMap::new();
    let mut dispatched: BTreeMap<String, u64> = BTreeMap::new();
    let mut latency: BTreeMap<String, u64> = BTreeMap::new();
    let mut lat_max: BTreeMap<String, u64> = BTreeMap::new();
    let mut waiting: BTreeMap<String, u64> = BTreeMap::new();
    let mut processed_q: BTreeMap<String, u64> = BTreeMap::new();
    for q in &snap.queues {
        if q.unfinished > 0 {
            inflight.insert(q.name.clone(), q.unfinished);
            latency.insert(q.name.clone(), q.mean_age_ms);
            lat_max.insert(q.name.clone(), q.max_age_ms);
        }
        if q.inflight > 0 {
            dispatched.insert(q.name.clone(), q.inflight);
        }
        if q.depth > 0 {
            waiting.insert(q.name.clone(), q.depth);
        }
        if q.metrics.finished > 0 {
            processed_q.insert(q.name.clone(), q.metrics.finished);
        }
    }
    let processed_w: BTreeMap<String, u64> = snap
        .stats
        .processed_by_worker
        .iter()
        .map(|(k, v)| (ident(k).into_owned(), *v))
        .collect();
    let inflight_w: BTreeMap<String, u64> = snap
        .workers
        .iter()
        .map(|w| (w.identity.clone(), w.inflight))
        .collect();
    let retry_waiting: u64 = snap.queues.iter().map(|q| q.retry_waiting).sum();
    let delayed: u64 = snap.queues.iter().map(|q| q.delayed).sum();
    let s = &snap.stats;
    let recent: Vec<Value> = snap
        .dead_letters
        .iter()
        .map(|d| {
            json!({
                "msgid": d.job.msgid,
                "queue": d.job.route,
                "client": ident(&d.job.client),
                "attempts": d.job.attempts,
                "reason": d.reason,
                "error": d.error.as_deref().map(|e| String::from_utf8_lossy(e).into_owned()),
                "age_ms": snap.unix_ms.saturating_sub(d.at_unix_ms),
                "at_unix_ms": d.at_unix_ms,
            })
        })
        .collect();
    let journal = match &snap.journal {
        JournalState::Failing {
            since: _,
            error,
            refused,
        } => {
            json!({"state": "failing", "error": error, "refused": refused, "held_sends": snap.held_sends})
        }
        other => json!({"state": other.name(), "held_sends": snap.held_sends}),
    };
    let v = json!({
        "inflight_messages_by_queue": obj(inflight),
        "latency_messages_by_queue": obj(latency),
        "max_latency_messages_by_queue": obj(lat_max),
        "waiting_messages_by_queue": obj(waiting),
        "processed_messages_by_queue": obj(processed_q),
        "processed_messages_by_worker": obj(processed_w),
        "dispatched_messages_by_queue": obj(dispatched),
        "inflight_messages_by_worker": obj(inflight_w),
        "retry_waiting_messages": retry_waiting,
        "delayed_messages": delayed,
        "shutting_down": snap.draining,
        "journal": journal,
        "results": {
            "held": snap.results_held,
            "bytes": snap.results_bytes,
            "unreachable_clients": snap.results_unreachable_clients,
            "delivered": s.results_delivered,
            "resent": s.results_resent,
            "dropped": s.results_dropped,
        },
        "counters": {
            "accepted": s.accepted,
            "restored": s.restored,
            "dispatched": s.dispatched,
            "completed": s.completed,
            "failed": s.failed,
            "retried": s.retried,
            "redelivered": s.redelivered,
            "adopted": s.adopted,
            "dead_lettered": s.dead_lettered,
            "results_forwarded": s.results_forwarded,
            "rejected_queue_full": s.rejected_queue_full,
            "rejected_malformed": s.rejected_malformed,
            "rejected_shutting_down": s.rejected_shutting_down,
            "rejected_duplicate_msgid": s.rejected_duplicate,
            "rejected_journal_unavailable": s.rejected_journal,
            "rejected_too_large": s.rejected_too_large,
            "malformed_dropped": s.malformed_dropped,
        },
        "unique": {
            "held": snap.unique_keys,
            "duplicates": s.unique_duplicates,
            "rejected": s.unique_rejected,
            "replaced": s.unique_replaced,
        },
        "workflows": {
            "held": snap.workflows.held,
            "accepted": snap.workflows.accepted,
            "succeeded": snap.workflows.succeeded,
            "failed": snap.workflows.failed,
        },
        "batches": {
            "held": snap.batches.held,
            "opened": snap.batches.opened,
            "finished": snap.batches.finished,
        },
        "dead_letter": {
            "count": s.dead_lettered + snap.dead_letters_restored,
            "from_journal": snap.dead_letters_restored,
            "recent": recent,
        },
    });
    v.to_string()
}

/// ROUTER_SHOW_WORKERS.
pub fn workers_json(snap: &Snapshot) -> String {
    let mut workers: BTreeMap<String, Value> = BTreeMap::new();
    for w in &snap.workers {
        workers.insert(
            w.identity.clone(),
            json!({
                "queues": w.queues.iter().map(|(wt, q)| json!([wt, q])).collect::<Vec<_>>(),
                "hb": w.last_seen_secs,
                "available_slots": w.credit,
                "inflight": w.inflight,
                "features": w.features,
            }),
        );
    }
    let mut queues: BTreeMap<String, Value> = BTreeMap::new();
    for q in &snap.queues {
        if !q.announced {
            continue;
        }
        let list: Vec<Value> = q.serving.iter().map(|(w, id)| json!([w, id])).collect();
        queues.insert(q.name.clone(), Value::Array(list));
    }
    json!({
        "connected_workers": obj(workers),
        "connected_queues": obj(queues),
    })
    .to_string()
}

/// ROUTER_SHOW_SCHEDULERS.
pub fn schedulers_json(snap: &Snapshot) -> String {
    let mut m: BTreeMap<String, Value> = BTreeMap::new();
    for (id, hb) in &snap.schedulers {
        m.insert(id.clone(), json!({ "hb": hb }));
    }
    let schedules = serde_json::to_value(&snap.schedules).unwrap_or(Value::Null);
    json!({ "connected_schedulers": obj(m), "schedules": schedules }).to_string()
}
