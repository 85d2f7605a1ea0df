//! The overview's numbers over the last minutes: one thread asks the
//! router for `status` every [`EVERY`] and keeps the last [`KEEP`] samples
//! of its counters and totals. The page draws rates from the differences
//! of consecutive samples, so a page opened now shows the last ten
//! minutes at once, and any number of open pages cost the router one
//! STATUS per period.
//!
//! The sample also keeps the latest STATUS without its long lists (the
//! dead letters' `recent`, the per-worker maps), which the overview shows
//! as it is: journal state, dead-letter count, version.
//!
//! The same thread asks for `queues` too, for each queue's numbers over
//! time ([`crate::queue_history`]): two bounded requests per period, for
//! any number of open pages.

use std::collections::VecDeque;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::admin::AdminPool;
use crate::queue_history::QueueHistory;
use emqp_proto::admin::AdminOp;

/// Time between samples.
pub const EVERY: Duration = Duration::from_secs(2);
/// Samples kept (ten minutes).
pub const KEEP: usize = 300;

/// The counters of one sample, in the order of [`FIELDS`].
type Row = [u64; 8];

/// Names of a sample's columns after its unix-ms time.
pub const FIELDS: [&str; 8] = [
    "accepted",
    "completed",
    "failed",
    "dead_lettered",
    "rejected",
    "queued",
    "inflight",
    "retry_waiting",
];

#[derive(Default)]
struct Inner {
    samples: VecDeque<(u64, Row)>,
    latest: Value,
    error: Option<String>,
    queues: QueueHistory,
}

/// The samples, shared with the HTTP handlers.
#[derive(Clone, Default)]
pub struct History(Arc<Mutex<Inner>>);

fn sum(v: &Value) -> u64 {
    v.as_object()
        .map(|m| m.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0)
}

impl History {
    /// Record one STATUS answer taken at `unix_ms`.
    pub fn record(&self, unix_ms: u64, status: &Value) {
        let c = &status["counters"];
        let n = |k: &str| c[k].as_u64().unwrap_or(0);
        let rejected = [
            "rejected_queue_full",
            "rejected_malformed",
            "rejected_shutting_down",
            "rejected_duplicate_msgid",
            "rejected_journal_unavailable",
        ]
        .iter()
        .map(|k| n(k))
        .sum();
        let row: Row = [
            n("accepted"),
            n("completed"),
            n("failed"),
            n("dead_lettered"),
            rejected,
            sum(&status["waiting_messages_by_queue"]),
            sum(&status["dispatched_messages_by_queue"]),
            status["retry_waiting_messages"].as_u64().unwrap_or(0),
        ];
        let mut latest = status.clone();
        if let Some(m) = latest.as_object_mut() {
            for long in [
                "processed_messages_by_worker",
                "inflight_messages_by_worker",
                "latency_messages_by_queue",
                "max_latency_messages_by_queue",
            ] {
                m.remove(long);
            }
            if let Some(d) = m.get_mut("dead_letter").and_then(Value::as_object_mut) {
                d.remove("recent");
            }
        }
        let Ok(mut g) = self.0.lock() else { return };
        if g.samples.len() >= KEEP {
            g.samples.pop_front();
        }
        g.samples.push_back((unix_ms, row));
        g.latest = latest;
        g.error = None;
    }

    /// Record one `queues` answer taken at `unix_ms`.
    pub fn record_queues(&self, unix_ms: u64, answer: &Value) {
        if let Ok(mut g) = self.0.lock() {
            g.queues.record(unix_ms, answer, KEEP);
        }
    }

    /// `{"ok", "every_ms", "fields", "queues": {name: [[unix_ms,
    /// ...fields]...]}}`: the newest `last` samples (all when `None`) of
    /// queue `only`, or of every queue ([`crate::queue_history`]).
    pub fn queues_json(&self, only: Option<&str>, last: Option<usize>) -> Value {
        let Ok(g) = self.0.lock() else {
            return json!({});
        };
        let mut v = g.queues.to_json(only, last);
        v["ok"] = true.into();
        v["every_ms"] = (EVERY.as_millis() as u64).into();
        if let Some(e) = &g.error {
            v["error"] = e.clone().into();
        }
        v
    }

    fn failed(&self, error: String) {
        if let Ok(mut g) = self.0.lock() {
            g.error = Some(error);
        }
    }

    /// `{"every_ms", "fields", "samples": [[unix_ms, ...FIELDS]...],
    /// "status": latest STATUS (trimmed), "error"?}`.
    pub fn to_json(&self) -> Value {
        let Ok(g) = self.0.lock() else {
            return json!({});
        };
        let samples: Vec<Value> = g
            .samples
            .iter()
            .map(|(t, row)| {
                let mut a = Vec::with_capacity(row.len() + 1);
                a.push(Value::from(*t));
                a.extend(row.iter().map(|v| Value::from(*v)));
                Value::Array(a)
            })
            .collect();
        let mut v = json!({
            "ok": true,
            "every_ms": EVERY.as_millis() as u64,
            "fields": FIELDS,
            "samples": samples,
            "status": g.latest,
        });
        if let Some(e) = &g.error {
            v["error"] = e.clone().into();
        }
        v
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The sampling thread; dropping it stops and joins the thread.
pub struct Sampler {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Sample `admin` into `history` every [`EVERY`], starting now.
    pub fn start(admin: Arc<AdminPool>, history: History) -> std::io::Result<Sampler> {
        let (stop, stopped) = channel::<()>();
        let thread = std::thread::Builder::new()
            .name("http-sampler".into())
            .spawn(move || loop {
                match admin.request(&AdminOp::Status) {
                    Ok(v) if v["ok"] == true => history.record(unix_ms(), &v),
                    Ok(v) => history.failed(v["error"]["message"].to_string()),
                    Err(e) => history.failed(e.to_string()),
                }
                match admin.request(&AdminOp::Queues) {
                    Ok(v) if v["ok"] == true => history.record_queues(unix_ms(), &v),
                    Ok(v) => history.failed(v["error"]["message"].to_string()),
                    Err(e) => history.failed(e.to_string()),
                }
                match stopped.recv_timeout(EVERY) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => break,
                }
            })?;
        Ok(Sampler {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_keep_the_totals_and_drop_long_lists() {
        let h = History::default();
        let status = json!({
            "counters": {"accepted": 10, "completed": 7, "failed": 1, "dead_lettered": 2,
                         "rejected_queue_full": 3, "rejected_malformed": 1},
            "waiting_messages_by_queue": {"a": 2, "b": 5},
            "dispatched_messages_by_queue": {"a": 1},
            "retry_waiting_messages": 4,
            "processed_messages_by_worker": {"w": 7},
            "dead_letter": {"count": 2, "recent": [1, 2]},
        });
        for i in 0..(KEEP + 3) {
            h.record(i as u64, &status);
        }
        let v = h.to_json();
        let samples = v["samples"].as_array().unwrap();
        assert_eq!(samples.len(), KEEP);
        assert_eq!(samples[0][0], 3);
        assert_eq!(samples[0], json!([3, 10, 7, 1, 2, 4, 7, 1, 4]));
        assert!(v["status"]["dead_letter"].get("recent").is_none());
        assert!(v["status"].get("processed_messages_by_worker").is_none());
        assert_eq!(v["status"]["dead_letter"]["count"], 2);
    }
}
