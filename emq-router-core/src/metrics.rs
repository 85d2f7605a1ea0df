//! Prometheus metrics: counters and the job latency histogram live in the
//! core (a few integer adds per finished job, fixed bucket arrays, no
//! allocation after a queue's first job); [`render`] turns a snapshot into
//! the text exposition format. The binary calls it at most every ~500 ms
//! and serves the text over HTTP. [`render`] is a pure function of the
//! read model ([`crate::snapshot::Snapshot`]).
//!
//! Families (label `queue` is the route queue, `default` for unserved ones):
//! `emq_queue_depth` (buffered), `emq_queue_inflight` (on workers),
//! `emq_queue_retry_waiting` (waiting for a retry delay),
//! `emq_queue_flow_limited` (waiting jobs a flow-control limit holds),
//! `emq_queue_flow_throttled_total` (free workers left idle by a limit),
//! `emq_jobs_processed_total` (completed ok), `emq_jobs_failed_total`
//! (completed failed, no retries asked), `emq_jobs_retried_total`,
//! `emq_jobs_redelivered_total` (lost to a dying worker and queued again),
//! `emq_jobs_dead_lettered_total`, `emq_requests_rejected_total` (queue-full,
//! shutting-down), `emq_jobs_started_total` (deliveries to a worker),
//! `emq_job_latency_seconds` (histogram, acceptance → completion, ok or
//! failed, 100 µs … 60 s), `emq_job_run_seconds` (histogram, each
//! delivery's run: dispatch → its REPLY, the same buckets); global `emq_connected_workers`,
//! `emq_worker_credit`, `emq_connected_schedulers`, `emq_schedules`,
//! `emq_jobs_accepted_total`, `emq_scheduled_runs_total`, `emq_journal_ok`
//! (0 while journal writes fail), `emq_journal_held_sends`,
//! `emq_results_held`, `emq_results_held_bytes`,
//! `emq_results_unreachable_clients`, `emq_results_dropped_total`,
//! `emq_requests_rejected_journal_total`.

use std::collections::BTreeMap;

use crate::data::{JournalState, QueueMetrics, LATENCY_BOUNDS_MICROS};
use crate::prometheus::PromText;
use crate::snapshot::{QueueView, Snapshot};

/// The Prometheus text of a snapshot.
pub fn render(snap: &Snapshot) -> String {
    let names: Vec<&str> = snap.queues.iter().map(|q| q.name.as_str()).collect();
    let by_name: BTreeMap<&str, &QueueView> =
        snap.queues.iter().map(|q| (q.name.as_str(), q)).collect();
    let zero = QueueView::default();
    let qv = |q: &str| -> &QueueView { by_name.get(q).copied().unwrap_or(&zero) };
    let qm = |q: &str| -> &QueueMetrics { &qv(q).metrics };
    let mut p = PromText::new();
    type Gauge = fn(&QueueView) -> u64;
    let gauges: [(&str, &str, Gauge); 5] = [
        ("emq_queue_depth", "Jobs buffered in the queue.", |q| {
            q.depth
        }),
        ("emq_queue_inflight", "Jobs of the queue on workers.", |q| {
            q.inflight
        }),
        (
            "emq_queue_delayed",
            "Delayed jobs (delay:SECS) of the queue waiting for their time.",
            |q| q.delayed,
        ),
        (
            "emq_queue_retry_waiting",
            "Jobs of the queue waiting for a retry delay.",
            |q| q.retry_waiting,
        ),
        (
            "emq_queue_flow_limited",
            "Waiting jobs of the queue a flow-control limit holds now.",
            |q| q.flow_limited,
        ),
    ];
    for (name, help, get) in gauges {
        p.family(name, "gauge", help);
        for q in &names {
            p.sample(name, &[("queue", q)], get(qv(q)) as f64);
        }
    }
    type Get = fn(&QueueMetrics) -> u64;
    let counters: [(&str, &str, Get); 7] = [
        (
            "emq_jobs_started_total",
            "Deliveries to a worker (retries and redeliveries too).",
            |m| m.dispatched,
        ),
        ("emq_jobs_processed_total", "Jobs completed ok.", |m| {
            m.processed
        }),
        (
            "emq_jobs_failed_total",
            "Jobs completed failed (no retries left to use).",
            |m| m.failed,
        ),
        (
            "emq_jobs_retried_total",
            "Failed jobs queued for a retry.",
            |m| m.retried,
        ),
        (
            "emq_jobs_redelivered_total",
            "Deliveries lost to a dying worker, queued again.",
            |m| m.redelivered,
        ),
        (
            "emq_jobs_dead_lettered_total",
            "Jobs given up for good.",
            |m| m.dead_lettered,
        ),
        (
            "emq_requests_rejected_total",
            "REQUESTs rejected (queue-full, shutting-down).",
            |m| m.rejected,
        ),
    ];
    for (name, help, get) in counters {
        p.family(name, "counter", help);
        for q in &names {
            p.sample(name, &[("queue", q)], get(qm(q)) as f64);
        }
    }
    p.family(
        "emq_queue_flow_throttled_total",
        "counter",
        "Times a free worker was left idle because a flow-control limit held the queue's jobs.",
    );
    for q in &names {
        p.sample(
            "emq_queue_flow_throttled_total",
            &[("queue", q)],
            qv(q).flow_throttled as f64,
        );
    }
    p.family(
        "emq_job_latency_seconds",
        "histogram",
        "Seconds from acceptance to completion.",
    );
    let bounds: Vec<f64> = LATENCY_BOUNDS_MICROS
        .iter()
        .map(|b| *b as f64 / 1e6)
        .collect();
    for q in &names {
        let h = &qm(q).latency;
        p.histogram(
            "emq_job_latency_seconds",
            &[("queue", q)],
            &bounds,
            &h.cumulative(),
            h.count,
            h.sum_micros as f64 / 1e6,
        );
    }
    p.family(
        "emq_job_run_seconds",
        "histogram",
        "Seconds from a delivery's dispatch to its end (a REPLY), failed tries too.",
    );
    for q in &names {
        let h = &qm(q).run_time;
        p.histogram(
            "emq_job_run_seconds",
            &[("queue", q)],
            &bounds,
            &h.cumulative(),
            h.count,
            h.sum_micros as f64 / 1e6,
        );
    }
    let credit: u64 = snap.workers.iter().map(|w| u64::from(w.credit)).sum();
    let journal_ok = match snap.journal {
        JournalState::Failing { .. } => 0.0,
        _ => 1.0,
    };
    let gauges: [(&str, &str, &str, f64); 13] = [
        (
            "emq_connected_workers",
            "gauge",
            "Registered workers.",
            snap.workers.len() as f64,
        ),
        (
            "emq_worker_credit",
            "gauge",
            "Jobs the router may hand to workers now: READYs not used yet (free slots plus job managers' credit windows).",
            credit as f64,
        ),
        (
            "emq_connected_schedulers",
            "gauge",
            "Connected 0.3.13 scheduler peers.",
            snap.schedulers.len() as f64,
        ),
        (
            "emq_schedules",
            "gauge",
            "Built-in schedules.",
            snap.schedules.len() as f64,
        ),
        (
            "emq_jobs_accepted_total",
            "counter",
            "Jobs accepted (REQUESTs, restored and scheduled runs).",
            snap.stats.accepted as f64,
        ),
        (
            "emq_scheduled_runs_total",
            "counter",
            "Jobs enqueued by built-in schedules.",
            snap.stats.scheduled_runs as f64,
        ),
        (
            "emq_journal_ok",
            "gauge",
            "1 while the journal writes (or there is none), 0 while it fails.",
            journal_ok,
        ),
        (
            "emq_journal_held_sends",
            "gauge",
            "Acknowledgements and results waiting for a journal commit.",
            snap.held_sends as f64,
        ),
        (
            "emq_requests_rejected_journal_total",
            "counter",
            "REQUESTs and SCHEDULEs refused journal-unavailable.",
            snap.stats.rejected_journal as f64,
        ),
        (
            "emq_results_held",
            "gauge",
            "Results of reply-requested jobs held until delivered.",
            snap.results_held as f64,
        ),
        (
            "emq_results_held_bytes",
            "gauge",
            "Bytes of the held results (payloads and msgids).",
            snap.results_bytes as f64,
        ),
        (
            "emq_results_unreachable_clients",
            "gauge",
            "Clients with held results that could not be reached.",
            snap.results_unreachable_clients as f64,
        ),
        (
            "emq_results_dropped_total",
            "counter",
            "Held results dropped undelivered at the bounds (--results-keep*).",
            snap.stats.results_dropped as f64,
        ),
    ];
    for (name, kind, help, v) in gauges {
        p.family(name, kind, help);
        p.sample(name, &[], v);
    }
    p.finish()
}
